"""The simulated service's world: its data, its clock, and what each operation does to them.

A `World` is generated from a seed (same seed and options, same data) and works on wire-level JSON
values only; the wire layer (`_app`) adds HTTP, and `_routes.dispatch` maps requests to the methods
here. The clock starts at `end` (default 2025-10-13T00:00:00Z, a fixed date so data is
reproducible) and moves only with `advance` (a wall-clock `Sandbox` calls it before each request,
see `_clock`).

Decisions where the specification is silent (see also `_generate` for money and lifecycles):

- Cancellation (spec §4.1) applies to OUTGOING transfers on the ACH or WIRE rails and to ACH
  pulls: INCOMING transactions whose source is the customer's own external bank account (the
  platform pulled the money over ACH). Any other transaction answers 400 INVALID_INPUT. A
  cancellable transfer can be cancelled while it is not yet terminal and the clock is before its
  cutoff: the banking partner's window, drawn per transfer when it is created (ACH: 1 to 8 hours
  after creation, until the batch file goes out; wires: 5 to 45 minutes, until release).
  Otherwise 409 TRANSACTION_NOT_CANCELLABLE. A cancelled transaction becomes FAILED with a
  `refund` of reason USER_CANCELLATION, COMPLETED at the cancellation time (`World.cancel_cutoff`
  tells a transfer's cutoff). The interface names no status for a cancellation and the spec says
  FAILED always carries a `failureReason`, so it gets the one whose meaning covers it: an
  OUTGOING transfer QUOTE_EXECUTION_FAILED ("any failure on the way to settlement ... a debited
  amount is refunded automatically"), an ACH pull COLLECTION_FAILED (an inbound bank-rail
  collection that was not credited and goes back to the sender). The USER_CANCELLATION refund is
  what tells a cancellation from other failures.
- Approval: agent-initiated OUTGOING transactions (`agentId` set) wait in PENDING for the
  platform's decision for up to 3 days, then expire (EXPIRED). Approve moves one to PROCESSING
  (it then settles on its rail); reject makes it FAILED without a `failureReason`. Incoming UMA
  payments received through `POST /sandbox/uma/receive` wait for the decision for 5 seconds
  (see `_world_incoming`) and answer the IncomingTransaction. Anything else answers 409
  TRANSACTION_NOT_PENDING_PLATFORM_APPROVAL.
- Receipt confirmation applies to INCOMING and OUTGOING transactions (a card transaction has no
  such field: 400).
- Quotes: a quote is created as an OUTGOING transaction in PENDING that expires at the quote's
  `expiresAt` unless executed (`immediatelyExecute` or `POST /quotes/{id}/execute`), so every
  quote has its `transactionId`. Sources are internal accounts of a customer, or REALTIME_FUNDING
  for a customer (executed when `POST /sandbox/send` delivers its funds, see `_world_funding`);
  destinations are accounts or the UMA addresses of the sandbox's counterparties. A RECEIVING
  lock sends the smallest amount whose `receivedAmount` reaches the locked amount.
- Every world of 70 or more transactions has, just before its `end`, some of each: pending ACH
  pushes, ACH pulls and wires inside and past their cancellation window, and agent-initiated
  payouts waiting for approval (`transactions // 1000 + 1` of each, at most 100).
- Filters: a transaction's sender account is `source.accountId` (a card transaction's
  `accountId`), its receiver `destination.accountId`; `accountIdentifier` matches either, and
  `reference` matches `reconciliationInstructions.reference`. Unknown ids match nothing.
- Ordering and pagination follow the store's row order, which is (createdAt, id); a record the
  world creates when two would share a millisecond moves the clock on by one millisecond.
  Timestamps are whole milliseconds.
- Not-found codes: transactions TRANSACTION_NOT_FOUND, quotes QUOTE_NOT_FOUND, customers
  USER_NOT_FOUND, cards and accounts REFERENCE_NOT_FOUND.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from ..clock import from_us, to_us, whole_ms
from ..currencies import (
    AUTO_CHANNEL,
    CANCEL_WINDOW_S,
    CANCELLABLE_CHANNELS,
    CH,
    CODES,
    COUNTERPARTY_FEE_USD,
    CRYPTO,
    CUR,
    DECIMALS,
    GROUP,
    INSTANT,
    MID,
    N_RAILS,
    PAYMENT_RAILS,
    QUOTE_SPREAD,
    QUOTE_TTL_S,
    RATE_BY_GROUP,
    RECEIVE_OPTIONS,
    SERVICE_FEE_USD,
    TIMELINE_S,
    currency_wire,
    mid_rate,
    to_minor,
)
from ..errors import ServiceError, invalid
from ..generate.entities import (
    CARD_STATES,
    US_PER_DAY,
    customer_count,
    generate_entities,
    new_uuids,
    parse_uuid,
    pick_weighted,
    uuid_text,
)
from ..generate.transactions import (
    ACH_PULL,
    AWAITING_APPROVAL,
    CARD,
    DEST_ACCOUNT,
    DEST_UMA,
    IF,
    INCOMING,
    NEVER,
    NONE8,
    OF,
    OUTGOING,
    SRC_ACCOUNT,
    SRC_FUNDING,
    ST,
    STATUSES,
    Arrivals,
    empty_columns,
    generate,
    outgoing_money,
    plant_scenarios,
    platform_fee,
    scenario_count,
    settle_durations,
    status_at,
)
from ..wire.idempotency import IdempotencyKeys
from .entities import SANDBOX_DOMAIN, EntityViews, iso1
from .incoming import approve_incoming, reject_incoming
from .lifecycle import Lifecycle
from .render import TxViews, WireRows, hi_of_reference, quote_uuid, shows_reference
from .store import RowSet, TxStore
from .wallets import WalletAuth

DEFAULT_END = datetime(2025, 10, 13, tzinfo=UTC)
DEFAULT_PERIOD = timedelta(days=180)
#: Shares of generated transactions by type: INCOMING, OUTGOING, CARD.
DEFAULT_MIX = (0.30, 0.50, 0.20)
_STREAM_ENTITIES, _STREAM_ARRIVALS, _STREAM_ROWS, _STREAM_ADVANCE, _STREAM_CALLS = range(5)
_ACTIVE = CARD_STATES.index("ACTIVE")


class World:
    """The sandbox's data and the semantics of each endpoint, on wire-level JSON values.

    Options: `seed`; `transactions` generated over [`start`, `end`] (default: the 180 days before
    2025-10-13T00:00:00Z); `customers` (default: one per ~50 transactions, 30 to 20,000);
    `platform_fee_bps` and `platform_fixed_fee` (minor units of USD) of the platform's
    cross-currency fee config; `mix`: shares of INCOMING, OUTGOING and CARD transactions.
    """

    def __init__(
        self,
        *,
        seed: int = 0,
        transactions: int = 10_000,
        start: datetime | None = None,
        end: datetime | None = None,
        customers: int | None = None,
        platform_fee_bps: int = 50,
        platform_fixed_fee: int = 25,
        mix: tuple[float, float, float] = DEFAULT_MIX,
        scenarios: int | None = None,
    ) -> None:
        if transactions < 0:
            raise ValueError("transactions must be >= 0")
        end = end or DEFAULT_END
        start = start or end - DEFAULT_PERIOD
        start_us, end_us = whole_ms(to_us(start)), whole_ms(to_us(end))
        if start_us >= end_us:
            raise ValueError("start must be before end")
        self.seed = seed
        self._now = end_us
        self._start = start_us
        self._mix = np.asarray(mix, dtype=np.float64)
        self.fee_config = (CUR["USD"], int(platform_fee_bps), int(platform_fixed_fee))
        streams = [np.random.default_rng([seed % 2**64, s]) for s in range(5)]
        self.entities = generate_entities(
            streams[_STREAM_ENTITIES], customers or customer_count(transactions), start_us
        )
        self.views = EntityViews(self.entities)
        self._arrivals = Arrivals(start_us // 1000, end_us // 1000)
        # planted rows per scenario (pending transfers in and past their window, approvals)
        per_scenario = scenario_count(transactions) if scenarios is None else scenarios
        if 7 * per_scenario > transactions:
            raise ValueError(
                f"scenarios={per_scenario} needs at least {7 * per_scenario} transactions"
            )
        regular = transactions - 7 * per_scenario
        created, weight = self._arrivals.draw(
            streams[_STREAM_ARRIVALS], start_us // 1000, end_us // 1000, regular
        )
        self._per_weight = regular / weight if weight else 0.0
        kinds = pick_weighted(streams[_STREAM_ARRIVALS], self._mix, regular)
        p_created, p_kind, p_scen = plant_scenarios(streams[_STREAM_ARRIVALS], per_scenario, end_us)
        cols = generate(
            self.entities,
            streams[_STREAM_ROWS],
            np.concatenate([created, np.maximum(p_created, start_us)]),
            np.concatenate([kinds, p_kind]),
            np.concatenate([np.zeros(regular, np.int64), p_scen]),
            end_us,
            self.fee_config,
            self._active_cards(),
        )
        self.store = TxStore(
            cols, end_us, len(self.entities.customers), len(self.entities.accounts)
        )
        self.tx = TxViews(self.store, self.entities, self.views)
        self.tx.render(np.arange(self.store.n), end_us)  # first reads are served, not rendered
        self._calls = streams[_STREAM_CALLS]
        ids_hi, ids_lo = new_uuids(self._calls, 2)
        self.platform_id = f"Platform:{uuid_text(int(ids_hi[0]), int(ids_lo[0]))}"
        self.config_id = f"PlatformConfig:{uuid_text(int(ids_hi[1]), int(ids_lo[1]))}"
        self.wallets = WalletAuth.generate(self.entities, self.views, seed, end_us)
        self.idempotency = IdempotencyKeys()
        self._advances = 0
        self.lifecycle = Lifecycle(self)  # others' actions, off until configured

    # --- clock ----------------------------------------------------------------------------------

    @property
    def now(self) -> datetime:
        """The sandbox clock (tz-aware UTC); it starts at `end` and moves only with `advance`."""
        return from_us(self._now)

    @property
    def now_us(self) -> int:
        return self._now

    def advance(self, delta: timedelta) -> dict[str, int]:
        """Move the clock by `delta`: what is due settles, fails or expires (as planned when it
        was created), and new activity arrives at the generated rate. Returns counts:
        `created` (new transactions) and, per status reached, how many existing transactions
        moved to it (e.g. `completed`, `failed`, `expired`, `settled`, `refunded`)."""
        if delta < timedelta(0):
            raise ValueError("the sandbox clock only moves forward")
        old, new = self._now, self._now + delta // timedelta(microseconds=1)
        due = self.store.due(new)
        before = self.store.col("status")[due].copy()
        self.store.refresh(due, new)
        after = self.store.col("status")[due]
        codes, counts = np.unique(after[after != before], return_counts=True)
        rng = np.random.default_rng([self.seed % 2**64, _STREAM_ADVANCE, self._advances])
        self._advances += 1
        created, _ = self._arrivals.draw(rng, old // 1000 + 1, new // 1000, None, self._per_weight)
        if len(created):
            kinds = pick_weighted(rng, self._mix, len(created))
            cols = generate(
                self.entities,
                rng,
                created,
                kinds,
                np.zeros(len(created), np.int64),
                new,
                self.fee_config,
                self._active_cards(),
            )
            self.store.append(cols, new)
        self._now = new
        others = self.lifecycle.advance()
        return {"created": len(created), **others} | {
            STATUSES[c].lower(): int(k)
            for c, k in zip(codes.tolist(), counts.tolist(), strict=True)
        }

    def _active_cards(self) -> np.ndarray:
        return np.flatnonzero(self.entities.cards.state == _ACTIVE)

    # --- ground truth ---------------------------------------------------------------------------

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

    def reference_rates(self) -> dict[tuple[str, str], float]:
        """Reference mid rates: (sending, receiving) -> sending major units per receiving unit."""
        return {(s, r): mid_rate(s, r) for s in CODES for r in CODES}

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
            (s.col("flags") & AWAITING_APPROVAL != 0) & (s.col("status") == ST["PENDING"])
        )
        return [t["id"] for t in self.tx.transactions(rows, self._now)]

    # --- transactions -------------------------------------------------------------------------

    def transaction_row(self, transaction_id: str) -> int:
        prefix, _, text = transaction_id.partition(":")
        parsed = parse_uuid(text) if prefix in ("Transaction", "CardTransaction") else None
        if parsed is not None:
            hi, lo = parsed
            for row in self.store.rows_by_hi(hi).tolist():
                kind = int(self.store.col("kind")[row])
                if int(self.store.col("lo")[row]) == lo and (kind == CARD) == (
                    prefix == "CardTransaction"
                ):
                    return row
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

    def _status(self, row: int) -> int:
        return int(self.store.col("status")[row])

    def _cancellable_type(self, row: int) -> bool:
        s = self.store
        kind, channel = int(s.col("kind")[row]), int(s.col("channel")[row])
        if kind == OUTGOING:
            return channel in CANCELLABLE_CHANNELS
        return kind == INCOMING and bool(s.col("flags")[row] & ACH_PULL)

    def _update(self, row: int, **values: Any) -> None:
        """Change fields of a row through the interface: the store re-plans it and its kept
        wire text is dropped."""
        self.store.update(row, self._now, **values)
        self.tx.forget(row)

    def _touch(self) -> int:
        """The time of a change made now, at whole milliseconds."""
        return whole_ms(self._now)

    # --- for the world's other modules (incoming approvals, sandbox simulations) --------------

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
            OF["QUOTE_EXECUTION_FAILED"]
            if s.col("kind")[row] == OUTGOING
            else IF["COLLECTION_FAILED"]
        )
        self._update(row, t1=min(int(s.col("t1")[row]), t), t2=t, t3=t, final=ST["FAILED"], failure=failure,
                     refund_final=1, refund_reason=1, pending_reason=NONE8, touched=t,
                     flags=int(s.col("flags")[row]) & ~AWAITING_APPROVAL)  # fmt: skip
        return self.get_transaction_wire(transaction_id)

    def _pending_approval(self, transaction_id: str) -> int:
        row = self.transaction_row(transaction_id)
        s = self.store
        if not (s.col("flags")[row] & AWAITING_APPROVAL) or self._status(row) != ST["PENDING"]:
            raise ServiceError(
                409,
                "TRANSACTION_NOT_PENDING_PLATFORM_APPROVAL",
                f"{transaction_id} is not waiting for the platform's approval",
            )
        return row

    def approve(self, transaction_id: str) -> dict[str, Any]:
        row = self._pending_approval(transaction_id)
        if self.store.col("kind")[row] == INCOMING:
            approve_incoming(self, row, self._touch())
        else:
            self._execute(row)
        return self.get_transaction_wire(transaction_id)

    def reject(self, transaction_id: str, reason: str | None = None) -> dict[str, Any]:
        row = self._pending_approval(transaction_id)
        t = self._touch()
        if self.store.col("kind")[row] == INCOMING:
            reject_incoming(self, row, t)
            return self.get_transaction_wire(transaction_id)
        self._update(
            row,
            t1=t,
            t2=t,
            final=ST["FAILED"],
            failure=NONE8,
            touched=t,
            flags=int(self.store.col("flags")[row]) & ~AWAITING_APPROVAL,
        )
        return self.get_transaction_wire(transaction_id)

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
            final=ST["COMPLETED"],
            touched=t,
            flags=int(s.col("flags")[row]) & ~AWAITING_APPROVAL,
        )

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

    # --- quotes -----------------------------------------------------------------------------

    def quote_row(self, quote_id: str) -> int:
        prefix, _, text = quote_id.partition(":")
        parsed = parse_uuid(text) if prefix == "Quote" else None
        if parsed is not None:
            hi, lo = quote_uuid(*parsed)
            for row in self.store.rows_by_hi(hi).tolist():
                if int(self.store.col("lo")[row]) == lo and self.store.col("kind")[row] == OUTGOING:
                    return row
        raise ServiceError(404, "QUOTE_NOT_FOUND", f"no quote {quote_id}")

    def get_quote(self, quote_id: str) -> dict[str, Any]:
        return self.tx.quote(self.quote_row(quote_id), self._now)

    def execute_quote(self, quote_id: str) -> dict[str, Any]:
        row = self.quote_row(quote_id)
        s = self.store
        if s.col("source_kind")[row] == SRC_FUNDING:
            raise invalid(
                [
                    {
                        "field": "quoteId",
                        "message": "a REALTIME_FUNDING quote executes when its funds arrive",
                    }
                ],
                "the quote cannot be executed: send its funds as its paymentInstructions say",
            )
        if (
            self._status(row) != ST["PENDING"]
            or s.col("flags")[row] & AWAITING_APPROVAL
            or s.col("t1")[row] <= self._now
        ):
            raise ServiceError(
                409,
                "CONFLICT",
                f"the quote is {STATUSES[self._status(row)]}, not waiting for execution",
            )
        self._execute(row)
        return self.tx.quote(row, self._now)

    def create_quote(self, req: QuoteRequest) -> dict[str, Any]:
        """A quote from `req` (already validated by the route) as a new OUTGOING row."""
        e = self.entities
        acc = e.accounts
        src, dst = req.source, req.destination
        recv_cur = int(acc.currency[dst]) if req.uma is None else req.uma[1]
        if req.funding is not None:
            owner, send_cur = req.funding
        else:
            send_cur, owner = int(acc.currency[src]), int(acc.owner[src])
        if req.uma is not None:
            channel, rail_mode = CH["UMA"], 0
        elif acc.external[dst]:
            option = int(acc.kind[dst])
            channel = CH[req.rail] if req.rail else int(AUTO_CHANNEL[option])
            rail_mode = 2 if req.rail else (1 if channel < N_RAILS else 0)
        else:
            channel, rail_mode = CH["INTERNAL"], 0
        same = send_cur == recv_cur
        group = int(GROUP[recv_cur])
        fx = 1.0 if same else float(f"{MID[send_cur, recv_cur] * (1.0 + QUOTE_SPREAD[group]):.8g}")
        var_rate = 0.0 if same else float(RATE_BY_GROUP[group, int(e.customers.kind[owner])])
        fixed = int(to_minor(SERVICE_FEE_USD[channel], send_cur))
        cpty = 0 if same else int(to_minor(COUNTERPARTY_FEE_USD[channel], recv_cur))
        bps, plat_fixed, cross = self._platform_fee_terms(req, send_cur, same)

        def money(sent: int) -> tuple[int, int, int, int]:
            a = np.array([sent], dtype=np.int64)
            plat = platform_fee(a, np.array([cross]), bps, plat_fixed)
            v, fees, received = outgoing_money(
                a,
                np.array([send_cur]),
                np.array([recv_cur]),
                np.array([fx]),
                np.array([var_rate]),
                np.array([fixed]),
                plat,
                np.array([cpty]),
            )
            return int(v[0]), int(fees[0]), int(received[0]), int(plat[0])

        sent = (
            req.amount
            if req.locked_side == "SENDING"
            else self._sent_for(req.amount, money, send_cur, recv_cur, fx, var_rate, bps)
        )
        var_fee, fees, received, plat = money(sent)
        if received <= 0:
            raise ServiceError(
                400,
                "AMOUNT_OUT_OF_RANGE",
                f"{sent} minor units of {CODES[send_cur]} do not cover the fees of {fees}",
            )
        created = max(
            whole_ms(self._now), int(self.store.col("created")[-1]) + 1000 if self.store.n else 0
        )
        self._now = max(self._now, created)
        cols = empty_columns(1)
        hi, lo = new_uuids(self._calls, 1)
        ttl = int(QUOTE_TTL_S[channel]) * 1_000_000
        window = CANCEL_WINDOW_S.get(channel)
        values: dict[str, Any] = {
            "hi": hi[0], "lo": lo[0], "kind": OUTGOING, "created": created, "customer": owner,
            "sender": src, "receiver": dst, "send_cur": send_cur, "recv_cur": recv_cur, "sent": sent,
            "received": received, "fees": fees, "fixed_fee": fixed, "var_fee": var_fee,
            "platform_fee": plat, "cpty_fee": cpty, "var_rate": var_rate, "fx": fx,
            "channel": channel, "rail_mode": rail_mode,
            "person": acc.person[dst] if req.uma is None else req.uma[0],
            "dest_kind": DEST_ACCOUNT if req.uma is None else DEST_UMA,
            "t1": created + ttl, "t2": created + ttl, "final": ST["EXPIRED"],
            "timeline": -1 if req.funding else TIMELINE_S[channel],
            "expected": NEVER if INSTANT[channel] or req.funding else created + int(TIMELINE_S[channel]) * 1_000_000,
            "source_kind": SRC_FUNDING if req.funding else SRC_ACCOUNT,
            "cancel_by": created + sum(window) * 500_000 if window else 0,
        }  # fmt: skip
        for name, value in values.items():
            cols[name][0] = value
        cols["status"] = status_at(cols, self._now)
        row = int(self.store.append(cols, self._now)[0])
        self.tx.describe(row, req.description)
        if req.execute:
            self._execute(row)
        return self.tx.quote(row, self._now)

    def _platform_fee_terms(
        self, req: QuoteRequest, send_cur: int, same: bool
    ) -> tuple[int, int, bool]:
        if req.fee_override is not None:
            bps, fixed = req.fee_override
            return bps, fixed, True
        fee_cur, bps, fixed = self.fee_config
        return bps, fixed, send_cur == fee_cur and not same

    @staticmethod
    def _sent_for(
        target: int, money: Any, send_cur: int, recv_cur: int, fx: float, var_rate: float, bps: int
    ) -> int:
        """The smallest sending amount whose received amount reaches `target`."""
        scale = 10.0 ** (int(DECIMALS[send_cur]) - int(DECIMALS[recv_cur]))
        _, fees0, _, _ = money(0)
        guess = int((target * fx * scale + max(fees0, 0)) / max(1.0 - var_rate - bps / 10_000, 0.5))
        low, high = max(guess // 2, 1), max(guess * 2, 16)
        while money(high)[2] < target:
            high *= 2
        while low < high:
            mid = (low + high) // 2
            if money(mid)[2] >= target:
                high = mid
            else:
                low = mid + 1
        return low

    # --- other resources ----------------------------------------------------------------------

    def exchange_rates(
        self, source: str | None, destinations: list[str], amount: int
    ) -> list[dict[str, Any]]:
        """Corridors from each currency customers hold to each bank destination, at reference
        mid rates, with the fees of the formula for `amount` (an individual's rates)."""
        fee_cur, bps, fixed_plat = self.fee_config
        updated = iso1(self._now - self._now % (300 * 1_000_000))
        sources = sorted({c for cs in self.entities.customers.currencies for c in cs})
        out = []
        for s in sources:
            if source is not None and CODES[s] != source:
                continue
            for option in RECEIVE_OPTIONS:
                r = CUR[option.currency]
                if (
                    r == s
                    or option.currency in CRYPTO
                    or (destinations and option.currency not in destinations)
                ):
                    continue
                for rail, _ in option.rails:
                    ch = CH[rail]
                    fixed = int(to_minor(SERVICE_FEE_USD[ch], s))
                    cpty = int(to_minor(COUNTERPARTY_FEE_USD[ch], r))
                    a = np.array([amount], dtype=np.int64)
                    plat = platform_fee(a, np.array([s == fee_cur]), bps, fixed_plat)
                    rate = float(MID[s, r])
                    _, fees, received = outgoing_money(
                        a,
                        np.array([s]),
                        np.array([r]),
                        np.array([rate]),
                        np.array([RATE_BY_GROUP[GROUP[r], 0]]),
                        np.array([fixed]),
                        plat,
                        np.array([cpty]),
                    )
                    fees_total = int(fees[0])
                    out.append({
                        "sourceCurrency": currency_wire(s), "sendingAmount": amount,
                        "minSendingAmount": int(to_minor(1.0, s)), "maxSendingAmount": int(to_minor(250_000.0, s)),
                        "destinationCurrency": currency_wire(r), "destinationPaymentRail": rail,
                        "receivingAmount": max(int(received[0]), 0), "exchangeRate": rate,
                        "fees": {"fixed": fixed + (fixed_plat if s == fee_cur else 0), "total": fees_total},
                        "updatedAt": updated,
                    })  # fmt: skip
        return out

    def platform_config(self) -> dict[str, Any]:
        fee_cur, bps, fixed = self.fee_config
        created = iso1(self._start - 800 * US_PER_DAY)
        return {
            "id": self.config_id,
            "umaDomain": SANDBOX_DOMAIN,
            "webhookEndpoint": f"https://hooks.{SANDBOX_DOMAIN}/webhooks",
            "supportedCurrencies": [
                {
                    "currencyCode": code,
                    "minAmount": int(to_minor(1.0, i)),
                    "maxAmount": int(to_minor(250_000.0, i)),
                    "requiredCounterpartyFields": [],
                    "enabledTransactionTypes": ["INCOMING", "OUTGOING"],
                }
                for i, code in enumerate(CODES)
            ],
            "isRegulatedFinancialInstitution": False,
            "embeddedWalletConfig": {
                "appName": "Paylens Sandbox",
                "otpLength": 6,
                "alphanumeric": False,
                "expirationSeconds": 300,
                "sendFromEmailAddress": f"wallet@{SANDBOX_DOMAIN}",
                "sendFromEmailSenderName": "Paylens Sandbox",
            },
            "feeConfigs": [
                {
                    "feeType": "CROSS_CURRENCY_TRANSACTION",
                    "sourceCurrency": CODES[fee_cur],
                    "variableFeeBps": bps,
                    "fixedFee": {"amount": fixed, "currency": CODES[fee_cur]},
                }
            ],
            "createdAt": created,
            "updatedAt": created,
        }

    def customer_row(self, customer_id: str) -> int:
        row = self.entities.customer_index.get(customer_id)
        if row is None:
            raise ServiceError(404, "USER_NOT_FOUND", f"no customer {customer_id}")
        return row

    def account_row(self, account_id: str) -> int:
        row = self.entities.account_index.get(account_id)
        if row is None:
            raise ServiceError(404, "REFERENCE_NOT_FOUND", f"no account {account_id}")
        return row

    def card_row(self, card_id: str) -> int:
        row = self.entities.card_index.get(card_id)
        if row is None:
            raise ServiceError(404, "REFERENCE_NOT_FOUND", f"no card {card_id}")
        return row

    def update_card(
        self,
        card_id: str,
        state: str | None,
        funding: list[str] | None,
        max_spend: Any,
        has_max_spend: bool,
    ) -> dict[str, Any]:
        """PATCH /cards/{id} after the route checked the body's shape (spec §3's table)."""
        row = self.card_row(card_id)
        cards = self.entities.cards
        current = CARD_STATES[cards.state[row]]
        if current == "CLOSED":
            if state == "CLOSED":
                raise ServiceError(409, "CARD_ALREADY_CLOSED", f"{card_id} is already CLOSED")
            raise ServiceError(
                409, "CARD_NOT_MUTABLE", f"{card_id} is CLOSED and can no longer change"
            )
        allowed = {
            ("ACTIVE", "FROZEN"),
            ("FROZEN", "ACTIVE"),
            ("ACTIVE", "CLOSED"),
            ("FROZEN", "CLOSED"),
        }
        if state is not None and (current, state) not in allowed:
            raise ServiceError(
                409, "INVALID_STATE_TRANSITION", f"a {current} card cannot become {state}"
            )
        sources: list[int] | None = None
        if funding is not None:
            sources = []
            errors = []
            for k, account_id in enumerate(funding):
                a = self.entities.account_index.get(account_id)
                acc = self.entities.accounts
                if (
                    a is None
                    or acc.external[a]
                    or acc.owner[a] != cards.holder[row]
                    or acc.currency[a] != cards.currency[row]
                ):
                    errors.append(
                        {
                            "field": f"fundingSources[{k}]",
                            "message": "must be an internal account of the cardholder in the card's currency",
                        }
                    )
                else:
                    sources.append(a)
            if errors:
                raise invalid(errors, "funding sources are ineligible")
        if state is not None:
            cards.state[row] = CARD_STATES.index(state)
            if state == "CLOSED":
                cards.funding[row] = []
        if sources is not None:
            cards.funding[row] = sources
        if has_max_spend:
            cards.max_spend[row] = max_spend
        cards.updated[row] = self._touch()
        return self.views.card(row)


_TERMINAL = frozenset(
    {ST["COMPLETED"], ST["FAILED"], ST["EXPIRED"], ST["REJECTED"], ST["REFUNDED"]}
)


class QuoteRequest:
    """A checked POST /quotes body: account rows, amounts and options."""

    def __init__(
        self,
        source: int,
        destination: int,
        locked_side: str,
        amount: int,
        *,
        rail: str | None = None,
        execute: bool = False,
        description: str | None = None,
        fee_override: tuple[int, int] | None = None,
        funding: tuple[int, int] | None = None,
        uma: tuple[int, int] | None = None,
    ) -> None:
        self.source = source  # NO_ROW for a REALTIME_FUNDING source
        self.funding = funding  # (customer row, currency code) of a REALTIME_FUNDING source
        self.uma = uma  # (person row, currency code) of a UMA_ADDRESS destination (NO_ROW dst)
        self.destination = destination
        self.locked_side = locked_side
        self.amount = amount
        self.rail = rail
        self.execute = execute
        self.description = description
        self.fee_override = fee_override
