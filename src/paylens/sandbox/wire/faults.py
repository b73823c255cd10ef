"""Fault injection: latency, 429 storms, 5xx bursts, dropped connections and a rate limit.

Random draws come from a generator seeded by the sandbox seed, so a faulty run repeats; the rate
limit alone follows the real clock, since it is about how fast requests really arrive.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections import deque
from dataclasses import dataclass, field


@dataclass(frozen=True)
class FaultDecision:
    """What the faults make of one request, decided before the service sees it."""

    delay: float = 0.0
    drop: bool = False
    status: int | None = None  # answer this error status instead of serving
    code: str | None = None
    retry_after: float | None = None


@dataclass(frozen=True)
class WebhookFaultDecision:
    """What the faults make of one webhook event (see `wire.webhooks`)."""

    delay: float = 0.0  # seconds before its first post
    duplicate: bool = False  # posted again (same id and body) once answered
    reorder: bool = False  # held back and posted after the next event of its lane
    forge: bool = False  # a copy signed with another key is posted first


@dataclass
class Faults:
    """Fault settings of a sandbox. Change them any time (`sandbox.faults.latency = 0.1`) or
    with `configure(...)`; `clear()` turns every fault off.

    - `latency`: seconds added to every request (plus up to `latency_jitter` more).
    - `rate_429`: fraction of requests answered 429 `RATE_LIMITED` with `Retry-After: retry_after`.
    - `burst_5xx(n)`: the next n requests answer 500 `INTERNAL_ERROR`, 502, 503 in turn (the
      gateway statuses with a non-JSON body, as a proxy in front of a service would).
    - `inject(status, code, count)`: the next requests answer that error (any status and code);
      with `path=`, the next requests whose path ends so (`"/transactions/<id>/cancel"`),
      whatever other requests come first.
    - `drop_rate` / `drop_next(n, path=...)`: connections closed without an answer.
    - `rate_limit`: requests per second (token bucket, burst of one second's worth); past it,
      429 `RATE_LIMITED` with the `Retry-After` until the next token.
    - `corrupt_ids`: records served with a malformed amount (a float), wherever they appear,
      as a buggy service version might send them.

    Webhooks (the sandbox's posts to the platform, see `wire.webhooks`), per event:
    - `webhook_delay`: seconds before an event's first post.
    - `webhook_duplicate`, `webhook_reorder`, `webhook_forge`: fractions of events posted twice
      (same id), held back behind the next event of their lane, or preceded by a copy signed
      with another key.
    - `webhook_next(count, duplicate=..., reorder=..., forge=..., delay=...)`: the next `count`
      events get exactly these faults (before any drawn by the fractions).
    """

    latency: float = 0.0
    latency_jitter: float = 0.0
    rate_429: float = 0.0
    retry_after: float = 1.0
    drop_rate: float = 0.0
    rate_limit: float | None = None
    seed: int = 0
    corrupt_ids: set[str] = field(default_factory=set)
    webhook_delay: float = 0.0
    webhook_duplicate: float = 0.0
    webhook_reorder: float = 0.0
    webhook_forge: float = 0.0
    _webhook_script: deque[WebhookFaultDecision] = field(default_factory=deque, repr=False)
    #: scripted decisions, each for the next request whose path ends with its suffix ("": any)
    _script: deque[tuple[str, FaultDecision]] = field(default_factory=deque, repr=False)
    _rng: random.Random = field(init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _tokens: float = field(default=float("inf"), repr=False)
    _refilled: float = field(default_factory=time.monotonic, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def configure(self, **settings: float | None) -> Faults:
        for name, value in settings.items():
            if name.startswith("_") or not hasattr(self, name):
                raise TypeError(f"unknown fault setting {name!r}")
            setattr(self, name, value)
        return self

    def clear(self) -> None:
        self.latency = self.latency_jitter = self.rate_429 = self.drop_rate = 0.0
        self.rate_limit = None
        self.corrupt_ids = set()
        self.webhook_delay = self.webhook_duplicate = self.webhook_reorder = 0.0
        self.webhook_forge = 0.0
        with self._lock:
            self._script.clear()
            self._webhook_script.clear()

    def inject(
        self,
        status: int,
        code: str | None,
        count: int = 1,
        *,
        retry_after: float | None = None,
        path: str = "",
    ) -> None:
        """Answer the next `count` requests (whose path ends with `path`) with this error
        (code None: a non-JSON body)."""
        decision = FaultDecision(status=status, code=code, retry_after=retry_after)
        with self._lock:
            self._script.extend([(path, decision)] * count)

    def burst_5xx(self, count: int) -> None:
        with self._lock:
            for i in range(count):
                status = (500, 502, 503)[i % 3]
                self._script.append(
                    (
                        "",
                        FaultDecision(
                            status=status, code="INTERNAL_ERROR" if status == 500 else None
                        ),
                    )
                )

    def drop_next(self, count: int, *, path: str = "") -> None:
        """Close the next `count` connections (of requests whose path ends with `path`)."""
        with self._lock:
            self._script.extend([(path, FaultDecision(drop=True))] * count)

    def decide(self, path: str = "") -> FaultDecision:
        """What the faults make of the next request, to `path`."""
        with self._lock:
            delay = self.latency + (
                self._rng.random() * self.latency_jitter if self.latency_jitter else 0.0
            )
            scripted = self._scripted(path)
            if scripted is not None:
                return FaultDecision(
                    delay, scripted.drop, scripted.status, scripted.code, scripted.retry_after
                )
            if self.drop_rate and self._rng.random() < self.drop_rate:
                return FaultDecision(delay=delay, drop=True)
            wait = self._take_token()
            if wait is not None:
                return FaultDecision(delay=delay, status=429, code="RATE_LIMITED", retry_after=wait)
            if self.rate_429 and self._rng.random() < self.rate_429:
                return FaultDecision(
                    delay=delay, status=429, code="RATE_LIMITED", retry_after=self.retry_after
                )
            return FaultDecision(delay=delay)

    def webhook_next(
        self,
        count: int = 1,
        *,
        duplicate: bool = False,
        reorder: bool = False,
        forge: bool = False,
        delay: float = 0.0,
    ) -> None:
        """Give the next `count` webhook events exactly these faults."""
        decision = WebhookFaultDecision(delay, duplicate, reorder, forge)
        with self._lock:
            self._webhook_script.extend([decision] * count)

    def decide_webhook(self) -> WebhookFaultDecision:
        """What the faults make of the next webhook event."""
        with self._lock:
            if self._webhook_script:
                return self._webhook_script.popleft()
            draws = [
                bool(rate) and self._rng.random() < rate
                for rate in (self.webhook_duplicate, self.webhook_reorder, self.webhook_forge)
            ]
            return WebhookFaultDecision(self.webhook_delay, *draws)

    def _scripted(self, path: str) -> FaultDecision | None:
        """The first scripted decision for `path` (taken off the script), if any."""
        for i, (suffix, decision) in enumerate(self._script):
            if path.endswith(suffix):
                del self._script[i]
                return decision
        return None

    def _take_token(self) -> float | None:
        """None when a token was taken; else seconds until the next one."""
        if not self.rate_limit:
            return None
        now = time.monotonic()
        capacity = max(1.0, self.rate_limit)
        self._tokens = min(capacity, self._tokens + (now - self._refilled) * self.rate_limit)
        self._refilled = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return None
        return math.ceil((1.0 - self._tokens) / self.rate_limit * 1000) / 1000


def corrupt(value: object, ids: set[str]) -> object:
    """The answer with the records of `ids` (top level or in `data`) given a float amount."""
    if not ids or not isinstance(value, dict):
        return value
    if "data" in value and isinstance(value["data"], list):
        return {**value, "data": [corrupt(item, ids) for item in value["data"]]}
    if value.get("id") in ids:
        for key in ("sentAmount", "receivedAmount", "authorizedAmount", "balance"):
            if isinstance(value.get(key), dict):
                return {**value, key: {**value[key], "amount": value[key]["amount"] + 0.5}}
    return value
