"""The signed-retry protocol (spec §5.4, §5.5, §5.11) request by request: every 401 code as its
own typed error, a reused and an unknown requestId, a lapsed challenge (raw, and restarted by
the client), PROCESSING loops, a tampered body, and the retry sent byte for byte."""

from __future__ import annotations

import base64
import json
from datetime import timedelta
from typing import Any

import httpx
import pytest

from paylens import (
    AuthenticationError,
    Client,
    InvalidSignatureError,
    RequestIdMissingError,
    Sandbox,
    SessionKey,
    WalletOperationPendingError,
    WalletSignatureBodyMismatchError,
    WalletSignatureInvalidError,
    WalletSignatureMalformedError,
    WalletSignatureMissingError,
)
from paylens.client import Call
from paylens.sandbox import IN_PROCESS_BASE_URL
from paylens.sandbox.wire.transport import SandboxTransport

from . import test_wallet_flows as flows
from .test_wallet_flows import Authenticator, login, plain
from .test_wallet_signing import verify_independently

# the fixtures of the flows: a small sandbox that answers PROCESSING only when told
sandbox, sleeps, client = flows.sandbox, flows.sleeps, flows.client


def raw(response: httpx.Response) -> httpx.Response:
    return response


def send(
    client: Client, method: str, path: str, body: Any = None, **headers: str
) -> httpx.Response:
    named = {k.replace("_", "-"): v for k, v in headers.items()}
    return client.request(Call(method, path, raw, json=body, headers=named or None))


def signed_headers(stamp: str, request_id: str) -> dict[str, str]:
    return {"Service_Wallet_Signature": stamp, "Request_Id": request_id}


@pytest.fixture
def session(client: Client) -> tuple[SessionKey, str, str]:
    """(key, session id, account id) of a fresh EMAIL_OTP login."""
    account = plain(client)
    key, opened = login(client, account.id)
    return key, opened.id, account.id


def challenge(client: Client, path: str, body: Any = None, method: str = "POST") -> dict[str, Any]:
    first = send(client, method, path, body)
    assert first.status_code == 202, first.text
    return first.json()


# --- the 401 codes, each its own error --------------------------------------------------------


def test_each_signed_retry_failure_is_its_own_typed_error(
    client: Client, session: tuple[SessionKey, str, str]
) -> None:
    key, session_id, _ = session
    path = f"auth/sessions/{session_id}/refresh"
    body = {"clientPublicKey": SessionKey.generate().public_key_hex}
    issued = challenge(client, path, body)
    stamp, request_id = key.stamp(issued["payloadToSign"]), issued["requestId"]

    cases: list[tuple[type[AuthenticationError], dict[str, str], Any, str]] = [
        (WalletSignatureMissingError, {"Request_Id": request_id}, body, "stamp the challenge"),
        (RequestIdMissingError, {"Service_Wallet_Signature": stamp}, body, "echo the requestId"),
        (
            WalletSignatureMalformedError,
            signed_headers("not-a-stamp", request_id),
            body,
            "base64url",
        ),
        (
            WalletSignatureMalformedError,
            signed_headers(_restamp(stamp, scheme="SIGNATURE_SCHEME_OTHER"), request_id),
            body,
            "base64url",
        ),
        (
            WalletSignatureBodyMismatchError,
            signed_headers(stamp, request_id),
            {"clientPublicKey": SessionKey.generate().public_key_hex},  # a tampered body
            "re-send the identical request",
        ),
        (
            WalletSignatureInvalidError,
            signed_headers(SessionKey.generate().stamp(issued["payloadToSign"]), request_id),
            body,
            "active session",
        ),
        (
            WalletSignatureInvalidError,
            signed_headers(key.stamp(issued["payloadToSign"] + " "), request_id),
            body,
            "active session",
        ),
        (
            InvalidSignatureError,
            signed_headers(stamp, "Request:00000000-0000-4000-8000-000000000000"),
            body,
            "start the operation again",
        ),
    ]
    for error, headers, sent, hint in cases:
        with pytest.raises(error) as caught:
            send(client, "POST", path, sent, **headers)
        assert type(caught.value) is error
        assert caught.value.status == 401 and caught.value.attempts == 1
        assert hint in str(caught.value), str(caught.value)
    reasons = [
        _reason(
            client,
            path,
            body,
            signed_headers(SessionKey.generate().stamp(issued["payloadToSign"]), request_id),
        ),
        _reason(client, path, body, signed_headers(key.stamp("other"), request_id)),
    ]
    assert reasons == ["NOT_THE_REFRESHED_SESSION", "SIGNATURE_MISMATCH"]
    # none of the failures used the challenge up: the right retry still succeeds
    assert send(client, "POST", path, body, **signed_headers(stamp, request_id)).status_code == 201


def _reason(client: Client, path: str, body: Any, headers: dict[str, str]) -> str:
    with pytest.raises(AuthenticationError) as caught:
        send(client, "POST", path, body, **headers)
    return str(caught.value.details["reason"])


def _restamp(stamp: str, **change: str) -> str:
    document = json.loads(base64.urlsafe_b64decode(stamp + "=" * (-len(stamp) % 4)))
    return base64.urlsafe_b64encode(json.dumps(document | change).encode()).decode()


def test_rejected_platform_credentials_stay_plain_unauthorized(sandbox: Sandbox) -> None:
    with (
        Client(
            IN_PROCESS_BASE_URL,
            sandbox.client_id,
            "wrong",
            transport=SandboxTransport(sandbox.app),
        ) as wrong,
        pytest.raises(AuthenticationError) as caught,
    ):
        wrong.auth.sessions.revoke(
            "Session:00000000-0000-4000-8000-000000000000", signer=SessionKey.generate()
        )
    assert type(caught.value) is AuthenticationError and caught.value.code == "UNAUTHORIZED"


def test_a_request_id_is_single_use(client: Client, session: tuple[SessionKey, str, str]) -> None:
    key, _, account_id = session
    path = f"internal-accounts/{account_id}/export"
    body = {"clientPublicKey": SessionKey.generate().public_key_hex}
    issued = challenge(client, path, body)
    headers = signed_headers(key.stamp(issued["payloadToSign"]), issued["requestId"])
    assert send(client, "POST", path, body, **headers).status_code == 200
    with pytest.raises(InvalidSignatureError) as reused:
        send(client, "POST", path, body, **headers)
    assert reused.value.reason == "REQUEST_ID_REUSED"
    assert not reused.value.challenge_lapsed


def test_a_request_id_of_another_operation_is_a_body_mismatch(
    client: Client, session: tuple[SessionKey, str, str]
) -> None:
    key, session_id, account_id = session
    issued = challenge(client, f"auth/sessions/{session_id}", method="DELETE")
    headers = signed_headers(key.stamp(issued["payloadToSign"]), issued["requestId"])
    with pytest.raises(WalletSignatureBodyMismatchError):
        send(
            client,
            "POST",
            f"internal-accounts/{account_id}/export",
            {"clientPublicKey": key.public_key_hex},
            **headers,
        )


# --- lapsed challenges --------------------------------------------------------------------------


def test_a_lapsed_challenge_is_refused(
    sandbox: Sandbox, client: Client, session: tuple[SessionKey, str, str]
) -> None:
    key, session_id, _ = session
    issued = challenge(client, f"auth/sessions/{session_id}", method="DELETE")
    sandbox.advance(timedelta(minutes=4, seconds=59))
    still = signed_headers(key.stamp(issued["payloadToSign"]), issued["requestId"])
    sandbox.advance(timedelta(seconds=1))  # exactly expiresAt: too late
    with pytest.raises(InvalidSignatureError) as lapsed:
        send(client, "DELETE", f"auth/sessions/{session_id}", **still)
    assert lapsed.value.challenge_lapsed and lapsed.value.reason == "REQUEST_ID_EXPIRED"


def test_the_client_restarts_a_lapsed_challenge_cleanly(
    sandbox: Sandbox, client: Client, session: tuple[SessionKey, str, str]
) -> None:
    key, session_id, account_id = session
    payloads: list[str] = []

    def slow_signer(payload: str) -> str:  # the first stamp arrives after the challenge lapsed
        payloads.append(payload)
        if len(payloads) == 1:
            sandbox.advance(timedelta(minutes=6))
        return key.stamp(payload)

    sandbox.requests.reset()
    client.auth.sessions.revoke(session_id, signer=slow_signer)
    assert len(payloads) == 2 and payloads[0] != payloads[1]  # a fresh challenge
    assert sandbox.requests.count("DELETE", f"/auth/sessions/{session_id}") == 4
    assert session_id not in {s.id for s in client.auth.sessions.list(account_id)}


def test_a_challenge_that_lapses_forever_is_reported(
    sandbox: Sandbox, client: Client, session: tuple[SessionKey, str, str]
) -> None:
    key, session_id, _ = session

    def always_late(payload: str) -> str:
        sandbox.advance(timedelta(minutes=6))
        return key.stamp(payload)

    with pytest.raises(InvalidSignatureError) as lapsed:
        client.auth.sessions.revoke(session_id, signer=always_late)
    assert lapsed.value.challenge_lapsed


# --- PROCESSING ---------------------------------------------------------------------------------


def test_processing_is_resent_identically_with_backoff(
    sandbox: Sandbox, sleeps: list[float], session: tuple[SessionKey, str, str]
) -> None:
    key, session_id, account_id = session
    sent: list[httpx.Request] = []
    inner = SandboxTransport(sandbox.app)

    class Recording(httpx.BaseTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            sent.append(request)
            return inner.handle_request(request)

    sandbox.world.wallets.force_processing(account_id, 3)
    with Client(
        IN_PROCESS_BASE_URL,
        sandbox.client_id,
        sandbox.client_secret,
        transport=Recording(),
        sleep=sleeps.append,
    ) as client:
        target = SessionKey.generate()
        exported = client.auth.export_wallet(account_id, signer=key, key=target)
    assert len(target.open_bundle(exported.encrypted_wallet_credentials).split()) == 12
    assert sleeps == [0.5, 1.0, 2.0]
    assert len(sent) == 5  # first leg, 3 PROCESSING, terminal
    assert len({r.content for r in sent}) == 1  # the very same body bytes every time
    assert "service-wallet-signature" not in sent[0].headers
    signed = {(r.headers["service-wallet-signature"], r.headers["request-id"]) for r in sent[1:]}
    assert len(signed) == 1  # re-sent with the same stamp and Request-Id
    stamp, request_id = signed.pop()
    verify_independently(stamp, sandbox.world.wallets.challenges[request_id].payload)
    del session_id


def test_a_settling_operation_that_never_ends_is_reported(
    sandbox: Sandbox, client: Client, session: tuple[SessionKey, str, str]
) -> None:
    key, session_id, account_id = session
    sandbox.world.wallets.force_processing(account_id, 50)
    with pytest.raises(WalletOperationPendingError, match="still PROCESSING"):
        client.auth.sessions.revoke(session_id, signer=key)
    assert session_id in {s.id for s in client.auth.sessions.list(account_id)}


def test_a_challenge_lapsing_while_processing_restarts(
    sandbox: Sandbox, session: tuple[SessionKey, str, str]
) -> None:
    key, _, account_id = session
    waits: list[float] = []

    def slow(seconds: float) -> None:
        waits.append(seconds)
        sandbox.advance(timedelta(minutes=6))

    sandbox.world.wallets.force_processing(account_id, 2)
    with sandbox.client(sleep=slow) as client:
        exported = client.auth.export_wallet(account_id, signer=key, key=SessionKey.generate())
    assert exported.id == account_id and waits == [0.5]


PROCESSING_ANSWERS = 3  # seed 2, processing_rate 0.5: the same on every run


def test_processing_is_sometimes_answered_from_the_seed(sandbox: Sandbox, client: Client) -> None:
    sandbox.world.wallets.processing_rate = 0.5
    account = plain(client)
    key, _ = login(client, account.id)
    for _ in range(4):
        client.auth.export_wallet(account.id, signer=key, key=SessionKey.generate())
    processing = sandbox.requests.count("POST", suffix="/export") - 2 * 4
    assert processing == PROCESSING_ANSWERS


def test_a_lapsed_passkey_challenge_is_not_retried(sandbox: Sandbox, client: Client) -> None:
    account = plain(client)
    key, _ = login(client, account.id)
    phone = Authenticator()
    passkey = client.auth.credentials.add_passkey(
        account.id, nickname="Phone", challenge="r", attestation=phone.register("r"), signer=key
    )
    issued = client.auth.credentials.challenge(passkey.id, client_public_key=SessionKey.generate())
    sandbox.advance(timedelta(minutes=5))
    sandbox.requests.reset()
    with pytest.raises(InvalidSignatureError) as lapsed:
        client.auth.credentials.verify_passkey(
            passkey.id, request_id=issued.request_id, assertion=phone.assert_for(issued.challenge)
        )
    assert lapsed.value.challenge_lapsed
    assert sandbox.requests.count() == 1  # nothing to restart: ask for a new challenge
