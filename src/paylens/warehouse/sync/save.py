"""Writing to the warehouse: landings typed into batches, each batch committed in one transaction
together with its windows' checkpoints, and the questions the plan asks of what is stored.

Every function here takes the DuckDB connection (and, where a sync runs readers beside it, the
lock that guards it); none starts a thread or reads from the service."""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from paylens import models
from paylens.frames import parse_records, transaction_tables

from .. import _store
from .fetch import Landing, parse_time_or_none
from .plan import (
    OPEN_CARD_STATUSES,
    OPEN_STATUSES,
    TERMINAL_REFUND_STATUSES,
    Verification,
    Window,
)

if TYPE_CHECKING:  # pydantic loads only to tell why a record is refused
    from pydantic import ValidationError

logger = logging.getLogger("paylens.warehouse")

_TIMESTAMP = pa.timestamp("us", tz="UTC")
#: Columns every transaction must have (required by all three kinds in the interface).
REQUIRED_COLUMNS = ("id", "type", "status", "direction", "customer_id", "platform_customer_id")
RejectRow = tuple[Any, ...]


def instant(epoch_us: int | None) -> datetime | None:
    """A UTC datetime from DuckDB's epoch microseconds (no pytz needed)."""
    if epoch_us is None:
        return None
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=int(epoch_us))


# -- typing a batch -------------------------------------------------------------------------


@dataclass
class Batch:
    """Landings merged and typed, ready to commit."""

    landings: list[Landing]
    tables: dict[str, pa.Table] | None
    rejects: list[RejectRow]
    records: int


def reject_row(text: bytes, error: ValidationError | str, run_id: int, at: datetime) -> RejectRow:
    """A rejected_records row for a record's JSON text; the error comes from the typed models
    where they refuse it. The text is kept as it came (Python's JSON reads integers of any
    size, where a native reader would round or refuse them)."""
    from pydantic import ValidationError

    try:
        record = json.loads(text)
    except ValueError:
        record = None
    if isinstance(error, str) and isinstance(record, dict):
        try:
            models.parse_transaction(record)
        except ValidationError as exc:
            error = exc
        except (ValueError, TypeError):
            pass
    if isinstance(error, ValidationError):
        error = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors()[:5]
        )
    fields = record if isinstance(record, dict) else {}
    status = fields.get("status")
    logger.warning("rejected transaction %s: %s", fields.get("id"), error)
    return (
        run_id,
        "transactions",
        fields.get("id") if isinstance(fields.get("id"), str) else None,
        status if isinstance(status, str) else None,
        parse_time_or_none(fields.get("createdAt")),
        error,
        text.decode("utf-8", "replace"),
        at,
    )


def _missing_required(table: pa.Table) -> list[str]:
    """Ids of rows lacking a required field."""
    missing = None
    for name in REQUIRED_COLUMNS:
        nulls = pc.is_null(table.column(name))
        missing = nulls if missing is None else pc.or_(missing, nulls)
    if missing is None or not pc.any(missing).as_py():
        return []
    ids: list[str] = table.filter(missing).column("id").to_pylist()
    return ids


#: What Arrow's JSON reader names of the value it refused: its text, or its row in the read.
_REFUSED_TEXT = re.compile(r"couldn't parse:(.+)$")
_REFUSED_ROW = re.compile(r" in row (\d+)$")


def unreadable(items: list[tuple[str, bytes]], read: Callable[[list[bytes]], Any]) -> list[str]:
    """Ids of the records `read` refuses (a wrong type, an integer out of range), in their
    order: a few reads, not one per record. Arrow's error names the value it refused (its
    text, or its row), so the records it points at are tried alone first; whatever else is
    refused is found by bisection. Only what is refused alone is ever returned."""
    found: set[str] = set()
    rest = items
    while rest:
        try:
            read([raw for _, raw in rest])
            break
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            pointed = _bisect(_pointed_at(rest, str(exc)), read, refused=False)
            if not pointed:
                found.update(_bisect(rest, read, refused=True))
                break
        found.update(pointed)
        rest = [item for item in rest if item[0] not in found]
    return [record_id for record_id, _ in items if record_id in found]


def _pointed_at(items: list[tuple[str, bytes]], error: str) -> list[tuple[str, bytes]]:
    """The records an Arrow error points at (a hint, to be checked: a row counts within one
    block of the read, a text may appear in other records too)."""
    if (text := _REFUSED_TEXT.search(error)) and (needle := text.group(1).strip().encode()):
        return [item for item in items if needle in item[1]]
    if (row := _REFUSED_ROW.search(error)) and int(row.group(1)) < len(items):
        return [items[int(row.group(1))]]
    return []


def _bisect(
    items: list[tuple[str, bytes]], read: Callable[[list[bytes]], Any], *, refused: bool
) -> list[str]:
    """Ids of the records `read` refuses alone, by bisection (`refused`: the read of all of
    `items` is known to fail)."""
    if not items:
        return []
    if not refused:
        try:
            read([raw for _, raw in items])
            return []
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            pass
    if len(items) == 1:
        return [items[0][0]]
    middle = len(items) // 2
    return _bisect(items[:middle], read, refused=False) + _bisect(
        items[middle:], read, refused=False
    )


def _parse(raw: list[bytes]) -> Any:
    return parse_records("transactions", raw)


def _typed(raw: list[bytes]) -> Any:
    return transaction_tables(raw=raw)


#: Fields the interface types as a JSON `number` of format int64: `30.0` is 30 there.
_WHOLE_NUMBERS = (("rateDetails", "gridApiVariableFeeAmount"),)


def _respelt(text: bytes) -> bytes | None:
    """The record with its whole-number fields (`_WHOLE_NUMBERS`) spelt as integers, when one
    held a whole float (what the typed read refuses); else None. A fraction stays, and the
    record is refused as it is."""
    try:
        record = json.loads(text)
    except ValueError:
        return None
    changed = False
    for path in _WHOLE_NUMBERS:
        holder = record
        for key in path[:-1]:
            holder = holder.get(key) if isinstance(holder, dict) else None
        value = holder.get(path[-1]) if isinstance(holder, dict) else None
        whole = models.whole_number(value)
        if isinstance(holder, dict) and isinstance(whole, int) and not isinstance(value, int):
            holder[path[-1]] = whole
            changed = True
    return json.dumps(record, ensure_ascii=False).encode() if changed else None


def _refusal_alone(text: bytes, batch_error: Exception) -> str:
    """What Arrow says of this record read alone (the batch's error may name another's)."""
    for read in (_parse, _typed):
        try:
            read([text])
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            return str(exc)
    return str(batch_error)


def typed_batch(landings: list[Landing], run_id: int, at: datetime) -> Batch:
    """Landings merged (a record read twice keeps its latest read) and typed (`typed`)."""
    buffer: dict[str, bytes] = {}
    no_id: list[bytes] = []
    for landing in landings:
        buffer.update(landing.buffer)
        no_id += landing.rejects
    records = len(buffer)
    tables, rejects = typed(buffer, no_id, run_id, at)
    return Batch(landings, tables, rejects, records)


def typed(
    buffer: dict[str, bytes], no_id: list[bytes], run_id: int, at: datetime
) -> tuple[dict[str, pa.Table] | None, list[RejectRow]]:
    """Records' JSON texts by id, typed; the records that do not fit the declared schema (and
    those `no_id`, without a string id) go to rejects, each alone: a bad record never holds
    back the others. Valid records cost one vectorised read. `buffer` keeps what was typed."""
    rejects = [reject_row(t, "not a record with a string id", run_id, at) for t in no_id]
    tables = None
    spelt: dict[str, bytes] = {}  # records read as respelt (`_respelt`), kept raw as they came
    while buffer:
        try:
            texts = list(buffer.values())
            reads = [spelt.get(k, t) for k, t in buffer.items()] if spelt else None
            tables = transaction_tables(raw=texts, spelt=reads)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            # the JSON read refuses most bad records, and costs less than the whole typing
            items = [(k, spelt.get(k, t)) for k, t in buffer.items()]
            for record_id in unreadable(items, _parse) or unreadable(items, _typed):
                if record_id not in spelt and (again := _respelt(buffer[record_id])):
                    spelt[record_id] = again
                    continue
                text = buffer.pop(record_id)
                refused = spelt.pop(record_id, text)
                rejects.append(reject_row(text, _refusal_alone(refused, exc), run_id, at))
            continue
        dropped = set()
        for record_id in _missing_required(tables["transactions"]):
            from pydantic import ValidationError

            try:
                models.parse_transaction(json.loads(buffer[record_id]))
            except ValidationError as exc:
                rejects.append(reject_row(buffer[record_id], exc, run_id, at))
                dropped.add(record_id)
        if not dropped:
            break
        tables = None
        for record_id in dropped:
            del buffer[record_id]
    return tables, rejects


def merged(parts: list[Batch]) -> Batch:
    """Batches typed apart from landings of distinct records, as one (committed in one
    transaction): what `typed_batch` would make of all their landings at once."""
    if len(parts) == 1:
        return parts[0]
    typed = [part.tables for part in parts if part.tables is not None]
    return Batch(
        [landing for part in parts for landing in part.landings],
        {name: pa.concat_tables([t[name] for t in typed]) for name in typed[0]} if typed else None,
        [row for part in parts for row in part.rejects],
        sum(part.records for part in parts),
    )


# -- committing -----------------------------------------------------------------------------


class StoredKeys:
    """The hashes (DuckDB's 64-bit `hash`) of every transaction id the record tables hold, in
    a temporary table of the run's connection: a commit tells from one scan of those integers
    that none of its records is stored, and then inserts them without the upsert's join with
    the stored rows (a scan of every stored id of three tables, each commit: at a million
    records most of a commit's work, and what made a full sync's CPU per record grow with its
    size). Read from the tables at the run's first commit, then added to by each commit of the
    run; nothing else writes those tables while a run commits. Never missing a stored id is
    what matters: a hash more (a commit rolled back, a collision) costs only the join."""

    _TABLE = "_paylens_stored_keys"

    def __init__(self) -> None:
        self._read = False

    def none_stored(self, con: duckdb.DuckDBPyConnection, ids: pa.ChunkedArray) -> bool:
        """Whether none of `ids` is stored; they count as stored from now on (call inside the
        transaction that stores them)."""
        if not self._read:
            # every table keyed by a transaction's id: a child row whose parent row is gone
            # is never inserted as new beside it
            con.execute(
                f"""CREATE OR REPLACE TEMP TABLE {self._TABLE} AS
                    SELECT hash(id) AS h FROM transactions
                    UNION ALL SELECT hash(id) FROM outgoing_fees
                    UNION ALL SELECT hash(id) FROM card_transactions
                    UNION ALL SELECT hash(transaction_id) FROM payment_instructions"""
            )
            self._read = True
        con.register("_commit_ids", pa.table({"id": ids}))
        try:
            (stored,) = con.execute(
                f"""SELECT count(*) FROM {self._TABLE}
                    WHERE h IN (SELECT hash(id) FROM _commit_ids)"""
            ).fetchall()[0]
            con.execute(f"INSERT INTO {self._TABLE} SELECT hash(id) FROM _commit_ids")
        finally:
            con.unregister("_commit_ids")
        return int(stored) == 0

    def forget(self) -> None:
        """Read the tables again at the next commit (a commit failed: its transaction may
        have taken the temporary table with it)."""
        self._read = False


def commit(
    con: duckdb.DuckDBPyConnection,
    batch: Batch,
    *,
    run_id: int,
    at: datetime,
    keys: StoredKeys | None = None,
) -> None:
    """Commit a batch (landings of one or several windows) in one transaction: the windows it
    opens, its rows, its rejects and each window's checkpoint, so a window's progress never runs
    ahead of its rows. `keys`: the run's stored keys, to skip the lookup of stored rows when
    none of the batch's records is stored."""
    try:
        with _store.transaction(con):
            if opened := [landing.window for landing in batch.landings if landing.opens]:
                register(con, opened, run_id)
            if batch.tables is not None:
                ids = batch.tables["transactions"].column("id")
                new = keys is not None and keys.none_stored(con, ids)
                _store.upsert_transaction_tables(con, batch.tables, run_id=run_id, now=at, new=new)
            _store.record_rejects(con, batch.rejects)
            _checkpoint(con, batch.landings, run_id)
    except BaseException:
        if keys is not None:
            keys.forget()
        raise


def _checkpoint(con: duckdb.DuckDBPyConnection, landings: list[Landing], run_id: int) -> None:
    # each window's landings summed up here: a batch holds tens of them, and Arrow's group_by
    # would load its query engine (~40 ms) into every sync's process
    by_key: dict[str, tuple[datetime | None, bool, int]] = {}
    for landing in landings:
        resume, done, records = by_key.get(landing.window.key, (None, False, 0))
        if landing.resume is not None and (resume is None or landing.resume > resume):
            resume = landing.resume
        by_key[landing.window.key] = (resume, done or landing.done, records + landing.records)
    con.execute(
        """UPDATE sync_slices s
           SET resume_from = coalesce(p.resume_max, s.resume_from),
               done = s.done OR p.done_any, records = s.records + p.records_sum
           FROM (SELECT unnest($keys::VARCHAR[]) AS slice_key,
                        unnest($resumes::TIMESTAMPTZ[]) AS resume_max,
                        unnest($done::BOOLEAN[]) AS done_any,
                        unnest($records::BIGINT[]) AS records_sum) p
           WHERE s.run_id = $run AND s.resource = 'transactions' AND s.slice_key = p.slice_key""",
        {
            "keys": list(by_key),
            "resumes": [v[0] for v in by_key.values()],
            "done": [v[1] for v in by_key.values()],
            "records": [v[2] for v in by_key.values()],
            "run": run_id,
        },
    )


def register(con: duckdb.DuckDBPyConnection, windows: list[Window], run_id: int) -> None:
    """Record the windows to read (one statement: a statement or commit each would cost a
    round of the interpreter and a disk sync per window). A window this run registered before
    keeps its row (and its progress); the anti-join costs less than INSERT OR IGNORE."""
    unique = list({w.key: w for w in windows}.values())
    con.execute(
        """INSERT INTO sync_slices
           SELECT $run, 'transactions', slice_key, slice_start, slice_end, status_filter,
                  NULL, false, 0
           FROM (SELECT unnest($keys::VARCHAR[]) AS slice_key,
                        unnest($starts::TIMESTAMPTZ[]) AS slice_start,
                        unnest($ends::TIMESTAMPTZ[]) AS slice_end,
                        unnest($statuses::VARCHAR[]) AS status_filter)
           WHERE slice_key NOT IN (SELECT slice_key FROM sync_slices
                                   WHERE run_id = $run AND resource = 'transactions')""",
        {
            "keys": [w.key for w in unique],
            "starts": [w.start for w in unique],
            "ends": [w.end for w in unique],
            "statuses": [w.status or "" for w in unique],
            "run": run_id,
        },
    )


#: The status of a run Ctrl-C stopped: its windows are resumed by the next run, as a killed
#: run's (left "running"), and it is then marked interrupted as that one is.
STOPPED = "stopped"


def unfinished(con: duckdb.DuckDBPyConnection, run_id: int) -> tuple[list[Window], bool]:
    """Windows of interrupted runs (killed, or stopped by Ctrl-C), to finish first (from their
    checkpoints), and whether one of those runs was reading everything (`mark_full`): the
    windows then hold the rest of a full read. Those runs are marked interrupted."""
    unfinished_runs = f"""SELECT run_id FROM sync_runs
                          WHERE status IN ('running', '{STOPPED}') AND run_id <> $run"""
    rows = con.execute(
        f"""SELECT epoch_us(slice_start), epoch_us(slice_end), status_filter,
                   epoch_us(resume_from)
            FROM sync_slices
            WHERE resource = 'transactions' AND NOT done AND run_id IN ({unfinished_runs})""",
        {"run": run_id},
    ).fetchall()
    full = con.execute(
        f"""SELECT count(*) FROM paylens_meta
            WHERE key = '{_FULL_READ_META}' AND value::BIGINT IN ({unfinished_runs})""",
        {"run": run_id},
    ).fetchall()[0][0]
    con.execute(
        f"UPDATE sync_runs SET status = 'interrupted' WHERE run_id IN ({unfinished_runs})",
        {"run": run_id},
    )
    windows = [
        Window(instant(resume if resume is not None else start), instant(end), status or None)
        for start, end, status, resume in rows
    ]
    return windows, bool(full)


#: The run whose windows, registered, are a full read of everything (`mark_full` sets it).
_FULL_READ_META = "full_read_run"


def mark_full(con: duckdb.DuckDBPyConnection, run_id: int) -> None:
    """Say that a run's registered windows are the whole of a full read (said once they are
    registered): a run that stops after this is resumed as the rest of a full read
    (`unfinished`), not started again."""
    _store.set_meta(con, full_read_run=str(run_id))


def unlisted(con: duckdb.DuckDBPyConnection, run_id: int) -> list[str]:
    """Ids of the current records of ranges this run listed whole (its windows without a
    status filter, every one read to its end: a split's later part is a window of its own)
    that no listing of this run brought back, nor set aside as unreadable: the service may no
    longer have them. The ranges are merged first, so each record is matched with the one
    range that may hold it (an ASOF join: a sync lists hundreds of small windows, and a range
    join of millions of records with them would be a nested loop)."""
    ranges = _disjoint(
        con.execute(
            """SELECT coalesce(epoch_us(slice_start), $lo), coalesce(epoch_us(slice_end), $hi)
               FROM sync_slices WHERE run_id = $run AND resource = 'transactions' AND done
                 AND status_filter = ''""",
            {"run": run_id, "lo": -_NO_BOUND, "hi": _NO_BOUND},
        ).fetchall()
    )
    if not ranges:
        return []
    return [
        row[0]
        for row in con.execute(
            """SELECT t.id FROM (SELECT id, created_at, epoch_us(created_at) AS us
                                 FROM transactions
                                 WHERE removed_at IS NULL AND sync_run_id <> $run) t
               ASOF JOIN (SELECT unnest($starts::BIGINT[]) AS lo,
                                 unnest($ends::BIGINT[]) AS hi) r ON t.us >= r.lo
               WHERE t.us < r.hi
                 AND t.id NOT IN (SELECT record_id FROM rejected_records
                                  WHERE run_id = $run AND record_id IS NOT NULL)
               ORDER BY t.created_at, t.id""",
            {"run": run_id, "starts": [a for a, _ in ranges], "ends": [b for _, b in ranges]},
        ).fetchall()
    ]


#: Beyond any instant, in epoch microseconds: an open end of a window.
_NO_BOUND = 2**62


def _disjoint(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """[start, end) ranges merged where they overlap or touch, in order."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        elif start < end:
            merged.append((start, end))
    return merged


def mark_removed(
    con: duckdb.DuckDBPyConnection, ids: list[str], *, run_id: int, at: datetime
) -> None:
    """Records the service answered 404 for keep their rows, with `removed_at` set: readers
    leave them (and the rows hanging off them) out; read again later, they are current."""
    if ids:
        con.execute(
            """UPDATE transactions SET removed_at = $at, last_changed_run_id = $run
               WHERE removed_at IS NULL AND id IN (SELECT unnest($ids::VARCHAR[]))""",
            {"at": at, "run": run_id, "ids": ids},
        )


# -- what is stored -------------------------------------------------------------------------

#: Stored current records (a removed one is not counted: a record the service stops listing
#: makes the counts differ, and the reads they lead to find it) plus the latest rejection of
#: records never stored: a quarantined record is
#: re-read by itself every sync (`watched`) until the service serves it fixed, so the counts
#: of the reconciliation take it as known rather than bisect towards it every sync. (NOT
#: EXISTS, not NOT IN: DuckDB answers NOT IN with a hash table of every stored id, built for
#: each question, 0.1 s of CPU at a million records, where this probes the few rejected.)
_KNOWN = """(SELECT created_at, status FROM transactions WHERE removed_at IS NULL
             UNION ALL
             SELECT created_at, status FROM (
               SELECT DISTINCT ON (record_id) record_id, created_at, status FROM rejected_records r
               WHERE resource = 'transactions' AND record_id IS NOT NULL
                 AND NOT EXISTS (SELECT 1 FROM transactions t WHERE t.id = r.record_id)
               ORDER BY record_id, rejected_at DESC))"""

#: The stored transactions the service still has.
_CURRENT = "(SELECT * FROM transactions WHERE removed_at IS NULL)"

_VERIFY_META = ("verify_cursor", "verify_stored")
_DIGITS_META = "created_at_digits"  # `save_time_digits` writes it


def _where(window: Window) -> tuple[str, list[Any]]:
    """The records of a window (current ones where the table is `transactions`)."""
    clauses, params = ["TRUE"], []
    if window.start is not None:
        clauses.append("created_at >= ?")
        params.append(window.start)
    if window.end is not None:
        clauses.append("created_at < ?")
        params.append(window.end)
    return " AND ".join(clauses), params


class StoredTransactions:
    """Answers about the stored transactions (the plan's `Stored`), each once everything
    handed to the writer is committed (`flush`)."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        lock: threading.Lock | threading.RLock | None = None,
        flush: Callable[[], None] = lambda: None,
    ) -> None:
        self.con = con
        self.lock = lock or threading.Lock()
        self.flush = flush

    @contextmanager
    def _locked(self) -> Iterator[duckdb.DuckDBPyConnection]:
        self.flush()
        with self.lock:
            yield self.con

    def _rows(self, query: str, params: list[Any]) -> list[tuple[Any, ...]]:
        with self._locked() as con:
            return con.execute(query, params).fetchall()

    def counts(self, window: Window) -> dict[str | None, int]:
        where, params = _where(window)
        rows = self._rows(f"SELECT status, count(*) FROM {_KNOWN} WHERE {where} GROUP BY 1", params)
        return {status: n for status, n in rows}

    def stored(self, window: Window) -> int:
        """Records stored (quarantined ones are not)."""
        where, params = _where(window)
        return int(self._rows(f"SELECT count(*) FROM {_CURRENT} WHERE {where}", params)[0][0])

    def _stat(self, function: str, window: Window) -> datetime | None:
        where, params = _where(window)
        rows = self._rows(
            f"SELECT epoch_us({function}(created_at)) FROM {_KNOWN} WHERE {where}", params
        )
        return instant(rows[0][0]) if rows else None

    def newest(self) -> datetime | None:
        return instant(self._rows(f"SELECT epoch_us(max(created_at)) FROM {_CURRENT}", [])[0][0])

    def oldest(self, window: Window) -> datetime | None:
        return self._stat("min", window)

    def newest_in(self, window: Window) -> datetime | None:
        newest = self._stat("max", window)
        return None if newest is None else newest + timedelta(microseconds=1)

    def median(self, window: Window) -> datetime | None:
        return self._stat("median", window)

    def nth(self, window: Window, n: int) -> datetime | None:
        where, params = _where(window)
        rows = self._rows(
            f"""SELECT epoch_us(created_at) FROM {_CURRENT} WHERE {where}
                ORDER BY created_at LIMIT 1 OFFSET ?""",
            [*params, n],
        )
        return instant(rows[0][0]) if rows else None

    def watched(
        self, older: Window, run_id: int, holds_since: datetime | None, *, transitions: bool = True
    ) -> list[datetime]:
        """Creation times (sorted, distinct) of the records no listing of this run can show
        have changed, so they are re-read by themselves (the first three only when
        `transitions`: the events did not bring every transition):

        - transfers of the older range stored in an open status that this run's listings of
          those statuses did not bring back: they left it (a transfer that completed may be
          balanced, in the per-status counts, by another that failed);
        - open card holds created from `holds_since` on (no filter lists card statuses; older
          holds are left to the re-verification);
        - FAILED transfers whose refund is still under way: the refund progresses while the
          status stays FAILED;
        - quarantined records not stored since (never stored, or stored before they were
          served broken): the service may serve them fixed."""
        where, params = _where(older)
        statuses = ", ".join(f"'{s}'" for s in OPEN_STATUSES)
        holds = ", ".join(f"'{s}'" for s in OPEN_CARD_STATUSES)
        refunds = ", ".join(f"'{s}'" for s in TERMINAL_REFUND_STATUSES)
        rows = self._rows(
            f"""SELECT DISTINCT epoch_us(created_at) AS instant_us FROM {_CURRENT}
                WHERE ? AND {where} AND sync_run_id <> ?
                  AND (status IN ({statuses})
                       OR (status IN ({holds}) AND created_at >= ?)
                       OR (status = 'FAILED' AND refund_status IS NOT NULL
                           AND refund_status NOT IN ({refunds})))
                UNION
                SELECT DISTINCT epoch_us(r.created_at) FROM rejected_records r
                LEFT JOIN transactions t ON t.id = r.record_id
                WHERE r.resource = 'transactions' AND r.record_id IS NOT NULL
                  AND r.created_at IS NOT NULL
                  AND (t.id IS NULL OR r.run_id >= t.sync_run_id)
                ORDER BY instant_us""",
            [transitions, *params, run_id, holds_since],
        )
        return [t for (us,) in rows if (t := instant(us)) is not None]

    def unlisted(self, run_id: int) -> list[str]:
        with self._locked() as con:
            return unlisted(con, run_id)

    def mark_removed(self, ids: list[str], *, run_id: int, at: datetime) -> None:
        with self._locked() as con, _store.transaction(con):
            mark_removed(con, ids, run_id=run_id, at=at)

    def verification(self) -> Verification:
        with self._locked() as con:
            meta = _store.meta(con)
        cursor, stored = (meta.get(name) for name in _VERIFY_META)
        return Verification(
            datetime.fromisoformat(cursor) if cursor else None, int(stored) if stored else 0
        )

    def time_digits(self) -> int:
        """The most fraction digits the service was seen to write a `createdAt` with (0: none
        recorded)."""
        with self._locked() as con:
            digits = _store.meta(con).get(_DIGITS_META)
        return int(digits) if digits else 0

    def save_time_digits(self, digits: int) -> None:
        with self._locked() as con:
            _store.set_meta(con, created_at_digits=str(digits))

    def save_verification(self, state: Verification) -> None:
        with self._locked() as con:
            _store.set_meta(
                con,
                verify_cursor=state.cursor.isoformat() if state.cursor else "",
                verify_stored=str(state.stored),
            )
