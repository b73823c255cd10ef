"""Generation of the sandbox's transactions: columnar, vectorised, deterministic from the seed.

Money of an OUTGOING transaction
================================
Every outgoing transaction (generated or quoted) carries its money through this one formula.
S is the sending currency with dS decimals, R the receiving currency with dR decimals.

    A    = sentAmount.amount            minor units of S: the total debited, fees included
    x    = exchangeRate                 S major units per one R major unit (float64);
                                        x = 1.0 when S == R
    F    = rateDetails.gridApiFixedFee            minor units of S
    v    = rateDetails.gridApiVariableFeeRate     a fraction (0.003 means 0.3 %)
    V    = rateDetails.gridApiVariableFeeAmount   = round_half_up(A * v)
    P    = platformFees                 minor units of S (0 when no platform fee applies)
    C    = rateDetails.counterpartyFixedFee       minor units of R
    C_s  = round_half_up(C * x * 10^(dS - dR))    C in minor units of S

    fees                  = F + V + P + C_s
    receivedAmount.amount = round_half_up((A - fees) * 10^(dR - dS) / x)

round_half_up(y) = floor(y + 0.5), every step in IEEE float64 in exactly the order written
(integers are converted to float64 first; `10^k` is the float64 nearest to 10**k, as
`10.0 ** k` in Python or `power(10, k)` in SQL give), so a warehouse reproduces each field to
the minor unit: `fees - (F + V + P + C_s)` and the recomputed received amount differ by exactly 0.

The platform fee comes from the platform's fee configuration (`GET /config` `feeConfigs`: one
CROSS_CURRENCY_TRANSACTION config for USD): for a cross-currency transaction sent in USD,
`P = (A * variableFeeBps + 5000) // 10000 + fixedFee.amount` in integers (half-up), else 0;
a quote's `platformFeeOverride` replaces the configuration for that quote.

The rate multipliers are derived from a reference BTC price per currency,
`btc(S) = BTC_USD / usd(S)` major units of S per BTC (see `_currencies`):

    m_S                              = 1e11 / (btc(S) * 10^dS)      msats per minor unit of S
    rateDetails.gridApiMultiplier     = (1 - v) * m_S
    rateDetails.counterpartyMultiplier = 10^(dR - dS) / (x * m_S)   minor units of R per msat

so gridApiMultiplier * counterpartyMultiplier = (1 - v) * 10^(dR - dS) / x (up to float64
rounding): what one minor unit of S buys in minor units of R after the variable fee.

`x` is the reference mid rate of the corridor (`_currencies.mid_rate`, served on
`GET /exchange-rates`) times (1 + a spread drawn per transaction, 0.1 % to 1 % by corridor), so
the FX spread is `x / mid - 1`.

Incoming transactions use the same shape without rateDetails: `fees` (minor units of S) are a
fixed service fee for UMA payments and 0 for deposits and pulls, and
`receivedAmount = round_half_up((sentAmount - fees) * 10^(dR - dS) / x)`.

Lifecycles
==========
Each row has a plan fixed at creation: up to three event times `t1 <= t2` (and `t3`) and a
final status. Its status at any clock time follows from the plan (`status_at`):

- OUTGOING: PENDING (PENDING_AUTHORIZATION for customers in a Strong Customer Authentication
  region, until authorized) until t1, PROCESSING until t2, then the final COMPLETED, FAILED or
  EXPIRED (an expired quote goes from PENDING straight to EXPIRED). `settledAt` = t2 when
  COMPLETED. A refund (after some failures) is initiated at t2 and settles at t3.
- INCOMING: CREATED until t1, PENDING until t2, then COMPLETED or FAILED.
- CARD: AUTHORIZED until the first clearing at t1 (never, for stale holds), PARTIALLY_SETTLED
  while a second clearing (t2) is due (or for good, when only part of the hold ever clears),
  SETTLED after it, REFUNDED from a merchant return at t3; EXCEPTION when the funding pull of
  the clearing failed. The authorization's pull counts as pending (`pullSummary.pendingCount`)
  for its first 30 seconds; a clearing above the hold (tips) adds a second, post-hoc pull.

`World.advance` moves the clock: whatever is due changes state exactly as planned, and new
transactions arrive at the generated rate (more on weekdays and in business hours). Settlement
durations are drawn per channel (instant rails seconds, ACH about a day, wires
hours, SWIFT days) with a tail of late ones that settle after `expectedSettlementAt`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..currencies import (
    BTC_USD,
    CANCEL_WINDOW_S,
    CH,
    CODES,
    COUNTERPARTY_FEE_USD,
    CRYPTO,
    CUR,
    DECIMALS,
    DEFAULT_DEPOSIT_RAILS,
    DEPOSIT_RAILS,
    FUNDABLE,
    GROUP,
    INSTANT,
    MID,
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
    USD_PRICE,
    pow10,
    to_minor,
)
from .entities import NO_ROW, US_PER_DAY, Entities, new_uuids, pick_weighted

NEVER = np.iinfo(np.int64).max
NONE8 = 255  # "absent" in small code columns
US = 1_000_000
MINUTE_MS = 60_000

KINDS = ("INCOMING", "OUTGOING", "CARD")
INCOMING, OUTGOING, CARD = 0, 1, 2
STATUSES = (
    "CREATED", "PENDING", "PENDING_AUTHORIZATION", "PROCESSING", "COMPLETED", "REJECTED",
    "FAILED", "REFUNDED", "EXPIRED", "AUTHORIZED", "PARTIALLY_SETTLED", "SETTLED", "EXCEPTION",
)  # fmt: skip
ST = {name: i for i, name in enumerate(STATUSES)}
CARD_STATUSES = frozenset({"AUTHORIZED", "PARTIALLY_SETTLED", "SETTLED", "REFUNDED", "EXCEPTION"})
TERMINAL = np.array(
    [s in ("COMPLETED", "FAILED", "EXPIRED", "REJECTED", "REFUNDED") for s in STATUSES]
)
OUT_FAILURES = (
    "QUOTE_EXPIRED", "QUOTE_RATE_UNAVAILABLE", "QUOTE_EXECUTION_FAILED", "FUNDING_AMOUNT_MISMATCH",
    "SCA_NOT_COMPLETED", "PAYOUT_RETURNED", "LIMIT_EXCEEDED", "ACCOUNT_CANNOT_RECEIVE",
    "ACCOUNT_INVALID", "COMPLIANCE_REJECTED", "LIGHTNING_PAYMENT_FAILED", "COUNTERPARTY_POST_TX_FAILED",
)  # fmt: skip
OF = {name: i for i, name in enumerate(OUT_FAILURES)}
#: Granular payout reasons dominate; the coarse COUNTERPARTY_POST_TX_FAILED is a rare fallback.
_OUT_FAILURE_WEIGHTS = {
    "PAYOUT_RETURNED": 18, "ACCOUNT_INVALID": 14, "ACCOUNT_CANNOT_RECEIVE": 10, "LIMIT_EXCEEDED": 8,
    "COMPLIANCE_REJECTED": 10, "QUOTE_EXECUTION_FAILED": 14, "QUOTE_RATE_UNAVAILABLE": 5,
    "QUOTE_EXPIRED": 3, "COUNTERPARTY_POST_TX_FAILED": 6,
}  # fmt: skip
#: Failures that happen before any money moves (no PROCESSING phase, no refund).
_EARLY_FAILURES = np.array(
    [
        OF["QUOTE_RATE_UNAVAILABLE"],
        OF["QUOTE_EXPIRED"],
        OF["FUNDING_AMOUNT_MISMATCH"],
        OF["SCA_NOT_COMPLETED"],
    ]
)
IN_FAILURES = (
    "LNURLP_FAILED", "PAY_REQUEST_FAILED", "PAYMENT_APPROVAL_WEBHOOK_ERROR", "PAYMENT_APPROVAL_TIMED_OUT",
    "OFFRAMP_FAILED", "MISSING_MANDATORY_PAYEE_DATA", "QUOTE_EXPIRED", "QUOTE_EXECUTION_FAILED",
    "COMPLIANCE_REJECTED", "COLLECTION_FAILED",
)  # fmt: skip
IF = {name: i for i, name in enumerate(IN_FAILURES)}
PENDING_REASONS = (
    "COMPLIANCE_REVIEW",
    "COUNTERPARTY_INFORMATION_REQUIRED",
    "COUNTERPARTY_DECLARATION_REQUIRED",
    "WALLET_VERIFICATION_REQUIRED",
)
REFUND_STATUSES = ("PENDING", "COMPLETED", "FAILED")
REFUND_REASONS = ("TRANSACTION_FAILED", "USER_CANCELLATION", "TIMEOUT")
SRC_ACCOUNT, SRC_UMA, SRC_FUNDING = 0, 1, 2  # sourceType ACCOUNT, UMA_ADDRESS, REALTIME_FUNDING
DEST_ACCOUNT, DEST_UMA = 0, 1
RAIL_MODES = (None, "AUTO", "MANUAL")

# flags
AWAITING_APPROVAL = 1  # agent-initiated, waiting for the platform's approve or reject
SCA = 2  # waits in PENDING_AUTHORIZATION before t1
COUNTERPARTY_INFO = 4
ACH_PULL = 8  # incoming pull from the customer's own bank account over ACH
CARD_TIP = 16  # clearing above the authorization: a second (post-hoc) pull
CARD_EXCEPTION = 32
CARD_PARTIAL_FINAL = 64  # only part of the authorization ever clears

#: How long an agent-initiated transaction waits for the platform's decision before expiring.
APPROVAL_WINDOW_US = 3 * US_PER_DAY

MEMOS = (
    "Invoice {n}", "Payroll batch {n}", "Supplier payment {n}", "Family support", "Rent",
    "Consulting fees", "Order {n}", "Marketplace payout {n}", "Tuition", "Savings transfer",
    "Contractor payout {n}", "Loan repayment", "Gift", "Subscription {n}",
)  # fmt: skip


@dataclass(frozen=True)
class Merchant:
    descriptor: str
    mcc: str
    country: str
    median_usd: float
    tips: bool
    popularity: float


MERCHANTS: tuple[Merchant, ...] = (
    Merchant("HARBOR COFFEE SF", "5814", "US", 8, True, 10),
    Merchant("QUICKEATS DELIVERY", "5812", "US", 32, True, 8),
    Merchant("GREENLEAF MARKET", "5411", "US", 85, False, 9),
    Merchant("RIVERSIDE FUEL 0412", "5541", "US", 55, False, 6),
    Merchant("CLOUDSHELF BOOKS", "5942", "US", 28, False, 3),
    Merchant("STREAMLY SUBSCRIPTION", "4899", "US", 15.5, False, 5),
    Merchant("SKYLINE AIRWAYS", "4511", "US", 420, False, 1.5),
    Merchant("GRAND MERIDIAN HOTEL", "7011", "US", 260, False, 1.5),
    Merchant("CITYRIDE TRIP", "4121", "US", 24, True, 6),
    Merchant("NORTHGATE GROCERS", "5411", "GB", 45, False, 4),
    Merchant("THE DAILY CRUST", "5814", "GB", 9, False, 4),
    Merchant("MARCHE CENTRAL", "5411", "FR", 60, False, 3),
    Merchant("MODA ATELIER", "5651", "ES", 70, False, 2),
    Merchant("APPHUB DIGITAL", "5735", "US", 12, False, 4),
    Merchant("TUNEWAVE MUSIC", "5815", "SE", 11, False, 3),
    Merchant("HOMEWORKS SUPPLY", "5200", "US", 120, False, 2),
    Merchant("NORDHAUS FURNITURE", "5712", "DE", 150, False, 1),
    Merchant("DEVCLOUD HOSTING", "4816", "US", 40, False, 2),
    Merchant("BISTRO LUMIERE", "5812", "FR", 75, True, 3),
    Merchant("PHARMA PLUS", "5912", "US", 22, False, 3),
)
_MERCHANT_POPULARITY = np.array([m.popularity for m in MERCHANTS])
_MERCHANT_MEDIAN = np.array([m.median_usd for m in MERCHANTS])
_MERCHANT_TIPS = np.array([m.tips for m in MERCHANTS])

# planted scenarios: pending bank transfers inside/past their cancellation window, and
# agent-initiated payouts waiting for the platform's approval
ACH_OPEN, ACH_CLOSED, WIRE_OPEN, WIRE_CLOSED, PULL_OPEN, PULL_CLOSED, AWAITING = range(1, 8)
#: When before the generation's end each scenario's transactions are created (minutes).
_SCENARIO_AGE_MIN = {
    ACH_OPEN: (2, 40), ACH_CLOSED: (9 * 60, 20 * 60), WIRE_OPEN: (1, 4), WIRE_CLOSED: (50, 120),
    PULL_OPEN: (2, 40), PULL_CLOSED: (9 * 60, 20 * 60), AWAITING: (10, 2 * 24 * 60),
}  # fmt: skip

#: Columns of the transaction store: name -> (dtype, value of a new row before generation).
COLUMNS: dict[str, tuple[Any, Any]] = {
    "hi": (np.uint64, 0), "lo": (np.uint64, 0), "kind": (np.uint8, 0),
    "created": (np.int64, 0), "status": (np.uint8, 0), "final": (np.uint8, 0),
    "t1": (np.int64, NEVER), "t2": (np.int64, NEVER), "t3": (np.int64, NEVER),
    "touched": (np.int64, 0),  # last change made through the interface (0: none)
    "customer": (np.int32, 0), "sender": (np.int32, NO_ROW), "receiver": (np.int32, NO_ROW),
    "send_cur": (np.uint8, 0), "recv_cur": (np.uint8, 0),
    "sent": (np.int64, 0), "received": (np.int64, 0), "fees": (np.int64, 0),
    "fixed_fee": (np.int64, 0), "var_fee": (np.int64, 0), "platform_fee": (np.int64, 0),
    "cpty_fee": (np.int64, 0), "var_rate": (np.float64, 0.0), "fx": (np.float64, 1.0),
    "channel": (np.uint8, CH["INTERNAL"]), "rail_mode": (np.uint8, 0),
    "source_kind": (np.uint8, SRC_ACCOUNT), "dest_kind": (np.uint8, DEST_ACCOUNT),
    "person": (np.int32, NO_ROW), "card": (np.int32, NO_ROW), "merchant": (np.uint8, 0),
    "failure": (np.uint8, NONE8), "pending_reason": (np.uint8, NONE8),
    "refund_final": (np.uint8, NONE8), "refund_reason": (np.uint8, 0),
    "expected": (np.int64, NEVER), "timeline": (np.int32, -1), "cancel_by": (np.int64, 0),
    "receipt": (np.int64, 0), "agent": (np.int16, NO_ROW), "memo": (np.uint8, 0),
    "flags": (np.uint16, 0),
    "clear1": (np.int64, 0), "clear2": (np.int64, 0), "refund_amount": (np.int64, 0),
}  # fmt: skip


def empty_columns(n: int) -> dict[str, np.ndarray]:
    return {name: np.full(n, fill, dtype=dtype) for name, (dtype, fill) in COLUMNS.items()}


# --- money ----------------------------------------------------------------------------------------


def round_half_up(y: np.ndarray) -> np.ndarray:
    return np.floor(y + 0.5).astype(np.int64)


def outgoing_money(
    sent: np.ndarray,
    send_cur: np.ndarray,
    recv_cur: np.ndarray,
    fx: np.ndarray,
    var_rate: np.ndarray,
    fixed_fee: np.ndarray,
    platform_fee: np.ndarray,
    cpty_fee: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(V, fees, received) of the module's formula, elementwise over arrays."""
    d_s, d_r = DECIMALS[send_cur], DECIMALS[recv_cur]
    var_fee = round_half_up(sent.astype(np.float64) * var_rate)
    cpty_in_sending = round_half_up(cpty_fee.astype(np.float64) * fx * pow10(d_s - d_r))
    fees = fixed_fee + var_fee + platform_fee + cpty_in_sending
    received = round_half_up((sent - fees).astype(np.float64) * pow10(d_r - d_s) / fx)
    return var_fee, fees, received


def platform_fee(sent: np.ndarray, cross_currency: np.ndarray, bps: int, fixed: int) -> np.ndarray:
    """P of the module's formula for transactions whose sending currency has the fee config."""
    return np.where(cross_currency, (sent * bps + 5_000) // 10_000 + fixed, 0)


def multipliers(
    send_cur: np.ndarray, recv_cur: np.ndarray, fx: np.ndarray, var_rate: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(gridApiMultiplier, counterpartyMultiplier) of the module's formula, elementwise."""
    d_s, d_r = DECIMALS[send_cur], DECIMALS[recv_cur]
    msats_per_minor = 1e11 / (BTC_USD / USD_PRICE[send_cur] * pow10(d_s))
    return (1.0 - var_rate) * msats_per_minor, pow10(d_r - d_s) / (fx * msats_per_minor)


# --- lifecycle ------------------------------------------------------------------------------------


def status_at(cols: dict[str, np.ndarray], now: int) -> np.ndarray:
    """Status codes of the rows in `cols` (arrays of equal length) at clock time `now`."""
    kind, t1, t2, t3, flags = cols["kind"], cols["t1"], cols["t2"], cols["t3"], cols["flags"]
    first = np.where(
        kind == INCOMING,
        ST["CREATED"],
        np.where(flags & SCA, ST["PENDING_AUTHORIZATION"], ST["PENDING"]),
    )
    second = np.where(kind == INCOMING, ST["PENDING"], ST["PROCESSING"])
    payments = np.where(t2 <= now, cols["final"], np.where(t1 <= now, second, first))
    cleared = np.where(
        flags & CARD_EXCEPTION,
        ST["EXCEPTION"],
        np.where(
            t3 <= now,
            ST["REFUNDED"],
            np.where(
                ((t2 != NEVER) & (t2 > now)) | (flags & CARD_PARTIAL_FINAL != 0),
                ST["PARTIALLY_SETTLED"],
                ST["SETTLED"],
            ),
        ),
    )
    cards = np.where(t1 > now, ST["AUTHORIZED"], cleared)
    return np.where(kind == CARD, cards, payments).astype(np.uint8)


def next_event(cols: dict[str, np.ndarray], now: int) -> np.ndarray:
    """The first planned event after `now` of each row (NEVER when none is left)."""
    nxt = np.full(len(cols["t1"]), NEVER, dtype=np.int64)
    for name in ("t1", "t2", "t3"):
        t = cols[name]
        nxt = np.where((t > now) & (t < nxt), t, nxt)
    return nxt


# --- arrivals -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Arrivals:
    """When transactions happen: more on weekdays and in (UTC) business hours, and a growth of
    activity over the generated period (0.7x at its start to 1.3x at its end, flat after)."""

    period_start_ms: int
    period_end_ms: int

    def weights(self, bins_ms: np.ndarray) -> np.ndarray:
        minute = (bins_ms // MINUTE_MS) % 1440
        hours = minute / 60.0
        dist = np.minimum(np.abs(hours - 15.0), 24.0 - np.abs(hours - 15.0))
        intraday = 0.25 / 24 + 0.75 * np.exp(-0.5 * (dist / 3.5) ** 2) / (3.5 * np.sqrt(2 * np.pi))
        weekday = (bins_ms // (US_PER_DAY // 1000) + 3) % 7  # Monday = 0
        week = np.select([weekday == 5, weekday == 6], [0.6, 0.5], 1.0)
        span = max(self.period_end_ms - self.period_start_ms, 1)
        growth = 0.7 + 0.6 * np.clip((bins_ms - self.period_start_ms) / span, 0.0, 1.0)
        return intraday * week * growth

    def draw(
        self,
        rng: np.random.Generator,
        first_ms: int,
        last_ms: int,
        n: int | None,
        per_weight: float = 0.0,
    ) -> tuple[np.ndarray, float]:
        """Arrival times (µs, whole ms, sorted) in [first_ms, last_ms]: exactly `n`, or a Poisson
        number with mean `per_weight` times the total weight. Also returns that total weight."""
        if last_ms < first_ms:
            return np.zeros(0, np.int64), 0.0
        edges = np.arange(first_ms - first_ms % MINUTE_MS, last_ms + 1, MINUTE_MS, dtype=np.int64)
        lo = np.maximum(edges, first_ms)
        hi = np.minimum(edges + MINUTE_MS, last_ms + 1)
        w = self.weights(edges) * (hi - lo) / MINUTE_MS
        total = float(w.sum())
        count = n if n is not None else int(rng.poisson(per_weight * total))
        b = pick_weighted(rng, w, count)
        ms = lo[b] + (rng.random(count) * (hi[b] - lo[b])).astype(np.int64)
        return np.sort(ms) * 1000, total


# --- generation -----------------------------------------------------------------------------------


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
    created = now - (rng.uniform(lo, hi) * 60 * US).astype(np.int64) // 1000 * 1000
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
) -> dict[str, np.ndarray]:
    """Columns of new rows created at `created` (any order) with kinds `kind`, as of `now`."""
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
    batch = Batch(ents, rng, now, cols, scenario[order], fee[0], fee[1], fee[2], active_cards)
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
    return (np.asarray(seconds) * US).astype(np.int64)


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
        out[rows] = np.array([CH[r] for r, _ in rails])[choice]
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
        (e.usd_internal >= 0) & (own >= 0) & (e.accounts.currency[np.maximum(own, 0)] == CUR["USD"])
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
    nice = (rng.random(len(cur)) < 0.4) & (unit > 1) & ~np.isin(cur, [CUR[c] for c in CRYPTO])
    return np.maximum(
        np.where(nice, np.maximum(np.rint(amount / unit), 1).astype(np.int64) * unit, amount), 1
    )


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
    fundable = np.isin(home_code, [CUR[x] for x in FUNDABLE])
    send_cur = np.where(funding, np.where(fundable, home_code, CUR["USD"]), acc.currency[src])
    src = np.where(bank_scen, e.usd_internal[cust], np.where(funding, NO_ROW, src))
    send_cur = np.where(bank_scen, CUR["USD"], send_cur)

    own, bene = e.own_external[cust], e.beneficiaries_of.pick(rng, cust)
    dst = np.where((rng.random(m) < 0.3) | (bene < 0) | bank_scen, own, bene)
    uma = (rng.random(m) < 0.08) & ~bank_scen & (scen != AWAITING)
    uma_option = pick_weighted(rng, OPTION_POPULARITY * (CUR["BTC"] != OPTION_CURRENCY), m)
    option = np.where(uma, uma_option, acc.kind[dst])
    recv_cur = np.where(uma, OPTION_CURRENCY[uma_option], acc.currency[dst])
    channel = _pick_channels(rng, option, lambda o: RECEIVE_OPTIONS[o].rails)
    channel = np.where(uma, CH["UMA"], channel)
    channel = np.where((scen == ACH_OPEN) | (scen == ACH_CLOSED), CH["ACH"], channel)
    channel = np.where((scen == WIRE_OPEN) | (scen == WIRE_CLOSED), CH["WIRE"], channel)
    has_rail = channel < N_RAILS
    rail_mode = np.where(has_rail, np.where(rng.random(m) < 0.3, 2, 1), 0)

    biz = customers.kind[cust] == 1
    sent = _money_amount(rng, np.where(biz, 2_500.0, 180.0), np.where(biz, 1.2, 1.1), send_cur)
    same = send_cur == recv_cur
    group = GROUP[recv_cur]
    spread = rng.uniform(SPREAD_BY_GROUP[group, 0], SPREAD_BY_GROUP[group, 1])
    fx = np.where(same, 1.0, MID[send_cur, recv_cur] * (1.0 + spread))
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
        (rng.random(m) < 0.04) & (scen == 0), rng.integers(0, len(PENDING_REASONS), m), NONE8
    )
    confirm = np.where(
        pending_reason != NONE8, confirm + _us(rng.uniform(3600, 3 * 86400, m)), confirm
    )
    agent = e.agent_of[cust]
    by_agent = ((agent >= 0) & (rng.random(m) < 0.35) & (scen == 0)) | (scen == AWAITING)
    decision = created + _us(rng.uniform(120, 8 * 3600, m))
    confirm = np.where(by_agent, np.maximum(confirm, decision), confirm)
    settle = confirm + settle_durations(rng, channel)

    u = rng.random(m)
    final = np.where(u < 0.90, ST["COMPLETED"], np.where(u < 0.96, ST["FAILED"], ST["EXPIRED"]))
    final = np.where(scen > 0, ST["COMPLETED"], final)
    weights = np.array([_OUT_FAILURE_WEIGHTS.get(r, 0) for r in OUT_FAILURES], dtype=np.float64)
    failure = pick_weighted(rng, weights, m)
    failure = np.where(
        (channel == CH["LIGHTNING"]) & (rng.random(m) < 0.5),
        OF["LIGHTNING_PAYMENT_FAILED"],
        failure,
    )
    failure = np.where(funding & (rng.random(m) < 0.3), OF["FUNDING_AMOUNT_MISMATCH"], failure)
    sca_failed = sca & (rng.random(m) < 0.05)
    final = np.where(sca_failed, ST["FAILED"], final)
    failure = np.where(sca_failed, OF["SCA_NOT_COMPLETED"], failure)
    rejected = by_agent & (rng.random(m) < 0.05) & (scen == 0)
    final = np.where(rejected, ST["FAILED"], final)
    failed = final == ST["FAILED"]
    early = failed & (np.isin(failure, _EARLY_FAILURES) | rejected)
    expired = final == ST["EXPIRED"]
    t1 = np.where(expired, created + _us(QUOTE_TTL_S[channel]), confirm)
    t1 = np.where(sca_failed, created + _us(900.0), np.where(rejected, decision, t1))
    fail_at = confirm + ((settle - confirm) * rng.uniform(0.2, 1.0, m)).astype(np.int64)
    t2 = np.where(expired | early, t1, np.where(failed, fail_at, settle))
    failure = np.where(failed & ~rejected, failure, NONE8)

    # waiting for the platform: decisions not taken by `now` stay open until the approval window ends
    awaiting = by_agent & ~rejected & ((decision > b.now) | (scen == AWAITING))
    t1 = np.where(awaiting, created + APPROVAL_WINDOW_US, t1)
    t2 = np.where(awaiting, t1, t2)
    final = np.where(awaiting, ST["EXPIRED"], final)
    failure = np.where(awaiting, NONE8, failure)
    pending_reason = np.where(awaiting, NONE8, pending_reason)

    # scenarios still pending at `now`
    closed = (scen == ACH_CLOSED) | (scen == WIRE_CLOSED)
    t2 = np.where(closed, np.maximum(t2, b.now + _us(rng.uniform(1800, 86400, m))), t2)

    refund = failed & ~early & (src != NO_ROW) & (rng.random(m) < 0.7)
    c["t3"][rows] = np.where(refund, t2 + _us(rng.uniform(600, 2 * 86400, m)), NEVER)
    c["refund_final"][rows] = np.where(refund, np.where(rng.random(m) < 0.95, 1, 2), NONE8)

    window = np.zeros(m, dtype=np.int64)
    for ch, (w_lo, w_hi) in CANCEL_WINDOW_S.items():
        window = np.where(channel == ch, _us(rng.uniform(w_lo, w_hi, m)), window)
    c["cancel_by"][rows] = np.where(window > 0, created + window, 0)

    timeline = np.where(funding, -1, TIMELINE_S[channel])
    expected = np.where(funding | INSTANT[channel], NEVER, created + _us(TIMELINE_S[channel]))
    flags = np.where(awaiting, AWAITING_APPROVAL, 0) | np.where(sca & ~awaiting, SCA, 0)
    info = (np.isin(channel, [CH["SWIFT"], CH["BANK_TRANSFER"], CH["MOBILE_MONEY"], CH["UMA"]])) & (
        rng.random(m) < 0.4
    )
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
        (recv_cur == CUR["USD"]) & (own >= 0) & (acc.currency[np.maximum(own, 0)] == CUR["USD"])
    )
    crypto = np.isin(recv_cur, [CUR[x] for x in CRYPTO])
    u = rng.random(m)
    pull = ((u < 0.2) & can_pull) | pull_scen
    uma = ~pull & (u < 0.5) & ~crypto
    sending_pool = np.array([CUR[x] for x in UMA_SENDING])
    uma_cur = sending_pool[rng.integers(0, len(sending_pool), m)]
    uma_cur = np.where(
        uma_cur == recv_cur, np.where(recv_cur == CUR["USD"], CUR["EUR"], CUR["USD"]), uma_cur
    )
    send_cur = np.where(uma, uma_cur, recv_cur)
    channel = _pick_channels(
        rng, recv_cur, lambda cur: DEPOSIT_RAILS.get(CODES[cur], DEFAULT_DEPOSIT_RAILS)
    )
    channel = np.where(pull, CH["ACH"], np.where(uma, CH["UMA"], channel))

    sent = _money_amount(rng, np.full(m, 400.0), np.full(m, 1.2), send_cur)
    group = GROUP[recv_cur]
    spread = rng.uniform(SPREAD_BY_GROUP[group, 0], SPREAD_BY_GROUP[group, 1])
    fx = np.where(uma, MID[send_cur, recv_cur] * (1.0 + spread), 1.0)
    fees = np.where(uma, to_minor(SERVICE_FEE_USD[CH["UMA"]], send_cur), 0)
    zero = np.zeros(m, dtype=np.int64)
    _, _, received = outgoing_money(sent, send_cur, recv_cur, fx, np.zeros(m), fees, zero, zero)

    t1 = created + _us(rng.uniform(1, 60, m))
    duration = np.where(pull, _us(rng.uniform(86400, 2 * 86400, m)), settle_durations(rng, channel))
    pending_reason = np.where((rng.random(m) < 0.03) & ~pull_scen, rng.integers(0, 2, m), NONE8)
    duration = np.where(
        pending_reason != NONE8, duration + _us(rng.uniform(7200, 2 * 86400, m)), duration
    )
    t2 = t1 + duration
    t2 = np.where(scen == PULL_CLOSED, np.maximum(t2, b.now + _us(rng.uniform(3600, 86400, m))), t2)
    failed = (rng.random(m) < 0.05) & ~pull_scen
    uma_reasons = np.array([IF[r] for r in IN_FAILURES if r != "COLLECTION_FAILED"])
    reason = np.where(
        uma,
        uma_reasons[rng.integers(0, len(uma_reasons), m)],
        np.where(pull | (rng.random(m) < 0.6), IF["COLLECTION_FAILED"], IF["COMPLIANCE_REJECTED"]),
    )
    refund_odds = np.where(
        reason == IF["COLLECTION_FAILED"], 0.8, np.where(reason == IF["OFFRAMP_FAILED"], 0.5, 0.0)
    )
    refund = failed & (rng.random(m) < refund_odds)
    c["t3"][rows] = np.where(refund, t2 + _us(rng.uniform(3600, 3 * 86400, m)), NEVER)
    c["refund_final"][rows] = np.where(refund, 1, NONE8)
    receipt = t2 + _us(rng.uniform(60, 86400, m))
    receipt = np.where(~failed & (rng.random(m) < 0.2) & (receipt <= b.now), receipt, 0)
    window = _us(rng.uniform(*CANCEL_WINDOW_S[CH["ACH"]], m))
    flags = np.where(pull, ACH_PULL, 0) | np.where(
        uma & (rng.random(m) < 0.6), COUNTERPARTY_INFO, 0
    )
    _put(c, rows, customer=cust, sender=np.where(pull, own, NO_ROW), receiver=dst, send_cur=send_cur,
         recv_cur=recv_cur, sent=sent, received=received, fees=fees, fx=fx, channel=channel,
         source_kind=np.where(pull, SRC_ACCOUNT, np.where(uma, SRC_UMA, SRC_FUNDING)),
         person=np.where(uma, rng.integers(0, len(e.people), m), NO_ROW),
         failure=np.where(failed, reason, NONE8), pending_reason=pending_reason,
         final=np.where(failed, ST["FAILED"], ST["COMPLETED"]), t1=t1, t2=t2, flags=flags,
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
    merchant = pick_weighted(rng, _MERCHANT_POPULARITY, m)
    auth = _money_amount(rng, _MERCHANT_MEDIAN[merchant], np.full(m, 0.8), cur)

    u = rng.random(m)
    stale, exception, split, partial, refund = (
        u < 0.02,
        (u >= 0.02) & (u < 0.04),
        (u >= 0.04) & (u < 0.08),
        (u >= 0.08) & (u < 0.11),
        (u >= 0.11) & (u < 0.18),
    )
    tip = ~(stale | exception | split | partial) & _MERCHANT_TIPS[merchant] & (rng.random(m) < 0.5)
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
         refund_amount=refund_amount, t1=t1, t2=t2, t3=t3, flags=flags, final=ST["SETTLED"])  # fmt: skip
