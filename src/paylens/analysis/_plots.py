"""The plot twin of each helper: the same arguments, a labelled matplotlib Figure back.

Figures are built without pyplot (no global state, nothing shown, any backend): display one
in a notebook by leaving it as a cell's value, or save it with `fig.savefig(...)`. Sandbox data
says so in the title. matplotlib is imported only when a plot is drawn.

What every figure keeps to, so it can go in a deck as it is: titles and axes in words (never a
column's name); bars start at zero on a linear axis (a bar's length is its value), except
durations, drawn as points on a log axis with ticks in seconds, minutes, hours and days, so an
instant rail's seconds and a wire's days read in one chart; months read "Sep 2025" and run in
time order, a month the data covers only in part marked "(partial)"; a missing key reads
"unknown rail" (or whatever the key is); legends sit outside the bars; `top=` keeps the
largest groups and the figure says what it left out, in transactions; money is drawn per
currency in its major units, one panel each (small multiples), never on a shared axis, the
unit said once; "other" is never the largest segment (more reasons are drawn until it is
not); a result with nothing in it draws one sentence saying so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ._cards import card_summary
from ._collected import COMPLETE, SAME_CURRENCY, fees_collected
from ._common import By, Data, History, source
from ._failures import failure_breakdown
from ._fees import ReferenceRates, fee_breakdown
from ._layout import figure, place
from ._lifecycle import UNSUCCESSFUL
from ._refunds import REFUND_STATUSES, refund_summary
from ._settlement import settlement_times

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: Keys that are months: groups keyed by one are ordered in time, never cut by `top=`.
_MONTHS = ("month", "settlement_month")

#: A key's name in words, where replacing its underscores is not enough.
_WORDS = {
    "mcc": "merchant category",
    "customer_id": "customer",
    "source_type": "funding source",
    "sent_currency": "sending currency",
    "rail": "rail",
}

#: A month whose data starts or ends more than this far inside it is marked partial.
_SLACK = pd.Timedelta(days=1)


#: What a column name's unit suffix reads as in a heading (major units go without saying).
_SUFFIXES = (("_major", ""), ("_minor", " (minor units)"), ("_seconds", " (seconds)"))


def words(name: str) -> str:
    """A column's name as words: `settlement_month` -> 'settlement month', `fees_major` ->
    'fees', `transaction_count` -> 'transactions', `fx_margin_rate` -> 'FX margin rate'."""
    if name in _WORDS:
        return _WORDS[name]
    unit = ""
    for suffix, said in _SUFFIXES:
        if name.endswith(suffix):
            name, unit = name.removesuffix(suffix), said
    if name == "transaction_count":
        name = "transactions"
    elif name.endswith("_count"):
        name = name.removesuffix("_count")
    text = name.replace("_", " ")
    text = " ".join("FX" if w == "fx" else w for w in text.split(" "))
    return text + unit


def _keys(by: By) -> list[str]:
    if by is None:
        return []
    return [by] if isinstance(by, str) else list(by)


def _grouping(keys: Sequence[str]) -> str:
    return ", ".join(map(words, keys)) or "all"


Span = tuple[pd.Timestamp, pd.Timestamp] | None


def data_span(data: Data, table: str = "transactions", column: str = "created_at") -> Span:
    """The first and last `column` instant of the data (None: no rows): which months it
    covers only in part."""
    src = source(data, table, required=())
    if not src.has(column):
        return None
    frame = src.data
    if isinstance(frame, pd.DataFrame):
        values = pd.to_datetime(frame[column], utc=True).dropna()
        return (values.min(), values.max()) if len(values) else None
    from paylens.warehouse import Warehouse

    rel = frame.relation(table) if isinstance(frame, Warehouse) else frame
    # as epoch microseconds: DuckDB hands TIMESTAMPTZ to Python only through pytz
    first, last = rel.aggregate(f"epoch_us(min({column})), epoch_us(max({column}))").fetchall()[0]
    if first is None:
        return None
    return pd.Timestamp(first, unit="us", tz="UTC"), pd.Timestamp(last, unit="us", tz="UTC")


def month_label(value: object, span: Span = None) -> str:
    """A month as 'Sep 2025', with ' (partial)' when `span` (the data's first and last
    instants) starts or ends more than a day inside it."""
    month = pd.Timestamp(str(value))
    text = f"{month:%b %Y}"
    if span is not None:
        start = month.tz_localize("UTC") if month.tzinfo is None else month
        end = start + pd.offsets.MonthBegin(1)
        if span[0] > start + _SLACK or span[1] < end - _SLACK:
            text += " (partial)"
    return text


def _labels(frame: pd.DataFrame, columns: Sequence[str], span: Span = None) -> list[str]:
    """One label per row: its key values joined (months as 'Sep 2025', a missing value as
    'unknown <key>'), `all` when there are none."""
    if not columns:
        return ["all"] * len(frame)
    parts: list[list[str]] = []
    for column in columns:
        values = frame[column].astype(object)
        parts.append(
            [
                f"unknown {words(column)}"
                if v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v))
                else month_label(v, span)
                if column in _MONTHS
                else str(v)
                for v in values
            ]
        )
    return [" · ".join(row) for row in zip(*parts, strict=True)]


def _bars(
    ax: Axes,
    labels: list[str],
    series: Mapping[str, Sequence[float] | np.ndarray],
    stacked: bool,
    colors: Mapping[str, tuple[float, float, float, float]] | None = None,
) -> None:
    """Horizontal bars from zero, one row per label: stacked (positive parts to the right of
    zero, negative ones, a negative FX margin say, to its left: never drawn over the others),
    or side by side; `colors` gives each series its own colour (else the axes' cycle)."""
    y = np.arange(len(labels))
    right, left = np.zeros(len(labels)), np.zeros(len(labels))
    height = 0.8 if stacked else 0.8 / max(len(series), 1)
    for i, (name, values) in enumerate(series.items()):
        v = np.nan_to_num(np.asarray(values, dtype=float))
        color = colors[name] if colors else None
        if stacked:
            start = np.where(v < 0, left, right)
            ax.barh(y, v, height, left=start, label=name, color=color)
            right = right + np.where(v > 0, v, 0)
            left = left + np.where(v < 0, v, 0)
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
    log: bool = False,
) -> None:
    """Title (with the data's source), axis labels, and the legend right of the bars; `key=False`
    for a panel whose legend and source the figure's first panel gives."""
    source = frame.attrs.get("source") if key else None
    ax.set_title(f"{title}\n{source}" if source else title)
    ax.set_xlabel(xlabel + (f"\n{note}" if note else ""))
    ax.set_ylabel(ylabel)
    if key and ax.get_legend_handles_labels()[0]:
        _legend(ax)
    if not log:
        # from zero, unless a bar is negative: then zero is marked
        low = min(0.0, float(ax.dataLim.x0)) if ax.patches else 0.0
        ax.set_xlim(left=low)
        if low < 0:
            ax.axvline(0, color="0.3", linewidth=0.8)
    ax.grid(axis="x", alpha=0.3)


def _legend(ax: Axes) -> None:
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)


def _nothing(frame: pd.DataFrame, sentence: str) -> Figure:
    """The figure of an empty result: one sentence saying so (with the data's source)."""
    fig, (ax,) = figure()
    source = frame.attrs.get("source")
    ax.set_axis_off()
    ax.text(0.0, 0.5, sentence, va="center")
    if source:  # where the data was to come from, small, under the sentence
        ax.text(0.0, 0.0, f"data: {source}", va="bottom", fontsize="small", color="0.4")
    fig.set_size_inches(fig.get_size_inches()[0], 0.8)
    ax.set_position((0.02, 0.0, 0.96, 1.0))
    return fig


def _top(
    frame: pd.DataFrame, keys: Sequence[str], column: str, top: int
) -> tuple[pd.DataFrame, str]:
    """The groups to draw and a note of what was left out, in transactions. Groups keyed by
    a month are all drawn, in time order; others are the `top` by `column`, largest first."""
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
    hidden = int(left["transaction_count"].fillna(0).sum())
    return shown, (f"{len(left)} smaller group(s) not shown (top={top}): {hidden:,} transaction(s)")


def _currencies(
    frame: pd.DataFrame, currency: str, limit: int | None = None
) -> tuple[list[tuple[str, pd.DataFrame]], list[str]]:
    """The frame's rows per currency, the busiest first, at most `limit` of them, and the
    currencies left out."""
    order = frame.groupby(currency)["transaction_count"].sum().sort_values(ascending=False)
    codes = [str(c) for c in order.index]
    kept = codes if limit is None else codes[:limit]
    return [(c, frame[frame[currency] == c]) for c in kept], codes[len(kept) :]


#: The fee components a fee breakdown stacks, and their columns.
_FEE_PARTS = {
    "service fixed fee": "service_fixed_fee_minor",
    "service variable fee": "service_variable_fee_minor",
    "platform fee": "platform_fee_minor",
    "counterparty fixed fee": "counterparty_fixed_fee_minor",
    "residual (unexplained)": "residual_minor",
    "FX margin vs reference": "fx_spread_cost_minor",
}


def plot_fee_breakdown(
    data: Data,
    by: By = "corridor",
    *,
    reference_rates: ReferenceRates | None = None,
    status: str | Sequence[str] | None = "COMPLETED",
    top: int = 15,
    currencies: int | None = 6,
) -> Figure:
    """Fee components of the `top` groups by transaction count, stacked, in % of the amount
    sent (a share, so groups in different currencies compare): the service's fixed and
    variable fee, the platform's fee, the counterparty's fixed fee, the residual when any, and
    the FX margin when `reference_rates` are given. Grouped by a month, every month is drawn,
    one panel per sending currency (the `currencies` busiest; None: every one). Completed
    transfers by default (`status=`)."""
    keys = _keys(by)
    frame = fee_breakdown(data, keys, reference_rates=reference_rates, status=status)
    if frame.empty:
        return _nothing(frame, "No outgoing transfers in this data: no fees to show.")
    if any(k in _MONTHS for k in keys):  # months by currency: a panel per currency
        whole = frame["sent_minor"].astype(float).replace(0, np.nan)
        shares = {
            name: (frame[column].astype(float) / whole * 100).where(frame[column].fillna(0).ne(0))
            for name, column in _FEE_PARTS.items()
        }
        return _per_currency(
            frame,
            keys,
            shares,
            f"Fees of outgoing transfers by {_grouping(keys)}, in % of the amount sent",
            lambda currency: f"% of the amount sent ({currency})",
            data_span(data, "outgoing_fees"),
            top=top,
            currencies=currencies,
        )
    shown, note = _top(frame, keys, "transaction_count", top)
    sent = shown["sent_minor"].astype(float).replace(0, np.nan)
    series = {
        name: (shown[column].astype(float) / sent * 100).to_numpy()
        for name, column in _FEE_PARTS.items()
        if shown[column].fillna(0).ne(0).any()
    }
    span = data_span(data, "outgoing_fees")
    labels = [
        f"{label} ({cur})"
        for label, cur in zip(_labels(shown, keys, span), shown["sent_currency"], strict=True)
    ]
    grouping = _grouping(keys)
    titles = (
        f"Fees of outgoing transfers by {grouping}",
        "% of the amount sent",
        f"{grouping} (sending currency)",
    )
    return _one_panel(frame, labels, series, titles, note)


def plot_fees_collected(
    data: Data,
    by: By = "settlement_month",
    *,
    reference_rates: ReferenceRates | None = None,
    top: int = 15,
    currencies: int | None = 6,
) -> Figure:
    """Fees collected on completed transfers per group (settlement month by default, in time
    order), by who earns them: the platform's fee (its revenue), the service's fees, the
    counterparty's pass-through and the service's FX margin, stacked, in major units
    of each sending currency, one panel per currency in a grid of small multiples: the
    `currencies` busiest by transaction count (None: every one), the figure naming those left
    out. A group without a reference rate shows no FX margin and says so in its label. A part
    has one colour in every panel; above the panels, the figure's title gives the data's
    source and one legend every part drawn in any panel."""
    keys = _keys(by)
    frame = fees_collected(data, keys, reference_rates=reference_rates, major=True)
    if frame.empty:
        return _nothing(frame, "No completed outgoing transfers in this data: no fees to show.")
    parts = {
        # the platform's part first: the colours of `plot_platform_pnl` (blue, orange, red)
        "platform fee (platform revenue)": ("platform_fee_major",),
        "service fees": ("service_fixed_fee_major", "service_variable_fee_major"),
        "counterparty fee (pass-through)": ("counterparty_fixed_fee_major",),
        "service FX margin": ("fx_margin_major",),
    }
    # each part's amount per row of the frame, computed once (panels take their rows from it)
    amounts = {
        name: frame[list(cols)]
        .astype(float)
        .sum(axis=1, min_count=1)
        .where(frame[list(cols)].fillna(0).ne(0).any(axis=1))
        for name, cols in parts.items()
    }
    grouping = _grouping(keys)
    no_reference = ~frame["fx_margin_status"].isin([COMPLETE, SAME_CURRENCY])
    return _per_currency(
        frame,
        keys,
        amounts,
        f"Fees collected on completed transfers by {grouping}, by who earns them, in each"
        " sending currency (major units)",
        lambda currency: currency,
        data_span(data, "outgoing_fees"),
        top=top,
        currencies=currencies,
        flagged=(no_reference, " (no FX ref.)"),
    )


def _per_currency(
    frame: pd.DataFrame,
    keys: Sequence[str],
    amounts: Mapping[str, pd.Series],
    title: str,
    xlabel: Callable[[str], str],
    span: Span,
    *,
    top: int,
    currencies: int | None,
    flagged: tuple[pd.Series, str] | None = None,
) -> Figure:
    """Small multiples: one panel of stacked bars per sending currency (the `currencies`
    busiest, the title naming the rest), a part (`amounts`, NaN where a row has none) in one
    colour in every panel, one legend above them all; a row `flagged` says so in its label."""
    from matplotlib.colors import to_rgba
    from matplotlib.patches import Patch

    colors = {name: to_rgba(f"C{i}") for i, name in enumerate(amounts)}
    drawn: set[str] = set()
    grouping = _grouping(keys)
    parts_of, left_out = _currencies(frame, "sent_currency", currencies)
    fig, axes = figure(len(parts_of))
    for ax, (currency, part) in zip(axes, parts_of, strict=True):
        shown, note = _top(part, keys, "transaction_count", top)
        series = {
            name: values.loc[shown.index].to_numpy(dtype=float, na_value=np.nan)
            for name, values in amounts.items()
            if values.loc[shown.index].notna().any()
        }
        drawn.update(series)
        labels = _labels(shown, keys, span)
        if flagged is not None:
            mark = flagged[0].loc[shown.index]
            labels = [
                f"{label}{flagged[1] if m else ''}" for label, m in zip(labels, mark, strict=True)
            ]
        _bars(ax, labels, series, stacked=True, colors=colors)
        _finish(ax, frame, currency, xlabel(currency), grouping, note, key=False)
    if left_out:
        title += f"\nthe {len(parts_of)} busiest currencies; not drawn: {', '.join(left_out)}"
    source = frame.attrs.get("source")
    place(
        fig,
        axes,
        grid=True,
        title=f"{title}\n{source}" if source else title,
        # the one legend: every part any panel draws
        handles=[Patch(color=colors[name], label=name) for name in amounts if name in drawn],
    )
    return fig


#: Where a duration axis puts its ticks, and what they read.
_DURATION_TICKS = (
    (1, "1 s"),
    (10, "10 s"),
    (60, "1 min"),
    (600, "10 min"),
    (3_600, "1 h"),
    (6 * 3_600, "6 h"),
    (86_400, "1 day"),
    (7 * 86_400, "1 week"),
    (30 * 86_400, "30 days"),
    (365 * 86_400, "1 year"),
)


def _duration_axis(ax: Axes, values: np.ndarray) -> None:
    """A log axis of seconds, ticked in seconds, minutes, hours and days around `values`."""
    from matplotlib.ticker import NullLocator

    known = values[np.isfinite(values) & (values > 0)]
    low, high = (known.min(), known.max()) if len(known) else (60.0, 86_400.0)
    ax.set_xscale("log")
    ax.set_xlim(max(low / 2, 0.5), high * 2)
    ticks = [(t, text) for t, text in _DURATION_TICKS if low / 2 <= t <= high * 2]
    if len(ticks) < 2:  # a narrow range: the ticks around it
        ticks = [(t, text) for t, text in _DURATION_TICKS if low / 20 <= t <= high * 20]
    ax.set_xticks([t for t, _ in ticks], [text for _, text in ticks])
    ax.xaxis.set_minor_locator(NullLocator())


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
    censored) of the `top` groups by transaction count, as points joined by a line on a log
    axis ticked in seconds, minutes, hours and days (an instant rail's seconds and a wire's
    days in one chart); each label gives the completed and open counts, and a quantile the
    open transfers leave unknowable is marked `p90 n/a`."""
    keys = _keys(by)
    frame = settlement_times(
        data, keys, type=type, as_of=as_of, instant_sla=instant_sla, status_history=status_history
    )
    kind = f"{type.lower()} transfers"
    if frame.empty or not frame[["p50_seconds", "p90_seconds", "p99_seconds"]].notna().any().any():
        return _nothing(frame, f"No settled {kind} in this data: no settlement times to show.")
    shown, note = _top(frame, keys, "transaction_count", top)
    quantiles = {"p50_seconds": "median (p50)", "p90_seconds": "p90", "p99_seconds": "p99"}
    values = {q: shown[q].to_numpy(dtype=float, na_value=np.nan) for q in quantiles}
    span = data_span(data, "transactions" if type == "INCOMING" else "outgoing_fees")
    labels = []
    for label, row in zip(_labels(shown, keys, span), shown.itertuples(), strict=True):
        unknown = [q.removesuffix("_seconds") for q in quantiles if pd.isna(getattr(row, q))]
        extra = f"; {', '.join(unknown)} n/a" if unknown and row.completed_count else ""
        labels.append(
            f"{label} (completed {row.completed_count:,}, open {row.open_count:,}{extra})"
        )
    fig, (ax,) = figure()
    y = np.arange(len(labels))
    ax.hlines(
        y,
        np.fmin(values["p50_seconds"], values["p99_seconds"]),
        values["p99_seconds"],
        color="0.75",
        linewidth=1.5,
    )
    for marker, (q, name) in zip("o|>", quantiles.items(), strict=True):
        ax.plot(values[q], y, marker, label=name, markersize=8, markeredgewidth=2)
    ax.set_yticks(y, labels)
    ax.set_ylim(len(labels) - 0.5, -0.5)
    _duration_axis(ax, np.concatenate(list(values.values())))
    grouping = _grouping(keys)
    _finish(
        ax,
        frame,
        f"Settlement times of {kind} by {grouping}",
        "time from creation to settlement (log scale; Kaplan–Meier, open transfers censored)",
        f"{grouping} (completed, open)",
        note,
        log=True,
    )
    place(fig, [ax])
    return fig


def _one_panel(
    frame: pd.DataFrame,
    labels: list[str],
    series: Mapping[str, Sequence[float] | np.ndarray],
    titles: tuple[str, str, str],
    note: str,
    colors: Mapping[str, tuple[float, float, float, float]] | None = None,
) -> Figure:
    """A figure of one panel of stacked bars: its title, x and y labels (`titles`), a note."""
    fig, (ax,) = figure()
    _bars(ax, labels, series, stacked=True, colors=colors)
    _finish(ax, frame, *titles, note)
    place(fig, [ax])
    return fig


def _kept_reasons(totals: pd.Series, reasons: int) -> list[str]:
    """The `reasons` largest, and more while what would be left as "other" is larger than the
    largest kept: "other" is never the largest segment."""
    order = list(totals.sort_values(ascending=False, kind="stable").index)
    kept = max(reasons, 1)
    while kept < len(order) and totals[order[kept:]].sum() > totals[order[0]]:
        kept += 1
    return order[:kept]


def plot_failure_breakdown(
    data: Data,
    by: By = "rail",
    *,
    type: str = "OUTGOING",
    top: int = 15,
    reasons: int = 8,
) -> Figure:
    """What went wrong, as % of resolved transactions, of the `top` groups by attempts,
    stacked by lifecycle and reason (the `reasons` most frequent, more when the rest would
    outweigh the largest; the rest as `other`, with how many reasons it holds). Removed
    reasons read QUOTE_EXECUTION_FAILED; the coarse payout fallback is marked. Counts are
    added across the currencies of a group (counts, not money); open transfers are in no
    rate and are given in the label."""
    keys = _keys(by)
    frame = failure_breakdown(data, keys, type=type)
    kind = f"{type.lower()} transfers"
    if frame.empty:
        return _nothing(frame, f"No {kind} in this data: no failures to show.")
    names = [
        f"{words(str(life))}: {'no reason' if pd.isna(r) else r}{' (coarse)' if c is True else ''}"
        for life, r, c in zip(
            frame["lifecycle"], frame["failure_reason"], frame["reason_coarse"], strict=True
        )
    ]
    frame_ = frame.assign(_group=_labels(frame, keys, data_span(data)), _reason=names)
    per_currency = frame_.drop_duplicates(["_group", "currency"])
    totals = per_currency.groupby("_group")[
        ["attempted_count", "resolved_count", "open_count"]
    ].sum()
    bad = frame_[frame_["lifecycle"].isin(UNSUCCESSFUL)]
    counts = bad.pivot_table(
        index="_group", columns="_reason", values="transaction_count", aggfunc="sum", fill_value=0
    )
    kept = _kept_reasons(counts.sum(), reasons)
    rest = [c for c in counts.columns if c not in kept]
    if rest:
        other = f"other ({len(rest)} reasons)"
        counts[other] = counts[rest].sum(axis=1)
        kept.append(other)
    groups = totals.assign(transaction_count=totals["attempted_count"]).reset_index()
    if any(k in _MONTHS for k in keys):  # keep time order: the frame's own order of groups
        order = list(dict.fromkeys(frame_.sort_values(keys, kind="stable")["_group"]))
        shown, note = groups.set_index("_group").loc[order].reset_index(), ""
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
    from matplotlib import colormaps

    # past the ten colours of the default cycle, twenty: no two segments share one
    tab20 = colormaps["tab20"]
    colors = (
        {name: tab20((i % 20) / 20 + 0.025) for i, name in enumerate(kept)}
        if len(kept) > 10
        else None
    )
    grouping = _grouping(keys)
    titles = (
        f"Unsuccessful {kind} by {grouping}, lifecycle and reason",
        "% of resolved transfers",
        f"{grouping} (resolved, open)",
    )
    series = {name: rates[name].to_numpy() for name in kept}
    return _one_panel(frame, labels, series, titles, note, colors)


def plot_refund_summary(
    data: Data,
    by: By = "refund_reason",
    *,
    type: str | None = None,
    as_of: datetime | str | None = None,
    top: int = 15,
) -> Figure:
    """Refunded transfers of the `top` groups by how many were refunded, stacked by how their
    refund stands (completed, pending, failed), as counts (added across the currencies of a
    group: counts, not money); each label gives the transfer type. Same arguments as
    `refund_summary`."""
    keys = _keys(by)
    frame = refund_summary(data, ["type", *keys], type=type, as_of=as_of)
    frame = frame[frame["refunded_count"] > 0]
    if frame.empty:
        return _nothing(frame, "No refunded transfers in this data: no refunds to show.")
    columns = {f"refund {s.lower()}": f"refund_{s.lower()}_count" for s in REFUND_STATUSES}
    totals = frame.groupby(["type", *keys], dropna=False, sort=False)[
        ["refunded_count", *columns.values()]
    ].sum()
    totals = totals.reset_index().assign(transaction_count=lambda f: f["refunded_count"])
    shown, note = _top(totals, keys, "refunded_count", top)
    labels = [
        f"{label} ({str(kind).lower()})"
        for label, kind in zip(_labels(shown, keys, data_span(data)), shown["type"], strict=True)
    ]
    order = ["refund completed", "refund pending", "refund failed"]
    series = {name: shown[columns[name]].to_numpy(dtype=float) for name in order if name in columns}
    grouping = _grouping(keys)
    titles = (
        f"Refunded transfers by {grouping} and how the refund stands",
        "refunded transfers",
        f"{grouping} (transfer type)",
    )
    return _one_panel(
        frame, labels, series, titles, note.replace("transaction(s)", "refunded transfer(s)")
    )


def plot_card_summary(
    data: Data,
    by: By = "merchant",
    *,
    status: str | Sequence[str] | None = None,
    as_of: datetime | str | None = None,
    top: int = 15,
    currencies: int | None = 6,
) -> Figure:
    """Authorized, settled and refunded amounts and open holds of the `top` groups by
    authorized amount, side by side, in major units, one panel per currency (amounts in
    different currencies never share an axis): the `currencies` busiest (None: every one),
    the last panel's note naming those left out."""
    keys = _keys(by)
    frame = card_summary(data, keys, status=status, as_of=as_of, major=True)
    if frame.empty:
        return _nothing(frame, "No card transactions in this data: no card activity to show.")
    parts, left_out = _currencies(frame, "currency", currencies)
    fig, axes = figure(len(parts))
    span = data_span(data, "card_transactions", "authorized_at")
    grouping = _grouping(keys)
    for i, (ax, (currency, part)) in enumerate(zip(axes, parts, strict=True)):
        shown, note = _top(part, keys, "authorized_minor", top)
        if left_out and i == len(parts) - 1:
            note = "; ".join(filter(None, [note, f"currencies not drawn: {', '.join(left_out)}"]))
        series = {
            name: shown[f"{column}_major"].to_numpy(dtype=float, na_value=np.nan)
            for name, column in (
                ("authorized", "authorized"),
                ("settled", "settled"),
                ("refunded", "refunded"),
                ("open holds", "open_hold"),
            )
        }
        _bars(ax, _labels(shown, keys, span), series, stacked=False)
        _finish(
            ax,
            frame,
            f"Card transactions in {currency} by {grouping}",
            f"amount ({currency})",
            grouping,
            note,
        )
    place(fig, axes)
    return fig
