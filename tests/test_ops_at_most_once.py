"""Money is acted on at most once: lost answers, two applies at once (threads, objects and
processes), applies beside a scheduled sync, after a killed sync and after a killed apply.

Every test counts what reached the service (the sandbox's request log) per item."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from paylens import Client, Sandbox, ops
from paylens.errors import WarehouseLockedError
from paylens.warehouse import Warehouse, sync_file

from ._helpers import hold_answers

PENDING_BANK = (
    "type = 'OUTGOING' AND payment_rail IN ('ACH', 'WIRE') AND status IN ('PENDING', 'PROCESSING')"
)


class LostAnswers(httpx.BaseTransport):
    """Hands each request to the service, then loses the answers `lose` picks, as a network
    would: the service has acted, and the client sees a reset connection, a gateway's 502
    page, or a 200 it cannot read."""

    def __init__(
        self, inner: httpx.BaseTransport, lose: Callable[[httpx.Request], bool], how: str
    ) -> None:
        self.inner, self.lose, self.how = inner, lose, how

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if not self.lose(request):
            return response
        response.read()
        response.close()
        if self.how == "drop":
            raise httpx.ReadError("[Errno 104] Connection reset by peer", request=request)
        if self.how == "502":
            page = b"<html><body>502 Bad Gateway</body></html>"
            return httpx.Response(502, headers={"content-type": "text/html"}, content=page)
        return httpx.Response(200, headers={"content-type": "text/plain"}, content=b"OK")

    def close(self) -> None:
        self.inner.close()


def _posts(sandbox: Sandbox, suffix: str) -> Counter[str]:
    return Counter(
        path.split("/")[2]
        for method, path, _ in sandbox.requests.entries
        if method == "POST" and path.endswith(suffix)
    )


def _synced(sandbox: Sandbox, path: Path, client: Client | None = None) -> None:
    with Warehouse(path) as wh:
        wh.sync(client or sandbox.client(), progress=False, resources=["transactions"])


def _inside_window(sandbox: Sandbox, wh: Warehouse) -> list[str]:
    ids = list(wh.sql(f"SELECT id FROM transactions WHERE {PENDING_BANK}")["id"])
    return [t for t in ids if sandbox.world.cancel_cutoff(t) > sandbox.now]


@pytest.mark.http
@pytest.mark.parametrize("how", ["drop", "502", "text"])
def test_lost_answers_never_send_a_second_request(tmp_path: Path, how: str) -> None:
    sandbox = Sandbox(seed=21, transactions=1_500, scenarios=40)
    path = tmp_path / "lost.duckdb"
    _synced(sandbox, path)
    with sandbox.serve() as server, Warehouse(path) as wh:
        ids = _inside_window(sandbox, wh)[:30]
        assert len(ids) == 30
        transport = LostAnswers(httpx.HTTPTransport(), lambda r: r.method == "POST", how)
        client = Client(
            server.base_url, sandbox.client_id, sandbox.client_secret, transport=transport
        )
        result = ops.plan_cancel(wh, ids, reason="duplicate").apply(client, progress=False)
        journal = wh.journal()
    assert _posts(sandbox, "/cancel") == Counter(dict.fromkeys(ids, 1))
    assert list(result["outcome"]) == ["cancelled"] * 30
    assert result.attrs["all_as_planned"] is True
    assert set(journal["outcome"]) == {"cancelled"} and len(journal) == 30
    assert journal["message"].str.startswith("confirmed by reading the record").all()
    # the service's own record agrees: every one cancelled, once
    assert {sandbox.world.get_transaction_wire(t)["refund"]["reason"] for t in ids} == {
        "USER_CANCELLATION"
    }


def test_lost_answers_to_approve_and_confirm_are_resolved_by_reading(tmp_path: Path) -> None:
    from paylens.sandbox import IN_PROCESS_BASE_URL
    from paylens.sandbox.wire.transport import SandboxTransport

    sandbox = Sandbox(seed=22, transactions=1_500, scenarios=20)
    path = tmp_path / "lost2.duckdb"
    _synced(sandbox, path)
    transport = LostAnswers(SandboxTransport(sandbox.app), lambda r: r.method == "POST", "drop")
    client = Client(
        IN_PROCESS_BASE_URL, sandbox.client_id, sandbox.client_secret, transport=transport
    )
    with Warehouse(path) as wh:
        approvals = sandbox.world.pending_approval_ids()[:10]
        approved = ops.plan_approve(wh, approvals).apply(client, progress=False)
        receipts = list(
            wh.sql(
                "SELECT id FROM transactions WHERE type = 'OUTGOING' AND status = 'COMPLETED' "
                "AND receipt_delivery_confirmed_at IS NULL ORDER BY id LIMIT 10"
            )["id"]
        )
        confirmed = ops.plan_confirm_receipt(wh, receipts).apply(client, progress=False)
    assert list(approved["outcome"]) == ["approved"] * 10
    assert list(confirmed["outcome"]) == ["confirmed"] * 10
    assert _posts(sandbox, "/approve") == Counter(dict.fromkeys(approvals, 1))
    assert _posts(sandbox, "/confirm") == Counter(dict.fromkeys(receipts, 1))


def test_two_applies_in_one_process_send_each_request_once(tmp_path: Path) -> None:
    sandbox = Sandbox(seed=23, transactions=1_500, scenarios=40)
    path = tmp_path / "twice.duckdb"
    _synced(sandbox, path)
    sandbox.faults.configure(latency=0.005)
    first, second = Warehouse(path), Warehouse(path)  # two objects on one file
    try:
        ids = _inside_window(sandbox, first)
        plans = [ops.plan_cancel(wh, ids) for wh in (first, second, first)]
        start = threading.Barrier(3)
        results: list[object] = []

        def run(plan: ops.Plan) -> None:
            start.wait()
            results.append(plan.apply(sandbox.client(), concurrency=4, progress=False))

        threads = [threading.Thread(target=run, args=(p,)) for p in plans]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        journal = first.journal()
    finally:
        first.close()
        second.close()
    sent = _posts(sandbox, "/cancel")
    assert sent == Counter(dict.fromkeys(ids, 1)), "a cancel went out twice"
    assert len(results) == 3
    outcomes = Counter(o for r in results for o in r["outcome"])  # type: ignore[attr-defined]
    assert outcomes["cancelled"] == len(ids)
    assert outcomes["skipped_journal"] + outcomes["skipped_claimed"] == 2 * len(ids)
    assert (journal["outcome"] == "cancelled").sum() == len(ids)


def test_an_apply_starting_while_another_claims_is_not_taken_for_dead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The interleaving load made (found failing in CI): apply A reads which runs are alive,
    then apply B starts and claims an item, then A reads the journal. Read against A's older
    list of live runs, B's claim looked left by a dead run, A took the item over, and both
    sent its cancel. Here B is started at that very moment and given a second to claim."""
    sandbox = Sandbox(seed=23, transactions=1_500, scenarios=40)
    path = tmp_path / "interleaved.duckdb"
    _synced(sandbox, path)
    with Warehouse(path) as wh:
        ids = _inside_window(sandbox, wh)[:1]
        first, second = ops.plan_cancel(wh, ids), ops.plan_cancel(wh, ids)
        claim = Warehouse.journal_claim
        b_claimed = threading.Event()
        started: list[threading.Thread] = []

        def in_between(self: Warehouse, *args: Any, **kw: Any) -> Any:
            if not started:  # A, about to claim: B starts and claims now, if it can
                b = threading.Thread(target=lambda: second.apply(sandbox.client(), progress=False))
                started.append(b)
                b.start()
                b_claimed.wait(1.0)
            else:
                b_claimed.set()
            return claim(self, *args, **kw)

        monkeypatch.setattr(Warehouse, "journal_claim", in_between)
        first.apply(sandbox.client(), progress=False)
        started[0].join()
        journal = wh.journal()
    assert _posts(sandbox, "/cancel") == Counter(dict.fromkeys(ids, 1)), "a cancel went out twice"
    assert list(journal["outcome"]) == ["cancelled"]


_APPLY = """
import sys
from paylens import Client, ops
from paylens.warehouse import Warehouse
client = Client.from_env()
with Warehouse(sys.argv[1], wait=120) as wh:
    result = ops.plan_cancel(wh, sys.argv[2]).apply(client, concurrency=4, progress=False)
print(",".join(sorted(set(result["outcome"]))))
"""


@pytest.mark.http
def test_two_apply_processes_send_each_request_once(tmp_path: Path) -> None:
    sandbox = Sandbox(seed=24, transactions=1_500, scenarios=40)
    path = tmp_path / "procs.duckdb"
    _synced(sandbox, path)
    with Warehouse(path, read_only=True) as wh:
        # the processes meet at the file's writer lock, not item by item: 20 of the 81 do
        ids = _inside_window(sandbox, wh)[:20]
    where = "id IN (" + ", ".join(f"'{i}'" for i in ids) + ")"
    with sandbox.serve() as server:
        sandbox.faults.configure(latency=0.01)
        env = {**os.environ, **sandbox.env(server)}
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _APPLY, str(path), where],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        outs = [p.communicate(timeout=240) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert _posts(sandbox, "/cancel") == Counter(dict.fromkeys(ids, 1))
    # the second waited for the first's lock, then found every item done in the journal (at
    # plan time: `skipped`, or at apply time: `skipped_journal`)
    first, second = sorted(o.strip() for o, _ in outs)
    assert first == "cancelled" and second in ("skipped", "skipped_journal")


@contextlib.contextmanager
def _served_warehouse(
    sandbox: Sandbox, path: Path, count: int
) -> Iterator[tuple[Client, dict[str, str], list[str]]]:
    """The sandbox served on loopback, the warehouse synced from it over HTTP (so `paylens
    sync` may continue it), and the first `count` transfers still inside their window."""
    with sandbox.serve() as server:
        client = Client(server.base_url, sandbox.client_id, sandbox.client_secret)
        _synced(sandbox, path, client)
        with Warehouse(path, read_only=True) as wh:
            ids = _inside_window(sandbox, wh)[:count]
        yield client, {**os.environ, **sandbox.env(server)}, ids


def _sync_proc(path: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "paylens.cli", "sync", "--db", str(path), "--quiet"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(check: Callable[[], bool], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.mark.http
def test_apply_beside_a_scheduled_sync_loses_nothing(tmp_path: Path) -> None:
    sandbox = Sandbox(seed=25, transactions=3_000, scenarios=40)
    path = tmp_path / "beside.duckdb"
    with _served_warehouse(sandbox, path, 20) as (client, env, ids):
        with hold_answers(sandbox) as held:  # the sync waits for its first answer
            sync = _sync_proc(path, env)
            assert held.wait(60), "the sync sent no request"
            assert path.with_name(path.name + ".syncing.base").exists() and sync.poll() is None
            # while the sync runs: a reader is not blocked, a writer is told who holds the file
            with Warehouse(path, read_only=True) as reader:
                assert len(reader.transactions()) > 0
            with pytest.raises(WarehouseLockedError, match="paylens sync"):
                Warehouse(path)
        with Warehouse(path, wait=120) as wh:  # waits for the sync, then applies
            assert not path.with_name(path.name + ".syncing").exists()  # swapped in
            result = ops.plan_cancel(wh, ids).apply(client, progress=False)
        assert sync.wait(timeout=120) == 0, sync.stderr.read() if sync.stderr else ""
        # a sync started while the apply holds the file fails in one line, and loses nothing
        with Warehouse(path) as holder:
            blocked = _sync_proc(path, env)
            _, err = blocked.communicate(timeout=120)
            assert blocked.returncode == 1
            assert err.strip().count("\n") == 0 and "being written by" in err
            assert len(holder.journal()) == 20
        sync_file(path, client, progress=False)  # the next sync, once the file is free
    with Warehouse(path, read_only=True) as wh:
        journal = wh.journal()
    assert set(result["outcome"]) == {"cancelled"}
    assert sorted(journal["item_id"]) == sorted(ids)
    assert set(journal["outcome"]) == {"cancelled"}


@pytest.mark.http
def test_apply_after_a_killed_sync_is_kept_by_the_next_sync(tmp_path: Path) -> None:
    sandbox = Sandbox(seed=26, transactions=3_000, scenarios=40)
    path = tmp_path / "killed-sync.duckdb"
    with _served_warehouse(sandbox, path, 10) as (client, env, ids):
        sandbox.faults.configure(latency=0.02)
        killed = _sync_proc(path, env)
        _wait_for(lambda: path.with_name(path.name + ".syncing.base").exists())
        time.sleep(0.3)  # let it write into its staged copy
        assert killed.poll() is None, "the sync ended before it could be killed"
        killed.kill()
        killed.wait()
        sandbox.faults.clear()
        with Warehouse(path) as wh:
            ops.plan_cancel(wh, ids).apply(client, progress=False)
        sync_file(path, client, progress=False)  # the next sync, beside the killed one's copy
    with Warehouse(path, read_only=True) as wh:
        journal = wh.journal()
        stored = wh.transactions(status="FAILED")
    assert sorted(journal["item_id"]) == sorted(ids)
    assert set(ids) <= set(stored["id"])


_KILLED_AFTER_THE_SERVICE_ACTED = """
import os, signal, sys
import httpx
from paylens import Client, ops
from paylens.warehouse import Warehouse

class DieAfterAnswer(httpx.HTTPTransport):
    def handle_request(self, request):
        response = super().handle_request(request)
        if request.method == "POST":
            response.read()
            os.kill(os.getpid(), signal.SIGKILL)  # the service acted; the run dies
        return response

client = Client.from_env(transport=DieAfterAnswer())
with Warehouse(sys.argv[1]) as wh:
    getattr(ops, sys.argv[3] if len(sys.argv) > 3 else "plan_cancel")(wh, [sys.argv[2]]).apply(
        client, progress=False
    )
"""


@pytest.mark.http
def test_a_run_killed_after_the_service_acted_is_resolved_by_reading(tmp_path: Path) -> None:
    sandbox = Sandbox(seed=27, transactions=1_500, scenarios=40)
    path = tmp_path / "killed-apply.duckdb"
    with _served_warehouse(sandbox, path, 5) as (client, env, ids):
        target, *others = ids
        proc = subprocess.run(
            [sys.executable, "-c", _KILLED_AFTER_THE_SERVICE_ACTED, str(path), target],
            env=env,
            timeout=120,
        )
        assert proc.returncode == -9
        assert path.with_name(path.name + ".wal").exists()  # the claim, not checkpointed
        # the next sync keeps the killed run's journal row, and the file still opens
        sync_file(path, client, progress=False)
        with Warehouse(path) as wh:
            journal = wh.journal()
            assert list(journal["outcome"]) == ["requested"]
            result = ops.plan_cancel(wh, [target, *others]).apply(client, progress=False)
            journal = wh.journal().set_index("entry_id")
    assert _posts(sandbox, "/cancel") == Counter(dict.fromkeys([target, *others], 1))
    outcome = dict(zip(result["id"], result["outcome"], strict=True))
    # the sync has read the cancelled transfer, so the plan skips it; the journal entry the
    # dead run left is resolved all the same, by reading the record
    assert outcome == {target: "skipped", **dict.fromkeys(others, "cancelled")}
    first = journal.loc[journal["item_id"] == target].iloc[0]
    assert first["outcome"] == "cancelled"
    assert first["message"] == "confirmed by reading the record later"


@pytest.mark.http
def test_an_approval_killed_after_the_service_acted_is_journalled_approved_after_a_sync(
    tmp_path: Path,
) -> None:
    """The record read to resolve a dead run's approval is judged against the status the
    item had when it was claimed, not against the warehouse's row, which the sync between
    has already brought up to date (it then showed no change, and the journal said
    `no_effect` of a request that had approved the payment)."""
    sandbox = Sandbox(seed=27, transactions=1_500, scenarios=40)
    path = tmp_path / "killed-approve.duckdb"
    with _served_warehouse(sandbox, path, 0) as (client, env, _):
        with Warehouse(path, read_only=True) as wh:
            waiting = list(
                wh.sql(
                    "SELECT id FROM transactions WHERE agent_id IS NOT NULL "
                    "AND status = 'PENDING' ORDER BY id"
                )["id"]
            )
        target, other = waiting[:2]
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                _KILLED_AFTER_THE_SERVICE_ACTED,
                str(path),
                target,
                "plan_approve",
            ],
            env=env,
            timeout=120,
        )
        assert proc.returncode == -9
        approved = str(client.transactions.get(target).status)
        assert approved in ("PROCESSING", "COMPLETED")  # the dead run's request took effect
        sync_file(path, client, progress=False)  # cron: the row now shows the approval
        with Warehouse(path) as wh:
            assert (
                wh.sql("SELECT status FROM transactions WHERE id = ?", [target])["status"][0]
                == approved
            )
            ops.plan_approve(wh, [other]).apply(client, progress=False)  # resolves the dead run's
            journal = wh.journal()
    assert _posts(sandbox, "/approve") == Counter({target: 1, other: 1})
    first = journal.loc[journal["item_id"] == target].iloc[0]
    assert (first["outcome"], first["message"]) == (
        "approved",
        "confirmed by reading the record later",
    )


def test_two_warehouse_objects_syncing_at_once_double_no_row(tmp_path: Path) -> None:
    sandbox = Sandbox(seed=28, transactions=3_000)
    path = tmp_path / "two-writers.duckdb"
    first, second = Warehouse(path), Warehouse(path)
    try:
        start = threading.Barrier(2)

        def run(wh: Warehouse) -> None:
            start.wait()
            wh.sync(sandbox.client(), progress=False, full=True)

        threads = [threading.Thread(target=run, args=(w,)) for w in (first, second)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for table in ("transactions", "outgoing_fees", "card_transactions", "customers", "cards"):
            total, distinct = first.sql(f"SELECT count(*), count(DISTINCT id) FROM {table}").iloc[0]
            assert total == distinct > 0, table
        assert first.sql("SELECT count(*) AS n FROM transactions")["n"][0] == 3_000
    finally:
        first.close()
        second.close()


def test_an_empty_plan_applies_to_an_empty_result(tmp_path: Path) -> None:
    sandbox = Sandbox(seed=29, transactions=500)
    path = tmp_path / "empty.duckdb"
    _synced(sandbox, path)
    with Warehouse(path) as wh:
        result = ops.plan_cancel(wh, "1 = 0").apply(sandbox.client(), progress=False)
    assert len(result) == 0 and list(result.columns)[:2] == ["id", "outcome"]
    assert result.attrs["all_as_planned"] is True


def test_an_answer_lost_before_the_service_acted_is_sent_again_only_when_asked(
    tmp_path: Path,
) -> None:
    """A cancel dropped before the service saw it looks, from here, like one the bank is still
    deciding (spec §4.1): the record shows nothing either way. The next apply reads it and
    does not send it again; `resend_unknown=True`, the caller's word that the service never
    got it, sends it once more."""
    sandbox = Sandbox(seed=30, transactions=1_500, scenarios=10)
    path = tmp_path / "not-acted.duckdb"
    _synced(sandbox, path)
    with Warehouse(path) as wh:
        target = _inside_window(sandbox, wh)[0]
        plan = ops.plan_cancel(wh, [target])
        # the cancel is dropped before the service acts
        sandbox.faults.drop_next(1, path=f"/transactions/{target}/cancel")
        first = plan.apply(sandbox.client(), progress=False)
        assert list(first["outcome"]) == ["unknown"]
        assert list(wh.journal()["outcome"]) == ["unknown"]
        second = plan.apply(sandbox.client(), progress=False)
        assert list(second["outcome"]) == ["skipped_unknown"]
        third = plan.apply(sandbox.client(), progress=False, resend_unknown=True)
        journal = wh.journal()
    assert list(third["outcome"]) == ["cancelled"]
    assert list(journal["outcome"]) == ["superseded", "skipped_unknown", "cancelled"]
    statuses = [s for m, p, s in sandbox.requests.entries if m == "POST" and p.endswith("/cancel")]
    assert statuses == [0, 200]  # dropped unanswered, then sent once more when asked
