"""Refunds of incoming and outgoing transactions, from their refund object."""

from __future__ import annotations

from datetime import datetime

import pandas as pd

from . import _lifecycle as lc
from ._common import (
    TRANSACTION,
    By,
    Data,
    Out,
    choice,
    count_where,
    instant,
    rows_cte,
    seconds_between,
    source,
    sql_strings,
    sql_timestamp,
)
from ._settlement import kaplan_meier, visible, with_quantiles

KINDS = ("INCOMING", "OUTGOING")
REFUND_STATUSES = ("PENDING", "COMPLETED", "FAILED")

_REQUIRED = ("id", "type", "status", "created_at", "refund_status")
_USES = (
    *_REQUIRED,
    *lc.USES,
    "customer_id",
    "payment_rail",
    "amount_minor",
    "currency",
    "decimals",
    "sent_amount_currency",
    "received_amount_currency",
    "updated_at",
)
_DONE = "(refund_status = 'COMPLETED' AND _settled <= _as_of)"
_WAITING = "(refund_status = 'PENDING' OR (refund_status = 'COMPLETED' AND _settled > _as_of))"

_ROW = [
    Out("type", "type"),
    *TRANSACTION,
    Out("lifecycle", lc.LIFECYCLE),
    Out("failure_reason", lc.reason("type")),
    Out("refunded", "refund_status IS NOT NULL"),
    Out("refund_status", "refund_status"),
    Out("refund_reason", "refund_reason"),
    Out("refund_initiated_at", "_initiated"),
    Out("refund_settled_at", "_settled"),
    Out(
        "refund_seconds", f"CASE WHEN {_DONE} THEN {seconds_between('_initiated', '_settled')} END"
    ),
    Out("amount_minor", "amount_minor", "decimals"),
    Out("currency", "currency"),
    Out("decimals", "decimals"),
    Out(
        "_km_seconds",
        f"CASE WHEN {_DONE} THEN {seconds_between('_initiated', '_settled')}"
        f" WHEN {_WAITING} THEN {seconds_between('_initiated', '_as_of')} END",
    ),
    Out("_km_settled", _DONE),
]

_METRICS = [
    Out("transaction_count", "count(*)"),
    Out("resolved_count", f"count(*) FILTER (WHERE lifecycle IN {sql_strings(lc.RESOLVED)})"),
    count_where("refunded_count", "refunded"),
    Out(
        "refund_rate",
        "count(*) FILTER (WHERE refunded)"
        f" / nullif(count(*) FILTER (WHERE lifecycle IN {sql_strings(lc.RESOLVED)}), 0)",
    ),
    *(count_where(f"refund_{s.lower()}_count", f"refund_status = '{s}'") for s in REFUND_STATUSES),
    Out(
        "refund_failure_rate",
        "count(*) FILTER (WHERE refund_status = 'FAILED')"
        " / nullif(count(*) FILTER (WHERE refund_status IN ('COMPLETED', 'FAILED')), 0)",
    ),
    Out(
        "refunded_amount_minor",
        "CAST(coalesce(sum(amount_minor) FILTER (WHERE refunded), 0) AS BIGINT)",
    ),
]


def refund_summary(
    data: Data,
    by: By = None,
    *,
    type: str | None = None,
    as_of: datetime | str | None = None,
) -> pd.DataFrame:
    """Refunds: how often, how fast, how they ended, from each transaction's `refund` object.

        refund_rate          = transactions with a refund / resolved transactions
        refund_seconds       = refund.settledAt - refund.initiatedAt   (completed refunds)
        p50/p90/p99_seconds  = Kaplan–Meier quantiles of refund_seconds, pending refunds
                               censored at as_of (see `settlement_times`)
        refund_failure_rate  = FAILED refunds / refunds that ended (COMPLETED or FAILED)

    A refund's times are read from the record's JSON (`raw`), as the warehouse keeps it;
    without it (a frame of selected columns) they are unknown and the quantiles NULL. Rows keep
    the transaction's `lifecycle` (a refunded failure is `refunded`, `refund_pending` or `refund_failed` by its refund's status, a cancel
    `cancelled`) and `refund_reason` (TRANSACTION_FAILED, USER_CANCELLATION, TIMEOUT).
    `refunded_amount_minor` is the transaction's headline amount (sent for outgoing, received
    for incoming) of refunded ones, per currency: the refund object carries no amount.

    `by` groups by `refund_reason`, `refund_status`, `lifecycle`, `rail`, `month` (UTC month
    of creation), `customer`, any per-row column or any input column, always also by `type`
    and `currency`; None gives one row per refunded transaction. `type` keeps INCOMING or
    OUTGOING only. `as_of` (naive read as UTC) is by default the latest instant in the data.
    """
    kinds = KINDS if type is None else (choice("type", type, KINDS),)
    when = instant("as_of", as_of)
    src = source(data, "transactions", required=_REQUIRED)
    initiated, settled = (
        (
            # RFC 3339 allows `t` and `z` in lower case; DuckDB reads them in capitals only
            f"CAST(upper(json_extract_string(raw, '$.refund.{field}')) AS TIMESTAMPTZ)"
            for field in ("initiatedAt", "settledAt")
        )
        if src.has("raw")
        else ("NULL::TIMESTAMPTZ", "NULL::TIMESTAMPTZ")
    )
    latest = (
        sql_timestamp(when)
        if when is not None
        # the latest instant in the data: a refund's own times are in it too
        else f"(SELECT greatest(max(created_at), max(updated_at), max({initiated}),"
        f" max({settled})) FROM _in)"
    )
    src.check_as_of(when)
    keys = src.keys(by, _ROW, {})
    ctes = [
        ("_in", src.input_cte(_USES, f"type IN {sql_strings(kinds)}")),
        (
            "_set",
            f"SELECT _in.*, _t._initiated, _t._settled, {latest} AS _as_of FROM _in"
            f" LEFT JOIN (SELECT id, {initiated} AS _initiated, {settled} AS _settled FROM _in"
            " WHERE refund_status IS NOT NULL) AS _t ON _t.id = _in.id",
        ),
        ("_rows", rows_cte(_ROW, keys, "_set")),
    ]
    if keys is None:
        final = f"SELECT {visible(_ROW)} FROM _rows WHERE refunded ORDER BY created_at, id"
        return src.run(ctes, final)
    groups = list(dict.fromkeys(["type", *keys, "currency", "decimals"]))
    ctes += kaplan_meier(groups)
    return src.run(ctes, with_quantiles(groups, _METRICS))
