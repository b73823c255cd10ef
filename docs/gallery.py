"""Draw every chart of `paylens.analysis` from an embedded sandbox, as the docs' gallery shows
them: `python3 docs/gallery.py [--out docs/gallery] [--transactions 5000]`.

Each `plot_` twin is drawn at least once, from a warehouse synced from the sandbox (seed 0),
and once over an empty warehouse (what a figure says when there is nothing to draw). The PNGs
are written to `--out`, named as `docs/gallery.md` shows them.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from paylens import Sandbox, analysis
from paylens.warehouse import Warehouse

#: name -> how it is drawn from (warehouse, sandbox); the docs page shows them in this order.
CHARTS: dict[str, Callable[[Warehouse, Sandbox], object]] = {
    "fees_collected": lambda wh, sb: analysis.plot_fees_collected(
        wh, reference_rates=sb.reference_rates()
    ),
    "fee_breakdown": lambda wh, sb: analysis.plot_fee_breakdown(wh, by="corridor"),
    "fee_breakdown_by_rail": lambda wh, sb: analysis.plot_fee_breakdown(
        wh, by="rail", reference_rates=sb.reference_rates(), top=12
    ),
    "fee_breakdown_by_month": lambda wh, sb: analysis.plot_fee_breakdown(
        wh, by="month", currencies=4
    ),
    "settlement_times": lambda wh, sb: analysis.plot_settlement_times(wh, by="rail"),
    "failure_breakdown": lambda wh, sb: analysis.plot_failure_breakdown(wh, by="rail"),
    "failure_breakdown_incoming": lambda wh, sb: analysis.plot_failure_breakdown(
        wh, by="month", type="INCOMING"
    ),
    "refund_summary": lambda wh, sb: analysis.plot_refund_summary(wh, by="refund_reason"),
    "card_summary": lambda wh, sb: analysis.plot_card_summary(wh, by="merchant", currencies=2),
    "platform_pnl": lambda wh, sb: analysis.plot_platform_pnl(
        wh, reference_rates=sb.reference_rates(), currencies=4
    ),
    "refunds_owed": lambda wh, sb: analysis.plot_refunds_owed(wh, as_of=sb.now, currencies=4),
}


def draw(out: Path, transactions: int = 5_000, dpi: int = 72) -> list[Path]:
    """Write every chart to `out` as PNG; return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    sandbox = Sandbox(seed=0, transactions=transactions)
    written = []
    with tempfile.TemporaryDirectory() as scratch:
        with Warehouse(Path(scratch) / "gallery.duckdb") as wh:
            wh.sync(sandbox.client(), progress=False)
            for name, chart in CHARTS.items():
                path = out / f"{name}.png"
                chart(wh, sandbox).savefig(path, dpi=dpi)  # type: ignore[attr-defined]
                written.append(path)
        with Warehouse(Path(scratch) / "rolled.duckdb") as rolled:
            # balances read by a sync a week for four weeks: something to roll forward
            later = Sandbox(seed=0, transactions=transactions)
            rolled.sync(later.client(), progress=False)
            for _ in range(4):
                later.advance(timedelta(days=7))
                rolled.sync(later.client(), progress=False)
            path = out / "balance_rollforward.png"
            analysis.plot_balance_rollforward(rolled, period="week", currencies=4).savefig(
                path, dpi=dpi
            )
            written.append(path)
        with Warehouse(Path(scratch) / "empty.duckdb") as empty:
            # synced from a service with nothing yet (a file never synced is refused instead)
            empty.sync(Sandbox(seed=0, transactions=0).client(), progress=False)
            path = out / "empty.png"
            analysis.plot_settlement_times(empty).savefig(path, dpi=dpi)
            written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "gallery")
    parser.add_argument("--transactions", type=int, default=5_000)
    args = parser.parse_args()
    for path in draw(args.out, args.transactions):
        print(path)


if __name__ == "__main__":
    main()
