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


def current_updated(world: Any) -> np.ndarray:
    """Each customer's `updatedAt` as served now: an email change (PATCH) moves it."""
    updated: np.ndarray = world.entities.customers.updated
    changes: dict[int, int] = world.wallets.email_updates
    if not changes:
        return updated
    current = updated.copy()
    rows = np.fromiter(changes.keys(), np.int64, len(changes))
    moved = np.fromiter(changes.values(), np.int64, len(changes))
    current[rows] = np.maximum(current[rows], moved)
    return current


@route("GET", "/customers")
def list_customers(request: Request) -> tuple[int, Any]:
    world, query = request.world, Query(request.params)
    c = world.entities.customers
    platform_id = query.text("platformCustomerId")
    kind = query.choice("customerType", CUSTOMER_TYPES)
    bounds = [
        (query.time(name), column, upper)
        for name, column, upper in (
            ("createdAfter", c.created, False),
            ("createdBefore", c.created, True),
            ("updatedAfter", current_updated(world), False),
            ("updatedBefore", current_updated(world), True),
        )
    ]
    region, currency, uma = (
        query.text("region"),
        query.currency("currency"),
        query.text("umaAddress"),
    )
    deleted = query.boolean("isIncludingDeleted")

    def select() -> RowSet:
        mask = np.ones(len(c), dtype=bool) if deleted else ~c.deleted
        if platform_id is not None:
            mask &= np.arange(len(c)) == world.entities.platform_customer_index.get(
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
            mask &= np.arange(len(c)) == world.views.customer_by_uma(uma)
        return ordered(mask)

    return 200, paginate(
        query,
        "customers",
        select,
        lambda rows: [
            world.wallets.customer_view(world.views.customer(i), i) for i in rows.tolist()
        ],
        sortable=False,
    )


@route("GET", "/customers/{id}")
def get_customer(request: Request) -> tuple[int, Any]:
    row = request.world.customer_row(request.args[0])
    return 200, request.world.wallets.customer_view(request.world.views.customer(row), row)


@route("PATCH", "/customers/{id}")
def patch_customer(request: Request) -> tuple[int, Any]:
    world = request.world
    row = world.customer_row(request.args[0])
    body = body_object(request)
    kind = CUSTOMER_TYPES[world.entities.customers.kind[row]]
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
    signed = signed_request(request, f"PATCH /customers/{request.args[0]}")
    return world.wallets.update_email(signed, row, body["email"], lambda: world.views.customer(row))
