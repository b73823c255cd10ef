"""Every answer of the sandbox's wallet endpoints conforms to the interface's schemas: each leg of
each signed retry, the terminal bodies, and every error (checked with the shared contract
validator; skipped when it is not beside the project). The 200 PROCESSING body has no schema in
the interface; it is checked against the spec's WalletOperationProcessing shape."""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import parse_qs

import pytest

from paylens import Sandbox, SessionKey
from paylens.client._signing import encrypt_otp_attempt
from paylens.models import WalletOperationProcessing
from paylens.sandbox.crypto import oidc_token
from paylens.sandbox.errors import ServiceError
from paylens.sandbox.routes import dispatch
from paylens.sandbox.world.world import World

from ._helpers import contract_errors
from .test_sandbox_contract import conforms
from .test_wallet_flows import Authenticator, b64url

pytestmark = pytest.mark.skipif(
    contract_errors() is None, reason="the shared contract validator is not available"
)


def answer(
    world: World,
    status: int,
    schema: str | None,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> Any:
    path, _, query = path.partition("?")
    try:
        got, value = dispatch(world, method, path, parse_qs(query), body, headers or {})
    except ServiceError as exc:
        got, value = exc.status, {"status": exc.status, "code": exc.code, "message": exc.message}
        if exc.details:
            value["details"] = exc.details
    assert got == status, value
    if schema is not None:
        conforms(value, schema)
    return value


def signed(
    world: World,
    key: SessionKey,
    method: str,
    path: str,
    body: Any,
    *,
    status: int,
    schema: str | None,
    challenge_schema: str = "AuthSignedRequestChallenge",
) -> Any:
    """Both legs of a signed retry, each checked against its schema."""
    issued = answer(world, 202, challenge_schema, method, path, body)
    headers = {
        "service-wallet-signature": key.stamp(issued["payloadToSign"]),
        "request-id": issued["requestId"],
    }
    return answer(world, status, schema, method, path, body, headers)


@pytest.fixture(scope="module")
def world() -> World:
    sandbox = Sandbox(seed=2, transactions=500)
    sandbox.world.wallets.processing_rate = 0.0
    return sandbox.world


def _plain_account(world: World) -> tuple[int, str]:
    wallets = world.wallets
    row = next(r for r, creds in wallets.credentials.items() if len(creds) == 1)
    return row, wallets.account_ids[row]


def test_wallet_answers_conform(world: World) -> None:
    row, account_id = _plain_account(world)
    email = world.wallets.credentials[row][0]["id"]
    # lists and an EMAIL_OTP login
    answer(
        world, 200, "AuthCredentialListResponse", "GET", f"/auth/credentials?accountId={account_id}"
    )
    otp = answer(
        world, 200, "AuthCredentialResponseOneOf", "POST", f"/auth/credentials/{email}/challenge"
    )
    answer(world, 429, "Error429", "POST", f"/auth/credentials/{email}/challenge")
    key = SessionKey.generate()
    bundle = encrypt_otp_attempt(otp["otpEncryptionTargetBundle"], "000000", key)
    verify = {"type": "EMAIL_OTP", "encryptedOtpBundle": bundle}
    session = signed(
        world,
        key,
        "POST",
        f"/auth/credentials/{email}/verify",
        verify,
        status=200,
        schema="AuthSession",
    )
    assert "encryptedSessionSigningKey" not in session
    # SMS_OTP added by a signed retry
    sms = signed(
        world, key, "POST", "/auth/credentials", {"type": "SMS_OTP", "accountId": account_id},
        status=201, schema="AuthMethodResponse",
    )  # fmt: skip
    answer(
        world,
        400,
        "Error400",
        "POST",
        "/auth/credentials",
        {"type": "SMS_OTP", "accountId": account_id},
    )
    # OAUTH, with the client-held key and with the deprecated sealed key
    sandbox_now = int(world.now.timestamp())
    claims = {"iss": "https://accounts.google.com", "aud": "app", "sub": "42", "iat": sandbox_now}
    oauth = signed(
        world, key, "POST", "/auth/credentials",
        {"type": "OAUTH", "accountId": account_id, "oidcToken": oidc_token(claims | {"email": "j@x.io"})},
        status=201, schema="AuthMethodResponse",
    )  # fmt: skip
    device = SessionKey.generate()
    answer(
        world, 200, "AuthSession", "POST", f"/auth/credentials/{oauth['id']}/verify",
        {"type": "OAUTH", "clientPublicKey": device.public_key_hex,
         "oidcToken": oidc_token(claims | {"nonce": device.oidc_nonce})},
    )  # fmt: skip
    legacy = answer(
        world, 200, "AuthSession", "POST", f"/auth/credentials/{oauth['id']}/verify",
        {"type": "OAUTH", "clientPublicKey": device.public_key_uncompressed_hex,
         "oidcToken": oidc_token(claims | {"nonce": _sha(device.public_key_uncompressed_hex)})},
    )  # fmt: skip
    sealed_key = SessionKey.from_encrypted_bundle(legacy["encryptedSessionSigningKey"], device)
    # PASSKEY registration and login
    phone = Authenticator()
    created = phone.register("reg-1")["response"]
    passkey = signed(
        world, key, "POST", "/auth/credentials",
        {"type": "PASSKEY", "accountId": account_id, "nickname": "Phone", "challenge": "reg-1",
         "attestation": {"credentialId": b64url(phone.raw_id), "clientDataJson": created["clientDataJSON"],
                         "attestationObject": created["attestationObject"], "transports": ["internal"]}},
        status=201, schema="AuthMethodResponse",
    )  # fmt: skip
    issued = answer(
        world, 200, "AuthCredentialResponseOneOf", "POST", f"/auth/credentials/{passkey['id']}/challenge",
        {"clientPublicKey": device.public_key_hex},
    )  # fmt: skip
    conforms(issued, "PasskeyAuthChallenge")
    assertion = phone.assert_for(issued["challenge"])["response"]
    wire_assertion = {
        "credentialId": b64url(phone.raw_id),
        "clientDataJson": assertion["clientDataJSON"],
        "authenticatorData": assertion["authenticatorData"],
        "signature": assertion["signature"],
    }
    path = f"/auth/credentials/{passkey['id']}/verify"
    answer(world, 401, "Error401", "POST", path, {"type": "PASSKEY", "assertion": wire_assertion})
    answer(
        world, 200, "AuthSession", "POST", path, {"type": "PASSKEY", "assertion": wire_assertion},
        {"Request-Id": issued["requestId"]},
    )  # fmt: skip
    # refresh, export, customer email, revokes
    fresh = SessionKey.generate()
    refreshed = signed(
        world, key, "POST", f"/auth/sessions/{session['id']}/refresh",
        {"clientPublicKey": fresh.public_key_hex},
        status=201, schema="AuthSession", challenge_schema="SignedRequestChallenge",
    )  # fmt: skip
    signed(
        world, fresh, "POST", f"/internal-accounts/{account_id}/export",
        {"clientPublicKey": SessionKey.generate().public_key_hex},
        status=200, schema="InternalAccountExportResponse", challenge_schema="SignedRequestChallenge",
    )  # fmt: skip
    customer_id = world.entities.customers.ids[world.wallets.owners[row]]
    update = {"customerType": "INDIVIDUAL", "email": "new.address@example.com"}
    if world.entities.customers.kind[world.wallets.owners[row]] == 1:
        update["customerType"] = "BUSINESS"
    signed(
        world, fresh, "PATCH", f"/customers/{customer_id}", update,
        status=200, schema="CustomerOneOf", challenge_schema="SignedRequestChallenge",
    )  # fmt: skip
    answer(world, 200, "CustomerOneOf", "GET", f"/customers/{customer_id}")
    answer(  # the interface documents no 501 here: fields the sandbox does not update are a 400
        world,
        400,
        "Error400",
        "PATCH",
        f"/customers/{customer_id}",
        update | {"currencies": ["USD"]},
    )
    signed(
        world, sealed_key, "DELETE", f"/auth/credentials/{sms['id']}", None, status=204, schema=None
    )
    signed(
        world, fresh, "DELETE", f"/auth/sessions/{refreshed['id']}", None, status=204, schema=None
    )
    answer(world, 404, "Error404", "DELETE", f"/auth/sessions/{refreshed['id']}")
    answer(world, 200, "SessionListResponse", "GET", f"/auth/sessions?accountId={account_id}")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_wallet_errors_conform(world: World) -> None:
    row, account_id = _plain_account(world)
    email = world.wallets.credentials[row][0]["id"]
    answer(world, 404, "Error404", "POST", "/auth/credentials/AuthMethod:nope/challenge")
    answer(world, 400, "Error400", "POST", "/auth/credentials", {"type": "FAX"})
    answer(world, 400, "Error400", "POST", f"/auth/credentials/{email}/verify", {"type": "OAUTH"})
    answer(world, 400, "Error400", "POST", f"/internal-accounts/{account_id}/export", {})
    answer(world, 400, "Error400", "DELETE", f"/auth/credentials/{email}")  # the last one
    export = (
        f"/internal-accounts/{account_id}/export",
        {"clientPublicKey": SessionKey.generate().public_key_hex},
    )
    answer(world, 400, "Error400", "POST", export[0], {"clientPublicKey": "02" + "11" * 32})
    issued = answer(world, 202, "SignedRequestChallenge", "POST", *export)
    stranger = SessionKey.generate().stamp(issued["payloadToSign"])
    for headers in (
        {"request-id": issued["requestId"]},
        {"service-wallet-signature": stranger},
        {"service-wallet-signature": "e30", "request-id": issued["requestId"]},
        {"service-wallet-signature": stranger, "request-id": issued["requestId"]},
        {"service-wallet-signature": stranger, "request-id": "Request:unknown"},
    ):
        answer(world, 401, "Error401", "POST", *export, headers)
    tampered = {"clientPublicKey": SessionKey.generate().public_key_hex}
    mismatch = {"service-wallet-signature": stranger, "request-id": issued["requestId"]}
    body = answer(world, 401, "Error401", "POST", export[0], tampered, mismatch)
    assert body["code"] == "WALLET_SIGNATURE_BODY_MISMATCH"
    claims = {"iss": "https://accounts.google.com", "aud": "a", "sub": "s", "iat": 0}
    oauth_body = {"type": "OAUTH", "accountId": account_id, "oidcToken": oidc_token(claims)}
    answer(world, 401, "Error401", "POST", "/auth/credentials", oauth_body)  # stale token
    other_row = next(r for r in world.wallets.credentials if r != row)
    other_email = next(c for c in world.wallets.credentials[other_row] if c["type"] == "EMAIL_OTP")[
        "nickname"
    ]
    customer_id = world.entities.customers.ids[world.wallets.owners[row]]
    kind = (
        "BUSINESS"
        if world.entities.customers.kind[world.wallets.owners[row]] == 1
        else "INDIVIDUAL"
    )
    answer(
        world, 409, "Error409", "PATCH", f"/customers/{customer_id}",
        {"customerType": kind, "email": other_email},
    )  # fmt: skip


def test_the_processing_body_has_the_spec_shape(world: World) -> None:
    row, account_id = _plain_account(world)
    key = SessionKey.generate()
    world.wallets.sessions[row][0].public_key = bytes.fromhex(key.public_key_uncompressed_hex)
    session_id = world.wallets.sessions[row][0].id
    world.wallets.force_processing(account_id, 1)
    issued = answer(
        world, 202, "AuthSignedRequestChallenge", "DELETE", f"/auth/sessions/{session_id}"
    )
    headers = {
        "service-wallet-signature": key.stamp(issued["payloadToSign"]),
        "request-id": issued["requestId"],
    }
    body = answer(world, 200, None, "DELETE", f"/auth/sessions/{session_id}", None, headers)
    assert WalletOperationProcessing.model_validate(body).to_wire() == body
    assert set(body) == {"status", "message"} and body["status"] == "PROCESSING"
    assert answer(world, 204, None, "DELETE", f"/auth/sessions/{session_id}", None, headers) is None
