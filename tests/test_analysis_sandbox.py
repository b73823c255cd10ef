"""The analysis helpers on sandbox data, where the sandbox's documented formula gives each
answer exactly, and against the warehouse rows recomputed here with pandas."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from paylens import Sandbox
from paylens.analysis import card_summary, fee_breakdown, settlement_times
from paylens.warehouse import Warehouse


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return Sandbox(seed=5, transactions=3_000)


@pytest.fixture(scope="module")
def wh(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Warehouse]:
    with Warehouse(tmp_path_factory.mktemp("analysis") / "sandbox.duckdb") as warehouse:
        warehouse.sync(sandbox.client(), progress=False)
        yield warehouse


@pytest.fixture(scope="module")
def mids(sandbox: Sandbox) -> dict[tuple[str, str], float]:
    """The sandbox's mid rates of today, as `GET /exchange-rates` serves them (one rate per
    corridor: the exact checks of a mapping of rates)."""
    rates = sandbox.client().exchange_rates.list()
    return {(r.source_currency.code, r.destination_currency.code): r.exchange_rate for r in rates}


def test_every_residual_is_zero(wh: Warehouse) -> None:
    frame = fee_breakdown(wh, status=None)
    assert len(frame) == len(wh.fees()) > 1_000
    assert "SANDBOX DATA" in frame.attrs["source"]
    assert (frame["residual_minor"] == 0).all()
    assert (frame["fees_minor"] == frame["components_minor"]).all()
    assert (frame["service_variable_fee_mismatch_minor"] == 0).all()
    # every component took part somewhere, with currencies of 0, 2, 3, 6 and 8 decimals
    for column in (
        "service_variable_fee_minor",
        "platform_fee_minor",
        "counterparty_fixed_fee_minor",
    ):
        assert (frame[column] > 0).any()
    assert {0, 2, 8} <= set(frame["received_decimals"]) and {2, 6} <= set(frame["sent_decimals"])


def test_counterparty_fee_in_sending_currency_follows_the_formula(wh: Warehouse) -> None:
    frame = fee_breakdown(wh)
    c = frame["counterparty_fixed_fee_received_minor"].to_numpy(dtype=np.float64)
    x = frame["exchange_rate"].to_numpy(dtype=np.float64)
    shift = (frame["sent_decimals"].astype(int) - frame["received_decimals"].astype(int)).to_numpy()
    c_s = np.floor(c * x * np.array([10.0**k for k in shift]) + 0.5).astype(np.int64)
    assert (frame["counterparty_fixed_fee_minor"].to_numpy(dtype=np.int64) == c_s).all()


def test_fx_spread_against_the_sandbox_mid_rates(
    sandbox: Sandbox, wh: Warehouse, mids: dict[tuple[str, str], float]
) -> None:
    frame = fee_breakdown(wh, reference_rates=mids)
    cross = frame[
        (frame["sent_currency"] != frame["received_currency"]) & frame["reference_rate"].notna()
    ]
    assert len(cross) > 500
    for row in cross.to_dict("records"):
        pair = (row["sent_currency"], row["received_currency"])
        # a corridor served only the other way round is priced at the inverse
        mid = mids[pair] if pair in mids else 1.0 / mids[pair[::-1]]
        x = row["exchange_rate"]
        assert row["reference_rate"] == mid
        assert row["fx_spread_rate"] == x / mid - 1
        scale = 10.0 ** (row["sent_decimals"] - row["received_decimals"])
        cost = math.floor(float(row["received_minor"]) * scale * (x - mid) + 0.5)
        assert row["fx_spread_cost_minor"] == cost
        assert row["total_cost_minor"] == row["fees_minor"] + cost
    # the sandbox's rates move daily: against the mid of each transaction's day (the dated
    # series), its spread is the one it draws, between 0.1 % and 1 % (float rounding aside)
    dated = fee_breakdown(wh, reference_rates=sandbox.reference_rates())
    dated = dated[dated["sent_currency"] != dated["received_currency"]]
    assert dated["reference_rate"].notna().all() and len(dated) > 500
    assert dated["fx_spread_rate"].between(0.001 - 1e-10, 0.01 + 1e-10).all()


def test_grouped_fees_are_the_sums_of_the_rows(
    wh: Warehouse, mids: dict[tuple[str, str], float]
) -> None:
    rows = fee_breakdown(wh, reference_rates=mids)
    grouped = fee_breakdown(wh, ["corridor", "month"], reference_rates=mids)
    sums = ["sent_minor", "fees_minor", "platform_fee_minor", "counterparty_fixed_fee_minor"]
    expected = rows.groupby(["corridor", "month"])[[*sums, "received_minor"]].sum()
    got = grouped.set_index(["corridor", "month"])[[*sums, "received_minor"]]
    pd.testing.assert_frame_equal(got.sort_index(), expected.sort_index(), check_dtype=False)
    assert (grouped["residual_minor"] == 0).all() and (grouped["residual_count"] == 0).all()
    by_rail = fee_breakdown(wh, "rail").groupby("sent_currency")["fees_minor"].sum()
    assert by_rail.to_dict() == rows.groupby("sent_currency")["fees_minor"].sum().to_dict()


def test_settlement_lifecycles_and_times(wh: Warehouse) -> None:
    fees = wh.fees()
    rows = settlement_times(wh)
    assert len(rows) == len(fees)
    life = rows.set_index("id")["lifecycle"]
    status = fees.set_index("id")["status"]
    assert (life[status == "COMPLETED"] == "completed").all()
    assert (life[status == "EXPIRED"] == "expired").all()
    assert (
        life[status == "FAILED"]
        .isin(["failed", "refunded", "refund_pending", "refund_failed", "cancelled"])
        .all()
    )
    assert (life[status.isin(["PENDING", "PROCESSING", "PENDING_AUTHORIZATION"])] == "open").all()
    assert (life == "open").sum() > 0 and (life == "refunded").sum() > 0
    settled = rows[rows["lifecycle"] == "completed"]
    seconds = (settled["settled_at"] - settled["created_at"]).dt.total_seconds()
    assert (settled["settlement_seconds"] == seconds).all()
    assert (settled["settled_at_source"] == "settled_at").all()
    # the funding source splits the wait for money from the rail's speed
    by_source = settlement_times(wh, "source_type").set_index("source_type")
    assert (
        by_source.loc["REALTIME_FUNDING", "p50_seconds"] > by_source.loc["ACCOUNT", "p50_seconds"]
    )


def test_card_totals_match_the_rows(wh: Warehouse) -> None:
    cards = wh.card_transactions()
    frame = card_summary(wh, []).set_index("currency")
    for currency, group in cards.groupby("authorized_amount_currency"):
        got = frame.loc[currency]
        assert got["transaction_count"] == len(group)
        assert got["authorized_minor"] == group["authorized_amount_minor"].sum()
        assert got["settled_minor"] == group["settled_amount_minor"].fillna(0).sum()
        assert got["refunded_minor"] == group["refunded_amount_minor"].fillna(0).sum()
        assert got["exception_count"] == (group["status"] == "EXCEPTION").sum()
        assert got["partially_settled_count"] == (group["status"] == "PARTIALLY_SETTLED").sum()
    assert frame["stale_hold_count"].sum() > 0


def test_status_history_times_a_card_refunded_since_the_last_sync(tmp_path: Path) -> None:
    sandbox = Sandbox(seed=21, transactions=1_500)
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.sync(sandbox.client(), progress=False)
        before = card_summary(wh).set_index("id")
        sandbox.advance(timedelta(days=20))
        wh.sync(sandbox.client(), progress=False)
        after = card_summary(wh).set_index("id")
    refunded = after.index[
        (after["status"] == "REFUNDED") & before.reindex(after.index)["status"].isin(["SETTLED"])
    ]
    assert len(refunded) > 0
    for i in refunded:
        assert after.loc[i, "last_clearing_source"] == "status_history"
        # the clearing time is what was seen before the refund: the record's last event then
        assert after.loc[i, "last_clearing_at"] == before.loc[i, "last_clearing_at"]


def _has_a_non_na_missing_value(column) -> bool:
    import numpy as np

    if column.dtype == object:
        return any(v is None or (isinstance(v, float) and np.isnan(v)) for v in column)
    # numpy floats and datetimes hold NaN / NaT, not pandas' <NA>
    return isinstance(column.dtype, np.dtype) and column.dtype.kind in "fmM" and column.isna().any()


def test_a_missing_value_is_na_in_every_frame() -> None:
    """README: "A missing value is `<NA>` in every frame" (every helper of the README's
    Analysis block and every warehouse frame)."""
    from paylens import analysis
    from paylens.sandbox import mid_rate_series

    sandbox = Sandbox(seed=0, transactions=3_000)
    with Warehouse(":memory:") as wh:
        wh.sync(sandbox.client(), progress=False)
        mids = mid_rate_series("2025-04-01", "2025-10-31")
        frames = {
            "revenue": analysis.fees_collected(wh, reference_rates=mids),
            "revenue without rates": analysis.fees_collected(wh),
            "fee_breakdown": analysis.fee_breakdown(wh, by="corridor"),
            "fee_breakdown status=None": analysis.fee_breakdown(wh, by="corridor", status=None),
            "settlement_times": analysis.settlement_times(wh, by=["rail", "source_type"]),
            "failure_breakdown": analysis.failure_breakdown(wh, by="rail"),
            "refund_summary": analysis.refund_summary(wh, by="refund_reason"),
            "card_summary": analysis.card_summary(wh, by="merchant"),
            "transactions": wh.transactions(),
            "fees": wh.fees(),
            "card_transactions": wh.card_transactions(),
            "customers": wh.customers(),
            "status_history": wh.status_history(),
        }
        for name, frame in frames.items():
            assert len(frame) > 0, name
            bad = [c for c in frame.columns if _has_a_non_na_missing_value(frame[c])]
            assert bad == [], (name, bad)
