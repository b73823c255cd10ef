"""The scheduled report: `notebooks/report.ipynb` run by papermill over a warehouse, rendered to
HTML without its code.

    path = render_report("data/paylens.duckdb", start="2025-09-01", end="2025-10-01")

The notebook reads the warehouse read-only through a `Period` (the rows created in [start, end),
in one currency or all), checks that its figures tie out (`TieOutError` when they do not, so the
report fails loudly), shows a one-screen summary per currency (`Period.summary`), then
`Section`s a reader can fold: revenue and fees, settlement times, failures and refunds, card
activity, the exceptions, the checks and where the data comes from, with the tables of
`report._tables` and the plots of `paylens.analysis`. Money is integer minor units per currency
throughout; a figure shown in major units is formatted from them with the currency's own
decimals, never converted, never added across currencies, never in scientific notation.
"""

from typing import TYPE_CHECKING

from paylens import _lazy
from paylens.errors import ReportError, TieOutError

if TYPE_CHECKING:
    from ._figures import Period, exceptions_summary
    from ._format import format_duration, format_instant, format_minor, format_rate, show
    from ._page import Section
    from ._render import NOTEBOOK, render_report

#: Loaded on first use: `paylens report` runs the notebook and renders its HTML without the
#: figures' code (pandas, the analysis), which only the notebook's kernel needs.
_LAZY: _lazy.Table = {
    name: (f"paylens.report.{module}", name)
    for module, names in {
        "_figures": ("Period", "exceptions_summary"),
        "_format": ("format_duration", "format_instant", "format_minor", "format_rate", "show"),
        "_page": ("Section",),
        "_render": ("NOTEBOOK", "render_report"),
    }.items()
    for name in names
}

__all__ = [
    "NOTEBOOK",
    "Period",
    "ReportError",
    "Section",
    "TieOutError",
    "exceptions_summary",
    "format_duration",
    "format_instant",
    "format_minor",
    "format_rate",
    "render_report",
    "show",
]

__getattr__, __dir__ = _lazy.attributes(__name__, _LAZY, __all__)
