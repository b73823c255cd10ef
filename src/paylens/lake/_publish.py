"""Publish a warehouse as Iceberg tables: plan (which partitions changed), write (their Parquet
files), commit (one snapshot per table, retried on a concurrent commit), then record the
publish (one row in `paylens_publishes` naming every table's snapshot).

Changed rows are found without any state outside the tables: each partition's fingerprint
(row count, XOR and sum of DuckDB's hash of every row) is kept in the summary of the table's
snapshot that wrote it. A publish compares the warehouse's fingerprints with the current
snapshot's and rewrites only the partitions that differ, in one overwrite snapshot that drops
their old files and adds the new ones. Equal fingerprints: no snapshot at all.

Never lost nor doubled: a partition is replaced whole, never appended to, so whichever
publisher commits last leaves each record once; a commit that lost the race to another
publisher (`CommitFailedException`) re-reads the table and plans again. A publish killed before
its commit leaves orphan Parquet files no snapshot names (maintenance may expire them); the
table stays at its previous snapshot and the next publish finds the same partitions changed.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from paylens.errors import LakeError
from paylens.warehouse.sync import SMALL_RESOURCES

from ._catalog import PUBLISHES, ensure_namespace, open_catalog, to_iceberg

if TYPE_CHECKING:
    import duckdb
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.table import Table

    from paylens.warehouse import Warehouse

#: Every published table, and the column partitioning it (None: one partition): an instant by
#: its UTC month; the status history by the sync run that observed it (its rows are only ever
#: added, so a publish writes the new run's partition alone, where a month of observation
#: would hold a first sync's whole history). The money columns are the warehouse's: int64
#: minor units beside the currency and its decimals.
TABLES: dict[str, str | None] = {
    "transactions": "created_at",
    "outgoing_fees": "created_at",
    "card_transactions": "created_at",
    "payment_instructions": None,
    **dict.fromkeys(SMALL_RESOURCES),  # the catalogue's resources beside transactions
    "status_history": "run_id",
    "ops_journal": None,
    "sync_runs": None,
    # when the warehouse last read the service, in its clock: what open transfers are censored at
    "resource_reads": None,
    # every read of an internal account's balance: what the roll-forward rolls between
    "balance_reads": "read_at",
    "rejected_records": None,
    "paylens_meta": None,
}

#: Snapshot summary keys.
RUN_ID = "paylens.sync-run-id"
FINGERPRINTS = "paylens.fingerprints"
PUBLISH_ID = "paylens.publish-id"
#: Commits tried per table before giving up (each after re-reading the table).
ATTEMPTS = 20


@dataclass
class PublishReport:
    """What one publish did: the sync run it carries and, per table, the partitions it
    rewrote, rows written and bytes of Parquet written (tables left alone are absent)."""

    run_id: int | None
    publish_id: str
    tables: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def bytes_written(self) -> int:
        return sum(t["bytes"] for t in self.tables.values())

    @property
    def changed(self) -> bool:
        return bool(self.tables)


def _month_key(column: str) -> str:
    """Iceberg's month transform of a UTC instant (months since 1970-01), as text; NULL's
    partition is 'null'."""
    utc = f"timezone('UTC', {column})"
    ordinal = f"(year({utc}) - 1970) * 12 + month({utc}) - 1"
    return f"coalesce(CAST({ordinal} AS VARCHAR), 'null')"


#: Columns partitioned by their value, not their month.
_BY_VALUE = frozenset({"run_id"})


def _partition_expr(table: str) -> str:
    column = TABLES[table]
    if column is None:
        return "''"
    if column in _BY_VALUE:
        return f"coalesce(CAST(\"{column}\" AS VARCHAR), 'null')"
    return _month_key(f'"{column}"')


def _partition_of(partition: Any) -> str:
    """The key of a data file's partition record, as `_partition_expr` spells it."""
    if len(partition) == 0:
        return ""
    value = partition[0]
    return "null" if value is None else str(value)


def fingerprints(rel: duckdb.DuckDBPyRelation, table: str) -> dict[str, str]:
    """Per partition: `rows:xor:sum` of the hash of every row (all columns)."""
    found = rel.query(
        "_t",
        f"SELECT part, count(*), bit_xor(h), sum(CAST(h AS HUGEINT)) FROM"
        f" (SELECT {_partition_expr(table)} AS part, hash(_t) AS h FROM _t) GROUP BY part",
    )
    assert found is not None
    return {str(p): f"{n}:{x}:{s}" for p, n, x, s in found.fetchall()}


def _rows(rel: duckdb.DuckDBPyRelation, table: str, parts: set[str]) -> pa.Table:
    keys = ", ".join("'" + p.replace("'", "''") + "'" for p in sorted(parts))
    found = rel.query("_t", f"SELECT * FROM _t WHERE {_partition_expr(table)} IN ({keys})")
    assert found is not None
    return to_iceberg(found.to_arrow_table())


def _create(catalog: SqlCatalog, ident: tuple[str, str], schema: pa.Schema, table: str) -> Table:
    from pyiceberg.exceptions import CommitFailedException, TableAlreadyExistsError
    from pyiceberg.transforms import IdentityTransform, MonthTransform

    column = TABLES[table]
    try:
        # created with its partitioning in one commit: no reader ever sees it unpartitioned
        txn = catalog.create_table_transaction(ident, schema=schema)
        if column is not None:
            with txn.update_spec() as spec:
                if column in _BY_VALUE:
                    spec.add_field(column, IdentityTransform(), column)
                else:
                    spec.add_field(column, MonthTransform(), f"{column}_month")
        txn.commit_transaction()
    except (TableAlreadyExistsError, CommitFailedException):  # another publisher was first
        pass
    return catalog.load_table(ident)


def _load(catalog: SqlCatalog, ident: tuple[str, str], schema: pa.Schema, table: str) -> Table:
    from pyiceberg.exceptions import NoSuchTableError

    try:
        found = catalog.load_table(ident)
    except NoSuchTableError:
        return _create(catalog, ident, schema, table)
    known = {f.name for f in found.schema().fields}
    if any(f.name not in known for f in schema):
        # a newer service's column: the table evolves (old rows read it as null)
        with found.update_schema() as update:
            update.union_by_name(schema)
        found = catalog.load_table(ident)
    return found


def _published(iceberg: Table) -> dict[str, str] | None:
    snapshot = iceberg.current_snapshot()
    if snapshot is None:
        return None
    text = snapshot.summary.additional_properties.get(FINGERPRINTS) if snapshot.summary else None
    return json.loads(text) if text else {}


def _publish_table(
    catalog: SqlCatalog,
    ident: tuple[str, str],
    rel: duckdb.DuckDBPyRelation,
    table: str,
    properties: dict[str, str],
    before_commit: Callable[[str], None] | None,
) -> tuple[int | None, dict[str, int] | None]:
    """Bring one Iceberg table to the warehouse's rows: (its snapshot id, what was written, or
    None when nothing differed)."""
    from pyiceberg.exceptions import CommitFailedException, ValidationException
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    current = fingerprints(rel, table)
    schema = to_iceberg(rel.limit(0).to_arrow_table()).schema
    for _ in range(ATTEMPTS):
        iceberg = _load(catalog, ident, schema, table)
        previous = _published(iceberg)
        changed = {
            p
            for p in set(current) | set(previous or {})
            if current.get(p) != (previous or {}).get(p)
        }
        # a new column changes every row's hash, so every partition is rewritten with it
        if previous is not None and not changed:
            snapshot = iceberg.current_snapshot()
            return (snapshot.snapshot_id if snapshot else None), None
        data = _rows(rel, table, changed)
        doomed = [
            task.file
            for task in iceberg.scan().plan_files()
            if _partition_of(task.file.partition) in changed
            or _partition_of(task.file.partition) not in (previous or {})
        ]
        txn = iceberg.transaction()
        props = {**properties, FINGERPRINTS: json.dumps(current, sort_keys=True)}
        written = 0
        with txn.update_snapshot(snapshot_properties=props).overwrite() as overwrite:
            for old in doomed:
                overwrite.delete_data_file(old)
            if len(data):
                for new in _dataframe_to_data_files(iceberg.metadata, data, iceberg.io):
                    written += new.file_size_in_bytes
                    overwrite.append_data_file(new)
        if before_commit is not None:
            before_commit(table)
        try:
            committed = txn.commit_transaction()
        except (CommitFailedException, ValidationException):
            continue  # another publisher committed first: re-read and plan again
        snapshot = committed.current_snapshot()
        return (snapshot.snapshot_id if snapshot else None), {
            "partitions": len(changed),
            "rows": len(data),
            "bytes": written,
        }
    raise LakeError(f"{table}: {ATTEMPTS} commits in a row lost to other publishers; try again")


def _run_id(wh: Warehouse) -> int | None:
    found = wh.relation("sync_runs").aggregate("max(run_id)").fetchall()[0][0]
    return None if found is None else int(found)


def publish(
    wh: Warehouse,
    catalog: str,
    namespace: str,
    *,
    location: str | os.PathLike[str] | None = None,
    before_commit: Callable[[str], None] | None = None,
) -> PublishReport:
    """Publish every table of `wh` into `namespace` of the SQL catalog at `catalog` (a
    `postgresql://` or `sqlite:///` URL), data files under `location`. Only partitions whose
    rows changed since the last publish are rewritten; an unchanged warehouse commits nothing.
    `before_commit(table)` runs just before each table's commit (for tests of interleavings)."""
    cat = open_catalog(catalog, location)
    ensure_namespace(cat, namespace)
    run_id = _run_id(wh)
    report = PublishReport(run_id=run_id, publish_id=str(uuid.uuid4()))
    properties = {PUBLISH_ID: report.publish_id}
    if run_id is not None:
        properties[RUN_ID] = str(run_id)
    snapshots: dict[str, int | None] = {}
    for table in TABLES:
        rel = wh.relation(table, include_removed=True)  # as the file keeps it: removed_at too
        snapshot_id, wrote = _publish_table(
            cat, (namespace, table), rel, table, properties, before_commit
        )
        snapshots[table] = snapshot_id
        if wrote is not None:
            report.tables[table] = wrote
    if report.changed:
        _record(cat, namespace, report, snapshots)
    return report


_LOG_SCHEMA = pa.schema(
    [
        pa.field("publish_id", pa.string()),
        pa.field("run_id", pa.int64()),
        pa.field("published_at", pa.timestamp("us", tz="UTC")),
        pa.field("snapshots", pa.string()),
    ]
)


def _record(
    cat: SqlCatalog, namespace: str, report: PublishReport, snapshots: Mapping[str, int | None]
) -> None:
    """Append the publish's row to the log (retried like any commit: appends never conflict
    in content)."""
    from pyiceberg.exceptions import (
        CommitFailedException,
        NoSuchTableError,
        TableAlreadyExistsError,
    )

    row = pa.table(
        {
            "publish_id": [report.publish_id],
            "run_id": [report.run_id],
            "published_at": [datetime.now(UTC)],
            "snapshots": [json.dumps(dict(snapshots), sort_keys=True)],
        },
        schema=_LOG_SCHEMA,
    )
    ident = (namespace, PUBLISHES)
    for _ in range(ATTEMPTS):
        try:
            log = cat.load_table(ident)
        except NoSuchTableError:
            try:
                log = cat.create_table(ident, schema=_LOG_SCHEMA)
            except TableAlreadyExistsError:
                continue
        try:
            log.append(row, snapshot_properties={PUBLISH_ID: report.publish_id})
            return
        except CommitFailedException:
            continue
    raise LakeError(f"{PUBLISHES}: {ATTEMPTS} commits in a row lost to other publishers")
