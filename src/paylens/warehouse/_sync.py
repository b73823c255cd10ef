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

import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import duckdb
import orjson
import pyarrow as pa
from pydantic import ValidationError

from paylens import models
from paylens.client import Client, RawPage
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
    slice_records: int = 5_000
    leaf_records: int = 2_000
    batch_pages: int = 20


@dataclass
class Window:
    """Records created in [start, end) (either open), optionally with one status."""

    start: datetime | None
    end: datetime | None
    status: str | None = None

    @property
    def key(self) -> str:
        return f"{self.start}|{self.end}|{self.status or ''}"

    def filters(self, resume_from: datetime | None = None) -> dict[str, Any]:
        start = resume_from or self.start
        return {
            "start_date": start,
            "end_date": None if self.end is None else self.end - _TICK,
            "status": self.status,
        }


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
        self.pool = ThreadPoolExecutor(
            max_workers=options.concurrency, thread_name_prefix="paylens-sync"
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
            return mode
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)

    def _full(self) -> None:
        first = self._probe(Window(self.options.since, None), sort_order="asc")
        if first.total_count == 0 or not first.data:
            return
        oldest = _parse_time(first.data[0].get("createdAt")) or self.options.since
        newest_page = self._probe(Window(self.options.since, None), sort_order="desc")
        newest = _parse_time(newest_page.data[0].get("createdAt")) if newest_page.data else None
        self._read_all(self._slices(oldest, newest, first.total_count))
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

    def _slices(
        self, start: datetime | None, newest: datetime | None, total: int | None
    ) -> list[Window]:
        """Time slices of [start, newest] sized for about `slice_records` each, plus an
        open-ended tail for what arrives after `newest`."""
        if start is None or newest is None or newest <= start:
            return [Window(start, None)]
        # enough slices to keep every worker busy to the end, none much over slice_records
        count = max(-(-(total or 0) // self.options.slice_records), min(4 * self.options.concurrency, -(-(total or 0) // 1_000)))
        count = max(1, min(4096, count))
        step = (newest - start) / count
        bounds = [start + step * i for i in range(count)] + [newest + _TICK]
        windows = [Window(a, b) for a, b in zip(bounds, bounds[1:], strict=False)]
        windows.append(Window(newest + _TICK, None))
        return windows

    # -- reconciliation --------------------------------------------------------------------

    def _reconcile_range(self, window: Window) -> None:
        """Compare per-status counts with the service, bisecting where they differ."""
        pending: list[tuple[Window, tuple[str | None, ...]]] = [(window, (None, *ALL_STATUSES))]
        while pending:
            to_read: list[tuple[Window, int]] = []
            next_level: list[tuple[Window, tuple[str | None, ...]]] = []
            futures = {
                (i, status): self.pool.submit(self._remote_count, Window(w.start, w.end, status))
                for i, (w, statuses) in enumerate(pending)
                for status in statuses
            }
            for i, (w, statuses) in enumerate(pending):
                local = self._local_counts(w)
                remote = {status: futures[(i, status)].result() for status in statuses}
                stored = sum(local.values())
                differing = [
                    s
                    for s in statuses
                    if remote[s] is None or remote[s] != (stored if s is None else local.get(s, 0))
                ]
                if not differing:
                    continue
                size = max(stored, remote.get(None) or 0)
                halves = self._halves(w) if size > self.options.leaf_records else []
                if not halves:
                    to_read.append((w, remote.get(None) or size))
                    continue
                narrowed = tuple(dict.fromkeys([None, *differing]))
                next_level += [(half, narrowed) for half in halves]
            self._read_all([s for w, n in to_read for s in self._sized(w, n)])
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
        count = -(-total // self.options.slice_records)
        step = (window.end - window.start) / count
        bounds = [window.start + step * i for i in range(count)] + [window.end]
        return [Window(a, b, window.status) for a, b in zip(bounds, bounds[1:], strict=False)]

    # -- the service -------------------------------------------------------------------------

    def _list(
        self,
        window: Window,
        *,
        limit: int | None = None,
        sort_order: str = "asc",
        resume_from: datetime | None = None,
    ) -> Iterable[RawPage]:
        return self.client.transactions.list(
            **window.filters(resume_from), sort_order=sort_order, limit=limit
        ).pages(raw=True)

    def _probe(self, window: Window, *, sort_order: str) -> RawPage:
        return next(iter(self._list(window, limit=1, sort_order=sort_order)))

    def _remote_count(self, window: Window) -> int | None:
        return self._probe(window, sort_order="asc").total_count

    # -- reading and landing ---------------------------------------------------------------

    def _read_all(self, windows: list[Window]) -> None:
        if not windows:
            return
        with self.db_lock:
            for w in windows:
                self.con.execute(
                    """INSERT OR IGNORE INTO sync_slices
                       VALUES (?, 'transactions', ?, ?, ?, ?, NULL, false, 0)""",
                    [self.run_id, w.key, w.start, w.end, w.status or ""],
                )
        futures: list[Future[None]] = [self.pool.submit(self._read, w) for w in windows]
        for future in futures:
            future.result()

    def _read(self, window: Window, resume_from: datetime | None = None) -> None:
        records: list[dict[str, Any]] = []
        rejects: list[tuple[Any, ...]] = []
        pages = 0
        for page in self._list(window, resume_from=resume_from):
            good, bad = self._validate(page)
            records += good
            rejects += bad
            pages += 1
            self.on_page(len(page.data))
            if pages >= self.options.batch_pages:
                self._land(window, records, rejects, done=False)
                records, rejects, pages = [], [], 0
        self._land(window, records, rejects, done=True)

    def _validate(self, page: RawPage) -> tuple[list[dict[str, Any]], list[tuple[Any, ...]]]:
        """Validate a whole page in one pass; only a failing page is checked record by record."""
        try:
            models.parse_page(page.content)
            return page.data, []
        except ValidationError:
            pass
        good, bad = [], []
        for record in page.data:
            try:
                models.parse_transaction(record)
                good.append(record)
            except ValidationError as exc:
                bad.append(self._reject(record, exc))
        return good, bad

    def _reject(self, record: Any, exc: ValidationError) -> tuple[Any, ...]:
        record_id = record.get("id") if isinstance(record, dict) else None
        status = record.get("status") if isinstance(record, dict) else None
        created = record.get("createdAt") if isinstance(record, dict) else None
        try:
            created_at = _parse_time(created) if isinstance(created, str) else None
        except ValueError:
            created_at = None
        errors = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5]
        )
        logger.warning("rejected transaction %s: %s", record_id, errors)
        return (
            self.run_id,
            "transactions",
            record_id,
            status if isinstance(status, str) else None,
            created_at,
            errors,
            orjson.dumps(record).decode(),
            self.started,
        )

    def _land(
        self,
        window: Window,
        records: list[dict[str, Any]],
        rejects: list[tuple[Any, ...]],
        *,
        done: bool,
    ) -> None:
        unique = list({r["id"]: r for r in records}.values())
        tables = transaction_tables(unique) if unique else None
        resume = max((r["createdAt"] for r in unique), default=None)
        with self.db_lock:
            self.con.execute("BEGIN TRANSACTION")
            try:
                if tables is not None:
                    for name in ("transactions", "outgoing_fees", "card_transactions"):
                        _store.upsert(
                            self.con, name, tables[name], run_id=self.run_id, now=self.started
                        )
                    outgoing_ids = tables["outgoing_fees"].column("id")
                    _store.replace_children(
                        self.con,
                        outgoing_ids,
                        tables["payment_instructions"],
                        run_id=self.run_id,
                        now=self.started,
                    )
                _store.record_rejects(self.con, rejects)
                self.con.execute(
                    """UPDATE sync_slices SET resume_from = coalesce(?::TIMESTAMPTZ, resume_from),
                              done = ?, records = records + ?
                       WHERE run_id = ? AND resource = 'transactions' AND slice_key = ?""",
                    [resume, done, len(unique), self.run_id, window.key],
                )
                self.con.execute("COMMIT")
            except BaseException:
                self.con.execute("ROLLBACK")
                raise
        self.tally.add(records=len(unique), rejected=len(rejects))

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
        with self.db_lock:
            rows = self.con.execute(
                f"SELECT status, count(*) FROM {self._known()} WHERE {where} GROUP BY status",
                params,
            ).fetchall()
        return {status: n for status, n in rows}

    def _local_count(self, window: Window) -> int:
        return sum(self._local_counts(window).values())

    def _local_newest(self) -> datetime | None:
        with self.db_lock:
            row = self.con.execute("SELECT epoch_us(max(created_at)) FROM transactions").fetchone()
        return _instant(row[0]) if row else None

    def _local_oldest(self, window: Window) -> datetime | None:
        return self._local_stat("min", window)

    def _local_newest_in(self, window: Window) -> datetime | None:
        newest = self._local_stat("max", window)
        return None if newest is None else newest + _TICK

    def _local_median(self, window: Window) -> datetime | None:
        return self._local_stat("median", window)

    def _local_stat(self, function: str, window: Window) -> datetime | None:
        where, params = self._where(window)
        with self.db_lock:
            row = self.con.execute(
                f"SELECT epoch_us({function}(created_at)) FROM {self._known()} WHERE {where}",
                params,
            ).fetchone()
        return _instant(row[0]) if row else None


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
) -> dict[str, int]:
    """Re-read a small resource whole (they are thousands of rows, not millions) and upsert it."""
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
    with db_lock:
        con.execute("BEGIN TRANSACTION")
        try:
            counts = _store.upsert(con, resource, batch, run_id=run_id, now=started)
            _store.record_rejects(con, rejects)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    counts["rejected"] = len(rejects)
    return counts


def utcnow() -> datetime:
    return datetime.now(UTC)


def elapsed_since(start: float) -> float:
    return time.perf_counter() - start
