"""The plot twin of each helper: the same arguments, a labelled matplotlib Figure back.

Figures are built without pyplot (no global state, nothing shown, any backend): display one
in a notebook by leaving it as a cell's value, or save it with `fig.savefig(...)`. Sandbox data
says so in the title. matplotlib is imported only when a plot is drawn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ._cards import card_summary
from ._common import By, Data, History
from ._failures import failure_breakdown
from ._fees import ReferenceRates, fee_breakdown
from ._settlement import settlement_times

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

_ROW_HEIGHT = 0.35


def _keys(by: By) -> list[str]:
    if by is None:
        return []
    return [by] if isinstance(by, str) else list(by)


def _labels(frame: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    """One label per row: its key values joined, `all` when there are none."""
    if not columns:
        return ["all"] * len(frame)
    parts = frame[list(columns)].astype("string").fillna("none")
    return [" · ".join(row) for row in parts.itertuples(index=False, name=None)]


def _bars(
    ax: Axes, labels: list[str], series: Mapping[str, Sequence[float]], stacked: bool
) -> None:
    """Horizontal bars, one row per label: stacked, or side by side."""
    y = np.arange(len(labels))
    left = np.zeros(len(labels))
    height = 0.8 if stacked else 0.8 / max(len(series), 1)
    for i, (name, values) in enumerate(series.items()):
        v = np.nan_to_num(np.asarray(values, dtype=float))
        if stacked:
            ax.barh(y, v, height, left=left, label=name)
            left = left + v
        else:
            ax.barh(y - 0.4 + height * (i + 0.5), v, height, label=name)
    ax.set_yticks(y, labels)
    ax.invert_yaxis()


def _figure(rows: int) -> tuple[Figure, Axes]:
    from matplotlib.figure import Figure  # matplotlib loads only when a plot is asked for

    fig = Figure(figsize=(10, 1.5 + _ROW_HEIGHT * max(rows, 1)), layout="constrained")
    return fig, fig.subplots()


def _finish(
    fig: Figure, ax: Axes, frame: pd.DataFrame, title: str, xlabel: str, ylabel: str
) -> Figure:
    source = frame.attrs.get("source")
    ax.set_title(f"{title}\n{source}" if source else title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize="small")
    else:
        ax.text(0.5, 0.5, "nothing to show", transform=ax.transAxes, ha="center")
    ax.grid(axis="x", alpha=0.3)
    return fig


def _top(frame: pd.DataFrame, column: str, top: int) -> pd.DataFrame:
    return frame.sort_values(column, ascending=False, kind="stable").head(top)


def plot_fee_breakdown(
    data: Data,
    by: By = "corridor",
    *,
    reference_rates: ReferenceRates | None = None,
    status: str | Sequence[str] | None = None,
    top: int = 15,
) -> Figure:
    """Fee components of the `top` groups by transaction count, stacked, in basis points of
    the amount sent (a share, so groups in different currencies compare): the service's fixed
    and variable fee, the platform's fee, the counterparty's fixed fee, the residual when any,
    and the FX spread cost when `reference_rates` are given."""
    keys = _keys(by)
    frame = fee_breakdown(data, keys, reference_rates=reference_rates, status=status)
    shown = _top(frame, "transaction_count", top)
    sent = shown["sent_minor"].astype(float).replace(0, np.nan)
    parts = {
        "service fixed fee": "service_fixed_fee_minor",
        "service variable fee": "service_variable_fee_minor",
        "platform fee": "platform_fee_minor",
        "counterparty fixed fee": "counterparty_fixed_fee_minor",
        "residual (unexplained)": "residual_minor",
        "FX spread vs reference": "fx_spread_cost_minor",
    }
    series = {
        name: (shown[column].astype(float) / sent * 10_000).to_numpy()
        for name, column in parts.items()
        if shown[column].fillna(0).ne(0).any()
    }
    labels = [
        f"{label} ({cur})"
        for label, cur in zip(_labels(shown, keys), shown["sent_currency"], strict=True)
    ]
    fig, ax = _figure(len(shown))
    _bars(ax, labels, series, stacked=True)
    grouping = ", ".join(keys) or "all"
    return _finish(
        fig,
        ax,
        frame,
        f"Fees of outgoing transactions by {grouping}",
        "basis points of the amount sent",
        f"{grouping} (sending currency)",
    )


def plot_settlement_times(
    data: Data,
    by: By = "rail",
    *,
    type: str = "OUTGOING",
    as_of: datetime | str | None = None,
    status_history: History = None,
    top: int = 20,
) -> Figure:
    """p50, p90 and p99 of the seconds from creation to settlement of the `top` groups by
    transaction count, side by side on a log scale; each group's label gives its settled and
    still-pending counts."""
    keys = _keys(by)
    frame = settlement_times(data, keys, type=type, as_of=as_of, status_history=status_history)
    shown = _top(frame, "transaction_count", top)
    series = {
        "p50": shown["p50_seconds"].to_numpy(dtype=float, na_value=np.nan),
        "p90": shown["p90_seconds"].to_numpy(dtype=float, na_value=np.nan),
        "p99": shown["p99_seconds"].to_numpy(dtype=float, na_value=np.nan),
    }
    labels = [
        f"{label} (n={settled:,}, pending {pending:,})"
        for label, settled, pending in zip(
            _labels(shown, keys), shown["settled_count"], shown["pending_count"], strict=True
        )
    ]
    fig, ax = _figure(len(shown))
    _bars(ax, labels, series, stacked=False)
    ax.set_xscale("log")
    grouping = ", ".join(keys) or "all"
    return _finish(
        fig,
        ax,
        frame,
        f"Settlement times of {type.lower()} transactions by {grouping}",
        "seconds from creation to settlement (log scale)",
        f"{grouping} (settled, pending)",
    )


def _reason_label(reason: object, kind: object) -> str:
    name = "no reason given" if pd.isna(reason) else str(reason)
    note = {"removed": " (removed)", "unknown": " (unknown)", "coarse_payout": " (coarse)"}
    return name + note.get(str(kind), "")


def plot_failure_breakdown(
    data: Data,
    by: By = "rail",
    *,
    type: str = "OUTGOING",
    top: int = 15,
    reasons: int = 8,
) -> Figure:
    """Failure rate (% of attempted transactions) of the `top` groups by attempts, stacked by
    failure reason (the `reasons` most frequent; the rest as `other`). Reasons the interface
    removed, unknown ones and the coarse payout fallback are marked in the legend. Counts are
    added across the currencies of a group (counts, not money)."""
    keys = _keys(by)
    frame = failure_breakdown(data, keys, type=type)
    reasons_of = [
        _reason_label(r, k)
        for r, k in zip(frame["failure_reason"], frame["reason_kind"], strict=True)
    ]
    frame_ = frame.assign(_group=_labels(frame, keys), _reason=reasons_of)
    # each currency of a group carries the group's attempts in that currency once
    per_currency = frame_.drop_duplicates(["_group", "currency"])
    attempted = per_currency.groupby("_group")["attempted_count"].sum()
    counts = frame_[frame_["failed_count"] > 0].pivot_table(
        index="_group", columns="_reason", values="failed_count", aggfunc="sum", fill_value=0
    )
    order = list(counts.sum().sort_values(ascending=False, kind="stable").index)
    kept = order[:reasons]
    if len(order) > reasons:
        counts["other"] = counts[order[reasons:]].sum(axis=1)
        kept.append("other")
    shown = attempted.sort_values(ascending=False, kind="stable").head(top).index
    counts = counts.reindex(index=shown, columns=kept, fill_value=0)
    rates = counts.div(attempted.loc[shown], axis=0) * 100
    labels = [f"{g} (n={attempted[g]:,})" for g in shown]
    fig, ax = _figure(len(shown))
    _bars(ax, labels, {name: rates[name].to_numpy() for name in kept}, stacked=True)
    grouping = ", ".join(keys) or "all"
    return _finish(
        fig,
        ax,
        frame,
        f"Failures of {type.lower()} transactions by {grouping} and reason",
        "failed, % of attempted transactions",
        f"{grouping} (attempted)",
    )


def plot_card_summary(
    data: Data,
    by: By = "merchant",
    *,
    currency: str | None = None,
    status: str | Sequence[str] | None = None,
    top: int = 15,
) -> Figure:
    """Authorized, settled and refunded amounts and open holds of the `top` groups by
    authorized amount, side by side, in major units of one currency (`currency`, by default
    the one with the most card transactions): amounts in different currencies are never
    drawn on one axis."""
    keys = _keys(by)
    frame = card_summary(data, keys, status=status, major=True)
    if currency is None:
        counts = frame.groupby("currency")["transaction_count"].sum()
        currency = str(counts.idxmax()) if len(counts) else "none"
    chosen = frame[frame["currency"] == currency]
    shown = _top(chosen, "authorized_minor", top)
    series = {
        "authorized": shown["authorized_major"].to_numpy(dtype=float, na_value=np.nan),
        "settled": shown["settled_major"].to_numpy(dtype=float, na_value=np.nan),
        "refunded": shown["refunded_major"].to_numpy(dtype=float, na_value=np.nan),
        "open holds": shown["open_hold_major"].to_numpy(dtype=float, na_value=np.nan),
    }
    fig, ax = _figure(len(shown))
    _bars(ax, _labels(shown, keys), series, stacked=False)
    grouping = ", ".join(keys) or "all"
    return _finish(
        fig,
        ax,
        frame,
        f"Card transactions in {currency} by {grouping}",
        f"amount ({currency}, major units)",
        grouping,
    )
