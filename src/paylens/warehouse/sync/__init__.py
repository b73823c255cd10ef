"""The incremental sync of transactions (and the smaller resources) into the warehouse.

The list endpoint filters by creation date (and status) only, while records change after they
are created. So a sync, on top of what it stored before:

1. resumes the windows a killed run left unfinished (each committed batch moved its checkpoint);
2. re-reads the *recent* window (from `recent` before the newest stored record): new records
   and the latest changes of young ones;
3. re-reads, in the older range before it, every record the service lists in a *non-terminal*
   status (pending, processing, authorized, partially settled, ...): such records change
   without leaving their status (a card hold settling in parts);
4. re-reads by themselves the records no listing can show have changed: those stored in a
   non-terminal status that step 3 did not bring back (they left it), FAILED transfers whose
   refund is still under way, and quarantined records (the service may serve them fixed);
5. *reconciles* the older range: compares the service's `totalCount` per status per window
   with the stored counts and bisects where they differ, down to windows small enough to
   re-read; a record that changed between terminal statuses moves between two counts, a
   record that arrived late shows as a missing one. Counts that do not add up are not
   trusted: the window is re-read;
6. re-verifies a rolling share of the older range (`verify_syncs`, default 7): what no listing
   and no count can reveal (a field of a record in a terminal status changing without its
   status, such as a receipt confirmation) is read again within `verify_syncs` syncs.

So after every sync each record's status is the service's (for the records the service
lists, and serves readable), and any other difference is gone within `verify_syncs` syncs; a
`full=True` sync re-reads everything at once. An empty warehouse is read in full. (Counts can
hide moves only if records also move the opposite way between terminal statuses, or vanish,
which the interface's lifecycles never do; should a service do it, the re-verification still
bounds how long such a difference lasts.)

The parts: `plan` (pure: which windows to read), `fetch` (generators of pages and landings),
`save` (typed batches, each committed with its checkpoint; the questions about what is stored),
`run` (the pool of readers and the writer), `resources` (the smaller resources).
"""

from .resources import SMALL_RESOURCES, sync_small_resource, utcnow
from .run import SyncOptions, TransactionSync

__all__ = ["SMALL_RESOURCES", "SyncOptions", "TransactionSync", "sync_small_resource", "utcnow"]
