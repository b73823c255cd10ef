"""Each plot renders a labelled figure: a title (sandbox data says so), axes with units, a
legend, and at least one bar."""

from __future__ import annotations

import io
import itertools
import re
from collections.abc import Iterator
from pathlib import Path

import matplotlib
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from paylens import Sandbox
from paylens.analysis import (
    card_summary,
    fees_collected,
    plot_card_summary,
    plot_failure_breakdown,
    plot_fee_breakdown,
    plot_fees_collected,
    plot_refund_summary,
    plot_settlement_times,
)
from paylens.analysis._plots import month_label
from paylens.warehouse import Warehouse

matplotlib.use("Agg")  # the plots never touch pyplot; this keeps any that might off-screen


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return Sandbox(seed=9, transactions=1_000)


@pytest.fixture(scope="module")
def wh(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Warehouse]:
    with Warehouse(tmp_path_factory.mktemp("plots") / "w.duckdb") as warehouse:
        warehouse.sync(sandbox.client(), progress=False)
        yield warehouse


def labelled(fig: Figure, title: str, xunit: str, panel: int = 0, bars: bool = True) -> list[str]:
    """Check a panel's labels and render the figure; return the panel's legend entries."""
    entries = panel_labels(fig, title, xunit, panel, bars)
    render(fig)
    return entries


def no_column_names(fig: Figure) -> None:
    """No title or axis label of the figure holds a column's name (a word with `_`)."""
    texts = [fig.get_suptitle()] + [
        t for ax in fig.axes for t in (ax.get_title(), ax.get_xlabel(), ax.get_ylabel())
    ]
    assert not [t for t in texts if re.search(r"[a-z]_[a-z]", t)], texts


def panel_labels(
    fig: Figure, title: str, xunit: str, panel: int = 0, bars: bool = True
) -> list[str]:
    """Check a panel's labels; return its legend entries."""
    assert isinstance(fig, Figure)
    ax = fig.axes[panel]
    assert title in ax.get_title() and "SANDBOX DATA" in ax.get_title()
    assert xunit in ax.get_xlabel()
    assert ax.get_ylabel()
    no_column_names(fig)
    if bars:
        assert len(ax.patches) > 0
        assert ax.get_xscale() == "linear" and ax.get_xlim()[0] == 0  # bars from zero
    legend = ax.get_legend()
    assert legend is not None
    # the legend sits right of the plotting area, never over the bars
    assert legend.get_bbox_to_anchor().x0 >= ax.get_window_extent().x1 - 1
    return [t.get_text() for t in legend.get_texts()]


def render(fig: Figure) -> None:
    """Render the figure and check that its layout keeps every text on it."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=40)
    assert buffer.getvalue().startswith(b"\x89PNG")
    inside(fig)


def inside(fig: Figure) -> None:
    """Every artist of the figure lies within it (its layout is fixed, computed by the plot)."""
    renderer = FigureCanvasAgg(fig).get_renderer()
    box = fig.get_tightbbox(renderer)
    width, height = fig.get_size_inches()
    assert box.x0 >= 0 and box.y0 >= 0
    assert box.x1 <= width + 0.01 and box.y1 <= height + 0.01
    for ax in fig.axes:  # a narrow panel's amounts stay legible: no tick label runs into the next
        ticks = [t.get_window_extent(renderer) for t in ax.get_xticklabels() if t.get_text()]
        ticks = [t for t in ticks if ax.bbox.x0 - 1 <= (t.x0 + t.x1) / 2 <= ax.bbox.x1 + 1]
        for left, right in itertools.pairwise(sorted(ticks, key=lambda t: t.x0)):
            assert left.x1 < right.x0, f"x tick labels overlap on {ax.get_title()!r}"


def test_plot_fee_breakdown(sandbox: Sandbox, wh: Warehouse) -> None:
    entries = labelled(
        plot_fee_breakdown(wh), "Fees of outgoing transfers by corridor", "% of the amount sent"
    )
    assert {"service fixed fee", "service variable fee", "counterparty fixed fee"} <= set(entries)
    assert "residual (unexplained)" not in entries  # every residual is 0 on sandbox data
    with_spread = plot_fee_breakdown(wh, ["rail"], reference_rates=sandbox.reference_rates())
    assert "FX margin vs reference" in labelled(with_spread, "by rail", "% of the amount sent")
    # top= says what it left out
    few = plot_fee_breakdown(wh, "corridor", top=2)
    assert "not shown (top=2)" in few.axes[0].get_xlabel()
    assert len(few.axes[0].get_yticklabels()) == 2


def test_months_run_in_time_order_and_are_never_cut(wh: Warehouse) -> None:
    fig = plot_fee_breakdown(wh, "month", top=1)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    months = [pd.Timestamp(" ".join(label.split(" ")[:2])) for label in labels]
    assert months == sorted(months) and len(set(months)) > 1
    assert "not shown" not in fig.axes[0].get_xlabel()
    # the sandbox's history starts within its first month and ends within its last
    partial = {month for month, label in zip(months, labels, strict=True) if "(partial)" in label}
    assert partial == {months[0], months[-1]}
    # months by currency: a panel per sending currency (the six busiest), never one long axis
    from paylens.analysis import fee_breakdown

    sending = fee_breakdown(wh, "month")["sent_currency"].nunique()
    assert len(fig.axes) == min(6, sending) > 1
    assert [ax.get_xlabel() for ax in fig.axes[:1]] == ["% of the amount sent (USD)"]
    assert len(labels) == len(set(months))  # one row a month in a panel


def test_column_names_read_as_words() -> None:
    from paylens.analysis._plots import words

    assert words("settlement_month") == "settlement month"
    assert words("fees_major") == "fees"
    assert words("transaction_count") == "transactions"
    assert words("completed_count") == "completed"
    assert words("fx_margin_rate") == "FX margin rate"
    assert words("p50_seconds") == "p50 (seconds)"
    assert words("mcc") == "merchant category"


def test_month_labels_read_as_months_partial_ones_marked() -> None:
    span = (pd.Timestamp("2025-04-14", tz="UTC"), pd.Timestamp("2025-10-12 23:59", tz="UTC"))
    assert month_label("2025-09-01", span) == "Sep 2025"
    assert month_label("2025-04-01", span) == "Apr 2025 (partial)"
    assert month_label("2025-10-01", span) == "Oct 2025 (partial)"
    assert month_label("2025-09-01") == "Sep 2025"
    # data to the month's last minute covers it
    whole = (pd.Timestamp("2025-09-01", tz="UTC"), pd.Timestamp("2025-09-30 23:59", tz="UTC"))
    assert month_label("2025-09-01", whole) == "Sep 2025"


def test_plot_fees_collected_per_currency(sandbox: Sandbox, wh: Warehouse) -> None:
    fig = plot_fees_collected(wh, reference_rates=sandbox.reference_rates())
    currencies = fees_collected(wh)["sent_currency"]
    busiest = currencies.value_counts().index  # by months with revenue, close enough below
    assert len(fig.axes) == 6 < currencies.nunique()  # the six busiest, one panel each
    assert fig.axes[0].get_title() == "USD"  # the busiest first
    drawn = {ax.get_title() for ax in fig.axes}
    left_out = sorted(set(currencies) - drawn)
    assert "not drawn: " in fig.get_suptitle()
    assert sorted(fig.get_suptitle().split("not drawn: ")[1].split("\n")[0].split(", ")) == left_out
    assert "USD" in busiest
    every = plot_fees_collected(wh, reference_rates=sandbox.reference_rates(), currencies=None)
    assert {ax.get_title() for ax in every.axes} == set(currencies)
    no_column_names(fig)
    for ax in fig.axes:  # each panel in its own currency's major units, bars from zero
        assert ax.get_xlabel() == ax.get_title()
        assert len(ax.patches) > 0
        assert ax.get_xscale() == "linear" and ax.get_xlim()[0] == 0
    assert fig.axes[0].get_ylabel() == "settlement month"
    assert fig.axes[0].get_yticklabels()[1].get_text() == "May 2025"
    # small multiples: the figure's title says what and whose data, and one legend above
    # every panel names every part drawn
    title = fig.get_suptitle()
    assert "Fees collected on completed transfers by settlement month, by who earns" in title
    assert "(major units)" in title
    assert "SANDBOX DATA" in title
    (legend,) = fig.legends
    renderer = FigureCanvasAgg(fig).get_renderer()
    panels = [ax.get_tightbbox(renderer) for ax in fig.axes]
    assert legend.get_window_extent(renderer).y0 >= max(p.y1 for p in panels)
    assert [t.get_text() for t in legend.get_texts()] == [
        "platform fee (platform revenue)",
        "service fees",
        "counterparty fee (pass-through)",
        "service FX margin",
    ]
    # no panel's bars, labels or title run into another's
    for i, a in enumerate(panels):
        assert not any(a.overlaps(b) for b in panels[i + 1 :])
    render(fig)
    blind = plot_fees_collected(wh)
    labels = [t.get_text() for t in blind.axes[0].get_yticklabels()]
    assert any("(no FX ref.)" in label for label in labels)


def test_no_figure_calls_the_service_or_the_counterpartys_money_revenue(
    sandbox: Sandbox, wh: Warehouse
) -> None:
    """Revenue is the platform's: the helper that added every party's fees under that name is
    `fees_collected` now, the old names say where to go, and wherever a figure of any plot
    helper says "revenue" it is the platform's."""
    import matplotlib.text

    import paylens.analysis as analysis

    for old, new in (("revenue", "fees_collected"), ("plot_revenue", "plot_fees_collected")):
        with pytest.raises(AttributeError, match=f"renamed {new} .*platform"):
            getattr(analysis, old)
        assert old not in analysis.__all__
    rates = sandbox.reference_rates()
    figures = [
        analysis.plot_fees_collected(wh, reference_rates=rates),
        analysis.plot_platform_pnl(wh, reference_rates=rates),
        analysis.plot_fee_breakdown(wh, by="corridor", reference_rates=rates),
    ]
    said = []
    for fig in figures:
        texts = [fig.get_suptitle(), *(t.get_text() for t in fig.findobj(matplotlib.text.Text))]
        said += [t for t in texts if "revenue" in t.lower()]
    assert said and all("platform revenue" in t for t in said), said


def test_small_multiples_keep_large_amounts_legible() -> None:
    # amounts in the hundreds of thousands (NGN, KES) in a panel a third of the figure wide:
    # its x tick labels must not run into one another
    from paylens.analysis._layout import figure, place

    fig, axes = figure(16)
    for ax in axes:
        ax.barh(["2025-04-01", "2025-05-01", "2025-06-01"], [371_250, 120_000, 9_500])
        ax.set_xlabel("NGN (major units)")
        ax.set_ylabel("settlement_month")
    place(fig, axes, grid=True, title="Revenue")
    render(fig)


def test_plot_settlement_times(wh: Warehouse) -> None:
    fig = plot_settlement_times(wh, "rail")
    entries = labelled(fig, "Settlement times of outgoing transfers", "from creation", bars=False)
    assert entries == ["median (p50)", "p90", "p99"]
    ax = fig.axes[0]
    # one log axis in words: an instant rail's seconds and a wire's days read in one chart
    assert ax.get_xscale() == "log" and "log scale" in ax.get_xlabel()
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert {"1 min", "1 h", "1 day"} <= set(ticks)
    medians = ax.lines[0].get_xdata()
    assert min(medians) < 120 and max(medians) > 3_600  # seconds: instant and slow rails
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert all("(completed " in label for label in labels)
    assert not any("done" in label or label.startswith("–") for label in labels)
    assert any(label.startswith("unknown rail (") for label in labels)  # no rail: said so
    labelled(
        plot_settlement_times(wh, None, type="INCOMING"),
        "of incoming transfers by all",
        "Kaplan–Meier",
        bars=False,
    )


def test_plot_failure_breakdown(wh: Warehouse) -> None:
    from paylens.analysis import failure_breakdown

    entries = labelled(
        plot_failure_breakdown(wh, reasons=3), "Unsuccessful outgoing", "% of resolved"
    )
    # "other" is never the largest segment: more reasons are drawn until it is not
    frame = failure_breakdown(wh, "rail", type="OUTGOING")
    bad = frame[frame["lifecycle"].notna()]
    sizes = bad.groupby(["lifecycle", "failure_reason"], dropna=False)["transaction_count"].sum()
    sizes = sizes.sort_values(ascending=False)
    kept = len(entries) - 1
    assert kept >= 3 and entries[-1] == f"other ({len(sizes) - kept} reasons)"
    assert sizes.iloc[kept:].sum() <= sizes.iloc[0] < sizes.iloc[kept - 1 :].sum()
    assert entries[0].startswith(("failed after debit: ", "expired: ", "failed: "))
    entries = labelled(plot_failure_breakdown(wh, "month", type="INCOMING"), "by month", "%")
    assert any("COLLECTION_FAILED" in e for e in entries)


def test_plot_card_summary_draws_every_currency(wh: Warehouse) -> None:
    fig = plot_card_summary(wh)
    currencies = card_summary(wh, [])["currency"].nunique()
    assert len(fig.axes) == currencies > 1
    for panel in range(currencies):
        entries = panel_labels(fig, "Card transactions in", "amount (", panel)
        assert entries == ["authorized", "settled", "refunded", "open holds"]
    render(fig)  # the figure once, not once per panel


def test_plot_refund_summary(wh: Warehouse) -> None:
    from paylens.analysis import refund_summary

    fig = plot_refund_summary(wh)
    entries = labelled(fig, "Refunded transfers by refund reason", "refunded transfers")
    assert entries == ["refund completed", "refund pending", "refund failed"]
    frame = refund_summary(wh, "refund_reason")
    # the bars' lengths: refunded transfers per reason and type, over every currency
    expected = frame.groupby(["refund_reason", "type"])["refunded_count"].sum()
    expected = expected[expected > 0].sort_values(ascending=False, kind="stable")
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == [f"{reason} ({kind.lower()})" for reason, kind in expected.index]
    ends = {}
    for patch in ax.patches:
        y = round(patch.get_y() + patch.get_height() / 2)
        ends[y] = max(ends.get(y, 0.0), patch.get_x() + patch.get_width())
    assert [ends[i] for i in range(len(labels))] == list(expected.astype(float))


def test_an_empty_warehouse_says_so_in_one_sentence(tmp_path: Path) -> None:
    # synced from a service with no transaction (a file never synced is refused instead)
    with Warehouse(tmp_path / "empty.duckdb") as empty:
        empty.sync(Sandbox(seed=1, transactions=0).client(), progress=False)
        for fig in (
            plot_fee_breakdown(empty),
            plot_fees_collected(empty),
            plot_settlement_times(empty),
            plot_failure_breakdown(empty),
            plot_refund_summary(empty),
            plot_card_summary(empty),
        ):
            (ax,) = fig.axes
            text, *source = [t.get_text() for t in ax.texts]
            assert all(line.startswith("data: ") for line in source)
            assert text.startswith("No ") and text.count(".") == 1 and "in this data" in text
            assert "no data" not in text
            render(fig)


def test_a_negative_part_of_a_stacked_bar_is_drawn_left_of_zero() -> None:
    """A negative FX margin (a quote better than mid) is drawn from zero leftwards, not over
    the parts stacked before it; the axis then reaches below zero and marks it."""
    from paylens.analysis import plot_platform_pnl
    from paylens.analysis._pnl import PNL_COLUMNS

    row = dict.fromkeys(PNL_COLUMNS, 0)
    row.update(
        period="2025-09",
        currency="PHP",
        decimals=2,
        outgoing_count=3,
        service_fees_minor=154_409,
        service_fx_margin_minor=-288_378,
        counterparty_fees_minor=6_494,
    )
    fig = plot_platform_pnl(pd.DataFrame([row], columns=PNL_COLUMNS))
    (ax,) = fig.axes
    bars = sorted((p.get_x(), p.get_width()) for p in ax.patches if p.get_width() != 0)
    assert bars == [
        (0.0, pytest.approx(-2_883.78)),
        (0.0, pytest.approx(1_544.09)),
        (pytest.approx(1_544.09), pytest.approx(64.94)),
    ]
    assert ax.get_xlim()[0] <= -2_883.78 and [line.get_xdata()[0] for line in ax.lines] == [0]
