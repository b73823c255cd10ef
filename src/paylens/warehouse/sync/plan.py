"""Which windows of creation time to read: pure functions of what is stored and what the service
counts (no I/O; `run` asks the questions and reads what these answer).

A window is a range of `createdAt`, optionally with one status (the list endpoint filters by
nothing else that helps). Counts come from two sides: `Stored` answers about the warehouse,
a count function about the service (its `totalCount`, `None` when it does not say).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from paylens import models
from paylens.errors import InvalidArgumentError

#: The statuses the list endpoint's `status` filter selects exactly: the interface's
#: TransactionStatus values but REFUNDED, the one name card transactions share (whether the
#: filter then selects card transactions too, the interface does not say). Card statuses and
#: REFUNDED are counted together, as the remainder of a window's total.
LISTED_STATUSES = tuple(sorted(set(models.TransactionStatus) - {"REFUNDED"}))
#: Counted beside the listed statuses, against every stored record in it: a service whose
#: REFUNDED filter selects card transactions too then shows card returns by its count; one
#: whose filter does not never counts more than is stored, and costs nothing.
SHARED_STATUS = "REFUNDED"
#: What each window of the reconciliation is counted by (None: its total).
COUNTED = (None, *LISTED_STATUSES, SHARED_STATUS)
#: Listed statuses a transfer can still leave; records in them are listed on every sync.
OPEN_STATUSES = ("CREATED", "PENDING", "PENDING_AUTHORIZATION", "PROCESSING")
#: Card statuses a card transaction can still leave. No filter lists them: open holds are
#: re-read by themselves while young (`SyncOptions.hold_window`), later by the re-verification.
OPEN_CARD_STATUSES = ("AUTHORIZED", "PARTIALLY_SETTLED")
#: Refund statuses after which a FAILED transfer no longer changes.
TERMINAL_REFUND_STATUSES = ("COMPLETED", "FAILED")
#: A stored instant's unit: a window's bounds are whole microseconds, and a record created
#: within a microsecond (a service may write nanoseconds) is stored at its start, so a window
#: [start, end) holds the same records whether its bounds are compared with stored instants or
#: with the service's own.
TICK = timedelta(microseconds=1)
#: Fraction digits of a microsecond, the fewest a window's end is asked with.
MICRO_DIGITS = 6
#: A window's remaining range is not split below this.
MIN_SPLIT = timedelta(seconds=1)
#: Fewest records a time slice is cut for (a few pages: smaller slices add partial pages).
SLICE_MIN = 300
#: Records a time slice holds on average above which a round of counts places the slices.
COUNTED_SLICE_RECORDS = 2 * SLICE_MIN
#: Records a listing page holds (the service's largest page).
PAGE_RECORDS = 100


@dataclass
class Window:
    """Records created in [start, end) (either open), optionally with one status. `purpose`
    says why it is read (for the report's costs); it is not part of the window's identity."""

    start: datetime | None
    end: datetime | None
    status: str | None = None
    purpose: str = field(default="", compare=False)

    @property
    def key(self) -> str:
        return f"{self.start}|{self.end}|{self.status or ''}"

    def filters(self, digits: int = MICRO_DIGITS) -> dict[str, Any]:
        """The list endpoint's filters. Its `startDate` and `endDate` are both inclusive: the
        end asked is the last instant before `end` that the service can write, at `digits`
        fraction digits (the finest it was seen to write, at least microseconds); a service
        writing nanoseconds is asked up to `end` minus one nanosecond, not one microsecond."""
        return {
            "start_date": self.start,
            "end_date": None if self.end is None else last_before(self.end, digits),
            "status": self.status,
        }


def last_before(end: datetime, digits: int) -> datetime | str:
    """The last instant before `end` (a whole microsecond) written with `digits` fraction
    digits: a datetime when microseconds do, else its text (a datetime holds no finer)."""
    if digits <= MICRO_DIGITS:
        return end - TICK
    text = (end - TICK).astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds")
    return f"{text}{'9' * (digits - MICRO_DIGITS)}Z"


class Stored(Protocol):
    """What the plan needs to know of the warehouse (within a window)."""

    def counts(self, window: Window) -> dict[str | None, int]: ...

    def oldest(self, window: Window) -> datetime | None: ...

    def newest_in(self, window: Window) -> datetime | None: ...

    def median(self, window: Window) -> datetime | None: ...

    def nth(self, window: Window, n: int) -> datetime | None:
        """The creation time of the stored record after the first `n` of the window (None
        when it holds no more than `n`)."""
        ...


def cut(window: Window, count: int) -> list[Window]:
    """A bounded window cut into `count` windows of equal length (same status and purpose)."""
    assert window.start is not None and window.end is not None
    step = (window.end - window.start) / count
    bounds = [window.start + step * i for i in range(count)] + [window.end]
    return [Window(a, b, window.status, window.purpose) for a, b in itertools.pairwise(bounds)]


def slice_count(total: int | None, *, slice_records: int, concurrency: int) -> int:
    """Enough slices (4 per worker) to keep every worker busy to the end, none much over
    `slice_records`, none under a few pages."""
    wanted = max(-(-(total or 0) // slice_records), 4 * concurrency)
    return max(1, min(4096, wanted, -(-(total or 0) // SLICE_MIN)))


def worth_counting(total: int | None, *, slice_records: int, concurrency: int) -> bool:
    """Whether a full read of `total` records should place its slices by a round of counts
    (`balanced_slices`): only when its slices hold more than a few pages each. The round costs a
    round trip and `concurrency` requests before the first page is read; slices of a few pages
    cut by time alone cost about as much at their end, since an idle worker takes the later
    half of what a busy one has left (`split_point`)."""
    count = slice_count(total, slice_records=slice_records, concurrency=concurrency)
    return (total or 0) > count * COUNTED_SLICE_RECORDS


def time_slices(
    start: datetime | None,
    newest: datetime | None,
    total: int | None,
    *,
    slice_records: int,
    concurrency: int,
) -> list[Window]:
    """Time slices of [start, newest] sized for about `slice_records` each, plus an
    open-ended tail for what arrives after `newest`."""
    if start is None or newest is None or newest <= start:
        return [Window(start, None)]
    count = slice_count(total, slice_records=slice_records, concurrency=concurrency)
    return [*cut(Window(start, newest + TICK), count), Window(newest + TICK, None)]


def balanced_slices(
    parts: Sequence[Window], counts: Sequence[int], newest: datetime, *, per_slice: float
) -> list[Window]:
    """Each part cut in proportion to its count (about `per_slice` records a slice), the
    largest slices first, and the open tail after `newest`: time slices of equal length hold
    very unequal counts when activity grows, and the last dense slice would be read alone."""
    sized: list[tuple[float, Window]] = []
    for part, count in zip(parts, counts, strict=True):
        pieces = max(1, round(count / per_slice))
        sized += [(count / pieces, piece) for piece in cut(part, pieces)]
    sized.sort(key=lambda item: -item[0])
    return [piece for _, piece in sized] + [Window(newest + TICK, None)]


def split_point(
    resume: datetime | None, end: datetime | None, *, idle_worker: bool
) -> datetime | None:
    """Where a window being read hands the rest of its range to an idle worker: halfway from
    its last record to its end (None: it does not split; there is no idle worker, or too
    little is left). Slices are cut by time, not by count: without this the last dense
    slice would be read alone, one page per round trip."""
    if not idle_worker or end is None or resume is None or end - resume < MIN_SPLIT:
        return None
    return resume + (end - resume) / 2


def explained(remote: dict[str | None, int | None], local: dict[str | None, int]) -> bool:
    """Whether per-status counts account for every change on both sides, so moves between
    statuses can be found from the listed statuses that gained. What no listed status holds
    (card transactions, REFUNDED, statuses paylens does not know) is one remainder on each
    side: it may lose records (they reappear in a listed status that gained, or are gone), but
    where the service's remainder holds more than the stored one, no filter can say which
    records came: the window must be read whole."""
    if any(count is None for count in remote.values()):
        return False
    total = remote[None] or 0
    stored = sum(local.values())
    remote_rest = total - sum(remote[s] or 0 for s in LISTED_STATUSES)
    local_rest = stored - sum(local.get(s, 0) for s in LISTED_STATUSES)
    return 0 <= remote_rest <= local_rest and total >= stored


def halves(window: Window, stored: Stored) -> list[Window]:
    """Two windows splitting this one at the stored records' median (an open start is split
    at the oldest stored record); none when it cannot be split further."""
    if window.start is None:
        oldest = stored.oldest(window)
        return [Window(None, oldest), Window(oldest, window.end)] if oldest else []
    end = window.end or stored.newest_in(window)
    if end is None or end - window.start <= timedelta(seconds=2):
        return []
    middle = stored.median(window)
    if middle is None or not window.start < middle < end:
        middle = window.start + (end - window.start) / 2
    return [Window(window.start, middle), Window(middle, window.end)]


def sized(window: Window, total: int, slice_records: int) -> list[Window]:
    """A window to re-read, cut into slices of about `slice_records` to page concurrently."""
    if total <= slice_records or window.start is None or window.end is None:
        return [window]
    return cut(window, -(-total // slice_records))


Level = list[tuple[Window, tuple[str | None, ...]]]


def reconcile_level(
    pending: Level,
    remote: Callable[[int, str | None], int | None],
    stored: Stored,
    *,
    leaf_records: int,
    slice_records: int,
) -> tuple[list[Window], Level]:
    """One level of the reconciliation: for each (window, statuses) of `pending`, compare the
    service's count per status (`remote(i, status)`) with the stored one; answer the windows
    to read now and the (window, statuses) to look at more closely next.

    A record that changed status is counted in its new status: where the service counts more
    records in a status than are stored, reading the window *filtered by that status* brings
    every record that moved into it (and new ones), and so also fixes the status it left. Such
    a read is narrowed by bisecting on that status's count until it is small. Where per-status
    counts cannot explain the totals (records in statuses paylens does not know, fewer records
    than stored, counts that do not add up, a remainder that gained), the whole window is
    bisected and re-read: a count is never trusted over the data. REFUNDED, the status card
    transactions share, is compared with every stored record in it (see `SHARED_STATUS`)."""
    to_read: list[Window] = []
    next_level: Level = []
    for i, (w, statuses) in enumerate(pending):
        local = stored.counts(w)
        counts = {status: remote(i, status) for status in statuses}
        missing = (counts.get(None) or 0) - sum(local.values())
        whole = None in statuses and (not explained(counts, local) or missing > leaf_records)
        if whole:  # the statuses cannot tell what moved, or the window is mostly missing
            size = max(sum(local.values()), counts[None] or 0)
            parts = halves(w, stored) if size > leaf_records else []
            next_level += [(part, COUNTED) for part in parts]
            to_read += [] if parts else sized(w, size, slice_records)
            continue
        for status in statuses:
            wanted = counts.get(status)
            if status is None or wanted is None or wanted <= local.get(status, 0):
                continue
            parts = halves(w, stored) if wanted > leaf_records else []
            next_level += [(part, (status,)) for part in parts]
            if not parts:
                to_read += sized(Window(w.start, w.end, status), wanted, slice_records)
    return to_read, next_level


#: Passes of the reconciliation after its first, at most (see `recount`): each follows a
#: record out of a status, and a chain of such moves is no longer than there are statuses.
RECOUNTS = len(COUNTED)


def recount(before: dict[str | None, int], after: dict[str | None, int]) -> tuple[str | None, ...]:
    """What to count again after a pass of the reconciliation that took the stored counts of a
    range from `before` to `after`: the statuses its reads took stored records out of.

    A status can hide an arrival behind a record that left it: a COMPLETED transfer arriving
    late where a COMPLETED payout is returned (FAILED) leaves the COMPLETED count as it was,
    and the total's gain is the FAILED one. Once the pass stored the move, the status shows
    the arrival as a gain; counted again, it is read. A remainder that lost records to listed
    statuses is counted again as a whole (`COUNTED`): it may hide an arrival just the same."""

    def rest(counts: dict[str | None, int]) -> int:
        return sum(n for s, n in counts.items() if s not in LISTED_STATUSES and s != SHARED_STATUS)

    if rest(after) < rest(before):
        return COUNTED
    return tuple(s for s in (*LISTED_STATUSES, SHARED_STATUS) if after.get(s, 0) < before.get(s, 0))


def point_windows(instants: Sequence[datetime], span: timedelta, purpose: str) -> list[Window]:
    """Windows covering records created at `instants` (sorted): instants closer than `span`
    share a window, so records created close together cost one listing, not one each."""
    windows: list[Window] = []
    for instant in instants:
        if windows and windows[-1].start is not None and instant - windows[-1].start <= span:
            windows[-1].end = max(windows[-1].end or instant, instant + TICK)
        else:
            windows.append(Window(instant, instant + TICK, purpose=purpose))
    return windows


def page_span(start: datetime | None, end: datetime | None, stored: int) -> timedelta:
    """How long, on average, the stored records of [start, end) take to fill a page."""
    if start is None or end is None or stored <= PAGE_RECORDS:
        return timedelta(0) if start is None or end is None else end - start
    return (end - start) * (PAGE_RECORDS / stored)


@dataclass(frozen=True)
class Verification:
    """Where the rolling re-verification of the older range stands: this round has re-read
    it up to `cursor` (None: a round starts), and it held `stored` records at the last sync."""

    cursor: datetime | None = None
    stored: int = 0


def verify_share(stored: int, before: int, verify_syncs: int) -> int:
    """Records to re-verify in one sync so that a round over the older range (`stored`
    records now, `before` at the last sync) takes at most `verify_syncs` syncs: a share of
    what is there, plus what entered since the last sync (the range grows while a round goes
    on). Over any `verify_syncs` syncs the shares add up to at least the range at the first
    of them plus all that entered, so every record is re-read within `verify_syncs` syncs."""
    if verify_syncs < 1:
        raise InvalidArgumentError("verify_syncs", "must be at least 1")
    return min(stored, math.ceil(stored / verify_syncs) + max(0, stored - before))


def verify_windows(
    state: Verification, older: Window, share: int, stored: Stored
) -> tuple[list[Window], datetime | None]:
    """The windows of the next `share` stored records of `older` from the cursor on (going
    round to its start when the end is reached), and where the cursor then stands. A window
    ends after the whole instant of its last record: records created in one instant (a bulk
    payout) are read together, so a crowd larger than the share is read at once rather than
    never, and each sync reads at least its share."""
    if share <= 0 or older.end is None:
        return [], state.cursor
    cursor = state.cursor
    if cursor is None or (older.start is not None and cursor < older.start) or cursor >= older.end:
        cursor = older.start
    windows: list[Window] = []
    first = Window(cursor, older.end)
    stop = _after_nth(stored, first, share)
    if stop is not None:
        return [Window(cursor, stop, purpose="verify")], stop
    windows.append(Window(cursor, older.end, purpose="verify"))
    left = share - sum(stored.counts(first).values())
    if left > 0 and cursor != older.start:
        head = Window(older.start, cursor)
        stop = _after_nth(stored, head, left)
        windows.append(Window(older.start, stop if stop is not None else cursor, purpose="verify"))
        return windows, stop
    return windows, None


def _after_nth(stored: Stored, window: Window, n: int) -> datetime | None:
    """Just after the instant of the `n`th stored record of `window` (n >= 1), so the records
    created with it are taken too; None when the window holds no more than `n` (it is taken
    whole). Never beyond the window's end: records are stored at whole microseconds."""
    last = stored.nth(window, n - 1)
    if last is None or stored.nth(window, n) is None:
        return None
    return last + TICK
