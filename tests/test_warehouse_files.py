"""The warehouse file under hostile conditions: foreign files, a full disk, a truncated staged
copy, stacked statements in a plan's filter, other writers and readers of the file, the CLI's
one-line errors, and exception chains and a database that never carry a credential."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest

from paylens import Client, Sandbox, ops
from paylens.errors import (
    APIConnectionError,
    InvalidArgumentError,
    OutcomeUnknownError,
    PaylensError,
    WarehouseEmptyError,
    WarehouseError,
    WarehouseFileError,
    WarehouseLockedError,
    WarehouseNotFoundError,
    WarehouseStorageError,
)
from paylens.warehouse import Warehouse, sync_file
from paylens.warehouse._staged import staged_path

from ._helpers import CliRun, run_cli


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _digests(path: Path) -> dict[str, str]:
    """The file's digest and its write-ahead log's, when it has one."""
    logs = path.parent.glob(f"{path.name}.wal")
    return {p.name: _digest(p) for p in [path, *logs]}


def _sync_process(path: Path, transactions: int) -> list[str]:
    """The command line of a `paylens sync` process of the embedded sandbox into `path`."""
    sandbox = ["--sandbox", "--transactions", str(transactions)]
    return [sys.executable, "-m", "paylens.cli", "sync", "--db", str(path), *sandbox, "--quiet"]


def _one_line(result: CliRun | subprocess.CompletedProcess[str]) -> str:
    err = result.stderr.strip()
    assert "Traceback" not in err and err.count("\n") == 0, err
    return err


@pytest.fixture
def foreign_files(tmp_path: Path) -> dict[str, Path]:
    sqlite_path = tmp_path / "ledger.sqlite"
    with contextlib.closing(sqlite3.connect(sqlite_path)) as con:
        con.execute("CREATE TABLE ledger (id INTEGER, amount INTEGER)")
        con.execute("INSERT INTO ledger VALUES (1, 100)")
        con.commit()
    other_duck = tmp_path / "other.duckdb"
    with contextlib.closing(duckdb.connect(str(other_duck))) as con:
        con.execute("CREATE TABLE budget (month VARCHAR, amount BIGINT)")
        con.execute("INSERT INTO budget VALUES ('2025-09', 1200)")
    # one whose last changes are still in its write-ahead log, which an open for writing
    # would replay into the file: it must be looked at without being opened for writing
    logged = tmp_path / "logged.duckdb"
    with contextlib.closing(duckdb.connect(str(logged))) as con:
        con.execute("CREATE TABLE budget (month VARCHAR, amount BIGINT)")
        con.execute("CHECKPOINT")
        con.execute("PRAGMA disable_checkpoint_on_shutdown")
        con.execute("INSERT INTO budget VALUES ('2025-10', 1300)")
    assert logged.with_name("logged.duckdb.wal").stat().st_size > 0
    text = tmp_path / "notes.duckdb"
    text.write_text("month-end notes\n" * 100)
    truncated = tmp_path / "truncated.duckdb"
    truncated.write_bytes(b"\x00" * 7)
    return {
        "sqlite": sqlite_path,
        "duckdb": other_duck,
        "duckdb_wal": logged,
        "text": text,
        "truncated": truncated,
    }


@pytest.mark.parametrize("kind", ["sqlite", "duckdb", "duckdb_wal", "text", "truncated"])
@pytest.mark.parametrize("read_only", [False, True])
def test_foreign_files_are_refused_and_never_altered(
    foreign_files: dict[str, Path], kind: str, read_only: bool
) -> None:
    path = foreign_files[kind]
    before = _digests(path)
    siblings = set(path.parent.iterdir())
    with pytest.raises(WarehouseFileError, match=r"left as is|not a|another program"):
        Warehouse(path, read_only=read_only)
    assert _digests(path) == before
    assert {p for p in path.parent.iterdir() if not p.name.endswith(".lock")} == siblings
    if read_only:
        return  # the CLI below opens the file the same way whatever `read_only`: run it once
    # and the CLI says so in one line
    result = run_cli("sync", "--db", str(path), "--sandbox", "--transactions", "200", "--quiet")
    assert result.returncode == 2 and _one_line(result).startswith("paylens sync:")
    assert _digests(path) == before


def test_a_sqlite_file_never_makes_duckdb_fetch_an_extension(
    foreign_files: dict[str, Path],
) -> None:
    extensions = Path.home() / ".duckdb" / "extensions"
    existed = set(extensions.rglob("*")) if extensions.exists() else set()
    with pytest.raises(WarehouseFileError, match="SQLite"):
        Warehouse(foreign_files["sqlite"])
    now = set(extensions.rglob("*")) if extensions.exists() else set()
    assert now == existed


@contextlib.contextmanager
def _small_disk(tmp_path: Path, megabytes: int) -> Iterator[Path | None]:
    """A tmpfs of `megabytes` where the machine allows mounting one, else None."""
    mount = tmp_path / "small-disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(mount)],
        capture_output=True,
    )
    if done.returncode != 0:
        yield None
        return
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_a_full_disk_is_a_typed_error_that_loses_nothing(tmp_path: Path) -> None:
    big = Sandbox(seed=1, transactions=20_000)
    recent = big.now - timedelta(days=1)  # a few hundred of its transfers: the file's first
    with _small_disk(tmp_path, 12) as disk:
        if disk is None:
            pytest.skip("cannot mount a tmpfs here; the injected ENOSPC test covers the copy")
        path = disk / "w.duckdb"
        with Warehouse(path) as wh:
            wh.sync(big.client(), progress=False, since=recent, resources=["transactions"])
            before = set(wh.transactions()["id"])
        with pytest.raises(WarehouseStorageError, match="no space left"), Warehouse(path) as wh:
            wh.sync(big.client(), progress=False, full=True)
        with pytest.raises(WarehouseStorageError, match="no space left"):
            sync_file(path, big.client(), progress=False, full=True)
        with Warehouse(path, read_only=True) as wh:
            # what was stored before stays (batches the big sync committed before the disk
            # filled stay too: how many depends on timing), and nothing is doubled
            stored = wh.sql("SELECT count(*) AS n, count(DISTINCT id) AS d FROM transactions")
            assert before <= set(wh.transactions()["id"]) and 100 < len(before) < 1_000
            assert stored["n"][0] == stored["d"][0]
        # the failed staged copy was removed to give its space back (no copy is left to fill
        # the disk); once the operator makes room, the next run succeeds
        assert not path.with_name(path.name + ".syncing").exists()
        subprocess.run(["mount", "-o", "remount,size=96m", str(disk)], check=True)
        report = sync_file(path, big.client(), progress=False, full=True)
        assert report.resources["transactions"]["unchanged"] >= len(before)
        with Warehouse(path, read_only=True) as wh:
            assert len(wh.transactions()) == 20_000
        assert not path.with_name(path.name + ".syncing").exists()


_KILLED_SYNC = """
import os, signal, sys
from paylens.cli import main
from paylens.warehouse import Warehouse
from paylens.warehouse.sync import save

if sys.argv[1] == "mid-run":  # killed right after its first commit: on a quiet machine the
    # writer gathers all 8,000 records into one batch, so a second commit may never come
    commit = save.commit

    def commit_then_die(*args, **kwargs):
        commit(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)

    save.commit = commit_then_die
else:  # after its last commit, before its copy is closed and swapped in
    Warehouse.close = lambda self: os.kill(os.getpid(), signal.SIGKILL)
main(sys.argv[2:])
"""


def _fill(disk: Path, leave_kb: int) -> None:
    """Fill the file system of `disk` but `leave_kb` KiB, with one file (`filler`)."""
    free = shutil.disk_usage(disk).free
    with open(disk / "filler", "wb") as f:
        os.posix_fallocate(f.fileno(), 0, max(0, free - leave_kb * 1024))


@pytest.mark.parametrize(
    ("killed", "leave_kb"),
    # (the run after a kill before close finds its records as they were and only stamps them:
    # it needs far less room than writing them again, 3 MB being enough since #34)
    [("mid-run", 2048), ("before-close", 1024)],
)
def test_a_killed_sync_then_a_full_disk_gives_storage_errors_and_drops_the_copy(
    tmp_path: Path, killed: str, leave_kb: int
) -> None:
    """Seen under SIGKILL plus a full disk: `paylens sync` exited 2 ("... was not closed
    cleanly; it is kept") twice, keeping a staged copy that held the disk full. A sync is
    killed (mid-run, or after its last commit), the disk fills, and each next `paylens sync`
    (real processes) fails in one line with the full disk (exit 1), drops the copy it cannot
    complete and leaves the file as it was; once there is room, the next one succeeds."""
    seed, size = 1, 8_000
    recent = (Sandbox(seed=seed, transactions=size).now - timedelta(days=1)).isoformat()
    with _small_disk(tmp_path, 64) as disk:
        if disk is None:
            pytest.skip("cannot mount a tmpfs here")
        path = disk / "w.duckdb"
        sandbox = ["--sandbox", "--seed", str(seed), "--transactions", str(size), "--quiet"]
        sync = [sys.executable, "-m", "paylens.cli", "sync", "--db", str(path), *sandbox]
        args = ["--resources", "transactions"]
        first = subprocess.run([*sync, *args, "--since", recent], capture_output=True, text=True)
        assert first.returncode == 0, first.stderr
        with Warehouse(path, read_only=True) as wh:
            before = set(wh.transactions()["id"])
        argv = ["sync", "--db", str(path), *sandbox, *args, "--full"]
        died = subprocess.run(
            [sys.executable, "-c", _KILLED_SYNC, killed, *argv], capture_output=True, text=True
        )
        assert died.returncode == -signal.SIGKILL, died.stderr
        staged = path.with_name(path.name + ".syncing")
        assert staged.exists()
        _fill(disk, leave_kb)
        for _ in range(2):
            again = subprocess.run([*sync, *args], capture_output=True, text=True, timeout=300)
            assert again.returncode == 1, again.stderr
            assert "no space left" in _one_line(again)
            left = sorted(p.name for p in disk.iterdir() if ".syncing" in p.name)
            assert left == ["w.duckdb.syncing.lock"]  # the copy, its log and its base dropped
            with Warehouse(path, read_only=True) as wh:
                kept = wh.sql("SELECT count(*) AS n, count(DISTINCT id) AS d FROM transactions")
                assert set(wh.transactions()["id"]) == before
                assert kept["n"][0] == kept["d"][0] == len(before)
        (disk / "filler").unlink()
        done = subprocess.run([*sync, *args], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert not staged.exists()
        with Warehouse(path, read_only=True) as wh:
            assert len(wh.transactions()) == size


def test_a_copy_cut_short_by_enospc_leaves_no_staged_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox = Sandbox(seed=2, transactions=300)
    path = tmp_path / "w.duckdb"
    with Warehouse(path) as wh:
        wh.sync(sandbox.client(), progress=False)

    def full(src: str, dst: str, **_: object) -> None:
        Path(dst).write_bytes(Path(src).read_bytes()[:1000])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(shutil, "copyfile", full)
    with pytest.raises(WarehouseStorageError, match="no space left"):
        sync_file(path, sandbox.client(), progress=False)
    monkeypatch.undo()
    assert not path.with_name(path.name + ".syncing").exists()
    assert not path.with_name(path.name + ".syncing.tmp").exists()
    report = sync_file(path, sandbox.client(), progress=False, full=True)
    assert report.resources["transactions"]["unchanged"] == 300


def test_a_truncated_staged_copy_is_dropped_and_the_sync_succeeds(tmp_path: Path) -> None:
    sandbox = Sandbox(seed=3, transactions=300)
    path = tmp_path / "w.duckdb"
    sync_file(path, sandbox.client(), progress=False)
    # a staged copy that a full disk cut short, with a base that still matches the target
    staged = path.with_name(path.name + ".syncing")
    staged.write_bytes(path.read_bytes()[:4096])
    base = path.with_name(path.name + ".syncing.base")
    from paylens.warehouse._staged import _fingerprint

    base.write_bytes(_fingerprint(path))
    report = sync_file(path, sandbox.client(), progress=False, full=True)
    assert report.resources["transactions"]["unchanged"] == 300
    assert not staged.exists()
    with Warehouse(path, read_only=True) as wh:
        assert len(wh.transactions()) == 300


def test_a_first_sync_that_fails_keeps_a_copy_only_when_it_stored_something(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failed first sync leaves no staged copy beside a file that does not exist when it
    stored nothing (a mistyped path, a service not reached); once it has committed records, the
    copy stays and the next run resumes it."""
    from paylens.warehouse.sync import save

    sandbox = Sandbox(seed=3, transactions=2_000)
    path = tmp_path / "w.duckdb"
    sandbox.faults.inject(500, "INTERNAL_ERROR", count=1_000)
    with pytest.raises(PaylensError):
        sync_file(path, sandbox.client(max_retries=0), progress=False, resources=["transactions"])
    assert list(tmp_path.iterdir()) == []  # nothing left behind, not even the locks' files
    sandbox.faults.clear()

    commit = save.commit

    def commit_then_fail(*args: object, **kwargs: object) -> None:
        commit(*args, **kwargs)  # type: ignore[arg-type]
        raise RuntimeError("the process failed right after a commit")

    monkeypatch.setattr(save, "commit", commit_then_fail)
    with pytest.raises(RuntimeError):
        sync_file(path, sandbox.client(), progress=False, resources=["transactions"])
    monkeypatch.setattr(save, "commit", commit)
    assert not path.exists() and staged_path(path).exists()  # kept: it holds records
    report = sync_file(path, sandbox.client(), progress=False, resources=["transactions"])
    assert report.resources["transactions"]["new"] < 2_000  # what the failed run stored stays
    with Warehouse(path, read_only=True) as wh:
        assert len(wh.transactions()) == 2_000
        assert list(wh.sync_runs()["status"]) == ["failed", "succeeded"]


def test_a_lock_file_removed_by_its_holder_still_lets_one_writer_at_a_time(tmp_path: Path) -> None:
    """A failed first sync removes its lock file; a writer that was waiting on that file gets
    its lock, sees the file gone and takes the path's, so two writers never both hold one."""
    import threading

    from paylens.warehouse._open import WriterLock

    path = tmp_path / "w.duckdb"
    first = WriterLock(path)
    got: list[WriterLock] = []
    waiter = threading.Thread(target=lambda: got.append(WriterLock(path, wait=30)))
    waiter.start()

    def opened() -> int:  # how many descriptors of this process are open on the lock file
        found = 0
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                found += os.readlink(f"/proc/self/fd/{fd}") == str(first.path)
        return found

    while opened() < 2:  # until the waiter has opened the file `first` holds, and waits on it
        threading.Event().wait(0.01)
    first.remove()
    waiter.join()
    (second,) = got
    assert second.path.exists()
    with pytest.raises(WarehouseLockedError):
        WriterLock(path)
    second.release()


def test_a_sync_of_another_service_names_the_file_the_user_gave(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    sync_file(path, Sandbox(seed=3, transactions=300).client(), progress=False)
    other = Client("https://api.example.com/2025-10-13", "id", "secret")
    with pytest.raises(WarehouseError) as refused:
        sync_file(path, other, progress=False)
    assert str(refused.value).startswith(f"{path} holds data from https://sandbox.")
    assert ".syncing" not in str(refused.value)


def _journal_a_row(wh: Warehouse, outcome: str, message: str) -> None:
    """A row an apply would journal, written straight to the file."""
    wh.journal_record(
        fingerprint="f", action="cancel", item_id="Transaction:x", outcome=outcome, message=message
    )


def test_an_interrupted_swap_is_finished_by_the_next_run(tmp_path: Path) -> None:
    sandbox = Sandbox(seed=4, transactions=300)
    path = tmp_path / "w.duckdb"
    sync_file(path, sandbox.client(), progress=False)
    with Warehouse(path) as wh:  # a journal row in the target
        _journal_a_row(wh, "skipped_changed", "kept")
    staged = path.with_name(path.name + ".syncing")
    shutil.copyfile(path, staged)
    path.with_name(path.name + ".swapping").write_bytes(b"swap")
    sync_file(path, sandbox.client(), progress=False)
    assert not staged.exists() and not path.with_name(path.name + ".swapping").exists()
    with Warehouse(path, read_only=True) as wh:
        assert list(wh.journal()["message"]) == ["kept"]


_KILLED_IN_ITS_SWAP = """
import os, signal, sys
from paylens import Sandbox
from paylens.warehouse import _staged, sync_file

replace = os.replace

def die_instead(source, destination):  # the swap's rename: the marker is written, it never is
    if str(source).endswith(".syncing"):
        os.kill(os.getpid(), signal.SIGKILL)
    replace(source, destination)

sandbox = Sandbox(seed=4, transactions=300)
_staged.os.replace = die_instead
sync_file(sys.argv[1], sandbox.client(), progress=False, full=True)
"""


def test_a_write_after_a_sync_killed_in_its_swap_is_kept_by_the_next_sync(tmp_path: Path) -> None:
    """A sync killed between writing its swap marker and the rename leaves its finished copy
    beside the file. A writer that opens the file next (an apply's journal, a notebook)
    finishes that swap first, so what it writes is in the file the next sync keeps."""
    sandbox = Sandbox(seed=4, transactions=300)
    path = tmp_path / "w.duckdb"
    sync_file(path, sandbox.client(), progress=False)
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_IN_ITS_SWAP, str(path)], capture_output=True, timeout=120
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert path.with_name(path.name + ".swapping").exists()  # killed inside its swap
    with Warehouse(path) as wh:  # an apply's journal entry, written next
        _journal_a_row(wh, "cancelled", "written after the killed swap")
    sync_file(path, sandbox.client(), progress=False)  # the next scheduled sync
    with Warehouse(path, read_only=True) as wh:
        assert list(wh.journal()["outcome"]) == ["cancelled"]
        assert list(wh.sync_runs()["status"]) == ["succeeded"] * 3


STACKED = "1=0; DELETE FROM transactions; SELECT id, created_at FROM transactions WHERE 1=1"


@pytest.mark.parametrize(
    "where",
    [
        STACKED,
        "1=0; DROP TABLE ops_journal",
        "id IN (SELECT id FROM transactions); CREATE TABLE x AS SELECT 1",
        "nextval('ops_journal_ids') > 0",
        "id IN (SELECT content FROM read_text('/etc/hostname'))",
        "",
    ],
)
def test_a_plan_filter_cannot_write(tmp_path: Path, where: str) -> None:
    sandbox = Sandbox(seed=5, transactions=500)
    path = tmp_path / "w.duckdb"
    with Warehouse(path) as wh:
        wh.sync(sandbox.client(), progress=False, resources=["transactions"])
        before = wh.sql("SELECT count(*) AS n FROM transactions")["n"][0]
        with pytest.raises(InvalidArgumentError, match="select"):
            ops.plan_cancel(wh, where)
        assert wh.sql("SELECT count(*) AS n FROM transactions")["n"][0] == before == 500
        assert "ops_journal" in set(wh.sql("SHOW TABLES")["name"])
        sequence = wh.sql("SELECT nextval('ops_journal_ids') AS n")["n"][0]
        assert sequence == 1  # the filter's nextval never ran against the warehouse


@pytest.mark.http
def test_cli_dry_run_with_stacked_statements_changes_nothing(tmp_path: Path) -> None:
    sandbox = Sandbox(seed=6, transactions=500)
    path = tmp_path / "w.duckdb"
    with sandbox.serve() as server:
        with Warehouse(path) as wh:
            client = Client(server.base_url, sandbox.client_id, sandbox.client_secret)
            wh.sync(client, progress=False, resources=["transactions"])
        before = _digest(path)
        env = sandbox.env(server)
        result = run_cli("cancel", "--db", str(path), "--where", STACKED, "--dry-run", env=env)
    assert result.returncode == 2
    assert "stacked statements" in _one_line(result)
    assert _digest(path) == before
    assert sandbox.requests.count() == 0 or sandbox.requests.count("POST") == 0


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    path = tmp_path / "held.duckdb"
    with Warehouse(path):  # a writer holds it: another process is refused
        result = subprocess.run(
            _sync_process(path, transactions=200),
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert result.returncode == 1
    assert "being written by" in _one_line(result)
    missing = run_cli("report", "--db", str(tmp_path / "nope.duckdb"))
    assert missing.returncode == 2 and _one_line(missing)


def _talking(script: str, path: Path) -> subprocess.Popen[str]:
    """`python -c script path` in a process of its own, talked to by lines on its stdin and
    stdout."""
    return subprocess.Popen(
        [sys.executable, "-c", script, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


_WRITER_UNTIL_TOLD = """
import os, sys
from paylens.warehouse import Warehouse
wh = Warehouse(sys.argv[1])
print("open", os.getpid(), flush=True)
sys.stdin.readline()  # until the test says to close
wh.close()
print("closed", flush=True)
"""


def test_a_second_writer_is_refused_in_one_line_naming_the_holder_or_waits(
    tmp_path: Path,
) -> None:
    """README: a second writer, in any process, gets `WarehouseLockedError` naming the holder,
    or waits `wait=` seconds; `paylens sync` beside an open read-write `Warehouse` "fails in one
    line, or waits with `--wait`". The holder here is a `python -c` script (a command line
    with newlines): the refusal names it in one line, and tells a shell user what to type."""
    path = tmp_path / "w.duckdb"
    sync_file(path, Sandbox(seed=0, transactions=200).client(), progress=False)
    writer = _talking(_WRITER_UNTIL_TOLD, path)
    try:
        assert writer.stdout is not None and writer.stdin is not None
        assert writer.stdout.readline().split() == ["open", str(writer.pid)]
        with pytest.raises(WarehouseLockedError) as held:
            Warehouse(path)
        assert held.value.path == path
        assert (held.value.holder or "").startswith(f"process {writer.pid} (python")
        assert "\n" not in str(held.value) and "read_only=True" in str(held.value)
        with pytest.raises(WarehouseLockedError):  # a short wait, still held: refused after it
            Warehouse(path, wait=0.3)
        sync = ["sync", "--db", str(path), "--sandbox", "--transactions", "200", "--quiet"]
        refused = run_cli(*sync)
        assert refused.returncode == 1
        said = _one_line(refused)
        assert said.startswith(f"paylens sync: failed: the warehouse {path} is being written by ")
        assert f"process {writer.pid}" in said and "--wait SECONDS" in said
        assert "read_only" not in said  # Python advice, not a shell's

        def close_the_writer() -> None:
            time.sleep(0.5)  # while the sync below waits for it
            assert writer.stdin is not None
            writer.stdin.write("close\n")
            writer.stdin.flush()

        closer = threading.Thread(target=close_the_writer)
        closer.start()
        waited = run_cli(*sync, "--wait", "60")
        closer.join()
        assert waited.returncode == 0, waited.stderr
        assert writer.stdout.readline().strip() == "closed"
    finally:
        writer.kill()
        writer.wait()
    with Warehouse(path, read_only=True) as wh:
        assert list(wh.sync_runs()["status"]) == ["succeeded", "succeeded"]


def test_a_holder_is_named_in_one_line_however_its_lock_file_reads(tmp_path: Path) -> None:
    """The lock file names its holder in one line, shortened (a `python -c` script's text can
    be pages long); one an older paylens wrote, newlines and all, is read as one line too."""
    from paylens.warehouse._open import HOLDER_CHARS, WriterLock

    path = tmp_path / "w.duckdb"
    script = "python3 -c import sys\nfrom paylens.warehouse import Warehouse\n" + "x = 1\n" * 100
    lock = WriterLock(path, holder=script)
    try:
        with pytest.raises(WarehouseLockedError) as held:
            WriterLock(path)
        holder = held.value.holder or ""
        assert holder.startswith("process ") and "(python3 -c import sys from paylens." in holder
        assert holder.endswith("…)") and len(holder) <= len("process 4194304 ()") + HOLDER_CHARS
        assert "\n" not in str(held.value)
        lock.path.write_text("process 42 (python3 -c import sys\nprint(1)\n)")  # an older one's
        with pytest.raises(WarehouseLockedError) as held:
            WriterLock(path)
        assert held.value.holder == "process 42 (python3 -c import sys print(1) )"
    finally:
        lock.release()


def test_a_file_reached_by_another_name_has_one_writer(tmp_path: Path) -> None:
    """A link to the warehouse (or `dir/../w.duckdb`) names the same file: its writer lock is
    the file's, so an apply by one name waits for a sync by the other (a sync holds only that
    lock while it reads, its copy apart); and the sync writes the file itself, leaving the
    link a link."""
    from paylens.warehouse._open import WriterLock

    real = tmp_path / "real.duckdb"
    link = tmp_path / "link.duckdb"
    # the sandbox `_sync_process` syncs (seed 0): one platform's data by either name
    sync_file(real, Sandbox(seed=0, transactions=200).client(), progress=False)
    link.symlink_to(real)
    (tmp_path / "sub").mkdir()
    for name in (link, tmp_path / "sub" / ".." / "real.duckdb"):
        sync = WriterLock(name, holder="paylens sync")  # as a sync by that name holds it
        try:
            apply = run_cli(
                "cancel", "--db", str(real), "--where", "TRUE", "--apply", "--yes", "--sandbox"
            )
            assert apply.returncode == 1 and "being written by" in _one_line(apply)
        finally:
            sync.release()
    done = subprocess.run(
        _sync_process(link, transactions=200), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert link.is_symlink() and link.resolve() == real
    with Warehouse(real, read_only=True) as wh:
        assert len(wh.sync_runs()) == 2
    from paylens.warehouse._open import wal_path

    assert wal_path(link) == tmp_path / "real.duckdb.wal"  # where DuckDB writes it


def test_a_bulk_apply_on_a_path_with_no_warehouse_creates_none(tmp_path: Path) -> None:
    typo = tmp_path / "typo.duckdb"
    done = run_cli("cancel", "--db", str(typo), "--where", "TRUE", "--apply", "--yes", "--sandbox")
    assert done.returncode == 2 and "no warehouse at" in _one_line(done)
    assert not typo.exists()
    with pytest.raises(WarehouseNotFoundError):
        Warehouse(typo, create=False)


def test_port_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run_cli("sandbox", "serve", "--port", str(port), "--transactions", "200")
    assert result.returncode == 1
    assert f"port {port}" in _one_line(result)


def test_ctrl_c_is_one_line_and_releases_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    # a sync of ~3 s on an idle machine (generated in ~0.4 s before it starts): the Ctrl-C
    # below lands 0.5 s into its reading and committing, well before its end
    proc = subprocess.Popen(
        _sync_process(path, transactions=40_000),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = path.with_name(path.name + ".syncing.base")
    deadline = time.monotonic() + 120
    while not base.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.5)
    assert proc.poll() is None, "the sync ended before the Ctrl-C"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130
    assert "interrupted" in err and "Traceback" not in err and err.strip().count("\n") == 0
    # the lock is released (that the next run resumes from the staged copy, adding just the
    # rest, is test_a_ctrl_c_that_duckdb_drops_still_stops_the_sync's and the killed sync's)
    with Warehouse(path.with_name("other.duckdb")):
        pass
    assert not Path(str(path) + ".lock").exists() or _lock_is_free(path)


@pytest.mark.parametrize("taken_as", ["Query interrupted", "INTERRUPT Error: Interrupted!"])
def test_a_ctrl_c_that_duckdb_takes_stops_the_sync_as_a_ctrl_c(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, taken_as: str
) -> None:
    # DuckDB raises a SIGINT that lands while a statement runs on the main thread as its own
    # error (RuntimeError or InterruptException), not as KeyboardInterrupt: `paylens sync`
    # then ended "failed" (exit 1), or, on opening the staged copy, took it for a file that
    # is not a warehouse, made a new copy and synced on (exit 0)
    from paylens.warehouse import _open
    from paylens.warehouse.sync import save

    error = RuntimeError(taken_as) if taken_as == "Query interrupted" else None
    client = Sandbox(seed=3, transactions=300).client()
    path = tmp_path / "w.duckdb"
    sync_file(path, client, progress=False)

    def interrupted_register(*args: object, **kwargs: object) -> None:
        raise error or duckdb.InterruptException(taken_as)

    monkeypatch.setattr(save, "register", interrupted_register)
    with pytest.raises(KeyboardInterrupt):
        sync_file(path, client, full=True, progress=False)
    monkeypatch.undo()

    real_connect = duckdb.connect

    def interrupted_connect(database: str, *args: object, **kwargs: object) -> object:
        if database.endswith(".syncing"):
            raise duckdb.InterruptException(taken_as)
        return real_connect(database, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_open.duckdb, "connect", interrupted_connect)
    with pytest.raises(KeyboardInterrupt):
        sync_file(path, client, progress=False)
    monkeypatch.undo()
    # the file is intact and the next run goes ahead
    assert sync_file(path, client, progress=False).mode == "incremental"


def test_a_ctrl_c_that_duckdb_drops_still_stops_the_sync(tmp_path: Path) -> None:
    # the CLI's handler keeps the Ctrl-C (CTRL_C) besides raising it: a run whose
    # KeyboardInterrupt a DuckDB statement took and dropped stops at its next wait, the file
    # intact, and the next run goes ahead
    from paylens.warehouse.sync.run import CTRL_C

    client = Sandbox(seed=4, transactions=2_000).client()
    path = tmp_path / "w.duckdb"
    CTRL_C.set()
    try:
        with pytest.raises(KeyboardInterrupt):
            sync_file(path, client, progress=False)
    finally:
        CTRL_C.clear()
    # what the stopped run committed (batches may land before its first look at CTRL_C) is
    # kept in the staged copy, which the next run resumes: it adds just the rest, once
    staged = staged_path(path)
    kept = 0
    if staged.exists():
        with Warehouse(staged, read_only=True) as wh:
            kept = int(wh.sql("SELECT count(*) AS n FROM transactions")["n"][0])
    assert kept < 2_000
    report = sync_file(path, client, progress=False)
    with Warehouse(path, read_only=True) as wh:
        counts = wh.sql("SELECT count(*) AS n, count(DISTINCT id) AS d FROM transactions")
        assert (counts["n"][0], counts["d"][0]) == (2_000, 2_000)
    assert report.resources["transactions"]["new"] == 2_000 - kept


def _lock_is_free(path: Path) -> bool:
    try:
        with Warehouse(path, wait=0):
            return True
    except WarehouseLockedError:
        return False
    except WarehouseFileError:
        return True  # no warehouse yet: the lock was free all the same


def test_exception_chains_never_carry_request_headers() -> None:
    sandbox = Sandbox(seed=7, transactions=200)
    client = sandbox.client(max_retries=1, sleep=lambda _: None)
    tid = next(iter(sandbox.world.all_transactions()))["id"]
    sandbox.faults.drop_next(5)
    errors: list[BaseException] = []
    for call in (lambda: client.transactions.get(tid), lambda: client.transactions.cancel(tid)):
        try:
            call()
        except (APIConnectionError, OutcomeUnknownError) as exc:
            errors.append(exc)
    assert [type(e) for e in errors] == [APIConnectionError, OutcomeUnknownError]
    for error in errors:
        seen, link = [], error
        while link is not None:
            seen.append(link)
            link = link.__cause__ or link.__context__
        assert seen == [error], f"{error!r} chains {seen[1:]!r}"
        for value in vars(error).values():
            assert "Authorization" not in repr(value)
            assert sandbox.client_secret not in repr(value)


def test_the_client_secret_never_reaches_the_database(tmp_path: Path) -> None:
    """README: "The client secret ... never appear[s] in ... the database": after a sync and an
    apply, no table's text and no byte of the file holds it."""
    sandbox = Sandbox(seed=3, transactions=500)
    secret = sandbox.client_secret
    path = tmp_path / "w.duckdb"
    with Warehouse(path) as wh, sandbox.client() as client:
        wh.sync(client, progress=False)
        plan = ops.plan_cancel(wh, "status IN ('PENDING', 'PROCESSING')", reason="duplicate")
        assert len(plan.eligible) > 0
        plan.apply(client, concurrency=2, progress=False)
        for table in wh.sql("SELECT table_name FROM information_schema.tables")["table_name"]:
            text = wh.sql(f'SELECT * FROM "{table}"').astype(str).to_csv()
            assert secret not in text, table
    assert secret.encode() not in path.read_bytes()


def test_in_memory_warehouses_are_private_and_leave_no_files(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    sandbox = Sandbox(seed=8, transactions=200)
    with Warehouse(":memory:") as one, Warehouse(":memory:") as two:
        one.sync(sandbox.client(), progress=False, resources=["transactions"])
        assert len(one.transactions()) == 200
        with pytest.raises(WarehouseEmptyError, match=r"^:memory: has no data"):
            two.transactions()
    assert list(tmp_path.iterdir()) == []


_READER_FOR_A_WHILE = """
import sys, time
from paylens.warehouse import Warehouse
wh = Warehouse(sys.argv[1], read_only=True)
print("open", flush=True)
time.sleep(float(sys.argv[2]))
wh.close()
print("closed", flush=True)
time.sleep(60)
"""


def test_a_writer_waits_for_a_reader_that_holds_the_file_and_is_told_who(tmp_path: Path) -> None:
    """A notebook's read-only Warehouse keeps writers out (DuckDB's own lock): a writer is
    told that a reader holds it, and `wait=` waits for the reader to close."""
    path = tmp_path / "w.duckdb"
    sync_file(path, Sandbox(seed=3, transactions=200).client(), progress=False)
    reader = subprocess.Popen(
        [sys.executable, "-c", _READER_FOR_A_WHILE, str(path), "1.5"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert reader.stdout is not None and reader.stdout.readline().strip() == "open"
        with pytest.raises(WarehouseLockedError, match=r"a reader .* keeps out writers"):
            Warehouse(path)
        with Warehouse(path, wait=30) as wh:  # in once the reader closes
            assert reader.stdout.readline().strip() == "closed"
            assert len(wh.transactions()) == 200
    finally:
        reader.kill()
        reader.wait()


_READER_TWICE = """
import sys
from paylens.warehouse import Warehouse
wh = Warehouse(sys.argv[1], read_only=True)
count = "SELECT count(*) AS n FROM transactions"
print(int(wh.sql(count)["n"].iloc[0]), flush=True)
sys.stdin.readline()  # until the test says the sync is done
print(int(wh.sql(count)["n"].iloc[0]), flush=True)
wh.close()
"""


def test_a_reader_keeps_the_snapshot_it_opened(tmp_path: Path) -> None:
    """README: a reader is "never blocked by a scheduled sync ... a reader keeps the snapshot
    it opened"; one opened after the swap sees the new state."""
    sandbox = Sandbox(seed=3, transactions=200)
    path = tmp_path / "w.duckdb"
    sync_file(path, sandbox.client(), progress=False)
    before = sandbox.world.transaction_count()
    reader = _talking(_READER_TWICE, path)
    try:
        assert reader.stdout is not None and reader.stdin is not None
        assert int(reader.stdout.readline()) == before
        sandbox.advance(timedelta(days=2))  # new activity
        after = sandbox.world.transaction_count()
        assert after > before
        sync_file(path, sandbox.client(), progress=False)
        reader.stdin.write("go\n")
        reader.stdin.flush()
        assert int(reader.stdout.readline()) == before  # its snapshot
        assert reader.wait(timeout=60) == 0
    finally:
        reader.kill()
        reader.wait()
    with Warehouse(path, read_only=True) as wh:
        assert len(wh.transactions()) == after


def test_a_reader_opening_during_a_swap_waits_for_its_end(tmp_path: Path) -> None:
    """While a sync swaps its copy in (its marker written, the file's old log removed, the
    copy not yet renamed) a reader would see an older state than both before and after: a
    reader that opens then waits for the swap to end (or, for a marker a killed sync left,
    two seconds at most)."""
    from paylens.warehouse._open import swap_marker

    path = tmp_path / "w.duckdb"
    sync_file(path, Sandbox(seed=3, transactions=200).client(), progress=False)
    marker = swap_marker(path)
    marker.write_bytes(b"swap")
    ended: list[float] = []

    def end_the_swap() -> None:
        time.sleep(0.3)
        ended.append(time.monotonic())
        marker.unlink()

    threading.Thread(target=end_the_swap).start()
    with Warehouse(path, read_only=True) as wh:
        opened = time.monotonic()
        assert len(wh.transactions()) == 200
    assert ended and opened >= ended[0]
    marker.write_bytes(b"swap")  # left by a sync killed mid-swap: waited for, then opened
    with Warehouse(path, read_only=True) as wh:
        assert len(wh.transactions()) == 200


def _in_kernel(client: Any, code: str) -> str:
    """Run `code` in a real Jupyter kernel, as a notebook cell; its stdout (raises on error)."""
    reply_id = client.execute(code)
    out: list[str] = []
    while True:
        message = client.get_iopub_msg(timeout=120)
        if message["parent_header"].get("msg_id") != reply_id:
            continue
        kind, content = message["msg_type"], message["content"]
        if kind == "stream":
            out.append(content["text"])
        elif kind == "error":
            raise AssertionError("\n".join(content["traceback"]))
        elif kind == "status" and content["execution_state"] == "idle":
            return "".join(out)


@pytest.mark.http
def test_a_notebook_open_on_the_warehouse_never_keeps_the_nightly_sync_out(tmp_path: Path) -> None:
    """A real kernel holds a read-only Warehouse between cells, as an open notebook does (and
    syncs it from the notebook: a staged copy swapped in, the writer lock held only while it
    runs); `paylens sync` run by cron in another process meanwhile succeeds, and the notebook
    reads the file again after its own next sync."""
    from jupyter_client.manager import start_new_kernel

    sandbox = Sandbox(seed=4, transactions=400)
    path = tmp_path / "paylens.duckdb"
    with sandbox.serve() as server:
        env = {**os.environ, **sandbox.env(server)}
        served = sandbox.env(server)
        client = Client(
            *(served[f"PAYLENS_{k}"] for k in ("BASE_URL", "CLIENT_ID", "CLIENT_SECRET"))
        )
        sync_file(path, client, progress=False)
        manager, kernel = start_new_kernel(kernel_name="python3", env=env)
        try:
            opened = _in_kernel(
                kernel,
                "from paylens import Client, Warehouse\n"
                f"wh = Warehouse({str(path)!r}, read_only=True)\n"
                "client = Client.from_env()\n"
                "wh.sync(client, progress=False)\n"
                "print(len(wh.transactions()))",
            )
            assert opened.split() == ["400"]
            cron = subprocess.run(
                [sys.executable, "-m", "paylens.cli", "sync", "--db", str(path), "--quiet"],
                env=env, capture_output=True, text=True, timeout=120, check=False,
            )  # fmt: skip
            assert cron.returncode == 0, cron.stderr
            assert "sync #3 (incremental" in cron.stdout
            again = _in_kernel(
                kernel, "wh.sync(client, progress=False)\nprint(len(wh.sync_runs()))"
            )
            assert again.split() == ["4"]  # the notebook's own, cron's, and its own again
        finally:
            kernel.stop_channels()
            manager.shutdown_kernel(now=True)


def test_a_scheduled_syncs_time_includes_the_files_closing_and_swap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The summary said the time up to the checkpoint; the staged copy's closing checkpoint and
    its swap (seconds on a large file) were left out. A swap made to take 30 s on the clock
    the sync reads shows in the report's time."""
    import time

    from paylens.warehouse import _staged

    real_clock, swap = time.perf_counter, _staged.swap
    later = [0.0]

    def slow_swap(*args: Any) -> None:
        swap(*args)
        later[0] += 30.0

    monkeypatch.setattr(time, "perf_counter", lambda: real_clock() + later[0])
    monkeypatch.setattr(_staged, "swap", slow_swap)
    report = sync_file(
        tmp_path / "w.duckdb", Sandbox(seed=3, transactions=200).client(), progress=False
    )
    assert 30.0 <= report.duration_seconds < 60.0
    assert "in 3" in str(report).splitlines()[0]
