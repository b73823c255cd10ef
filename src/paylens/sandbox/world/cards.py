"""Card events simulated through the interface's sandbox routes
(`POST /sandbox/cards/{id}/simulate/authorization|clearing|return`), and the transitions they
cause on the CardTransaction:

- authorization: the card must be ACTIVE and the amount in the card's currency. The last three
  characters of `merchant.descriptor` decide, as the interface's table says: `002` declined for
  insufficient funds, `003` declined as a paused card (a FROZEN or CLOSED card declines so too),
  `006` the pull's confirmation fails (EXCEPTION), anything else approved (AUTHORIZED; `005`'s
  delayed pull is the pending pull every authorization shows for its first 30 seconds). A
  declined authorization creates no CardTransaction: the issuer token is answered all the same.
- clearing (on AUTHORIZED or PARTIALLY_SETTLED): a first clearing below the authorized amount
  makes it PARTIALLY_SETTLED (more clearings expected), one at or above it SETTLED (above: a
  second, post-hoc pull for the excess, as tips do); a second clearing settles it. `amount: 0`
  on an AUTHORIZED transaction is the authorization's expiry: it closes SETTLED with nothing
  cleared. The sandbox takes at most two clearings per authorization.
- return (on a transaction with a settled clearing): REFUNDED with `refundedAmount` (the status
  enum's "refunded in part or whole"); at most the net settled amount, one return per
  transaction.

Every event happens at the sandbox clock's now and answers 202 with the transaction's
`issuerTransactionToken`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import ServiceError, invalid
from ..generate.entities import (
    CARD_STATES,
    new_uuids,
)
from ..generate.schema import (
    CARD,
    CARD_EXCEPTION,
    CARD_PARTIAL_FINAL,
    CARD_TIP,
    NEVER,
    STATUS_CODE,
    empty_columns,
    status_at,
)
from .base import WorldBase
from .events import Transition
from .incoming import next_created
from .render import merchant_code

if TYPE_CHECKING:
    from .world import World

_ACTIVE = CARD_STATES.index("ACTIVE")


class CardEventRefused(Exception):
    """A simulated card event the transaction's state does not allow (answered 400)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def _token(world: World, row: int) -> str:
    return str(world.tx.transactions(np.array([row]), world.now_us)[0]["issuerTransactionToken"])


def authorize(world: World, card: int, amount: int, merchant: dict[str, Any]) -> dict[str, Any]:
    """A simulated authorization on card row `card`; returns the simulation response."""
    cards = world.entities.cards
    descriptor = merchant["descriptor"]
    code = merchant_code(descriptor, merchant.get("mcc"), merchant.get("country"))
    if code is None:
        raise CardEventRefused("merchant.descriptor", "the sandbox keeps no more new merchants")
    created = next_created(world)
    world.move_clock_to(created)
    hi, lo = new_uuids(world.call_rng, 1)
    declined = descriptor.endswith(("002", "003")) or cards.state[card] != _ACTIVE
    if declined:  # the issuer declines: no CardTransaction, only the token of the attempt
        return {"issuerTransactionToken": f"{int(lo[0]):016x}"}
    exception = descriptor.endswith("006")
    cols = empty_columns(1)
    values = {
        "hi": hi[0], "lo": lo[0], "kind": CARD, "created": created,
        "customer": int(cards.holder[card]), "sender": int(cards.account[card]), "card": card,
        "merchant": code, "send_cur": int(cards.currency[card]),
        "recv_cur": int(cards.currency[card]), "sent": amount, "final": STATUS_CODE["SETTLED"],
        "t1": created if exception else NEVER, "clear1": amount if exception else 0,
        "flags": CARD_EXCEPTION if exception else 0,
    }  # fmt: skip
    for name, value in values.items():
        cols[name][0] = value
    cols["status"] = status_at(cols, world.now_us)
    row = int(world.store.append(cols, world.now_us)[0])
    world.announce_new(row)
    return {"issuerTransactionToken": _token(world, row)}


def clear(world: World, row: int, amount: int) -> dict[str, Any]:
    """A simulated clearing of `amount` on card transaction `row`."""
    s = world.store
    status, flags = int(s.col("status")[row]), int(s.col("flags")[row])
    authorized = int(s.col("sent")[row])
    at = world.now_us // 1000 * 1000
    if status == STATUS_CODE["AUTHORIZED"]:
        if amount == 0:  # the authorization expired with nothing cleared
            world.update_row(row, t1=at, clear1=0, touched=at)
        else:
            tip = CARD_TIP if amount > authorized else 0
            partial = CARD_PARTIAL_FINAL if amount < authorized else 0
            world.update_row(row, t1=at, clear1=amount, flags=flags | tip | partial, touched=at)
    elif status == STATUS_CODE["PARTIALLY_SETTLED"] and s.col("t2")[row] == NEVER:
        if amount == 0:
            raise CardEventRefused("amount", "a second clearing must be positive")
        world.update_row(row, t2=at, clear2=amount, flags=flags & ~CARD_PARTIAL_FINAL, touched=at)
    else:
        raise CardEventRefused(
            "cardTransactionId",
            "must be AUTHORIZED or PARTIALLY_SETTLED with one clearing (the sandbox takes two)",
        )
    return {"issuerTransactionToken": _token(world, row)}


def refund(world: World, row: int, amount: int) -> dict[str, Any]:
    """A simulated merchant return of `amount` on card transaction `row`."""
    s = world.store
    now = world.now_us
    settled = sum(
        int(s.col(c)[row]) for c, t in (("clear1", "t1"), ("clear2", "t2")) if s.col(t)[row] <= now
    )
    if s.col("t3")[row] <= now or settled <= 0 or s.col("status")[row] == STATUS_CODE["EXCEPTION"]:
        raise CardEventRefused(
            "cardTransactionId", "must have a settled clearing and no return yet"
        )
    if amount > settled:
        raise CardEventRefused("amount", f"must be at most the net settled amount, {settled}")
    at = now // 1000 * 1000
    world.update_row(row, t3=at, refund_amount=amount, touched=at)
    return {"issuerTransactionToken": _token(world, row)}


class CardOps(WorldBase):
    """The card operations of `World` (lookup and PATCH); card events are the functions above."""

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
        card = self.views.card(row)
        if state is not None:
            self.announce([Transition("card", "CARD.STATE_CHANGE", card, self._now)])
        if sources is not None and state != "CLOSED":
            self.announce([Transition("card", "CARD.FUNDING_SOURCE_CHANGE", card, self._now)])
        return card
