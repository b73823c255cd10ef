"""The sandbox's wire layer: auth, version prefix, faults, the loopback server and its CLI."""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import httpx
import pytest

from paylens import Client, Sandbox
from paylens.sandbox import is_sandbox_url
from paylens.sandbox.wire.server import SandboxServer


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


def test_rate_limited_client_still_gets_everything(sandbox: Sandbox) -> None:
    # a burst of 8, then 8 per second, against 15 pages: ~0.9 s of waits, and 429s as long as
    # a page takes under ~60 ms (~15 ms here, idle)
    sandbox.faults.configure(rate_limit=8)
    client = sandbox.client()
    ids = [t.id for t in client.transactions.list(limit=100)]
    assert len(ids) == sandbox.world.transaction_count()
    assert client.stats.retries > 0


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
def test_control_channel_moves_a_served_sandbox(sandbox: Sandbox, server: SandboxServer) -> None:
    control = server.base_url.rsplit("/", 1)[0] + "/_control"
    auth = (sandbox.client_id, sandbox.client_secret)
    assert httpx.post(control + "/advance", json={"seconds": 3600}).status_code == 401
    before = sandbox.now
    answer = httpx.post(control + "/advance", json={"seconds": 86_400}, auth=auth)
    assert answer.status_code == 200 and isinstance(answer.json(), dict)
    assert sandbox.now - before == timedelta(days=1)
    assert httpx.post(control + "/faults", json={"latency": 0.01}, auth=auth).status_code == 200
    assert sandbox.faults.latency == 0.01
    assert httpx.post(control + "/faults", json={"no_such": 1}, auth=auth).status_code == 400
    assert sandbox.requests.count() == 0  # control requests are not service requests
