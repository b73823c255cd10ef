"""The incremental sync of transactions (and the smaller resources) into the warehouse.

The list endpoint filters by creation date, by `status` (a TransactionStatus: no card status)
and by `type` (INCOMING or OUTGOING; card transactions are listed, never selected), while
records change after they are created. So a sync, on top of what it stored before:

1. resumes the windows a killed or Ctrl-C'd run left unfinished (each committed batch moved
   its checkpoint); when that run was reading everything, what is left of its full read is
   this run's full read (no new slices, no incremental steps over half a read);
2. re-reads the *recent* window (from `recent` before the newest stored record): new records
   and the latest changes of young ones;
3. re-reads, in the older range before it, every transfer the service lists in an *open*
   status (CREATED, PENDING, PENDING_AUTHORIZATION, PROCESSING);
4. re-reads by themselves the records no listing can show have changed: transfers stored in
   an open status that step 3 did not bring back (they left it), open card holds
   (AUTHORIZED, PARTIALLY_SETTLED) still younger than `hold_window` at the last sync, FAILED
   transfers whose refund is still under way, and quarantined records;
5. *reconciles* the older range: compares the service's `totalCount` per listed status per
   window with the stored counts and bisects where they differ, down to windows small enough
   to re-read filtered by the status that gained. What no listed status holds (card
   transactions, REFUNDED, unknown statuses) is one remainder: where the service's remainder
   holds more, the window is read whole. REFUNDED is also counted against every stored record
   in it: a service whose filter selects card transactions too shows card returns so. Counts
   that do not add up are not trusted: the window is re-read. Then the statuses these reads
   took stored records out of are counted again, and so on (`plan.recount`, at most
   `plan.RECOUNTS` more passes): a record that left a status may have hidden an arrival in it;
6. re-verifies a rolling share of the older range (`verify_syncs`, default 7): what no listing
   and no count can reveal (a field of a record in a terminal status changing without its
   status, such as a receipt confirmation; a card hold settling after `hold_window`) is read
   again within `verify_syncs` syncs. A share ends after the whole instant of its last
   record: records created in one instant are read together, more than a share if need be.
7. reads by id the stored records that a range this run listed whole (no status filter: the
   recent window, a share of the re-verification, a window the reconciliation read whole,
   every slice of a full sync) did not bring back; those the service answers 404 for keep
   their rows with `removed_at` set (`save.unlisted`, `save.mark_removed`). A gap in a
   listing alone never removes a record, and one read again is current again. The counts
   take current records only, so a record that vanishes from the older range makes them
   differ, and the reads of the reconciliation bring its range whole, the same sync.

Windows are [start, end) in whole microseconds, the unit instants are stored in (a finer
`createdAt` is cut to its microsecond, so a window holds the same records by stored instants
as by the service's). The interface's `startDate` and `endDate` are inclusive: each window is
asked up to the last instant before its end at the finest precision the service was seen to
write a `createdAt` with (`fetch.Service.digits`, kept in the warehouse's meta), so a record
created within a microsecond never falls between two windows.

So after every sync each transfer's status is the service's (for the records the service
lists, and serves readable), as is each card transaction's that is recent, a young hold or
refunded; any other difference is gone within `verify_syncs` syncs; a `full=True` sync
re-reads everything at once. An empty warehouse is read in full. (A record leaving a terminal
status, as a payout returned from COMPLETED to FAILED, can hide an arrival in the status it
left: the counts of that status do not move. Its new status gains, and once that is read the
status it left is counted again and shows the arrival. Counts still hide a change where the
moves cancel out and no status gains: records swapping statuses both ways, or a record that
vanishes as another arrives in its status and window, which the interface's lifecycles do not
show; should a service do it, the re-verification bounds how long such a difference lasts.)

With webhooks, each sync first folds in the events the receiver stored beside the warehouse
(`events`): every transition they carry is exact after that sync, card holds past
`hold_window` included, and while the receivers show no gap the re-verification runs at the
slower `verify_syncs_with_events` (see `events` and docs/guarantees.md).

The parts: `plan` (pure: which windows to read), `fetch` (generators of pages and landings),
`save` (typed batches, each committed with its checkpoint; the questions about what is stored),
`run` (the pool of readers and the writer); `catalog` declares every resource once (what the
store, the fetch, `Freshness`, the CLI and the readers derive); for the smaller resources,
`freshness` (when each
is read whole), `resources` (reading them: customers by what changed, the others whole, on the
same pool) and `resource_save` (typing and landing them).
"""

from datetime import UTC, datetime

from .catalog import SMALL_RESOURCES
from .freshness import Freshness
from .resources import ResourceResult, ResourceSync
from .run import SyncOptions, TransactionSync

__all__ = [
    "SMALL_RESOURCES",
    "Freshness",
    "ResourceResult",
    "ResourceSync",
    "SyncOptions",
    "TransactionSync",
    "utcnow",
]


def utcnow() -> datetime:
    return datetime.now(UTC)
