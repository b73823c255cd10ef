"""The webhook event store: stored once across processes, durable when `append` returns, read in
commit order, one approval decision per payment, receiver intervals merged into gaps."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from paylens.errors import InvalidArgumentError
from paylens.webhooks import Decision, Event, EventStore, events_path, merge_intervals


def _event(n: int) -> Event:
    body = b'{"id":"Webhook:%d","type":"TEST","timestamp":"2025-10-01T00:00:00Z"}' % n
    return Event(f"Webhook:{n}", "TEST", "2025-10-01T00:00:00Z", body)


def test_the_store_lives_beside_the_warehouse(tmp_path: Path) -> None:
    assert events_path(tmp_path / "data" / "paylens.duckdb") == (
        tmp_path / "data" / "paylens.webhooks.sqlite"
    )
    assert events_path("wh") == Path("wh.webhooks.sqlite")


def test_a_redelivery_is_stored_once_and_reported_as_such(tmp_path: Path) -> None:
    with EventStore(tmp_path / "e.sqlite") as store:
        assert store.append([_event(1), _event(2)]) == [True, True]
        assert store.append([_event(2), _event(3), _event(3)]) == [False, True, False]
        stored = store.events_after(0)
        assert [e.webhook_id for e in stored] == ["Webhook:1", "Webhook:2", "Webhook:3"]
        assert [e.seq for e in stored] == sorted(e.seq for e in stored)
        assert stored[0].body == _event(1).body
        assert [e.webhook_id for e in store.events_after(stored[1].seq)] == ["Webhook:3"]


_WRITER = """
import sys
from paylens.webhooks import Event, EventStore
store = EventStore(sys.argv[1])
first, last = int(sys.argv[2]), int(sys.argv[3])
for n in range(first, last):
    body = b'{"n":%d}' % n
    fresh = store.append([Event(f"Webhook:{n}", "TEST", "2025-10-01T00:00:00Z", body)])
    print(n, int(fresh[0]), flush=True)
"""


def test_two_processes_appending_at_once_store_each_id_once(tmp_path: Path) -> None:
    path = tmp_path / "e.sqlite"
    EventStore(path).close()
    # ids 0..399 and 200..599: 200 of them sent to both processes at once
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path), str(a), str(b)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for a, b in ((0, 400), (200, 600))
    ]
    outputs = [run.communicate(timeout=120)[0] for run in runs]
    fresh = [line.split() for out in outputs for line in out.splitlines()]
    assert len(fresh) == 800
    new_ids = sorted(int(n) for n, new in fresh if new == "1")
    assert new_ids == list(range(600))  # each id new in exactly one process
    with EventStore(path) as store:
        assert store.count() == 600
        seqs = [e.seq for e in store.events_after(0)]
        assert seqs == sorted(seqs) and len(set(seqs)) == 600


def test_every_acknowledged_event_survives_a_sigkill(tmp_path: Path) -> None:
    path = tmp_path / "e.sqlite"
    EventStore(path).close()
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path), "0", "100000"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None
    acknowledged = []
    for line in writer.stdout:
        acknowledged.append(int(line.split()[0]))
        if len(acknowledged) == 300:
            os.kill(writer.pid, signal.SIGKILL)
            break
    writer.wait()
    with EventStore(path) as store:
        stored = {e.webhook_id for e in store.events_after(0)}
    assert {f"Webhook:{n}" for n in acknowledged} <= stored


def test_one_decision_per_payment_whoever_decides_first(tmp_path: Path) -> None:
    with EventStore(tmp_path / "e.sqlite") as first, EventStore(tmp_path / "e.sqlite") as second:
        approved = Decision("Transaction:1", "Webhook:1", 200, "amount <= 1000", "2025-10-01")
        rejected = Decision("Transaction:1", "Webhook:2", 403, "other", "2025-10-02")
        assert first.decide(approved) == approved
        assert second.decide(rejected) == approved  # the second process reads the decision made
        assert second.decision("Transaction:1") == approved
        assert second.decision("Transaction:2") is None
        assert first.decisions() == [approved]


def test_a_store_written_before_the_answer_column_keeps_its_decisions(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "e.sqlite"
    with sqlite3.connect(path) as con:  # the table as the first stores wrote it
        con.execute(
            """CREATE TABLE approval_decisions (transaction_id TEXT PRIMARY KEY,
               webhook_id TEXT NOT NULL, status INTEGER NOT NULL, reason TEXT NOT NULL,
               decided_at TEXT NOT NULL)"""
        )
        con.execute(
            "INSERT INTO approval_decisions VALUES ('Transaction:1', 'Webhook:1', 403, 'no', 'x')"
        )
    with EventStore(path) as store, EventStore(path) as again:
        old = Decision("Transaction:1", "Webhook:1", 403, "no", "x", "{}")
        assert store.decisions() == [old] and again.decision("Transaction:1") == old
        new = Decision("Transaction:2", "Webhook:2", 200, "ok", "y", '{"receiverCustomerInfo": {}}')
        assert again.decide(new) == new and store.decision("Transaction:2") == new


def test_receiver_intervals_merge_into_up_time(tmp_path: Path) -> None:
    with EventStore(tmp_path / "e.sqlite") as store:
        store.receiver_started("a")
        store.receiver_started("b")
        store.receiver_stopped("a")
        store.receiver_alive("b")
        intervals = store.up_intervals()
        (a, a_start, a_seen, a_stop), (b, b_start, b_seen, b_stop) = store.receivers()
        assert (a, b) == ("a", "b") and a_start < a_stop == a_seen and b_stop is None
        assert b_start < b_seen  # its heartbeat moved its last sight on
    assert len(intervals) == 1
    start, end = intervals[0]
    assert start < end
    assert merge_intervals([("1", "3"), ("5", "6"), ("2", "4"), ("6", "7")]) == [
        ("1", "4"),
        ("5", "7"),
    ]


def test_kept_apart_bodies_are_never_events(tmp_path: Path) -> None:
    with EventStore(tmp_path / "e.sqlite") as store:
        store.reject(b'{"type":"NOT.A_TYPE"}', "type: 'NOT.A_TYPE' is not a webhook type")
        assert store.count() == 0
        [(_, _, reason, body)] = store.rejected()
        assert "NOT.A_TYPE" in reason and body == b'{"type":"NOT.A_TYPE"}'


def test_a_naive_instant_is_refused() -> None:
    from paylens.webhooks._store import stamp

    with pytest.raises(InvalidArgumentError, match="time zone"):
        stamp(datetime(2025, 10, 1))
