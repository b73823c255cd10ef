"""Each plot renders a labelled figure: a title (sandbox data says so), axes with units, a
legend, and at least one bar."""

from __future__ import annotations

import io
import itertools
from collections.abc import Iterator
from pathlib import Path

import matplotlib
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from paylens import Sandbox
from paylens.analysis import (
    card_summary,
    plot_card_summary,
    plot_failure_breakdown,
    plot_fee_breakdown,
    plot_revenue,
    plot_settlement_times,
    revenue,
)
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


def labelled(fig: Figure, title: str, xunit: str, panel: int = 0) -> list[str]:
    """Check a panel's labels and render the figure; return the panel's legend entries."""
    entries = panel_labels(fig, title, xunit, panel)
    render(fig)
    return entries


def panel_labels(fig: Figure, title: str, xunit: str, panel: int = 0) -> list[str]:
    """Check a panel's labels; return its legend entries."""
    assert isinstance(fig, Figure)
    ax = fig.axes[panel]
    assert title in ax.get_title() and "SANDBOX DATA" in ax.get_title()
    assert xunit in ax.get_xlabel()
    assert ax.get_ylabel()
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
        plot_fee_breakdown(wh), "Fees of outgoing transactions by corridor", "% of the amount sent"
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
    months = [t.get_text().split(" ")[0] for t in fig.axes[0].get_yticklabels()]
    assert months == sorted(months) and len(set(months)) > 1
    assert "not shown" not in fig.axes[0].get_xlabel()


def test_plot_revenue_per_currency(sandbox: Sandbox, wh: Warehouse) -> None:
    fig = plot_revenue(wh, reference_rates=sandbox.reference_rates())
    currencies = revenue(wh)["sent_currency"]
    assert len(fig.axes) == currencies.nunique() > 1  # one panel per sending currency
    assert fig.axes[0].get_title() == "USD"  # the busiest first
    assert {ax.get_title() for ax in fig.axes} == set(currencies)
    for ax in fig.axes:  # each panel in its own currency's major units, bars from zero
        assert ax.get_xlabel() == f"{ax.get_title()} (major units)"
        assert len(ax.patches) > 0
        assert ax.get_xscale() == "linear" and ax.get_xlim()[0] == 0
    assert fig.axes[0].get_ylabel() == "settlement_month"
    # small multiples: the figure's title says what and whose data, and one legend above
    # every panel names every part drawn
    title = fig.get_suptitle()
    assert "Revenue of completed transfers by settlement_month" in title
    assert "SANDBOX DATA" in title
    (legend,) = fig.legends
    renderer = FigureCanvasAgg(fig).get_renderer()
    panels = [ax.get_tightbbox(renderer) for ax in fig.axes]
    assert legend.get_window_extent(renderer).y0 >= max(p.y1 for p in panels)
    assert "FX margin" in [t.get_text() for t in legend.get_texts()]
    # no panel's bars, labels or title run into another's
    for i, a in enumerate(panels):
        assert not any(a.overlaps(b) for b in panels[i + 1 :])
    render(fig)
    blind = plot_revenue(wh)
    labels = [t.get_text() for t in blind.axes[0].get_yticklabels()]
    assert any("(no FX ref.)" in label for label in labels)


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
    entries = labelled(fig, "Settlement times of outgoing transactions", "from creation")
    assert entries == ["p50", "p90", "p99"]
    assert fig.axes[0].get_xlabel().split(" ")[0] in ("hours", "days")
    labelled(
        plot_settlement_times(wh, None, type="INCOMING"),
        "of incoming transactions by all",
        "Kaplan–Meier",
    )


def test_plot_failure_breakdown(wh: Warehouse) -> None:
    entries = labelled(
        plot_failure_breakdown(wh, reasons=3), "Unsuccessful outgoing", "% of resolved"
    )
    assert len(entries) == 4 and entries[-1] == "other"
    entries = labelled(plot_failure_breakdown(wh, "month", type="INCOMING"), "by month", "%")
    assert any("COLLECTION_FAILED" in e for e in entries)


def test_plot_card_summary_draws_every_currency(wh: Warehouse) -> None:
    fig = plot_card_summary(wh)
    currencies = card_summary(wh, [])["currency"].nunique()
    assert len(fig.axes) == currencies > 1
    for panel in range(currencies):
        entries = panel_labels(fig, "Card transactions in", "major units", panel)
        assert entries == ["authorized", "settled", "refunded", "open holds"]
    render(fig)  # the figure once, not once per panel


def test_empty_results_draw_empty_labelled_figures(tmp_path: Path) -> None:
    # synced from a service with no transaction (a file never synced is refused instead)
    with Warehouse(tmp_path / "empty.duckdb") as empty:
        empty.sync(Sandbox(seed=1, transactions=0).client(), progress=False)
        for fig in (
            plot_fee_breakdown(empty),
            plot_revenue(empty),
            plot_settlement_times(empty),
            plot_failure_breakdown(empty),
            plot_card_summary(empty),
        ):
            (ax,) = fig.axes
            assert ax.get_title() and ax.get_xlabel()
            assert "nothing to show" in [t.get_text() for t in ax.texts]
            render(fig)
