"""The sandbox's lifecycle beside the planned events: approvals, receipt confirmations and late
arrivals made by others as the clock moves (`World.lifecycle`), off unless configured."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from paylens import Sandbox

END = datetime(2025, 10, 13, tzinfo=UTC)


def fresh() -> Sandbox:
    return Sandbox(seed=31, transactions=2_000, start=END - timedelta(days=30))


def test_off_by_default() -> None:
    sandbox = fresh()
    counts = sandbox.advance(timedelta(days=1))
    assert not {"late", "approved", "rejected", "receipts"} & set(counts)
    assert sandbox.world.transaction_count() == sandbox.world.store.n


def test_late_records_are_listed_only_once_they_arrive() -> None:
    sandbox = fresh()
    sandbox.world.lifecycle.configure(late=1.0, late_by=timedelta(days=2))
    listed = sandbox.world.transaction_count()
    counts = sandbox.advance(timedelta(hours=12))
    assert counts["late"] == counts["created"] > 0
    client = sandbox.client()
    assert sandbox.world.transaction_count() == listed
    page = next(iter(client.transactions.list(limit=1).pages(raw=True)))
    assert page.total_count == listed
    newest = sandbox.world.tx.transactions([sandbox.world.store.n - 1], sandbox.world.now_us)[0]
    assert client.transactions.get(newest["id"]).id == newest["id"]  # readable by id at once
    sandbox.world.lifecycle.configure(late=0.0)
    sandbox.advance(timedelta(days=2))
    arrived = {t["id"]: t for t in sandbox.world.all_transactions()}
    assert newest["id"] in arrived and arrived[newest["id"]]["createdAt"] == newest["createdAt"]
    assert sandbox.world.transaction_count() == sandbox.world.store.n


def test_operators_decide_waiting_payouts() -> None:
    sandbox = fresh()
    waiting = sandbox.world.pending_approval_ids()
    assert waiting
    sandbox.world.lifecycle.configure(approvals=1.0)
    counts = sandbox.advance(timedelta(minutes=1))
    assert counts["approved"] + counts["rejected"] == len(waiting)
    assert sandbox.world.pending_approval_ids() == []
    after = {i: sandbox.world.get_transaction_wire(i)["status"] for i in waiting}
    assert set(after.values()) <= {"PROCESSING", "COMPLETED", "FAILED"}
    assert sum(s == "FAILED" for s in after.values()) == counts["rejected"]


@pytest.mark.parametrize("receipts", [1, 4])
def test_receivers_confirm_old_completed_transfers_without_a_status_change(receipts: int) -> None:
    sandbox = fresh()
    sandbox.world.lifecycle.configure(receipts=receipts, receipt_age=timedelta(days=5))
    before = {t["id"]: t for t in sandbox.world.all_transactions()}
    counts = sandbox.advance(timedelta(minutes=1))
    after = {t["id"]: t for t in sandbox.world.all_transactions()}
    confirmed = [
        t
        for i, t in after.items()
        if t.get("receiptDeliveryConfirmedAt") != before[i].get("receiptDeliveryConfirmedAt")
    ]
    assert counts["receipts"] == len(confirmed) == receipts
    for t in confirmed:
        assert t["status"] == before[t["id"]]["status"] == "COMPLETED"
        assert t["type"] != "CARD"
        created = datetime.fromisoformat(t["createdAt"].replace("Z", "+00:00"))
        assert created < sandbox.now - timedelta(days=5)
