"""Wire records to typed Arrow tables (and Arrow-backed pandas frames), one batch at a time.

The records are read as newline-delimited JSON by Arrow's C++ reader, against a nested schema
built from the declared column paths, and the columns are then picked out vectorised: no Python
loop per record and field. A value of the wrong type (a float where an amount must be an
integer) fails the read; callers validate records before converting them."""

from __future__ import annotations

import array
import functools
import io
import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

if TYPE_CHECKING:  # loaded by `to_pandas` only: a sync never needs it
    import pandas as pd

from ._schemas import TABLES, UTC_TIMESTAMP, WITH_RAW, ByType, Column, First, Path, arrow_schema

_READ_OPTIONS = pj.ReadOptions(use_threads=False, block_size=1 << 26)
_INSTRUCTIONS_KEY = "paymentInstructions"
_SYNTHETIC = ("transactionId", "position")  # payment-instruction columns not read from the item


def _wire_type(column_type: pa.DataType) -> pa.DataType:
    """How a column is read from JSON: timestamps as text, cast afterwards."""
    return pa.string() if column_type == UTC_TIMESTAMP else column_type


def _merge(tree: dict[str, Any], path: Path, leaf: pa.DataType) -> None:
    head, *rest = path
    if not rest:
        tree.setdefault(head, leaf)
        return
    _merge(tree.setdefault(head, {}), tuple(rest), leaf)


def _to_type(node: dict[str, Any] | pa.DataType) -> pa.DataType:
    if isinstance(node, pa.DataType):
        return node
    return pa.struct([(name, _to_type(child)) for name, child in node.items()])


def _read_tree(columns: Sequence[Column]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for column in columns:
        if column.paths()[0][0] in _SYNTHETIC:
            continue
        for path in column.paths():
            _merge(tree, path, pa.string() if path == ("type",) else _wire_type(column.type))
    return tree


@functools.cache
def read_schema(table: str) -> pa.Schema:
    """The nested JSON schema holding every field the table's columns read. The transaction
    tables share one read, which also takes each record's payment instructions."""
    if table == "transactions":
        tree: dict[str, Any] = {}
        for name in ("transactions", "outgoing_fees", "card_transactions"):
            _deep_update(tree, _read_tree(TABLES[name]))
        tree[_INSTRUCTIONS_KEY] = pa.list_(_to_type(_read_tree(TABLES["payment_instructions"])))
    else:
        tree = _read_tree(TABLES[table])
    return pa.schema([(name, _to_type(node)) for name, node in tree.items()])


def _deep_update(target: dict[str, Any], source: dict[str, Any]) -> None:
    for key, value in source.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _deep_update(target[key], value)
        else:
            target.setdefault(key, value)


def _pick(parsed: pa.Table | pa.StructArray, path: Path) -> pa.Array:
    head, *rest = path
    value = parsed.column(head) if isinstance(parsed, pa.Table) else parsed.field(head)
    if isinstance(value, pa.ChunkedArray):
        value = value.combine_chunks()
    for key in rest:
        value = pc.struct_field(value, [key])
    return value


def _column(parsed: pa.Table | pa.StructArray, column: Column) -> pa.Array:
    if isinstance(column.path, First):
        value = pc.coalesce(*[_pick(parsed, p) for p in column.path.paths])
    elif isinstance(column.path, ByType):
        kinds = _pick(parsed, ("type",))
        conditions = [pc.equal(kinds, _text(kind)) for kind in column.path.paths]
        choices = [_pick(parsed, path) for path in column.path.paths.values()]
        value = pc.case_when(
            pa.StructArray.from_arrays(conditions, names=list(column.path.paths)), *choices
        )
    else:
        value = _pick(parsed, column.path)
    return _instants(value) if column.type == UTC_TIMESTAMP else value.cast(column.type)


def _instants(text: pa.Array) -> pa.Array:
    """RFC 3339 date-times as UTC microseconds. Arrow reads the common spelling; what it
    refuses is spelt out first as Python's `datetime` reads it: a fraction past microseconds
    cut to six digits, a lower-case `t` or `z` read as upper case."""
    try:
        return text.cast(UTC_TIMESTAMP)
    except pa.ArrowInvalid:
        spelt = pc.replace_substring_regex(pc.utf8_upper(text), r"(\.\d{6})\d+", r"\1")
        return spelt.cast(UTC_TIMESTAMP)


def _ndjson(raw: Sequence[bytes]) -> bytes:
    return b"\n".join(raw)


def parse_records(table: str, raw: Sequence[bytes]) -> pa.Table:
    """Records' JSON texts read into the nested schema of `table`'s fields."""
    if not raw:
        return read_schema(table).empty_table()
    options = pj.ParseOptions(
        explicit_schema=read_schema(table), unexpected_field_behavior="ignore"
    )
    return pj.read_json(io.BytesIO(_ndjson(raw)), read_options=_READ_OPTIONS, parse_options=options)


def _assemble(table: str, parsed: pa.Table | pa.StructArray, raw: pa.Array | None) -> pa.Table:
    arrays = [_column(parsed, c) for c in TABLES[table]]
    if table in WITH_RAW:
        assert raw is not None
        arrays.append(raw)
    return pa.Table.from_arrays(arrays, schema=arrow_schema(table))


# Arrays and scalars are built here from their buffers: converting Python values (`pa.array`,
# `pa.scalar`, a compute function handed a str) makes pyarrow import pandas on first use,
# ~0.3 s of a sync's process that never needs it.


def _raw_texts(raw: Sequence[bytes]) -> pa.Array:
    offsets = [0, *itertools.accumulate(map(len, raw))]
    if offsets[-1] >= 1 << 31:  # beyond 32-bit offsets: Arrow chunks it
        return pa.array(raw, pa.binary()).cast(pa.string())
    buffers = [None, pa.py_buffer(array.array("i", offsets)), pa.py_buffer(b"".join(raw))]
    return pa.Array.from_buffers(pa.binary(), len(raw), buffers).cast(pa.string())


@functools.cache
def _text(value: str) -> pa.StringScalar:
    """A string scalar (for comparisons) built from its bytes."""
    data = value.encode()
    offsets = pa.py_buffer(array.array("i", [0, len(data)]))
    return pa.Array.from_buffers(pa.string(), 1, [None, offsets, pa.py_buffer(data)])[0]


def _positions(count: int) -> pa.Array:
    """0, 1, ... count - 1 as int64."""
    return pa.Array.from_buffers(
        pa.int64(), count, [None, pa.py_buffer(array.array("q", range(count)))]
    )


def encode(records: Sequence[dict[str, Any]]) -> list[bytes]:
    """Each record's JSON text (the `raw` column)."""
    return [orjson.dumps(r) for r in records]


def to_arrow(
    table: str, records: Sequence[dict[str, Any]], raw: Sequence[bytes] | None = None
) -> pa.Table:
    """A typed Arrow table of `table`'s columns from wire records (or their JSON texts)."""
    texts = encode(records) if raw is None else raw
    parsed = parse_records(table, texts)
    return _assemble(table, parsed, _raw_texts(texts) if table in WITH_RAW else None)


def _instructions(parsed: pa.Table, ids: pa.Array) -> pa.Table:
    lists = parsed.column(_INSTRUCTIONS_KEY).combine_chunks()
    items = pc.list_flatten(lists)
    parents = pc.list_parent_indices(lists)
    starts = pc.take(lists.offsets, parents)
    positions = pc.subtract(_positions(len(items)), starts.cast(pa.int64()))
    columns = {c.name: c for c in TABLES["payment_instructions"]}
    rest = [c for name, c in columns.items() if name not in ("transaction_id", "position")]
    arrays = [pc.take(ids, parents), positions.cast(pa.int32())]
    arrays += [_column(items, c) if len(items) else pa.nulls(0, c.type) for c in rest]
    return pa.Table.from_arrays(arrays, schema=arrow_schema("payment_instructions"))


def transaction_tables(
    records: Sequence[dict[str, Any]] = (),
    raw: Sequence[bytes] | None = None,
    spelt: Sequence[bytes] | None = None,
) -> dict[str, pa.Table]:
    """The tables a batch of transactions lands in: `transactions` (every kind), `outgoing_fees`,
    `card_transactions` and `payment_instructions`, from one read of the batch (given as
    records, or as their JSON texts in `raw`; `spelt`, when given, is what is read, one text
    per record of `raw`, which the raw column keeps as it came)."""
    texts = encode(records) if raw is None else raw
    parsed = parse_records("transactions", texts if spelt is None else spelt)
    kinds = parsed.column("type")
    outgoing = parsed.filter(pc.equal(kinds, _text("OUTGOING")))
    cards = parsed.filter(pc.equal(kinds, _text("CARD")))
    fees = _assemble("outgoing_fees", outgoing, None)
    return {
        "transactions": _assemble("transactions", parsed, _raw_texts(texts)),
        "outgoing_fees": fees,
        "card_transactions": _assemble("card_transactions", cards, None),
        "payment_instructions": _instructions(outgoing, fees.column("id").combine_chunks()),
    }


def payment_instruction_rows(records: Sequence[dict[str, Any]]) -> pa.Table:
    """One row per entry of each outgoing transaction's `paymentInstructions`."""
    return transaction_tables(records)["payment_instructions"]


def to_pandas(table: pa.Table) -> pd.DataFrame:
    """An Arrow table as a pandas frame with Arrow-backed dtypes (timestamps stay UTC)."""
    import pandas as pd

    frame: pd.DataFrame = table.to_pandas(types_mapper=pd.ArrowDtype)
    return frame
