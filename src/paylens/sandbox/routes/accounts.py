"""Routes of the four account lists: customers' and the platform's, internal and external."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..currencies import CURRENCY_INDEX
from ..generate.entities import INTERNAL_TYPES, NO_ROW
from ..wire.request import Handler, Query, Request
from ..world.store import RowSet
from .pagination import UNKNOWN_ROW, ordered, paginate
from .registry import route


def _account_rows(
    request: Request, query: Query, *, external: bool, platform: bool
) -> Callable[[], RowSet]:
    world = request.world
    a = world.entities.accounts
    currency = query.currency("currency")
    customer = None if platform else query.text("customerId")
    kind = None if external else query.choice("type", INTERNAL_TYPES)

    def select() -> RowSet:
        mask = (a.external == external) & ((a.owner == NO_ROW) if platform else (a.owner != NO_ROW))
        if currency is not None:
            mask &= a.currency == CURRENCY_INDEX.get(currency, UNKNOWN_ROW)
        if customer is not None:
            mask &= a.owner == world.entities.customer_index.get(customer, UNKNOWN_ROW)
        if kind is not None:
            mask &= a.kind == INTERNAL_TYPES.index(kind)
        return ordered(mask)

    return select


def _account_list(
    resource: str, *, external: bool, platform: bool, paginated: bool = True
) -> Handler:
    """The handler of one of the four account lists."""

    def handle(request: Request) -> tuple[int, Any]:
        query = Query(request.params)
        select = _account_rows(request, query, external=external, platform=platform)
        views = request.world.views
        render_one = views.external_account if external else views.internal_account

        def render(rows: np.ndarray) -> list[Any]:
            return [render_one(i) for i in rows.tolist()]

        if paginated:
            return 200, paginate(query, resource, select, render, sortable=False)
        query.check()
        return 200, {
            "data": render(select().page(None, True, len(request.world.entities.accounts))[0])
        }

    return handle


route("GET", "/customers/internal-accounts")(
    _account_list("internal-accounts", external=False, platform=False)
)
route("GET", "/platform/internal-accounts")(
    _account_list("platform-internal-accounts", external=False, platform=True, paginated=False)
)
route("GET", "/customers/external-accounts")(
    _account_list("external-accounts", external=True, platform=False)
)
route("GET", "/platform/external-accounts")(
    _account_list("platform-external-accounts", external=True, platform=True)
)
