"""The envelope of the service's webhooks (`BaseWebhook`, `WebhookType`) and the key fields of
each kind's payload, checked before an event is stored.

The check is deliberately light: the envelope whole (`id`, `type` one of `WebhookType`,
`timestamp` a date-time with its zone), and of `data` the fields the warehouse keys and orders
an event by (`id`; a payment's `type` and `status`; a card transaction's `status`). The rest of a
payload is the service's record, which the sync reads with the same models and frames as a
listed record (its own refusals go to `rejected_records`), so it is not checked twice here; a
receiver taking thousands of events a second spends its time on the signature and the disk,
not on validating every nested field.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, StrictStr, ValidationError

__all__ = ["WebhookEnvelope", "WebhookType", "parse_webhook"]


class WebhookType(StrEnum):
    """`WebhookType`: OBJECT.EVENT, the part before the dot the resource."""

    OUTGOING_PAYMENT_PENDING = "OUTGOING_PAYMENT.PENDING"
    OUTGOING_PAYMENT_PENDING_AUTHORIZATION = "OUTGOING_PAYMENT.PENDING_AUTHORIZATION"
    OUTGOING_PAYMENT_PROCESSING = "OUTGOING_PAYMENT.PROCESSING"
    OUTGOING_PAYMENT_COMPLETED = "OUTGOING_PAYMENT.COMPLETED"
    OUTGOING_PAYMENT_FAILED = "OUTGOING_PAYMENT.FAILED"
    OUTGOING_PAYMENT_EXPIRED = "OUTGOING_PAYMENT.EXPIRED"
    OUTGOING_PAYMENT_REFUND_PENDING = "OUTGOING_PAYMENT.REFUND_PENDING"
    OUTGOING_PAYMENT_REFUND_COMPLETED = "OUTGOING_PAYMENT.REFUND_COMPLETED"
    OUTGOING_PAYMENT_REFUND_FAILED = "OUTGOING_PAYMENT.REFUND_FAILED"
    INCOMING_PAYMENT_PENDING = "INCOMING_PAYMENT.PENDING"
    INCOMING_PAYMENT_COMPLETED = "INCOMING_PAYMENT.COMPLETED"
    INCOMING_PAYMENT_FAILED = "INCOMING_PAYMENT.FAILED"
    INCOMING_PAYMENT_REFUND_PENDING = "INCOMING_PAYMENT.REFUND_PENDING"
    INCOMING_PAYMENT_REFUND_COMPLETED = "INCOMING_PAYMENT.REFUND_COMPLETED"
    INCOMING_PAYMENT_REFUND_FAILED = "INCOMING_PAYMENT.REFUND_FAILED"
    CUSTOMER_KYC_APPROVED = "CUSTOMER.KYC_APPROVED"
    CUSTOMER_KYC_REJECTED = "CUSTOMER.KYC_REJECTED"
    CUSTOMER_KYC_PENDING = "CUSTOMER.KYC_PENDING"
    CUSTOMER_KYB_APPROVED = "CUSTOMER.KYB_APPROVED"
    CUSTOMER_KYB_REJECTED = "CUSTOMER.KYB_REJECTED"
    CUSTOMER_KYB_PENDING = "CUSTOMER.KYB_PENDING"
    VERIFICATION_APPROVED = "VERIFICATION.APPROVED"
    VERIFICATION_REJECTED = "VERIFICATION.REJECTED"
    VERIFICATION_RESOLVE_ERRORS = "VERIFICATION.RESOLVE_ERRORS"
    VERIFICATION_IN_PROGRESS = "VERIFICATION.IN_PROGRESS"
    VERIFICATION_PENDING_MANUAL_REVIEW = "VERIFICATION.PENDING_MANUAL_REVIEW"
    VERIFICATION_READY_FOR_VERIFICATION = "VERIFICATION.READY_FOR_VERIFICATION"
    EXTERNAL_ACCOUNT_STATUS_UPDATED = "EXTERNAL_ACCOUNT.STATUS_UPDATED"
    INTERNAL_ACCOUNT_BALANCE_UPDATED = "INTERNAL_ACCOUNT.BALANCE_UPDATED"
    INTERNAL_ACCOUNT_STATUS_UPDATED = "INTERNAL_ACCOUNT.STATUS_UPDATED"
    INTERNAL_ACCOUNT_FUNDING_INSTRUCTIONS_UPDATED = "INTERNAL_ACCOUNT.FUNDING_INSTRUCTIONS_UPDATED"
    INVITATION_CLAIMED = "INVITATION.CLAIMED"
    BULK_UPLOAD_COMPLETED = "BULK_UPLOAD.COMPLETED"
    BULK_UPLOAD_FAILED = "BULK_UPLOAD.FAILED"
    AGENT_ACTION_PENDING_APPROVAL = "AGENT_ACTION.PENDING_APPROVAL"
    CARD_STATE_CHANGE = "CARD.STATE_CHANGE"
    CARD_FUNDING_SOURCE_CHANGE = "CARD.FUNDING_SOURCE_CHANGE"
    CARD_TRANSACTION_AUTHORIZED = "CARD_TRANSACTION.AUTHORIZED"
    CARD_TRANSACTION_PARTIALLY_SETTLED = "CARD_TRANSACTION.PARTIALLY_SETTLED"
    CARD_TRANSACTION_SETTLED = "CARD_TRANSACTION.SETTLED"
    CARD_TRANSACTION_REFUNDED = "CARD_TRANSACTION.REFUNDED"
    CARD_TRANSACTION_EXCEPTION = "CARD_TRANSACTION.EXCEPTION"
    TEST = "TEST"


class WebhookEnvelope(BaseModel):
    """`BaseWebhook`: the delivery's id (unique per delivery: a redelivery repeats it), its type,
    when it was sent, and the payload (absent from a `TEST`)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    id: StrictStr
    type: WebhookType
    timestamp: AwareDatetime
    data: dict[str, Any] | None = None


#: Per resource (the type's part before the dot): the payload's string fields that must be
#: there, and the value a field must have.
_KEY_FIELDS: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "OUTGOING_PAYMENT": (("id", "status", "type"), {"type": "OUTGOING"}),
    "INCOMING_PAYMENT": (("id", "status", "type"), {"type": "INCOMING"}),
    "CARD_TRANSACTION": (("id", "status"), {}),
}


def parse_webhook(body: bytes) -> tuple[WebhookEnvelope | None, str]:
    """The webhook a body holds, or None and why it is off the interface's webhook schemas."""
    try:
        envelope = WebhookEnvelope.model_validate_json(body)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        said = (
            "not one of the interface's WebhookType values"
            if first["type"] == "enum"
            else first["msg"]
        )
        return None, f"{where}: {said}"
    if not envelope.id:
        return None, "id: empty"
    if envelope.type == WebhookType.TEST:
        return envelope, ""
    data = envelope.data
    if data is None:
        return None, f"data: missing (required for {envelope.type})"
    required, fixed = _KEY_FIELDS.get(envelope.type.partition(".")[0], (("id",), {}))
    for name in required:
        value = data.get(name)
        if not isinstance(value, str) or not value:
            return None, f"data.{name}: missing or not a string (required for {envelope.type})"
    for name, expected in fixed.items():
        if data[name] != expected:
            return None, f"data.{name}: {data[name]!r} in a {envelope.type} (expected {expected!r})"
    return envelope, ""
