"""Checked by mypy in CI (`.ci/run`): what users write against `AsyncClient` must type-check,
and what they get back must be the models, not `Any` or a coroutine of one."""

from __future__ import annotations

from typing import assert_type

from paylens import AsyncClient, Client, models


async def async_usage(client: AsyncClient, transaction_id: str) -> None:
    tx = await client.transactions.get(transaction_id)
    assert_type(tx, models.Transaction)
    cancelled = await client.transactions.cancel(transaction_id, reason="duplicate")
    assert_type(cancelled, models.Transaction)
    card = await client.cards.update("Card:x", state="FROZEN")
    assert_type(card, models.Card)
    async for item in client.transactions.list(status="PENDING"):
        print(item.id)
    cards = await client.cards.list(state="ACTIVE").to_list()
    assert_type(cards, list[models.Card])
    async for page in client.customers.list().pages():
        print(page.total_count)
    sessions = await client.auth.sessions.list("InternalAccount:x")
    assert_type(sessions, list[models.AuthSession])


def sync_usage(client: Client, transaction_id: str) -> None:
    assert_type(client.transactions.get(transaction_id), models.Transaction)
    assert_type(client.quotes.get("Quote:x"), models.Quote)
    sibling = client.with_options(max_retries=0)
    assert_type(sibling, Client)
