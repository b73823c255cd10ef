"""A selection by a SQL filter: one boolean expression over one table, checked to be a single
SELECT and evaluated on a copy of the table in a private in-memory database that can reach no
file, no network and no extension. Nothing a filter says, not even a bug in paylens, can write
to the warehouse. Shared by the bulk actions' plans (`paylens.ops`) and the webhook receiver's
approvals (`paylens.webhooks.approve_where`), so it belongs to neither."""

from __future__ import annotations

import difflib
import re
from typing import TYPE_CHECKING

import duckdb

from paylens._choices import did_you_mean
from paylens.errors import InvalidArgumentError
from paylens.models import enums

if TYPE_CHECKING:
    import pyarrow as pa

    from paylens.warehouse import Warehouse

_PRIVATE: dict[str, str | bool | int | float | list[str]] = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
}


def select_ids(wh: Warehouse, expression: str, table: str) -> list[str]:
    """Ids of `table`'s rows for which `expression` is true, oldest first."""
    query = checked_query(expression, table)
    return rows_where(wh.snapshot(table), expression, table, query=query)


def checked_query(expression: str, table: str) -> str:
    """The query selecting the ids of `table`'s rows where `expression` holds, once the
    expression is known to be one condition (no stacked statement, DDL or DML)."""
    if not expression.strip():
        raise InvalidArgumentError("select", f"an empty filter; give a condition over {table}")
    try:  # DuckDB takes UTF-8 only: a byte of a command line that is not (read as a lone
        expression.encode()  # surrogate) would fail in its binding, a TypeError
    except UnicodeEncodeError as exc:
        raise InvalidArgumentError(
            "select", f"{expression!r} is not a SQL condition: {exc.reason} at {exc.start}"
        ) from None
    refused = (
        f"{expression!r} must be one condition over {table} (e.g. \"status = 'PENDING'\"); "
        "stacked statements, DDL and DML are refused"
    )
    try:  # as pasted into a WHERE clause, the way an attacker means it
        pasted = duckdb.extract_statements(f"SELECT id FROM {table} WHERE {expression}")
    except duckdb.Error:
        pasted = []
    if len(pasted) > 1 or any(st.type != duckdb.StatementType.SELECT for st in pasted):
        raise InvalidArgumentError("select", refused)
    query = f"SELECT id FROM {table} WHERE ({expression}) ORDER BY created_at, id"
    try:
        statements = duckdb.extract_statements(query)
    except duckdb.Error as exc:
        raise InvalidArgumentError(
            "select", f"{expression!r} is not a SQL condition: {_first_line(exc)}"
        ) from None
    if len(statements) != 1 or statements[0].type != duckdb.StatementType.SELECT:
        raise InvalidArgumentError("select", refused)
    return query


def rows_where(
    snapshot: pa.Table,
    expression: str,
    table: str,
    *,
    query: str | None = None,
    misspelt: bool = True,
) -> list[str]:
    """Ids of the rows of `snapshot` (a copy of `table`'s rows) for which `expression` is true,
    evaluated in a private in-memory database; `misspelt=False` lets a quoted value that no
    row holds select nothing instead of being refused as a misspelling (a snapshot of one row,
    the webhook receiver's, holds few values)."""
    query = checked_query(expression, table) if query is None else query
    private = duckdb.connect(":memory:", config=_PRIVATE)
    try:
        private.register(table, snapshot)
        rows = private.execute(query).fetchall()
    except duckdb.BinderException as exc:  # a column that is not there: say which are
        raise InvalidArgumentError(
            "select", f"the filter {expression!r} failed: {_unknown_column(exc, snapshot)}"
        ) from None
    except duckdb.PermissionException:  # DuckDB names the file, folder or extension it is
        raise InvalidArgumentError(  # refused: a path of this machine (the home directory's)
            "select",
            f"the filter {expression!r} failed: it reaches for a file, folder or extension; "
            f"a filter reads only the columns of {table}",
        ) from None
    except duckdb.Error as exc:
        raise InvalidArgumentError(
            "select", f"the filter {expression!r} failed: {_first_line(exc)}"
        ) from None
    finally:
        private.close()
    if not rows and misspelt:
        _refuse_a_misspelt_value(expression, snapshot)
    return [str(r[0]) for r in rows]


#: Columns whose values are enum members or currency codes, which a filter names as literals.
_ENUM_COLUMNS = ("status", "type", "payment_rail", "currency", "direction", "source_type")


#: Every value an enum of the interface names.
_INTERFACE_VALUES = frozenset(
    str(member)
    for name in enums.__all__
    if isinstance(enum := getattr(enums, name), type)
    for member in enum  # type: ignore[attr-defined]
)


def _refuse_a_misspelt_value(expression: str, snapshot: pa.Table) -> None:
    """A filter that selected nothing because a quoted value is spelt unlike every value of
    the enum columns (`status = 'pending'`, `'PENDNG'`) is refused, naming the value meant."""
    held = {
        str(v)
        for name in _ENUM_COLUMNS
        if name in snapshot.column_names
        for v in snapshot.column(name).unique().to_pylist()
        if v is not None
    }
    for literal in re.findall(r"'((?:[^']|'')*)'", expression):
        word = literal.replace("''", "'")
        known = word in held or word in _INTERFACE_VALUES  # a value simply not held now
        hint = "" if known else did_you_mean(word, held)
        if hint:
            raise InvalidArgumentError(
                "select",
                f"the filter {expression!r} selects nothing: {word!r} is no value of "
                f"{', '.join(n for n in _ENUM_COLUMNS if n in snapshot.column_names)}{hint}",
            )


def _unknown_column(exc: duckdb.Error, snapshot: pa.Table) -> str:
    """A binder error, said with the table's own names: the closest to the one misspelt."""
    found = re.search(r'column "([^"]+)" not found', str(exc))
    if found is None:
        return _first_line(exc)
    word, names = found.group(1), snapshot.column_names
    close = difflib.get_close_matches(word, names, n=3) + [n for n in names if word in n]
    hint = f" (did you mean {' or '.join(dict.fromkeys(close))}?)" if close else ""
    return f"no column {word!r}{hint}; the columns: {', '.join(names)}"


#: A path in an error's words, quoted or not: absolute, home-relative or a drive's (a setting's
#: value, say `current_setting('secret_directory')` cast to a number, is echoed by DuckDB).
_PATH = re.compile(
    r"""(["'])(?:~|[A-Za-z]:)?[/\\].*?\1|(?<![\w.:/\\])(?:~|[A-Za-z]:)?[/\\][^\s"']*"""
)


def _first_line(exc: BaseException) -> str:
    """An error's first line, without any path of this machine in it."""
    line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return _PATH.sub("a path (not shown)", line)
