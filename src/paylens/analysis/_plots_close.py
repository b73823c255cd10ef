"""The plot twins of the month-end helpers: the platform's P&L, the refunds owed and the balance
roll-forward, drawn as
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
from ._rollforward import balance_rollforward

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _major(frame: pd.DataFrame, column: str) -> pd.Series:
    """A minor-unit column in major units of each row's currency, for drawing only."""
    return frame[column].astype(float) / np.power(10.0, frame["decimals"].astype(float))


def _busiest(
    frame: pd.DataFrame, count: str, currencies: int | None
) -> tuple[list[str], list[str]]:
    """Every currency, busiest first by `count`, and those drawn (the first `currencies`)."""
    order = frame.groupby("currency")[count].sum().sort_values(ascending=False)
    codes = [str(c) for c in order.index]
    return codes, codes if currencies is None else codes[:currencies]


def _grid_title(
    title: str, frame: pd.DataFrame, codes: list[str], kept: list[str], most: str
) -> str:
    """A small-multiples title naming the currencies not drawn and the data's source."""
    if left_out := codes[len(kept) :]:
        title += f"\nthe {len(kept)} currencies with most {most}; not drawn: {', '.join(left_out)}"
    if source := frame.attrs.get("source"):
        title += f"\n{source}"
    return title


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
    codes, kept = _busiest(owed, "transaction_count", currencies)
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
    title = _grid_title(
        f"Refunds owed to senders as of {pd.Timestamp(as_of):%d %b %Y}", owed, codes, kept, "owed"
    )
    drawn = set(owed["lifecycle"])
    handles = [Patch(color=colors[n], label=n) for n, lc in parts.items() if lc in drawn]
    place(fig, axes, grid=True, title=title, handles=handles)
    return fig


#: How the roll-forward chart names each kind of movement.
_MOVEMENT_NAMES = {
    "incoming_credits_minor": "incoming credits",
    "outgoing_debits_minor": "outgoing debits",
    "outgoing_fees_minor": "fees the sender paid",
    "refunds_credited_minor": "refunds credited back",
    "card_pulls_minor": "card pulls",
    "card_refunds_minor": "card refunds",
}


def plot_balance_rollforward(
    data: Data, *, period: str = "month", currencies: int | None = 6
) -> Figure:
    """The balance roll-forward (`balance_rollforward`) per currency and period, over its
    internal accounts: the movements by kind (credits right of zero, debits left) and the
    breaks (reported closing - expected closing) beside them, in major units of each currency;
    a period's label counts the accounts whose balance breaks. One panel per currency (the
    `currencies` with most movements; None: every one)."""
    from matplotlib.colors import to_rgba
    from matplotlib.patches import Patch

    rolled = balance_rollforward(data, period=period)
    if rolled.empty:
        return _nothing(rolled, "No balance read in this data: nothing to roll forward.")
    codes, kept = _busiest(rolled, "movement_count", currencies)
    names = {**_MOVEMENT_NAMES, "break_minor": "break (reported - expected)"}
    colors = {name: to_rgba(f"C{i}") for i, name in enumerate(names.values())}
    colors[names["break_minor"]] = to_rgba("black")
    fig, axes = figure(len(kept))
    for ax, currency in zip(axes, kept, strict=True):
        rows = rolled[rolled["currency"] == currency]
        per = rows.groupby("period", sort=True)
        scale = float(10 ** int(rows["decimals"].iloc[0]))  # one currency: one scale
        major = {names[c]: per[c].sum().astype(float) / scale for c in names}
        breaking = per["break_minor"].agg(lambda b: int((b != 0).sum()))
        labels = [
            f"{p} · {n} break" + ("s" if n != 1 else "") if n else str(p)
            for p, n in breaking.items()
        ]
        y = np.arange(len(labels))
        height = 0.8
        right, left = np.zeros(len(y)), np.zeros(len(y))
        for name in _MOVEMENT_NAMES.values():
            v = np.nan_to_num(major[name].to_numpy(dtype=float))
            base = np.where(v >= 0, right, left)
            ax.barh(y - 0.2, v, height / 2, left=base, label=name, color=colors[name])
            right, left = right + np.maximum(v, 0), left + np.minimum(v, 0)
        broken = major[names["break_minor"]].to_numpy(dtype=float)
        ax.barh(y + 0.2, broken, height / 2, color=colors[names["break_minor"]])
        ax.axvline(0, color="0.3", linewidth=0.8)
        ax.set_yticks(y, labels)
        ax.invert_yaxis()
        ax.set_title(currency)
        ax.set_xlabel(f"{currency} moved, over its accounts")
        ax.grid(axis="x", alpha=0.3)
    title = _grid_title(
        f"Balance roll-forward by {period.lower()}: movements and breaks",
        rolled,
        codes,
        kept,
        "movements",
    )
    handles = [Patch(color=colors[n], label=n) for n in names.values()]
    place(fig, axes, grid=True, title=title, handles=handles)
    return fig
