"""The sync's fetching: pages into landings, and the service's counts checked, with fake pages
(no service, no database, no threads)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import orjson
import pytest

from paylens.client import RawPage, TextPage
from paylens.client._pagination import parse_text_page
from paylens.errors import ResponseValidationError
from paylens.warehouse.sync import fetch
from paylens.warehouse.sync.plan import Window

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def record(n: int) -> bytes:
    created = (T0 + timedelta(minutes=n)).isoformat().replace("+00:00", "Z")
    return orjson.dumps({"id": f"Transaction:{n}", "createdAt": created})


def page(numbers: list[int], more: bool, total: Any = 100) -> TextPage:
    texts = [record(n) for n in numbers]
    return TextPage(
        texts, [f"Transaction:{n}" for n in numbers], more, "c" if more else None, total
    )


def pages(count: int, per_page: int) -> list[TextPage]:
    return [
        page(list(range(i * per_page, (i + 1) * per_page)), i < count - 1) for i in range(count)
    ]


def test_landings_land_every_so_many_records_and_at_the_end() -> None:
    seen: list[int] = []
    out = list(
        fetch.landings(
            Window(T0, None), pages(5, 10), land_records=25, land_bytes=1 << 20, on_page=seen.append
        )
    )
    assert [len(landing.buffer) for landing in out] == [30, 20]
    assert [landing.done for landing in out] == [False, True]
    assert out[0].resume == T0 + timedelta(minutes=29)
    assert out[-1].resume == T0 + timedelta(minutes=49)
    assert seen == [10] * 5


def test_landings_are_bounded_in_bytes_too() -> None:
    out = list(fetch.landings(Window(T0, None), pages(3, 10), land_records=1_000, land_bytes=1))
    assert [len(landing.buffer) for landing in out] == [10, 10, 10, 0]
    assert out[0].size == sum(len(record(n)) for n in range(10))


def test_a_split_leaves_the_rest_of_the_window_to_another_reader() -> None:
    end = T0 + timedelta(hours=10)
    middle = T0 + timedelta(minutes=15)
    asked: list[tuple[datetime | None, datetime | None]] = []

    def split(resume: datetime | None, stop: datetime | None) -> datetime | None:
        asked.append((resume, stop))
        return middle

    out = list(
        fetch.landings(
            Window(T0, end), pages(5, 10), land_records=1_000, land_bytes=1 << 20, split=split
        )
    )
    assert asked == [(T0 + timedelta(minutes=9), end)]
    ids = [i for landing in out for i in landing.buffer]
    assert ids == [f"Transaction:{n}" for n in range(15)]  # 15 onwards: the other reader's
    assert out[-1].done


def test_records_without_an_id_are_set_aside() -> None:
    odd = TextPage([b"[1,2]", record(1)], [None, "Transaction:1"], False, None, 2)
    (landing,) = fetch.landings(Window(T0, None), [odd], land_records=10, land_bytes=1 << 20)
    assert landing.rejects == [b"[1,2]"] and list(landing.buffer) == ["Transaction:1"]


@pytest.mark.parametrize("bad", ["12", -1, 1.5, True, [3]])
def test_a_total_count_that_is_not_a_count_is_a_typed_error(bad: Any) -> None:
    with pytest.raises(ResponseValidationError, match="totalCount"):
        list(
            fetch.landings(
                Window(T0, None), [page([1], False, bad)], land_records=10, land_bytes=10
            )
        )
    with pytest.raises(ResponseValidationError, match="totalCount"):
        fetch.checked_count(bad, Window(T0, None, "FAILED"))
    window = Window(T0, None)
    assert fetch.checked_count(None, window) is None and fetch.checked_count(0, window) == 0


class FakeList:
    def __init__(self, answers: list[Any], asked: list[dict[str, Any]], **params: Any) -> None:
        self.answers, self.params = answers, params
        asked.append(params)

    def pages(self, raw: Any) -> Iterator[Any]:
        yield from self.answers


class FakeClient:
    """`client.transactions.list(...)` answering the given pages, recording what was asked."""

    def __init__(self, answers: list[Any]) -> None:
        self.asked: list[dict[str, Any]] = []
        self.transactions = self
        self._answers = answers

    def list(self, **params: Any) -> FakeList:
        return FakeList(self._answers, self.asked, **params)


def test_the_service_is_asked_for_the_window_and_its_count_is_checked() -> None:
    client = FakeClient([RawPage([], False, None, 42)])
    service = fetch.Service(client)  # type: ignore[arg-type]
    window = Window(T0, T0 + timedelta(hours=1), "FAILED")
    assert service.count(window) == 42
    assert client.asked == [
        {
            "start_date": T0,
            "end_date": T0 + timedelta(hours=1) - timedelta(microseconds=1),
            "status": "FAILED",
            "sort_order": "asc",
            "limit": 1,
        }
    ]
    lying = fetch.Service(FakeClient([RawPage([], False, None, "7")]))  # type: ignore[arg-type]
    with pytest.raises(ResponseValidationError, match="totalCount='7'"):
        lying.count(window)


def test_a_page_with_an_integer_beyond_64_bits_is_read_record_by_record() -> None:
    huge = b'{"id":"a","sentAmount":{"amount":18446744073709551621}}'
    other = b'{"id":"b","rate":5.979266087831044e-05,"memo":"caf\\u00e9"}'
    page = b'{"data":[%s,%s],"hasMore":false,"totalCount":2}'
    parsed = parse_text_page(httpx.Response(200, content=page % (huge, other)))
    assert parsed.ids == ["a", "b"] and parsed.total_count == 2
    assert parsed.records[0] == huge  # exactly, for the quarantine to keep
    # the other records are spelled as a page without the huge integer spells them
    alone = parse_text_page(httpx.Response(200, content=page % (other, other)))
    assert parsed.records[1] == alone.records[0]
    with pytest.raises(ResponseValidationError):
        parse_text_page(httpx.Response(200, content=b'{"data":[{"id":"a","x":1e999999'))


def test_a_page_read_exactly_leaves_the_threads_parser_fit_for_the_next_page() -> None:
    """An integer past 64 bits is found as the records are read, while the page's objects
    still hold the thread's parser: the next pages of that thread still read."""
    tiny, huge = b'{"id":"a","x":1}', b'{"id":"b","x":-9223372036854775809}'
    page = b'{"data":[%s,%s],"hasMore":false}'
    for _ in range(3):
        odd = parse_text_page(httpx.Response(200, content=page % (tiny, huge)))
        assert odd.records[1] == huge
        plain = parse_text_page(httpx.Response(200, content=page % (tiny, tiny)))
        assert plain.ids == ["a", "a"] and plain.records[0] == odd.records[0]


def test_a_service_writing_nanoseconds_is_asked_up_to_the_last_nanosecond() -> None:
    # a point window [t, t + 1 us): a record at t + 500 ns is in it; asked up to t (inclusive)
    # the service would leave it out
    record = b'{"id":"a","createdAt":"2025-01-01T00:00:00.000000500Z"}'
    client = FakeClient([TextPage([record], ["a"], False, None, 1)])
    service = fetch.Service(client)  # type: ignore[arg-type]
    window = Window(T0, T0 + timedelta(microseconds=1))
    assert [page.ids for page in service.pages(window)] == [["a"]]
    assert client.asked[0]["end_date"] == T0  # nothing finer seen yet
    list(service.pages(window))
    assert client.asked[1]["end_date"] == "2025-01-01T00:00:00.000000999Z"
    # a probe teaches it too (a full sync probes its oldest and newest records first)
    probed = FakeClient([RawPage([orjson.loads(record)], False, None, 1)])
    service = fetch.Service(probed)  # type: ignore[arg-type]
    assert service.count(window) == 1 and service.digits == 9
    assert fetch.fraction_digits(b'{"createdAt":"2025-01-01T00:00:00Z"}') == 0
