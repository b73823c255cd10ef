"""What DuckDB's vacuum costs a sync's checkpoints, DuckDB alone (#34): the rows of a synced
warehouse's `transactions` appended again to a fresh table in commits of 10,000, as a full
sync lands them, with a checkpoint every `--every` commits, the vacuum on (DuckDB's default,
`max_vacuum_tasks` 100) or off (0). After a checkpoint a table's next append begins a new row
group, so each checkpoint leaves one less than full, which the vacuum merges with its
neighbours at a later checkpoint (rewriting up to three row groups at once).

    cd bench && python bench_sync.py --transactions 1000000 --only sync   # or any warehouse
    python bench_vacuum.py /path/to/warehouse.duckdb --commits 60 --every 8 --vacuum 100

Prints the process's CPU seconds for the appends and checkpoints, then for the final
checkpoint, the longest commit (with its checkpoint), the row groups and the file's size.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from pathlib import Path

import duckdb

_ROWS = 10_000


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("warehouse", type=Path, help="a synced warehouse to take rows from")
    parser.add_argument("--commits", type=int, default=60)
    parser.add_argument("--every", type=int, default=8, help="commits between checkpoints")
    parser.add_argument("--vacuum", type=int, default=100, help="max_vacuum_tasks (0: off)")
    args = parser.parse_args()
    source = duckdb.connect(str(args.warehouse), read_only=True)
    batches = [
        source.sql(
            f"SELECT * FROM transactions WHERE rowid >= {k * _ROWS} AND rowid < {(k + 1) * _ROWS}"
        ).to_arrow_table()
        for k in range(args.commits)
    ]
    source.close()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.duckdb"
        con = duckdb.connect(str(path))
        first = batches[0]  # noqa: F841 (read by DuckDB's replacement scan)
        con.execute("CREATE TABLE transactions AS SELECT * FROM first LIMIT 0; CHECKPOINT")
        con.execute(
            "SET checkpoint_threshold = '100GB'; SET memory_limit = '256MB';"
            f" SET max_vacuum_tasks = {args.vacuum}"
        )
        cpu, longest = _cpu(), 0.0
        for k, batch in enumerate(batches):
            started = time.perf_counter()
            con.register("batch", batch)
            con.execute("BEGIN; INSERT INTO transactions SELECT * FROM batch; COMMIT")
            con.unregister("batch")
            if (k + 1) % args.every == 0:
                con.execute("CHECKPOINT")
            longest = max(longest, time.perf_counter() - started)
        landed = _cpu() - cpu
        con.execute("CHECKPOINT")
        final = _cpu() - cpu - landed
        (groups,) = con.execute(
            "SELECT count(DISTINCT row_group_id) FROM pragma_storage_info('transactions')"
        ).fetchall()[0]
        con.close()
        print(
            json.dumps(
                {
                    "rows": args.commits * _ROWS,
                    "every": args.every,
                    "max_vacuum_tasks": args.vacuum,
                    "cpu_seconds": round(landed, 2),
                    "final_checkpoint_cpu_seconds": round(final, 2),
                    "longest_commit_seconds": round(longest, 2),
                    "row_groups": groups,
                    "file_mib": os.path.getsize(path) >> 20,
                    "load": round(os.getloadavg()[0], 1),
                }
            )
        )


if __name__ == "__main__":
    main()
