"""The sync's plan: pure functions of stored and remote counts, checked with fakes (no service,
no database, no threads)."""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from paylens.models import TransactionStatus
from paylens.warehouse.sync import plan
from paylens.warehouse.sync.plan import TICK, Verification, Window

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def at(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


@dataclass
class FakeStored:
    """Stored records as (created_at, status), answering the plan's questions."""

    records: list[tuple[datetime, str]]

    def _in(self, window: Window) -> list[tuple[datetime, str]]:
        return sorted(
            (t, s)
            for t, s in self.records
            if (window.start is None or t >= window.start)
            and (window.end is None or t < window.end)
        )

    def counts(self, window: Window) -> dict[str | None, int]:
        return dict(Counter(s for _, s in self._in(window)))

    def oldest(self, window: Window) -> datetime | None:
        inside = self._in(window)
        return inside[0][0] if inside else None

    def newest_in(self, window: Window) -> datetime | None:
        inside = self._in(window)
        return inside[-1][0] + TICK if inside else None

    def median(self, window: Window) -> datetime | None:
        inside = self._in(window)
        return inside[len(inside) // 2][0] if inside else None

    def nth(self, window: Window, n: int) -> datetime | None:
        inside = self._in(window)
        return inside[n][0] if n < len(inside) else None


def remote_of(
    records: list[tuple[datetime, str]],
    pending: plan.Level,
    *,
    cards_not_refunded_filter: frozenset[datetime] = frozenset(),
):
    """The service's count function over `records` for the windows of `pending`. Its REFUNDED
    filter selects card transactions too (the interface does not say), except the records
    created at `cards_not_refunded_filter`'s instants (a service whose filter does not)."""
    service = FakeStored(records)

    def count(i: int, status: str | None) -> int:
        # the interface's filter takes a TransactionStatus, nothing else
        assert status is None or status in set(TransactionStatus), status
        inside = service._in(pending[i][0])
        if status is None:
            return len(inside)
        return sum(s == status and t not in cards_not_refunded_filter for t, s in inside)

    return count


def reconcile(
    stored: list[tuple[datetime, str]],
    remote: list[tuple[datetime, str]],
    *,
    cards_not_refunded_filter: frozenset[datetime] = frozenset(),
) -> list[Window]:
    """Every window the reconciliation reads, level after level, over [T0, T0 + 1000 h)."""
    pending: plan.Level = [(Window(T0, at(1000)), plan.COUNTED)]
    read: list[Window] = []
    while pending:
        to_read, pending_next = plan.reconcile_level(
            pending,
            remote_of(remote, pending, cards_not_refunded_filter=cards_not_refunded_filter),
            FakeStored(stored),
            leaf_records=4,
            slice_records=50,
        )
        read += to_read
        pending = pending_next
    return read


def test_nothing_changed_reads_nothing() -> None:
    records = [(at(i), "COMPLETED") for i in range(200)]
    assert reconcile(records, records) == []


def test_a_status_change_is_read_filtered_by_the_status_it_reached() -> None:
    stored = [(at(i), "COMPLETED") for i in range(200)] + [(at(500.5), "PROCESSING")]
    remote = [(at(i), "COMPLETED") for i in range(200)] + [(at(500.5), "FAILED")]
    read = reconcile(stored, remote)
    assert read == [Window(T0, at(1000), "FAILED")]  # one record to page, not 201


def test_many_moves_into_a_status_are_narrowed_by_bisection() -> None:
    stored = [(at(i), "PROCESSING") for i in range(200)]
    remote = [(at(i), "COMPLETED" if 100 <= i < 110 else "PROCESSING") for i in range(200)]
    read = reconcile(stored, remote)
    assert {w.status for w in read} == {"COMPLETED"}
    covered = [t for t, s in remote if s == "COMPLETED" and any(w.start <= t < w.end for w in read)]
    assert len(covered) == 10
    assert all(w.start >= at(64) and w.end <= at(150) for w in read)


def test_only_the_interfaces_statuses_are_asked_and_refunded_is_not() -> None:
    # REFUNDED is also a card status: what its filter selects, the interface leaves open
    assert set(plan.LISTED_STATUSES) == set(TransactionStatus) - {"REFUNDED"}
    assert not set(plan.LISTED_STATUSES) & {"AUTHORIZED", "PARTIALLY_SETTLED", "SETTLED"}
    assert set(plan.OPEN_STATUSES) <= set(plan.LISTED_STATUSES)


def test_a_new_record_no_filter_lists_is_found_by_reading_whole_windows() -> None:
    # a card transaction arriving late: the remainder (total minus listed statuses) gained
    remote = [(at(i), "COMPLETED") for i in range(100)] + [(at(70.5), "SETTLED")]
    read = reconcile(remote[:100], remote)
    assert read and all(w.status is None for w in read)
    assert any(w.start <= at(70.5) < w.end for w in read)
    assert sum(1 for t, _ in remote if any(w.start <= t < w.end for w in read)) <= 8


def test_a_transfer_refunded_is_found_although_refunded_is_not_filtered() -> None:
    stored = [(at(i), "COMPLETED") for i in range(100)] + [(at(40.5), "PROCESSING")]
    remote = [*stored[:100], (at(40.5), "REFUNDED")]
    read = reconcile(stored, remote)
    assert any(w.start <= at(40.5) < w.end and w.status is None for w in read)


def test_a_card_hold_settling_is_not_seen_by_counts() -> None:
    # no filter lists card statuses: the watch of young holds and the re-verification find
    # these (see test_sync_run)
    stored = [(at(i), "SETTLED") for i in range(50)] + [(at(60), "AUTHORIZED")]
    remote = [*stored[:50], (at(60), "SETTLED")]
    assert reconcile(stored, remote) == []


@pytest.mark.parametrize("refunded_lists_cards", [True, False])
def test_a_card_return_is_seen_when_the_refunded_filter_selects_cards(
    refunded_lists_cards: bool,
) -> None:
    # stored REFUNDED records are compared with the service's REFUNDED count: a service whose
    # filter selects card transactions shows the return; one whose filter does not never
    # counts more than is stored, and nothing is read for it
    stored = [(at(i), "SETTLED") for i in range(50)] + [(at(70), "REFUNDED")]  # a transfer
    remote = [(at(i), "REFUNDED" if i == 7 else "SETTLED") for i in range(50)] + [stored[50]]
    cards = frozenset() if refunded_lists_cards else frozenset(at(i) for i in range(50))
    read = reconcile(stored, remote, cards_not_refunded_filter=cards)
    if refunded_lists_cards:
        assert read and {w.status for w in read} == {"REFUNDED"}
        assert any(w.start <= at(7) < w.end for w in read)
    else:
        assert read == []


def test_counts_that_do_not_add_up_are_not_trusted() -> None:
    # a service that says 0 for everything: the stored records are read again, not dropped
    stored = [(at(i), "COMPLETED") for i in range(20)]
    pending: plan.Level = [(Window(T0, at(1000)), plan.COUNTED)]
    to_read, deeper = plan.reconcile_level(
        pending, lambda i, s: 0, FakeStored(stored), leaf_records=100, slice_records=50
    )
    assert to_read == [Window(T0, at(1000))] and deeper == []


def test_a_missing_record_is_found_by_the_total() -> None:
    remote = [(at(i), "COMPLETED") for i in range(100)]
    stored = remote[:37] + remote[38:]
    read = reconcile(stored, remote)
    assert any(w.start <= at(37) < w.end for w in read)


def test_point_windows_share_a_window_when_close() -> None:
    instants = [at(1), at(1.5), at(10), at(10)]
    windows = plan.point_windows(instants, timedelta(hours=1), "watch")
    assert windows == [Window(at(1), at(1.5) + TICK), Window(at(10), at(10) + TICK)]
    assert {w.purpose for w in windows} == {"watch"}
    assert plan.point_windows([at(1), at(3)], timedelta(0), "w") == [
        Window(at(1), at(1) + TICK),
        Window(at(3), at(3) + TICK),
    ]


def test_page_span_is_the_time_a_page_of_stored_records_takes() -> None:
    assert plan.page_span(at(0), at(100), 1_000) == timedelta(hours=10)
    assert plan.page_span(at(0), at(100), 50) == timedelta(hours=100)


def test_split_point_halves_what_is_left_only_for_an_idle_worker() -> None:
    assert plan.split_point(at(2), at(4), idle_worker=True) == at(3)
    assert plan.split_point(at(2), at(4), idle_worker=False) is None
    assert plan.split_point(at(2), None, idle_worker=True) is None
    assert plan.split_point(at(2), at(2) + timedelta(milliseconds=10), idle_worker=True) is None


@pytest.mark.parametrize("verify_syncs", [1, 3, 7])
def test_every_record_of_a_growing_range_is_reverified_within_verify_syncs(
    verify_syncs: int,
) -> None:
    # the older range grows at its end (and by late arrivals in its middle) while a round
    # goes on; whatever the record, the gap between two re-reads is at most verify_syncs
    records = [(at(i), "COMPLETED") for i in range(100)]
    state = Verification(None, len(records))
    last_seen: dict[datetime, int] = {t: 0 for t, _ in records}
    end = at(100)
    for sync in range(1, 40):
        records += [(at(100 + 3 * sync + k / 3), "COMPLETED") for k in range(3)]
        records.append((at(sync + 0.5), "COMPLETED"))  # a late arrival
        end = at(100 + 3 * sync + 1)
        older = Window(T0, end)
        stored = FakeStored(records)
        total = sum(stored.counts(older).values())
        share = plan.verify_share(total, state.stored, verify_syncs)
        windows, cursor = plan.verify_windows(state, older, share, stored)
        state = Verification(cursor, total)
        for w in windows:
            for t, _ in stored._in(w):
                last_seen[t] = sync
        for t, _ in stored._in(older):
            last_seen.setdefault(t, sync - 1)  # entered the range just now
            assert sync - last_seen[t] < verify_syncs, (sync, t)


def test_verify_share_reads_a_share_plus_what_entered() -> None:
    assert plan.verify_share(700, 700, 7) == 100
    assert plan.verify_share(710, 700, 7) == 102 + 10
    assert plan.verify_share(5, 0, 7) == 5
    with pytest.raises(ValueError, match="verify_syncs"):
        plan.verify_share(10, 10, 0)


def test_time_slices_cover_the_range_and_what_comes_after() -> None:
    windows = plan.time_slices(at(0), at(10), 1_000, slice_records=100, concurrency=2)
    assert windows[0].start == at(0) and windows[-1] == Window(at(10) + TICK, None)
    assert all(a.end == b.start for a, b in itertools.pairwise(windows))
    assert plan.time_slices(None, at(10), 5, slice_records=100, concurrency=2) == [
        Window(None, None)
    ]


def test_a_round_of_counts_places_the_slices_only_when_they_hold_more_than_a_few_pages() -> None:
    # 16 readers: 20,000 records make 64 slices of ~3 pages, cut by time alone; 100,000 make
    # 64 slices of ~16 pages and 1,000,000 200 slices of 50 pages, placed by counts
    for total in (None, 599, 20_000, 38_400):
        assert not plan.worth_counting(total, slice_records=5_000, concurrency=16), total
    for total in (38_401, 100_000, 1_000_000):
        assert plan.worth_counting(total, slice_records=5_000, concurrency=16), total
    assert plan.slice_count(38_400, slice_records=5_000, concurrency=16) == 64


@pytest.mark.parametrize("crowd", [40, 400])
def test_a_crowded_instant_is_reverified_whole_and_the_round_goes_on(crowd: int) -> None:
    # a bulk payout: more records in one instant than a sync's share; the window takes the
    # whole instant (more than the share) rather than stop at it for good
    records = [(at(1), "COMPLETED")] * crowd + [(at(2 + i), "COMPLETED") for i in range(20)]
    stored = FakeStored(records)
    older = Window(T0, at(100))
    state = Verification(None, len(records))
    last_seen: dict[int, int] = {}
    for sync in range(1, 10):
        share = plan.verify_share(len(records), state.stored, 3)
        windows, cursor = plan.verify_windows(state, older, share, stored)
        assert all(w.start is not None and w.end is not None and w.start < w.end for w in windows)
        state = Verification(cursor, len(records))
        for i, (t, _) in enumerate(records):
            if any(w.start <= t < w.end for w in windows):  # type: ignore[operator]
                last_seen[i] = sync
        assert all(sync - last_seen.get(i, 0) < 3 for i in range(len(records))), sync


def test_a_reverification_window_ends_after_the_whole_instant_of_its_last_record() -> None:
    records = [(at(1), "COMPLETED"), *[(at(2), "COMPLETED")] * 3, (at(3), "COMPLETED")]
    windows, cursor = plan.verify_windows(
        Verification(), Window(T0, at(10)), 2, FakeStored(records)
    )
    assert windows == [Window(T0, at(2) + TICK)] and cursor == at(2) + TICK


def test_statuses_records_were_taken_out_of_are_counted_again() -> None:
    # the pass read FAILED: a COMPLETED payout returned; COMPLETED may hide a late arrival
    before = {"COMPLETED": 28, "FAILED": 0, "SETTLED": 3}
    assert plan.recount(before, {"COMPLETED": 27, "FAILED": 1, "SETTLED": 3}) == ("COMPLETED",)
    assert plan.recount(before, {"COMPLETED": 29, "FAILED": 0, "SETTLED": 3}) == ()
    # what no listed status holds lost records to one: the remainder is counted whole again
    assert plan.recount(before, {"COMPLETED": 29, "SETTLED": 2}) == plan.COUNTED
    # a hold that settled stays in the remainder: nothing to count again
    assert plan.recount({"AUTHORIZED": 1}, {"SETTLED": 1}) == ()


def test_a_windows_end_is_asked_at_the_services_precision() -> None:
    window = Window(at(1), at(2) + TICK)
    assert window.filters()["end_date"] == at(2)  # inclusive: the last microsecond
    assert window.filters(9)["end_date"] == "2025-01-01T02:00:00.000000999Z"
    assert Window(at(1), None).filters(9)["end_date"] is None
