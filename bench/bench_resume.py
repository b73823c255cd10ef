"""What a Ctrl-C costs: a full `paylens sync --resources transactions` interrupted (SIGINT) once
a share of the records is committed, then run again to its end, against one uninterrupted
sync of the same served sandbox (fixed clock: nothing changes between the runs).

For each share: the requests the served sandbox answered to the interrupted run and to the
resumed one (its own count, `GET _control/requests`), their sum against the uninterrupted
run's, the seconds from the SIGINT to the process's exit, the processes' wall time, and
whether the stored rows are the uninterrupted run's.

    python bench/bench_resume.py --transactions 200000 [--shares 0.25 0.5 0.75] [--out F]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb
import httpx
from bench_sync import served

#: `paylens sync` (the CLI, with its own Ctrl-C handling), saying after each commit of
#: transactions how many records the run has committed so far.
SYNC = r"""
import sys
from paylens.cli import main
from paylens.warehouse.sync.run import TransactionSync

land = TransactionSync._land

def announced(self, batch):
    land(self, batch)
    print("committed", self.tally.records, flush=True)

TransactionSync._land = announced
sys.argv = ["paylens", "sync", "--db", sys.argv[1], "--resources", "transactions", "--quiet"]
main()
"""

#: The stored rows compared between runs (what a sync writes, less its run bookkeeping).
_RUN = "first_seen_at, first_run_id, last_changed_run_id, last_synced_at, sync_run_id"
COMPARED = {
    "transactions": f"* EXCLUDE ({_RUN}, removed_at)",
    "outgoing_fees": f"* EXCLUDE ({_RUN})",
    "card_transactions": f"* EXCLUDE ({_RUN})",
    "payment_instructions": f"* EXCLUDE ({_RUN})",
    "status_history": "* EXCLUDE (observed_at, run_id)",
}


def requests(env: dict[str, str]) -> int:
    root = env["PAYLENS_BASE_URL"].rsplit("/", 1)[0]
    auth = (env["PAYLENS_CLIENT_ID"], env["PAYLENS_CLIENT_SECRET"])
    return int(httpx.get(f"{root}/_control/requests", auth=auth, timeout=60).json()["count"])


def sync(env: dict[str, str], db: Path, stop_at: int | None = None) -> dict[str, Any]:
    """One sync process; with `stop_at`, SIGINT once that many records are committed."""
    before = requests(env)
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", SYNC, str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )
    assert proc.stdout is not None
    committed, signalled = 0, None
    for line in proc.stdout:
        if not line.startswith("committed "):
            continue  # the sync's own report
        committed = int(line.split()[1])
        if stop_at is not None and signalled is None and committed >= stop_at:
            proc.send_signal(signal.SIGINT)
            signalled = time.perf_counter()
    proc.wait()
    ended = time.perf_counter()
    assert proc.stderr is not None
    return {
        "exit": proc.returncode,
        "seconds": ended - started,
        "requests": requests(env) - before,
        "committed": committed,
        "ctrl_c_seconds": None if signalled is None else ended - signalled,
        "stderr": proc.stderr.read().strip()[-300:],
    }


def stored(db: Path) -> dict[str, int]:
    """Per table, the row count and a hash of the rows (order-free)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        out = {}
        for table, columns in COMPARED.items():
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
            first = sync(env, db, stop_at=int(share * args.transactions))
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
