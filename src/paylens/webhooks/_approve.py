"""Incoming payment approvals: the answer to an `INCOMING_PAYMENT.PENDING` on an approval rail.

The interface (`incoming-payment` webhook): for a PENDING payment on an approval-mechanism rail,
`200` approves, `403` rejects, `422` asks for more counterparty information, `202` defers (the
platform then calls `/transactions/{id}/approve` or `/reject` within 5 seconds, or the payment
is rejected for it). A bank-rail payment (SWIFT, ...) is informational at every status: its
funds have moved already, there is nothing to decide. The interface names no rail field on an
incoming payment; the approval mechanism is UMA's, so a payment is on an approval rail when it
comes from or to a UMA address (decided here, said in the docs).

A policy is `approve(payment) -> bool | Verdict` over the payment's wire record (`data`);
`approve_where(condition)` makes one from a read-only condition over the `transactions` table's
columns, in the language and sandbox of the bulk actions' selections (`paylens.ops`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from paylens.errors import InvalidArgumentError

#: What each answer does, as the ops journal would say it.
VERDICTS = {200: "approved", 202: "deferred", 403: "rejected", 422: "more information asked"}


@dataclass(frozen=True)
class Verdict:
    """A policy's answer: the HTTP status (200 approve, 403 reject, 422 more information, 202
    defer) and why (for 422, the counterparty fields wanted, comma-separated); an approval's
    `receiver_customer_info` answers the payment's `requestedReceiverCustomerInfoFields`
    (`CustomerInfoFieldName` to value; only the fields asked for are sent)."""

    status: int
    reason: str = ""
    receiver_customer_info: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.status not in VERDICTS:
            raise InvalidArgumentError(
                "status",
                f"{self.status} is not 200, 202, 403 or 422 (approve, defer, reject, "
                "more information)",
            )

    @classmethod
    def approve(
        cls,
        reason: str = "approved by the policy",
        *,
        receiver_customer_info: Mapping[str, Any] | None = None,
    ) -> Verdict:
        return cls(200, reason, receiver_customer_info)

    @classmethod
    def reject(cls, reason: str = "rejected by the policy") -> Verdict:
        return cls(403, reason)

    @classmethod
    def more_information(cls, fields: Sequence[str]) -> Verdict:
        """Ask for these counterparty fields (`CustomerInfoFieldName`s, e.g. `TAX_ID`)."""
        if not fields:
            raise InvalidArgumentError("fields", "name the counterparty fields wanted")
        return cls(422, ",".join(fields))

    @classmethod
    def defer(cls, reason: str = "deferred: decided by an approve or reject call") -> Verdict:
        return cls(202, reason)


Policy = Callable[[dict[str, Any]], "bool | Verdict"]


def verdict_of(answer: bool | Verdict) -> Verdict:
    """A policy's answer as a Verdict (True approves, False rejects)."""
    if isinstance(answer, Verdict):
        return answer
    if isinstance(answer, bool):
        return Verdict.approve() if answer else Verdict.reject()
    raise InvalidArgumentError(
        "approve", f"a policy answers True, False or a Verdict, not {type(answer).__name__}"
    )


def answering(verdict: Verdict, payment: dict[str, Any]) -> Verdict:
    """`verdict` as it can be answered to `payment`: an approval carries the receiver's
    information the sender asked for (`requestedReceiverCustomerInfoFields`), only those
    fields; one lacking a mandatory field cannot be answered as the interface wants (the 200
    must carry them), so it is a rejection naming what was missing."""
    if verdict.status != 200:
        return verdict
    asked = [
        field
        for field in payment.get("requestedReceiverCustomerInfoFields") or []
        if isinstance(field, dict) and isinstance(field.get("name"), str)
    ]
    given = verdict.receiver_customer_info or {}
    missing = [f["name"] for f in asked if f.get("mandatory") and given.get(f["name"]) is None]
    if missing:
        return Verdict.reject(
            "approved without the receiver information the sender asked for: " + ", ".join(missing)
        )
    info = {f["name"]: given[f["name"]] for f in asked if given.get(f["name"]) is not None}
    return Verdict(200, verdict.reason, info or None)


def on_approval_rail(payment: dict[str, Any]) -> bool:
    """Whether an incoming payment goes through the approval mechanism (UMA), not a bank rail."""
    source = payment.get("source")
    destination = payment.get("destination")
    return bool(
        payment.get("senderUmaAddress")
        or (isinstance(source, dict) and source.get("sourceType") == "UMA_ADDRESS")
        or (isinstance(destination, dict) and destination.get("destinationType") == "UMA_ADDRESS")
    )


def approve_where(condition: str) -> Policy:
    """A policy approving the payments for which `condition` (SQL over the `transactions`
    table's columns, as `paylens approve --where` takes) holds and rejecting the others. The
    condition is checked now (a column that is not there is refused naming the columns), then
    evaluated on each payment alone, in a private in-memory database that reaches no file."""
    from paylens._select import checked_query, rows_where
    from paylens.frames import to_arrow

    query = checked_query(condition, "transactions")
    empty = to_arrow("transactions", []).drop_columns(["raw"])
    rows_where(empty, condition, "transactions", query=query, misspelt=False)

    def policy(payment: dict[str, Any]) -> Verdict:
        row = to_arrow("transactions", [payment]).drop_columns(["raw"])
        if rows_where(row, condition, "transactions", query=query, misspelt=False):
            return Verdict.approve(f"matches {condition}")
        return Verdict.reject(f"does not match {condition}")

    policy.__doc__ = f"approve where {condition}"
    return policy
