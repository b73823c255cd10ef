"""The plot twin of each helper: the same arguments, a labelled matplotlib Figure back.

Figures are built without pyplot (no global state, nothing shown, any backend): display one
in a notebook by leaving it as a cell's value, or save it with `fig.savefig(...)`. Sandbox data
says so in the title. matplotlib is imported only when a plot is drawn.

What every figure keeps to: bars start at zero on a linear axis (a bar's length is its value);
durations are in hours or days, whichever reads better; months run in time order; legends sit
outside the bars; `top=` keeps the largest groups and the figure says what it left out; money
is drawn per currency, one panel each (small multiples), never on a shared axis; an empty
result draws an empty, labelled figure saying so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ._cards import card_summary
from ._common import MISSING_LABEL, By, Data, History
from ._failures import failure_breakdown
from ._fees import ReferenceRates, fee_breakdown
from ._lifecycle import UNSUCCESSFUL
from ._revenue import COMPLETE, SAME_CURRENCY, revenue
from ._settlement import settlement_times

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: Every figure's width, a row of bars' height (in a small multiple) and the least width of a
#: small multiple's bars, in inches; `_PAD` is kept clear around each block of text.
_WIDTH = 11.0
_ROW_HEIGHT = 0.35
_GRID_ROW = 0.25
_GRID_BARS = 2.0
_PAD = 0.1
#: Keys that are months: groups keyed by one are ordered in time, never cut by `top=`.
_MONTHS = ("month", "settlement_month")


def _keys(by: By) -> list[str]:
    if by is None:
        return []
    return [by] if isinstance(by, str) else list(by)


def _labels(frame: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    """One label per row: its key values joined, `all` when there are none."""
    if not columns:
        return ["all"] * len(frame)
    parts = frame[list(columns)].astype("string").fillna(MISSING_LABEL)
    return [" · ".join(row) for row in parts.itertuples(index=False, name=None)]


def _bars(
    ax: Axes,
    labels: list[str],
    series: Mapping[str, Sequence[float] | np.ndarray],
    stacked: bool,
    colors: Mapping[str, tuple[float, float, float, float]] | None = None,
) -> None:
    """Horizontal bars from zero, one row per label: stacked, or side by side; `colors` gives
    each series its own colour (else the axes' cycle, in order)."""
    y = np.arange(len(labels))
    left = np.zeros(len(labels))
    height = 0.8 if stacked else 0.8 / max(len(series), 1)
    for i, (name, values) in enumerate(series.items()):
        v = np.nan_to_num(np.asarray(values, dtype=float))
        color = colors[name] if colors else None
        if stacked:
            ax.barh(y, v, height, left=left, label=name, color=color)
            left = left + v
        else:
            ax.barh(y - 0.4 + height * (i + 0.5), v, height, label=name, color=color)
    ax.set_yticks(y, labels)
    ax.invert_yaxis()


def _figure(panels: int = 1) -> tuple[Figure, list[Axes]]:
    """A figure of `panels` axes (at least one); `_place` sizes it and places them once drawn on."""
    from matplotlib.figure import Figure  # matplotlib loads only when a plot is asked for

    fig = Figure(figsize=(_WIDTH, 4.0))
    return fig, [fig.add_subplot(max(panels, 1), 1, i + 1) for i in range(max(panels, 1))]


def _place(
    fig: Figure,
    axes: Sequence[Axes],
    *,
    grid: bool = False,
    title: str = "",
    handles: Sequence[Artist] = (),
) -> None:
    """Size the figure and place its panels from what they show, measured once: the widest bar
    label and legend entry, the lines of each title and axis label. Nothing is laid out again
    when the figure is drawn (a constrained layout measures every text on every draw).

    One panel a row, each legend right of its bars; or, with `grid`, small multiples: as many
    panels a row as leave each at least `_GRID_BARS` inches of bars, the grouping said once a
    row, and the figure's `title` and one legend of `handles` above them all."""
    from matplotlib import rcParams
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.font_manager import FontProperties

    measure = RendererAgg(1, 1, fig.dpi)

    def points(size: float | str) -> float:
        return float(FontProperties(size=size).get_size_in_points())

    def widest(texts: Sequence[str], size: float) -> float:
        """In points, with a tenth to spare: hinted glyphs are wider at a lower resolution."""
        font = FontProperties(size=size)
        pixels = max(
            (measure.get_text_width_height_descent(t, font, ismath=False)[0] for t in texts if t),
            default=0.0,
        )
        return 1.1 * pixels * 72 / fig.dpi

    def lines(text: str) -> int:
        return text.count("\n") + 1 if text else 0

    tick, label = points(rcParams["ytick.labelsize"]), points(rcParams["axes.labelsize"])
    heading, key = points(rcParams["axes.titlesize"]), points("small")
    ticks = rcParams["ytick.major.size"] + rcParams["ytick.major.pad"]
    labels = widest([t.get_text() for ax in axes for t in ax.get_yticklabels()], tick)
    ylabel = 1.2 * label + rcParams["axes.labelpad"] if any(ax.get_ylabel() for ax in axes) else 0
    # a legend right of the bars: its pads outside and in, the handle, a gap, the widest entry
    legends = [legend for ax in axes if (legend := ax.get_legend()) is not None]
    entries = [t.get_text() for legend in legends for t in legend.get_texts()]
    legend_width = widest(entries, key) + 4.1 * key if entries else 0.0
    left = (ylabel + labels + ticks) / 72 + _PAD  # inches left of each panel's bars
    right = max(legend_width / 72, 0.3)  # room for the legend, or for the last tick's label
    usable = _WIDTH - 2 * _PAD
    columns = 1
    if grid:
        columns = max(1, min(len(axes), int(usable // (left + right + _GRID_BARS))))
    column = usable / columns
    bars = (column - left - right) / (1.01 if entries else 1.0)  # the legend sits at 1.01
    rows = max(max((len(ax.get_yticks()) for ax in axes), default=1), 1)
    height = (_GRID_ROW if grid else _ROW_HEIGHT) * rows + 0.5
    if entries:
        per_legend = max(len(legend.get_texts()) for legend in legends)
        height = max(height, (1.5 * per_legend + 1.0) * key / 72)
    above = (max(lines(ax.get_title()) for ax in axes) * 1.2 * heading + 6.0) / 72 + _PAD
    below = (ticks + 1.2 * tick + rcParams["axes.labelpad"]) / 72 + _PAD
    below += max(lines(ax.get_xlabel()) for ax in axes) * 1.2 * label / 72
    top = _PAD + (lines(title) * 1.2 * heading / 72 + _PAD if title else 0.0)
    top += 1.6 * key / 72 + _PAD if handles else 0.0
    grid_rows = -(-len(axes) // columns)
    total = top + grid_rows * (above + height + below) + _PAD
    fig.set_size_inches(_WIDTH, total)
    for i, ax in enumerate(axes):
        row, col = divmod(i, columns)
        x = _PAD + col * column + left
        y = total - top - row * (above + height + below) - above - height
        ax.set_position((x / _WIDTH, y / total, bars / _WIDTH, height / total))
        if col:
            ax.set_ylabel("")  # said by the row's first panel
    if title:
        fig.suptitle(title, x=0.5, y=1 - _PAD / total, va="top", fontsize=heading)
    if handles:
        fig.legend(
            handles=handles,
            loc="upper center",
            bbox_to_anchor=(0.5, 1 - (top - 1.6 * key / 72 - _PAD) / total),
            ncols=len(handles),
            fontsize="small",
            frameon=False,
        )


def _finish(
    ax: Axes,
    frame: pd.DataFrame,
    title: str,
    xlabel: str,
    ylabel: str,
    note: str = "",
    *,
    key: bool = True,
) -> None:
    """Title (with the data's source), axis labels, and the legend right of the bars; `key=False`
    for a panel whose legend and source the figure's first panel gives."""
    source = frame.attrs.get("source") if key else None
    ax.set_title(f"{title}\n{source}" if source else title)
    ax.set_xlabel(xlabel + (f"\n{note}" if note else ""))
    ax.set_ylabel(ylabel)
    if len(ax.get_yticks()) and ax.get_legend_handles_labels()[0]:
        if key:
            _legend(ax)
    else:
        ax.text(0.5, 0.5, "nothing to show", transform=ax.transAxes, ha="center", va="center")
        ax.set_yticks([])
    ax.set_xlim(left=0)
    ax.grid(axis="x", alpha=0.3)


def _legend(ax: Axes) -> None:
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)


def _top(
    frame: pd.DataFrame, keys: Sequence[str], column: str, top: int
) -> tuple[pd.DataFrame, str]:
    """The groups to draw and a note of what was left out. Groups keyed by a month are all
    drawn, in time order; others are the `top` by `column`, largest first."""
    if not isinstance(top, int) or top < 1:
        from paylens.errors import InvalidArgumentError

        raise InvalidArgumentError("top", f"give a whole number of groups >= 1, not {top!r}")
    months = [k for k in keys if k in _MONTHS]
    if months:
        return frame.sort_values(months, kind="stable"), ""
    ordered = frame.sort_values(column, ascending=False, kind="stable")
    shown, left = ordered.head(top), ordered.iloc[top:]
    if not len(left):
        return shown, ""
    hidden = int(left[column].fillna(0).sum())
    return shown, f"{len(left)} smaller group(s) not shown (top={top}), {hidden:,} by {column}"


def _currencies(frame: pd.DataFrame, currency: str) -> list[tuple[str, pd.DataFrame]]:
    """The frame's rows per currency, the busiest first (an empty frame: one empty part)."""
    if frame.empty:
        return [("no data", frame)]
    order = frame.groupby(currency)["transaction_count"].sum().sort_values(ascending=False)
    return [(str(c), frame[frame[currency] == c]) for c in order.index]


def plot_fee_breakdown(
    data: Data,
    by: By = "corridor",
    *,
    reference_rates: ReferenceRates | None = None,
    status: str | Sequence[str] | None = "COMPLETED",
    top: int = 15,
) -> Figure:
    """Fee components of the `top` groups by transaction count (every month when grouped by
    one), stacked, in % of the amount sent (a share, so groups in different currencies
    compare): the service's fixed and variable fee, the platform's fee, the
    counterparty's fixed fee, the residual when any, and the FX margin when `reference_rates`
    are given. Completed transfers by default (`status=`)."""
    keys = _keys(by)
    frame = fee_breakdown(data, keys, reference_rates=reference_rates, status=status)
    shown, note = _top(frame, keys, "transaction_count", top)
    sent = shown["sent_minor"].astype(float).replace(0, np.nan)
    parts = {
        "service fixed fee": "service_fixed_fee_minor",
        "service variable fee": "service_variable_fee_minor",
        "platform fee": "platform_fee_minor",
        "counterparty fixed fee": "counterparty_fixed_fee_minor",
        "residual (unexplained)": "residual_minor",
        "FX margin vs reference": "fx_spread_cost_minor",
    }
    series = {
        name: (shown[column].astype(float) / sent * 100).to_numpy()
        for name, column in parts.items()
        if shown[column].fillna(0).ne(0).any()
    }
    labels = [
        f"{label} ({cur})"
        for label, cur in zip(_labels(shown, keys), shown["sent_currency"], strict=True)
    ]
    fig, (ax,) = _figure()
    _bars(ax, labels, series, stacked=True)
    grouping = ", ".join(keys) or "all"
    _finish(
        ax,
        frame,
        f"Fees of outgoing transactions by {grouping}",
        "% of the amount sent",
        f"{grouping} (sending currency)",
        note,
    )
    _place(fig, [ax])
    return fig


def plot_revenue(
    data: Data,
    by: By = "settlement_month",
    *,
    reference_rates: ReferenceRates | None = None,
    top: int = 15,
) -> Figure:
    """Revenue of completed transfers per group (settlement month by default, in time
    order): service, platform and counterparty fees and the FX margin, stacked, in major units
    of each sending currency, one panel per currency in a grid of small multiples. A group
    without a reference rate shows no FX margin and says so in its label. A part has one
    colour in every panel; above the panels, the figure's title gives the data's source and
    one legend every part drawn in any panel."""
    from matplotlib.colors import to_rgba
    from matplotlib.patches import Patch

    keys = _keys(by)
    frame = revenue(data, keys, reference_rates=reference_rates, major=True)
    parts = {
        "service fees": ("service_fixed_fee_major", "service_variable_fee_major"),
        "platform fee": ("platform_fee_major",),
        "counterparty fee": ("counterparty_fixed_fee_major",),
        "FX margin": ("fx_margin_major",),
    }
    colors = {name: to_rgba(f"C{i}") for i, name in enumerate(parts)}
    # each part's amount and whether any of its columns is non-zero, per row of the frame,
    # computed once (panels take their rows from them)
    amounts = {
        name: frame[list(cols)].astype(float).sum(axis=1, min_count=1)
        for name, cols in parts.items()
    }
    nonzero = {name: frame[list(cols)].fillna(0).ne(0).any(axis=1) for name, cols in parts.items()}
    drawn: set[str] = set()
    grouping = ", ".join(keys) or "all"
    parts_of = _currencies(frame, "sent_currency")
    fig, axes = _figure(len(parts_of))
    for ax, (currency, part) in zip(axes, parts_of, strict=True):
        shown, note = _top(part, keys, "transaction_count", top)
        series = {
            name: amounts[name].loc[shown.index].to_numpy()
            for name in parts
            if nonzero[name].loc[shown.index].any()
        }
        drawn.update(series)
        labels = [
            label + ("" if status in (COMPLETE, SAME_CURRENCY) else " (no FX ref.)")
            for label, status in zip(_labels(shown, keys), shown["fx_margin_status"], strict=True)
        ]
        _bars(ax, labels, series, stacked=True, colors=colors)
        _finish(ax, frame, currency, f"{currency} (major units)", grouping, note, key=False)
    title = f"Revenue of completed transfers by {grouping}, in each sending currency"
    source = frame.attrs.get("source")
    _place(
        fig,
        axes,
        grid=True,
        title=f"{title}\n{source}" if source else title,
        # the one legend: every part any panel draws
        handles=[Patch(color=colors[name], label=name) for name in parts if name in drawn],
    )
    return fig


def _duration_unit(values: pd.Series) -> tuple[str, float]:
    """Hours, or days when the longest is over three days."""
    longest = float(values.max()) if values.notna().any() else 0.0
    return ("days", 86_400.0) if longest > 3 * 86_400 else ("hours", 3_600.0)


def plot_settlement_times(
    data: Data,
    by: By = "rail",
    *,
    type: str = "OUTGOING",
    as_of: datetime | str | None = None,
    instant_sla: timedelta = timedelta(seconds=60),
    status_history: History = None,
    top: int = 20,
) -> Figure:
    """Kaplan–Meier p50, p90 and p99 of the time from creation to settlement (open transfers
    censored) of the `top` groups by transaction count, side by side on a linear axis in hours
    (days when longer); each label gives the completed and open counts, and a quantile the open
    transfers leave unknowable is marked `p90 n/a`."""
    keys = _keys(by)
    frame = settlement_times(
        data, keys, type=type, as_of=as_of, instant_sla=instant_sla, status_history=status_history
    )
    shown, note = _top(frame, keys, "transaction_count", top)
    quantiles = ["p50_seconds", "p90_seconds", "p99_seconds"]
    unit, size = _duration_unit(shown["p99_seconds"].fillna(shown["p90_seconds"]))
    series = {
        q.removesuffix("_seconds"): (shown[q].astype(float) / size).to_numpy(na_value=np.nan)
        for q in quantiles
    }
    labels = []
    for label, row in zip(_labels(shown, keys), shown.itertuples(), strict=True):
        unknown = [q.removesuffix("_seconds") for q in quantiles if pd.isna(getattr(row, q))]
        extra = f"; {', '.join(unknown)} n/a" if unknown and row.completed_count else ""
        labels.append(f"{label} (done {row.completed_count:,}, open {row.open_count:,}{extra})")
    fig, (ax,) = _figure()
    _bars(ax, labels, series, stacked=False)
    grouping = ", ".join(keys) or "all"
    _finish(
        ax,
        frame,
        f"Settlement times of {type.lower()} transactions by {grouping}",
        f"{unit} from creation to settlement (Kaplan–Meier, open transfers censored)",
        f"{grouping} (completed, open)",
        note,
    )
    _place(fig, [ax])
    return fig


def plot_failure_breakdown(
    data: Data,
    by: By = "rail",
    *,
    type: str = "OUTGOING",
    top: int = 15,
    reasons: int = 8,
) -> Figure:
    """What went wrong, as % of resolved transactions, of the `top` groups by attempts,
    stacked by lifecycle and reason (the `reasons` most frequent; the rest as `other`).
    Removed reasons read QUOTE_EXECUTION_FAILED; the coarse payout fallback is marked. Counts
    are added across the currencies of a group (counts, not money); open transfers are in no
    rate and are given in the label."""
    keys = _keys(by)
    frame = failure_breakdown(data, keys, type=type)
    names = [
        f"{life}: {'no reason' if pd.isna(r) else r}{' (coarse)' if c is True else ''}"
        for life, r, c in zip(
            frame["lifecycle"], frame["failure_reason"], frame["reason_coarse"], strict=True
        )
    ]
    frame_ = frame.assign(_group=_labels(frame, keys), _reason=names)
    per_currency = frame_.drop_duplicates(["_group", "currency"])
    totals = per_currency.groupby("_group")[
        ["attempted_count", "resolved_count", "open_count"]
    ].sum()
    bad = frame_[frame_["lifecycle"].isin(UNSUCCESSFUL)]
    counts = bad.pivot_table(
        index="_group", columns="_reason", values="transaction_count", aggfunc="sum", fill_value=0
    )
    order = list(counts.sum().sort_values(ascending=False, kind="stable").index)
    kept = order[:reasons]
    if len(order) > reasons:
        counts["other"] = counts[order[reasons:]].sum(axis=1)
        kept.append("other")
    groups = totals.assign(transaction_count=totals["attempted_count"]).reset_index()
    if any(k in _MONTHS for k in keys):  # a month leads the label: label order is time order
        shown, note = groups.sort_values("_group", kind="stable"), ""
    else:
        shown, note = _top(groups, [], "transaction_count", top)
    index = list(shown["_group"])
    counts = counts.reindex(index=index, columns=kept, fill_value=0)
    resolved = totals.loc[index, "resolved_count"].replace(0, np.nan)
    rates = counts.div(resolved, axis=0) * 100
    labels = [
        f"{g} (resolved {totals.loc[g, 'resolved_count']:,}, open {totals.loc[g, 'open_count']:,})"
        for g in index
    ]
    fig, (ax,) = _figure()
    _bars(ax, labels, {name: rates[name].to_numpy() for name in kept}, stacked=True)
    grouping = ", ".join(keys) or "all"
    _finish(
        ax,
        frame,
        f"Unsuccessful {type.lower()} transactions by {grouping}, lifecycle and reason",
        "% of resolved transactions",
        f"{grouping} (resolved, open)",
        note,
    )
    _place(fig, [ax])
    return fig


def plot_card_summary(
    data: Data,
    by: By = "merchant",
    *,
    status: str | Sequence[str] | None = None,
    as_of: datetime | str | None = None,
    top: int = 15,
) -> Figure:
    """Authorized, settled and refunded amounts and open holds of the `top` groups by
    authorized amount, side by side, in major units, one panel per currency (amounts in
    different currencies never share an axis)."""
    keys = _keys(by)
    frame = card_summary(data, keys, status=status, as_of=as_of, major=True)
    parts = _currencies(frame, "currency")
    fig, axes = _figure(len(parts))
    for ax, (currency, part) in zip(axes, parts, strict=True):
        shown, note = _top(part, keys, "authorized_minor", top)
        series = {
            name: shown[f"{column}_major"].to_numpy(dtype=float, na_value=np.nan)
            for name, column in (
                ("authorized", "authorized"),
                ("settled", "settled"),
                ("refunded", "refunded"),
                ("open holds", "open_hold"),
            )
        }
        _bars(ax, _labels(shown, keys), series, stacked=False)
        grouping = ", ".join(keys) or "all"
        _finish(
            ax,
            frame,
            f"Card transactions in {currency} by {grouping}",
            f"amount ({currency}, major units)",
            grouping,
            note,
        )
    _place(fig, axes)
    return fig
