"""Settlement times of outgoing (or incoming) transactions."""

from __future__ import annotations

from datetime import datetime

import pandas as pd

from ._common import (
    TRANSACTION,
    By,
    Data,
    History,
    Out,
    count_where,
    percentiles,
    quantile,
    render,
    rows_cte,
    seconds_between,
    source,
    sql_string,
    sql_strings,
    sql_timestamp,
)

#: Statuses that end a transaction without settling it; any other status but COMPLETED
#: (including one this version does not know) is still pending.
ENDED_UNSETTLED = ("FAILED", "EXPIRED", "REJECTED", "REFUNDED")
SETTLED = "COMPLETED"

_REQUIRED = ("id", "status", "created_at")
_USES = (
    *_REQUIRED,
    "settled_at",
    "updated_at",
    "customer_id",
    "payment_rail",
    "sent_amount_currency",
    "received_amount_currency",
    "expected_settlement_at",
    "settlement_timeline_seconds",
)

_STATE = (
    f"CASE WHEN status = '{SETTLED}' THEN 'settled'"
    f" WHEN status IN {sql_strings(ENDED_UNSETTLED)} THEN 'failed' ELSE 'pending' END"
)
_SETTLED_AT = f"CASE WHEN status = '{SETTLED}' THEN coalesce(settled_at, _seen.at) END"
_SETTLED_FROM = (
    f"CASE WHEN status = '{SETTLED}' AND settled_at IS NOT NULL THEN 'settled_at'"
    f" WHEN status = '{SETTLED}' AND _seen.at IS NOT NULL THEN 'status_history' END"
)
_SECONDS = seconds_between("created_at", "_settled_at")
_LATE = seconds_between("expected_settlement_at", "_settled_at")
_AGE = f"CASE WHEN _state = 'pending' THEN {seconds_between('created_at', '_as_of')} END"

_ROW = [
    *TRANSACTION,
    Out("settlement_state", "_state"),
    Out("settled_at", "_settled_at"),
    Out("settled_at_source", "_settled_from"),
    Out("settlement_seconds", _SECONDS),
    Out("expected_settlement_at", "expected_settlement_at"),
    Out("settlement_timeline_seconds", "settlement_timeline_seconds"),
    Out("late_seconds", _LATE),
    Out("expected_breach", f"{_LATE} > 0"),
    Out("timeline_breach", f"{_SECONDS} > settlement_timeline_seconds"),
    Out("pending_seconds", _AGE),
    Out(
        "overdue",
        f"CASE WHEN _state = 'pending' THEN coalesce(_as_of > expected_settlement_at, FALSE)"
        f" OR coalesce({_AGE} > settlement_timeline_seconds, FALSE) END",
    ),
]


_METRICS = [
    Out("transaction_count", "count(*)"),
    count_where("settled_count", "settlement_state = 'settled'"),
    count_where("pending_count", "settlement_state = 'pending'"),
    count_where("failed_count", "settlement_state = 'failed'"),
    count_where("from_history_count", "settled_at_source = 'status_history'"),
    count_where("time_unknown_count", "settlement_state = 'settled' AND settled_at IS NULL"),
    *percentiles("settlement_seconds"),
    Out("mean_seconds", "avg(settlement_seconds)"),
    Out("expected_count", "count(late_seconds)"),
    count_where("expected_breach_count", "expected_breach"),
    Out(
        "expected_breach_rate",
        "count(*) FILTER (WHERE expected_breach) / nullif(count(late_seconds), 0)",
    ),
    quantile("late_p50_seconds", "late_seconds", 0.5, "expected_breach"),
    quantile("late_p90_seconds", "late_seconds", 0.9, "expected_breach"),
    Out("late_max_seconds", "max(late_seconds) FILTER (WHERE expected_breach)"),
    Out("timeline_count", "count(timeline_breach)"),
    count_where("timeline_breach_count", "timeline_breach"),
    Out(
        "timeline_breach_rate",
        "count(*) FILTER (WHERE timeline_breach) / nullif(count(timeline_breach), 0)",
    ),
    count_where("pending_overdue_count", "overdue"),
    Out("pending_max_seconds", "max(pending_seconds)"),
]


def settlement_times(
    data: Data,
    by: By = None,
    *,
    type: str = "OUTGOING",
    as_of: datetime | str | None = None,
    status_history: History = None,
) -> pd.DataFrame:
    """Time from creation to settlement, in seconds, against what the service expected.

        settlement_seconds = settledAt - createdAt            (settled transactions only)
        late_seconds       = settledAt - expectedSettlementAt (> 0: the expectation was breached)
        timeline_breach    = settlement_seconds > settlementTimelineSeconds
        pending_seconds    = as_of - createdAt                (pending transactions only)

    Every transaction has a `settlement_state`: `settled` (status COMPLETED), `failed` (FAILED,
    EXPIRED, REJECTED or REFUNDED: ended unsettled) or `pending` (any other status, unknown
    ones included): pending ones are counted, never dropped, and never given a settlement time
    (a pending record's `settledAt` may be a forecast). When a completed transaction lacks
    `settledAt`, the status history supplies it: the record's `updatedAt` when COMPLETED was
    first observed (or the observation time), an upper bound (`settled_at_source` tells which).
    A pending transaction is `overdue` when `as_of` is past its `expectedSettlementAt` or its
    age exceeds its `settlementTimelineSeconds`.

    `by` groups by `rail`, `corridor`, `customer`, `month` (UTC month of creation), `status`,
    any per-row column or any input column; None gives one row per transaction. Groups give
    counts per state, p50/p90/p99 and mean settlement seconds (quantiles interpolated
    linearly), the breach rates against each expectation (breaches / settled transactions that
    carry it) and how late the breaches were, and pending ones overdue.

    `type` is OUTGOING (rail and expectations from the `outgoing_fees` table) or INCOMING (from
    `transactions`; no expectations). `as_of` is when pending ages are measured (a naive time
    is read as UTC); by default the latest instant in the data (creation, update or
    settlement), not the wall clock, so a sandbox's clock or an old warehouse measures
    consistently. `status_history` replaces the history a Warehouse (or the relation's
    database) holds; a DataFrame input has none unless given one.
    """
    kind = type.upper()
    if kind not in ("OUTGOING", "INCOMING"):
        raise ValueError(f"type must be 'OUTGOING' or 'INCOMING', not {type!r}")
    table = "outgoing_fees" if kind == "OUTGOING" else "transactions"
    src = source(data, table, required=_REQUIRED, status_history=status_history)
    where = f"type = {sql_string(kind)}" if src.has("type") else "TRUE"
    keys = src.keys(by, _ROW, {})
    latest = (
        sql_timestamp(as_of)
        if as_of is not None
        else "(SELECT greatest(max(created_at), max(updated_at), max(settled_at) FILTER"
        f" (WHERE status = '{SETTLED}')) FROM _in)"
    )
    ctes = [
        ("_in", src.input_cte(_USES, where)),
        # history only for the completed transactions missing settledAt (few, or none)
        ("_need", f"SELECT id FROM _in WHERE status = '{SETTLED}' AND settled_at IS NULL"),
        (
            "_seen",
            "SELECT id, min(coalesce(record_updated_at, observed_at)) AS at FROM _history"
            f" WHERE status = '{SETTLED}' AND id IN (SELECT id FROM _need) GROUP BY id",
        ),
        (
            "_set",
            f"SELECT _in.*, {_STATE} AS _state, {_SETTLED_AT} AS _settled_at,"
            f" {_SETTLED_FROM} AS _settled_from, {latest} AS _as_of"
            " FROM _in LEFT JOIN _seen ON _seen.id = _in.id",
        ),
        ("_rows", rows_cte(_ROW, keys, "_set")),
    ]
    final = render(_ROW, keys, currency=[], metrics=_METRICS, major=False, order="created_at, id")
    return src.run(ctes, final)
