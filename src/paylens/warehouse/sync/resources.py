"""The smaller resources: customers, cards, internal and external accounts, the platform's
external accounts (every `Cursor` or `Whole` resource of the catalogue, `catalog`).

The interface lists customers by `updatedAfter` (a `Cursor`), the others only whole. So a sync:

- reads the customers changed since the newest `updatedAt` it stored (deleted ones included,
  so a deletion the service stamps is seen), then compares the service's counts (with and
  without deleted customers) with what is stored; when they do not explain each other, or
  the last whole read is older than `Freshness.customers`, it reads them whole;
- re-reads cards and accounts whole when their last whole read is older than their
  `Freshness` limit (ages in the service's time: its `Date` header), when `full=True`, when
  `resources=` names them, or while a record of theirs is quarantined; the report says what
  it did not re-read and how old it is.

A whole read of more than a few pages is cut into parts read at once on the sync's pool (as
its `Whole.split` says: customers by creation time, accounts by currency when the
per-currency counts add up to the total; a few pages are read as one listing, cheaper than a
count per part), typed on the Arrow
path (pydantic only for the records it refuses, which go to `rejected_records`) and committed
part by part, each in one transaction with its mark in `sync_slices` (the parts are recorded
there as the read begins): a run stopped by Ctrl-C or killed leaves the parts not committed
to the next run, which reads only those. When the last part is in, the records no part listed
are marked removed and the read's time recorded (`resource_reads`). A record a whole read no
longer lists keeps its row, with `removed_at` set: history is not lost.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import duckdb

from paylens.client import Client, Paginator, TextPage
from paylens.errors import PaylensError

from .catalog import RESOURCES, ByCreation, ByCurrency, Cursor, Whole
from .fetch import checked_count
from .freshness import Freshness, LastRead, whole_reason
from .plan import Window
from .readers import PLAN, Readers
from .resource_save import (
    Read,
    WholeRead,
    begin_whole,
    commit,
    finish_whole,
    last_reads,
    part_key,
    stored_counts,
    typed,
    unfinished_whole,
)
from .run import CTRL_C
from .save import instant

logger = logging.getLogger("paylens.warehouse")

#: Fewest records a part of a whole read is cut for (a few pages); and the instants (days back
#: from now) whose counts place the cuts of customers when nothing is stored.
_PART_RECORDS = 400
_PROBE_DAYS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)


def time_cuts(counts_before: list[tuple[datetime, int]], total: int, parts: int) -> list[datetime]:
    """Instants cutting creation time into about `parts` parts of equal counts, from counts of
    records created before known instants (interpolated linearly between them)."""
    points = sorted(counts_before)
    cuts: list[datetime] = []
    for k in range(1, parts):
        target = total * k / parts
        for (t0, n0), (t1, n1) in itertools.pairwise(points):
            if n0 <= target <= n1 and n1 > n0:
                cuts.append(t0 + (t1 - t0) * ((target - n0) / (n1 - n0)))
                break
    return sorted(set(cuts))


def slices_between(cuts: list[datetime]) -> list[dict[str, Any]]:
    """Filters covering all creation time with parts cut at `cuts`: the bounds are inclusive
    on both sides, so neighbours overlap at the cut (a record read twice is kept once) and no
    rounding of an instant by the service can open a gap."""
    bounds: list[datetime | None] = [None, *cuts, None]
    return [
        {"created_after": start, "created_before": end} for start, end in itertools.pairwise(bounds)
    ]


# -- the service ------------------------------------------------------------------------------


def listing(
    client: Client, resource: str, filters: dict[str, Any], limit: int | None = None
) -> Paginator[Any]:
    """The list of a resource with filters (and its catalogue's defaults, unless the filters
    say otherwise: customers, deleted ones included)."""
    entry = RESOURCES[resource]
    given = {**entry.defaults, **{k: v for k, v in filters.items() if v is not None}}
    return entry.listing(client)(**given, limit=limit)


def count(client: Client, resource: str, filters: dict[str, Any]) -> int | None:
    page: TextPage = next(iter(listing(client, resource, filters, limit=1).pages(raw="text")))
    return checked_count(page.total_count, Window(None, None))


class SyncStopped(Exception):
    """A resource's reads were stopped (the sync failed elsewhere, or a Ctrl-C came): what was
    read and not committed is dropped."""


def read(
    client: Client,
    resource: str,
    filters: dict[str, Any],
    stop: threading.Event | None = None,
    on_page: Callable[[int], None] = lambda records: None,
) -> Read:
    """Every page of one listing (`on_page` hears of each page's records); `SyncStopped` once
    `stop` is set or a Ctrl-C comes (looked at before each page: what is read then is
    incomplete, never handed on)."""
    out = Read()
    for page in listing(client, resource, filters).pages(raw="text"):
        if (stop is not None and stop.is_set()) or CTRL_C.is_set():
            raise SyncStopped(resource)
        checked_count(page.total_count, Window(None, None))
        on_page(len(page.records))
        out.pages += 1
        for record_id, text in zip(page.ids, page.records, strict=True):
            if record_id is None:
                out.rejects.append(text)
            else:
                out.records[record_id] = text
    return out


def _about_equal(parts: list[dict[str, Any]], total: int) -> list[tuple[dict[str, Any], int]]:
    """Parts cut to hold about equal shares of `total` records, with that share."""
    return [(filters, total // len(parts)) for filters in parts]


def _few(total: int) -> bool:
    """Whether a whole of `total` records is read as one listing: under two parts' worth, a
    count per part would cost more requests than the pages it spreads."""
    return total < 2 * _PART_RECORDS


# -- running ----------------------------------------------------------------------------------


@dataclass
class ResourceResult:
    """What a sync did with one resource: `read` is "whole", "changes" or "not re-read";
    `age` is how old its last whole read is (as of this sync's start, in the service's time)."""

    resource: str
    read: str
    reason: str
    records: int = 0
    rejected: int = 0
    age: timedelta | None = None


#: How often a whole read waiting on its parts looks whether the run is ending.
_LOOK_SECONDS = 0.1

#: Why a resource is read whole when a stopped or killed run left its whole read unfinished.
RESUMED = "the rest of an interrupted whole read"


class ResourceSync:
    """One sync of some small resources, their listings read on the sync's pool beside the
    transactions. `run` blocks until they are committed; call it from a thread of its own."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        db_lock: threading.Lock | threading.RLock,
        client: Client,
        pool: Readers,
        run_id: int,
        started: datetime,
        *,
        freshness: Freshness,
        full: bool,
        forced: frozenset[str],
        parts: int,
        ahead_records: int | None = None,
    ) -> None:
        """`parts`: how many parts a whole read is cut into at most; `ahead_records`: a whole
        read begins no further part while this many records of its resources' parts are read
        and not committed (None: no bound): what a Ctrl-C drops, and the next run reads again,
        is bounded by it and the parts being read."""
        self.con, self.db_lock, self.client, self.pool = con, db_lock, client, pool
        self.ahead_records = ahead_records
        self._pending = 0  # records of parts read (or being read) and not committed
        self._pending_lock = threading.Lock()
        self.run_id, self.started = run_id, started
        self.freshness, self.full, self.forced, self.parts = freshness, full, forced, parts
        self.stop = threading.Event()  # set when the run fails: reads end, nothing commits
        self._listed: Future[int | None] | None = None
        self._first: str | None = None  # the resource whose whole count `_listed` is

    @contextlib.contextmanager
    def _db(self) -> Iterator[None]:
        """The database's lock, waited for a tenth of a second at a time until the run ends:
        a Ctrl-C raised on the main thread as it took the lock (between the lock's acquiring
        and the `with` that releases it) leaves it held there while the run waits for these
        threads (seen: a sync hung at its Ctrl-C, both runners waiting on the lock)."""
        while not self.db_lock.acquire(timeout=_LOOK_SECONDS):
            if self._stopping():
                raise SyncStopped("the run is ending")
        try:
            yield
        finally:
            self.db_lock.release()

    def _stopping(self) -> bool:
        """Whether the run is ending (failed elsewhere, or a Ctrl-C came): nothing more commits."""
        return self.stop.is_set() or CTRL_C.is_set()

    def _submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """A count or the configuration: what decides how the listings are cut goes first."""
        return self.pool.submit_ranked(PLAN, fn, *args)

    def _read(self, name: str, filters: dict[str, Any], records: int, *more: Any) -> Future[Read]:
        """A part's listing, ranked by the records it is expected to hold (0: unknown, a part
        resumed from an earlier run): the longest listing bounds the whole read, so it starts
        first, before the transactions' windows."""
        return self.pool.submit_ranked(
            max(1, records), read, self.client, name, filters, self.stop, *more
        )

    def service_now(self) -> datetime:
        """The service's clock (its latest `Date`), the wall clock when it sends none."""
        return self.client.stats.service_time or datetime.now(UTC)

    def run(self, wanted: list[str]) -> dict[str, ResourceResult]:
        with self._db():
            last = last_reads(self.con)
            left = unfinished_whole(self.con, self.run_id)
        # a first count tells the service's clock before deciding what is due (the first
        # resource's whole count, which a cursor's check needs anyway: customers come first)
        self._first = wanted[0]
        self._listed = self._submit(count, self.client, wanted[0], {})
        if self.client.stats.service_time is None:
            self._listed.result()
        now = self.service_now()
        decisions = {
            name: whole_reason(
                name, last[name], now, self.freshness, forced=self.full or name in self.forced
            )
            for name in wanted
        }
        # a whole read a stopped or killed run left is finished (its parts committed are not
        # read again) while it is fresh enough to stand for a read begun when it began
        resumed = {
            name: read
            for name, read in left.items()
            if name in wanted and now - read.began < self.freshness.limit(name)
        }
        for name in resumed:
            decisions[name] = RESUMED
        # a cursor's resource is read every sync (by what changed); the others only when due
        results: dict[str, ResourceResult] = {}
        threads = []
        for name in wanted:
            if not isinstance(RESOURCES[name].read, Cursor) and decisions[name] is None:
                whole_at = last[name].whole_at
                age = None if whole_at is None else now - whole_at
                results[name] = ResourceResult(name, "not re-read", "fresh enough", age=age)
                continue
            thread = _Runner(
                self._resource, name, decisions[name], last[name], now, resumed.get(name)
            )
            threads.append(thread)
        for thread in threads:
            thread.start()
        for thread in threads:
            results[thread.name] = thread.outcome()
        return {name: results[name] for name in wanted}

    def _resource(
        self,
        name: str,
        reason: str | None,
        last: LastRead,
        now: datetime,
        resumed: WholeRead | None,
    ) -> ResourceResult:
        age = now - last.whole_at if last.whole_at else None
        if reason is None:  # a cursor's, by what changed since the newest stored value
            result = self._changes(name, last, now)
            if result is not None:
                result.age = age
                return result
            reason = "counts differ from what is stored"
        whole = resumed or self._begun(name, now)
        if resumed is None:
            with self._db():
                begin_whole(self.con, whole)
        rejected = self._read_whole(whole, now)
        with self._db():
            records = finish_whole(self.con, whole, run_id=self.run_id, service_now=now)
        return ResourceResult(name, "whole", reason, records, rejected, now - whole.began)

    def _read_whole(self, whole: WholeRead, now: datetime) -> int:
        """Read the parts of a whole read left to read, committing each as it is read (with its
        mark in `sync_slices`): a Ctrl-C loses only the parts being read. They are read at
        once, but a part begins only once every part begun has brought its first page (so its
        records are counted) and while fewer than `ahead_records` records are read and not
        committed: readers far ahead of the commits would leave a Ctrl-C that much to read
        again. Returns the records rejected."""
        todo = list(whole.parts)
        reading: dict[Future[Read], tuple[dict[str, Any], threading.Event]] = {}
        finished: queue.Queue[Future[Read]] = queue.Queue()  # in the order they end
        rejected = 0
        while todo or reading:
            while todo and (
                not reading
                or (self._room() and all(paged.is_set() for _, paged in reading.values()))
            ):
                filters, paged = todo.pop(0), threading.Event()
                expected = whole.expected.get(part_key(filters), 0)
                future = self._read(whole.resource, filters, expected, self._counter(paged))
                reading[future] = (filters, paged)
                future.add_done_callback(finished.put)
            try:
                future = finished.get(timeout=_LOOK_SECONDS)
            except queue.Empty:
                if self._stopping():
                    raise SyncStopped(whole.resource) from None
                continue
            filters, _ = reading.pop(future)
            got = future.result()
            try:
                rejected += self._land(whole.resource, got, now=now, part=(whole, filters))[1]
            finally:
                self._read_more(-len(got.records) - len(got.rejects))
        return rejected

    def _counter(self, paged: threading.Event) -> Callable[[int], None]:
        """What a part's reader calls with each page's records: counted as read and not
        committed, and `paged` set."""

        def on_page(records: int) -> None:
            self._read_more(records)
            paged.set()

        return on_page

    def _room(self) -> bool:
        return self.ahead_records is None or self._pending < self.ahead_records

    def _read_more(self, records: int) -> None:
        with self._pending_lock:
            self._pending += records

    def _land(
        self,
        name: str,
        got: Read,
        *,
        now: datetime,
        part: tuple[WholeRead, dict[str, Any]] | None = None,
    ) -> tuple[int, int]:
        """Type what was read and commit it with the resource's read time (`part`: the part
        of a whole read it is): (records, rejected)."""
        if self._stopping():
            raise SyncStopped(name)
        table, rejects = typed(name, got, self.run_id, self.started)
        if self._stopping():  # typing a large part takes a while: a Ctrl-C waits for no commit
            raise SyncStopped(name)
        with self._db():
            commit(
                self.con,
                name,
                table,
                rejects,
                part=part,
                run_id=self.run_id,
                at=self.started,
                service_now=now,
            )
        return table.num_rows, len(rejects)

    def _changes(self, name: str, last: LastRead, now: datetime) -> ResourceResult | None:
        """Records changed since the watermark, committed; then their counts checked against
        the service's. None when the counts do not explain each other (read them whole)."""
        cursor = RESOURCES[name].read
        assert isinstance(cursor, Cursor)
        listed = self._listed  # taken first (`run`): the first wanted resource's whole count
        assert listed is not None
        counts = [
            listed
            if check.filters == {} and name == self._first
            else self._submit(count, self.client, name, dict(check.filters))
            for check in cursor.counts
        ]
        changed = {cursor.filter: last.watermark}
        got = self._read(name, changed, 0).result()
        records, rejected = self._land(name, got, now=now)
        with self._db():
            stored = stored_counts(self.con, name, cursor.counts)
        service = tuple(f.result() for f in counts)
        if rejected or service != stored:
            logger.info(
                "%s: the service counts %s, the warehouse %s: reading them whole",
                name,
                service,
                stored,
            )
            return None
        since = last.watermark.isoformat() if last.watermark else "the start"
        return ResourceResult(
            name, "changes", f"{cursor.filter.removesuffix('_after')} since {since}", records, 0
        )

    def _begun(self, name: str, now: datetime) -> WholeRead:
        """A whole read of `name` beginning now: the listings (their filters) it is cut into,
        with the records each is expected to hold."""
        read_as = RESOURCES[name].read
        whole = read_as.whole if isinstance(read_as, Cursor) else read_as
        assert isinstance(whole, Whole)  # the transactions' windows are read by `run`
        split = whole.split
        parts: list[tuple[dict[str, Any], int]]  # filters, and the records expected (or 0)
        if isinstance(split, ByCreation):
            parts = self._creation_parts(name)
        elif isinstance(split, ByCurrency):
            parts = self._currency_parts(name, split)
        else:
            parts = [({}, 0)]
        return WholeRead(
            name,
            self.run_id,
            now,
            [filters for filters, _ in parts],
            {part_key(filters): records for filters, records in parts},
        )

    def _creation_parts(self, name: str) -> list[tuple[dict[str, Any], int]]:
        """Creation-time parts of about equal counts (a few pages each at least): cut at the
        stored quantiles, or (nothing stored) where one round of counts of the records
        created before instants going back from now places them."""
        fractions = [k / self.parts for k in range(1, self.parts)]
        with self._db():
            ((stored, quantiles),) = self.con.execute(
                f"""SELECT count(*), list_transform(quantile_disc(created_at, ?), lambda t: epoch_us(t))
                   FROM {name} WHERE created_at IS NOT NULL AND removed_at IS NULL""",
                [fractions],
            ).fetchall()
        if stored:
            parts = min(self.parts, stored // _PART_RECORDS)
            cuts = sorted({t for us in quantiles or [] if (t := instant(us)) is not None})
            step = -(-len(cuts) // parts) if parts > 1 else 0
            return _about_equal(slices_between(cuts[step - 1 :: step] if step else []), stored)
        total = count(self.client, name, {})
        if total is None or _few(total):
            return [({}, total or 0)]
        now = self.service_now()
        instants = [now - timedelta(days=d) for d in _PROBE_DAYS]
        counts = [self._submit(count, self.client, name, {"created_before": t}) for t in instants]
        known = [(t, f.result()) for t, f in zip(instants, counts, strict=True)]
        if any(n is None for _, n in known):
            return [({}, total)]
        points = [(t, int(n or 0)) for t, n in known] + [(now + timedelta(days=1), total)]
        parts = min(self.parts, total // _PART_RECORDS)
        return _about_equal(slices_between(time_cuts(points, total, parts)), total)

    def _currency_parts(self, name: str, split: ByCurrency) -> list[tuple[dict[str, Any], int]]:
        """Parts by currency when the per-currency counts add up to the whole's (candidates:
        the stored currencies and the platform's); else, and when the whole is a few pages
        (a count per currency would cost more requests than the pages), the whole listing."""
        column = split.column
        with self._db():
            rows = self.con.execute(
                f"SELECT DISTINCT {column} FROM {name} WHERE {column} IS NOT NULL"
            ).fetchall()
        candidates = {r[0] for r in rows}
        config = None if candidates else self._submit(self.client.config.get)
        total = self._submit(count, self.client, name, {})
        if _few(total.result() or 0):  # unknown, or a few pages
            return [({}, total.result() or 0)]
        if config is not None:
            try:
                candidates |= {c.currency_code for c in config.result().supported_currencies or []}
            except PaylensError:  # no configuration to read: the stored currencies only
                logger.info("%s: no currencies from the platform's configuration", name)
        by_currency = [{split.filter: c} for c in sorted(candidates)]
        parts = self._refined(name, by_currency, total.result())
        if parts is None:
            return [({}, total.result() or 0)]
        if split.then is not None:  # a large currency is cut again (accounts: by type)
            key, values = split.then
            large = max(_PART_RECORDS * 4, sum(n for _, n in parts) // self.parts)
            for i, (filters, n) in enumerate(parts):
                if n > large:
                    again = [{**filters, key: v} for v in values]
                    parts[i : i + 1] = self._refined(name, again, n) or [(filters, n)]
        # the longest listings first: they bound how long the whole read takes
        return sorted(parts, key=lambda part: -part[1])

    def _refined(
        self, name: str, candidates: list[dict[str, Any]], total: int | None
    ) -> list[tuple[dict[str, Any], int]] | None:
        """The candidates' non-empty parts with their counts, when those add up to `total`
        (so the parts hold every record); else None."""
        futures = [self._submit(count, self.client, name, filters) for filters in candidates]
        found = [f.result() for f in futures]
        if total is None or any(n is None for n in found) or sum(n or 0 for n in found) != total:
            return None
        return [(filters, n) for filters, n in zip(candidates, found, strict=True) if n]


class _Runner(threading.Thread):
    """One resource's sync on a thread of its own (it waits on the pool, so never on it)."""

    def __init__(self, fn: Callable[..., ResourceResult], name: str, *args: Any) -> None:
        super().__init__(name=name, daemon=True)
        self._fn, self._args = fn, (name, *args)
        self._result: ResourceResult | None = None
        self._error: BaseException | None = None

    def run(self) -> None:
        try:
            self._result = self._fn(*self._args)
        except BaseException as exc:  # handed to the caller
            self._error = exc

    def outcome(self) -> ResourceResult:
        self.join()
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result
