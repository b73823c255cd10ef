"""What a primary-key index would cost the warehouse, against the single-writer design paylens
chose (one writer per file, delete-and-insert upserts, no index): peak memory and time of
loading N transaction ids in batches of 20,000, as the sync's writer does, each load in a fresh
process (peak resident memory read from the OS).

    python bench/bench_keys.py                 # 1,000,000 ids
    python bench/bench_keys.py --rows 2000000
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

BATCH = 20_000

_LOAD = """
import json, resource, sys, time, uuid
import duckdb, pyarrow as pa
path, rows, keyed, size = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "keyed", int(sys.argv[4])
con = duckdb.connect(path)
con.execute("SET memory_limit = '256MB'")
key = " PRIMARY KEY" if keyed else ""
con.execute(f"CREATE TABLE t (id VARCHAR{key}, amount BIGINT)")
started = time.perf_counter()
for start in range(0, rows, size):
    n = min(size, rows - start)
    batch = pa.table({
        "id": [f"Transaction:{uuid.UUID(int=start + i)}" for i in range(n)],
        "amount": list(range(n)),
    })
    con.register("b", batch)
    con.execute("BEGIN")
    if keyed:
        con.execute("INSERT OR REPLACE INTO t SELECT * FROM b")
    else:
        con.execute("DELETE FROM t USING b WHERE t.id = b.id")
        con.execute("INSERT INTO t SELECT * FROM b")
    con.execute("COMMIT")
    con.unregister("b")
con.execute("CHECKPOINT")
seconds = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": round(seconds, 2), "peak_mib": round(peak, 1)}))
"""


def run(rows: int, keyed: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "keys.duckdb"
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                _LOAD,
                str(path),
                str(rows),
                "keyed" if keyed else "plain",
                str(BATCH),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        result = json.loads(out.stdout)
        result["file_mib"] = round(path.stat().st_size / 2**20, 1)
        return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results = {
        "rows": args.rows,
        "no_index": run(args.rows, keyed=False),
        "primary_key": run(args.rows, keyed=True),
    }
    print(json.dumps(results, indent=2))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
