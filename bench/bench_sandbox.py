"""Sandbox benchmark: how fast the in-process sandbox serves `GET /transactions` pages.

    python bench/bench_sandbox.py                          # 100,000 and 1,000,000 transactions
    python bench/bench_sandbox.py --sizes 100000 --runs 5

Each run builds a fresh `Sandbox(seed=0)` in its own process (so the peak RSS is that world's)
and times `sandbox.app.handle` (the app core: routing, auth, JSON encoding) on 300 pages of 100
transactions, following `nextCursor` from 2025-06-01 in ascending order:

- first read: pages never served before;
- re-read: the same 300 pages again;
- after advance: the newest 300 pages (descending) after the clock moved one hour, where rows
  whose planned events fell in that hour are rendered again.

Prints the median per page of each (the median over runs of each run's median), generation
time and peak RSS; `--out` writes the JSON.
"""

from __future__ import annotations

import argparse
import base64
import json
import platform
import resource
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson

from paylens.sandbox import API_VERSION, Sandbox

PAGES = 300


def pages(sandbox: Sandbox, query: str) -> list[float]:
    """Seconds per page of `PAGES` pages of `query`, following the cursor."""
    secret = f"{sandbox.client_id}:{sandbox.client_secret}".encode()
    auth = {"authorization": "Basic " + base64.b64encode(secret).decode()}
    times, cursor = [], None
    for _ in range(PAGES):
        target = f"/{API_VERSION}/transactions?{query}" + (f"&cursor={cursor}" if cursor else "")
        started = time.perf_counter()
        reply = sandbox.app.handle("GET", target, auth, b"")
        times.append(time.perf_counter() - started)
        cursor = orjson.loads(reply.body)["nextCursor"]
    return times


def one_run(transactions: int) -> dict[str, Any]:
    wall, cpu = time.perf_counter(), time.process_time()
    sandbox = Sandbox(seed=0, transactions=transactions)
    generation = {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu}
    ascending = "limit=100&sortOrder=asc&startDate=2025-06-01T00:00:00Z"
    first = pages(sandbox, ascending)
    again = pages(sandbox, ascending)
    sandbox.advance(timedelta(hours=1))
    advanced = pages(sandbox, "limit=100&sortOrder=desc")
    return {
        "generation": generation,
        "first_read_ms": statistics.median(first) * 1000,
        "re_read_ms": statistics.median(again) * 1000,
        "after_advance_ms": statistics.median(advanced) * 1000,
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a run, in this process
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_run(args.one)))
        return
    results: dict[str, Any] = {"python": platform.python_version(), "sizes": {}}
    print(
        f"{'transactions':>12}  {'first read':>10}  {'re-read':>8}  {'after advance':>13}  "
        f"{'generation':>10}  {'peak RSS':>8}"
    )
    for size in args.sizes:
        runs = [
            json.loads(
                subprocess.run(
                    [sys.executable, __file__, "--one", str(size)],
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
            )
            for _ in range(args.runs)
        ]

        def median(key: str, runs: list[dict[str, Any]] = runs) -> float:
            return statistics.median(run[key] for run in runs)

        summary = {
            "runs": runs,
            "first_read_ms": median("first_read_ms"),
            "re_read_ms": median("re_read_ms"),
            "after_advance_ms": median("after_advance_ms"),
            "generation_s": statistics.median(run["generation"]["wall_s"] for run in runs),
            "max_rss_mb": max(run["max_rss_mb"] for run in runs),
        }
        results["sizes"][size] = summary
        print(
            f"{size:>12,}  {summary['first_read_ms']:>8.3f}ms  {summary['re_read_ms']:>6.3f}ms  "
            f"{summary['after_advance_ms']:>11.3f}ms  {summary['generation_s']:>9.1f}s  "
            f"{summary['max_rss_mb']:>6.0f}MB"
        )
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
