"""`Lake`: the published tables read back as a read-only `Warehouse`, so every frame method
and analysis helper works on them unchanged (a notebook takes either)."""

from __future__ import annotations

import json
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from paylens.client import timestamp
from paylens.errors import LakeError
from paylens.warehouse import Warehouse

from ._catalog import PUBLISHES, open_catalog
from ._publish import TABLES

if TYPE_CHECKING:
    from pyiceberg.catalog.sql import SqlCatalog


def _window(start: date | datetime | str | None, end: date | datetime | str | None) -> str:
    """`created_at` within [start, end], as a scan filter (its months prune the files)."""

    def iso(argument: str, value: date | datetime | str, end_of_day: bool = False) -> str:
        return timestamp(argument, value, end_of_day=end_of_day).removesuffix("Z") + "+00:00"

    bounds = []
    if start is not None:
        bounds.append(f"created_at >= '{iso('start', start)}'")
    if end is not None:
        bounds.append(f"created_at <= '{iso('end', end, end_of_day=True)}'")
    return " and ".join(bounds) or "true"


#: The column a table's rows are put in order of, the first one it has.
_ORDER = ("created_at", "observed_at", "run_id", "entry_id")


def chosen_publish(cat: SqlCatalog, namespace: str, sync_run: int | None) -> dict[str, Any]:
    """The log row of the last complete publish (of sync run `sync_run` or before, when
    given): its run id and the snapshot id of every table."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    try:
        log = cat.load_table((namespace, PUBLISHES)).scan().to_arrow().to_pylist()
    except (NoSuchTableError, NoSuchNamespaceError):
        raise LakeError(f"nothing published in namespace {namespace!r} of this catalog") from None
    rows = [r for r in log if sync_run is None or (r["run_id"] or 0) <= sync_run]
    if not rows:
        raise LakeError(f"no publish of sync run {sync_run} or earlier in {namespace!r}")
    return max(rows, key=lambda r: ((r["run_id"] or 0), r["published_at"]))


class Lake(Warehouse):
    """The tables published in `namespace` of the SQL catalog at `catalog`, read into an
    in-memory DuckDB database with the warehouse's own schema: the same typed frames
    (`transactions()`, `fees()`, ...), `sql`, `relation` and analysis helpers as a local file,
    and read-only. `sync_run` reads the tables as the last publish of that sync run (or an
    earlier one) left them, every table from the same publish. `start`/`end` keep the
    transactions, fees and card transactions created in that window (inclusive; a date is a
    whole UTC day), pushed down to the scan: months outside it are never read."""

    def __init__(
        self,
        catalog: str,
        namespace: str,
        *,
        sync_run: int | None = None,
        start: date | datetime | str | None = None,
        end: date | datetime | str | None = None,
    ) -> None:
        super().__init__(":memory:")
        try:
            # the tables live in memory: DuckDB's own limit (80 % of RAM), not the 160 MB a
            # writer of a file keeps for its buffers
            self._con.execute("RESET memory_limit")
            cat = open_catalog(catalog)
            chosen = chosen_publish(cat, namespace, sync_run)
            self.sync_run: int | None = chosen["run_id"]
            snapshots: dict[str, int | None] = json.loads(chosen["snapshots"])
            for table in TABLES:
                snapshot_id = snapshots.get(table)
                if snapshot_id is None:
                    continue
                window = _window(start, end) if TABLES[table] == "created_at" else "true"
                scan = cat.load_table((namespace, table)).scan(
                    snapshot_id=snapshot_id, row_filter=window
                )
                self._fill(table, scan.to_arrow())
        except BaseException:
            self.close()
            raise
        self.catalog_uri, self.namespace = catalog, namespace
        self.read_only = True

    def _fill(self, table: str, rows: pa.Table) -> None:
        con = self._con
        have = {r[0]: r[1] for r in con.execute(f"DESCRIBE {table}").fetchall()}
        con.register("_lake_rows", rows)
        try:
            for name, kind, *_ in con.execute("DESCRIBE _lake_rows").fetchall():
                if name not in have:  # a column the tables gained after this paylens
                    con.execute(f'ALTER TABLE {table} ADD COLUMN "{name}" {kind}')
            # the raw-JSON hash's 64 bits were kept in an int64: read them back unsigned
            fix = {"raw_hash"} & set(rows.column_names)
            items = ", ".join(
                f'CAST("{n}" AS BIGINT)::BIT::UBIGINT AS "{n}"' if n in fix else f'"{n}"'
                for n in rows.column_names
            )
            # in creation order, as a sync stores them: DuckDB's zone maps then skip as well
            # over these rows as over the file's (a scan gives partitions in no set order)
            order = next((c for c in _ORDER if c in rows.column_names), None)
            by = f' ORDER BY "{order}"' if order else ""
            con.execute(f"DELETE FROM {table}")
            con.execute(f"INSERT INTO {table} BY NAME SELECT {items} FROM _lake_rows{by}")
        finally:
            con.unregister("_lake_rows")

    def __repr__(self) -> str:
        return f"Lake({self.namespace!r}, sync run {self.sync_run}, source={self.source or 'none'})"
