"""Quotes beyond account-to-account: funded in real time (source REALTIME_FUNDING) with
`POST /sandbox/send` simulating the funds arriving (the quote executes, or fails with
FUNDING_AMOUNT_MISMATCH), and paid to a UMA address (destination UMA_ADDRESS)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import pytest

from paylens import Sandbox
from paylens.sandbox.currencies import CURRENCY_CODES
from paylens.sandbox.world.world import World

from .test_sandbox_conformance import _quote_body
from .test_sandbox_world import call


@pytest.fixture
def sandbox() -> Sandbox:
    return Sandbox(seed=9, transactions=700)


def funded_quote(sandbox: Sandbox) -> dict[str, Any]:
    body = _quote_body(sandbox)
    w = sandbox.world
    account = w.entities.account_index[body["source"]["accountId"]]
    customer = w.entities.customers.ids[int(w.entities.accounts.owner[account])]
    code = CURRENCY_CODES[int(w.entities.accounts.currency[account])]
    source = {"sourceType": "REALTIME_FUNDING", "customerId": customer, "currency": code}
    status, quote = call(w, "POST", "/quotes", body=body | {"source": source})
    assert status == 201, quote
    return dict(quote)


def send(world: World, quote: dict[str, Any], **extra: Any) -> tuple[int, Any]:
    body = {"quoteId": quote["id"], "currencyCode": quote["sendingCurrency"]["code"]} | extra
    return call(world, "POST", "/sandbox/send", body=body)


def test_a_funded_quote_waits_for_its_funds_then_settles(sandbox: Sandbox) -> None:
    w = sandbox.world
    quote = funded_quote(sandbox)
    assert quote["source"]["sourceType"] == "REALTIME_FUNDING"
    assert quote["status"] == "PENDING" and quote["paymentInstructions"]
    status, error = call(w, "POST", f"/quotes/{quote['id']}/execute")
    assert (status, error["details"]["errors"][0]["field"]) == (400, "quoteId")
    status, tx = send(w, quote)
    assert status == 200
    assert (tx["id"], tx["status"]) == (quote["transactionId"], "PROCESSING")
    assert tx["sentAmount"]["amount"] == quote["totalSendingAmount"]
    w.advance(timedelta(days=10))
    assert w.get_transaction_wire(tx["id"])["status"] == "COMPLETED"
    status, error = send(w, quote)
    assert (status, error["details"]["errors"][0]["field"]) == (400, "quoteId")


def test_other_funds_fail_the_transaction(sandbox: Sandbox) -> None:
    w = sandbox.world
    quote = funded_quote(sandbox)
    status, tx = send(w, quote, currencyAmount=quote["totalSendingAmount"] - 1)
    assert status == 200
    assert (tx["status"], tx["failureReason"]) == ("FAILED", "FUNDING_AMOUNT_MISMATCH")


def test_send_refuses_what_it_cannot_apply(sandbox: Sandbox) -> None:
    w = sandbox.world
    quote = funded_quote(sandbox)
    status, error = send(w, quote, currencyCode="XYZ")
    assert (status, error["details"]["errors"][0]["field"]) == (400, "currencyCode")
    assert w.get_transaction_wire(quote["transactionId"])["status"] == "PENDING"
    plain = call(w, "POST", "/quotes", body=_quote_body(sandbox))[1]
    status, error = send(w, plain)
    assert (status, error["details"]["errors"][0]["field"]) == (400, "quoteId")
    status, error = call(
        w, "POST", "/sandbox/send", body={"quoteId": "Quote:nope", "currencyCode": "USD"}
    )
    assert (status, error["code"]) == (404, "QUOTE_NOT_FOUND")
    w.advance(timedelta(hours=2))  # past the quote's expiry
    status, error = send(w, quote)
    assert status == 400
    assert w.get_transaction_wire(quote["transactionId"])["status"] == "EXPIRED"
    body = _quote_body(sandbox)
    funding = {"sourceType": "REALTIME_FUNDING", "customerId": "Customer:nope", "currency": "JPY"}
    status, error = call(
        w, "POST", "/quotes", body=body | {"source": funding, "immediatelyExecute": True}
    )
    assert status == 400
    assert {e["field"] for e in error["details"]["errors"]} == {
        "source.customerId",
        "source.currency",
    }


def _counterparty(world: World) -> str:
    return str(
        next(
            t["destination"]["umaAddress"]
            for t in world.all_transactions()
            if t["type"] == "OUTGOING" and t["destination"]["destinationType"] == "UMA_ADDRESS"
        )
    )


def test_a_quote_to_a_uma_address_settles_on_the_uma_rail(sandbox: Sandbox) -> None:
    w = sandbox.world
    address = _counterparty(w)
    destination = {"destinationType": "UMA_ADDRESS", "umaAddress": address, "currency": "EUR"}
    body = _quote_body(sandbox) | {"destination": destination, "immediatelyExecute": True}
    status, quote = call(w, "POST", "/quotes", body=body)
    assert status == 201, quote
    assert quote["destination"] == destination
    assert quote["receivingCurrency"]["code"] == "EUR"
    tx = w.get_transaction_wire(quote["transactionId"])
    assert (tx["status"], tx["paymentRail"], tx["destination"]) == ("PROCESSING", None, destination)
    w.advance(timedelta(days=3))
    assert w.get_transaction_wire(tx["id"])["status"] == "COMPLETED"
    unknown = body | {"destination": {"destinationType": "UMA_ADDRESS", "umaAddress": "$no@x.io"}}
    status, error = call(w, "POST", "/quotes", body=unknown)
    assert (status, error["code"]) == (400, "INVALID_RECEIVER")
    assert error["details"]["errors"][0]["field"] == "destination.umaAddress"


@pytest.mark.http
def test_send_over_loopback(sandbox: Sandbox) -> None:
    quote = funded_quote(sandbox)
    with sandbox.serve() as server:
        answer = httpx.post(
            server.base_url + "/sandbox/send",
            json={"quoteId": quote["id"], "currencyCode": quote["sendingCurrency"]["code"]},
            auth=(sandbox.client_id, sandbox.client_secret),
        )
        assert answer.status_code == 200
        assert answer.json()["status"] == "PROCESSING"
