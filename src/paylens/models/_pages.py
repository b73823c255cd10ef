"""List responses: `Page[T]` for paginated lists, `ItemList[T]` for the unpaginated ones."""

from __future__ import annotations

from typing import Generic, TypeVar

from ._base import Count, WireModel

__all__ = ["ItemList", "Page"]

ItemT = TypeVar("ItemT")


class ItemList(WireModel, Generic[ItemT]):
    """An unpaginated list response, such as the credentials of a wallet account."""

    data: list[ItemT]


class Page(ItemList[ItemT], Generic[ItemT]):
    """One page of a list: pass `next_cursor` back to get the next page while `has_more`."""

    has_more: bool
    next_cursor: str | None = None
    total_count: Count | None = None
