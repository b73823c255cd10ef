"""What every part of the `World` shares: its state (declared here, made by `World.__init__`)
and the few steps its operations have in common (change a row, execute a quote, the time of a
change)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..clock import whole_ms
from ..generate.arrivals import Arrivals
from ..generate.entities import (
    Entities,
)
from ..generate.schema import AWAITING_APPROVAL, STATUS_CODE
from ..generate.transactions import settle_durations
from .entities import EntityViews
from .events import Transition, TransitionHook, row_transitions
from .idempotency import IdempotencyKeys
from .ledger import Ledger
from .lifecycle import Lifecycle
from .render import TransactionViews
from .store import TransactionStore
from .wallets import WalletAuth


class WorldBase:
    """The world's state and shared steps; `World` composes the operations built on it."""

    seed: int
    _now: int
    _start: int
    _mix: np.ndarray
    fee_config: tuple[int, int, int]
    entities: Entities
    views: EntityViews
    _arrivals: Arrivals
    _per_weight: float
    store: TransactionStore
    tx: TransactionViews
    _calls: np.random.Generator
    platform_id: str
    config_id: str
    wallets: WalletAuth
    idempotency: IdempotencyKeys
    _advances: int
    lifecycle: Lifecycle
    ledger: Ledger
    #: called with each transition of a record (see `events`); None: nobody listens
    on_transition: TransitionHook | None = None
    #: posts the TEST webhook and answers the TestWebhookResponse (`POST /sandbox/webhooks/test`);
    #: None: no webhook endpoint is configured
    test_webhook: Callable[[], dict[str, Any]] | None = None

    @property
    def now_us(self) -> int:
        return self._now

    def _status(self, row: int) -> int:
        return int(self.store.col("status")[row])

    def _update(self, row: int, **values: Any) -> None:
        """Change fields of a row through the interface: the store re-plans it and its kept
        wire text is dropped."""
        rows = np.array([row])
        before = self.store.col("status")[rows].copy()
        listening = self.on_transition is not None
        was = self.tx.snapshot(rows, self._now)[0] if listening else None
        balances = self.ledger.balances() if listening else None
        self.store.update(row, self._now, **values)
        self.tx.forget(row)
        if was is not None:  # announced unless the record reads as it did
            found = row_transitions(
                self, rows, self._now - 1, self._now, before=before, always=True
            )
            self.announce([t for t in found if t.record != was])
        if balances is not None:
            self.announce(self.balance_transitions(balances))

    def balance_transitions(self, before: tuple[np.ndarray, np.ndarray]) -> list[Transition]:
        """`INTERNAL_ACCOUNT.BALANCE_UPDATED` of each internal account whose (available, total)
        balances differ from `before` (`ledger.balances()` earlier), with the account as it
        reads now, at its last change (its `updatedAt`)."""
        available, total = self.ledger.balances()
        changed = np.flatnonzero((available != before[0]) | (total != before[1]))
        at = self.ledger.changed_at()
        return [
            Transition(
                "internal_account",
                "INTERNAL_ACCOUNT.BALANCE_UPDATED",
                self.views.internal_account(i),
                int(at[i]) // 1000 * 1000,
            )
            for i in changed.tolist()
        ]

    def announce(self, transitions: list[Transition]) -> None:
        """Hand `transitions` to the hook, in order (nothing when no hook is installed)."""
        hook = self.on_transition
        if hook is None:
            return
        for transition in transitions:
            hook(transition)

    def announce_new(self, row: int) -> None:
        """Announce a transaction row the interface just created (and its steps up to now)."""
        if self.on_transition is not None:
            rows = np.array([row])
            created = int(self.store.col("created")[row])
            self.announce(row_transitions(self, rows, created - 1, self._now, born=rows))
            self.announce(self.balance_transitions(self.ledger.balances_without(row)))

    def _touch(self) -> int:
        """The time of a change made now, at whole milliseconds."""
        return whole_ms(self._now)

    @property
    def call_rng(self) -> np.random.Generator:
        """The random stream of changes made through the interface."""
        return self._calls

    def move_clock_to(self, at: int) -> None:
        """Move the clock forward to `at` (µs) without running `advance` (a record created now
        whose time must follow the previous record's)."""
        self._now = max(self._now, at)

    def update_row(self, row: int, **values: Any) -> None:
        """Change fields of a row through the interface (see `_update`)."""
        self._update(row, **values)

    def execute_row(self, row: int) -> None:
        """Execute the quote of an OUTGOING row now (it then settles on its rail)."""
        self._execute(row)

    def _fail_now(self, row: int, failure: int) -> None:
        """An outgoing row FAILED now with `failure` (an OUT_FAILURE_CODE): nothing exchanged."""
        t = self._touch()
        self._update(
            row,
            t1=t,
            t2=t,
            final=STATUS_CODE["FAILED"],
            failure=failure,
            touched=t,
            flags=int(self.store.col("flags")[row]) & ~AWAITING_APPROVAL,
        )

    def _execute(self, row: int) -> None:
        s = self.store
        t = self._touch()
        duration = (
            int(settle_durations(self._calls, np.array([s.col("channel")[row]]))[0]) // 1000 * 1000
        )
        self._update(
            row,
            t1=t,
            t2=t + duration,
            final=STATUS_CODE["COMPLETED"],
            touched=t,
            flags=int(s.col("flags")[row]) & ~AWAITING_APPROVAL,
        )
