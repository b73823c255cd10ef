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
def list_transactions(request: Request) -> tuple[int, Any]:
    world, query = request.world, Query(request.params)
    e = world.entities
    customers = []
    if (cid := query.text("customerId")) is not None:
        customers.append(e.customer_index.get(cid, NO_ROW))
    if (pid := query.text("platformCustomerId")) is not None:
        customers.append(e.platform_customer_index.get(pid, NO_ROW))

    def account(name: str) -> int | None:
        value = query.text(name)
        return None if value is None else e.account_index.get(value, UNKNOWN_ROW)

    status = query.choice("status", _TX_STATUSES)
    kind = query.choice("type", _TX_KINDS)
    start, end = query.time("startDate"), query.time("endDate")
    # every parameter is read before `paginate` checks them (a repeat is refused there)
    holder, sender, receiver = (
        account(name)
        for name in ("accountIdentifier", "senderAccountIdentifier", "receiverAccountIdentifier")
    )
    reference = query.text("reference")

    def select() -> RowSet:
        return world.select_transactions(
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

    return 200, paginate(query, "transactions", select, world.render_transactions, sortable=True)


@route("GET", "/transactions/{id}")
def get_transaction(request: Request) -> tuple[int, Any]:
    return 200, request.world.get_transaction_wire(request.args[0])


def _reason(request: Request) -> str | None:
    """The optional free-text `reason` of a cancel or reject body."""
    errors: list[dict[str, str]] = []
    reason = optional_text(body_object(request), "reason", errors)
    if errors:
        raise invalid(errors)
    return reason


@route("POST", "/transactions/{id}/cancel")
def cancel_transaction(request: Request) -> tuple[int, Any]:
    return 200, request.world.cancel(request.args[0], _reason(request))


@route("POST", "/transactions/{id}/approve")
def approve_transaction(request: Request) -> tuple[int, Any]:
    body = body_object(request)
    if "receiverCustomerInfo" in body and not isinstance(body["receiverCustomerInfo"], dict):
        raise invalid([{"field": "receiverCustomerInfo", "message": "must be an object"}])
    return 200, request.world.approve(request.args[0])


@route("POST", "/transactions/{id}/reject")
def reject_transaction(request: Request) -> tuple[int, Any]:
    return 200, request.world.reject(request.args[0], _reason(request))


@route("POST", "/transactions/{id}/confirm")
def confirm_transaction(request: Request) -> tuple[int, Any]:
    body = body_object(request)
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
    return 200, request.world.confirm_receipt(request.args[0], at)
