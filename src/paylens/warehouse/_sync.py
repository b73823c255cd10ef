"""Exact incremental sync of transactions (and the smaller resources) into the warehouse.

The list endpoint filters by creation date (and status) only, while records change after they
are created. So a sync, on top of what it stored before:

1. resumes the slices a killed run left unfinished (each committed batch moved its checkpoint);
2. re-reads the *recent* window (from a little before the newest stored record): new records
   and the latest changes of young ones;
3. re-reads every record the service holds in a *non-terminal* status (pending, processing,
   authorized, partially settled, ...) created before that window: such records change without
   leaving their status (a card hold settling in parts);
4. *reconciles* the older range: compares the service's `totalCount` per status per window with
   the stored counts and bisects where they differ, down to windows small enough to re-read.
   A record that changed status moves between two counts, so every status change is found; a
   missing record shows as a missing count.

An empty warehouse is the special case where step 4 re-reads everything. Reading is split into
time slices paged concurrently (cursors cannot be split) under a bounded concurrency and an
optional request-rate budget; pages land in batches of thousands of rows, one set-based upsert
per table, committed together with the slice's checkpoint in one DuckDB transaction.

Known limit: a record in a *terminal* status that changes without changing status (a receipt
confirmation on a completed transfer) is seen only while it is inside the recent window, or by
a `full=True` sync.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import duckdb
import orjson
import pyarrow as pa
from pydantic import ValidationError

from paylens import models
from paylens.client import Client, Paginator, RawPage, TextPage
from paylens.frames import to_arrow, transaction_tables

from . import _store

logger = logging.getLogger("paylens.warehouse")

#: Statuses a record can still leave; records in them are re-read on every sync.
NON_TERMINAL_STATUSES = (
    "CREATED",
    "PENDING",
    "PENDING_AUTHORIZATION",
    "PROCESSING",
    "AUTHORIZED",
    "PARTIALLY_SETTLED",
)
ALL_STATUSES = tuple(sorted(set(models.TransactionStatus) | set(models.CardTransactionStatus)))
_TICK = timedelta(microseconds=1)
_TIMESTAMP = pa.timestamp("us", tz="UTC")
#: A window's remaining range is not split below this.
_MIN_SPLIT = timedelta(seconds=1)
#: Fewest records a time slice is cut for (a few pages: smaller slices add partial pages).
_SLICE_MIN = 300


@dataclass
class SyncOptions:
    """How a sync runs. `concurrency` slices are paged at once; `rate_limit` caps requests per
    second; `recent` is how far before the newest stored record the recent window opens;
    `since` limits the sync to records created from then on; `full` re-reads everything."""

    concurrency: int = 16
    rate_limit: float | None = None
    recent: timedelta = timedelta(days=2)
    since: datetime | None = None
    full: bool = False
    progress: bool = True
    verify_syncs: int = 7
    slice_records: int = 5_000
    leaf_records: int = 2_000
    land_records: int = 1_000
    land_bytes: int = 2 << 20
    batch_records: int = 20_000
    batch_bytes: int = 32 << 20
    queue_landings: int = 32
    gather_seconds: float = 0.2


@dataclass
class Window:
    """Records created in [start, end) (either open), optionally with one status."""

    start: datetime | None
    end: datetime | None
    status: str | None = None

    @property
    def key(self) -> str:
        return f"{self.start}|{self.end}|{self.status or ''}"

    def filters(self) -> dict[str, Any]:
        return {
            "start_date": self.start,
            "end_date": None if self.end is None else self.end - _TICK,
            "status": self.status,
        }


def _cut(window: Window, count: int) -> list[Window]:
    """A bounded window cut into `count` windows of equal length (same status filter)."""
    assert window.start is not None and window.end is not None
    step = (window.end - window.start) / count
    bounds = [window.start + step * i for i in range(count)] + [window.end]
    return [Window(a, b, window.status) for a, b in itertools.pairwise(bounds)]


@dataclass
class Tally:
    """Counters of one run, shared by the workers."""

    pages: int = 0
    records: int = 0
    rejected: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, pages: int = 0, records: int = 0, rejected: int = 0) -> None:
        with self._lock:
            self.pages += pages
            self.records += records
            self.rejected += rejected


def _instant(epoch_us: int | None) -> datetime | None:
    """A UTC datetime from DuckDB's epoch microseconds (no pytz needed)."""
    if epoch_us is None:
        return None
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=int(epoch_us))


def _parse_time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text.replace("Z", "+00:00"))


def _created_at(text: bytes) -> datetime | None:
    """The `createdAt` of a record's JSON text (one record a page: where a window resumes)."""
    record = orjson.loads(text)
    return _parse_time_or_none(record.get("createdAt")) if isinstance(record, dict) else None


def _before(text: bytes, end: datetime | None) -> bool:
    """Whether a record was created before `end` (a record without a time is kept)."""
    created = _created_at(text)
    return end is None or created is None or created < end


def _parse_time_or_none(value: Any) -> datetime | None:
    try:
        return _parse_time(value) if isinstance(value, str) else None
    except ValueError:
        return None


#: Columns every transaction must have (required by all three kinds in the interface).
REQUIRED_COLUMNS = ("id", "type", "status", "direction", "customer_id", "platform_customer_id")


def _explained(remote: dict[str | None, int | None], local: dict[str | None, int]) -> bool:
    """Whether per-status counts account for every record on both sides (so moves between
    statuses can be found from the statuses that gained)."""
    if any(count is None for count in remote.values()):
        return False
    known_remote = sum(remote[s] or 0 for s in ALL_STATUSES)
    known_local = sum(local.get(s, 0) for s in ALL_STATUSES)
    stored = sum(local.values())
    total = remote[None] or 0
    return total == known_remote and stored == known_local and total >= stored


def _missing_required(table: pa.Table) -> list[str]:
    """Ids of rows lacking a required field."""
    import pyarrow.compute as pc

    missing = None
    for name in REQUIRED_COLUMNS:
        nulls = pc.is_null(table.column(name))
        missing = nulls if missing is None else pc.or_(missing, nulls)
    if missing is None or not pc.any(missing).as_py():
        return []
    return table.filter(missing).column("id").to_pylist()


def _unreadable(items: list[tuple[str, bytes]]) -> list[str]:
    """Ids of the records the typed read refuses, found by bisection (a few reads, not one
    per record)."""
    try:
        transaction_tables(raw=[raw for _, raw in items])
        return []
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        if len(items) == 1:
            return [items[0][0]]
    middle = len(items) // 2
    return _unreadable(items[:middle]) + _unreadable(items[middle:])


@dataclass
class _Landing:
    """Rows read from one window since its last landing, and where the window now stands."""

    window: Window
    buffer: dict[str, bytes]
    rejects: list[tuple[Any, ...]]
    resume: datetime | None
    done: bool
    size: int = 0  # bytes of JSON read into `buffer`


@dataclass
class _Batch:
    """Landings merged and typed, ready to commit."""

    landings: list[_Landing]
    tables: dict[str, pa.Table] | None
    rejects: list[tuple[Any, ...]]
    records: int


class _Writer:
    """Two threads behind the readers: one merges the landings that have arrived (a bounded
    queue) into large batches (up to `max_rows` records or `max_bytes` of JSON, so memory
    stays bounded whatever a record weighs) and types them; the other commits them. Arrow's
    JSON read and DuckDB's writes both run outside the interpreter lock, so typing the next
    batch overlaps committing the last one while the readers go on fetching."""

    def __init__(
        self,
        prepare: Callable[[list[_Landing]], _Batch],
        land: Callable[[_Batch], None],
        *,
        max_rows: int,
        max_bytes: int,
        queue_size: int,
        gather_seconds: float,
    ) -> None:
        self._prepare = prepare
        self._land = land
        self._max_rows = max_rows
        self._max_bytes = max_bytes
        self._gather_seconds = gather_seconds
        self._flushing = threading.Event()
        self._queue: queue.Queue[_Landing | None] = queue.Queue(maxsize=queue_size)
        self._typed: queue.Queue[tuple[list[_Landing], _Batch | None] | None] = queue.Queue(1)
        self._error: BaseException | None = None
        self._threads = [
            threading.Thread(target=self._run_prepare, name="paylens-typer", daemon=True),
            threading.Thread(target=self._run_land, name="paylens-writer", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def put(self, landing: _Landing) -> None:
        self._raise()
        self._queue.put(landing)

    def flush(self) -> None:
        """Wait until everything handed over is committed (or raise what went wrong)."""
        self._flushing.set()
        try:
            self._queue.join()
        finally:
            self._flushing.clear()
        self._raise()

    def close(self) -> None:
        self._queue.put(None)
        for thread in self._threads:
            thread.join()

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def _run_prepare(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                self._queue.task_done()
                self._typed.put(None)
                return
            landings, rows, size = [first], len(first.buffer), first.size
            # gather for a moment: under latency landings trickle in, and a commit each
            # would cost a disk sync and a round of statements for a few hundred rows
            deadline = time.monotonic() + self._gather_seconds
            while rows < self._max_rows and size < self._max_bytes:
                wait = deadline - time.monotonic()
                try:
                    if wait <= 0 or self._flushing.is_set():
                        more = self._queue.get_nowait()
                    else:
                        more = self._queue.get(timeout=min(wait, 0.02))
                except queue.Empty:
                    if wait <= 0 or self._flushing.is_set():
                        break
                    continue
                if more is None:
                    self._queue.put(None)  # seen again by the outer loop after this batch
                    self._queue.task_done()
                    break
                landings.append(more)
                rows += len(more.buffer)
                size += more.size
            batch = None
            try:
                if self._error is None:
                    batch = self._prepare(landings)
            except BaseException as exc:  # handed to the readers and the caller
                self._error = exc
            self._typed.put((landings, batch))

    def _run_land(self) -> None:
        while True:
            item = self._typed.get()
            if item is None:
                return
            landings, batch = item
            try:
                if self._error is None and batch is not None:
                    self._land(batch)
            except BaseException as exc:  # handed to the readers and the caller
                self._error = exc
            finally:
                for _ in landings:
                    self._queue.task_done()


class TransactionSync:
    """One run of the transaction sync; see the module docstring for the method."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        db_lock: threading.Lock,
        client: Client,
        run_id: int,
        started: datetime,
        options: SyncOptions,
        on_page: Callable[[int], None],
    ) -> None:
        self.con = con
        self.db_lock = db_lock
        self.client = client
        self.run_id = run_id
        self.started = started
        self.options = options
        self.on_page = on_page
        self.tally = Tally()
        self._sched = threading.Lock()  # the counts below, for splitting windows
        self._futures: list[Future[None]] = []
        self._queued = 0  # windows submitted and not started
        self._active = 0  # windows being read
        self.pool = ThreadPoolExecutor(
            max_workers=options.concurrency, thread_name_prefix="paylens-sync"
        )
        self.writer = _Writer(
            self._prepare,
            self._land,
            max_rows=options.batch_records,
            max_bytes=options.batch_bytes,
            queue_size=options.queue_landings,
            gather_seconds=options.gather_seconds,
        )

    # -- the plan --------------------------------------------------------------------------

    def run(self) -> str:
        """Sync; returns the mode that ran ("full" or "incremental")."""
        try:
            self._read_all(self._unfinished_slices())
            stored = self._local_count(Window(self.options.since, None))
            mode = "full" if self.options.full or stored == 0 else "incremental"
            if mode == "full":
                self._full()
            else:
                self._incremental()
            self.writer.flush()
            return mode
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.writer.close()

    def _full(self) -> None:
        everything = Window(self.options.since, None)
        last = self.pool.submit(self._probe, everything, sort_order="desc")
        first = self._probe(everything, sort_order="asc")
        newest_page = last.result()
        if first.total_count == 0 or not first.data:
            return
        oldest = _parse_time(first.data[0].get("createdAt")) or self.options.since
        newest = _parse_time(newest_page.data[0].get("createdAt")) if newest_page.data else None
        self._read_all(self._balanced_slices(oldest, newest, first.total_count))
        self._reconcile_range(Window(self.options.since, None))

    def _incremental(self) -> None:
        newest = self._local_newest()
        recent_start = newest - self.options.recent if newest else None
        since = self.options.since
        if since is not None and (recent_start is None or recent_start < since):
            recent_start = since
        recent = Window(recent_start, None)
        probe = self._probe(recent, sort_order="asc")
        self._read_all(self._slices(recent_start, None, probe.total_count))
        older = Window(self.options.since, recent_start)
        self._read_all([Window(older.start, older.end, status) for status in NON_TERMINAL_STATUSES])
        self._reconcile_range(older)

    def _slice_count(self, total: int | None) -> int:
        """Enough slices (4 per worker) to keep every worker busy to the end, none much over
        `slice_records`, none under a few pages."""
        wanted = max(-(-(total or 0) // self.options.slice_records), 4 * self.options.concurrency)
        return max(1, min(4096, wanted, -(-(total or 0) // _SLICE_MIN)))

    def _slices(
        self, start: datetime | None, newest: datetime | None, total: int | None
    ) -> list[Window]:
        """Time slices of [start, newest] sized for about `slice_records` each, plus an
        open-ended tail for what arrives after `newest`."""
        if start is None or newest is None or newest <= start:
            return [Window(start, None)]
        windows = _cut(Window(start, newest + _TICK), self._slice_count(total))
        return [*windows, Window(newest + _TICK, None)]

    def _balanced_slices(
        self, start: datetime | None, newest: datetime | None, total: int | None
    ) -> list[Window]:
        """`_slices` cut where the records are: one round of counts over `concurrency` equal
        parts of the range, each part cut in proportion to its count, the largest slices read
        first. Time slices of equal length hold very unequal counts when activity grows, and
        the last dense slice would otherwise be read alone, one round trip a page."""
        if start is None or newest is None or newest <= start or (total or 0) < 2 * _SLICE_MIN:
            return self._slices(start, newest, total)
        parts = _cut(Window(start, newest + _TICK), self.options.concurrency)
        futures = [self.pool.submit(self._remote_count, part) for part in parts]
        counts = [future.result() or 0 for future in futures]
        if any(future.result() is None for future in futures) or not sum(counts):
            return self._slices(start, newest, total)
        per_slice = sum(counts) / self._slice_count(sum(counts))
        sized: list[tuple[float, Window]] = []
        for part, count in zip(parts, counts, strict=True):
            pieces = max(1, round(count / per_slice))
            sized += [(count / pieces, piece) for piece in _cut(part, pieces)]
        sized.sort(key=lambda item: -item[0])
        return [piece for _, piece in sized] + [Window(newest + _TICK, None)]

    # -- reconciliation --------------------------------------------------------------------

    def _reconcile_range(self, window: Window) -> None:
        """Compare per-status counts with the service and re-read only what they show moved.

        A record that changed status is counted in its new status: where the service counts
        more records in a status than are stored, reading the window *filtered by that status*
        brings every record that moved into it (and new ones), and so also fixes the status it
        left. Such a read is narrowed by bisecting the window on that status's count until it is
        small. Where per-status counts cannot explain the totals (records in statuses paylens
        does not know, or fewer records than stored), the whole window is bisected and re-read.
        """
        everything = (None, *ALL_STATUSES)
        pending: list[tuple[Window, tuple[str | None, ...]]] = [(window, everything)]
        while pending:
            to_read: list[Window] = []
            next_level: list[tuple[Window, tuple[str | None, ...]]] = []
            futures = {
                (i, status): self.pool.submit(self._remote_count, Window(w.start, w.end, status))
                for i, (w, statuses) in enumerate(pending)
                for status in statuses
            }
            for i, (w, statuses) in enumerate(pending):
                local = self._local_counts(w)
                remote = {status: futures[(i, status)].result() for status in statuses}
                missing = (remote.get(None) or 0) - sum(local.values())
                whole = None in statuses and (
                    not _explained(remote, local) or missing > self.options.leaf_records
                )
                if whole:  # the statuses cannot tell what moved, or the window is mostly missing
                    size = max(sum(local.values()), remote[None] or 0)
                    halves = self._halves(w) if size > self.options.leaf_records else []
                    next_level += [(half, everything) for half in halves]
                    to_read += [] if halves else self._sized(w, size)
                    continue
                for status in statuses:
                    wanted = remote.get(status)
                    if status is None or wanted is None or wanted <= local.get(status, 0):
                        continue
                    halves = self._halves(w) if wanted > self.options.leaf_records else []
                    next_level += [(half, (status,)) for half in halves]
                    to_read += [] if halves else self._sized(Window(w.start, w.end, status), wanted)
            self._read_all(to_read)
            pending = next_level

    def _halves(self, window: Window) -> list[Window]:
        """Two windows splitting this one at the stored records' median (an open start is
        split at the oldest stored record); none when it cannot be split further."""
        if window.start is None:
            oldest = self._local_oldest(window)
            return [Window(None, oldest), Window(oldest, window.end)] if oldest else []
        end = window.end or self._local_newest_in(window)
        if end is None or end - window.start <= timedelta(seconds=2):
            return []
        middle = self._local_median(window)
        if middle is None or not window.start < middle < end:
            middle = window.start + (end - window.start) / 2
        return [Window(window.start, middle), Window(middle, window.end)]

    def _sized(self, window: Window, total: int) -> list[Window]:
        """A window to re-read, cut into slices of about `slice_records` to page concurrently."""
        if total <= self.options.slice_records or window.start is None or window.end is None:
            return [window]
        return _cut(window, -(-total // self.options.slice_records))

    # -- the service -------------------------------------------------------------------------

    def _list(
        self, window: Window, *, limit: int | None = None, sort_order: str = "asc"
    ) -> Paginator[Any]:
        return self.client.transactions.list(**window.filters(), sort_order=sort_order, limit=limit)

    def _pages(self, window: Window) -> Iterable[TextPage]:
        return self._list(window).pages(raw="text")

    def _probe(self, window: Window, *, sort_order: str) -> RawPage:
        return next(iter(self._list(window, limit=1, sort_order=sort_order).pages(raw=True)))

    def _remote_count(self, window: Window) -> int | None:
        return self._probe(window, sort_order="asc").total_count

    # -- reading and landing ---------------------------------------------------------------

    def _read_all(self, windows: list[Window]) -> None:
        """Read windows concurrently; returns once everything read is committed."""
        if not windows:
            return
        started = time.perf_counter()
        self._register(windows)
        for window in windows:
            self._submit(window)
        while True:  # readers may add windows (splits) while this waits
            with self._sched:
                running = [f for f in self._futures if not f.done()]
            if not running:
                break
            wait(running)
        with self._sched:
            futures, self._futures = self._futures, []
        for future in futures:
            future.result()
        # not flushed here: what the readers handed over is committed while the next step's
        # requests are under way; every read of what is stored (`_stored`) waits for it first
        logger.info("read %d window(s) in %.2fs", len(futures), time.perf_counter() - started)

    def _stored(self, query: str, params: list[Any]) -> list[tuple[Any, ...]]:
        """Rows of a query of what is stored, once everything read so far is committed."""
        self.writer.flush()
        with self.db_lock:
            return self.con.execute(query, params).fetchall()

    def _register(self, windows: list[Window]) -> None:
        """Record the windows to read (one statement: a statement or commit each would cost a
        round of the interpreter and a disk sync per window)."""
        slices = pa.table(
            {
                "slice_key": [w.key for w in windows],
                "slice_start": pa.array([w.start for w in windows], _TIMESTAMP),
                "slice_end": pa.array([w.end for w in windows], _TIMESTAMP),
                "status_filter": [w.status or "" for w in windows],
            }
        )
        with self.db_lock:
            self.con.register("_slices", slices)
            try:
                self.con.execute(
                    """INSERT OR IGNORE INTO sync_slices
                       SELECT ?, 'transactions', slice_key, slice_start, slice_end, status_filter,
                              NULL, false, 0
                       FROM _slices""",
                    [self.run_id],
                )
            finally:
                self.con.unregister("_slices")

    def _submit(self, window: Window) -> None:
        with self._sched:
            self._queued += 1
            self._futures.append(self.pool.submit(self._read, window))

    def _split(
        self, window: Window, resume: datetime | None, end: datetime | None
    ) -> datetime | None:
        """When a worker is idle and no window waits, hand the later half of what this window
        has left (from its last record to its end) to that worker: slices are cut by time,
        not by count, and without this the last dense slice would be read alone, one page per
        round trip. Returns where this window now stops (its end when it does not split)."""
        if end is None or resume is None or end - resume < _MIN_SPLIT:
            return end
        with self._sched:
            if self._queued or self._active >= self.options.concurrency:
                return end
            self._queued += 1  # claimed now, so that no other reader splits for that worker
        middle = resume + (end - resume) / 2
        child = Window(middle, end, window.status)
        self._register([child])  # before this window stops short of it: nothing is lost
        with self._sched:
            self._queued -= 1
        self._submit(child)
        return middle

    def _read(self, window: Window) -> None:
        """Page one window in ascending order, landing every `land_records` records or
        `land_bytes` of JSON (and at the end) together with the window's checkpoint."""
        with self._sched:
            self._queued -= 1
            self._active += 1
        try:
            self._page(window)
        finally:
            with self._sched:
                self._active -= 1

    def _page(self, window: Window) -> None:
        buffer: dict[str, bytes] = {}  # JSON texts by id: compact, and a re-read id replaces
        size = 0  # bytes in `buffer`: landings are bounded in bytes too, whatever a record weighs
        rejects: list[tuple[Any, ...]] = []
        resume: datetime | None = None
        end = window.end  # moves earlier when the rest of the window is handed on
        for page in self._pages(window):
            records = list(zip(page.ids, page.records, strict=True))
            if end != window.end and records and not _before(records[-1][1], end):
                records = [r for r in records if _before(r[1], end)]
                more = False  # the rest belongs to the window handed on
            else:
                more = page.has_more
            for record_id, text in records:
                if record_id is not None:
                    buffer[record_id] = text
                    size += len(text)
                else:
                    rejects.append(
                        self._reject(orjson.loads(text), "not a record with a string id")
                    )
            if records:
                resume = _created_at(records[-1][1]) or resume
            self.on_page(len(page.records))
            if len(buffer) >= self.options.land_records or size >= self.options.land_bytes:
                self.writer.put(_Landing(window, buffer, rejects, resume, False, size))
                buffer, rejects, size = {}, [], 0
            if not more:
                break
            end = self._split(window, resume, end)
        self.writer.put(_Landing(window, buffer, rejects, resume, True, size))

    def _tables(
        self, buffer: dict[str, bytes], rejects: list[tuple[Any, ...]]
    ) -> dict[str, pa.Table] | None:
        """The batch as typed tables, with the records that do not fit the declared schema
        (a wrong type, a missing required field) moved to `rejects`, their error told by the
        typed models. Valid batches cost one vectorised read."""
        while buffer:
            try:
                tables = transaction_tables(raw=list(buffer.values()))
            except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
                for record_id in _unreadable(list(buffer.items())):
                    rejects.append(self._reject(orjson.loads(buffer.pop(record_id)), str(exc)))
                continue
            incomplete = _missing_required(tables["transactions"])
            dropped = set()
            for record_id in incomplete:
                record = orjson.loads(buffer[record_id])
                try:
                    models.parse_transaction(record)
                except ValidationError as exc:
                    rejects.append(self._reject(record, exc))
                    dropped.add(record_id)
            if not dropped:
                return tables
            for record_id in dropped:
                del buffer[record_id]
        return None

    def _reject(self, record: Any, error: ValidationError | str) -> tuple[Any, ...]:
        """A rejected_records row; the error comes from the typed models where they refuse it."""
        if isinstance(error, str) and isinstance(record, dict):
            try:
                models.parse_transaction(record)
            except ValidationError as exc:
                error = exc
        if isinstance(error, ValidationError):
            error = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors()[:5]
            )
        fields = record if isinstance(record, dict) else {}
        status = fields.get("status")
        logger.warning("rejected transaction %s: %s", fields.get("id"), error)
        return (
            self.run_id,
            "transactions",
            fields.get("id") if isinstance(fields.get("id"), str) else None,
            status if isinstance(status, str) else None,
            _parse_time_or_none(fields.get("createdAt")),
            error,
            orjson.dumps(record).decode(),
            self.started,
        )

    def _prepare(self, landings: list[_Landing]) -> _Batch:
        """Merge landings (a record read twice keeps its latest read) and type them."""
        buffer: dict[str, bytes] = {}
        rejects: list[tuple[Any, ...]] = []
        for landing in landings:
            buffer.update(landing.buffer)
            rejects += landing.rejects
        tables = self._tables(buffer, rejects)
        return _Batch(landings, tables, rejects, len(buffer))

    def _land(self, batch: _Batch) -> None:
        """Commit a batch (landings of one or several windows) in one transaction: its rows,
        its rejects and each window's checkpoint, so a window's progress never runs ahead of
        its rows."""
        with self.db_lock, _store.transaction(self.con):
            if batch.tables is not None:
                _store.upsert_transaction_tables(
                    self.con, batch.tables, run_id=self.run_id, now=self.started
                )
            _store.record_rejects(self.con, batch.rejects)
            self._checkpoint(batch.landings)
        self.tally.add(records=batch.records, rejected=len(batch.rejects))

    def _checkpoint(self, landings: list[_Landing]) -> None:
        """Move each landed window's checkpoint (in the caller's transaction)."""
        progress = (
            pa.table(
                {
                    "slice_key": [landing.window.key for landing in landings],
                    "resume": pa.array([landing.resume for landing in landings], _TIMESTAMP),
                    "done": [landing.done for landing in landings],
                    "records": pa.array([len(landing.buffer) for landing in landings], pa.int64()),
                }
            )
            .group_by("slice_key", use_threads=False)
            .aggregate([("resume", "max"), ("done", "any"), ("records", "sum")])
        )
        self.con.register("_progress", progress)
        try:
            self.con.execute(
                """UPDATE sync_slices s
                   SET resume_from = coalesce(p.resume_max, s.resume_from),
                       done = s.done OR p.done_any, records = s.records + p.records_sum
                   FROM _progress p
                   WHERE s.run_id = ? AND s.resource = 'transactions'
                     AND s.slice_key = p.slice_key""",
                [self.run_id],
            )
        finally:
            self.con.unregister("_progress")

    # -- what is stored --------------------------------------------------------------------

    def _unfinished_slices(self) -> list[Window]:
        """Slices of interrupted runs, to finish first (from their checkpoints)."""
        with self.db_lock:
            rows = self.con.execute(
                """SELECT s.run_id, epoch_us(s.slice_start), epoch_us(s.slice_end), s.status_filter,
                          epoch_us(s.resume_from)
                   FROM sync_slices s JOIN sync_runs r USING (run_id)
                   WHERE s.resource = 'transactions' AND NOT s.done AND r.status = 'running'
                     AND s.run_id <> ?""",
                [self.run_id],
            ).fetchall()
            self.con.execute(
                "UPDATE sync_runs SET status = 'interrupted' WHERE status = 'running' AND run_id <> ?",
                [self.run_id],
            )
        windows = []
        for _, start, end, status, resume in rows:
            windows.append(
                Window(
                    _instant(resume if resume is not None else start), _instant(end), status or None
                )
            )
        if windows:
            logger.info("resuming %d unfinished slices of an interrupted sync", len(windows))
        return windows

    def _where(self, window: Window) -> tuple[str, list[Any]]:
        clauses, params = ["TRUE"], []
        if window.start is not None:
            clauses.append("created_at >= ?")
            params.append(window.start)
        if window.end is not None:
            clauses.append("created_at < ?")
            params.append(window.end)
        return " AND ".join(clauses), params

    def _known(self) -> str:
        """Stored records plus the latest rejection of records never stored, so a rejected
        record counts as known and does not look missing to the reconciliation."""
        return """(SELECT created_at, status FROM transactions
                   UNION ALL
                   SELECT created_at, status FROM (
                     SELECT DISTINCT ON (record_id) record_id, created_at, status FROM rejected_records
                     WHERE resource = 'transactions' AND record_id IS NOT NULL
                       AND record_id NOT IN (SELECT id FROM transactions)
                     ORDER BY record_id, rejected_at DESC))"""

    def _local_counts(self, window: Window) -> dict[str | None, int]:
        where, params = self._where(window)
        rows = self._stored(
            f"SELECT status, count(*) FROM {self._known()} WHERE {where} GROUP BY status", params
        )
        return {status: n for status, n in rows}

    def _local_count(self, window: Window) -> int:
        return sum(self._local_counts(window).values())

    def _local_newest(self) -> datetime | None:
        rows = self._stored("SELECT epoch_us(max(created_at)) FROM transactions", [])
        return _instant(rows[0][0]) if rows else None

    def _local_oldest(self, window: Window) -> datetime | None:
        return self._local_stat("min", window)

    def _local_newest_in(self, window: Window) -> datetime | None:
        newest = self._local_stat("max", window)
        return None if newest is None else newest + _TICK

    def _local_median(self, window: Window) -> datetime | None:
        return self._local_stat("median", window)

    def _local_stat(self, function: str, window: Window) -> datetime | None:
        where, params = self._where(window)
        rows = self._stored(
            f"SELECT epoch_us({function}(created_at)) FROM {self._known()} WHERE {where}", params
        )
        return _instant(rows[0][0]) if rows else None


# -- the smaller resources --------------------------------------------------------------------

#: Resource name -> (how to list it from the client, its table).
SMALL_RESOURCES: dict[str, Callable[[Client], Iterable[RawPage]]] = {
    "customers": lambda c: c.customers.list().pages(raw=True),
    "cards": lambda c: c.cards.list().pages(raw=True),
    "internal_accounts": lambda c: c.internal_accounts.list().pages(raw=True),
    "external_accounts": lambda c: c.external_accounts.list().pages(raw=True),
}

_RESOURCE_MODELS: dict[str, Any] = {
    "customers": models.Customer,
    "cards": models.Card,
    "internal_accounts": models.InternalAccount,
    "external_accounts": models.ExternalAccount,
}


def sync_small_resource(
    con: duckdb.DuckDBPyConnection,
    db_lock: threading.Lock,
    client: Client,
    resource: str,
    run_id: int,
    started: datetime,
) -> int:
    """Re-read a small resource whole (thousands of rows, not millions) and upsert it;
    returns how many records were rejected."""
    adapter = models.page_adapter(_RESOURCE_MODELS[resource])
    item = _RESOURCE_MODELS[resource]
    from pydantic import TypeAdapter

    one = TypeAdapter(item)
    records: list[dict[str, Any]] = []
    rejects: list[tuple[Any, ...]] = []
    for page in SMALL_RESOURCES[resource](client):
        try:
            adapter.validate_json(page.content)
            records += page.data
        except ValidationError:
            for record in page.data:
                try:
                    one.validate_python(record)
                    records.append(record)
                except ValidationError as exc:
                    rid = record.get("id") if isinstance(record, dict) else None
                    rejects.append(
                        (
                            run_id,
                            resource,
                            rid,
                            None,
                            None,
                            str(exc)[:2000],
                            orjson.dumps(record).decode(),
                            started,
                        )
                    )
    unique = list({r["id"]: r for r in records}.values())
    batch: pa.Table = to_arrow(resource, unique)
    with db_lock, _store.transaction(con):
        _store.upsert(con, resource, batch, run_id=run_id, now=started)
        _store.record_rejects(con, rejects)
    return len(rejects)


def utcnow() -> datetime:
    return datetime.now(UTC)


def elapsed_since(start: float) -> float:
    return time.perf_counter() - start
