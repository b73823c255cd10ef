"""Shared fixtures: sandboxes built once per session (generation is the slow part) and clients."""

from __future__ import annotations

import gc
import itertools
import os
import socket
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from jupyter_client.connect import LocalPortCache

if TYPE_CHECKING:  # imported where used: xdist's controller, which runs no test, never loads them
    from paylens import Client, Sandbox
    from paylens.sandbox import SandboxServer

SMALL = 3_000


@pytest.fixture(scope="session")
def shared_sandbox() -> Sandbox:
    """A read-only sandbox for tests that only read (never advance or mutate it)."""
    from paylens import Sandbox

    return Sandbox(seed=7, transactions=SMALL)


@pytest.fixture
def sandbox() -> Sandbox:
    """A fresh sandbox a test may change (advance the clock, cancel, inject faults)."""
    from paylens import Sandbox

    return Sandbox(seed=11, transactions=1_500)


@pytest.fixture
def recorded_sleeps() -> list[float]:
    return []


@pytest.fixture
def client(sandbox: Sandbox, recorded_sleeps: list[float]) -> Iterator[Client]:
    """In-process client of `sandbox` whose retry waits are recorded instead of slept."""
    with sandbox.client(sleep=recorded_sleeps.append) as c:
        yield c


@pytest.fixture
def server(sandbox: Sandbox) -> Iterator[SandboxServer]:
    with sandbox.serve() as s:
        yield s


@pytest.fixture
def http_client(sandbox: Sandbox, server: SandboxServer) -> Iterator[Client]:
    """A client of `sandbox` over real HTTP on loopback."""
    from paylens import Client

    with Client(server.base_url, sandbox.client_id, sandbox.client_secret, timeout=10) as c:
        yield c


#: Jupyter kernels' ports, per xdist worker: a block of its own below the machine's ephemeral
#: range (32768-60999 on Linux), which `bind(0)` and outgoing connections draw from. The stock
#: choice (bind to port 0, close, hand the port to the kernel) can lose the port to another
#: worker's kernel or connection before the kernel binds it; from disjoint blocks outside that
#: range, kernels on several workers start at once without racing.
_KERNEL_PORTS_FROM, _KERNEL_PORTS_PER_WORKER = 20_000, 500  # room for 25 workers


def _worker_index() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")  # gw0, gw1, ...; "master" if -n 0
    return int(worker[2:]) if worker[2:].isdigit() else 0


def _kernel_ports() -> Iterator[int]:
    first = _KERNEL_PORTS_FROM + _KERNEL_PORTS_PER_WORKER * (_worker_index() % 25)
    return itertools.cycle(range(first, first + _KERNEL_PORTS_PER_WORKER))


_PORTS = _kernel_ports()


def _find_available_port(cache: LocalPortCache, ip: str) -> int:
    """`LocalPortCache.find_available_port` drawing from this worker's block: the next port
    that is free now and not handed to a kernel of this process already."""
    for _ in range(_KERNEL_PORTS_PER_WORKER):
        port = next(_PORTS)
        if port in cache.currently_used_ports:
            continue
        with socket.socket() as probe:
            try:
                probe.bind((ip, port))
            except OSError:
                continue
        cache.currently_used_ports.add(port)
        return port
    raise RuntimeError("no free port left in this worker's block for a kernel")


LocalPortCache.find_available_port = _find_available_port  # type: ignore[method-assign]


#: Files parallel by test, not by file: their tests share no module fixture, and the file alone
#: would keep one worker busy long after the others are done.
_BY_TEST = ("tests/test_sync_differential.py",)


#: The longest groups (their wall time on a worker, measured with --durations on 2 workers),
#: started first so that no worker is left with one of them at the end while the others idle.
_SLOWEST_FIRST = (
    "tests/test_report.py",  # ~19 s
    "tests/test_warehouse_sync.py",  # ~18 s
    "tests/test_ops_at_most_once.py",  # ~16 s
    "tests/test_analysis_recompute.py",  # ~11 s
    "tests/test_warehouse_files.py",  # ~11 s
    "tests/test_ops.py",  # ~10 s
    "tests/test_notebooks.py",  # ~9 s
    "tests/test_sandbox_conformance.py",  # ~9 s
    "tests/test_sync_resources.py",  # ~8 s
    "notebooks/report.ipynb",  # ~7 s
    "tests/test_cli.py",  # ~6 s
    "notebooks/01_fees.ipynb",  # ~6 s
    "tests/test_analysis_plots.py",  # ~5.5 s
    "tests/test_sandbox_contract.py",  # ~5 s
)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into the node ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Parallel by file (`-n auto --dist loadgroup`): each file's tests share one worker and
    their module fixtures (a notebook's cells, one kernel); the files of `_BY_TEST` are spread
    test by test. Groups are handed out in collection order (`--no-loadscope-reorder`), so
    the slowest are put first."""
    groups: dict[str, str] = {}
    items_by_file: set[str] = set()
    for item in items:
        # from the item's file, not its node id (nbval's ids differ between pytest versions)
        path = item.path.relative_to(item.config.rootpath).as_posix()
        groups[item.nodeid] = group = item.nodeid if path in _BY_TEST else path
        if group == path:
            items_by_file.add(path)
        item.add_marker(pytest.mark.xdist_group(group))
    # slowest first; then the other files; last the tests spread one by one, short units that
    # fill whatever time the workers have left
    rank = {group: i for i, group in enumerate(_SLOWEST_FIRST)}
    later = {group: len(rank) + (group not in items_by_file) for group in set(groups.values())}
    items.sort(key=lambda item: rank.get(groups[item.nodeid], later[groups[item.nodeid]]))


def _freeze_what_lives_on() -> None:
    """Everything imported and collected so far lives until the end: moved out of the cyclic
    garbage collector's sight (`gc.freeze`), so each full collection during the tests walks
    what the tests build, not every module of pandas, pyarrow and matplotlib again (the
    full collections took ~10 % of a worker's CPU)."""
    gc.collect()
    gc.freeze()


def pytest_sessionstart(session: pytest.Session) -> None:
    _freeze_what_lives_on()  # xdist's controller collects nothing: its imports, here


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    _freeze_what_lives_on()  # a worker (or -n 0): the test modules too
