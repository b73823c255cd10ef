"""Two versions of the sync, alternately, against one served sandbox: each run a whole
process syncing transactions into a new file (`bench_sync.py`'s), so the machine's load
weighs on both alike. Prints a JSON line per run.

    python bench/bench_sync_pairs.py --before /tmp/before/src --after src --pairs 2 \\
        --transactions 1000000 [--out F]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench_sync import _SYNC, served


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", required=True, help="PYTHONPATH of the first version")
    parser.add_argument("--after", required=True, help="PYTHONPATH of the second version")
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--transactions", type=int, default=1_000_000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp, served(args.transactions) as env:
        creds = [env["PAYLENS_BASE_URL"], env["PAYLENS_CLIENT_ID"], env["PAYLENS_CLIENT_SECRET"]]
        for pair in range(args.pairs):
            for name, path in (("before", args.before), ("after", args.after)):
                db = str(Path(tmp) / f"{name}-{pair}.duckdb")
                load = os.getloadavg()[0]
                out = subprocess.run(
                    [sys.executable, "-c", _SYNC, *creds, db, "16", "7", "transactions"],
                    capture_output=True,
                    text=True,
                    check=True,
                    env={**os.environ, "PYTHONPATH": os.path.abspath(path)},
                )
                row = {"version": name, "load": load, **json.loads(out.stdout.splitlines()[-1])}
                runs.append(row)
                print(json.dumps(row), flush=True)
                for suffix in ("", ".wal"):
                    Path(db + suffix).unlink(missing_ok=True)
    if args.out:
        args.out.write_text(json.dumps(runs, indent=2))


if __name__ == "__main__":
    main()
