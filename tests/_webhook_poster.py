"""An independent signer and poster of the interface's webhooks, for tests.

It imports nothing from `paylens` (nor the sandbox): it follows the interface
(`../shared/reference/openapi.yaml`, `webhooks:` and the `*Webhook` schemas) on its own, so a
receiver tested with it is not tested against the sandbox's habits.

    poster = WebhookPoster("http://127.0.0.1:9000/webhooks")   # own random P-256 key
    poster.public_key_pem                                       # give it to the receiver
    body = poster.body("OUTGOING_PAYMENT.COMPLETED", record, at)  # bytes, a new "Webhook:<uuid>" id
    poster.post(body)                                           # -> httpx.Response (signed)
    poster.post(body, signature=forged)                         # any header value (tests of 401)
    poster.send(record, at)                                     # event_type + body + post

    watcher = RecordWatcher(service)       # a tests._second_service.SecondService
    for event_type, record in watcher.changes():   # every record new or changed since last call
        poster.send(record, service.clock, event_type=event_type)

API:
- `event_type(record, previous=None) -> str | None`: the `WebhookType` announcing `record`
  (a transaction by its `type` and `status` — REJECTED as `*.FAILED`, a refund that moved since
  `previous` as `*.REFUND_<status>`, None for a status the type's schema names no event for,
  such as INCOMING `CREATED` or `PROCESSING` —, a card
  `CARD.STATE_CHANGE` (or `CARD.FUNDING_SOURCE_CHANGE` when only its funding sources moved), a
  customer `CUSTOMER.KYC_<kycStatus>` (KYB for businesses), an internal account
  `INTERNAL_ACCOUNT.BALANCE_UPDATED` (STATUS_UPDATED when its status moved), an external
  account `EXTERNAL_ACCOUNT.STATUS_UPDATED`); the kind of record is read from its id prefix.
- `SCHEMAS[prefix or type]`: the interface's schema name of a body (for validating it).
- `sign(key, body) -> str`: base64 of the DER ECDSA P-256/SHA-256 signature (`X-Service-Signature`).
- `verify(public_key_pem, body, signature) -> bool`: the receiver's check, written from the
  interface's four steps.
- `WebhookPoster(url, key=None, transport=None)`: `.public_key_pem`, `.body(...)`,
  `.headers(body)`, `.post(body, signature=None)`, `.send(record, at, event_type=None,
  webhook_id=None)` (returns the response; the body sent is in `.sent[-1]`).
- `RecordWatcher(service)`: `.changes()` -> [(event_type, record)] for every transaction, card,
  customer and account of the second service new or changed since the previous call.
"""

from __future__ import annotations

import base64
import copy
import json
import uuid
from datetime import UTC, datetime
from functools import cache
from typing import Any

import httpx
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from ._helpers import interface

SIGNATURE_HEADER = "X-Service-Signature"
SCHEMAS = {
    "OUTGOING_PAYMENT": "OutgoingPaymentWebhook",
    "INCOMING_PAYMENT": "IncomingPaymentWebhook",
    "CARD_TRANSACTION": "CardTransactionWebhook",
    "CARD.STATE_CHANGE": "CardStateChangeWebhook",
    "CARD.FUNDING_SOURCE_CHANGE": "CardFundingSourceChangeWebhook",
    "CUSTOMER": "CustomerWebhook",
    "INTERNAL_ACCOUNT": "InternalAccountStatusWebhook",
    "EXTERNAL_ACCOUNT": "ExternalAccountStatusWebhook",
    "TEST": "TestWebhookRequest",
}


def schema_for(event: str) -> str:
    return SCHEMAS.get(event) or SCHEMAS[event.partition(".")[0]]


def sign(key: ec.EllipticCurvePrivateKey, body: bytes) -> str:
    return base64.b64encode(key.sign(body, ec.ECDSA(hashes.SHA256()))).decode()


def verify(public_key_pem: str | bytes, body: bytes, signature: str | None) -> bool:
    """The interface's check: decode the base64 signature, hash the body with SHA-256, verify."""
    if not signature:
        return False
    pem = public_key_pem.encode() if isinstance(public_key_pem, str) else public_key_pem
    key = serialization.load_pem_public_key(pem)
    assert isinstance(key, ec.EllipticCurvePublicKey)
    try:
        key.verify(base64.b64decode(signature, validate=True), body, ec.ECDSA(hashes.SHA256()))
    except (InvalidSignature, ValueError):
        return False
    return True


def _stamp(at: datetime | str) -> str:
    if isinstance(at, str):
        return at
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


@cache
def _schema_types(schema: str) -> frozenset[str]:
    """The `type` values the interface's webhook schema `schema` allows."""
    parts = interface()["components"]["schemas"][schema]["allOf"]
    return frozenset(
        t for part in parts for t in part.get("properties", {}).get("type", {}).get("enum", [])
    )


def event_type(record: dict[str, Any], previous: dict[str, Any] | None = None) -> str | None:
    """The `WebhookType` that announces `record` (see the module docstring)."""
    prefix = str(record.get("id", "")).partition(":")[0]
    before = previous or {}
    if prefix in ("Transaction", "CardTransaction"):
        kind, status = record["type"], record["status"]
        if kind == "CARD":
            event = f"CARD_TRANSACTION.{status}"
            return event if event in _schema_types(schema_for(event)) else None
        name = {"INCOMING": "INCOMING_PAYMENT", "OUTGOING": "OUTGOING_PAYMENT"}[kind]
        refund = record.get("refund") or {}
        if refund and before.get("status") == status and refund != before.get("refund"):
            return f"{name}.REFUND_{refund['status']}"
        event = f"{name}.{'FAILED' if status == 'REJECTED' else status}"
        return event if event in _schema_types(schema_for(event)) else None
    if prefix == "Card":
        moved = before and before.get("state") == record.get("state")
        if moved and before.get("fundingSources") != record.get("fundingSources"):
            return "CARD.FUNDING_SOURCE_CHANGE"
        return "CARD.STATE_CHANGE"
    if prefix == "Customer":
        kyb = record.get("customerType") == "BUSINESS"
        status = record.get("kybStatus" if kyb else "kycStatus") or "PENDING"
        status = status if status in ("APPROVED", "REJECTED") else "PENDING"
        return f"CUSTOMER.{'KYB' if kyb else 'KYC'}_{status}"
    if prefix == "InternalAccount":
        if before and before.get("status") != record.get("status"):
            return "INTERNAL_ACCOUNT.STATUS_UPDATED"
        return "INTERNAL_ACCOUNT.BALANCE_UPDATED"
    if prefix == "ExternalAccount":
        return "EXTERNAL_ACCOUNT.STATUS_UPDATED"
    raise ValueError(f"no webhook announces a record with id {record.get('id')!r}")


class WebhookPoster:
    """Builds, signs and posts webhooks to `url` with its own key (see the module docstring)."""

    def __init__(
        self,
        url: str,
        key: ec.EllipticCurvePrivateKey | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url
        self.key = key or ec.generate_private_key(ec.SECP256R1())
        self.public_key_pem = (
            self.key.public_key()
            .public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
            .decode()
        )
        self.http = httpx.Client(transport=transport, timeout=10.0)
        self.sent: list[bytes] = []

    def body(
        self,
        event: str,
        data: dict[str, Any] | None,
        at: datetime | str,
        webhook_id: str | None = None,
    ) -> bytes:
        value = {
            "id": webhook_id or f"Webhook:{uuid.uuid4()}",
            "type": event,
            "timestamp": _stamp(at),
            "data": {} if data is None else data,
        }
        return json.dumps(value, separators=(",", ":")).encode()

    def headers(self, body: bytes, signature: str | None = None) -> dict[str, str]:
        return {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: signature if signature is not None else sign(self.key, body),
        }

    def post(self, body: bytes, signature: str | None = None) -> httpx.Response:
        self.sent.append(body)
        return self.http.post(self.url, content=body, headers=self.headers(body, signature))

    def send(
        self,
        record: dict[str, Any],
        at: datetime | str,
        *,
        event_type: str | None = None,
        webhook_id: str | None = None,
    ) -> httpx.Response:
        event = event_type or globals()["event_type"](record)
        if event is None:
            raise ValueError(f"no webhook announces {record.get('id')} in {record.get('status')}")
        return self.post(self.body(event, record, at, webhook_id))

    def close(self) -> None:
        self.http.close()


class RecordWatcher:
    """What changed in a `SecondService` between calls, as (event type, record) pairs."""

    def __init__(self, service: Any) -> None:
        self.service = service
        self.seen: dict[str, dict[str, Any]] = {}

    def _records(self) -> list[dict[str, Any]]:
        s = self.service
        out = [item.record for item in s.txs.values()]
        for group in (s.cards, s.customers, s.internal, s.external):
            out += list(group.values())
        return out

    def changes(self) -> list[tuple[str, dict[str, Any]]]:
        found = []
        for record in self._records():
            previous = self.seen.get(record["id"])
            if previous == record:
                continue
            self.seen[record["id"]] = copy.deepcopy(record)
            event = event_type(record, previous)
            if event is not None:
                found.append((event, copy.deepcopy(record)))
        return found
