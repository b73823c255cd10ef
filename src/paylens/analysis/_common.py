"""What every helper shares: where its rows come from (a `Warehouse`, a DataFrame or a DuckDB
relation), the grouping keys it accepts, and how one SQL statement is rendered and run.

A helper writes its SQL against two names: `_in`, the input rows with every declared column
present, and `_history`, the status history (when the helper uses it). A column the input lacks
comes from the warehouse's `transactions` table by id when the input lives in a warehouse (so
rows of `outgoing_fees` get their refund and funding source), else it is NULL of its declared
type. The input is scanned where it lives: a warehouse table through `wh.relation` (the
warehouse's public door), a relation through `relation.query`, a DataFrame registered in a fresh
in-memory connection. Literals are written into the SQL (a relation's `query` takes no
parameters): only numbers, quoted strings and timestamps the helpers format themselves.
Arguments are checked before any SQL runs: a wrong one raises `InvalidArgumentError` naming
what is accepted.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypeAlias

import duckdb
import pandas as pd
import pyarrow as pa

from paylens._choices import did_you_mean, one_of, some_of, utc_instant
from paylens.errors import InvalidArgumentError
from paylens.frames import TABLES, arrow_schema, to_pandas
from paylens.warehouse import Warehouse

#: How a missing key (a rail, a reason, a category) is written wherever one is shown: plot
#: labels and the report. Frames keep it missing (`<NA>`).
MISSING_LABEL = "–"
#: Columns named `_rate` that are FX rates (sending units per receiving unit); every other
#: `_rate` or `_share` column is a fraction, shown as a percentage.
FX_RATES = frozenset({"exchange_rate", "reference_rate", "multiplier_rate", "mid_rate"})


def is_fraction(column: str) -> bool:
    """Whether a result column holds a fraction (0.0123 = 1.23 %), by its name's unit."""
    return column.endswith(("_rate", "_share")) and column not in FX_RATES


#: What every helper reads.
Data: TypeAlias = Warehouse | pd.DataFrame | duckdb.DuckDBPyRelation
#: A grouping: one column name, several, or None for one row per transaction.
By: TypeAlias = str | Sequence[str] | None
#: Status history rows (the warehouse's `status_history` table), when not the warehouse's own.
History: TypeAlias = pd.DataFrame | duckdb.DuckDBPyRelation | None


def _declared_types() -> dict[str, str]:
    """The SQL type DuckDB gives each declared column of the transaction tables."""
    types: dict[str, str] = {}
    con = duckdb.connect()
    try:
        for table in ("transactions", "outgoing_fees", "card_transactions"):
            empty = arrow_schema(table).empty_table()
            rel = con.from_arrow(empty)
            types.update({n: str(t) for n, t in zip(rel.columns, rel.types, strict=True)})
    finally:
        con.close()
    return types


#: The declared SQL type of every column of the transaction tables, by name.
DECLARED: dict[str, str] = _declared_types()
#: Columns of `transactions` an input of another table may borrow by id.
_BORROWABLE = frozenset(c.name for c in TABLES["transactions"]) - {"id", "raw"}

#: Friendly grouping names shared by the helpers, and the per-row column each one means.
ALIASES = {"customer": "customer_id", "payment_rail": "rail"}


def sql_string(value: str) -> str:
    """A SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def sql_double(value: float) -> str:
    """A DOUBLE literal that reads back as exactly `value` (repr round-trips)."""
    if not math.isfinite(value):
        raise InvalidArgumentError("value", f"not a finite number: {value!r}")
    return f"CAST({sql_string(repr(float(value)))} AS DOUBLE)"


def sql_strings(values: Iterable[str]) -> str:
    """A parenthesised list of string literals, for `IN (...)`."""
    return "(" + ", ".join(sql_string(str(v)) for v in values) + ")"


def utc_timestamp(value: datetime | str) -> pd.Timestamp:
    """An instant as a UTC timestamp; a naive one is read as UTC."""
    stamp = pd.Timestamp(value)
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")


def sql_timestamp(value: datetime | str) -> str:
    return f"CAST({sql_string(utc_timestamp(value).isoformat())} AS TIMESTAMPTZ)"


def month_of(column: str) -> str:
    """The UTC calendar month of a timestamp, as the DATE of its first day (the session's
    time zone plays no part)."""
    return f"CAST(date_trunc('month', timezone('UTC', {column})) AS DATE)"


def corridor_of(sending: str, receiving: str) -> str:
    """`'USD→EUR'`: the sending and receiving currency of a transaction. The arrow is
    `chr(8594)`, so the query's text stays ASCII: DuckDB's Python layer maps the tokens of a
    text that is not, character by character (seconds, for a query holding a long literal)."""
    return f"coalesce({sending}, '?') || chr(8594) || coalesce({receiving}, '?')"


def seconds_between(start: str, end: str) -> str:
    """Seconds from `start` to `end` (DOUBLE, microsecond precision; negative when earlier)."""
    return f"(epoch_us({end}) - epoch_us({start})) / 1e6"


def half_up(expression: str) -> str:
    """round_half_up(y) = floor(y + 0.5) in float64, as BIGINT minor units."""
    return f"CAST(floor({expression} + 0.5) AS BIGINT)"


def statuses(
    value: str | Sequence[str] | None, accepted: Iterable[str], argument: str = "status"
) -> list[str] | None:
    """The statuses asked for, each one of `accepted` (any case: statuses are upper case on
    the wire); None keeps every status."""
    return None if value is None else some_of(argument, value, accepted)


def choice(argument: str, value: object, accepted: Sequence[str]) -> str:
    """`value` when it is one of `accepted` (any case), upper-cased; else InvalidArgumentError."""
    return one_of(argument, value, accepted)


def positive_duration(argument: str, value: object) -> timedelta:
    """A `timedelta` longer than zero, else InvalidArgumentError."""
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise InvalidArgumentError(
            argument, f"give a positive datetime.timedelta (e.g. timedelta(days=7)), not {value!r}"
        )
    return value


def instant(argument: str, value: datetime | str | None) -> pd.Timestamp | None:
    """A UTC instant from an aware datetime, a date or ISO 8601 text with a zone, else
    InvalidArgumentError naming the accepted forms."""
    return None if value is None else pd.Timestamp(utc_instant(argument, value))


@dataclass(frozen=True)
class Out:
    """A column of a helper's result: its name, the SQL giving it, and for money in minor units
    the column holding the decimals of its currency (for `major=True`)."""

    name: str
    sql: str
    decimals: str | None = None


_NO_HISTORY = (
    "SELECT NULL::VARCHAR AS id, NULL::VARCHAR AS status, NULL::TIMESTAMPTZ AS record_updated_at,"
    " NULL::TIMESTAMPTZ AS observed_at WHERE FALSE"
)


#: The columns every outgoing or incoming transaction row of a result starts with.
TRANSACTION = [
    Out("id", "id"),
    Out("status", "status"),
    Out("created_at", "created_at"),
    Out("month", month_of("created_at")),
    Out("customer_id", "customer_id"),
    Out("rail", "payment_rail"),
    Out("corridor", corridor_of("sent_amount_currency", "received_amount_currency")),
]


def count_where(name: str, condition: str) -> Out:
    return Out(name, f"count(*) FILTER (WHERE {condition})")


def fewest(q: float) -> int:
    """How many observations a q-quantile needs to be told apart from the largest: 1/(1 - q)
    (p50: 2, p90: 10, p99: 100). Over fewer, it is NA: a group of one has no p90 or p99."""
    return round(1 / (1 - q))


def quantile(name: str, column: str, q: float, condition: str = "TRUE") -> Out:
    """A linearly interpolated quantile of the rows meeting `condition`; NA over fewer than
    `fewest(q)` known values."""
    known = f"count({column}) FILTER (WHERE {condition})"
    value = f"quantile_cont({column}, {q}) FILTER (WHERE {condition})"
    return Out(name, f"CASE WHEN {known} >= {fewest(q)} THEN {value} END")


def percentiles(column: str, prefix: str = "") -> list[Out]:
    """`<prefix>p50_seconds`, `p90` and `p99` of a column of seconds."""
    return [quantile(f"{prefix}p{round(q * 100)}_seconds", column, q) for q in (0.5, 0.9, 0.99)]


@dataclass
class Source:
    """A helper's input, resolved: what columns it has, where it lives and its provenance."""

    data: Data
    table: str
    columns: list[str]
    label: str | None
    history: History = None

    borrowed: list[str] = field(default_factory=list)
    tables: frozenset[str] = frozenset()

    def input_cte(self, uses: Iterable[str], where: str = "TRUE") -> str:
        """`_in`: the input rows with every column the helper uses: a missing one is borrowed
        from the warehouse's `transactions` by id when reachable, else NULL."""
        missing = [c for c in dict.fromkeys(uses) if c not in self.columns]
        borrow = [c for c in missing if c in self.borrowed]
        fill = [f"NULL::{DECLARED[c]} AS {c}" for c in missing if c not in borrow]
        rows = f"(SELECT * FROM _src WHERE {where}) AS _s"
        if not borrow:
            return f"SELECT {', '.join(['_s.*', *fill])} FROM {rows}"
        picked = ", ".join(["id", *borrow])
        items = ["_s.*", *(f"_t.{c} AS {c}" for c in borrow), *fill]
        return (
            f"SELECT {', '.join(items)} FROM {rows}"
            f" LEFT JOIN (SELECT {picked} FROM transactions) AS _t ON _t.id = _s.id"
        )

    def has(self, column: str) -> bool:
        return column in self.columns

    def distinct(self, *columns: str) -> set[tuple[object, ...]]:
        """The distinct value combinations of input columns (a cheap look before the query)."""
        names = ", ".join(quote(c) for c in columns)
        data = self.data
        if isinstance(data, pd.DataFrame):
            return set(data[list(columns)].drop_duplicates().itertuples(index=False, name=None))
        rel = data.relation(self.table) if isinstance(data, Warehouse) else data
        found = rel.query("_src", f"SELECT DISTINCT {names} FROM _src")
        return set(found.fetchall()) if found is not None else set()

    def check_as_of(self, when: pd.Timestamp | None, column: str = "created_at") -> None:
        """Refuse an `as_of` before the input's first `column` instant: nothing had happened
        then, so every figure would be empty or negative."""
        if when is None:
            return
        data = self.data
        if isinstance(data, pd.DataFrame):
            first = data[column].min() if len(data) else None
        else:
            rel = data.relation(self.table) if isinstance(data, Warehouse) else data
            # as epoch microseconds: DuckDB hands TIMESTAMPTZ to Python only through pytz
            micros = rel.aggregate(f"epoch_us(min({quote(column)}))").fetchall()[0][0]
            first = None if micros is None else pd.Timestamp(micros, unit="us", tz="UTC")
        if first is not None and not pd.isna(first) and when < utc_timestamp(first):
            raise InvalidArgumentError(
                "as_of",
                f"{when.isoformat()} is before the first transaction ({utc_timestamp(first)}):"
                " give a time within or after the data",
            )

    def keys(self, by: By, outputs: Sequence[Out], friendly: Mapping[str, str]) -> list[str] | None:
        """The per-row columns to group by, or None (one row per transaction). A name is a
        friendly alias (`customer`), a per-row output column (`corridor`, `rail`, `month`,
        ...) or any column of the input."""
        if by is None:
            return None
        known = {o.name for o in outputs if not o.name.startswith("_")}
        aliases = {**ALIASES, **friendly}
        choices = sorted({*aliases, *known})
        if isinstance(by, str):
            names = [by]
        elif isinstance(by, Sequence) and all(isinstance(n, str) for n in by):
            names = list(by)
        else:
            raise InvalidArgumentError(
                "by", f"give a column name or a list of them, from {choices}, not {by!r}"
            )
        keys: list[str] = []
        for name in names:
            column = aliases.get(name.lower(), name.lower())  # columns are lower case
            column = column if column in known or column in self.columns else name
            if column not in known and column not in self.columns:
                hint = did_you_mean(name, [*choices, *self.columns])
                raise InvalidArgumentError(
                    "by",
                    f"cannot group by {name!r}{hint}: not a column of the input nor one of "
                    f"{choices}",
                )
            if column not in keys:
                keys.append(column)
        return keys

    def _history_sql(self) -> str:
        """The status history of a database input: the one given, else its own table (known
        from `tables`, read once by `source`), else none."""
        if isinstance(self.history, duckdb.DuckDBPyRelation):
            return self.history.sql_query()
        if "status_history" not in self.tables:
            return _NO_HISTORY
        if isinstance(self.data, Warehouse):  # a removed transaction's history is not counted
            return f"SELECT * FROM {self.data.current_rows('status_history')}"
        return "SELECT * FROM status_history"

    def run(self, ctes: Sequence[tuple[str, str]], final: str) -> pd.DataFrame:
        """Run `WITH <ctes> <final>` over the input and return a typed, labelled frame. A
        total past the int64 range of minor units (an input no real ledger holds, but one
        the interface's integers allow) is `InvalidArgumentError`, never a wrapped number."""
        try:
            return self._run(ctes, final)
        except (duckdb.ConversionException, duckdb.OutOfRangeException) as exc:
            said = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            if isinstance(exc, duckdb.OutOfRangeException) or "out of range" in said:
                raise InvalidArgumentError(
                    "data",
                    "a total is past the int64 range of minor units (±9,223,372,036,854,775,807): "
                    + said,
                ) from None
            raise InvalidArgumentError(
                "data", f"a value in the data cannot be read: {said}"
            ) from None

    def _run(self, ctes: Sequence[tuple[str, str]], final: str) -> pd.DataFrame:
        body = ",\n".join(f"{name} AS ({sql})" for name, sql in ctes)
        data = self.data
        if isinstance(data, Warehouse):
            # the warehouse's own SQL door: a typed frame labelled with its source, in about
            # half the time of the same query through a relation
            src = f"SELECT * FROM {data.current_rows(self.table)}"
            return data.sql(
                f"WITH _src AS ({src}), _history AS ({self._history_sql()}),\n{body}\n{final}"
            )
        if isinstance(data, duckdb.DuckDBPyRelation):
            table = _run_on_relation(data, self._history_sql(), body, final)
        else:
            con = duckdb.connect()
            try:
                con.register("_src_frame", data)
                table = _run(con, "SELECT * FROM _src_frame", self.history, body, final)
            finally:
                con.close()
        frame = to_pandas(table)
        if self.label is not None:
            frame.attrs["source"] = self.label
        return frame


def _run(
    con: duckdb.DuckDBPyConnection, src: str, history: History, body: str, final: str
) -> pa.Table:
    """Run in a connection that holds the input: a warehouse's (its status history is a
    table of it) or a fresh one."""
    if history is None:
        found = con.sql("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'status_history'")
        history_sql = "SELECT * FROM status_history" if found.fetchall()[0][0] else _NO_HISTORY
    elif isinstance(history, duckdb.DuckDBPyRelation):
        history_sql = history.sql_query()
    else:
        con.register("_history_frame", history)
        history_sql = "SELECT * FROM _history_frame"
    sql = f"WITH _src AS ({src}), _history AS ({history_sql}),\n{body}\n{final}"
    try:
        return con.sql(sql).to_arrow_table()
    finally:
        if isinstance(history, pd.DataFrame):
            con.unregister("_history_frame")


def _run_on_relation(
    rel: duckdb.DuckDBPyRelation, history_sql: str, body: str, final: str
) -> pa.Table:
    """Run through `relation.query`, in the relation's own connection (no copy)."""
    result = rel.query("_src", f"WITH _history AS ({history_sql}),\n{body}\n{final}")
    assert result is not None
    return result.to_arrow_table()


def source(
    data: Data,
    table: str,
    *,
    required: Sequence[str],
    status_history: History = None,
) -> Source:
    """Resolve a helper's input; a frame or relation missing a required column is refused
    with the table it should come from."""
    if isinstance(data, Warehouse):
        data.require_data()
    borrowed: list[str] = []
    tables: frozenset[str] = frozenset()
    label: str | None = None
    if isinstance(data, Warehouse | duckdb.DuckDBPyRelation) and isinstance(
        status_history, pd.DataFrame
    ):
        # a frame cannot join a database's connection: read the rows out once (no borrowing)
        label = data.label if isinstance(data, Warehouse) else None
        rows = data.relation(table) if isinstance(data, Warehouse) else data
        data = to_pandas(rows.to_arrow_table())
        data.attrs["source"] = label
    if isinstance(data, Warehouse):
        relation = data.relation(table)
        columns = list(relation.columns)
        label = data.label
        tables = _tables(relation)
        if table != "transactions":
            borrowed = sorted(_BORROWABLE)
    elif isinstance(data, duckdb.DuckDBPyRelation):
        columns, label = list(data.columns), None
        borrowed = _reachable_transaction_columns(data)
        tables = _tables(data)
    elif isinstance(data, pd.DataFrame):
        columns, label = [str(c) for c in data.columns], data.attrs.get("source")
    else:
        raise InvalidArgumentError(
            "data",
            f"expected a Warehouse, a DataFrame or a DuckDB relation, not {type(data).__name__}",
        )
    missing = [c for c in required if c not in columns]
    if missing:
        raise InvalidArgumentError(
            "data",
            f"the input lacks {missing}: pass a Warehouse, or rows of its {table!r} table "
            f"(a DataFrame or `wh.relation({table!r})`)",
        )
    return Source(
        data, table, columns, label, history=status_history, borrowed=borrowed, tables=tables
    )


def _tables(rel: duckdb.DuckDBPyRelation) -> frozenset[str]:
    """The tables of the relation's database (its current schema)."""
    probe = rel.query(
        "_src", "SELECT table_name FROM duckdb_tables() WHERE schema_name = current_schema()"
    )
    return frozenset(row[0] for row in probe.fetchall()) if probe is not None else frozenset()


def _reachable_transaction_columns(rel: duckdb.DuckDBPyRelation) -> list[str]:
    """The borrowable columns of a `transactions` table in the relation's database, if any."""
    probe = rel.query(
        "_src",
        "SELECT column_name FROM duckdb_columns() WHERE table_name = 'transactions'"
        " AND schema_name = current_schema()",
    )
    names = {row[0] for row in probe.fetchall()} if probe is not None else set()
    return sorted(_BORROWABLE & names) if "id" in names else []


def render(
    outputs: Sequence[Out],
    keys: list[str] | None,
    *,
    currency: Sequence[str],
    metrics: Sequence[Out],
    major: bool,
    order: str,
) -> str:
    """The final SELECT over `_rows`: every per-row output (one row per transaction) or, with
    keys, the keys and the currency columns (always grouped by, so no sum adds currencies)
    then the metrics. `major=True` follows each minor-unit column with its `_major` value."""
    if keys is None:
        columns = [Out(o.name, quote(o.name), o.decimals) for o in outputs]
        return finish(columns, "_rows", major, order)
    decimals = {o.name: o.decimals for o in outputs}
    groups = group_columns(keys, currency)
    columns = [Out(c, quote(c), decimals.get(c)) for c in groups] + list(metrics)
    names = ", ".join(quote(c) for c in groups) or "()"
    return finish(columns, f"_rows GROUP BY {names}", major, ", ".join(map(quote, groups)) or "1")


def group_columns(keys: Sequence[str], currency: Sequence[str]) -> list[str]:
    """The keys, then the currency columns not among them."""
    return [*keys, *(c for c in currency if c not in keys)]


def finish(columns: Sequence[Out], source: str, major: bool, order: str) -> str:
    """`SELECT <columns> FROM <source>`, ordered, with a `_major` column (amount /
    10^decimals, float) after each minor-unit one when `major`."""
    items = ", ".join(f"{c.sql} AS {quote(c.name)}" for c in columns)
    outer = []
    for c in columns:
        outer.append(quote(c.name))
        if major and c.decimals is not None and c.name.endswith("_minor"):
            major_name = c.name.removesuffix("_minor") + "_major"
            outer.append(f"{quote(c.name)} / power(10, {quote(c.decimals)}) AS {quote(major_name)}")
    return f"SELECT {', '.join(outer)} FROM (SELECT {items} FROM {source}) ORDER BY {order}"


def quote(name: str) -> str:
    """A quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def rows_cte(outputs: Sequence[Out], keys: list[str] | None, source: str) -> str:
    """`_rows`: one row per transaction with every per-row output, plus any raw input column
    grouped by."""
    names = {o.name for o in outputs}
    extra = [k for k in keys or () if k not in names]
    items = [f"{o.sql} AS {quote(o.name)}" for o in outputs]
    items += [quote(k) for k in extra]
    return f"SELECT {', '.join(items)} FROM {source}"
