"""What a Ctrl-C costs: a full `paylens sync --resources transactions` interrupted (SIGINT) once
a share of an uninterrupted run's commits is made, then run again to its end, against one
uninterrupted sync of the same served sandbox (fixed clock: nothing changes between runs).

For each share: the requests the served sandbox answered to the interrupted run and to the
resumed one (its own count, `GET _control/requests`), their sum against the uninterrupted
run's, the seconds from the SIGINT to the process's exit, the processes' wall time, and
whether the stored rows are the uninterrupted run's.

    cd bench && python bench_resume.py --transactions 200000 [--shares 0.25 0.5 0.75] [--out F]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import duckdb
import httpx
from bench_sync import served

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.test_sync_ctrl_c import STORED_TABLES, run_sync, sync_script

#: `paylens sync --resources transactions`, saying how many records it committed after each
#: commit (the Ctrl-C test's, with the sync's own options).
SYNC = sync_script()


def requests(env: dict[str, str]) -> int:
    root = env["PAYLENS_BASE_URL"].rsplit("/", 1)[0]
    auth = (env["PAYLENS_CLIENT_ID"], env["PAYLENS_CLIENT_SECRET"])
    return int(httpx.get(f"{root}/_control/requests", auth=auth, timeout=60).json()["count"])


def sync(env: dict[str, str], db: Path, stop_after: int | None = None) -> dict[str, Any]:
    """One sync process; with `stop_after`, SIGINT once that many commits are made."""
    return run_sync(SYNC, env, db, lambda: requests(env), stop_after)


def stored(db: Path) -> dict[str, int]:
    """Per table, the row count and a hash of the rows (order-free)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        out = {}
        for table, columns in STORED_TABLES.items():
            count, digest = con.execute(
                f"SELECT count(*), bit_xor(hash(t)) FROM (SELECT {columns} FROM {table}) t"
            ).fetchone() or (0, 0)
            out[table] = [count, digest]
        return out
    finally:
        con.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transactions", type=int, default=200_000)
    parser.add_argument("--shares", type=float, nargs="+", default=[0.25, 0.5, 0.75])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results: dict[str, Any] = {"transactions": args.transactions, "load": os.getloadavg()}
    with (
        tempfile.TemporaryDirectory() as tmp,
        served(args.transactions, extra=["--clock", "fixed"]) as env,
    ):
        env = {k: v for k, v in env.items() if k.startswith("PAYLENS_")}
        whole = sync(env, Path(tmp) / "whole.duckdb")
        whole["stored"] = stored(Path(tmp) / "whole.duckdb")
        results["uninterrupted"] = whole
        print(json.dumps({"uninterrupted": whole}), flush=True)
        for share in args.shares:
            db = Path(tmp) / f"resumed-{share}.duckdb"
            first = sync(env, db, stop_after=max(1, round(share * whole["commits"])))
            second = sync(env, db)
            row = {
                "share": share,
                "interrupted": first,
                "resumed": second,
                "requests_ratio": (first["requests"] + second["requests"]) / whole["requests"],
                "seconds_ratio": (first["seconds"] + second["seconds"]) / whole["seconds"],
                "same_rows": stored(db) == whole["stored"],
            }
            results[f"share_{share}"] = row
            print(json.dumps(row), flush=True)
    results["load_after"] = os.getloadavg()
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
