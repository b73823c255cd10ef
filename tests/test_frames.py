"""Wire records -> typed Arrow tables: the declared schemas, every value from its wire field,
and pandas frames with Arrow dtypes and UTC timestamps."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pandas as pd
import pyarrow as pa

from paylens import Sandbox
from paylens.frames import TABLES, arrow_schema, encode, to_arrow, to_pandas, transaction_tables


def _records(transactions: int = 400) -> list[dict]:
    return list(Sandbox(seed=5, transactions=transactions).world.all_transactions())


def _instant(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_every_table_has_its_declared_schema() -> None:
    tables = transaction_tables(_records())
    for name, table in tables.items():
        assert table.schema == arrow_schema(name), name
        assert [f.name for f in table.schema][: len(TABLES[name])] == [c.name for c in TABLES[name]]


def test_each_value_comes_from_its_wire_field() -> None:
    records = _records()
    tables = transaction_tables(records)
    rows = {r["id"]: r for r in tables["transactions"].to_pylist()}
    fees = {r["id"]: r for r in tables["outgoing_fees"].to_pylist()}
    assert len(rows) == len(records)
    for record in records:
        row = rows[record["id"]]
        assert orjson.loads(row["raw"]) == record
        assert (row["type"], row["status"]) == (record["type"], record["status"])
        assert row["created_at"] == _instant(record["createdAt"])
        assert row["failure_reason"] == record.get("failureReason")
        assert row["refund_reason"] == (record.get("refund") or {}).get("reason")
        if record["type"] == "OUTGOING":
            sent = record["sentAmount"]
            assert (row["amount_minor"], row["currency"], row["decimals"]) == (
                sent["amount"],
                sent["currency"]["code"],
                sent["currency"]["decimals"],
            )
            fee = fees[record["id"]]
            assert fee["fees_minor"] == record.get("fees")
            details = record.get("rateDetails") or {}
            assert fee["grid_api_fixed_fee_minor"] == details.get("gridApiFixedFee")
    outgoing = [r for r in records if r["type"] == "OUTGOING"]
    assert tables["outgoing_fees"].num_rows == len(outgoing) > 0
    instructions = sum(len(r.get("paymentInstructions") or []) for r in outgoing)
    assert tables["payment_instructions"].num_rows == instructions
    assert tables["card_transactions"].num_rows == sum(r["type"] == "CARD" for r in records)


def test_records_and_their_texts_give_the_same_tables() -> None:
    records = _records(200)
    assert transaction_tables(records) == transaction_tables(raw=encode(records))
    assert to_arrow("transactions", records) == transaction_tables(records)["transactions"]


def test_fields_a_newer_service_adds_are_kept_in_raw() -> None:
    record = {**_records(50)[0], "brandNewField": {"nested": [1, 2]}}
    row = transaction_tables([record])["transactions"].to_pylist()[0]
    assert orjson.loads(row["raw"])["brandNewField"] == {"nested": [1, 2]}


def test_frames_are_arrow_backed_with_utc_timestamps_and_integer_money() -> None:
    frame = to_pandas(transaction_tables(_records(100))["transactions"])
    assert all(isinstance(t, pd.ArrowDtype) for t in frame.dtypes)
    assert frame["amount_minor"].dtype == pd.ArrowDtype(pa.int64())
    assert frame["created_at"].dtype == pd.ArrowDtype(pa.timestamp("us", tz="UTC"))
    assert frame["created_at"].dt.tz is not None


def test_every_rfc_3339_spelling_of_an_instant_is_read() -> None:
    """A fraction past microseconds (cut to six digits, as Python's datetime reads it), a
    lower-case `t` or `z`, an offset: each is the instant it says, never a reason to set the
    record aside."""
    base = _records(4)
    spellings = [
        "2025-04-17T17:28:38.395123456Z",
        "2025-04-17t17:28:38.395z",
        "2025-04-17T19:28:38.395+02:00",
        "2025-04-17T17:28:38Z",
    ]
    records = [{**r, "createdAt": s} for r, s in zip(base, spellings, strict=True)]
    created = transaction_tables(raw=encode(records))["transactions"].column("created_at")
    assert created.to_pylist() == [
        datetime(2025, 4, 17, 17, 28, 38, 395123, tzinfo=UTC),
        datetime(2025, 4, 17, 17, 28, 38, 395000, tzinfo=UTC),
        datetime(2025, 4, 17, 17, 28, 38, 395000, tzinfo=UTC),
        datetime(2025, 4, 17, 17, 28, 38, tzinfo=UTC),
    ]
