"""Month-end close over the wire on a service that is not the sandbox: the second service
(`tests/_second_service.py`, its own habits within the spec) served on loopback, synced,
September closed; then the service's records change (a payout returned after its month closed,
a transfer settling late into it, a refund failing) and October is closed. The closed month's
stored snapshot stays byte for byte; the adjustments sit in October, each with its reason and
transfer id, and sum to the difference; and every P&L, close and liability figure is recomputed
here from the raw records in plain Python, to the minor unit."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from paylens import Client
from paylens.analysis import platform_pnl, refunds_owed
from paylens.close import adjustments, close_month, closed_figures, closed_tables
from paylens.warehouse import Warehouse

from ._second_service import Habits, SecondService, fmt, served, to_ns

pytestmark = pytest.mark.http

SEPT_END = datetime(2025, 10, 1, tzinfo=UTC)
FINAL = {"COMPLETED", "FAILED", "EXPIRED", "REJECTED", "CANCELLED"}


def _month(text: str) -> str:
    return pd.Timestamp(text).tz_convert("UTC").strftime("%Y-%m")


def _raw(wh: Warehouse) -> list[dict[str, Any]]:
    return [json.loads(r) for r in wh.sql("SELECT raw FROM transactions ORDER BY id")["raw"]]


def pnl_from_raw(records: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, int]]:
    """The platform's P&L per settlement month and currency, from the raw JSON: this
    service's transfers are in one currency (exchange rate 1), so no FX margin and no
    counterparty conversion; one without a received amount has an unknown margin."""
    out: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for r in records:
        if r["status"] != "COMPLETED" or not r.get("settledAt"):
            continue
        if r["type"] == "INCOMING" and "sentAmount" in r:
            row = out[(_month(r["settledAt"]), r["sentAmount"]["currency"]["code"])]
            row["incoming_count"] += 1
            row["service_incoming_fees_minor"] += r.get("fees", 0)
        elif r["type"] == "OUTGOING":
            row = out[(_month(r["settledAt"]), r["sentAmount"]["currency"]["code"])]
            details = r.get("rateDetails") or {}
            service = details.get("gridApiFixedFee", 0) + details.get("gridApiVariableFeeAmount", 0)
            row["outgoing_count"] += 1
            received = (r.get("receivedAmount") or {}).get("currency", {}).get("code")
            # no received currency (receivedAmount is optional): the FX margin is unknown
            row["fx_margin_unknown_count"] += received != r["sentAmount"]["currency"]["code"]
            row["platform_revenue_minor"] += r.get("platformFees", 0)
            row["service_fees_minor"] += service
            row["unattributed_fees_minor"] += r.get("fees", 0) - service - r.get("platformFees", 0)
    return out


def accruals_from_raw(records: list[dict[str, Any]], end: datetime) -> list[tuple[str, int]]:
    """Transfers created before `end` and not final by then: (id, amount), by id."""
    out = []
    for r in records:
        if r["type"] not in ("INCOMING", "OUTGOING") or pd.Timestamp(r["createdAt"]) >= end:
            continue
        done_at = r.get("settledAt") or r.get("updatedAt")
        if r["status"] not in FINAL or pd.Timestamp(done_at) >= end:
            amount = (r.get("sentAmount") if r["type"] == "OUTGOING" else r["receivedAmount"]) or {}
            out.append((r["id"], amount.get("amount")))
    return sorted(out)


def owed_from_raw(
    records: list[dict[str, Any]], as_of: datetime
) -> dict[tuple[str, str, str], tuple[int, int]]:
    """Refunds owed to senders per (currency, refund status, age in whole days since the
    record's last update: 0-7, 8-30, 31-90, over 90): count and amount debited."""
    out: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    for r in records:
        refund = r.get("refund") or {}
        if r["status"] != "FAILED" or refund.get("status") not in ("PENDING", "FAILED"):
            continue
        if refund.get("reason") == "USER_CANCELLATION":
            continue
        amount = r["sentAmount"] if r["type"] == "OUTGOING" else r["receivedAmount"]
        days = (as_of - pd.Timestamp(r["updatedAt"]).to_pydatetime()).days
        age = next(
            label
            for label, top in (("0-7 days", 7), ("8-30 days", 30), ("31-90 days", 90))
            if days <= top
        ) if days <= 90 else "over 90 days"  # fmt: skip
        key = (amount["currency"]["code"], refund["status"], age)
        out[key][0] += 1
        out[key][1] += amount["amount"]
    return {k: (n, v) for k, (n, v) in out.items()}


def assert_pnl(frame: pd.DataFrame, want: dict[tuple[str, str], dict[str, int]]) -> None:
    assert len(frame) == len(want)
    for row in frame.to_dict("records"):
        w = want[(row["period"], row["currency"])]
        for column, value in row.items():
            if column.endswith(("_minor", "_count")):
                assert value == w.get(column, 0), (row["period"], row["currency"], column)


def assert_owed(wh: Warehouse, records: list[dict[str, Any]], as_of: datetime) -> None:
    owed = refunds_owed(wh, as_of=as_of)
    got: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    for r in owed.itertuples():
        key = (r.currency, "PENDING" if r.lifecycle == "refund_pending" else "FAILED", r.age)
        got[key][0] += r.transaction_count
        got[key][1] += r.owed_minor
    want = owed_from_raw(records, as_of)
    assert want and {k: tuple(v) for k, v in got.items()} == want


def test_close_over_the_wire_on_a_second_service(tmp_path: Path) -> None:
    svc = SecondService(
        seed=11, habits=Habits(returns=True), start=datetime(2025, 8, 25, tzinfo=UTC), days=20
    )
    # this service charges a fee on outgoing transfers and, here, gives the platform a share
    for item in svc.txs.values():
        r = item.record
        if r["type"] == "OUTGOING" and "fees" in r:
            r["platformFees"] = r["fees"] // 3
    svc.advance(timedelta(days=17, hours=12))  # to 1 October, midday: September is over
    assert svc.clock > SEPT_END
    with served(svc) as url, Warehouse(tmp_path / "w.duckdb") as wh:
        client = Client(url, svc.client_id, svc.client_secret, allow_insecure=True)
        with client:
            wh.sync(client, progress=False)
        first = close_month(wh, "2025-09")
        before = _raw(wh)
        sept = {k: v for k, v in pnl_from_raw(before).items() if k[0] == "2025-09"}
        assert sept and any(v["platform_revenue_minor"] for v in sept.values())
        assert_pnl(closed_figures(first), sept)
        accruals = closed_tables(wh, "2025-09")["accruals"]
        got = sorted(zip(accruals["id"], accruals["amount_minor"], strict=True))
        assert got == accruals_from_raw(before, SEPT_END) and got
        assert_owed(wh, before, svc.clock)

        # -- in October the service's records change --------------------------------------
        svc.tick(timedelta(days=3))
        listed = svc.listed()
        returned = next(
            r for r in sorted(listed.values(), key=lambda r: r["id"])
            if r["type"] == "OUTGOING" and r["status"] == "COMPLETED"
            and _month(r["settledAt"]) == "2025-09" and r.get("platformFees", 0) > 0
        )  # fmt: skip
        svc.change(returned["id"], status="FAILED", failureReason="PAYOUT_RETURNED")
        del svc.txs[returned["id"]].record["settledAt"]
        late = next(
            r for r in sorted(listed.values(), key=lambda r: r["id"])
            if r["type"] == "OUTGOING" and r["status"] == "PROCESSING"
            and pd.Timestamp(r["createdAt"]) < SEPT_END and "fees" in r
        )  # fmt: skip
        settled_late = fmt(to_ns(SEPT_END - timedelta(hours=2)), svc.habits)
        svc.change(late["id"], status="COMPLETED", settledAt=settled_late)
        svc.txs[late["id"]].due = 2**62  # and it stays completed
        refund = next(
            r for r in sorted(listed.values(), key=lambda r: r["id"])
            if r["status"] == "FAILED" and (r.get("refund") or {}).get("status") == "PENDING"
        )  # fmt: skip
        svc.change(refund["id"], refund={**refund["refund"], "status": "FAILED"})
        svc.advance(timedelta(days=28))  # the rest of October: its own life goes on
        with Client(url, svc.client_id, svc.client_secret, allow_insecure=True) as again:
            wh.sync(again, progress=False)
        second = close_month(wh, "2025-10")

        # the closed month never moves
        assert wh.closed_periods()["2025-09"] == first
        assert close_month(wh, "2025-09") == first
        after = _raw(wh)
        now = pnl_from_raw(after)
        assert_pnl(platform_pnl(wh), now)
        october = {k: v for k, v in now.items() if k[0] == "2025-10"}
        assert_pnl(closed_figures(second), october)
        accruals = closed_tables(wh, "2025-10")["accruals"]
        got = sorted(zip(accruals["id"], accruals["amount_minor"], strict=True))
        assert got == accruals_from_raw(after, datetime(2025, 11, 1, tzinfo=UTC))
        assert_owed(wh, after, svc.clock)
        assert any(k[1] == "FAILED" for k in owed_from_raw(after, svc.clock))  # the one that failed

        # the adjustments: in the month each change happened, summing to the difference
        moved = adjustments(wh)
        sept_moved = moved[moved["closed_period"] == "2025-09"]
        mine = sept_moved.set_index("transfer_id")
        assert mine.loc[returned["id"], "reason"] == "left the closed period (now FAILED)"
        assert mine.loc[returned["id"], "period"] == "2025-10"
        assert mine.loc[returned["id"], "platform_revenue_minor"] == -returned["platformFees"]
        assert mine.loc[late["id"], "reason"] == "settled late into the closed period"
        assert mine.loc[late["id"], "outgoing_count"] == 1
        assert mine.loc[late["id"], "platform_revenue_minor"] == late.get("platformFees", 0)
        assert refund["id"] not in mine.index  # a failed refund is a liability, not P&L
        closed = {(r["currency"]): r for r in closed_figures(first).to_dict("records")}
        for code in set(closed) | {c for p, c in now if p == "2025-09"}:
            was = closed.get(code, {})
            is_ = now.get(("2025-09", code), {})
            part = sept_moved[sept_moved["currency"] == code]
            for column in (
                "platform_revenue_minor",
                "service_incoming_fees_minor",
                "unattributed_fees_minor",
                "outgoing_count",
                "incoming_count",
            ):
                assert int(part[column].sum()) == is_.get(column, 0) - was.get(column, 0), (
                    code,
                    column,
                )  # fmt: skip
        assert (sept_moved["transfer_id"].str.len() > 0).all()
        assert sept_moved["reason"].notna().all()
