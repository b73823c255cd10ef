"""What other actors do to the sandbox's records while its clock moves, beside the planned events.

The planned events (`generate.schema.status_at`) already settle and refund card transactions, fail,
refund and complete transfers. A real service also sees, between two reads of its data:

- **approvals**: the platform's operators approve or reject agent-initiated payouts waiting for
  them (`approvals`: the share of waiting payouts decided at each advance, half each way);
- **receipt confirmations**: a receiver confirms delivery of a transfer completed days ago
  (`receipts`: confirmations per advance, on COMPLETED transfers older than `receipt_age`) —
  a field of a record in a terminal status changing without its status;
- **late arrivals**: a record the list endpoint shows only `late_by` after its `createdAt`, as
  a lagging list index does (`late`: the share of new records that arrive late). They are
  readable by id at once; listings, counts and `World.all_transactions` leave them out until
  they arrive.

Everything is off by default, so a sandbox behaves as its plans say; turn it on with
`world.lifecycle.configure(approvals=0.5, receipts=3, late=0.2)`. The draws come from the seed,
so a run repeats.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING

import numpy as np

from ..generate.schema import AWAITING_APPROVAL, CARD, STATUS_CODE

if TYPE_CHECKING:
    from .store import RowSet
    from .world import World

_STREAM_LIFECYCLE = 5  # after the world's own five random streams


@dataclass
class Lifecycle:
    """Changes made by others at each `World.advance`; see the module docstring."""

    world: World = field(repr=False)
    approvals: float = 0.0
    receipts: int = 0
    receipt_age: timedelta = timedelta(days=3)
    late: float = 0.0
    late_by: timedelta = timedelta(days=3)
    _advances: int = 0
    _seen: int = 0  # rows that existed at the last advance
    _hidden: dict[int, int] = field(default_factory=dict)  # row -> when it arrives (us)
    #: rows deleted by a test (`World.delete_transaction`): never listed, 404 by id
    deleted: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self._seen = self.world.store.n

    def configure(self, **settings: float | int | timedelta) -> Lifecycle:
        for name, value in settings.items():
            if name.startswith("_") or name == "world" or not hasattr(self, name):
                raise TypeError(f"unknown lifecycle setting {name!r}")
            setattr(self, name, value)
        return self

    def advance(self) -> dict[str, int]:
        """Act at the world's new clock time (called by `World.advance` once it has moved);
        returns counts of what was done."""
        w, s = self.world, self.world.store
        rng = np.random.default_rng([w.seed % 2**64, _STREAM_LIFECYCLE, self._advances])
        self._advances += 1
        counts = {"late": self._delay(rng, np.arange(self._seen, s.n))}
        self._seen = s.n
        self._arrive()
        counts |= self._decide(rng)
        counts["receipts"] = self._confirm(rng)
        return {k: v for k, v in counts.items() if v}

    def _delay(self, rng: np.random.Generator, rows: np.ndarray) -> int:
        if not self.late or not len(rows):
            return 0
        late = rows[rng.random(len(rows)) < self.late]
        arrives = self.world.store.col("created")[late] + self.late_by // timedelta(microseconds=1)
        self._hidden.update(zip(late.tolist(), arrives.tolist(), strict=True))
        return len(late)

    def _arrive(self) -> None:
        now = self.world.now_us
        self._hidden = {row: at for row, at in self._hidden.items() if at > now}

    def _decide(self, rng: np.random.Generator) -> dict[str, int]:
        if not self.approvals:
            return {}
        s = self.world.store
        waiting = np.flatnonzero(
            (s.col("flags") & AWAITING_APPROVAL != 0) & (s.col("status") == STATUS_CODE["PENDING"])
        )
        waiting = self.kept(waiting)
        chosen = waiting[rng.random(len(waiting)) < self.approvals]
        approve = rng.random(len(chosen)) < 0.5
        for row, yes in zip(chosen.tolist(), approve.tolist(), strict=True):
            wire_id = self.world.tx.transactions(np.array([row]), self.world.now_us)[0]["id"]
            (self.world.approve if yes else self.world.reject)(wire_id)
        return {"approved": int(approve.sum()), "rejected": int((~approve).sum())}

    def _confirm(self, rng: np.random.Generator) -> int:
        if not self.receipts:
            return 0
        s = self.world.store
        old_enough = self.world.now_us - self.receipt_age // timedelta(microseconds=1)
        candidates = np.flatnonzero(
            (s.col("kind") != CARD)
            & (s.col("status") == STATUS_CODE["COMPLETED"])
            & (s.col("receipt") == 0)
            & (s.col("created") < old_enough)
        )
        candidates = self.kept(candidates)
        chosen = rng.choice(candidates, min(self.receipts, len(candidates)), replace=False)
        for row in np.sort(chosen).tolist():
            wire_id = self.world.tx.transactions(np.array([row]), self.world.now_us)[0]["id"]
            self.world.confirm_receipt(wire_id, None)
        return len(chosen)

    def kept(self, rows: np.ndarray) -> np.ndarray:
        """`rows` without the deleted ones: nobody acts on a record that is gone."""
        if not self.deleted:
            return rows
        return rows[~np.isin(rows, np.fromiter(self.deleted, np.int64))]

    def delete(self, row: int) -> None:
        """The record of `row` is gone: no listing, count or read by id shows it again."""
        self.deleted.add(row)
        self._hidden[row] = 2**62

    # -- what the list endpoint shows ----------------------------------------------------------

    def listed(self, rows: RowSet) -> RowSet:
        """`rows` without the records that have not arrived yet."""
        if not self._hidden or not len(rows):
            return rows
        from .store import RowSet

        every = rows.rows if rows.rows is not None else np.arange(rows.lo, rows.hi)
        return RowSet.of(every[~np.isin(every, np.fromiter(self._hidden, np.int64))])

    @property
    def unlisted(self) -> int:
        """Records that have not arrived in the listings yet."""
        return len(self._hidden)

    def listed_rows(self, rows: np.ndarray) -> np.ndarray:
        if not self._hidden:
            return rows
        return rows[~np.isin(rows, np.fromiter(self._hidden, np.int64))]
