"""Adversarial answers for the async client and the signed wallet flows.

Every fake here is an `httpx.MockTransport` handler written in this file (nothing of
`paylens.sandbox`). Each scripted answer is one the public interface allows (bodies are checked
against the OpenAPI document at test time), but unlike what the sandbox answers. Each test runs
the same script through `Client` and `AsyncClient` and compares what they sent and raised.

The tests after "what the signed flows found" are what this found and paylens now holds: a
refused re-send of an operation the service accepted is pending, never "start again"; a
session's signing key stays out of its repr whatever answer carried it; an OTP challenge
answered PROCESSING is not issued again (each issue sends the customer a new code); a
challenge whose requestId cannot go back as a header is a typed error.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

import httpx
import jsonschema
import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

import paylens
from paylens import AsyncClient, Client, SessionKey
from paylens.errors import (
    APIError,
    OutcomeUnknownError,
    PaylensError,
    RateLimitError,
    WalletOperationPendingError,
)

from ._helpers import OPENAPI, interface

BASE = "https://svc.example/2025-10-13"
CLIENT_ID = "platform-id"
SECRET = "s3cr3t-client-secret"
BASIC = base64.b64encode(f"{CLIENT_ID}:{SECRET}".encode()).decode()
NOW = datetime(2025, 10, 13, 12, 0, tzinfo=UTC)


def _id(kind: str, n: int) -> str:
    return f"{kind}:00000000-0000-4000-8000-{n:012d}"


ACCOUNT = _id("InternalAccount", 2)
CREDENTIAL = _id("AuthMethod", 3)
CUSTOMER = _id("Customer", 4)
TRANSACTION = _id("Transaction", 5)
QUOTE = _id("Quote", 6)
CARD = _id("Card", 7)
SESSION = _id("Session", 1)
SEALED = "SEALED-SESSION-SIGNING-KEY-0123456789abcdef"


def _ts(seconds: float = 0) -> str:
    return (NOW + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- the interface, loaded at test time -------------------------------------------------------


@cache
def _registry() -> Registry:
    if not OPENAPI.is_file():
        pytest.skip("the interface description is absent")
    doc = interface()
    return Registry().with_resource(
        "urn:api", Resource.from_contents(doc, default_specification=DRAFT202012)
    )


def interface_valid(schema: str, body: Any) -> Any:
    """`body`, after checking that the interface's `schema` allows it."""
    validator = jsonschema.Draft202012Validator(
        {"$ref": f"urn:api#/components/schemas/{schema}"}, registry=_registry()
    )
    errors = [e.message for e in validator.iter_errors(body)]
    assert not errors, f"the fake's {schema} body is not the interface's: {errors[:3]}"
    return body


# --- answers ----------------------------------------------------------------------------------


def answer(status: int, body: Any = None, headers: dict[str, str] | None = None) -> httpx.Response:
    if body is None:
        return httpx.Response(status, headers=headers)
    return httpx.Response(status, json=body, headers=headers)


def error(status: int, code: str, details: dict[str, Any] | None = None, **headers: str):
    body: dict[str, Any] = {"status": status, "code": code, "message": f"{code} said"}
    if details is not None:
        body["details"] = details
    schema = {400: "Error400", 401: "Error401", 404: "Error404", 409: "Error409", 500: "Error500"}
    if status in schema:
        interface_valid(schema[status], body)
    return answer(status, body, {k.replace("_", "-"): v for k, v in headers.items()})


def challenge(n: int = 1, request_id: str | None = None) -> httpx.Response:
    body = {
        "type": "EMAIL_OTP",
        "payloadToSign": json.dumps({"op": n, "nonce": "abc"}, separators=(",", ":")),
        "requestId": request_id or _id("Request", 100 + n),
        "expiresAt": _ts(300),
    }
    return answer(202, interface_valid("AuthSignedRequestChallenge", body))


def processing() -> httpx.Response:
    return answer(200, {"status": "PROCESSING", "message": "the operation is settling"})


def session_body(*, newer: bool = False, **extra: Any) -> dict[str, Any]:
    """An AuthSession; `newer`: an enum value a newer service may add (README: kept)."""
    body = {
        "id": SESSION,
        "accountId": ACCOUNT,
        "type": "EMAIL_OTP",
        "nickname": "ana@example.com",
        "createdAt": _ts(),
        "updatedAt": _ts(),
        "expiresAt": _ts(900),
        **extra,
    }
    return body if newer else interface_valid("AuthSession", body)


def customer_body() -> dict[str, Any]:
    body = {
        "id": CUSTOMER,
        "platformCustomerId": "cus-1",
        "customerType": "INDIVIDUAL",
        "umaAddress": "$ana@example.com",
        "email": "new@example.com",
        "createdAt": _ts(),
        "updatedAt": _ts(),
    }
    return body


def otp_target_bundle() -> str:
    """An `otpEncryptionTargetBundle` as the interface describes it (its own enclave key)."""
    enclave, target = (
        ec.generate_private_key(ec.SECP256R1()),
        ec.generate_private_key(ec.SECP256R1()),
    )

    def point(k: ec.EllipticCurvePrivateKey) -> str:
        return (
            k.public_key()
            .public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
            .hex()
        )

    data = json.dumps({"targetPublic": point(target)}).encode()
    return json.dumps(
        {
            "version": "v1.0.0",
            "data": data.hex(),
            "dataSignature": enclave.sign(data, ec.ECDSA(hashes.SHA256())).hex(),
            "enclaveQuorumPublic": point(enclave),
        }
    )


# --- the scripted service, and running one script through both clients ----------------------

Step = httpx.Response | Exception | Callable[[], httpx.Response]


class Script:
    """Answers requests in order (the last step repeats); records every request."""

    def __init__(self, steps: list[Step]) -> None:
        self.steps = list(steps)
        self.seen: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        request.read()
        self.seen.append(request)
        step = self.steps.pop(0) if len(self.steps) > 1 else self.steps[0]
        if isinstance(step, Exception):
            raise step
        return step() if callable(step) else _fresh(step)


def _fresh(response: httpx.Response) -> httpx.Response:
    # a response handed out twice must not share a consumed stream
    return httpx.Response(response.status_code, headers=response.headers, content=response.content)


@dataclass
class Outcome:
    value: Any = None
    error: BaseException | None = None
    seen: list[httpx.Request] = field(default_factory=list)
    sleeps: list[float] = field(default_factory=list)

    @property
    def sent(self) -> int:
        return len(self.seen)

    def summary(self) -> tuple[Any, ...]:
        e = self.error
        if e is None:
            return ("ok", type(self.value).__name__, self.sent, self.sleeps)
        return (
            type(e).__name__,
            getattr(e, "status", None),
            getattr(e, "code", None),
            getattr(e, "attempts", None),
            getattr(e, "idempotency_key", None),
            getattr(e, "retry_after", None),
            self.sent,
            self.sleeps,
        )


def run_sync(steps: list[Step], act: Callable[[Any], Any], **options: Any) -> Outcome:
    script, out = Script(steps), Outcome()
    client = Client(
        BASE,
        CLIENT_ID,
        SECRET,
        transport=httpx.MockTransport(script),
        sleep=out.sleeps.append,
        seed=7,
        **options,
    )
    try:
        out.value = act(client)
    except Exception as exc:
        out.error = exc
    out.seen = script.seen
    return out


def run_async(steps: list[Step], act: Callable[[Any], Any], **options: Any) -> Outcome:
    script, out = Script(steps), Outcome()

    async def sleep(seconds: float) -> None:
        out.sleeps.append(seconds)

    async def go() -> Any:
        async with AsyncClient(
            BASE,
            CLIENT_ID,
            SECRET,
            transport=httpx.MockTransport(script),
            sleep=sleep,
            seed=7,
            **options,
        ) as client:
            return await act(client)

    try:
        out.value = asyncio.run(go())
    except Exception as exc:
        out.error = exc
    out.seen = script.seen
    return out


def both(steps: Callable[[], list[Step]], act: Callable[[Any], Any], **options: Any):
    return run_sync(steps(), act, **options), run_async(steps(), act, **options)


RUNNERS = pytest.mark.parametrize("run", [run_sync, run_async], ids=["sync", "async"])


def signature_headers(request: httpx.Request) -> tuple[str | None, str | None]:
    return request.headers.get("Service-Wallet-Signature"), request.headers.get("Request-Id")


def _signed(request: httpx.Request) -> tuple[bool, str | None]:
    """Whether a request carries a stamp (ECDSA stamps differ every time), and its Request-Id."""
    stamp, request_id = signature_headers(request)
    return stamp is not None, request_id


# =============================================================================================
# 1. AsyncClient parity on state-changing calls
# =============================================================================================

QUOTE_CREATE = dict(
    source={"sourceType": "ACCOUNT", "accountId": ACCOUNT},
    destination={"destinationType": "ACCOUNT", "accountId": _id("ExternalAccount", 8)},
    locked_currency_side="SENDING",
    locked_currency_amount=10_000,
)

STATE_CHANGING: dict[str, Callable[[Any], Any]] = {
    "cancel": lambda c: c.transactions.cancel(TRANSACTION, reason="asked"),
    "approve": lambda c: c.transactions.approve(TRANSACTION),
    "reject": lambda c: c.transactions.reject(TRANSACTION, reason="no"),
    "confirm": lambda c: c.transactions.confirm_receipt(TRANSACTION),
    "card_update": lambda c: c.cards.update(CARD, state="FROZEN"),
    "quote_create": lambda c: c.quotes.create(**QUOTE_CREATE, idempotency_key="key-create"),
    "quote_execute": lambda c: c.quotes.execute(QUOTE, idempotency_key="key-execute"),
    "session_revoke": lambda c: c.auth.sessions.revoke(SESSION, signer=_KEY),
    "credential_revoke": lambda c: c.auth.credentials.revoke(CREDENTIAL, signer=_KEY),
    "export": lambda c: c.auth.export_wallet(ACCOUNT, signer=_KEY, key=_EXPORT_KEY),
}
KEYED = {"quote_create": "key-create", "quote_execute": "key-execute"}
WALLET = {"session_revoke", "credential_revoke", "export"}

_KEY = SessionKey.generate()
_EXPORT_KEY = SessionKey.generate()


def _ratelimited(after: str = "2") -> httpx.Response:
    return error(429, "RATE_LIMITED", Retry_After=after)


FAILURES: dict[str, Callable[[], list[Step]]] = {
    "lost": lambda: [httpx.ReadError("connection reset after sending")],
    "timeout": lambda: [httpx.ReadTimeout("no answer in time")],
    "500": lambda: [error(500, "INTERNAL_ERROR")],
    "503_bare": lambda: [answer(503)],
    "408": lambda: [answer(408)],
    "429_then_500": lambda: [_ratelimited("2"), error(500, "SERVICE_SWITCH_ERROR")],
    "429_too_long": lambda: [_ratelimited("3600")],
    "429_http_date_then_lost": lambda: [
        _ratelimited("Wed, 21 Oct 2015 07:28:00 GMT"),
        httpx.ReadError("lost"),
    ],
    "unreadable_2xx": lambda: [httpx.Response(200, content=b"<html>gateway says ok</html>")],
    "connect_then_lost": lambda: [httpx.ConnectError("refused"), httpx.RemoteProtocolError("eof")],
}


def _prefixed(name: str, failure: Callable[[], list[Step]]) -> Callable[[], list[Step]]:
    # a wallet call first gets its challenge; the failure lands on the signed retry
    if name in WALLET:
        return lambda: [challenge(), *failure()]
    return failure


@pytest.mark.parametrize("failure", list(FAILURES))
@pytest.mark.parametrize("call", list(STATE_CHANGING))
def test_async_client_sends_and_raises_exactly_as_the_sync_client(call: str, failure: str) -> None:
    sync, aio = both(_prefixed(call, FAILURES[failure]), STATE_CHANGING[call])
    assert sync.error is not None and aio.error is not None
    assert sync.summary() == aio.summary()
    # the same wire requests, in the same order, with the same headers that matter
    wire = [
        [
            (r.method, r.url.path, _signed(r), r.headers.get("Idempotency-Key"), r.content)
            for r in out.seen
        ]
        for out in (sync, aio)
    ]
    assert wire[0] == wire[1]


@pytest.mark.parametrize(
    ("call", "failure"),
    [
        (call, failure)
        for call in STATE_CHANGING
        if call not in KEYED
        for failure in ("lost", "timeout", "500", "408", "unreadable_2xx")
        # on a revoke a 200 alone means PROCESSING (spec §4.2): it is polled, tested apart
        if not (failure == "unreadable_2xx" and call in ("session_revoke", "credential_revoke"))
    ],
)
def test_an_unkeyed_state_change_that_may_have_acted_is_sent_once_and_typed(
    call: str, failure: str
) -> None:
    for out in both(_prefixed(call, FAILURES[failure]), STATE_CHANGING[call]):
        assert isinstance(out.error, OutcomeUnknownError), out.summary()
        assert out.error.idempotency_key is None
        sent_after_challenge = out.seen[1:] if call in WALLET else out.seen
        assert len(sent_after_challenge) == 1


@pytest.mark.parametrize("failure", ["lost", "timeout", "500", "408", "unreadable_2xx"])
@pytest.mark.parametrize("call", list(KEYED))
def test_a_keyed_call_gives_up_naming_its_key_in_both_clients(call: str, failure: str) -> None:
    for out in both(FAILURES[failure], STATE_CHANGING[call]):
        assert isinstance(out.error, OutcomeUnknownError), out.summary()
        assert out.error.idempotency_key == KEYED[call]
        assert {r.headers["Idempotency-Key"] for r in out.seen} == {KEYED[call]}


@pytest.mark.parametrize("call", list(STATE_CHANGING))
def test_retry_after_is_honoured_the_same_way(call: str) -> None:
    steps = _prefixed(
        call, lambda: [_ratelimited("7"), _ratelimited("3"), error(404, "REFERENCE_NOT_FOUND")]
    )
    sync, aio = both(steps, STATE_CHANGING[call])
    assert sync.sleeps == aio.sleeps == [7.0, 3.0]
    assert type(sync.error) is type(aio.error) and sync.error.status == 404  # type: ignore[union-attr]
    too_long = _prefixed(call, lambda: [_ratelimited("121")])
    for out in both(too_long, STATE_CHANGING[call]):
        assert isinstance(out.error, RateLimitError) and out.error.retry_after == 121
        assert out.sleeps == []


# =============================================================================================
# 2. Signed wallet flows
# =============================================================================================


def _verify(client: Any) -> Any:
    return client.auth.credentials.verify_email_otp(
        CREDENTIAL, otp_code="000000", target_bundle=_TARGET, key=_KEY
    )


_TARGET = otp_target_bundle()

SIGNED: dict[str, tuple[Callable[[Any], Any], Callable[[], httpx.Response]]] = {
    # call, its terminal answer (built when a test runs: checking a body against the interface
    # reads the interface, which only the worker running this file should pay for)
    "refresh": (
        lambda c: c.auth.sessions.refresh(SESSION, signer=_KEY),
        lambda: answer(201, session_body()),
    ),
    "session_revoke": (lambda c: c.auth.sessions.revoke(SESSION, signer=_KEY), lambda: answer(204)),
    "credential_revoke": (
        lambda c: c.auth.credentials.revoke(CREDENTIAL, signer=_KEY),
        lambda: answer(204),
    ),
    "add_sms_otp": (
        lambda c: c.auth.credentials.add_sms_otp(ACCOUNT, signer=_KEY),
        lambda: answer(
            201, {k: v for k, v in session_body().items() if k != "expiresAt"} | {"type": "SMS_OTP"}
        ),
    ),
    "verify_email_otp": (_verify, lambda: answer(200, session_body())),
    "update_customer_email": (
        lambda c: c.auth.update_customer_email(CUSTOMER, "new@example.com", signer=_KEY),
        lambda: answer(200, customer_body()),
    ),
}
NOT_EXPORT = list(SIGNED)


@RUNNERS
@pytest.mark.parametrize("op", NOT_EXPORT)
def test_challenge_then_processing_then_terminal_resends_the_identical_signed_request(
    run: Callable[..., Outcome], op: str
) -> None:
    act, terminal = SIGNED[op][0], SIGNED[op][1]()
    out = run([challenge(), processing(), processing(), terminal], act)
    assert out.error is None, out.summary()
    first, *signed = out.seen
    assert signature_headers(first) == (None, None)
    assert len(signed) == 3
    assert {signature_headers(r) for r in signed} == {signature_headers(signed[0])}
    assert signature_headers(signed[0])[1] == _id("Request", 101)
    assert {r.content for r in out.seen} == {first.content}


@RUNNERS
@pytest.mark.parametrize("op", NOT_EXPORT)
def test_processing_forever_ends_pending_without_an_unsigned_restart(
    run: Callable[..., Outcome], op: str
) -> None:
    out = run([challenge(), processing()], SIGNED[op][0])
    assert isinstance(out.error, WalletOperationPendingError), out.summary()
    assert all(signature_headers(r)[0] for r in out.seen[1:])


@RUNNERS
@pytest.mark.parametrize("op", NOT_EXPORT)
def test_a_lapse_after_processing_is_pending_not_a_restart(
    run: Callable[..., Outcome], op: str
) -> None:
    lapsed = error(401, "INVALID_SIGNATURE", {"reason": "REQUEST_ID_EXPIRED"})
    out = run([challenge(), processing(), lapsed, challenge(2), SIGNED[op][1]()], SIGNED[op][0])
    assert isinstance(out.error, WalletOperationPendingError), out.summary()
    assert out.sent == 3


@RUNNERS
def test_export_may_start_afresh_after_a_lapse(run: Callable[..., Outcome]) -> None:
    exported = answer(
        200,
        interface_valid(
            "InternalAccountExportResponse", {"id": ACCOUNT, "encryptedWalletCredentials": "c1"}
        ),
    )
    lapsed = error(401, "INVALID_SIGNATURE", {"reason": "REQUEST_ID_EXPIRED"})
    out = run(
        [challenge(), processing(), lapsed, challenge(2), exported],
        lambda c: c.auth.export_wallet(ACCOUNT, signer=_KEY, key=_EXPORT_KEY),
    )
    assert out.error is None, out.summary()
    assert [signature_headers(r)[1] for r in out.seen] == [
        None,
        _id("Request", 101),
        _id("Request", 101),
        None,
        _id("Request", 102),
    ]


@RUNNERS
@pytest.mark.parametrize("op", NOT_EXPORT)
@pytest.mark.parametrize(
    "refusal",
    [(400, "INVALID_INPUT"), (404, "REFERENCE_NOT_FOUND"), (401, "WALLET_SIGNATURE_INVALID")],
)
def test_a_4xx_on_the_signed_retry_is_typed_and_not_resent(
    run: Callable[..., Outcome], op: str, refusal: tuple[int, str]
) -> None:
    out = run([challenge(), error(*refusal)], SIGNED[op][0])
    assert isinstance(out.error, APIError) and out.error.status == refusal[0], out.summary()
    assert out.sent == 2


@RUNNERS
@pytest.mark.parametrize("op", NOT_EXPORT)
@pytest.mark.parametrize("lost", ["read", "protocol", "timeout", "502"])
def test_a_lost_signed_retry_is_an_unknown_outcome_sent_once(
    run: Callable[..., Outcome], op: str, lost: str
) -> None:
    failure = {
        "read": httpx.ReadError("reset"),
        "protocol": httpx.RemoteProtocolError("server disconnected"),
        "timeout": httpx.ReadTimeout("slow"),
        "502": answer(502),
    }[lost]
    out = run([challenge(), processing(), failure], SIGNED[op][0])
    assert isinstance(out.error, OutcomeUnknownError), out.summary()
    assert out.sent == 3
    assert out.seen[0].headers.get("Service-Wallet-Signature") is None
    assert all(signature_headers(r)[0] for r in out.seen[1:])


SECRETS = [_KEY.export_private_hex(), _EXPORT_KEY.export_private_hex(), SECRET, BASIC, SEALED]


def _chain(exc: BaseException | None) -> list[BaseException]:
    seen: list[BaseException] = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


def _leaks(text: str) -> list[str]:
    return [s[:6] + "…" for s in SECRETS if s in text]


@pytest.mark.parametrize("op", NOT_EXPORT)
@pytest.mark.parametrize(
    "script",
    ["lost", "500_echoing", "bad_terminal", "lapse_after_processing", "pending", "refusal"],
)
def test_no_secret_in_errors_their_chain_or_debug_logs(
    op: str, script: str, caplog: pytest.LogCaptureFixture
) -> None:
    steps = {
        "lost": lambda: [challenge(), httpx.ReadError("reset")],
        "500_echoing": lambda: [
            challenge(),
            error(500, "INTERNAL_ERROR", {"echo": {"encryptedSessionSigningKey": SEALED}}),
        ],
        "bad_terminal": lambda: [
            challenge(),
            answer(
                201 if op in ("refresh", "add_sms_otp") else 200,
                {"encryptedSessionSigningKey": SEALED, "id": 5},
            ),
        ],
        "lapse_after_processing": lambda: [
            challenge(),
            processing(),
            error(401, "INVALID_SIGNATURE", {"reason": "REQUEST_ID_EXPIRED"}),
        ],
        "pending": lambda: [challenge(), processing()],
        "refusal": lambda: [challenge(), error(401, "WALLET_SIGNATURE_INVALID")],
    }[script]
    caplog.set_level(logging.DEBUG)
    for out in both(steps, SIGNED[op][0]):
        assert out.error is not None
        for exc in _chain(out.error):
            assert not _leaks(repr(exc) + str(exc) + repr(vars(exc))), (type(exc), _leaks(str(exc)))
    assert not _leaks(caplog.text)


# --- what the signed flows found --------------------------------------------------------------


@RUNNERS
@pytest.mark.parametrize("op", ["refresh", "session_revoke", "credential_revoke"])
@pytest.mark.parametrize(
    "details", [None, {"reason": "REQUEST_ID_REUSED"}], ids=["no_details", "reused"]
)
def test_a_refused_resend_of_an_accepted_operation_is_pending_never_start_again(
    run: Callable[..., Outcome], op: str, details: dict[str, Any] | None
) -> None:
    """202, signed retry answered 200 PROCESSING (accepted), then the identical re-send (§5.5)
    is refused 401 INVALID_SIGNATURE: the challenge lapsed or its requestId, single-use (§5.4),
    was spent. The interface names no reason. paylens raises a plain InvalidSignatureError whose
    message tells the operator to start the operation again: an accepted operation restarted."""
    refused = error(401, "INVALID_SIGNATURE", details)
    out = run([challenge(), processing(), refused], SIGNED[op][0])
    assert out.sent == 3
    assert "start the operation again" not in str(out.error), str(out.error)
    assert isinstance(out.error, WalletOperationPendingError), out.summary()


@RUNNERS
def test_a_session_key_an_email_otp_session_carries_stays_out_of_its_repr(
    run: Callable[..., Outcome],
) -> None:
    """The EMAIL_OTP verify answers 200 `AuthSession` (interface), which may carry the
    deprecated `encryptedSessionSigningKey`. paylens reads it as `Session`, keeps the field as
    an unknown extra, and prints it in repr() and str()."""
    body = session_body(encryptedSessionSigningKey=SEALED)
    out = run([challenge(), answer(200, body)], _verify)
    assert out.error is None, out.summary()
    assert SEALED not in repr(out.value)
    assert SEALED not in str(out.value)


@RUNNERS
def test_an_otp_challenge_answered_processing_is_not_issued_again(
    run: Callable[..., Outcome],
) -> None:
    """`POST /auth/credentials/{id}/challenge` may answer 200 PROCESSING (§4.2). It is not a
    signed-retry operation (§5.4's list), so there is no signed request to re-send: every POST
    to it issues a fresh OTP to the customer. paylens re-POSTs the unsigned challenge as a
    'poll' (up to 12 times), each one a new issuance of the accepted operation."""
    bundle = answer(
        200,
        interface_valid(
            "AuthMethodResponse",
            {
                "id": CREDENTIAL,
                "accountId": ACCOUNT,
                "type": "EMAIL_OTP",
                "nickname": "ana@example.com",
                "createdAt": _ts(),
                "updatedAt": _ts(),
                "otpEncryptionTargetBundle": _TARGET,
            },
        ),
    )
    out = run(
        [processing(), processing(), bundle], lambda c: c.auth.credentials.challenge(CREDENTIAL)
    )
    challenge_posts = [r for r in out.seen if r.url.path.endswith("/challenge")]
    assert len(challenge_posts) == 1, f"{len(challenge_posts)} OTP issuances for one call"


@RUNNERS
@pytest.mark.parametrize("op", ["refresh", "session_revoke", "verify_email_otp"])
def test_a_challenge_whose_request_id_is_no_header_text_is_a_typed_error(
    run: Callable[..., Outcome], op: str
) -> None:
    """`requestId` is any string (interface). One with a non-ASCII character cannot go in an
    HTTP header; paylens lets httpx's UnicodeEncodeError out instead of a typed error."""
    out = run([challenge(request_id="Request:ñ-0001"), SIGNED[op][1]()], SIGNED[op][0])
    assert out.error is not None
    assert isinstance(out.error, PaylensError), f"{type(out.error).__name__}: {out.error}"


# =============================================================================================
# 3. Interface-valid but unusual bodies
# =============================================================================================

USD = {"code": "USD", "name": "United States Dollar", "symbol": "$", "decimals": 2}


def outgoing(**changes: Any) -> dict[str, Any]:
    body = {
        "id": TRANSACTION,
        "type": "OUTGOING",
        "status": "PENDING",
        "direction": "DEBIT",
        "customerId": CUSTOMER,
        "platformCustomerId": "cus-1",
        "createdAt": _ts(),
        "updatedAt": _ts(),
        "destination": {
            "currency": "USD",
            "destinationType": "ACCOUNT",
            "accountId": _id("ExternalAccount", 8),
        },
        "sentAmount": {"amount": 12_345, "currency": USD},
        "source": {"currency": "USD", "sourceType": "ACCOUNT", "accountId": ACCOUNT},
    }
    body.update(changes)
    return body


TRANSACTION_BODIES = {
    "plain": outgoing(),
    "extra_fields": outgoing(newField={"nested": [1, 2]}, settledVia="NEW_RAIL"),
    "unknown_status": outgoing(status="ON_HOLD_FOR_REVIEW"),
    "unknown_type": outgoing(type="CRYPTO_SWAP"),
    "unknown_rail": outgoing(paymentRail="FEDNOW_NEXT"),
    "unknown_destination_type": outgoing(
        destination={"currency": "USD", "destinationType": "NEW_KIND", "accountId": "x"}
    ),
    "offset_time": outgoing(createdAt="2025-10-13T12:00:00.123456+05:30"),
}


@RUNNERS
@pytest.mark.parametrize("body", list(TRANSACTION_BODIES))
@pytest.mark.parametrize("action", ["cancel", "approve", "reject", "confirm"])
def test_unusual_transaction_answers_give_typed_models(
    run: Callable[..., Outcome], action: str, body: str
) -> None:
    out = run([answer(200, TRANSACTION_BODIES[body])], STATE_CHANGING[action])
    assert out.error is None, out.summary()
    assert out.value.id == TRANSACTION


WALLET_BODIES: dict[str, tuple[str, Callable[[], dict[str, Any]]]] = {
    # call, its answer's body (built when the test runs, as `SIGNED`'s answers are)
    "refresh_extra": ("refresh", lambda: session_body(newField=1, deviceHint={"os": "x"})),
    "refresh_unknown_type": ("refresh", lambda: session_body(newer=True, type="HARDWARE_KEY")),
    "refresh_sealed_key": ("refresh", lambda: session_body(encryptedSessionSigningKey=SEALED)),
    "verify_extra": ("verify_email_otp", lambda: session_body(newField=[1])),
    "verify_unknown_type": (
        "verify_email_otp",
        lambda: session_body(newer=True, type="EMAIL_OTP_V2"),
    ),
    "add_credential_id": (
        "add_sms_otp",
        lambda: {
            **{k: v for k, v in session_body().items() if k != "expiresAt"},
            "credentialId": "abc",
        },
    ),
}


@RUNNERS
@pytest.mark.parametrize("case", list(WALLET_BODIES))
def test_unusual_wallet_answers_give_typed_models(run: Callable[..., Outcome], case: str) -> None:
    op, body = WALLET_BODIES[case]
    status = 200 if op == "verify_email_otp" else 201
    out = run([challenge(), processing(), answer(status, body())], SIGNED[op][0])
    assert out.error is None, out.summary()
    assert isinstance(out.value, paylens.models.AuthMethod)
    if case == "refresh_sealed_key":
        assert SEALED not in repr(out.value)


@RUNNERS
def test_a_passkey_challenge_answer_with_extras_is_typed(run: Callable[..., Outcome]) -> None:
    body = interface_valid(
        "PasskeyAuthChallenge",
        {
            "id": CREDENTIAL,
            "accountId": ACCOUNT,
            "type": "PASSKEY",
            "nickname": "laptop",
            "createdAt": _ts(),
            "updatedAt": _ts(),
            "credentialId": "cred-1",
            "challenge": "ab" * 32,
            "requestId": _id("Request", 9),
            "expiresAt": _ts(300),
            "rpId": "app.example",
        },
    )
    out = run(
        [answer(200, body)],
        lambda c: c.auth.credentials.challenge(CREDENTIAL, client_public_key=_KEY),
    )
    assert isinstance(out.value, paylens.models.PasskeyAuthChallenge), out.summary()
