"""Wire records to typed Arrow tables (and Arrow-backed pandas frames), one batch at a time."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ._schemas import TABLES, UTC_TIMESTAMP, WITH_RAW, Column, Path, arrow_schema

Getter = Callable[[dict[str, Any]], Any]


_EMPTY: dict[str, Any] = {}


def _getter(path: Path | Getter) -> Getter:
    """A fast reader of a key path; records are validated first, so what is not a dict on the
    way is absent (None)."""
    if callable(path):
        return path
    if len(path) == 1:
        (a,) = path
        return lambda r: r.get(a)  # type: ignore[arg-type]
    if len(path) == 2:
        a, b = path
        return lambda r: (r.get(a) or _EMPTY).get(b)  # type: ignore[arg-type]
    if len(path) == 3:
        a, b, c = path
        return lambda r: ((r.get(a) or _EMPTY).get(b) or _EMPTY).get(c)  # type: ignore[arg-type]
    raise ValueError(f"paths are at most three keys deep: {path}")


_GETTERS: dict[str, list[tuple[Column, Getter]]] = {
    name: [(column, _getter(column.path)) for column in columns] for name, columns in TABLES.items()
}


def _array(column: Column, values: list[Any]) -> pa.Array:
    if column.type == UTC_TIMESTAMP:
        return pc.cast(pa.array(values, pa.string()), UTC_TIMESTAMP)
    return pa.array(values, column.type)


def to_arrow(
    table: str, records: Sequence[dict[str, Any]], raw: Sequence[bytes] | None = None
) -> pa.Table:
    """A typed Arrow table of `table`'s columns from wire records (with `raw` JSON where the
    table keeps it: given, or encoded here)."""
    arrays = [_array(column, [get(r) for r in records]) for column, get in _GETTERS[table]]
    if table in WITH_RAW:
        texts = raw if raw is not None else [orjson.dumps(r) for r in records]
        arrays.append(pa.array(texts, pa.binary()).cast(pa.string()))
    return pa.Table.from_arrays(arrays, schema=arrow_schema(table))


def payment_instruction_rows(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per entry of each outgoing transaction's `paymentInstructions`."""
    rows = []
    for record in records:
        for position, item in enumerate(record.get("paymentInstructions") or ()):
            if isinstance(item, dict):
                rows.append({**item, "transactionId": record["id"], "position": position})
    return rows


def transaction_tables(
    records: Sequence[dict[str, Any]], raw: Sequence[bytes] | None = None
) -> dict[str, pa.Table]:
    """The tables a batch of transactions lands in: `transactions` (every kind), `outgoing_fees`,
    `card_transactions` and `payment_instructions`."""
    outgoing = [r for r in records if r.get("type") == "OUTGOING"]
    cards = [r for r in records if r.get("type") == "CARD"]
    return {
        "transactions": to_arrow("transactions", records, raw),
        "outgoing_fees": to_arrow("outgoing_fees", outgoing),
        "card_transactions": to_arrow("card_transactions", cards),
        "payment_instructions": to_arrow(
            "payment_instructions", payment_instruction_rows(outgoing)
        ),
    }


def to_pandas(table: pa.Table) -> pd.DataFrame:
    """An Arrow table as a pandas frame with Arrow-backed dtypes (timestamps stay UTC)."""
    return table.to_pandas(types_mapper=pd.ArrowDtype)
