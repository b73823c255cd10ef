"""Transitions of the world's records, as the events the service announces (its webhooks).

The world knows nothing of delivery: it calls one hook, `World.on_transition`, with a
`Transition` for each change, in the order the changes happened (simulated time, then row), and
the wire layer (`wire.webhooks`) turns each into a signed delivery. With no hook installed the
world computes nothing.

What counts as a transition (the interface's `WebhookType` names it in `event`):

- a transaction created (OUTGOING `PENDING`/`PENDING_AUTHORIZATION`, INCOMING `PENDING`, CARD
  `AUTHORIZED`; an INCOMING record in `CREATED` has no event of its own: it is announced when it
  becomes `PENDING`) and each later status it reaches, at the planned time of that status, with
  the record as it was then. Several planned steps passed in one `advance` are each announced;
- a refund of a payment: `*.FAILED` is followed by `*.REFUND_PENDING` when the refund starts
  with it, and `*.REFUND_COMPLETED` / `*.REFUND_FAILED` when it settles (an INCOMING payment
  REJECTED by the platform is announced as `INCOMING_PAYMENT.FAILED`: no event names a
  rejection);
- a change that leaves the status as it was (a receipt confirmation, planned or made through
  the interface; a card clearing) re-announces the record's status event with the new record:
  the webhook types name statuses, and a receiver keeps the newest record per id;
- a card's state or funding sources changed (`CARD.STATE_CHANGE`, `CARD.FUNDING_SOURCE_CHANGE`).

- an internal account's balances changed (`INTERNAL_ACCOUNT.BALANCE_UPDATED`, with the account
  as it reads after): funded through `POST /sandbox/internal-accounts/{id}/fund`, or moved by
  its transactions' money (see `ledger`). One per account whose `balance` or `totalBalance`
  differs at the end of an `advance` from its start, at the advance's end (after the records'
  own transitions; several movements in one advance are one event, the balances as they end);
  one at once for a change made through the interface (an execution, a cancellation, a card
  simulation).

Customers' KYC and external accounts do not change in this world (they are generated once), so
it has no other events for them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..generate.schema import CARD, INCOMING, NEVER, NO_CODE, STATUSES, status_at

if TYPE_CHECKING:
    from .base import WorldBase


@dataclass(frozen=True)
class Transition:
    """One change of a record: `event` (a `WebhookType`), the record as the interface shows it
    just after, and `at`, the simulated time of the change (µs since the epoch)."""

    kind: str  # "transaction", "card" or "internal_account"
    event: str
    record: dict[str, Any]
    at: int


TransitionHook = Callable[[Transition], None]

_PREFIX = {INCOMING: "INCOMING_PAYMENT", 1: "OUTGOING_PAYMENT", CARD: "CARD_TRANSACTION"}
_REFUND_STATUSES = ("PENDING", "COMPLETED", "FAILED")
_FAILED = STATUSES.index("FAILED")
_CREATED = STATUSES.index("CREATED")
_STATUS_EVENT = {"REJECTED": "FAILED"}


def status_event(kind: int, status: int) -> str | None:
    """The event announcing that a transaction of `kind` reached `status` (None: none does)."""
    if kind == INCOMING and status == _CREATED:
        return None
    name = STATUSES[status]
    return f"{_PREFIX[kind]}.{_STATUS_EVENT.get(name, name)}"


def row_transitions(
    world: WorldBase,
    rows: np.ndarray,
    since: int,
    until: int,
    *,
    born: np.ndarray | None = None,
    before: np.ndarray | None = None,
    always: bool = False,
) -> list[Transition]:
    """The transitions of transaction `rows` (unique) in the clock span (`since`, `until`]:
    their planned steps in it, and their creation for the rows in `born`. `before`: the rows'
    statuses before the span (default: as planned at `since`); `always`: a row with no step in
    the span is announced at `until` anyway (it changed through the interface)."""
    rows = world.lifecycle.kept(np.asarray(rows, dtype=np.int64))  # a deleted record is gone
    if not len(rows):
        return []
    s = world.store
    names = ("kind", "created", "t1", "t2", "t3", "flags", "final", "refund_final", "receipt")
    c = s.gather(rows, names)
    is_born = np.isin(rows, born) if born is not None else np.zeros(len(rows), bool)
    if before is None:
        before = status_at(c, since)
    before = np.where(is_born, -1, before)  # a new record's first status is a change
    receipt = np.where(c["receipt"] != 0, c["receipt"], NEVER)
    times = np.stack([np.where(is_born, c["created"], NEVER), c["t1"], c["t2"], c["t3"], receipt])
    inside = (times > since) & (times <= until) & (times >= c["created"])
    if always:
        inside[0] |= ~inside.any(axis=0)
        times[0] = np.where(inside[0] & ~is_born, until, times[0])
    which, at = np.nonzero(inside.T)[0], times.T[inside.T]
    order = np.lexsort((which, at))
    which, at = which[order], at[order]
    found: list[tuple[int, int, str]] = []  # (time, row index, event)
    last = dict(enumerate(before.tolist()))
    seen: set[tuple[int, int]] = set()
    for i, t in zip(which.tolist(), at.tolist(), strict=True):
        if (i, t) in seen:
            continue
        seen.add((i, t))
        one = {name: col[i : i + 1] for name, col in c.items()}
        status = int(status_at(one, t)[0])
        kind = int(c["kind"][i])
        changed = status != last[i] or always or t == receipt[i]
        last[i] = status
        refund = kind != CARD and status == _FAILED and int(c["refund_final"][i]) != NO_CODE
        event = status_event(kind, status)
        if changed and event is not None and not (refund and t == c["t3"][i] and t > c["t2"][i]):
            found.append((t, i, event))
        if refund and t == c["t2"][i] and c["t3"][i] > t:
            found.append((t, i, f"{_PREFIX[kind]}.REFUND_PENDING"))
        if refund and t == c["t3"][i]:
            final = _REFUND_STATUSES[int(c["refund_final"][i])]
            found.append((t, i, f"{_PREFIX[kind]}.REFUND_{final}"))
    return _rendered(world, rows, found)


def _rendered(
    world: WorldBase, rows: np.ndarray, found: list[tuple[int, int, str]]
) -> list[Transition]:
    """The transitions `found`, each with its record rendered as it was at its time."""
    records: dict[tuple[int, int], dict[str, Any]] = {}
    for t in sorted({t for t, _, _ in found}):
        picked = sorted({i for u, i, _ in found if u == t})
        for i, record in zip(picked, world.tx.snapshot(rows[picked], t), strict=True):
            records[(t, i)] = record
    return [Transition("transaction", event, records[(t, i)], t) for t, i, event in found]
