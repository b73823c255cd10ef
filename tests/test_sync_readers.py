"""The sync's pool of readers takes queued work by rank: a count that decides how a listing is
cut, and the longest listing's read, go before reads queued earlier (#34)."""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import CancelledError
from pathlib import Path
from typing import Any

import pytest

from paylens import Sandbox, Warehouse
from paylens.warehouse import _run
from paylens.warehouse.sync import resources
from paylens.warehouse.sync.readers import PLAN, Readers, submit_ranked
from paylens.warehouse.sync.run import InlineExecutor


def _blocked(pool: Readers) -> threading.Event:
    """Every reader of `pool` busy until the returned event is set."""
    release = threading.Event()
    started = threading.Barrier(pool.workers + 1)

    def hold() -> None:
        started.wait()
        release.wait()

    for _ in range(pool.workers):
        pool.submit(hold)
    started.wait()
    return release


def test_queued_work_runs_highest_rank_first_then_in_order_of_submission() -> None:
    pool = Readers(1, "test-readers")
    release = _blocked(pool)
    ran: list[str] = []
    futures = [
        pool.submit(ran.append, "window 1"),
        submit_ranked(pool, 1_250, ran.append, "customers part"),
        pool.submit(ran.append, "window 2"),
        submit_ranked(pool, 24_000, ran.append, "external accounts, USD"),
        submit_ranked(pool, PLAN, ran.append, "count"),
        submit_ranked(pool, 1_250, ran.append, "customers part 2"),
    ]
    release.set()
    for future in futures:
        future.result(timeout=10)
    pool.shutdown()
    assert ran == [
        "count",
        "external accounts, USD",
        "customers part",
        "customers part 2",
        "window 1",
        "window 2",
    ]


def test_results_and_errors_reach_the_futures() -> None:
    pool = Readers(2, "test-readers")
    assert pool.submit(sum, [1, 2, 3]).result(timeout=10) == 6
    failed = pool.submit(int, "not a number")
    with pytest.raises(ValueError, match="not a number"):
        failed.result(timeout=10)
    assert pool.map(abs, [-1, -2, 3]).__next__() == 1
    pool.shutdown()


def test_shutdown_cancels_what_is_queued_when_asked_and_refuses_new_work() -> None:
    pool = Readers(1, "test-readers")
    release = _blocked(pool)
    queued = [pool.submit(print, n) for n in range(3)]
    threading.Timer(0.05, release.set).start()  # the held reader finishes after shutdown began
    pool.shutdown(wait=True, cancel_futures=True)
    assert all(f.cancelled() for f in queued)
    with pytest.raises(CancelledError):
        queued[0].result()
    assert not any(t.is_alive() for t in pool.threads)
    with pytest.raises(RuntimeError, match="after shutdown"):
        pool.submit(print, "late")


def test_shutdown_without_cancelling_finishes_the_queue() -> None:
    pool = Readers(2, "test-readers")
    release = _blocked(pool)
    done: list[int] = []
    futures = [submit_ranked(pool, n, done.append, n) for n in range(5)]
    threading.Timer(0.05, release.set).start()
    pool.shutdown(wait=True)
    assert sorted(done) == [0, 1, 2, 3, 4]
    assert all(f.done() and not f.cancelled() for f in futures)


def test_an_executor_that_does_not_rank_runs_the_work_as_submitted() -> None:
    assert submit_ranked(InlineExecutor(), PLAN, sum, [2, 3]).result() == 5


def test_a_sync_ranks_counts_first_and_the_accounts_parts_by_their_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In a whole sync, every count is ranked first; each currency part of the accounts is
    ranked by the records the service counts in it (so the longest starts first); the
    transactions' windows come after, in order."""
    ranked: list[tuple[int, Any, tuple[Any, ...]]] = []

    class Recording(Readers):
        def submit_ranked(self, rank: int, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            ranked.append((rank, fn, args))
            return super().submit_ranked(rank, fn, *args, **kwargs)

    monkeypatch.setattr(_run, "Readers", Recording)
    sandbox = Sandbox(seed=8, transactions=1_000, profile="remittance")  # 613 external accounts
    client = sandbox.client()
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.sync(client, progress=False)
    by_currency = Counter(a.currency for a in client.external_accounts.list())
    parts = {
        args[2]["currency"]: rank
        for rank, fn, args in ranked
        if fn is resources.read and args[1] == "external_accounts"
    }
    assert parts == dict(by_currency)  # every currency a part, ranked by its count
    counts = [rank for rank, fn, _ in ranked if fn is resources.count]
    assert counts and set(counts) == {PLAN}
    windows = [rank for rank, fn, _ in ranked if getattr(fn, "__name__", "") == "_read"]
    assert windows and set(windows) == {0}
