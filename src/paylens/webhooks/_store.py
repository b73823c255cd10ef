"""The webhook event store: a SQLite file beside the warehouse, shared by every receiver process.

Why SQLite and not the warehouse's DuckDB file: a DuckDB file takes one writing process at a
time, and the receiver must never wait on (or take) the warehouse's writer lock that a notebook,
an apply or a scheduled sync may hold. SQLite in WAL mode lets several receiver processes append
at once (each commit takes its write lock for microseconds) while a sync reads, and a commit with
`synchronous=FULL` is on disk when it returns: an event acknowledged after `append` survives a
kill of the receiver at any instant (and a power cut). It is in the standard library.

The file is `<warehouse stem>.webhooks.sqlite` beside the warehouse (`events_path`); the sync
finds it there by itself. Tables:

- `events`: one row per webhook id (UNIQUE: a redelivery is refused, whichever process got it
  first), `seq` increasing in commit order (writes are serialised, so a reader that has applied
  every `seq <= n` never misses a later commit with a smaller `seq`), the raw body as received.
- `rejected_events`: verified bodies that are off the interface's webhook schemas, kept apart for
  inspection and never applied.
- `receiver_intervals`: each receiver process's up interval (`started_at` .. `stopped_at`, or
  `last_seen_at` for one that was killed: its heartbeat), from which the gaps are computed.
- `approval_decisions`: one decision per incoming payment (PRIMARY KEY: two processes never decide
  twice; a redelivery reads the decision made).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from paylens.errors import InvalidArgumentError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    webhook_id TEXT NOT NULL UNIQUE,
    type TEXT NOT NULL,
    sent_at TEXT NOT NULL,
    received_at TEXT NOT NULL,
    body BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS rejected_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    received_at TEXT NOT NULL,
    reason TEXT NOT NULL,
    body BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS receiver_intervals (
    receiver_id TEXT PRIMARY KEY,
    started_at TEXT NOT NULL,
    last_seen_at TEXT NOT NULL,
    stopped_at TEXT
);
CREATE TABLE IF NOT EXISTS approval_decisions (
    transaction_id TEXT PRIMARY KEY,
    webhook_id TEXT NOT NULL,
    status INTEGER NOT NULL,
    reason TEXT NOT NULL,
    decided_at TEXT NOT NULL,
    answer TEXT NOT NULL DEFAULT '{}'
);
"""
#: Columns added since a store was first written, added on open to a store without them.
_ADDED_COLUMNS = {"approval_decisions": {"answer": "TEXT NOT NULL DEFAULT '{}'"}}


def events_path(warehouse: str | Path) -> Path:
    """Where the event store of the warehouse at `warehouse` lives (beside it)."""
    path = Path(warehouse)
    return path.with_name(f"{path.stem}.webhooks.sqlite")


def now_text() -> str:
    """The current instant as stored: ISO-8601 in UTC to the microsecond (sorts as text)."""
    return stamp(datetime.now(UTC))


def stamp(instant: datetime) -> str:
    """`instant` as stored; a naive datetime is refused (time is tz-aware UTC here)."""
    if instant.tzinfo is None:
        raise InvalidArgumentError("instant", f"{instant!r} has no time zone; give a UTC time")
    return instant.astimezone(UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class Event:
    """One verified webhook, as received: its id, type, the time it says it was sent, the body."""

    webhook_id: str
    type: str
    sent_at: str
    body: bytes


@dataclass(frozen=True)
class StoredEvent:
    """An event as stored: `seq` orders the store in commit order."""

    seq: int
    webhook_id: str
    type: str
    sent_at: str
    received_at: str
    body: bytes


@dataclass(frozen=True)
class Decision:
    """The decision made on one incoming payment awaiting approval (HTTP status and why), and
    the body answered with it (JSON: an approval's `receiverCustomerInfo`), so that every
    delivery of the payment gets the same answer."""

    transaction_id: str
    webhook_id: str
    status: int
    reason: str
    decided_at: str
    answer: str = "{}"


class EventStore:
    """The store at `path` (created on first open). Safe to share between threads of a process
    (one connection, serialised) and between processes (SQLite's own locking)."""

    def __init__(self, path: str | Path, *, busy_timeout_s: float = 30.0) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._con = sqlite3.connect(
            self.path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
        )
        self._con.execute("PRAGMA journal_mode=WAL")
        self._con.execute("PRAGMA synchronous=FULL")
        with self._write():
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    self._con.execute(statement)
            for table, columns in _ADDED_COLUMNS.items():
                have = {row[1] for row in self._con.execute(f"PRAGMA table_info({table})")}
                for name, spec in columns.items():
                    if name not in have:  # a store written before the column: no answer yet
                        self._con.execute(f"ALTER TABLE {table} ADD COLUMN {name} {spec}")

    @classmethod
    def beside(cls, warehouse: str | Path) -> EventStore:
        """The event store of the warehouse at `warehouse`."""
        return cls(events_path(warehouse))

    def __repr__(self) -> str:
        return f"EventStore({str(self.path)!r})"

    def close(self) -> None:
        with self._lock:
            self._con.close()

    def __enter__(self) -> EventStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taking SQLite's write lock at once (BEGIN IMMEDIATE), so `seq`
        values are handed out in commit order; committed (and on disk) when the block ends."""
        with self._lock:
            self._con.execute("BEGIN IMMEDIATE")
            try:
                yield self._con
            except BaseException:
                self._con.execute("ROLLBACK")
                raise
            self._con.execute("COMMIT")

    def append(self, events: Sequence[Event]) -> list[bool]:
        """Store `events` in one durable commit (a group commit for a burst); for each, True when
        it is new, False when its webhook id was already stored (a redelivery: stored once).
        When this returns, every event given is on disk: only then may a receiver answer 2xx."""
        received = now_text()
        fresh: list[bool] = []
        with self._write() as con:
            for event in events:
                cursor = con.execute(
                    "INSERT INTO events (webhook_id, type, sent_at, received_at, body)"
                    " VALUES (?, ?, ?, ?, ?) ON CONFLICT (webhook_id) DO NOTHING",
                    (event.webhook_id, event.type, event.sent_at, received, event.body),
                )
                fresh.append(cursor.rowcount == 1)
        return fresh

    def reject(self, body: bytes, reason: str) -> None:
        """Keep a verified body that is off the interface's schemas apart, never applied."""
        with self._write() as con:
            con.execute(
                "INSERT INTO rejected_events (received_at, reason, body) VALUES (?, ?, ?)",
                (now_text(), reason, body),
            )

    def events_after(self, seq: int, *, limit: int = 10_000) -> list[StoredEvent]:
        """The stored events with a `seq` above `seq`, in `seq` order, at most `limit`."""
        with self._lock:
            rows = self._con.execute(
                "SELECT seq, webhook_id, type, sent_at, received_at, body FROM events"
                " WHERE seq > ? ORDER BY seq LIMIT ?",
                (seq, limit),
            ).fetchall()
        return [StoredEvent(*row) for row in rows]

    def count(self) -> int:
        with self._lock:
            return int(self._con.execute("SELECT count(*) FROM events").fetchone()[0])

    def rejected_since(self, instant: datetime | None) -> int:
        """How many bodies were kept apart at or after `instant` (all of them for None)."""
        since = "" if instant is None else stamp(instant)
        with self._lock:
            row = self._con.execute(
                "SELECT count(*) FROM rejected_events WHERE received_at >= ?", (since,)
            ).fetchone()
        return int(row[0])

    def rejected(self) -> list[tuple[int, str, str, bytes]]:
        """The kept-apart bodies: (seq, received_at, reason, body)."""
        with self._lock:
            rows = self._con.execute(
                "SELECT seq, received_at, reason, body FROM rejected_events ORDER BY seq"
            ).fetchall()
        return [(int(a), str(b), str(c), bytes(d)) for a, b, c, d in rows]

    # -- receiver up intervals -------------------------------------------------------------

    def receiver_started(self, receiver_id: str) -> None:
        now = now_text()
        with self._write() as con:
            con.execute(
                "INSERT INTO receiver_intervals (receiver_id, started_at, last_seen_at)"
                " VALUES (?, ?, ?)",
                (receiver_id, now, now),
            )

    def receiver_alive(self, receiver_id: str) -> None:
        """The heartbeat: a receiver killed without stopping was up until its last one."""
        self._seen(receiver_id, stopped=False)

    def receiver_stopped(self, receiver_id: str) -> None:
        self._seen(receiver_id, stopped=True)

    def _seen(self, receiver_id: str, *, stopped: bool) -> None:
        now = now_text()
        with self._write() as con:
            con.execute(
                "UPDATE receiver_intervals SET last_seen_at = ?,"
                " stopped_at = CASE WHEN ? THEN ? ELSE stopped_at END WHERE receiver_id = ?",
                (now, stopped, now, receiver_id),
            )

    def up_intervals(self) -> list[tuple[str, str]]:
        """When some receiver was up, merged: [(start, end)] in time order (text instants).
        A receiver still running or killed ends at its last heartbeat."""
        with self._lock:
            rows = self._con.execute(
                "SELECT started_at, coalesce(stopped_at, last_seen_at) FROM receiver_intervals"
                " ORDER BY started_at"
            ).fetchall()
        return merge_intervals((str(a), str(b)) for a, b in rows)

    def receivers(self) -> list[tuple[str, str, str, str | None]]:
        """Each receiver process's interval as recorded: (receiver_id, started_at,
        last_seen_at, stopped_at or None while it runs or after it was killed)."""
        with self._lock:
            rows = self._con.execute(
                "SELECT receiver_id, started_at, last_seen_at, stopped_at FROM receiver_intervals"
                " ORDER BY started_at"
            ).fetchall()
        return [(str(a), str(b), str(c), None if d is None else str(d)) for a, b, c, d in rows]

    # -- approval decisions ----------------------------------------------------------------

    def decide(self, decision: Decision) -> Decision:
        """Record `decision` unless one was made for its payment already; return the one that
        stands (the first, whichever process made it)."""
        with self._write() as con:
            con.execute(
                "INSERT INTO approval_decisions"
                " (transaction_id, webhook_id, status, reason, decided_at, answer)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (transaction_id) DO NOTHING",
                (
                    decision.transaction_id,
                    decision.webhook_id,
                    decision.status,
                    decision.reason,
                    decision.decided_at,
                    decision.answer,
                ),
            )
            row = con.execute(
                "SELECT transaction_id, webhook_id, status, reason, decided_at, answer"
                " FROM approval_decisions WHERE transaction_id = ?",
                (decision.transaction_id,),
            ).fetchone()
        return Decision(*row)

    def decision(self, transaction_id: str) -> Decision | None:
        with self._lock:
            row = self._con.execute(
                "SELECT transaction_id, webhook_id, status, reason, decided_at, answer"
                " FROM approval_decisions WHERE transaction_id = ?",
                (transaction_id,),
            ).fetchone()
        return None if row is None else Decision(*row)

    def decisions(self) -> list[Decision]:
        with self._lock:
            rows = self._con.execute(
                "SELECT transaction_id, webhook_id, status, reason, decided_at, answer"
                " FROM approval_decisions ORDER BY decided_at, transaction_id"
            ).fetchall()
        return [Decision(*row) for row in rows]


def merge_intervals(intervals: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Overlapping or touching [start, end] intervals (sortable text instants) merged."""
    merged: list[tuple[str, str]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged
