"""Cursor pagination: `{data, hasMore, nextCursor, totalCount}` pages walked until `hasMore` is
false, with the loops a misbehaving service could cause turned into a clear error."""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, cast

import httpx
import orjson
import simdjson

from paylens import models
from paylens.errors import PaginationError, ResponseValidationError

from ._policy import Call

if TYPE_CHECKING:
    from ._clients import AsyncClient, Client

T = TypeVar("T")

#: Consecutive empty pages that still claim `hasMore` before giving up.
MAX_EMPTY_PAGES = 3


@dataclass(frozen=True)
class RawPage:
    """A page as JSON values, for callers that validate record by record (the warehouse)."""

    data: list[dict[str, Any]]
    has_more: bool
    next_cursor: str | None
    total_count: int | None
    content: bytes = b""  # the page as received, for validating it in one pass


@dataclass(frozen=True)
class TextPage:
    """A page whose records stay JSON texts: no Python object per field, for callers that
    hand records on to a columnar reader (the warehouse). `ids[i]` is the string `id` of
    `records[i]`, or None when that record is not an object with a string id."""

    records: list[bytes]
    ids: list[str | None]
    has_more: bool
    next_cursor: str | None
    total_count: int | None


_PARSERS = threading.local()


def _record_id(item: Any) -> str | None:
    if not isinstance(item, simdjson.Object):
        return None
    value = item.get("id")
    return value if isinstance(value, str) else None


def parse_text_page(response: httpx.Response) -> TextPage:
    """Split a list page into its records' texts with simdjson (a native parse of the page and
    a native re-serialisation of each record), about 4x less interpreter time than building
    Python objects and encoding them again, which is what bounds a concurrent sync."""
    parser = getattr(_PARSERS, "parser", None)
    if parser is None:  # one per thread: a parser is reused for every page it reads
        parser = _PARSERS.parser = simdjson.Parser()
    try:
        body = parser.parse(response.content)
        if not isinstance(body, simdjson.Object):
            raise TypeError("the body is not an object")
        data = body["data"]
        if not isinstance(data, simdjson.Array):
            raise TypeError("data is not a list")
        page = TextPage(
            records=[
                _mini(item)
                if isinstance(item, simdjson.Array | simdjson.Object)
                else orjson.dumps(item)
                for item in data
            ],
            ids=[_record_id(item) for item in data],
            has_more=bool(body.get("hasMore", False)),
            # checked where they are used (the sync refuses a totalCount that is no count)
            next_cursor=cast(Any, body.get("nextCursor")),
            total_count=cast(Any, body.get("totalCount")),
        )
        del data, body  # the parser can be reused only once its proxies are gone
        return page
    except (ValueError, RuntimeError) as exc:
        # the failed parse's proxies live on in this traceback: the thread takes a new parser
        _PARSERS.parser = simdjson.Parser()
        # an integer simdjson cannot hold (NUMBER_ERROR past 2^64, BIGINT_ERROR below -2^63
        # or past ~10^20, raised as the records are read): JSON has no bound, so the page is
        # read exactly instead
        if "NUMBER_ERROR" not in str(exc) and "BIGINT_ERROR" not in str(exc):
            raise ResponseValidationError(f"list page is not a page: {exc}") from exc
        return _parse_text_page_exactly(response.content, _PARSERS.parser)
    except (KeyError, TypeError) as exc:
        _PARSERS.parser = simdjson.Parser()
        raise ResponseValidationError(f"list page is not a page: {exc}") from exc


def _mini(value: Any) -> bytes:
    """A simdjson object's or array's compact JSON text."""
    text = value.mini
    return text.encode() if isinstance(text, str) else bytes(text)


def _parse_text_page_exactly(content: bytes, parser: simdjson.Parser) -> TextPage:
    """`parse_text_page` for a page holding a number simdjson cannot read (an integer beyond
    64 bits): Python's JSON keeps it exactly, so the page is read and the one record holding
    it is refused by whoever types it, not the whole page. Every other record is spelled as
    the fast path spells it (simdjson's own serialisation), so it reads the same either way."""

    def text(item: Any) -> bytes:
        spelled = json.dumps(item, ensure_ascii=False, separators=(",", ":")).encode()
        if not isinstance(item, dict | list):
            return spelled
        try:
            return _mini(parser.parse(spelled))
        except (ValueError, RuntimeError):  # the record holding the number simdjson refuses
            return spelled

    try:
        body = json.loads(content)
        data = body["data"]
        if not isinstance(data, list):
            raise TypeError("data is not a list")
    except (ValueError, KeyError, TypeError) as exc:
        raise ResponseValidationError(f"list page is not a page: {exc}") from exc
    return TextPage(
        records=[text(item) for item in data],
        ids=[
            item.get("id") if isinstance(item, dict) and isinstance(item.get("id"), str) else None
            for item in data
        ],
        has_more=bool(body.get("hasMore", False)),
        next_cursor=body.get("nextCursor"),
        total_count=body.get("totalCount"),
    )


def parse_with(validate: Callable[[bytes], T]) -> Callable[[httpx.Response], T]:
    """A response reader that validates the JSON body (raw bytes) into a typed value."""

    def parse(response: httpx.Response) -> T:
        from pydantic import ValidationError  # typed pages only: a sync's raw pages never

        failure: ValidationError | None = None
        try:
            return validate(response.content)
        except ValidationError as exc:
            failure = exc
        # where and what, never the values: a wallet answer holds encrypted keys and
        # credentials, which pydantic's own message (and the error, chained) would quote
        said = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}"
            for e in failure.errors(include_input=False, include_url=False)[:5]
        )
        raise ResponseValidationError(
            f"{response.request.method} {response.request.url.path} answered a body "
            f"that does not match the interface: {said}"
        )

    return parse


def parse_raw_page(response: httpx.Response) -> RawPage:
    try:
        body = orjson.loads(response.content)
        data = body["data"]
        if not isinstance(data, list):
            raise TypeError("data is not a list")
        return RawPage(
            data=data,
            has_more=bool(body.get("hasMore", False)),
            next_cursor=body.get("nextCursor"),
            total_count=body.get("totalCount"),
            content=response.content,
        )
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise ResponseValidationError(f"list page is not a page: {exc}") from exc


class _Walk:
    """The stopping rule, shared by the sync and async walks."""

    def __init__(self, path: str, params: dict[str, str]) -> None:
        self.path = path
        self.params = params
        self.seen: set[str] = set()
        self.empty_run = 0
        self.last_ids: set[str] = set()  # the previous page's record ids

    def call(self, parse: Callable[[httpx.Response], Any], cursor: str | None) -> Call[Any]:
        params = dict(self.params) if cursor is None else {**self.params, "cursor": cursor}
        return Call("GET", self.path, parse, params=params)

    def next_cursor(self, page: RawPage | TextPage | models.Page[Any]) -> str | None:
        """The cursor of the next page, None at the end; raises when the service loops."""
        if not page.has_more:
            return None
        cursor = page.next_cursor
        if not cursor:
            raise PaginationError(f"GET {self.path}: a page says hasMore but gives no nextCursor")
        if cursor in self.seen:
            raise PaginationError(
                f"GET {self.path}: the service returned cursor {cursor[:40]!r} a second time; "
                "stopping instead of looping"
            )
        self.seen.add(cursor)
        # a page with no record the previous page did not hold is no progress, as an empty
        # page is not: a service that serves the same records under ever new cursors stops
        ids = set(page_ids(page)) - {None}
        progress = bool(ids - self.last_ids) or (not ids and bool(_items(page)))
        self.last_ids = cast(set[str], ids)
        self.empty_run = 0 if progress else self.empty_run + 1
        if self.empty_run >= MAX_EMPTY_PAGES:
            raise PaginationError(
                f"GET {self.path}: {self.empty_run} pages in a row bring no new record yet "
                "still claim hasMore; stopping instead of looping"
            )
        return cursor


def _items(page: RawPage | TextPage | models.Page[Any]) -> list[Any]:
    return page.records if isinstance(page, TextPage) else page.data


def page_ids(page: RawPage | TextPage | models.Page[Any]) -> list[str | None]:
    """Each record's string id (None where it has none), whatever kind the page is."""
    if isinstance(page, TextPage):
        return list(page.ids)
    if isinstance(page, RawPage):  # JSON values
        return [
            i if isinstance(item, dict) and isinstance(i := item.get("id"), str) else None
            for item in page.data
        ]
    return [i if isinstance(i := getattr(item, "id", None), str) else None for item in page.data]


def once(items: list[T], ids: list[str | None], before: set[str]) -> Iterator[T]:
    """The items not already given: neither on the page before (`before`: a service whose
    pages overlap) nor earlier on this page."""
    given = set(before)
    for item, item_id in zip(items, ids, strict=True):
        if item_id is None:
            yield item
        elif item_id not in given:
            given.add(item_id)
            yield item


class _Listing(Generic[T]):
    """What both paginators share: the endpoint, its filters and how a page is read."""

    def __init__(
        self, client: Client | AsyncClient, path: str, params: dict[str, str], item_type: Any
    ) -> None:
        self._client = client
        self._path = path
        self._params = params
        self._item_type = item_type

    def __repr__(self) -> str:
        return f"{type(self).__name__}(GET {self._path}, {self._params})"

    def _parser(self, raw: bool | Literal["text"]) -> Callable[[httpx.Response], Any]:
        if raw == "text":
            return parse_text_page
        if raw:
            return parse_raw_page
        item_type = self._item_type
        if isinstance(item_type, str):  # a model's name (see `_Resource._list`)
            item_type = getattr(models, item_type)
        return parse_with(functools.partial(models.parse_page, item_type=item_type))


class Paginator(_Listing[T]):
    """Every item of a list endpoint, typed, across all pages (a `Client`'s listings).

    Iterate it (`for tx in client.transactions.list(status="PENDING")`), or walk `.pages()` for
    the pages with their `total_count`. An `AsyncClient` lists with an `AsyncPaginator`.
    """

    def pages(self, *, raw: bool | Literal["text"] = False) -> Iterator[Any]:
        """Each page in turn: `Page[T]`; `RawPage` of JSON values with `raw=True`; `TextPage`
        of each record's JSON text with `raw="text"`."""
        walk, parse, cursor = _Walk(self._path, self._params), self._parser(raw), None
        while True:
            page = cast(Any, self._client.request(walk.call(parse, cursor)))
            yield page
            cursor = walk.next_cursor(page)
            if cursor is None:
                return

    def __iter__(self) -> Iterator[T]:
        before: set[str] = set()
        for page in self.pages():
            ids = page_ids(page)
            yield from once(page.data, ids, before)
            before = {i for i in ids if i is not None}

    def to_list(self) -> list[T]:
        """All items in a list."""
        return list(self)


class AsyncPaginator(_Listing[T]):
    """`Paginator` for an `AsyncClient`: `async for tx in client.transactions.list(...)`,
    `async for page in ….pages()`, `await ….to_list()`. It has no sync iteration, so a type
    checker refuses `for` over it (at run time it is a `TypeError`)."""

    async def pages(self, *, raw: bool | Literal["text"] = False) -> AsyncIterator[Any]:
        """Each page in turn, as `Paginator.pages`."""
        walk, parse, cursor = _Walk(self._path, self._params), self._parser(raw), None
        while True:
            page = await cast(Awaitable[Any], self._client.request(walk.call(parse, cursor)))
            yield page
            cursor = walk.next_cursor(page)
            if cursor is None:
                return

    async def __aiter__(self) -> AsyncIterator[T]:
        before: set[str] = set()
        async for page in self.pages():
            ids = page_ids(page)
            for item in once(page.data, ids, before):
                yield item
            before = {i for i in ids if i is not None}

    async def to_list(self) -> list[T]:
        """All items in a list."""
        return [item async for item in self]
