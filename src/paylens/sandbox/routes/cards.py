"""Routes of `/cards`: the list, one card, and its PATCH (state, funding sources, spend limit)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import invalid
from ..generate.entities import CARD_STATES
from ..wire.request import Query, Request, is_int
from ..world.store import RowSet
from .pagination import UNKNOWN_ROW, ordered, paginate
from .registry import route


@route("GET", "/cards")
def list_cards(request: Request) -> tuple[int, Any]:
    world, query = request.world, Query(request.params)
    cards = world.entities.cards
    holder, account, platform_id = (
        query.text("cardholderId"),
        query.text("accountId"),
        query.text("platformCardId"),
    )
    state = query.choice("state", CARD_STATES)

    def select() -> RowSet:
        mask = np.ones(len(cards), dtype=bool)
        if holder is not None:
            mask &= cards.holder == world.entities.customer_index.get(holder, UNKNOWN_ROW)
        if state is not None:
            mask &= cards.state == CARD_STATES.index(state)
        if account is not None:
            a = world.entities.account_index.get(account, UNKNOWN_ROW)
            mask &= np.array([a in f for f in cards.funding], dtype=bool)
        if platform_id is not None:
            mask &= np.arange(len(cards)) == world.views.card_by_platform_id(platform_id)
        return ordered(mask)

    return 200, paginate(
        query,
        "cards",
        select,
        lambda rows: [world.views.card(i) for i in rows.tolist()],
        sortable=True,
    )


@route("GET", "/cards/{id}")
def get_card(request: Request) -> tuple[int, Any]:
    return 200, request.world.views.card(request.world.card_row(request.args[0]))


@route("PATCH", "/cards/{id}")
def patch_card(request: Request) -> tuple[int, Any]:
    world = request.world
    world.card_row(request.args[0])  # 404 before checking the body
    body = request.body if isinstance(request.body, dict) else None
    if body is None:
        raise invalid([{"field": "body", "message": "must be a JSON object"}])
    errors: list[dict[str, str]] = []
    state = body.get("state")
    if state is not None and state not in ("ACTIVE", "FROZEN", "CLOSED"):
        errors.append({"field": "state", "message": "must be one of ACTIVE, FROZEN, CLOSED"})
    funding = body.get("fundingSources")
    if funding is not None and (
        not isinstance(funding, list) or not funding or not all(isinstance(f, str) for f in funding)
    ):
        errors.append(
            {
                "field": "fundingSources",
                "message": "must be a non-empty array of internal account ids",
            }
        )
    has_max = "maxSpendPerTransaction" in body
    max_spend = body.get("maxSpendPerTransaction")
    if max_spend is not None and not is_int(max_spend, 1):
        errors.append(
            {"field": "maxSpendPerTransaction", "message": "must be a positive integer or null"}
        )
    if state is None and funding is None and not has_max:
        errors.append(
            {
                "field": "body",
                "message": "supply at least one of state, fundingSources, maxSpendPerTransaction",
            }
        )
    if state == "CLOSED" and (funding is not None or has_max):
        errors.append(
            {
                "field": "state",
                "message": "CLOSED cannot be combined with fundingSources or maxSpendPerTransaction",
            }
        )
    if errors:
        raise invalid(errors)
    return 200, world.update_card(request.args[0], state, funding, max_spend, has_max)
