"""The one lifecycle vocabulary of paylens: what became of a transaction, in words every
helper, plot and the report share.

    open                 not finished yet (PENDING, PROCESSING, CREATED, ... or a status this
                         version does not know)
    completed            COMPLETED: the money arrived
    failed               FAILED with no refund shown: no money moved (or a refund not yet reported)
    refunded             FAILED with a COMPLETED refund (or REFUNDED): debited, then refunded
    refund_pending       FAILED with a refund not yet COMPLETED: debited, money owed to the sender
    refund_failed        FAILED with a FAILED refund: debited, the refund failed, money still owed
    expired              EXPIRED: the quote was never executed
    rejected             REJECTED (e.g. the platform declined an agent's payment)
    cancelled            a refund whose reason is USER_CANCELLATION: a cancelled transfer ends
                         FAILED with that refund, so the refund tells a cancel from a failure

`resolved` is every lifecycle but `open`; rates are taken over resolved transactions, so an
open transfer never counts as a success or a failure. A failure's reason is normalised: the
four reasons the interface removed (EXECUTION_FAILED_POST_DEBIT and SETTLEMENT_FAILED were
folded into QUOTE_EXECUTION_FAILED; TIMEOUT and MANUAL_REFUND were internal failures whose
outcome now shows on the refund object) read QUOTE_EXECUTION_FAILED, flagged `reason_removed`,
with `reported_failure_reason` as sent; the reasons the interface deprecates
(LIGHTNING_PAYMENT_FAILED, COUNTERPARTY_POST_TX_FAILED) are flagged `reason_deprecated`, and the
coarse payout fallback COUNTERPARTY_POST_TX_FAILED `reason_coarse`.
"""

from __future__ import annotations

from collections.abc import Iterable

from paylens.models import (
    COARSE_PAYOUT_FAILURE_REASON,
    GRANULAR_PAYOUT_FAILURE_REASONS,
    REMOVED_OUTGOING_FAILURE_REASONS,
    OutgoingTransactionFailureReason,
)

from ._common import Out, sql_string, sql_strings

OPEN, COMPLETED, FAILED = "open", "completed", "failed"
REFUNDED, REFUND_PENDING, REFUND_FAILED = "refunded", "refund_pending", "refund_failed"
EXPIRED, REJECTED, CANCELLED = "expired", "rejected", "cancelled"
#: Every lifecycle, in the order tables and legends show them.
LIFECYCLES = (
    OPEN, COMPLETED, FAILED, REFUNDED, REFUND_PENDING, REFUND_FAILED, EXPIRED, REJECTED, CANCELLED
)  # fmt: skip
#: Lifecycles of a transaction that ended.
RESOLVED = LIFECYCLES[1:]
#: Lifecycles counted as failures in `failure_rate` (expired, rejected and cancelled are
#: outcomes of their own: the transfer was never attempted on a rail, or was withdrawn).
FAILURES = (FAILED, REFUNDED, REFUND_PENDING, REFUND_FAILED)
#: Lifecycles of a failure after the sender was debited (the refund's three states); the
#: last two are money owed to the sender.
AFTER_DEBIT = (REFUNDED, REFUND_PENDING, REFUND_FAILED)
#: Lifecycles that did not complete.
UNSUCCESSFUL = RESOLVED[1:]

#: Reasons the interface deprecates (still returned, on old records mostly).
DEPRECATED_REASONS = frozenset(
    {
        OutgoingTransactionFailureReason.LIGHTNING_PAYMENT_FAILED,
        OutgoingTransactionFailureReason.COUNTERPARTY_POST_TX_FAILED,
    }
)
#: What a removed reason reads as today.
REMOVED_REASON_TARGET = OutgoingTransactionFailureReason.QUOTE_EXECUTION_FAILED
CANCELLATION_REFUND = "USER_CANCELLATION"

#: Columns the lifecycle is read from.
USES = ("status", "failure_reason", "refund_status", "refund_reason")

LIFECYCLE = (
    f"CASE WHEN refund_reason = {sql_string(CANCELLATION_REFUND)} AND status <> 'COMPLETED'"
    f" THEN '{CANCELLED}'"
    f" WHEN status = 'COMPLETED' THEN '{COMPLETED}'"
    f" WHEN status = 'EXPIRED' THEN '{EXPIRED}'"
    f" WHEN status = 'REJECTED' THEN '{REJECTED}'"
    " WHEN status = 'REFUNDED' OR (status = 'FAILED' AND refund_status = 'COMPLETED')"
    f" THEN '{REFUNDED}'"
    f" WHEN status = 'FAILED' AND refund_status = 'FAILED' THEN '{REFUND_FAILED}'"
    f" WHEN status = 'FAILED' AND refund_status IS NOT NULL THEN '{REFUND_PENDING}'"
    f" WHEN status = 'FAILED' THEN '{FAILED}'"
    f" ELSE '{OPEN}' END"
)


def _outgoing_reason(kind: str, reasons: Iterable[str]) -> str:
    """TRUE when an outgoing transaction's reason is one of `reasons` (these are outgoing
    reasons: an incoming TIMEOUT is not the removed outgoing one)."""
    return f"coalesce({kind} = 'OUTGOING' AND failure_reason IN {sql_strings(reasons)}, FALSE)"


def reason_removed(kind: str) -> str:
    return _outgoing_reason(kind, REMOVED_OUTGOING_FAILURE_REASONS)


def reason(kind: str) -> str:
    """The normalised failure reason (a removed one reads QUOTE_EXECUTION_FAILED)."""
    target = sql_string(REMOVED_REASON_TARGET)
    return f"CASE WHEN {reason_removed(kind)} THEN {target} ELSE failure_reason END"


def reason_payout(kind: str) -> str:
    return _outgoing_reason(kind, [*GRANULAR_PAYOUT_FAILURE_REASONS, COARSE_PAYOUT_FAILURE_REASON])


def columns(kind: str) -> list[Out]:
    """The per-row columns of the vocabulary; `kind` is the SQL giving the transaction type."""
    return [
        Out("lifecycle", LIFECYCLE),
        Out("failure_reason", reason(kind)),
        Out("reported_failure_reason", "failure_reason"),
        Out("reason_removed", reason_removed(kind)),
        Out("reason_deprecated", _outgoing_reason(kind, DEPRECATED_REASONS)),
        Out("reason_coarse", _outgoing_reason(kind, [COARSE_PAYOUT_FAILURE_REASON])),
    ]


def count_of(lifecycle: str) -> Out:
    """`<lifecycle>_count` of a group."""
    return Out(f"{lifecycle}_count", f"count(*) FILTER (WHERE lifecycle = '{lifecycle}')")


def in_(lifecycles: tuple[str, ...]) -> str:
    return f"lifecycle IN {sql_strings(lifecycles)}"


#: Group columns every helper built on the vocabulary shows: counts per lifecycle, the
#: resolved count and the failure rate over it.
COUNTS = [
    Out("transaction_count", "count(*)"),
    *(count_of(name) for name in LIFECYCLES),
    Out("resolved_count", f"count(*) FILTER (WHERE {in_(RESOLVED)})"),
    Out(
        "failure_rate",
        f"count(*) FILTER (WHERE {in_(FAILURES)})"
        f" / nullif(count(*) FILTER (WHERE {in_(RESOLVED)}), 0)",
    ),
]
