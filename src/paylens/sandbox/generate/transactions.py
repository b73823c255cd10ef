"""Generation of the sandbox's transactions: columnar, vectorised, deterministic from the seed.
The money of each row follows `money`; its columns and lifecycle are in `schema`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..currencies import (
    CANCEL_WINDOW_S,
    CHANNEL_INDEX,
    COUNTERPARTY_FEE_USD,
    CRYPTO_CODES,
    CURRENCY_CODES,
    CURRENCY_GROUP,
    CURRENCY_INDEX,
    DECIMALS,
    DEFAULT_DEPOSIT_RAILS,
    DEPOSIT_RAILS,
    FUNDABLE,
    INSTANT,
    N_RAILS,
    OPTION_CURRENCY,
    OPTION_POPULARITY,
    QUOTE_TTL_S,
    RATE_BY_GROUP,
    RECEIVE_OPTIONS,
    REGIONS,
    SERVICE_FEE_USD,
    SPREAD_BY_GROUP,
    TIMELINE_S,
    UMA_SENDING,
    pow10,
    to_minor,
)
from ..midrates import mid_rates
from .entities import NO_ROW, Entities, new_uuids, pick_weighted
from .merchants import MEMOS, MERCHANT_MEDIAN, MERCHANT_POPULARITY, MERCHANT_TIPS
from .money import outgoing_money, platform_fee
from .schema import (
    ACH_PULL,
    APPROVAL_WINDOW_US,
    AWAITING_APPROVAL,
    CARD,
    CARD_EXCEPTION,
    CARD_PARTIAL_FINAL,
    CARD_TIP,
    COUNTERPARTY_INFO,
    DEST_ACCOUNT,
    DEST_UMA,
    IN_FAILURE_CODE,
    IN_FAILURES,
    INCOMING,
    NEVER,
    NO_CODE,
    OUT_FAILURE_CODE,
    OUT_FAILURES,
    OUTGOING,
    PENDING_REASONS,
    SCA,
    SRC_ACCOUNT,
    SRC_FUNDING,
    SRC_UMA,
    STATUS_CODE,
    US_PER_SECOND,
    empty_columns,
    status_at,
)

#: Granular payout reasons dominate; the coarse COUNTERPARTY_POST_TX_FAILED is a rare fallback.
_OUT_FAILURE_WEIGHTS = {
    "PAYOUT_RETURNED": 18, "ACCOUNT_INVALID": 14, "ACCOUNT_CANNOT_RECEIVE": 10, "LIMIT_EXCEEDED": 8,
    "COMPLIANCE_REJECTED": 10, "QUOTE_EXECUTION_FAILED": 14, "QUOTE_RATE_UNAVAILABLE": 5,
    "QUOTE_EXPIRED": 3, "COUNTERPARTY_POST_TX_FAILED": 6,
}  # fmt: skip


#: Failures that happen before any money moves (no PROCESSING phase, no refund).
_EARLY_FAILURES = np.array(
    [
        OUT_FAILURE_CODE["QUOTE_RATE_UNAVAILABLE"],
        OUT_FAILURE_CODE["QUOTE_EXPIRED"],
        OUT_FAILURE_CODE["FUNDING_AMOUNT_MISMATCH"],
        OUT_FAILURE_CODE["SCA_NOT_COMPLETED"],
    ]
)


# planted scenarios: pending bank transfers inside/past their cancellation window, and
# agent-initiated payouts waiting for the platform's approval
ACH_OPEN, ACH_CLOSED, WIRE_OPEN, WIRE_CLOSED, PULL_OPEN, PULL_CLOSED, AWAITING = range(1, 8)
#: When before the generation's end each scenario's transactions are created (minutes).
_SCENARIO_AGE_MIN = {
    ACH_OPEN: (2, 40), ACH_CLOSED: (9 * 60, 20 * 60), WIRE_OPEN: (1, 4), WIRE_CLOSED: (50, 120),
    PULL_OPEN: (2, 40), PULL_CLOSED: (9 * 60, 20 * 60), AWAITING: (10, 2 * 24 * 60),
}  # fmt: skip


@dataclass
class Batch:
    """A batch of new rows being generated (all created in one window, in (createdAt, id) order)."""

    ents: Entities
    rng: np.random.Generator
    now: int
    cols: dict[str, np.ndarray]
    scenario: np.ndarray
    fee_currency: int
    fee_bps: int
    fee_fixed: int
    active_cards: np.ndarray
    seed: int  # the world's: exchange rates move by it (see `midrates`)


def scenario_count(transactions: int) -> int:
    """How many transactions of each planted scenario a world of `transactions` gets."""
    return 0 if transactions < 70 else min(100, transactions // 1000 + 1)


def plant_scenarios(
    rng: np.random.Generator, per_scenario: int, now: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(created, kind, scenario) of the planted rows, `per_scenario` of each scenario."""
    scen = np.repeat(np.arange(1, 8), per_scenario)
    lo = np.array([_SCENARIO_AGE_MIN[int(s)][0] for s in scen], dtype=np.float64)
    hi = np.array([_SCENARIO_AGE_MIN[int(s)][1] for s in scen], dtype=np.float64)
    created = now - (rng.uniform(lo, hi) * 60 * US_PER_SECOND).astype(np.int64) // 1000 * 1000
    kind = np.where((scen == PULL_OPEN) | (scen == PULL_CLOSED), INCOMING, OUTGOING)
    return created, kind, scen


def generate(
    ents: Entities,
    rng: np.random.Generator,
    created: np.ndarray,
    kind: np.ndarray,
    scenario: np.ndarray,
    now: int,
    fee: tuple[int, int, int],
    active_cards: np.ndarray,
    seed: int,
) -> dict[str, np.ndarray]:
    """Columns of new rows created at `created` (any order) with kinds `kind`, as of `now`
    (trading at the rates of the world of `seed`)."""
    n = len(created)
    kind = np.where((kind == CARD) & (len(active_cards) == 0), OUTGOING, kind)
    hi, lo = new_uuids(rng, n)
    order = np.lexsort((lo, hi, kind != CARD, created))  # the order of (createdAt, id) strings
    cols = empty_columns(n)
    cols["hi"], cols["lo"], cols["kind"], cols["created"] = (
        hi[order],
        lo[order],
        kind[order].astype(np.uint8),
        created[order],
    )
    batch = Batch(ents, rng, now, cols, scenario[order], fee[0], fee[1], fee[2], active_cards, seed)
    kinds = cols["kind"]
    _outgoing(batch, np.flatnonzero(kinds == OUTGOING))
    _incoming(batch, np.flatnonzero(kinds == INCOMING))
    _card(batch, np.flatnonzero(kinds == CARD))
    cols["memo"] = rng.integers(0, len(MEMOS), n).astype(np.uint8)
    for name in ("t1", "t2", "t3", "expected", "cancel_by", "receipt", "touched"):
        times = cols[name]
        cols[name] = np.where(times == NEVER, NEVER, times // 1000 * 1000)  # whole milliseconds
    cols["status"] = status_at(cols, now)
    return cols


def _us(seconds: np.ndarray | float) -> np.ndarray:
    return (np.asarray(seconds) * US_PER_SECOND).astype(np.int64)


def _home_internal(b: Batch, cust: np.ndarray) -> np.ndarray:
    """An internal account of each customer: the home-currency one three times in four."""
    any_account = b.ents.internal_of.pick(b.rng, cust)
    return np.where(b.rng.random(len(cust)) < 0.75, b.ents.home_internal[cust], any_account)


def _pick_channels(rng: np.random.Generator, options: np.ndarray, rails_of: Any) -> np.ndarray:
    """A channel per row from the weighted rails of each row's option (`rails_of(option)`)."""
    out = np.zeros(len(options), dtype=np.int64)
    for opt in np.unique(options).tolist():
        rows = np.flatnonzero(options == opt)
        rails = rails_of(opt)
        choice = pick_weighted(rng, np.array([w for _, w in rails]), len(rows))
        out[rows] = np.array([CHANNEL_INDEX[r] for r, _ in rails])[choice]
    return out


def _begin(b: Batch, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(scenario, created, customer) of `rows`: customers drawn by their activity, those of
    planted rows from the customers their scenario needs (a US bank account, or an agent)."""
    e, rng = b.ents, b.rng
    scen = b.scenario[rows]
    cust = pick_weighted(rng, e.customers.weight, len(rows))
    active = e.customers.weight > 0
    own = e.own_external
    usd_bank = (
        (e.usd_internal >= 0)
        & (own >= 0)
        & (e.accounts.currency[np.maximum(own, 0)] == CURRENCY_INDEX["USD"])
    )
    for need, pool in (
        ((scen > 0) & (scen != AWAITING), usd_bank),
        (scen == AWAITING, e.agent_of >= 0),
    ):
        candidates = np.flatnonzero(pool & active)
        if need.any() and len(candidates):
            cust[need] = candidates[rng.integers(0, len(candidates), int(need.sum()))]
    return scen, b.cols["created"][rows], cust


def settle_durations(rng: np.random.Generator, channel: np.ndarray) -> np.ndarray:
    """Execution-to-settlement durations (µs): a share of the expected timeline, late tail."""
    m = len(channel)
    timeline = TIMELINE_S[channel].astype(np.float64)
    instant = INSTANT[channel]
    factor = np.where(instant, rng.lognormal(0.0, 0.5, m), rng.uniform(0.5, 1.0, m))
    late = rng.random(m) < np.where(instant, 0.02, 0.08)
    factor = np.where(
        late, np.where(instant, rng.uniform(5, 100, m), rng.uniform(1.05, 3.0, m)), factor
    )
    return _us(np.maximum(timeline * factor, 1.0))


def _money_amount(
    rng: np.random.Generator, median_usd: np.ndarray, sigma: np.ndarray, cur: np.ndarray
) -> np.ndarray:
    usd = rng.lognormal(np.log(median_usd), sigma).clip(1.0, 250_000.0)
    amount = to_minor(usd, cur)
    unit = pow10(DECIMALS[cur]).astype(np.int64)
    nice = (
        (rng.random(len(cur)) < 0.4)
        & (unit > 1)
        & ~np.isin(cur, [CURRENCY_INDEX[c] for c in CRYPTO_CODES])
    )
    rounded = np.where(nice, np.maximum(np.rint(amount / unit), 1).astype(np.int64) * unit, amount)
    return np.asarray(np.maximum(rounded, 1))


def _outgoing(b: Batch, rows: np.ndarray) -> None:
    if not len(rows):
        return
    e, rng, c, m = b.ents, b.rng, b.cols, len(rows)
    acc, customers = e.accounts, e.customers
    scen, created, cust = _begin(b, rows)
    bank_scen = (scen >= ACH_OPEN) & (scen <= WIRE_CLOSED)

    src = _home_internal(b, cust)
    funding = (rng.random(m) < 0.12) & ~bank_scen
    home_code = customers.home[cust]
    fundable = np.isin(home_code, [CURRENCY_INDEX[x] for x in FUNDABLE])
    send_cur = np.where(
        funding, np.where(fundable, home_code, CURRENCY_INDEX["USD"]), acc.currency[src]
    )
    src = np.where(bank_scen, e.usd_internal[cust], np.where(funding, NO_ROW, src))
    send_cur = np.where(bank_scen, CURRENCY_INDEX["USD"], send_cur)

    own, bene = e.own_external[cust], e.beneficiaries_of.pick(rng, cust)
    dst = np.where((rng.random(m) < 0.3) | (bene < 0) | bank_scen, own, bene)
    uma = (rng.random(m) < 0.08) & ~bank_scen & (scen != AWAITING)
    uma_option = pick_weighted(
        rng, OPTION_POPULARITY * (CURRENCY_INDEX["BTC"] != OPTION_CURRENCY), m
    )
    option = np.where(uma, uma_option, acc.kind[dst])
    recv_cur = np.where(uma, OPTION_CURRENCY[uma_option], acc.currency[dst])
    channel = _pick_channels(rng, option, lambda o: RECEIVE_OPTIONS[o].rails)
    channel = np.where(uma, CHANNEL_INDEX["UMA"], channel)
    channel = np.where((scen == ACH_OPEN) | (scen == ACH_CLOSED), CHANNEL_INDEX["ACH"], channel)
    channel = np.where((scen == WIRE_OPEN) | (scen == WIRE_CLOSED), CHANNEL_INDEX["WIRE"], channel)
    has_rail = channel < N_RAILS
    rail_mode = np.where(has_rail, np.where(rng.random(m) < 0.3, 2, 1), 0)

    biz = customers.kind[cust] == 1
    sent = _money_amount(rng, np.where(biz, 2_500.0, 180.0), np.where(biz, 1.2, 1.1), send_cur)
    same = send_cur == recv_cur
    group = CURRENCY_GROUP[recv_cur]
    spread = rng.uniform(SPREAD_BY_GROUP[group, 0], SPREAD_BY_GROUP[group, 1])
    fx = np.where(same, 1.0, mid_rates(b.seed, created, send_cur, recv_cur) * (1.0 + spread))
    var_rate = np.where(same, 0.0, RATE_BY_GROUP[group, biz.astype(np.int64)])
    fixed_fee = to_minor(SERVICE_FEE_USD[channel], send_cur)
    cpty_fee = np.where(
        same | (rng.random(m) < 0.3), 0, to_minor(COUNTERPARTY_FEE_USD[channel], recv_cur)
    )
    cross = (send_cur == b.fee_currency) & ~same
    for _ in range(3):  # make sure the fees leave something to receive
        plat = platform_fee(sent, cross, b.fee_bps, b.fee_fixed)
        var_fee, fees, received = outgoing_money(
            sent, send_cur, recv_cur, fx, var_rate, fixed_fee, plat, cpty_fee
        )
        sent = np.where(sent < 3 * fees + 10, sent + 3 * fees + 10, sent)
    plat = platform_fee(sent, cross, b.fee_bps, b.fee_fixed)
    var_fee, fees, received = outgoing_money(
        sent, send_cur, recv_cur, fx, var_rate, fixed_fee, plat, cpty_fee
    )

    # lifecycle
    eu = np.array([r[3] for r in REGIONS])[customers.region[cust]]
    sca = eu & (rng.random(m) < 0.3) & (scen == 0)
    confirm = created + _us(rng.lognormal(np.log(20.0), 0.8, m))
    confirm = np.where(funding, created + _us(rng.uniform(600, 8 * 3600, m)), confirm)
    confirm = np.where(sca, created + _us(rng.uniform(30, 600, m)), confirm)
    pending_reason = np.where(
        (rng.random(m) < 0.04) & (scen == 0), rng.integers(0, len(PENDING_REASONS), m), NO_CODE
    )
    confirm = np.where(
        pending_reason != NO_CODE, confirm + _us(rng.uniform(3600, 3 * 86400, m)), confirm
    )
    agent = e.agent_of[cust]
    by_agent = ((agent >= 0) & (rng.random(m) < 0.35) & (scen == 0)) | (scen == AWAITING)
    decision = created + _us(rng.uniform(120, 8 * 3600, m))
    confirm = np.where(by_agent, np.maximum(confirm, decision), confirm)
    settle = confirm + settle_durations(rng, channel)

    u = rng.random(m)
    final = np.where(
        u < 0.90,
        STATUS_CODE["COMPLETED"],
        np.where(u < 0.96, STATUS_CODE["FAILED"], STATUS_CODE["EXPIRED"]),
    )
    final = np.where(scen > 0, STATUS_CODE["COMPLETED"], final)
    weights = np.array([_OUT_FAILURE_WEIGHTS.get(r, 0) for r in OUT_FAILURES], dtype=np.float64)
    failure = pick_weighted(rng, weights, m)
    failure = np.where(
        (channel == CHANNEL_INDEX["LIGHTNING"]) & (rng.random(m) < 0.5),
        OUT_FAILURE_CODE["LIGHTNING_PAYMENT_FAILED"],
        failure,
    )
    failure = np.where(
        funding & (rng.random(m) < 0.3), OUT_FAILURE_CODE["FUNDING_AMOUNT_MISMATCH"], failure
    )
    sca_failed = sca & (rng.random(m) < 0.05)
    final = np.where(sca_failed, STATUS_CODE["FAILED"], final)
    failure = np.where(sca_failed, OUT_FAILURE_CODE["SCA_NOT_COMPLETED"], failure)
    rejected = by_agent & (rng.random(m) < 0.05) & (scen == 0)
    final = np.where(rejected, STATUS_CODE["FAILED"], final)
    failed = final == STATUS_CODE["FAILED"]
    early = failed & (np.isin(failure, _EARLY_FAILURES) | rejected)
    expired = final == STATUS_CODE["EXPIRED"]
    t1 = np.where(expired, created + _us(QUOTE_TTL_S[channel]), confirm)
    t1 = np.where(sca_failed, created + _us(900.0), np.where(rejected, decision, t1))
    fail_at = confirm + ((settle - confirm) * rng.uniform(0.2, 1.0, m)).astype(np.int64)
    t2 = np.where(expired | early, t1, np.where(failed, fail_at, settle))
    failure = np.where(failed & ~rejected, failure, NO_CODE)

    # waiting for the platform: decisions not taken by `now` stay open until the approval window ends
    awaiting = by_agent & ~rejected & ((decision > b.now) | (scen == AWAITING))
    t1 = np.where(awaiting, created + APPROVAL_WINDOW_US, t1)
    t2 = np.where(awaiting, t1, t2)
    final = np.where(awaiting, STATUS_CODE["EXPIRED"], final)
    failure = np.where(awaiting, NO_CODE, failure)
    pending_reason = np.where(awaiting, NO_CODE, pending_reason)

    # scenarios still pending at `now`
    closed = (scen == ACH_CLOSED) | (scen == WIRE_CLOSED)
    t2 = np.where(closed, np.maximum(t2, b.now + _us(rng.uniform(1800, 86400, m))), t2)

    refund = failed & ~early & (src != NO_ROW) & (rng.random(m) < 0.7)
    c["t3"][rows] = np.where(refund, t2 + _us(rng.uniform(600, 2 * 86400, m)), NEVER)
    c["refund_final"][rows] = np.where(refund, np.where(rng.random(m) < 0.95, 1, 2), NO_CODE)

    window = np.zeros(m, dtype=np.int64)
    for ch, (w_lo, w_hi) in CANCEL_WINDOW_S.items():
        window = np.where(channel == ch, _us(rng.uniform(w_lo, w_hi, m)), window)
    c["cancel_by"][rows] = np.where(window > 0, created + window, 0)

    timeline = np.where(funding, -1, TIMELINE_S[channel])
    expected = np.where(funding | INSTANT[channel], NEVER, created + _us(TIMELINE_S[channel]))
    flags = np.where(awaiting, AWAITING_APPROVAL, 0) | np.where(sca & ~awaiting, SCA, 0)
    info = (
        np.isin(
            channel,
            [
                CHANNEL_INDEX["SWIFT"],
                CHANNEL_INDEX["BANK_TRANSFER"],
                CHANNEL_INDEX["MOBILE_MONEY"],
                CHANNEL_INDEX["UMA"],
            ],
        )
    ) & (rng.random(m) < 0.4)
    flags |= np.where(info, COUNTERPARTY_INFO, 0)
    _put(c, rows, customer=cust, sender=src, receiver=np.where(uma, NO_ROW, dst), send_cur=send_cur,
         recv_cur=recv_cur, sent=sent, received=received, fees=fees, fixed_fee=fixed_fee,
         var_fee=var_fee, platform_fee=plat, cpty_fee=cpty_fee, var_rate=var_rate, fx=fx,
         channel=channel, rail_mode=rail_mode,
         source_kind=np.where(funding, SRC_FUNDING, SRC_ACCOUNT), dest_kind=np.where(uma, DEST_UMA, DEST_ACCOUNT),
         person=np.where(uma, rng.integers(0, len(e.people), m), acc.person[dst]),
         failure=failure, pending_reason=pending_reason, expected=expected, timeline=timeline,
         agent=np.where(by_agent, agent, NO_ROW), flags=flags, final=final, t1=t1, t2=t2)  # fmt: skip


def _put(cols: dict[str, np.ndarray], rows: np.ndarray, **values: np.ndarray | int) -> None:
    for name, value in values.items():
        cols[name][rows] = value


def _incoming(b: Batch, rows: np.ndarray) -> None:
    if not len(rows):
        return
    e, rng, c, m = b.ents, b.rng, b.cols, len(rows)
    acc = e.accounts
    scen, created, cust = _begin(b, rows)
    pull_scen = scen > 0
    dst = np.where(pull_scen, e.usd_internal[cust], _home_internal(b, cust))
    recv_cur = acc.currency[dst]
    own = e.own_external[cust]
    can_pull = (
        (recv_cur == CURRENCY_INDEX["USD"])
        & (own >= 0)
        & (acc.currency[np.maximum(own, 0)] == CURRENCY_INDEX["USD"])
    )
    crypto = np.isin(recv_cur, [CURRENCY_INDEX[x] for x in CRYPTO_CODES])
    u = rng.random(m)
    pull = ((u < 0.2) & can_pull) | pull_scen
    uma = ~pull & (u < 0.5) & ~crypto
    sending_pool = np.array([CURRENCY_INDEX[x] for x in UMA_SENDING])
    uma_cur = sending_pool[rng.integers(0, len(sending_pool), m)]
    uma_cur = np.where(
        uma_cur == recv_cur,
        np.where(recv_cur == CURRENCY_INDEX["USD"], CURRENCY_INDEX["EUR"], CURRENCY_INDEX["USD"]),
        uma_cur,
    )
    send_cur = np.where(uma, uma_cur, recv_cur)
    channel = _pick_channels(
        rng, recv_cur, lambda cur: DEPOSIT_RAILS.get(CURRENCY_CODES[cur], DEFAULT_DEPOSIT_RAILS)
    )
    channel = np.where(pull, CHANNEL_INDEX["ACH"], np.where(uma, CHANNEL_INDEX["UMA"], channel))

    sent = _money_amount(rng, np.full(m, 400.0), np.full(m, 1.2), send_cur)
    group = CURRENCY_GROUP[recv_cur]
    spread = rng.uniform(SPREAD_BY_GROUP[group, 0], SPREAD_BY_GROUP[group, 1])
    fx = np.where(uma, mid_rates(b.seed, created, send_cur, recv_cur) * (1.0 + spread), 1.0)
    fees = np.where(uma, to_minor(SERVICE_FEE_USD[CHANNEL_INDEX["UMA"]], send_cur), 0)
    zero = np.zeros(m, dtype=np.int64)
    _, _, received = outgoing_money(sent, send_cur, recv_cur, fx, np.zeros(m), fees, zero, zero)

    t1 = created + _us(rng.uniform(1, 60, m))
    duration = np.where(pull, _us(rng.uniform(86400, 2 * 86400, m)), settle_durations(rng, channel))
    pending_reason = np.where((rng.random(m) < 0.03) & ~pull_scen, rng.integers(0, 2, m), NO_CODE)
    duration = np.where(
        pending_reason != NO_CODE, duration + _us(rng.uniform(7200, 2 * 86400, m)), duration
    )
    t2 = t1 + duration
    t2 = np.where(scen == PULL_CLOSED, np.maximum(t2, b.now + _us(rng.uniform(3600, 86400, m))), t2)
    failed = (rng.random(m) < 0.05) & ~pull_scen
    uma_reasons = np.array([IN_FAILURE_CODE[r] for r in IN_FAILURES if r != "COLLECTION_FAILED"])
    reason = np.where(
        uma,
        uma_reasons[rng.integers(0, len(uma_reasons), m)],
        np.where(
            pull | (rng.random(m) < 0.6),
            IN_FAILURE_CODE["COLLECTION_FAILED"],
            IN_FAILURE_CODE["COMPLIANCE_REJECTED"],
        ),
    )
    refund_odds = np.where(
        reason == IN_FAILURE_CODE["COLLECTION_FAILED"],
        0.8,
        np.where(reason == IN_FAILURE_CODE["OFFRAMP_FAILED"], 0.5, 0.0),
    )
    refund = failed & (rng.random(m) < refund_odds)
    c["t3"][rows] = np.where(refund, t2 + _us(rng.uniform(3600, 3 * 86400, m)), NEVER)
    c["refund_final"][rows] = np.where(refund, 1, NO_CODE)
    receipt = t2 + _us(rng.uniform(60, 86400, m))
    receipt = np.where(~failed & (rng.random(m) < 0.2) & (receipt <= b.now), receipt, 0)
    window = _us(rng.uniform(*CANCEL_WINDOW_S[CHANNEL_INDEX["ACH"]], m))
    flags = np.where(pull, ACH_PULL, 0) | np.where(
        uma & (rng.random(m) < 0.6), COUNTERPARTY_INFO, 0
    )
    _put(c, rows, customer=cust, sender=np.where(pull, own, NO_ROW), receiver=dst, send_cur=send_cur,
         recv_cur=recv_cur, sent=sent, received=received, fees=fees, fx=fx, channel=channel,
         source_kind=np.where(pull, SRC_ACCOUNT, np.where(uma, SRC_UMA, SRC_FUNDING)),
         person=np.where(uma, rng.integers(0, len(e.people), m), NO_ROW),
         failure=np.where(failed, reason, NO_CODE), pending_reason=pending_reason,
         final=np.where(failed, STATUS_CODE["FAILED"], STATUS_CODE["COMPLETED"]), t1=t1, t2=t2, flags=flags,
         cancel_by=np.where(pull, created + window, 0), receipt=receipt, touched=receipt)  # fmt: skip


def _card(b: Batch, rows: np.ndarray) -> None:
    if not len(rows):
        return
    e, rng, c, m = b.ents, b.rng, b.cols, len(rows)
    cards = e.cards
    created = c["created"][rows]
    usable = np.flatnonzero(np.isin(cards.state, [2, 3, 4]))
    usable = usable if len(usable) else b.active_cards
    card = usable[pick_weighted(rng, e.customers.weight[cards.holder[usable]] + 1e-9, m)]
    # a frozen or closed card spends nothing after its state changed
    stopped = (cards.state[card] != 2) & (created >= cards.updated[card])
    card = np.where(stopped, b.active_cards[rng.integers(0, len(b.active_cards), m)], card)
    cur = cards.currency[card]
    merchant = pick_weighted(rng, MERCHANT_POPULARITY, m)
    auth = _money_amount(rng, MERCHANT_MEDIAN[merchant], np.full(m, 0.8), cur)

    u = rng.random(m)
    stale, exception, split, partial, refund = (
        u < 0.02,
        (u >= 0.02) & (u < 0.04),
        (u >= 0.04) & (u < 0.08),
        (u >= 0.08) & (u < 0.11),
        (u >= 0.11) & (u < 0.18),
    )
    tip = ~(stale | exception | split | partial) & MERCHANT_TIPS[merchant] & (rng.random(m) < 0.5)
    t1 = created + _us(np.clip(rng.lognormal(np.log(1.2 * 86400), 0.5, m), 7200, 6 * 86400))
    t1 = np.where(stale, NEVER, t1)
    t2 = np.where(split, t1 + _us(rng.uniform(86400, 5 * 86400, m)), NEVER)
    clear1 = np.rint(
        auth
        * np.select(
            [split, partial, tip],
            [rng.uniform(0.3, 0.7, m), rng.uniform(0.6, 0.95, m), rng.uniform(1.1, 1.25, m)],
            1.0,
        )
    ).astype(np.int64)
    clear1 = np.maximum(clear1, 1)
    clear2 = np.where(split, np.maximum(auth - clear1, 0), 0)
    last_clear = np.where(split, t2, t1)
    t3 = np.where(refund, last_clear + _us(rng.uniform(86400, 25 * 86400, m)), NEVER)
    settled = clear1 + clear2
    refund_amount = np.where(
        refund,
        np.where(
            rng.random(m) < 0.7,
            settled,
            np.rint(settled * rng.uniform(0.2, 0.9, m)).astype(np.int64),
        ),
        0,
    )
    flags = (
        np.where(tip, CARD_TIP, 0)
        | np.where(exception, CARD_EXCEPTION, 0)
        | np.where(partial, CARD_PARTIAL_FINAL, 0)
    )
    _put(c, rows, customer=cards.holder[card], sender=cards.account[card], card=card, merchant=merchant,
         send_cur=cur, recv_cur=cur, sent=auth, clear1=clear1, clear2=clear2,
         refund_amount=refund_amount, t1=t1, t2=t2, t3=t3, flags=flags, final=STATUS_CODE["SETTLED"])  # fmt: skip
