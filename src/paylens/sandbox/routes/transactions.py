"""Routes of `/transactions`: the list with its strict filters, one transaction, and the
platform's actions on one (cancel, approve, reject, confirm receipt)."""

from __future__ import annotations

from typing import Any

from ..errors import invalid
from ..generate.entities import NO_ROW
from ..generate.schema import CARD_STATUSES, KINDS, STATUS_CODE, STATUSES
from ..wire.request import Query, Request, optional_text, parse_time
from ..world.store import RowSet
from .checks import body_object
from .pagination import UNKNOWN_ROW, paginate
from .registry import route

#: The transaction list's filters take the interface's values only: `status` a TransactionStatus
#: (REFUNDED, the one name card transactions share, matches both kinds: the filter compares the
#: status), `type` INCOMING or OUTGOING (card transactions are listed, but no filter selects them).
_TX_STATUSES = tuple(s for s in STATUSES if s not in CARD_STATUSES or s == "REFUNDED")
_TX_KINDS = ("INCOMING", "OUTGOING")


@route("GET", "/transactions")
def list_transactions(r: Request) -> tuple[int, Any]:
    w, q = r.world, Query(r.params)
    e = w.entities
    customers = []
    if (cid := q.text("customerId")) is not None:
        customers.append(e.customer_index.get(cid, NO_ROW))
    if (pid := q.text("platformCustomerId")) is not None:
        customers.append(e.platform_customer_index.get(pid, NO_ROW))

    def account(name: str) -> int | None:
        value = q.text(name)
        return None if value is None else e.account_index.get(value, UNKNOWN_ROW)

    status = q.choice("status", _TX_STATUSES)
    kind = q.choice("type", _TX_KINDS)
    start, end = q.time("startDate"), q.time("endDate")
    # every parameter is read before `paginate` checks them (a repeat is refused there)
    holder, sender, receiver = (
        account(name)
        for name in ("accountIdentifier", "senderAccountIdentifier", "receiverAccountIdentifier")
    )
    reference = q.text("reference")

    def select() -> RowSet:
        return w.select_transactions(
            customers=customers,
            account=holder,
            sender=sender,
            receiver=receiver,
            status=None if status is None else STATUS_CODE[status],
            kind=None if kind is None else KINDS.index(kind),
            reference=reference,
            start=start,
            end=end,
        )

    return 200, paginate(q, "transactions", select, w.render_transactions, sortable=True)


@route("GET", "/transactions/{id}")
def get_transaction(r: Request) -> tuple[int, Any]:
    return 200, r.world.get_transaction_wire(r.args[0])


def _reason(r: Request) -> str | None:
    """The optional free-text `reason` of a cancel or reject body."""
    errors: list[dict[str, str]] = []
    reason = optional_text(body_object(r), "reason", errors)
    if errors:
        raise invalid(errors)
    return reason


@route("POST", "/transactions/{id}/cancel")
def cancel_transaction(r: Request) -> tuple[int, Any]:
    return 200, r.world.cancel(r.args[0], _reason(r))


@route("POST", "/transactions/{id}/approve")
def approve_transaction(r: Request) -> tuple[int, Any]:
    body = body_object(r)
    if "receiverCustomerInfo" in body and not isinstance(body["receiverCustomerInfo"], dict):
        raise invalid([{"field": "receiverCustomerInfo", "message": "must be an object"}])
    return 200, r.world.approve(r.args[0])


@route("POST", "/transactions/{id}/reject")
def reject_transaction(r: Request) -> tuple[int, Any]:
    return 200, r.world.reject(r.args[0], _reason(r))


@route("POST", "/transactions/{id}/confirm")
def confirm_transaction(r: Request) -> tuple[int, Any]:
    body = body_object(r)
    value = body.get("receiptDeliveryConfirmedAt")
    at = None
    if "receiptDeliveryConfirmedAt" in body:  # present means a date-time: null is not one
        at = parse_time(value) if isinstance(value, str) else None
        if at is None:
            raise invalid(
                [
                    {
                        "field": "receiptDeliveryConfirmedAt",
                        "message": "must be an ISO 8601 date-time with a time zone",
                    }
                ]
            )
    return 200, r.world.confirm_receipt(r.args[0], at)
