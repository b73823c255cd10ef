"""The sandbox's webhooks: each transition of its world (`world.events`) posted, signed, to the
platform's endpoint, as the interface's `webhooks` describe them.

    sandbox = Sandbox(seed=0, webhook_url="http://127.0.0.1:9000/webhooks")
    sandbox.webhook_public_key_pem          # give it to the receiver
    sandbox.advance(timedelta(hours=6))     # transitions are queued, never awaited here
    sandbox.webhooks_drain(timeout=30)      # tests: wait until every one is answered

Body: `{"id": "Webhook:<uuid>", "type": <WebhookType>, "timestamp": <the transition's
simulated time>, "data": <the record>}` (`BaseWebhook` and the type's schema; the id is unique
per event and the same on every retry of it). Header `X-Service-Signature`: base64 of the DER
(ASN.1 `ECDSA-Sig-Value`) ECDSA signature, P-256 with SHA-256, over the raw body: the interface
says "decode the base64 signature, hash the body with SHA-256, verify with the public key" and
names no raw r||s form, and DER is what standard verifiers (`cryptography`, OpenSSL, Java's
`SHA256withECDSA`) take.

Delivery: the world's hook only appends to an outbox; `lanes` sender threads post. A record
always goes to the same lane, so its events arrive in the order they happened; records in
different lanes go concurrently (an event being retried holds its lane). A 2xx answer or a 409
(already received) ends an event; for an `INCOMING_PAYMENT.PENDING`, 403 and 422 are answers
too: the platform's decision, which the sandbox applies to a payment waiting for one (200
approves, 403 rejects; 202 and 422 leave it waiting for `/approve` or `/reject`, or for its
window to close). Anything else, or no answer, is retried after `backoff` seconds, doubling up
to `max_backoff`, `attempts` posts in all; then the event is given up and kept in `failed`.

Faults (`Faults.webhook_*`, drawn per event from the sandbox's seed, or scripted with
`Faults.webhook_next`): `delay` (seconds before the first post), `duplicate` (the event is
posted again, same id and body, once answered), `reorder` (the event is held back and posted
after the next event of its lane, which it waits for up to `REORDER_WAIT`), `forge` (a copy of
the event signed with another key is posted first, not retried: a receiver must refuse it and
then take the real one).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
import orjson
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from paylens.errors import InvalidArgumentError

from ..world.entities import iso1
from ..world.events import Transition
from .faults import Faults, WebhookFaultDecision

logger = logging.getLogger("paylens.sandbox")

SIGNATURE_HEADER = "X-Service-Signature"
#: Seconds a sender thread waits idle before it ends (the next event starts another).
IDLE_S = 5.0
#: How long (seconds) an event held back by the `reorder` fault waits for a next one to pass it.
REORDER_WAIT = 1.0
#: The interface's schema of each event type's body (by type, else by the part before the dot).
WEBHOOK_SCHEMAS = {
    "OUTGOING_PAYMENT": "OutgoingPaymentWebhook",
    "INCOMING_PAYMENT": "IncomingPaymentWebhook",
    "CARD_TRANSACTION": "CardTransactionWebhook",
    "CARD.STATE_CHANGE": "CardStateChangeWebhook",
    "CARD.FUNDING_SOURCE_CHANGE": "CardFundingSourceChangeWebhook",
    "INTERNAL_ACCOUNT": "InternalAccountStatusWebhook",
    "TEST": "TestWebhookRequest",
}


def schema_of(event_type: str) -> str:
    """The interface's schema of a webhook body of `event_type`."""
    return WEBHOOK_SCHEMAS.get(event_type) or WEBHOOK_SCHEMAS[event_type.split(".")[0]]


def seeded_key(seed: int) -> ec.EllipticCurvePrivateKey:
    """A P-256 key derived from `seed` (`paylens sandbox serve --seed` keeps its key over
    restarts, so a receiver's configured public key stays valid; it guards sandbox data only)."""
    digest = hashlib.sha256(f"paylens sandbox webhooks, seed {seed}".encode()).digest()
    order = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
    return ec.derive_private_key(int.from_bytes(digest, "big") % (order - 1) + 1, ec.SECP256R1())


def sign(key: ec.EllipticCurvePrivateKey, body: bytes) -> str:
    """The `X-Service-Signature` of `body`: base64 of the DER ECDSA(P-256, SHA-256) signature."""
    return base64.b64encode(key.sign(body, ec.ECDSA(hashes.SHA256()))).decode()


def public_pem(key: ec.EllipticCurvePrivateKey) -> str:
    """The public half of `key` as PEM (SubjectPublicKeyInfo)."""
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def webhook_body(event_type: str, at_us: int, data: dict[str, Any] | None) -> tuple[str, bytes]:
    """A new unique webhook id and the body carrying it (the raw bytes that are signed)."""
    webhook_id = f"Webhook:{uuid.uuid4()}"
    value = {"id": webhook_id, "type": event_type, "timestamp": iso1(at_us), "data": data or {}}
    return webhook_id, orjson.dumps(value)


@dataclass(frozen=True)
class Delivery:
    """One event to post: its id, type, the record's id (`key`) and the signed body."""

    id: str
    type: str
    key: str
    body: bytes


@dataclass(frozen=True)
class Attempt:
    """One post made: the event, its answer status (None: no answer), whether it was a forged
    copy or a duplicate (faults)."""

    id: str
    type: str
    key: str
    status: int | None
    forged: bool = False
    duplicate: bool = False


@dataclass
class _Lane:
    queue: deque[tuple[Delivery, WebhookFaultDecision]] = field(default_factory=deque)
    thread: threading.Thread | None = None


class WebhookSender:
    """Posts the world's transitions to `url` (see the module docstring). `key`: the signing
    key (default: a new random one); `public_key_pem` is what a receiver verifies with."""

    def __init__(
        self,
        url: str | None,
        faults: Faults,
        *,
        key: ec.EllipticCurvePrivateKey | None = None,
        lanes: int = 4,
        backoff: float = 0.05,
        max_backoff: float = 5.0,
        attempts: int = 12,
        timeout: float = 10.0,
        on_answer: Callable[[Delivery, int], None] | None = None,
    ) -> None:
        self.url = None if url is None else _checked_url(url)
        #: called with each event's final answer (the sandbox applies approval decisions)
        self.on_answer = on_answer
        self.faults = faults
        self._key = key or ec.generate_private_key(ec.SECP256R1())
        self._forger = ec.generate_private_key(ec.SECP256R1())
        self.public_key_pem = public_pem(self._key)
        self.backoff, self.max_backoff, self.attempts = backoff, max_backoff, attempts
        self._timeout = timeout
        self._lanes = [_Lane() for _ in range(max(1, lanes))]
        self._cond = threading.Condition()
        self._pending = 0
        self._closed = False
        #: every post made, in the order made (`Attempt`s)
        self.log: list[Attempt] = []
        #: events given up after `attempts` posts
        self.failed: list[Delivery] = []

    def __repr__(self) -> str:
        return f"WebhookSender(url={self.url!r}, pending={self._pending})"

    # --- the world's hook ---------------------------------------------------------------------

    def __call__(self, transition: Transition) -> None:
        """Queue a transition's webhook (the world's `on_transition`): never blocks on the net."""
        self.enqueue(transition.event, transition.at, transition.record)

    def enqueue(self, event_type: str, at_us: int, data: dict[str, Any]) -> Delivery:
        webhook_id, body = webhook_body(event_type, at_us, data)
        key = str(data.get("id", ""))
        delivery = Delivery(webhook_id, event_type, key, body)
        decision = self.faults.decide_webhook()
        lane = self._lanes[
            int(hashlib.blake2b(key.encode(), digest_size=4).hexdigest(), 16) % len(self._lanes)
        ]
        with self._cond:
            if self._closed:
                return delivery
            self._pending += 1
            lane.queue.append((delivery, decision))
            if lane.thread is None:
                lane.thread = threading.Thread(
                    target=self._run, args=(lane,), name="paylens-webhooks", daemon=True
                )
                lane.thread.start()
            self._cond.notify_all()
        return delivery

    # --- tests and shutdown -------------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Events queued or being posted."""
        with self._cond:
            return self._pending

    def drain(self, timeout: float = 30.0) -> bool:
        """Wait until every queued event is answered or given up; False when `timeout` (seconds)
        passed first. Not while holding the sandbox's `app.lock`: an answer to a pending
        incoming payment takes it to apply the decision."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self) -> None:
        """Stop the sender threads (queued events are dropped)."""
        with self._cond:
            self._closed = True
            for lane in self._lanes:
                self._pending -= len(lane.queue)
                lane.queue.clear()
            self._cond.notify_all()

    # --- posting ------------------------------------------------------------------------------

    def send_test(self, at_us: int) -> tuple[int, str]:
        """Post the `TEST` webhook now (stamped `at_us`, the sandbox's clock) and return the
        endpoint's (status, body); raises `httpx.HTTPError` when it cannot be reached."""
        assert self.url is not None
        event_id, body = webhook_body("TEST", at_us, None)
        with httpx.Client(timeout=self._timeout) as http:
            answer = http.post(self.url, content=body, headers=self._headers(body, self._key))
        with self._cond:
            self.log.append(Attempt(event_id, "TEST", "", answer.status_code))
        return answer.status_code, answer.text

    def _run(self, lane: _Lane) -> None:
        with httpx.Client(timeout=self._timeout) as http:
            while True:
                with self._cond:
                    if not lane.queue and not self._closed:
                        self._cond.wait_for(lambda: bool(lane.queue) or self._closed, IDLE_S)
                    if self._closed or not lane.queue:  # idle lanes end; `enqueue` restarts them
                        lane.thread = None
                        return
                    delivery, decision = lane.queue.popleft()
                    if decision.reorder and not lane.queue:  # wait a moment for a next one
                        self._cond.wait_for(lambda: bool(lane.queue), REORDER_WAIT)
                    if decision.reorder and lane.queue:  # held back: the next one goes first
                        held = (delivery, replace(decision, reorder=False))
                        delivery, decision = lane.queue.popleft()
                        lane.queue.appendleft(held)
                try:
                    self._deliver(http, delivery, decision)
                finally:
                    with self._cond:
                        self._pending -= 1
                        self._cond.notify_all()

    def _deliver(self, http: httpx.Client, d: Delivery, decision: WebhookFaultDecision) -> None:
        if decision.delay:
            time.sleep(decision.delay)
        if decision.forge:
            self._post(http, d, self._forger, forged=True)
        wait = self.backoff
        for attempt in range(1, self.attempts + 1):
            status = self._post(http, d, self._key)
            if status is not None and _final(d.type, status):
                if self.on_answer is not None:
                    self.on_answer(d, status)
                if decision.duplicate:
                    self._post(http, d, self._key, duplicate=True)
                return
            if attempt == self.attempts or self._closed:
                break
            time.sleep(wait)
            wait = min(wait * 2, self.max_backoff)
        logger.warning(
            "webhook %s (%s of %s) given up after %d posts", d.id, d.type, d.key, self.attempts
        )
        with self._cond:
            self.failed.append(d)

    def _post(
        self,
        http: httpx.Client,
        d: Delivery,
        key: ec.EllipticCurvePrivateKey,
        *,
        forged: bool = False,
        duplicate: bool = False,
    ) -> int | None:
        if self.url is None:
            return None
        try:
            status: int | None = http.post(
                self.url, content=d.body, headers=self._headers(d.body, key)
            ).status_code
        except httpx.HTTPError:
            status = None
        with self._cond:
            self.log.append(Attempt(d.id, d.type, d.key, status, forged, duplicate))
        return status

    @staticmethod
    def _headers(body: bytes, key: ec.EllipticCurvePrivateKey) -> dict[str, str]:
        return {"Content-Type": "application/json", SIGNATURE_HEADER: sign(key, body)}


def _checked_url(url: str) -> str:
    """`url` when it is an absolute http(s) URL; else `InvalidArgumentError`."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        parsed = None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.host:
        raise InvalidArgumentError("webhook_url", f"must be an http or https URL; got {url!r}")
    return url


def _final(event_type: str, status: int) -> bool:
    """Whether an answer ends an event: 2xx, 409 (already received), or a decision on a
    pending incoming payment (403 reject, 422 more information)."""
    if 200 <= status < 300 or status == 409:
        return True
    return event_type == "INCOMING_PAYMENT.PENDING" and status in (403, 422)
