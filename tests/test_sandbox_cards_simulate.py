"""The interface's card simulations (`/sandbox/cards/{id}/simulate/authorization|clearing|
return`) and the CardTransaction transitions they cause."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import pytest

from paylens import Sandbox
from paylens.sandbox.world.world import World

from .test_sandbox_world import call

MERCHANT = {"descriptor": "CORNER BAKERY 118", "mcc": "5814", "country": "US"}


@pytest.fixture
def world() -> World:
    return World(seed=6, transactions=600)


def _card(world: World) -> dict[str, Any]:
    status, page = call(world, "GET", "/cards", {"state": "ACTIVE", "limit": 1})
    assert status == 200 and page["data"], page
    return dict(page["data"][0])


def authorize(world: World, card: dict[str, Any], amount: int, descriptor: str) -> int:
    body = {
        "amount": amount,
        "currency": {"code": card["currency"]},
        "merchant": {**MERCHANT, "descriptor": descriptor},
    }
    before = world.transaction_count()
    status, answer = call(
        world, "POST", f"/sandbox/cards/{card['id']}/simulate/authorization", body=body
    )
    assert status == 202, answer
    assert set(answer) == {"issuerTransactionToken"}
    return world.transaction_count() - before


def newest(world: World) -> dict[str, Any]:
    return next(reversed(list(world.all_transactions())))


def event(world: World, card: dict[str, Any], kind: str, tx: str, amount: int) -> tuple[int, Any]:
    return call(
        world,
        "POST",
        f"/sandbox/cards/{card['id']}/simulate/{kind}",
        body={"cardTransactionId": tx, "amount": amount},
    )


def test_authorize_clear_in_two_parts_then_return(world: World) -> None:
    card = _card(world)
    assert authorize(world, card, 4_000, "CORNER BAKERY 118") == 1
    tx = newest(world)
    assert (tx["type"], tx["status"], tx["cardId"]) == ("CARD", "AUTHORIZED", card["id"])
    assert tx["authorizedAmount"]["amount"] == 4_000
    assert tx["merchant"] == MERCHANT
    assert tx["pullSummary"]["pendingCount"] == 1
    assert event(world, card, "clearing", tx["id"], 1_500)[0] == 202
    part = world.get_transaction_wire(tx["id"])
    assert (part["status"], part["settledAmount"]["amount"]) == ("PARTIALLY_SETTLED", 1_500)
    assert event(world, card, "clearing", tx["id"], 2_500)[0] == 202
    done = world.get_transaction_wire(tx["id"])
    assert (done["status"], done["settledAmount"]["amount"]) == ("SETTLED", 4_000)
    status, error = event(world, card, "clearing", tx["id"], 10)
    assert (status, error["details"]["errors"][0]["field"]) == (400, "cardTransactionId")
    status, error = event(world, card, "return", tx["id"], 4_001)
    assert (status, error["details"]["errors"][0]["field"]) == (400, "amount")
    assert event(world, card, "return", tx["id"], 1_000)[0] == 202
    back = world.get_transaction_wire(tx["id"])
    assert (back["status"], back["refundedAmount"]["amount"]) == ("REFUNDED", 1_000)
    assert event(world, card, "return", tx["id"], 1)[0] == 400


@pytest.mark.parametrize(
    ("cleared", "settled", "pulls", "pulled"),
    [
        (2_400, 2_400, 2, 2_400),  # above the hold: a second, post-hoc pull for the excess
        (0, 0, 1, 2_000),  # nothing cleared: the authorization expired
    ],
)
def test_a_single_clearing_settles(
    world: World, cleared: int, settled: int, pulls: int, pulled: int
) -> None:
    card = _card(world)
    authorize(world, card, 2_000, "BISTRO 77")
    tx = newest(world)
    assert event(world, card, "clearing", tx["id"], cleared)[0] == 202
    after = world.get_transaction_wire(tx["id"])
    assert (after["status"], after["settledAmount"]["amount"]) == ("SETTLED", settled)
    assert (after["pullSummary"]["count"], after["pullSummary"]["totalAmount"]) == (pulls, pulled)


def test_descriptor_suffixes_decide_the_outcome(world: World) -> None:
    card = _card(world)
    assert authorize(world, card, 500, "SHOP 002") == 0  # insufficient funds: declined
    assert authorize(world, card, 500, "SHOP 003") == 0  # card paused: declined
    assert authorize(world, card, 500, "SHOP 006") == 1
    assert newest(world)["status"] == "EXCEPTION"
    assert authorize(world, card, 500, "SHOP 005") == 1
    assert newest(world)["status"] == "AUTHORIZED"
    world.advance(timedelta(seconds=31))
    assert newest(world)["pullSummary"]["pendingCount"] == 0
    status, frozen = call(world, "PATCH", f"/cards/{card['id']}", body={"state": "FROZEN"})
    assert status == 200
    assert authorize(world, frozen, 500, "SHOP 118") == 0


def test_simulations_check_their_bodies(world: World) -> None:
    card = _card(world)
    status, error = call(
        world,
        "POST",
        f"/sandbox/cards/{card['id']}/simulate/authorization",
        body={"amount": 0, "currency": {"code": "XXX"}, "merchant": {}},
    )
    assert status == 400
    assert [e["field"] for e in error["details"]["errors"]] == [
        "amount",
        "currency.code",
        "merchant.descriptor",
    ]
    status, error = call(
        world, "POST", "/sandbox/cards/Card:nope/simulate/authorization", body={"amount": 1}
    )
    assert (status, error["code"]) == (404, "REFERENCE_NOT_FOUND")
    other = next(
        t for t in world.all_transactions() if t["type"] == "CARD" and t["cardId"] != card["id"]
    )
    status, error = event(world, card, "clearing", other["id"], 5)
    assert (status, error["code"]) == (404, "TRANSACTION_NOT_FOUND")


@pytest.mark.http
def test_card_simulation_over_loopback() -> None:
    sandbox = Sandbox(seed=6, transactions=600)
    card = _card(sandbox.world)
    with sandbox.serve() as server:
        auth = (sandbox.client_id, sandbox.client_secret)
        answer = httpx.post(
            f"{server.base_url}/sandbox/cards/{card['id']}/simulate/authorization",
            json={"amount": 700, "currency": {"code": card["currency"]}, "merchant": MERCHANT},
            auth=auth,
        )
        assert answer.status_code == 202
        token = answer.json()["issuerTransactionToken"]
        listed = httpx.get(
            server.base_url + "/transactions",
            params={"sortOrder": "desc", "limit": 1},
            auth=auth,
        ).json()["data"][0]
        assert (listed["issuerTransactionToken"], listed["status"]) == (token, "AUTHORIZED")
