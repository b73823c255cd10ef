"""The sandbox's one request core, behind both ways in (in-process transport and loopback
server): faults, HTTP Basic auth, the version prefix, JSON in and out, error bodies (§7), and a
log of what was asked, so tests can count the requests the service received."""

from __future__ import annotations

import base64
import hmac
import logging
import threading
from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from email.utils import format_datetime
from typing import Any
from urllib.parse import parse_qs, unquote

import orjson

from ..clock import Clock
from ..errors import ServiceError
from ..routes import dispatch
from ..routes.registry import NOT_SERVED
from ..world.world import World
from .faults import Faults, corrupt

logger = logging.getLogger("paylens.sandbox")

_JSON = [("content-type", "application/json")]
#: The longest jump the control route makes at once (a year): generating more is minutes of work.
_MAX_JUMP_S = 366 * 86_400
_SANDBOX_HEADER = ("x-paylens-sandbox", "true")


@dataclass(frozen=True)
class Reply:
    """What to answer: status, headers, body, and the faults' delay or dropped connection."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes
    delay: float = 0.0
    drop: bool = False


@dataclass
class RequestLog:
    """Every request the sandbox received: `count(...)` answers "how many reached the service"."""

    entries: deque[tuple[str, str, int]] = field(default_factory=lambda: deque(maxlen=200_000))
    by_route: Counter[tuple[str, str]] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, method: str, path: str, status: int) -> None:
        with self._lock:
            self.entries.append((method, path, status))
            self.by_route[(method, path)] += 1

    def count(
        self,
        method: str | None = None,
        path: str | None = None,
        *,
        prefix: str | None = None,
        suffix: str | None = None,
    ) -> int:
        """Requests received (answered or not), narrowed by method, exact path, or path
        prefix/suffix; paths are relative to the version root, e.g. "/transactions"."""
        with self._lock:
            return sum(
                n
                for (m, p), n in self.by_route.items()
                if (method is None or m == method)
                and (path is None or p == path)
                and (prefix is None or p.startswith(prefix))
                and (suffix is None or p.endswith(suffix))
            )

    def reset(self) -> None:
        with self._lock:
            self.entries.clear()
            self.by_route.clear()


def error_body(
    status: int, code: str, message: str, details: dict[str, Any] | None = None
) -> bytes:
    body: dict[str, Any] = {"status": status, "code": code, "message": message}
    if details:
        body["details"] = details
    return orjson.dumps(body)


class SandboxApp:
    """Answers one HTTP request of the interface from a `World`."""

    def __init__(
        self,
        world: World,
        faults: Faults,
        client_id: str,
        client_secret: str,
        version: str,
        clock: Clock | None = None,
    ) -> None:
        self.world = world
        self.faults = faults
        self.clock = clock or Clock("fixed")
        self.log = RequestLog()
        self.version = version
        self._expected_auth = (
            "Basic " + base64.b64encode(f"{client_id}:{client_secret}".encode()).decode()
        )
        self._lock = threading.RLock()

    @property
    def lock(self) -> threading.RLock:
        """Held while the world serves a request; hold it to change the world from outside."""
        return self._lock

    def catch_up(self) -> None:
        """Bring a wall-clock world up to the clock (a fixed clock moves only on command)."""
        target = self.clock.now()
        if target is None:
            return
        with self._lock:
            behind = target - self.world.now
            if behind > timedelta(0):
                self.world.advance(behind)

    def advance(self, delta: timedelta) -> dict[str, int]:
        """Move the clock ahead by `delta` on command: what is due happens, new activity arrives."""
        with self._lock:
            self.catch_up()
            self.clock.jumped(delta)
            return self.world.advance(delta)

    def handle(self, method: str, target: str, headers: Mapping[str, str], body: bytes) -> Reply:
        """`target` is the request's path and query as sent; `headers` have lower-case names."""
        raw_path, _, query = target.partition("?")
        if "/_control/" in raw_path:
            return self._control(method, raw_path.rsplit("/_control/", 1)[1], headers, body)
        path = self._route_path(unquote(raw_path))
        fault = self.faults.decide(path or raw_path)
        if fault.drop:
            self.log.record(method, path or raw_path, 0)
            return Reply(0, [], b"", delay=fault.delay, drop=True)
        reply = self._answer(
            method, path, query, headers, body, fault.status, fault.code, fault.retry_after
        )
        self.log.record(method, path or raw_path, reply.status)
        # the service's clock, as an HTTP server says it (clients age what they read by it)
        dated = [*reply.headers, ("date", format_datetime(self.world.now, usegmt=True))]
        return Reply(reply.status, dated, reply.body, delay=fault.delay)

    def _control(self, method: str, action: str, headers: Mapping[str, str], body: bytes) -> Reply:
        """The sandbox's own control channel (not part of the service): move the clock, set
        faults or read the request count of a served sandbox from another process. Same
        credentials; no faults, not logged."""
        if not hmac.compare_digest(headers.get("authorization", ""), self._expected_auth):
            return _error(
                401, "UNAUTHORIZED", "missing or invalid platform credentials (HTTP Basic)"
            )
        try:
            payload = orjson.loads(body) if body.strip() else {}
            if (method, action) == ("POST", "advance"):
                seconds = float(payload["seconds"])
                if not 0 <= seconds <= _MAX_JUMP_S:
                    raise ValueError(f"seconds must be from 0 to {_MAX_JUMP_S}")
                result: Any = self.advance(timedelta(seconds=seconds))
            elif (method, action) == ("POST", "faults"):
                self.faults.clear() if payload.pop("clear", False) else None
                self.faults.configure(**payload)
                result = {"faults": repr(self.faults)}
            elif (method, action) == ("GET", "requests"):
                result = {"count": self.log.count()}
            else:
                return _error(404, "NOT_FOUND", f"no control action {method} {action}")
        except (KeyError, TypeError, ValueError) as exc:
            return _error(400, "INVALID_INPUT", f"bad control request: {exc}")
        return Reply(200, [*_JSON, _SANDBOX_HEADER], orjson.dumps(result, default=str))

    def _route_path(self, path: str) -> str | None:
        marker = f"/{self.version}"
        at = path.find(marker + "/")
        if at < 0:
            return "/" if path.endswith(marker) else None
        return path[at + len(marker) :]

    def _answer(
        self,
        method: str,
        path: str | None,
        query: str,
        headers: Mapping[str, str],
        body: bytes,
        fault_status: int | None,
        fault_code: str | None,
        retry_after: float | None,
    ) -> Reply:
        if fault_status is not None:
            return self._fault_reply(fault_status, fault_code, retry_after)
        if not hmac.compare_digest(headers.get("authorization", ""), self._expected_auth):
            return _error(
                401, "UNAUTHORIZED", "missing or invalid platform credentials (HTTP Basic)"
            )
        if path is None:
            return _error(404, NOT_SERVED, f"no such path; paths start with /{self.version}/")
        try:
            payload = orjson.loads(body) if body.strip() else None
        except orjson.JSONDecodeError as exc:
            return _error(400, "INVALID_REQUEST_FORMAT", f"request body is not valid JSON: {exc}")
        if payload is None and body.strip():  # every body of the interface is an object
            return _error(400, "INVALID_REQUEST_FORMAT", "request body is null, not a JSON object")
        params = parse_qs(query, keep_blank_values=True)
        try:
            with self._lock:
                self.catch_up()
                status, value = dispatch(self.world, method, path, params, payload, headers)
        except ServiceError as exc:
            reply = _error(exc.status, exc.code, exc.message, exc.details)
            reply.headers.extend((k.lower(), v) for k, v in (exc.headers or {}).items())
            return reply
        except Exception:  # a bug in the simulator answers as a failing server would
            logger.exception("sandbox failed on %s %s", method, path)
            return _error(500, "INTERNAL_ERROR", "the sandbox failed; see its log")
        if value is None:
            return Reply(status, [_SANDBOX_HEADER], b"")
        if self.faults.corrupt_ids:
            value = corrupt(value, self.faults.corrupt_ids)
        try:
            content = value if isinstance(value, bytes) else orjson.dumps(value)
        except TypeError:
            logger.exception("sandbox answer of %s %s is not JSON", method, path)
            return _error(500, "INTERNAL_ERROR", "the sandbox failed; see its log")
        return Reply(status, [*_JSON, _SANDBOX_HEADER], content)

    @staticmethod
    def _fault_reply(status: int, code: str | None, retry_after: float | None) -> Reply:
        if code is None:  # what a gateway in front of the service answers: not the error shape
            html = f"<html><body><h1>{status} Service Unavailable</h1></body></html>".encode()
            return Reply(status, [("content-type", "text/html"), _SANDBOX_HEADER], html)
        reply = _error(
            status,
            code,
            "sandbox fault injection: " + ("slow down" if status == 429 else "internal error"),
        )
        if retry_after is not None:
            reply.headers.append(("retry-after", f"{retry_after:g}"))
        return reply


def _error(status: int, code: str, message: str, details: dict[str, Any] | None = None) -> Reply:
    return Reply(status, [*_JSON, _SANDBOX_HEADER], error_body(status, code, message, details))
