"""Error bodies of the service and the error codes it documents per HTTP status."""

from __future__ import annotations

from typing import Any

from ._base import Count, WireModel

__all__ = ["ERROR_CODES", "ErrorBody", "FieldError"]


class FieldError(WireModel):
    """One invalid field of a submitted body: its dot path, the broken constraint, a message."""

    field: str
    constraint: dict[str, Any] | None = None
    message: str | None = None


class ErrorBody(WireModel):
    """Body of every error response; `status` equals the HTTP status."""

    status: Count
    code: str
    message: str
    details: dict[str, Any] | None = None

    @property
    def field_errors(self) -> list[FieldError]:
        """The per-field failures listed in `details.errors` (empty when there are none)."""
        entries = (self.details or {}).get("errors")
        if not isinstance(entries, list):
            return []
        return [FieldError.model_validate(entry) for entry in entries if isinstance(entry, dict)]


ERROR_CODES: dict[int, frozenset[str]] = {
    400: frozenset(
        {
            "INVALID_INPUT",
            "END_USER_TERMS_VERSION_NOT_FOUND",
            "MISSING_MANDATORY_USER_INFO",
            "INVITATION_ALREADY_CLAIMED",
            "INVITATIONS_NOT_CONFIGURED",
            "INVALID_UMA_ADDRESS",
            "INVITATION_CANCELLED",
            "QUOTE_REQUEST_FAILED",
            "INVALID_PAYREQ_RESPONSE",
            "INVALID_RECEIVER",
            "PARSE_PAYREQ_RESPONSE_ERROR",
            "CERT_CHAIN_INVALID",
            "CERT_CHAIN_EXPIRED",
            "INVALID_PUBKEY_FORMAT",
            "MISSING_REQUIRED_UMA_PARAMETERS",
            "SENDER_NOT_ACCEPTED",
            "AMOUNT_OUT_OF_RANGE",
            "INVALID_CURRENCY",
            "INVALID_TIMESTAMP",
            "INVALID_NONCE",
            "INVALID_REQUEST_FORMAT",
            "INVALID_BANK_ACCOUNT",
            "SELF_PAYMENT",
            "LOOKUP_REQUEST_FAILED",
            "PARSE_LNURLP_RESPONSE_ERROR",
            "INVALID_AMOUNT",
            "WEBHOOK_ENDPOINT_NOT_SET",
            "WEBHOOK_DELIVERY_ERROR",
            "LOW_QUALITY",
            "DATA_MISMATCH",
            "EXPIRED",
            "SUSPECTED_FRAUD",
            "UNSUITABLE_DOCUMENT",
            "INCOMPLETE",
            "EMAIL_OTP_CREDENTIAL_ALREADY_EXISTS",
            "SMS_OTP_CREDENTIAL_ALREADY_EXISTS",
            "PASSKEY_CREDENTIAL_ALREADY_EXISTS",
            "STABLECOIN_PROVIDER_ACCOUNT_INVALID",
            "STABLECOIN_PROVIDER_ACCOUNT_REVOKED",
            "STABLECOIN_PROVIDER_ACCOUNT_SELECTION_REQUIRED",
            "CARDHOLDER_KYC_NOT_APPROVED",
            "TRANSACTION_SIZE_LIMIT_EXCEEDED",
            "EXTERNAL_ACCOUNT_VERIFICATION_REQUIRED",
        }
    ),
    401: frozenset(
        {
            "UNAUTHORIZED",
            "INVALID_SIGNATURE",
            "WALLET_SIGNATURE_MISSING",
            "WALLET_SIGNATURE_MALFORMED",
            "WALLET_SIGNATURE_BODY_MISMATCH",
            "WALLET_SIGNATURE_INVALID",
            "REQUEST_ID_MISSING",
        }
    ),
    403: frozenset(
        {
            "FORBIDDEN",
            "USER_NOT_READY",
            "COUNTERPARTY_NOT_ALLOWED",
            "VELOCITY_LIMIT_EXCEEDED",
            "END_USER_TERMS_NOT_ACCEPTED",
        }
    ),
    404: frozenset(
        {
            "TRANSACTION_NOT_FOUND",
            "INVITATION_NOT_FOUND",
            "USER_NOT_FOUND",
            "QUOTE_NOT_FOUND",
            "LOOKUP_REQUEST_NOT_FOUND",
            "TOKEN_NOT_FOUND",
            "BULK_UPLOAD_JOB_NOT_FOUND",
            "REFERENCE_NOT_FOUND",
            "UMA_NOT_FOUND",
            "STABLECOIN_PROVIDER_ACCOUNT_NOT_FOUND",
        }
    ),
    405: frozenset({"METHOD_NOT_ALLOWED"}),
    409: frozenset(
        {
            "TRANSACTION_NOT_PENDING_PLATFORM_APPROVAL",
            "TRANSACTION_NOT_CANCELLABLE",
            "UMA_ADDRESS_EXISTS",
            "EMAIL_OTP_EMAIL_ALREADY_EXISTS",
            "EMAIL_OTP_CREDENTIAL_SET_CHANGED",
            "PASSKEY_ALREADY_ENROLLED",
            "SCA_SESSION_REQUIRED",
            "BENEFICIARY_TRUSTED",
            "INVALID_STATE_TRANSITION",
            "CARD_ALREADY_CLOSED",
            "CARD_NOT_MUTABLE",
            "CONFLICT",
        }
    ),
    410: frozenset({"CUSTOMER_DELETED"}),
    412: frozenset({"UNSUPPORTED_UMA_VERSION"}),
    423: frozenset({"ACCOUNT_LOCKED"}),
    424: frozenset(
        {
            "PAYREQ_REQUEST_FAILED",
            "COUNTERPARTY_PUBKEY_FETCH_ERROR",
            "NO_COMPATIBLE_UMA_VERSION",
            "LNURLP_REQUEST_FAILED",
            "EMAIL_OTP_CREDENTIAL_SYNC_FAILED",
        }
    ),
    429: frozenset({"RATE_LIMITED", "DAILY_VOLUME_LIMIT_EXCEEDED"}),
    500: frozenset({"SERVICE_SWITCH_ERROR", "INTERNAL_ERROR"}),
    501: frozenset({"UNRECOGNIZED_MANDATORY_PAYEE_DATA_KEY", "NOT_IMPLEMENTED"}),
    503: frozenset({"SERVICE_UNAVAILABLE"}),
}
"""Error codes the service documents, by HTTP status. Statuses 400, 401, 404, 409, 423, 429 and
500 come from the service spec; the others (403, 405, 410, 412, 424, 501, 503) from the interface
description, which also places `END_USER_TERMS_NOT_ACCEPTED` under 403. A code absent here may
still arrive from a newer service version."""
