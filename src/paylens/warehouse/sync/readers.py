"""The sync's one pool of readers, which takes queued work by rank.

Every resource's requests share one pool (one request budget). A whole read is cut into
parts, each part's listing read page after page by one reader; the longest such listing bounds
the whole sync. In a pool that takes work in order of submission, the counts that decide how
the accounts are cut (and then the read of their longest part) wait behind every part and
window queued before them: seconds, on a 20 ms service (#34). Here a count (`PLAN`) goes
first, then reads by the records they are expected to hold (the longest first), then the
rest (rank 0: the transactions' windows) in order of submission.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

#: The rank of a request that decides how the rest is read (a count, the configuration).
PLAN = 1 << 62


class Readers(Executor):
    """`workers` threads that take queued work highest rank first, in order of submission
    within a rank. `submit` queues at rank 0; `submit_ranked` at a rank of the caller's."""

    def __init__(self, workers: int, name: str) -> None:
        self.workers = workers
        self._queue: list[tuple[int, int, Future[Any], Callable[[], Any]]] = []
        self._ready = threading.Condition()
        self._order = itertools.count()
        self._closed = False
        self.threads = [
            threading.Thread(target=self._work, name=f"{name}_{i}", daemon=True)
            for i in range(workers)
        ]
        for thread in self.threads:
            thread.start()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        return self.submit_ranked(0, fn, *args, **kwargs)

    def submit_ranked(
        self, rank: int, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> Future[Any]:
        future: Future[Any] = Future()
        with self._ready:
            if self._closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
            work = (-rank, next(self._order), future, lambda: fn(*args, **kwargs))
            heapq.heappush(self._queue, work)
            self._ready.notify()
        return future

    def _work(self) -> None:
        while True:
            with self._ready:
                while not self._queue and not self._closed:
                    self._ready.wait()
                if not self._queue:  # shut down, and nothing left to do
                    return
                _, _, future, call = heapq.heappop(self._queue)
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = call()
            except BaseException as exc:  # handed to whoever asks for the result
                future.set_exception(exc)
            else:
                future.set_result(result)
            del future, call

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._ready:
            self._closed = True
            if cancel_futures:
                for _, _, future, _ in self._queue:
                    future.cancel()
                self._queue.clear()
            self._ready.notify_all()
        if wait:
            for thread in self.threads:
                if thread is not threading.current_thread():
                    thread.join()


class InFlight:
    """How many of the readers' requests are under way at once: between `floor` and `ceiling`
    (the readers), as few as keep the writer fed.

    Readers that get ahead of the commits only wait for them, and while they run they take
    turns at the interpreter lock, each turn costing switches: a 1,000,000-transaction sync
    from a service on this machine took 26.0 to 26.8 s and 38 to 39 s of CPU with 4 readers,
    28.3 to 29.4 s and 42 to 44 s with 16 (BENCHMARKS.md, #34). So every `every` pages the
    limit moves by how much of the read-ahead is in use (`ahead`, 0 to 1): down by a quarter
    while more than half is, up by one while less than a fifth is. A service far away (whose
    requests mostly wait) keeps every reader busy; one on loopback needs few."""

    def __init__(
        self, ceiling: int, ahead: Callable[[], float], *, floor: int = 4, every: int = 16
    ) -> None:
        self.ceiling = ceiling
        self.floor = min(floor, ceiling)
        self.limit = ceiling
        self._ahead = ahead
        self._every = every
        self._pages = 0
        self._running = 0
        self._turn = threading.Condition()

    def enter(self, stopped: Callable[[], bool], poll: float) -> bool:
        """Wait for a turn (looking at `stopped` every `poll` seconds): False once stopped."""
        with self._turn:
            while not stopped():
                if self._running < self.limit:
                    self._running += 1
                    return True
                self._turn.wait(poll)
        return False

    def leave(self) -> None:
        with self._turn:
            self._running -= 1
            self._pages += 1
            if self._pages % self._every == 0:
                ahead = self._ahead()
                if ahead > 0.5:
                    self.limit = max(self.floor, self.limit - max(1, self.limit // 4))
                elif ahead < 0.2 and self.limit < self.ceiling:
                    self.limit += 1
                    self._turn.notify()  # the turn just added
            self._turn.notify()  # the turn just ended


def submit_ranked(
    pool: Executor, rank: int, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
) -> Future[Any]:
    """`fn(*args, **kwargs)` on `pool`, before work of lower rank when the pool ranks it."""
    if isinstance(pool, Readers):
        return pool.submit_ranked(rank, fn, *args, **kwargs)
    return pool.submit(fn, *args, **kwargs)
