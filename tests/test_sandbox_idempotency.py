"""`Idempotency-Key` where the interface declares it (POST /quotes, POST /quotes/{id}/execute),
and array query parameters as official clients send them (comma-joined and repeated)."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from paylens import Sandbox
from paylens.sandbox.errors import ServiceError
from paylens.sandbox.routes import dispatch
from paylens.sandbox.world.world import World

from .test_sandbox_conformance import _quote_body
from .test_sandbox_world import call


@pytest.fixture
def sandbox() -> Sandbox:
    return Sandbox(seed=4, transactions=800)


def post(world: World, path: str, body: Any, key: str | None) -> tuple[int, Any]:
    headers = {} if key is None else {"idempotency-key": key}
    try:
        status, value = dispatch(world, "POST", path, {}, body, headers)
    except ServiceError as exc:
        return exc.status, {"code": exc.code, "details": exc.details}
    return status, orjson.loads(value) if isinstance(value, bytes) else value


def test_a_replayed_quote_is_the_first_quote(sandbox: Sandbox) -> None:
    w, body = sandbox.world, _quote_body(sandbox)
    count = w.transaction_count()
    first = post(w, "/quotes", body, "key-1")
    again = post(w, "/quotes", body, "key-1")
    assert first[0] == again[0] == 201
    assert again[1] == first[1]
    assert w.transaction_count() == count + 1  # one quote, not two
    other = post(w, "/quotes", body, "key-2")
    assert other[1]["id"] != first[1]["id"]
    unkeyed = [post(w, "/quotes", body, None)[1]["id"] for _ in range(2)]
    assert len(set(unkeyed)) == 2
    assert w.transaction_count() == count + 4


def test_a_key_reused_with_another_body_is_refused(sandbox: Sandbox) -> None:
    w, body = sandbox.world, _quote_body(sandbox)
    assert post(w, "/quotes", body, "key-1")[0] == 201
    count = w.transaction_count()
    status, error = post(w, "/quotes", {**body, "lockedCurrencyAmount": 10_001}, "key-1")
    assert (status, error["code"]) == (400, "INVALID_INPUT")
    assert error["details"]["errors"][0]["field"] == "Idempotency-Key"
    assert w.transaction_count() == count


def test_an_error_is_not_kept_and_the_key_stays_usable(sandbox: Sandbox) -> None:
    w, body = sandbox.world, _quote_body(sandbox)
    status, _ = post(w, "/quotes", {**body, "lockedCurrencyAmount": 0}, "key-1")
    assert status == 400
    assert post(w, "/quotes", body, "key-1")[0] == 201


def test_a_replayed_execute_answers_the_first_execution(sandbox: Sandbox) -> None:
    w = sandbox.world
    quote = post(w, "/quotes", _quote_body(sandbox), None)[1]
    path = f"/quotes/{quote['id']}/execute"
    first = post(w, path, None, "exec-1")
    assert first[0] == 200 and first[1]["status"] == "PROCESSING"
    assert post(w, path, None, "exec-1") == first
    assert post(w, path, None, None)[1]["code"] == "CONFLICT"  # a second, unkeyed execution
    other = post(w, "/quotes", _quote_body(sandbox), None)[1]
    status, error = post(w, f"/quotes/{other['id']}/execute", None, "exec-1")
    assert (status, error["details"]["errors"][0]["field"]) == (400, "Idempotency-Key")


@pytest.mark.http
def test_idempotency_over_loopback(sandbox: Sandbox) -> None:
    with sandbox.serve() as server:
        auth = (sandbox.client_id, sandbox.client_secret)
        body = _quote_body(sandbox)
        answers = [
            httpx.post(
                server.base_url + "/quotes",
                json=body,
                auth=auth,
                headers={"Idempotency-Key": "a7c1e2"},
            )
            for _ in range(2)
        ]
        assert [a.status_code for a in answers] == [201, 201]
        assert answers[0].content == answers[1].content
        assert sandbox.requests.count("POST", "/quotes") == 2


def test_array_parameters_comma_joined_repeated_or_both(sandbox: Sandbox) -> None:
    w = sandbox.world

    def destinations(value: Any) -> set[str]:
        params = {"sourceCurrency": "USD", "destinationCurrency": value}
        status, body = call(w, "GET", "/exchange-rates", params)
        assert status == 200, body
        return {r["destinationCurrency"]["code"] for r in body["data"]}

    assert destinations("EUR,MXN") == {"EUR", "MXN"}
    assert destinations(["EUR", "MXN"]) == {"EUR", "MXN"}
    assert destinations(["EUR,MXN", "JPY"]) == {"EUR", "MXN", "JPY"}
    assert destinations("EUR") == {"EUR"}


@pytest.mark.http
def test_array_parameters_over_loopback(sandbox: Sandbox) -> None:
    with sandbox.serve() as server:
        auth = (sandbox.client_id, sandbox.client_secret)
        url = server.base_url + "/exchange-rates"
        joined = httpx.get(url, params={"destinationCurrency": "EUR,MXN"}, auth=auth).json()
        repeated = httpx.get(
            url, params=[("destinationCurrency", "EUR"), ("destinationCurrency", "MXN")], auth=auth
        ).json()
        codes = {r["destinationCurrency"]["code"] for r in joined["data"]}
        assert codes == {"EUR", "MXN"}
        assert joined == repeated
