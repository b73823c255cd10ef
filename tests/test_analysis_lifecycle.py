"""The lifecycle vocabulary, Kaplan–Meier settlement times and argument checks, on hand-built
wire records stored through `Warehouse.store_transactions`; every answer worked out here."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from paylens.analysis import (
    LIFECYCLES,
    card_summary,
    failure_breakdown,
    fee_breakdown,
    fees_collected,
    refund_summary,
    settlement_times,
)
from paylens.errors import InvalidArgumentError
from paylens.warehouse import Warehouse

T = datetime(2025, 3, 10, 12, 0, tzinfo=UTC)  # the as_of of every test here


def iso(seconds_before: float) -> str:
    """The instant `seconds_before` T (negative: after), as the wire writes it."""
    t = T - timedelta(seconds=seconds_before)
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def usd(amount: int) -> dict[str, Any]:
    return {"amount": amount, "currency": {"code": "USD", "decimals": 2}}


def outgoing(id: str, status: str, created: float, **fields: Any) -> dict[str, Any]:
    """An outgoing USD→USD record created `created` seconds before T."""
    return {
        "id": f"Transaction:{id}",
        "type": "OUTGOING",
        "direction": "DEBIT",
        "status": status,
        "customerId": "Customer:a",
        "platformCustomerId": "a",
        "source": {"sourceType": "ACCOUNT", "accountId": "InternalAccount:1"},
        "destination": {"destinationType": "ACCOUNT", "accountId": "ExternalAccount:1"},
        "sentAmount": usd(10_000),
        "receivedAmount": usd(9_900),
        "exchangeRate": 1.0,
        "fees": 100,
        "platformFees": 0,
        "rateDetails": {
            "counterpartyMultiplier": 1.0,
            "counterpartyFixedFee": 0,
            "gridApiMultiplier": 1.0,
            "gridApiFixedFee": 100,
            "gridApiVariableFeeRate": 0.0,
            "gridApiVariableFeeAmount": 0,
        },
        "paymentRail": "SEPA",
        "createdAt": iso(created),
        "updatedAt": iso(created),
        **fields,
    }


def refund(reason: str, status: str = "COMPLETED") -> dict[str, Any]:
    return {"reference": "R", "initiatedAt": iso(50), "settledAt": iso(20), "status": status,
            "reason": reason}  # fmt: skip


@pytest.fixture
def wh(tmp_path: Path) -> Iterator[Warehouse]:
    with Warehouse(tmp_path / "hand.duckdb") as warehouse:
        yield warehouse


# -- the vocabulary --------------------------------------------------------------------------


def test_every_lifecycle_from_status_reason_and_refund(wh: Warehouse) -> None:
    wh.store_transactions(
        [
            outgoing("open", "PROCESSING", 100),
            outgoing("done", "COMPLETED", 100, settledAt=iso(50)),
            outgoing("nothing-moved", "FAILED", 100, failureReason="QUOTE_RATE_UNAVAILABLE"),
            outgoing("debited", "FAILED", 100, failureReason="ACCOUNT_INVALID",
                     refund=refund("TRANSACTION_FAILED")),
            outgoing("expired", "EXPIRED", 100),
            outgoing("rejected", "REJECTED", 100),
            # a cancel: FAILED with a USER_CANCELLATION refund (its reason is the service's pick)
            outgoing("cancel", "FAILED", 100, failureReason="QUOTE_EXECUTION_FAILED",
                     refund=refund("USER_CANCELLATION")),
            outgoing("old", "FAILED", 100, failureReason="SETTLEMENT_FAILED",
                     refund=refund("TRANSACTION_FAILED", "PENDING")),
            outgoing("ln", "FAILED", 100, failureReason="LIGHTNING_PAYMENT_FAILED"),
            outgoing("coarse", "FAILED", 100, failureReason="COUNTERPARTY_POST_TX_FAILED",
                     refund=refund("TIMEOUT")),
            outgoing("future", "SOMETHING_NEW", 100),
            outgoing("owed", "FAILED", 100, failureReason="ACCOUNT_INVALID",
                     refund=refund("TRANSACTION_FAILED", "FAILED")),
        ]
    )  # fmt: skip
    rows = failure_breakdown(wh).set_index("id")
    lifecycle = {i.removeprefix("Transaction:"): v for i, v in rows["lifecycle"].items()}
    assert lifecycle == {
        "open": "open", "done": "completed", "nothing-moved": "failed",
        "debited": "refunded", "owed": "refund_failed", "expired": "expired", "rejected": "rejected",
        "cancel": "cancelled", "old": "refund_pending", "ln": "failed",
        "coarse": "refunded", "future": "open",
    }  # fmt: skip
    assert set(lifecycle.values()) == set(LIFECYCLES)
    old = rows.loc["Transaction:old"]
    assert (old["failure_reason"], old["reported_failure_reason"]) == (
        "QUOTE_EXECUTION_FAILED",
        "SETTLEMENT_FAILED",
    )
    assert (old["reason_removed"], old["reason_deprecated"]) == (True, False)
    assert rows.loc["Transaction:ln", "reason_deprecated"]
    coarse = rows.loc["Transaction:coarse"]
    assert (coarse["reason_coarse"], coarse["reason_deprecated"]) == (True, True)

    groups = failure_breakdown(wh, by=[])
    # 12 attempts, 2 open, 10 resolved; failures: nothing-moved, ln (failed) + debited, owed,
    # old, coarse (after debit) = 6 of 10; payout failures: debited, owed (granular) + coarse
    # = 3, 1 coarse
    assert set(groups["attempted_count"]) == {12}
    assert set(groups["open_count"]) == {2}
    assert set(groups["resolved_count"]) == {10}
    assert set(groups["failure_rate"]) == {6 / 10}
    assert set(groups["coarse_payout_share"]) == {1 / 3}
    got = {
        (r.lifecycle, None if pd.isna(r.failure_reason) else r.failure_reason): (
            r.transaction_count,
            r.share_of_resolved,
        )
        for r in groups.itertuples()
    }
    assert got == {
        ("failed", "QUOTE_RATE_UNAVAILABLE"): (1, 1 / 10),
        ("failed", "LIGHTNING_PAYMENT_FAILED"): (1, 1 / 10),
        ("refunded", "ACCOUNT_INVALID"): (1, 1 / 10),
        ("refund_failed", "ACCOUNT_INVALID"): (1, 1 / 10),
        ("refund_pending", "QUOTE_EXECUTION_FAILED"): (1, 1 / 10),  # SETTLEMENT_FAILED
        ("refunded", "COUNTERPARTY_POST_TX_FAILED"): (1, 1 / 10),
        ("expired", None): (1, 1 / 10),
        ("rejected", None): (1, 1 / 10),
        ("cancelled", "QUOTE_EXECUTION_FAILED"): (1, 1 / 10),
    }


def test_failure_breakdown_refuses_its_own_dimensions(wh: Warehouse) -> None:
    wh.store_transactions(km_records())
    with pytest.raises(InvalidArgumentError, match="failure_reason"):
        failure_breakdown(wh, by="failure_reason")


# -- Kaplan–Meier --------------------------------------------------------------------------


def km_records() -> list[dict[str, Any]]:
    """Worked example (seconds from creation; expected settlement 35 s after creation):

        A settled at 10   B settled at 20   C open, 25 old   D settled at 30
        E settled at 40   F open, 50 old     G failed (not a settlement time)

    times 10 20 25+ 30 40 50+: at risk n = 6, 5, -, 3, 2; S(10) = 5/6, S(20) = 4/6,
    S(30) = 4/6 * 2/3 = 4/9, S(40) = 4/9 * 1/2 = 2/9. p50 = 30 (first S <= 0.5); p90 and p99
    are unknowable (S never falls to 0.1): NULL. Settled-only figures would say p50 = 25.
    Breaches against 35 s: E late, F open past it (overdue), D/A/B on time, C undecided:
    2 of 5. Failure rate: G / resolved (A B D E G) = 1/5.
    """
    expected = {"expectedSettlementAt": None, "settlementTimelineSeconds": 35}

    def made(id: str, status: str, age: float, settled: float | None = None, **more: Any):
        fields = {**expected, "expectedSettlementAt": iso(age - 35)}
        if settled is not None:
            fields["settledAt"] = iso(age - settled)
        return outgoing(id, status, age, **fields, **more)

    return [
        made("A", "COMPLETED", 100, 10),
        made("B", "COMPLETED", 200, 20),
        made("C", "PENDING", 25),
        made("D", "COMPLETED", 300, 30),
        made("E", "COMPLETED", 400, 40),
        made("F", "PROCESSING", 50),
        made("G", "FAILED", 500, failureReason="ACCOUNT_INVALID"),
    ]


def test_kaplan_meier_by_hand(wh: Warehouse) -> None:
    wh.store_transactions(km_records())
    row = settlement_times(wh, by="rail", as_of=T).iloc[0]
    assert row["rail"] == "SEPA"
    assert (row["p50_seconds"], row["open_count"], row["completed_count"]) == (30.0, 2, 4)
    assert pd.isna(row["p90_seconds"]) and pd.isna(row["p99_seconds"])
    assert (row["expected_count"], row["expected_breach_count"]) == (5, 2)
    assert row["expected_breach_rate"] == 2 / 5
    assert row["open_overdue_count"] == 1
    assert (row["resolved_count"], row["failure_rate"]) == (5, 1 / 5)

    # measured 15 s earlier: C (created 25 s before T) is 10 s old, F 35 s (not overdue yet:
    # 35 is not past 35), A..E as before but nothing created after as_of counts
    earlier = settlement_times(wh, by=[], as_of=T - timedelta(seconds=15)).iloc[0]
    assert (earlier["open_count"], earlier["open_overdue_count"]) == (2, 0)
    assert earlier["expected_breach_count"] == 1


def test_a_settlement_after_as_of_is_open_then(wh: Warehouse) -> None:
    # settled 10 s after T, created 60 s before: at T it is open and 60 s old
    wh.store_transactions(
        [outgoing("late", "COMPLETED", 60, settledAt=iso(-10)), *km_records()[:2]]
    )
    rows = settlement_times(wh, as_of=T).set_index("id")
    late = rows.loc["Transaction:late"]
    assert pd.isna(late["settlement_seconds"]) and late["open_seconds"] == 60.0
    # times 10, 20, 60+: S(10) = 2/3, S(20) = 1/3: p50 = 20, p90 unknowable
    row = settlement_times(wh, by=[], as_of=T).iloc[0]
    assert row["p50_seconds"] == 20.0 and pd.isna(row["p90_seconds"])


def test_instant_rail_sla(wh: Warehouse) -> None:
    instant = {"paymentRail": "FEDNOW", "settlementTimelineSeconds": 5}
    wh.store_transactions(
        [
            outgoing("fast", "COMPLETED", 500, settledAt=iso(470), **instant),  # 30 s
            outgoing("slow", "COMPLETED", 500, settledAt=iso(410), **instant),  # 90 s: breach
            outgoing("stuck", "PROCESSING", 100, **instant),  # open 100 s > 60: breach
            outgoing("young", "PENDING", 10, **instant),  # open 10 s: not known yet
            outgoing(
                "funded", "COMPLETED", 9_000, settledAt=iso(4_000), **instant,
                source={"sourceType": "REALTIME_FUNDING"},
            ),  # waits for funds: not the rail's time, left out
        ]
    )  # fmt: skip
    row = settlement_times(wh, by="source_type", as_of=T).set_index("source_type")
    account = row.loc["ACCOUNT"]
    assert (account["sla_count"], account["sla_breach_count"]) == (3, 2)
    assert account["sla_breach_rate"] == 2 / 3
    # against the 5 s timeline every instant transfer is late: the measure that means nothing
    assert account["timeline_breach_rate"] == 1.0
    assert row.loc["REALTIME_FUNDING", "sla_count"] == 0
    custom = settlement_times(wh, by=[], as_of=T, instant_sla=timedelta(seconds=95)).iloc[0]
    assert (custom["sla_count"], custom["sla_breach_count"]) == (3, 1)


# -- arguments -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "argument", "named"),
    [
        (lambda wh: fee_breakdown(wh, status="NOPE"), "status", "COMPLETED"),
        (lambda wh: fee_breakdown(wh, status="complete"), "status", "did you mean 'COMPLETED'"),
        (lambda wh: fees_collected(wh, status=["COMPLETED", 3]), "status", "FAILED"),
        (lambda wh: settlement_times(wh, type="nope"), "type", "OUTGOING"),
        (lambda wh: failure_breakdown(wh, type="nope"), "type", "INCOMING"),
        (lambda wh: refund_summary(wh, type="CARD"), "type", "INCOMING"),
        (lambda wh: settlement_times(wh, by=123), "by", "rail"),
        (lambda wh: fee_breakdown(wh, by="nope"), "by", "corridor"),
        (lambda wh: card_summary(wh, stale_after=7), "stale_after", "timedelta"),
        (lambda wh: card_summary(wh, stale_after=timedelta(0)), "stale_after", "positive"),
        (lambda wh: card_summary(wh, status="SETTLED_X"), "status", "PARTIALLY_SETTLED"),
        (lambda wh: settlement_times(wh, as_of="1990-01-01"), "as_of", "before the first"),
        (lambda wh: settlement_times(wh, as_of="not a time"), "as_of", "not a time"),
        (lambda wh: settlement_times(wh, as_of=5), "as_of", "datetime"),
        (lambda wh: settlement_times(wh, instant_sla=60), "instant_sla", "timedelta"),
        (lambda wh: fee_breakdown(wh, reference_rates={"USD→EUR": 0.0}), "reference_rates", "> 0"),
        (lambda wh: fee_breakdown(wh, reference_rates={"USDEUR": 1.1}), "reference_rates", "→"),
        (lambda wh: fee_breakdown([1, 2]), "data", "Warehouse"),
    ],
)
def test_bad_arguments_are_refused_by_name(
    wh: Warehouse, call: Any, argument: str, named: str
) -> None:
    wh.store_transactions(km_records())
    with pytest.raises(InvalidArgumentError, match=named) as caught:
        call(wh)
    assert caught.value.argument == argument


def test_lowercase_kinds_are_accepted(wh: Warehouse) -> None:
    wh.store_transactions(km_records())
    assert len(settlement_times(wh, type="outgoing", as_of=T)) == 7


# -- reference rates -----------------------------------------------------------------------


def eur(amount: int) -> dict[str, Any]:
    return {"amount": amount, "currency": {"code": "EUR", "decimals": 2}}


def test_a_dated_reference_series_is_joined_as_of_creation(wh: Warehouse) -> None:
    day = 86_400
    wh.store_transactions(
        [
            outgoing(name, "COMPLETED", age, settledAt=iso(age - 60), receivedAmount=eur(9_000),
                     exchangeRate=1.1)
            for name, age in (("before", 9 * day), ("first", 5 * day), ("second", day))
        ]
    )  # fmt: skip
    series = pd.DataFrame(
        {
            "date": [(T - timedelta(days=d)).date() for d in (6, 6, 2)],
            "sent_currency": ["EUR", "USD", "EUR"],
            "received_currency": ["USD", "EUR", "USD"],
            "mid_rate": [1 / 1.08, 1.09, 1 / 1.05],  # USD→EUR given once: used as given
        }
    )
    rows = fee_breakdown(wh, reference_rates=series).set_index("id")
    assert pd.isna(rows.loc["Transaction:before", "reference_rate"])  # before the series
    assert rows.loc["Transaction:first", "reference_rate"] == 1.09
    # after the EUR→USD change on day -2 the USD→EUR rate given on day -6 still holds
    assert rows.loc["Transaction:second", "reference_rate"] == 1.09
    one_way = series[series["sent_currency"] == "EUR"]
    rows = fee_breakdown(wh, reference_rates=one_way).set_index("id")
    assert rows.loc["Transaction:first", "reference_rate"] == 1 / (1 / 1.08)
    assert rows.loc["Transaction:second", "reference_rate"] == 1 / (1 / 1.05)
    # the margin: 9,000 cents delivered at 1.1 instead of 1.05
    assert rows.loc["Transaction:second", "fx_spread_cost_minor"] == math.floor(
        9_000.0 * 1.0 * (1.1 - 1 / (1 / 1.05)) + 0.5
    )
    summary = fees_collected(wh, by=[], reference_rates=one_way).iloc[0]
    assert (summary["cross_currency_count"], summary["with_reference_count"]) == (3, 2)
    assert summary["fx_margin_status"].startswith("partial")
