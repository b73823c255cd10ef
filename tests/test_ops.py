"""Bulk operations against the sandbox: plans, every outcome, dry runs, resumes, caps, storms."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from paylens import Client, InvalidArgumentError, Sandbox, ops
from paylens.errors import WarehouseSourceError
from paylens.warehouse import Warehouse

from ._helpers import hold_answers

PENDING_BANK = "status IN ('PENDING', 'PROCESSING', 'CREATED')"
MISSING = "Transaction:00000000-0000-4000-8000-000000000000"


@pytest.fixture
def wh(sandbox: Sandbox, client: Client, tmp_path: Path) -> Warehouse:
    with Warehouse(tmp_path / "ops.duckdb") as warehouse:
        warehouse.sync(client, progress=False, resources=["transactions"])
        yield warehouse


def _ids(wh: Warehouse, where: str) -> list[str]:
    return list(wh.sql(f"SELECT id FROM transactions WHERE {where} ORDER BY created_at")["id"])


def _cancel_requests(sandbox: Sandbox) -> list[tuple[str, int]]:
    return [
        (path.split("/")[2], status)
        for method, path, status in sandbox.requests.entries
        if method == "POST" and path.endswith("/cancel")
    ]


def test_a_plan_gives_every_eligibility_reason(sandbox: Sandbox, wh: Warehouse) -> None:
    candidates = _ids(
        wh,
        "type = 'OUTGOING' AND payment_rail IN ('ACH', 'WIRE') AND status IN ('PENDING', 'PROCESSING')",
    )
    # one still inside its cancellation window, one past it
    inside = [t for t in candidates if sandbox.world.cancel_cutoff(t) > sandbox.now]
    past = [t for t in candidates if sandbox.world.cancel_cutoff(t) <= sandbox.now]
    eligible = [inside[0], past[0]]
    pull = _ids(
        wh,
        "type = 'INCOMING' AND source_account_id LIKE 'ExternalAccount:%' AND status IN ('PENDING', 'CREATED')",
    )[:1]
    card = _ids(wh, "type = 'CARD'")[:1]
    instant = _ids(
        wh,
        "type = 'OUTGOING' AND payment_rail IN ('RTP', 'SEPA_INSTANT', 'FASTER_PAYMENTS', 'PIX', 'UPI')",
    )[:1]
    settled = _ids(wh, "type = 'OUTGOING' AND payment_rail = 'ACH' AND status = 'COMPLETED'")[:1]
    plan = ops.plan_cancel(
        wh, [*eligible, *pull, *card, *instant, *settled, MISSING], reason="duplicate"
    )
    verdicts = dict(zip(plan.items["id"], plan.items["eligibility"], strict=True))
    assert [verdicts[i] for i in eligible + pull] == ["eligible"] * 3
    assert verdicts[card[0]] == "skipped: card transactions cannot be cancelled"
    assert (
        verdicts[instant[0]].startswith("skipped: rail ")
        and "is not ACH or wire" in verdicts[instant[0]]
    )
    assert verdicts[settled[0]] == "skipped: already COMPLETED"
    assert verdicts[MISSING] == "skipped: not found in the warehouse"
    totals = plan.totals.set_index("currency")
    expected = int(
        wh.sql(
            "SELECT sum(amount_minor) AS s FROM transactions WHERE id IN (SELECT unnest(?::VARCHAR[]))",
            [eligible + pull],
        )["s"].iloc[0]
    )
    assert totals.loc["USD", "eligible_amount_minor"] == expected
    assert (
        plan.fingerprint
        == ops.plan_cancel(
            wh, [*eligible, *pull, *card, *instant, *settled, MISSING], reason="duplicate"
        ).fingerprint
    )
    assert plan.fingerprint != ops.plan_cancel(wh, eligible, reason="duplicate").fingerprint
    assert "<table" in plan._repr_html_() and "SANDBOX DATA" in plan._repr_html_()
    assert "eligible" in str(plan)
    # applied without refreshing the warehouse, a success is then known from the journal alone
    result = plan.apply(sandbox.client(), progress=False, refresh=False)
    done = set(result.loc[result["outcome"] == "cancelled", "id"])
    assert done
    again = ops.plan_cancel(wh, list(done))
    assert set(again.items["eligibility"]) == {"skipped: already cancelled (journal)"}


def test_dry_run_sends_nothing(sandbox: Sandbox, wh: Warehouse) -> None:
    plan = ops.plan_cancel(wh, PENDING_BANK, reason="dup")
    sandbox.requests.reset()
    result = plan.apply(sandbox.client(), dry_run=True, progress=False)
    assert sandbox.requests.count() == 0
    sent = result[result["outcome"] == "would_send"]
    assert len(sent) == len(plan.eligible)
    assert all(
        r.startswith("POST /transactions/") and r.endswith("/cancel {'reason': 'dup'}")
        for r in sent["request"]
    )
    assert len(wh.journal()) == 0


@pytest.mark.parametrize("over_http", [False, pytest.param(True, marks=pytest.mark.http)])
def test_apply_gives_each_outcome(sandbox: Sandbox, wh: Warehouse, over_http: bool) -> None:
    plan = ops.plan_cancel(wh, PENDING_BANK, reason="dup")
    ids = list(plan.eligible["id"])
    assert len(ids) >= 6
    truth_cutoffs = {tid: sandbox.world.cancel_cutoff(tid) for tid in ids}
    server = sandbox.serve() if over_http else None
    try:
        client = (
            Client(server.base_url, sandbox.client_id, sandbox.client_secret, max_retries=0)
            if server
            else sandbox.client(max_retries=0)
        )
        # the service's answers for the first three items are forced: 404 on the re-read,
        # 400 and 500 on the cancel; the others meet the sandbox's real rules
        sandbox.faults.inject(404, "TRANSACTION_NOT_FOUND", path=f"/transactions/{ids[0]}")
        sandbox.faults.inject(400, "INVALID_INPUT", path=f"/transactions/{ids[1]}/cancel")
        sandbox.faults.inject(500, "INTERNAL_ERROR", path=f"/transactions/{ids[2]}/cancel")
        result = plan.apply(client, concurrency=1, progress=False)
    finally:
        if server:
            server.stop()
    outcome = dict(zip(result["id"], result["outcome"], strict=True))
    assert outcome[ids[0]] == "not_found"
    assert outcome[ids[1]] == "rejected_type"
    # a 500 to a cancel leaves its outcome unknown: never re-sent; the re-read shows no effect
    assert outcome[ids[2]] == "unknown"
    unknown = result.set_index("id").loc[ids[2]]
    assert (unknown["http_status"], unknown["error_code"], unknown["attempts"]) == (
        500,
        "INTERNAL_ERROR",
        1,
    )
    assert [c for c in _cancel_requests(sandbox) if c[0] == ids[2]] == [(ids[2], 500)]
    for tid in ids[3:]:
        expected = "cancelled" if sandbox.now < truth_cutoffs[tid] else "not_cancellable"
        assert outcome[tid] in ("cancelled", "not_cancellable")
        assert outcome[tid] == expected or outcome[tid] == "cancelled"
    assert {"cancelled", "not_cancellable"} <= set(outcome.values())
    assert result.attrs["all_as_planned"] is False
    journal = wh.journal()
    assert set(journal["outcome"]) <= {
        "not_found",
        "rejected_type",
        "unknown",
        "cancelled",
        "not_cancellable",
    }
    assert journal["requested_at"].notna().all() and journal["finished_at"].notna().all()
    cancelled = [tid for tid, o in outcome.items() if o == "cancelled"]
    stored = wh.sql(
        "SELECT id, status, refund_reason FROM transactions WHERE id IN (SELECT unnest(?::VARCHAR[]))",
        [cancelled],
    )
    assert set(stored["status"]) == {"FAILED"} and set(stored["refund_reason"]) == {
        "USER_CANCELLATION"
    }


def test_a_second_apply_asks_nothing_the_service_refused_for_good(
    sandbox: Sandbox, wh: Warehouse
) -> None:
    """A transfer the service answered 409 TRANSACTION_NOT_CANCELLABLE stays so (a window
    only closes): a second plan skips it, naming the refusal, and asks the service again only
    what has not been answered for good."""
    client = sandbox.client(max_retries=0)
    first = ops.plan_cancel(wh, PENDING_BANK).apply(client, progress=False)
    refused = set(first.loc[first["outcome"] == "not_cancellable", "id"])
    cancelled = set(first.loc[first["outcome"] == "cancelled", "id"])
    assert refused and cancelled
    sent = len(_cancel_requests(sandbox))
    again = ops.plan_cancel(wh, sorted(refused | cancelled))
    verdicts = dict(zip(again.items["id"], again.items["eligibility"], strict=True))
    assert {verdicts[t] for t in refused} == {
        "skipped: refused by the service before (not_cancellable, journal)"
    }
    assert len(again.eligible) == 0
    again.apply(client, progress=False)
    assert len(_cancel_requests(sandbox)) == sent


def test_the_same_plan_applied_again_asks_nothing_refused_for_good(
    sandbox: Sandbox, wh: Warehouse
) -> None:
    """`plan.apply` called twice (a notebook cell run again): what the first refused for good
    is skipped by its claim, as a fresh plan skips it."""
    plan = ops.plan_cancel(wh, PENDING_BANK)
    client = sandbox.client(max_retries=0)
    first = plan.apply(client, progress=False)
    refused = set(first.loc[first["outcome"] == "not_cancellable", "id"])
    assert refused
    sent = len(_cancel_requests(sandbox))
    again = plan.apply(client, progress=False).set_index("id")
    assert len(_cancel_requests(sandbox)) == sent
    assert set(again.loc[sorted(refused), "message"]) == {
        "refused by the service before (not_cancellable, journal)"
    }


def test_a_cap_is_read_in_any_case_and_a_bad_one_refused(sandbox: Sandbox, wh: Warehouse) -> None:
    """`max_total_minor={"usd": ...}` caps USD (a cap ignored would send everything); a cap
    that is no count, or one currency capped twice, is refused before anything is sent."""
    plan = ops.plan_cancel(wh, PENDING_BANK)
    usd = plan.eligible[plan.eligible["currency"] == "USD"]
    assert len(usd) >= 2
    room = int(usd["amount_minor"].iloc[0])
    result = plan.apply(sandbox.client(), max_total_minor={" usd ": room}, progress=False)
    sent_usd = set(result.loc[result["outcome"] != "skipped_over_cap", "id"]) & set(usd["id"])
    assert (
        sum(int(a) for i, a in zip(usd["id"], usd["amount_minor"], strict=True) if i in sent_usd)
        <= room
    )
    assert (result["outcome"] == "skipped_over_cap").sum() >= 1
    before = len(_cancel_requests(sandbox))
    for bad in ({"USD": -1}, {"USD": 1.5}, {"USD": 10, "usd": 10}, {"": 10}):
        with pytest.raises(InvalidArgumentError, match="max_total_minor"):
            ops.plan_cancel(wh, PENDING_BANK).apply(sandbox.client(), max_total_minor=bad)
    assert len(_cancel_requests(sandbox)) == before


def test_a_plan_whose_warehouse_was_closed_is_refused_in_words(
    sandbox: Sandbox, client: Client, tmp_path: Path
) -> None:
    from paylens import WarehouseError

    with Warehouse(tmp_path / "closed.duckdb") as closing:
        closing.sync(client, progress=False, resources=["transactions"])
        plan = ops.plan_cancel(closing, PENDING_BANK)
    with pytest.raises(WarehouseError, match="is closed: apply while it is open"):
        plan.apply(sandbox.client(), progress=False)
    assert _cancel_requests(sandbox) == []


def test_changed_items_are_skipped(sandbox: Sandbox, wh: Warehouse) -> None:
    plan = ops.plan_cancel(wh, PENDING_BANK)
    sandbox.advance(timedelta(days=5))  # everything pending settles or fails meanwhile
    result = plan.apply(sandbox.client(), progress=False)
    acted = result[result["outcome"] != "skipped"]
    assert set(acted["outcome"]) == {"skipped_changed"}
    assert not _cancel_requests(sandbox)


def test_caps_hold(sandbox: Sandbox, wh: Warehouse) -> None:
    plan = ops.plan_cancel(wh, PENDING_BANK)
    result = plan.apply(sandbox.client(), max_items=2, progress=False)
    assert len(_cancel_requests(sandbox)) == 2
    assert (result["outcome"] == "skipped_over_cap").sum() == len(plan.eligible) - 2
    # the items not answered yet (what the service refused for good is skipped by a plan)
    fresh = ops.plan_cancel(wh, list(plan.eligible["id"]))
    amounts = fresh.eligible.set_index("id")["amount_minor"]
    first = int(amounts.iloc[0])
    sandbox.requests.reset()
    capped = fresh.apply(sandbox.client(), max_total_minor={"USD": first}, progress=False)
    sent = {tid for tid, _ in _cancel_requests(sandbox)}
    assert sum(int(amounts[t]) for t in sent) <= first
    assert (capped["outcome"] == "skipped_over_cap").sum() >= 1


def test_429_storms_are_waited_out(sandbox: Sandbox, wh: Warehouse) -> None:
    plan = ops.plan_cancel(wh, PENDING_BANK)
    sandbox.faults.configure(rate_429=0.4, retry_after=0)
    client = sandbox.client(max_retries=20)
    result = plan.apply(client, concurrency=4, progress=False)
    assert client.stats.retries > 0
    acted = result[result["outcome"] != "skipped"]
    assert set(acted["outcome"]) <= {"cancelled", "not_cancellable"}
    assert 429 in {status for _, _, status in sandbox.requests.entries}


def test_approve_reject_and_confirm_share_the_framework(tmp_path: Path) -> None:
    sandbox = Sandbox(seed=5, transactions=6_000)
    client = sandbox.client()
    with Warehouse(tmp_path / "approvals.duckdb") as wh:
        wh.sync(client, progress=False, resources=["transactions"])
        waiting = _ids(wh, "agent_id IS NOT NULL AND status = 'PENDING'")
        assert len(waiting) >= 2
        approved = ops.plan_approve(wh, waiting[:1]).apply(client, progress=False)
        assert list(approved["outcome"]) == ["approved"]
        rejected = ops.plan_reject(wh, waiting[1:2], reason="not authorised").apply(
            client, progress=False
        )
        assert list(rejected["outcome"]) == ["rejected"]
        replay = ops.plan_approve(wh, waiting[:2])
        assert set(replay.items["eligibility"]) == {
            "skipped: already PROCESSING",
            "skipped: already FAILED",
        } or not len(replay.eligible)
        completed = _ids(
            wh,
            "type = 'OUTGOING' AND status = 'COMPLETED' AND receipt_delivery_confirmed_at IS NULL",
        )[:3]
        already = _ids(wh, "type <> 'CARD' AND receipt_delivery_confirmed_at IS NOT NULL")[:1]
        plan = ops.plan_confirm_receipt(wh, completed + already)
        assert (
            plan.items.set_index("id").loc[already[0], "eligibility"]
            == "skipped: receipt already confirmed"
        )
        confirmed = plan.apply(client, progress=False)
        assert list(confirmed["outcome"]) == ["confirmed"] * 3 + ["skipped"]
        now_confirmed = _ids(wh, "receipt_delivery_confirmed_at IS NOT NULL")
        assert set(completed) <= set(now_confirmed)


_KILLABLE_APPLY = """
import sys
from paylens import Client, ops
from paylens.warehouse import Warehouse
client = Client(sys.argv[2], sys.argv[3], sys.argv[4])
with Warehouse(sys.argv[1]) as wh:
    ops.plan_cancel(wh, "status IN ('PENDING', 'PROCESSING', 'CREATED')").apply(client, concurrency=2, progress=False)
"""


@pytest.mark.http
def test_a_killed_run_resumes_without_a_second_cancel(tmp_path: Path) -> None:
    sandbox = Sandbox(seed=8, transactions=3_000)  # 27 to cancel
    path = tmp_path / "killed-ops.duckdb"
    with Warehouse(path) as wh:
        wh.sync(sandbox.client(), progress=False, resources=["transactions"])
        planned = len(ops.plan_cancel(wh, PENDING_BANK).eligible)
    assert planned >= 20  # enough that a run killed at its third success is killed midway
    with sandbox.serve() as server:
        cancelled: list[str] = []

        def third_success(method: str, path: str, status: int) -> bool:
            if method == "POST" and path.endswith("/cancel") and status == 200:
                cancelled.append(path)
            return len(cancelled) >= 3

        with hold_answers(sandbox, third_success) as held:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    _KILLABLE_APPLY,
                    str(path),
                    server.base_url,
                    sandbox.client_id,
                    sandbox.client_secret,
                ]
            )
            assert held.wait(60), "the apply never cancelled three transfers"
            # the run is still going when it is killed, or this test would test nothing
            assert proc.poll() is None, "the apply ended before it could be killed"
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        first_run = _cancel_requests(sandbox)
        assert 3 <= len(first_run) < planned
        client = Client(server.base_url, sandbox.client_id, sandbox.client_secret)
        with Warehouse(path) as wh:
            ops.plan_cancel(wh, PENDING_BANK).apply(client, progress=False)
    requests = _cancel_requests(sandbox)
    assert len(requests) > len(first_run)
    succeeded: set[str] = set()
    for tid, status in requests:
        assert tid not in succeeded, f"{tid} got a second cancel after a success"
        if status == 200:
            succeeded.add(tid)


@pytest.mark.http
def test_cli_cancel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from paylens.cli import main

    sandbox = Sandbox(seed=12, transactions=3_000)
    db = tmp_path / "cli-ops.duckdb"
    with Warehouse(db) as wh:
        wh.sync(sandbox.client(), progress=False, resources=["transactions"])
        eligible = list(ops.plan_cancel(wh, PENDING_BANK).eligible["id"])
    assert eligible
    with sandbox.serve() as server:
        for name, value in sandbox.env(server).items():
            monkeypatch.setenv(name, value)

        def run(*extra: str, stdin: str = "") -> tuple[int, str]:
            monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
            code = main(["cancel", "--db", str(db), "--where", PENDING_BANK, *extra])
            return code, capsys.readouterr().out

        code, out = run("--dry-run")
        assert code == 0
        assert "would_send" in out and "[SANDBOX DATA] plan to cancel" in out
        assert sandbox.requests.count("POST") == 0
        code, out = run("--apply", stdin="n\n")
        assert code == 1 and "not applied" in out
        assert sandbox.requests.count("POST") == 0
        code, out = run("--apply", "--yes")
    requests = _cancel_requests(sandbox)
    assert sorted(t for t, _ in requests) == sorted(eligible)  # each eligible item, once
    answers = dict(requests)
    cancelled = sum(1 for status in answers.values() if status == 200)
    refused = len(answers) - cancelled
    assert cancelled > 0
    counts = out.strip().splitlines()[-1]
    assert f"cancelled {cancelled:,}" in counts
    # exit 0 when every item was cancelled as planned, 3 when the others were refused for good
    assert code == (3 if refused else 0)
    assert (f"not_cancellable {refused:,}" in counts) == bool(refused)


def test_an_apply_with_another_platforms_credentials_sends_nothing(
    sandbox: Sandbox, wh: Warehouse
) -> None:
    """The plan was selected from one platform's data; credentials that reach another
    platform at the same URL (another sandbox world here) are refused before any item is
    claimed or sent, and the journal stays empty."""
    plan = ops.plan_cancel(wh, PENDING_BANK)
    assert len(plan.eligible) > 0
    other = Sandbox(seed=sandbox.seed + 1, transactions=1_500)
    with pytest.raises(WarehouseSourceError, match="nothing was sent") as refused:
        plan.apply(other.client(), progress=False)
    said = str(refused.value)
    assert other.client().config.get_id() in said and sandbox.client().config.get_id() in said
    assert other.requests.count("POST") == 0 and _cancel_requests(sandbox) == []
    assert wh.journal().empty
    done = plan.apply(sandbox.client(), progress=False)  # its own platform's credentials
    assert (done["outcome"] == "cancelled").sum() > 0


HOSTILE_FILTERS = [
    "id IN (SELECT extension_name FROM duckdb_extensions())",
    "(SELECT string_agg(install_path) FROM duckdb_extensions())::INT = 1",
    "EXISTS (SELECT * FROM read_csv('/etc/passwd'))",
    "id IN (SELECT file FROM glob('/root/*'))",
    "id IN (SELECT file FROM glob('~/*'))",
    "getenv('HOME') = 'x'",
    "current_setting('home_directory')::INT = 1",
    "current_setting('secret_directory')::INT = 1",
    "(SELECT current_setting('extension_directory'))::INT = 1",
    "(SELECT path FROM duckdb_databases() LIMIT 1)::INT = 1",
    "(SELECT string_agg(path) FROM duckdb_databases())::INT = 1",
    "current_setting('temp_directory')::INT = 1",
    "id IN (SELECT * FROM read_text('" + "/" + "proc/self/environ'))",
    "(SELECT string_agg(database_name) FROM duckdb_databases())::INT = 1",
]


@pytest.mark.parametrize("expression", HOSTILE_FILTERS)
def test_a_selection_error_shows_no_path_of_the_machine(wh: Warehouse, expression: str) -> None:
    """A filter that reaches for files, extensions, settings or the environment is refused or
    harmless, and its error names the problem without any path of this machine (the home
    directory, DuckDB's extension or secret folders, the warehouse's file): beside the
    filter as written, no `/` at all."""
    try:
        plan = ops.plan_cancel(wh, expression)
    except InvalidArgumentError as exc:
        said = str(exc)
        assert said.startswith("select: the filter"), said
        beside = said.replace(repr(expression), "")
        assert "/" not in beside and "\\" not in beside and "~" not in beside, said
        for leak in (os.path.expanduser("~"), str(wh.path.parent), ".duckdb"):
            assert leak not in beside, said
    else:  # harmless: the filter selected nothing from the machine
        assert len(plan.items) == 0


def test_the_ops_modules_import_one_another_one_way() -> None:
    """No ops module imports one that imports it back, at run time or for type checkers (the
    transactions item kind lived in `_apply`, which `_plan` reached for and which reached
    back for `Plan`)."""
    import ast
    import graphlib

    root = Path(ops.__file__).parent
    graph: dict[str, set[str]] = {}
    for path in root.glob("_*.py"):
        imported = graph.setdefault(path.stem, set())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                imported.add(node.module)
    graphlib.TopologicalSorter(graph).prepare()  # raises CycleError on a cycle
