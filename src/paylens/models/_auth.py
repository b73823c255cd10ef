"""Wallet credentials and sessions, and the bodies of the signed-retry protocol.

AuthMethod                  a credential of a wallet account (passkey, OAuth, email/SMS OTP)
└── Session                 a session created by verifying a credential (`expires_at`)
    └── AuthSession         ... with its `encrypted_session_signing_key` (kept out of repr)
SignedRetryChallenge        202 body: sign `payload_to_sign` and retry with `request_id`
PasskeyAuthChallenge        200 body of a passkey `/challenge`
WalletOperationProcessing   200 body while a signed operation is still settling
InternalAccountExport       200 body of an export: `encrypted_wallet_credentials` (kept out of repr)
PasskeyAttestation          request part of a passkey registration (from the browser's credential)
PasskeyAssertion            request part of a passkey verify (from the browser's assertion)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from ._base import OpenEnum, UtcDatetime, WireModel
from .enums import AuthMethodType

__all__ = [
    "AuthMethod",
    "AuthSession",
    "InternalAccountExport",
    "PasskeyAssertion",
    "PasskeyAttestation",
    "PasskeyAuthChallenge",
    "Session",
    "SignedRetryChallenge",
    "WalletOperationProcessing",
]


class AuthMethod(WireModel):
    """A credential; `otp_encryption_target_bundle` only answers an `EMAIL_OTP` challenge."""

    id: str
    account_id: str
    type: OpenEnum[AuthMethodType]
    nickname: str
    credential_id: str | None = None
    otp_encryption_target_bundle: str | None = None
    created_at: UtcDatetime
    updated_at: UtcDatetime


class Session(AuthMethod):
    """A wallet session, as returned by a terminal `EMAIL_OTP` verify. The spec says it carries
    no signing key, but the interface types that answer as an `AuthSession`, which may: a key
    sent anyway is a secret like any other, left out of `repr()` and `str()`."""

    expires_at: UtcDatetime
    encrypted_session_signing_key: str | None = Field(default=None, repr=False)


class AuthSession(Session):
    """A session from a `PASSKEY` or `OAUTH` verify, carrying the encrypted signing key.

    The key is a secret: it is left out of `repr()` and `str()`, yet written by `to_wire()`.
    """


class _ExpiringChallenge(WireModel):
    request_id: str
    expires_at: UtcDatetime


class SignedRetryChallenge(_ExpiringChallenge):
    """Stamp `payload_to_sign` byte for byte as received, then resend the identical request
    with the `Service-Wallet-Signature` and `Request-Id` headers before `expires_at`."""

    type: OpenEnum[AuthMethodType] | None = None
    payload_to_sign: str


class PasskeyAuthChallenge(_ExpiringChallenge):
    """`challenge` is a lowercase hex string, UTF-8 encoded as is for the WebAuthn call; echo
    `request_id` as the `Request-Id` of the verify. The credential's own fields come with it."""

    challenge: str
    credential_id: str | None = None
    id: str | None = None
    account_id: str | None = None
    type: OpenEnum[AuthMethodType] | None = None
    nickname: str | None = None
    created_at: UtcDatetime | None = None
    updated_at: UtcDatetime | None = None


class WalletOperationProcessing(WireModel):
    """The signed operation is still settling: resend the identical signed request later."""

    status: Literal["PROCESSING"] = "PROCESSING"
    message: str | None = None


class InternalAccountExport(WireModel):
    """Wallet credentials sealed (HPKE) to the export's `clientPublicKey`; open them with that
    key (`SessionKey.open_bundle`). The ciphertext is left out of `repr()` and `str()`."""

    id: str
    encrypted_wallet_credentials: str = Field(repr=False)


def _webauthn_response(credential: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    response = credential.get("response")
    raw_id = credential.get("rawId") or credential.get("id")
    if not isinstance(response, Mapping) or not isinstance(raw_id, str):
        raise ValueError("expected a WebAuthn credential as JSON: {rawId, response: {...}}")
    return raw_id, response


class PasskeyAttestation(WireModel):
    """A passkey registration (spec §4.2): the browser's `rawId` is sent as `credential_id`,
    `clientDataJSON` as `client_data_json` (same bytes, base64url), `getTransports()` as
    `transports`."""

    credential_id: str
    client_data_json: str
    attestation_object: str
    transports: list[str] | None = None

    @classmethod
    def from_webauthn(cls, credential: Mapping[str, Any]) -> PasskeyAttestation:
        """From `PublicKeyCredential.toJSON()` of `navigator.credentials.create()`."""
        raw_id, response = _webauthn_response(credential)
        transports = response.get("transports")
        return cls(
            credential_id=raw_id,
            client_data_json=response["clientDataJSON"],
            attestation_object=response["attestationObject"],
            transports=list(transports) if transports is not None else None,
        )


class PasskeyAssertion(WireModel):
    """A passkey assertion for `verify`: the browser's `rawId` as `credential_id`,
    `clientDataJSON` as `client_data_json`; all values base64url as the browser gives them."""

    credential_id: str
    client_data_json: str
    authenticator_data: str
    signature: str
    user_handle: str | None = None

    @classmethod
    def from_webauthn(cls, credential: Mapping[str, Any]) -> PasskeyAssertion:
        """From `PublicKeyCredential.toJSON()` of `navigator.credentials.get()`."""
        raw_id, response = _webauthn_response(credential)
        return cls(
            credential_id=raw_id,
            client_data_json=response["clientDataJSON"],
            authenticator_data=response["authenticatorData"],
            signature=response["signature"],
            user_handle=response.get("userHandle"),
        )
