"""Misuse that must NOT type-check, checked by mypy in CI (`.ci/run`) under `--strict`, whose
`warn_unused_ignores` turns each `type: ignore` below into an error the day the misuse it
marks type-checks again: an async listing walked as a sync one fails at run time, so the
type checker must refuse it first."""

from __future__ import annotations

from paylens import AsyncClient, Client


async def async_listing_walked_as_sync(client: AsyncClient) -> None:
    for tx in client.transactions.list(status="PENDING"):  # type: ignore[attr-defined]
        print(tx)
    client.cards.list().to_list().sort()  # type: ignore[attr-defined]
    for page in client.customers.list().pages():  # type: ignore[attr-defined]
        print(page)
    await client.transactions.list()  # type: ignore[misc]


async def sync_listing_walked_as_async(client: Client) -> None:
    async for tx in client.transactions.list():  # type: ignore[attr-defined]
        print(tx)


async def async_call_not_awaited(client: AsyncClient) -> None:
    print(client.transactions.get("Transaction:x").id)  # type: ignore[attr-defined]
