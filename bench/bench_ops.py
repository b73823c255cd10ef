"""Bulk-operation benchmark: applying cancellations with concurrency 8 against the sandbox with
50 ms of latency per request, versus one at a time, over loopback HTTP to a sandbox in its own
process.

    python bench/bench_ops.py                       # 10,000 concurrent, 1,000 sequential
    python bench/bench_ops.py --items 2000 --sequential-items 200

The sequential run covers `--sequential-items` items and is scaled to `--items` per item (one
at a time, its cost per item does not depend on how many follow); the ratio compares the
concurrent run's wall time with that sequential estimate.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_sync import control, served

from paylens import Client, ops
from paylens.warehouse import Warehouse

SELECT = "status IN ('PENDING', 'PROCESSING', 'CREATED')"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--sequential-items", type=int, default=1_000)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    scenarios = (args.items + args.sequential_items) // 4 + 100
    with tempfile.TemporaryDirectory() as tmp, served(20 * scenarios, scenarios=scenarios) as env:
        client = Client(
            env["PAYLENS_BASE_URL"],
            env["PAYLENS_CLIENT_ID"],
            env["PAYLENS_CLIENT_SECRET"],
            timeout=60,
        )
        with Warehouse(Path(tmp) / "ops.duckdb") as wh:
            wh.sync(client, progress=False, resources=["transactions"])
            candidates = ops.plan_cancel(wh, SELECT).eligible["id"].tolist()
            if len(candidates) < args.items + args.sequential_items:
                raise SystemExit(f"only {len(candidates)} eligible transfers")
            control(env, "faults", {"latency": args.latency})
            sequential_plan = ops.plan_cancel(
                wh, candidates[: args.sequential_items], reason="bench"
            )
            started = time.perf_counter()
            sequential = sequential_plan.apply(client, concurrency=1, progress=False)
            sequential_seconds = time.perf_counter() - started
            concurrent_plan = ops.plan_cancel(
                wh,
                candidates[args.sequential_items : args.sequential_items + args.items],
                reason="bench",
            )
            started = time.perf_counter()
            concurrent = concurrent_plan.apply(client, concurrency=args.concurrency, progress=False)
            concurrent_seconds = time.perf_counter() - started
    per_item = sequential_seconds / args.sequential_items
    results = {
        "latency_seconds": args.latency,
        "concurrency": args.concurrency,
        "items": args.items,
        "concurrent_seconds": concurrent_seconds,
        "concurrent_outcomes": concurrent["outcome"].value_counts().to_dict(),
        "sequential_items": args.sequential_items,
        "sequential_seconds": sequential_seconds,
        "sequential_outcomes": sequential["outcome"].value_counts().to_dict(),
        "sequential_seconds_per_item": per_item,
        "sequential_estimate_seconds": per_item * args.items,
        "ratio": concurrent_seconds / (per_item * args.items),
    }
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
