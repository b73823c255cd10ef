"""Every wallet credential and session flow end to end against the sandbox (spec §4.2, §5):
EMAIL_OTP, SMS_OTP, OAUTH and PASSKEY add and verify, credential revoke, session refresh and
revoke, export, the customer email update, re-issued challenges, the async client and loopback.

`Authenticator` plays the browser's passkey; `token` plays the identity provider."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import os
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from paylens import (
    BadRequestError,
    Client,
    ConflictError,
    InvalidArgumentError,
    InvalidSignatureError,
    NotFoundError,
    RateLimitError,
    Sandbox,
    SessionKey,
    WalletSignatureInvalidError,
    models,
)
from paylens.sandbox.crypto import oidc_token

from .test_wallet_signing import verify_independently


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def cbor(value: Any) -> bytes:
    """Minimal CBOR encoding (ints, bytes, text, lists, maps): what an attestation needs."""

    def head(major: int, n: int) -> bytes:
        if n < 24:
            return bytes([major << 5 | n])
        for info, size in ((24, 1), (25, 2), (26, 4), (27, 8)):
            if n < 1 << (8 * size):
                return bytes([major << 5 | info]) + n.to_bytes(size, "big")
        raise ValueError(n)

    if isinstance(value, int):
        return head(0, value) if value >= 0 else head(1, -1 - value)
    if isinstance(value, bytes):
        return head(2, len(value)) + value
    if isinstance(value, str):
        return head(3, len(value.encode())) + value.encode()
    if isinstance(value, list):
        return head(4, len(value)) + b"".join(cbor(v) for v in value)
    return head(5, len(value)) + b"".join(cbor(k) + cbor(v) for k, v in value.items())


class Authenticator:
    """A software passkey: `register` answers `navigator.credentials.create()`, `assert_for`
    answers `navigator.credentials.get()`, both as `PublicKeyCredential.toJSON()`."""

    RP = hashlib.sha256(b"app.example").digest()

    def __init__(self) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.raw_id = os.urandom(32)

    def register(self, challenge: str) -> dict[str, Any]:
        numbers = self.key.public_key().public_numbers()
        cose = {1: 2, 3: -7, -1: 1, -2: numbers.x.to_bytes(32, "big"), -3: numbers.y.to_bytes(32)}
        auth_data = (
            self.RP
            + b"\x41"
            + bytes(4)
            + bytes(16)
            + len(self.raw_id).to_bytes(2, "big")
            + self.raw_id
            + cbor(cose)
        )
        client_data = json.dumps({"type": "webauthn.create", "challenge": challenge}).encode()
        attestation = cbor({"fmt": "none", "attStmt": {}, "authData": auth_data})
        return {
            "id": b64url(self.raw_id),
            "rawId": b64url(self.raw_id),
            "type": "public-key",
            "response": {
                "clientDataJSON": b64url(client_data),
                "attestationObject": b64url(attestation),
                "transports": ["internal", "hybrid"],
            },
        }

    def assert_for(self, challenge_hex: str) -> dict[str, Any]:
        webauthn_challenge = b64url(challenge_hex.encode())  # the hex string, UTF-8 encoded
        client_data = json.dumps({"type": "webauthn.get", "challenge": webauthn_challenge}).encode()
        auth_data = self.RP + b"\x05" + (1).to_bytes(4, "big")
        signed = auth_data + hashlib.sha256(client_data).digest()
        signature = self.key.sign(signed, ec.ECDSA(hashes.SHA256()))
        return {
            "rawId": b64url(self.raw_id),
            "response": {
                "clientDataJSON": b64url(client_data),
                "authenticatorData": b64url(auth_data),
                "signature": b64url(signature),
            },
        }


def token(sandbox: Sandbox, **claims: Any) -> str:
    """A fresh OIDC token from the sandbox's identity provider."""
    base = {
        "iss": "https://accounts.google.com",
        "aud": "platform-app",
        "sub": "1122334455",
        "email": "jane@sandbox.paylens.invalid",
        "iat": int(sandbox.now.timestamp()),
    }
    return oidc_token(base | claims)


@pytest.fixture
def sandbox() -> Sandbox:
    """A small sandbox (seed 2: several wallet accounts, one with every credential type) that
    answers PROCESSING only when a test forces it."""
    sb = Sandbox(seed=2, transactions=500)
    sb.world.wallets.processing_rate = 0.0  # tests that want PROCESSING force it
    return sb


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def client(sandbox: Sandbox, sleeps: list[float]) -> Iterator[Client]:
    with sandbox.client(sleep=sleeps.append) as c:
        yield c


def wallet_accounts(client: Client) -> list[models.InternalAccount]:
    return list(client.internal_accounts.list(type="EMBEDDED_WALLET"))


def plain(client: Client, n: int = 0) -> models.InternalAccount:
    """The `n`th wallet account holding only its EMAIL_OTP credential."""
    return [
        a
        for a in wallet_accounts(client)
        if [c.type for c in client.auth.credentials.list(a.id)] == ["EMAIL_OTP"]
    ][n]


def with_oauth(client: Client) -> models.InternalAccount:
    """A wallet account that was generated with an OAUTH credential."""
    return next(
        a
        for a in wallet_accounts(client)
        if any(c.type == "OAUTH" for c in client.auth.credentials.list(a.id))
    )


def credential_of(client: Client, account_id: str, kind: str) -> models.AuthMethod:
    return next(c for c in client.auth.credentials.list(account_id) if c.type == kind)


def login(client: Client, account_id: str) -> tuple[SessionKey, models.Session]:
    """Log in with the account's EMAIL_OTP credential: challenge, then verify with 000000."""
    credential = credential_of(client, account_id, "EMAIL_OTP")
    otp = client.auth.credentials.challenge(credential.id)
    assert isinstance(otp, models.AuthMethod) and otp.otp_encryption_target_bundle
    key = SessionKey.generate()
    session = client.auth.credentials.verify_email_otp(
        credential.id, otp_code="000000", target_bundle=otp.otp_encryption_target_bundle, key=key
    )
    return key, session


def two_logins(
    sandbox: Sandbox, client: Client, account_id: str
) -> tuple[SessionKey, models.Session, models.AuthMethod, SessionKey]:
    """An EMAIL_OTP login, then an OAUTH credential added with it and logged in as well:
    (email key, email session, the OAUTH credential, its key)."""
    email_key, email_session = login(client, account_id)
    oauth = client.auth.credentials.add_oauth(account_id, token(sandbox), signer=email_key)
    oauth_key = SessionKey.generate()
    client.auth.credentials.verify_oauth(
        oauth.id, oidc_token=token(sandbox, nonce=oauth_key.oidc_nonce), key=oauth_key
    )
    return email_key, email_session, oauth, oauth_key


def recording(key: SessionKey, seen: list[tuple[str, str]]) -> Any:
    """A signer that stamps with `key` and keeps (payload, stamp)."""

    def sign(payload: str) -> str:
        seen.append((payload, key.stamp(payload)))
        return seen[-1][1]

    return sign


# --- EMAIL_OTP and SMS_OTP ----------------------------------------------------------------------


def test_email_otp_login_opens_a_session_held_by_the_client_key(
    sandbox: Sandbox, client: Client
) -> None:
    account = plain(client)
    before = {s.id for s in client.auth.sessions.list(account.id)}
    key, session = login(client, account.id)
    assert type(session) is models.Session
    assert (session.account_id, session.type) == (account.id, "EMAIL_OTP")
    assert session.created_at == sandbox.now
    assert session.expires_at == sandbox.now + timedelta(hours=12)
    assert {s.id for s in client.auth.sessions.list(account.id)} == before | {session.id}
    # first leg 202, signed retry 200
    assert sandbox.requests.count("POST", suffix="/verify") == 2
    # the session's key is the one the OTP bundle carried: it may now sign for the account
    seen: list[tuple[str, str]] = []
    client.auth.sessions.revoke(session.id, signer=recording(key, seen))
    payload, stamp = seen[0]
    verify_independently(stamp, payload)
    assert json.loads(payload)["type"] == "ACTIVITY_TYPE_DELETE_SESSIONS"


def test_a_wrong_otp_or_a_lapsed_one_is_refused(sandbox: Sandbox, client: Client) -> None:
    account = plain(client)
    credential = credential_of(client, account.id, "EMAIL_OTP")
    key = SessionKey.generate()
    with pytest.raises(InvalidSignatureError) as none_yet:
        client.auth.credentials.verify_email_otp(
            credential.id, otp_code="000000", target_bundle=_any_bundle(client), key=key
        )
    assert none_yet.value.reason == "OTP_NOT_ISSUED"
    otp = client.auth.credentials.challenge(credential.id)
    bundle = otp.otp_encryption_target_bundle
    with pytest.raises(InvalidSignatureError) as wrong:
        client.auth.credentials.verify_email_otp(
            credential.id, otp_code="123456", target_bundle=bundle, key=key
        )
    assert wrong.value.reason == "OTP_INVALID"
    sandbox.advance(timedelta(minutes=6))
    with pytest.raises(InvalidSignatureError) as lapsed:
        client.auth.credentials.verify_email_otp(
            credential.id, otp_code="000000", target_bundle=bundle, key=key
        )
    assert lapsed.value.reason == "OTP_EXPIRED"


def _any_bundle(client: Client) -> str:
    """A valid target bundle of some other account's credential."""
    other = plain(client, 1)
    otp = client.auth.credentials.challenge(credential_of(client, other.id, "EMAIL_OTP").id)
    return otp.otp_encryption_target_bundle  # type: ignore[union-attr,return-value]


def test_add_an_sms_otp_credential_then_log_in_with_it(sandbox: Sandbox, client: Client) -> None:
    account = plain(client)
    key, _ = login(client, account.id)
    seen: list[tuple[str, str]] = []
    sms = client.auth.credentials.add_sms_otp(account.id, signer=recording(key, seen))
    assert (sms.type, sms.account_id) == ("SMS_OTP", account.id)
    assert sms.nickname.startswith("+1415555")
    assert sms.otp_encryption_target_bundle  # the OTP is sent on the signed retry
    verify_independently(seen[0][1], seen[0][0])
    parameters = json.loads(seen[0][0])["parameters"]
    assert parameters["credentialType"] == "SMS_OTP" and len(parameters["requestHash"]) == 64
    phone_key = SessionKey.generate()
    session = client.auth.credentials.verify_sms_otp(
        sms.id, otp_code="000000", target_bundle=sms.otp_encryption_target_bundle, key=phone_key
    )
    assert session.type == "SMS_OTP"
    with pytest.raises(BadRequestError) as again:
        client.auth.credentials.add_sms_otp(account.id, signer=key)
    assert again.value.code == "SMS_OTP_CREDENTIAL_ALREADY_EXISTS"
    with pytest.raises(BadRequestError) as email:
        client.auth.credentials.add_email_otp(account.id, signer=key)
    assert email.value.code == "EMAIL_OTP_CREDENTIAL_ALREADY_EXISTS"


# --- OAUTH ----------------------------------------------------------------------------------------


def test_oauth_credential_added_and_verified_with_a_fresh_token(
    sandbox: Sandbox, client: Client
) -> None:
    account = plain(client)
    key, _ = login(client, account.id)
    oauth = client.auth.credentials.add_oauth(account.id, token(sandbox), signer=key)
    assert (oauth.type, oauth.nickname) == ("OAUTH", "jane@sandbox.paylens.invalid")
    with pytest.raises(BadRequestError):
        client.auth.credentials.add_oauth(account.id, token(sandbox), signer=key)
    device = SessionKey.generate()
    session = client.auth.credentials.verify_oauth(
        oauth.id, oidc_token=token(sandbox, nonce=device.oidc_nonce), key=device
    )
    assert isinstance(session, models.AuthSession)
    assert session.type == "OAUTH" and session.encrypted_session_signing_key is None
    # the new session signs for the account
    client.auth.sessions.revoke(session.id, signer=device)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"nonce": "00" * 32}, "OIDC_NONCE_MISMATCH"),
        ({"sub": "someone-else"}, "OIDC_IDENTITY_MISMATCH"),
        ({"aud": "another-app"}, "OIDC_IDENTITY_MISMATCH"),
        ({"iat": "stale"}, "OIDC_TOKEN_STALE"),
    ],
)
def test_oauth_verify_checks_identity_freshness_and_nonce(
    sandbox: Sandbox, client: Client, change: dict[str, Any], reason: str
) -> None:
    account = with_oauth(client)
    claims = sandbox.world.wallets.oidc_claims(
        next(c for c in client.auth.credentials.list(account.id) if c.type == "OAUTH").id
    )
    device = SessionKey.generate()
    fresh = claims | {"iat": int(sandbox.now.timestamp()), "nonce": device.oidc_nonce}
    credential_id = credential_of(client, account.id, "OAUTH").id
    if change.get("iat") == "stale":
        change = {"iat": int(sandbox.now.timestamp()) - 61}
    with pytest.raises(InvalidSignatureError) as refused:
        client.auth.credentials.verify_oauth(
            credential_id, oidc_token=oidc_token(fresh | change), key=device
        )
    assert refused.value.reason == reason
    assert "obtain a fresh one" in str(refused.value)
    session = client.auth.credentials.verify_oauth(
        credential_id, oidc_token=oidc_token(fresh), key=device
    )
    assert session.account_id == account.id


def test_an_unsupported_issuer_is_a_bad_request(sandbox: Sandbox, client: Client) -> None:
    account = plain(client)
    key, _ = login(client, account.id)
    with pytest.raises(BadRequestError) as bad:
        client.auth.credentials.add_oauth(
            account.id, token(sandbox, iss="https://evil.example"), signer=key
        )
    assert bad.value.field_errors[0].field == "oidcToken"


# --- PASSKEY --------------------------------------------------------------------------------------


def test_passkey_registration_and_login(sandbox: Sandbox, client: Client) -> None:
    account = plain(client)
    key, _ = login(client, account.id)
    phone = Authenticator()
    created = phone.register("ArkQi2yAYHPlgnJNFBlneIwchQdWXBOTrdB")
    attestation = models.PasskeyAttestation.from_webauthn(created)
    assert attestation.credential_id == created["rawId"]
    assert attestation.client_data_json == created["response"]["clientDataJSON"]
    assert attestation.transports == ["internal", "hybrid"]
    passkey = client.auth.credentials.add_passkey(
        account.id,
        nickname="iPhone Face-ID",
        challenge="ArkQi2yAYHPlgnJNFBlneIwchQdWXBOTrdB",
        attestation=attestation,
        signer=key,
    )
    assert (passkey.type, passkey.credential_id) == ("PASSKEY", created["rawId"])
    with pytest.raises(BadRequestError) as twice:
        client.auth.credentials.add_passkey(
            account.id,
            nickname="again",
            challenge="c2",
            attestation=phone.register("c2"),
            signer=key,
        )
    assert twice.value.code == "PASSKEY_CREDENTIAL_ALREADY_EXISTS"
    laptop = Authenticator()  # several distinct passkeys may be registered
    client.auth.credentials.add_passkey(
        account.id, nickname="Laptop", challenge="c3", attestation=laptop.register("c3"), signer=key
    )

    device = SessionKey.generate()
    issued = client.auth.credentials.challenge(passkey.id, client_public_key=device)
    assert isinstance(issued, models.PasskeyAuthChallenge)
    assert issued.credential_id == passkey.credential_id and issued.id == passkey.id
    assert len(issued.challenge) == 64 and issued.challenge == issued.challenge.lower()
    with pytest.raises(InvalidSignatureError) as stranger:
        client.auth.credentials.verify_passkey(
            passkey.id,
            request_id=issued.request_id,
            assertion=models.PasskeyAssertion.from_webauthn(
                laptop.assert_for(issued.challenge) | {"rawId": created["rawId"]}
            ),
        )
    assert stranger.value.reason == "PASSKEY_ASSERTION_INVALID"
    assertion = models.PasskeyAssertion.from_webauthn(phone.assert_for(issued.challenge))
    session = client.auth.credentials.verify_passkey(
        passkey.id, request_id=issued.request_id, assertion=assertion
    )
    assert session.type == "PASSKEY" and session.credential_id == passkey.credential_id
    with pytest.raises(InvalidSignatureError) as reused:
        client.auth.credentials.verify_passkey(
            passkey.id, request_id=issued.request_id, assertion=assertion
        )
    assert reused.value.reason == "REQUEST_ID_REUSED"
    # the session key bound at /challenge signs for the account
    client.auth.sessions.revoke(session.id, signer=device)


def test_a_passkey_attestation_for_another_challenge_is_refused(
    sandbox: Sandbox, client: Client
) -> None:
    account = plain(client)
    key, _ = login(client, account.id)
    with pytest.raises(BadRequestError) as bad:
        client.auth.credentials.add_passkey(
            account.id,
            nickname="x",
            challenge="expected",
            attestation=Authenticator().register("another"),
            signer=key,
        )
    assert bad.value.field_errors[0].field == "attestation"
    with pytest.raises(InvalidArgumentError):
        client.auth.credentials.add_passkey(
            account.id,
            nickname="x",
            challenge="c",
            attestation={
                "credentialId": "a",
                "clientDataJson": "b",
                "attestationObject": "c",
                "transports": ["carrier-pigeon"],
            },
            signer=key,
        )


def test_challenging_an_oauth_credential_is_a_bad_request(client: Client) -> None:
    account = with_oauth(client)
    with pytest.raises(BadRequestError):
        client.auth.credentials.challenge(credential_of(client, account.id, "OAUTH").id)


# --- revoke, refresh, export ----------------------------------------------------------------------


def test_revoking_a_credential_needs_a_session_of_another_credential(
    sandbox: Sandbox, client: Client
) -> None:
    account = plain(client)
    email_key, email_session, oauth, oauth_key = two_logins(sandbox, client, account.id)
    email = credential_of(client, account.id, "EMAIL_OTP")
    with pytest.raises(WalletSignatureInvalidError) as own:
        client.auth.credentials.revoke(email.id, signer=email_key)
    assert own.value.details["reason"] == "SESSION_OF_THE_REVOKED_CREDENTIAL"
    assert "session of another credential" in str(own.value)
    client.auth.credentials.revoke(email.id, signer=oauth_key)
    assert [c.type for c in client.auth.credentials.list(account.id)] == ["OAUTH"]
    assert email_session.id not in {s.id for s in client.auth.sessions.list(account.id)}
    with pytest.raises(BadRequestError) as last:
        client.auth.credentials.revoke(oauth.id, signer=oauth_key)
    assert "at least one credential" in last.value.message
    # EMAIL_OTP can come back once the old one is gone
    again = client.auth.credentials.add_email_otp(account.id, signer=oauth_key)
    assert again.nickname == email.nickname and again.otp_encryption_target_bundle


def test_session_refresh_replaces_the_session_and_revoke_ends_it(
    sandbox: Sandbox, client: Client
) -> None:
    account = plain(client)
    key, session = login(client, account.id)
    stranger = SessionKey.generate()
    with pytest.raises(WalletSignatureInvalidError):
        client.auth.sessions.refresh(session.id, signer=stranger, new_key=SessionKey.generate())
    new_key = SessionKey.generate()
    sandbox.advance(timedelta(hours=1))
    fresh = client.auth.sessions.refresh(session.id, signer=key, new_key=new_key)
    assert fresh is not None
    assert fresh.id != session.id and fresh.expires_at == sandbox.now + timedelta(hours=12)
    active = {s.id for s in client.auth.sessions.list(account.id)}
    assert fresh.id in active and session.id not in active
    with pytest.raises(NotFoundError):
        client.auth.sessions.revoke(session.id, signer=new_key)
    client.auth.sessions.revoke(fresh.id, signer=new_key)  # a logout signs for itself
    assert fresh.id not in {s.id for s in client.auth.sessions.list(account.id)}


def test_refresh_with_the_signer_alone_extends_the_session_with_the_same_key(
    sandbox: Sandbox, client: Client
) -> None:
    account = plain(client)
    key, session = login(client, account.id)
    sandbox.advance(timedelta(hours=2))
    fresh = client.auth.sessions.refresh(session.id, signer=key)
    assert fresh is not None and fresh.expires_at == sandbox.now + timedelta(hours=12)
    client.auth.sessions.revoke(fresh.id, signer=key)  # the same key signs for the new session
    assert fresh.id not in {s.id for s in client.auth.sessions.list(account.id)}
    with pytest.raises(InvalidArgumentError, match="new_key"):
        client.auth.sessions.refresh(fresh.id, signer=lambda payload: key.stamp(payload))


def test_an_expired_session_cannot_refresh_or_sign(sandbox: Sandbox, client: Client) -> None:
    account = plain(client)
    key, session = login(client, account.id)
    sandbox.advance(timedelta(hours=13))
    with pytest.raises(InvalidSignatureError) as expired:
        client.auth.sessions.refresh(session.id, signer=key, new_key=SessionKey.generate())
    assert expired.value.reason == "SESSION_EXPIRED"
    with pytest.raises(WalletSignatureInvalidError):
        client.auth.export_wallet(account.id, signer=key, key=SessionKey.generate())


def test_export_seals_the_wallet_credentials_to_the_export_key(
    sandbox: Sandbox, client: Client
) -> None:
    account = plain(client)
    key, _ = login(client, account.id)
    target = SessionKey.generate()
    exported = client.auth.export_wallet(account.id, signer=key, key=target)
    assert exported.id == account.id
    assert exported.encrypted_wallet_credentials not in repr(exported)
    words = target.open_bundle(exported.encrypted_wallet_credentials).decode().split()
    assert len(words) == 12
    again = client.auth.export_wallet(account.id, signer=key, key=SessionKey.generate())
    assert again.encrypted_wallet_credentials != exported.encrypted_wallet_credentials


# --- customer email -------------------------------------------------------------------------------


def test_customer_email_update_moves_the_tied_email_otp_credential(
    sandbox: Sandbox, client: Client
) -> None:
    account = plain(client)
    key, _ = login(client, account.id)
    assert account.customer_id is not None
    with pytest.raises(InvalidArgumentError, match="signer"):
        client.auth.update_customer_email(account.customer_id, "jane.new@example.com")
    customer = client.auth.update_customer_email(
        account.customer_id, "jane.new@example.com", signer=key
    )
    assert customer.email == "jane.new@example.com"
    assert customer.updated_at == sandbox.now
    assert client.customers.get(account.customer_id).email == "jane.new@example.com"
    assert credential_of(client, account.id, "EMAIL_OTP").nickname == "jane.new@example.com"
    other = plain(client, 1)
    other_key, _ = login(client, other.id)
    with pytest.raises(ConflictError) as taken:
        client.auth.update_customer_email(
            other.customer_id or "", "jane.new@example.com", signer=other_key
        )
    assert taken.value.code == "EMAIL_OTP_EMAIL_ALREADY_EXISTS"


def test_a_customer_without_wallets_changes_email_at_once(client: Client) -> None:
    wallet_owners = {a.customer_id for a in wallet_accounts(client)}
    customer = next(c for c in client.customers.list() if c.id not in wallet_owners)
    updated = client.auth.update_customer_email(
        customer.id, "plain@example.com", customer_type=str(customer.customer_type)
    )
    assert updated.email == "plain@example.com"


def test_the_tied_credential_set_is_bound_at_the_challenge(
    sandbox: Sandbox, client: Client
) -> None:
    account = plain(client)
    _, _, _, oauth_key = two_logins(sandbox, client, account.id)
    email = credential_of(client, account.id, "EMAIL_OTP")

    def revoke_then_sign(payload: str) -> str:  # the set changes between 202 and the retry
        client.auth.credentials.revoke(email.id, signer=oauth_key)
        return oauth_key.stamp(payload)

    with pytest.raises(ConflictError) as changed:
        client.auth.update_customer_email(
            account.customer_id or "", "moved@example.com", signer=revoke_then_sign
        )
    assert changed.value.code == "EMAIL_OTP_CREDENTIAL_SET_CHANGED"


# --- re-issued challenges, async, loopback --------------------------------------------------------


def test_a_challenge_reissued_too_soon_is_reported_or_waited_out(sandbox: Sandbox) -> None:
    with sandbox.client(max_retries=0) as impatient:
        account = plain(impatient)
        credential = credential_of(impatient, account.id, "EMAIL_OTP")
        impatient.auth.credentials.challenge(credential.id)
        sandbox.advance(timedelta(seconds=10))
        with pytest.raises(RateLimitError) as limited:
            impatient.auth.credentials.challenge(credential.id)
    assert (limited.value.code, limited.value.retry_after) == ("RATE_LIMITED", 20)
    waited: list[float] = []

    def wait(seconds: float) -> None:  # the sandbox clock moves instead of the wall clock
        waited.append(seconds)
        sandbox.advance(timedelta(seconds=seconds))

    with sandbox.client(sleep=wait) as patient:
        otp = patient.auth.credentials.challenge(credential.id)
    assert waited == [20] and otp.otp_encryption_target_bundle


def test_the_async_client_runs_the_same_flows(sandbox: Sandbox) -> None:
    paused: list[float] = []

    async def pause(seconds: float) -> None:  # recorded, as the sync client's tests do
        paused.append(seconds)
        await asyncio.sleep(0)

    async def scenario() -> tuple[models.Session, list[models.AuthSession]]:
        async with sandbox.async_client(sleep=pause) as client:
            accounts = [a async for a in client.internal_accounts.list(type="EMBEDDED_WALLET")]
            account = accounts[0]
            credentials = await client.auth.credentials.list(account.id)
            email = next(c for c in credentials if c.type == "EMAIL_OTP")
            otp = await client.auth.credentials.challenge(email.id)
            key = SessionKey.generate()
            session = await client.auth.credentials.verify_email_otp(
                email.id, otp_code="000000", target_bundle=otp.otp_encryption_target_bundle, key=key
            )
            sandbox.world.wallets.force_processing(account.id, 2)
            await client.auth.sessions.revoke(session.id, signer=key)
            return session, await client.auth.sessions.list(account.id)

    session, remaining = asyncio.run(scenario())
    assert session.id not in {s.id for s in remaining}
    assert paused == [0.5, 1.0]  # the revoke, answered PROCESSING twice, awaited each pause


@pytest.mark.http
def test_a_flow_over_loopback_http(sandbox: Sandbox) -> None:
    with (
        sandbox.serve() as server,
        Client(server.base_url, sandbox.client_id, sandbox.client_secret, timeout=10) as client,
    ):
        account = plain(client)
        key, session = login(client, account.id)
        sms = client.auth.credentials.add_sms_otp(account.id, signer=key)
        client.auth.credentials.revoke(sms.id, signer=key)
        client.auth.sessions.revoke(session.id, signer=key)
        assert [c.type for c in client.auth.credentials.list(account.id)] == ["EMAIL_OTP"]


def test_no_key_stamp_or_sealed_secret_reaches_logs_reprs_or_errors(
    sandbox: Sandbox, client: Client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    sandbox.world.wallets.processing_rate = 1.0  # every re-send goes through the logs too
    account = plain(client)
    key, session = login(client, account.id)
    target = SessionKey.generate()
    seen: list[tuple[str, str]] = []
    exported = client.auth.export_wallet(account.id, signer=recording(key, seen), key=target)
    with pytest.raises(WalletSignatureInvalidError) as refused:
        client.auth.sessions.revoke(session.id, signer=SessionKey.generate())
    error, objects = refused.value, (exported, session, key, target)
    shown = " ".join([caplog.text, str(error), repr(error), *map(repr, objects), str(exported)])
    assert "/export" in caplog.text  # requests are logged, by method and URL only
    secrets = [key.export_private_hex(), target.export_private_hex(), seen[0][1]]
    secrets.append(exported.encrypted_wallet_credentials)
    for secret in secrets:
        assert secret not in shown
