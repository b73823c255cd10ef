"""paylens's incremental sync, checked differentially against a second implementation of the
service (`tests/_second_service.py`, independent of the sandbox, other habits within the spec).

For each seed: a full sync into a kept warehouse, then clock advances (mostly 12 h, some
shorter, so that cards and accounts are sometimes not due), each followed by an incremental
sync of the kept warehouse (A) and a full sync of a new one (B). After every sync:

- every transfer the service lists is in A with the service's status (README: "after every
  sync, every transfer the service lists ... is stored with the service's status");
- every card transaction is stored; its status is the service's when created in the recent
  window or an open hold younger than `hold_window` at the previous sync;
- nothing is lost or doubled: A and B hold exactly the records the service lists, once each,
  and B's raw JSON is the service's record;
- every other difference between A and B (every declared column, raw JSON included) is gone
  within `verify_syncs` syncs;
- customers are exact after every sync (every change here is stamped in `updatedAt`); cards
  and accounts are exact whenever their freshness limit was reached (README's table), else
  may be stale; removed ones keep their row with `removed_at` set.

The tests at the end are the three findings this service revealed, each a small hand-built
scenario beside a control without its one ingredient (all fixed; they guard the fixes):
a `createdAt` in nanoseconds missed at a window's end (a young hold settling unseen), more
records in one instant than a sync's share of the re-verification (the round stopped for
good), and a late arrival hidden in the counts by a record leaving its status.

The default run is one short case: the default habits (late arrivals, bulk payouts, short
pages, keyset cursors) with nanoseconds and returned payouts (the habits that found findings 1
and 3), on a smaller population with four advances; `-m slow` runs every habit set on 25 seeds
with six advances.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from paylens.frames import arrow_schema
from paylens.warehouse import SyncOptions, SyncReport, Warehouse

from ._helpers import differential_options
from ._second_service import NS, Habits, SecondService, fmt

VERIFY_SYNCS = 3  # as `differential_options` sets
HOLD_WINDOW = timedelta(days=7)
RECENT = timedelta(days=2)
ADVANCES = (12, 12, 0.3, 12, 2, 12)  # hours; >= 5 advances
RECORD_KEYS = {
    "transactions": ("id",),
    "outgoing_fees": ("id",),
    "card_transactions": ("id",),
    "payment_instructions": ("transaction_id", "position"),
}
LIMITS = {  # README's freshness table (defaults)
    "cards": timedelta(hours=1),
    "internal_accounts": timedelta(minutes=10),
    "external_accounts": timedelta(hours=12),
}
Key = tuple[str, tuple[Any, ...]]


def options(**overrides: Any) -> SyncOptions:
    return differential_options(HOLD_WINDOW, **overrides)


def _columns(wh: Warehouse, table: str) -> list[str]:
    return [r[0] for r in wh._con.execute(f"DESCRIBE {table}").fetchall()]


def snapshot(wh: Warehouse, tables: dict[str, tuple[str, ...]]) -> dict[Key, tuple[Any, ...]]:
    """Rows by key on the declared columns (bookkeeping left out; rows a whole read no
    longer lists, `removed_at` set, left out too)."""
    rows: dict[Key, tuple[Any, ...]] = {}
    for table, keys in tables.items():
        columns = [f.name for f in arrow_schema(table)]
        at = [columns.index(k) for k in keys]
        where = " WHERE removed_at IS NULL" if "removed_at" in _columns(wh, table) else ""
        # DuckDB's Python values (pandas would cost seconds a run)
        rows_sql = wh.current_rows(table)  # a removed transaction's fees etc. left out too
        records = wh._con.execute(f"SELECT {', '.join(columns)} FROM {rows_sql}{where}").fetchall()
        for record in records:
            key = (table, tuple(record[i] for i in at))
            assert key not in rows, f"{key} stored twice"
            rows[key] = tuple(_norm(v) for v in record)
    return rows


def _norm(v: Any) -> Any:
    if isinstance(v, float) and v != v:
        return None
    if v is None or (hasattr(v, "__class__") and v.__class__.__name__ == "NaTType"):
        return None
    if hasattr(v, "tolist"):
        return json.dumps(v.tolist(), default=str)
    if isinstance(v, list | dict):
        return json.dumps(v, default=str, sort_keys=True)
    return v


def ids_and_status(wh: Warehouse, table: str = "transactions") -> dict[str, str]:
    """The current rows' (a transaction the service no longer has is left out)."""
    got = wh.sql(f"SELECT id, status FROM {wh.current_rows(table)}")
    return dict(zip(got["id"], got["status"], strict=True))


@dataclass
class Check:
    """Differences between a kept warehouse and a fresh full sync, sync after sync."""

    verify_syncs: int = VERIFY_SYNCS
    ages: dict[Key, int] = field(default_factory=dict)
    seen: int = 0
    last_whole: dict[str, datetime] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def fail(self, label: str, what: str, detail: Any) -> None:
        self.problems.append(f"{label}: {what}: {detail}")

    def records(
        self,
        svc: SecondService,
        kept: Warehouse,
        fresh: Warehouse,
        label: str,
        prev_newest: datetime | None,
    ) -> None:
        truth = svc.listed()
        a, b = ids_and_status(kept), ids_and_status(fresh)
        # nothing lost or doubled, on either side
        for name, wh, got in (("kept", kept, a), ("fresh", fresh, b)):
            n = int(wh.sql(f"SELECT count(*) AS n FROM {wh.current_rows('transactions')}")["n"][0])
            if n != len(got):
                self.fail(label, f"{name}: rows doubled", n - len(got))
            # a record the service deleted may stay current for `verify_syncs` syncs (the
            # snapshots' comparison below bounds it); nothing else may be extra
            if set(truth) - set(got) or set(got) - set(truth) - svc.deleted:
                self.fail(
                    label,
                    f"{name}: records lost/extra",
                    (sorted(set(truth) - set(got))[:5], sorted(set(got) - set(truth))[:5]),
                )
        raw = fresh.sql("SELECT id, raw FROM transactions")
        off = [
            i for i, r in zip(raw["id"], raw["raw"], strict=True) if json.loads(r) != truth.get(i)
        ]
        if off:
            self.fail(label, "fresh full sync's raw differs from the service", off[:5])
        # transfers: status exact after every sync
        wrong = {
            i: (a.get(i), r["status"])
            for i, r in truth.items()
            if r["type"] != "CARD" and a.get(i) != r["status"]
        }
        if wrong:
            self.fail(label, "transfer status differs after the sync", wrong)
        # card transactions: stored; status exact when recent or a young hold at the last sync
        newest = max(svc.txs[i].created_ns for i in truth) if truth else 0
        recent_from = newest - int(RECENT.total_seconds() * NS)
        holds_from = _ns(prev_newest - HOLD_WINDOW) if prev_newest is not None else None
        cards = ids_and_status(kept, "card_transactions")
        stale_cards = {}
        for i, r in truth.items():
            if r["type"] != "CARD":
                continue
            item = svc.txs[i]
            promised = item.created_ns >= recent_from or (
                holds_from is not None
                and item.created_ns >= holds_from
                and self.hold_before.get(i) in ("AUTHORIZED", "PARTIALLY_SETTLED")
            )
            if promised and cards.get(i) != r["status"]:
                stale_cards[i] = (cards.get(i), r["status"], fmt(item.created_ns, svc.habits))
        if stale_cards:
            self.fail(label, "card status differs (recent or young hold)", stale_cards)
        self.hold_before = {i: r["status"] for i, r in truth.items() if r["type"] == "CARD"}
        # everything else: within verify_syncs syncs
        mine, theirs = snapshot(kept, RECORD_KEYS), snapshot(fresh, RECORD_KEYS)
        differing = {k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k)}
        self.ages = {k: self.ages.get(k, 0) + 1 for k in differing}
        self.seen += len(differing)
        stale = {
            k: (mine.get(k), theirs.get(k))
            for k, age in self.ages.items()
            if age >= self.verify_syncs
        }
        if stale:
            self.fail(
                label, f"differences outlived {self.verify_syncs} syncs", list(stale.items())[:3]
            )

    hold_before: dict[str, str] = field(default_factory=dict)

    def resources(
        self, svc: SecondService, kept: Warehouse, fresh: Warehouse, label: str, report: SyncReport
    ) -> None:
        now = svc.clock.replace(microsecond=0)
        for table in ("customers", "cards", "internal_accounts", "external_accounts"):
            mine = snapshot(kept, {table: ("id",)})
            theirs = snapshot(fresh, {table: ("id",)})
            # what the service lists now, and a removed one keeps its row with removed_at
            service_ids = {
                "customers": svc.customers,
                "cards": svc.cards,
                "internal_accounts": svc.internal,
                "external_accounts": svc.external,
            }[table]
            if {k[1][0] for k in theirs} != set(service_ids):
                self.fail(label, f"fresh {table} differ from the service's list", "")
            all_rows = set(kept.sql(f"SELECT id FROM {table}")["id"])
            gone = {k[1][0] for k in mine} - set(service_ids)
            if table == "customers":
                due = True
            else:
                last = self.last_whole.get(table)
                due = last is None or now - last >= LIMITS[table]
            if due:
                self.last_whole[table] = now
                differing = {k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k)}
                if differing:
                    k = sorted(differing)[0]
                    self.fail(
                        label,
                        f"{table} differ though due",
                        (len(differing), mine.get(k), theirs.get(k)),
                    )
                if gone:
                    self.fail(
                        label, f"{table}: removed rows not marked removed_at", sorted(gone)[:3]
                    )
            if not set(service_ids) - all_rows <= set() and due:
                self.fail(label, f"{table}: rows missing", "")


def _ns(t: datetime) -> int:
    return int(t.timestamp()) * NS + t.microsecond * 1000


def newest_stored(wh: Warehouse) -> datetime | None:
    got = wh.sql("SELECT max(created_at) AS m FROM transactions")["m"][0]
    if got is None or got != got:
        return None
    return got.to_pydatetime().replace(tzinfo=UTC) if hasattr(got, "to_pydatetime") else got


#: Records the service deletes before each sync (the interface's lifecycles never delete one;
#: a service that does, or merges a record away, must not leave it current).
VANISHING = 2


def vanish(svc: SecondService, rng: random.Random) -> None:
    """Delete `VANISHING` listed records picked by `rng`: old and young alike."""
    for rid in rng.sample(sorted(svc.listed()), min(VANISHING, len(svc.listed()))):
        svc.delete(rid)


def run_case(
    seed: int,
    habits: Habits | None = None,
    advances: tuple[float, ...] = ADVANCES,
    per_day: int = 10,
) -> Check:
    svc = SecondService(seed=seed, habits=habits or Habits(), per_day=per_day)
    check = Check()
    with svc.client(max_retries=0) as client, Warehouse(":memory:") as kept:
        kept.sync(client, options=options())
        check.hold_before = {i: r["status"] for i, r in svc.listed().items() if r["type"] == "CARD"}
        check.last_whole = {t: svc.clock.replace(microsecond=0) for t in LIMITS}
        for step, hours in enumerate(advances):
            prev_newest = newest_stored(kept)
            svc.advance(timedelta(hours=hours))
            vanish(svc, random.Random(seed * 1_000 + step))
            report = kept.sync(client, options=options())
            label = f"seed {seed}, step {step} (+{hours} h)"
            with Warehouse(":memory:") as fresh:
                fresh.sync(client, options=options(full=True))
                check.records(svc, kept, fresh, label, prev_newest)
                check.resources(svc, kept, fresh, label, report)
    return check


HABITS = {
    "default": Habits(),
    "seconds-offset": Habits(precision="s", zulu=False),
    "cards-refunded": Habits(refunded_selects_cards=True, short_pages=False),
    "nanoseconds": Habits(precision="ns"),
    "nanoseconds-returns": Habits(precision="ns", returns=True),
}
#: the default run: one short case (seed 22 with nanoseconds and returns found findings 1 and 3
#: by itself: a transfer PROCESSING after a sync that the service listed COMPLETED)
DEFAULT_CASES = [(22, "nanoseconds-returns")]
QUICK_ADVANCES = (12, 0.3, 12, 12)  # hours: still more syncs than VERIFY_SYNCS
QUICK_PER_DAY = 5
SEEDS = range(25)  # -m slow: for each habit set, six advances


@pytest.mark.parametrize(("seed", "habit"), DEFAULT_CASES)
def test_incremental_matches_full_on_a_second_service(seed: int, habit: str) -> None:
    check = run_case(seed, HABITS[habit], QUICK_ADVANCES, QUICK_PER_DAY)
    assert check.problems == []
    assert check.seen > 0  # the bound was used: the re-verification had work to do


@pytest.mark.slow
@pytest.mark.parametrize("habit", sorted(HABITS))
@pytest.mark.parametrize("seed", SEEDS)
def test_incremental_matches_full_on_a_second_service_more_seeds(seed: int, habit: str) -> None:
    check = run_case(seed, HABITS[habit])
    assert check.problems == []


# -- findings (fixed): hand-built scenarios -----------------------------------------------------------

DAY = timedelta(days=1)
T0 = datetime(2025, 9, 1, tzinfo=UTC)


def manual(habits: Habits | None = None) -> SecondService:
    return SecondService(seed=7, habits=habits or Habits(bursts=False, late=0.0), manual=True)


def _sync(wh: Warehouse, svc: SecondService, **kw: Any) -> SyncReport:
    with svc.client(max_retries=0) as client:
        return wh.sync(client, resources=["transactions"], options=options(**kw))


def _full_status(svc: SecondService, table: str = "transactions") -> dict[str, str]:
    with Warehouse(":memory:") as fresh:
        _sync(fresh, svc, full=True)
        return ids_and_status(fresh, table)


@pytest.mark.parametrize("frac_ns", [500, 0])
def test_finding_nanosecond_instants_hide_a_young_hold_that_settled(frac_ns: int) -> None:
    """createdAt with nine fraction digits (RFC 3339 allows any): a point window
    [instant, instant + 1 us) is asked as startDate=instant, endDate=instant (inclusive,
    microseconds), which a record at instant + 500 ns is outside of. A young card hold in the
    older range settles; the sync re-reads it by itself and, until fixed, got nothing (now the
    service's nanoseconds, once seen, set `endDate` one nanosecond before a window's end)."""
    svc = manual(Habits(precision="ns", bursts=False, late=0.0))
    svc.now = to_ns_(T0 + 14 * DAY)
    for d in range(10):
        svc.put("OUTGOING", T0 + d * DAY, "COMPLETED")
    hold = svc.put("CARD", T0 + 10 * DAY, "AUTHORIZED", frac_ns=frac_ns)
    svc.put("INCOMING", T0 + 13 * DAY, "COMPLETED")  # the newest: the hold is 3 days older
    with Warehouse(":memory:") as kept:
        _sync(kept, svc)
        assert ids_and_status(kept, "card_transactions")[hold] == "AUTHORIZED"
        svc.tick(timedelta(hours=1))
        svc.change(hold, status="SETTLED")
        svc._settle(
            svc.txs[hold].record,
            svc.txs[hold].record["authorizedAmount"]["amount"],
            fmt(svc.now, svc.habits),
        )
        _sync(kept, svc)
        assert _full_status(svc, "card_transactions")[hold] == "SETTLED"
        # README: a card transaction's status is the service's when it "is an open hold
        # (AUTHORIZED, PARTIALLY_SETTLED) younger than `hold_window` at the previous sync"
        assert ids_and_status(kept, "card_transactions")[hold] == "SETTLED"


@pytest.mark.parametrize("crowd", [40, 5])
def test_finding_a_crowded_instant_stops_the_reverification(crowd: int) -> None:
    """More records created in one instant than one sync's share of the re-verification:
    `nth` answers that same instant, the window [cursor, cursor) is empty, and the cursor never
    moves past it. A receipt confirmed on an older transfer after it was never seen (now a
    window takes the whole instant of its last record, more than the share if need be)."""
    svc = manual()
    svc.now = to_ns_(T0 + 20 * DAY)
    for _ in range(crowd):  # a bulk payout: `crowd` transfers in one instant
        svc.put("OUTGOING", T0 + DAY, "COMPLETED")
    later = [svc.put("OUTGOING", T0 + (2 + d) * DAY, "COMPLETED") for d in range(10)]
    svc.put("INCOMING", T0 + 19 * DAY, "COMPLETED")  # the newest
    with Warehouse(":memory:") as kept:
        _sync(kept, svc)
        svc.change(later[5], receiptDeliveryConfirmedAt=fmt(svc.now, svc.habits))
        for _ in range(VERIFY_SYNCS + 2):
            svc.tick(timedelta(hours=12))
            _sync(kept, svc)
        got = kept.sql(
            "SELECT receipt_delivery_confirmed_at AS r FROM transactions WHERE id = ?", [later[5]]
        )
        # README: "a field of a record in a terminal status that changed without its status,
        # such as a receipt confirmation ... is gone within `verify_syncs` syncs"
        assert _present(got["r"][0])


@pytest.mark.parametrize("returned", [True, False])
def test_finding_a_late_arrival_hidden_by_a_returned_payout(returned: bool) -> None:
    """In the older range, in one interval between syncs: a COMPLETED payout is returned
    (COMPLETED -> FAILED, PAYOUT_RETURNED) and a COMPLETED transfer arrives late (listed now,
    created days ago). The counts: COMPLETED unchanged, FAILED +1, total +1; the sync reads
    FAILED and, until fixed, never the late arrival (now, once the return is stored, COMPLETED
    is counted again and shows the arrival)."""
    svc = manual()
    svc.now = to_ns_(T0 + 30 * DAY)
    for d in range(28):
        svc.put("OUTGOING", T0 + d * DAY, "COMPLETED")
    paid = svc.put("OUTGOING", T0 + 20 * DAY, "COMPLETED")
    svc.put("INCOMING", T0 + 29 * DAY, "COMPLETED")  # the newest
    with Warehouse(":memory:") as kept:
        _sync(kept, svc, verify_syncs=7)
        svc.tick(timedelta(hours=12))
        if returned:
            svc.change(paid, status="FAILED", failureReason="PAYOUT_RETURNED")
        late = svc.put(
            "INCOMING", T0 + 21 * DAY, "COMPLETED", arrives=T0 + 30 * DAY + timedelta(hours=12)
        )
        _sync(kept, svc, verify_syncs=7)
        assert _full_status(svc)[late] == "COMPLETED"
        stored = ids_and_status(kept)
        assert stored[paid] == ("FAILED" if returned else "COMPLETED")
        # README: "after every sync, every transfer the service lists (and serves readable) is
        # stored with the service's status"
        assert stored.get(late) == "COMPLETED"


def _present(v: Any) -> bool:
    import pandas as pd

    return not pd.isna(v)


def to_ns_(t: datetime) -> int:
    return _ns(t)
