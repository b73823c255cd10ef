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
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pytest

from paylens import Sandbox
from paylens.warehouse import Warehouse
from paylens.warehouse._staged import last_attempt
from paylens.warehouse.sync.catalog import SMALL_RESOURCES

from .test_warehouse_sync import assert_exact

_SCRIPT = r"""
import sys, threading
from paylens.cli import main
from paylens.warehouse.sync import resources, run

init = run.SyncOptions.__init__

def options(self, *args, **kwargs):
    kwargs.update(OPTIONS)
    init(self, *args, **kwargs)

run.SyncOptions.__init__ = options
said = threading.Lock()
committed = [0]

def say(line):
    with said:  # one write a line: threads print at once
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

def done(name, records):
    with said:
        committed[0] += records
        total = committed[0]
    say(f"committed {total} {name} {records}")

land = run.TransactionSync._land

def announced(self, batch):
    land(self, batch)
    done("transactions", batch.records)

run.TransactionSync._land = announced
put = run.Writer.put
handed = set()

def announced_put(self, landing):
    # counted as it is handed: a Ctrl-C releases every put (the commits then take it), and
    # the process may end between a put's return and a line said after it
    with said:
        handed.update(landing.buffer)
        count = len(handed)
    say(f"handed {count}")
    put(self, landing)

run.Writer.put = announced_put
from paylens.warehouse import _run
outcome = _run._Beside.outcome

def announced_outcome(self):
    say("waiting for the smaller resources")
    return outcome(self)

_run._Beside.outcome = announced_outcome
commit = resources.commit

def announced_commit(con, name, table, *args, **kwargs):
    commit(con, name, table, *args, **kwargs)
    done(name, table.num_rows)

resources.commit = announced_commit
listing = resources.listing

class Paged:
    def __init__(self, listed, name):
        self.listed, self.name = listed, name

    def pages(self, **kwargs):
        for page in self.listed.pages(**kwargs):
            say(f"page {self.name} {len(page.records)}")
            yield page

def announced_listing(client, name, filters, limit=None):
    listed = listing(client, name, filters, limit)
    return listed if limit is not None else Paged(listed, name)

resources.listing = announced_listing
sys.argv = ["paylens", "sync", "--db", sys.argv[1], "--quiet", *WORDS]
main()
"""


def sync_script(options: dict[str, int] | None = None, *words: str) -> str:
    """The code of a `paylens sync` process (its CLI, with its own Ctrl-C handler) into the
    file named by its first argument, printing how many records of every resource the run
    has committed after each commit, and of which resource the commit was and how many it held
    (`committed N NAME RECORDS`), each page of a smaller resource's listing it reads, with its
    records (`page NAME RECORDS`), and when the run, the transactions read, waits for the
    smaller resources (`waiting for the smaller resources`); `options`: `SyncOptions` fields set, `words`: more of its
    command line (every resource unless `--resources` says otherwise)."""
    return _SCRIPT.replace("OPTIONS", repr(options or {})).replace("WORDS", repr(list(words)))


#: The sync of these tests: batches made small (the same machinery as a large sync's, at a
#: test's size): a reader hands over every 200 records, a batch holds at most 1,000, and the
#: readers run at most 1,500 records ahead of the commits.
_SMALL_BATCHES = {"land_records": 200, "batch_records": 1_000, "ahead_records": 1_500}
_WORDS = ("--concurrency", "4", "--verify-syncs", "1000000")
_SYNC = sync_script(_SMALL_BATCHES, *_WORDS, "--resources", "transactions")
#: The same, of every resource (transactions, customers, cards, accounts).
_SYNC_ALL = sync_script(_SMALL_BATCHES, *_WORDS)

#: What a sync stores, less its own bookkeeping (which run stored what, and when).
_RUN = "first_seen_at, first_run_id, last_changed_run_id, last_synced_at, sync_run_id"
STORED_TABLES = {
    "transactions": f"* EXCLUDE ({_RUN}, removed_at)",
    "outgoing_fees": f"* EXCLUDE ({_RUN})",
    "card_transactions": f"* EXCLUDE ({_RUN})",
    "payment_instructions": f"* EXCLUDE ({_RUN})",
    "status_history": "* EXCLUDE (observed_at, run_id)",
}
#: The same, of every resource a sync reads.
ALL_STORED_TABLES = {
    **STORED_TABLES,
    **{name: f"* EXCLUDE ({_RUN})" for name in SMALL_RESOURCES},
    "balance_reads": "* EXCLUDE (run_id)",
}


def _stored(
    path: Path, tables: dict[str, str] = STORED_TABLES
) -> dict[str, list[tuple[object, ...]]]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return {
            table: con.execute(f"SELECT {columns} FROM {table} ORDER BY ALL").fetchall()
            for table, columns in tables.items()
        }
    finally:
        con.close()


@dataclass
class Seen:
    """What a sync process said so far: its commits, the records of every resource they
    held, and the pages of the smaller resources' listings it read."""

    commits: int = 0
    committed: int = 0
    pages: int = 0
    #: per resource, its commits and the records its pages held
    commits_of: Counter[str] = field(default_factory=Counter)
    read: Counter[str] = field(default_factory=Counter)
    #: whether the run, the transactions read, waits for the smaller resources
    waiting: bool = False
    #: the distinct transactions the readers handed over to be committed
    handed: int = 0


def run_sync(
    script: str,
    env: dict[str, str],
    path: Path,
    requests: Callable[[], int],
    stop_after: int | None = None,
    *,
    stop: Callable[[Seen], bool] | None = None,
) -> dict[str, Any]:
    """A sync process running `script` (`sync_script`) into `path`; sent SIGINT once its
    announced commits reach `stop_after`, or once `stop` says so of what it said so far. Says
    its exit code, its wall seconds, the requests the service answered it (`requests()`: the
    service's count), the records it committed and in how many commits, the pages of the
    smaller resources it read, the seconds from the SIGINT to its exit and the end of what it
    wrote on stderr."""
    if stop_after is not None:
        stop = lambda seen: seen.commits == stop_after  # noqa: E731
    before, started = requests(), time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )
    assert proc.stdout is not None and proc.stderr is not None
    seen = Seen()
    signalled = None
    for line in proc.stdout:
        words = line.split()
        if words[:1] == ["committed"]:
            seen.commits, seen.committed = seen.commits + 1, int(words[1])
            seen.commits_of[words[2]] += 1
        elif words[:1] == ["page"]:
            seen.pages += 1
            seen.read[words[1]] += int(words[2])
        elif words[:2] == ["waiting", "for"]:
            seen.waiting = True
        elif words[:1] == ["handed"]:
            seen.handed = int(words[1])
            continue
        else:
            continue  # the sync's own report
        if signalled is None and stop is not None and stop(seen):
            proc.send_signal(signal.SIGINT)
            signalled = time.monotonic()
    proc.wait(timeout=600)
    ended = time.monotonic()
    return {
        "exit": proc.returncode,
        "seconds": ended - started,
        "requests": requests() - before,
        "committed": seen.committed,
        "handed": seen.handed,
        "commits": seen.commits,
        "pages": seen.pages,
        "read": seen.read,
        "ctrl_c_seconds": None if signalled is None else ended - signalled,
        "stderr": proc.stderr.read().strip()[-300:],
    }


def _sync(
    sandbox: Sandbox, env: dict[str, str], path: Path, stop_after: int | None = None
) -> tuple[int, int, float | None, int]:
    run = run_sync(_SYNC, env, path, sandbox.requests.count, stop_after)
    assert "Traceback" not in run["stderr"], run["stderr"]
    if stop_after is not None:
        # what the readers handed over before the Ctrl-C is committed, not dropped to be read
        # again: the copy the stopped run leaves holds every transaction handed over
        staged = path.with_name(path.name + ".syncing")
        con = duckdb.connect(str(staged))  # its log replayed, as the next run would
        try:
            (kept,) = con.execute("SELECT count(*) FROM transactions").fetchall()[0]
        finally:
            con.close()
        assert kept == run["handed"] > 0, (kept, run["handed"])
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
    # resumed, and the pages being read at the Ctrl-C (what was read before it is committed:
    # 1.25 was the bound while up to 1,500 + 4 x 200 records read were dropped)
    _interrupted_and_resumed(tmp_path, 12_000, stops=[4], bound=1.10)


@pytest.mark.http
@pytest.mark.slow
def test_ctrl_c_at_a_quarter_half_and_three_quarters(tmp_path: Path) -> None:
    _interrupted_and_resumed(tmp_path, 40_000, stops=[10, 20, 30], bound=1.05)


def _parts_read(path: Path) -> dict[str, tuple[int, int]]:
    """Per smaller resource of a (staged) file, the records of the parts of its whole read
    committed, and how many parts are left to read."""
    con = duckdb.connect(str(path))  # its log replayed, as the next run would
    try:
        rows = con.execute(
            """SELECT resource, sum(records) FILTER (WHERE done), count(*) FILTER (WHERE NOT done)
               FROM sync_slices WHERE resource <> 'transactions' GROUP BY ALL"""
        ).fetchall()
    finally:
        con.close()
    return {name: (int(records or 0), left) for name, records, left in rows}


@pytest.mark.http
def test_a_ctrl_c_while_the_smaller_resources_are_read(tmp_path: Path) -> None:
    # remittance: about a customer per transaction, so customers and accounts are pages long
    # (at 6,000 transactions, some 40 pages of customers, 66 of external and 33 of internal
    # accounts, each cut in parts by currency or creation time)
    sandbox = Sandbox(seed=8, transactions=6_000, profile="remittance")
    with sandbox.serve() as server:
        sandbox.faults.configure(latency=0.002)
        env = sandbox.env(server)
        whole = run_sync(_SYNC_ALL, env, tmp_path / "whole.duckdb", sandbox.requests.count)
        assert whole["exit"] == 0, whole["stderr"]
        expected = _stored(tmp_path / "whole.duckdb", ALL_STORED_TABLES)
        assert all(expected[name] for name in SMALL_RESOURCES)
        path = tmp_path / "stopped.duckdb"
        # stopped once a first part of the internal accounts is committed: the accounts are
        # being read, some of their parts committed and some not
        first = run_sync(
            _SYNC_ALL,
            env,
            path,
            sandbox.requests.count,
            stop=lambda seen: seen.commits_of["internal_accounts"] > 0,
        )
        assert "Traceback" not in first["stderr"], first["stderr"]
        assert first["exit"] == 130
        # the goal, 1 s, is measured in BENCHMARKS.md (a loaded machine's commit may take more)
        assert first["ctrl_c_seconds"] is not None and first["ctrl_c_seconds"] < 5
        attempt = last_attempt(path)
        assert attempt is not None and attempt["status"] == "stopped"
        parts = _parts_read(path.with_name(path.name + ".syncing"))
        done, left = parts["internal_accounts"]
        assert done > 0 and left > 0  # stopped while they were read
        second = run_sync(_SYNC_ALL, env, path, sandbox.requests.count)
        assert second["exit"] == 0, second["stderr"]
        # the next run reads only the parts not committed (before: every resource whose whole
        # read had not ended was read whole again)
        for name, (done, left) in parts.items():
            if left:
                assert second["read"][name] == whole["read"][name] - done, name
        assert _stored(path, ALL_STORED_TABLES) == expected
        with Warehouse(path, read_only=True) as wh:
            assert_exact(wh, sandbox)
            assert list(wh.sync_runs()["status"]) == ["interrupted", "succeeded"]


@pytest.mark.http
def test_a_ctrl_c_while_the_run_waits_for_the_smaller_resources_stops_them(
    tmp_path: Path,
) -> None:
    # the run then waits for the smaller resources' thread alone: the wait must let the
    # SIGINT in (a thread's join without a timeout does not, and the run went on to the end)
    sandbox = Sandbox(seed=8, transactions=3_000, profile="remittance")
    with sandbox.serve() as server:
        sandbox.faults.configure(latency=0.002)
        env = sandbox.env(server)
        whole = run_sync(_SYNC_ALL, env, tmp_path / "whole.duckdb", sandbox.requests.count)
        expected = _stored(tmp_path / "whole.duckdb", ALL_STORED_TABLES)
        path = tmp_path / "stopped.duckdb"
        first = run_sync(
            _SYNC_ALL, env, path, sandbox.requests.count, stop=lambda seen: seen.waiting
        )
        assert first["exit"] == 130, first["stderr"]
        assert first["ctrl_c_seconds"] is not None and first["ctrl_c_seconds"] < 5
        # stopped with parts of the smaller resources left to read (the remittance profile's
        # accounts and customers outnumber its transactions)
        parts = _parts_read(path.with_name(path.name + ".syncing"))
        assert sum(left for _, left in parts.values()) > 0, parts
        assert first["committed"] < whole["committed"]
        second = run_sync(_SYNC_ALL, env, path, sandbox.requests.count)
        assert second["exit"] == 0, second["stderr"]
        assert _stored(path, ALL_STORED_TABLES) == expected


def test_a_kernel_interrupt_keeps_what_was_read_and_leaves_the_warehouse_as_it_was_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A notebook's interrupt (a KeyboardInterrupt on the kernel's main thread, no `paylens
    sync` handler) stops a sync as a Ctrl-C does: the transactions the readers handed over
    are committed, not dropped; the warehouse stays open with its own settings (the last
    commits' checkpoint, held back, is the next commit's again); the next sync finishes it."""
    import _thread

    from paylens.warehouse.sync import run

    sandbox = Sandbox(seed=8, transactions=20_000)
    pages_of, put = run.TransactionSync._pages, run.Writer.put
    handed: set[str] = set()
    seen = [0]

    def interrupting(self: Any, window: Any) -> Any:
        for page in pages_of(self, window):
            seen[0] += 1
            if seen[0] == 60:
                _thread.interrupt_main()
            yield page

    def counted(self: Any, landing: Any) -> None:
        ids = list(landing.buffer)  # typed, a landing lets its texts go: perhaps before put returns
        put(self, landing)
        handed.update(ids)

    monkeypatch.setattr(run.TransactionSync, "_pages", interrupting)
    monkeypatch.setattr(run.Writer, "put", counted)
    with Warehouse(tmp_path / "w.duckdb") as wh, sandbox.client() as client:
        with pytest.raises(KeyboardInterrupt):
            wh.sync(client, progress=False, resources=["transactions"])
            time.sleep(5)  # the interrupt lands on this thread's next instruction
        stored = set(wh.sql("SELECT id FROM transactions")["id"])
        assert stored == handed and 0 < len(stored) < 20_000
        (threshold,) = wh.sql("SELECT current_setting('checkpoint_threshold') AS t")["t"]
        assert threshold == "61.0 MiB"  # the write connection's 64 MB
        (limit,) = wh.sql("SELECT current_setting('memory_limit') AS m")["m"]
        assert (
            limit
            == duckdb.connect().execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
        )
        monkeypatch.setattr(run.TransactionSync, "_pages", pages_of)
        report = wh.sync(client, progress=False, resources=["transactions"])
        assert report.new == 20_000 - len(stored)
        assert_exact(wh, sandbox)
        assert list(wh.sync_runs()["status"]) == ["interrupted", "succeeded"]


@pytest.mark.http
def test_a_second_ctrl_c_during_the_last_commits_ends_the_run_with_its_one_line(
    tmp_path: Path,
) -> None:
    """A user who presses Ctrl-C twice (the second while the first's last commits run): the
    process ends at once with the Ctrl-C's one line and exit code, no traceback; what it had
    committed is kept, and the next run finishes the read exactly."""
    sandbox = Sandbox(seed=8, transactions=12_000)
    with sandbox.serve() as server:
        sandbox.faults.configure(latency=0.002)
        env = {**os.environ, **sandbox.env(server)}
        path = tmp_path / "w.duckdb"
        proc = subprocess.Popen(
            [sys.executable, "-c", _SYNC, str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert proc.stdout is not None and proc.stderr is not None
        for line in proc.stdout:
            if line.startswith("committed") and line.split()[2] == "transactions":
                proc.send_signal(signal.SIGINT)
                signalled = time.monotonic()
                time.sleep(0.05)
                proc.send_signal(signal.SIGINT)
                break
        proc.stdout.read()
        assert proc.wait(timeout=60) == 130
        assert time.monotonic() - signalled < 5  # the goal, 1 s, is measured in BENCHMARKS.md
        said = proc.stderr.read().strip()
        assert "Traceback" not in said and said.count("\n") == 0, said
        assert "interrupted" in said
        done = subprocess.run(
            [sys.executable, "-m", "paylens.cli", "sync", "--db", str(path), "--quiet"],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert done.returncode == 0, done.stderr
    with Warehouse(path, read_only=True) as wh:
        assert_exact(wh, sandbox)
        assert list(wh.sync_runs()["status"]) == ["interrupted", "succeeded"]
