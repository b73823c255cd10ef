"""The world's transactions: lookup, the filtered selection behind the list, and the
platform's actions on one (cancel, approve, reject, confirm receipt); see `world.world` for the
rules where the specification is silent."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import numpy as np

from ..clock import from_us, whole_ms
from ..currencies import (
    CANCELLABLE_CHANNELS,
    N_RAILS,
    PAYMENT_RAILS,
)
from ..errors import ServiceError, invalid
from ..generate.entities import (
    parse_uuid,
)
from ..generate.schema import (
    ACH_PULL,
    AWAITING_APPROVAL,
    CARD,
    IN_FAILURE_CODE,
    INCOMING,
    NO_CODE,
    OUT_FAILURE_CODE,
    OUTGOING,
    STATUS_CODE,
    STATUSES,
)
from .base import WorldBase
from .incoming import approve_incoming, reject_incoming
from .render import WireRows, hi_of_reference, shows_reference
from .store import RowSet

_TERMINAL = frozenset(
    {
        STATUS_CODE["COMPLETED"],
        STATUS_CODE["FAILED"],
        STATUS_CODE["EXPIRED"],
        STATUS_CODE["REJECTED"],
        STATUS_CODE["REFUNDED"],
    }
)


class TransactionOps(WorldBase):
    """The transaction operations of `World`."""

    # --- ground truth ---------------------------------------------------------------------

    def all_transactions(self) -> Iterator[dict[str, Any]]:
        """Every transaction as the list endpoint returns it, in ascending (createdAt, id)."""
        for first in range(0, self.store.n, 2000):
            yield from self.tx.transactions(
                self.lifecycle.listed_rows(np.arange(first, min(first + 2000, self.store.n))),
                self._now,
            )

    def transaction_count(self) -> int:
        return self.store.n - self.lifecycle.unlisted

    def get_transaction_wire(self, transaction_id: str) -> dict[str, Any]:
        return self.tx.transactions(np.array([self.transaction_row(transaction_id)]), self._now)[0]

    def delete_transaction(self, transaction_id: str) -> None:
        """Delete a transaction from the world (the sandbox's own test control, not the
        interface's: its lifecycles never delete one). A service may still do it, or merge a
        record away; from now on no listing or count shows it and reading it by id answers
        404, so a test can check that a sync takes it out of the current tables."""
        self.lifecycle.delete(self.transaction_row(transaction_id))

    def cancel_cutoff(self, transaction_id: str) -> datetime | None:
        """Until when a cancellable transfer can be cancelled (None: not a cancellable type)."""
        row = self.transaction_row(transaction_id)
        return (
            from_us(int(self.store.col("cancel_by")[row])) if self._cancellable_type(row) else None
        )

    def pending_approval_ids(self) -> list[str]:
        """Transactions waiting for the platform's approve or reject."""
        s = self.store
        rows = np.flatnonzero(
            (s.col("flags") & AWAITING_APPROVAL != 0) & (s.col("status") == STATUS_CODE["PENDING"])
        )
        return [t["id"] for t in self.tx.transactions(rows, self._now)]

    # --- transactions ---------------------------------------------------------------------

    def transaction_row(self, transaction_id: str) -> int:
        prefix, _, text = transaction_id.partition(":")
        parsed = parse_uuid(text) if prefix in ("Transaction", "CardTransaction") else None
        if parsed is not None:
            hi, lo = parsed
            for row in self.store.rows_by_hi(hi).tolist():
                kind = int(self.store.col("kind")[row])
                if (
                    int(self.store.col("lo")[row]) == lo
                    and (kind == CARD) == (prefix == "CardTransaction")
                    and row not in self.lifecycle.deleted
                ):
                    return int(row)
        raise ServiceError(404, "TRANSACTION_NOT_FOUND", f"no transaction {transaction_id}")

    def select_transactions(
        self,
        *,
        customers: list[int] | None = None,
        account: int | None = None,
        sender: int | None = None,
        receiver: int | None = None,
        status: int | None = None,
        kind: int | None = None,
        reference: str | None = None,
        start: int | None = None,
        end: int | None = None,
    ) -> RowSet:
        """The rows matching every given filter (None: no filter), as a RowSet; records that
        have not arrived in the listings yet (`lifecycle`) are left out.

        The most selective indexed filter gives candidate rows (binary-searched to the date
        range); the other filters are checked on those candidates' columns."""
        s = self.store
        created = s.col("created")
        lo = 0 if start is None else int(np.searchsorted(created, start, "left"))
        hi = s.n if end is None else int(np.searchsorted(created, end, "right"))
        if lo >= hi:
            return RowSet.empty()
        filters: list[tuple[np.ndarray, Any]] = []
        for c in customers or ():
            filters.append(
                (s.postings("customer").rows(c), lambda r, c=c: s.col("customer")[r] == c)
            )
        if sender is not None:
            filters.append((s.rows_with("sender", sender), lambda r: s.col("sender")[r] == sender))
        if receiver is not None:
            filters.append(
                (s.rows_with("receiver", receiver), lambda r: s.col("receiver")[r] == receiver)
            )
        if account is not None:
            both = np.union1d(s.rows_with("sender", account), s.rows_with("receiver", account))
            filters.append(
                (
                    both,
                    lambda r: (s.col("sender")[r] == account) | (s.col("receiver")[r] == account),
                )
            )
        if kind is not None and status is not None:
            filters.append(
                (
                    s.postings("kind_status").rows(kind * 16 + status),
                    lambda r: (s.col("kind")[r] == kind) & (s.col("status")[r] == status),
                )
            )
        elif kind is not None:
            filters.append((s.postings("kind").rows(kind), lambda r: s.col("kind")[r] == kind))
        elif status is not None:
            filters.append(
                (s.postings("status").rows(status), lambda r: s.col("status")[r] == status)
            )
        if reference is not None:
            ref_hi = hi_of_reference(reference)
            rows = (
                np.sort(s.rows_by_hi(ref_hi))
                if ref_hi is not None and 0 <= ref_hi < 2**64
                else np.zeros(0, np.int64)
            )
            rows = rows[
                shows_reference(s.col("kind")[rows], s.col("status")[rows], s.col("channel")[rows])
            ]
            filters.append((rows, lambda r, rows=rows: np.isin(r, rows)))
        if not filters:
            return self.lifecycle.listed(RowSet.range(lo, hi))
        ranged = [
            rows[np.searchsorted(rows, lo) : np.searchsorted(rows, hi)] for rows, _ in filters
        ]
        best = min(range(len(filters)), key=lambda i: len(ranged[i]))
        rows = ranged[best]
        for i, (_, check) in enumerate(filters):
            if i != best and len(rows):
                rows = rows[check(rows)]
        return self.lifecycle.listed(RowSet.of(rows))

    def render_transactions(self, rows: np.ndarray) -> WireRows:
        """The rows as a page's `data`: pre-encoded JSON that reads as dicts (see `WireRows`)."""
        return self.tx.wire(rows, self._now)

    def _cancellable_type(self, row: int) -> bool:
        s = self.store
        kind, channel = int(s.col("kind")[row]), int(s.col("channel")[row])
        if kind == OUTGOING:
            return channel in CANCELLABLE_CHANNELS
        return kind == INCOMING and bool(s.col("flags")[row] & ACH_PULL)

    def cancel(self, transaction_id: str, reason: str | None = None) -> dict[str, Any]:
        row = self.transaction_row(transaction_id)
        s = self.store
        if not self._cancellable_type(row):
            kind = ("INCOMING", "OUTGOING", "CARD")[int(s.col("kind")[row])]
            channel = int(s.col("channel")[row])
            on = f" on {PAYMENT_RAILS[channel]}" if kind != "CARD" and channel < N_RAILS else ""
            raise invalid(
                [
                    {
                        "field": "transactionId",
                        "message": f"{kind} transactions{on} cannot be cancelled",
                    }
                ],
                "only pending ACH transfers (push or pull) and wires can be cancelled",
            )
        status = self._status(row)
        if status in _TERMINAL:
            raise ServiceError(
                409, "TRANSACTION_NOT_CANCELLABLE", f"the transaction is already {STATUSES[status]}"
            )
        if self._now >= int(s.col("cancel_by")[row]):
            raise ServiceError(
                409,
                "TRANSACTION_NOT_CANCELLABLE",
                "the banking partner has processed the transfer: its cancellation window has passed",
            )
        t = self._touch()
        failure = (
            OUT_FAILURE_CODE["QUOTE_EXECUTION_FAILED"]
            if s.col("kind")[row] == OUTGOING
            else IN_FAILURE_CODE["COLLECTION_FAILED"]
        )
        self._update(row, t1=min(int(s.col("t1")[row]), t), t2=t, t3=t, final=STATUS_CODE["FAILED"], failure=failure,
                     refund_final=1, refund_reason=1, pending_reason=NO_CODE, touched=t,
                     flags=int(s.col("flags")[row]) & ~AWAITING_APPROVAL)  # fmt: skip
        return self.get_transaction_wire(transaction_id)

    def _pending_approval(self, transaction_id: str) -> int:
        row = self.transaction_row(transaction_id)
        s = self.store
        if (
            not (s.col("flags")[row] & AWAITING_APPROVAL)
            or self._status(row) != STATUS_CODE["PENDING"]
        ):
            raise ServiceError(
                409,
                "TRANSACTION_NOT_PENDING_PLATFORM_APPROVAL",
                f"{transaction_id} is not waiting for the platform's approval",
            )
        return row

    def approve(self, transaction_id: str) -> dict[str, Any]:
        """Approve a payment waiting for the platform, answering its record as it is: an
        incoming payment's IncomingTransaction, an agent's payout's OutgoingTransaction (the
        interface declares IncomingTransaction for both; a payout dressed as incoming would
        misstate its direction, source and fees). `reject` answers the same way."""
        row = self._pending_approval(transaction_id)
        if self.store.col("kind")[row] == INCOMING:
            approve_incoming(self, row, self._touch())
        else:
            self._execute(row)
        return self.get_transaction_wire(transaction_id)

    def reject(self, transaction_id: str, reason: str | None = None) -> dict[str, Any]:
        row = self._pending_approval(transaction_id)
        if self.store.col("kind")[row] == INCOMING:
            reject_incoming(self, row, self._touch())
            return self.get_transaction_wire(transaction_id)
        self._fail_now(row, OUT_FAILURE_CODE["QUOTE_EXECUTION_FAILED"])
        return self.get_transaction_wire(transaction_id)

    def confirm_receipt(self, transaction_id: str, at: int | None) -> dict[str, Any]:
        row = self.transaction_row(transaction_id)
        if self.store.col("kind")[row] == CARD:
            raise invalid(
                [
                    {
                        "field": "transactionId",
                        "message": "card transactions have no receipt confirmation",
                    }
                ]
            )
        t = self._touch()
        self._update(row, receipt=t if at is None else whole_ms(at), touched=t)
        return self.get_transaction_wire(transaction_id)
