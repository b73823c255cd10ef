"""How the report writes numbers, rates, durations and instants."""

from __future__ import annotations

import itertools
import numbers
from collections.abc import Hashable
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from paylens.analysis import MISSING_LABEL, is_fraction
from paylens.models import format_minor

if TYPE_CHECKING:
    from pandas.io.formats.style import Styler

__all__ = [
    "MISSING_LABEL",
    "format_check",
    "format_duration",
    "format_instant",
    "format_minor",
    "format_rate",
    "show",
]


def format_rate(fraction: float) -> str:
    """`0.0345` -> `'3.45%'`; no data -> `'–'` (`MISSING_LABEL`)."""
    return MISSING_LABEL if pd.isna(fraction) else f"{fraction:.2%}"


def format_duration(seconds: float) -> str:
    """Seconds as minutes, hours or days with one decimal: `5742.9` -> `'1.6 h'`."""
    if pd.isna(seconds):
        return MISSING_LABEL
    for unit, size in (("days", 86_400), ("h", 3_600), ("min", 60)):
        if abs(seconds) >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def format_check(passed: object) -> str:
    """A check's outcome as a mark: `True` -> '✓', `False` -> '✗'."""
    return "✓" if passed is True or passed is np.True_ else "✗"


def _number(value: Any) -> str:
    """A table cell: counts with thousands separators, decimals to two places (below 1, six
    significant digits, so a satoshi amount or a small rate still shows, never in scientific
    notation: `7.835e-05` reads `0.00007835`); a check's bool as ✓ or ✗; an instant to the
    second in UTC."""
    if isinstance(value, bool | np.bool_):
        return format_check(bool(value))
    if isinstance(value, datetime) and value.tzinfo is not None:
        return format_instant(value)
    if not isinstance(value, numbers.Real):
        return str(value)
    number = float(value)
    if isinstance(value, numbers.Integral) or number.is_integer():
        return f"{int(number):,}"
    if abs(number) >= 1:
        return f"{number:,.2f}"
    return np.format_float_positional(number, precision=6, fractional=False, trim="-")


#: How many tables `show` has written in this process (their HTML ids).
_SHOWN = itertools.count()


def _percent(value: object) -> str:
    return format_rate(float(value)) if isinstance(value, numbers.Real) else str(value)


def show(frame: pd.DataFrame, *, index: bool = False) -> Styler:
    """A frame as the report shows it: fractions (`_rate`, `_share` columns but FX rates) as
    percentages, other numbers as `_number` writes them, missing values as '–'
    (`MISSING_LABEL`), and no row numbers unless `index`."""
    # ids numbered in the order shown, not random: a re-run writes the same page (nbval
    # compares it), and two tables of one page never share an id
    # a Styler writes text as it is, unlike `DataFrame.to_html`: what the service sent (a
    # merchant's name, a failure reason it adds) is escaped, never markup in the page
    styler = frame.style.set_uuid(f"paylens{next(_SHOWN)}").format(
        _number, na_rep=MISSING_LABEL, escape="html"
    )
    fractions: list[Hashable] = [c for c in frame.columns if isinstance(c, str) and is_fraction(c)]
    if fractions:
        styler = styler.format(_percent, subset=fractions, na_rep=MISSING_LABEL, escape="html")
    # headers in words: a column's snake_case name is no heading for a reader
    styler = styler.format_index(_heading, axis=1, escape="html")
    return styler if index else styler.hide(axis="index")


def _heading(name: object) -> str:
    from paylens.analysis import words

    return words(name) if isinstance(name, str) else str(name)


def format_instant(value: Any) -> str:
    """An instant to the second in UTC: '2025-10-13 14:02:11 UTC'; none -> '–'."""
    if value is None or pd.isna(value):
        return MISSING_LABEL
    stamp = pd.Timestamp(value)
    stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
    return f"{stamp:%Y-%m-%d %H:%M:%S} UTC"


_when = format_instant
