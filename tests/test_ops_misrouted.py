"""An answer carrying another transaction's record is never taken as the item's outcome.

A thin loopback proxy stands in front of the served sandbox and answers every cancel, approve,
reject and receipt confirmation 200 with another transaction's record (a misrouted or cached
answer), either after forwarding the request (the service acted) or without forwarding it (the
service did nothing). Over real HTTP, every count is exact: no journalled success the service
did not perform, every success it did perform journalled as one (at once, or after a re-run),
and no item skipped for good by a false success."""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from paylens import AsyncClient, Client, Sandbox, ops
from paylens.errors import OutcomeUnknownError, ResponseValidationError
from paylens.models import OutgoingTransaction
from paylens.warehouse import Warehouse

pytestmark = pytest.mark.http

_ACTION = re.compile(r"^(?P<base>.*/transactions/)(?P<id>[^/?]+)/(?P<action>[a-z]+)$")
_READ = re.compile(r"^(?P<base>.*/transactions/)(?P<id>[^/?]+)$")


class Misrouting:
    """A loopback proxy to `upstream` that answers each state-changing transaction action 200
    with the record of `decoy` (another transaction): after forwarding the request when
    `acting`, without forwarding it otherwise. With `reads_too`, a read of an item already
    acted on is answered with the decoy's record as well. Anything else passes through."""

    def __init__(self, upstream: str, decoy: str, *, acting: bool, reads_too: bool = False) -> None:
        self.upstream = httpx.URL(upstream)
        self.decoy, self.acting, self.reads_too = decoy, acting, reads_too
        self.acted_on: set[str] = set()
        self.misrouted = Counter[str]()
        self._lock = threading.Lock()
        self._http = httpx.Client(
            base_url=f"{self.upstream.scheme}://{self.upstream.netloc.decode()}", timeout=10
        )
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                status, headers, content = proxy.answer(self.command, self.path, self.headers, body)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            do_GET = do_POST = do_PATCH = do_DELETE = _any

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        port = self._server.server_address[1]
        self.base_url = str(self.upstream.copy_with(port=port))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def _forward(self, method: str, path: str, headers: Any, body: bytes) -> httpx.Response:
        kept = {k: v for k, v in headers.items() if k.lower() not in ("host", "content-length")}
        return self._http.request(method, path, headers=kept, content=body)

    def answer(
        self, method: str, path: str, headers: Any, body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        action = _ACTION.match(path) if method == "POST" else None
        read = _READ.match(path) if method == "GET" else None
        if action is not None:
            tid = action["id"]
            if self.acting:
                forwarded = self._forward(method, path, headers, body)
                if forwarded.status_code != 200:
                    return self._passed(forwarded)
            with self._lock:
                self.acted_on.add(tid)
                self.misrouted[action["action"]] += 1
            return self._decoy(action["base"], headers)
        if read is not None and self.reads_too and read["id"] in self.acted_on:
            return self._decoy(read["base"], headers)
        return self._passed(self._forward(method, path, headers, body))

    def _decoy(self, base: str, headers: Any) -> tuple[int, dict[str, str], bytes]:
        other = self._forward("GET", base + self.decoy, headers, b"")
        assert other.status_code == 200, other.text
        return 200, {"Content-Type": "application/json"}, other.content

    @staticmethod
    def _passed(response: httpx.Response) -> tuple[int, dict[str, str], bytes]:
        kept = {k: v for k, v in response.headers.items() if k.lower() in ("content-type", "date")}
        return response.status_code, kept, response.content

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        self._http.close()


@contextmanager
def misrouting(
    sandbox: Sandbox, decoy: str, *, acting: bool, reads_too: bool = False
) -> Iterator[tuple[Misrouting, Client]]:
    with sandbox.serve() as server:
        proxy = Misrouting(server.base_url, decoy, acting=acting, reads_too=reads_too)
        try:
            with Client(
                proxy.base_url, sandbox.client_id, sandbox.client_secret, timeout=10
            ) as client:
                yield proxy, client
        finally:
            proxy.close()


# -- the items of each action, the decoy records, and what the service shows ---------------


def _items(sandbox: Sandbox, wh: Warehouse, action: str, n: int) -> list[str]:
    if action == "cancel":
        ids = list(
            wh.sql(
                "SELECT id FROM transactions WHERE type = 'OUTGOING' AND payment_rail IN "
                "('ACH', 'WIRE') AND status IN ('PENDING', 'PROCESSING') ORDER BY id"
            )["id"]
        )
        return [t for t in ids if sandbox.world.cancel_cutoff(t) > sandbox.now][:n]
    if action in ("approve", "reject"):
        return sorted(sandbox.world.pending_approval_ids())[:n]
    return list(
        wh.sql(
            "SELECT id FROM transactions WHERE type = 'OUTGOING' AND status = 'COMPLETED' "
            "AND receipt_delivery_confirmed_at IS NULL ORDER BY id LIMIT ?",
            [n],
        )["id"]
    )


_PLANS: dict[str, Callable[[Warehouse, list[str]], ops.Plan]] = {
    "cancel": lambda wh, ids: ops.plan_cancel(wh, ids, reason="duplicate"),
    "approve": lambda wh, ids: ops.plan_approve(wh, ids),
    "reject": lambda wh, ids: ops.plan_reject(wh, ids, reason="not authorised"),
    "confirm_receipt": lambda wh, ids: ops.plan_confirm_receipt(wh, ids),
}
_PATHS = {
    "cancel": "cancel",
    "approve": "approve",
    "reject": "reject",
    "confirm_receipt": "confirm",
}
_VERBS = {"cancel": "cancelled", "approve": "approved", "reject": "rejected"}
_VERBS["confirm_receipt"] = "confirmed"


def _act_directly(client: Client, action: str, tid: str) -> None:
    getattr(client.transactions, action)(tid)


def _shows_effect(sandbox: Sandbox, action: str, tid: str) -> bool:
    wire = sandbox.world.get_transaction_wire(tid)
    if action == "cancel":
        return (wire.get("refund") or {}).get("reason") == "USER_CANCELLATION"
    if action == "approve":
        return wire["status"] in ("PROCESSING", "COMPLETED")
    if action == "reject":
        return wire["status"] in ("REJECTED", "FAILED")
    return wire.get("receiptDeliveryConfirmedAt") is not None


def _decoy_against(sandbox: Sandbox, action: str, items: list[str]) -> str:
    """Another transaction whose record contradicts the action (what made an acting service's
    success read as `no_effect`)."""
    status = {"approve": "FAILED"}.get(action, "COMPLETED")
    return next(
        t["id"]
        for t in sandbox.world.all_transactions()
        if t["type"] == "OUTGOING" and t["status"] == status and t["id"] not in items
    )


def _posts(sandbox: Sandbox, action: str) -> Counter[str]:
    return Counter(
        path.split("/")[-2]
        for method, path, _ in sandbox.requests.entries
        if method == "POST" and path.endswith("/" + _PATHS[action])
    )


def _journalled(wh: Warehouse, action: str) -> Counter[str]:
    """Each item's journalled successes."""
    rows = wh.sql(
        "SELECT item_id FROM ops_journal WHERE action = ? AND outcome = ?",
        [action, _VERBS[action]],
    )
    return Counter(rows["item_id"])


N = 20


def _setup(tmp_path: Path, action: str, seed: int) -> tuple[Sandbox, Path, list[str]]:
    sandbox = Sandbox(seed=seed, transactions=1_500, scenarios=60)
    path = tmp_path / "misrouted.duckdb"
    with Warehouse(path) as wh:
        wh.sync(sandbox.client(), progress=False, resources=["transactions"])
        items = _items(sandbox, wh, action, N + 1)
    assert len(items) == N + 1
    return sandbox, path, items


@pytest.mark.parametrize("action", list(_PLANS))
def test_a_service_not_acting_and_answering_another_record_gets_no_success(
    tmp_path: Path, action: str
) -> None:
    """The worst case: the other record shows the action done (it was done to that one), the
    service did nothing. Nothing is journalled done; the items stay in doubt (`unknown`), a
    re-run does not send them blindly, and on the caller's word they are sent and done."""
    sandbox, path, items = _setup(tmp_path, action, seed=41)
    decoy, items = items[-1], items[:N]
    _act_directly(sandbox.client(), action, decoy)
    assert _shows_effect(sandbox, action, decoy)
    with misrouting(sandbox, decoy, acting=False) as (proxy, client), Warehouse(path) as wh:
        first = _PLANS[action](wh, items).apply(client, progress=False)
        assert proxy.misrouted[_PATHS[action]] == N
        assert Counter(first["outcome"]) == {"unknown": N}
        assert first.attrs["all_as_planned"] is False
        assert _journalled(wh, action) == Counter()
        assert not any(_shows_effect(sandbox, action, t) for t in items)
        assert _posts(sandbox, action) == Counter({decoy: 1})  # the direct one only
        # a later plan holds every item eligible (none taken for done by the journal)...
        replan = _PLANS[action](wh, items)
        assert Counter(replan.items["eligibility"]) == {ops.ELIGIBLE: N}
        # ...a re-run at the honest service reads first and does not send blindly...
        again = replan.apply(sandbox.client(), progress=False)
        assert Counter(again["outcome"]) == {"skipped_unknown": N}
        # ...and on the caller's word each is sent once and done: none skipped for good
        sent = _PLANS[action](wh, items).apply(
            sandbox.client(), progress=False, resend_unknown=True
        )
        assert Counter(sent["outcome"]) == {_VERBS[action]: N}
        assert _journalled(wh, action) == Counter(dict.fromkeys(items, 1))
    assert _posts(sandbox, action) == Counter(dict.fromkeys([*items, decoy], 1))
    assert all(_shows_effect(sandbox, action, t) for t in items)


@pytest.mark.parametrize("action", list(_PLANS))
def test_a_service_acting_and_answering_another_record_is_resolved_by_reading(
    tmp_path: Path, action: str
) -> None:
    """The service acted, but answered with a record contradicting the action (it was another
    one's): each success is journalled as one, confirmed by reading the item's own record,
    and a re-run sends nothing."""
    sandbox, path, items = _setup(tmp_path, action, seed=42)
    items = items[:N]
    decoy = _decoy_against(sandbox, action, items)
    with misrouting(sandbox, decoy, acting=True) as (proxy, client), Warehouse(path) as wh:
        first = _PLANS[action](wh, items).apply(client, progress=False)
        assert proxy.misrouted[_PATHS[action]] == N
        assert Counter(first["outcome"]) == {_VERBS[action]: N}
        assert first["message"].str.startswith("confirmed by reading the record").all()
        assert _journalled(wh, action) == Counter(dict.fromkeys(items, 1))
        again = _PLANS[action](wh, items).apply(client, progress=False)
        assert set(again["outcome"]) <= {"skipped", "skipped_journal"}
        # the answers stored are the items' own records, never the decoy's under their ids
        stored = wh.sql("SELECT id FROM transactions WHERE id IN (SELECT UNNEST(?))", [items])
        assert len(stored) == N
    assert _posts(sandbox, action) == Counter(dict.fromkeys(items, 1))
    assert all(_shows_effect(sandbox, action, t) for t in items)
    assert not _shows_effect(sandbox, action, decoy) or action == "confirm_receipt"


@pytest.mark.parametrize("action", ["cancel", "approve"])
def test_reads_answering_another_record_leave_the_item_in_doubt(
    tmp_path: Path, action: str
) -> None:
    """The service acted, and both the action's answer and the reads after it carry another
    record: never a success from that record; each item stays in doubt, and a re-run at the
    honest service journals every success the service performed, sending nothing again."""
    sandbox, path, items = _setup(tmp_path, action, seed=43)
    items = items[:N]
    decoy = _decoy_against(sandbox, action, items)
    with Warehouse(path) as wh:
        with misrouting(sandbox, decoy, acting=True, reads_too=True) as (proxy, client):
            first = _PLANS[action](wh, items).apply(client, progress=False)
        assert proxy.misrouted[_PATHS[action]] == N
        assert Counter(first["outcome"]) == {"unknown": N}
        assert first["message"].str.startswith("the record could not be read").all()
        assert first["message"].str.contains("another record").all()
        assert _journalled(wh, action) == Counter()
        again = _PLANS[action](wh, items).apply(sandbox.client(), progress=False)
        assert Counter(again["outcome"]) == {"skipped_journal": N}
        assert _journalled(wh, action) == Counter(dict.fromkeys(items, 1))
    assert _posts(sandbox, action) == Counter(dict.fromkeys(items, 1))


# -- the client itself ----------------------------------------------------------------------


def test_the_client_takes_another_record_for_an_unreadable_answer(tmp_path: Path) -> None:
    """Sync and async, over loopback: an action answered with another record is an unknown
    outcome, sent once; a read answered with another record is no answer (never the record)."""
    import asyncio

    sandbox = Sandbox(seed=44, transactions=1_500, scenarios=20)
    tid, other = sorted(sandbox.world.pending_approval_ids())[:2]
    with misrouting(sandbox, other, acting=False, reads_too=True) as (proxy, client):
        with pytest.raises(OutcomeUnknownError) as lost:
            client.transactions.approve(tid)
        assert lost.value.idempotency_key is None and lost.value.attempts == 1
        assert "another record" in str(lost.value) and other in str(lost.value)
        with pytest.raises(ResponseValidationError, match="another record"):
            client.transactions.get(tid)

        async def run() -> None:
            async with AsyncClient(
                proxy.base_url, sandbox.client_id, sandbox.client_secret, timeout=10
            ) as aclient:
                with pytest.raises(OutcomeUnknownError, match="another record"):
                    await aclient.transactions.reject(tid)
                with pytest.raises(ResponseValidationError, match="another record"):
                    await aclient.transactions.get(tid)

        asyncio.run(run())
    assert proxy.misrouted == Counter({"approve": 1, "reject": 1})
    assert sandbox.world.get_transaction_wire(tid)["status"] == "PENDING"


def test_approving_an_agent_payout_answers_its_outgoing_record() -> None:
    """The interface types the approval's answer as an incoming transaction, yet agent payouts
    (outgoing) are approved there too: paylens' client reads the answer by its `type`."""
    import asyncio

    sandbox = Sandbox(seed=45, transactions=1_500, scenarios=20)
    first, second, third, fourth = sorted(sandbox.world.pending_approval_ids())[:4]
    client = sandbox.client()
    approved, rejected = client.transactions.approve(first), client.transactions.reject(second)
    assert isinstance(approved, OutgoingTransaction) and approved.id == first
    assert isinstance(rejected, OutgoingTransaction) and rejected.id == second
    assert approved.status in ("PROCESSING", "COMPLETED")
    assert rejected.status in ("REJECTED", "FAILED")

    async def run() -> tuple[Any, Any]:
        async with sandbox.async_client() as aclient:
            return await aclient.transactions.approve(third), await aclient.transactions.reject(
                fourth
            )

    a_approved, a_rejected = asyncio.run(run())
    assert isinstance(a_approved, OutgoingTransaction) and a_approved.id == third
    assert isinstance(a_rejected, OutgoingTransaction) and a_rejected.id == fourth
