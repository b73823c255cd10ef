"""Wallet credentials and sessions, and the bodies of the signed-retry protocol.

AuthMethod                  a credential of a wallet account (passkey, OAuth, email/SMS OTP)
└── Session                 a session created by verifying a credential (`expires_at`)
    └── AuthSession         ... with its `encrypted_session_signing_key` (kept out of repr)
SignedRetryChallenge        202 body: sign `payload_to_sign` and retry with `request_id`
PasskeyAuthChallenge        200 body of a passkey `/challenge`
WalletOperationProcessing   200 body while a signed operation is still settling
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ._base import OpenEnum, UtcDatetime, WireModel
from ._enums import AuthMethodType

__all__ = [
    "AuthMethod",
    "AuthSession",
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
    """A wallet session, as returned by a terminal `EMAIL_OTP` verify (no signing key)."""

    expires_at: UtcDatetime


class AuthSession(Session):
    """A session from a `PASSKEY` or `OAUTH` verify, carrying the encrypted signing key.

    The key is a secret: it is left out of `repr()` and `str()`, yet written by `to_wire()`.
    """

    encrypted_session_signing_key: str | None = Field(default=None, repr=False)


class _ExpiringChallenge(WireModel):
    request_id: str
    expires_at: UtcDatetime


class SignedRetryChallenge(_ExpiringChallenge):
    """Stamp `payload_to_sign` byte for byte as received, then resend the identical request
    with the `Service-Wallet-Signature` and `Request-Id` headers before `expires_at`."""

    type: OpenEnum[AuthMethodType] | None = None
    payload_to_sign: str


class PasskeyAuthChallenge(_ExpiringChallenge):
    """`challenge` is a lowercase hex string, UTF-8 encoded as is for the WebAuthn call."""

    challenge: str
    credential_id: str | None = None


class WalletOperationProcessing(WireModel):
    """The signed operation is still settling: resend the identical signed request later."""

    status: Literal["PROCESSING"] = "PROCESSING"
    message: str | None = None
