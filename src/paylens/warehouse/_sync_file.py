"""`sync_file`: the scheduled sync of a warehouse file, on a staged copy swapped in."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Unpack

from paylens.client import Client
from paylens.errors import WarehouseFileError, WarehouseStorageError

from . import _staged
from ._open import WriterLock, check_name, lock_path
from ._report import SyncReport
from ._run import SyncKeywords, sync_options
from ._warehouse import Warehouse, wanted_resources


def sync_file(
    path: str | os.PathLike[str],
    client: Client,
    *,
    wait: float = 0.0,
    **keywords: Unpack[SyncKeywords],
) -> SyncReport:
    """Sync a warehouse file for cron: take the file's writer lock (or wait up to `wait`
    seconds for it), sync a staged copy (`<path>.syncing`, resumed by the next run when a run
    is killed) and swap it in. Readers holding the file read-only keep their snapshot and are
    never blocked; a writer (a notebook's read-write Warehouse, an apply) makes it wait or
    fail with `WarehouseLockedError`, never lose what that writer wrote. The scheduled
    `paylens sync` uses this; see `paylens.warehouse._staged` for the protocol. The keywords
    are `Warehouse.sync`'s (`SyncKeywords`)."""
    # options a sync would refuse are refused before the file is locked or copied
    sync_options(keywords)
    wanted_resources(keywords.get("resources"))
    # the file itself, whatever name it is given by: a link is followed (and kept), and its
    # writer lock is the one every other writer of the file takes
    target = Path(path).resolve()
    check_name(target)
    lock = WriterLock(target, wait=wait, holder="paylens sync")
    started = time.perf_counter()
    try:
        _staged.recover(target)
        first = not target.exists()
        staged = _staged.prepare(target)
        try:
            wh = Warehouse(staged)
        except WarehouseFileError:
            _staged.discard(target)
            staged = _staged.prepare(target)
            wh = Warehouse(staged)
        empty = False  # a first sync that failed having stored nothing
        try:
            try:
                report = wh.sync(client, **keywords)
                # checkpointed here, where a full disk is an error: the close would fail
                # silently and leave a copy that no later run can finish on that disk
                wh._checkpoint()
            except BaseException:
                # asked on the copy's own connection: a second, read-only open would replay
                # the log a Ctrl-C leaves unapplied (seconds, for a large sync)
                if first:
                    with wh._lock:
                        empty = _staged.holds_no_records(staged, wh._con)
                raise
            finally:
                wh.close()
        except WarehouseStorageError:
            # the copy holds the space that ran out: free it (the target is intact)
            _staged.discard(target)
            raise
        except BaseException:
            # a first sync that stored nothing leaves nothing to resume: no copy beside a file
            # that does not exist (a mistyped path, a service not reached)
            if empty:
                _staged.discard(target)
                # nor the locks of a file that was never made
                lock_path(staged).unlink(missing_ok=True)
                lock.remove()
            raise
        _staged.swap(target, staged)
        # the summary's time is the whole sync's: the copy, its closing checkpoint and the swap
        report.duration_seconds = round(time.perf_counter() - started, 2)
    finally:
        lock.release()
    return report
