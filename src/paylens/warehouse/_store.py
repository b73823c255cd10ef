"""The DuckDB file: schema creation and migration, set-based upserts with status history, and
the sync bookkeeping tables. The database is the state: nothing about a sync lives elsewhere."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import datetime
from typing import Any

import duckdb
import orjson
import pyarrow as pa

from paylens.errors import WarehouseError
from paylens.frames import arrow_schema

from .sync import catalog

#: Version of the file layout; `ensure_schema` brings older files up to it (2: resource_reads,
#: removed_at of the smaller resources; 3: currency decimals SMALLINT, not TINYINT, and a
#: card's expiry year BIGINT, not SMALLINT; 4: removed_at of transactions; 5: the journal's
#: item_id and item_kind, for transactions and wallet sessions alike, were transaction_id;
#: 6: balance_reads, every read of an internal account's balance; 7: a record read again
#: as it was is only stamped, not written again, so an older file's rows, typed by an older
#: paylens, are typed again at their next read). A change to how records are typed is a new
#: version: the rows of an older file then count as changed at their next read.
SCHEMA_VERSION = 7

#: Keys of the record tables (the catalogue's: `sync.catalog`); unique by construction (see
#: `upsert`), not by an index.
PRIMARY_KEYS = catalog.PRIMARY_KEYS

_BOOKKEEPING = [
    """CREATE TABLE IF NOT EXISTS paylens_meta (key VARCHAR PRIMARY KEY, value VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS sync_runs (
        run_id BIGINT PRIMARY KEY, started_at TIMESTAMPTZ, finished_at TIMESTAMPTZ,
        status VARCHAR, source_url VARCHAR, is_sandbox BOOLEAN, mode VARCHAR,
        new_records BIGINT, changed_records BIGINT, unchanged_records BIGINT,
        rejected_records BIGINT, requests BIGINT, duration_seconds DOUBLE, error VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS sync_slices (
        run_id BIGINT, resource VARCHAR, slice_key VARCHAR, slice_start TIMESTAMPTZ,
        slice_end TIMESTAMPTZ, status_filter VARCHAR, resume_from TIMESTAMPTZ, done BOOLEAN,
        records BIGINT, PRIMARY KEY (run_id, resource, slice_key))""",
    """CREATE TABLE IF NOT EXISTS rejected_records (
        run_id BIGINT, resource VARCHAR, record_id VARCHAR, status VARCHAR,
        created_at TIMESTAMPTZ, error VARCHAR, raw VARCHAR, rejected_at TIMESTAMPTZ)""",
    """CREATE SEQUENCE IF NOT EXISTS ops_journal_ids""",
    """CREATE TABLE IF NOT EXISTS ops_journal (
        entry_id BIGINT PRIMARY KEY, plan_fingerprint VARCHAR, action VARCHAR,
        item_kind VARCHAR, item_id VARCHAR, outcome VARCHAR, http_status INTEGER, error_code VARCHAR,
        message VARCHAR, attempts INTEGER, requested_at TIMESTAMPTZ, finished_at TIMESTAMPTZ)""",
    # the apply run that claimed the item (a run still alive in this process, or a dead one
    # whose in-doubt requests are resolved by reading the record)
    """ALTER TABLE ops_journal ADD COLUMN IF NOT EXISTS claim VARCHAR""",
    """ALTER TABLE sync_runs ADD COLUMN IF NOT EXISTS reverified_records BIGINT""",
    # when each smaller resource was last read (whole_at: whole), in the service's time
    """CREATE TABLE IF NOT EXISTS resource_reads (
        resource VARCHAR PRIMARY KEY, read_at TIMESTAMPTZ, whole_at TIMESTAMPTZ, run_id BIGINT,
        records BIGINT)""",
    # every read of an internal account's balance, kept with the service's time of the read
    # (the accounts table keeps only the latest); a re-run of the same read adds nothing
    """CREATE TABLE IF NOT EXISTS balance_reads (
        account_id VARCHAR, currency VARCHAR, decimals SMALLINT, balance_minor BIGINT,
        total_balance_minor BIGINT, read_at TIMESTAMPTZ, run_id BIGINT,
        PRIMARY KEY (account_id, currency, read_at))""",
    """CREATE TABLE IF NOT EXISTS status_history (
        id VARCHAR, type VARCHAR, previous_status VARCHAR, status VARCHAR,
        record_updated_at TIMESTAMPTZ, observed_at TIMESTAMPTZ, run_id BIGINT)""",
]

_DUCK_TYPES = {
    pa.string(): "VARCHAR",
    pa.int64(): "BIGINT",
    pa.int32(): "INTEGER",
    pa.int16(): "SMALLINT",
    pa.int8(): "TINYINT",
    pa.float64(): "DOUBLE",
    pa.bool_(): "BOOLEAN",
    pa.timestamp("us", tz="UTC"): "TIMESTAMPTZ",
    pa.list_(pa.string()): "VARCHAR[]",
}

#: Columns every record table has beside the declared ones.
_TRACKING = {
    "first_seen_at": "TIMESTAMPTZ",
    "first_run_id": "BIGINT",
    "last_changed_run_id": "BIGINT",
    "last_synced_at": "TIMESTAMPTZ",
    "sync_run_id": "BIGINT",
}


#: Tables with `removed_at`: the resources' (a record a whole read no longer lists keeps its
#: row, with `removed_at` the service's time of that read; a transaction a re-read range no
#: longer lists and the service answers 404 for by id: see `paylens.warehouse.sync`).
_REMOVABLE = catalog.NAMES


#: Tables whose rows hang off a transaction, with the column naming it.
_CHILDREN = {
    **{c.table: c.parent for c in catalog.RESOURCES["transactions"].children},
    "status_history": "id",
}


def current(table: str, *, include_removed: bool = False) -> str:
    """A FROM item (named `table`) of a table's current rows: a transaction the service no
    longer has (`removed_at` set) is left out, and the rows of the tables hanging off it with
    it; `include_removed=True` gives every row kept."""
    if include_removed or table not in (*_CHILDREN, "transactions"):
        return table
    if table == "transactions":
        return "(SELECT * FROM transactions WHERE removed_at IS NULL) AS transactions"
    return (
        f"(SELECT * FROM {table} WHERE {_CHILDREN[table]} NOT IN"
        f" (SELECT id FROM transactions WHERE removed_at IS NOT NULL)) AS {table}"
    )


def _columns(table: str) -> dict[str, str]:
    """Every column of a record table with its DuckDB type: declared, then tracking."""
    columns = {f.name: _DUCK_TYPES[f.type] for f in arrow_schema(catalog.COLUMNS[table])}
    if "raw" in columns:
        columns["raw_hash"] = "UBIGINT"
    removed = {"removed_at": "TIMESTAMPTZ"} if table in _REMOVABLE else {}
    return columns | _TRACKING | removed


#: The raw JSON is most of the bytes and is read rarely: zstd stores it in a third of the space
#: of DuckDB's default string compression and costs the end-of-sync checkpoint less time.
_COMPRESSION = {"raw": "zstd"}


def _ddl(table: str) -> str:
    columns = ", ".join(
        f"{name} {kind}"
        + (f" USING COMPRESSION {_COMPRESSION[name]}" if name in _COMPRESSION else "")
        for name, kind in _columns(table).items()
    )
    return f"CREATE TABLE IF NOT EXISTS {table} ({columns})"


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """Statements in one transaction: committed together, or rolled back on any error."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield
        con.execute("COMMIT")
    except BaseException:
        # a failed ROLLBACK (the connection already aborted the transaction, or the disk is
        # full) must not mask the error that caused it
        with suppress(duckdb.Error):
            con.execute("ROLLBACK")
        raise


def ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
    """Create what is missing and migrate an older file, in one transaction; never drops data.
    A file already at this version, with every table of the catalogue, costs one query (no
    statement per table on every open), a new database one script (nothing to migrate, so no
    table is described). A resource added to the catalogue gets its table in an older file of
    this version on its next read-write open."""
    if _layout(con) == (str(SCHEMA_VERSION), _RECORD_TABLES):
        return
    with transaction(con):
        if not con.execute("SELECT count(*) FROM duckdb_tables()").fetchall()[0][0]:
            con.execute(_new_schema())
        else:
            _ensure_schema(con)


#: The record tables this version makes, as kept in the meta (`record_tables`).
_RECORD_TABLES = ",".join(PRIMARY_KEYS)


@functools.cache
def _new_schema() -> str:
    """Every statement creating this version's layout in an empty database, as one script."""
    return ";\n".join(
        [
            *_BOOKKEEPING,
            *(_ddl(table) for table in PRIMARY_KEYS),
            f"INSERT INTO paylens_meta VALUES ('schema_version', '{SCHEMA_VERSION}'),"
            f" ('record_tables', '{_RECORD_TABLES}')",
        ]
    )


def _layout(con: duckdb.DuckDBPyConnection) -> tuple[str | None, str | None]:
    """The file's schema version and record tables, as its meta keeps them."""
    try:
        found = dict(
            con.execute(
                "SELECT key, value FROM paylens_meta"
                " WHERE key IN ('schema_version', 'record_tables')"
            ).fetchall()
        )
    except duckdb.CatalogException:
        return None, None
    return found.get("schema_version"), found.get("record_tables")


def _ensure_schema(con: duckdb.DuckDBPyConnection) -> None:
    for statement in _BOOKKEEPING:
        con.execute(statement)
    _name_journal_items(con)
    # fetchall, not fetchone: DuckDB refuses relation queries while a result is unfinished
    found = con.execute("SELECT value FROM paylens_meta WHERE key = 'schema_version'").fetchall()
    version = int(found[0][0]) if found else None
    if version is not None and version > SCHEMA_VERSION:
        raise WarehouseError(
            f"this warehouse was written by a newer paylens (schema {version}, this one knows "
            f"{SCHEMA_VERSION}); upgrade paylens to open it"
        )
    # rows typed by an older layout, or lacking a column typed from the records, are typed
    # again at their next read: none of them is read alike (`upsert`)
    older = version is not None and version < SCHEMA_VERSION
    refill = {t for t in PRIMARY_KEYS if "raw" in _columns(t)} if older else set()
    for table in PRIMARY_KEYS:
        con.execute(_ddl(table))
        if _add_missing_columns(con, table):
            refill.add(table if "raw" in _columns(table) else "transactions")
    for table in sorted(refill):
        con.execute(f"UPDATE {table} SET raw_hash = NULL")
    if version is not None and version < 6:
        # a file from before balance_reads: the one read it kept (the accounts as last read)
        con.execute(
            """INSERT INTO balance_reads
               SELECT a.id, a.balance_currency, a.balance_decimals, a.balance_minor,
                      a.total_balance_minor, r.read_at, a.sync_run_id
               FROM internal_accounts a, resource_reads r
               WHERE r.resource = 'internal_accounts' AND a.removed_at IS NULL
                 AND a.id IS NOT NULL AND a.balance_currency IS NOT NULL
               ON CONFLICT DO NOTHING"""
        )
    set_meta(con, schema_version=str(SCHEMA_VERSION), record_tables=_RECORD_TABLES)


def journal_columns(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [row[0] for row in con.execute("DESCRIBE ops_journal").fetchall()]


#: The kind of item of a journal entry written before layout 5, by its action: every action
#: acted on transactions but the revoke of wallet sessions.
OLD_JOURNAL_KIND = (
    "CASE WHEN action = 'revoke_session' THEN 'wallet_session' ELSE 'transaction' END"
)


def _name_journal_items(con: duckdb.DuckDBPyConnection) -> None:
    """Layout 5: the journal's key column `transaction_id`, which held session ids too, is
    `item_id`, beside an `item_kind`; every entry is kept, its kind told by its action."""
    if "transaction_id" not in journal_columns(con):
        return
    con.execute("ALTER TABLE ops_journal RENAME COLUMN transaction_id TO item_id")
    con.execute("ALTER TABLE ops_journal ADD COLUMN item_kind VARCHAR")
    con.execute(f"UPDATE ops_journal SET item_kind = {OLD_JOURNAL_KIND}")


#: Integer types a newer layout may widen a column to, narrowest first.
_WIDER = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT")


def _add_missing_columns(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    """A newer paylens may declare more columns (added, filled from `raw` on next sync) or a
    wider integer type (the column widened in place, its values kept). Whether a column
    typed from the records was added (the rows are to be typed again)."""
    have = {row[0]: row[1] for row in con.execute(f"DESCRIBE {table}").fetchall()}
    declared = {f.name for f in arrow_schema(catalog.COLUMNS[table])} - {"raw"}
    added = False
    for name, kind in _columns(table).items():
        if name not in have:
            con.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
            added = added or name in declared
        elif (
            have[name] in _WIDER
            and kind in _WIDER
            and _WIDER.index(kind) > _WIDER.index(have[name])
        ):
            con.execute(f"ALTER TABLE {table} ALTER COLUMN {name} SET DATA TYPE {kind}")
    return added


def meta(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    return dict(con.execute("SELECT key, value FROM paylens_meta").fetchall())


def set_meta(
    con: duckdb.DuckDBPyConnection, known: dict[str, str] | None = None, **values: str
) -> None:
    """Write the values that differ from the stored ones (`known`: the meta the caller just
    read), in one statement; nothing when none does."""
    current = meta(con) if known is None else known
    changed = [(k, v) for k, v in values.items() if current.get(k) != v]
    if changed:
        rows = ", ".join("(?, ?)" for _ in changed)
        con.execute(
            f"INSERT OR REPLACE INTO paylens_meta VALUES {rows}", [x for kv in changed for x in kv]
        )


def upsert(
    con: duckdb.DuckDBPyConnection,
    table: str,
    batch: pa.Table,
    *,
    run_id: int,
    now: datetime,
    new: bool = False,
    alike: str | None = None,
) -> list[str]:
    """Insert or replace a batch with set-based statements, tracking when each row was first
    seen (`first_run_id`) and last changed (`last_changed_run_id`: its raw JSON differs, told by
    `raw_hash`). Transactions also log each status change they bring into `status_history`,
    and the ids whose `type` changed are returned (their rows in the tables of the former
    type are the caller's to drop); other tables return [].

    The tables have no primary-key index on purpose: an index of millions of keys must stay in
    memory, which would break the sync's memory bound. Existing rows are found by a semi-join
    that reads only the key columns, so a batch costs one scan of those narrow columns (and
    nothing is deleted when none is found). The caller holds the only write lock, so
    delete-and-insert keeps keys unique. `new=True`: the caller knows none of the batch's keys
    is stored (it just deleted them, or `sync.save.StoredKeys` says so), so nothing stored is
    read: the rows are inserted as first seen now (a transaction's status as its first in the
    history).

    A stored row its record's read leaves as it was (the same raw JSON, not removed) is only
    stamped as seen (`last_synced_at`, `sync_run_id`), not deleted and inserted again: a
    re-verification or a whole read re-reads far more records than changed, and every row
    deleted stays in the file as a dead row until it is compacted. Those rows' keys are left in
    the temporary table `_alike`; `alike` names such a table of transaction ids for a table
    without raw JSON whose rows are derived from their transaction's (fees, card details)."""
    if batch.num_rows == 0:
        return []
    keys = PRIMARY_KEYS[table]
    has_raw = "raw" in batch.column_names
    on_old = " AND ".join(f"o.{k} = b.{k}" for k in keys)
    con.register("_batch", batch)
    try:
        if new and table != "transactions":  # no status history to write
            _insert_new(con, table, batch, run_id=run_id, now=now)
            return []
        kept = [*keys, "first_seen_at", "first_run_id", "last_changed_run_id"]
        kept += ["raw_hash"] if has_raw else []
        kept += ["removed_at"] if has_raw and table in _REMOVABLE else []
        kept += ["status", "type"] if table == "transactions" else []
        semi = " AND ".join(f"t.{k} = b.{k}" for k in keys)
        # the semi-join scans every stored key: at a million rows, most of a commit's work
        stored = "LIMIT 0" if new else f"SEMI JOIN _batch b ON {semi}"
        (found,) = con.execute(
            f"""CREATE OR REPLACE TEMP TABLE _old AS
                SELECT {", ".join(f"t.{c}" for c in kept)} FROM {table} t {stored}"""
        ).fetchall()[0]
        moved: list[str] = []
        if table == "transactions" and found:
            moved = [
                row[0]
                for row in con.execute(
                    f"""SELECT o.id FROM _old o JOIN _batch b ON {on_old}
                        WHERE o.type IS DISTINCT FROM b.type"""
                ).fetchall()
            ]
        if table == "transactions":
            con.execute(
                f"""INSERT INTO status_history
                    SELECT b.id, b.type, o.status, b.status, b.updated_at, ?, ?
                    FROM _batch b LEFT JOIN _old o ON {on_old}
                    WHERE o.status IS DISTINCT FROM b.status""",
                [now, run_id],
            )
        if not found:  # nothing stored to carry over or delete
            _insert_new(con, table, batch, run_id=run_id, now=now)
            return moved
        stamped = 0
        if has_raw or alike is not None:
            stamped = _stamp_alike(con, table, keys, run_id=run_id, now=now, alike=alike)
            found -= stamped
        # rows read alike are stamped in place: neither deleted nor inserted again
        fresh = (
            f"WHERE NOT EXISTS (SELECT 1 FROM _alike a WHERE {_equal('a', 'b', keys)})"
            if stamped
            else ""
        )
        if found:
            con.execute(f"DELETE FROM {table} t USING _old o WHERE {_equal('t', 'o', keys)}")
        columns = ", ".join(batch.column_names)
        if has_raw:
            tracking = """hash(b.raw),
                coalesce(o.first_seen_at, $now), coalesce(o.first_run_id, $run),
                CASE WHEN o.raw_hash = hash(b.raw) THEN o.last_changed_run_id ELSE $run END"""
            names = "raw_hash, first_seen_at, first_run_id, last_changed_run_id"
        else:
            tracking = "coalesce(o.first_seen_at, $now), coalesce(o.first_run_id, $run), $run"
            names = "first_seen_at, first_run_id, last_changed_run_id"
        con.execute(
            f"""INSERT INTO {table} ({columns}, {names}, last_synced_at, sync_run_id)
                SELECT b.*, {tracking}, $now, $run
                FROM _batch b LEFT JOIN _old o ON {on_old} {fresh}""",
            {"now": now, "run": run_id},
        )
        return moved
    finally:
        con.unregister("_batch")


def _equal(left: str, right: str, keys: tuple[str, ...]) -> str:
    return " AND ".join(f"{left}.{k} = {right}.{k}" for k in keys)


def _stamp_alike(
    con: duckdb.DuckDBPyConnection,
    table: str,
    keys: tuple[str, ...],
    *,
    run_id: int,
    now: datetime,
    alike: str | None,
) -> int:
    """Stamp the stored rows (`_old`) this read leaves as they were, take them out of `_old`
    and leave their keys in `_alike`; how many they are."""
    if alike is None:
        live = " AND o.removed_at IS NULL" if table in _REMOVABLE else ""
        same = f"JOIN _batch b ON {_equal('o', 'b', keys)} WHERE o.raw_hash = hash(b.raw){live}"
    else:  # derived from a transaction read alike
        same = f"WHERE o.id IN (SELECT id FROM {alike})"
    (count,) = con.execute(
        f"CREATE OR REPLACE TEMP TABLE _alike AS SELECT {', '.join(f'o.{k}' for k in keys)}"
        f" FROM _old o {same}"
    ).fetchall()[0]
    if count:
        con.execute(
            f"""UPDATE {table} t SET last_synced_at = $now, sync_run_id = $run
                FROM _alike a WHERE {_equal("t", "a", keys)}""",
            {"now": now, "run": run_id},
        )
        con.execute(f"DELETE FROM _old o USING _alike a WHERE {_equal('o', 'a', keys)}")
    return int(count)


def _insert_new(
    con: duckdb.DuckDBPyConnection,
    table: str,
    batch: pa.Table,
    *,
    run_id: int,
    now: datetime,
    where: str = "",
) -> None:
    """`upsert`'s insert for rows none of whose keys is stored (`_batch` registered): first
    seen and changed now, the same values its join with the stored rows gives them. `where`:
    a condition on the batch's rows (`b`) that are inserted (default: all)."""
    columns = ", ".join(batch.column_names)
    names = "first_seen_at, first_run_id, last_changed_run_id, last_synced_at, sync_run_id"
    values = "$now, $run, $run, $now, $run"
    if "raw" in batch.column_names:
        names, values = f"raw_hash, {names}", f"hash(b.raw), {values}"
    con.execute(
        f"INSERT INTO {table} ({columns}, {names}) SELECT b.*, {values} FROM _batch b"
        + (f" WHERE {where}" if where else ""),
        {"now": now, "run": run_id},
    )


def upsert_transaction_tables(
    con: duckdb.DuckDBPyConnection,
    tables: dict[str, pa.Table],
    *,
    run_id: int,
    now: datetime,
    new: bool = False,
) -> None:
    """Land `frames.transaction_tables` output: each record table upserted, payment
    instructions replaced under their transactions (in the caller's transaction). A record
    whose `type` changed leaves no row behind in the tables of its former type. `new=True`:
    the caller knows that none of the batch's ids is stored in any of these tables (see
    `upsert`): nothing stored is read or deleted."""
    # a record whose type changed: told by the rows the transactions' upsert found stored
    # (no scan of its own), then dropped from the tables of its former type
    if not new:  # the transactions read alike, for the rows derived from them
        con.execute("CREATE OR REPLACE TEMP TABLE _alike (id VARCHAR)")
    changed = upsert(con, "transactions", tables["transactions"], run_id=run_id, now=now, new=new)
    if not new:
        con.execute("CREATE OR REPLACE TEMP TABLE _alike_parents AS SELECT id FROM _alike")
    alike = None if new else "_alike_parents"
    if changed:
        for name in ("outgoing_fees", "card_transactions"):
            con.execute(f"DELETE FROM {name} WHERE id IN (SELECT unnest(?::VARCHAR[]))", [changed])
    for name in ("outgoing_fees", "card_transactions"):
        upsert(con, name, tables[name], run_id=run_id, now=now, new=new, alike=alike)
    instructions = tables["payment_instructions"]
    if new:
        upsert(con, "payment_instructions", instructions, run_id=run_id, now=now, new=True)
        return
    # (an empty list is not converted: pyarrow imports pandas to convert Python values)
    moved = pa.array(changed, pa.string()) if changed else pa.nulls(0, pa.string())
    parents = pa.concat_arrays([tables["outgoing_fees"].column("id").combine_chunks(), moved])
    replace_children(con, parents, instructions, run_id=run_id, now=now, alike=alike)


def replace_children(
    con: duckdb.DuckDBPyConnection,
    parent_ids: pa.Array,
    batch: pa.Table,
    *,
    run_id: int,
    now: datetime,
    alike: str | None = None,
) -> None:
    """Payment instructions follow their transaction: drop the old rows, insert the new ones
    (`batch`: rows of some of `parent_ids`). Those of a transaction read alike (`alike`: a
    table of their ids) are only stamped as seen, as `upsert` does."""
    kept = f"transaction_id NOT IN (SELECT id FROM {alike})" if alike else "true"
    con.register("_parents", pa.table({"id": parent_ids}))
    con.register("_batch", batch)
    try:
        con.execute(
            "DELETE FROM payment_instructions"
            f" WHERE transaction_id IN (SELECT id FROM _parents) AND {kept}"
        )
        if alike:
            con.execute(
                f"""UPDATE payment_instructions SET last_synced_at = $now, sync_run_id = $run
                    WHERE transaction_id IN (SELECT id FROM _parents) AND NOT {kept}""",
                {"now": now, "run": run_id},
            )
        # every row of the batch belongs to one of the parents: none of its keys is left but
        # those of the transactions read alike, left out
        _insert_new(con, "payment_instructions", batch, run_id=run_id, now=now, where=kept)
    finally:
        con.unregister("_parents")
        con.unregister("_batch")


#: A table is compacted once the rows deleted from it (a record's old row when it changed,
#: rows dropped with their transaction) that its storage still holds have grown, since the
#: last compaction, by this share of its rows and by this many: DuckDB's vacuum, off while
#: writing (`_open._WRITE_SETTINGS`), merges the row groups they thin out. (It merges
#: neighbouring row groups whose rows fit in fewer; dead rows it cannot reach that way stay
#: and do not make every later sync compact again.)
COMPACT_SHARE = 0.2
COMPACT_MIN_ROWS = 1000
_COMPACTED = "dead_rows_after_compaction"


def dead_rows(con: duckdb.DuckDBPyConnection) -> dict[str, tuple[int, int]]:
    """Each record table's rows and the deleted rows its storage still holds."""
    stored = dict(
        con.execute(
            """SELECT table_name, estimated_size FROM duckdb_tables()
               WHERE database_name = current_database() AND schema_name = 'main'
                 AND NOT temporary"""
        ).fetchall()
    )
    found = {}
    for table in (*PRIMARY_KEYS, "status_history"):
        if table in stored:
            (live,) = con.execute(f"SELECT count(*) FROM {table}").fetchall()[0]
            found[table] = (int(live), max(0, int(stored[table]) - int(live)))
    return found


def compact_if_due(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Checkpoint with DuckDB's vacuum on when a table's dead rows are due (`COMPACT_SHARE`):
    it merges the row groups they thin out, and those a sync's checkpoints left less than
    full, in every table. The tables that were due (none: nothing done). Call with a change
    not yet checkpointed (a checkpoint with nothing to write does nothing)."""
    known = meta(con)
    before = orjson.loads(known.get(_COMPACTED, "{}"))
    counts = dead_rows(con)
    due = [
        table
        for table, (live, dead) in counts.items()
        if dead - before.get(table, 0) >= max(COMPACT_MIN_ROWS, COMPACT_SHARE * live)
    ]
    if due:
        con.execute("RESET max_vacuum_tasks")
        try:
            con.execute("CHECKPOINT")
        finally:
            con.execute("SET max_vacuum_tasks = 0")
        left = {table: dead for table, (_, dead) in dead_rows(con).items() if dead}
        set_meta(con, known, **{_COMPACTED: orjson.dumps(left).decode()})
    return due


def next_run_id(con: duckdb.DuckDBPyConnection) -> int:
    (row,) = con.execute("SELECT coalesce(max(run_id), 0) + 1 FROM sync_runs").fetchall()
    return int(row[0])


def record_rejects(con: duckdb.DuckDBPyConnection, rows: list[tuple[Any, ...]]) -> None:
    if rows:
        # a record read twice in one run (a window read again whole) is set aside once
        con.executemany(
            """INSERT INTO rejected_records SELECT ?, ?, ?, ?, ?, ?, ?, ?
               WHERE NOT EXISTS (SELECT 1 FROM rejected_records
                                 WHERE run_id = ? AND resource = ? AND raw = ?)""",
            [(*row, row[0], row[1], row[6]) for row in dict.fromkeys(rows)],
        )


def record_balance_reads(
    con: duckdb.DuckDBPyConnection, accounts: pa.Table, *, read_at: datetime, run_id: int
) -> None:
    """Append each listed internal account's balance to `balance_reads`, stamped with the
    service's time of the read; the same read stored again (same account, currency and time)
    adds nothing. Call inside the transaction that lands the accounts."""
    con.register("_accounts_read", accounts)
    try:
        con.execute(
            """INSERT INTO balance_reads
               SELECT id, balance_currency, balance_decimals, balance_minor,
                      total_balance_minor, $at, $run
               FROM _accounts_read
               WHERE id IS NOT NULL AND balance_currency IS NOT NULL
               ON CONFLICT DO NOTHING""",
            {"at": read_at, "run": run_id},
        )
    finally:
        con.unregister("_accounts_read")
