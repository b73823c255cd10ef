"""The client against a service that answers badly (a fake written here, not the sandbox): a
body that does not decode or parse, an error body off its shape, a transaction without its
required fields, a keyed call whose answers are lost, a wallet operation whose challenge
lapses after the service accepted it. Each is a typed error, a state change is never sent
twice blindly, and no value of a body (wallet keys, credentials) is quoted."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest

import paylens
from paylens import (
    AsyncClient,
    BadRequestError,
    Client,
    ConflictError,
    OutcomeUnknownError,
    ResponseValidationError,
    WalletOperationPendingError,
)

BASE = "https://fake.example/2025-10-13"
SECRET = "SECRET-of-the-platform"
TID = "Transaction:7a1e4a55-6c1b-4b0e-9d6f-1f7e2c3b4a5d"
QID = "Quote:7a1e4a55-6c1b-4b0e-9d6f-1f7e2c3b4a5d"
SID = "Session:7a1e4a55-6c1b-4b0e-9d6f-1f7e2c3b4a5d"
CRED = "AuthMethod:7a1e4a55-6c1b-4b0e-9d6f-1f7e2c3b4a5d"

Answer = httpx.Response | Callable[[httpx.Request], httpx.Response]


class Fake:
    """Answers in turn (the last again once they run out); every request kept."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return answer(request) if callable(answer) else answer


def _client(fake: Fake, **options: Any) -> Client:
    return Client(
        BASE, "id", SECRET, transport=httpx.MockTransport(fake), sleep=lambda s: None, **options
    )


def _async(fake: Fake, **options: Any) -> AsyncClient:
    async def handler(request: httpx.Request) -> httpx.Response:
        return fake(request)

    async def no_sleep(seconds: float) -> None:
        return None

    return AsyncClient(
        BASE, "id", SECRET, transport=httpx.MockTransport(handler), sleep=no_sleep, **options
    )


def _dropped(request: httpx.Request) -> httpx.Response:
    raise httpx.RemoteProtocolError("Server disconnected without sending a response.")


def _undecodable(request: httpx.Request) -> httpx.Response:
    body = httpx.ByteStream(b"not gzip at all")  # read (and decoded) by the client only
    return httpx.Response(200, headers={"Content-Encoding": "gzip"}, stream=body)


def _no_secret_anywhere(error: BaseException) -> None:
    seen: list[BaseException] = []
    while error is not None and error not in seen:
        seen.append(error)
        assert SECRET not in repr(error) and SECRET not in str(error)
        assert not isinstance(getattr(error, "request", None), httpx.Request)
        error = error.__cause__ or error.__context__  # type: ignore[assignment]


def test_a_body_that_does_not_decode_is_a_typed_error_sent_once() -> None:
    """A 2xx whose gzip body does not decode: a cancel is an unknown outcome after one
    request, a read a connection error after its retries; neither chains httpx's error, whose
    request holds the Authorization header."""
    for run in ("sync", "async"):
        fake = Fake(_undecodable)
        with pytest.raises(OutcomeUnknownError) as lost:
            if run == "sync":
                _client(fake).transactions.cancel(TID)
            else:
                asyncio.run(_async(fake).transactions.cancel(TID))
        assert len(fake.requests) == 1
        _no_secret_anywhere(lost.value)
    fake = Fake(_undecodable)
    with pytest.raises(paylens.APIConnectionError) as failed:
        _client(fake, max_retries=2).transactions.get(TID)
    assert len(fake.requests) == 3
    _no_secret_anywhere(failed.value)


def test_an_error_body_off_its_shape_keeps_what_the_service_said() -> None:
    errors = {"errors": [{"field": "amount", "constraint": "MAX"}]}
    fake = Fake(
        httpx.Response(400, json={"status": 400, "message": "over the limit", "details": errors})
    )
    with pytest.raises(BadRequestError) as refused:
        _client(fake).transactions.get(TID)
    assert (refused.value.code, refused.value.message) == ("HTTP_400", "over the limit")
    assert refused.value.details == errors and refused.value.field_errors[0].field == "amount"
    fake = Fake(httpx.Response(409, json={"status": 409, "code": 409, "message": "window closed"}))
    with pytest.raises(ConflictError) as conflict:
        _client(fake).transactions.get(TID)
    assert (conflict.value.code, conflict.value.message) == ("409", "window closed")


def test_a_transaction_of_an_unknown_type_still_needs_its_id_and_status() -> None:
    fake = Fake(httpx.Response(200, json={"type": "STABLECOIN"}))
    with pytest.raises(ResponseValidationError):
        _client(fake).transactions.get(TID)
    known = {"type": "STABLECOIN", "id": TID, "status": "PENDING", "chain": "base"}
    tx = _client(Fake(httpx.Response(200, json=known))).transactions.get(TID)
    assert (tx.type, tx.id, tx.status) == ("STABLECOIN", TID, "PENDING")


def test_a_keyed_execute_whose_answers_are_lost_is_an_unknown_outcome_with_its_key() -> None:
    """`quotes.execute` is retried under one Idempotency-Key; when no attempt gives a readable
    answer (lost, 5xx, or a 2xx body paylens cannot read), the outcome is unknown and the error
    gives the key, the only way to ask again safely (README: "`OutcomeUnknownError.
    idempotency_key` is the key to call again with")."""

    def unreadable(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={})

    for answers, sent in (
        ((_dropped, _dropped, httpx.Response(500, json={"code": "INTERNAL_ERROR"})), 3),
        ((_dropped,), 3),
        ((_dropped, unreadable), 2),  # the second attempt answered, in words it cannot read
        ((unreadable,), 1),  # answered once, unreadable: unknown, never sent again
    ):
        fake = Fake(*answers)
        with pytest.raises(OutcomeUnknownError) as lost:
            _client(fake, max_retries=2).quotes.execute(QID)
        keys = {r.headers["Idempotency-Key"] for r in fake.requests}
        assert len(fake.requests) == sent and len(keys) == 1, answers
        assert lost.value.idempotency_key == keys.pop(), answers
        assert f"idempotency_key={lost.value.idempotency_key!r}" in str(lost.value)
    fake = Fake(unreadable)  # the async client shares the policy core
    with pytest.raises(OutcomeUnknownError) as lost:
        asyncio.run(_async(fake).quotes.execute(QID))
    assert lost.value.idempotency_key == fake.requests[0].headers["Idempotency-Key"]


def _challenge(i: int) -> httpx.Response:
    return httpx.Response(
        202,
        json={
            "type": "EMAIL_OTP",
            "payloadToSign": f"payload {i}",
            "requestId": f"Request:{i}",
            "expiresAt": "2099-01-01T00:00:00Z",
        },
    )


_LAPSED = httpx.Response(
    401,
    json={
        "status": 401,
        "code": "INVALID_SIGNATURE",
        "message": "expired",
        "details": {"reason": "REQUEST_ID_EXPIRED"},
    },
)
_PROCESSING = httpx.Response(200, json={"status": "PROCESSING", "message": "settling"})


def test_an_accepted_wallet_operation_is_not_started_again_when_its_challenge_lapses() -> None:
    """Refresh: challenged, signed, answered PROCESSING (accepted), then the poll's challenge
    lapsed. Starting again would send a second refresh: paylens stops and says to look."""
    fake = Fake(_challenge(1), _PROCESSING, _LAPSED, _challenge(2))
    with pytest.raises(WalletOperationPendingError, match="accepted"):
        _client(fake).auth.sessions.refresh(SID, signer=paylens.SessionKey.generate())
    assert [r.headers.get("Request-Id") for r in fake.requests] == [None, "Request:1", "Request:1"]
    # a lapse before the service accepted anything starts over, as before
    session = {
        "id": SID,
        "accountId": "InternalAccount:x",
        "type": "EMAIL_OTP",
        "nickname": "n",
        "createdAt": "2025-01-01T00:00:00Z",
        "updatedAt": "2025-01-01T00:00:00Z",
        "expiresAt": "2099-01-01T00:00:00Z",
    }
    fake = Fake(_challenge(1), _LAPSED, _challenge(2), httpx.Response(201, json=session))
    _client(fake).auth.sessions.refresh(SID, signer=paylens.SessionKey.generate())
    assert [r.headers.get("Request-Id") for r in fake.requests] == [
        None,
        "Request:1",
        None,
        "Request:2",
    ]


@pytest.mark.parametrize(
    "answer",
    [
        lambda request: httpx.Response(200, text="<html>ok</html>"),
        lambda request: httpx.Response(200, json=5),
        lambda request: httpx.Response(200, json={}),
    ],
    ids=["html", "a number", "fields missing"],
)
def test_an_unreadable_answer_to_a_wallet_challenge_is_an_unknown_outcome(
    answer: Callable[[httpx.Request], httpx.Response],
) -> None:
    """`challenge` sends an OTP (it changes state): an answer it cannot read is an unknown
    outcome after one request, never a parser's own error."""
    for run in ("sync", "async"):
        fake = Fake(answer)
        with pytest.raises(OutcomeUnknownError):
            if run == "sync":
                _client(fake).auth.credentials.challenge(CRED)
            else:
                asyncio.run(_async(fake).auth.credentials.challenge(CRED))
        assert len(fake.requests) == 1


def test_a_body_off_the_interface_is_described_without_its_values() -> None:
    """A 2xx missing a field is described by where and what, never by the values pydantic
    would quote (here a wallet's encrypted session key)."""
    sealed = "ENCRYPTED-SESSION-KEY-" + "x" * 40
    fake = Fake(httpx.Response(200, json={"id": TID, "encryptedSessionSigningKey": sealed}))
    with pytest.raises(ResponseValidationError) as off:
        _client(fake).transactions.get(TID)
    assert "xxxxx" not in str(off.value) and "ENCRYPTED" not in str(off.value)
    assert off.value.__cause__ is None
