"""What fast pages of `GET /transactions` rely on: rows are rendered to JSON once and kept until
their next planned event or a change made through the interface, so a kept text must always
equal a fresh rendering, and what is served must equal the ground truth. (Speed itself is
measured by `bench/bench_sandbox.py`.)"""

from __future__ import annotations

import base64
from datetime import timedelta
from typing import Any

import numpy as np
import orjson
import pytest

from paylens.sandbox import Sandbox
from paylens.sandbox.world.entities import iso
from paylens.sandbox.world.render import TransactionViews, WireRows
from paylens.sandbox.world.render.text import iso_texts
from paylens.sandbox.world.world import DEFAULT_END, World


def request(sandbox: Sandbox, method: str, path: str, body: Any = None) -> Any:
    """One request through the app core, as a client sends it; the decoded answer."""
    secret = f"{sandbox.client_id}:{sandbox.client_secret}".encode()
    auth = {"authorization": "Basic " + base64.b64encode(secret).decode()}
    payload = b"" if body is None else orjson.dumps(body)
    reply = sandbox.app.handle(method, "/2025-10-13" + path, auth, payload)
    assert reply.status in (200, 201), reply.body
    return orjson.loads(reply.body)


def newest(sandbox: Sandbox, limit: int = 100) -> list[dict[str, Any]]:
    return request(sandbox, "GET", f"/transactions?limit={limit}&sortOrder=desc")["data"]


def assert_kept_texts_are_fresh(world: World) -> None:
    """Every kept text equals what a renderer without kept texts makes now."""
    rows = np.arange(world.store.n)
    fresh = TransactionViews(world.store, world.entities, world.views)
    fresh.descriptions = world.tx.descriptions
    assert world.tx.texts(rows, world.now_us) == fresh.texts(rows, world.now_us)


@pytest.fixture
def sandbox() -> Sandbox:
    return Sandbox(seed=4, transactions=3_000)


def test_a_page_served_twice_is_byte_identical_and_the_ground_truth(sandbox: Sandbox) -> None:
    secret = f"{sandbox.client_id}:{sandbox.client_secret}".encode()
    auth = {"authorization": "Basic " + base64.b64encode(secret).decode()}
    target = "/2025-10-13/transactions?limit=100&sortOrder=desc&type=OUTGOING"
    first = sandbox.app.handle("GET", target, auth, b"").body
    assert sandbox.app.handle("GET", target, auth, b"").body == first
    truth = [t for t in sandbox.world.all_transactions() if t["type"] == "OUTGOING"][::-1]
    served = orjson.loads(first)["data"]
    assert served == truth[:100]
    assert orjson.dumps(served) == orjson.dumps(truth[:100])  # same members in the same order


def test_pages_show_what_advance_changed(sandbox: Sandbox) -> None:
    world = sandbox.world
    row = int(world.store.live[np.argmin(world.store.live_next)])  # the next row to change
    before = world.tx.transactions(np.array([row]), world.now_us)[0]
    old = newest(sandbox)
    sandbox.advance(timedelta(days=10))
    after = world.get_transaction_wire(before["id"])
    assert after["updatedAt"] > before["updatedAt"]
    served = newest(sandbox)
    assert served != old
    assert served == list(world.all_transactions())[::-1][:100]
    assert_kept_texts_are_fresh(world)


def test_pages_show_cancel_approve_reject_and_receipts(sandbox: Sandbox) -> None:
    world = sandbox.world
    newest(sandbox)  # the newest rows, where the pending ones are, are read (and kept) first
    waiting = world.pending_approval_ids()
    cancellable = next(
        t["id"]
        for t in world.all_transactions()
        if t["status"] in ("CREATED", "PENDING", "PROCESSING")
        and (cutoff := world.cancel_cutoff(t["id"])) is not None
        and world.now < cutoff
    )
    receipt = next(t["id"] for t in world.all_transactions() if t["type"] == "INCOMING")
    request(sandbox, "POST", f"/transactions/{cancellable}/cancel", {})
    request(sandbox, "POST", f"/transactions/{waiting[0]}/approve", {})
    request(sandbox, "POST", f"/transactions/{waiting[1]}/reject", {})
    request(sandbox, "POST", f"/transactions/{receipt}/confirm", {})
    truth = {t["id"]: t for t in world.all_transactions()}
    assert truth[cancellable]["status"] == "FAILED"
    assert truth[cancellable]["refund"]["reason"] == "USER_CANCELLATION"
    assert truth[waiting[0]]["status"] == "PROCESSING"
    assert truth[waiting[1]]["status"] == "FAILED"
    assert "receiptDeliveryConfirmedAt" in truth[receipt]
    for tid in (cancellable, waiting[0], waiting[1], receipt):
        assert request(sandbox, "GET", f"/transactions/{tid}") == truth[tid]
    served = {t["id"]: t for t in newest(sandbox)}
    assert {cancellable, waiting[0], waiting[1]} <= set(served)
    assert all(served[tid] == truth[tid] for tid in served)
    assert_kept_texts_are_fresh(world)


def test_card_pulls_stop_pending_after_thirty_seconds() -> None:
    world = World(seed=9, transactions=20_000, start=DEFAULT_END - timedelta(hours=2))
    cards = {t["id"]: t for t in world.all_transactions() if t["type"] == "CARD"}
    pending = [tid for tid, t in cards.items() if t["pullSummary"]["pendingCount"] == 1]
    assert pending
    world.advance(timedelta(seconds=30))
    for t in world.all_transactions():
        if t["id"] in pending:
            assert t["pullSummary"]["pendingCount"] == 0
            assert t["updatedAt"] == cards[t["id"]]["updatedAt"]  # no event: only time passed
    assert_kept_texts_are_fresh(world)


def test_quotes_show_their_description() -> None:
    sandbox = Sandbox(seed=2, transactions=1_000)
    accounts = "/customers/internal-accounts?currency=USD&type=INTERNAL_FIAT&limit=1"
    source = request(sandbox, "GET", accounts)["data"][0]["id"]
    destination = request(sandbox, "GET", "/customers/external-accounts?limit=1")["data"][0]["id"]
    quote = request(
        sandbox,
        "POST",
        "/quotes",
        {
            "source": {"sourceType": "ACCOUNT", "accountId": source},
            "destination": {"destinationType": "ACCOUNT", "accountId": destination},
            "lockedCurrencySide": "SENDING",
            "lockedCurrencyAmount": 500_000,
            "description": 'Rent "May" – ünïcode',
        },
    )
    served = newest(sandbox, limit=1)[0]
    assert served["id"] == quote["transactionId"]
    assert served["description"] == 'Rent "May" – ünïcode'
    assert_kept_texts_are_fresh(sandbox.world)


def test_wire_rows_read_as_dicts_and_encode_as_kept() -> None:
    world = World(seed=1, transactions=500)
    rows = np.arange(100, 140)
    texts = world.tx.texts(rows, world.now_us)
    data = world.render_transactions(rows)
    assert isinstance(data, WireRows)
    assert orjson.dumps(data) == b"[" + b",".join(texts) + b"]"  # written as they are
    assert data == world.tx.transactions(rows, world.now_us)  # read as values
    assert data[0]["id"] == orjson.loads(texts[0])["id"]
    assert orjson.dumps(data) == b"[" + b",".join(texts) + b"]"  # and still written the same


def test_the_corrupt_record_fault_reaches_kept_rows(sandbox: Sandbox) -> None:
    record = newest(sandbox, limit=5)[2]
    sandbox.faults.corrupt_ids = {record["id"]}
    served = newest(sandbox, limit=5)[2]
    money = "authorizedAmount" if record["type"] == "CARD" else "sentAmount"
    assert served[money]["amount"] == record[money]["amount"] + 0.5


def test_timestamps_are_written_as_numpy_writes_them() -> None:
    rng = np.random.default_rng(0)
    us = np.concatenate(
        [
            rng.integers(-2_208_988_800 * 10**6, 7_258_118_400 * 10**6, 20_000),  # 1900-2199
            rng.integers(-(10**17), 10**17, 2_000),  # beyond the tables: numpy's own form
            np.array([0, -1, 999, 1000, 86_399_999_999, 86_400_000_000]),
        ]
    )
    assert iso_texts(us) == [t.encode() for t in iso(us)]
