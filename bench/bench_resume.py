"""What a Ctrl-C costs: a full `paylens sync` (of transactions alone, or of every resource)
interrupted (SIGINT) once a share of an uninterrupted run's records is committed, then run
again to its end, against one uninterrupted sync of the same served sandbox (fixed clock:
nothing changes between runs).

For each share: the requests the served sandbox answered to the interrupted run and to the
resumed one (its own count, `GET _control/requests`), their sum against the uninterrupted
run's, the seconds from the SIGINT to the process's exit, the processes' wall and CPU time
(each process's own, from the children's rusage) against the uninterrupted run's, the load
average beside each, and whether the stored rows are the uninterrupted run's.

    cd bench && python bench_resume.py --transactions 200000 [--shares 0.25 0.5 0.75] [--out F]
    cd bench && python bench_resume.py --transactions 50000 --resources all --profile remittance
    cd bench && python bench_resume.py --checkpoint-threshold 1GB   # the log's bound before #34
    cd bench && python bench_resume.py --transactions 1000000 --repeats 3

With `--repeats K`, a first uninterrupted sync warms the served sandbox up (its first pass
renders every page, and its CPU beside the sync's slows the sync's own) and is not counted;
then K uninterrupted syncs and K interrupted-and-resumed pairs at each share, taken in turn,
and each ratio is against the median of the uninterrupted ones (one run's CPU a record moves
by up to a tenth on this machine; a single pair can say 100 % or 116 % of the same code).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import duckdb
import httpx
from bench_sync import served

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.test_sync_ctrl_c import ALL_STORED_TABLES, STORED_TABLES, run_sync, sync_script

#: `paylens sync`, saying how many records it committed after each commit (the Ctrl-C
#: test's, with the sync's own options): of transactions alone, or of every resource.
SYNCS = {
    "transactions": (sync_script({}, "--resources", "transactions"), STORED_TABLES),
    "all": (sync_script(), ALL_STORED_TABLES),
}


def with_threshold(script: str, threshold: str | None) -> str:
    """`script` with the write connection's checkpoint threshold set to `threshold` (DuckDB's
    size, e.g. 1GB) instead of the library's (`_open._WRITE_SETTINGS`)."""
    if threshold is None:
        return script
    return (
        "import re\nimport paylens.warehouse._open as o\n"
        "o._WRITE_SETTINGS = re.sub(\"checkpoint_threshold = '[^']*'\", "
        f"\"checkpoint_threshold = '{threshold}'\", o._WRITE_SETTINGS)\n{script}"
    )


def requests(env: dict[str, str]) -> int:
    root = env["PAYLENS_BASE_URL"].rsplit("/", 1)[0]
    auth = (env["PAYLENS_CLIENT_ID"], env["PAYLENS_CLIENT_SECRET"])
    return int(httpx.get(f"{root}/_control/requests", auth=auth, timeout=60).json()["count"])


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def sync(script: str, env: dict[str, str], db: Path, stop_at: int | None = None) -> dict[str, Any]:
    """One sync process; with `stop_at`, SIGINT once it has committed that many records. Its
    CPU seconds are the children's rusage across it (the served sandbox, a child too, is
    counted only once it is waited for, at the end)."""
    load, cpu = os.getloadavg()[0], _cpu()
    stop = None if stop_at is None else (lambda seen: seen.committed >= stop_at)
    out = run_sync(script, env, db, lambda: requests(env), stop=stop)
    out["cpu_seconds"] = _cpu() - cpu
    out["load"] = [load, os.getloadavg()[0]]
    return out


def stored(db: Path, tables: dict[str, str]) -> dict[str, list[int]]:
    """Per table, the row count and a hash of the rows (order-free)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        out = {}
        for table, columns in tables.items():
            count, digest = con.execute(
                f"SELECT count(*), bit_xor(hash(t)) FROM (SELECT {columns} FROM {table}) t"
            ).fetchone() or (0, 0)
            out[table] = [count, digest]
        return out
    finally:
        con.close()


def _drop(folder: Path, name: str) -> None:
    """A sync's files (a million records' take half a gigabyte each)."""
    for path in folder.glob(f"{name}*"):
        path.unlink()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transactions", type=int, default=200_000)
    parser.add_argument("--shares", type=float, nargs="+", default=[0.25, 0.5, 0.75])
    parser.add_argument(
        "--resources",
        choices=sorted(SYNCS),
        default="transactions",
        help="transactions alone, or every resource (customers, cards, accounts beside them)",
    )
    parser.add_argument(
        "--profile",
        choices=["default", "remittance"],
        default="default",
        help="the sandbox's shape (remittance: about a customer per transaction)",
    )
    parser.add_argument(
        "--checkpoint-threshold",
        help="the sync's checkpoint threshold (DuckDB's size, e.g. 1GB; default: the library's)",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="uninterrupted syncs and pairs at each share, after one warm-up sync not counted",
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    script, tables = SYNCS[args.resources]
    script = with_threshold(script, args.checkpoint_threshold)
    results: dict[str, Any] = {
        "transactions": args.transactions,
        "resources": args.resources,
        "profile": args.profile,
        "checkpoint_threshold": args.checkpoint_threshold,
        "load": os.getloadavg(),
    }
    with (
        tempfile.TemporaryDirectory() as tmp,
        served(args.transactions, extra=["--clock", "fixed", "--profile", args.profile]) as env,
    ):
        env = {k: v for k, v in env.items() if k.startswith("PAYLENS_")}
        if args.repeats > 1:  # the warm-up
            sync(script, env, Path(tmp) / "warm.duckdb")
            _drop(Path(tmp), "warm.duckdb")
        wholes, pairs = [], {share: [] for share in args.shares}
        for k in range(args.repeats):
            whole = sync(script, env, Path(tmp) / f"whole-{k}.duckdb")
            whole["stored"] = stored(Path(tmp) / f"whole-{k}.duckdb", tables)
            _drop(Path(tmp), f"whole-{k}.duckdb")
            wholes.append(whole)
            print(json.dumps({"uninterrupted": whole}), flush=True)
            for share in args.shares:
                db = Path(tmp) / f"resumed-{k}-{share}.duckdb"
                first = sync(script, env, db, stop_at=max(1, round(share * whole["committed"])))
                second = sync(script, env, db)
                pairs[share].append((first, second, stored(db, tables) == whole["stored"]))
                _drop(Path(tmp), db.name)
        results["uninterrupted"] = wholes[0] if args.repeats == 1 else wholes
        base = {
            key: statistics.median(w[key] for w in wholes)
            for key in ("requests", "seconds", "cpu_seconds")
        }
        for share, runs in pairs.items():
            rows = [
                {
                    "share": share,
                    "interrupted": first,
                    "resumed": second,
                    "requests_ratio": (first["requests"] + second["requests"]) / base["requests"],
                    "seconds_ratio": (first["seconds"] + second["seconds"]) / base["seconds"],
                    "cpu_ratio": (first["cpu_seconds"] + second["cpu_seconds"])
                    / base["cpu_seconds"],
                    "same_rows": same,
                }
                for first, second, same in runs
            ]
            for row in rows:
                print(json.dumps(row), flush=True)
            if args.repeats == 1:
                results[f"share_{share}"] = rows[0]
            else:
                results[f"share_{share}"] = {
                    "runs": rows,
                    **{
                        f"median_{key}": statistics.median(r[key] for r in rows)
                        for key in ("requests_ratio", "seconds_ratio", "cpu_ratio")
                    },
                }
    results["load_after"] = os.getloadavg()
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
