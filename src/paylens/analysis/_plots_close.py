"""The plot twins of the month-end helpers: the platform's P&L and the refunds owed, drawn as
the other charts are (see `_plots`): titles and axes in words, major units of each currency,
one panel per currency, never a sum across currencies."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ._common import Data
from ._fees import ReferenceRates
from ._layout import figure, place
from ._owed import AGE_BUCKETS, refunds_owed
from ._plots import _bars, _finish, _nothing, _per_currency, data_span
from ._pnl import PNL_COLUMNS, PNL_PARTS, platform_pnl

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _major(frame: pd.DataFrame, column: str) -> pd.Series:
    """A minor-unit column in major units of each row's currency, for drawing only."""
    return frame[column].astype(float) / np.power(10.0, frame["decimals"].astype(float))


def plot_platform_pnl(
    data: Data,
    *,
    reference_rates: ReferenceRates | None = None,
    top: int = 15,
    currencies: int | None = 6,
) -> Figure:
    """Who earns what on completed transfers, per settlement month (`platform_pnl`): the
    platform's revenue, the service's fees and FX margin and the counterparty's pass-through,
    stacked, in major units of each currency, one panel per currency (the `currencies`
    busiest by transfers; None: every one). `data` may also be a frame `platform_pnl`
    returned (a period's P&L, say): it is drawn as it is."""
    if isinstance(data, pd.DataFrame) and list(data.columns) == PNL_COLUMNS:
        pnl = data
    else:
        pnl = platform_pnl(data, reference_rates=reference_rates)
    if pnl.empty:
        return _nothing(pnl, "No completed transfers in this data: no P&L to show.")
    frame = pnl.assign(
        settlement_month=pd.to_datetime(pnl["period"] + "-01", utc=True),
        sent_currency=pnl["currency"],
        transaction_count=pnl["outgoing_count"] + pnl["incoming_count"],
    )
    frame.attrs = dict(pnl.attrs)
    amounts = {
        name: _major(frame, column).where(frame[column] != 0) for name, column in PNL_PARTS.items()
    }
    return _per_currency(
        frame,
        ["settlement_month"],
        amounts,
        "Who earns what on completed transfers, by settlement month (major units of each currency)",
        lambda currency: currency,
        data_span(data),
        top=top,
        currencies=currencies,
    )


def plot_refunds_owed(data: Data, *, as_of: datetime | str, currencies: int | None = 6) -> Figure:
    """Refunds owed to senders as of `as_of` (`refunds_owed`): per currency, by how long they
    have been owed, stacked by how the refund stands (pending, failed), in major units; one
    panel per currency (the `currencies` with the most transfers owed; None: every one)."""
    from matplotlib.colors import to_rgba
    from matplotlib.patches import Patch

    owed = refunds_owed(data, as_of=as_of)
    if owed.empty:
        return _nothing(owed, "No refunds owed to senders in this data.")
    order = owed.groupby("currency")["transaction_count"].sum().sort_values(ascending=False)
    codes = [str(c) for c in order.index]
    kept = codes if currencies is None else codes[:currencies]
    ages = [label for label, _, _ in AGE_BUCKETS]
    parts = {"refund pending": "refund_pending", "refund failed": "refund_failed"}
    colors = {name: to_rgba(f"C{i}") for i, name in enumerate(parts)}
    fig, axes = figure(len(kept))
    for ax, currency in zip(axes, kept, strict=True):
        rows = owed[owed["currency"] == currency]
        major = _major(rows, "owed_minor")
        series = {
            name: np.array(
                [
                    major[(rows["lifecycle"] == lifecycle) & (rows["age"] == age)].sum()
                    for age in ages
                ]
            )
            for name, lifecycle in parts.items()
        }
        _bars(ax, ages, series, stacked=True, colors=colors)
        _finish(ax, owed, currency, f"{currency} owed", "owed for", key=False)
    title = f"Refunds owed to senders as of {pd.Timestamp(as_of):%d %b %Y}"
    if left_out := codes[len(kept) :]:
        title += f"\nthe {len(kept)} currencies with most owed; not drawn: {', '.join(left_out)}"
    if source := owed.attrs.get("source"):
        title += f"\n{source}"
    drawn = set(owed["lifecycle"])
    handles = [Patch(color=colors[n], label=n) for n, lc in parts.items() if lc in drawn]
    place(fig, axes, grid=True, title=title, handles=handles)
    return fig
