"""Sync benchmark: full-sync throughput and peak memory, incremental request ratio, and the
sliced-versus-sequential speed-up under latency, against the sandbox served over loopback HTTP
in its own process (so the server does not share the sync's interpreter).

    python bench/bench_sync.py                      # 1,000,000 transactions (several minutes)
    python bench/bench_sync.py --transactions 100000 --latency-transactions 20000
    python bench/bench_sync.py --transactions 100000 --only sync --resources customers,cards  # CPU per record
    python bench/bench_sync.py --transactions 1000000 --only sync --warm-up   # the sandbox warmed up

Prints a JSON line per measurement and a summary; `--out FILE` also writes the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

_SYNC = r"""
import json, resource, sys, time
from paylens import Client
from paylens.warehouse import sync_file
base_url, client_id, secret, db, concurrency, verify_syncs, resources = sys.argv[1:8]
client = Client(base_url, client_id, secret, timeout=60)
started = time.perf_counter()
report = sync_file(
    db, client, progress=False, concurrency=int(concurrency), resources=resources.split(","),
    verify_syncs=int(verify_syncs),
)
elapsed = time.perf_counter() - started
usage = resource.getrusage(resource.RUSAGE_SELF)
cpu = usage.ru_utime + usage.ru_stime
print(json.dumps({
    "cpu_seconds": cpu, "cpu_us_per_record": cpu / max(1, report.new + report.changed) * 1e6,
    "mode": report.mode, "seconds": elapsed, "requests": report.requests,
    "new": report.new, "changed": report.changed, "unchanged": report.unchanged,
    "reverified": report.reverified,
    "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
}))
"""

_SEQUENTIAL = r"""
import json, sys, time
from paylens import Client
base_url, client_id, secret = sys.argv[1:4]
client = Client(base_url, client_id, secret, timeout=60)
started = time.perf_counter()
records = sum(len(page.data) for page in client.transactions.list().pages(raw=True))
print(json.dumps({"seconds": time.perf_counter() - started, "records": records}))
"""


@contextmanager
def served(
    transactions: int,
    latency: float = 0.0,
    scenarios: int | None = None,
    extra: Sequence[str] = (),
) -> Iterator[dict[str, str]]:
    """`paylens sandbox serve` in its own process (`extra`: more of its options); yields its
    PAYLENS_* variables."""
    cmd = [
        sys.executable,
        "-m",
        "paylens.cli",
        "sandbox",
        "serve",
        "--port",
        "0",
        "--transactions",
        str(transactions),
        "--latency",
        str(latency),
    ]
    if scenarios is not None:
        cmd += ["--scenarios", str(scenarios)]
    cmd += list(extra)
    with serving(cmd) as env:
        yield env


@contextmanager
def serving(cmd: Sequence[str]) -> Iterator[dict[str, str]]:
    """A service in its own process that prints its three PAYLENS_* lines once it listens;
    yields them, with how long it took to get there and its process id."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        env = dict(proc.stdout.readline().strip().split("=", 1) for _ in range(3))
        env["generated_seconds"] = f"{time.perf_counter() - started:.1f}"
        env["pid"] = str(proc.pid)
        yield env
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a running process so far (`/proc/PID/stat`)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(script: str, *args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def control(env: dict[str, str], action: str, body: dict[str, Any]) -> Any:
    root = env["PAYLENS_BASE_URL"].rsplit("/", 1)[0]
    auth = (env["PAYLENS_CLIENT_ID"], env["PAYLENS_CLIENT_SECRET"])
    return httpx.post(f"{root}/_control/{action}", json=body, auth=auth, timeout=600).json()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transactions", type=int, default=1_000_000)
    parser.add_argument("--latency-transactions", type=int, default=30_000)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--advance-hours", type=float, default=12.0)
    parser.add_argument(
        "--verify-syncs",
        type=int,
        default=7,
        help="the rolling re-verification's bound (a huge value all but turns it off)",
    )
    parser.add_argument(
        "--resources",
        default="transactions",
        help="the resources synced, comma-separated (default: transactions)",
    )
    parser.add_argument(
        "--warm-up",
        action="store_true",
        help="one full sync first, not counted: the served sandbox renders each page on its "
        "first pass, and that CPU beside the sync's slows the sync's own",
    )
    parser.add_argument("--out", type=Path)
    parser.add_argument("--only", choices=["sync", "latency"], help="one part (default: both)")
    args = parser.parse_args()
    results: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]}
    }

    if args.only == "latency":
        results["latency"] = measure_latency(args.latency_transactions, args.latency)
    else:
        _sync_figures(args, results)
    _report(args, results)


def _sync_figures(args: argparse.Namespace, results: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp, served(args.transactions) as env:
        db = str(Path(tmp) / "bench.duckdb")
        creds = (env["PAYLENS_BASE_URL"], env["PAYLENS_CLIENT_ID"], env["PAYLENS_CLIENT_SECRET"])
        results["sandbox_generation_seconds"] = float(env["generated_seconds"])
        verify = str(args.verify_syncs)
        if args.warm_up:
            run(_SYNC, *creds, str(Path(tmp) / "warm.duckdb"), "16", verify, args.resources)
            for leftover in Path(tmp).glob("warm.duckdb*"):
                leftover.unlink()
        results["warmed_up"] = args.warm_up
        server_before = process_cpu_seconds(int(env["pid"]))
        full = run(_SYNC, *creds, db, "16", verify, args.resources)
        full["records_per_second"] = full["new"] / full["seconds"]
        full["cpu_us_per_record"] = 1e6 * full["cpu_seconds"] / full["new"]
        # the served sandbox's CPU in the same span, and what the two processes' CPU per
        # record allows at most on this machine's cores (both busy all the time)
        server = process_cpu_seconds(int(env["pid"])) - server_before
        full["server_cpu_seconds"] = server
        full["server_cpu_us_per_record"] = 1e6 * server / full["new"]
        both = full["cpu_us_per_record"] + full["server_cpu_us_per_record"]
        full["records_per_second_at_most"] = (os.cpu_count() or 1) * 1e6 / both
        results["full_sync"] = full
        print(json.dumps({"full_sync": full}), flush=True)
        changes = control(env, "advance", {"seconds": args.advance_hours * 3600})
        again = run(_SYNC, *creds, db, "16", verify, args.resources)
        again["changed_share"] = (again["new"] + again["changed"]) / args.transactions
        again["request_ratio"] = again["requests"] / full["requests"]
        again["sandbox_changes"] = changes
        results["incremental_sync"] = again
        print(json.dumps({"incremental_sync": again}), flush=True)

    if args.only != "sync":
        results["latency"] = measure_latency(args.latency_transactions, args.latency)


def _report(args: argparse.Namespace, results: dict[str, Any]) -> None:
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


def measure_latency(transactions: int, latency: float) -> dict[str, float]:
    """One sequential cursor versus the sliced sync (16 slices), under `latency` per request."""
    with tempfile.TemporaryDirectory() as tmp, served(transactions, latency) as env:
        creds = (env["PAYLENS_BASE_URL"], env["PAYLENS_CLIENT_ID"], env["PAYLENS_CLIENT_SECRET"])
        sequential = run(_SEQUENTIAL, *creds)
        sliced = run(_SYNC, *creds, str(Path(tmp) / "latency.duckdb"), "16", "7")
    figures = {
        "latency_seconds": latency,
        "transactions": transactions,
        "sequential_seconds": sequential["seconds"],
        "sliced_seconds": sliced["seconds"],
        "speedup": sequential["seconds"] / sliced["seconds"],
    }
    print(json.dumps({"latency": figures}), flush=True)
    return figures


if __name__ == "__main__":
    main()
