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
from ._layout import figure, place
from ._lifecycle import UNSUCCESSFUL
from ._revenue import COMPLETE, SAME_CURRENCY, revenue
from ._settlement import settlement_times

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

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
    fig, (ax,) = figure()
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
    place(fig, [ax])
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
    fig, axes = figure(len(parts_of))
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
    place(
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
    fig, (ax,) = figure()
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
    place(fig, [ax])
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
    fig, (ax,) = figure()
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
    place(fig, [ax])
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
    fig, axes = figure(len(parts))
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
    place(fig, axes)
    return fig
