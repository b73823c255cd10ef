"""The receiver: one ASGI endpoint, `POST /webhooks`, for every event type the service sends.

Per request, in this order: refuse a body over the size limit (413) before reading past it;
verify `X-Service-Signature` over the raw bytes (401, nothing stored, nothing parsed); check the
envelope and the payload's key fields (`paylens.models.parse_webhook`; a body off the schemas is
kept apart in the store and answered 202, never applied); store the event; answer 2xx only once
the store's commit returned (the event is on disk), 409 for a webhook id stored before.

The service retries a non-2xx answer, so a verified body off the schemas is answered 202: it is
authentic, kept for inspection, and resending the same bytes can never make it readable; a 4xx
would have the service resend it forever. 202, not 200, because 200 to an
`INCOMING_PAYMENT.PENDING` approves the payment, which a receiver that cannot read it must not.

Concurrent requests of a process share one writer thread that stores every event waiting in
one commit (a group commit), so a burst costs one disk flush per batch, not one per event.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from paylens.models import WebhookType, parse_webhook

from ._approve import VERDICTS, Policy, answering, on_approval_rail, verdict_of
from ._store import Decision, Event, EventStore, now_text, stamp
from ._verify import SIGNATURE_HEADER, Verifier

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

logger = logging.getLogger("paylens.webhooks")

#: The largest body taken by default: the interface's largest payloads (a customer, an agent
#: action with its quote) are a few KiB; 1 MiB leaves room and refuses a flood.
MAX_BODY_BYTES = 1 << 20
#: How often a running receiver records that it is up (its heartbeat), in seconds.
HEARTBEAT_S = 5.0
#: The most events one commit stores.
MAX_BATCH = 1000


class _Writer:
    """The process's writer thread: stores the events requests hand it, every one waiting in
    one commit, and hands each request its answer (new or a duplicate) once that commit
    returned; beats the receiver's heartbeat when the interval has passed."""

    def __init__(self, store: EventStore, receiver_id: str, heartbeat_s: float) -> None:
        self.store = store
        self.receiver_id = receiver_id
        self.heartbeat_s = heartbeat_s
        self._queue: queue.SimpleQueue[
            tuple[Event, asyncio.AbstractEventLoop, asyncio.Future[bool]] | None
        ] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def start(self) -> None:
        with self._start_lock:
            if self._thread is not None:
                return
            self.store.receiver_started(self.receiver_id)
            self._thread = threading.Thread(
                target=self._run, name="paylens-webhooks-writer", daemon=True
            )
            self._thread.start()

    def stop(self) -> None:
        with self._start_lock:
            if self._thread is None:
                return
            self._queue.put(None)
            self._thread.join()
            self._thread = None
            self.store.receiver_stopped(self.receiver_id)

    def submit(self, event: Event) -> asyncio.Future[bool]:
        """A future set to True (stored now) or False (stored before) once `event` is on disk."""
        self.start()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        self._queue.put((event, loop, future))
        return future

    def _run(self) -> None:
        beat = time.monotonic()
        while True:
            try:
                item = self._queue.get(timeout=self.heartbeat_s)
                idle = False
            except queue.Empty:
                item, idle = None, True
            if time.monotonic() - beat >= self.heartbeat_s:
                self._beat()
                beat = time.monotonic()
            if idle:
                continue
            if item is None:
                return
            batch = [item]
            while len(batch) < MAX_BATCH:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:  # stop after this batch
                    self._queue.put(None)
                    break
                batch.append(more)
            try:
                fresh = self.store.append([event for event, _, _ in batch])
            except Exception as exc:  # the disk refused: every request of the batch gets 500
                logger.exception("storing %d webhook(s) failed", len(batch))
                for _, loop, future in batch:
                    loop.call_soon_threadsafe(_settle, future, exc)
                continue
            for (_, loop, future), new in zip(batch, fresh, strict=True):
                loop.call_soon_threadsafe(_settle, future, new)

    def _beat(self) -> None:
        try:
            self.store.receiver_alive(self.receiver_id)
        except Exception:  # a heartbeat missed is a shorter up interval, never a lost event
            logger.exception("the receiver's heartbeat failed")


def _settle(future: asyncio.Future[bool], outcome: bool | BaseException) -> None:
    if future.done():  # the request went away (its client disconnected)
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


def _json(status: int, body: dict[str, Any]) -> Response:
    from starlette.responses import Response

    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


def _error(status: int, code: str, message: str, **extra: Any) -> Response:
    return _json(status, {"status": status, "code": code, "message": message, **extra})


def _decision_answer(decision: Decision) -> Response:
    """The interface's answer for a decision: 200 `{}` approves, 202 defers, 403 rejects
    (`IncomingPaymentWebhookForbiddenResponse`), 422 names the fields wanted."""
    if decision.status == 403:
        return _json(
            403,
            {"code": "PAYMENT_REJECTED", "message": decision.reason, "reason": decision.reason},
        )
    if decision.status == 422:
        fields = [f for f in decision.reason.split(",") if f]
        return _json(
            422,
            {
                "code": "COUNTERPARTY_INFORMATION_REQUIRED",
                "message": f"more counterparty information is required: {', '.join(fields)}",
                "requiredFields": fields,
            },
        )
    return _json(decision.status, orjson.loads(decision.answer))


class Receiver:
    """What the app runs on: the store, the keys, the policy and the writer thread."""

    def __init__(
        self,
        store: EventStore,
        verifier: Verifier,
        *,
        approve: Policy | None,
        max_body_bytes: int,
        heartbeat_s: float,
        receiver_id: str | None,
    ) -> None:
        self.store = store
        self.verifier = verifier
        self.approve = approve
        self.max_body_bytes = max_body_bytes
        self.receiver_id = receiver_id or (
            f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        )
        self.writer = _Writer(store, self.receiver_id, heartbeat_s)

    async def _body(self, request: Request) -> bytes | None:
        """The raw body, or None once it passes the limit (nothing more is read)."""
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body_bytes):
            return None
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > self.max_body_bytes:
                return None
        return bytes(body)

    async def handle(self, request: Request) -> Response:
        body = await self._body(request)
        if body is None:
            return _error(
                413, "PAYLOAD_TOO_LARGE", f"the body is over {self.max_body_bytes:,} bytes"
            )
        if not self.verifier.verify(body, request.headers.get(SIGNATURE_HEADER)):
            return _error(
                401,
                "INVALID_SIGNATURE",
                f"{SIGNATURE_HEADER} is missing or does not sign this body with a known key",
            )
        envelope, problem = parse_webhook(body)
        if envelope is None:
            await asyncio.to_thread(self.store.reject, body, problem)
            return _json(202, {"keptApart": problem})
        event = Event(envelope.id, str(envelope.type), stamp(envelope.timestamp), body)
        try:
            new = await self.writer.submit(event)
        except Exception:
            return _error(500, "NOT_STORED", "the event could not be stored; send it again")
        data = envelope.data or {}
        if (
            envelope.type == WebhookType.INCOMING_PAYMENT_PENDING
            and data.get("status") == "PENDING"
            and on_approval_rail(data)
        ):
            return await self._decide(envelope.id, data)
        if not new:
            return _error(409, "CONFLICT", f"webhook {envelope.id} was received before")
        return _json(200, {})

    async def _decide(self, webhook_id: str, payment: dict[str, Any]) -> Response:
        """The one decision on this payment: the one stored (by any receiver process, for any
        delivery of it), else the policy's, stored first; no policy defers (202)."""
        transaction_id = str(payment["id"])
        made = await asyncio.to_thread(self.store.decision, transaction_id)
        if made is None:
            if self.approve is None:
                return _json(202, {})
            try:
                verdict = verdict_of(await asyncio.to_thread(self.approve, payment))
            except Exception:  # no decision is stored: a redelivery asks the policy again
                logger.exception("the approval policy failed on %s", transaction_id)
                return _error(500, "APPROVAL_POLICY_FAILED", "the approval policy failed")
            verdict = answering(verdict, payment)
            info = verdict.receiver_customer_info
            answer = orjson.dumps({"receiverCustomerInfo": info} if info else {}).decode()
            made = await asyncio.to_thread(
                self.store.decide,
                Decision(
                    transaction_id, webhook_id, verdict.status, verdict.reason, now_text(), answer
                ),
            )
            logger.info("%s %s: %s", transaction_id, VERDICTS[made.status], made.reason)
        return _decision_answer(made)


def app(
    db_or_store: str | Path | EventStore,
    *,
    public_keys: Sequence[str | bytes | Path],
    approve: Policy | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    heartbeat_s: float = HEARTBEAT_S,
    receiver_id: str | None = None,
) -> Starlette:
    """The webhook receiver as an ASGI app (Starlette) with one endpoint, `POST /webhooks`.

    - `db_or_store`: the warehouse file whose event store (beside it, `events_path`) takes the
      events, or an `EventStore`. The warehouse itself is never opened.
    - `public_keys`: the service's P-256 public keys (PEM texts, bytes or files); a body signed
      by any of them is taken (during a rotation, give the old and the new).
    - `approve`: the policy for `INCOMING_PAYMENT.PENDING` on an approval rail:
      `approve(payment) -> bool | Verdict` (True approves, False rejects; `Verdict` for 422 or
      202); each payment's decision is stored once and every delivery of it gets that answer.
      None: such payments are answered 202 (deferred; nothing is decided).
    - `max_body_bytes`: larger bodies are answered 413 before more of them is read.

    The app records the receiver's up interval in the store (started, a heartbeat every
    `heartbeat_s` seconds, stopped) through its lifespan; mounted in another app that does not
    run sub-apps' lifespans, it starts on its first request.
    """
    from starlette.applications import Starlette
    from starlette.routing import Route

    store = db_or_store if isinstance(db_or_store, EventStore) else EventStore.beside(db_or_store)
    receiver = Receiver(
        store,
        Verifier(public_keys),
        approve=approve,
        max_body_bytes=max_body_bytes,
        heartbeat_s=heartbeat_s,
        receiver_id=receiver_id,
    )

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        await asyncio.to_thread(receiver.writer.start)
        try:
            yield
        finally:
            await asyncio.to_thread(receiver.writer.stop)

    served = Starlette(
        routes=[Route("/webhooks", receiver.handle, methods=["POST"])], lifespan=lifespan
    )
    served.state.receiver = receiver
    return served
