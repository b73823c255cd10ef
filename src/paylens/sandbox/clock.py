"""The sandbox clock: fixed (moves only on command) or following the wall clock.

- `fixed` (the default of `Sandbox`, so tests and notebooks are reproducible): the world's
  history ends at its `end` (2025-10-13T00:00:00Z unless given) and the clock moves only with
  `Sandbox.advance` or the control route.
- `wall` (the default of `paylens sandbox serve`): the history ends *now*, and before each
  request the world catches up with the wall clock, so settlements, expiries, approval deadlines
  and cancellation windows pass while a client polls. A jump ahead (`Sandbox.advance`, the
  control route, `paylens sandbox advance --hours N`) adds to an offset the clock keeps from
  then on: the sandbox runs ahead of the wall clock, never behind it.

The control route is paylens' own, not the service's: `POST {base_url}/_control/advance` with
body `{"seconds": N}` and the platform's credentials (HTTP Basic) moves a served sandbox's clock
and answers the counts of what changed (`created`, and per status reached, e.g. `completed`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from paylens.errors import InvalidArgumentError

WallClock = Callable[[], datetime]
CLOCK_MODES = ("fixed", "wall")


def utc_now() -> datetime:
    return datetime.now(UTC)


class Clock:
    """When the world should be: `None` for a fixed clock, else the wall clock plus the jumps."""

    def __init__(self, mode: str | WallClock = "fixed") -> None:
        if callable(mode):
            self.wall: WallClock | None = mode
        elif mode == "wall":
            self.wall = utc_now
        elif mode == "fixed":
            self.wall = None
        else:
            raise InvalidArgumentError(
                "clock", f"must be one of {', '.join(CLOCK_MODES)} or a callable; got {mode!r}"
            )
        self.offset = timedelta(0)

    @property
    def follows_wall(self) -> bool:
        return self.wall is not None

    def now(self) -> datetime | None:
        """Where the clock should be now (None: fixed, it moves only on command)."""
        if self.wall is None:
            return None
        moment = self.wall()
        if moment.tzinfo is None:
            raise InvalidArgumentError("clock", "the wall clock must give tz-aware times")
        return moment + self.offset

    def jumped(self, delta: timedelta) -> None:
        """The clock was moved ahead by `delta` on command."""
        if self.wall is not None:
            self.offset += delta


def advance_served(
    delta: timedelta, env: Mapping[str, str] | None = None, *, timeout: float = 60.0
) -> dict[str, Any]:
    """Move the clock of a served sandbox ahead by `delta` through its control route, with the
    `PAYLENS_BASE_URL`, `PAYLENS_CLIENT_ID` and `PAYLENS_CLIENT_SECRET` of `env` (default: the
    process environment). Returns the counts of what changed."""
    import httpx

    from paylens.errors import ConfigurationError, InvalidArgumentError

    env = os.environ if env is None else env
    missing = [
        name
        for name in ("PAYLENS_BASE_URL", "PAYLENS_CLIENT_ID", "PAYLENS_CLIENT_SECRET")
        if not env.get(name)
    ]
    if missing:
        raise ConfigurationError(f"set {', '.join(missing)} (as `paylens sandbox serve` prints)")
    if delta < timedelta(0):
        raise InvalidArgumentError("delta", "the sandbox clock only moves forward")
    answer = httpx.post(
        env["PAYLENS_BASE_URL"].rstrip("/") + "/_control/advance",
        json={"seconds": delta.total_seconds()},
        auth=(env["PAYLENS_CLIENT_ID"], env["PAYLENS_CLIENT_SECRET"]),
        timeout=timeout,
    )
    if answer.status_code != 200:
        raise ConfigurationError(
            f"the sandbox at {env['PAYLENS_BASE_URL']} refused to advance: "
            f"{answer.status_code} {answer.text[:200]}"
        )
    result: dict[str, Any] = answer.json()
    return result


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_us(moment: datetime) -> int:
    """Microseconds since the epoch of a tz-aware moment (the world's time unit)."""
    if moment.tzinfo is None:
        raise InvalidArgumentError("moment", f"{moment!r} has no time zone")
    return (moment - EPOCH) // timedelta(microseconds=1)


def from_us(us: int) -> datetime:
    return EPOCH + timedelta(microseconds=us)


def whole_ms(us: int) -> int:
    """`us` cut to whole milliseconds (the interface's timestamps)."""
    return us // 1000 * 1000
