"""The sync's run: the steps of a run on the calling thread (`threads=False`) against a fake
service holding sandbox records that a test changes at will, and the writer behind the readers
(its threads are what it is about: a fake typer and committer stand in for DuckDB)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import duckdb
import orjson
import pytest

from paylens import Sandbox
from paylens.client import RawPage, TextPage
from paylens.models import TransactionStatus
from paylens.warehouse import _store
from paylens.warehouse.sync import SyncOptions, TransactionSync
from paylens.warehouse.sync.fetch import Landing, parse_time
from paylens.warehouse.sync.plan import Window
from paylens.warehouse.sync.run import Writer
from paylens.warehouse.sync.save import Batch

AT = datetime(2025, 10, 13, tzinfo=UTC)


class FakeService:
    """The list endpoint over records kept in memory (change them between runs), in pages of
    100, recording every window it is asked to page."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        self.records = {r["id"]: r for r in records}
        self.broken: set[str] = set()
        self.asked: list[Window] = []
        self.asked_by_id: list[str] = []
        #: records the listings leave out (a gap) while a read by id still serves them
        self.unlisted: set[str] = set()

    def _select(self, window: Window) -> list[dict[str, Any]]:
        # the interface's filter takes a TransactionStatus (a real service answers 400 to a
        # card status); REFUNDED, shared with cards, selects both kinds here
        assert window.status is None or window.status in set(TransactionStatus), window.status

        def inside(r: dict[str, Any]) -> bool:
            created = parse_time(r["createdAt"])
            assert created is not None
            return (
                (window.start is None or created >= window.start)
                and (window.end is None or created < window.end)
                and (window.status is None or r["status"] == window.status)
            )

        rows = [r for r in self.records.values() if inside(r) and r["id"] not in self.unlisted]
        return sorted(rows, key=lambda r: (r["createdAt"], r["id"]))

    def _text(self, record: dict[str, Any]) -> bytes:
        if record["id"] in self.broken:  # an amount that is not an integer
            return orjson.dumps({**record, "sentAmount": {**record["sentAmount"], "amount": 0.5}})
        return orjson.dumps(record)

    def pages(self, window: Window) -> Iterator[TextPage]:
        self.asked.append(window)
        rows = self._select(window)
        for first in range(0, max(len(rows), 1), 100):
            chunk = rows[first : first + 100]
            more = first + 100 < len(rows)
            yield TextPage(
                [self._text(r) for r in chunk], [r["id"] for r in chunk], more, None, len(rows)
            )

    def probe(self, window: Window, *, sort_order: str) -> RawPage:
        rows = self._select(window)
        first = rows[:1] if sort_order == "asc" else rows[-1:]
        return RawPage(first, len(rows) > 1, None, len(rows))

    def count(self, window: Window) -> int:
        return len(self._select(window))

    def gone(self, record_id: str) -> bool:
        self.asked_by_id.append(record_id)
        return record_id not in self.records and record_id not in self.unlisted


class CountingService(FakeService):
    """A `FakeService` that also records, in order, each count it answers and each window it
    starts to page."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        super().__init__(records)
        self.calls: list[str] = []

    def pages(self, window: Window) -> Iterator[TextPage]:
        self.calls.append("pages")
        yield from super().pages(window)

    def count(self, window: Window) -> int:
        self.calls.append("count")
        return super().count(window)


@pytest.fixture
def service() -> FakeService:
    records = list(Sandbox(seed=23, transactions=600).world.all_transactions())
    return FakeService(records)


@pytest.fixture
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    connection = duckdb.connect(":memory:")
    _store.ensure_schema(connection)
    yield connection
    connection.close()


def engine(
    con: duckdb.DuckDBPyConnection,
    service: FakeService,
    *,
    db_lock: threading.Lock | None = None,
    threads: bool = False,
    **options: Any,
) -> tuple[TransactionSync, int]:
    """A run's engine over the fake service (on the calling thread unless `threads`) and its
    run id, which follows the last one."""
    run_id = _store.next_run_id(con)
    con.execute("INSERT INTO sync_runs (run_id, status) VALUES (?, 'running')", [run_id])
    service.asked = []
    built = TransactionSync(
        con,
        db_lock or threading.Lock(),
        None,  # type: ignore[arg-type]  # the fake service stands in for the client
        run_id,
        AT,
        SyncOptions(**{"concurrency": 1, "progress": False} | options),
        lambda records: None,
        service=service,  # type: ignore[arg-type]
        threads=threads,
    )
    return built, run_id


def run(con: duckdb.DuckDBPyConnection, service: FakeService, **options: Any) -> TransactionSync:
    """One run on the calling thread; its run id follows the last one."""
    built, run_id = engine(con, service, **options)
    built.mode = built.run()  # type: ignore[attr-defined]
    con.execute("UPDATE sync_runs SET status = 'succeeded' WHERE run_id = ?", [run_id])
    return built


def stored(con: duckdb.DuckDBPyConnection, column: str) -> dict[str, Any]:
    return dict(con.execute(f"SELECT id, {column} FROM transactions").fetchall())


def older(service: FakeService, **match: Any) -> list[dict[str, Any]]:
    """Records created over 3 days before the newest one (out of the recent window)."""
    newest = max(parse_time(r["createdAt"]) for r in service.records.values())  # type: ignore[type-var]
    return [
        r
        for r in service.records.values()
        if parse_time(r["createdAt"]) < newest - timedelta(days=3)  # type: ignore[operator]
        and all(r.get(k) == v for k, v in match.items())
    ]


def test_a_first_run_reads_everything_and_a_second_only_its_share(
    con: duckdb.DuckDBPyConnection, service: FakeService
) -> None:
    first = run(con, service)
    assert first.mode == "full"  # type: ignore[attr-defined]
    assert stored(con, "raw") == {i: orjson.dumps(r).decode() for i, r in service.records.items()}
    again = run(con, service, verify_syncs=4)
    assert again.mode == "incremental"  # type: ignore[attr-defined]
    asked = [(w.purpose, w.status) for w in service.asked]
    listings = [("watch", s) for s in ("CREATED", "PENDING", "PENDING_AUTHORIZATION", "PROCESSING")]
    assert asked[:6] == [("recent", None), *listings, ("verify", None)]
    # then the young open card holds, read by themselves (no filter lists them)
    assert asked[6:] and set(asked[6:]) == {("watch", None)}
    older_count = len(older(service))
    assert older_count / 4 <= again.reverified <= len(service.records) / 4 + 1


def test_a_full_sync_pays_a_round_of_counts_before_its_first_page_only_for_large_slices() -> None:
    # a round of counts places the slices where the records are, at a round trip and a request
    # per reader before the first page: 3,000 records at 16 readers make slices of 3 pages
    # (cut by time alone), at 1 reader slices of 7.5 pages (placed by 1 count)
    records = list(Sandbox(seed=23, transactions=3_000).world.all_transactions())
    assert len(records) == 3_000
    for concurrency, counts in ((16, 0), (1, 1)):
        service = CountingService(records)
        connection = duckdb.connect(":memory:")
        _store.ensure_schema(connection)
        engine = run(connection, service, concurrency=concurrency)
        assert engine.mode == "full"  # type: ignore[attr-defined]
        before_first_page = service.calls[: service.calls.index("pages")]
        assert before_first_page == ["count"] * counts, concurrency
        assert stored(connection, "raw") == {
            i: orjson.dumps(r).decode() for i, r in service.records.items()
        }
        connection.close()


def test_a_young_card_hold_that_settles_is_read_by_itself(
    con: duckdb.DuckDBPyConnection, service: FakeService
) -> None:
    # no filter lists card statuses: a hold that settled (while another card was refunded, so
    # no count moved) is re-read by itself while younger than the hold window
    held, settled = older(service, type="CARD")[:2]
    held["status"], settled["status"] = "AUTHORIZED", "SETTLED"
    run(con, service)
    held["status"], settled["status"] = "SETTLED", "REFUNDED"
    run(con, service, verify_syncs=10**6, hold_window=timedelta(days=365))
    statuses = stored(con, "status")
    assert statuses[held["id"]] == "SETTLED"
    created = parse_time(held["createdAt"])
    assert any(
        w.purpose == "watch" and w.status is None and w.start <= created < w.end  # type: ignore[operator]
        for w in service.asked
    )


def test_older_holds_are_left_to_the_re_verification_and_returns_seen_by_count(
    con: duckdb.DuckDBPyConnection, service: FakeService
) -> None:
    held, settled = older(service, type="CARD")[:2]
    held["status"], settled["status"] = "AUTHORIZED", "SETTLED"
    run(con, service)
    held["status"], settled["status"] = "SETTLED", "REFUNDED"
    run(con, service, verify_syncs=10**6, hold_window=timedelta(0))
    assert not any(w.purpose == "watch" and w.status is None for w in service.asked)
    statuses = stored(con, "status")
    # this service's REFUNDED filter selects card transactions: the return shows in its count
    assert (statuses[held["id"]], statuses[settled["id"]]) == ("AUTHORIZED", "REFUNDED")
    assert any(w.status == "REFUNDED" for w in service.asked)
    for _ in range(3):  # a round of the re-verification reads the old hold again
        run(con, service, verify_syncs=3, hold_window=timedelta(0))
    assert stored(con, "status")[held["id"]] == "SETTLED"


def test_a_refund_under_way_on_a_failed_transfer_is_followed(
    con: duckdb.DuckDBPyConnection, service: FakeService
) -> None:
    failed = older(service, type="OUTGOING")[0]
    failed["status"] = "FAILED"
    failed["refund"] = {"status": "PENDING", "reason": "TRANSACTION_FAILED"}
    run(con, service)
    failed["refund"] = {"status": "COMPLETED", "reason": "TRANSACTION_FAILED"}
    run(con, service, verify_syncs=10**6)
    assert stored(con, "refund_status")[failed["id"]] == "COMPLETED"


def test_a_quarantined_record_is_read_again_until_the_service_fixes_it(
    con: duckdb.DuckDBPyConnection, service: FakeService
) -> None:
    record = older(service, type="OUTGOING", status="COMPLETED")[0]
    run(con, service)
    service.broken = {record["id"]}
    record["receiptDeliveryConfirmedAt"] = record["createdAt"]
    before = stored(con, "raw")[record["id"]]
    for _ in range(2):  # broken: set aside each time (read again, and by the share), kept as was
        assert run(con, service, verify_syncs=1).tally.rejected >= 1
        assert stored(con, "raw")[record["id"]] == before
    service.broken = set()
    run(con, service, verify_syncs=10**6)
    assert stored(con, "raw")[record["id"]] == orjson.dumps(record).decode()


@pytest.mark.parametrize("verify_syncs", [1, 3])
def test_what_no_count_shows_is_seen_within_verify_syncs(
    con: duckdb.DuckDBPyConnection, service: FakeService, verify_syncs: int
) -> None:
    # a field changing without its status, and a record vanishing behind an arrival in its
    # status and instant: only the re-verification's whole reads can see either
    completed = older(service, status="COMPLETED")
    confirmed, gone = completed[::2], completed[1::2]
    run(con, service)
    for record in confirmed:
        record["receiptDeliveryConfirmedAt"] = record["createdAt"]
    vanish_behind_a_twin(service, gone)
    for _ in range(verify_syncs):
        run(con, service, verify_syncs=verify_syncs)
    raw = stored(con, "raw")
    assert [r["id"] for r in confirmed if raw[r["id"]] != orjson.dumps(r).decode()] == []
    assert set(removed(con)) == {r["id"] for r in gone}


def removed(con: duckdb.DuckDBPyConnection) -> dict[str, datetime]:
    return dict(
        con.execute(
            "SELECT id, removed_at FROM transactions WHERE removed_at IS NOT NULL"
        ).fetchall()
    )


def vanish_behind_a_twin(service: FakeService, records: list[dict[str, Any]]) -> None:
    """Each record gone from the service, an arrival in its status and instant in its place:
    no count moves."""
    for record in records:
        del service.records[record["id"]]
        twin = {**record, "id": record["id"][:-4] + "beef"}
        service.records[twin["id"]] = twin


def test_a_record_the_service_no_longer_has_is_removed_by_the_next_sync(
    con: duckdb.DuckDBPyConnection, service: FakeService
) -> None:
    # an old one (no listing of an incremental sync reads its range whole: the counts find
    # it) and the newest one (the recent window lists it no more)
    old = older(service, status="COMPLETED")[5]
    newest = max(service.records.values(), key=lambda r: (r["createdAt"], r["id"]))
    run(con, service)
    del service.records[old["id"]], service.records[newest["id"]]
    again = run(con, service, verify_syncs=10**6)
    assert again.mode == "incremental"  # type: ignore[attr-defined]
    assert removed(con) == {old["id"]: AT, newest["id"]: AT}
    assert sorted(service.asked_by_id) == sorted([old["id"], newest["id"]])
    # kept, not deleted; a later sync neither asks again nor brings them back
    assert len(stored(con, "id")) == len(service.records) + 2
    service.asked_by_id = []
    run(con, service, verify_syncs=10**6)
    assert (set(removed(con)), service.asked_by_id) == ({old["id"], newest["id"]}, [])


def test_a_gap_in_the_listings_alone_never_removes_a_record(
    con: duckdb.DuckDBPyConnection, service: FakeService
) -> None:
    record = older(service, status="COMPLETED")[3]
    run(con, service)
    service.unlisted = {record["id"]}
    run(con, service, full=True)
    assert (removed(con), service.asked_by_id) == ({}, [record["id"]])


def test_a_full_sync_removes_at_once_and_a_record_that_comes_back_is_current_again(
    con: duckdb.DuckDBPyConnection, service: FakeService
) -> None:
    # the vanished record's place taken by an arrival in its status and instant: no count
    # moves, so only a whole read (a full sync, or the re-verification's) can see it
    candidates = older(service, status="COMPLETED")
    gone = candidates[len(candidates) // 2]  # out of the first share of the re-verification
    run(con, service)
    vanish_behind_a_twin(service, [gone])
    run(con, service, verify_syncs=10**6)
    assert removed(con) == {}
    run(con, service, full=True)
    assert removed(con) == {gone["id"]: AT}
    service.records[gone["id"]] = gone
    run(con, service, full=True)
    assert removed(con) == {}


def test_landings_and_batches_are_bounded_in_bytes_as_well_as_records() -> None:
    # memory stays bounded whatever a record weighs: heavy records make smaller batches

    def prepare(landings: list[Landing]) -> Batch:
        return Batch(landings, None, [], sum(len(landing.buffer) for landing in landings))

    cases = {
        "heavy records: the byte bound ends each batch": (1, 4_000, [3, 3, 3, 1]),
        "many records: the record bound ends each batch": (400, 4, [3, 3, 3, 1]),
        "neither bound: the flush ends the one batch": (1, 10, [10]),
    }
    for case, (records, size, expected) in cases.items():
        committed: list[list[Landing]] = []
        writer = Writer(
            prepare,
            lambda batch, committed=committed: committed.append(batch.landings),
            max_rows=1_000,
            max_bytes=10_000,
            queue_size=32,
            gather_seconds=60,  # only the bounds or the flush end a batch
        )
        sent = [
            Landing(
                Window(None, None),
                {f"tx-{n}-{i}": b"{}" for i in range(records)},
                [],
                None,
                False,
                size,
            )
            for n in range(10)
        ]
        for landing in sent:
            writer.put(landing)
        writer.flush()
        writer.close()
        assert [len(batch) for batch in committed] == expected, case
        assert [landing for batch in committed for landing in batch] == sent, case


def test_a_batch_typed_in_parts_is_the_batch_typed_whole() -> None:
    # with `merge`, the typer types parts of a batch while it gathers (nothing else to do):
    # merged, they are what typing the whole batch makes; a batch in which a record comes
    # twice is typed whole (its latest read kept), so no record is committed twice
    from paylens.warehouse.sync import save

    records = list(Sandbox(seed=23, transactions=120).world.all_transactions())
    typed: list[int] = []
    calls = threading.Semaphore(0)

    def prepare(landings: list[Landing]) -> Batch:
        typed.append(len(landings))
        calls.release()
        return save.typed_batch(landings, run_id=1, at=AT)

    def landing(chunk: list[dict[str, Any]]) -> Landing:
        texts = {r["id"]: orjson.dumps(r) for r in chunk}
        return Landing(Window(None, None), texts, [], None, False, sum(map(len, texts.values())))

    cases = {
        "distinct records: typed in parts, merged": [records[i : i + 10] for i in range(0, 80, 10)],
        "a record read twice: typed whole": [
            *(records[i : i + 10] for i in range(0, 40, 10)),
            [{**records[3], "status": "COMPLETED"}, *records[40:49]],
            *(records[i : i + 10] for i in range(49, 79, 10)),
        ],
    }
    for case, chunks in cases.items():
        committed: list[Batch] = []
        typed.clear()
        writer = Writer(
            prepare,
            committed.append,
            max_rows=80,  # parts of 10 rows
            max_bytes=1 << 30,
            queue_size=32,
            gather_seconds=60,  # only the bounds or the flush end a batch
            merge=save.merged,
        )
        sent = [landing(chunk) for chunk in chunks]
        # typed, a landing lets its texts go (the batch holds them): the whole is typed from
        # copies made before
        whole = save.typed_batch([landing(chunk) for chunk in chunks], run_id=1, at=AT)
        for n, item in enumerate(sent):
            writer.put(item)
            if n < 2:  # the first landings: typed ahead before the next comes
                assert calls.acquire(timeout=30), case
        writer.flush()
        writer.close()
        assert len(committed) == 1 and committed[0].landings == sent, case
        assert all(item.buffer == {} for item in sent), case  # let go once typed
        batch = committed[0]
        assert batch.records == whole.records and batch.rejects == whole.rejects, case
        assert batch.tables is not None and whole.tables is not None
        for name, table in whole.tables.items():
            assert batch.tables[name].equals(table), (case, name)
        if "twice" in case:
            assert typed[-1] == len(sent), case  # typed whole at the end
            assert batch.tables["transactions"].num_rows == whole.records == 79
        else:
            assert len(typed) > 1 and typed[-1] < len(sent), case


def test_a_reader_splits_its_window_while_a_commit_holds_the_file(
    con: duckdb.DuckDBPyConnection, service: FakeService, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an idle reader takes the later half of a window from the reader paging it; the half is
    # recorded by the writer in order with the landings, so the split waits on no commit under
    # way (it once waited for the file's lock, idling both readers at the end of each sync)
    # and a run killed at any point still resumes the whole window: the half is recorded in
    # a commit no later than the first of its own landings and the one ending the window it
    # came from
    from paylens.warehouse.sync import save

    commits: list[list[Landing]] = []
    commit = save.commit

    def recorded(con: duckdb.DuckDBPyConnection, batch: Batch, **options: Any) -> None:
        commits.append(list(batch.landings))
        commit(con, batch, **options)

    monkeypatch.setattr(save, "commit", recorded)
    db_lock = threading.Lock()
    reading, locked = threading.Event(), threading.Event()
    pages = service.pages

    def paged(window: Window) -> Iterator[TextPage]:
        if reading.is_set():
            yield from pages(window)
            return
        reading.set()  # the first window read: its pages come slowly, once the commit is on
        assert locked.wait(10)
        for page in pages(window):
            time.sleep(0.05)
            yield page

    service.pages = paged  # type: ignore[method-assign]
    sync, run_id = engine(con, service, db_lock=db_lock, threads=True, concurrency=2)
    runner = threading.Thread(target=sync.run)
    runner.start()
    assert reading.wait(10)

    def halves() -> list[tuple[Window, Window]]:
        asked = list(service.asked)
        return [
            (a, b)
            for a in asked
            for b in asked
            if a.start and b.start and b.end and a.start < b.start < b.end == a.end
        ]

    try:
        with db_lock:  # a commit under way
            locked.set()
            deadline = time.monotonic() + 5
            while not halves() and time.monotonic() < deadline:
                time.sleep(0.01)
            split = halves()
    finally:
        locked.set()
        runner.join(30)
    assert not runner.is_alive()
    assert split, "the idle reader waited for the commit to split the window"
    assert stored(con, "raw") == {i: orjson.dumps(r).decode() for i, r in service.records.items()}
    slices = con.execute(
        "SELECT slice_start, slice_end, done FROM sync_slices WHERE run_id = ?", [run_id]
    ).fetchall()
    child = split[0][1]
    assert (child.start, child.end, True) in slices

    def first(window: Window, *, opens: bool = False, done: bool = False) -> int:
        """The commit of the first landing of `window` that opens it, ends it, or holds its
        records (neither)."""
        return next(
            i
            for i, landings in enumerate(commits)
            for landing in landings
            if landing.window.key == window.key
            and landing.opens == opens
            and (landing.done or not done)
        )

    for child in {b.key: b for _, b in halves()}.values():
        # the window it came from: the latest-starting one it halves
        parent = max((a for a, b in halves() if b == child), key=lambda a: a.start or AT)
        assert first(child, opens=True) <= min(first(parent, done=True), first(child))


def test_a_late_arrival_hidden_by_a_record_leaving_its_status_is_stored_the_same_sync(
    con: duckdb.DuckDBPyConnection, service: FakeService
) -> None:
    # in the older range, between two syncs: a COMPLETED payout is returned (FAILED) and a
    # COMPLETED transfer arrives late. COMPLETED counts as many as before, the total and FAILED
    # one more: read FAILED, the return is stored; COMPLETED then shows one more than stored
    completed = older(service, type="OUTGOING", status="COMPLETED")
    paid, late = completed[len(completed) // 2], completed[len(completed) // 2 + 1]
    del service.records[late["id"]]
    run(con, service)
    paid["status"], paid["failureReason"] = "FAILED", "PAYOUT_RETURNED"
    service.records[late["id"]] = late
    run(con, service, verify_syncs=10**6)
    statuses = stored(con, "status")
    assert (statuses[paid["id"]], statuses.get(late["id"])) == ("FAILED", "COMPLETED")


class EdgeService(FakeService):
    """A `FakeService` whose listings of a window with a start also bring the record created
    last before it (a window's edge read twice): that record comes in two windows' pages."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        super().__init__(records)
        self.twice: list[str] = []

    def pages(self, window: Window) -> Iterator[TextPage]:
        before = [] if window.start is None else self._select(Window(None, window.start))[-1:]
        self.twice += [r["id"] for r in before]
        for n, page in enumerate(super().pages(window)):
            if n == 0 and before:
                page = TextPage(
                    [self._text(before[0]), *page.records],
                    [before[0]["id"], *page.ids],
                    page.has_more,
                    page.next_cursor,
                    page.total_count,
                )
            yield page


def test_a_record_two_windows_list_is_stored_once_by_a_full_read() -> None:
    """A full read commits most records without reading what is stored (nothing of theirs
    is): a record two of its windows bring, committed twice, still has one row, and its
    status one line of history."""
    records = list(Sandbox(seed=23, transactions=2000).world.all_transactions())
    service = EdgeService(records)
    connection = duckdb.connect(":memory:")
    _store.ensure_schema(connection)
    first = run(connection, service, concurrency=4, batch_records=100)
    assert first.mode == "full"  # type: ignore[attr-defined]
    assert len(set(service.twice)) >= 2  # the case is made: edges listed twice
    assert connection.execute(
        "SELECT count(*), count(DISTINCT id) FROM transactions"
    ).fetchone() == (len(records), len(records))
    assert connection.execute(
        "SELECT count(*), count(DISTINCT id) FROM status_history"
    ).fetchone() == (len(records), len(records))
    assert stored(connection, "raw") == {r["id"]: orjson.dumps(r).decode() for r in records}
    connection.close()


class PacedService(FakeService):
    """A `FakeService` whose pages hold 20 records and take `latency` seconds each (a wait
    outside the interpreter lock, as a network's), recording how many pages are being asked
    for at once as each is asked."""

    def __init__(self, records: list[dict[str, Any]], latency: float) -> None:
        super().__init__(records)
        self.latency = latency
        self.at_once: list[int] = []
        self._running = 0
        self._lock = threading.Lock()

    def pages(self, window: Window) -> Iterator[TextPage]:
        self.asked.append(window)
        rows = self._select(window)
        for first in range(0, max(len(rows), 1), 20):
            with self._lock:
                self._running += 1
                self.at_once.append(self._running)
            time.sleep(self.latency)
            chunk = rows[first : first + 20]
            page = TextPage(
                [self._text(r) for r in chunk],
                [r["id"] for r in chunk],
                first + 20 < len(rows),
                None,
                len(rows),
            )
            with self._lock:
                self._running -= 1
            yield page


@pytest.fixture(scope="module")
def many() -> list[dict[str, Any]]:
    return list(Sandbox(seed=29, transactions=6_000).world.all_transactions())


def test_readers_ahead_of_the_commits_keep_few_requests_under_way(
    con: duckdb.DuckDBPyConnection, many: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # against a service that answers at once, 16 readers only wait for a slow writer, and
    # while they run they contend for the interpreter lock: the readers back off to four
    # requests at once, and every record is still stored
    from paylens.warehouse.sync import run as run_module

    commit = run_module.save.commit

    def slow_commit(*args: Any, **kwargs: Any) -> None:
        time.sleep(0.05)
        commit(*args, **kwargs)

    monkeypatch.setattr(run_module.save, "commit", slow_commit)
    service = PacedService(many, latency=0.0)
    sync, _ = engine(
        con,
        service,
        threads=True,
        concurrency=16,
        land_records=100,
        batch_records=400,
        ahead_records=1_000,
    )
    sync.run()
    assert stored(con, "id").keys() == {r["id"] for r in many}
    asked = service.at_once
    assert len(asked) >= 300
    assert max(asked[:32]) > 4  # every reader to begin with
    assert max(asked[len(asked) // 2 :]) <= 4, asked[len(asked) // 2 :]
    assert sync.in_flight.limit == 4


def test_readers_that_wait_on_the_network_all_keep_a_request_under_way(
    con: duckdb.DuckDBPyConnection, many: list[dict[str, Any]]
) -> None:
    # a service 20 ms away: the readers never get ahead of the commits, so every one of
    # them keeps a page under way (what covers the wait), and every record is stored
    service = PacedService(many, latency=0.02)
    sync, _ = engine(con, service, threads=True, concurrency=16, land_records=100)
    sync.run()
    assert stored(con, "id").keys() == {r["id"] for r in many}
    assert sync.in_flight.limit == 16
    later = service.at_once[32 : len(service.at_once) // 2]
    assert max(later) >= 12, later
