"""One sync of a warehouse, start to end: the run's row in `sync_runs`, the transactions'
engine and the smaller resources' sync on one pool of readers, the report, and the checkpoint.
`Warehouse.sync` checks the arguments and calls `SyncRun.run` under the file's sync lock."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Any, TypedDict

import duckdb

from paylens.client import Client, timestamp
from paylens.errors import APIError, InvalidArgumentError, WarehouseSourceError

from . import _store
from ._open import interrupt_of, interrupted, wal_path
from ._progress import Progress
from ._report import SyncReport, describe_read
from ._staged import target_of
from .sync import (
    Freshness,
    ResourceResult,
    ResourceSync,
    SyncOptions,
    TransactionSync,
    utcnow,
)
from .sync.events import fold_before_sync, listings_done
from .sync.readers import Readers
from .sync.run import _CTRL_C_SECONDS, CTRL_C
from .sync.save import STOPPED

logger = logging.getLogger("paylens.warehouse")

#: A sync checkpoints the file when its log holds more than this; a smaller log costs its next
#: open little to replay, and closing the file checkpoints it anyway (`paylens sync` does).
CHECKPOINT_WAL_BYTES = 16 << 20


class SyncRun:
    """The sync of one warehouse's connection (under its lock) at `path`."""

    def __init__(self, con: duckdb.DuckDBPyConnection, lock: Any, path: Path) -> None:
        self._con, self._lock, self.path = con, lock, path

    def run(
        self, client: Client, opts: SyncOptions, wanted: list[str], forced: frozenset[str]
    ) -> SyncReport:
        """Sync the `wanted` resources (re-reading `forced` ones whole) and record the run."""
        check_service(self._con, self._lock, self.path, client)  # before any request
        started_clock = time.perf_counter()
        started = utcnow()
        # a sibling for this run: its own rate budget and request counts, the caller's
        # client untouched (it may be shared with other threads)
        client = client.with_options(rate_limit=opts.rate_limit)
        stats_before = client.stats.snapshot()
        with self._lock:
            run_id = _store.next_run_id(self._con)
            self._con.execute(
                "INSERT INTO sync_runs (run_id, started_at, status, source_url, is_sandbox) VALUES (?, ?, 'running', ?, ?)",
                [run_id, started, client.base_url, client.is_sandbox],
            )
        report = SyncReport(run_id, "incremental", client.base_url, client.is_sandbox)
        bar = Progress(opts.progress, client.is_sandbox)
        # one pool of readers for every resource: one request budget (with the client's
        # rate); counts first, then the longest listings, then the transactions' windows
        pool = Readers(opts.concurrency, "paylens-sync")
        small = [r for r in wanted if r != "transactions"]
        small_sync = ResourceSync(
            self._con,
            self._lock,
            client,
            pool,
            run_id,
            started,
            freshness=opts.freshness,
            full=opts.full,
            forced=forced,
            parts=opts.concurrency,
            ahead_records=opts.ahead_records,
        )
        beside = _Beside(small_sync.run, small)
        engine: TransactionSync | None = None
        try:
            # the stored webhook events first: the listing then finds their states stored
            opts, report.events = fold_before_sync(
                self._con,
                self._lock,
                self.path,
                run_id=run_id,
                at=started,
                options=opts,
                reads_transactions="transactions" in wanted,
            )
            # the run's first request, counted in it and recorded as its failure if it fails
            check_platform(self._con, self._lock, self.path, client)
            if small:
                beside.start()
            if "transactions" in wanted:
                engine = TransactionSync(
                    self._con,
                    self._lock,
                    client,
                    run_id,
                    started,
                    opts,
                    bar.update,
                    pool=pool,
                    on_expect=bar.expect,
                    on_more=bar.expect_more,
                    on_phase=bar.phase,
                    events_exact=report.events.exact,
                )
                report.mode = engine.run()
                if not report.events.exact:
                    listings_done(self._con, self._lock)
                report.rejected += engine.tally.rejected
                report.reverified = engine.reverified
                report.resources["transactions"] = self._run_counts("transactions", run_id)
            if small:
                bar.phase("customers, cards, accounts")
                for name, result in beside.outcome().items():
                    report.rejected += result.rejected
                    report.resources[name] = self._run_counts(name, run_id)
                    report.reads[name] = describe_read(result)
                    if result.read == "not re-read":
                        report.not_reread[name] = result.age
            bar.phase("checkpoint")
            self._finish(run_id, report, started_clock, client, stats_before, status="succeeded")
        except BaseException as exc:
            small_sync.stop.set()
            ctrl_c = isinstance(exc, KeyboardInterrupt) or interrupted(exc) or CTRL_C.is_set()
            report.mode = engine.mode if engine is not None and engine.mode else report.mode
            # the run's failure is recorded when it can be (a full disk may refuse even that);
            # the error raised is the one that stopped the sync. A Ctrl-C's run is resumed by
            # the next (`save.unfinished`), and ends now: its log is left for the next open
            # to replay rather than checkpointed here (seconds, for a large sync)
            with contextlib.suppress(Exception):
                self._finish(
                    run_id,
                    report,
                    started_clock,
                    client,
                    stats_before,
                    status=STOPPED if ctrl_c else "failed",
                    error=repr(exc)[:2000],
                    checkpoint=not ctrl_c,
                )
            if ctrl_c:
                with contextlib.suppress(Exception), self._lock:
                    self._con.execute("PRAGMA disable_checkpoint_on_shutdown")
            interrupt_of(exc)  # a Ctrl-C that DuckDB took stops the caller as a Ctrl-C
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            if small:
                with contextlib.suppress(BaseException):
                    beside.outcome()  # its threads are done before the run ends
            bar.close()
        logger.info("%s", report)
        return report

    def _run_counts(self, table: str, run_id: int) -> dict[str, int]:
        with self._lock:
            row = self._con.execute(
                f"""SELECT count(*) FILTER (WHERE first_run_id = $run),
                           count(*) FILTER (WHERE last_changed_run_id = $run AND first_run_id <> $run),
                           count(*) FILTER (WHERE sync_run_id = $run AND last_changed_run_id <> $run)
                    FROM {table}""",
                {"run": run_id},
            ).fetchall()[0]
        return {"new": row[0], "changed": row[1], "unchanged": row[2]}

    def _finish(
        self,
        run_id: int,
        report: SyncReport,
        started: float,
        client: Client,
        before: dict[str, float],
        *,
        status: str,
        error: str | None = None,
        checkpoint: bool = True,
    ) -> None:
        after = client.stats.snapshot()
        report.requests = int(after["requests"] - before["requests"])
        report.retries = int(after["retries"] - before["retries"])
        report.duration_seconds = round(time.perf_counter() - started, 2)
        for counts in report.resources.values():
            report.new += counts["new"]
            report.changed += counts["changed"]
            report.unchanged += counts["unchanged"]
        with self._lock:
            self._con.execute(
                """UPDATE sync_runs SET finished_at = ?, status = ?, mode = ?, new_records = ?,
                       changed_records = ?, unchanged_records = ?, rejected_records = ?,
                       reverified_records = ?, requests = ?, duration_seconds = ?, error = ?
                   WHERE run_id = ?""",
                [
                    utcnow(),
                    status,
                    report.mode,
                    report.new,
                    report.changed,
                    report.unchanged,
                    report.rejected,
                    report.reverified,
                    report.requests,
                    report.duration_seconds,
                    error,
                    run_id,
                ],
            )
            if not checkpoint:
                return
            # (the run's record just written: the compaction's checkpoint has a change to write)
            report.compacted = _store.compact_if_due(self._con)
            if not report.compacted and self._wal_bytes() > CHECKPOINT_WAL_BYTES:
                self._con.execute("CHECKPOINT")
            report.duration_seconds = round(time.perf_counter() - started, 2)  # said whole

    def _wal_bytes(self) -> int:
        try:
            return wal_path(self.path).stat().st_size
        except OSError:  # in memory, or nothing written since the last checkpoint
            return 0


def check_source(con: duckdb.DuckDBPyConnection, lock: Any, path: Path, client: Client) -> None:
    """Refuse to mix another service's or another platform's data into a warehouse
    (`check_service`, then `check_platform`); record the source on the first sync."""
    check_service(con, lock, path, client)
    check_platform(con, lock, path, client)


def check_service(con: duckdb.DuckDBPyConnection, lock: Any, path: Path, client: Client) -> None:
    """Refuse another service's base URL, before any request to it; record the source on the
    first sync."""
    with lock:
        meta = _store.meta(con)
        known = meta.get("source_url")
        if known is not None and known != client.base_url:
            raise WarehouseSourceError(
                f"{target_of(path)} holds data from {known}; refusing to mix in "
                f"{client.base_url}. Use another database file for another service."
            )
        _store.set_meta(
            con, meta, source_url=client.base_url, is_sandbox=str(client.is_sandbox).lower()
        )


def check_platform(con: duckdb.DuckDBPyConnection, lock: Any, path: Path, client: Client) -> None:
    """Refuse another platform's data at the same base URL.

    A base URL names the service, not the platform: the credentials of several platforms reach
    one URL (the service's; paylens' embedded sandbox answers every seed and size at one). The
    platform's configuration id (`GET /config`, one request) tells them apart. A file synced
    before it was recorded takes it on its next sync; a service that does not offer the call
    is compared by its URL alone."""
    platform = platform_config_id(client)
    with lock:
        meta = _store.meta(con)
        recorded = meta.get(PLATFORM_CONFIG_ID)
        if platform is not None and recorded is not None and platform != recorded:
            raise other_platform(
                path,
                recorded,
                platform,
                "refusing to mix it in. Use another database file for another platform.",
            )
        if platform is not None:
            _store.set_meta(con, meta, **{PLATFORM_CONFIG_ID: platform})


def other_platform(path: Path, recorded: str, reached: str, then: str) -> WarehouseSourceError:
    """The refusal of a platform other than the one whose data the file holds."""
    return WarehouseSourceError(
        f"{target_of(path)} holds the data of the platform whose configuration is {recorded}; "
        f"these credentials reach {reached}'s at the same URL: {then}"
    )


#: The meta key of the platform's configuration id (`check_platform`).
PLATFORM_CONFIG_ID = "platform_config_id"


def platform_config_id(client: Client) -> str | None:
    """The id of the platform's configuration these credentials read; None when the service
    does not offer the call to them or answers it without one. Any other failure is raised,
    as the sync's own first request would raise it."""
    try:
        return client.config.get_id()
    except APIError as exc:
        if exc.status in _NOT_OFFERED:
            return None
        raise


#: Answers to `GET /config` that say the call is not offered to these credentials.
_NOT_OFFERED = frozenset({403, 404, 405, 501})


class _Beside(threading.Thread):
    """The smaller resources' sync on a thread beside the transactions' (both read on one
    pool); `outcome` waits for it and hands on what it raised."""

    def __init__(self, run: Any, wanted: list[str]) -> None:
        super().__init__(name="paylens-resources", daemon=True)
        self._run, self._wanted = run, wanted
        self._result: dict[str, ResourceResult] = {}
        self._error: BaseException | None = None

    def run(self) -> None:
        try:
            self._result = self._run(self._wanted)
        except BaseException as exc:  # handed to the caller
            self._error = exc

    def outcome(self) -> dict[str, ResourceResult]:
        # joined a tenth of a second at a time: a SIGINT that another thread of the process
        # takes runs its handler (the Ctrl-C) only once the main thread runs Python again,
        # which a join without a timeout never does until the thread ends (seen: 2.5 s)
        while self.is_alive():
            self.join(_CTRL_C_SECONDS)
        if self._error is not None:
            raise self._error
        return self._result


def parse_since(value: date | datetime | str | None) -> datetime | None:
    if value is None:
        return None
    return datetime.fromisoformat(timestamp("since", value).replace("Z", "+00:00"))


class SyncKeywords(TypedDict, total=False):
    """The keyword arguments of a sync, shared by `Warehouse.sync`, `sync_file` and `paylens
    sync` (one list, typed for each with `Unpack`). Their defaults are `SyncOptions`' (the one
    place they are set); `since`, `resources` and `freshness` default to None: everything,
    every resource of the catalogue, `Freshness()`."""

    since: date | datetime | str | None
    full: bool
    concurrency: int
    rate_limit: float | None
    progress: bool
    resources: Sequence[str] | None
    verify_syncs: int
    verify_syncs_with_events: int
    freshness: Freshness | None


def sync_options(keywords: SyncKeywords, options: SyncOptions | None = None) -> SyncOptions:
    """The `SyncOptions` a sync's keywords say (`resources` aside), or `options` when no
    keyword says otherwise than its default: both at once are refused, as options would
    silently win."""
    settings: dict[str, Any] = {k: v for k, v in keywords.items() if k != "resources"}
    if settings.get("freshness") is None:
        settings.pop("freshness", None)
    if "since" in settings:
        settings["since"] = parse_since(settings["since"])
    if options is None:
        return SyncOptions(**settings)
    defaults = SyncOptions()
    given = sorted(k for k, v in settings.items() if v != getattr(defaults, k))
    if given:
        raise InvalidArgumentError(
            "options",
            f"give either options= or {', '.join(given)}, not both (options would silently win)",
        )
    return options
