"""Reading from the service: generators of list pages and of the landings a window's pages make
(no threads and no database here; `run` drives them, `save` writes what they yield)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from paylens.client import Client, Paginator, RawPage, TextPage
from paylens.errors import NotFoundError, ResponseValidationError

from .plan import MICRO_DIGITS, Window


def parse_time(text: str | None) -> datetime | None:
    """An RFC 3339 date-time (a lower-case `z` as well)."""
    if text is None:
        return None
    return datetime.fromisoformat(text[:-1] + "+00:00" if text[-1:] in ("Z", "z") else text)


def parse_time_or_none(value: Any) -> datetime | None:
    try:
        return parse_time(value) if isinstance(value, str) else None
    except ValueError:
        return None


def created_at(text: bytes) -> datetime | None:
    """The `createdAt` of a record's JSON text (one record a page: where a window resumes)."""
    try:
        record = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return parse_time_or_none(record.get("createdAt")) if isinstance(record, dict) else None


def before(text: bytes, end: datetime | None) -> bool:
    """Whether a record was created before `end` (a record without a time is kept)."""
    created = created_at(text)
    return end is None or created is None or created < end


def checked_count(value: Any, window: Window) -> int | None:
    """A page's `totalCount`: a count, or None when the service does not give one. Anything
    else is a body that does not have the interface's shape."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return value
    raise ResponseValidationError(
        f"the list of transactions created in [{window.start}, {window.end})"
        f"{f' with status {window.status}' if window.status else ''} answered "
        f"totalCount={value!r}, not a non-negative integer"
    )


#: The fraction digits of a record's (first) `createdAt`, in its JSON text.
_FRACTION = re.compile(rb'"createdAt"\s*:\s*"\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d:\d\d[.,](\d+)')


def fraction_digits(text: bytes) -> int:
    """How many fraction digits a record's JSON text writes its `createdAt` with (0: none)."""
    found = _FRACTION.search(text)
    return len(found.group(1)) if found else 0


class Service:
    """The list endpoint of transactions, as the sync asks it. `digits`: the most fraction
    digits the service was seen to write a `createdAt` with (at least microseconds); each
    window's inclusive `endDate` is asked at that precision (`Window.filters`), and each page
    read or probe may raise it."""

    def __init__(self, client: Client, digits: int = MICRO_DIGITS) -> None:
        self.client = client
        self.digits = max(MICRO_DIGITS, digits)

    def _learn(self, text: bytes) -> None:
        # only ever raised: readers on other threads at worst ask one window coarser
        self.digits = max(self.digits, fraction_digits(text))

    def _list(self, window: Window, *, limit: int | None, sort_order: str) -> Paginator[Any]:
        return self.client.transactions.list(
            **window.filters(self.digits), sort_order=sort_order, limit=limit
        )

    def pages(self, window: Window) -> Iterator[TextPage]:
        """Every page of a window, oldest record first, records kept as JSON texts."""
        for page in self._list(window, limit=None, sort_order="asc").pages(raw="text"):
            if page.records:
                self._learn(page.records[-1])
            yield page

    def probe(self, window: Window, *, sort_order: str) -> RawPage:
        """The first page of one record (its `totalCount` checked)."""
        page: RawPage = next(
            iter(self._list(window, limit=1, sort_order=sort_order).pages(raw=True))
        )
        checked_count(page.total_count, window)
        if page.data and isinstance(page.data[0], dict):
            self._learn(orjson.dumps({"createdAt": page.data[0].get("createdAt")}))
        return page

    def count(self, window: Window) -> int | None:
        return checked_count(self.probe(window, sort_order="asc").total_count, window)

    def gone(self, record_id: str) -> bool:
        """Whether the service no longer has a record: read by id, it answers 404. Any other
        answer (the record, one it cannot type, another record) says nothing is gone; an
        error reaching the service is raised, as a listing's is."""
        try:
            self.client.transactions.get(record_id)
        except NotFoundError:
            return True
        except ResponseValidationError:
            return False
        return False


@dataclass
class Landing:
    """Records read from one window since its last landing, and where the window now stands."""

    window: Window
    buffer: dict[str, bytes]  # JSON texts by id: compact, and a re-read id replaces
    rejects: list[bytes]  # records without a string id
    resume: datetime | None
    done: bool
    size: int = 0  # bytes of JSON read into `buffer`
    #: the window is new to the run (a split's later part): its row is inserted in the
    #: transaction that commits this landing, ahead of any landing of its own
    opens: bool = False
    #: how many records `buffer` held when the landing was made: still counted once the texts
    #: are let go (`typed`), while the batch they are typed into waits for its commit
    records: int = field(init=False)

    def __post_init__(self) -> None:
        self.records = len(self.buffer)

    def typed(self) -> None:
        """The texts are typed into a batch: let them go (the batch holds its own copy), so
        that what waits for the commits is held once, not twice."""
        self.buffer = {}


def landings(
    window: Window,
    pages: Iterable[TextPage],
    *,
    land_records: int,
    land_bytes: int,
    split: Callable[[datetime | None, datetime | None], datetime | None] = lambda r, e: e,
    on_page: Callable[[int], None] = lambda n: None,
    on_total: Callable[[int], None] | None = None,
) -> Iterator[Landing]:
    """The landings of one window's pages: one every `land_records` records or `land_bytes`
    of JSON, and a last one when the window is done. `split(resume, end)` may hand the rest
    of the window from some point on to another reader; it answers where this one now stops,
    and records from there on are left to that reader. `on_total` hears the service's count
    of the window's records, from its first page (for a progress total only: never trusted)."""
    buffer: dict[str, bytes] = {}
    size = 0
    rejects: list[bytes] = []
    resume: datetime | None = None
    end = window.end  # moves earlier when the rest of the window is handed on
    for number, page in enumerate(pages):
        checked_count(page.total_count, window)
        total = page.total_count
        if number == 0 and on_total and isinstance(total, int) and not isinstance(total, bool):
            on_total(total)
        records = list(zip(page.ids, page.records, strict=True))
        if end != window.end and records and not before(records[-1][1], end):
            records = [r for r in records if before(r[1], end)]
            more = False  # the rest belongs to the window handed on
        else:
            more = page.has_more
        for record_id, text in records:
            if record_id is not None:
                buffer[record_id] = text
                size += len(text)
            else:
                rejects.append(text)
        if records:
            resume = created_at(records[-1][1]) or resume
        on_page(len(records))  # what this window keeps: the rest is the split-off reader's
        if len(buffer) >= land_records or size >= land_bytes:
            yield Landing(window, buffer, rejects, resume, False, size)
            buffer, rejects, size = {}, [], 0
        if not more:
            break
        end = split(resume, end)
    yield Landing(window, buffer, rejects, resume, True, size)
