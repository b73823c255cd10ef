"""Team tables benchmark: publish a large warehouse as Iceberg tables, then again after 1 % of
its transactions changed, and the analysis helpers over `paylens.Lake` beside the local file.

    python bench/bench_lake.py                          # 1,000,000 transactions (built once, ~3+ min)
    python bench/bench_lake.py --transactions 100000
    python bench/bench_lake.py --catalog postgresql+psycopg2://user@host/db

The warehouse is bench_analysis.py's cached sync of the in-process sandbox, copied to a temporary
directory (the change step writes it). The changed 1 % are the newest transactions: the ones a
sync finds changed (statuses move on recent records), each given a new sync run and
`last_synced_at` and a status-history row, as an incremental sync records them. The catalog is a
SQLite file unless `--catalog` names another; data files go to the temporary directory. Bytes
written are the Parquet bytes of the new data files (the publish report), and the location's
size on disk. Prints a table and writes the JSON to `--out`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_analysis import build

from paylens import Warehouse
from paylens.analysis import fee_breakdown, fees_collected, settlement_times
from paylens.lake import Lake, publish

HELPERS: dict[str, Callable[[Warehouse], Any]] = {
    "fees_collected by settlement month": lambda d: fees_collected(d),
    "fee_breakdown by corridor": lambda d: fee_breakdown(d, "corridor"),
    "settlement_times by rail": lambda d: settlement_times(d, "rail"),
}


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _timed(run: Callable[[], Any], repeat: int) -> float:
    run()  # warm-up
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _change(db: Path, share: float) -> int:
    """Mark the newest `share` of transactions changed by a new sync run."""
    with Warehouse(db) as wh:
        con = wh._con  # a benchmark's stand-in for a sync: no public door writes rows
        total = con.execute("SELECT count(*) FROM transactions").fetchall()[0][0]
        n = int(total * share)
        run = con.execute("SELECT max(run_id) + 1 FROM sync_runs").fetchall()[0][0]
        con.execute(
            "CREATE TEMP TABLE changed AS SELECT id, status FROM transactions"
            " ORDER BY created_at DESC LIMIT ?",
            [n],
        )
        con.execute(
            "UPDATE transactions SET sync_run_id = ?, last_changed_run_id = ?,"
            " last_synced_at = now() WHERE id IN (SELECT id FROM changed)",
            [run, run],
        )
        con.execute(
            "INSERT INTO status_history SELECT id, 'OUTGOING', status, status, now(), now(), ?"
            " FROM changed",
            [run],
        )
        con.execute(
            "INSERT INTO sync_runs (run_id, started_at, finished_at, status, mode)"
            " VALUES (?, now(), now(), 'succeeded', 'incremental')",
            [run],
        )
    return n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--changed", type=float, default=0.01)
    parser.add_argument("--catalog", default=None)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    cached, _ = build(args.transactions, args.seed)
    result: dict[str, Any] = {
        "transactions": args.transactions,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "load_before": os.getloadavg(),
    }
    with tempfile.TemporaryDirectory(prefix="paylens-lake-bench-") as tmp:
        root = Path(tmp)
        db = root / "w.duckdb"
        shutil.copy(cached, db)
        catalog = args.catalog or f"sqlite:///{root / 'catalog.db'}"
        location = root / "lake"
        with Warehouse(db, read_only=True) as wh:
            started = time.perf_counter()
            full = publish(wh, catalog, "bench", location=location)
            result["full_seconds"] = time.perf_counter() - started
        result["full_bytes"] = full.bytes_written
        result["full_location_bytes"] = _size(location)
        result["changed_transactions"] = _change(db, args.changed)
        before = _size(location)
        with Warehouse(db, read_only=True) as wh:
            started = time.perf_counter()
            incremental = publish(wh, catalog, "bench")
            result["incremental_seconds"] = time.perf_counter() - started
            result["incremental_bytes"] = incremental.bytes_written
            result["incremental_location_bytes"] = _size(location) - before
            result["incremental_tables"] = incremental.tables
            result["incremental_share_of_full_bytes"] = (
                incremental.bytes_written / full.bytes_written
            )
            started = time.perf_counter()
            lake = Lake(catalog=catalog, namespace="bench")
            result["lake_open_seconds"] = time.perf_counter() - started
            helpers = {}
            for name, helper in HELPERS.items():
                local = _timed(lambda h=helper: h(wh), args.repeat)
                over_lake = _timed(lambda h=helper: h(lake), args.repeat)
                helpers[name] = {"file": local, "lake": over_lake, "ratio": over_lake / local}
            lake.close()
        result["helpers"] = helpers
    result["load_after"] = os.getloadavg()
    print(json.dumps(result, indent=2, default=str))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
