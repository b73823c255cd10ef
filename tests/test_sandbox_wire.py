"""The sandbox's wire layer: auth, version prefix, faults, the loopback server and its CLI."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
import types
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime

import httpx
import pytest

from paylens import Client, Sandbox
from paylens.errors import APIConnectionError, InvalidArgumentError, NotFoundError
from paylens.sandbox import is_sandbox_url
from paylens.sandbox.wire.server import SandboxServer

from ._helpers import run_cli


@pytest.mark.http
def test_server_answers_basic_auth_only(sandbox: Sandbox, server: SandboxServer) -> None:
    url = server.base_url + "/config"
    assert httpx.get(url).status_code == 401
    body = httpx.get(url, auth=("sandbox-platform", "nope")).json()
    assert body == {"status": 401, "code": "UNAUTHORIZED", "message": body["message"]}
    ok = httpx.get(url, auth=(sandbox.client_id, sandbox.client_secret))
    assert ok.status_code == 200
    assert ok.headers["x-paylens-sandbox"] == "true"
    assert (
        httpx.get(
            server.base_url.rsplit("/", 1)[0] + "/1999-01-01/config",
            auth=(sandbox.client_id, sandbox.client_secret),
        ).status_code
        == 404
    )


@pytest.mark.http
def test_server_handles_many_concurrent_connections(
    sandbox: Sandbox, server: SandboxServer
) -> None:
    sandbox.faults.configure(latency=0.2)
    clients = [Client(server.base_url, sandbox.client_id, sandbox.client_secret) for _ in range(4)]
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=48) as pool:
        results = list(pool.map(lambda i: clients[i % 4].config.get(), range(48)))
    elapsed = time.monotonic() - started
    assert len(results) == 48
    assert elapsed < 48 * 0.2 / 4  # overlapping, not one after another
    assert sandbox.requests.count("GET", "/config") == 48


def test_latency_is_applied_in_process(sandbox: Sandbox) -> None:
    slept: list[float] = []
    from paylens.sandbox.wire.transport import SandboxTransport

    sandbox.faults.configure(latency=0.1)
    client = Client(
        "https://sandbox.paylens.invalid/2025-10-13",
        sandbox.client_id,
        sandbox.client_secret,
        transport=SandboxTransport(sandbox.app, sleep=slept.append),
    )
    client.config.get()
    assert slept == [0.1]


def test_rate_limit_answers_429_past_the_budget(sandbox: Sandbox) -> None:
    sandbox.faults.configure(rate_limit=5)
    raw = httpx.Client(
        transport=sandbox.client()._http._transport, auth=(sandbox.client_id, sandbox.client_secret)
    )
    statuses = [
        raw.get("https://sandbox.paylens.invalid/2025-10-13/config").status_code for _ in range(20)
    ]
    assert statuses[:5] == [200] * 5
    assert 429 in statuses[5:]
    limited = raw.get("https://sandbox.paylens.invalid/2025-10-13/config")
    if limited.status_code == 429:
        assert float(limited.headers["retry-after"]) > 0
        assert limited.json()["code"] == "RATE_LIMITED"


def test_rate_limited_client_still_gets_everything(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A burst of 8, then 8 per second, against 15 pages. The rate limit follows the real
    clock; here it follows one that moves only when the client waits, so its 429s come
    whatever the machine's load (a page taking over ~60 ms of real time would dodge them)."""
    from paylens.sandbox.wire import faults

    now = [time.monotonic()]
    monkeypatch.setattr(faults, "time", types.SimpleNamespace(monotonic=lambda: now[0]))
    sandbox.faults.configure(rate_limit=8)
    client = sandbox.client(sleep=lambda seconds: now.__setitem__(0, now[0] + seconds))
    ids = [t.id for t in client.transactions.list(limit=100)]
    assert len(ids) == len(set(ids)) == sandbox.world.transaction_count()
    assert client.stats.retries >= 7  # 15 pages, 8 tokens: the 7 past the burst each waited


def test_random_faults_are_deterministic_from_the_seed() -> None:
    def run() -> list[int]:
        sb = Sandbox(seed=3, transactions=200)
        sb.faults.configure(rate_429=0.3, retry_after=0)
        client = sb.client(sleep=lambda s: None)
        for _ in range(10):
            client.config.get()
        return [status for _, _, status in sb.requests.entries]

    assert run() == run()
    assert 429 in run()


def test_sandbox_urls_are_labelled() -> None:
    assert is_sandbox_url("https://sandbox.paylens.invalid/2025-10-13")
    assert is_sandbox_url("http://127.0.0.1:8765/sandbox/2025-10-13")
    assert not is_sandbox_url("https://api.example.com/2025-10-13")


@pytest.mark.http
def test_cli_serve_prints_lines_ready_to_export() -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "paylens.cli",
            "sandbox",
            "serve",
            "--port",
            "0",
            "--seed",
            "1",
            "--transactions",
            "500",
            "--clock",
            "fixed",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        env = {}
        for _ in range(3):
            name, _, value = proc.stdout.readline().strip().partition("=")
            env[name] = value
        assert set(env) == {"PAYLENS_BASE_URL", "PAYLENS_CLIENT_ID", "PAYLENS_CLIENT_SECRET"}
        with Client.from_env(env) as client:
            assert len(list(client.transactions.list())) == 500
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.http
def test_cli_serve_follows_the_wall_clock_and_takes_a_profile() -> None:
    """README: `paylens sandbox serve ... [--profile remittance]`; it follows the *wall clock*
    by default: the history ends now."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "paylens.cli", "sandbox", "serve", "--port", "0",
         "--transactions", "300", "--profile", "remittance"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        env = dict(proc.stdout.readline().strip().partition("=")[::2] for _ in range(3))
        assert set(env) == {"PAYLENS_BASE_URL", "PAYLENS_CLIENT_ID", "PAYLENS_CLIENT_SECRET"}
        with Client.from_env(env) as client:
            served_now = _wire_date(client)
            assert abs(served_now - datetime.now(UTC)) < timedelta(minutes=1)
            newest = max(t.created_at for t in client.transactions.list())
            assert timedelta(0) <= served_now - newest < timedelta(days=1)
            assert sum(1 for _ in client.customers.list(include_deleted=True)) == 300
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _wire_date(client: Client) -> datetime:
    answer = client._http.get("config")
    assert answer.status_code == 200
    return parsedate_to_datetime(answer.headers["Date"])


def test_every_answer_carries_the_sandbox_clock_in_its_date_header() -> None:
    """README: "Every answer carries the sandbox's clock in its `Date` header"."""
    sandbox = Sandbox(seed=2, transactions=200)
    with sandbox.client() as client:
        assert _wire_date(client) == sandbox.now == datetime(2025, 10, 13, tzinfo=UTC)
        sandbox.advance(timedelta(hours=6))
        assert _wire_date(client) == datetime(2025, 10, 13, 6, tzinfo=UTC)


@pytest.mark.http
def test_the_sandbox_is_served_on_loopback_only() -> None:
    """README (`sandbox.serve(port=0)`: "real HTTP on loopback") and `paylens sandbox serve
    --help` (`--host`: "loopback address to listen on"): an address that is not loopback is
    refused, never listened on; the CLI says so in one line, exit 2, before generating."""
    sandbox = Sandbox(seed=0, transactions=100)
    for host in ("0.0.0.0", "::", "192.168.1.10", "example.com", ""):
        with pytest.raises(InvalidArgumentError, match="must be a loopback address"):
            sandbox.serve(host=host)
    for host in ("127.0.0.1", "127.0.0.2", "localhost"):
        with (
            sandbox.serve(host=host) as server,
            Client(server.base_url, sandbox.client_id, sandbox.client_secret) as client,
        ):
            assert client.config.get() is not None
    if socket.has_ipv6:
        with contextlib.suppress(OSError), sandbox.serve(host="::1") as server:  # no IPv6 here
            assert server.base_url.startswith("http://[::1]:")
            with Client(server.base_url, sandbox.client_id, sandbox.client_secret) as client:
                assert client.config.get() is not None
    refused = run_cli("sandbox", "serve", "--host", "0.0.0.0", "--port", "0")
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.strip().count("\n") == 0
    assert refused.stderr.startswith("paylens sandbox serve: host: must be a loopback address")


@pytest.mark.http
def test_control_channel_moves_a_served_sandbox(sandbox: Sandbox, server: SandboxServer) -> None:
    control = server.base_url.rsplit("/", 1)[0] + "/_control"
    auth = (sandbox.client_id, sandbox.client_secret)
    assert httpx.post(control + "/advance", json={"seconds": 3600}).status_code == 401
    before, statuses = sandbox.now, {t["id"]: t["status"] for t in sandbox.world.all_transactions()}
    answer = httpx.post(control + "/advance", json={"seconds": 21_600}, auth=auth)
    assert answer.status_code == 200
    assert sandbox.now - before == timedelta(hours=6)
    # README: it "answers the counts of what changed (`created`, `completed`, ...)"
    counts, after = answer.json(), {t["id"]: t["status"] for t in sandbox.world.all_transactions()}
    new = set(after) - set(statuses)
    turned_completed = sum(
        1 for i, s in statuses.items() if s != "COMPLETED" and after[i] == "COMPLETED"
    )
    new_completed = sum(1 for i in new if after[i] == "COMPLETED")
    assert counts["created"] == len(new) > 0
    assert 0 < turned_completed <= counts["completed"] <= turned_completed + new_completed
    assert httpx.post(control + "/faults", json={"latency": 0.01}, auth=auth).status_code == 200
    assert sandbox.faults.latency == 0.01
    assert httpx.post(control + "/faults", json={"no_such": 1}, auth=auth).status_code == 400
    assert sandbox.requests.count() == 0  # control requests are not service requests


def test_a_fault_for_a_path_waits_for_a_request_to_that_path() -> None:
    """`inject(..., path=)` and `drop_next(..., path=)` answer the next request whose path
    ends so, whatever other requests come first; the others are served."""
    sandbox = Sandbox(seed=1, transactions=300)
    client = sandbox.client(max_retries=0)
    first = next(iter(client.transactions.list(limit=1)))
    sandbox.faults.inject(404, "TRANSACTION_NOT_FOUND", path="/config")
    sandbox.faults.drop_next(1, path=f"/transactions/{first.id}")
    assert next(iter(client.transactions.list(limit=1))).id == first.id  # another path: served
    with pytest.raises(APIConnectionError):
        client.transactions.get(first.id)
    assert client.transactions.get(first.id).id == first.id  # the drop was taken once
    with pytest.raises(NotFoundError):
        client.config.get_id()
    assert client.config.get_id() is not None
    assert [(m, p.rsplit("/", 1)[-1], s) for m, p, s in sandbox.requests.entries] == [
        ("GET", "transactions", 200),
        ("GET", "transactions", 200),
        ("GET", first.id, 0),
        ("GET", first.id, 200),
        ("GET", "config", 404),
        ("GET", "config", 200),
    ]
