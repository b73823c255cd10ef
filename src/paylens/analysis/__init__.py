"""What analysts open the notebook for: read-only helpers over the warehouse, and their plots.

    from paylens.analysis import fee_breakdown, plot_fee_breakdown
    platform_pnl(wh)                                   # the platform's revenue, and who else earns what
    fees_collected(wh, reference_rates=rates)          # what senders paid, by party, FX margin
    fee_breakdown(wh)                                  # one row per completed outgoing transfer
    settlement_times(wh, by=["rail", "source_type"])   # Kaplan–Meier p50/p90/p99, breaches
    failure_breakdown(wh, by="rail")                   # per lifecycle and reason, rates
    refund_summary(wh, by="month")                     # refund rate, latency, status
    balance_rollforward(wh, period="month")            # opening + movements = closing, breaks
    card_summary(wh, by="mcc")                         # holds, clearings, refunds, exceptions
    plot_fee_breakdown(wh, by="corridor")              # each helper's plot_ twin: a Figure
    export(platform_pnl(wh), "pnl.xlsx")               # to .csv, .parquet or .xlsx, exactly

Every helper speaks one lifecycle vocabulary (`LIFECYCLES`: open, completed, failed,
refunded, refund_pending, refund_failed, expired, rejected, cancelled; see `paylens.analysis._lifecycle`).

Each helper takes a `Warehouse`, a DataFrame of the warehouse table it reads, or a DuckDB
relation over it, and `by=` (one column name or a list; None gives one row per transaction):
`corridor` ('USD→EUR'), `rail`, `customer`, `month` (UTC, as the first day's date), `status`,
any per-row column of the result or any input column. It computes in one DuckDB statement
and returns a typed, Arrow-backed DataFrame whose column names carry their units (`_minor`,
`_seconds`, `_count`; `_rate` and `_share` a fraction, 0.0123 for 1.23 %, shown as a
percentage by `paylens.report.show`; `exchange_rate`, `reference_rate`, `multiplier_rate` and
`mid_rate` are FX rates, sending units per receiving unit), a missing value is `<NA>`, labelled with `attrs["source"]` (sandbox
data says so) when its input is. Money stays in integer minor units beside its currency and
is grouped by that currency, so nothing adds two currencies; `major=True` adds `_major`
values computed with each row's own decimals. Each docstring opens with its formula.

The same vocabulary for tables of your own: `words("fees_major")` is "fees", `month_label`
writes a month as "Sep 2025", `is_fraction` tells a fraction column by its name, and
`MISSING_LABEL` is what a missing value is shown as.
"""

from paylens import _lazy

from ._cards import card_summary
from ._collected import fees_collected
from ._common import MISSING_LABEL, By, Data, is_fraction
from ._export import export
from ._failures import failure_breakdown
from ._fees import ReferenceRates, fee_breakdown
from ._lifecycle import FAILURES as FAILURE_LIFECYCLES
from ._lifecycle import LIFECYCLES
from ._lifecycle import RESOLVED as RESOLVED_LIFECYCLES
from ._owed import refunds_owed
from ._plots import (
    month_label,
    plot_card_summary,
    plot_failure_breakdown,
    plot_fee_breakdown,
    plot_fees_collected,
    plot_refund_summary,
    plot_settlement_times,
    words,
)
from ._plots_close import plot_balance_rollforward, plot_platform_pnl, plot_refunds_owed
from ._pnl import PNL_PARTS, platform_pnl, settlement_period
from ._refunds import refund_summary
from ._rollforward import balance_rollforward
from ._settlement import settlement_times

__all__ = [
    "FAILURE_LIFECYCLES",
    "LIFECYCLES",
    "MISSING_LABEL",
    "PNL_PARTS",
    "RESOLVED_LIFECYCLES",
    "By",
    "Data",
    "ReferenceRates",
    "balance_rollforward",
    "card_summary",
    "export",
    "failure_breakdown",
    "fee_breakdown",
    "fees_collected",
    "is_fraction",
    "month_label",
    "platform_pnl",
    "plot_balance_rollforward",
    "plot_card_summary",
    "plot_failure_breakdown",
    "plot_fee_breakdown",
    "plot_fees_collected",
    "plot_platform_pnl",
    "plot_refund_summary",
    "plot_refunds_owed",
    "plot_settlement_times",
    "refund_summary",
    "refunds_owed",
    "settlement_period",
    "settlement_times",
    "words",
]


#: Names that no longer exist, and what to call instead: `revenue` added the service's and the
#: counterparty's fees to the platform's and called the sum revenue.
_RENAMED = {
    "revenue": "fees_collected (what senders paid, by who earns it); the platform's revenue is"
    " platform_pnl(...)['platform_revenue_minor']",
    "plot_revenue": "plot_fees_collected (fees by who earns them); the platform's P&L is"
    " plot_platform_pnl",
}

__getattr__, __dir__ = _lazy.attributes(__name__, {}, __all__, renamed=_RENAMED)
