"""Incoming payments that wait for the platform's decision (the interface's 202-acknowledged flow).

An incoming UMA payment on an approval-mechanism rail is announced to the platform; a platform
that acknowledged it with 202 must call `POST /transactions/{id}/approve` or `/reject` within 5
seconds, or the payment is rejected on its behalf. In the sandbox such a payment is created by
`POST /sandbox/uma/receive` (`receive_uma_payment`) and lives as:

- PENDING from its creation, waiting for the decision;
- approve: it settles on the UMA rail (PENDING until then, COMPLETED after), answering the
  IncomingTransaction;
- reject: REJECTED at once (no `failureReason`: the interface gives one only to FAILED);
- no decision within 5 seconds of sandbox time: FAILED with `PAYMENT_APPROVAL_TIMED_OUT`.

The sandbox's test sender pays in the receiving currency, so `sentAmount` is the received amount
plus the UMA service fee (`fees`) and the exchange rate is 1. The payment's `source` shows the
sender's UMA address named in the request; its counterparty is the sandbox person with that
address, if there is one (else none is named).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..currencies import CHANNEL_INDEX, SERVICE_FEE_USD, to_minor
from ..generate.entities import NO_ROW, new_uuids
from ..generate.schema import (
    AWAITING_APPROVAL,
    IN_FAILURE_CODE,
    INCOMING,
    NO_CODE,
    SRC_UMA,
    STATUS_CODE,
    empty_columns,
    status_at,
)
from ..generate.transactions import settle_durations

if TYPE_CHECKING:
    from .base import WorldBase

#: How long an incoming payment waits for the platform's approve or reject (the interface: 5 s).
INCOMING_DECISION_US = 5_000_000


def next_created(world: WorldBase) -> int:
    """The creation time of a new row: now, after every existing row (whole milliseconds)."""
    store = world.store
    now_ms = world.now_us // 1000 * 1000
    created = max(now_ms, int(store.col("created")[-1]) + 1000 if store.n else 0)
    return created


def receive_uma_payment(world: WorldBase, account: int, amount: int, sender: str) -> int:
    """A new incoming UMA payment of `amount` minor units from the UMA address `sender` into
    internal `account`, waiting for the platform's decision; returns its row."""
    acc = world.entities.accounts
    currency = int(acc.currency[account])
    fee = int(to_minor(SERVICE_FEE_USD[CHANNEL_INDEX["UMA"]], currency))
    created = next_created(world)
    world.move_clock_to(created)
    hi, lo = new_uuids(world.call_rng, 1)
    cols = empty_columns(1)
    person = world.tx.person_by_uma(sender)
    values = {
        "hi": hi[0], "lo": lo[0], "kind": INCOMING, "created": created,
        "customer": int(acc.owner[account]), "sender": NO_ROW, "receiver": account,
        "send_cur": currency, "recv_cur": currency, "sent": amount + fee, "received": amount,
        "fees": fee, "fx": 1.0, "channel": CHANNEL_INDEX["UMA"], "source_kind": SRC_UMA,
        "person": NO_ROW if person is None else person,
        "t1": created, "t2": created + INCOMING_DECISION_US, "final": STATUS_CODE["FAILED"],
        "failure": IN_FAILURE_CODE["PAYMENT_APPROVAL_TIMED_OUT"], "flags": AWAITING_APPROVAL,
    }  # fmt: skip
    for name, value in values.items():
        cols[name][0] = value
    cols["status"] = status_at(cols, world.now_us)
    row = int(world.store.append(cols, world.now_us)[0])
    world.tx.name_uma_sender(row, sender)
    world.announce_new(row)
    return row


def approve_incoming(world: WorldBase, row: int, at: int) -> None:
    """The platform approved: the payment settles on its rail from `at`."""
    channel = np.array([world.store.col("channel")[row]])
    duration = int(settle_durations(world.call_rng, channel)[0]) // 1000 * 1000
    world.update_row(
        row, t2=at + max(duration, 1000), final=STATUS_CODE["COMPLETED"], failure=NO_CODE, touched=at,
        flags=int(world.store.col("flags")[row]) & ~AWAITING_APPROVAL,
    )  # fmt: skip


def reject_incoming(world: WorldBase, row: int, at: int) -> None:
    """The platform rejected: REJECTED at `at`."""
    world.update_row(
        row, t2=at, final=STATUS_CODE["REJECTED"], failure=NO_CODE, touched=at,
        flags=int(world.store.col("flags")[row]) & ~AWAITING_APPROVAL,
    )  # fmt: skip
