"""The simulated service's world: its data, its clock, and what each operation does to them.

A `World` is generated from a seed (same seed and options, same data) and works on wire-level JSON
values only; the wire layer (`wire.app`) adds HTTP, and `routes.dispatch` maps requests to the methods
here. The clock starts at `end` (default 2025-10-13T00:00:00Z, a fixed date so data is
reproducible) and moves only with `advance` (a wall-clock `Sandbox` calls it before each request,
see `clock`).

Decisions where the specification is silent (see also `generate` for money and lifecycles):

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
  (it then settles on its rail); reject makes it FAILED with `failureReason`
  QUOTE_EXECUTION_FAILED and no refund (FAILED always carries a reason, spec section 3; no
  reason names a platform's refusal, and this one covers "any failure on the way to
  settlement, whether or not funds were debited": none were, so no refund). Incoming UMA
  payments received through `POST /sandbox/uma/receive` wait for the decision for 5 seconds
  (see `world.incoming`) and answer the IncomingTransaction. Anything else answers 409
  TRANSACTION_NOT_PENDING_PLATFORM_APPROVAL.
- Receipt confirmation applies to INCOMING and OUTGOING transactions (a card transaction has no
  such field: 400).
- Quotes: a quote is created as an OUTGOING transaction in PENDING that expires at the quote's
  `expiresAt` unless executed (`immediatelyExecute` or `POST /quotes/{id}/execute`), so every
  quote has its `transactionId`. Sources are internal accounts of a customer, or REALTIME_FUNDING
  for a customer (executed when `POST /sandbox/send` delivers its funds, see `world.funding`);
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

import hashlib
from datetime import UTC, datetime, timedelta

import numpy as np

from paylens.errors import InvalidArgumentError

from ..clock import from_us, to_us, whole_ms
from ..currencies import (
    CURRENCY_CODES,
    CURRENCY_INDEX,
)
from ..generate.arrivals import Arrivals
from ..generate.entities import (
    CARD_STATES,
    customer_count,
    generate_entities,
    new_uuids,
    pick_weighted,
    uuid_text,
)
from ..generate.profiles import Profile, profile_named
from ..generate.schema import STATUSES
from ..generate.transactions import generate, plant_scenarios, scenario_count
from ..midrates import mid_rates
from .cards import CardOps
from .entities import EntityViews
from .events import row_transitions
from .idempotency import IdempotencyKeys
from .ledger import Ledger
from .lifecycle import Lifecycle
from .platform import PlatformOps
from .quotes import QuoteOps
from .render import TransactionViews
from .store import TransactionStore
from .transactions import TransactionOps
from .wallets import WalletAuth

DEFAULT_END = datetime(2025, 10, 13, tzinfo=UTC)
DEFAULT_PERIOD = timedelta(days=180)
#: Shares of generated transactions by type: INCOMING, OUTGOING, CARD.
DEFAULT_MIX = (0.30, 0.50, 0.20)
_STREAM_ENTITIES, _STREAM_ARRIVALS, _STREAM_ROWS, _STREAM_ADVANCE, _STREAM_CALLS = range(5)
_ACTIVE = CARD_STATES.index("ACTIVE")


class World(TransactionOps, QuoteOps, CardOps, PlatformOps):
    """The sandbox's data and the semantics of each endpoint, on wire-level JSON values.

    Options: `seed`; `transactions` generated over [`start`, `end`] (default: the 180 days before
    2025-10-13T00:00:00Z); `customers` (default: one per ~50 transactions, 30 to 20,000);
    `platform_fee_bps` and `platform_fixed_fee` (minor units of USD) of the platform's
    cross-currency fee config; `mix`: shares of INCOMING, OUTGOING and CARD transactions;
    `profile`: the entities' shape, "default" or "remittance" (see `generate.profiles`).
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
        profile: str | Profile = "default",
    ) -> None:
        if transactions < 0:  # an InvalidArgumentError is a ValueError too
            raise InvalidArgumentError("transactions", f"must be 0 or more; got {transactions}")
        end = end or DEFAULT_END
        start = start or end - DEFAULT_PERIOD
        start_us, end_us = whole_ms(to_us(start)), whole_ms(to_us(end))
        if start_us >= end_us:
            raise InvalidArgumentError("start", "must be before end")
        self.seed = seed
        self._now = end_us
        self._start = start_us
        self._mix = np.asarray(mix, dtype=np.float64)
        self.fee_config = (CURRENCY_INDEX["USD"], int(platform_fee_bps), int(platform_fixed_fee))
        streams = [np.random.default_rng([seed % 2**64, s]) for s in range(5)]
        shape = profile_named(profile)
        self.profile = shape.name
        self.entities = generate_entities(
            streams[_STREAM_ENTITIES],
            customers or customer_count(transactions, shape),
            start_us,
            shape,
        )
        self.views = EntityViews(self.entities)
        self._arrivals = Arrivals(start_us // 1000, end_us // 1000)
        # planted rows per scenario (pending transfers in and past their window, approvals)
        per_scenario = scenario_count(transactions) if scenarios is None else scenarios
        if 7 * per_scenario > transactions:
            raise InvalidArgumentError(
                "scenarios",
                f"{per_scenario} planted rows per scenario need at least {7 * per_scenario} "
                f"transactions; got {transactions}",
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
            seed,
        )
        self.store = TransactionStore(
            cols, end_us, len(self.entities.customers), len(self.entities.accounts)
        )
        self.tx = TransactionViews(self.store, self.entities, self.views)
        self.tx.render(np.arange(self.store.n), end_us)  # first reads are served, not rendered
        self._calls = streams[_STREAM_CALLS]
        ids_hi, ids_lo = new_uuids(self._calls, 2)
        self.platform_id = f"Platform:{uuid_text(int(ids_hi[0]), int(ids_lo[0]))}"
        # the configuration's id names this world, not the seed alone: a warehouse tells
        # platforms apart by it (every sandbox answers at one base URL), and another size or
        # mix of the same seed is another platform's data
        shape_of_world: tuple[object, ...] = (transactions, customers, platform_fee_bps)
        shape_of_world += (platform_fixed_fee, tuple(mix), per_scenario, self.profile)
        digest = hashlib.blake2b(
            f"{int(ids_hi[1])}/{int(ids_lo[1])}/{shape_of_world!r}".encode(), digest_size=16
        ).digest()
        hi, lo = int.from_bytes(digest[:8], "big"), int.from_bytes(digest[8:], "big")
        self.config_id = f"PlatformConfig:{uuid_text(hi, lo)}"
        self.wallets = WalletAuth.generate(self.entities, self.views, seed, end_us)
        self.idempotency = IdempotencyKeys()
        self._advances = 0
        self.lifecycle = Lifecycle(self)  # others' actions, off until configured
        self.ledger = Ledger(self)
        # opening balances cover every debit of the history in their currency (see `ledger`)
        self.entities.accounts.balance += self.ledger.opening_cover()
        self.views.balances = self.ledger.balance_of

    # --- clock ----------------------------------------------------------------------------

    @property
    def now(self) -> datetime:
        """The sandbox clock (tz-aware UTC); it starts at `end` and moves only with `advance`."""
        return from_us(self._now)

    def advance(self, delta: timedelta) -> dict[str, int]:
        """Move the clock by `delta`: what is due settles, fails or expires (as planned when it
        was created), and new activity arrives at the generated rate. Returns counts:
        `created` (new transactions) and, per status reached, how many existing transactions
        moved to it (e.g. `completed`, `failed`, `expired`, `settled`, `refunded`)."""
        if delta < timedelta(0):
            raise InvalidArgumentError(
                "delta", "the sandbox clock only moves forward: give 0 or more"
            )
        old, new = self._now, self._now + delta // timedelta(microseconds=1)
        balances = self.ledger.balances() if self.on_transition is not None else None
        due = self.store.due(new)
        before = self.store.col("status")[due].copy()
        born = np.zeros(0, np.int64)
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
                self.seed,
            )
            born = self.store.append(cols, new)
        self._now = new
        if self.on_transition is not None:
            rows = np.concatenate([due, born])
            was = np.concatenate([before, np.zeros(len(born), before.dtype)])
            found = row_transitions(self, rows, old, new, born=born, before=was)
            if balances is not None:  # once per account whose balances moved, at the last move
                found += self.balance_transitions(balances)
            self.announce(sorted(found, key=lambda t: t.at))  # stable: records first
        others = self.lifecycle.advance()
        return {"created": len(created), **others} | {
            STATUSES[c].lower(): int(k)
            for c, k in zip(codes.tolist(), counts.tolist(), strict=True)
        }

    def _active_cards(self) -> np.ndarray:
        return np.flatnonzero(self.entities.cards.state == _ACTIVE)

    # --- reference ------------------------------------------------------------------------

    def reference_rates(self) -> dict[tuple[str, str], float]:
        """Today's mid rates (they move daily, see `midrates`): (sending, receiving) -> sending
        major units per receiving unit."""
        n = len(CURRENCY_CODES)
        sending, receiving = np.indices((n, n))
        rates = mid_rates(self.seed, self._now, sending, receiving).tolist()
        return {
            (CURRENCY_CODES[s], CURRENCY_CODES[r]): rates[s][r] for s in range(n) for r in range(n)
        }
