"""Typed frames: the declared schema of each table and the conversion of wire records into
Arrow tables and Arrow-backed pandas DataFrames. Knows the wire format, nothing of DuckDB."""

from ._convert import (
    encode,
    parse_records,
    payment_instruction_rows,
    to_arrow,
    to_pandas,
    transaction_tables,
)
from ._schemas import TABLES, UTC_TIMESTAMP, WITH_RAW, Column, arrow_schema

__all__ = [
    "TABLES",
    "UTC_TIMESTAMP",
    "WITH_RAW",
    "Column",
    "arrow_schema",
    "encode",
    "parse_records",
    "payment_instruction_rows",
    "to_arrow",
    "to_pandas",
    "transaction_tables",
]
