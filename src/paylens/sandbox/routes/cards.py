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
def list_cards(r: Request) -> tuple[int, Any]:
    w, q = r.world, Query(r.params)
    cards = w.entities.cards
    holder, account, platform_id = (
        q.text("cardholderId"),
        q.text("accountId"),
        q.text("platformCardId"),
    )
    state = q.choice("state", CARD_STATES)

    def select() -> RowSet:
        mask = np.ones(len(cards), dtype=bool)
        if holder is not None:
            mask &= cards.holder == w.entities.customer_index.get(holder, UNKNOWN_ROW)
        if state is not None:
            mask &= cards.state == CARD_STATES.index(state)
        if account is not None:
            a = w.entities.account_index.get(account, UNKNOWN_ROW)
            mask &= np.array([a in f for f in cards.funding], dtype=bool)
        if platform_id is not None:
            mask &= np.arange(len(cards)) == w.views.card_by_platform_id(platform_id)
        return ordered(mask)

    return 200, paginate(
        q, "cards", select, lambda rows: [w.views.card(i) for i in rows.tolist()], sortable=True
    )


@route("GET", "/cards/{id}")
def get_card(r: Request) -> tuple[int, Any]:
    return 200, r.world.views.card(r.world.card_row(r.args[0]))


@route("PATCH", "/cards/{id}")
def patch_card(r: Request) -> tuple[int, Any]:
    w = r.world
    w.card_row(r.args[0])  # 404 before checking the body
    body = r.body if isinstance(r.body, dict) else None
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
    return 200, w.update_card(r.args[0], state, funding, max_spend, has_max)
