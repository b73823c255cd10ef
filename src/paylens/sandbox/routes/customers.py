"""Routes of `/customers`: the list, one customer, and the email update (a signed retry when
the customer's wallets hold EMAIL_OTP credentials, see `world.wallets`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..currencies import CURRENCY_INDEX, REGIONS
from ..errors import invalid
from ..generate.entities import CUSTOMER_TYPES
from ..wire.request import Query, Request
from ..world.store import RowSet
from .checks import body_object, raise_if_invalid, require_texts
from .pagination import UNKNOWN_ROW, ordered, paginate
from .registry import route
from .wallets import signed_request


def current_updated(w: Any) -> np.ndarray:
    """Each customer's `updatedAt` as served now: an email change (PATCH) moves it."""
    updated: np.ndarray = w.entities.customers.updated
    changes: dict[int, int] = w.wallets.email_updates
    if not changes:
        return updated
    current = updated.copy()
    rows = np.fromiter(changes.keys(), np.int64, len(changes))
    moved = np.fromiter(changes.values(), np.int64, len(changes))
    current[rows] = np.maximum(current[rows], moved)
    return current


@route("GET", "/customers")
def list_customers(r: Request) -> tuple[int, Any]:
    w, q = r.world, Query(r.params)
    c = w.entities.customers
    platform_id = q.text("platformCustomerId")
    kind = q.choice("customerType", CUSTOMER_TYPES)
    bounds = [
        (q.time(name), column, upper)
        for name, column, upper in (
            ("createdAfter", c.created, False),
            ("createdBefore", c.created, True),
            ("updatedAfter", current_updated(w), False),
            ("updatedBefore", current_updated(w), True),
        )
    ]
    region, currency, uma = q.text("region"), q.currency("currency"), q.text("umaAddress")
    deleted = q.boolean("isIncludingDeleted")

    def select() -> RowSet:
        mask = np.ones(len(c), dtype=bool) if deleted else ~c.deleted
        if platform_id is not None:
            mask &= np.arange(len(c)) == w.entities.platform_customer_index.get(
                platform_id, UNKNOWN_ROW
            )
        if kind is not None:
            mask &= c.kind == CUSTOMER_TYPES.index(kind)
        for at, column, upper in bounds:
            if at is not None:
                mask &= (column <= at) if upper else (column >= at)
        if region is not None:
            mask &= np.array([REGIONS[k][0] == region for k in c.region.tolist()], dtype=bool)
        if currency is not None:
            code = CURRENCY_INDEX.get(currency, UNKNOWN_ROW)
            mask &= np.array([code in cs for cs in c.currencies], dtype=bool)
        if uma is not None:
            mask &= np.arange(len(c)) == w.views.customer_by_uma(uma)
        return ordered(mask)

    return 200, paginate(
        q,
        "customers",
        select,
        lambda rows: [w.wallets.customer_view(w.views.customer(i), i) for i in rows.tolist()],
        sortable=False,
    )


@route("GET", "/customers/{id}")
def get_customer(r: Request) -> tuple[int, Any]:
    row = r.world.customer_row(r.args[0])
    return 200, r.world.wallets.customer_view(r.world.views.customer(row), row)


@route("PATCH", "/customers/{id}")
def patch_customer(r: Request) -> tuple[int, Any]:
    w = r.world
    row = w.customer_row(r.args[0])
    body = body_object(r)
    kind = CUSTOMER_TYPES[w.entities.customers.kind[row]]
    if "email" in body and "phoneNumber" in body:
        raise invalid(
            [{"field": "phoneNumber", "message": "update email and phoneNumber in separate calls"}]
        )
    errors: list[dict[str, str]] = [
        {"field": name, "message": "the sandbox updates only a customer's email"}
        for name in sorted(set(body) - {"customerType", "email"})
    ]
    if body.get("customerType") != kind:
        errors.append({"field": "customerType", "message": f"must be {kind}, the customer's type"})
    require_texts(body, ("email",), "", errors)
    raise_if_invalid(errors)
    signed = signed_request(r, f"PATCH /customers/{r.args[0]}")
    return w.wallets.update_email(signed, row, body["email"], lambda: w.views.customer(row))
