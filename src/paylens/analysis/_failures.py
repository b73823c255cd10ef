"""Failure reasons of incoming and outgoing transactions."""

from __future__ import annotations

import pandas as pd

from paylens.errors import InvalidArgumentError

from . import _lifecycle as lc
from ._common import (
    TRANSACTION,
    By,
    Data,
    Out,
    choice,
    finish,
    group_columns,
    quote,
    render,
    rows_cte,
    source,
    sql_strings,
)

KINDS = ("INCOMING", "OUTGOING")

_REQUIRED = ("id", "status", "failure_reason")
_USES = (
    *_REQUIRED,
    *lc.USES,
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


def _headline(part: str) -> str:
    """The kind's headline amount: sent for outgoing, received for incoming."""
    by_kind = f"CASE _kind WHEN 'OUTGOING' THEN sent_amount_{part} ELSE received_amount_{part} END"
    column = "amount_minor" if part == "minor" else part
    return f"coalesce({column}, {by_kind})"


_ROW = [
    Out("type", "_kind"),
    *TRANSACTION,
    *lc.columns("_kind"),
    Out("reason_payout", lc.reason_payout("_kind")),
    Out("amount_minor", _headline("minor"), "decimals"),
    Out("currency", _headline("currency")),
    Out("decimals", _headline("decimals")),
]


#: The breakdown's own dimensions: every grouped row is already one of them.
_OWN = ("lifecycle", "failure_reason", "reported_failure_reason")


def failure_breakdown(
    data: Data,
    by: By = None,
    *,
    type: str | None = None,
    major: bool = False,
) -> pd.DataFrame:
    """What became of incoming and outgoing transactions, per lifecycle and failure reason:
    counts, shares of the resolved ones, and amounts in integer minor units of each
    transaction's headline currency (sent for outgoing, received for incoming).

        share_of_resolved     = transaction_count / resolved_count       (a fraction, 0 to 1)
        failure_rate          = (failed + refunded + refund_pending + refund_failed) / resolved_count  (the group's)
        coarse_payout_share   = COUNTERPARTY_POST_TX_FAILED / payout failures   (the group's)
        amount_rate           = amount_minor / resolved_amount_minor

    Lifecycles are those of `paylens.analysis.LIFECYCLES`: open transactions are counted apart
    (`open_count`) and in no rate. A group is the transaction type (incoming and outgoing are
    never mixed), the `by` keys and the currency; each row is one unsuccessful lifecycle
    (failed, refunded, refund_pending, refund_failed, expired, rejected, cancelled) and normalised failure reason of
    a group, with the group's attempted, open, resolved and completed counts beside it; a group
    where nothing went wrong has one row with no lifecycle and a count of 0, so every attempt
    is in the result. `failure_reason` is normalised (removed reasons read
    QUOTE_EXECUTION_FAILED, `reason_removed` says so), `reported_failure_reason` is as sent,
    `reason_deprecated` and `reason_coarse` flag what the interface deprecates and its coarse
    payout fallback; `coarse_payout_share` is how much of the payout failures it explains.

    `by` groups by `rail`, `corridor`, `month` (UTC month of creation), `customer`, `status`,
    any per-row column or any input column (not by the breakdown's own `lifecycle` or
    `failure_reason`); None gives one row per transaction. `type` keeps INCOMING or OUTGOING
    only. `major=True` adds `_major` amounts (float).
    """
    kinds = KINDS if type is None else (choice("type", type, KINDS),)
    src = source(data, "transactions", required=_REQUIRED)
    if src.has("type"):
        kind = "type"
    elif src.has("grid_api_fixed_fee_minor"):  # rows of outgoing_fees
        kind = "'OUTGOING'"
    else:
        raise InvalidArgumentError(
            "data", "the input lacks 'type': pass rows of the 'transactions' table"
        )
    keys = src.keys(by, _ROW, {})
    own = [k for k in keys or () if k in _OWN]
    if own:
        raise InvalidArgumentError(
            "by", f"every row is already one {own[0]}: group by other columns, not {own}"
        )
    ctes = [
        ("_in", src.input_cte(_USES)),
        ("_kinded", f"SELECT *, {kind} AS _kind FROM _in WHERE {kind} IN {sql_strings(kinds)}"),
        ("_rows", rows_cte(_ROW, keys, "_kinded")),
    ]
    if keys is None:
        final = render(_ROW, None, currency=[], metrics=[], major=major, order="created_at, id")
        return src.run(ctes, final)
    # every group is of one type already: grouped by it, `type` is still one column
    group_list = group_columns(
        ["type", *(k for k in keys if k != "type")], ["currency", "decimals"]
    )
    groups = ", ".join(map(quote, group_list))
    bad = f"lifecycle IN {sql_strings(lc.UNSUCCESSFUL)}"
    resolved = f"lifecycle IN {sql_strings(lc.RESOLVED)}"
    failures = f"lifecycle IN {sql_strings(lc.FAILURES)}"
    ctes += [
        (
            "_agg",
            f"SELECT {groups}, {bad} AS _bad, CASE WHEN {bad} THEN lifecycle END AS lifecycle,"
            f" CASE WHEN {bad} THEN failure_reason END AS failure_reason,"
            " bool_or(reason_removed) AS reason_removed,"
            " bool_or(reason_deprecated) AS reason_deprecated,"
            " bool_or(reason_coarse) AS reason_coarse, count(*) AS n,"
            f" count(*) FILTER (WHERE {resolved}) AS n_resolved,"
            f" count(*) FILTER (WHERE {failures}) AS n_failures,"
            " count(*) FILTER (WHERE lifecycle = 'open') AS n_open,"
            " count(*) FILTER (WHERE lifecycle = 'completed') AS n_completed,"
            " count(*) FILTER (WHERE reason_payout) AS n_payout,"
            " count(*) FILTER (WHERE reason_coarse) AS n_coarse,"
            f" sum(amount_minor) FILTER (WHERE {resolved}) AS resolved_amount,"
            " sum(amount_minor) AS amount FROM _rows GROUP BY ALL",
        ),
        (
            "_groups",
            "SELECT *, sum(n) OVER g AS attempted, sum(n_open) OVER g AS open,"
            " sum(n_resolved) OVER g AS resolved, sum(n_completed) OVER g AS completed,"
            " sum(n_failures) OVER g AS failures, sum(resolved_amount) OVER g AS g_amount,"
            " sum(n_payout) OVER g AS payout, sum(n_coarse) OVER g AS coarse,"
            " bool_or(_bad) OVER g AS group_bad"
            f" FROM _agg WINDOW g AS (PARTITION BY {groups})",
        ),
    ]
    columns = [
        *(Out(c, quote(c)) for c in group_list),
        Out("lifecycle", "lifecycle"),
        Out("failure_reason", "failure_reason"),
        Out("reason_removed", "CASE WHEN _bad THEN reason_removed END"),
        Out("reason_deprecated", "CASE WHEN _bad THEN reason_deprecated END"),
        Out("reason_coarse", "CASE WHEN _bad THEN reason_coarse END"),
        Out("transaction_count", "CAST(CASE WHEN _bad THEN n ELSE 0 END AS BIGINT)"),
        Out("share_of_resolved", "CASE WHEN _bad THEN n ELSE 0 END / nullif(resolved, 0)"),
        Out("amount_minor", "CAST(CASE WHEN _bad THEN amount ELSE 0 END AS BIGINT)", "decimals"),
        Out("resolved_amount_minor", "CAST(coalesce(g_amount, 0) AS BIGINT)", "decimals"),
        Out("amount_rate", "CASE WHEN _bad THEN amount ELSE 0 END / nullif(g_amount, 0)"),
        Out("attempted_count", "CAST(attempted AS BIGINT)"),
        Out("open_count", "CAST(open AS BIGINT)"),
        Out("resolved_count", "CAST(resolved AS BIGINT)"),
        Out("completed_count", "CAST(completed AS BIGINT)"),
        Out("failure_rate", "failures / nullif(resolved, 0)"),
        Out("coarse_payout_share", "coarse / nullif(payout, 0)"),
    ]
    final = finish(
        columns,
        "_groups WHERE _bad OR NOT group_bad",
        major,
        f"{groups}, transaction_count DESC, lifecycle, failure_reason",
    )
    return src.run(ctes, final)
