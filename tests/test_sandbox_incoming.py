"""Incoming payments waiting for the platform's decision (the interface's 202-acknowledged flow):
received through `POST /sandbox/uma/receive`, approved or rejected with IncomingTransaction
answers, rejected on the platform's behalf after 5 seconds; agent approvals stay as they were."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import pytest

from paylens import Sandbox
from paylens.sandbox.currencies import CURRENCY_INDEX
from paylens.sandbox.world.world import World

from .test_sandbox_world import call


@pytest.fixture
def world() -> World:
    return World(seed=3, transactions=600)


def _usd_customer(world: World) -> str:
    acc = world.entities.accounts
    for row in range(len(acc)):
        if (
            not acc.external[row]
            and acc.owner[row] >= 0
            and int(acc.currency[row]) == CURRENCY_INDEX["USD"]
            and not world.wallets.is_wallet(row)
        ):
            return world.entities.customers.ids[int(acc.owner[row])]
    raise AssertionError("no customer with a USD internal account")


def receive(world: World, amount: int = 12_345, **extra: Any) -> dict[str, Any]:
    body = {
        "senderUmaAddress": "$alice@sender.example",
        "customerId": _usd_customer(world),
        "receivingCurrencyCode": "USD",
        "receivingCurrencyAmount": amount,
    } | extra
    status, tx = call(world, "POST", "/sandbox/uma/receive", body=body)
    assert status == 200, tx
    return tx


def test_a_received_payment_waits_then_approval_settles_it(world: World) -> None:
    tx = receive(world)
    assert (tx["type"], tx["status"], tx["direction"]) == ("INCOMING", "PENDING", "CREDIT")
    assert tx["receivedAmount"]["amount"] == 12_345
    assert tx["sentAmount"]["amount"] == 12_345 + tx["fees"]
    assert tx["source"]["sourceType"] == "UMA_ADDRESS"
    assert tx["id"] in world.pending_approval_ids()
    status, approved = call(world, "POST", f"/transactions/{tx['id']}/approve")
    assert status == 200 and approved["type"] == "INCOMING" and approved["status"] == "PENDING"
    assert tx["id"] not in world.pending_approval_ids()
    status, again = call(world, "POST", f"/transactions/{tx['id']}/approve")
    assert (status, again["code"]) == (409, "TRANSACTION_NOT_PENDING_PLATFORM_APPROVAL")
    world.advance(timedelta(minutes=10))
    settled = world.get_transaction_wire(tx["id"])
    assert settled["status"] == "COMPLETED" and "failureReason" not in settled


def test_reject_answers_rejected_and_a_second_decision_conflicts(world: World) -> None:
    tx = receive(world)
    status, rejected = call(world, "POST", f"/transactions/{tx['id']}/reject", body={"reason": "x"})
    assert status == 200
    assert (rejected["type"], rejected["status"]) == ("INCOMING", "REJECTED")
    assert "failureReason" not in rejected
    for action in ("approve", "reject"):
        status, error = call(world, "POST", f"/transactions/{tx['id']}/{action}")
        assert (status, error["code"]) == (409, "TRANSACTION_NOT_PENDING_PLATFORM_APPROVAL")


def test_no_decision_within_five_seconds_fails_the_payment(world: World) -> None:
    tx = receive(world)
    world.advance(timedelta(seconds=4))
    assert world.get_transaction_wire(tx["id"])["status"] == "PENDING"
    world.advance(timedelta(seconds=1))
    late = world.get_transaction_wire(tx["id"])
    assert (late["status"], late["failureReason"]) == ("FAILED", "PAYMENT_APPROVAL_TIMED_OUT")
    status, error = call(world, "POST", f"/transactions/{tx['id']}/approve")
    assert (status, error["code"]) == (409, "TRANSACTION_NOT_PENDING_PLATFORM_APPROVAL")


def test_agent_approvals_stay_outgoing(world: World) -> None:
    agent = next(t for t in world.pending_approval_ids())
    status, approved = call(world, "POST", f"/transactions/{agent}/approve")
    assert status == 200 and approved["type"] == "OUTGOING"
    assert approved["status"] == "PROCESSING"
    twin = World(seed=3, transactions=600)  # the same payout, rejected this time
    status, rejected = call(twin, "POST", f"/transactions/{agent}/reject")
    assert status == 200 and (rejected["type"], rejected["status"]) == ("OUTGOING", "FAILED")


def test_receive_checks_its_body(world: World) -> None:
    status, error = call(
        world,
        "POST",
        "/sandbox/uma/receive",
        body={"senderUmaAddress": "nobody", "receivingCurrencyAmount": 2**63},
    )
    assert status == 400
    assert {e["field"] for e in error["details"]["errors"]} == {
        "senderUmaAddress",
        "customerId",
        "receivingCurrencyCode",
        "receivingCurrencyAmount",
    }
    valid = {
        "senderUmaAddress": "$a@b.example",
        "customerId": _usd_customer(world),
        "receivingCurrencyCode": "USD",
        "receivingCurrencyAmount": 5,
    }
    for change, expected in (
        ({"customerId": "Customer:nope"}, (404, "USER_NOT_FOUND")),
        ({"receivingCurrencyCode": "XYZ"}, (400, "INVALID_CURRENCY")),
        ({"customerId": None, "receiverUmaAddress": "$nobody@x.example"}, (404, "UMA_NOT_FOUND")),
    ):
        body = {k: v for k, v in (valid | change).items() if v is not None}
        status, error = call(world, "POST", "/sandbox/uma/receive", body=body)
        assert (status, error["code"]) == expected, change


@pytest.mark.http
def test_approval_over_loopback() -> None:
    sandbox = Sandbox(seed=3, transactions=600)
    with sandbox.serve() as server:
        auth = (sandbox.client_id, sandbox.client_secret)
        body = {
            "senderUmaAddress": "$alice@sender.example",
            "customerId": _usd_customer(sandbox.world),
            "receivingCurrencyCode": "USD",
            "receivingCurrencyAmount": 500,
        }
        tx = httpx.post(server.base_url + "/sandbox/uma/receive", json=body, auth=auth).json()
        answer = httpx.post(f"{server.base_url}/transactions/{tx['id']}/approve", auth=auth)
        assert answer.status_code == 200 and answer.json()["type"] == "INCOMING"


def test_the_named_sender_is_the_payments_source(world: World) -> None:
    tx = receive(world, senderUmaAddress="$bob@elsewhere.example")
    assert tx["source"] == {
        "sourceType": "UMA_ADDRESS",
        "umaAddress": "$bob@elsewhere.example",
        "currency": "USD",
    }
    status, read = call(world, "GET", f"/transactions/{tx['id']}")
    assert status == 200 and read["source"]["umaAddress"] == "$bob@elsewhere.example"
    status, approved = call(world, "POST", f"/transactions/{tx['id']}/approve")
    assert status == 200 and approved["source"]["umaAddress"] == "$bob@elsewhere.example"
