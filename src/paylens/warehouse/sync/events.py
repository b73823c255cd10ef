"""Folding the stored webhook events into the warehouse, at the start of each sync.

The receiver (`paylens.webhooks`) stores every verified event in the event store beside the
warehouse (`events_path`); it never takes the warehouse's writer lock. Each sync, holding that
lock, applies the events stored after its watermark (the last applied `seq`, in the
warehouse's meta), a chunk at a time, each chunk in ONE transaction with the watermark: a sync
killed mid-fold re-applies nothing twice and loses nothing.

- Which events: `OUTGOING_PAYMENT.*`, `INCOMING_PAYMENT.*` (refunds included) and
  `CARD_TRANSACTION.*` into transactions (and their card, fee and instruction rows);
  `CUSTOMER.*` into customers; `CARD.*` into cards; `INTERNAL_ACCOUNT.*` into internal accounts.
  Every payload is a whole record of the interface, typed by the very conversion the sync
  uses for listed records (`save.typed`, `resource_save.typed`) and upserted by the same
  functions. A record the warehouse has not listed yet is inserted (the payload is the whole
  record: inserting it is as exact as listing it). Other kinds are counted as skipped.
- Order: an event's `timestamp` says when it was SENT (a retry is later), so it orders nothing.
  Events are ordered by the record's own `updatedAt` (the service stamps every change): per
  record, events are applied in `updatedAt` order (store order among equals), and one whose
  `updatedAt` is older than the stored row's is not applied (nor one equal to it holding the
  same record): out-of-order delivery never overwrites a newer state. An event whose record
  has no readable `updatedAt` (external accounts have none) cannot be ordered: it is not
  applied, and the report says so (the listing keeps such records current, as without events).
- Each transition an applied transaction event brings gets its own `status_history` row:
  `record_updated_at` is the payload's `updatedAt` (when the service made the change) and
  `observed_at` is when the receiver stored the event.
- The fold runs before the sync reads the service: the listing then finds those states
  already stored (no coarser history row of its own), and overwrites them only with what the
  service serves now. The events of a table no sync has read yet are left to its first read
  (a full read of transactions starts only on an empty table), which covers them: the
  watermark moves past them without applying them.
- Customers are read by what changed since the newest stored `updatedAt`; an event moving that
  mark forward would hide changes no event carries, so the fold keeps the mark from before it
  (`resource_save.keep_listed_mark`) until the next read of customers (`resource_save`).

Coverage (`Coverage`): the receivers' up intervals (`EventStore.up_intervals`) are compared with
the span since the previous sync started: what they do not cover is a gap, reported. While
the store shows no gap since the previous sync, and none within the last `verify_syncs` syncs,
the rolling re-verification runs at `SyncOptions.verify_syncs_with_events` (slower); otherwise
at `verify_syncs`. While, besides, nothing was kept apart in that span and every transaction
event was applied, the events brought every transition (`FoldResult.exact`): the sync then
skips the older range's open-status listings and one-by-one re-reads.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import simdjson

from paylens import webhooks
from paylens.webhooks import EventStore, StoredEvent, stamp

from .. import _store
from .._staged import target_of
from .fetch import parse_time_or_none
from .resource_save import Read, keep_listed_mark
from .resource_save import typed as typed_resource
from .save import RejectRow
from .save import typed as typed_transactions

logger = logging.getLogger("paylens.warehouse")

#: The table each kept event kind (the part of its type before the dot) goes to.
EVENT_TABLES = {
    "OUTGOING_PAYMENT": "transactions",
    "INCOMING_PAYMENT": "transactions",
    "CARD_TRANSACTION": "transactions",
    "CUSTOMER": "customers",
    "CARD": "cards",
    "INTERNAL_ACCOUNT": "internal_accounts",
    "EXTERNAL_ACCOUNT": "external_accounts",
}
#: Fields of a webhook's `data` that belong to the webhook, not to the record it carries
#: (`IncomingPaymentWebhookData`): left out of the stored record, as no listing serves them.
WEBHOOK_ONLY_FIELDS = ("requestedReceiverCustomerInfoFields",)
#: Meta keys: the last applied `seq`; the customers' change mark from before the fold; syncs
#: left at the fast re-verification after a gap.
WATERMARK = "events_seq"
FAST_SYNCS_LEFT = "events_fast_syncs_left"
#: "1" while some span since the last listing of the open statuses was not carried whole by
#: events (a gap, a body kept apart, a transaction event not applied), seen by a fold: the
#: next transactions sync lists them, whatever its own span's coverage (`listings_done`).
LISTING_OWED = "events_listing_owed"
#: Events applied per transaction (each with the watermark).
CHUNK_EVENTS = 5_000

NO_TIME = "no readable updatedAt in the record: its order against other reads is unknown"


#: A receiver not stopped and heard from within this of the fold is taken as up until the
#: fold (the receiver's heartbeat comes every 5 s); one silent longer was killed at its last
#: heartbeat. A receiver killed less than this before a sync counts as up until it: what the
#: service sent in that moment is retried to the next receiver, or left to the listing.
RECEIVER_SILENCE = timedelta(seconds=30)


@dataclass(frozen=True)
class Coverage:
    """The span since the previous sync started (`since` .. `until`, when the fold looked) and
    the parts of it no receiver was up for (`gaps`). Covered: a previous sync and no gap."""

    since: datetime | None
    until: datetime
    gaps: tuple[tuple[datetime, datetime], ...] = ()

    @property
    def covered(self) -> bool:
        return self.since is not None and not self.gaps


def coverage_of(
    receivers: list[tuple[str, str, str, str | None]], since: datetime | None, now: datetime
) -> Coverage:
    """The gaps of `receivers` (rows of `EventStore.receivers`: id, started, last seen,
    stopped) within [since, now]. A receiver stopped was up until it stopped; one killed,
    until its last heartbeat; one still beating (heard from within `RECEIVER_SILENCE`), until
    now."""
    if since is None:
        return Coverage(None, now)
    spans = []
    for _, started, seen, stopped in receivers:
        up_to = stopped or seen
        if stopped is None and now - datetime.fromisoformat(seen) <= RECEIVER_SILENCE:
            up_to = stamp(now)
        spans.append((started, up_to))
    gaps: list[tuple[datetime, datetime]] = []
    cursor = since
    for first, last in webhooks.merge_intervals(spans):
        start, end = datetime.fromisoformat(first), datetime.fromisoformat(last)
        if end <= cursor:
            continue
        if start > cursor:
            gaps.append((cursor, min(start, now)))
        cursor = max(cursor, end)
        if cursor >= now:
            break
    if cursor < now:
        gaps.append((cursor, now))
    return Coverage(since, now, tuple(g for g in gaps if g[0] < g[1]))


@dataclass
class NotApplied:
    """The oldest stored event a fold could not apply, and why."""

    seq: int
    webhook_id: str
    type: str
    sent_at: str
    reason: str


@dataclass
class FoldResult:
    """What a fold did: events `applied` (written), `stale` (the warehouse held that state or a
    newer one), `skipped` by kind (kinds the warehouse does not keep, or before the first
    sync), `not_applied` (with the oldest of them), the coverage of the span since the previous
    sync, and the re-verification rate chosen from it. `exact`: the events carry every
    transition of a transaction since the previous sync (see `carried`), so the sync
    need not list the older range's open statuses to find them."""

    store: Path | None = None
    applied: int = 0
    stale: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    not_applied: int = 0
    oldest_not_applied: NotApplied | None = None
    coverage: Coverage | None = None
    verify_syncs: int | None = None
    watermark: int = 0
    exact: bool = False
    not_applied_tables: set[str] = field(default_factory=set)

    def _not_applied(self, event: StoredEvent, reason: str) -> None:
        self.not_applied += 1
        self.not_applied_tables.add(EVENT_TABLES.get(event.type.split(".", 1)[0], ""))
        if self.oldest_not_applied is None or event.seq < self.oldest_not_applied.seq:
            self.oldest_not_applied = NotApplied(
                event.seq, event.webhook_id, event.type, event.sent_at, reason
            )

    def _skip(self, kind: str, n: int = 1) -> None:
        self.skipped[kind] = self.skipped.get(kind, 0) + n


@dataclass
class _Pending:
    """One event to apply: its record's id, `updatedAt` (epoch µs) and JSON text."""

    event: StoredEvent
    table: str
    record_id: str
    updated_us: int
    text: bytes


def fold_before_sync(
    con: duckdb.DuckDBPyConnection,
    lock: threading.Lock | threading.RLock | Any,
    path: Path,
    *,
    run_id: int,
    at: datetime,
    options: Any,
    chunk: int | None = None,
    reads_transactions: bool = True,
) -> tuple[Any, FoldResult]:
    """Apply the events stored beside the warehouse at `path` (none when it has no event store)
    and choose the re-verification rate; returns `options` with `verify_syncs` set to it, and
    what the fold did. A sync that does not read transactions (`reads_transactions`) runs no
    re-verification: it does not count towards the round at `verify_syncs` after a gap."""
    chunk = chunk or CHUNK_EVENTS
    result = FoldResult()
    store_path = webhooks.events_path(target_of(path))  # a staged copy's store is its target's
    if str(path) == ":memory:" or not store_path.is_file():
        return options, result
    result.store = store_path
    with EventStore(store_path) as store:
        with lock:
            previous = _previous_start(con, run_id)
            meta = _store.meta(con)
        result.coverage = coverage_of(
            store.receivers(), previous, datetime.fromisoformat(webhooks.now_text())
        )
        fast_left = int(meta.get(FAST_SYNCS_LEFT) or 0)
        if result.coverage.covered and fast_left == 0:
            result.verify_syncs = options.verify_syncs_with_events
        else:
            result.verify_syncs = options.verify_syncs
            if previous is not None and not result.coverage.covered:
                # a gap: the round at `verify_syncs` goes on for that many syncs from this one
                fast_left = options.verify_syncs
        # (the first sync reads everything: no gap before it matters)
        if reads_transactions:
            fast_left = max(0, fast_left - 1)
        result.watermark = int(meta.get(WATERMARK) or 0)
        owed = meta.get(LISTING_OWED) == "1" or not carried(
            result.coverage, store.rejected_since(previous)
        )
        with lock:
            read = _tables_read(con)
        while True:
            events = store.events_after(result.watermark, limit=chunk)
            last = events[-1].seq if events else result.watermark
            with lock, _store.transaction(con):
                _apply(con, events, result, run_id=run_id, at=at, since=options.since, read=read)
                result.watermark = last
                # with the watermark: a chunk's transaction event not applied is never lost
                owed = owed or "transactions" in result.not_applied_tables
                _store.set_meta(
                    con,
                    None,
                    **{
                        WATERMARK: str(last),
                        FAST_SYNCS_LEFT: str(fast_left),
                        LISTING_OWED: "1" if owed else "0",
                    },
                )
            if len(events) < chunk:
                break
        result.exact = not owed
    logger.info(
        "events: %d applied, %d stale, %d skipped, %d not applied",
        result.applied,
        result.stale,
        sum(result.skipped.values()),
        result.not_applied,
    )
    return replace(options, verify_syncs=result.verify_syncs), result


def carried(coverage: Coverage, kept_apart: int) -> bool:
    """Whether events can have brought every transition of a transaction since the previous
    sync started: receivers up for all of that span (no gap) and no body kept apart in it
    (one could be a transition never applied). The interface sends an event for each status
    and refund-status change of a transfer (`OUTGOING_PAYMENT.*`, `INCOMING_PAYMENT.*`) and for
    every card transaction transition (`CARD_TRANSACTION.*`): what the listings of the open
    statuses exist to find. Besides, every transaction event must be applied, and no earlier
    span be owed a listing (`LISTING_OWED`): `FoldResult.exact`."""
    return coverage.covered and kept_apart == 0


def listings_done(con: duckdb.DuckDBPyConnection, lock: threading.Lock | Any) -> None:
    """A transactions sync listed the open statuses (or read everything): no span is owed."""
    with lock:
        _store.set_meta(con, None, **{LISTING_OWED: "0"})


def _previous_start(con: duckdb.DuckDBPyConnection, run_id: int) -> datetime | None:
    """When the last sync that succeeded before this one started (None: none did)."""
    (row,) = con.execute(
        "SELECT max(started_at) FROM sync_runs WHERE status = 'succeeded' AND run_id <> ?",
        [run_id],
    ).fetchall()
    started: datetime | None = row[0]
    return started


def _tables_read(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The tables some sync has read from the service (a window of transactions read to its
    end, a read of a smaller resource): the events of another are left to its first read,
    which covers them (a full read of transactions starts only on an empty table)."""
    rows = con.execute(
        """SELECT DISTINCT resource FROM sync_slices WHERE done
           UNION SELECT resource FROM resource_reads"""
    ).fetchall()
    return {str(row[0]) for row in rows}


def _apply(
    con: duckdb.DuckDBPyConnection,
    events: list[StoredEvent],
    result: FoldResult,
    *,
    run_id: int,
    at: datetime,
    since: datetime | None,
    read: set[str],
) -> None:
    """Apply one chunk of events (in the caller's transaction)."""
    by_table: dict[str, list[_Pending]] = {}
    for event in events:
        pending = _read(event, result, since)
        if pending is not None and pending.table not in read:
            result._skip(f"before the first read of {pending.table} (it covers them)")
            continue
        if pending is not None:
            by_table.setdefault(pending.table, []).append(pending)
    for table, pendings in by_table.items():
        layers = _layers(con, table, pendings, result)
        for layer in layers:
            _upsert_layer(con, table, layer, result, run_id=run_id, at=at)


def _read(event: StoredEvent, result: FoldResult, since: datetime | None) -> _Pending | None:
    """The record an event carries, or None (counted as skipped or not applied)."""
    kind = event.type.split(".", 1)[0]
    table = EVENT_TABLES.get(kind)
    if table is None:
        result._skip(event.type)
        return None
    try:
        body = simdjson.Parser().parse(bytes(event.body))
        data = body.get("data") if isinstance(body, simdjson.Object) else None
        if not isinstance(data, simdjson.Object) or not isinstance(data.get("id"), str):
            result._not_applied(event, "the body carries no record with a string id")
            return None
        record_id = str(data["id"])
        updated = parse_time_or_none(data.get("updatedAt"))
        created = parse_time_or_none(data.get("createdAt"))
        text = record_text(data)
    except (ValueError, RuntimeError) as exc:
        result._not_applied(event, f"the body is not JSON the fold can read: {exc}")
        return None
    if updated is None:
        result._not_applied(event, NO_TIME)
        return None
    if table == "transactions" and since is not None and created is not None and created < since:
        result._skip(f"created before the sync's since ({since.isoformat()})")
        return None
    return _Pending(event, table, record_id, _epoch_us(updated), text)


def record_text(data: Any) -> bytes:
    """A webhook's record as a listing's page spells it (simdjson's compact text, which the
    sync stores as `raw`), without the fields that belong to the webhook only."""
    if any(name in data for name in WEBHOOK_ONLY_FIELDS):
        record = json.loads(data.mini)
        for name in WEBHOOK_ONLY_FIELDS:
            record.pop(name, None)
        spelled = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        data = simdjson.Parser().parse(spelled.encode())
    text = data.mini
    return text.encode() if isinstance(text, str) else bytes(text)


def _epoch_us(instant: datetime) -> int:
    delta = instant - datetime(1970, 1, 1, tzinfo=instant.tzinfo)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _layers(
    con: duckdb.DuckDBPyConnection, table: str, pendings: list[_Pending], result: FoldResult
) -> list[list[_Pending]]:
    """The events to write, per record in `updatedAt` order (store order among equals), those
    not newer than what is held dropped (stale); layer k holds each record's k-th."""
    ids = list({p.record_id for p in pendings})
    held = {
        record_id: (updated_us, raw)
        for record_id, updated_us, raw in con.execute(
            f"""SELECT id, epoch_us(updated_at), raw FROM {table}
                WHERE id IN (SELECT unnest($ids::VARCHAR[]))""",
            {"ids": ids},
        ).fetchall()
    }
    per_record: dict[str, list[_Pending]] = {}
    for pending in sorted(pendings, key=lambda p: (p.updated_us, p.event.seq)):
        per_record.setdefault(pending.record_id, []).append(pending)
    layers: list[list[_Pending]] = []
    for record_id, ordered in per_record.items():
        updated_us, raw = held.get(record_id, (None, None))
        depth = 0
        for pending in ordered:
            newer = updated_us is None or pending.updated_us > updated_us
            same_time_other = pending.updated_us == updated_us and pending.text != _bytes(raw)
            if not (newer or same_time_other):
                result.stale += 1
                continue
            if depth == len(layers):
                layers.append([])
            layers[depth].append(pending)
            depth += 1
            updated_us, raw = pending.updated_us, pending.text
    return layers


def _bytes(raw: Any) -> bytes | None:
    return raw.encode() if isinstance(raw, str) else raw


def _upsert_layer(
    con: duckdb.DuckDBPyConnection,
    table: str,
    layer: list[_Pending],
    result: FoldResult,
    *,
    run_id: int,
    at: datetime,
) -> None:
    """One state per record, typed and upserted as a listing's batch is."""
    buffer = {p.record_id: p.text for p in layer}
    rejects: list[RejectRow]
    if table == "transactions":
        tables, rejects = typed_transactions(buffer, [], run_id, at)
        if tables is not None:
            _store.upsert_transaction_tables(con, tables, run_id=run_id, now=at)
        written = set(tables["transactions"].column("id").to_pylist()) if tables else set()
    else:
        typed_table, rejects = typed_resource(table, Read(records=buffer), run_id, at)
        keep_listed_mark(con, table)
        _store.upsert(con, table, typed_table, run_id=run_id, now=at)
        written = set(typed_table.column("id").to_pylist())
    _store.record_rejects(con, rejects)
    why = {row[2]: f"the record does not fit the interface: {row[5]}" for row in rejects}
    for pending in layer:
        if pending.record_id in written:
            result.applied += 1
        else:
            result._not_applied(pending.event, why.get(pending.record_id, "refused"))
    if table == "transactions" and written:
        _observed_when_stored(con, [p for p in layer if p.record_id in written], run_id, at)


def _observed_when_stored(
    con: duckdb.DuckDBPyConnection, applied: list[_Pending], run_id: int, at: datetime
) -> None:
    """The history rows these events' upsert just wrote (this run's, observed at the sync's
    start, at the payload's `updatedAt`) observed when the receiver stored each event."""
    con.execute(
        """UPDATE status_history h SET observed_at = e.received_at
           FROM (SELECT unnest($ids::VARCHAR[]) AS id,
                        make_timestamptz(unnest($updated::BIGINT[])) AS updated_at,
                        unnest($received::VARCHAR[])::TIMESTAMPTZ AS received_at) e
           WHERE h.run_id = $run AND h.observed_at = $at AND h.id = e.id
             AND h.record_updated_at = e.updated_at""",
        {
            "ids": [p.record_id for p in applied],
            "updated": [p.updated_us for p in applied],
            "received": [p.event.received_at for p in applied],
            "run": run_id,
            "at": at,
        },
    )


__all__ = [
    "EVENT_TABLES",
    "FoldResult",
    "NotApplied",
    "fold_before_sync",
    "record_text",
]
