"""The one policy core shared by the sync and async clients: what to retry, how long to wait,
and which typed error a failed answer becomes. The clients only send and sleep."""

from __future__ import annotations

import email.utils
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar, cast

import httpx
import orjson

from paylens.errors import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    FailedRequest,
    InvalidArgumentError,
    OutcomeUnknownError,
    PaylensError,
    ResponseValidationError,
    error_class_for,
    error_class_for_status,
)

logger = logging.getLogger("paylens.client")

T = TypeVar("T")

#: Codes that say waiting will not help, even on a retryable status.
HOPELESS_CODES = frozenset({"DAILY_VOLUME_LIMIT_EXCEEDED"})
RETRYABLE_STATUSES = frozenset({408, 429}) | frozenset(range(500, 600))
_SNIPPET = 300

#: Methods that never change state at the service: always safe to send again.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

#: Transport failures that happen before a request leaves the client: nothing was sent, so even
#: a request that changes state may be tried again.
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


@dataclass(frozen=True)
class RetryPolicy:
    """How the client retries: connection errors, 408, 429 and 5xx, with capped exponential
    backoff and full jitter, honouring `Retry-After` up to `retry_after_cap` seconds, and never
    past `deadline` seconds for one call. `max_retries=0` turns retries off."""

    max_retries: int = 5
    backoff_base: float = 0.25
    backoff_cap: float = 8.0
    retry_after_cap: float = 120.0
    deadline: float | None = 600.0

    def __post_init__(self) -> None:
        InvalidArgumentError.unless_count("max_retries", self.max_retries, least=0, unit="retries")

    def backoff(self, retry_number: int, rng: random.Random) -> float:
        """Seconds before retry number `retry_number` (1-based) when the service named no time."""
        ceiling = min(self.backoff_cap, self.backoff_base * (2.0 ** (retry_number - 1)))
        return ceiling * (0.5 + rng.random() / 2)


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request of the interface and how to read its answer.

    `content` is a JSON body already encoded (it wins over `json`): the signed retry re-sends
    the very bytes of its first request, so it encodes them once. `record_id` is the id of the
    record the call is about (`/transactions/{id}/cancel`): its answer must carry that record,
    and one carrying another (a misrouted or cached answer) is not read as it (`read_answer`).
    """

    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    params: Mapping[str, str] | Sequence[tuple[str, str]] | None = None
    json: Any = None
    headers: dict[str, str] | None = None
    content: bytes | None = None
    record_id: str | None = None

    @property
    def retry_safe(self) -> bool:
        """Whether sending this call twice cannot act twice: a read, or a request carrying an
        `Idempotency-Key` (the service answers a replay with the first result)."""
        return self.method.upper() in SAFE_METHODS or "Idempotency-Key" in (self.headers or {})

    def build(self, http: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        content = self.content
        if content is None and self.json is not None:
            content = orjson.dumps(self.json)
        headers = dict(self.headers or {})
        if content is not None:
            headers["Content-Type"] = "application/json"
        params = cast("httpx.QueryParams | None", self.params)  # str pairs or a str mapping
        return http.build_request(
            self.method, self.path.lstrip("/"), params=params, content=content, headers=headers
        )


@dataclass
class RequestStats:
    """Counters of what a client sent, safe to share between threads. A sibling client's
    (`with_options`) counts its own requests and its parent's counts them too."""

    requests: int = 0
    retries: int = 0
    waited_seconds: float = 0.0
    #: The latest `Date` the service answered with: its clock (1 s resolution), which may not
    #: be this machine's (a simulated service's clock moves on command).
    service_time: datetime | None = None
    parent: RequestStats | None = field(default=None, repr=False, compare=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def count(self, *, retry: bool = False, waited: float = 0.0) -> None:
        with self._lock:
            self.requests += 1
            if retry:
                self.retries += 1
            self.waited_seconds += waited
        if self.parent is not None:
            self.parent.count(retry=retry, waited=waited)

    def saw(self, response: httpx.Response) -> None:
        """Note the service's clock from an answer's `Date` header (kept when it is none)."""
        header = response.headers.get("date")
        if not header:
            return
        try:
            moment = email.utils.parsedate_to_datetime(header)
        except (TypeError, ValueError):
            return
        if moment.tzinfo is None:
            return
        moment = moment.astimezone(UTC)
        with self._lock:
            if self.service_time is None or moment > self.service_time:
                self.service_time = moment
        if self.parent is not None:
            self.parent.saw(response)

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return {
                "requests": self.requests,
                "retries": self.retries,
                "waited_seconds": self.waited_seconds,
            }


class RateBudget:
    """At most `rate` requests per second across every thread using the client (a token
    bucket holding one second's worth); `reserve()` says how long the caller must wait."""

    def __init__(self, rate: float) -> None:
        self.rate = self.check(rate)
        self._capacity = max(1.0, rate)
        self._tokens = self._capacity
        self._at = time.monotonic()
        self._lock = threading.Lock()

    @staticmethod
    def check(rate: float) -> float:
        """`rate`, when it is one: more than 0 requests per second."""
        if not rate > 0:
            raise InvalidArgumentError(
                "rate_limit",
                f"must be more than 0 requests per second (None: no limit); got {rate!r}",
            )
        return rate

    def reserve(self) -> float:
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self._capacity, self._tokens + (now - self._at) * self.rate)
            self._at = now
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self.rate


class Attempts:
    """The retry state of one call. After each attempt the client reports the outcome and gets
    back the seconds to wait before trying again; a final failure is raised from here.

    A call that changes state (`Call.retry_safe` false) is tried again only when the service
    certainly did not act on it: the connection could not be made (nothing was sent) or the
    service answered 429 (refused before acting). Any other failure after sending leaves its
    outcome unknown and raises `OutcomeUnknownError`, never a second request.

    The clients call these methods outside their `except` blocks, so no error paylens raises
    carries the transport's exception (and the request headers it holds) in its chain."""

    def __init__(
        self, policy: RetryPolicy, call: Call[Any], request: httpx.Request, rng: random.Random
    ) -> None:
        self.policy = policy
        self.retry_safe = call.retry_safe
        # a keyed call that changes state is retried (the service answers a replay with the
        # first result); given up on after an attempt that may have reached it, its outcome
        # is unknown, and only the same key may ask again
        self.changes_state = call.method.upper() not in SAFE_METHODS
        self.key = (call.headers or {}).get("Idempotency-Key")
        self.maybe_acted = False
        self.info = public_request(request)
        self.rng = rng
        self.number = 0
        self.started = time.monotonic()
        self.waited = 0.0

    def begin(self) -> None:
        self.number += 1

    def on_response(self, response: httpx.Response) -> float | None:
        """None when the response is the answer; else seconds to wait (or raise the error)."""
        if response.status_code < 400:
            return None
        error = build_api_error(response, self.info, self.number)
        if response.status_code >= 500 or response.status_code == 408:
            self.maybe_acted = True
        retryable = response.status_code in RETRYABLE_STATUSES and error.code not in HOPELESS_CODES
        if not retryable:
            raise error
        if not self.retry_safe and response.status_code != 429:
            raise OutcomeUnknownError(
                f"the service answered {response.status_code} {error.code}",
                request=self.info,
                status=response.status_code,
                error=error,
                attempts=self.number,
            )
        return self._wait_or_raise(error, error.retry_after)

    def on_transport_error(self, exc: httpx.RequestError) -> float:
        kind = APITimeoutError if isinstance(exc, httpx.TimeoutException) else APIConnectionError
        summary = f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, NOT_SENT):
            self.maybe_acted = True
        if not self.retry_safe and not isinstance(exc, NOT_SENT):
            raise OutcomeUnknownError(
                f"the connection failed after the request was sent ({summary})",
                request=self.info,
                attempts=self.number,
            )
        error = kind(summary, request=self.info, attempts=self.number)
        return self._wait_or_raise(error, None)

    def parse(self, call: Call[T], response: httpx.Response) -> T:
        """The answer read (`read_answer`); an unreadable answer to a keyed call that changes
        state names its key (the only safe way to ask again)."""
        key = self.key if self.changes_state else None
        return read_answer(
            call.parse,
            response,
            self.info,
            self.number,
            idempotency_key=key,
            record_id=call.record_id,
        )

    def _given_up(self, error: Exception) -> Exception:
        """The error to raise on giving up: for a keyed call that changes state, after an
        attempt that may have reached the service, its outcome is unknown."""
        if not (self.changes_state and self.key and self.maybe_acted):
            return error
        return OutcomeUnknownError(
            f"{self.number} attempt(s) with Idempotency-Key {self.key}, none answered ({error})",
            request=self.info,
            status=getattr(error, "status", None),
            error=error if isinstance(error, APIError) else None,
            attempts=self.number,
            idempotency_key=self.key,
        )

    def _wait_or_raise(self, error: Exception, retry_after: float | None) -> float:
        if self.number > self.policy.max_retries:
            raise self._given_up(error)
        if retry_after is not None and retry_after > self.policy.retry_after_cap:
            raise self._given_up(error)
        wait = (
            retry_after if retry_after is not None else self.policy.backoff(self.number, self.rng)
        )
        if self.policy.deadline is not None:
            # waits count even when the sleep is not a real one (an injected clock)
            spent = max(time.monotonic() - self.started, self.waited)
            if spent + wait > self.policy.deadline:
                raise self._given_up(error)
        self.waited += wait
        # a service that does not answer is said at once (a run otherwise waits through its
        # backoffs in silence); 429s and 5xx are its ordinary answers, said only with -v
        if isinstance(error, APIConnectionError) and _first_in_a_while(self.info.url):
            logger.warning("%s; retrying (up to %d more tries)", error, self.policy.max_retries)
        else:
            logger.info(
                "retrying %s after %s in %.2fs (attempt %d)", self.info, error, wait, self.number
            )
        return wait


_UNREACHED: dict[str, float] = {}
_UNREACHED_LOCK = threading.Lock()


def _first_in_a_while(url: str, every: float = 60.0) -> bool:
    """Whether a service that does not answer is to be said now: once a minute per host, not
    once per request (a sync's sixteen readers would say it sixteen times)."""
    host = "/".join(url.split("/", 3)[:3])
    now = time.monotonic()
    with _UNREACHED_LOCK:
        if now - _UNREACHED.get(host, -every) < every:
            return False
        _UNREACHED[host] = now
        return True


def read_answer(
    parse: Callable[[httpx.Response], T],
    response: httpx.Response,
    info: FailedRequest,
    attempts: int,
    *,
    idempotency_key: str | None = None,
    record_id: str | None = None,
) -> T:
    """An answer read by `parse`. For a request that changed state, an unreadable 2xx is an
    unknown outcome (the service acted, or not, and said what in words paylens cannot read),
    carrying the `idempotency_key` it was sent with, if any, to ask again with; for a read, a
    `ResponseValidationError`. A body no reader expected (not JSON, a number where a record
    belongs) is never the parser's own error. An answer about `record_id` that carries another
    record (a misrouted or cached answer) is unreadable too: it says nothing of this one."""
    failure: PaylensError | None = None
    try:
        value = parse(response)
        if record_id is None or (carried := _record_id_of(value)) == record_id:
            return value
        failure = ResponseValidationError(
            f"{info} answered {response.status_code} with another record "
            f"({carried!r}, not {record_id!r})"
        )
    except PaylensError as exc:
        failure = exc
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        failure = ResponseValidationError(
            f"{info} answered {response.status_code} with a body that is not the "
            f"interface's ({type(exc).__name__})",
        )
    if info.method.upper() in SAFE_METHODS:
        raise failure
    raise OutcomeUnknownError(
        f"the service answered {response.status_code} with a body paylens cannot read "
        f"({str(failure)[:200]})",
        request=info,
        status=response.status_code,
        attempts=attempts,
        idempotency_key=idempotency_key,
    )


def _record_id_of(value: Any) -> Any:
    """The `id` a parsed answer carries (None when it carries none)."""
    if isinstance(value, Mapping):
        return value.get("id")
    return getattr(value, "id", None)


def public_request(request: httpx.Request) -> FailedRequest:
    """What a request was, for errors: its method and URL without any credential."""
    return FailedRequest(request.method, _public_url(request.url))


def _public_url(url: httpx.URL) -> str:
    return str(url.copy_with(username=None, password=None))


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds from a Retry-After header: delay-seconds or an HTTP date; None when absent or bad."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def build_api_error(response: httpx.Response, request: FailedRequest, attempts: int) -> APIError:
    """The typed error for an error response; a body that is not the error shape still gives a
    clear error with the status and a snippet of the body."""
    status = response.status_code
    retry_after = parse_retry_after(response.headers.get("Retry-After"))
    try:
        body = orjson.loads(response.content) if response.content else None
    except orjson.JSONDecodeError:
        body = None
    if isinstance(body, dict) and any(key in body for key in ("code", "message", "details")):
        # the error shape, or near it: whatever the service said is kept (a code that is not
        # text, or none, is read as text or as the status's)
        code = body.get("code")
        code = code if isinstance(code, str) else f"HTTP_{status}" if code is None else str(code)
        details = body.get("details")
        return error_class_for(status, code)(
            status=status,
            code=code,
            message=str(body.get("message") or ""),
            details=details if isinstance(details, dict) else None,
            retry_after=retry_after,
            request=request,
            attempts=attempts,
        )
    snippet = response.content[:_SNIPPET].decode("utf-8", errors="replace")
    return error_class_for_status(status)(
        status=status,
        code=f"HTTP_{status}",
        message=f"the service answered {status} {response.reason_phrase} without an error body",
        retry_after=retry_after,
        request=request,
        attempts=attempts,
        body_snippet=snippet,
    )
