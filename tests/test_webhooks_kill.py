"""A receiver SIGKILLed at a random moment of a burst loses no event it acknowledged: every id
the poster saw a 2xx for is in the store, each duplicate is stored once, and a receiver started
after it takes the redeliveries (a 409 for what was stored before the kill)."""

from __future__ import annotations

import os
import queue
import random
import signal
import threading
from pathlib import Path

import httpx
import pytest

from paylens.webhooks import EventStore, events_path

from ._receiver import Signer, card_event, start_cli, start_slow_disk

pytestmark = pytest.mark.http

#: Posting threads (each its own keep-alive connection), like the service's parallel deliveries.
POSTERS = 6


def _deliver(
    url: str,
    bodies: dict[str, bytes],
    signer: Signer,
    *,
    kill_after: int | None = None,
    pid: int | None = None,
) -> tuple[set[str], set[str], set[str]]:
    """Post every body (each id once, and every tenth twice) from POSTERS threads; kill `pid`
    once `kill_after` acknowledgements were seen. (acknowledged 2xx, answered 409, unanswered)."""
    work: queue.SimpleQueue[str] = queue.SimpleQueue()
    ids = list(bodies)
    for n, webhook_id in enumerate(ids):
        work.put(webhook_id)
        if n % 10 == 0:
            work.put(webhook_id)  # a redelivery, maybe while the first is in flight
    acked: set[str] = set()
    conflicts: set[str] = set()
    unanswered: set[str] = set()
    lock = threading.Lock()
    killed = threading.Event()

    def post() -> None:
        with httpx.Client(timeout=60) as client:
            while True:
                try:
                    webhook_id = work.get_nowait()
                except queue.Empty:
                    return
                body = bodies[webhook_id]
                try:
                    answer = client.post(url, content=body, headers=signer.headers(body))
                except httpx.TransportError:
                    with lock:
                        unanswered.add(webhook_id)
                    continue
                with lock:
                    if 200 <= answer.status_code < 300:
                        acked.add(webhook_id)
                    elif answer.status_code == 409:
                        conflicts.add(webhook_id)
                    else:
                        raise AssertionError(f"{webhook_id}: {answer.status_code} {answer.text}")
                    if kill_after is not None and len(acked) >= kill_after and not killed.is_set():
                        killed.set()
                        assert pid is not None
                        os.kill(pid, signal.SIGKILL)

    threads = [threading.Thread(target=post) for _ in range(POSTERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return acked, conflicts, unanswered


def _trial(tmp_path: Path, seed: int, events: int, slow_disk: float = 0.0) -> None:
    rng = random.Random(seed)
    signer = Signer()
    db = tmp_path / f"wh{seed}.duckdb"
    key = signer.write_public(tmp_path / f"key{seed}.pem")
    bodies = {f"Webhook:card-{n}": card_event(n) for n in range(events)}
    process, url = start_slow_disk(db, key, slow_disk) if slow_disk else start_cli(db, key)
    kill_after = rng.randrange(1, events)
    try:
        acked, conflicts, unanswered = _deliver(
            url, bodies, signer, kill_after=kill_after, pid=process.pid
        )
    finally:
        process.kill()
        process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL
    assert len(acked) >= kill_after
    with EventStore(events_path(db)) as store:
        stored = [e.webhook_id for e in store.events_after(0, limit=10 * events)]
    assert acked <= set(stored), f"acknowledged, then lost: {sorted(acked - set(stored))[:5]}"
    assert conflicts <= set(stored)
    assert len(stored) == len(set(stored))
    # the service redelivers what it saw no 2xx for, to a receiver started afterwards
    process, url = start_cli(db, key)
    try:
        retried = {i: bodies[i] for i in bodies if i not in acked}
        again, conflicts, unanswered = _deliver(url, retried, signer)
    finally:
        process.terminate()
        process.wait(timeout=60)
    assert unanswered == set()
    assert again | conflicts == set(retried)
    with EventStore(events_path(db)) as store:
        final = store.events_after(0, limit=10 * events)
    assert sorted(e.webhook_id for e in final) == sorted(bodies)  # each once, none lost
    assert all(e.body == bodies[e.webhook_id] for e in final)


@pytest.mark.parametrize("seed", range(3))
def test_a_receiver_killed_during_a_burst_loses_nothing_it_acknowledged(
    tmp_path: Path, seed: int
) -> None:
    _trial(tmp_path, seed, 500)


@pytest.mark.parametrize("seed", range(2))
def test_on_a_slow_disk_too(tmp_path: Path, seed: int) -> None:
    """Commits 20 ms slower: an answer sent before its commit would be lost by the kill."""
    _trial(tmp_path, 10 + seed, 500, slow_disk=0.02)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(20))
def test_a_receiver_killed_during_a_large_burst_loses_nothing_it_acknowledged(
    tmp_path: Path, seed: int
) -> None:
    _trial(tmp_path, 100 + seed, 5_000)
