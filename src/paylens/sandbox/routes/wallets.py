"""Routes of the embedded wallets: credentials, sessions and the export of a wallet account.
Writes are signed retries; their semantics are in `world.wallets`."""

from __future__ import annotations

import re
from typing import Any

from ..crypto import is_p256_point
from ..errors import invalid
from ..wire.request import Query, Request
from ..world.wallets import SignedRequest
from .checks import body_object, raise_if_invalid, require_texts
from .registry import route

_AUTH_TYPES = ("EMAIL_OTP", "SMS_OTP", "OAUTH", "PASSKEY")
_TRANSPORTS = ("usb", "nfc", "ble", "internal", "hybrid")
_PUBLIC_KEY_FORM = re.compile(r"^(0[23][0-9a-fA-F]{64}|04[0-9a-fA-F]{128})$")


def signed_request(request: Request, operation: str) -> SignedRequest:
    return SignedRequest(operation, request.body, request.headers, request.world.now_us)


def _wallet_account(request: Request) -> int:
    query = Query(request.params)
    account_id = query.text("accountId")
    if account_id is None:
        query.fail("accountId", "is required")
    query.check()
    assert account_id is not None
    # the interface documents no 404 on these lists: an unknown account is a bad parameter
    row = request.world.entities.account_index.get(account_id)
    if row is None or not request.world.wallets.is_wallet(row):
        raise invalid(
            [{"field": "accountId", "message": "must be an Embedded Wallet internal account"}]
        )
    return row


@route("GET", "/auth/credentials")
def list_credentials(request: Request) -> tuple[int, Any]:
    return 200, {"data": request.world.wallets.list_credentials(_wallet_account(request))}


@route("GET", "/auth/sessions")
def list_sessions(request: Request) -> tuple[int, Any]:
    return 200, {
        "data": request.world.wallets.list_sessions(_wallet_account(request), request.world.now_us)
    }


def _client_key(body: dict[str, Any], errors: list[dict[str, str]], *, required: bool) -> Any:
    value = body.get("clientPublicKey")
    if value is None and not required:
        return None
    if not isinstance(value, str) or not _PUBLIC_KEY_FORM.match(value):
        errors.append(
            {"field": "clientPublicKey", "message": "must be a P-256 public key in hex (02/03/04…)"}
        )
        return None
    if not is_p256_point(value):
        errors.append({"field": "clientPublicKey", "message": "is not a point on P-256"})
    return value


def _body_key(request: Request, *, required: bool) -> Any:
    """The checked `clientPublicKey` of the body (None when absent and optional)."""
    errors: list[dict[str, str]] = []
    key = _client_key(body_object(request), errors, required=required)
    raise_if_invalid(errors)
    return key


@route("POST", "/auth/credentials")
def add_credential(request: Request) -> tuple[int, Any]:
    body, errors = body_object(request), []
    kind = body.get("type")
    if kind not in _AUTH_TYPES:
        errors.append({"field": "type", "message": f"must be one of {', '.join(_AUTH_TYPES)}"})
    require_texts(body, ("accountId",), "", errors)
    if kind == "OAUTH":
        require_texts(body, ("oidcToken",), "", errors)
    if kind == "PASSKEY":
        require_texts(body, ("nickname", "challenge"), "", errors)
        attestation = body.get("attestation")
        require_texts(
            attestation,
            ("credentialId", "clientDataJson", "attestationObject"),
            "attestation.",
            errors,
        )
        transports = attestation.get("transports") if isinstance(attestation, dict) else None
        if transports is not None and (
            not isinstance(transports, list) or any(t not in _TRANSPORTS for t in transports)
        ):
            errors.append(
                {"field": "attestation.transports", "message": f"items: {', '.join(_TRANSPORTS)}"}
            )
    raise_if_invalid(errors)
    row = request.world.account_row(body["accountId"])
    if not request.world.wallets.is_wallet(row):
        raise invalid(
            [{"field": "accountId", "message": "must be an Embedded Wallet internal account"}]
        )
    return request.world.wallets.add(
        signed_request(request, "POST /auth/credentials"), row, str(kind), body
    )


@route("DELETE", "/auth/credentials/{id}")
def revoke_credential(request: Request) -> tuple[int, Any]:
    operation = f"DELETE /auth/credentials/{request.args[0]}"
    return request.world.wallets.revoke(signed_request(request, operation), request.args[0])


@route("POST", "/auth/credentials/{id}/challenge")
def challenge_credential(request: Request) -> tuple[int, Any]:
    key = _body_key(request, required=False)
    return 200, request.world.wallets.challenge(request.args[0], key, request.world.now_us)


@route("POST", "/auth/credentials/{id}/verify")
def verify_credential(request: Request) -> tuple[int, Any]:
    world, body, errors = request.world, body_object(request), []
    credential = world.wallets.credential(request.args[0])[1]
    kind = credential["type"]
    if body.get("type") != kind:
        errors.append({"field": "type", "message": f"must be {kind}, the credential's type"})
    elif kind == "OAUTH":
        require_texts(body, ("oidcToken",), "", errors)
        key = _client_key(body, errors, required=True)
    elif kind == "PASSKEY":
        fields = ("credentialId", "clientDataJson", "authenticatorData", "signature")
        require_texts(body.get("assertion"), fields, "assertion.", errors)
    else:
        require_texts(body, ("encryptedOtpBundle",), "", errors)
    raise_if_invalid(errors)
    signed = signed_request(request, f"POST /auth/credentials/{request.args[0]}/verify")
    if kind == "OAUTH":
        return 200, world.wallets.verify_oauth(
            request.args[0], body["oidcToken"], key, world.now_us
        )
    if kind == "PASSKEY":
        request_id = signed.header("request-id")
        return 200, world.wallets.verify_passkey(
            request.args[0], request_id, body["assertion"], world.now_us
        )
    return world.wallets.verify_otp(signed, request.args[0], body["encryptedOtpBundle"])


@route("DELETE", "/auth/sessions/{id}")
def revoke_session(request: Request) -> tuple[int, Any]:
    operation = f"DELETE /auth/sessions/{request.args[0]}"
    return request.world.wallets.revoke_session_signed(
        signed_request(request, operation), request.args[0]
    )


@route("POST", "/auth/sessions/{id}/refresh")
def refresh_session(request: Request) -> tuple[int, Any]:
    key = _body_key(request, required=True)
    operation = f"POST /auth/sessions/{request.args[0]}/refresh"
    return request.world.wallets.refresh(signed_request(request, operation), request.args[0], key)


@route("POST", "/internal-accounts/{id}/export")
def export_account(request: Request) -> tuple[int, Any]:
    key = _body_key(request, required=True)
    row = request.world.account_row(request.args[0])
    if not request.world.wallets.is_wallet(row):
        raise invalid([{"field": "id", "message": "must be an Embedded Wallet internal account"}])
    operation = f"POST /internal-accounts/{request.args[0]}/export"
    return request.world.wallets.export(signed_request(request, operation), row, key)
