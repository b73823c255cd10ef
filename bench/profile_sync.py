"""Where a full sync's time goes: its phases on a timeline, the writer's two threads, and the
process's CPU, page faults and resident memory over time. A diagnostic beside `bench_sync.py`, not a figure
of merit: it wraps private methods of `paylens.warehouse.sync` to time them.

    paylens sandbox serve --transactions 100000 > env.txt &   # prints PAYLENS_* lines
    python bench/profile_sync.py env.txt /tmp/profile.duckdb

Prints the phases (start and end, seconds from the call), then per writer step the number of
calls, wall seconds and (for the two thread bodies) the thread's CPU seconds, then the
resident set and the bytes Arrow's pool holds, sampled every 0.5 s, and the CPU seconds of
each group of threads (the readers, the typer, the writer, the main thread, DuckDB's own).
"""

from __future__ import annotations

import functools
import os
import resource
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from paylens import Client
from paylens.warehouse import Warehouse, _store, sync_file
from paylens.warehouse._run import SyncRun
from paylens.warehouse.sync import run, save

PHASES = {
    run.TransactionSync: ("_balanced_slices", "_read_all", "_reconcile_range", "run"),
    run.Writer: ("flush",),
    Warehouse: ("sync", "close"),
    SyncRun: ("_finish",),
}
STEPS = {save: ("typed_batch", "_checkpoint"), run.TransactionSync: ("_land",)}


def main(env_file: str, db: str) -> None:
    env = dict(
        line.strip().split("=", 1)
        for line in Path(env_file).read_text().splitlines()
        if "=" in line
    )
    for suffix in ("", ".wal", ".syncing", ".syncing.wal"):
        Path(db + suffix).unlink(missing_ok=True)
    origin = time.perf_counter()
    phases: list[tuple[str, float, float]] = []
    steps: dict[str, list[float]] = {}

    def timed(owner: Any, name: str, record: Callable[[str, float, float], None]) -> None:
        inner = getattr(owner, name)

        @functools.wraps(inner)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            wall, cpu = time.perf_counter(), time.thread_time()
            try:
                return inner(*args, **kwargs)
            finally:
                record(name, wall, cpu)

        setattr(owner, name, wrapper)

    def phase(name: str, wall: float, _cpu: float) -> None:
        phases.append((name, wall - origin, time.perf_counter() - origin))

    def step(name: str, wall: float, cpu: float) -> None:
        totals = steps.setdefault(name, [0, 0.0, 0.0])
        totals[0] += 1
        totals[1] += time.perf_counter() - wall
        totals[2] += time.thread_time() - cpu

    for owner, names in PHASES.items():
        for name in names:
            timed(owner, name, phase)
    for owner, names in STEPS.items():
        for name in names:
            timed(owner, name, step)
    timed(_store, "upsert", lambda name, wall, cpu: step("upsert", wall, cpu))

    client = Client(
        env["PAYLENS_BASE_URL"], env["PAYLENS_CLIENT_ID"], env["PAYLENS_CLIENT_SECRET"], timeout=60
    )
    samples: list[tuple[float, int, int]] = []
    finished = threading.Event()
    ticks = os.sysconf("SC_CLK_TCK")
    # CPU seconds by thread (the last seen: a pool's threads end before the sync returns),
    # named by their Python thread where there is one (DuckDB's own threads are not)
    thread_cpu: dict[int, tuple[str, float]] = {}

    def sample_threads() -> None:
        names = {t.native_id: t.name for t in threading.enumerate()}
        for task in Path("/proc/self/task").iterdir():
            try:
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            tid = int(task.name)
            name = names.get(tid) or thread_cpu.get(tid, ("native", 0.0))[0]
            thread_cpu[tid] = (name, (int(fields[11]) + int(fields[12])) / ticks)

    def sample() -> None:
        while not finished.wait(0.5):
            sample_threads()
            status = Path("/proc/self/status").read_text()
            rss_kib = int(status.split("VmRSS:")[1].split()[0])
            samples.append(
                (time.perf_counter() - origin, rss_kib >> 10, pa.total_allocated_bytes() >> 20)
            )

    origin = time.perf_counter()
    threading.Thread(target=sample, daemon=True).start()
    report = sync_file(db, client, progress=False, concurrency=16, resources=["transactions"])
    total = time.perf_counter() - origin
    finished.set()
    sample_threads()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(
        f"{report.new:,} new in {total:.2f} s, {report.requests:,} requests; CPU user "
        f"{usage.ru_utime:.2f} s, system {usage.ru_stime:.2f} s; {usage.ru_minflt:,} minor page "
        f"faults; peak RSS {usage.ru_maxrss / 1024:,.0f} MiB"
    )
    print("phase                start s   end s")
    for name, start, end in sorted(phases, key=lambda p: p[1]):
        print(f"{name:<20} {start:7.2f} {end:7.2f}")
    print("writer step          calls  wall s  thread CPU s (thread bodies only)")
    for name, (calls, wall, cpu) in steps.items():
        print(f"{name:<20} {calls:5d} {wall:7.2f} {cpu:7.2f}")
    print("thread group         threads  CPU s")
    groups: dict[str, list[float]] = {}
    for name, cpu in thread_cpu.values():
        group = name.split("_")[0] if name.startswith("paylens-sync") else name
        groups.setdefault(group, []).append(cpu)
    for group, cpus in sorted(groups.items(), key=lambda g: -sum(g[1])):
        print(f"{group:<20} {len(cpus):7d} {sum(cpus):6.2f}")
    print("at s   RSS MiB  Arrow MiB")
    for at, rss, arrow in samples[:: max(1, len(samples) // 20)]:
        print(f"{at:5.1f} {rss:8d} {arrow:10d}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
