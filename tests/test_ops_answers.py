"""Bulk actions against answers the interface allows but the sandbox never gives: a fake service
written here (an `httpx.MockTransport` handler; nothing of `paylens.sandbox`).

The specification leaves room the sandbox does not use: the status a cancelled transfer
reaches is "not shown" (a service may say FAILED with no refund), a cancel is "forwarded to
the banking partner, and the partner decides" (the record may show nothing for a while), a
signed wallet revoke may be accepted with 200 PROCESSING while the service reconciles on its
own. Checked: at most one request per item that can take effect, across applies; an answer
that is lost is never sent again while the record shows nothing (only `resend_unknown=True`
sends it again); the journal says what the answer or the record shows, never more.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import paylens
from paylens import Client, ops
from paylens.warehouse import Warehouse

BASE = "https://fake.example/2025-10-13"
NOW = datetime(2025, 10, 13, tzinfo=UTC)
ACCOUNT = f"InternalAccount:{uuid.UUID(int=5)}"


def _stamp(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _days(days: int) -> str:
    return _stamp(NOW + timedelta(days=days))


def _response(status: int, body: Any = None) -> httpx.Response:
    if body is None:
        return httpx.Response(status)
    return httpx.Response(status, json=body)


def _error(status: int, code: str) -> httpx.Response:
    return _response(status, {"status": status, "code": code, "message": f"{code} said"})


def _client(handler: Callable[[httpx.Request], httpx.Response]) -> Client:
    return Client(
        BASE, "platform-id", "s3cr3t", transport=httpx.MockTransport(handler), sleep=lambda _: None
    )


def _outgoing() -> dict[str, Any]:
    """A pending ACH payout an agent initiated, as the interface describes one."""
    usd = {"code": "USD", "name": "United States Dollar", "symbol": "$", "decimals": 2}
    return {
        "id": f"Transaction:{uuid.uuid4()}",
        "type": "OUTGOING",
        "status": "PENDING",
        "direction": "DEBIT",
        "customerId": f"Customer:{uuid.uuid4()}",
        "platformCustomerId": "cus-1",
        "createdAt": _stamp(NOW - timedelta(hours=2)),
        "updatedAt": _stamp(NOW - timedelta(hours=1)),
        "destination": {"currency": "USD", "destinationType": "ACCOUNT", "accountId": "E:1"},
        "sentAmount": {"amount": 12_345, "currency": usd},
        "receivedAmount": {"amount": 12_300, "currency": usd},
        "fees": 45,
        "source": {"currency": "USD", "sourceType": "ACCOUNT", "accountId": "I:1"},
        "paymentRail": "ACH",
        "agentId": f"Agent:{uuid.uuid4()}",
    }


Decide = Callable[[str, dict[str, Any]], tuple[bool, "httpx.Response | None"]]


class Service:
    """Transactions, and how the service answers an action on one: `decide(action, record)`
    may change the record (the service acted) and gives the answer, or None for a connection
    dropped after the service received the request."""

    def __init__(self, records: list[dict[str, Any]], decide: Decide) -> None:
        self.records = {r["id"]: json.loads(json.dumps(r)) for r in records}
        self.decide = decide
        self.posts: Counter[str] = Counter()
        self.acted: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        _, _, _, item, *action = request.url.path.split("/")
        with self.lock:
            record = self.records.get(item)
            if record is None:
                return _error(404, "TRANSACTION_NOT_FOUND")
            if request.method == "GET":
                return _response(200, record)
            self.posts[item] += 1
            acted, answer = self.decide(action[0], record)
            self.acted[item] += acted
        if answer is None:
            raise httpx.ReadError("connection reset by peer", request=request)
        return answer


def _cancelled_with_refund(record: dict[str, Any]) -> None:
    """The sandbox's way, and the interface's refund reason for it."""
    record.update(
        status="FAILED",
        failureReason="QUOTE_EXECUTION_FAILED",
        refund={
            "reference": "R-1",
            "initiatedAt": _stamp(NOW),
            "settledAt": _stamp(NOW),
            "status": "COMPLETED",
            "reason": "USER_CANCELLATION",
        },
    )


def _cancelled_bare(record: dict[str, Any]) -> None:
    """Another service's way: FAILED, no refund (nothing was debited yet)."""
    record.update(status="FAILED", failureReason="QUOTE_EXECUTION_FAILED")


PLANNERS = {
    "cancel": lambda wh, ids: ops.plan_cancel(wh, ids, reason="duplicate"),
    "approve": lambda wh, ids: ops.plan_approve(wh, ids),
    "reject": lambda wh, ids: ops.plan_reject(wh, ids, reason="fraud"),
}


def _applied(
    tmp_path: Path, action: str, decide: Decide, applies: int = 2, **options: Any
) -> tuple[Service, list[list[str]], list[str]]:
    """One item, the same plan applied `applies` times: the service, each apply's outcomes
    and the journal's outcomes in entry order."""
    record = _outgoing()
    service = Service([record], decide)
    client = _client(service)
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.store_transactions([record])
        plan = PLANNERS[action](wh, [record["id"]])
        results = [list(plan.apply(client, progress=False, **options)["outcome"])]
        results += [list(plan.apply(client, progress=False)["outcome"]) for _ in range(1, applies)]
        journal = list(wh.journal().sort_values("entry_id")["outcome"])
    return service, results, journal


def test_a_cancel_the_bank_has_not_decided_is_never_sent_again_unless_asked(
    tmp_path: Path,
) -> None:
    """The service takes the cancel and forwards it to the bank (spec §4.1); the answer is
    lost, and the record shows nothing until the bank decides. No later apply sends it again
    on its own: the earlier request may still take effect."""
    answers: list[httpx.Response | None] = [None]

    def decide(_action: str, record: dict[str, Any]) -> tuple[bool, httpx.Response | None]:
        return True, answers.pop(0) if answers else _response(200, record)

    service, results, journal = _applied(tmp_path, "cancel", decide, applies=3)
    assert sum(service.posts.values()) == 1
    assert results == [["unknown"], ["skipped_unknown"], ["skipped_unknown"]]
    assert journal == ["unknown", "skipped_unknown", "skipped_unknown"]


def test_resend_unknown_sends_once_more_and_journals_the_earlier_request_as_superseded(
    tmp_path: Path,
) -> None:
    record = _outgoing()
    lost = [True]

    def decide(_action: str, rec: dict[str, Any]) -> tuple[bool, httpx.Response | None]:
        if lost.pop(0) if lost else False:
            return False, None  # dropped: here the service never saw it
        _cancelled_with_refund(rec)
        return True, _response(200, rec)

    service = Service([record], decide)
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.store_transactions([record])
        plan = ops.plan_cancel(wh, [record["id"]])
        assert list(plan.apply(_client(service), progress=False)["outcome"]) == ["unknown"]
        again = plan.apply(_client(service), progress=False, resend_unknown=True)
        journal = wh.journal().sort_values("entry_id")
    assert list(again["outcome"]) == ["cancelled"]
    assert list(journal["outcome"]) == ["superseded", "cancelled"]
    assert "resend_unknown=True" in journal["message"].iloc[0]
    assert service.posts[record["id"]] == 2 and service.acted[record["id"]] == 1


@pytest.mark.parametrize(
    ("shape", "first", "journal"),
    [
        (_cancelled_with_refund, ["cancelled"], ["cancelled"]),
        # FAILED without the cancellation's refund: it may be this cancel, or a failure of
        # its own; nothing more is sent, and the journal never claims either
        (_cancelled_bare, ["unresolved"], ["unresolved", "skipped_changed"]),
    ],
)
def test_a_lost_answer_is_journaled_as_what_the_record_shows(
    tmp_path: Path,
    shape: Callable[[dict[str, Any]], None],
    first: list[str],
    journal: list[str],
) -> None:
    def decide(_action: str, record: dict[str, Any]) -> tuple[bool, httpx.Response | None]:
        shape(record)
        record["updatedAt"] = _stamp(NOW)
        return True, None

    service, results, said = _applied(tmp_path, "cancel", decide)
    assert sum(service.posts.values()) == 1
    assert results[0] == first
    assert said[: len(journal)] == journal and "no_effect" not in said


def test_a_200_whose_record_shows_the_action_did_not_happen_is_no_effect(
    tmp_path: Path,
) -> None:
    """An approve answered 200 with the payment FAILED (it expired before the approval came):
    not approved, whatever the status code."""

    def decide(_action: str, record: dict[str, Any]) -> tuple[bool, httpx.Response | None]:
        record.update(status="FAILED", failureReason="QUOTE_EXPIRED")
        return False, _response(200, record)

    record = _outgoing()
    service = Service([record], decide)
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.store_transactions([record])
        result = ops.plan_approve(wh, [record["id"]]).apply(_client(service), progress=False)
        journal = wh.journal()
    assert list(result["outcome"]) == list(journal["outcome"]) == ["no_effect"]
    assert "FAILED" in str(result["message"].iloc[0])
    assert result.attrs["all_as_planned"] is False


@pytest.mark.parametrize(
    ("action", "answer", "outcome"),
    [
        ("cancel", _error(400, "INVALID_INPUT"), "rejected_type"),  # spec §4.1 rule 4
        ("approve", _error(400, "INVALID_INPUT"), "failed"),
        ("approve", _error(409, "TRANSACTION_NOT_CANCELLABLE"), "failed"),
        (
            "approve",
            _error(409, "TRANSACTION_NOT_PENDING_PLATFORM_APPROVAL"),
            "not_pending_approval",
        ),
        ("cancel", _error(409, "TRANSACTION_NOT_PENDING_PLATFORM_APPROVAL"), "failed"),
        ("cancel", _error(409, "TRANSACTION_NOT_CANCELLABLE"), "not_cancellable"),
    ],
)
def test_a_refusal_is_named_for_what_the_service_said_about_this_action(
    tmp_path: Path, action: str, answer: httpx.Response, outcome: str
) -> None:
    _, results, journal = _applied(tmp_path, action, lambda _a, _r: (False, answer), applies=1)
    assert results == [[outcome]] and journal == [outcome]


_SHAPES = {"cancel": [_cancelled_with_refund, _cancelled_bare], "approve": [], "reject": []}
_ANSWERS: list[tuple[str, bool, Callable[[dict[str, Any]], httpx.Response | None]]] = [
    ("200", True, lambda r: _response(200, r)),
    ("lost after acting", True, lambda r: None),
    ("500 after acting", True, lambda r: _error(500, "INTERNAL_ERROR")),
    ("202 without a body", True, lambda r: _response(202)),
    ("409 refused", False, lambda r: _error(409, "TRANSACTION_NOT_CANCELLABLE")),
    ("500 not acted", False, lambda r: _error(500, "SERVICE_SWITCH_ERROR")),
    ("lost before acting", False, lambda r: None),
]


@settings(max_examples=12, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(
    action=st.sampled_from(["cancel", "approve", "reject"]),
    shape=st.integers(0, 2),
    answer=st.sampled_from(_ANSWERS),
    applies=st.integers(2, 3),
)
def test_any_answer_acts_at_most_once_and_the_journal_never_claims_more_than_it_saw(
    tmp_path_factory: pytest.TempPathFactory,
    action: str,
    shape: int,
    answer: tuple[str, bool, Callable[[dict[str, Any]], httpx.Response | None]],
    applies: int,
) -> None:
    label, acts, respond = answer
    effects = {
        "cancel": [_cancelled_with_refund, _cancelled_bare, lambda r: None],
        "approve": [lambda r: r.update(status="PROCESSING")] * 3,
        "reject": [lambda r: r.update(status="REJECTED")] * 3,
    }
    effect = effects[action][shape]

    def decide(_action: str, record: dict[str, Any]) -> tuple[bool, httpx.Response | None]:
        if acts:
            effect(record)
        return acts, respond(record)

    service, _, journal = _applied(tmp_path_factory.mktemp("ops"), action, decide, applies)
    (item,) = service.records
    # a refusal or a request lost before the service saw it took no effect: a later apply
    # may ask again; once the service acted, never
    assert service.acted[item] <= 1 and service.posts[item] <= applies, label
    if acts:
        assert service.posts[item] == 1, f"{label}: sent {service.posts[item]} times"
        assert "no_effect" not in journal, f"{label}: the service acted; journal {journal}"
    verb = {"cancel": "cancelled", "approve": "approved", "reject": "rejected"}[action]
    if verb in journal:  # said only when the answer or the record showed it
        record = service.records[item]
        shown = (
            (record.get("refund") or {}).get("reason") == "USER_CANCELLATION"
            if action == "cancel"
            else record["status"] in ("PROCESSING", "COMPLETED", "REJECTED", "FAILED")
        )
        assert acts and (shown or label == "200"), f"{label}: journal {journal}"


class WalletService:
    """One wallet account with one session. A revoke is a signed retry: the first DELETE
    answers 202 with a challenge, the signed retry is accepted with 200 PROCESSING (spec
    §4.2) while the service reconciles on its own, so the session stays listed for now."""

    def __init__(self) -> None:
        self.session = self._record("Session", created=-2, expiresAt=_days(5))
        self.credential = self._record("AuthMethod", created=-9)
        self.started = 0
        self.accepted = 0

    @staticmethod
    def _record(kind: str, created: int, **more: str) -> dict[str, str]:
        return {
            "id": f"{kind}:{uuid.uuid4()}",
            "accountId": ACCOUNT,
            "type": "EMAIL_OTP",
            "nickname": "me@example.com",
            "createdAt": _days(created),
            "updatedAt": _days(created),
            **more,
        }

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method == "GET" and path.endswith("/auth/credentials"):
            return _response(200, {"data": [self.credential]})
        if request.method == "GET" and path.endswith("/auth/sessions"):
            return _response(200, {"data": [self.session]})
        if request.method == "DELETE" and "/auth/sessions/" in path:
            if "Service-Wallet-Signature" not in request.headers:
                self.started += 1
                expires = _stamp(datetime.now(UTC) + timedelta(minutes=5))
                challenge = {
                    "type": "EMAIL_OTP",
                    "payloadToSign": '{"op":"revoke"}',
                    "requestId": f"Request:{uuid.uuid4()}",
                    "expiresAt": expires,
                }
                return _response(202, challenge)
            self.accepted += 1
            return _response(200, {"status": "PROCESSING", "message": "reconciling"})
        return _error(404, "USER_NOT_FOUND")


def test_a_wallet_revoke_the_service_accepted_is_in_doubt_and_never_started_again(
    tmp_path: Path,
) -> None:
    service = WalletService()
    client = _client(service)
    with Warehouse(tmp_path / "wallet.duckdb") as wh:
        wh.sync_wallets(client, [ACCOUNT])
        plan = ops.plan_revoke_sessions(
            wh, [service.session["id"]], signer=paylens.SessionKey.generate()
        )
        first = plan.apply(client, progress=False)
        second = plan.apply(client, progress=False)
        journal = list(wh.journal()["outcome"])
    assert service.started == 1 and service.accepted >= 1
    assert list(first["outcome"]) == ["unknown"] and list(second["outcome"]) == ["skipped_unknown"]
    assert journal == ["unknown", "skipped_unknown"]


@pytest.mark.parametrize(
    ("left", "outcomes", "posts"),
    [
        # claimed, then the run died before sending: nothing went out, so it is sent now
        ("claimed", ["not_sent", "cancelled"], 1),
        # the request was on its way when the run died: in doubt, never sent again unasked
        ("requested", ["requested", "skipped_unknown"], 0),
    ],
)
def test_what_a_dead_run_left_is_sent_only_if_it_never_went_out(
    tmp_path: Path, left: str, outcomes: list[str], posts: int
) -> None:
    def decide(_action: str, record: dict[str, Any]) -> tuple[bool, httpx.Response | None]:
        _cancelled_with_refund(record)
        return True, _response(200, record)

    record = _outgoing()
    service = Service([record], decide)
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.store_transactions([record])
        plan = ops.plan_cancel(wh, [record["id"]])
        claim = wh.journal_claim(
            fingerprint=plan.fingerprint,
            action="cancel",
            item_id=record["id"],
            success="cancelled",
            token="a-run-that-died",
            live=set(),
        )
        assert claim.entry_id is not None
        if left == "requested":
            wh.journal_requested(claim.entry_id)
        plan.apply(_client(service), progress=False)
        journal = list(wh.journal().sort_values("entry_id")["outcome"])
    assert journal == outcomes and service.posts[record["id"]] == posts
