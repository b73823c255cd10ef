"""The analysis helpers on small hand-built data sets, each answer worked out by hand here.

Rows are written straight into the warehouse's tables; every figure asserted below follows
from the rows by the arithmetic written next to it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from paylens import Sandbox
from paylens.analysis import failure_breakdown, fee_breakdown, fees_collected, settlement_times
from paylens.errors import InvalidArgumentError
from paylens.warehouse import Warehouse

T0 = pd.Timestamp("2025-03-01T00:00:00Z")


def at(seconds: float) -> pd.Timestamp:
    return T0 + pd.Timedelta(seconds=seconds)


def insert(wh: Warehouse, table: str, rows: list[dict[str, Any]]) -> None:
    wh._con.register("_rows", pd.DataFrame(rows))
    try:
        wh._con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM _rows")
    finally:
        wh._con.unregister("_rows")


@pytest.fixture
def wh(tmp_path: Path) -> Iterator[Warehouse]:
    with Warehouse(tmp_path / "hand.duckdb") as warehouse:
        yield warehouse


def by_id(frame: pd.DataFrame) -> dict[str, dict[str, Any]]:
    return {row["id"]: row for row in frame.to_dict("records")}


# -- fees ------------------------------------------------------------------------------------


def fee_row(id: str, sent: str, received: str, **values: Any) -> dict[str, Any]:
    decimals = {"USD": 2, "EUR": 2, "JPY": 0}
    return {
        "id": id,
        "status": "COMPLETED",
        "customer_id": "Customer:a",
        "created_at": T0,
        "payment_rail": "SEPA",
        "sent_amount_currency": sent,
        "sent_amount_decimals": decimals[sent],
        "received_amount_currency": received,
        "received_amount_decimals": decimals[received],
        "platform_fees_minor": 0,
        "counterparty_fixed_fee_minor": 0,
        **values,
    }


FEE_ROWS = [
    # A: USD 1,000.00 to EUR at x = 1.1 USD per EUR. F = 30, V = round(100000 * 0.003) = 300,
    # P = 122, C = 50 euro cents: C_s = floor(50 * 1.1 * 10^0 + 0.5) = 55; fees = 507;
    # received = floor((100000 - 507) / 1.1 + 0.5) = 90448.
    fee_row(
        "A", "USD", "EUR", sent_amount_minor=100_000, received_amount_minor=90_448,
        exchange_rate=1.1, fees_minor=507, grid_api_fixed_fee_minor=30,
        grid_api_variable_fee_rate=0.003, grid_api_variable_fee_amount_minor=300,
        platform_fees_minor=122, counterparty_fixed_fee_minor=50,
    ),
    # B: USD 500.00 to JPY (0 decimals) at x = 0.0067 USD per yen. F = 25, V = 250, C = 100 yen:
    # C_s = floor(100 * 0.0067 * 10^(2 - 0) + 0.5) = 67; components 342, but fees say 345.
    fee_row(
        "B", "USD", "JPY", sent_amount_minor=50_000, received_amount_minor=7_411_940,
        exchange_rate=0.0067, fees_minor=345, grid_api_fixed_fee_minor=25,
        grid_api_variable_fee_rate=0.005, grid_api_variable_fee_amount_minor=250,
        counterparty_fixed_fee_minor=100, payment_rail="WIRE",
    ),
    # C: EUR 200.00 to EUR, failed; V = 0 although 20000 * 0.001 rounds to 20.
    fee_row(
        "C", "EUR", "EUR", sent_amount_minor=20_000, received_amount_minor=19_990,
        exchange_rate=1.0, fees_minor=10, grid_api_fixed_fee_minor=10,
        grid_api_variable_fee_rate=0.001, grid_api_variable_fee_amount_minor=0,
        status="FAILED", customer_id="Customer:b",
    ),
    # D: USD 100.00 to EUR in April: F = 30, V = 30, C_s = 55, fees = 115;
    # received = floor((10000 - 115) / 1.1 + 0.5) = 8986.
    fee_row(
        "D", "USD", "EUR", sent_amount_minor=10_000, received_amount_minor=8_986,
        exchange_rate=1.1, fees_minor=115, grid_api_fixed_fee_minor=30,
        grid_api_variable_fee_rate=0.003, grid_api_variable_fee_amount_minor=30,
        counterparty_fixed_fee_minor=50, created_at=pd.Timestamp("2025-04-15T10:00:00Z"),
    ),
]  # fmt: skip
MID = {("USD", "EUR"): 1.08}


@pytest.fixture
def fees_wh(wh: Warehouse) -> Warehouse:
    insert(wh, "outgoing_fees", FEE_ROWS)
    return wh


def test_fee_components_per_transaction(fees_wh: Warehouse) -> None:
    rows = by_id(fee_breakdown(fees_wh, reference_rates=MID, status=None))
    a = rows["A"]
    assert (a["service_fixed_fee_minor"], a["service_variable_fee_minor"]) == (30, 300)
    assert (a["platform_fee_minor"], a["counterparty_fixed_fee_received_minor"]) == (122, 50)
    assert a["counterparty_fixed_fee_minor"] == 55
    assert (a["components_minor"], a["residual_minor"]) == (507, 0)
    assert a["take_rate"] == 507 / 100_000
    assert a["reference_rate"] == 1.08
    assert a["fx_spread_rate"] == 1.1 / 1.08 - 1
    # what the 90,448 euro cents delivered cost at 1.1 beyond their cost at 1.08: 1808.96 cents
    assert a["fx_spread_cost_minor"] == math.floor(90_448.0 * 1.0 * (1.1 - 1.08) + 0.5) == 1809
    assert a["total_cost_minor"] == 507 + 1809
    assert a["all_in_cost_rate"] == 2316 / 100_000
    assert (a["corridor"], a["rail"], a["month"]) == ("USD→EUR", "SEPA", T0.date())

    b = rows["B"]
    assert b["counterparty_fixed_fee_minor"] == 67
    assert (b["components_minor"], b["residual_minor"]) == (342, 3)
    # no reference rate for USD→JPY: the spread and the all-in cost are unknown, not 0
    assert pd.isna(b["fx_spread_rate"]) and pd.isna(b["fx_spread_cost_minor"])
    assert pd.isna(b["total_cost_minor"]) and pd.isna(b["all_in_cost_rate"])

    c = rows["C"]
    assert (c["residual_minor"], c["service_variable_fee_mismatch_minor"]) == (0, 0 - 20)
    assert (c["reference_rate"], c["fx_spread_rate"], c["fx_spread_cost_minor"]) == (1.0, 0.0, 0)


def test_rates_are_fractions_named_rate(fees_wh: Warehouse) -> None:
    rows = fee_breakdown(fees_wh, reference_rates=MID, status=None)
    grouped = fee_breakdown(fees_wh, "corridor", reference_rates=MID, status=None)
    earned = fees_collected(fees_wh, "corridor", reference_rates=MID, status=None)
    for frame in (rows, grouped, earned):
        assert not [c for c in frame.columns if c.endswith(("_bps", "_pct", "_percent"))]
    assert {"take_rate", "fx_spread_rate", "all_in_cost_rate"} <= set(grouped.columns)
    assert {"take_rate", "fx_margin_rate", "all_in_rate"} <= set(earned.columns)
    assert "multiplier_gap_rate" in rows.columns
    usd_eur = earned.set_index("corridor").loc["USD→EUR"]
    assert usd_eur["take_rate"] == 622 / 110_000
    assert usd_eur["all_in_rate"] == (622 + 1989) / 110_000
    assert (
        usd_eur["fx_margin_rate"] == grouped.set_index("corridor").loc["USD→EUR", "fx_spread_rate"]
    )


def test_fees_by_corridor_sum_per_currency(fees_wh: Warehouse) -> None:
    frame = fee_breakdown(fees_wh, "corridor", reference_rates=MID, status=None)
    assert list(frame["corridor"]) == ["EUR→EUR", "USD→EUR", "USD→JPY"]
    usd_eur = frame.set_index("corridor").loc["USD→EUR"]
    assert (usd_eur["sent_currency"], usd_eur["received_currency"]) == ("USD", "EUR")
    assert usd_eur["transaction_count"] == 2
    assert usd_eur["sent_minor"] == 100_000 + 10_000
    assert usd_eur["fees_minor"] == 507 + 115
    assert usd_eur["service_fixed_fee_minor"] == 30 + 30
    assert usd_eur["service_variable_fee_minor"] == 300 + 30
    assert usd_eur["platform_fee_minor"] == 122
    assert usd_eur["counterparty_fixed_fee_minor"] == 55 + 55
    assert usd_eur["counterparty_fixed_fee_received_minor"] == 50 + 50
    assert usd_eur["received_minor"] == 90_448 + 8_986
    assert usd_eur["residual_minor"] == 0
    # D's spread: floor(8986 * (1.1 - 1.08) + 0.5) = floor(180.22) = 180
    assert usd_eur["fx_spread_cost_minor"] == 1809 + 180
    assert usd_eur["take_rate"] == 622 / 110_000
    assert usd_eur["all_in_cost_rate"] == (622 + 1989) / 110_000
    # the group's rate is of the rounded margin, so it agrees with fx_spread_cost_minor
    spread = (1809 + 180) / (90_448.0 * 1.08 + 8_986.0 * 1.08)
    assert usd_eur["fx_spread_rate"] == spread
    usd_jpy = frame.set_index("corridor").loc["USD→JPY"]
    assert (usd_jpy["residual_minor"], usd_jpy["residual_count"]) == (3, 1)
    assert usd_jpy["with_reference_count"] == 0 and pd.isna(usd_jpy["fx_spread_cost_minor"])


def test_fees_by_rail_and_month_never_add_currencies(fees_wh: Warehouse) -> None:
    frame = fee_breakdown(fees_wh, ["rail", "month"], status=None)
    assert "received_minor" not in frame.columns  # receiving currencies differ within a group
    got = {
        (r["rail"], str(r["month"]), r["sent_currency"]): (r["transaction_count"], r["fees_minor"])
        for r in frame.to_dict("records")
    }
    assert got == {
        ("SEPA", "2025-03-01", "EUR"): (1, 10),
        ("SEPA", "2025-03-01", "USD"): (1, 507),
        ("SEPA", "2025-04-01", "USD"): (1, 115),
        ("WIRE", "2025-03-01", "USD"): (1, 345),
    }
    assert frame["service_variable_fee_mismatch_count"].sum() == 1


def test_fees_status_filter_customer_key_and_major_units(fees_wh: Warehouse) -> None:
    frame = fee_breakdown(fees_wh, "customer", status="COMPLETED", major=True)
    assert list(frame["customer_id"]) == ["Customer:a"]
    row = frame.iloc[0]
    assert row["sent_minor"] == 160_000 and row["sent_major"] == 1_600.0
    assert row["fees_minor"] == 507 + 345 + 115 and row["fees_major"] == 9.67
    rows = by_id(fee_breakdown(fees_wh, major=True))
    assert rows["B"]["received_major"] == 7_411_940.0  # yen have no decimals
    assert rows["B"]["counterparty_fixed_fee_received_major"] == 100.0


def test_fee_inputs_frame_relation_and_reference_forms(fees_wh: Warehouse) -> None:
    expected = fee_breakdown(fees_wh, "corridor", reference_rates=MID)
    from_frame = fee_breakdown(fees_wh.fees(), "corridor", reference_rates={"USD→EUR": 1.08})
    mids = pd.DataFrame(
        {"sent_currency": ["USD"], "received_currency": ["EUR"], "mid_rate": [1.08]}
    )
    from_relation = fee_breakdown(
        fees_wh.relation("outgoing_fees"), "corridor", reference_rates=mids
    )
    pd.testing.assert_frame_equal(from_frame, expected)
    pd.testing.assert_frame_equal(from_relation, expected, check_flags=False)
    label = fees_wh.label
    assert label == fees_wh.sql("SELECT 1 AS one").attrs["source"]
    assert expected.attrs["source"] == from_frame.attrs["source"] == label
    assert from_relation.attrs == {}  # a bare relation carries no provenance


def test_fee_input_errors(fees_wh: Warehouse) -> None:
    with pytest.raises(ValueError, match="cannot group by 'nope'"):
        fee_breakdown(fees_wh, "nope")
    with pytest.raises(ValueError, match=r"lacks .*platform_fees_minor"):
        fee_breakdown(fees_wh.fees().drop(columns="platform_fees_minor"))
    with pytest.raises(InvalidArgumentError, match="must be a number > 0"):
        fee_breakdown(fees_wh, reference_rates={("USD", "EUR"): 0.0})
    with pytest.raises(InvalidArgumentError, match="Warehouse, a DataFrame or a DuckDB relation"):
        fee_breakdown([1, 2, 3])  # type: ignore[arg-type]


# -- settlement times ------------------------------------------------------------------------

HOUR = 3600


def settle_row(id: str, status: str, created: float, **values: Any) -> dict[str, Any]:
    return {"id": id, "status": status, "created_at": at(created), "payment_rail": "ACH", **values}


SETTLE_ROWS = [
    # settled 100 s after creation, 10 s after the expected 90 s: breaches both expectations
    settle_row("S1", "COMPLETED", 0, settled_at=at(100), expected_settlement_at=at(90),
               settlement_timeline_seconds=90),
    # settled after 200 s, 100 s early
    settle_row("S2", "COMPLETED", HOUR, settled_at=at(HOUR + 200),
               expected_settlement_at=at(HOUR + 300), settlement_timeline_seconds=300),
    # completed without settledAt: the status history saw it COMPLETED 400 s after creation
    settle_row("S3", "COMPLETED", 2 * HOUR, expected_settlement_at=at(2 * HOUR + 300),
               settlement_timeline_seconds=300),
    # still processing; its settledAt is a forecast and must be ignored
    settle_row("S4", "PROCESSING", 3 * HOUR, settled_at=at(10 * HOUR),
               expected_settlement_at=at(3 * HOUR + 600), settlement_timeline_seconds=600),
    settle_row("S5", "FAILED", HOUR / 2),
    settle_row("S6", "COMPLETED", 0, settled_at=at(5), payment_rail="RTP",
               settlement_timeline_seconds=10),
    settle_row("S7", "PENDING", 3.5 * HOUR, payment_rail="RTP", settlement_timeline_seconds=10),
]  # fmt: skip
HISTORY = [
    {"id": "S3", "type": "OUTGOING", "previous_status": None, "status": "PROCESSING",
     "record_updated_at": at(2 * HOUR + 10), "observed_at": at(2 * HOUR + 60), "run_id": 1},
    {"id": "S3", "type": "OUTGOING", "previous_status": "PROCESSING", "status": "COMPLETED",
     "record_updated_at": at(2 * HOUR + 400), "observed_at": at(5 * HOUR), "run_id": 2},
]  # fmt: skip


@pytest.fixture
def settle_wh(wh: Warehouse) -> Warehouse:
    insert(wh, "outgoing_fees", SETTLE_ROWS)
    insert(wh, "status_history", HISTORY)
    return wh


def test_settlement_per_transaction(settle_wh: Warehouse) -> None:
    rows = by_id(settlement_times(settle_wh, as_of=at(4 * HOUR)))
    assert {i: r["lifecycle"] for i, r in rows.items()} == {
        "S1": "completed", "S2": "completed", "S3": "completed", "S4": "open", "S5": "failed",
        "S6": "completed", "S7": "open",
    }  # fmt: skip
    s1 = rows["S1"]
    assert (s1["settlement_seconds"], s1["late_seconds"]) == (100.0, 10.0)
    assert s1["expected_breach"] and s1["timeline_breach"]
    assert s1["settled_at_source"] == "settled_at"
    assert (rows["S2"]["late_seconds"], rows["S2"]["expected_breach"]) == (-100.0, False)
    s3 = rows["S3"]
    assert (s3["settled_at"], s3["settled_at_source"]) == (at(2 * HOUR + 400), "status_history")
    assert (s3["settlement_seconds"], s3["late_seconds"]) == (400.0, 100.0)
    s4 = rows["S4"]
    assert pd.isna(s4["settled_at"]) and pd.isna(s4["settlement_seconds"])
    assert (s4["open_seconds"], s4["overdue"]) == (3600.0, True)  # expected at 3 h 10 min
    assert s4["expected_breach"] and s4["timeline_breach"]  # open past both: breaches already
    s7 = rows["S7"]  # an instant transfer: no expected time, 1800 s against a 10 s timeline
    assert (s7["open_seconds"], s7["overdue"], s7["timeline_breach"]) == (1800.0, False, True)
    assert s7["sla_breach"]  # open for longer than the 60 s instant SLA
    assert pd.isna(rows["S5"]["overdue"]) and pd.isna(rows["S5"]["settlement_seconds"])


def test_settlement_by_rail(settle_wh: Warehouse) -> None:
    frame = settlement_times(settle_wh, "rail", as_of=at(4 * HOUR)).set_index("rail")
    ach = frame.loc["ACH"]
    assert (ach["transaction_count"], ach["completed_count"]) == (5, 3)
    assert (ach["open_count"], ach["failed_count"], ach["from_history_count"]) == (1, 1, 1)
    # Kaplan–Meier over 100, 200, 400 and S4 open at 3600: S(100) = 3/4, S(200) = 1/2
    assert ach["p50_seconds"] == 200.0
    assert (ach["resolved_count"], ach["failure_rate"]) == (4, 1 / 4)
    # S1 and S3 late, S4 open past its expected time: 3 of the 4 whose outcome is known
    assert (ach["expected_count"], ach["expected_breach_count"]) == (4, 3)
    assert ach["expected_breach_rate"] == 3 / 4
    assert (ach["late_p50_seconds"], ach["late_max_seconds"]) == (55.0, 100.0)  # of 10 and 100
    assert (ach["timeline_count"], ach["timeline_breach_count"]) == (4, 3)  # + S4 open 3600 > 600
    assert (ach["open_overdue_count"], ach["open_max_seconds"]) == (1, 3600.0)
    rtp = frame.loc["RTP"]
    assert (rtp["transaction_count"], rtp["completed_count"], rtp["open_count"]) == (2, 1, 1)
    # times 5 and 1800 open: S(5) = 1/2; S7 open 1800 s against a 10 s timeline: a breach
    assert (rtp["p50_seconds"], rtp["timeline_breach_rate"]) == (5.0, 0.5)
    assert rtp["expected_count"] == 0 and pd.isna(rtp["expected_breach_rate"])
    assert (rtp["sla_count"], rtp["sla_breach_count"]) == (2, 1)
    assert (rtp["open_overdue_count"], rtp["open_max_seconds"]) == (0, 1800.0)


def test_settlement_default_as_of_is_the_latest_instant_in_the_data(settle_wh: Warehouse) -> None:
    rows = by_id(settlement_times(settle_wh))  # latest: S7 created at 3 h 30 min
    assert (rows["S4"]["open_seconds"], rows["S7"]["open_seconds"]) == (1800.0, 0.0)


def test_settlement_history_for_frames_and_relations(settle_wh: Warehouse) -> None:
    expected = settlement_times(settle_wh, as_of=at(4 * HOUR))
    frame = settlement_times(
        settle_wh.fees(), as_of=at(4 * HOUR), status_history=settle_wh.status_history()
    )
    pd.testing.assert_frame_equal(frame, expected)
    relation = settlement_times(settle_wh.relation("outgoing_fees"), as_of=at(4 * HOUR))
    pd.testing.assert_frame_equal(relation, expected, check_flags=False)
    with_frame_history = settlement_times(
        settle_wh.relation("outgoing_fees"),
        as_of=at(4 * HOUR),
        status_history=settle_wh.status_history(),
    )
    pd.testing.assert_frame_equal(with_frame_history, expected, check_flags=False)
    # a frame alone has no history: S3's settlement time is unknown, not invented
    alone = by_id(settlement_times(settle_wh.fees(), as_of=at(4 * HOUR)))
    assert alone["S3"]["lifecycle"] == "completed" and pd.isna(alone["S3"]["settled_at"])
    summary = settlement_times(settle_wh.fees(), [], as_of=at(4 * HOUR)).iloc[0]
    assert (summary["time_unknown_count"], summary["from_history_count"]) == (1, 0)


def test_settlement_percentiles_on_101_transactions(wh: Warehouse) -> None:
    # settlement seconds 0, 10, ..., 1000 (inserted out of order): the k-th percentile is the
    # value at position k of 100, with nothing to interpolate
    order = sorted(range(101), key=lambda i: (i * 37) % 101)
    insert(
        wh,
        "outgoing_fees",
        [settle_row(f"P{i}", "COMPLETED", 0, settled_at=at(10 * i)) for i in order],
    )
    row = settlement_times(wh, []).iloc[0]
    assert (row["p50_seconds"], row["p90_seconds"], row["p99_seconds"]) == (500.0, 900.0, 990.0)


def test_settlement_incoming_from_transactions(wh: Warehouse) -> None:
    insert(
        wh,
        "transactions",
        [
            {"id": "I1", "type": "INCOMING", "status": "COMPLETED", "created_at": T0,
             "settled_at": at(30)},
            {"id": "I2", "type": "INCOMING", "status": "CREATED", "created_at": at(60)},
            {"id": "O1", "type": "OUTGOING", "status": "COMPLETED", "created_at": T0,
             "settled_at": at(999)},
        ],
    )  # fmt: skip
    row = settlement_times(wh, [], type="INCOMING").iloc[0]
    assert (row["transaction_count"], row["completed_count"], row["open_count"]) == (2, 1, 1)
    # 30 settled, I2 open for 30 s (as_of: its creation at 60): S(30) = 1/2
    assert (row["p50_seconds"], row["expected_count"]) == (30.0, 0)
    with pytest.raises(InvalidArgumentError, match=r"give one of INCOMING, OUTGOING$"):
        settlement_times(wh, type="CARD")


# -- failures ----------------------------------------------------------------------------------


def tx(
    id: str, type: str, status: str, reason: str | None, amount: int, currency: str
) -> dict[str, Any]:
    sending = "MXN" if type == "INCOMING" else currency
    receiving = currency if type == "INCOMING" else "EUR"
    return {
        "id": id, "type": type, "status": status, "failure_reason": reason, "created_at": T0,
        "payment_rail": "WIRE" if type == "INCOMING" else "ACH", "amount_minor": amount,
        "currency": currency, "decimals": 2, "sent_amount_currency": sending,
        "received_amount_currency": receiving,
    }  # fmt: skip


FAILURE_ROWS = [
    tx("F1", "OUTGOING", "FAILED", "PAYOUT_RETURNED", 1_000, "USD"),
    tx("F2", "OUTGOING", "FAILED", "COUNTERPARTY_POST_TX_FAILED", 2_000, "USD"),
    tx("F3", "OUTGOING", "FAILED", "TIMEOUT", 3_000, "USD"),
    tx("F4", "OUTGOING", "FAILED", "BRAND_NEW_REASON", 4_000, "USD"),
    tx("F5", "OUTGOING", "COMPLETED", None, 5_000, "USD"),
    tx("F6", "OUTGOING", "PENDING", None, 6_000, "USD"),
    tx("F7", "OUTGOING", "FAILED", None, 7_000, "USD"),
    tx("F8", "OUTGOING", "COMPLETED", None, 100, "EUR"),
    tx("I1", "INCOMING", "FAILED", "COLLECTION_FAILED", 500, "USD"),
    tx("I2", "INCOMING", "COMPLETED", None, 1_500, "USD"),
    tx("I3", "INCOMING", "FAILED", "TIMEOUT", 2_000, "USD"),
    {"id": "K1", "type": "CARD", "status": "SETTLED", "created_at": T0},
]


@pytest.fixture
def failures_wh(wh: Warehouse) -> Warehouse:
    insert(wh, "transactions", FAILURE_ROWS)
    return wh


def test_failure_lifecycles_and_reasons(failures_wh: Warehouse) -> None:
    rows = by_id(failure_breakdown(failures_wh))
    assert "K1" not in rows  # card transactions are not incoming or outgoing
    kinds = {i: (r["lifecycle"], r["failure_reason"]) for i, r in rows.items()}
    assert kinds == {
        "F1": ("failed", "PAYOUT_RETURNED"), "F2": ("failed", "COUNTERPARTY_POST_TX_FAILED"),
        "F3": ("failed", "QUOTE_EXECUTION_FAILED"),  # TIMEOUT was removed: folded into it
        "F4": ("failed", "BRAND_NEW_REASON"),  # unknown: kept as sent
        "F5": ("completed", None), "F6": ("open", None), "F7": ("failed", None),
        "F8": ("completed", None), "I1": ("failed", "COLLECTION_FAILED"),
        "I2": ("completed", None),
        "I3": ("failed", "TIMEOUT"),  # TIMEOUT was an outgoing reason, never an incoming one
    }  # fmt: skip
    assert (rows["F3"]["reason_removed"], rows["F3"]["reported_failure_reason"]) == (
        True,
        "TIMEOUT",
    )
    assert not rows["I3"]["reason_removed"]
    assert rows["F2"]["reason_coarse"] and rows["F2"]["reason_deprecated"]
    assert (rows["I1"]["corridor"], rows["I1"]["rail"]) == ("MXN→USD", "WIRE")


def test_failure_counts_rates_and_volume(failures_wh: Warehouse) -> None:
    frame = failure_breakdown(failures_wh, [])
    outgoing_usd = frame[(frame["type"] == "OUTGOING") & (frame["currency"] == "USD")]
    got = {
        r["failure_reason"] if isinstance(r["failure_reason"], str) else None: (
            r["transaction_count"], r["amount_minor"], r["lifecycle"]
        )
        for r in outgoing_usd.to_dict("records")
    }  # fmt: skip
    assert got == {
        "PAYOUT_RETURNED": (1, 1_000, "failed"),
        "COUNTERPARTY_POST_TX_FAILED": (1, 2_000, "failed"),
        "QUOTE_EXECUTION_FAILED": (1, 3_000, "failed"),
        "BRAND_NEW_REASON": (1, 4_000, "failed"),
        None: (1, 7_000, "failed"),
    }
    # 7 attempted, F6 open, 6 resolved, 5 failed; resolved amounts 22000 (F6's 6000 is open)
    assert set(outgoing_usd["attempted_count"]) == {7}
    assert set(outgoing_usd["open_count"]) == {1}
    assert set(outgoing_usd["failure_rate"]) == {5 / 6}
    assert set(outgoing_usd["share_of_resolved"]) == {1 / 6}
    assert set(outgoing_usd["resolved_amount_minor"]) == {22_000}
    assert set(outgoing_usd["coarse_payout_share"]) == {1 / 2}  # of PAYOUT_RETURNED and F2
    payout = outgoing_usd[outgoing_usd["failure_reason"] == "PAYOUT_RETURNED"].iloc[0]
    assert payout["amount_rate"] == 1_000 / 22_000
    # EUR outgoing had no failure: one row, no lifecycle, so its attempt is still counted
    eur = frame[frame["currency"] == "EUR"]
    assert len(eur) == 1
    row = eur.iloc[0]
    assert pd.isna(row["failure_reason"]) and pd.isna(row["lifecycle"])
    assert (row["transaction_count"], row["attempted_count"], row["failure_rate"]) == (0, 1, 0.0)
    incoming = frame[frame["type"] == "INCOMING"].set_index("failure_reason")
    assert incoming.loc["COLLECTION_FAILED", "failure_rate"] == 2 / 3
    assert incoming.loc["COLLECTION_FAILED", "share_of_resolved"] == 1 / 3
    assert set(incoming["resolved_amount_minor"]) == {500 + 1_500 + 2_000}


def test_failures_by_rail_corridor_month_and_type(failures_wh: Warehouse) -> None:
    frame = failure_breakdown(failures_wh, ["rail", "corridor", "month"], type="INCOMING")
    assert set(frame["type"]) == {"INCOMING"}
    assert set(zip(frame["rail"], frame["corridor"], frame["month"], strict=True)) == {
        ("WIRE", "MXN→USD", T0.date())
    }
    assert sorted(frame["transaction_count"]) == [1, 1]
    major = failure_breakdown(failures_wh, "rail", type="OUTGOING", major=True)
    assert set(major["resolved_amount_major"]) == {220.0, 1.0}
    # grouped by the type itself: one `type` column, as grouped by `[]`
    by_type = failure_breakdown(failures_wh, "type")
    assert list(by_type.columns) == list(failure_breakdown(failures_wh, []).columns)
    assert by_type.equals(failure_breakdown(failures_wh, []))


def test_failures_from_outgoing_fee_rows_and_missing_type(failures_wh: Warehouse) -> None:
    insert(failures_wh, "outgoing_fees", FEE_ROWS)
    frame = failure_breakdown(failures_wh.fees(), [])
    assert set(frame["type"]) == {"OUTGOING"}  # rows of outgoing_fees are outgoing
    assert frame["attempted_count"].sum() == 1 + 3  # EUR: C; USD: A, B, D
    with pytest.raises(ValueError, match="lacks 'type'"):
        failure_breakdown(failures_wh.transactions().drop(columns="type"))


def test_a_total_past_int64_is_a_typed_error_never_a_wrapped_number(tmp_path: Path) -> None:
    """Two amounts of 2**62 minor units (each a valid int64, as the interface allows) total
    past int64: a figure cannot hold it, and the helper says so in a typed error."""
    import json
    import uuid

    sandbox = Sandbox(seed=3, transactions=300)
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.sync(sandbox.client(), progress=False, resources=["transactions"])
        done = json.loads(
            wh.sql(
                "SELECT raw FROM transactions WHERE type = 'OUTGOING' AND status = 'COMPLETED' "
                "ORDER BY id LIMIT 1"
            )["raw"][0]
        )
        huge = {**done["sentAmount"], "amount": 2**62}
        wh.store_transactions(
            [{**done, "id": f"Transaction:{uuid.uuid4()}", "sentAmount": huge} for _ in range(2)]
        )
        assert len(fee_breakdown(wh)) > 0  # row by row, each amount fits
        with pytest.raises(InvalidArgumentError, match="past the int64 range of minor units"):
            fees_collected(wh)


def test_reference_rates_reach_the_query_exactly_as_given() -> None:
    # the rates travel as one JSON text inside the query (a VALUES list of a year of daily
    # rates took 10 s to parse at each call): every instant, corridor and rate comes out of
    # DuckDB exactly as it went in, the rate to the last bit
    import duckdb

    from paylens.analysis._fees import _rates_sql, reference_series

    rates = pd.DataFrame(
        {
            "date": pd.to_datetime(
                ["2025-01-01", "2025-01-02", "2025-01-02T13:45:10.123456+02:00"],
                format="ISO8601",
                utc=True,
            ),
            "sent_currency": ["USD", "USD", "GBP"],
            "received_currency": ["EUR", "EUR", "JPY"],
            "mid_rate": [0.9123456789012345, 1 / 3, 187.00000000000003],
        }
    )
    series = reference_series(rates)
    got = duckdb.sql(_rates_sql(series)).df()
    want = series.assign(at=pd.to_datetime(series["at"], utc=True))
    assert len(got) == len(want) == 6  # with the inverse of each corridor
    for (at, s, r, mid), row in zip(
        want.itertuples(index=False, name=None), got.itertuples(index=False), strict=True
    ):
        assert pd.Timestamp(row.valid_from) == at and (row.s, row.r) == (s, r)
        assert row.mid == mid and math.isfinite(row.mid)  # bit for bit
    assert pd.Timestamp("2025-01-02T11:45:10.123456Z") in set(got["valid_from"])
