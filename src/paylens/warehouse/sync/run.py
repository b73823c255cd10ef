"""Running a sync: the readers' pool, the writer behind them, and the order of the steps.

Time slices are paged concurrently (cursors cannot be split) under a bounded concurrency and an
optional request-rate budget; their landings go to a writer that types them into batches of
thousands of rows on one thread and commits them on another, each batch in one transaction
with its windows' checkpoints (see `paylens.warehouse.sync` for what is read and why).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, wait
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import duckdb

from paylens.client import Client, RateBudget, TextPage
from paylens.errors import InvalidArgumentError

from .. import _open
from . import fetch, plan, save
from .fetch import Landing, Service
from .freshness import Freshness
from .plan import OPEN_STATUSES, Verification, Window
from .readers import PLAN, InFlight, Readers, submit_ranked
from .save import Batch, StoredTransactions

logger = logging.getLogger("paylens.warehouse")

#: A Ctrl-C of the process, set by `paylens sync`'s own SIGINT handler (beside raising
#: KeyboardInterrupt): a run stops at its next wait even when the KeyboardInterrupt was taken
#: and dropped by a statement DuckDB was running on the main thread when it came.
CTRL_C = threading.Event()
#: How often a run waiting on its readers looks at `CTRL_C`.
_CTRL_C_SECONDS = 0.1


#: The most slices a sync pages at once: a read is cut into at most 4096 slices (4 per reader,
#: `plan.slice_count`), so more readers would find nothing to read, and a sync cuts some ranges
#: into `concurrency` parts up front (a count each): 10**8 of them took all the memory there was.
MAX_CONCURRENCY = 1024


@dataclass
class SyncOptions:
    """How a sync runs. `concurrency` slices are paged at once; `rate_limit` caps requests per
    second; `recent` is how far before the newest stored record the recent window opens;
    `since` limits the sync to records created from then on; `full` re-reads everything;
    `verify_syncs`: every record of the older range is re-read at least once every this many
    syncs (the rolling re-verification: about 1/`verify_syncs` of it each sync); `hold_window`:
    open card holds are re-read on every sync while they are younger than this at the start
    of the sync (against the newest stored record: the service's time, not the wall clock);
    no filter lists card statuses, so older holds are left to the re-verification.
    `freshness`: how old cards and accounts may grow before they are re-read whole, and how
    often customers are read whole (`Freshness`). `verify_syncs_with_events`: the round of the
    re-verification while webhook receivers were up without a gap since the previous sync (and
    none within the last `verify_syncs` syncs): the events carry every change it would find
    but those no event announces (see `paylens.warehouse.sync.events`)."""

    concurrency: int = 16
    rate_limit: float | None = None
    recent: timedelta = timedelta(days=2)
    since: datetime | None = None
    full: bool = False
    progress: bool = True
    verify_syncs: int = 7
    verify_syncs_with_events: int = 30
    hold_window: timedelta = timedelta(days=7)
    freshness: Freshness = field(default_factory=Freshness)
    slice_records: int = 5_000
    leaf_records: int = 2_000
    land_records: int = 500
    land_bytes: int = 2 << 20
    batch_records: int = 15_000
    batch_bytes: int = 32 << 20
    queue_landings: int = 32
    #: the most records read and not yet committed (readers wait beyond it): what a Ctrl-C's
    #: last commits hold (None: only the queue's bound). Two batches, so the typer gathers the
    #: next batch while the writer commits one: at 12,000 the typer and the writer took turns (a
    #: 1,000,000-transaction sync 35.6 s against 30.7 s at 30,000); 40,000 with batches of
    #: 20,000 was as fast, with more memory and a longer Ctrl-C (BENCHMARKS.md, #34)
    ahead_records: int | None = 30_000
    gather_seconds: float = 0.2

    def __post_init__(self) -> None:
        InvalidArgumentError.unless_count(
            "concurrency", self.concurrency, least=1, unit="slices at once"
        )
        if self.concurrency > MAX_CONCURRENCY:
            raise InvalidArgumentError(
                "concurrency",
                f"must be at most {MAX_CONCURRENCY} slices at once (a read is cut into at most "
                f"{4 * MAX_CONCURRENCY} slices); got {self.concurrency!r}",
            )
        InvalidArgumentError.unless_count("verify_syncs", self.verify_syncs, least=1, unit="syncs")
        InvalidArgumentError.unless_count(
            "verify_syncs_with_events", self.verify_syncs_with_events, least=1, unit="syncs"
        )
        if self.rate_limit is not None:
            RateBudget.check(self.rate_limit)


@dataclass
class Tally:
    """Counters of one run, shared by the writer and the caller."""

    records: int = 0
    rejected: int = 0
    by_purpose: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, batch: Batch) -> None:
        with self._lock:
            self.records += batch.records
            self.rejected += len(batch.rejects)
            for landing in batch.landings:
                purpose = landing.window.purpose
                self.by_purpose[purpose] = self.by_purpose.get(purpose, 0) + landing.records


class _Stopped(Exception):
    """A reader stopped by the run's end (a Ctrl-C or another reader's error)."""


class _Wake:
    """A flush's marker in the writer's queue: gather no longer, type what came before it."""


_WAKE = _Wake()


class Writer:
    """Two threads behind the readers: one merges the landings that have arrived (a bounded
    queue) into large batches (up to `max_rows` records or `max_bytes` of JSON, so memory
    stays bounded whatever a record weighs) and types them; the other commits them. Arrow's
    JSON read and DuckDB's writes both run outside the interpreter lock, so typing the next
    batch overlaps committing the last one while the readers go on fetching.

    With `merge`, a batch is typed in parts while it gathers (whenever nothing waits and a
    part's worth, `max_rows // 8`, has come), and its parts merged when it ends: little is
    left to type after the last landing. A batch in which a record comes twice is typed
    whole at its end instead (its latest read kept)."""

    def __init__(
        self,
        prepare: Callable[[list[Landing]], Batch],
        land: Callable[[Batch], None],
        *,
        max_rows: int,
        max_bytes: int,
        queue_size: int,
        gather_seconds: float,
        merge: Callable[[list[Batch]], Batch] | None = None,
        ahead_rows: int | None = None,
    ) -> None:
        self._prepare = prepare
        self._land = land
        self._merge = merge
        self._part_rows = max(1, max_rows // 8)
        self._max_rows = max_rows
        self._max_bytes = max_bytes
        self._gather_seconds = gather_seconds
        self._queue: queue.Queue[Landing | _Wake | None] = queue.Queue(maxsize=queue_size)
        self._typed: queue.Queue[tuple[list[Landing], Batch | None] | None] = queue.Queue(1)
        self._error: BaseException | None = None
        self._finishing = threading.Event()  # a Ctrl-C: what is handed over is committed now
        # records handed over and not yet committed (or dropped after an error); `put` waits while
        # they are `ahead_rows` or more: what a Ctrl-C's last commits hold is bounded
        self._ahead_rows = ahead_rows
        self._pending = 0
        self._committed = threading.Condition()
        self._threads = [
            threading.Thread(target=self._run_prepare, name="paylens-typer", daemon=True),
            threading.Thread(target=self._run_land, name="paylens-writer", daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def put(self, landing: Landing) -> None:
        self._raise()
        if self._ahead_rows is not None:
            with self._committed:
                while (
                    self._pending >= self._ahead_rows
                    and not self._finishing.is_set()
                    and self._error is None
                ):
                    self._committed.wait(_CTRL_C_SECONDS)
                self._pending += landing.records
            self._raise()
        self._queue.put(landing)

    def ahead(self) -> float:
        """How much of the read-ahead is in use: records handed over and not yet committed,
        as a share of `ahead_rows` (0 without that bound)."""
        return self._pending / self._ahead_rows if self._ahead_rows else 0.0

    def _done(self, landings: list[Landing]) -> None:
        """Landings committed (or dropped after an error): no longer ahead of the commits."""
        if self._ahead_rows is not None:
            with self._committed:
                self._pending -= sum(landing.records for landing in landings)
                self._committed.notify_all()

    def finish(self) -> None:
        """A Ctrl-C: commit what is handed over at once (no batch waits to gather more), and
        let the readers that still hand over a page do so without waiting for the commits.
        What was read is not read again by the next run; what the readers hold is at most
        `ahead_rows` records and a page each, a few tenths of a second to type and commit."""
        self._finishing.set()

    @property
    def finishing(self) -> bool:
        return self._finishing.is_set()

    def flush(self) -> None:
        """Wait until everything handed over is committed (or raise what went wrong). With
        nothing pending this costs nothing; otherwise the typer is woken at once (behind what
        was handed over), so the batch it gathers is typed now rather than at its deadline."""
        if self._queue.unfinished_tasks:
            self._queue.put(_WAKE)
            self._queue.join()
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
            if isinstance(first, _Wake):
                self._queue.task_done()  # a flush found nothing to gather
                continue
            landings, rows, size = [first], len(first.buffer), first.size
            # typed ahead (with `merge`): parts[i] holds landings[:typed] (typed_rows rows);
            # ids are the batch's records while they are all distinct
            parts: list[Batch] = []
            typed = typed_rows = 0
            ids = set(first.buffer) if self._merge is not None else None
            # gather for a moment: under latency landings trickle in, and a commit each
            # would cost a disk sync and a round of statements for a few hundred rows;
            # a flush ends the gathering at once (its marker comes behind what it waits for)
            deadline = time.monotonic() + self._gather_seconds
            while rows < self._max_rows and size < self._max_bytes:
                # a Ctrl-C: what is queued is gathered without waiting for more
                left = 0.0 if self._finishing.is_set() else deadline - time.monotonic()
                ahead = left > 0 and ids is not None and rows - typed_rows >= self._part_rows
                try:
                    if ahead or left <= 0:
                        more = self._queue.get_nowait()
                    else:
                        more = self._queue.get(timeout=left)
                except queue.Empty:
                    if not ahead:
                        break
                    # nothing waits: type what has come rather than idle
                    part = self._type(landings[typed:])
                    if part is None:
                        ids = None
                    else:
                        parts.append(part)
                        typed, typed_rows = len(landings), rows
                    continue
                if isinstance(more, _Wake):
                    self._queue.task_done()
                    break
                if more is None:
                    self._queue.put(None)  # seen again by the outer loop after this batch
                    self._queue.task_done()
                    break
                if ids is not None:
                    if ids.isdisjoint(more.buffer):
                        ids.update(more.buffer)
                    else:  # a record read twice: typed whole, its latest read kept
                        ids = None
                landings.append(more)
                rows += len(more.buffer)
                size += more.size
            if ids is None or not parts or self._merge is None:
                batch = self._type(landings)
            else:
                rest = self._type(landings[typed:]) if typed < len(landings) else None
                if rest is not None:
                    parts.append(rest)
                batch = None
                try:
                    if self._error is None:
                        batch = self._merge(parts)
                except BaseException as exc:  # handed to the readers and the caller
                    self._error = exc
            if batch is not None:
                for landing in landings:
                    landing.typed()
            self._typed.put((landings, batch))

    def _type(self, landings: list[Landing]) -> Batch | None:
        try:
            if self._error is None:
                return self._prepare(landings)
        except BaseException as exc:  # handed to the readers and the caller
            self._error = exc
        return None

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
                self._done(landings)
                for _ in landings:
                    self._queue.task_done()


class InlineWriter:
    """The `Writer`'s interface without its threads: each landing is typed and committed as
    it is handed over."""

    def __init__(
        self, prepare: Callable[[list[Landing]], Batch], land: Callable[[Batch], None]
    ) -> None:
        self._prepare, self._land = prepare, land

    def put(self, landing: Landing) -> None:
        self._land(self._prepare([landing]))

    def ahead(self) -> float:
        return 0.0

    def finish(self) -> None:
        pass

    @property
    def finishing(self) -> bool:
        return False

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


class InlineExecutor(Executor):
    """An executor that runs what is submitted at once, on the calling thread."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # handed to whoever asks for the result
            future.set_exception(exc)
        return future


class TransactionSync:
    """One run of the transaction sync: the steps of `paylens.warehouse.sync`, read by a pool
    of `concurrency` readers and written by a `Writer`."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        db_lock: threading.Lock | threading.RLock,
        client: Client,
        run_id: int,
        started: datetime,
        options: SyncOptions,
        on_page: Callable[[int], None],
        *,
        service: Service | None = None,
        threads: bool = True,
        pool: Executor | None = None,
        on_expect: Callable[[int], None] = lambda records: None,
        on_more: Callable[[int], None] = lambda records: None,
        on_phase: Callable[[str], None] = lambda phase: None,
        events_exact: bool = False,
    ) -> None:
        """`service` stands in for the client's list endpoint (tests); `threads=False` reads
        every window and commits every landing on the calling thread, in order; `pool` is
        the readers' pool when the caller shares one (it is not shut down here). `on_page`
        hears of each page's records, `on_expect` of how many records a full sync will read,
        `on_more` of how many more an incremental sync's window will read as it starts (the
        service's `totalCount` of its first page: the total grows as windows start)
        (the service's `totalCount`), `on_phase` of each step (reading, reconciling,
        committing). `events_exact`: the webhook events folded before this run brought every
        transition since the previous sync (`events.FoldResult.exact`), so the older range's
        open statuses are not listed nor its open records re-read one by one."""
        self.con = con
        self.events_exact = events_exact
        self.db_lock = db_lock
        self.service = service or Service(client)
        self.run_id = run_id
        self.started = started
        self.options = options
        self.on_page = on_page
        self.on_expect = on_expect
        self.on_more = on_more
        self._children: set[str] = set()  # windows split off another: counted in their parent
        self._totals = False  # an incremental sync adds each window's count to the total
        self.on_phase = on_phase
        self.tally = Tally()
        self._sched = threading.Lock()  # the counts below, for splitting windows
        self._futures: list[Future[None]] = []
        self._stopping = threading.Event()  # a failed or interrupted run: readers stop
        self.mode: str | None = None  # "full" or "incremental", once decided
        self._queued = 0  # windows submitted and not started
        self._active = 0  # windows being read
        prepare = functools.partial(save.typed_batch, run_id=run_id, at=started)
        self._keys = save.StoredKeys()  # only `_land` writes the record tables during a run
        self.pool: Executor
        self.writer: Writer | InlineWriter
        self._own_pool = pool is None
        if threads:
            self.pool = pool or Readers(options.concurrency, "paylens-sync")
            self.writer = Writer(
                prepare,
                self._land,
                max_rows=options.batch_records,
                max_bytes=options.batch_bytes,
                queue_size=options.queue_landings,
                gather_seconds=options.gather_seconds,
                merge=save.merged,
                ahead_rows=options.ahead_records,
            )
        else:
            self.pool, self.writer = InlineExecutor(), InlineWriter(prepare, self._land)
        self.stored = StoredTransactions(con, db_lock, self.writer.flush)
        self._present: set[str] = set()  # unlisted records the service still served by id
        #: how many pages are asked for at once: what covers the service's wait (`InFlight`)
        self.in_flight = InFlight(options.concurrency if threads else 1, self.writer.ahead)

    @property
    def reverified(self) -> int:
        """Records re-read by the rolling re-verification (its cost)."""
        return self.tally.by_purpose.get("verify", 0)

    # -- the steps ---------------------------------------------------------------------------

    def run(self) -> str:
        """Sync; returns the mode that ran ("full" or "incremental"). A Ctrl-C stops the
        readers at their next page and commits what they handed over (`Writer.finish`): the
        next run resumes every window from its last commit."""
        try:
            with self.db_lock:
                resumed, resumed_full = save.unfinished(self.con, self.run_id)
            if resumed or resumed_full:
                logger.info("resuming %d unfinished slices of an interrupted sync", len(resumed))
            if isinstance(self.service, Service):  # a stand-in (tests) pages by itself
                self.service.digits = max(self.service.digits, self.stored.time_digits())
            self.on_phase("reading")
            # the rest of an interrupted full read is this run's full read: it is finished,
            # not started again (nor taken for an incremental sync's older range)
            self._read_all(resumed, full=resumed_full)
            stored = self.stored.stored(Window(self.options.since, None))
            full = self.options.full or stored == 0 or resumed_full
            self.mode = "full" if full else "incremental"
            if full:
                self._full(resumed=resumed_full)
            else:
                self._incremental()
            self.on_phase("committing")
            self.writer.flush()
            if isinstance(self.service, Service):
                self.stored.save_time_digits(self.service.digits)
            return self.mode
        except KeyboardInterrupt:
            self.writer.finish()
            raise
        finally:
            if CTRL_C.is_set():  # a Ctrl-C that DuckDB took as its own error
                self.writer.finish()
            self._stopping.set()
            if self._own_pool:
                self.pool.shutdown(wait=True, cancel_futures=True)
            else:  # a shared pool: this run's readers end before the writer does
                with self._sched:
                    mine = list(self._futures)
                for future in mine:
                    future.cancel()
                wait(mine)
            self.writer.close()

    def _full(self, *, resumed: bool = False) -> None:
        """Read everything (`resumed`: an interrupted run's full read was just finished)."""
        everything = Window(self.options.since, None)
        if not resumed:
            last = submit_ranked(self.pool, PLAN, self.service.probe, everything, sort_order="desc")
            first = self.service.probe(everything, sort_order="asc")
            newest_page = last.result()
            if isinstance(first.total_count, int) and not isinstance(first.total_count, bool):
                self.on_expect(first.total_count)  # for the progress bar only: never trusted
            if not first.data:  # the data decides, not totalCount
                self._reconcile_range(everything)
                self._confirm_gone()
                return
            oldest = _created(first) or self.options.since
            newest = _created(newest_page)
            self._read_all(self._balanced_slices(oldest, newest, first.total_count), full=True)
        self._confirm_gone()
        self._reconcile_range(everything)
        self._confirm_gone()
        # everything was just read: a round of the re-verification starts at the next sync
        since, recent_start = self._older_start_end()
        older = self.stored.stored(Window(since, recent_start))
        self.stored.save_verification(Verification(None, older))

    def _older_start_end(self) -> tuple[datetime | None, datetime | None]:
        """Where the recent window opens: the older range is what lies before it."""
        newest = self.stored.newest()
        recent_start = newest - self.options.recent if newest else None
        since = self.options.since
        if since is not None and (recent_start is None or recent_start < since):
            recent_start = since
        return since, recent_start

    def _incremental(self) -> None:
        self._totals = True
        # holds still young at the last sync (its newest record): a hold that changed while no
        # sync looked is read again even when the service moved on far since
        last = self.stored.newest()
        holds_since = last - self.options.hold_window if last else None
        since, recent_start = self._older_start_end()
        older = Window(since, recent_start)
        verify, cursor = self._verify_windows(older)
        # the older range's open statuses are listed to find the transitions of its records,
        # unless the events brought every one of them (`events_exact`)
        watch = [] if self.events_exact else OPEN_STATUSES
        # the recent window, the non-terminal listings and the re-verification's share do not
        # depend on one another: read together, they cost one round of the pool and commits
        self._read_all(
            [
                Window(recent_start, None, purpose="recent"),
                *(Window(since, recent_start, status, "watch") for status in watch),
                *verify,
            ]
        )
        instants = self.stored.watched(
            older, self.run_id, holds_since, transitions=not self.events_exact
        )
        if instants:
            start = older.start or self.stored.oldest(older)
            span = plan.page_span(start, older.end, self.stored.stored(older))
            self._read_all(plan.point_windows(instants, span, "watch"))
        self._confirm_gone()
        self._reconcile_range(older)
        self._confirm_gone()
        self.stored.save_verification(Verification(cursor, self.stored.stored(older)))

    def _confirm_gone(self) -> None:
        """Read by id the stored records that the ranges this run listed whole did not bring
        back (`save.unlisted`); those the service answers 404 for are marked removed. A gap in
        a listing alone never removes a record."""
        ids = [i for i in self.stored.unlisted(self.run_id) if i not in self._present]
        if not ids:
            return
        answers = list(self.pool.map(self.service.gone, ids))
        self._present.update(i for i, gone in zip(ids, answers, strict=True) if not gone)
        removed = [i for i, gone in zip(ids, answers, strict=True) if gone]
        if removed:
            logger.info("%d stored transaction(s) no longer at the service", len(removed))
            self.stored.mark_removed(removed, run_id=self.run_id, at=self.started)

    def _verify_windows(self, older: Window) -> tuple[list[Window], datetime | None]:
        """The next share of the older range to re-read (see `plan.verify_share`), and where
        the round will then stand."""
        state = self.stored.verification()
        total = self.stored.stored(older)
        share = plan.verify_share(total, state.stored or total, self.options.verify_syncs)
        return plan.verify_windows(state, older, share, self.stored)

    def _slices(
        self, start: datetime | None, newest: datetime | None, total: int | None
    ) -> list[Window]:
        return plan.time_slices(
            start,
            newest,
            total,
            slice_records=self.options.slice_records,
            concurrency=self.options.concurrency,
        )

    def _balanced_slices(
        self, start: datetime | None, newest: datetime | None, total: int | None
    ) -> list[Window]:
        """`_slices`, cut where the records are after one round of counts over `concurrency`
        equal parts of the range (see `plan.balanced_slices`) when that pays
        (`plan.worth_counting`)."""
        worth = plan.worth_counting(
            total, slice_records=self.options.slice_records, concurrency=self.options.concurrency
        )
        if start is None or newest is None or newest <= start or not worth:
            return self._slices(start, newest, total)
        parts = plan.cut(Window(start, newest + plan.TICK), self.options.concurrency)
        futures = [submit_ranked(self.pool, PLAN, self.service.count, part) for part in parts]
        answers = [future.result() for future in futures]
        counts = [n or 0 for n in answers]
        if any(n is None for n in answers) or not sum(counts):
            return self._slices(start, newest, total)
        count = plan.slice_count(
            sum(counts),
            slice_records=self.options.slice_records,
            concurrency=self.options.concurrency,
        )
        return plan.balanced_slices(parts, counts, newest, per_slice=sum(counts) / count)

    def _reconcile_range(self, window: Window) -> None:
        """Bisect where the service's per-status counts differ from the stored ones and re-read
        what they show moved (see `plan.reconcile_level`); again, for the statuses the reads
        took stored records out of, until none did (see `plan.recount`)."""
        self.on_phase("reconciling")
        statuses: tuple[str | None, ...] = plan.COUNTED
        for _ in range(plan.RECOUNTS + 1):
            before = self.stored.counts(window)
            self._reconcile_level_by_level([(window, statuses)])
            statuses = plan.recount(before, self.stored.counts(window))
            if not statuses:
                return
        logger.warning("records still moving out of %s after the reconciliation", statuses)

    def _reconcile_level_by_level(self, pending: plan.Level) -> None:
        while pending:
            futures = {
                (i, status): submit_ranked(
                    self.pool, PLAN, self.service.count, Window(w.start, w.end, status)
                )
                for i, (w, statuses) in enumerate(pending)
                for status in statuses
            }
            to_read, pending = plan.reconcile_level(
                pending,
                functools.partial(_answer, futures),
                self.stored,
                leaf_records=self.options.leaf_records,
                slice_records=self.options.slice_records,
            )
            self._read_all(to_read)

    # -- reading and landing -----------------------------------------------------------------

    def _read_all(self, windows: list[Window], *, full: bool = False) -> None:
        """Read windows concurrently; returns once every reader is done (what they handed
        over is committed while the next step's requests are under way: every question to
        `stored` waits for it first). `full`: the windows are the whole of a full read (said
        in the run's row once they are registered, for a resume: `save.unfinished`)."""
        if full:
            with self.db_lock:
                save.register(self.con, windows, self.run_id)
                save.mark_full(self.con, self.run_id)
        if not windows:
            return
        started = time.perf_counter()
        if not full:
            self._register(windows)
        for window in windows:
            self._submit(window)
        while True:  # readers may add windows (splits) while this waits
            if CTRL_C.is_set():  # looked at first: readers may all be done before a wait ends
                raise KeyboardInterrupt
            with self._sched:
                running = [f for f in self._futures if not f.done()]
            if not running:
                break
            wait(running, timeout=_CTRL_C_SECONDS)
        with self._sched:
            futures, self._futures = self._futures, []
        for future in futures:
            future.result()
        logger.info(
            "read %d window(s) in %.2fs, %d page(s) at once at the end",
            len(futures),
            time.perf_counter() - started,
            self.in_flight.limit,
        )

    def _register(self, windows: list[Window]) -> None:
        with self.db_lock:
            save.register(self.con, windows, self.run_id)

    def _submit(self, window: Window) -> None:
        with self._sched:
            self._queued += 1
        # submitted outside the lock: an inline executor reads the window right here (the
        # caller's own future, or `_read_all`'s submitting, keeps `_read_all` waiting)
        future = self.pool.submit(self._read, window)
        with self._sched:
            self._futures.append(future)

    def _split(
        self, window: Window, resume: datetime | None, end: datetime | None
    ) -> datetime | None:
        """When a worker is idle and no window waits, hand the later part of what this window
        has left to that worker (`plan.split_point`). Returns where this window now stops
        (its end when it does not split)."""
        with self._sched:
            idle = not self._queued and self._active < self.options.concurrency
            middle = plan.split_point(resume, end, idle_worker=idle)
            if middle is None:
                return end
            self._queued += 1  # claimed now, so that no other reader splits for that worker
        child = Window(middle, end, window.status, window.purpose)
        with self._sched:
            self._children.add(child.key)
        # registered by the writer, ahead of whatever this window and the child land next
        # (its queue keeps their order): this window is never marked done short of a child
        # that is not recorded, and no reader waits on a commit under way to split
        self.writer.put(Landing(child, {}, [], None, False, opens=True))
        with self._sched:
            self._queued -= 1
        self._submit(child)
        return middle

    def _read(self, window: Window) -> None:
        """Page one window in ascending order, handing its landings to the writer."""
        with self._sched:
            self._queued -= 1
            self._active += 1
        try:
            for landing in fetch.landings(
                window,
                self._pages(window),
                land_records=self.options.land_records,
                land_bytes=self.options.land_bytes,
                split=lambda resume, end: self._split(window, resume, end),
                on_page=self.on_page,
                on_total=self.on_more if self._totals and not self._child(window) else None,
            ):
                if self._stopping.is_set():  # the run is ending: what is read stays unsaved
                    return
                self.writer.put(landing)
        except _Stopped:
            return
        finally:
            with self._sched:
                self._active -= 1

    def _pages(self, window: Window) -> Iterator[TextPage]:
        """The window's pages until the run stops (looked at before each request): a reader
        asks for no page once a Ctrl-C came. Stopped, it raises `_Stopped`, never ends as if
        the window were read."""
        pages = iter(self.service.pages(window))
        while self.in_flight.enter(self._stopped, _CTRL_C_SECONDS):
            try:
                page = next(pages, None)
            finally:
                self.in_flight.leave()
            if page is None:
                return
            yield page
        raise _Stopped

    def _stopped(self) -> bool:
        return self._stopping.is_set() or CTRL_C.is_set()

    def _child(self, window: Window) -> bool:
        with self._sched:
            return window.key in self._children

    def _land(self, batch: Batch) -> None:
        # a Ctrl-C's last commits end the run at once: their checkpoint is the next run's
        held = _open.checkpoints_held if self.writer.finishing else contextlib.nullcontext
        with self.db_lock, held(self.con):
            save.commit(self.con, batch, run_id=self.run_id, at=self.started, keys=self._keys)
        self.tally.add(batch)


def _created(page: Any) -> datetime | None:
    """When a probe's one record was created; None when the page holds none, or something
    that is not a record or has no readable `createdAt` (it is set aside when its window is
    read, as any other)."""
    record = page.data[0] if page.data else None
    return fetch.parse_time_or_none(record.get("createdAt")) if isinstance(record, dict) else None


def _answer(
    futures: dict[tuple[int, str | None], Future[int | None]], i: int, status: str | None
) -> int | None:
    return futures[(i, status)].result()
