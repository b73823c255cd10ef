"""Ctrl-C in a real `paylens sync` process over loopback HTTP, and the run after it: the
interrupted run stops at once, keeps what it committed, and the next run reads only the
windows (from their checkpoints) the interrupted one had not committed, finishing the full
read it began rather than starting again or syncing incrementally on top of half a read."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest

from paylens import Sandbox
from paylens.warehouse import Warehouse

from .test_warehouse_sync import assert_exact

_SCRIPT = r"""
import sys
from paylens.cli import main
from paylens.warehouse.sync import run

init = run.SyncOptions.__init__

def options(self, *args, **kwargs):
    kwargs.update(OPTIONS)
    init(self, *args, **kwargs)

run.SyncOptions.__init__ = options
land = run.TransactionSync._land

def announced(self, batch):
    land(self, batch)
    print("committed", self.tally.records, flush=True)

run.TransactionSync._land = announced
sys.argv = ["paylens", "sync", "--db", sys.argv[1], "--resources", "transactions", "--quiet",
            *WORDS]
main()
"""


def sync_script(options: dict[str, int] | None = None, *words: str) -> str:
    """The code of a `paylens sync` process (its CLI, with its own Ctrl-C handler) into the
    file named by its first argument, printing how many records the run has committed after
    each commit; `options`: `SyncOptions` fields set, `words`: more of its command line."""
    return _SCRIPT.replace("OPTIONS", repr(options or {})).replace("WORDS", repr(list(words)))


#: The sync of these tests: batches made small (the same machinery as a large sync's, at a
#: test's size): a reader hands over every 200 records, a batch holds at most 1,000, and the
#: readers run at most 1,500 records ahead of the commits.
_SYNC = sync_script(
    {"land_records": 200, "batch_records": 1_000, "ahead_records": 1_500},
    *("--concurrency", "4", "--verify-syncs", "1000000"),
)

#: What a sync stores, less its own bookkeeping (which run stored what, and when).
_RUN = "first_seen_at, first_run_id, last_changed_run_id, last_synced_at, sync_run_id"
STORED_TABLES = {
    "transactions": f"* EXCLUDE ({_RUN}, removed_at)",
    "outgoing_fees": f"* EXCLUDE ({_RUN})",
    "card_transactions": f"* EXCLUDE ({_RUN})",
    "payment_instructions": f"* EXCLUDE ({_RUN})",
    "status_history": "* EXCLUDE (observed_at, run_id)",
}


def _stored(path: Path) -> dict[str, list[tuple[object, ...]]]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return {
            table: con.execute(f"SELECT {columns} FROM {table} ORDER BY ALL").fetchall()
            for table, columns in STORED_TABLES.items()
        }
    finally:
        con.close()


def run_sync(
    script: str,
    env: dict[str, str],
    path: Path,
    requests: Callable[[], int],
    stop_after: int | None = None,
) -> dict[str, Any]:
    """A sync process running `script` (`sync_script`) into `path`; with `stop_after`, sent
    SIGINT once its announced commits reach that many. Says its exit code, its wall seconds,
    the requests the service answered it (`requests()`: the service's count), the records it
    committed and in how many commits, the seconds from the SIGINT to its exit and the end of what it wrote on
    stderr."""
    before, started = requests(), time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )
    assert proc.stdout is not None and proc.stderr is not None
    commits = committed = 0
    signalled = None
    for line in proc.stdout:
        if not line.startswith("committed "):
            continue  # the sync's own report
        commits, committed = commits + 1, int(line.split()[1])
        if commits == stop_after:
            proc.send_signal(signal.SIGINT)
            signalled = time.monotonic()
    proc.wait(timeout=600)
    ended = time.monotonic()
    return {
        "exit": proc.returncode,
        "seconds": ended - started,
        "requests": requests() - before,
        "committed": committed,
        "commits": commits,
        "ctrl_c_seconds": None if signalled is None else ended - signalled,
        "stderr": proc.stderr.read().strip()[-300:],
    }


def _sync(
    sandbox: Sandbox, env: dict[str, str], path: Path, stop_after: int | None = None
) -> tuple[int, int, float | None, int]:
    run = run_sync(_SYNC, env, path, sandbox.requests.count, stop_after)
    assert "Traceback" not in run["stderr"], run["stderr"]
    return run["exit"], run["requests"], run["ctrl_c_seconds"], run["committed"]


def _interrupted_and_resumed(
    tmp_path: Path, transactions: int, stops: list[int], bound: float
) -> None:
    sandbox = Sandbox(seed=8, transactions=transactions)
    with sandbox.serve() as server:
        # paced a little (2 ms a request), so that the readers do not finish before a commit
        sandbox.faults.configure(latency=0.002)
        env = sandbox.env(server)
        whole = tmp_path / "whole.duckdb"
        code, whole_requests, _, _ = _sync(sandbox, env, whole)
        assert code == 0
        expected = _stored(whole)
        for stop in stops:
            path = tmp_path / f"stopped-{stop}.duckdb"
            code, first, took, committed = _sync(sandbox, env, path, stop_after=stop)
            assert code == 130  # the Ctrl-C's exit, with a line saying so
            assert took is not None and took < 5  # the goal, 1 s, is measured in BENCHMARKS.md
            assert 0 < committed < transactions  # stopped mid-sync, something kept
            code, second, _, _ = _sync(sandbox, env, path)
            assert code == 0
            # the interrupted run's requests and the resumed one's together cost at most
            # `bound` times one uninterrupted sync's: the resumed run reads only the windows
            # not committed, from their checkpoints, and finishes the full read (before: it
            # dropped a Ctrl-C'd run's windows and synced incrementally: 179% at 12,000)
            assert first + second <= bound * whole_requests, (first, second, whole_requests)
            print(f"stopped after {stop} commits: {first} + {second} of {whole_requests}")
            assert _stored(path) == expected
            with Warehouse(path, read_only=True) as wh:
                assert_exact(wh, sandbox)
                runs = wh.sync_runs()
                assert list(runs["status"]) == ["interrupted", "succeeded"]
                assert list(runs["mode"]) == ["full", "full"]


@pytest.mark.http
def test_a_ctrl_c_stops_at_once_and_the_next_run_reads_only_what_is_left(tmp_path: Path) -> None:
    # at 12,000 records (~145 requests), what does not depend on the size weighs: the
    # resumed run's own /config and reconciliation counts, a partial last page per window
    # resumed, and up to 1,500 + 4 x 200 records read and not committed at the Ctrl-C
    _interrupted_and_resumed(tmp_path, 12_000, stops=[4], bound=1.25)


@pytest.mark.http
@pytest.mark.slow
def test_ctrl_c_at_a_quarter_half_and_three_quarters(tmp_path: Path) -> None:
    _interrupted_and_resumed(tmp_path, 40_000, stops=[10, 20, 30], bound=1.10)
