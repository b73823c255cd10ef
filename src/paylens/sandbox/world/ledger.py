"""Internal accounts' balances, moved by the money the world's transactions move.

An internal account's balances are never stored as they change: they are computed from the
records at the clock's time (`Ledger.balances`), so a read at any time agrees with the
transactions the listings show as settled by then. An account starts from its **opening**
balance (`Accounts.balance`: generated, plus what `POST /sandbox/internal-accounts/{id}/fund`
added) and each transaction moves it when its record says the money moved:

- an INCOMING transfer to an internal account credits its `receivedAmount` when it COMPLETES
  (`settledAt`);
- an OUTGOING transfer from an internal account (`source.sourceType` ACCOUNT) debits its whole
  `sentAmount` (the fees are paid within it) when it COMPLETES (`settledAt`), or, when it
  FAILED with a `refund`, when the refund is initiated (`refund.initiatedAt`: the money had
  left); a COMPLETED refund credits the `sentAmount` back at `refund.settledAt`. A transfer that
  failed, expired or was rejected without a refund never moved money;
- a CARD transaction pulls its authorized amount from its funding account (`accountId`) when it
  is authorized (`authorizedAt`), pulls the excess of a clearing above the hold at that clearing
  (a tip: the second pull of `pullSummary`), gives the pull back when the clearing's funding
  pull failed (EXCEPTION: `pullSummary.totalAmount` 0), and credits a merchant return at its
  time (`refundSummary`). A card transaction's amounts are in its funding account's currency.

`totalBalance` ("including pending and held funds", the interface) is the opening plus every
movement above at or before the clock. The available `balance` ("excluding pending and held
funds") is the total less the `sentAmount` of the account's OUTGOING transfers in PROCESSING:
executed (initiated) and not yet settled, the money held for them; it is released when the
transfer settles (the total then drops by it) or fails. Transfers waiting in PENDING (a quote
not executed, a payout waiting for approval or authentication) hold nothing.

A deleted record (`World.delete_transaction`: gone from the service) moves nothing; a record
that has not arrived in the listings yet (`lifecycle.late`) has moved its money already, as
the service posts it whether or not a list shows it.

Opening balances are the generated ones plus every debit the generated history makes from the
account, plus every debit it makes from all the internal accounts of the account's currency
(`Ledger.opening_cover`): no balance goes below its generated amount over the history. The
sandbox refuses no transfer for lack of funds, so a balance goes below zero only when, after
the history's end, one account alone is debited more (net of its credits) than every account
of its currency was over the whole history.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..generate.schema import (
    CARD,
    CARD_EXCEPTION,
    CARD_TIP,
    DEST_ACCOUNT,
    INCOMING,
    NO_CODE,
    OUTGOING,
    REFUND_STATUSES,
    SRC_ACCOUNT,
    STATUS_CODE,
    status_at,
)

if TYPE_CHECKING:
    from .base import WorldBase

_COLUMNS = (
    "kind", "created", "t1", "t2", "t3", "flags", "final", "refund_final", "source_kind",
    "dest_kind", "sender", "receiver", "sent", "received", "clear1", "refund_amount",
)  # fmt: skip
_COMPLETED, _FAILED = STATUS_CODE["COMPLETED"], STATUS_CODE["FAILED"]
_PROCESSING = STATUS_CODE["PROCESSING"]
_REFUND_DONE = REFUND_STATUSES.index("COMPLETED")


def movements(
    cols: dict[str, np.ndarray], internal: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every balance movement the rows of `cols` plan, as (account row, time µs, signed amount)
    arrays (times may lie in the future: a reader keeps those at or before its clock).
    `internal`: per account row, whether it is an internal account."""
    kind, sent = cols["kind"], cols["sent"]
    sender = np.where(cols["sender"] >= 0, cols["sender"], 0)
    receiver = np.where(cols["receiver"] >= 0, cols["receiver"], 0)
    from_account = (cols["sender"] >= 0) & internal[sender]
    incoming = (
        (kind == INCOMING)
        & (cols["final"] == _COMPLETED)
        & (cols["dest_kind"] == DEST_ACCOUNT)
        & (cols["receiver"] >= 0)
        & internal[receiver]
    )
    outgoing = (kind == OUTGOING) & (cols["source_kind"] == SRC_ACCOUNT) & from_account
    refunded = (cols["final"] == _FAILED) & (cols["refund_final"] != NO_CODE)
    debited = outgoing & ((cols["final"] == _COMPLETED) | refunded)
    credited_back = debited & refunded & (cols["refund_final"] == _REFUND_DONE)
    card = (kind == CARD) & from_account
    failed_pull = card & (cols["flags"] & CARD_EXCEPTION != 0)
    tip = card & (cols["flags"] & CARD_TIP != 0) & ~failed_pull
    returned = card & (cols["refund_amount"] != 0)
    parts = [
        (incoming, receiver, cols["t2"], cols["received"]),
        (debited, sender, cols["t2"], -sent),
        (credited_back, sender, cols["t3"], sent),
        (card, sender, cols["created"], -sent),
        (tip, sender, cols["t1"], -(cols["clear1"] - sent)),
        (failed_pull, sender, cols["t1"], sent),
        (returned, sender, cols["t3"], cols["refund_amount"]),
    ]
    return (
        np.concatenate([who[m] for m, who, _, _ in parts]).astype(np.int64),
        np.concatenate([at[m] for m, _, at, _ in parts]).astype(np.int64),
        np.concatenate([amount[m] for m, _, _, amount in parts]).astype(np.int64),
    )


def _held(cols: dict[str, np.ndarray], internal: np.ndarray, now: int | np.ndarray) -> np.ndarray:
    """Which rows of `cols` hold their `sent` on their source account at `now` (one time, or
    one per row)."""
    held: np.ndarray = (
        (cols["kind"] == OUTGOING)
        & (cols["source_kind"] == SRC_ACCOUNT)
        & (cols["sender"] >= 0)
        & internal[np.maximum(cols["sender"], 0)]
        & (status_at(cols, now) == _PROCESSING)
    )
    return held


class Ledger:
    """Each internal account's balances at the clock's time (see the module docstring)."""

    def __init__(self, world: WorldBase) -> None:
        self.world = world
        self._key: tuple[int, ...] | None = None
        self._moved: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        #: per account row, when it was last funded through the interface (0: never)
        self.funded_at = np.zeros(len(world.entities.accounts.external), np.int64)

    def funded(self, row: int) -> None:
        """Account `row` was funded now (its opening balance grew): it changed now."""
        self.funded_at[row] = self.world.now_us

    def _rows(self) -> np.ndarray:
        world = self.world
        return world.lifecycle.kept(np.arange(world.store.n))

    def opening_cover(self) -> np.ndarray:
        """Per account row, what its opening balance gets on top of the generated one: every
        debit the store's rows plan from it, plus every one they plan from the internal
        accounts of its currency (external: 0)."""
        accounts = self.world.entities.accounts
        who, _, amount = movements(
            self.world.store.gather(self._rows(), _COLUMNS), ~accounts.external
        )
        debit = amount < 0
        per_currency = np.zeros(int(accounts.currency.max()) + 1, np.int64)
        np.add.at(per_currency, accounts.currency[who[debit]], -amount[debit])
        own = np.zeros(len(accounts.external), np.int64)
        np.add.at(own, who[debit], -amount[debit])
        return np.where(accounts.external, 0, own + per_currency[accounts.currency])

    def moved(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(what moved each account's total, what its outgoing transfers hold, when its
        balances last changed (µs; 0: never)) at the clock's time, per account row; kept until
        the clock, the rows or a plan change."""
        world, store = self.world, self.world.store
        now = world.now_us
        key = (now, store.n, store.changes, len(world.lifecycle.deleted))
        if self._moved is not None and self._key == key:
            return self._moved
        accounts = world.entities.accounts
        n_accounts = len(accounts.external)
        cols = store.gather(self._rows(), _COLUMNS)
        who, at, amount = movements(cols, ~accounts.external)
        due = at <= now
        total = np.bincount(who[due], amount[due], minlength=n_accounts)
        held_rows = _held(cols, ~accounts.external, now)
        held = np.bincount(cols["sender"][held_rows], cols["sent"][held_rows], minlength=n_accounts)
        # a hold starts when a transfer starts PROCESSING (t1) and ends when it settles (t2)
        holding = _held(cols, ~accounts.external, cols["t1"]) & (cols["t1"] < cols["t2"])
        who = np.concatenate([who[due], np.tile(cols["sender"][holding], 2)])
        at = np.concatenate([at[due], cols["t1"][holding], cols["t2"][holding]])
        last = np.zeros(n_accounts, np.int64)
        np.maximum.at(last, who[at <= now], at[at <= now])
        # bincount sums in float64: exact for sums below 2**53 minor units
        self._moved = (np.rint(total).astype(np.int64), np.rint(held).astype(np.int64), last)
        self._key = key
        return self._moved

    def balances(self) -> tuple[np.ndarray, np.ndarray]:
        """(available `balance`, `totalBalance`) of every account row now (external: 0)."""
        total_moved, held, _ = self.moved()
        total = self.world.entities.accounts.balance + total_moved
        return total - held, total

    def balances_without(self, row: int) -> tuple[np.ndarray, np.ndarray]:
        """`balances()` as they were before transaction `row` existed (it moves no more)."""
        available, total = self.balances()
        accounts = self.world.entities.accounts
        cols = self.world.store.gather(np.array([row]), _COLUMNS)
        who, at, amount = movements(cols, ~accounts.external)
        due = at <= self.world.now_us
        total = total.copy()
        np.subtract.at(total, who[due], amount[due])
        available = available.copy()
        np.subtract.at(available, who[due], amount[due])
        if _held(cols, ~accounts.external, self.world.now_us)[0]:
            available[int(cols["sender"][0])] += int(cols["sent"][0])
        return available, total

    def changed_at(self) -> np.ndarray:
        """Per account row, when its balances last changed (µs): created, funded or moved."""
        accounts = self.world.entities.accounts
        changed: np.ndarray = np.maximum(
            np.maximum(accounts.created, self.funded_at), self.moved()[2]
        )
        return changed

    def balance_of(self, row: int) -> tuple[int, int, int]:
        """(available, total, when they last changed) of account `row` now (scalar work per
        account beyond the kept sums: a page of accounts renders each)."""
        total_moved, held, last = self.moved()
        accounts = self.world.entities.accounts
        total = int(accounts.balance[row]) + int(total_moved[row])
        changed = max(int(accounts.created[row]), int(self.funded_at[row]), int(last[row]))
        return total - int(held[row]), total, changed
