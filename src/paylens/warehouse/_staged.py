"""The scheduled sync's staged copy: sync a copy of the file and swap it in, so that readers
holding the file open read-only are never blocked, while no other writer can lose a row.

The protocol (`sync_file` holds the target's writer lock throughout, so no paylens writer can
write the target between the copy and the swap):

1. *recover*: a swap that was interrupted (the marker `<file>.swapping` exists) is finished;
2. *prepare*: a staged copy `<file>.syncing` left by a killed sync is resumed only when the
   target is exactly as it was when the copy was taken (`<file>.syncing.base` records its size,
   time and inode, and its WAL's); otherwise, or when the copy does not open (a disk that
   filled up), it is dropped and the target copied afresh, with its WAL, which DuckDB replays
   on opening the copy;
3. the sync writes the copy and closes it (checkpointed: no WAL of its own);
4. *swap*: write the marker, remove the target's stale WAL (its content is in the copy), rename
   the copy over the target, remove the marker. Each step is idempotent, so a crash anywhere is
   finished by the next run's *recover*.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import duckdb
import orjson

from paylens.errors import WarehouseFileError

from ._open import DUCKDB_CONFIG, check_file, probe, swap_marker, typed, wal_path

logger = logging.getLogger("paylens.warehouse")


def staged_path(target: Path) -> Path:
    return target.with_name(target.name + ".syncing")


def target_of(path: Path) -> Path:
    """The file a staged copy stands for (`path` itself when it is not a staged copy): the
    name to show a user, who never typed the copy's."""
    return path.with_name(path.name.removesuffix(".syncing"))


def _base_path(target: Path) -> Path:
    return target.with_name(target.name + ".syncing.base")


def _stat(path: Path) -> list[int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def _fingerprint(target: Path) -> bytes:
    return orjson.dumps({"db": _stat(target), "wal": _stat(wal_path(target))})


def _remove(*paths: Path) -> None:
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def recover(target: Path) -> None:
    """Finish a swap that a killed run began."""
    if not swap_marker(target).exists():
        return
    staged = staged_path(target)
    if staged.exists():
        _remove(wal_path(target))
        os.replace(staged, target)
        _fsync_dir(target)
    _remove(_base_path(target), swap_marker(target))
    logger.warning("finished the swap of %s that an interrupted sync had begun", target)


def prepare(target: Path) -> Path:
    """The staged copy to sync: the one a killed run left, when still valid; else a fresh one."""
    staged = staged_path(target)
    base = _base_path(target)
    probe(target)  # a foreign file is refused before anything is copied or written
    if staged.exists():
        reason = _stale(target, staged)
        if reason is None:
            return staged
        logger.warning("dropping the staged copy %s: %s", staged, reason)
    _remove(staged, wal_path(staged), base)
    if target.exists():
        _copy(target, staged)
    base.write_bytes(_fingerprint(target))
    return staged


def discard(target: Path) -> None:
    """Drop the staged copy (it does not open, or it holds the space a full disk lacks)."""
    staged = staged_path(target)
    logger.info("dropping the staged copy %s", staged)
    _remove(staged, wal_path(staged), _base_path(target))


def holds_no_records(staged: Path, con: duckdb.DuckDBPyConnection | None = None) -> bool:
    """Whether a staged copy holds no record of any resource: nothing a resumed run would keep
    (a copy that cannot be read counts as holding some, and is kept). `con`: the copy's
    connection, still open (asked there, a copy whose log was left unapplied, as a Ctrl-C
    leaves it, is not replayed into a second read-only open: seconds for a large sync)."""
    from .sync.catalog import PRIMARY_KEYS

    query = "SELECT " + " + ".join(f"(SELECT count(*) FROM {table})" for table in PRIMARY_KEYS)
    if con is not None:
        try:
            return not con.execute(query).fetchall()[0][0]
        except duckdb.Error:
            return False
    got = _look(staged, query)
    return got is not None and not got[1][0][0]


def last_attempt(target: Path) -> dict[str, Any] | None:
    """The last run recorded in the staged copy of `target` (a sync that failed or was
    stopped before its swap), when the copy is of the file as it is now; None when there is
    none, or it cannot be read (a sync writing it now)."""
    staged = staged_path(target)
    if not staged.exists() or _stale(target, staged) is not None:
        return None
    got = _look(staged, "SELECT * FROM sync_runs ORDER BY run_id DESC LIMIT 1")
    if got is None or not got[1]:
        return None
    names, rows = got
    return dict(zip(names, rows[0], strict=True))


def _look(staged: Path, query: str) -> tuple[list[str], list[tuple[Any, ...]]] | None:
    """A query's column names and rows, read-only, from a staged copy; None when it cannot
    be read (being written now, or cut short)."""
    try:
        with contextlib.closing(
            duckdb.connect(str(staged), read_only=True, config=DUCKDB_CONFIG)
        ) as con:
            cursor = con.execute(query)
            rows = cursor.fetchall()
            return [d[0] for d in cursor.description or []], rows
    except duckdb.Error:
        return None


def _stale(target: Path, staged: Path) -> str | None:
    base = _base_path(target)
    if not base.exists() or base.read_bytes() != _fingerprint(target):
        return "the warehouse changed since it was taken"
    try:
        check_file(staged)
    except WarehouseFileError as exc:
        return str(exc)
    return None


def _copy(target: Path, staged: Path) -> None:
    """Copy the file and its WAL under temporary names, then rename: a copy cut short (a full
    disk) is never mistaken for a complete one."""
    tmp = staged.with_name(staged.name + ".tmp")
    try:
        shutil.copyfile(target, tmp)
        if wal_path(target).exists():
            shutil.copyfile(wal_path(target), wal_path(staged))
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, staged)
    except OSError as exc:
        _remove(tmp, wal_path(staged))
        raise typed(exc, staged) from None


def swap(target: Path, staged: Path) -> None:
    """Put the synced copy in the target's place (see the module docstring)."""
    if wal_path(staged).exists():
        raise WarehouseFileError(f"{staged} was not closed cleanly; it is kept for the next run")
    swap_marker(target).write_bytes(b"swap")
    _fsync_dir(target)
    _remove(wal_path(target))
    os.replace(staged, target)
    _fsync_dir(target)
    _remove(_base_path(target), swap_marker(target))
