"""Card transactions: holds, clearings, refunds and exceptions."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import pandas as pd

from paylens.models import CardTransactionStatus

from ._common import (
    By,
    Data,
    History,
    Out,
    count_where,
    instant,
    month_of,
    percentiles,
    positive_duration,
    render,
    rows_cte,
    seconds_between,
    source,
    sql_strings,
    sql_timestamp,
    statuses,
)

#: Statuses a card transaction enters with a clearing.
CLEARED = ("PARTIALLY_SETTLED", "SETTLED", "EXCEPTION")
#: Statuses in which part of the authorization is still held.
HOLDING = ("AUTHORIZED", "PARTIALLY_SETTLED")

_REQUIRED = (
    "id",
    "status",
    "authorized_amount_minor",
    "authorized_amount_currency",
    "authorized_amount_decimals",
    "authorized_at",
)
_USES = (
    *_REQUIRED,
    "card_id",
    "customer_id",
    "merchant_descriptor",
    "merchant_mcc",
    "merchant_country",
    *(
        f"{kind}_amount_{part}"
        for kind in ("settled", "refunded")
        for part in ("minor", "currency")
    ),
    "account_id",
    "pull_count",
    "pull_total_minor",
    "pull_pending_count",
    "settlement_count",
    "settlement_total_minor",
    "refund_count",
    "refund_total_minor",
    "last_event_at",
    "updated_at",
)

_DEC = "decimals"
_FUND_DEC = "funding_decimals"
#: Hold ages in whole days (7 days and 12 hours is 7 days old): (column suffix, label, first
#: day, last day), both inclusive.
AGEING = (
    ("0_7", "0–7 days", None, 7),
    ("8_30", "8–30 days", 8, 30),
    ("over_30", "> 30 days", 31, None),
)


def _same_currency(kind: str) -> str:
    """The settled or refunded amount in minor units of the authorization's currency: 0 when
    absent, NULL when it is in another currency (never converted, never added)."""
    return (
        f"CASE WHEN {kind}_amount_minor IS NULL THEN 0"
        f" WHEN {kind}_amount_currency = authorized_amount_currency THEN {kind}_amount_minor END"
    )


_CLEARED = "(coalesce(settlement_count, 0) > 0 OR settled_amount_minor IS NOT NULL)"
_REFUNDED = "(coalesce(refund_count, 0) > 0 OR refunded_amount_minor IS NOT NULL)"
_LAST_CLEARING = (
    f"CASE WHEN {_CLEARED} AND NOT {_REFUNDED} THEN last_event_at WHEN {_CLEARED} THEN _seen.at END"
)
_LAST_CLEARING_FROM = (
    "CASE WHEN _last_clearing IS NULL THEN NULL"
    f" WHEN {_REFUNDED} THEN 'status_history' ELSE 'last_event_at' END"
)
_HOLDING = f"status IN {sql_strings(HOLDING)}"
_HOLD_AGE = f"CASE WHEN {_HOLDING} THEN {seconds_between('authorized_at', '_as_of')} END"
_EXPIRED = f"{_HOLDING} AND {_HOLD_AGE} > _hold_window"
_STALE = f"{_HOLDING} AND {_HOLD_AGE} > _stale_after AND NOT ({_EXPIRED})"
_EXCEPTION_AGE = (
    f"CASE WHEN status = 'EXCEPTION' THEN {seconds_between('authorized_at', '_as_of')} END"
)
_DAY = 86_400
#: The hold window by default: the longest a card network keeps an authorization valid (31
#: days for lodging and car rental; most merchants' holds lapse in 7), so a hold older than
#: it is money the merchant can no longer claim against that authorization.
HOLD_WINDOW = timedelta(days=30)


def _bucket(low: int | None, high: int | None, age: str = _HOLD_AGE) -> str:
    days = f"floor(({age}) / {_DAY})"
    bounds = [f"{days} >= {low}" if low is not None else "TRUE"]
    bounds.append(f"{days} <= {high}" if high is not None else "TRUE")
    return " AND ".join(bounds)


_AGE_BUCKET = (
    "CASE "
    + " ".join(f"WHEN {_bucket(lo, hi)} THEN '{label}'" for _, label, lo, hi in AGEING)
    + " END"
)
_EXCEPTION_BUCKET = (
    "CASE "
    + " ".join(
        f"WHEN {_bucket(lo, hi, _EXCEPTION_AGE)} THEN '{label}'" for _, label, lo, hi in AGEING
    )
    + " END"
)

# the funding source's currency: the summaries (pulls, clearings, refunds) are in it
_SAME_FUNDING = "funding_currency = authorized_amount_currency"


def _floor0(amount: str) -> str:
    """`amount` if positive, else 0; NULL (an amount in another currency) stays NULL, where
    DuckDB's `greatest` would give 0."""
    return f"CASE WHEN ({amount}) IS NULL THEN NULL ELSE greatest({amount}, 0) END"


_SETTLED = _same_currency("settled")
_REFUNDED_SAME = _same_currency("refunded")
_HELD = _floor0("authorized_amount_minor - " + _SETTLED)

_ROW = [
    Out("id", "id"),
    Out("card_id", "card_id"),
    Out("customer_id", "customer_id"),
    Out("status", "status"),
    Out("merchant", "merchant_descriptor"),
    Out("mcc", "merchant_mcc"),
    Out("country", "merchant_country"),
    Out("month", month_of("authorized_at")),
    Out("currency", "authorized_amount_currency"),
    Out("decimals", "authorized_amount_decimals"),
    Out("authorized_minor", "authorized_amount_minor", _DEC),
    Out("settled_minor", _same_currency("settled"), _DEC),
    Out("refunded_minor", _same_currency("refunded"), _DEC),
    Out(
        "open_hold_minor",
        f"CASE WHEN {_HOLDING} AND NOT coalesce({_EXPIRED}, FALSE) THEN {_HELD} ELSE 0 END",
        _DEC,
    ),
    Out(
        "expired_hold_minor", f"CASE WHEN coalesce({_EXPIRED}, FALSE) THEN {_HELD} ELSE 0 END", _DEC
    ),
    Out(
        "currency_mismatch",
        f"({_same_currency('settled')}) IS NULL OR ({_same_currency('refunded')}) IS NULL",
    ),
    Out("authorized_at", "authorized_at"),
    Out("last_clearing_at", "_last_clearing"),
    Out("last_clearing_source", _LAST_CLEARING_FROM),
    Out("settlement_seconds", seconds_between("authorized_at", "_last_clearing")),
    Out("hold_age_seconds", _HOLD_AGE),
    Out("hold_age_bucket", _AGE_BUCKET),
    Out("partially_settled", "status = 'PARTIALLY_SETTLED'"),
    Out("stale_hold", f"coalesce({_STALE}, FALSE)"),
    Out("expired_hold", f"coalesce({_EXPIRED}, FALSE)"),
    Out("over_settled_minor", _floor0(f"{_SETTLED} - authorized_amount_minor"), _DEC),
    Out("exception", "status = 'EXCEPTION'"),
    Out("exception_age_seconds", _EXCEPTION_AGE),
    Out("exception_age_bucket", _EXCEPTION_BUCKET),
    Out(
        "exception_exposure_minor",
        f"CASE WHEN status <> 'EXCEPTION' THEN 0 WHEN {_SAME_FUNDING}"
        f" THEN {_floor0(_SETTLED + ' - coalesce(pull_total_minor, 0)')} END",
        _DEC,
    ),
    Out("funding_currency", "funding_currency"),
    Out("funding_decimals", "funding_decimals"),
    Out("pull_count", "pull_count"),
    Out("pull_total_minor", "pull_total_minor", _FUND_DEC),
    Out("pull_pending_count", "pull_pending_count"),
    Out("settlement_count", "settlement_count"),
    Out("settlement_total_minor", "settlement_total_minor", _FUND_DEC),
    Out("refund_count", "refund_count"),
    Out("refund_total_minor", "refund_total_minor", _FUND_DEC),
    # reconciliation of the summaries with the amounts (only where both are in one currency)
    Out(
        "settlement_summary_mismatch",
        f"CASE WHEN {_SAME_FUNDING} THEN settlement_total_minor <> {_SETTLED} END",
    ),
    Out(
        "refund_summary_mismatch",
        f"CASE WHEN {_SAME_FUNDING} THEN refund_total_minor <> {_REFUNDED_SAME} END",
    ),
    Out(
        "pull_shortfall",
        f"CASE WHEN {_SAME_FUNDING} AND status <> 'EXCEPTION'"
        " AND coalesce(pull_pending_count, 0) = 0"
        f" THEN pull_total_minor < {_SETTLED} END",
    ),
]


def _sum(name: str, condition: str = "TRUE", column: str | None = None) -> Out:
    """The group's total of `column` over the rows meeting `condition` whose amount is known
    (one in another currency is never added: `currency_mismatch_count` says how many): 0 over
    no rows, NULL when there are rows and none is known (not 0: nothing is known of them)."""
    value = column or name
    rows = f"count(*) FILTER (WHERE {condition})"
    known = f"count({value}) FILTER (WHERE {condition})"
    total = f"coalesce(sum({value}) FILTER (WHERE {condition}), 0)"
    return Out(
        name,
        f"CASE WHEN {rows} > 0 AND {known} = 0 THEN NULL ELSE CAST({total} AS BIGINT) END",
        _DEC,
    )


_METRICS = [
    Out("transaction_count", "count(*)"),
    _sum("authorized_minor"),
    _sum("settled_minor"),
    _sum("refunded_minor"),
    # over the rows whose settled and refunded amounts are both known, so that a sale whose
    # refund is in another currency is not counted as kept
    _sum("net_settled_minor", column="settled_minor - refunded_minor"),
    _sum("open_hold_minor"),
    Out("cleared_count", "count(last_clearing_at)"),
    *percentiles("settlement_seconds", "settlement_"),
    count_where("partially_settled_count", "partially_settled"),
    count_where("stale_hold_count", "stale_hold"),
    _sum("stale_hold_minor", "stale_hold", "open_hold_minor"),
    count_where("expired_hold_count", "expired_hold"),
    _sum("expired_hold_minor", "expired_hold", "expired_hold_minor"),
    *(
        item
        for suffix, label, _, _ in AGEING
        for item in (
            count_where(
                f"open_hold_{suffix}_count", f"hold_age_bucket = '{label}' AND NOT expired_hold"
            ),
            _sum(
                f"open_hold_{suffix}_minor",
                f"hold_age_bucket = '{label}' AND NOT expired_hold",
                "open_hold_minor",
            ),
        )
    ),
    count_where("over_settled_count", "over_settled_minor > 0"),
    _sum("over_settled_minor"),
    count_where("exception_count", "exception"),
    *(
        count_where(f"exception_{suffix}_count", f"exception_age_bucket = '{label}'")
        for suffix, label, _, _ in AGEING
    ),
    _sum("exception_settled_minor", "exception", "settled_minor"),
    # NULL when the funding currency of every EXCEPTION row is unknown: not 0
    Out(
        "exception_exposure_minor",
        "CAST(sum(exception_exposure_minor) FILTER (WHERE exception) AS BIGINT)",
        _DEC,
    ),
    count_where("funding_unknown_count", "funding_currency IS NULL"),
    Out(
        "exception_pull_pending_count",
        "CAST(coalesce(sum(pull_pending_count) FILTER (WHERE exception), 0) AS BIGINT)",
    ),
    Out("pull_total_minor", "CAST(coalesce(sum(pull_total_minor), 0) AS BIGINT)", _FUND_DEC),
    count_where("settlement_summary_mismatch_count", "settlement_summary_mismatch"),
    count_where("refund_summary_mismatch_count", "refund_summary_mismatch"),
    count_where("pull_shortfall_count", "pull_shortfall"),
    count_where("currency_mismatch_count", "currency_mismatch"),
]


def card_summary(
    data: Data,
    by: By = None,
    *,
    status: str | Sequence[str] | None = None,
    stale_after: timedelta = timedelta(days=7),
    hold_window: timedelta = HOLD_WINDOW,
    as_of: datetime | str | None = None,
    status_history: History = None,
    major: bool = False,
) -> pd.DataFrame:
    """Card transactions: amounts in integer minor units of the authorization's currency
    (summaries in the funding source's), times in seconds.

        open_hold_minor          = authorized - settled   (a hold: AUTHORIZED or PARTIALLY_SETTLED,
                                   no older than hold_window; else 0)
        expired_hold_minor       = authorized - settled   of a hold older than hold_window: expired
                                   exposure, in no open figure
        net_settled_minor        = settled - refunded
        settlement_seconds       = last_clearing_at - authorizedAt
        hold_age_seconds         = as_of - authorizedAt   (AUTHORIZED or PARTIALLY_SETTLED)
        stale_hold               = a hold older than stale_after, not expired
        expired_hold             = a hold older than hold_window (30 days by default, see
                                   HOLD_WINDOW; `attrs["hold_window"]` says which)
        hold_age_bucket          = 0–7 days, 8–30 days or > 30 days (holds only)
        exception_age_seconds    = as_of - authorizedAt   (EXCEPTION rows; bucketed as holds)
        over_settled_minor       = max(settled - authorized, 0)   (tips, over-authorization clearings)
        exception_exposure_minor = max(settled - pulled, 0) of EXCEPTION rows: cleared to the
                                   merchant but not pulled from the funding source

    The pull, settlement and refund summaries are in the funding source's currency (the
    internal account's, `funding_currency`; read from the warehouse's internal accounts, or an
    input column), never in the authorization's: `pull_total_minor` carries the funding
    decimals. Where the two currencies agree, the summaries are reconciled with the amounts:
    `settlement_summary_mismatch` (settlementSummary.totalAmount <> settledAmount),
    `refund_summary_mismatch` (refundSummary.totalAmount <> refundedAmount) and
    `pull_shortfall` (less pulled than settled, no pull pending, not EXCEPTION); elsewhere, or
    where the summary is absent (it is optional), they are NULL (not comparable), never a false
    alarm.

    `last_clearing_at` is inferred, the interface carrying no settlement time: `lastEventAt`
    (the latest pull, clearing or refund) when something cleared and nothing was refunded;
    when a refund came since, the status history's latest observation of PARTIALLY_SETTLED,
    SETTLED or EXCEPTION (the record's `updatedAt` then); otherwise unknown. A settled or
    refunded amount in another currency than the authorization is not added to anything: it
    reads NULL, as do the open hold, over-settlement and net it would make, and the row is
    flagged `currency_mismatch`. A group's totals are over the rows whose amount is known
    (`currency_mismatch_count` says how many are left out; the net over the rows whose settled
    and refunded amounts are both known), NULL when it has rows and none is known.

    `by` groups by `merchant` (descriptor), `mcc`, `country` (the merchant's), `card`,
    `customer`, `month` (UTC month of authorization), `status`, `hold_age_bucket`, any per-row
    column or any input column, always also by `currency` and `funding_currency`; None gives
    one row per card transaction. Groups sum the amounts, count holds per age bucket, stale
    holds, over-settlements, exceptions and summary mismatches, and give p50/p90/p99 of
    settlement seconds (interpolated linearly, over cleared transactions).

    `status` keeps some card statuses only. `as_of` is when hold ages are measured; by default
    the latest instant in the data (authorization, last event or update); a naive time is read
    as UTC. `stale_after` and `hold_window` are positive `timedelta`s. `status_history` replaces the history a
    Warehouse holds. `major=True` adds `_major` amounts (float).
    """
    wanted = statuses(status, tuple(CardTransactionStatus))
    stale = positive_duration("stale_after", stale_after).total_seconds()
    window = positive_duration("hold_window", hold_window)
    when = instant("as_of", as_of)
    src = source(data, "card_transactions", required=_REQUIRED, status_history=status_history)
    where = ["type = 'CARD'"] if src.has("type") else ["TRUE"]
    if wanted is not None:
        where.append(f"status IN {sql_strings(wanted)}")
    src.check_as_of(when, "authorized_at")
    keys = src.keys(by, _ROW, {"merchant": "merchant", "card": "card_id"})
    latest = (
        sql_timestamp(when)
        if when is not None
        else "(SELECT greatest(max(authorized_at), max(last_event_at), max(updated_at)) FROM _in)"
    )
    funded = _funding(src.has("funding_currency"), "internal_accounts" in src.tables)
    ctes = [
        ("_base", src.input_cte(_USES, " AND ".join(where))),
        ("_in", funded),
        ("_need", f"SELECT id FROM _in WHERE {_CLEARED} AND {_REFUNDED}"),
        (
            "_seen",
            "SELECT id, max(coalesce(record_updated_at, observed_at)) AS at FROM _history"
            f" WHERE status IN {sql_strings(CLEARED)} AND id IN (SELECT id FROM _need)"
            " GROUP BY id",
        ),
        (
            "_set",
            f"SELECT _in.*, {_LAST_CLEARING} AS _last_clearing, {latest} AS _as_of,"
            f" {stale!r} AS _stale_after, {window.total_seconds()!r} AS _hold_window"
            " FROM _in LEFT JOIN _seen ON _seen.id = _in.id",
        ),
        ("_rows", rows_cte(_ROW, keys, "_set")),
    ]
    final = render(
        _ROW,
        keys,
        currency=["currency", "decimals", "funding_currency", "funding_decimals"],
        metrics=_METRICS,
        major=major,
        order="authorized_at, id",
    )
    result = src.run(ctes, final)
    result.attrs["hold_window"] = _days(window)
    return result


def _days(span: timedelta) -> str:
    """A duration as '30 days' (or its seconds when not whole days)."""
    seconds = span.total_seconds()
    if seconds % _DAY:
        return f"{seconds:g} seconds"
    return f"{int(seconds // _DAY)} day{'s' if seconds != _DAY else ''}"


def _funding(in_input: bool, accounts: bool) -> str:
    """`_in`: the rows with `funding_currency` and `funding_decimals`: the input's own, the
    funding internal account's, or unknown (NULL)."""
    if in_input:
        return "SELECT * FROM _base"
    if accounts:
        return (
            "SELECT _base.*, _a.balance_currency AS funding_currency,"
            " _a.balance_decimals AS funding_decimals FROM _base LEFT JOIN"
            " (SELECT id, balance_currency, balance_decimals FROM internal_accounts) AS _a"
            " ON _a.id = _base.account_id"
        )
    return (
        "SELECT *, NULL::VARCHAR AS funding_currency, NULL::TINYINT AS funding_decimals FROM _base"
    )
