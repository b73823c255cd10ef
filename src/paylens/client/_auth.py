"""Wallet credentials and sessions (`client.auth`, spec §4.2, §5).

    key = SessionKey.generate()
    otp = client.auth.credentials.challenge(credential_id)              # an OTP is sent
    session = client.auth.credentials.verify_email_otp(
        credential_id, otp_code="000000", target_bundle=otp.otp_encryption_target_bundle, key=key
    )
    client.auth.credentials.add_passkey(account_id, ..., signer=key)      # signed retry
    client.auth.sessions.revoke(other_session_id, signer=key)

Every write that the service guards with a signed retry takes `signer=`: a `SessionKey` or any
callable `payloadToSign -> stamp`. The protocol (202 challenge, stamp, identical re-send,
200 PROCESSING re-sends with backoff, restart of a lapsed challenge) is `_signing.signed_flow`.
A 429 of a re-issued challenge is waited out by the client's retry policy (`Retry-After`, up to
its `retry_after_cap`) or raised as `RateLimitError` with `retry_after`.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

import httpx
import orjson

from paylens import models as m
from paylens.errors import InvalidArgumentError

from . import _params as p
from ._policy import Call
from ._resources import _parse, _parse_data_list, _Resource, parse_customer
from ._signing import (
    REQUEST_ID_HEADER,
    SessionKey,
    Signer,
    encrypt_otp_attempt,
    run_flow,
    signed_flow,
)

if TYPE_CHECKING:
    from ._clients import AsyncClient, Client

T = TypeVar("T")

_CREATED = frozenset({201})
_NO_CONTENT = frozenset({204})
_OK = frozenset({200})
_PASSKEY_TRANSPORTS = ("usb", "nfc", "ble", "internal", "hybrid")


def _signer(signer: Signer | None, *, required: bool = True) -> Signer | None:
    if signer is None and not required:
        return None
    if not callable(signer):
        raise InvalidArgumentError(
            "signer", "expected a SessionKey or a callable payloadToSign -> stamp"
        )
    return signer


def _key(key: object, argument: str = "key") -> SessionKey:
    if not isinstance(key, SessionKey):
        raise InvalidArgumentError(
            argument, "expected a paylens.SessionKey (SessionKey.generate())"
        )
    return key


def _public_key(value: str | SessionKey, argument: str) -> str:
    if isinstance(value, SessionKey):
        return value.public_key_hex
    text = p.text(argument, value)
    if len(text) not in (66, 130) or text[:2] not in ("02", "03", "04"):
        raise InvalidArgumentError(argument, "expected a P-256 point in hex (02/03… or 04…)")
    return text


P = TypeVar("P", m.PasskeyAttestation, m.PasskeyAssertion)


def _passkey_part(kind: type[P], value: P | Mapping[str, Any], argument: str) -> P:
    """A passkey attestation or assertion from the model, its wire dict, or the browser's
    `PublicKeyCredential.toJSON()` (it has `response`)."""
    if isinstance(value, kind):
        return value
    try:
        if isinstance(value, Mapping) and "response" in value:
            return kind.from_webauthn(value)
        return kind.model_validate(value)
    except (KeyError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
        raise InvalidArgumentError(argument, f"is not a passkey {argument}: {exc}") from None


def _none(response: httpx.Response) -> None:
    return None


def _session_or_none(response: httpx.Response) -> m.AuthSession | None:
    return None if response.status_code == 204 else _parse(m.AuthSession)(response)


def _challenge_answer(response: httpx.Response) -> m.AuthMethod | m.PasskeyAuthChallenge:
    body = orjson.loads(response.content)
    if "challenge" in body:
        return _parse(m.PasskeyAuthChallenge)(response)
    return _parse(m.AuthMethod)(response)


def _credential_path(credential_id: str, action: str = "") -> str:
    cid = p.record_id("credential_id", credential_id, "AuthMethod")
    return f"auth/credentials/{cid}" + (f"/{action}" if action else "")


def _session_path(session_id: str, action: str = "") -> str:
    sid = p.record_id("session_id", session_id, "Session")
    return f"auth/sessions/{sid}" + (f"/{action}" if action else "")


def _account(account_id: str) -> str:
    p.record_id("account_id", account_id, "InternalAccount")
    return account_id


class _Flows(_Resource):
    def _flow(
        self,
        method: str,
        path: str,
        parse: Callable[[httpx.Response], T],
        *,
        terminal: frozenset[int] = _OK,
        body: Any = None,
        signer: Signer | None = None,
        headers: Mapping[str, str] | None = None,
        restart_when_processing: bool = False,
    ) -> T:
        flow = signed_flow(
            method,
            path,
            parse,
            body=body,
            signer=signer,
            terminal=terminal,
            headers=headers,
            restart_when_processing=restart_when_processing,
        )
        return cast(T, run_flow(self._client, flow))


class _Credentials(_Flows):
    """`client.auth.credentials`: add, list, challenge, verify and revoke credentials."""

    def list(self, account_id: str) -> list[m.AuthMethod]:
        """The wallet credentials of an account (not paginated)."""
        params = {"accountId": p.text("account_id", account_id)}
        return self._run(
            Call[builtins.list[m.AuthMethod]](
                "GET", "auth/credentials", _parse_data_list(m.AuthMethod), params=params
            )
        )

    def _add(self, body: dict[str, Any], signer: Signer | None) -> m.AuthMethod:
        return self._flow(
            "POST",
            "auth/credentials",
            _parse(m.AuthMethod),
            terminal=_CREATED,
            body=body,
            signer=_signer(signer, required=False),
        )

    def add_email_otp(self, account_id: str, *, signer: Signer | None = None) -> m.AuthMethod:
        """Add the account's EMAIL_OTP credential (tied to the customer email; only after the
        previous one was revoked). `signer`: a session of the account (signed retry). The
        answer carries the `otp_encryption_target_bundle` of the OTP just sent, for
        `verify_email_otp`."""
        return self._add({"type": "EMAIL_OTP", "accountId": _account(account_id)}, signer)

    def add_sms_otp(self, account_id: str, *, signer: Signer | None = None) -> m.AuthMethod:
        """Add the account's one SMS_OTP credential; see `add_email_otp`."""
        return self._add({"type": "SMS_OTP", "accountId": _account(account_id)}, signer)

    def add_oauth(
        self, account_id: str, oidc_token: str, *, signer: Signer | None = None
    ) -> m.AuthMethod:
        """Add an OAUTH credential for the identity (`iss`, `sub`, `aud`) of a fresh OIDC
        token (`iat` at most 60 s old); its nickname becomes the token's `email`."""
        body = {
            "type": "OAUTH",
            "accountId": _account(account_id),
            "oidcToken": p.text("oidc_token", oidc_token),
        }
        return self._add(body, signer)

    def add_passkey(
        self,
        account_id: str,
        *,
        nickname: str,
        challenge: str,
        attestation: m.PasskeyAttestation | Mapping[str, Any],
        signer: Signer | None = None,
    ) -> m.AuthMethod:
        """Register a passkey. `challenge` is the registration challenge your backend issued;
        `attestation` a `PasskeyAttestation`, its wire dict, or the browser's
        `PublicKeyCredential.toJSON()` (mapped by `PasskeyAttestation.from_webauthn`). Several distinct passkeys may be registered; verify a new one
        with `challenge` then `verify_passkey` to get a session."""
        attestation = _passkey_part(m.PasskeyAttestation, attestation, "attestation")
        for transport in attestation.transports or ():
            p.one_of("attestation.transports", transport, _PASSKEY_TRANSPORTS)
        body = {
            "type": "PASSKEY",
            "accountId": _account(account_id),
            "nickname": p.text("nickname", nickname),
            "challenge": p.text("challenge", challenge),
            "attestation": attestation.to_wire(),
        }
        return self._add(body, signer)

    def challenge(
        self, credential_id: str, *, client_public_key: str | SessionKey | None = None
    ) -> m.AuthMethod | m.PasskeyAuthChallenge:
        """Issue a fresh challenge. EMAIL_OTP / SMS_OTP: a new OTP is sent and the answer is
        the credential with its `otp_encryption_target_bundle`. PASSKEY: pass the session key
        to be (`client_public_key`, a `SessionKey` or its hex); the answer is a
        `PasskeyAuthChallenge` for the WebAuthn call and `verify_passkey`. Re-issued too often:
        429 with `Retry-After` (waited out by the retry policy, or `RateLimitError`)."""
        body = (
            None
            if client_public_key is None
            else {"clientPublicKey": _public_key(client_public_key, "client_public_key")}
        )
        return self._flow(
            "POST", _credential_path(credential_id, "challenge"), _challenge_answer, body=body
        )

    def _verify_otp(
        self, kind: str, credential_id: str, otp_code: str, target_bundle: str, key: SessionKey
    ) -> m.Session:
        key = _key(key)
        bundle = encrypt_otp_attempt(
            p.text("target_bundle", target_bundle), p.text("otp_code", otp_code), key
        )
        return self._flow(
            "POST",
            _credential_path(credential_id, "verify"),
            _parse(m.Session),
            body={"type": kind, "encryptedOtpBundle": bundle},
            signer=key,
        )

    def verify_email_otp(
        self, credential_id: str, *, otp_code: str, target_bundle: str, key: SessionKey
    ) -> m.Session:
        """Log in with the emailed OTP: the code and `key`'s public key are HPKE-encrypted to
        `target_bundle` (the `otp_encryption_target_bundle` of `challenge`), and the 202 that
        follows is stamped with `key`, which becomes the session's signing key."""
        return self._verify_otp("EMAIL_OTP", credential_id, otp_code, target_bundle, key)

    def verify_sms_otp(
        self, credential_id: str, *, otp_code: str, target_bundle: str, key: SessionKey
    ) -> m.Session:
        """Log in with the OTP sent by SMS; see `verify_email_otp`."""
        return self._verify_otp("SMS_OTP", credential_id, otp_code, target_bundle, key)

    def verify_oauth(
        self, credential_id: str, *, oidc_token: str, key: SessionKey
    ) -> m.AuthSession:
        """Log in with a fresh OIDC token (`iat` at most 60 s old, `nonce` = `key.oidc_nonce`);
        `key` becomes the session's signing key. Also the re-login after a session expired."""
        body = {
            "type": "OAUTH",
            "oidcToken": p.text("oidc_token", oidc_token),
            "clientPublicKey": _key(key).public_key_hex,
        }
        return self._flow(
            "POST", _credential_path(credential_id, "verify"), _parse(m.AuthSession), body=body
        )

    def verify_passkey(
        self,
        credential_id: str,
        *,
        request_id: str,
        assertion: m.PasskeyAssertion | Mapping[str, Any],
    ) -> m.AuthSession:
        """Log in with a WebAuthn assertion over the `challenge` of `challenge(...)`;
        `request_id` is that challenge's `request_id`. The session's key is the
        `client_public_key` given to `challenge`."""
        assertion = _passkey_part(m.PasskeyAssertion, assertion, "assertion")
        return self._flow(
            "POST",
            _credential_path(credential_id, "verify"),
            _parse(m.AuthSession),
            body={"type": "PASSKEY", "assertion": assertion.to_wire()},
            headers={REQUEST_ID_HEADER: p.text("request_id", request_id)},
        )

    def revoke(self, credential_id: str, *, signer: Signer) -> None:
        """Revoke a credential and every session it opened. `signer` must be a session of
        another credential of the account; the last credential cannot be revoked (400)."""
        return self._flow(
            "DELETE",
            _credential_path(credential_id),
            _none,
            terminal=_NO_CONTENT,
            signer=_signer(signer),
        )


class _Sessions(_Flows):
    """`client.auth.sessions`: list, refresh and revoke sessions."""

    def list(self, account_id: str) -> list[m.AuthSession]:
        """The active wallet sessions of an account (not paginated)."""
        params = {"accountId": p.text("account_id", account_id)}
        return self._run(
            Call[builtins.list[m.AuthSession]](
                "GET", "auth/sessions", _parse_data_list(m.AuthSession), params=params
            )
        )

    def revoke(self, session_id: str, *, signer: Signer) -> None:
        """Revoke a session; `signer` is any active session of the same account (the session
        itself, for a logout). 404 NotFoundError when it is no longer active."""
        return self._flow(
            "DELETE", _session_path(session_id), _none, terminal=_NO_CONTENT, signer=_signer(signer)
        )

    def refresh(
        self, session_id: str, *, signer: Signer, new_key: SessionKey | None = None
    ) -> m.AuthSession | None:
        """Replace an active session by a new one whose signing key is `new_key` (by default
        the signer's own key, when the signer is a `SessionKey`: the session is extended);
        `signer` is the current session's key. The answer is the new session (None if the
        service answers 204 without it). After expiry, log in again instead."""
        if new_key is None:
            if not isinstance(signer, SessionKey):
                raise InvalidArgumentError("new_key", "needed when the signer is not a SessionKey")
            new_key = signer
        body = {"clientPublicKey": _key(new_key, "new_key").public_key_hex}
        return self._flow(
            "POST",
            _session_path(session_id, "refresh"),
            _session_or_none,
            terminal=_CREATED | _NO_CONTENT,
            body=body,
            signer=_signer(signer),
        )


class Auth(_Flows):
    """Wallet credentials and sessions (`client.auth.credentials`, `client.auth.sessions`), the
    wallet export and the customer email update tied to EMAIL_OTP credentials."""

    def __init__(self, client: Client | AsyncClient) -> None:
        super().__init__(client)
        self.credentials = _Credentials(client)
        self.sessions = _Sessions(client)

    def export_wallet(
        self, account_id: str, *, signer: Signer, key: SessionKey
    ) -> m.InternalAccountExport:
        """Export an embedded wallet's credentials, sealed to `key` (a fresh `SessionKey` used
        for nothing else); open them with `key.open_bundle(answer.encrypted_wallet_credentials)`.
        `signer`: an active session of the account."""
        aid = p.record_id("account_id", account_id, "InternalAccount")
        return self._flow(
            "POST",
            f"internal-accounts/{aid}/export",
            _parse(m.InternalAccountExport),
            body={"clientPublicKey": _key(key).public_key_hex},
            signer=_signer(signer),
            restart_when_processing=True,  # the spec's way after a lapse (§5.5)
        )

    def update_customer_email(
        self,
        customer_id: str,
        email: str,
        *,
        signer: Signer | None = None,
        customer_type: str = "INDIVIDUAL",
    ) -> m.Customer:
        """Change a customer's email. When the customer has embedded wallets with EMAIL_OTP
        credentials, the change is a signed retry (`signer`: an active session of one of those
        wallets) and the credentials' email changes with it."""
        cid = p.record_id("customer_id", customer_id, "Customer")
        body = {
            "customerType": p.one_of("customer_type", customer_type, ("INDIVIDUAL", "BUSINESS")),
            "email": p.text("email", email),
        }
        return self._flow(
            "PATCH",
            f"customers/{cid}",
            parse_customer,
            body=body,
            signer=_signer(signer, required=False),
        )
