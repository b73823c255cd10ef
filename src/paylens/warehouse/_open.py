"""Opening a warehouse file: one writer per file, foreign files refused, storage errors typed.

- **Across processes** a writer holds an exclusive lock on `<file>.lock` (flock) for as long as
  it has the file open read-write; the lock file says who (pid and command) for the message
  another writer gets. The scheduled sync holds it while it syncs its staged copy and swaps
  it in, so nothing another writer wrote can be replaced.
- **Within a process** every `Warehouse` on one file shares one `Store` (one DuckDB
  connection and one lock), so two objects cannot write past each other: their statements
  take turns, and a doubled row cannot come from them.
- A file that is not a paylens warehouse (SQLite, another program's DuckDB file, a truncated
  file) is refused with `WarehouseFileError` before anything writes to it, and DuckDB is never
  allowed to fetch or load an extension to read it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from paylens.errors import (
    WarehouseError,
    WarehouseFileError,
    WarehouseLockedError,
    WarehouseNotFoundError,
    WarehouseStorageError,
)

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX: DuckDB's own file lock is all there is
    fcntl = None  # type: ignore[assignment]

#: DuckDB must never reach the network or load code to open a file it was handed.
DUCKDB_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
}

#: Writes land in batches of thousands of rows. A checkpoint compresses what the log holds
#: into the file; DuckDB's vacuum would then merge the row groups it finds less than full with
#: their neighbours, and since a table's appends begin a new row group after each checkpoint,
#: every checkpoint of a sync left one to merge: up to three row groups of the widest table
#: rewritten at a time (2.6 to 4.5 s for one checkpoint at a million transactions). With the
#: vacuum off each row is compressed once, and checkpoints cost the same whatever their
#: spacing (a 1,000,000-transaction full sync: 61.3 µs of CPU a record at 512 MB with the
#: vacuum, 43.5 at 128 MB and 42.4 at 64 MB without it; BENCHMARKS.md, #34), so the log is
#: kept small: what a Ctrl-C leaves for the next open to replay, and how long a checkpoint
#: holds up a commit, are bounded by it. The room of deleted rows is reclaimed by
#: `_store.compact_if_due`, which turns the vacuum on for one checkpoint.
_WRITE_SETTINGS = "SET checkpoint_threshold = '64MB'; SET max_vacuum_tasks = 0"

#: DuckDB's own memory while a sync writes (its buffers fill whatever they are given): a
#: million-transaction sync peaked at 641 MiB with 256 MB, 570 with 192 and 518 to 575 with
#: 160, as fast (#34). Only while it runs: a query of the same connection keeps DuckDB's own
#: limit (at 256 MB for every write connection, a per-transaction `settlement_times` of a
#: million transactions ran out of memory).
SYNC_MEMORY = "160MB"


@contextlib.contextmanager
def setting_held(
    con: duckdb.DuckDBPyConnection,
    name: str,
    value: str,
    lock: contextlib.AbstractContextManager[Any] | None = None,
) -> Iterator[None]:
    """DuckDB's setting `name` at `value` inside, then as it was (`lock`: the connection's,
    held for each statement, when the caller does not hold it)."""
    guard = lock if lock is not None else contextlib.nullcontext()
    with guard:
        (before,) = con.execute(f"SELECT current_setting('{name}')").fetchall()[0]
        con.execute(f"SET {name} = '{value}'")
    try:
        yield
    finally:
        # never in the way of what ended the block (a Ctrl-C, a full disk): at worst the
        # setting stays as it was set inside
        with guard, contextlib.suppress(duckdb.Error, ValueError):
            # the default back as the default; another value as DuckDB showed it ("2.7 GiB",
            # rounded down to a tenth): set half a tenth above, it shows the same again, so
            # block after block never wears it down
            con.execute(f"RESET {name}")
            (now,) = con.execute(f"SELECT current_setting('{name}')").fetchall()[0]
            if now != before:
                number, unit = before.split()
                amount = number if unit == "bytes" else float(number) + 0.05
                con.execute(f"SET {name} = '{amount}{unit}'")


def sync_memory(
    con: duckdb.DuckDBPyConnection, lock: contextlib.AbstractContextManager[Any]
) -> contextlib.AbstractContextManager[None]:
    """DuckDB's memory capped at `SYNC_MEMORY` while a sync writes, then as it was."""
    return setting_held(con, "memory_limit", SYNC_MEMORY, lock)


def checkpoints_held(con: duckdb.DuckDBPyConnection) -> contextlib.AbstractContextManager[None]:
    """No checkpoint at the commits made inside (the log's threshold raised, then put back):
    for commits that must end at once, leaving the checkpoint to the next one."""
    return setting_held(con, "checkpoint_threshold", "1TB")


_SQLITE_MAGIC = b"SQLite format 3\x00"
_DUCKDB_MAGIC = b"DUCK"  # bytes 8-11 of every DuckDB database file


def lock_path(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


def swap_marker(path: Path) -> Path:
    """The file a sync writes while it swaps its copy in (see `_staged`)."""
    return path.with_name(path.name + ".swapping")


#: How long a reader waits for a swap under way to end before it opens the file anyway (a
#: swap takes milliseconds; a marker left by a sync killed mid-swap is finished by the next
#: writer or sync).
SWAP_WAIT_SECONDS = 2.0


def _after_any_swap(path: Path) -> None:
    """Wait while a sync swaps its copy in: between removing the file's old log and renaming
    the copy over the file, a reader would open the file without its log (an older state
    than both before and after)."""
    deadline = time.monotonic() + SWAP_WAIT_SECONDS
    while swap_marker(path).exists() and time.monotonic() < deadline:
        time.sleep(0.01)


class WriterLock:
    """The exclusive writer lock of one warehouse file (flock on `<file>.lock`)."""

    def __init__(self, path: Path, *, wait: float = 0.0, holder: str = "") -> None:
        # the file's lock, whatever name it is reached by (a link, `..`): two names of one
        # file must not make two writers
        self.path = lock_path(path.resolve())
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + max(0.0, wait)
        while fcntl is not None:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if self._still_the_lock_file():
                    break
                # its holder removed it (a first sync that failed leaves no lock file): the
                # lock is the file now at the path, not the one this process opened
                os.close(self._fd)
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                continue
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    who = self.holder()
                    os.close(self._fd)
                    self._fd = None
                    raise WarehouseLockedError(
                        f"the warehouse {path} is being written by {who}. Wait for it to finish "
                        "(or pass wait=SECONDS), close that Warehouse, or open this one with "
                        "read_only=True",
                        path=path,
                        holder=who,
                    ) from None
                time.sleep(0.05)
        os.ftruncate(self._fd, 0)
        os.write(self._fd, f"process {os.getpid()} ({one_line(holder or _command())})".encode())

    def _still_the_lock_file(self) -> bool:
        assert self._fd is not None
        try:
            return os.stat(self.path).st_ino == os.fstat(self._fd).st_ino
        except FileNotFoundError:
            return False

    def remove(self) -> None:
        """Remove the lock file and let go of it: for a file that was never made (a first
        sync that failed), so that nothing is left behind. Safe against a process waiting on
        it: one that gets the removed file's lock sees it is gone and takes the path's."""
        if self._fd is not None:
            self.path.unlink(missing_ok=True)
        self.release()

    def holder(self) -> str:
        """Who holds the lock, in one line (a file an older paylens wrote may hold several)."""
        try:
            text = self.path.read_text(errors="replace")
        except OSError:
            text = ""
        return one_line(text, limit=HOLDER_CHARS + 40) or "another process"

    def release(self) -> None:
        if self._fd is not None:
            if fcntl is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


#: The longest command line a lock file names its holder by (a `python -c` script's text
#: can be pages long).
HOLDER_CHARS = 100


def one_line(text: str, limit: int = HOLDER_CHARS) -> str:
    """`text` in one line: every run of whitespace (newlines of a `python -c` script, tabs) one
    space, and cut to `limit` characters, an ellipsis saying where."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _command() -> str:
    """This process's command: its program by its name (not its whole path) and the first two
    arguments, in one line."""
    try:
        argv = [
            a.decode(errors="replace")
            for a in Path("/proc/self/cmdline").read_bytes().split(b"\0")
            if a
        ]
    except OSError:
        return "python"
    if not argv:
        return "python"
    return one_line(" ".join([Path(argv[0]).name, *argv[1:3]])) or "python"


def check_name(path: Path) -> None:
    """Refuse a file name DuckDB cannot take: it takes UTF-8 names only, and a name with a byte
    that is not (Python reads it as a lone surrogate) failed in DuckDB as `std::bad_cast`."""
    try:
        str(path).encode()
    except UnicodeEncodeError:
        raise WarehouseFileError(
            f"{path} is a file name that is not UTF-8, which DuckDB cannot open; "
            "choose another path"
        ) from None


def check_file(path: Path) -> None:
    """Refuse what is not a DuckDB file before DuckDB sees it (it would try an extension to
    read a SQLite file, and may alter what it opens)."""
    try:
        with path.open("rb") as f:
            head = f.read(16)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise WarehouseFileError(f"cannot read {path}: {exc.strerror}") from None
    if not head:
        raise WarehouseFileError(
            f"{path} is an empty file, not a paylens warehouse; remove it or choose another path"
        )
    if head.startswith(_SQLITE_MAGIC):
        raise WarehouseFileError(
            f"{path} is a SQLite database, not a paylens warehouse; left as is"
        )
    if head[8:12] != _DUCKDB_MAGIC:
        raise WarehouseFileError(
            f"{path} is not a DuckDB database (truncated, or another program's file); left as is"
        )


def _is_paylens(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    if tables and "paylens_meta" not in tables:
        raise WarehouseFileError(
            f"{path} is another program's DuckDB database (tables: {', '.join(sorted(tables)[:5])}); "
            "paylens leaves it as is: choose another path"
        )


def probe(path: Path) -> None:
    """Refuse `path` unless it is a paylens warehouse (or absent), opening it read-only."""
    if not path.exists():
        return
    check_file(path)
    try:
        with contextlib.closing(
            duckdb.connect(str(path), read_only=True, config=DUCKDB_CONFIG)
        ) as con:
            _is_paylens(con, path)
    except duckdb.Error as exc:
        interrupt_of(exc)
        raise typed(exc, path) from None


def wal_path(path: Path) -> Path:
    """The file's write-ahead log (DuckDB's, beside the file itself: through a link, beside
    the file the link names, as DuckDB places it)."""
    real = path.resolve()
    return real.with_name(real.name + ".wal")


def not_found(path: Path) -> WarehouseNotFoundError:
    """The error for a warehouse that is not there yet, said the same way everywhere."""
    return WarehouseNotFoundError(f"no warehouse at {path}: run `paylens sync --db {path}` first")


def connect(path: Path, *, read_only: bool, wait: float = 0.0) -> duckdb.DuckDBPyConnection:
    """Open the file with DuckDB, its errors turned into typed ones; a file that is not a
    paylens warehouse is refused before anything is written to it, not even a schema.

    Opening a file for writing writes nothing until a statement does, unless it has a
    write-ahead log, which DuckDB replays into the file: such a file is looked at read-only
    first. Any other is looked at through the connection itself (one open, not two). A
    file another process holds is waited for up to `wait` seconds."""
    if read_only:
        _after_any_swap(path.resolve())
    if read_only and not path.exists():
        raise not_found(path)
    check_name(path)
    check_file(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    looked = False
    if not read_only and wal_path(path).exists():
        probe(path)
        looked = True
    deadline = time.monotonic() + max(0.0, wait)
    try:
        while True:
            try:
                con = duckdb.connect(str(path), read_only=read_only, config=DUCKDB_CONFIG)
                break
            except duckdb.Error as exc:
                if not _held(str(exc)) or time.monotonic() >= deadline:
                    raise
            time.sleep(0.1)
        if not looked:
            try:
                _is_paylens(con, path)
            except WarehouseFileError:
                con.close()
                raise
        if not read_only:
            con.execute(_WRITE_SETTINGS)
        return con
    except duckdb.Error as exc:
        interrupt_of(exc)
        raise typed(exc, path) from None


def interrupted(exc: BaseException) -> bool:
    """Whether `exc` is a Ctrl-C that DuckDB took: a SIGINT arriving while a statement runs
    on the main thread is raised as DuckDB's own error, not as KeyboardInterrupt."""
    return isinstance(exc, duckdb.InterruptException) or (
        isinstance(exc, RuntimeError) and str(exc) == "Query interrupted"
    )


def interrupt_of(exc: BaseException) -> None:
    """Raise KeyboardInterrupt when `exc` is a Ctrl-C that DuckDB took (an interrupted open
    must stop the caller, never read as a file that is not a warehouse); else nothing."""
    if interrupted(exc):
        raise KeyboardInterrupt from None


def _held(text: str) -> bool:
    """Whether DuckDB's error says another process holds the file."""
    lower = text.lower()
    return "lock" in lower and ("conflict" in lower or "could not set lock" in lower)


def typed(exc: BaseException, path: Path) -> WarehouseError:
    """The typed error for what DuckDB or the OS said about the file."""
    text = str(exc)
    lower = text.lower()
    if (isinstance(exc, OSError) and exc.errno == errno.ENOSPC) or "no space left" in lower:
        return WarehouseStorageError(
            f"no space left on the device holding {path}: nothing committed before is lost; "
            "free some space and run again (a sync resumes where it stopped)"
        )
    if isinstance(exc, OSError):
        return WarehouseStorageError(f"cannot write {path}: {exc.strerror or text}")
    if _held(text):
        pid = re.search(r"\(PID (\d+)\)", text)
        holder = f"process {pid.group(1)}" if pid else "another process"
        return WarehouseLockedError(
            f"the warehouse {path} is open in {holder}: a writer (a read-write Warehouse, an "
            "apply) keeps out everyone, and a reader (a notebook's read-only Warehouse, the "
            "report) keeps out writers. Wait for it to close (wait=SECONDS / --wait SECONDS). "
            "Scheduled `paylens sync` runs are never kept out by readers: they write a staged "
            "copy and swap it in"
        )
    if "different configuration" in lower:
        return WarehouseLockedError(
            f"the warehouse {path} is already open in this process in another mode; close it first"
        )
    if (
        "could not read enough bytes" in lower
        or "not a valid duckdb" in lower
        or "magic" in lower
        or "corrupt" in lower
        or "checksum" in lower
    ):
        return WarehouseFileError(
            f"{path} is not a readable DuckDB database: {text.splitlines()[0]}"
        )
    if "serialization" in lower or ("version" in lower and "storage" in lower):
        return WarehouseFileError(f"{path} cannot be read by this DuckDB: {text.splitlines()[0]}")
    return WarehouseError(f"{path}: {text.splitlines()[0] if text else type(exc).__name__}")


@dataclass
class Store:
    """One warehouse file open in this process: shared by every `Warehouse` on it."""

    path: Path
    read_only: bool
    con: duckdb.DuckDBPyConnection
    writer: WriterLock | None
    lock: threading.RLock = field(default_factory=threading.RLock)
    sync_lock: threading.Lock = field(default_factory=threading.Lock)
    refs: int = 1


_OPEN: dict[Path, Store] = {}
_OPEN_LOCK = threading.Lock()


MEMORY = ":memory:"


def open_store(path: Path, *, read_only: bool, wait: float = 0.0) -> Store:
    """The store of `path` in this process (shared), opened on first use. `:memory:` is a
    private database each time (nothing to share or lock)."""
    if str(path) == MEMORY:
        con = duckdb.connect(MEMORY, config=DUCKDB_CONFIG)
        con.execute(_WRITE_SETTINGS)
        return Store(path=path, read_only=False, con=con, writer=None, refs=1)
    key = path.resolve()
    with _OPEN_LOCK:
        store = _OPEN.get(key)
        if store is not None:
            if store.read_only and not read_only:
                raise WarehouseLockedError(
                    f"{path} is open read-only in this process; close those Warehouse objects "
                    "before opening it read-write"
                )
            store.refs += 1
            return store
        check_name(key)  # before a lock file is made beside it
        writer = None if read_only else WriterLock(key, wait=wait)
        try:
            if writer is not None:
                # a swap a killed sync began is finished before anything is written here:
                # written to the file it replaces, it would be lost to the next sync's swap
                from ._staged import recover  # (that module builds on this one)

                recover(key)
            con = connect(path, read_only=read_only, wait=wait)
        except BaseException:
            if writer is not None:
                writer.release()
            raise
        store = Store(path=key, read_only=read_only, con=con, writer=writer)
        _OPEN[key] = store
        return store


def close_store(store: Store) -> None:
    if str(store.path) == MEMORY:
        store.con.close()
        return
    with _OPEN_LOCK:
        store.refs -= 1
        if store.refs > 0:
            return
        _OPEN.pop(store.path, None)
        with store.lock:
            try:
                store.con.close()
            finally:
                if store.writer is not None:
                    store.writer.release()


@contextlib.contextmanager
def storage_errors(path: Path) -> Iterator[None]:
    """DuckDB's and the OS's write errors as typed warehouse errors (the real one named)."""
    try:
        yield
    except (duckdb.IOException, OSError) as exc:
        raise typed(exc, path) from None
    except duckdb.Error as exc:
        if "no space left" in str(exc).lower():
            raise typed(exc, path) from None
        raise
