"""Each plot renders a labelled figure: a title (sandbox data says so), axes with units, a
legend, and at least one bar."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import matplotlib
import pandas as pd
import pytest
from matplotlib.figure import Figure

from paylens import Sandbox
from paylens.analysis import (
    plot_card_summary,
    plot_failure_breakdown,
    plot_fee_breakdown,
    plot_settlement_times,
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


def labelled(fig: Figure, title: str, xunit: str) -> list[str]:
    """Check the figure's labels and render it; return its legend entries."""
    assert isinstance(fig, Figure)
    (ax,) = fig.axes
    assert title in ax.get_title() and "SANDBOX DATA" in ax.get_title()
    assert xunit in ax.get_xlabel()
    assert ax.get_ylabel()
    assert len(ax.patches) > 0
    legend = ax.get_legend()
    assert legend is not None
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=40)
    assert buffer.getvalue().startswith(b"\x89PNG")
    return [t.get_text() for t in legend.get_texts()]


def test_plot_fee_breakdown(sandbox: Sandbox, wh: Warehouse) -> None:
    entries = labelled(
        plot_fee_breakdown(wh), "Fees of outgoing transactions by corridor", "basis points"
    )
    assert {"service fixed fee", "service variable fee", "counterparty fixed fee"} <= set(entries)
    assert "residual (unexplained)" not in entries  # every residual is 0 on sandbox data
    rates = sandbox.client().exchange_rates.list()
    mids = {(r.source_currency.code, r.destination_currency.code): r.exchange_rate for r in rates}
    with_spread = plot_fee_breakdown(wh, ["rail"], reference_rates=mids)
    assert "FX spread vs reference" in labelled(with_spread, "by rail", "basis points")


def test_plot_settlement_times(wh: Warehouse) -> None:
    fig = plot_settlement_times(wh, "rail")
    assert labelled(fig, "Settlement times of outgoing transactions", "seconds") == [
        "p50",
        "p90",
        "p99",
    ]
    assert fig.axes[0].get_xscale() == "log"
    labelled(
        plot_settlement_times(wh, None, type="INCOMING"),
        "of incoming transactions by all",
        "seconds",
    )


def test_plot_failure_breakdown(wh: Warehouse) -> None:
    entries = labelled(
        plot_failure_breakdown(wh, reasons=3), "Failures of outgoing", "% of attempted"
    )
    assert len(entries) == 4 and entries[-1] == "other"
    entries = labelled(plot_failure_breakdown(wh, "month", type="INCOMING"), "by month", "%")
    assert "COLLECTION_FAILED" in entries


def test_plot_failure_breakdown_marks_removed_and_unknown_reasons(tmp_path: Path) -> None:
    with Warehouse(tmp_path / "w.duckdb") as wh:
        rows = pd.DataFrame(
            {
                "id": ["a", "b", "c", "d"],
                "type": "OUTGOING",
                "status": ["FAILED", "FAILED", "FAILED", "COMPLETED"],
                "failure_reason": ["TIMEOUT", "SOMETHING_NEW", "COUNTERPARTY_POST_TX_FAILED", None],
                "payment_rail": "ACH",
                "amount_minor": 100,
                "currency": "USD",
                "decimals": 2,
            }
        )
        wh._con.register("_rows", rows)
        wh._con.execute("INSERT INTO transactions BY NAME SELECT * FROM _rows")
        fig = plot_failure_breakdown(wh)
        (ax,) = fig.axes
        entries = [t.get_text() for t in ax.get_legend().get_texts()]
        assert sorted(entries) == [
            "COUNTERPARTY_POST_TX_FAILED (coarse)",
            "SOMETHING_NEW (unknown)",
            "TIMEOUT (removed)",
        ]
        # each reason is 1 of the rail's 4 attempts: 25 %
        assert [round(p.get_width(), 9) for p in ax.patches] == [25.0, 25.0, 25.0]


def test_plot_card_summary(wh: Warehouse) -> None:
    entries = labelled(
        plot_card_summary(wh), "Card transactions in USD by merchant", "USD, major units"
    )
    assert entries == ["authorized", "settled", "refunded", "open holds"]
    labelled(plot_card_summary(wh, ["mcc"], currency="EUR"), "in EUR by mcc", "EUR, major units")
