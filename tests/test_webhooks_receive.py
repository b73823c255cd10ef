"""The webhook receiver over real loopback HTTP: signatures checked over the raw bytes before
anything is read, oversize refused, off-schema kept apart, 2xx only once stored, a redelivery
409 and stored once, group commits, and `paylens webhooks serve` (one URL line, no warehouse
lock, one-line errors, its up interval recorded)."""

from __future__ import annotations

import asyncio
import signal
import socket
import threading
from pathlib import Path

import httpx
import orjson
import pytest

from paylens.webhooks import Event, EventStore, app, events_path
from paylens.webhooks._store import stamp

from ._helpers import run_cli
from ._receiver import Signer, card_event, served_app, signer, start_cli, store

__all__ = ["signer", "store"]  # the fixtures this module uses

pytestmark = pytest.mark.http


def _post(url: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(url, content=body, headers=headers, timeout=30)


def test_a_signed_event_is_stored_as_received_then_acknowledged(
    signer: Signer, store: EventStore
) -> None:
    body = card_event(1)
    with served_app(app(store, public_keys=[signer.public_pem])) as url:
        answer = _post(url, body, signer.headers(body))
    assert (answer.status_code, answer.json()) == (200, {})
    [stored] = store.events_after(0)
    assert (stored.webhook_id, stored.type, stored.sent_at, stored.body) == (
        "Webhook:card-1",
        "CARD_TRANSACTION.SETTLED",
        "2025-10-01T12:00:00.000000+00:00",
        body,
    )


def test_forged_tampered_wrong_key_unsigned_and_replayed(signer: Signer, store: EventStore) -> None:
    body = card_event(1)
    tampered = body.replace(b'"Card:1"', b'"Card:2"', 1)
    assert len(tampered) == len(body) and tampered != body
    flipped = bytearray(body)
    flipped[-3] ^= 0x01  # one byte of the payload, the signature kept
    other = Signer()
    refused = {
        "forged by another key": (body, other.headers(body)),
        "tampered (a word)": (tampered, signer.headers(body)),
        "tampered (one byte)": (bytes(flipped), signer.headers(body)),
        "unsigned": (body, {"Content-Type": "application/json"}),
        "empty signature": (body, {"X-Service-Signature": ""}),
        "not base64": (body, {"X-Service-Signature": "%%%not-base64%%%"}),
        "a signature of another body": (body, signer.headers(card_event(2))),
        "huge header": (body, {"X-Service-Signature": "A" * 10_000}),
    }
    with served_app(app(store, public_keys=[signer.public_pem])) as url:
        for name, (sent, headers) in refused.items():
            answer = _post(url, sent, headers)
            assert answer.status_code == 401, name
            assert answer.json()["code"] == "INVALID_SIGNATURE", name
        assert store.count() == 0 and store.rejected() == []
        first = _post(url, body, signer.headers(body))
        replayed = _post(url, body, signer.headers(body))
    assert first.status_code == 200
    assert (replayed.status_code, replayed.json()["code"]) == (409, "CONFLICT")
    assert [e.webhook_id for e in store.events_after(0)] == ["Webhook:card-1"]


def test_der_and_fixed_width_signatures_are_both_read(signer: Signer, store: EventStore) -> None:
    der, p1363 = card_event(1), card_event(2)
    with served_app(app(store, public_keys=[signer.public_pem])) as url:
        assert _post(url, der, {"X-Service-Signature": signer.sign(der)}).status_code == 200
        answer = _post(url, p1363, {"X-Service-Signature": signer.sign_p1363(p1363)})
        assert answer.status_code == 200
    assert store.count() == 2


def test_during_a_rotation_both_keys_are_taken_and_no_third(
    signer: Signer, store: EventStore, tmp_path: Path
) -> None:
    new, stranger = Signer(), Signer()
    keys = [signer.write_public(tmp_path / "old.pem"), new.public_pem.decode()]
    with served_app(app(store, public_keys=keys)) as url:
        old_body, new_body, odd = card_event(1), card_event(2), card_event(3)
        assert _post(url, old_body, signer.headers(old_body)).status_code == 200
        assert _post(url, new_body, new.headers(new_body)).status_code == 200
        assert _post(url, odd, stranger.headers(odd)).status_code == 401
    assert [e.webhook_id for e in store.events_after(0)] == ["Webhook:card-1", "Webhook:card-2"]


def test_an_oversize_body_is_refused_before_it_is_read(signer: Signer, store: EventStore) -> None:
    limit = 2_000
    big = orjson.dumps({**orjson.loads(card_event(1)), "padding": "x" * limit})
    assert len(big) > limit

    def chunks() -> object:
        for start in range(0, len(big), 500):
            yield big[start : start + 500]

    with served_app(app(store, public_keys=[signer.public_pem], max_body_bytes=limit)) as url:
        declared = _post(url, big, signer.headers(big))
        streamed = httpx.post(url, content=chunks(), headers=signer.headers(big), timeout=30)
        small = card_event(2)
        fits = _post(url, small, signer.headers(small))
    assert (declared.status_code, declared.json()["code"]) == (413, "PAYLOAD_TOO_LARGE")
    assert streamed.status_code == 413  # chunked: no length declared, cut at the limit
    assert fits.status_code == 200
    assert [e.webhook_id for e in store.events_after(0)] == ["Webhook:card-2"]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            b'{"id":"Webhook:x","type":"CARD.EXPLODED","timestamp":"2025-10-01T12:00:00Z","data":{"id":"Card:1"}}',
            "type: not one of the interface's WebhookType values",
        ),
        (
            b'{"id":"Webhook:x","type":"CARD.STATE_CHANGE","timestamp":"2025-10-01T12:00:00"}',
            "timestamp: Input should have timezone info",
        ),
        (
            b'{"id":"Webhook:x","type":"CARD.STATE_CHANGE","timestamp":"2025-10-01T12:00:00Z"}',
            "data: missing (required for CARD.STATE_CHANGE)",
        ),
        (
            b'{"id":"Webhook:x","type":"OUTGOING_PAYMENT.COMPLETED","timestamp":"2025-10-01T12:00:00Z","data":{"id":"Transaction:1","status":"COMPLETED","type":"INCOMING"}}',
            "data.type: 'INCOMING' in a OUTGOING_PAYMENT.COMPLETED (expected 'OUTGOING')",
        ),
        (
            b'{"id":"Webhook:x","type":"CARD_TRANSACTION.SETTLED","timestamp":"2025-10-01T12:00:00Z","data":{"id":"Transaction:1"}}',
            "data.status: missing or not a string (required for CARD_TRANSACTION.SETTLED)",
        ),
        (b'{"type":"TEST","timestamp":"2025-10-01T12:00:00Z"}', "id: Field required"),
        (b"[1, 2]", "body: Input should be an object"),
    ],
)
def test_a_verified_body_off_the_schemas_is_kept_apart_and_answered_202(
    signer: Signer, store: EventStore, body: bytes, reason: str
) -> None:
    with served_app(app(store, public_keys=[signer.public_pem])) as url:
        answer = _post(url, body, signer.headers(body))
    assert (answer.status_code, answer.json()) == (202, {"keptApart": reason})
    assert store.count() == 0
    assert [(r[2], r[3]) for r in store.rejected()] == [(reason, body)]


def test_a_test_webhook_without_data_is_stored(signer: Signer, store: EventStore) -> None:
    body = b'{"id":"Webhook:test","type":"TEST","timestamp":"2025-10-01T12:00:00+02:00"}'
    with served_app(app(store, public_keys=[signer.public_pem])) as url:
        assert _post(url, body, signer.headers(body)).status_code == 200
    [stored] = store.events_after(0)
    assert (stored.type, stored.sent_at) == ("TEST", "2025-10-01T10:00:00.000000+00:00")


class _GatedStore(EventStore):
    """An event store counting its commits of events, whose first commit waits (like a slow
    disk) until `ready(events in it)` says every other request is queued."""

    commits = 0
    ready: object = None

    def append(self, events: list[Event]) -> list[bool]:  # type: ignore[override]
        type(self).commits += 1
        for _ in range(6000):  # at most 60 s
            if type(self).commits > 1 or self.ready(len(events)):  # type: ignore[operator]
                break
            threading.Event().wait(0.01)
        return super().append(events)


def test_requests_waiting_on_a_commit_are_stored_together_in_the_next(
    signer: Signer, tmp_path: Path
) -> None:
    _GatedStore.commits = 0
    store = _GatedStore(tmp_path / "e.sqlite")
    bodies = [card_event(n) for n in range(300)] + [card_event(n) for n in range(0, 300, 3)]
    asgi = app(store, public_keys=[signer.public_pem])
    queued = asgi.state.receiver.writer._queue
    store.ready = lambda first: first + queued.qsize() >= len(bodies)

    async def burst(url: str) -> list[int]:
        limits = httpx.Limits(max_connections=len(bodies))  # every request at once
        async with httpx.AsyncClient(limits=limits, timeout=120) as client:
            answers = await asyncio.gather(
                *(client.post(url, content=b, headers=signer.headers(b)) for b in bodies)
            )
        return [a.status_code for a in answers]

    with served_app(asgi) as url:
        statuses = asyncio.run(burst(url))
    assert sorted(statuses) == [200] * 300 + [409] * 100
    assert store.count() == 300
    # the first commit, and one of every request that waited on it (or, when the writer took
    # the whole burst before its first commit, that one): never one commit per request
    assert _GatedStore.commits in (1, 2)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_acknowledges_while_a_warehouse_writer_holds_the_lock(
    signer: Signer, tmp_path: Path
) -> None:
    from paylens.warehouse import Warehouse

    db = tmp_path / "wh.duckdb"
    key = signer.write_public(tmp_path / "key.pem")
    with Warehouse(db):  # the writer lock, held by this process throughout
        process, url = start_cli(db, key)
        try:
            assert url.startswith("http://127.0.0.1:") and url.endswith("/webhooks")
            assert int(url.split(":")[2].split("/")[0]) > 0  # port 0 printed as the real one
            bodies = [card_event(n) for n in range(20)]
            assert [_post(url, b, signer.headers(b)).status_code for b in bodies] == [200] * 20
        finally:
            process.send_signal(signal.SIGTERM)
            # uvicorn stops gracefully, then exits by the signal it was sent, as it documents
            assert process.wait(timeout=60) == -signal.SIGTERM
        assert process.stdout is not None and process.stdout.read() == ""  # one line only
    with EventStore(events_path(db)) as store:
        assert store.count() == 20
        [(start, end)] = store.up_intervals()
        assert start < end
        stopped = store._con.execute("SELECT stopped_at FROM receiver_intervals").fetchall()
        assert [s is not None for (s,) in stopped] == [True]  # a clean stop is recorded


def test_the_heartbeat_moves_the_receivers_last_seen(signer: Signer, store: EventStore) -> None:
    asgi = app(store, public_keys=[signer.public_pem], heartbeat_s=0.05, receiver_id="r1")

    def last_seen() -> str:
        return str(store._con.execute("SELECT last_seen_at FROM receiver_intervals").fetchone()[0])

    with served_app(asgi):
        first = last_seen()
        for _ in range(400):  # the heartbeat is the wall clock's: up to 20 s on a busy machine
            if last_seen() > first:
                break
            threading.Event().wait(0.05)
        assert last_seen() > first


def test_cli_errors_are_one_line(signer: Signer, tmp_path: Path) -> None:
    key = signer.write_public(tmp_path / "key.pem")
    not_pem = tmp_path / "bad.pem"
    not_pem.write_text("hello")
    db = str(tmp_path / "wh.duckdb")
    cases = {
        (f"--public-key={tmp_path / 'none.pem'}",): (
            2,
            f"paylens webhooks serve: public_keys: key 1: cannot read {tmp_path / 'none.pem'}: "
            "No such file or directory",
        ),
        (f"--public-key={not_pem}",): (
            2,
            "paylens webhooks serve: public_keys: key 1 is not a PEM public key",
        ),
        (f"--public-key={key}", "--approve-where", "amount > 5 ; DROP TABLE t"): (
            2,
            "paylens webhooks serve: select: 'amount > 5 ; DROP TABLE t' must be one condition "
            "over transactions (e.g. \"status = 'PENDING'\"); stacked statements, DDL and DML "
            "are refused",
        ),
    }
    for extra, (code, line) in cases.items():
        run = run_cli("webhooks", "serve", "--db", db, *extra)
        assert (run.returncode, run.stderr.strip(), run.stdout) == (code, line, ""), extra
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = run_cli("webhooks", "serve", "--db", db, f"--public-key={key}", "--port", str(port))
    assert run.returncode == 1
    assert run.stderr.strip() == (
        f"paylens webhooks serve: cannot listen on 127.0.0.1 port {port}: Address already in "
        "use (choose another with --port, or 0 for any free port)"
    )


def test_sent_at_is_stored_in_utc_to_the_microsecond() -> None:
    from datetime import UTC, datetime

    assert stamp(datetime(2025, 10, 1, 12, tzinfo=UTC)) == "2025-10-01T12:00:00.000000+00:00"
