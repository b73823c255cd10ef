"""The smaller resources' records typed (on the Arrow path; the models judge only what may not
fit, and say why a refused record is refused) and landed: one transaction per resource with its
rejects and read time; what the warehouse knows of their last reads."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import duckdb
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from paylens import models
from paylens.frames import to_arrow

from .. import _store
from .catalog import RESOURCES, SMALL_RESOURCES, Count, Cursor
from .freshness import LastRead
from .save import STOPPED, RejectRow, unreadable

logger = logging.getLogger("paylens.warehouse")


@dataclass
class Read:
    """Records read from some listings of a resource: JSON texts by id, and the texts of
    records without a string id."""

    records: dict[str, bytes] = field(default_factory=dict)
    rejects: list[bytes] = field(default_factory=list)
    pages: int = 0


def _model(resource: str) -> Any:
    """The typed model of a resource (loaded when a record is refused, to say why)."""
    return getattr(models, RESOURCES[resource].model)


def reject_row(resource: str, text: bytes, error: str, run_id: int, at: datetime) -> RejectRow:
    """A rejected_records row, the error told by the typed model where it refuses the record."""
    try:
        record = json.loads(text)
    except ValueError:
        record = None
    if isinstance(record, dict):
        from pydantic import TypeAdapter, ValidationError  # only to tell why a record is refused

        try:
            TypeAdapter(_model(resource)).validate_python(record)
        except ValidationError as exc:
            error = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5]
            )
    fields_ = record if isinstance(record, dict) else {}
    rid = fields_.get("id")
    logger.warning("rejected %s record %s: %s", resource, rid, error)
    return (
        run_id,
        resource,
        rid if isinstance(rid, str) else None,
        None,
        None,
        error[:2000],
        text.decode("utf-8", "replace"),
        at,
    )


def typed(resource: str, got: Read, run_id: int, at: datetime) -> tuple[pa.Table, list[RejectRow]]:
    """The records as the resource's typed table (one vectorised read when they are valid);
    those that do not fit, each alone, as rejects."""
    buffer = dict(got.records)
    rejects = [
        reject_row(resource, t, "not a record with a string id", run_id, at) for t in got.rejects
    ]

    def convert(raw: list[bytes]) -> pa.Table:
        return to_arrow(RESOURCES[resource].table, [], raw=raw)

    while True:
        try:
            table = convert(list(buffer.values()))
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            for record_id in unreadable(list(buffer.items()), convert):
                rejects.append(reject_row(resource, buffer.pop(record_id), str(exc), run_id, at))
            continue
        missing = None
        for name in RESOURCES[resource].judged:
            nulls = pc.is_null(table.column(name))
            missing = nulls if missing is None else pc.or_(missing, nulls)
        suspects = table.filter(missing).column("id").to_pylist() if missing is not None else []
        dropped = []
        if suspects:  # the typed models judge only these (pydantic loads for them alone)
            from pydantic import TypeAdapter, ValidationError

            adapter = TypeAdapter(_model(resource))
        for record_id in suspects:
            try:
                adapter.validate_json(buffer[record_id])
            except ValidationError:
                rejects.append(reject_row(resource, buffer[record_id], "", run_id, at))
                dropped.append(record_id)
        if not dropped:
            return table, rejects
        for record_id in dropped:
            del buffer[record_id]


def last_reads(con: duckdb.DuckDBPyConnection) -> dict[str, LastRead]:
    """Each small resource's last reads and quarantined records (and, read by a cursor, the
    newest stored value of its cursor's column)."""
    rows = con.execute("SELECT resource, whole_at FROM resource_reads").fetchall()
    whole = {name: at for name, at in rows}
    out = {}
    for name in SMALL_RESOURCES:
        cursor = RESOURCES[name].read
        mark = None
        if isinstance(cursor, Cursor):  # events may have moved its newest change: the kept mark
            mark = listed_mark(con, name, cursor)
        (n,) = con.execute(
            f"""SELECT count(DISTINCT r.record_id) FROM rejected_records r
                LEFT JOIN {name} t ON t.id = r.record_id
                WHERE r.resource = ? AND r.record_id IS NOT NULL
                  AND (t.id IS NULL OR r.run_id >= t.sync_run_id)""",
            [name],
        ).fetchall()
        out[name] = LastRead(_utc(whole.get(name)), _utc(mark), int(n[0]))
    return out


def _mark_key(name: str) -> str:
    """Meta key: the change mark of `name` (read by a cursor) kept from before webhook events
    moved it."""
    return f"{name}_listed_mark"


def _newest(con: duckdb.DuckDBPyConnection, name: str, cursor: Cursor) -> datetime | None:
    (row,) = con.execute(
        f"SELECT max({cursor.column}) FROM {name} WHERE removed_at IS NULL"
    ).fetchall()
    newest: datetime | None = row[0]
    return newest


def keep_listed_mark(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """Before webhook events first write `name`, keep the change mark its next read by a
    cursor starts from (the newest stored cursor column): an event moving it forward would
    hide the changes no event carries (`sync.events`). A resource not read by a cursor has
    no mark to keep."""
    cursor = RESOURCES[name].read
    known = _store.meta(con)
    if isinstance(cursor, Cursor) and _mark_key(name) not in known:
        newest = _newest(con, name, cursor)
        _store.set_meta(con, known, **{_mark_key(name): newest.isoformat() if newest else ""})


def listed_mark(con: duckdb.DuckDBPyConnection, name: str, cursor: Cursor) -> datetime | None:
    """Where the next read of `name` by what changed starts: the newest stored cursor column,
    or the mark kept from before events moved it (`keep_listed_mark`)."""
    kept = _store.meta(con).get(_mark_key(name))
    if kept is None:
        return _newest(con, name, cursor)
    return datetime.fromisoformat(kept) if kept else None


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC)


def _utc_always(value: datetime) -> datetime:
    return value.astimezone(UTC)


def stored_counts(
    con: duckdb.DuckDBPyConnection, name: str, counts: tuple[Count, ...]
) -> tuple[int, ...]:
    """The stored rows of `name` each of `counts` must equal (of those not marked removed)."""
    selected = ", ".join(f"count(*) FILTER (WHERE {c.where})" for c in counts)
    (row,) = con.execute(f"SELECT {selected} FROM {name} WHERE removed_at IS NULL").fetchall()
    return tuple(int(n) for n in row)


@dataclass(frozen=True)
class WholeRead:
    """A whole read of a resource, cut into parts (each a listing's filters) committed one by
    one: `run_id` is the run that began it, `began` the service's time then; `parts` are
    those left to read (all of them when it begins); `expected`: the records each part is
    expected to hold, by its `part_key` (known as the read begins; a resumed read has none),
    which ranks its listing among the readers' work."""

    resource: str
    run_id: int
    began: datetime
    parts: list[dict[str, Any]]
    expected: dict[str, int] = field(default_factory=dict)


def part_key(filters: dict[str, Any]) -> str:
    """A part's key in `sync_slices`: its filters as JSON (read back by `_part_filters`)."""
    return orjson.dumps(filters, option=orjson.OPT_SORT_KEYS).decode()


def _part_filters(key: str) -> dict[str, Any]:
    filters: dict[str, Any] = orjson.loads(key)
    for name in ("created_after", "created_before"):  # the creation parts' instants
        if isinstance(filters.get(name), str):
            filters[name] = datetime.fromisoformat(filters[name])
    return filters


def begin_whole(con: duckdb.DuckDBPyConnection, read: WholeRead) -> None:
    """Record the parts of a whole read as it begins (one statement), for a run that stops
    before its end to leave them to the next (`unfinished_whole`)."""
    con.execute(
        """INSERT INTO sync_slices
           SELECT $run, $resource, unnest($keys::VARCHAR[]), $began, NULL, NULL, NULL, false, 0""",
        {
            "run": read.run_id,
            "resource": read.resource,
            "keys": [part_key(f) for f in read.parts],
            "began": read.began,
        },
    )


def unfinished_whole(con: duckdb.DuckDBPyConnection, run_id: int) -> dict[str, WholeRead]:
    """Per smaller resource, the parts a whole read left unread when its run was killed or
    stopped (the latest such read): what the next whole read of it finishes rather than
    starting again. A failed run's read is not resumed (nor are its transactions')."""
    rows = con.execute(
        f"""SELECT s.resource, s.run_id, s.slice_start, list(s.slice_key ORDER BY s.slice_key)
            FROM sync_slices s JOIN sync_runs r USING (run_id)
            WHERE s.resource <> 'transactions' AND NOT s.done AND s.run_id <> $run
              AND r.status IN ('running', '{STOPPED}', 'interrupted')
            GROUP BY ALL ORDER BY s.run_id""",
        {"run": run_id},
    ).fetchall()
    return {
        name: WholeRead(name, run, _utc_always(began), [_part_filters(k) for k in keys])
        for name, run, began, keys in rows
    }


def commit(
    con: duckdb.DuckDBPyConnection,
    resource: str,
    table: pa.Table,
    rejects: list[RejectRow],
    *,
    part: tuple[WholeRead, dict[str, Any]] | None,
    run_id: int,
    at: datetime,
    service_now: datetime,
) -> None:
    """Land a resource's records, their rejects and its read time in one transaction; `part`:
    they are a part of a whole read (`begin_whole`), marked read in the same transaction."""
    with _store.transaction(con):
        _store.upsert(con, resource, table, run_id=run_id, now=at)
        _store.record_rejects(con, rejects)
        if isinstance(RESOURCES[resource].read, Cursor):  # read up to now: no mark to keep
            con.execute("DELETE FROM paylens_meta WHERE key = ?", [_mark_key(resource)])
        elif resource == "internal_accounts":
            _store.record_balance_reads(con, table, read_at=service_now, run_id=run_id)
        if part is not None:
            read, filters = part
            con.execute(
                """UPDATE sync_slices SET done = true, records = ?
                   WHERE run_id = ? AND resource = ? AND slice_key = ?""",
                [table.num_rows, read.run_id, resource, part_key(filters)],
            )
        else:
            _read_at(con, resource, run_id, service_now, None, table.num_rows)


def finish_whole(
    con: duckdb.DuckDBPyConnection, read: WholeRead, *, run_id: int, service_now: datetime
) -> int:
    """End a whole read whose every part is committed: what no part listed is marked removed
    (rejected records are not: they are listed, only unreadable), and the read's time is
    recorded. Returns the records it listed."""
    name = read.resource
    with _store.transaction(con):
        # listed by this read: every part stamped the records it listed with its run's id,
        # from the run that began the read on (no other run wrote them in between)
        con.execute(
            f"""UPDATE {name} SET removed_at = $at, last_changed_run_id = $run
                WHERE removed_at IS NULL AND sync_run_id < $began
                  AND id NOT IN (SELECT record_id FROM rejected_records
                                 WHERE resource = $name AND run_id >= $began
                                   AND record_id IS NOT NULL)""",
            {"at": service_now, "run": run_id, "began": read.run_id, "name": name},
        )
        # the parts of older reads this one replaced are never resumed
        con.execute(
            "DELETE FROM sync_slices WHERE resource = ? AND run_id < ? AND NOT done",
            [name, read.run_id],
        )
        ((listed,),) = con.execute(
            f"SELECT count(*) FROM {name} WHERE sync_run_id >= ?", [read.run_id]
        ).fetchall()
        _read_at(con, name, run_id, service_now, read.began, listed)
    return int(listed)


def _read_at(
    con: duckdb.DuckDBPyConnection,
    resource: str,
    run_id: int,
    read_at: datetime,
    whole_at: datetime | None,
    records: int,
) -> None:
    con.execute(
        """INSERT INTO resource_reads VALUES (?, ?, ?, ?, ?)
           ON CONFLICT (resource) DO UPDATE SET read_at = excluded.read_at,
               whole_at = coalesce(excluded.whole_at, resource_reads.whole_at),
               run_id = excluded.run_id, records = excluded.records""",
        [resource, read_at, whole_at, run_id, records],
    )
