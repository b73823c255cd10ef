"""The sandbox posts every transition of its world as the interface's webhook, signed, retried,
in order per record; its faults duplicate, reorder, delay and forge deliveries.

The receiver here is a tiny stdlib HTTP server that checks signatures with the independent
verifier of `tests/_webhook_poster.py` (not the sandbox's code) and keeps what it accepted.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import orjson
import pytest

from paylens import Sandbox

from ._helpers import contract_errors
from ._webhook_poster import (
    SIGNATURE_HEADER,
    RecordWatcher,
    WebhookPoster,
    event_type,
    schema_for,
    verify,
)
from .test_client_policy import _pending_bank_transfer
from .test_sandbox_entities import change


@dataclass
class Receiver:
    """Accepts webhooks signed by `public_key_pem` (401 otherwise), once per id (409 after);
    `fail_next` answers that many posts 500 first; `pending_answer` is the decision on a
    pending incoming payment."""

    public_key_pem: str = ""
    fail_next: int = 0
    pending_answer: int = 0  # the answer to INCOMING_PAYMENT.PENDING (0: as any other)
    script: list[int] = field(default_factory=list)  # the next answers, whatever is posted
    accepted: list[dict[str, Any]] = field(default_factory=list)
    refused: list[bytes] = field(default_factory=list)  # bad signatures
    duplicates: list[str] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, body: bytes, signature: str | None) -> int:
        with self.lock:
            status = self._answer(body, signature)
            self.statuses.append(status)
            return status

    def _answer(self, body: bytes, signature: str | None) -> int:
        if self.pending_answer and b'"INCOMING_PAYMENT.PENDING"' in body:
            self.accepted.append(orjson.loads(body))
            return self.pending_answer
        if self.fail_next:
            self.fail_next -= 1
            return 500
        if self.script:
            return self.script.pop(0)
        if not verify(self.public_key_pem, body, signature):
            self.refused.append(body)
            return 401
        event = orjson.loads(body)
        if any(e["id"] == event["id"] for e in self.accepted):
            self.duplicates.append(event["id"])
            return 409
        self.accepted.append(event)
        return 200

    def by_record(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for event in self.accepted:
            out[event["data"].get("id", "")].append(event)
        return out


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, str]]:
    state = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status = state.answer(body, self.headers.get(SIGNATURE_HEADER))
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state, f"http://127.0.0.1:{server.server_address[1]}/webhooks"
    server.shutdown()
    server.server_close()


def _sandbox(seed: int, url: str, receiver: Receiver, **options: Any) -> Sandbox:
    sandbox = Sandbox(
        seed=seed,
        transactions=options.pop("transactions", 700),
        webhook_url=url,
        webhook_lanes=options.pop("lanes", 4),
    )
    sandbox.webhooks.backoff = 0.001  # retries in milliseconds: these tests wait on nothing else
    receiver.public_key_pem = sandbox.webhook_public_key_pem
    return sandbox


def _without_pull_window(record: dict[str, Any]) -> dict[str, Any]:
    """The record without a card pull's `pendingCount`, which changes 30 s after creation
    without a transition of its own (no webhook announces it)."""
    out = dict(record)
    if "pullSummary" in out:
        out["pullSummary"] = {k: v for k, v in out["pullSummary"].items() if k != "pendingCount"}
    return out


def _state(record: dict[str, Any]) -> tuple[Any, ...]:
    return (record["status"], (record.get("refund") or {}).get("status"), record.get("updatedAt"))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_transition_arrives_signed_valid_and_in_order(
    seed: int, receiver: tuple[Receiver, str]
) -> None:
    state, url = receiver
    sandbox = _sandbox(seed, url, state, transactions=2000)
    first = list(sandbox.world.all_transactions())
    before = {tx["id"]: tx for tx in first}
    for hours in (12, 30, 200, 48):
        sandbox.advance(timedelta(hours=hours))
        assert sandbox.webhooks_drain(60)
        now = {tx["id"]: tx for tx in sandbox.world.all_transactions()}
        events = state.by_record()
        changed = [i for i, tx in now.items() if i not in before or _state(tx) != _state(before[i])]
        assert changed  # each advance moves something
        for record_id in changed:
            # the newest event of each changed record is the record as read now
            last = events[record_id][-1]["data"]
            assert _without_pull_window(last) == _without_pull_window(now[record_id])
        before = now
    errors = contract_errors()
    validated: set[tuple[str, str]] = set()
    assert not state.refused and not state.duplicates and not sandbox.webhooks.failed
    for record_id, record_events in state.by_record().items():
        stamps = [datetime.fromisoformat(e["timestamp"]) for e in record_events]
        assert stamps == sorted(stamps), record_id  # in order per record
        for e in record_events:
            assert e["id"].startswith("Webhook:")
            assert e["timestamp"] == e["data"]["updatedAt"]  # the transition's simulated time
            assert _announces(e["type"], e["data"]), (e["type"], e["data"]["status"])
            if errors is not None and (e["type"], e["data"]["status"]) not in validated:
                validated.add((e["type"], e["data"]["status"]))  # each kind once: it is slow
                assert errors(e, schema_for(e["type"])) == [], e["type"]
    assert len({e["id"] for e in state.accepted}) == len(state.accepted)
    # a record created during the advances is announced from its first status through each step
    initial = {tx["id"] for tx in first}
    born = 0
    for record_id, record_events in state.by_record().items():
        if record_id in initial or record_id.startswith("InternalAccount:"):
            continue
        born += 1
        kinds = [e["type"] for e in record_events]
        prefix, first_status = kinds[0].split(".")
        assert first_status in _FIRST[prefix], kinds
        if kinds[-1] == "OUTGOING_PAYMENT.COMPLETED":  # every step of a transfer, in order
            assert kinds[1:] == ["OUTGOING_PAYMENT.PROCESSING", "OUTGOING_PAYMENT.COMPLETED"]
    assert born > 20
    # the balances the transactions moved: each account's last event is the account as read now
    accounts = {
        record_id: events[-1]["data"]
        for record_id, events in state.by_record().items()
        if record_id.startswith("InternalAccount:")
    }
    assert len(accounts) > 10
    for a in sandbox.client().internal_accounts.list():
        if a.id in accounts:
            assert accounts[a.id]["totalBalance"]["amount"] == a.total_balance.amount
            assert accounts[a.id]["balance"]["amount"] == a.balance.amount


#: The statuses a new record is announced in first.
_FIRST = {
    "OUTGOING_PAYMENT": {"PENDING", "PENDING_AUTHORIZATION"},
    "INCOMING_PAYMENT": {"PENDING"},
    "CARD_TRANSACTION": {"AUTHORIZED", "EXCEPTION"},
}


def _announces(event: str, record: dict[str, Any]) -> bool:
    """Whether `event` names the record's status, or its refund's (read by the independent
    poster's mapping, which cannot tell a refund step from a status step on its own)."""
    if event == event_type(record):
        return True
    refund = record.get("refund")
    return refund is not None and event.endswith(f".REFUND_{refund['status']}")


def test_each_kind_the_world_makes_is_sent_and_validates(receiver: tuple[Receiver, str]) -> None:
    state, url = receiver
    sandbox = _sandbox(4, url, state, transactions=3000)
    changed = change(sandbox)  # funds an account, freezes a card, lets a day pass
    sandbox.advance(timedelta(days=9))
    assert sandbox.webhooks_drain(60)
    kinds = {e["type"] for e in state.accepted}
    expected = {
        "OUTGOING_PAYMENT.PENDING",
        "OUTGOING_PAYMENT.PROCESSING",
        "OUTGOING_PAYMENT.COMPLETED",
        "OUTGOING_PAYMENT.FAILED",
        "OUTGOING_PAYMENT.REFUND_PENDING",
        "OUTGOING_PAYMENT.REFUND_COMPLETED",
        "OUTGOING_PAYMENT.EXPIRED",
        "INCOMING_PAYMENT.PENDING",
        "INCOMING_PAYMENT.COMPLETED",
        "CARD_TRANSACTION.AUTHORIZED",
        "CARD_TRANSACTION.SETTLED",
        "CARD.STATE_CHANGE",
        "INTERNAL_ACCOUNT.BALANCE_UPDATED",
    }
    assert expected <= kinds, expected - kinds
    errors = contract_errors()
    if errors is None:
        pytest.skip("shared/tools/validate_contract.py not found")
    seen: set[str] = set()
    for e in state.accepted:
        if e["type"] not in seen:  # one of each kind, and every card event
            seen.add(e["type"])
            assert errors(e, schema_for(e["type"])) == [], e["type"]
    (frozen,) = [e for e in state.accepted if e["type"] == "CARD.STATE_CHANGE"]
    assert (frozen["data"]["id"], frozen["data"]["state"]) == (changed["card"], "FROZEN")
    # the funding is the account's first event (its transactions move it afterwards)
    funded, *_ = [
        e
        for e in state.accepted
        if e["type"] == "INTERNAL_ACCOUNT.BALANCE_UPDATED"
        and e["data"]["id"] == changed["funded"]["id"]
    ]
    assert funded["data"] == changed["funded"]
    assert funded["data"]["balance"]["amount"] == changed["account"].balance.amount + 12_345


def test_a_cancellation_is_announced_failed_then_refunded(receiver: tuple[Receiver, str]) -> None:
    state, url = receiver
    sandbox = _sandbox(11, url, state, transactions=1500)
    tid = _pending_bank_transfer(sandbox)
    sandbox.client().transactions.cancel(tid)
    assert sandbox.webhooks_drain(30)
    events = state.by_record()[tid]
    assert [e["type"] for e in events] == [
        "OUTGOING_PAYMENT.FAILED",
        "OUTGOING_PAYMENT.REFUND_COMPLETED",
    ]
    assert events[-1]["data"]["refund"]["reason"] == "USER_CANCELLATION"
    assert events[-1]["timestamp"] == sandbox.now.isoformat(timespec="milliseconds").replace(
        "+00:00", "Z"
    )


def test_a_failing_endpoint_is_retried_until_it_answers(receiver: tuple[Receiver, str]) -> None:
    state, url = receiver
    sandbox = _sandbox(5, url, state)
    state.fail_next = 5
    sandbox.advance(timedelta(hours=6))
    assert sandbox.webhooks_drain(60)
    assert state.statuses[:5] == [500] * 5
    sent = [a for a in sandbox.webhooks.log if a.status == 200]
    assert len(state.accepted) == len(sent) > 0
    assert len(sandbox.webhooks.log) == len(sent) + 5  # each 500 was retried once more
    assert not sandbox.webhooks.failed


def test_an_endpoint_that_never_answers_is_given_up_after_the_attempts(
    receiver: tuple[Receiver, str],
) -> None:
    state, url = receiver
    sandbox = _sandbox(5, url, state, lanes=1)
    sandbox.webhooks.attempts = 3
    state.fail_next = 10**6
    sandbox.client().transactions.cancel(_pending_bank_transfer(sandbox))
    assert sandbox.webhooks_drain(30)
    assert [a.status for a in sandbox.webhooks.log] == [500] * 9  # three events, three posts each
    assert [d.type for d in sandbox.webhooks.failed] == CANCELLED


#: What cancelling a transfer in PROCESSING announces: its failure, its refund, and its source
#: account's available balance, which no longer holds what the transfer was sending.
CANCELLED = [
    "OUTGOING_PAYMENT.FAILED",
    "OUTGOING_PAYMENT.REFUND_COMPLETED",
    "INTERNAL_ACCOUNT.BALANCE_UPDATED",
]


def test_a_409_ends_an_event(receiver: tuple[Receiver, str]) -> None:
    state, url = receiver
    sandbox = _sandbox(5, url, state, lanes=1)
    sandbox.faults.webhook_next(1, duplicate=True)
    sandbox.client().transactions.cancel(_pending_bank_transfer(sandbox))
    assert sandbox.webhooks_drain(30)
    first = state.accepted[0]["id"]
    assert state.duplicates == [first]  # posted twice, same id: the second answered 409
    assert [(a.id == first, a.status, a.duplicate) for a in sandbox.webhooks.log] == [
        (True, 200, False),
        (True, 409, True),
        (False, 200, False),
        (False, 200, False),
    ]


def test_a_409_to_the_first_post_ends_the_event_and_other_errors_do_not(
    receiver: tuple[Receiver, str],
) -> None:
    """409 says the endpoint has the event already (its answer was lost): never posted again;
    a 400 or 404 is retried like any other failure."""
    state, url = receiver
    sandbox = _sandbox(5, url, state, lanes=1)
    state.script = [409, 400, 404]
    sandbox.client().transactions.cancel(_pending_bank_transfer(sandbox))
    assert sandbox.webhooks_drain(30)
    log = [(a.type.split(".")[1], a.status) for a in sandbox.webhooks.log]
    assert log == [
        ("FAILED", 409),
        ("REFUND_COMPLETED", 400),
        ("REFUND_COMPLETED", 404),
        ("REFUND_COMPLETED", 200),
        ("BALANCE_UPDATED", 200),
    ]


def test_a_forged_copy_is_refused_and_the_real_one_still_arrives(
    receiver: tuple[Receiver, str],
) -> None:
    state, url = receiver
    sandbox = _sandbox(5, url, state, lanes=1)
    sandbox.faults.webhook_next(2, forge=True)
    sandbox.client().transactions.cancel(_pending_bank_transfer(sandbox))
    assert sandbox.webhooks_drain(30)
    assert [(a.status, a.forged) for a in sandbox.webhooks.log] == [
        (401, True),
        (200, False),
        (401, True),
        (200, False),
        (200, False),
    ]
    # the two forged posts were copies of the first two events, which arrived after
    assert [orjson.loads(b)["id"] for b in state.refused] == [e["id"] for e in state.accepted][:2]


def test_reorder_posts_an_event_after_the_next_one(receiver: tuple[Receiver, str]) -> None:
    state, url = receiver
    sandbox = _sandbox(5, url, state)
    sandbox.faults.webhook_next(1, reorder=True)
    tid = _pending_bank_transfer(sandbox)
    sandbox.client().transactions.cancel(tid)
    assert sandbox.webhooks_drain(30)
    assert [e["type"] for e in state.by_record()[tid]] == [
        "OUTGOING_PAYMENT.REFUND_COMPLETED",
        "OUTGOING_PAYMENT.FAILED",
    ]


def test_delay_holds_an_event_before_its_first_post(receiver: tuple[Receiver, str]) -> None:
    state, url = receiver
    sandbox = _sandbox(5, url, state)
    sandbox.faults.webhook_next(1, delay=0.3)
    started = datetime.now(UTC)
    sandbox.client().transactions.cancel(_pending_bank_transfer(sandbox))
    assert sandbox.webhooks.pending == 3  # the world's request did not wait for the posts
    assert (datetime.now(UTC) - started) < timedelta(seconds=0.3)
    assert sandbox.webhooks_drain(30)
    assert len(state.accepted) == 3


def test_the_test_webhook_route(receiver: tuple[Receiver, str]) -> None:
    state, url = receiver
    sandbox = _sandbox(5, url, state)
    body = _post_sandbox(sandbox, "/sandbox/webhooks/test")
    assert body == (200, {"url": url, "response_status": 200, "response_body": "ok"})
    (event,) = state.accepted
    assert (event["type"], event["data"]) == ("TEST", {})
    errors = contract_errors()
    if errors is not None:
        assert errors(event, "TestWebhookRequest") == []
        assert errors(body[1], "TestWebhookResponse") == []


def test_the_test_webhook_route_without_an_endpoint() -> None:
    sandbox = Sandbox(seed=5, transactions=100)
    status, body = _post_sandbox(sandbox, "/sandbox/webhooks/test")
    assert (status, body["code"]) == (400, "WEBHOOK_ENDPOINT_NOT_SET")
    assert sandbox.world.on_transition is None  # without an endpoint nothing is computed


def test_the_test_webhook_route_when_the_endpoint_is_down() -> None:
    sandbox = Sandbox(seed=5, transactions=100, webhook_url="http://127.0.0.1:9/webhooks")
    status, body = _post_sandbox(sandbox, "/sandbox/webhooks/test")
    assert (status, body["code"]) == (400, "WEBHOOK_DELIVERY_ERROR")


def _post_sandbox(sandbox: Sandbox, path: str) -> tuple[int, Any]:
    with sandbox.serve() as server:
        answer = httpx.post(
            server.base_url + path, auth=(sandbox.client_id, sandbox.client_secret), timeout=30
        )
    return answer.status_code, answer.json()


def test_the_independent_poster_signs_what_the_receiver_verifies(
    receiver: tuple[Receiver, str],
) -> None:
    state, url = receiver
    poster = WebhookPoster(url)
    state.public_key_pem = poster.public_key_pem
    record = {"id": "Card:1", "state": "FROZEN", "fundingSources": []}
    assert poster.send(record, datetime(2025, 10, 13, tzinfo=UTC)).status_code == 200
    assert poster.post(poster.sent[-1]).status_code == 409  # the same id again
    tampered = poster.sent[-1].replace(b"FROZEN", b"ACTIVE")
    assert (
        poster.post(
            tampered, signature=poster.headers(poster.sent[-1])[SIGNATURE_HEADER]
        ).status_code
        == 401
    )
    other = WebhookPoster(url)
    assert other.send(record, "2025-10-13T00:00:00Z").status_code == 401
    assert state.accepted == [
        {
            "id": state.accepted[0]["id"],
            "type": "CARD.STATE_CHANGE",
            "timestamp": "2025-10-13T00:00:00Z",
            "data": record,
        }
    ]


@pytest.mark.http
def test_sandbox_serve_posts_webhooks_with_the_key_it_prints(
    receiver: tuple[Receiver, str], tmp_path: Any
) -> None:
    """`paylens sandbox serve --webhook-url`: the printed key file verifies what it posts (the
    same key on every start for one seed)."""
    import subprocess
    import sys

    state, url = receiver
    key_file = tmp_path / "key.pem"
    served = subprocess.Popen(
        [sys.executable, "-m", "paylens.cli", "sandbox", "serve", "--port", "0", "--seed", "3",
         "--transactions", "300", "--clock", "fixed", "--webhook-url", url,
         "--webhook-public-key-file", str(key_file)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert served.stdout is not None
        lines = dict(served.stdout.readline().strip().split("=", 1) for _ in range(4))
        assert lines["PAYLENS_WEBHOOK_PUBLIC_KEY_FILE"] == str(key_file)
        state.public_key_pem = key_file.read_text()
        answer = httpx.post(
            lines["PAYLENS_BASE_URL"] + "/sandbox/webhooks/test",
            auth=(lines["PAYLENS_CLIENT_ID"], lines["PAYLENS_CLIENT_SECRET"]),
            timeout=30,
        )
        assert answer.json()["response_status"] == 200
    finally:
        served.terminate()
        served.wait(timeout=30)
    assert [e["type"] for e in state.accepted] == ["TEST"]
    assert (
        key_file.read_text()
        == Sandbox(seed=3, transactions=10, webhook_key=_seeded(3)).webhook_public_key_pem
    )


def _seeded(seed: int) -> Any:
    from paylens.sandbox.wire.webhooks import seeded_key

    return seeded_key(seed)


@pytest.mark.parametrize(
    ("answer", "status"), [(200, "PENDING"), (403, "REJECTED"), (422, "PENDING")]
)
def test_the_answer_to_a_pending_incoming_payment_is_the_platforms_decision(
    receiver: tuple[Receiver, str], answer: int, status: str
) -> None:
    """200 approves (it then settles on its rail), 403 rejects, 422 leaves it waiting."""
    from .test_sandbox_incoming import receive

    state, url = receiver
    sandbox = _sandbox(3, url, state, transactions=600)
    state.pending_answer = answer
    with sandbox.app.lock:
        tx = receive(sandbox.world)
    assert sandbox.webhooks_drain(30)
    assert [e["type"] for e in state.accepted] == ["INCOMING_PAYMENT.PENDING"] + (
        ["INCOMING_PAYMENT.FAILED"] if answer == 403 else []
    )
    assert sandbox.world.get_transaction_wire(tx["id"])["status"] == status
    assert [a.status for a in sandbox.webhooks.log][:1] == [answer]  # never retried
    if answer == 200:
        sandbox.advance(timedelta(minutes=5))
        assert sandbox.world.get_transaction_wire(tx["id"])["status"] == "COMPLETED"
    else:
        assert len(sandbox.webhooks.log) == len(state.accepted)


def test_the_poster_announces_each_change_of_the_second_service(
    receiver: tuple[Receiver, str],
) -> None:
    """The independent poster over the second service: every record new or changed since the
    last look is posted once, signed, as the event its kind and status name."""
    from ._second_service import SecondService

    state, url = receiver
    service = SecondService(seed=3, days=4)
    poster = WebhookPoster(url)
    state.public_key_pem = poster.public_key_pem
    watcher = RecordWatcher(service)
    first = watcher.changes()
    service.advance(timedelta(days=2))
    second = watcher.changes()
    assert watcher.changes() == []  # nothing moved since
    for kind, record in first + second:
        assert poster.send(record, service.clock, event_type=kind).status_code == 200
    kinds = {e["type"].split(".")[0] for e in state.accepted}
    assert {"OUTGOING_PAYMENT", "CARD_TRANSACTION", "CUSTOMER", "INTERNAL_ACCOUNT"} <= kinds
    assert len(state.accepted) == len(first) + len(second)
    before = {r["id"]: r for _, r in first}
    moved = {
        i
        for i, item in service.txs.items()
        if item.record != before.get(i) and event_type(item.record, before.get(i)) is not None
    }
    assert moved and {r["id"] for _, r in second} >= moved
    errors = contract_errors()
    if errors is not None:
        # the second service's external accounts are off the interface's `accountInfo`
        # shapes (its own habit, which no sync reads): their events are left out here
        problems = {
            e["type"]: errors(e, schema_for(e["type"]), 1)
            for e in state.accepted
            if not e["type"].startswith("EXTERNAL_ACCOUNT.")
        }
        assert {k: v for k, v in problems.items() if v} == {}


@pytest.mark.parametrize("url", ["ftp://x/webhooks", "not a url", "/webhooks", "http://"])
def test_a_webhook_url_that_is_not_http_is_refused(url: str) -> None:
    from paylens.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="webhook_url"):
        Sandbox(seed=5, transactions=100, webhook_url=url)
