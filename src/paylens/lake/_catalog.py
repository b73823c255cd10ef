"""The SQL catalog: opening it from a database URL, and the Arrow types Iceberg keeps.

pyiceberg is imported here only (the `lake` extra), so the warehouse layer never pays for it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from paylens.errors import InvalidArgumentError, LakeError

if TYPE_CHECKING:
    from pyiceberg.catalog.sql import SqlCatalog

#: The table every publish appends one row to once its tables are committed: which snapshot of
#: each table that publish left, and the sync run it carries. A reader takes its tables from
#: one such row, so it never sees half a publish.
PUBLISHES = "paylens_publishes"


def open_catalog(uri: str, location: str | os.PathLike[str] | None = None) -> SqlCatalog:
    """The SQL catalog kept in the database at `uri` (`postgresql://...` or `sqlite:///...`);
    new tables put their files under `location` (a directory or a URL)."""
    try:
        from pyiceberg.catalog.sql import SqlCatalog
    except ImportError:
        raise LakeError(
            "the Iceberg lake needs the `lake` extra: pip install 'paylens[lake]'"
        ) from None
    if not uri.startswith(("postgresql", "sqlite")):
        raise InvalidArgumentError(
            "catalog", f"give a postgresql://... or sqlite:///... URL, not {uri!r}"
        )
    properties = {"uri": uri, "init_catalog_tables": "true"}
    if location is not None:
        text = str(location)
        properties["warehouse"] = text if "://" in text else Path(text).resolve().as_uri()
    attempt = 0
    while True:
        attempt += 1
        try:
            return SqlCatalog("paylens", **properties)
        except Exception as exc:  # the catalog's driver errors differ (psycopg2, sqlite3)
            # two publishers creating the catalog's own tables at once: PostgreSQL refuses the
            # second CREATE TABLE IF NOT EXISTS (a unique violation on its type names) though
            # the tables are there now, so opening again finds them
            said = str(exc)
            if attempt == 1 and ("duplicate key" in said or "already exists" in said):
                continue
            raise LakeError(f"cannot open the catalog: {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def to_iceberg(table: pa.Table) -> pa.Table:
    """The warehouse's Arrow columns in types Iceberg has: small ints widened to int32 (values
    kept), the unsigned raw-JSON hash's 64 bits kept in an int64 (`from_iceberg` undoes it)."""
    fields, columns = [], []
    for field, column in zip(table.schema, table.columns, strict=True):
        kind = field.type
        if kind in (pa.int8(), pa.int16(), pa.uint8(), pa.uint16()):
            column, kind = column.cast(pa.int32()), pa.int32()
        elif kind == pa.uint64():
            column, kind = column.cast(pa.int64(), safe=False), pa.int64()
        elif pa.types.is_string_view(kind) or pa.types.is_large_string(kind):
            column, kind = column.cast(pa.string()), pa.string()
        fields.append(pa.field(field.name, kind))
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def ensure_namespace(cat: SqlCatalog, namespace: str) -> None:
    """Create `namespace` unless it is there. Publishers starting together may all find it
    missing; the catalog answers the one that loses the insert with its driver's unique
    violation, not `NamespaceAlreadyExistsError`, so any failure is judged by whether the
    namespace is there now."""
    from pyiceberg.exceptions import NamespaceAlreadyExistsError

    try:
        cat.create_namespace(namespace)
    except NamespaceAlreadyExistsError:  # an earlier publish's
        pass
    except Exception:  # the loser of a concurrent insert: the winner's namespace will do
        if not cat.namespace_exists(namespace):
            raise
