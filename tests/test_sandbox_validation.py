"""Validation as the interface's schemas say (int64 bounds, types, nulls), every bad field named
in `details.errors`, an empty `cursor=` taken as the first page, and 405 in the error shape for
undeclared methods over real HTTP."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from paylens import Sandbox
from paylens.sandbox.world.world import World

from .test_sandbox_conformance import _quote_body
from .test_sandbox_world import call

PAGINATED = (
    "/transactions",
    "/cards",
    "/customers",
    "/customers/internal-accounts",
    "/customers/external-accounts",
    "/platform/external-accounts",
)


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return Sandbox(seed=8, transactions=500)


def fields(answer: tuple[int, Any]) -> list[str]:
    status, body = answer
    assert status == 400, body
    return [e["field"] for e in body["details"]["errors"]]


@pytest.mark.parametrize("path", PAGINATED)
def test_an_empty_cursor_is_the_first_page(sandbox: Sandbox, path: str) -> None:
    w = sandbox.world
    first = call(w, "GET", path, {"limit": 3})
    assert call(w, "GET", path, {"limit": 3, "cursor": ""}) == first


def test_integers_past_int64_are_refused_by_name(sandbox: Sandbox) -> None:
    w = sandbox.world
    assert fields(call(w, "GET", "/exchange-rates", {"sendingAmount": 2**63})) == ["sendingAmount"]
    assert fields(call(w, "GET", "/transactions", {"limit": 2**64})) == ["limit"]
    card = next(iter(w.entities.card_index))
    patch = {"maxSpendPerTransaction": 2**63}
    assert fields(call(w, "PATCH", f"/cards/{card}", body=patch)) == ["maxSpendPerTransaction"]
    quote = _quote_body(sandbox) | {"lockedCurrencyAmount": 9_000_000_000_000_001}
    assert fields(call(w, "POST", "/quotes", body=quote)) == ["lockedCurrencyAmount"]


def test_null_is_not_a_value_of_a_non_nullable_field(sandbox: Sandbox) -> None:
    w: World = sandbox.world
    tx = next(t for t in w.all_transactions() if t["type"] == "INCOMING")
    confirm = {"receiptDeliveryConfirmedAt": None}
    assert fields(call(w, "POST", f"/transactions/{tx['id']}/confirm", body=confirm)) == [
        "receiptDeliveryConfirmedAt"
    ]
    approve = {"receiverCustomerInfo": None}
    assert fields(call(w, "POST", f"/transactions/{tx['id']}/approve", body=approve)) == [
        "receiverCustomerInfo"
    ]
    assert fields(call(w, "POST", f"/transactions/{tx['id']}/cancel", body={"reason": None})) == [
        "reason"
    ]


def test_customer_fields_the_sandbox_does_not_update_are_named(sandbox: Sandbox) -> None:
    w = sandbox.world
    customer = next(iter(w.entities.customer_index))
    body = {"customerType": "INDIVIDUAL", "fullName": "A B", "currencies": ["USD"]}
    named = fields(call(w, "PATCH", f"/customers/{customer}", body=body))
    assert {"currencies", "fullName", "email"} <= set(named)


@pytest.mark.http
def test_undeclared_methods_and_null_bodies_over_loopback(sandbox: Sandbox) -> None:
    with (
        sandbox.serve() as server,
        httpx.Client(auth=(sandbox.client_id, sandbox.client_secret)) as http,
    ):
        for method in ("TRACE", "OPTIONS", "PUT", "DELETE"):
            answer = http.request(method, server.base_url + "/transactions")
            assert answer.status_code == 405, method
            assert answer.headers["content-type"] == "application/json"
            assert answer.json()["code"] == "METHOD_NOT_ALLOWED"
            assert answer.headers["allow"] == "GET"
        head = http.head(server.base_url + "/customers")
        assert (head.status_code, head.content, head.headers["allow"]) == (405, b"", "GET, POST")
        assert http.get(server.base_url + "/config").status_code == 200  # the connection lives on
        null = http.post(
            server.base_url + "/quotes",
            content=b"null",
            headers={"content-type": "application/json"},
        )
        assert (null.status_code, null.json()["code"]) == (400, "INVALID_REQUEST_FORMAT")


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"type": "CARD"}, "type"),
        ({"status": "SETTLED"}, "status"),
        ({"status": "AUTHORIZED"}, "status"),
        ({"status": "PARTIALLY_SETTLED"}, "status"),
    ],
)
def test_the_transaction_list_filters_take_only_the_interfaces_values(
    sandbox: Sandbox, params: dict[str, str], named: str
) -> None:
    # `status` is a TransactionStatus and `type` INCOMING or OUTGOING: card statuses and CARD
    # are refused as the service would (card transactions are listed, never filtered)
    assert fields(call(sandbox.world, "GET", "/transactions", params)) == [named]


def test_refunded_selects_refunded_transactions_of_both_kinds(sandbox: Sandbox) -> None:
    status, body = call(sandbox.world, "GET", "/transactions", {"status": "REFUNDED", "limit": 100})
    truth = {t["id"] for t in sandbox.world.all_transactions() if t["status"] == "REFUNDED"}
    assert status == 200 and {t["id"] for t in body["data"]} == truth
    assert {t["type"] for t in body["data"]} >= {"CARD"}


@pytest.mark.parametrize(
    ("path", "name", "values"),
    [
        ("/transactions", "status", ["PROCESSING", "PENDING"]),
        ("/transactions", "type", ["INCOMING", "OUTGOING"]),
        ("/transactions", "limit", ["5", "7"]),
        ("/transactions", "cursor", ["", ""]),
        ("/transactions", "sortOrder", ["asc", "desc"]),
        ("/transactions", "customerId", ["a", "b"]),
        ("/cards", "state", ["ACTIVE", "FROZEN"]),
        ("/customers", "limit", ["5", "5"]),
        ("/customers/internal-accounts", "currency", ["USD", "EUR"]),
        ("/customers/external-accounts", "limit", ["5", "6"]),
        ("/platform/external-accounts", "limit", ["5", "6"]),
        ("/exchange-rates", "sourceCurrency", ["USD", "EUR"]),
        ("/exchange-rates", "sendingAmount", ["100", "200"]),
    ],
)
def test_a_repeated_scalar_parameter_is_refused_by_name(
    sandbox: Sandbox, path: str, name: str, values: list[str]
) -> None:
    # a scalar given twice was cut to its first value: a client sending a list got a part
    status, body = call(sandbox.world, "GET", path, {name: values})
    assert (status, body["code"]) == (400, "INVALID_INPUT"), body
    assert [e["field"] for e in body["details"]["errors"]] == [name]


def test_an_array_parameter_takes_repeats_and_commas_alike(sandbox: Sandbox) -> None:
    w = sandbox.world
    repeated = call(w, "GET", "/exchange-rates", {"destinationCurrency": ["EUR", "MXN"]})
    joined = call(w, "GET", "/exchange-rates", {"destinationCurrency": "EUR,MXN"})
    assert repeated[0] == 200 and repeated == joined
    assert {r["destinationCurrency"]["code"] for r in repeated[1]["data"]} == {"EUR", "MXN"}


def test_null_card_funding_sources_are_refused(sandbox: Sandbox) -> None:
    w = sandbox.world
    card = next(iter(w.entities.card_index))
    for name in ("fundingSources", "state"):
        body = {name: None, "maxSpendPerTransaction": 5_000}
        assert fields(call(w, "PATCH", f"/cards/{card}", body=body)) == [name]
    cleared = call(w, "PATCH", f"/cards/{card}", body={"maxSpendPerTransaction": None})
    assert cleared[0] == 200, cleared  # the one nullable field of the body


@pytest.mark.parametrize(
    ("method", "path", "body", "named"),
    [
        ("POST", "/quotes", {"description": None}, "description"),
        ("POST", "/quotes", {"immediatelyExecute": None}, "immediatelyExecute"),
        ("POST", "/sandbox/uma/receive", {"receiverUmaAddress": None}, "receiverUmaAddress"),
    ],
)
def test_null_is_refused_in_any_non_nullable_body_field(
    sandbox: Sandbox, method: str, path: str, body: dict[str, Any], named: str
) -> None:
    w = sandbox.world
    base = _quote_body(sandbox) if path == "/quotes" else {}
    assert named in fields(call(w, method, path, body=base | body))


@pytest.mark.http
def test_an_unserved_interface_path_answers_a_not_found_code_of_the_interface(
    sandbox: Sandbox,
) -> None:
    with (
        sandbox.serve() as server,
        httpx.Client(auth=(sandbox.client_id, sandbox.client_secret)) as http,
    ):
        for path in ("/invitations/abc", "/bulk/jobs/x", "/no-such-thing"):
            answer = http.get(server.base_url + path)
            assert (answer.status_code, answer.json()["code"]) == (404, "REFERENCE_NOT_FOUND")
        outside = http.get(server.base_url.rsplit("/", 1)[0] + "/elsewhere")
        assert (outside.status_code, outside.json()["code"]) == (404, "REFERENCE_NOT_FOUND")


@pytest.mark.parametrize(
    ("path", "name", "value"),
    [
        # found by the fuzzer's negative mode: `destinationCurrency=false` answered 200 (empty)
        ("/exchange-rates", "destinationCurrency", "false"),
        ("/exchange-rates", "destinationCurrency", "EUR,usd"),
        ("/exchange-rates", "sourceCurrency", "0"),
        ("/customers", "currency", "true"),
        ("/customers/internal-accounts", "currency", "us dollar"),
    ],
)
def test_a_currency_filter_that_is_no_currency_code_is_refused(
    sandbox: Sandbox, path: str, name: str, value: str
) -> None:
    assert fields(call(sandbox.world, "GET", path, {name: value})) == [name]


def test_an_unknown_but_well_formed_currency_code_matches_nothing(sandbox: Sandbox) -> None:
    status, body = call(sandbox.world, "GET", "/exchange-rates", {"destinationCurrency": "THB"})
    assert (status, body["data"]) == (200, [])
