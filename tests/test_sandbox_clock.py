"""The sandbox clock: fixed by default (reproducible), or following the wall clock with its
history ending now; jumps ahead in-process, through the control route and with
`paylens sandbox advance --hours N`. The wall clock here is a fake one moved by the test."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest

from paylens import Client, Sandbox
from paylens.errors import ConfigurationError, InvalidArgumentError
from paylens.sandbox import advance_served
from paylens.sandbox.clock import from_us
from paylens.sandbox.generate.schema import OUTGOING, STATUS_CODE
from paylens.sandbox.world.world import DEFAULT_END, World

from ._helpers import run_cli


class FakeWall:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


START = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)


def _settling_within(world: World, delta: timedelta) -> str:
    """An outgoing transfer PENDING or PROCESSING now whose plan completes within `delta`."""
    s = world.store
    now = world.now_us
    horizon = now + delta // timedelta(microseconds=1)
    for row in range(s.n - 1, -1, -1):
        if (
            s.col("kind")[row] == OUTGOING
            and s.col("status")[row] in (STATUS_CODE["PENDING"], STATUS_CODE["PROCESSING"])
            and s.col("final")[row] == STATUS_CODE["COMPLETED"]
            and now < s.col("t2")[row] <= horizon
        ):
            return world.tx.transactions([row], now)[0]["id"]
    raise AssertionError("no transfer settles in that time")


def test_the_default_clock_is_fixed() -> None:
    sandbox = Sandbox(seed=1, transactions=300)
    client = sandbox.client()
    client.config.get()
    assert sandbox.now == DEFAULT_END
    sandbox.advance(timedelta(hours=2))
    assert sandbox.now == DEFAULT_END + timedelta(hours=2)


def test_a_wall_clock_sandbox_ends_its_history_now_and_follows_the_wall() -> None:
    wall = FakeWall(START)
    sandbox = Sandbox(seed=1, transactions=3_000, clock=wall)
    assert sandbox.now == START
    newest = max(t["createdAt"] for t in sandbox.world.all_transactions())
    assert START - timedelta(days=1) < datetime.fromisoformat(newest) <= START
    transfer = _settling_within(sandbox.world, timedelta(days=3))
    client = sandbox.client()
    assert client.transactions.get(transfer).status in ("PENDING", "PROCESSING")
    wall.at = START + timedelta(days=3)
    assert client.transactions.get(transfer).status == "COMPLETED"  # the request caught up
    assert sandbox.now == wall.at


def test_a_jump_ahead_stays_ahead_of_the_wall() -> None:
    wall = FakeWall(START)
    sandbox = Sandbox(seed=1, transactions=300, clock=wall)
    sandbox.advance(timedelta(hours=5))
    assert sandbox.now == START + timedelta(hours=5)
    wall.at = START + timedelta(minutes=30)
    sandbox.client().config.get()
    assert sandbox.now == START + timedelta(hours=5, minutes=30)


def test_the_real_wall_clock_ends_the_history_now() -> None:
    sandbox = Sandbox(seed=1, transactions=300, clock="wall")
    assert abs(sandbox.now - datetime.now(UTC)) < timedelta(minutes=1)
    with pytest.raises(ValueError, match="clock: must be one of"):
        Sandbox(seed=1, transactions=300, clock="sundial")


@pytest.mark.http
def test_paylens_sandbox_advance_settles_a_pending_transfer() -> None:
    wall = FakeWall(START)
    sandbox = Sandbox(seed=2, transactions=3_000, clock=wall)
    transfer = _settling_within(sandbox.world, timedelta(hours=48))
    with sandbox.serve() as server:
        env = sandbox.env(server)
        with Client.from_env(env) as client:
            assert client.transactions.get(transfer).status in ("PENDING", "PROCESSING")
            done = run_cli("sandbox", "advance", "--hours", "48", env=env)
            assert done.returncode == 0, done.stderr
            assert "completed=" in done.stdout
            assert client.transactions.get(transfer).status == "COMPLETED"
    assert sandbox.now == START + timedelta(hours=48)


@pytest.mark.http
def test_the_control_route_checks_what_it_is_asked() -> None:
    sandbox = Sandbox(seed=1, transactions=300)
    with sandbox.serve() as server:
        env = sandbox.env(server)
        control = server.base_url + "/_control/advance"
        auth = (sandbox.client_id, sandbox.client_secret)
        for seconds in (-1, 10**9, "soon"):
            answer = httpx.post(control, json={"seconds": seconds}, auth=auth)
            assert answer.status_code == 400, seconds
        with pytest.raises(ConfigurationError, match="refused"):
            advance_served(timedelta(hours=1), {**env, "PAYLENS_CLIENT_SECRET": "wrong"})
        with pytest.raises(InvalidArgumentError):
            advance_served(timedelta(hours=-1), env)
        assert advance_served(timedelta(hours=1), env)["created"] >= 0
    assert sandbox.now == DEFAULT_END + timedelta(hours=1)
    with pytest.raises(ConfigurationError, match="PAYLENS_BASE_URL"):
        advance_served(timedelta(hours=1), {})
    assert from_us(sandbox.world.now_us) == sandbox.now
