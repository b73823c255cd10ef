"""Failure reasons of incoming and outgoing transactions."""

from __future__ import annotations

import pandas as pd

from paylens.models import (
    COARSE_PAYOUT_FAILURE_REASON,
    GRANULAR_PAYOUT_FAILURE_REASONS,
    REMOVED_OUTGOING_FAILURE_REASONS,
    IncomingTransactionFailureReason,
    OutgoingTransactionFailureReason,
)

from ._common import (
    TRANSACTION,
    By,
    Data,
    Out,
    finish,
    group_columns,
    quote,
    render,
    rows_cte,
    source,
    sql_string,
    sql_strings,
)

KINDS = ("INCOMING", "OUTGOING")

_REQUIRED = ("id", "status", "failure_reason")
_USES = (
    *_REQUIRED,
    "type",
    "created_at",
    "customer_id",
    "payment_rail",
    "amount_minor",
    "currency",
    "decimals",
    *(
        f"{side}_amount_{part}"
        for side in ("sent", "received")
        for part in ("minor", "currency", "decimals")
    ),
)

_FAILED = "(status = 'FAILED' OR failure_reason IS NOT NULL)"
_OUT = "_kind = 'OUTGOING' AND failure_reason IN "
_REASON_KIND = (
    f"CASE WHEN NOT {_FAILED} THEN NULL"
    " WHEN failure_reason IS NULL THEN 'missing'"
    f" WHEN {_OUT}{sql_strings(GRANULAR_PAYOUT_FAILURE_REASONS)} THEN 'granular_payout'"
    f" WHEN {_OUT}({sql_string(COARSE_PAYOUT_FAILURE_REASON)}) THEN 'coarse_payout'"
    f" WHEN {_OUT}{sql_strings(REMOVED_OUTGOING_FAILURE_REASONS)} THEN 'removed'"
    f" WHEN {_OUT}{sql_strings(OutgoingTransactionFailureReason)} THEN 'known'"
    " WHEN _kind = 'INCOMING' AND failure_reason IN"
    f" {sql_strings(IncomingTransactionFailureReason)} THEN 'known'"
    " ELSE 'unknown' END"
)


def _headline(part: str) -> str:
    """The kind's headline amount: sent for outgoing, received for incoming."""
    by_kind = f"CASE _kind WHEN 'OUTGOING' THEN sent_amount_{part} ELSE received_amount_{part} END"
    column = "amount_minor" if part == "minor" else part
    return f"coalesce({column}, {by_kind})"


_ROW = [
    Out("type", "_kind"),
    *TRANSACTION,
    Out("failed", _FAILED),
    Out("failure_reason", "failure_reason"),
    Out("reason_kind", _REASON_KIND),
    Out("amount_minor", _headline("minor"), "decimals"),
    Out("currency", _headline("currency")),
    Out("decimals", _headline("decimals")),
]


def failure_breakdown(
    data: Data,
    by: By = None,
    *,
    type: str | None = None,
    major: bool = False,
) -> pd.DataFrame:
    """Failures per reason: counts, rates (failed / attempted) and volume in integer minor
    units of each transaction's headline currency (sent for outgoing, received for incoming).

        failed            = status FAILED, or a failure reason given
        failure_rate      = failed_count / attempted_count          (a fraction, 0 to 1)
        share_of_failures = failed_count / all failures of the group
        failed_amount_rate = failed_amount_minor / attempted_amount_minor

    A group is the transaction type (incoming and outgoing are never mixed), the `by` keys
    and the currency; its `attempted_count` is every transaction in it, pending ones included.
    Each row is one failure reason of a group; a group without failures has one row with no
    reason and `failed_count` 0, so every attempt is in the result. Each reason
    has a `reason_kind`: `granular_payout` (the payout partner said why), `coarse_payout`
    (COUNTERPARTY_POST_TX_FAILED, the fallback when no granular reason is available),
    `removed` (a reason the interface no longer returns, on old records), `known` (another
    documented reason), `unknown` (a reason this version does not know: kept and shown as
    sent) or `missing` (failed without a reason).

    `by` groups by `rail`, `corridor`, `month` (UTC month of creation), `customer`, `status`,
    any per-row column or any input column; None gives one row per transaction (failed or not).
    `type` keeps INCOMING or OUTGOING only. `major=True` adds `_major` amounts (float).
    """
    src = source(data, "transactions", required=_REQUIRED)
    if src.has("type"):
        kind = "type"
    elif src.has("grid_api_fixed_fee_minor"):  # rows of outgoing_fees
        kind = "'OUTGOING'"
    else:
        raise ValueError("the input lacks 'type': pass rows of the 'transactions' table")
    kinds = KINDS if type is None else (type.upper(),)
    keys = src.keys(by, _ROW, {})
    ctes = [
        ("_in", src.input_cte(_USES)),
        ("_kinded", f"SELECT *, {kind} AS _kind FROM _in WHERE {kind} IN {sql_strings(kinds)}"),
        ("_rows", rows_cte(_ROW, keys, "_kinded")),
    ]
    if keys is None:
        final = render(_ROW, None, currency=[], metrics=[], major=major, order="created_at, id")
        return src.run(ctes, final)
    group_list = group_columns(["type", *keys], ["currency", "decimals"])
    groups = ", ".join(map(quote, group_list))
    ctes += [
        (
            "_agg",
            f"SELECT {groups}, failed, failure_reason, reason_kind, count(*) AS n,"
            f" sum(amount_minor) AS amount FROM _rows GROUP BY ALL",
        ),
        (
            "_groups",
            "SELECT *, sum(n) OVER g AS attempted, sum(amount) OVER g AS attempted_amount,"
            " sum(CASE WHEN failed THEN n ELSE 0 END) OVER g AS group_failed"
            f" FROM _agg WINDOW g AS (PARTITION BY {groups})",
        ),
    ]
    columns = [
        *(Out(c, quote(c)) for c in group_list),
        Out("failure_reason", "failure_reason"),
        Out("reason_kind", "reason_kind"),
        Out("failed_count", "CASE WHEN failed THEN n ELSE 0 END"),
        Out("attempted_count", "CAST(attempted AS BIGINT)"),
        Out("failure_rate", "CASE WHEN failed THEN n ELSE 0 END / attempted"),
        Out("share_of_failures", "CASE WHEN failed THEN n END / nullif(group_failed, 0)"),
        Out(
            "failed_amount_minor",
            "CAST(CASE WHEN failed THEN amount ELSE 0 END AS BIGINT)",
            "decimals",
        ),
        Out("attempted_amount_minor", "CAST(attempted_amount AS BIGINT)", "decimals"),
        Out(
            "failed_amount_rate",
            "CASE WHEN failed THEN amount ELSE 0 END / nullif(attempted_amount, 0)",
        ),
    ]
    final = finish(
        columns,
        "_groups WHERE failed OR group_failed = 0",
        major,
        f"{groups}, failed_count DESC, failure_reason",
    )
    return src.run(ctes, final)
