"""Retries and typed errors, against the sandbox's fault injection (in-process and loopback)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

import paylens
from paylens import Client, Sandbox
from paylens.client import RetryPolicy
from paylens.client._policy import parse_retry_after
from paylens.errors import (
    APIConnectionError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    InternalServerError,
    LockedError,
    NotFoundError,
    RateLimitError,
    UnexpectedStatusError,
)
from paylens.sandbox import SandboxServer

MISSING_TX = "Transaction:00000000-0000-4000-8000-000000000000"


def test_429_with_retry_after_is_waited_out(
    sandbox: Sandbox, client: Client, recorded_sleeps: list[float]
) -> None:
    sandbox.faults.inject(429, "RATE_LIMITED", count=2, retry_after=3)
    config = client.config.get()
    assert config is not None
    assert recorded_sleeps == [3.0, 3.0]
    assert sandbox.requests.count("GET", "/config") == 3
    assert client.stats.snapshot() == {"requests": 3, "retries": 2, "waited_seconds": 6.0}


@pytest.mark.http
def test_429_waited_out_over_loopback(sandbox: Sandbox, http_client: Client) -> None:
    sandbox.faults.inject(429, "RATE_LIMITED", count=1, retry_after=0.25)
    started = time.monotonic()
    http_client.config.get()
    assert time.monotonic() - started >= 0.25  # really slept, not recorded
    assert sandbox.requests.count("GET", "/config") == 2
    assert http_client.stats.snapshot() == {"requests": 2, "retries": 1, "waited_seconds": 0.25}


def test_5xx_burst_is_retried_with_backoff(
    sandbox: Sandbox, client: Client, recorded_sleeps: list[float]
) -> None:
    sandbox.faults.burst_5xx(3)  # 500 INTERNAL_ERROR, 502 and 503 with an HTML body
    tx = next(iter(client.transactions.list(limit=1)))
    assert tx.id
    assert sandbox.requests.count("GET", "/transactions") == 4
    policy = client.retry_policy
    assert len(recorded_sleeps) == 3
    for n, wait in enumerate(recorded_sleeps, start=1):
        ceiling = min(policy.backoff_cap, policy.backoff_base * 2 ** (n - 1))
        assert ceiling / 2 <= wait <= ceiling


def test_too_many_failures_give_up_with_the_last_error(sandbox: Sandbox, client: Client) -> None:
    sandbox.faults.inject(500, "SERVICE_SWITCH_ERROR", count=10)
    short = sandbox.client(max_retries=2, sleep=lambda s: None)
    with pytest.raises(InternalServerError) as info:
        short.config.get()
    assert info.value.code == "SERVICE_SWITCH_ERROR"
    assert info.value.attempts == 3
    assert sandbox.requests.count("GET", "/config") == 3
    with pytest.raises(InternalServerError) as info:  # the default: 5 retries (README)
        client.config.get()
    assert info.value.attempts == 6
    assert sandbox.requests.count("GET", "/config") == 3 + 6


def test_reads_are_retried_on_408(sandbox: Sandbox, client: Client) -> None:
    """README: "reads are retried on connection errors, 408, 429 and 5xx"."""
    sandbox.faults.inject(408, "REQUEST_TIMEOUT", count=2)
    assert client.config.get() is not None
    assert sandbox.requests.count("GET", "/config") == 3


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (400, "INVALID_INPUT"),
        (409, "CONFLICT"),
        (429, "DAILY_VOLUME_LIMIT_EXCEEDED"),
        (404, "QUOTE_NOT_FOUND"),
    ],
)
def test_hopeless_errors_are_not_retried(
    sandbox: Sandbox, client: Client, status: int, code: str
) -> None:
    sandbox.faults.inject(status, code, count=5, retry_after=1)
    with pytest.raises(paylens.APIError) as info:
        client.config.get()
    assert (info.value.status, info.value.code) == (status, code)
    assert sandbox.requests.count("GET", "/config") == 1


def test_dropped_connections_are_retried_in_process(sandbox: Sandbox, client: Client) -> None:
    sandbox.faults.drop_next(2)
    assert client.config.get() is not None
    assert sandbox.requests.count("GET", "/config") == 3


@pytest.mark.http
def test_dropped_connections_are_retried_over_loopback(
    sandbox: Sandbox, server: SandboxServer
) -> None:
    # backoffs of ~10 ms, really slept: their length is test_5xx_burst_is_retried_with_backoff's
    quick = RetryPolicy(backoff_base=0.01)
    with Client(server.base_url, sandbox.client_id, sandbox.client_secret, retry=quick) as client:
        sandbox.faults.drop_next(2)
        assert client.config.get() is not None
        assert client.stats.retries == 2
    assert sandbox.requests.count("GET", "/config") == 3


def test_connection_refused_is_a_connection_error() -> None:
    client = Client(
        "http://127.0.0.1:9/2025-10-13", "id", "secret", max_retries=1, sleep=lambda s: None
    )
    with pytest.raises(APIConnectionError) as info:
        client.config.get()
    assert info.value.attempts == 2
    assert "GET http://127.0.0.1:9/2025-10-13/config" in str(info.value)


def test_a_service_that_does_not_answer_is_said_once_not_waited_in_silence(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from paylens.client import _policy

    monkeypatch.setattr(_policy, "_UNREACHED", {})  # as in a fresh process
    client = Client(
        "http://127.0.0.1:9/2025-10-13", "id", "secret", max_retries=2, sleep=lambda s: None
    )
    with caplog.at_level(logging.WARNING, logger="paylens.client"):
        for _ in range(2):  # two calls (a sync's readers): said once
            with pytest.raises(APIConnectionError):
                client.config.get()
    said = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(said) == 1
    assert said[0].getMessage() == (
        "ConnectError: [Errno 111] Connection refused (GET http://127.0.0.1:9/2025-10-13/config, "
        "1 attempt); retrying (up to 2 more tries)"
    )


def test_retry_after_beyond_the_cap_is_raised_not_waited(sandbox: Sandbox) -> None:
    sleeps: list[float] = []
    client = sandbox.client(retry=RetryPolicy(retry_after_cap=10), sleep=sleeps.append)
    sandbox.faults.inject(429, "RATE_LIMITED", count=1, retry_after=3600)
    with pytest.raises(RateLimitError) as info:
        client.config.get()
    assert info.value.retry_after == 3600
    assert sleeps == []


def test_the_default_retry_after_cap_is_120_seconds(sandbox: Sandbox) -> None:
    """README: `RetryPolicy(retry_after_cap=120)`: a longer wait asked gets the error at once,
    not a retry before its time; up to the cap it is waited out."""
    assert RetryPolicy().retry_after_cap == 120
    sleeps: list[float] = []
    client = sandbox.client(sleep=sleeps.append)
    sandbox.faults.inject(429, "RATE_LIMITED", count=1, retry_after=120)
    assert client.config.get() is not None
    assert sleeps == [120.0]
    sandbox.faults.inject(429, "RATE_LIMITED", count=1, retry_after=121)
    with pytest.raises(RateLimitError) as info:
        client.config.get()
    assert info.value.retry_after == 121
    assert sleeps == [120.0]


def test_the_deadline_bounds_the_total_wait(sandbox: Sandbox) -> None:
    sleeps: list[float] = []
    client = sandbox.client(retry=RetryPolicy(deadline=5), sleep=sleeps.append)
    sandbox.faults.inject(429, "RATE_LIMITED", count=5, retry_after=4)
    with pytest.raises(RateLimitError):
        client.config.get()
    assert sleeps == [4.0]  # a second 4 s wait would pass the 5 s deadline


def test_retry_after_as_an_http_date_is_honoured(sandbox: Sandbox) -> None:
    """README: honouring `Retry-After` "(seconds or HTTP date)" in a retry, not only parsed."""

    def later(request: httpx.Request, inner: httpx.BaseTransport) -> httpx.Response:
        when = datetime.now(UTC) + timedelta(seconds=40)
        return httpx.Response(
            429,
            headers={"Retry-After": format_datetime(when, usegmt=True)},
            json={"status": 429, "code": "RATE_LIMITED", "message": "slow down"},
        )

    sleeps: list[float] = []
    client = _scripted_client(sandbox, [later], sleeps)
    assert client.config.get() is not None
    assert len(sleeps) == 1 and 38.0 <= sleeps[0] <= 40.0


def test_parse_retry_after_reads_seconds_and_http_dates() -> None:
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    assert parse_retry_after("7", now) == 7.0
    assert parse_retry_after(format_datetime(now + timedelta(seconds=30), usegmt=True), now) == 30.0
    assert parse_retry_after(format_datetime(now - timedelta(seconds=30), usegmt=True), now) == 0.0
    assert parse_retry_after("soon", now) is None
    assert parse_retry_after(None, now) is None


def test_every_error_class_carries_its_code(sandbox: Sandbox, client: Client) -> None:
    cases = [
        (400, "INVALID_INPUT", BadRequestError),
        (401, "WALLET_SIGNATURE_INVALID", AuthenticationError),
        (404, "TRANSACTION_NOT_FOUND", NotFoundError),
        (409, "TRANSACTION_NOT_CANCELLABLE", ConflictError),
        (423, "ACCOUNT_LOCKED", LockedError),
        (429, "DAILY_VOLUME_LIMIT_EXCEEDED", RateLimitError),
        (500, "SERVICE_SWITCH_ERROR", InternalServerError),
        (403, "A_CODE_FROM_THE_FUTURE", UnexpectedStatusError),
    ]
    quick = sandbox.client(max_retries=0)
    for status, code, cls in cases:
        sandbox.faults.inject(status, code)
        with pytest.raises(cls) as info:
            quick.config.get()
        error = info.value
        assert (error.status, error.code) == (status, code)
        assert error.message
        assert error.request is not None and error.request.method == "GET"
        assert error.request.url.endswith("/2025-10-13/config")
        assert error.code_is_known is (code != "A_CODE_FROM_THE_FUTURE")


def test_real_service_errors_are_typed(shared_sandbox: Sandbox) -> None:
    client = shared_sandbox.client()
    with pytest.raises(NotFoundError) as info:
        client.transactions.get(MISSING_TX)
    assert info.value.code == "TRANSACTION_NOT_FOUND"
    bad = Client(
        client.base_url,
        shared_sandbox.client_id,
        "not-the-secret",
        transport=client._http._transport,
    )
    with pytest.raises(AuthenticationError) as auth:
        bad.config.get()
    assert auth.value.code == "UNAUTHORIZED"
    assert auth.value.attempts == 1


def test_field_errors_come_with_a_400(shared_sandbox: Sandbox) -> None:
    # the client checks arguments itself, so send the raw call to see the service's answer
    from paylens.client import Call

    client = shared_sandbox.client()
    call = Call(
        "GET", "transactions", lambda r: r, params={"limit": "500", "sortOrder": "sideways"}
    )
    with pytest.raises(BadRequestError) as info:
        client.request(call)
    fields = {e.field for e in info.value.field_errors}
    assert {"limit", "sortOrder"} <= fields
    assert "limit" in str(info.value)


def test_a_body_that_is_not_the_error_shape_still_gives_a_clear_error(sandbox: Sandbox) -> None:
    sandbox.faults.inject(502, None, count=1)
    with pytest.raises(UnexpectedStatusError) as info:
        sandbox.client(max_retries=0).config.get()
    assert info.value.status == 502
    assert info.value.code == "HTTP_502"
    assert "<html>" in (info.value.body_snippet or "")
    assert "502" in str(info.value)


def test_async_client_retries_with_the_same_policy(sandbox: Sandbox) -> None:
    import asyncio

    sleeps: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        sleeps.append(seconds)

    async def run() -> int:
        async with sandbox.async_client(sleep=fake_sleep) as client:
            sandbox.faults.inject(429, "RATE_LIMITED", count=1, retry_after=2)
            count = 0
            async for _ in client.transactions.list(limit=50, start_date="2025-09-01"):
                count += 1
            return count

    count = asyncio.run(run())
    assert sleeps == [2.0]
    truth = [t for t in sandbox.world.all_transactions() if t["createdAt"] >= "2025-09-01"]
    assert count == len(truth)


def test_transport_errors_other_than_http_are_not_swallowed() -> None:
    def broken(request: httpx.Request) -> httpx.Response:
        raise RuntimeError("a bug, not a network failure")

    client = Client(
        "https://api.example.com/2025-10-13", "id", "secret", transport=httpx.MockTransport(broken)
    )
    with pytest.raises(RuntimeError):
        client.config.get()


def _pending_bank_transfer(sandbox: Sandbox) -> str:
    return next(
        t["id"]
        for t in sandbox.world.all_transactions()
        if t["type"] == "OUTGOING"
        and t.get("paymentRail") in ("ACH", "WIRE")
        and t["status"] in ("PENDING", "PROCESSING")
        and sandbox.world.cancel_cutoff(t["id"]) > sandbox.now
    )


Step = Callable[[httpx.Request, httpx.BaseTransport], httpx.Response]


class _Scripted(httpx.BaseTransport):
    """Runs the next scripted steps (each given the request and the sandbox's transport: it
    may hand the request on, answer it itself, or raise), then hands every request on."""

    def __init__(self, sandbox: Sandbox, script: list[Step]) -> None:
        self.inner = sandbox.client()._http._transport
        self.script = list(script)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.script:
            return self.script.pop(0)(request, self.inner)
        return self.inner.handle_request(request)


def _scripted_client(sandbox: Sandbox, script: list[Step], sleeps: list[float]) -> Client:
    return Client(
        paylens.sandbox.IN_PROCESS_BASE_URL,
        sandbox.client_id,
        sandbox.client_secret,
        transport=_Scripted(sandbox, script),
        sleep=sleeps.append,
    )


_FAULT_CODES = {"408": "REQUEST_TIMEOUT", "500": "INTERNAL_ERROR", "502": "HTTP_502"}


@pytest.mark.parametrize("fault", ["408", "500", "502", "drop"])
def test_a_state_change_is_never_sent_twice_after_it_may_have_reached_the_service(
    sandbox: Sandbox, client: Client, fault: str
) -> None:
    tid = _pending_bank_transfer(sandbox)
    if fault == "drop":
        sandbox.faults.drop_next(1)
    else:
        sandbox.faults.inject(int(fault), _FAULT_CODES[fault])
    with pytest.raises(paylens.errors.OutcomeUnknownError) as caught:
        client.transactions.cancel(tid)
    assert sandbox.requests.count("POST", suffix="/cancel") == 1
    assert caught.value.status == (None if fault == "drop" else int(fault))
    assert "not sent again" in str(caught.value)


def test_a_state_change_whose_answer_times_out_is_an_unknown_outcome_sent_once(
    sandbox: Sandbox,
) -> None:
    """README: "a timeout" after sending: `OutcomeUnknownError`, never re-sent."""
    tid = _pending_bank_transfer(sandbox)

    def acted_then_timed_out(request: httpx.Request, inner: httpx.BaseTransport) -> httpx.Response:
        inner.handle_request(request)  # the service acts ...
        raise httpx.ReadTimeout("read timed out", request=request)  # ... its answer is lost

    sleeps: list[float] = []
    client = _scripted_client(sandbox, [acted_then_timed_out], sleeps)
    with pytest.raises(paylens.errors.OutcomeUnknownError):
        client.transactions.cancel(tid)
    assert sandbox.requests.count("POST", suffix="/cancel") == 1
    assert sleeps == []


def test_a_card_update_lost_to_a_5xx_is_never_sent_again(sandbox: Sandbox, client: Client) -> None:
    """README: a card update is a request that changes state: a 5xx answer raises
    `OutcomeUnknownError` after one request."""
    card = next(iter(client.cards.list(state="ACTIVE")))
    sandbox.faults.inject(503, "HTTP_503")
    with pytest.raises(paylens.errors.OutcomeUnknownError):
        client.cards.update(card.id, state="FROZEN")
    assert sandbox.requests.count("PATCH", prefix="/cards") == 1


def test_a_state_change_refused_with_429_is_retried(
    sandbox: Sandbox, client: Client, recorded_sleeps: list[float]
) -> None:
    tid = _pending_bank_transfer(sandbox)
    sandbox.faults.inject(429, "RATE_LIMITED", count=1, retry_after=2)
    tx = client.transactions.cancel(tid)
    assert tx.refund is not None and tx.refund.reason == "USER_CANCELLATION"
    assert sandbox.requests.count("POST", suffix="/cancel") == 2
    assert recorded_sleeps == [2.0]


@pytest.mark.parametrize("failure", [httpx.ConnectError, httpx.ConnectTimeout])
def test_a_state_change_that_could_not_connect_is_retried(
    failure: type[httpx.TransportError],
) -> None:
    """README: sent again when "the connection could not be made" (refused, or timed out)."""
    sandbox = Sandbox(seed=3, transactions=300)
    tid = _pending_bank_transfer(sandbox)

    def no_connection(request: httpx.Request, inner: httpx.BaseTransport) -> httpx.Response:
        raise failure("no connection", request=request)

    sleeps: list[float] = []
    tx = _scripted_client(sandbox, [no_connection], sleeps).transactions.cancel(tid)
    assert tx.refund is not None and tx.refund.reason == "USER_CANCELLATION"
    assert sandbox.requests.count("POST", suffix="/cancel") == 1  # the refused one never left
    assert len(sleeps) == 1


def test_async_state_changes_are_at_most_once_too(sandbox: Sandbox) -> None:
    tid = _pending_bank_transfer(sandbox)
    sandbox.faults.inject(503, "HTTP_503")

    async def cancel() -> None:
        async with sandbox.async_client(sleep=_no_sleep) as client:
            await client.transactions.cancel(tid)

    with pytest.raises(paylens.errors.OutcomeUnknownError):
        asyncio.run(cancel())
    assert sandbox.requests.count("POST", suffix="/cancel") == 1


async def _no_sleep(_: float) -> None:
    return None


def test_quote_creation_carries_an_idempotency_key(sandbox: Sandbox) -> None:
    seen: list[str | None] = []
    inner = sandbox.client()._http._transport

    class Spy(httpx.BaseTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            if request.method == "POST":
                seen.append(request.headers.get("Idempotency-Key"))
            return inner.handle_request(request)

    client = Client(
        paylens.sandbox.IN_PROCESS_BASE_URL,
        sandbox.client_id,
        sandbox.client_secret,
        transport=Spy(),
    )
    account = next(iter(client.internal_accounts.list()))
    with contextlib.suppress(paylens.errors.APIError):  # refused or not: the key went out
        client.quotes.create(
            source={"sourceType": "ACCOUNT", "accountId": account.id},
            destination={"destinationType": "ACCOUNT", "accountId": "ExternalAccount:x"},
            locked_currency_side="SENDING",
            locked_currency_amount=1000,
        )
    assert len(seen) == 1 and seen[0] and len(seen[0]) == 36
