"""Pagination safety against a misbehaving service (which the faithful sandbox cannot be, so a
small scripted transport plays it), and a pagination that survives new records arriving."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import httpx
import orjson
import pytest

from paylens import AsyncClient, Client, PaginationError, ResponseValidationError, Sandbox


def _scripted(pages: list[dict]) -> Client:
    served = iter(pages)

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=orjson.dumps(next(served)))

    return Client(
        "https://api.example.com/2025-10-13", "id", "secret", transport=httpx.MockTransport(answer)
    )


def test_a_repeated_cursor_is_an_error_not_a_loop() -> None:
    page = {"data": [], "hasMore": True, "nextCursor": "abc", "totalCount": 0}
    loop = {**page, "data": [{"unused": 1}]}
    client = _scripted([{**loop, "data": []}, page, page])
    with pytest.raises(PaginationError, match="second time"):
        list(client.transactions.list().pages(raw=True))


def test_empty_pages_that_claim_more_end_with_an_error() -> None:
    pages = [
        {"data": [], "hasMore": True, "nextCursor": f"c{i}", "totalCount": 5} for i in range(10)
    ]
    client = _scripted(pages)
    with pytest.raises(PaginationError, match="bring no new record"):
        list(client.transactions.list().pages(raw=True))


def _records(shared: Sandbox, count: int) -> list[dict]:
    return [t for t in shared.world.all_transactions() if t["type"] == "OUTGOING"][:count]


def test_the_same_records_under_ever_new_cursors_end_with_an_error(
    shared_sandbox: Sandbox,
) -> None:
    """A service that ignores the cursor (the same records, a fresh cursor each page) stops
    a listing with `PaginationError`, sync and async, rather than looping forever."""

    same = _records(shared_sandbox, 2)
    pages = [
        {"data": same, "hasMore": True, "nextCursor": f"c{i}", "totalCount": 2} for i in range(50)
    ]
    with pytest.raises(PaginationError, match="bring no new record"):
        list(_scripted(pages).transactions.list())

    async def walk() -> None:
        served = iter(pages)

        async def answer(request: httpx.Request) -> httpx.Response:
            return httpx.Response(200, content=orjson.dumps(next(served)))

        client = AsyncClient(
            "https://api.example.com/2025-10-13",
            "id",
            "secret",
            transport=httpx.MockTransport(answer),
        )
        async for _ in client.transactions.list():
            pass

    with pytest.raises(PaginationError, match="bring no new record"):
        asyncio.run(walk())


def test_a_record_served_twice_is_given_once(shared_sandbox: Sandbox) -> None:
    """Pages that overlap (a record at the end of one and the start of the next) or hold a
    record twice: each record once, in order."""
    one, two, three = _records(shared_sandbox, 3)
    client = _scripted(
        [
            {"data": [one, two], "hasMore": True, "nextCursor": "A", "totalCount": 3},
            {"data": [two, three, three], "hasMore": False, "totalCount": 3},
        ]
    )
    assert [t.id for t in client.transactions.list()] == [one["id"], two["id"], three["id"]]


def test_has_more_without_a_cursor_is_an_error() -> None:
    client = _scripted([{"data": [], "hasMore": True, "totalCount": 5}])
    with pytest.raises(PaginationError, match="nextCursor"):
        list(client.transactions.list().pages(raw=True))


def test_raw_pages_give_json_values(shared_sandbox: Sandbox) -> None:
    client = shared_sandbox.client()
    pages = list(client.transactions.list(sort_order="asc").pages(raw=True))
    records = [r for p in pages for r in p.data]
    assert records == list(shared_sandbox.world.all_transactions())


def test_new_records_between_pages_do_not_break_a_listing(sandbox: Sandbox, client: Client) -> None:
    before = {t["id"] for t in sandbox.world.all_transactions()}
    seen: list[str] = []
    for n, page in enumerate(client.transactions.list(limit=50).pages()):
        seen += [t.id for t in page.data]
        if n == 2:
            created = sandbox.advance(timedelta(hours=12))
            assert created
    assert len(seen) == len(set(seen))
    assert set(seen) == before  # descending order: newer records sit before the walk's position


def test_text_pages_give_each_records_json_text(shared_sandbox: Sandbox) -> None:
    client = shared_sandbox.client()
    pages = list(client.transactions.list(sort_order="asc").pages(raw="text"))
    texts = [text for page in pages for text in page.records]
    assert [orjson.loads(text) for text in texts] == list(shared_sandbox.world.all_transactions())
    assert [i for page in pages for i in page.ids] == [orjson.loads(t)["id"] for t in texts]
    assert pages[0].total_count == len(texts) and not pages[-1].has_more


def test_text_pages_flag_records_without_a_string_id() -> None:
    record = {"id": "Transaction:1", "note": "caf\u00e9 \u2713", "amount": 12}
    page = {"data": [record, {"id": 7}, 5, [1]], "hasMore": False, "totalCount": 4}
    (text_page,) = list(_scripted([page]).transactions.list().pages(raw="text"))
    assert text_page.ids == ["Transaction:1", None, None, None]
    assert [orjson.loads(t) for t in text_page.records] == page["data"]


def test_a_text_page_that_is_not_a_page_is_a_typed_error() -> None:
    client = _scripted([{"data": {"id": "x"}, "hasMore": False}])
    with pytest.raises(ResponseValidationError, match="data is not a list"):
        list(client.transactions.list().pages(raw="text"))


def test_an_async_listing_is_walked_async_only(shared_sandbox: Sandbox) -> None:
    """An `AsyncClient`'s listing is an `AsyncPaginator`: `async for`, `pages()` and
    `await to_list()` give what the sync listing gives, and a sync walk is a `TypeError` at
    once (it used to fail inside, on a coroutine: 'coroutine' object has no attribute 'data')."""
    from paylens import AsyncPaginator, Paginator

    with shared_sandbox.client() as client:
        expected = [c.id for c in client.cards.list(limit=7)]
        assert isinstance(client.cards.list(), Paginator)

    async def walk() -> tuple[list[str], list[str], list[str]]:
        async with shared_sandbox.async_client() as client:
            listing = client.cards.list(limit=7)
            assert isinstance(listing, AsyncPaginator)
            with pytest.raises(TypeError, match="not iterable"):
                iter(listing)  # type: ignore[call-overload]
            walked = [c.id async for c in listing]
            paged = [c.id async for page in listing.pages() for c in page.data]
            listed = [c.id for c in await listing.to_list()]
            return walked, paged, listed

    walked, paged, listed = asyncio.run(walk())
    assert walked == paged == listed == expected
    assert len(expected) > 7  # more than one page
