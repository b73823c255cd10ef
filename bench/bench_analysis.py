"""Analysis benchmark: each `paylens.analysis` helper on a 1,000,000-transaction warehouse.

    python bench/bench_analysis.py                        # builds the warehouse once (~3 min)
    python bench/bench_analysis.py --transactions 100000  # a smaller one, cached beside it

The warehouse is a sync of the in-process sandbox (seed 0), cached in `bench/.cache/` with the
sandbox's daily reference mid-rate series; the helpers then run on it opened read-only, as a
notebook would. Each case is timed `--repeat` times (median reported, after one warm-up run); prints a
table and writes the JSON to `--out`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

import paylens
from paylens.analysis import (
    card_summary,
    failure_breakdown,
    fee_breakdown,
    fees_collected,
    plot_card_summary,
    plot_failure_breakdown,
    plot_fee_breakdown,
    plot_fees_collected,
    plot_settlement_times,
    refund_summary,
    settlement_times,
)
from paylens.warehouse import Warehouse

CACHE = Path(__file__).parent / ".cache"


def build(transactions: int, seed: int) -> tuple[Path, pd.DataFrame]:
    """The cached warehouse and mid-rate series, built on first use."""
    path = CACHE / f"analysis-{transactions}-seed{seed}.duckdb"
    rates_path = path.with_suffix(".mids.csv")  # the sandbox's daily reference mid rates
    if not (path.exists() and rates_path.exists()):
        CACHE.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        sandbox = paylens.Sandbox(seed=seed, transactions=transactions)
        print(f"generated {transactions:,} transactions in {time.perf_counter() - started:.1f}s")
        # named *.duckdb so the repository's ignore rules cover it and its WAL while it builds
        staged = path.with_name(path.stem + ".building.duckdb")
        staged.unlink(missing_ok=True)
        with Warehouse(staged) as wh:
            # the warehouse caps DuckDB at 400 MB for writes, which a 1M-row in-process sync
            # (primary-key indexes of every table) outgrows: give the one-off build room
            wh._con.execute("SET memory_limit = '4GB'")
            print(wh.sync(sandbox.client(), progress=False))
        staged.rename(path)
        sandbox.reference_rates().to_csv(rates_path, index=False)
    return path, pd.read_csv(rates_path)


def cases(mids: pd.DataFrame) -> dict[str, Callable[[Warehouse], Any]]:
    return {
        "fees_collected by settlement month": lambda wh: fees_collected(wh, reference_rates=mids),
        "fees_collected by rail, corridor": lambda wh: fees_collected(
            wh, ["rail", "corridor"], reference_rates=mids
        ),
        "fee_breakdown (per transaction)": lambda wh: fee_breakdown(wh, reference_rates=mids),
        "fee_breakdown by corridor": lambda wh: fee_breakdown(wh, "corridor", reference_rates=mids),
        "fee_breakdown by rail, month": lambda wh: fee_breakdown(wh, ["rail", "month"]),
        "fee_breakdown by customer": lambda wh: fee_breakdown(wh, "customer"),
        "fee_breakdown every status by month": lambda wh: fee_breakdown(wh, "month", status=None),
        "settlement_times (per transaction)": lambda wh: settlement_times(wh),
        "settlement_times by rail": lambda wh: settlement_times(wh, "rail"),
        "settlement_times by rail, source_type": lambda wh: settlement_times(
            wh, ["rail", "source_type"]
        ),
        "settlement_times by corridor, month": lambda wh: settlement_times(
            wh, ["corridor", "month"]
        ),
        "settlement_times incoming by month": lambda wh: settlement_times(
            wh, "month", type="INCOMING"
        ),
        "failure_breakdown (per transaction)": lambda wh: failure_breakdown(wh),
        "failure_breakdown by rail, corridor, month": lambda wh: failure_breakdown(
            wh, ["rail", "corridor", "month"]
        ),
        "refund_summary (per refund)": lambda wh: refund_summary(wh),
        "refund_summary by refund_reason": lambda wh: refund_summary(wh, "refund_reason"),
        "card_summary (per transaction)": lambda wh: card_summary(wh),
        "card_summary by merchant": lambda wh: card_summary(wh, "merchant"),
        "card_summary by mcc, country": lambda wh: card_summary(wh, ["mcc", "country"]),
        "plot_fee_breakdown by corridor": lambda wh: plot_fee_breakdown(wh, reference_rates=mids),
        "plot_fees_collected by settlement month": lambda wh: plot_fees_collected(
            wh, reference_rates=mids
        ),
        "plot_settlement_times by rail": lambda wh: plot_settlement_times(wh),
        "plot_failure_breakdown by rail": lambda wh: plot_failure_breakdown(wh),
        "plot_card_summary by merchant": lambda wh: plot_card_summary(wh),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", type=Path, default=CACHE / "bench_analysis.json")
    args = parser.parse_args()

    import matplotlib

    matplotlib.use("Agg")
    path, mids = build(args.transactions, args.seed)
    results: dict[str, Any] = {
        "transactions": args.transactions,
        "repeat": args.repeat,
        "cpus": os.cpu_count(),
        "duckdb": duckdb.__version__,
        "python": platform.python_version(),
        "cases": {},
    }
    with Warehouse(path, read_only=True) as wh:
        threads = wh.sql("SELECT current_setting('threads') AS n")["n"].iloc[0]
        results["duckdb_threads"] = int(threads)
        print(f"{'case':45} {'median s':>9} {'min s':>7} {'rows':>9}")
        for name, run in cases(mids).items():
            out = run(wh)  # warm-up: file pages cached, as in a notebook's second cell
            times = []
            for _ in range(args.repeat):
                started = time.perf_counter()
                out = run(wh)
                times.append(time.perf_counter() - started)
            rows = len(out) if hasattr(out, "__len__") else None
            median = statistics.median(times)
            results["cases"][name] = {
                "median_seconds": median,
                "min_seconds": min(times),
                "rows": rows,
            }
            print(
                f"{name:45} {median:9.3f} {min(times):7.3f} {rows if rows is not None else '':>9}"
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
