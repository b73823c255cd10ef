"""The sync's pool of readers takes queued work by rank: a count that decides how a listing is
cut, and the longest listing's read, go before reads queued earlier (#34)."""

from __future__ import annotations

import threading
from concurrent.futures import CancelledError

import pytest

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
