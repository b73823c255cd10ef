"""card_summary on a small hand-built data set, each answer worked out by hand here (rows are
written straight into the warehouse's tables, as in `test_analysis`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pandas as pd
import pytest

from paylens.analysis import card_summary
from paylens.warehouse import Warehouse

from .test_analysis import HOUR, T0, at, by_id, insert, wh

__all__ = ["wh"]  # the fixture, shared

# -- cards ---------------------------------------------------------------------------------------

AS_OF = pd.Timestamp("2025-03-31T00:00:00Z")


def card(id: str, status: str, authorized: int, **values: Any) -> dict[str, Any]:
    return {
        "id": id, "status": status, "authorized_amount_minor": authorized,
        "authorized_amount_currency": "USD", "authorized_amount_decimals": 2,
        "authorized_at": T0, "merchant_descriptor": "CAFE", "merchant_mcc": "5814",
        "merchant_country": "US", "settlement_count": 0, "refund_count": 0,
        "pull_count": 1, "pull_total_minor": authorized, "pull_pending_count": 0, **values,
    }  # fmt: skip


def settled(amount: int, after: float, currency: str = "USD") -> dict[str, Any]:
    return {
        "settled_amount_minor": amount,
        "settled_amount_currency": currency,
        "settled_amount_decimals": 2,
        "settlement_count": 1,
        "last_event_at": at(after),
    }


CARD_ROWS = [
    card("C1", "SETTLED", 1_000, **settled(1_000, HOUR)),
    card("C2", "PARTIALLY_SETTLED", 2_000, **settled(1_500, 2 * HOUR), merchant_mcc="5411"),
    card("C3", "AUTHORIZED", 3_000),  # held 30 days: stale
    card("C4", "AUTHORIZED", 400, authorized_at=pd.Timestamp("2025-03-30T00:00:00Z")),
    card("C5", "REFUNDED", 5_000, **{**settled(5_000, 10 * 24 * HOUR), "refund_count": 1},
         refunded_amount_minor=5_000, refunded_amount_currency="USD"),
    card("C6", "EXCEPTION", 600, **settled(600, 60), pull_total_minor=0, merchant_country="GB"),
    card("C7", "SETTLED", 700, **settled(700, 100, "EUR"), authorized_amount_currency="EUR"),
    card("C8", "SETTLED", 800, **settled(900, 50, "GBP")),  # settled in another currency
]  # fmt: skip
CARD_HISTORY = [
    {"id": "C5", "type": "CARD", "previous_status": "AUTHORIZED", "status": "SETTLED",
     "record_updated_at": at(1_800), "observed_at": at(HOUR), "run_id": 1},
    {"id": "C5", "type": "CARD", "previous_status": "SETTLED", "status": "REFUNDED",
     "record_updated_at": at(10 * 24 * HOUR), "observed_at": at(11 * 24 * HOUR), "run_id": 2},
]  # fmt: skip


@pytest.fixture
def cards_wh(wh: Warehouse) -> Warehouse:
    insert(wh, "card_transactions", CARD_ROWS)
    insert(wh, "status_history", CARD_HISTORY)
    return wh


def test_card_rows(cards_wh: Warehouse) -> None:
    rows = by_id(card_summary(cards_wh, as_of=AS_OF))
    assert (rows["C1"]["settlement_seconds"], rows["C1"]["last_clearing_source"]) == (
        3600.0,
        "last_event_at",
    )
    c2 = rows["C2"]
    assert (c2["open_hold_minor"], c2["partially_settled"]) == (500, True)
    assert c2["hold_age_seconds"] == 30 * 24 * HOUR
    assert (c2["stale_hold"], c2["hold_age_bucket"]) == (True, "8–30 days")  # partial holds too
    assert (rows["C3"]["stale_hold"], rows["C3"]["open_hold_minor"]) == (True, 3_000)
    assert (rows["C4"]["stale_hold"], rows["C4"]["hold_age_seconds"]) == (False, 24 * HOUR)
    c5 = rows["C5"]  # refunded since: its clearing time comes from the status history
    assert (c5["last_clearing_at"], c5["last_clearing_source"]) == (at(1_800), "status_history")
    assert (c5["settled_minor"], c5["refunded_minor"], c5["open_hold_minor"]) == (5_000, 5_000, 0)
    c6 = rows["C6"]
    assert c6["exception"] and (c6["pull_count"], c6["pull_total_minor"]) == (1, 0)
    c8 = rows["C8"]
    assert c8["currency_mismatch"] and pd.isna(c8["settled_minor"])


def test_card_totals_per_currency(cards_wh: Warehouse) -> None:
    frame = card_summary(cards_wh, [], as_of=AS_OF).set_index("currency")
    usd = frame.loc["USD"]
    assert usd["transaction_count"] == 7
    assert usd["authorized_minor"] == 1_000 + 2_000 + 3_000 + 400 + 5_000 + 600 + 800
    assert usd["settled_minor"] == 1_000 + 1_500 + 5_000 + 600  # C8's GBP is not added
    assert (usd["refunded_minor"], usd["net_settled_minor"]) == (5_000, 8_100 - 5_000)
    assert usd["open_hold_minor"] == 500 + 3_000 + 400
    assert usd["cleared_count"] == 5  # C1, C2, C5, C6, C8
    assert usd["settlement_p50_seconds"] == 1_800.0  # of 50, 60, 1800, 3600, 7200
    assert (usd["partially_settled_count"], usd["stale_hold_count"]) == (1, 2)  # C2, C3
    assert (usd["stale_hold_minor"], usd["exception_count"]) == (500 + 3_000, 1)
    # held 30 days exactly: both in 8–30; C4 one day: 0–7
    assert (usd["open_hold_8_30_count"], usd["open_hold_8_30_minor"]) == (2, 3_500)
    assert (usd["open_hold_0_7_count"], usd["open_hold_over_30_count"]) == (1, 0)
    # no funding account is known: the exposure is unknown, not 0
    assert usd["exception_settled_minor"] == 600 and pd.isna(usd["exception_exposure_minor"])
    assert usd["funding_unknown_count"] == 7
    assert usd["currency_mismatch_count"] == 1
    funded = cards_wh.card_transactions().assign(funding_currency="USD", funding_decimals=2)
    known = card_summary(funded, [], as_of=AS_OF).set_index("currency").loc["USD"]
    assert known["exception_exposure_minor"] == 600  # cleared 600, pulled 0
    assert known["over_settled_minor"] == 0
    eur = frame.loc["EUR"]
    assert (eur["transaction_count"], eur["authorized_minor"], eur["settled_minor"]) == (
        1,
        700,
        700,
    )


def test_cards_by_merchant_mcc_country_and_status(cards_wh: Warehouse) -> None:
    by_mcc = card_summary(cards_wh, "mcc", as_of=AS_OF)
    assert list(
        zip(by_mcc["mcc"], by_mcc["currency"], by_mcc["transaction_count"], strict=True)
    ) == [
        ("5411", "USD", 1),
        ("5814", "EUR", 1),
        ("5814", "USD", 6),
    ]
    by_country = card_summary(cards_wh, ["merchant", "country"], status="EXCEPTION")
    assert list(by_country["country"]) == ["GB"] and by_country["exception_count"].iloc[0] == 1
    stale = card_summary(cards_wh, [], as_of=AS_OF, stale_after=timedelta(hours=12))
    assert stale.set_index("currency").loc["USD", "stale_hold_count"] == 3  # C4 too now
    major = card_summary(cards_wh, "currency", as_of=AS_OF, major=True).set_index("currency")
    assert major.loc["USD", "authorized_major"] == 128.0


def test_hold_age_buckets_count_whole_days(wh: Warehouse) -> None:
    """A hold 7 days and 12 hours old is 7 whole days old: in "0–7 days", not "8–30 days";
    30.5 days is in "8–30 days", 31 days in "> 30 days"."""
    ages = {"H7": 7.5, "H8": 8.0, "H30": 30.5, "H31": 31.0}
    insert(
        wh,
        "card_transactions",
        [
            card(i, "AUTHORIZED", 100, authorized_at=AS_OF - pd.Timedelta(days=d))
            for i, d in ages.items()
        ],
    )
    rows = card_summary(wh, as_of=AS_OF).set_index("id")["hold_age_bucket"].to_dict()
    assert rows == {"H7": "0–7 days", "H8": "8–30 days", "H30": "8–30 days", "H31": "> 30 days"}


def test_holds_past_the_hold_window_are_expired_exposure_not_open(cards_wh: Warehouse) -> None:
    """A hold older than the hold window (30 days by default, said in `attrs`) is expired
    exposure: its held amount is in `expired_hold_minor`, not in the open hold, the stale
    holds or the open age buckets; a hold of 30 days exactly is still open (C2, C3)."""
    insert(
        cards_wh,
        "card_transactions",
        [
            card("H31", "AUTHORIZED", 9_000, authorized_at=AS_OF - pd.Timedelta(days=31)),
            card(
                "H45",
                "PARTIALLY_SETTLED",
                2_000,
                **settled(500, HOUR),
                authorized_at=AS_OF - pd.Timedelta(days=45),
            ),
        ],
    )
    frame = card_summary(cards_wh, as_of=AS_OF)
    assert frame.attrs["hold_window"] == "30 days"
    rows = by_id(frame)
    for id, held in (("H31", 9_000), ("H45", 1_500)):
        assert rows[id]["expired_hold"] and not rows[id]["stale_hold"], id
        assert (rows[id]["open_hold_minor"], rows[id]["expired_hold_minor"]) == (0, held), id
    assert not rows["C3"]["expired_hold"] and rows["C3"]["open_hold_minor"] == 3_000
    usd = card_summary(cards_wh, [], as_of=AS_OF).set_index("currency").loc["USD"]
    assert usd["open_hold_minor"] == 500 + 3_000 + 400  # as before the expired holds came
    assert (usd["expired_hold_count"], usd["expired_hold_minor"]) == (2, 10_500)
    assert (usd["stale_hold_count"], usd["stale_hold_minor"]) == (2, 3_500)
    assert (usd["open_hold_over_30_count"], usd["open_hold_over_30_minor"]) == (0, 0)
    wider = card_summary(cards_wh, [], as_of=AS_OF, hold_window=timedelta(days=60))
    assert wider.attrs["hold_window"] == "60 days"
    usd = wider.set_index("currency").loc["USD"]
    assert usd["open_hold_minor"] == 500 + 3_000 + 400 + 10_500
    assert (usd["expired_hold_count"], usd["open_hold_over_30_count"]) == (0, 2)


def test_exception_items_are_aged(cards_wh: Warehouse) -> None:
    """An EXCEPTION item's age is the time since its authorization, bucketed as holds are."""
    insert(
        cards_wh,
        "card_transactions",
        [card("E2", "EXCEPTION", 100, authorized_at=AS_OF - pd.Timedelta(days=2))],
    )
    rows = by_id(card_summary(cards_wh, as_of=AS_OF))
    assert rows["C6"]["exception_age_seconds"] == 30 * 24 * HOUR
    assert rows["E2"]["exception_age_seconds"] == 2 * 24 * HOUR
    assert pd.isna(rows["C3"]["exception_age_seconds"])  # not an exception
    usd = card_summary(cards_wh, [], as_of=AS_OF).set_index("currency").loc["USD"]
    assert (usd["exception_0_7_count"], usd["exception_8_30_count"]) == (1, 1)
    assert usd["exception_over_30_count"] == 0
