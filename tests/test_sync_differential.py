"""The sync's guarantee, checked differentially: an incremental warehouse kept in step over many
clock advances holds what a fresh full sync of the same service holds.

Each case runs a sandbox with its whole lifecycle (planned settlements, failures and refunds of
transfers and card transactions; approvals, receipt confirmations and late arrivals by others;
a few records served broken to one sync and fixed after it) and, after every advance of 12 h,
syncs the kept warehouse incrementally and a new one in full, then compares them on every
declared column of every record table, the raw JSON included:

- after every sync, no record differs in status, and each record the full sync holds is held
  (or, served broken to that very sync, set aside in quarantine). No filter lists card
  statuses, so a hold's clearing is seen by re-reading the holds younger than `hold_window`:
  here 14 days, past the sandbox's latest clearing (a split hold's second one, at most about
  11 days after the authorization). With the default week a later clearing is left to the
  re-verification (`test_warehouse_sync.py` shows both);
- no difference of any kind outlives `verify_syncs` syncs (the rolling re-verification).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from paylens import Client, Sandbox
from paylens.errors import ResponseValidationError
from paylens.frames import arrow_schema
from paylens.sandbox import SandboxTransport
from paylens.warehouse import SyncOptions, SyncReport, Warehouse

from ._helpers import differential_options

END = datetime(2025, 10, 13, tzinfo=UTC)
VERIFY_SYNCS = 3  # as `differential_options` sets
HOLD_WINDOW = timedelta(days=14)
ADVANCES = 5
KEYS = {
    "transactions": ("id",),
    "outgoing_fees": ("id",),
    "card_transactions": ("id",),
    "payment_instructions": ("transaction_id", "position"),
}
Key = tuple[str, tuple[Any, ...]]


def lively_sandbox(seed: int, transactions: int = 300) -> Sandbox:
    """A month of activity (so a 12 h advance brings new records and many changes) with
    others acting on it at every advance."""
    sandbox = Sandbox(seed=seed, transactions=transactions, start=END - timedelta(days=30))
    sandbox.world.lifecycle.configure(approvals=0.5, receipts=3, late=0.2)
    return sandbox


def snapshot(wh: Warehouse) -> dict[Key, tuple[Any, ...]]:
    """Every record table's rows by key, on the declared columns (raw JSON included; the
    bookkeeping of when a row was synced left out)."""
    rows: dict[Key, tuple[Any, ...]] = {}
    for table, keys in KEYS.items():
        columns = [f.name for f in arrow_schema(table)]
        at = [columns.index(k) for k in keys]
        for record in wh.relation(table).project(", ".join(columns)).fetchall():
            rows[(table, tuple(record[i] for i in at))] = record
    return rows


def _record_id(key: Key) -> str:
    return str(key[1][0])


def status_of(rows: dict[Key, tuple[Any, ...]]) -> dict[str, str]:
    status = [f.name for f in arrow_schema("transactions")].index("status")
    return {key[0]: row[status] for (table, key), row in rows.items() if table == "transactions"}


@dataclass
class Comparison:
    """Differences between a kept warehouse and a fresh full sync, sync after sync."""

    verify_syncs: int
    ages: dict[Key, int] = field(default_factory=dict)
    seen: int = 0  # differences of readable records observed: how much the bound was used

    def check(self, kept: Warehouse, fresh: Warehouse, report: SyncReport, label: str) -> None:
        mine, truth = snapshot(kept), snapshot(fresh)
        quarantined = set(
            kept.sql(
                "SELECT record_id FROM rejected_records WHERE run_id = ? AND record_id IS NOT NULL",
                [report.run_id],
            )["record_id"]
        )
        statuses, expected = status_of(mine), status_of(truth)
        wrong = {
            i: (statuses.get(i), expected.get(i))
            for i in set(statuses) | set(expected)
            if statuses.get(i) != expected.get(i) and i not in quarantined
        }
        assert wrong == {}, f"{label}: status differences after the sync"
        differing = {k for k in set(mine) | set(truth) if mine.get(k) != truth.get(k)}
        # a sync the service served a record broken to does not count towards its bound
        self.ages = {k: self.ages.get(k, 0) + (_record_id(k) not in quarantined) for k in differing}
        self.seen += sum(_record_id(k) not in quarantined for k in differing)
        stale = {
            k: (mine.get(k), truth.get(k))
            for k, age in self.ages.items()
            if age >= self.verify_syncs
        }
        assert stale == {}, f"{label}: differences outlived {self.verify_syncs} syncs"


def options(**overrides: Any) -> SyncOptions:
    return differential_options(HOLD_WINDOW, **overrides)


def run_case(
    seed: int,
    connect: Callable[[Sandbox], Iterator[Client]],
    *,
    before_sync: Callable[[Sandbox, int], None] | None = None,
    after_sync: Callable[[Sandbox, int], None] | None = None,
    transactions: int = 300,
) -> Comparison:
    """One seed: a full sync, then `ADVANCES` advances of 12 h, each followed by an incremental
    sync of the kept warehouse and a full sync of a new one. `before_sync` may break things
    for the kept warehouse's sync; `after_sync` repairs them before the full one."""
    sandbox = lively_sandbox(seed, transactions)
    comparison = Comparison(VERIFY_SYNCS)
    with connect(sandbox) as client, Warehouse(":memory:") as kept:
        kept.sync(client, resources=["transactions"], options=options())
        for step in range(ADVANCES):
            sandbox.advance(timedelta(hours=12))
            if before_sync:
                before_sync(sandbox, step)
            report = kept.sync(client, resources=["transactions"], options=options())
            if after_sync:
                after_sync(sandbox, step)
            with Warehouse(":memory:") as fresh:
                fresh.sync(client, resources=["transactions"], options=options(full=True))
                comparison.check(kept, fresh, report, f"seed {seed}, step {step}")
    return comparison


@contextmanager
def in_process(sandbox: Sandbox) -> Iterator[Client]:
    with sandbox.client(sleep=lambda s: None) as client:
        yield client


def break_a_few_records(sandbox: Sandbox, step: int) -> None:
    """Records served broken to the kept warehouse's sync only (a faulty release, fixed before
    the next read): old ones, recent ones, and one that changes in this advance."""
    ids = [t["id"] for t in sandbox.world.all_transactions()]
    sandbox.faults.corrupt_ids = {ids[(step * 37) % len(ids)], ids[-1 - step], ids[len(ids) // 2]}


def fix_them(sandbox: Sandbox, step: int) -> None:
    sandbox.faults.corrupt_ids = set()


#: Seeds of the default run; `pytest -m slow` runs the next `MORE_SEEDS` (each seed is one
#: sandbox and 11 syncs, ~2 s of CPU): three by default, the other 57 (seeds 3-59) under
#: `-m slow`. Even seeds delete records at the service too; odd ones must use the bound
#: (`seen > 0`).
SEEDS = 3
MORE_SEEDS = 57


#: Records deleted at the service before each sync (with `World.delete_transaction`, the
#: sandbox's test control: the interface's lifecycles never delete one).
VANISHING = 2


def vanish_a_few(sandbox: Sandbox, rng: random.Random) -> list[str]:
    """Delete `VANISHING` records picked by `rng`, old and young alike; their ids."""
    ids = [t["id"] for t in sandbox.world.all_transactions()]
    gone = rng.sample(ids, VANISHING)
    for record_id in gone:
        sandbox.world.delete_transaction(record_id)
    return gone


def _differential(seed: int) -> None:
    """Even seeds also delete records at the service before every sync. The reads that find
    them gone (their ranges read whole, since the counts differ) refresh what is near them:
    there, often nothing is left for the re-verification to find, so only the odd seeds must
    use the bound."""
    rng = random.Random(seed)
    vanishing = seed % 2 == 0

    def before_sync(sandbox: Sandbox, step: int) -> None:
        if vanishing:
            vanish_a_few(sandbox, rng)
        break_a_few_records(sandbox, step)

    comparison = run_case(seed, in_process, before_sync=before_sync, after_sync=fix_them)
    # receipts on old transfers are seen only by the re-verification: the bound was used
    assert vanishing or comparison.seen > 0


@pytest.mark.parametrize("seed", range(SEEDS))
def test_incremental_sync_matches_a_fresh_full_sync(seed: int) -> None:
    _differential(seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(SEEDS, SEEDS + MORE_SEEDS))
def test_incremental_sync_matches_a_fresh_full_sync_on_more_seeds(seed: int) -> None:
    _differential(seed)


def test_the_lifecycle_makes_every_kind_of_change() -> None:
    # the property above is only as strong as the changes it sees: each kind happens
    sandbox = lively_sandbox(3, 2_000)
    before = {t["id"]: t for t in sandbox.world.all_transactions()}
    done: dict[str, int] = {}
    for _ in range(ADVANCES):
        for name, count in sandbox.advance(timedelta(hours=12)).items():
            done[name] = done.get(name, 0) + count
    after = {t["id"]: t for t in sandbox.world.all_transactions()}
    refunded_later = [
        i
        for i, t in after.items()
        if i in before
        and t["status"] == before[i]["status"] == "FAILED"
        and (t.get("refund") or {}).get("status") != (before[i].get("refund") or {}).get("status")
    ]
    receipts = [
        i
        for i, t in after.items()
        if i in before
        and t["status"] == "COMPLETED" == before[i]["status"]
        and t.get("receiptDeliveryConfirmedAt") != before[i].get("receiptDeliveryConfirmedAt")
    ]
    card_moves = {
        (before[i]["status"], t["status"])
        for i, t in after.items()
        if i in before and t["type"] == "CARD" and t["status"] != before[i]["status"]
    }
    assert done["late"] > 0 and done["approved"] + done["rejected"] > 0
    assert done["receipts"] == len(receipts) > 0
    assert refunded_later
    assert ("AUTHORIZED", "SETTLED") in card_moves or (
        "AUTHORIZED",
        "PARTIALLY_SETTLED",
    ) in card_moves
    assert any(new == "REFUNDED" for _, new in card_moves)
    # a late record is listed only once it arrives, with its original creation time
    late = [
        i
        for i in after
        if i not in before and after[i]["createdAt"] < (sandbox.now - timedelta(days=2)).isoformat()
    ]
    assert late


# -- hostile pages --------------------------------------------------------------------------------

_AMOUNTS = ("sentAmount", "receivedAmount", "authorizedAmount")


@dataclass
class Hostile:
    """What a misbehaving service does to list pages of transactions."""

    huge_amount_ids: set[str] = field(default_factory=set)  # an amount of 2^64 + 5
    total_count: Callable[[int], Any] | None = None  # the totalCount it claims
    retyped_ids: set[str] = field(default_factory=set)  # OUTGOING records served as INCOMING
    nulled_ids: set[str] = field(default_factory=set)  # records served as JSON null
    untimed_ids: set[str] = field(default_factory=set)  # records whose createdAt is no time

    def rewrite(self, body: dict[str, Any]) -> dict[str, Any]:
        if "data" in body:
            body["data"] = [None if r.get("id") in self.nulled_ids else r for r in body["data"]]
        for record in body.get("data", []):
            if record is None:
                continue
            if record.get("id") in self.untimed_ids:
                record["createdAt"] = "yesterday"
            if record.get("id") in self.huge_amount_ids:
                key = next(k for k in _AMOUNTS if isinstance(record.get(k), dict))
                record[key] = {**record[key], "amount": 2**64 + 5}
            if record.get("id") in self.retyped_ids and record.get("type") == "OUTGOING":
                record["type"] = "INCOMING"
        if self.total_count is not None and "totalCount" in body:
            body["totalCount"] = self.total_count(body["totalCount"])
        return body


class HostileTransport(httpx.BaseTransport):
    """A transport that rewrites the list pages another transport answers (with Python's own
    JSON, which keeps integers of any size)."""

    def __init__(self, inner: httpx.BaseTransport, hostile: Hostile) -> None:
        self.inner = inner
        self.hostile = hostile

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if not request.url.path.endswith("/transactions") or response.status_code != 200:
            return response
        body = json.loads(response.read())
        content = json.dumps(
            self.hostile.rewrite(body), ensure_ascii=False, separators=(",", ":")
        ).encode()
        headers = [(k, v) for k, v in response.headers.items() if k.lower() != "content-length"]
        return httpx.Response(200, headers=headers, content=content, request=request)


def hostile_client(
    sandbox: Sandbox,
    hostile: Hostile,
    inner: httpx.BaseTransport | None = None,
    base_url: str | None = None,
) -> Client:
    from paylens.sandbox import IN_PROCESS_BASE_URL

    return Client(
        base_url or IN_PROCESS_BASE_URL,
        sandbox.client_id,
        sandbox.client_secret,
        transport=HostileTransport(
            inner or SandboxTransport(sandbox.app, sleep=lambda s: None), hostile
        ),
        max_retries=8,
    )


def hostile_steps(
    hostile: Hostile,
) -> tuple[Callable[[Sandbox, int], None], Callable[[Sandbox, int], None]]:
    """Each step breaks the pages another way for the kept warehouse's sync: a huge integer in
    two records (one old, one new), a count of 0, a count too high, and a type change that
    stays (the full sync sees it too)."""

    def before(sandbox: Sandbox, step: int) -> None:
        ids = [t["id"] for t in sandbox.world.all_transactions()]
        outgoing = [t["id"] for t in sandbox.world.all_transactions() if t["type"] == "OUTGOING"]
        hostile.huge_amount_ids = {ids[step * 11 % len(ids)], ids[-1]}
        hostile.total_count = [lambda n: 0, lambda n: n + 7, None, lambda n: max(0, n - 3), None][
            step % 5
        ]
        hostile.retyped_ids.add(outgoing[(step * 53) % len(outgoing)])

    def after(sandbox: Sandbox, step: int) -> None:
        hostile.huge_amount_ids = set()
        hostile.total_count = None

    return before, after


@pytest.mark.parametrize("seed", [101, pytest.param(102, marks=pytest.mark.slow)])
def test_hostile_pages_are_quarantined_counted_and_cleaned(seed: int) -> None:
    hostile = Hostile()

    @contextmanager
    def connect(sandbox: Sandbox) -> Iterator[Client]:
        with hostile_client(sandbox, hostile) as client:
            yield client

    before, after = hostile_steps(hostile)
    run_case(seed, connect, before_sync=before, after_sync=after)


@pytest.mark.parametrize("how", ["null", "no time"])
def test_a_misfit_in_place_of_the_oldest_record_is_set_aside_once(how: str) -> None:
    """The record a full sync plans from (the oldest) served as JSON null, or with a
    `createdAt` that is no time: the sync goes on, the misfit lands in rejected_records once,
    however often the run reads it."""
    sandbox = lively_sandbox(7, 300)
    oldest = min(sandbox.world.all_transactions(), key=lambda t: (t["createdAt"], t["id"]))
    hostile = (
        Hostile(nulled_ids={oldest["id"]}) if how == "null" else Hostile(untimed_ids={oldest["id"]})
    )
    with hostile_client(sandbox, hostile) as client, Warehouse(":memory:") as wh:
        wh.sync(client, resources=["transactions"], options=options())
        stored = set(wh.sql("SELECT id FROM transactions")["id"])
        rejected = wh.rejected_records()
    assert stored == {t["id"] for t in sandbox.world.all_transactions()} - {oldest["id"]}
    assert len(rejected) == 1
    assert rejected["raw"][0] == "null" if how == "null" else '"yesterday"' in rejected["raw"][0]


def test_a_string_total_count_is_a_typed_error() -> None:
    sandbox = lively_sandbox(5, 300)
    with (
        hostile_client(sandbox, Hostile(total_count=str)) as client,
        Warehouse(":memory:") as wh,
        pytest.raises(ResponseValidationError, match="totalCount"),
    ):
        wh.sync(client, resources=["transactions"], options=options())


def test_a_zero_total_count_does_not_empty_a_full_sync() -> None:
    sandbox = lively_sandbox(6, 300)
    with (
        hostile_client(sandbox, Hostile(total_count=lambda n: 0)) as client,
        Warehouse(":memory:") as wh,
    ):
        wh.sync(client, resources=["transactions"], options=options())
        assert len(wh.transactions()) == sandbox.world.transaction_count()


@pytest.mark.slow
@pytest.mark.http
@pytest.mark.parametrize("seed", range(200, 220))
def test_over_loopback_with_faults_and_hostile_pages(seed: int) -> None:
    hostile = Hostile()

    @contextmanager
    def connect(sandbox: Sandbox) -> Iterator[Client]:
        sandbox.faults.configure(rate_429=0.03, retry_after=0, drop_rate=0.02)
        with sandbox.serve() as server:
            inner = httpx.HTTPTransport()
            with hostile_client(sandbox, hostile, inner, server.base_url) as client:
                yield client

    before, after = hostile_steps(hostile)

    def break_all(sandbox: Sandbox, step: int) -> None:
        before(sandbox, step)
        break_a_few_records(sandbox, step)
        sandbox.faults.burst_5xx(2)

    def fix_all(sandbox: Sandbox, step: int) -> None:
        after(sandbox, step)
        fix_them(sandbox, step)

    run_case(seed, connect, before_sync=break_all, after_sync=fix_all, transactions=1_500)
