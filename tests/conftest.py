"""Shared fixtures: sandboxes built once per session (generation is the slow part) and clients."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from paylens import Client, Sandbox
from paylens.sandbox import SandboxServer

SMALL = 3_000


@pytest.fixture(scope="session")
def shared_sandbox() -> Sandbox:
    """A read-only sandbox for tests that only read (never advance or mutate it)."""
    return Sandbox(seed=7, transactions=SMALL)


@pytest.fixture
def sandbox() -> Sandbox:
    """A fresh sandbox a test may change (advance the clock, cancel, inject faults)."""
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
    with Client(server.base_url, sandbox.client_id, sandbox.client_secret, timeout=10) as c:
        yield c


#: Files whose tests start Jupyter kernels: they run on one worker, one kernel at a time (two
#: kernels starting at once on one machine can race for the same ports and restart mid-run).
_KERNELS = ("test_notebooks.py", "test_report.py")


#: The longest groups (measured with --durations), started first so that no worker is left
#: with one of them at the end while the others idle.
_SLOWEST_FIRST = (
    "kernels",
    "tests/test_sync_differential.py",
    "tests/test_warehouse_files.py",
    "tests/test_warehouse_sync.py",
    "tests/test_ops_at_most_once.py",
    "tests/test_ops.py",
)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into the node ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Parallel by file (`-n auto --dist loadgroup`): each file's tests share one worker and
    their module fixtures; every notebook and kernel-starting file shares one worker. Groups
    are handed out in collection order, so the slowest are put first."""
    groups: dict[str, str] = {}
    for item in items:
        # from the item's file, not its node id (nbval's ids differ between pytest versions)
        path = item.path.relative_to(item.config.rootpath).as_posix()
        kernel = path.endswith((".ipynb", *_KERNELS))
        groups[item.nodeid] = group = "kernels" if kernel else path
        item.add_marker(pytest.mark.xdist_group(group))
    rank = {group: i for i, group in enumerate(_SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(groups[item.nodeid], len(rank)))
