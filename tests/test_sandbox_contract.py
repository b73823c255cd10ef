"""Every answer of the sandbox's world, success or error, conforms to the interface's schemas.

Bodies are checked with the shared contract validator (skipped when it is not beside the
project). Approve and reject answer the transaction of its own variant (the spec rules over the
interface's IncomingTransaction there), so they are checked against TransactionOneOf.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from paylens.sandbox.world.world import World

from ._helpers import contract_errors
from .test_sandbox_world import call, pages

pytestmark = pytest.mark.skipif(
    contract_errors() is None, reason="the shared contract validator is not available"
)


def conforms(body: Any, schema: str) -> None:
    errors = contract_errors()
    assert errors is not None
    problems = errors(body, schema, limit=5)
    assert not problems, problems


def answer(
    world: World,
    status: int,
    schema: str,
    method: str,
    path: str,
    params: dict[str, Any] | None = None,
    body: Any = None,
) -> Any:
    got, value = call(world, method, path, params, body)
    assert got == status, value
    conforms(value, schema)
    return value


@pytest.fixture(scope="module")
def world() -> World:
    w = World(seed=21, transactions=4_000)
    w.advance(timedelta(hours=1))
    return w


def _shape(t: dict[str, Any]) -> tuple[Any, ...]:
    """What makes a transaction's wire shape differ: its variant, state and optional parts."""
    parts = (
        t.get("source", {}).get("sourceType"),
        t.get("destination", {}).get("destinationType"),
        t.get("paymentRail"),
    )
    return (t["type"], t["status"], *parts, *sorted(k for k in t if k not in _ALWAYS))


_ALWAYS = frozenset(
    {
        "id",
        "type",
        "status",
        "direction",
        "customerId",
        "platformCustomerId",
        "createdAt",
        "updatedAt",
    }
)


def _keys(value: Any) -> Any:
    """The keys a wire value has, all the way down (its shape, without its values)."""
    if isinstance(value, dict):
        return tuple((k, _keys(v)) for k, v in sorted(value.items()))
    if isinstance(value, list):
        return tuple(sorted({_keys(v) for v in value}, key=repr))
    return type(value).__name__


def _sampled(body: dict[str, Any], seen: set[Any]) -> dict[str, Any]:
    """A list answer with only its records of a shape not in `seen` (each one's keys all the
    way down and the values that pick a variant) and every tenth: each shape is validated
    once, and a sample of the rest (a record validates in ~5 ms)."""
    kept = []
    for i, record in enumerate(body["data"]):
        info = record.get("accountInfo", {})
        variant = tuple(info.get(k) or record.get(k) for k in ("accountType", "type", "status"))
        shape = (_keys(record), variant)
        if shape not in seen or i % 10 == 0:
            kept.append(record)
        seen.add(shape)
    return {**body, "data": kept}


def test_every_kind_of_transaction_conforms(world: World) -> None:
    seen: set[tuple[Any, ...]] = set()
    for i, t in enumerate(world.all_transactions()):
        shape = _shape(t)
        if shape not in seen or i % 50 == 0:  # each shape once, and a sample of the rest
            seen.add(shape)
            conforms(t, "TransactionOneOf")
    assert len({shape[:2] for shape in seen}) >= 12


def test_transaction_lists_and_reads_conform(world: World) -> None:
    for params in (
        {},
        {"type": "INCOMING", "limit": 100},
        {"status": "REFUNDED", "limit": 100},
        {"status": "PENDING", "sortOrder": "asc"},
        {"startDate": "2025-09-01T00:00:00Z", "limit": 3},
    ):
        body = answer(world, 200, "TransactionListResponse", "GET", "/transactions", params)
        for t in body["data"][:3]:
            answer(world, 200, "TransactionOneOf", "GET", f"/transactions/{t['id']}")
    answer(
        world,
        404,
        "Error404",
        "GET",
        "/transactions/Transaction:00000000-0000-4000-8000-000000000000",
    )
    answer(
        world,
        400,
        "Error400",
        "GET",
        "/transactions",
        {"type": "X", "limit": 500, "cursor": "nope"},
    )


def test_transaction_actions_conform() -> None:
    w = World(seed=22, transactions=3_000)
    now = w.now
    open_cancel = next(
        t
        for t in w.all_transactions()
        if t["status"] in ("PENDING", "PROCESSING") and (w.cancel_cutoff(t["id"]) or now) > now
    )
    answer(
        w,
        200,
        "TransactionOneOf",
        "POST",
        f"/transactions/{open_cancel['id']}/cancel",
        body={"reason": "test"},
    )
    answer(w, 409, "Error409", "POST", f"/transactions/{open_cancel['id']}/cancel")
    card = next(t for t in w.all_transactions() if t["type"] == "CARD")
    answer(w, 400, "Error400", "POST", f"/transactions/{card['id']}/cancel")
    answer(
        w,
        404,
        "Error404",
        "POST",
        "/transactions/Transaction:00000000-0000-4000-8000-000000000000/cancel",
    )
    first, second = w.pending_approval_ids()[:2]
    answer(w, 200, "TransactionOneOf", "POST", f"/transactions/{first}/approve")
    answer(
        w, 200, "TransactionOneOf", "POST", f"/transactions/{second}/reject", body={"reason": "no"}
    )
    answer(w, 409, "Error409", "POST", f"/transactions/{first}/approve")
    answer(w, 200, "TransactionOneOf", "POST", f"/transactions/{open_cancel['id']}/confirm")
    answer(w, 400, "Error400", "POST", f"/transactions/{card['id']}/confirm")


def test_cards_conform() -> None:
    w = World(seed=23, transactions=2_000)
    cards = answer(w, 200, "CardListResponse", "GET", "/cards", {"limit": 100})["data"]
    active = next(c for c in cards if c["state"] == "ACTIVE")
    answer(w, 200, "Card", "GET", f"/cards/{active['id']}")
    answer(
        w,
        200,
        "Card",
        "PATCH",
        f"/cards/{active['id']}",
        body={"state": "FROZEN", "maxSpendPerTransaction": None},
    )
    answer(w, 409, "Error409", "PATCH", f"/cards/{active['id']}", body={"state": "FROZEN"})
    answer(w, 200, "Card", "PATCH", f"/cards/{active['id']}", body={"state": "CLOSED"})
    answer(w, 409, "Error409", "PATCH", f"/cards/{active['id']}", body={"state": "CLOSED"})
    answer(w, 400, "Error400", "PATCH", f"/cards/{cards[0]['id']}", body={})
    answer(w, 404, "Error404", "GET", "/cards/Card:nope")


def test_customers_and_accounts_conform(world: World) -> None:
    for customer in pages(world, "/customers", {"limit": 100, "isIncludingDeleted": "true"})[0][
        :40
    ]:
        conforms(customer, "CustomerOneOf")
    answer(world, 200, "CustomerListResponse", "GET", "/customers", {"customerType": "BUSINESS"})
    some = answer(world, 200, "CustomerListResponse", "GET", "/customers")["data"][0]
    answer(world, 200, "CustomerOneOf", "GET", f"/customers/{some['id']}")
    answer(world, 404, "Error404", "GET", "/customers/Customer:nope")
    params: dict[str, Any] = {"limit": 100}
    seen: set[Any] = set()
    while True:  # every page; in each, the accounts of a shape not seen yet and a sample
        got, body = call(world, "GET", "/customers/external-accounts", params)
        assert got == 200, body
        conforms(_sampled(body, seen), "ExternalAccountListResponse")
        if not body["hasMore"]:
            break
        params["cursor"] = body["nextCursor"]
    variants = {variant[0] for _, variant in seen}
    assert len(variants) >= 20, variants  # fiat accounts of many currencies, wallets, SWIFT
    got, body = call(world, "GET", "/customers/internal-accounts", {"limit": 100})
    assert got == 200, body
    conforms(_sampled(body, set()), "InternalAccountListResponse")
    answer(
        world,
        200,
        "InternalAccountListResponse",
        "GET",
        "/customers/internal-accounts",
        {"type": "EMBEDDED_WALLET"},
    )
    answer(world, 200, "PlatformInternalAccountListResponse", "GET", "/platform/internal-accounts")
    answer(world, 200, "ExternalAccountListResponse", "GET", "/platform/external-accounts")
    answer(world, 400, "Error400", "GET", "/customers/internal-accounts", {"type": "SAVINGS"})


def test_quotes_rates_config_and_wallets_conform(world: World) -> None:
    outgoing = next(t for t in world.all_transactions() if t["type"] == "OUTGOING")
    answer(world, 200, "Quote", "GET", f"/quotes/{outgoing['quoteId']}")
    answer(world, 404, "Error404", "GET", "/quotes/Quote:nope")
    w = World(seed=24, transactions=1_000)
    source = pages(w, "/customers/internal-accounts", {"currency": "USD", "type": "INTERNAL_FIAT"})[
        0
    ][0]["id"]
    for currency in ("EUR", "BTC", "USD"):
        destinations = pages(w, "/customers/external-accounts", {"currency": currency})[0]
        if destinations:
            body = {
                "source": {"sourceType": "ACCOUNT", "accountId": source},
                "destination": {"destinationType": "ACCOUNT", "accountId": destinations[0]["id"]},
                "lockedCurrencySide": "RECEIVING",
                "lockedCurrencyAmount": 10_000,
                "immediatelyExecute": True,
            }
            quote = answer(w, 201, "Quote", "POST", "/quotes", body=body)
            answer(w, 200, "TransactionOneOf", "GET", f"/transactions/{quote['transactionId']}")
    answer(w, 400, "Error400", "POST", "/quotes", body={"lockedCurrencyAmount": 5})
    answer(world, 200, "ExchangeRateListResponse", "GET", "/exchange-rates")
    answer(world, 200, "PlatformConfig", "GET", "/config")
    wallets = pages(world, "/customers/internal-accounts", {"type": "EMBEDDED_WALLET"})[0]
    for account in wallets[:10]:
        answer(
            world,
            200,
            "AuthCredentialListResponse",
            "GET",
            "/auth/credentials",
            {"accountId": account["id"]},
        )
        answer(
            world, 200, "SessionListResponse", "GET", "/auth/sessions", {"accountId": account["id"]}
        )
    answer(world, 400, "Error400", "GET", "/auth/sessions")
    answer(world, 405, "Error405", "DELETE", "/config")
    answer(world, 501, "Error501", "PATCH", "/config")
