"""The sync's saving: landings typed into batches, bad records set aside one by one, each batch
committed with its checkpoint, and what the plan asks of the store; on a DuckDB connection of
its own (no service, no threads), with records from the sandbox."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime

import duckdb
import orjson
import pyarrow as pa
import pytest

from paylens import Sandbox
from paylens.warehouse import _store
from paylens.warehouse.sync import save
from paylens.warehouse.sync.fetch import Landing
from paylens.warehouse.sync.plan import Window

AT = datetime(2025, 10, 13, tzinfo=UTC)


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return list(Sandbox(seed=17, transactions=400).world.all_transactions())


@pytest.fixture
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    connection = duckdb.connect(":memory:")
    _store.ensure_schema(connection)
    connection.execute(
        "INSERT INTO sync_runs (run_id, status) VALUES (1, 'succeeded'), (2, 'running')"
    )
    yield connection
    connection.close()


def landing(records: list[dict], window: Window | None = None, done: bool = True) -> Landing:
    texts = {r["id"]: orjson.dumps(r) for r in records}
    return Landing(
        window or Window(None, None), texts, [], None, done, sum(map(len, texts.values()))
    )


def with_amount(record: dict, amount: object) -> bytes:
    key = next(k for k in ("sentAmount", "receivedAmount", "authorizedAmount") if k in record)
    return json.dumps({**record, key: {**record[key], "amount": amount}}).encode()


def with_huge_amount(record: dict) -> bytes:
    return with_amount(record, 2**64 + 5)


def test_a_bad_record_is_set_aside_alone(records: list[dict]) -> None:
    good = landing(records[:50])
    good.buffer[records[7]["id"]] = with_huge_amount(records[7])
    good.buffer[records[9]["id"]] = orjson.dumps({**records[9], "status": None})
    batch = save.typed_batch([good], run_id=2, at=AT)
    assert batch.records == 50 and batch.tables is not None
    assert batch.tables["transactions"].num_rows == 48
    rejected = {row[2]: row for row in batch.rejects}
    assert set(rejected) == {records[7]["id"], records[9]["id"]}
    assert "18446744073709551621" in rejected[records[7]["id"]][6]  # kept as it came
    assert "status" in rejected[records[9]["id"]][5]


def test_refused_records_are_found_in_few_reads_whatever_the_error_points_at(
    records: list[dict],
) -> None:
    # Arrow names the value it refused (its text, or its row): those records are tried alone
    # first, so a few bad records cost a few reads; a hint that misleads costs only speed
    items = [(r["id"], orjson.dumps(r)) for r in records[:128]]
    bad = {3: 2**64 + 5, 40: 107400.5, 77: "12", 90: {"a": 1}}  # by text, by row (the last two)
    for i, amount in bad.items():
        items[i] = (items[i][0], with_amount(records[i], amount))
    # the refused float's text in a good record too (a note), where it reads fine
    items[5] = (items[5][0], orjson.dumps({**records[5], "note": "107400.5"}))
    reads = []

    def read(raw: list[bytes]) -> object:
        reads.append(len(raw))
        return save._parse(raw)

    assert save.unreadable(items, read) == [items[i][0] for i in sorted(bad)]
    assert len(reads) <= 3 * len(bad) + 2  # bisection alone: about 2 log2(128) reads a record
    for i in sorted(bad):
        with pytest.raises(pa.ArrowInvalid):
            save._parse([items[i][1]])


def test_a_batch_commits_with_its_checkpoint(
    con: duckdb.DuckDBPyConnection, records: list[dict]
) -> None:
    window = Window(None, AT)
    save.register(con, [window], run_id=2)
    first = landing(records[:30], window, done=False)
    first.resume = AT
    save.commit(con, save.typed_batch([first], 2, AT), run_id=2, at=AT)
    assert con.execute("SELECT count(*) FROM transactions").fetchone() == (30,)
    assert con.execute("SELECT done, records FROM sync_slices").fetchall() == [(False, 30)]
    # a killed run: its unfinished window is resumed from its checkpoint by the next one
    assert save.unfinished(con, run_id=3) == ([Window(AT, AT)], False)
    assert con.execute("SELECT status FROM sync_runs WHERE run_id = 2").fetchone() == (
        "interrupted",
    )


def test_a_failing_commit_leaves_neither_rows_nor_checkpoint(
    con: duckdb.DuckDBPyConnection, records: list[dict]
) -> None:
    window = Window(None, AT)
    save.register(con, [window], run_id=2)
    batch = save.typed_batch([landing(records[:30], window)], 2, AT)
    # the rejects' insert fails inside the transaction (no run id, no time)
    batch.rejects = [("not a run", "transactions", None, None, None, "e", "{}", "not a time")]
    with pytest.raises(duckdb.Error):
        save.commit(con, batch, run_id=2, at=AT)
    assert con.execute("SELECT count(*) FROM transactions").fetchone() == (0,)
    assert con.execute("SELECT done FROM sync_slices").fetchall() == [(False,)]


def test_a_type_change_leaves_no_row_of_the_former_type(
    con: duckdb.DuckDBPyConnection, records: list[dict]
) -> None:
    outgoing = next(r for r in records if r["type"] == "OUTGOING" and r.get("paymentInstructions"))
    save.commit(con, save.typed_batch([landing([outgoing])], 1, AT), run_id=1, at=AT)
    assert con.execute("SELECT count(*) FROM outgoing_fees").fetchone() == (1,)
    assert con.execute("SELECT count(*) FROM payment_instructions").fetchone()[0] > 0
    save.commit(
        con, save.typed_batch([landing([{**outgoing, "type": "INCOMING"}])], 2, AT), run_id=2, at=AT
    )
    assert con.execute("SELECT type FROM transactions").fetchall() == [("INCOMING",)]
    assert con.execute("SELECT count(*) FROM outgoing_fees").fetchone() == (0,)
    assert con.execute("SELECT count(*) FROM payment_instructions").fetchone() == (0,)


def test_watched_records_are_those_no_listing_can_show_changed(
    con: duckdb.DuckDBPyConnection, records: list[dict]
) -> None:
    pending = next(r for r in records if r["status"] == "PENDING")
    settled = next(r for r in records if r["status"] == "COMPLETED" and r["type"] == "INCOMING")
    refunding = next(
        {
            **r,
            "status": "FAILED",
            "refund": {
                **(r.get("refund") or {}),
                "status": "PENDING",
                "reason": "TRANSACTION_FAILED",
            },
        }
        for r in records
        if r["type"] == "OUTGOING" and r["id"] != settled["id"]
    )
    listed = next(r for r in records if r["status"] == "PROCESSING")
    cards = [r for r in records if r["type"] == "CARD"]
    young, old, closed = (
        {**cards[0], "status": "AUTHORIZED", "createdAt": "2025-10-10T00:00:00Z"},
        {**cards[1], "status": "PARTIALLY_SETTLED", "createdAt": "2025-09-01T00:00:00Z"},
        {**cards[2], "status": "SETTLED", "createdAt": "2025-10-11T00:00:00Z"},
    )
    save.commit(
        con,
        save.typed_batch(
            [landing([pending, settled, refunding, listed, young, old, closed])], 1, AT
        ),
        run_id=1,
        at=AT,
    )
    save.commit(con, save.typed_batch([landing([listed])], 2, AT), run_id=2, at=AT)  # re-listed
    broken = records[-1]
    batch = save.typed_batch([landing([])], 2, AT)
    batch.rejects = [save.reject_row(with_huge_amount(broken), "bad amount", 2, AT)]
    save.commit(con, batch, run_id=2, at=AT)
    stored = save.StoredTransactions(con)
    # open card holds from `holds_since` on (no filter lists them); older ones are left out
    times = stored.watched(
        Window(None, None), run_id=2, holds_since=datetime(2025, 10, 1, tzinfo=UTC)
    )
    expected = {
        pending["createdAt"],
        refunding["createdAt"],
        broken["createdAt"],
        young["createdAt"],
    }
    ids = {r["id"] for r in (pending, settled, refunding, listed, broken, young, old, closed)}
    assert len(ids) == 8
    assert times == sorted(datetime.fromisoformat(t.replace("Z", "+00:00")) for t in expected)
    # quarantined records are known to the counts but not stored
    assert sum(stored.counts(Window(None, None)).values()) == 8
    assert stored.stored(Window(None, None)) == 7


def test_each_record_set_aside_is_told_its_own_refusal(records: list[dict]) -> None:
    """Two misfits in one batch that the typed models accept (a currency given as its bare
    code): each reject's error is what Arrow says of that record, not of the first value it
    refused in the batch."""
    a, b, c = [r for r in records if r["type"] == "OUTGOING"][:3]
    texts = {r["id"]: orjson.dumps(r) for r in (a, b, c)}
    for record, key in ((a, "sentAmount"), (b, "receivedAmount")):
        code = record[key]["currency"]["code"]
        texts[record["id"]] = orjson.dumps({**record, key: {**record[key], "currency": code}})
    batch = save.typed_batch([Landing(Window(None, AT), texts, [], None, True)], 1, AT)
    errors = {row[2]: row[5] for row in batch.rejects}
    assert set(errors) == {a["id"], b["id"]}
    assert "/sentAmount/currency" in errors[a["id"]], errors
    assert "/receivedAmount/currency" in errors[b["id"]], errors
    assert batch.tables is not None and batch.tables["transactions"].num_rows == 1


#: Every row of the record tables and the status history, less nothing: what two ways of
#: committing the same batches must leave alike.
_LANDED = {
    "transactions": "SELECT * EXCLUDE (raw) FROM transactions ORDER BY id",
    "outgoing_fees": "SELECT * FROM outgoing_fees ORDER BY id",
    "card_transactions": "SELECT * FROM card_transactions ORDER BY id",
    "payment_instructions": "SELECT * FROM payment_instructions ORDER BY transaction_id, position",
    "status_history": "SELECT * FROM status_history ORDER BY id, run_id, status",
}


class _Statements:
    """A connection that keeps the text of each statement it runs."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self.seen: list[str] = []

    def execute(self, query: str, *args: object) -> duckdb.DuckDBPyConnection:
        self.seen.append(" ".join(query.split()))
        return self.con.execute(query, *args)

    def __getattr__(self, name: str) -> object:
        return getattr(self.con, name)


def test_new_records_are_committed_without_reading_the_stored_ones(
    con: duckdb.DuckDBPyConnection, records: list[dict]
) -> None:
    """A commit none of whose records is stored (most of a full read's) reads no stored row:
    the upsert's join with the stored keys scans them all, each commit, so a full read's CPU
    grew with the table. A record stored before (a slice's edge read twice) is still looked
    up, and replaced."""
    keys = save.StoredKeys()
    spy = _Statements(con)
    save.commit(spy, save.typed_batch([landing(records[:100])], 2, AT), run_id=2, at=AT, keys=keys)  # type: ignore[arg-type]
    spy.seen.clear()
    save.commit(
        spy, save.typed_batch([landing(records[100:200])], 2, AT), run_id=2, at=AT, keys=keys
    )  # type: ignore[arg-type]
    reads_stored = [s for s in spy.seen if "SEMI JOIN _batch" in s or "DELETE" in s]
    assert reads_stored == []
    spy.seen.clear()
    again = landing([*records[200:210], {**records[150], "status": "FAILED"}])
    save.commit(spy, save.typed_batch([again], 2, AT), run_id=2, at=AT, keys=keys)  # type: ignore[arg-type]
    assert [s for s in spy.seen if "SEMI JOIN _batch" in s] != []
    assert con.execute("SELECT count(*), count(DISTINCT id) FROM transactions").fetchone() == (
        210,
        210,
    )
    assert con.execute(
        "SELECT previous_status, status FROM status_history WHERE id = ? ORDER BY status",
        [records[150]["id"]],
    ).fetchall() == sorted(
        [(None, records[150]["status"]), (records[150]["status"], "FAILED")], key=lambda r: r[1]
    )


def test_commits_that_skip_the_lookup_land_what_the_lookup_lands(records: list[dict]) -> None:
    """The same batches committed with the run's stored keys and without them (every commit
    joined with the stored rows) leave the same rows: records stored by an earlier run, read
    again with a change, a type changed, a record read twice in one run, new ones."""
    outgoing = next(
        r for r in records[250:] if r["type"] == "OUTGOING" and r.get("paymentInstructions")
    )
    changed = [{**r, "status": "FAILED"} for r in records[20:40] if r["status"] != "FAILED"]
    twice = next({**r, "status": "EXPIRED"} for r in records[40:120] if r["status"] != "EXPIRED")
    batches = [
        (1, [*records[:40], outgoing]),  # an earlier run
        (2, records[40:120]),  # new
        (2, [*records[120:160], *changed, {**outgoing, "type": "INCOMING"}]),  # stored before
        (2, records[160:240]),  # new again
        (2, [*records[230:250], twice]),  # read twice this run
    ]
    landed = []
    for with_keys in (True, False):
        db = duckdb.connect(":memory:")
        _store.ensure_schema(db)
        keys = save.StoredKeys() if with_keys else None
        for run, batch in batches:
            typed = save.typed_batch([landing(batch)], run, AT)
            save.commit(db, typed, run_id=run, at=AT, keys=keys if run == 2 else None)
        landed.append({name: db.execute(q).fetchall() for name, q in _LANDED.items()})
        db.close()
    assert landed[0] == landed[1]
    assert len(landed[0]["transactions"]) == 251
    # a first status each, a change each for those read again in another status (the type
    # change keeps its status)
    assert len(landed[0]["status_history"]) == 251 + len(changed) + 1


def test_a_failed_commit_leaves_the_stored_keys_as_the_tables(
    con: duckdb.DuckDBPyConnection, records: list[dict]
) -> None:
    """A commit rolled back takes its keys with it: committed again, and again, its records
    are stored once."""
    keys = save.StoredKeys()
    save.commit(con, save.typed_batch([landing(records[:10])], 2, AT), run_id=2, at=AT, keys=keys)
    batch = save.typed_batch([landing(records[10:30])], 2, AT)
    rejects, batch.rejects = batch.rejects, [("not a run", "t", None, None, None, "e", "{}", "x")]
    with pytest.raises(duckdb.Error):
        save.commit(con, batch, run_id=2, at=AT, keys=keys)
    batch.rejects = rejects
    save.commit(con, batch, run_id=2, at=AT, keys=keys)
    save.commit(con, batch, run_id=2, at=AT, keys=keys)
    assert con.execute("SELECT count(*), count(DISTINCT id) FROM transactions").fetchone() == (
        30,
        30,
    )


def _physical_rows(con: duckdb.DuckDBPyConnection, table: str) -> int:
    """Rows the table's storage holds, the deleted ones still there included."""
    (rows,) = con.execute(
        "SELECT estimated_size FROM duckdb_tables() WHERE table_name = ?", [table]
    ).fetchone()  # type: ignore[misc]
    return int(rows)


def test_a_record_read_again_unchanged_stays_where_it_is(records: list[dict]) -> None:
    """A record read again as it was (a re-verification, a whole read of a resource) is
    stamped as seen by this run and left in place: only a changed record's old row is
    deleted, so the file does not fill with dead rows at every sync. What a reader sees is
    what delete-and-insert gave: its first and last change kept, this run's stamp."""
    db = duckdb.connect(":memory:")
    _store.ensure_schema(db)
    first = [*records[:300]]
    save.commit(db, save.typed_batch([landing(first)], 1, AT), run_id=1, at=AT)
    before = {name: db.execute(q).fetchall() for name, q in _LANDED.items()}
    changed = {**records[7], "status": "FAILED" if records[7]["status"] != "FAILED" else "EXPIRED"}
    again = [*records[:7], changed, *records[8:300]]
    later = datetime(2025, 10, 14, tzinfo=UTC)
    save.commit(db, save.typed_batch([landing(again)], 2, later), run_id=2, at=later)
    # one row gone from each table that holds record 7 (and its instructions, if any)
    for table in ("transactions", "outgoing_fees", "card_transactions"):
        (live,) = db.execute(f"SELECT count(*) FROM {table}").fetchone()  # type: ignore[misc]
        (holds_it,) = db.execute(  # type: ignore[misc]
            f"SELECT count(*) FROM {table} WHERE id = ?", [changed["id"]]
        ).fetchone()
        assert _physical_rows(db, table) - live == holds_it, table
    rows = db.execute(
        """SELECT id, first_run_id, last_changed_run_id, sync_run_id, last_synced_at = ?
           FROM transactions ORDER BY id""",
        [later],
    ).fetchall()
    assert {r[0]: r[1:] for r in rows} == {
        r["id"]: (1, 2 if r["id"] == changed["id"] else 1, 2, True) for r in first
    }
    fees = db.execute(
        "SELECT id, last_changed_run_id, sync_run_id FROM outgoing_fees ORDER BY id"
    ).fetchall()
    assert fees and all(f[1:] == ((2 if f[0] == changed["id"] else 1), 2) for f in fees)
    # the columns a reader reads are what they were, but for record 7 and the stamps
    after = {name: db.execute(q).fetchall() for name, q in _LANDED.items()}
    assert len(after["transactions"]) == len(before["transactions"]) == 300
    (live,) = db.execute("SELECT count(*) FROM payment_instructions").fetchone()  # type: ignore[misc]
    assert live == len(before["payment_instructions"]) > 0
    (of_7,) = db.execute(  # type: ignore[misc]
        "SELECT count(*) FROM payment_instructions WHERE transaction_id = ?", [changed["id"]]
    ).fetchone()
    assert _physical_rows(db, "payment_instructions") - live == of_7
    db.close()
