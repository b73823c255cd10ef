"""The columns of a transaction row and the codes they hold; a row's status from its plan.

Lifecycles
==========
Each row has a plan fixed at creation: up to three event times `t1 <= t2` (and `t3`) and a
final status. Its status at any clock time follows from the plan (`status_at`):

- OUTGOING: PENDING (PENDING_AUTHORIZATION for customers in a Strong Customer Authentication
  region, until authorized) until t1, PROCESSING until t2, then the final COMPLETED, FAILED or
  EXPIRED (an expired quote goes from PENDING straight to EXPIRED). `settledAt` = t2 when
  COMPLETED. A refund (after some failures) is initiated at t2 and settles at t3.
- INCOMING: CREATED until t1, PENDING until t2, then COMPLETED or FAILED.
- CARD: AUTHORIZED until the first clearing at t1 (never, for stale holds), PARTIALLY_SETTLED
  while a second clearing (t2) is due (or for good, when only part of the hold ever clears),
  SETTLED after it, REFUNDED from a merchant return at t3; EXCEPTION when the funding pull of
  the clearing failed. The authorization's pull counts as pending (`pullSummary.pendingCount`)
  for its first 30 seconds; a clearing above the hold (tips) adds a second, post-hoc pull.

`World.advance` moves the clock: whatever is due changes state exactly as planned, and new
transactions arrive at the generated rate (more on weekdays and in business hours). Settlement
durations are drawn per channel (instant rails seconds, ACH about a day, wires
hours, SWIFT days) with a tail of late ones that settle after `expectedSettlementAt`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..currencies import (
    CHANNEL_INDEX,
)
from .entities import NO_ROW, US_PER_DAY

NEVER = np.iinfo(np.int64).max
NO_CODE = 255  # "absent" in small code columns
US_PER_SECOND = 1_000_000
MINUTE_MS = 60_000
KINDS = ("INCOMING", "OUTGOING", "CARD")
INCOMING, OUTGOING, CARD = 0, 1, 2
STATUSES = (
    "CREATED", "PENDING", "PENDING_AUTHORIZATION", "PROCESSING", "COMPLETED", "REJECTED",
    "FAILED", "REFUNDED", "EXPIRED", "AUTHORIZED", "PARTIALLY_SETTLED", "SETTLED", "EXCEPTION",
)  # fmt: skip


STATUS_CODE = {name: i for i, name in enumerate(STATUSES)}
CARD_STATUSES = frozenset({"AUTHORIZED", "PARTIALLY_SETTLED", "SETTLED", "REFUNDED", "EXCEPTION"})
TERMINAL = np.array(
    [s in ("COMPLETED", "FAILED", "EXPIRED", "REJECTED", "REFUNDED") for s in STATUSES]
)


OUT_FAILURES = (
    "QUOTE_EXPIRED", "QUOTE_RATE_UNAVAILABLE", "QUOTE_EXECUTION_FAILED", "FUNDING_AMOUNT_MISMATCH",
    "SCA_NOT_COMPLETED", "PAYOUT_RETURNED", "LIMIT_EXCEEDED", "ACCOUNT_CANNOT_RECEIVE",
    "ACCOUNT_INVALID", "COMPLIANCE_REJECTED", "LIGHTNING_PAYMENT_FAILED", "COUNTERPARTY_POST_TX_FAILED",
)  # fmt: skip


OUT_FAILURE_CODE = {name: i for i, name in enumerate(OUT_FAILURES)}
IN_FAILURES = (
    "LNURLP_FAILED", "PAY_REQUEST_FAILED", "PAYMENT_APPROVAL_WEBHOOK_ERROR", "PAYMENT_APPROVAL_TIMED_OUT",
    "OFFRAMP_FAILED", "MISSING_MANDATORY_PAYEE_DATA", "QUOTE_EXPIRED", "QUOTE_EXECUTION_FAILED",
    "COMPLIANCE_REJECTED", "COLLECTION_FAILED",
)  # fmt: skip


IN_FAILURE_CODE = {name: i for i, name in enumerate(IN_FAILURES)}
PENDING_REASONS = (
    "COMPLIANCE_REVIEW",
    "COUNTERPARTY_INFORMATION_REQUIRED",
    "COUNTERPARTY_DECLARATION_REQUIRED",
    "WALLET_VERIFICATION_REQUIRED",
)


REFUND_STATUSES = ("PENDING", "COMPLETED", "FAILED")
REFUND_REASONS = ("TRANSACTION_FAILED", "USER_CANCELLATION", "TIMEOUT")
SRC_ACCOUNT, SRC_UMA, SRC_FUNDING = 0, 1, 2  # sourceType ACCOUNT, UMA_ADDRESS, REALTIME_FUNDING
DEST_ACCOUNT, DEST_UMA = 0, 1
RAIL_MODES = (None, "AUTO", "MANUAL")


# flags
AWAITING_APPROVAL = 1  # agent-initiated, waiting for the platform's approve or reject
SCA = 2  # waits in PENDING_AUTHORIZATION before t1
COUNTERPARTY_INFO = 4
ACH_PULL = 8  # incoming pull from the customer's own bank account over ACH
CARD_TIP = 16  # clearing above the authorization: a second (post-hoc) pull
CARD_EXCEPTION = 32
CARD_PARTIAL_FINAL = 64  # only part of the authorization ever clears
#: How long an agent-initiated transaction waits for the platform's decision before expiring.
APPROVAL_WINDOW_US = 3 * US_PER_DAY
#: Columns of the transaction store: name -> (dtype, value of a new row before generation).
COLUMNS: dict[str, tuple[Any, Any]] = {
    "hi": (np.uint64, 0), "lo": (np.uint64, 0), "kind": (np.uint8, 0),
    "created": (np.int64, 0), "status": (np.uint8, 0), "final": (np.uint8, 0),
    "t1": (np.int64, NEVER), "t2": (np.int64, NEVER), "t3": (np.int64, NEVER),
    "touched": (np.int64, 0),  # last change made through the interface (0: none)
    "customer": (np.int32, 0), "sender": (np.int32, NO_ROW), "receiver": (np.int32, NO_ROW),
    "send_cur": (np.uint8, 0), "recv_cur": (np.uint8, 0),
    "sent": (np.int64, 0), "received": (np.int64, 0), "fees": (np.int64, 0),
    "fixed_fee": (np.int64, 0), "var_fee": (np.int64, 0), "platform_fee": (np.int64, 0),
    "cpty_fee": (np.int64, 0), "var_rate": (np.float64, 0.0), "fx": (np.float64, 1.0),
    "channel": (np.uint8, CHANNEL_INDEX["INTERNAL"]), "rail_mode": (np.uint8, 0),
    "source_kind": (np.uint8, SRC_ACCOUNT), "dest_kind": (np.uint8, DEST_ACCOUNT),
    "person": (np.int32, NO_ROW), "card": (np.int32, NO_ROW), "merchant": (np.uint8, 0),
    "failure": (np.uint8, NO_CODE), "pending_reason": (np.uint8, NO_CODE),
    "refund_final": (np.uint8, NO_CODE), "refund_reason": (np.uint8, 0),
    "expected": (np.int64, NEVER), "timeline": (np.int32, -1), "cancel_by": (np.int64, 0),
    "receipt": (np.int64, 0), "agent": (np.int16, NO_ROW), "memo": (np.uint8, 0),
    "flags": (np.uint16, 0),
    "clear1": (np.int64, 0), "clear2": (np.int64, 0), "refund_amount": (np.int64, 0),
}  # fmt: skip


def empty_columns(n: int) -> dict[str, np.ndarray]:
    return {name: np.full(n, fill, dtype=dtype) for name, (dtype, fill) in COLUMNS.items()}


def status_at(cols: dict[str, np.ndarray], now: int | np.ndarray) -> np.ndarray:
    """Status codes of the rows in `cols` (arrays of equal length) at clock time `now` (one
    time, or one per row)."""
    kind, t1, t2, t3, flags = cols["kind"], cols["t1"], cols["t2"], cols["t3"], cols["flags"]
    first = np.where(
        kind == INCOMING,
        STATUS_CODE["CREATED"],
        np.where(flags & SCA, STATUS_CODE["PENDING_AUTHORIZATION"], STATUS_CODE["PENDING"]),
    )
    second = np.where(kind == INCOMING, STATUS_CODE["PENDING"], STATUS_CODE["PROCESSING"])
    payments = np.where(t2 <= now, cols["final"], np.where(t1 <= now, second, first))
    cleared = np.where(
        flags & CARD_EXCEPTION,
        STATUS_CODE["EXCEPTION"],
        np.where(
            t3 <= now,
            STATUS_CODE["REFUNDED"],
            np.where(
                ((t2 != NEVER) & (t2 > now)) | (flags & CARD_PARTIAL_FINAL != 0),
                STATUS_CODE["PARTIALLY_SETTLED"],
                STATUS_CODE["SETTLED"],
            ),
        ),
    )
    cards = np.where(t1 > now, STATUS_CODE["AUTHORIZED"], cleared)
    return np.where(kind == CARD, cards, payments).astype(np.uint8)


def next_event(cols: dict[str, np.ndarray], now: int) -> np.ndarray:
    """The first planned event after `now` of each row (NEVER when none is left)."""
    nxt = np.full(len(cols["t1"]), NEVER, dtype=np.int64)
    for name in ("t1", "t2", "t3"):
        t = cols[name]
        nxt = np.where((t > now) & (t < nxt), t, nxt)
    return nxt
