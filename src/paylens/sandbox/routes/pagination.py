"""Pagination of the list routes, and what their filters share.

Cursors are opaque (base64url of a small JSON): the position of the last row served and a
fingerprint of the filters and sort order they were issued for. Rows never move, so a cursor
stays valid while the world changes; reusing it with other filters answers 400. Lists without a
`sortOrder` parameter (customers, accounts) are in ascending (createdAt, id) order.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson

from ..wire.request import Query
from ..world.store import RowSet

MAX_LIMIT = 100
DEFAULT_LIMIT = 20
UNKNOWN_ROW = -2  # an id that matches nothing (NO_ROW would match "no account")


def _fingerprint(resource: str, params: dict[str, list[str]], ascending: bool) -> str:
    items = sorted(
        (k, tuple(v)) for k, v in params.items() if k not in ("cursor", "limit", "sortOrder")
    )
    raw = orjson.dumps([resource, ascending, items])
    return hashlib.sha256(raw).hexdigest()[:16]


def _encode_cursor(fingerprint: str, after: int) -> str:
    return (
        base64.urlsafe_b64encode(orjson.dumps({"v": 1, "f": fingerprint, "a": after}))
        .rstrip(b"=")
        .decode()
    )


def _decode_cursor(query: Query, fingerprint: str) -> int | None:
    cursor = query.text("cursor")
    if not cursor:  # an empty `cursor=` is how some clients say "first page"
        return None
    try:
        data = orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        after = data["a"]
        if data.get("v") != 1 or not isinstance(after, int) or isinstance(after, bool) or after < 0:
            raise ValueError(cursor)
    except (ValueError, KeyError, TypeError, binascii.Error, orjson.JSONDecodeError):
        query.fail("cursor", "is not a cursor this service issued")
        return None
    if data.get("f") != fingerprint:
        query.fail(
            "cursor",
            "was issued for other filters or another sort order; start again without a cursor",
        )
        return None
    return after


def paginate(
    query: Query,
    resource: str,
    select: Callable[[], RowSet],
    render: Callable[[np.ndarray], list[Any]],
    *,
    sortable: bool,
) -> dict[str, Any]:
    """A page `{data, hasMore, nextCursor?, totalCount}` of the rows `select` finds."""
    limit = query.integer("limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    ascending = not sortable or query.choice("sortOrder", ("asc", "desc")) == "asc"
    fingerprint = _fingerprint(resource, query.params, ascending)
    after = _decode_cursor(query, fingerprint)
    query.check()
    rows = select()
    page, more = rows.page(after, ascending, limit)
    body: dict[str, Any] = {"data": render(page), "hasMore": more}
    if more:
        body["nextCursor"] = _encode_cursor(fingerprint, int(page[-1]))
    body["totalCount"] = len(rows)
    return body


def ordered(mask: np.ndarray) -> RowSet:
    return RowSet.of(np.flatnonzero(mask))
