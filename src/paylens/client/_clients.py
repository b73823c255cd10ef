"""`Client` and `AsyncClient`: the same resources and policy, one sending with httpx.Client, the
other with httpx.AsyncClient. Everything but sending and sleeping lives in the policy core."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from typing import Any, Self, TypeVar

import httpx

from ._auth import Auth
from ._config import Credentials, check_base_url, settings_from_env
from ._policy import Attempts, Call, RateBudget, RequestStats, RetryPolicy, logger
from ._resources import (
    Cards,
    Config,
    Customers,
    ExchangeRates,
    ExternalAccounts,
    InternalAccounts,
    Quotes,
    Transactions,
)

T = TypeVar("T")

_USER_AGENT = "paylens"


class _ClientBase:
    _http: httpx.Client | httpx.AsyncClient

    def __init__(
        self,
        base_url: str,
        client_id: str,
        client_secret: str,
        *,
        timeout: float | httpx.Timeout = 30.0,
        max_retries: int | None = None,
        retry: RetryPolicy | None = None,
        max_connections: int = 64,
        rate_limit: float | None = None,
        allow_insecure: bool = False,
        seed: int | None = None,
    ) -> None:
        self.base_url, self.api_version = check_base_url(base_url, allow_insecure=allow_insecure)
        self._credentials = Credentials(client_id, client_secret)
        policy = retry or RetryPolicy()
        if max_retries is not None:
            policy = RetryPolicy(
                max_retries=max_retries,
                backoff_base=policy.backoff_base,
                backoff_cap=policy.backoff_cap,
                retry_after_cap=policy.retry_after_cap,
                deadline=policy.deadline,
            )
        self.retry_policy = policy
        self.stats = RequestStats()
        self.rate_budget = RateBudget(rate_limit) if rate_limit else None
        self._rng = random.Random(seed)
        self._http_options: dict[str, Any] = {
            "base_url": self.base_url + "/",
            "auth": httpx.BasicAuth(client_id, client_secret),
            "timeout": timeout,
            "headers": {"Accept": "application/json", "User-Agent": _USER_AGENT},
            "limits": httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
        }
        self.transactions = Transactions(self)
        self.cards = Cards(self)
        self.customers = Customers(self)
        self.internal_accounts = InternalAccounts(self)
        self.external_accounts = ExternalAccounts(self)
        self.quotes = Quotes(self)
        self.exchange_rates = ExchangeRates(self)
        self.config = Config(self)
        self.auth = Auth(self)

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **options: Any) -> Self:
        """A client configured by PAYLENS_BASE_URL, PAYLENS_CLIENT_ID and PAYLENS_CLIENT_SECRET.

        Raises ConfigurationError naming the missing variables; never falls back to sandbox data.
        """
        base_url, credentials = settings_from_env(environ)
        return cls(base_url, credentials.client_id, credentials.client_secret, **options)

    @property
    def client_id(self) -> str:
        return self._credentials.client_id

    @property
    def is_sandbox(self) -> bool:
        """True when this client talks to paylens' own simulator."""
        from paylens.sandbox import is_sandbox_url

        return is_sandbox_url(self.base_url)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r}, client_id={self.client_id!r})"

    def _start(self, call: Call[Any]) -> tuple[httpx.Request, Attempts]:
        request = call.build(self._http)
        return request, Attempts(self.retry_policy, call, request, self._rng)

    def _finish(self, call: Call[T], attempts: Attempts, response: httpx.Response) -> T:
        logger.debug(
            "%s -> %d in %d attempt(s)", attempts.info, response.status_code, attempts.number
        )
        return attempts.parse(call, response)


class Client(_ClientBase):
    """A typed client of the payments and wallet account service.

        client = paylens.Client("https://…/2025-10-13", client_id, client_secret)
        for tx in client.transactions.list(status="PENDING", type="OUTGOING"):
            ...

    Or `Client.from_env()` (PAYLENS_BASE_URL, PAYLENS_CLIENT_ID, PAYLENS_CLIENT_SECRET), or
    `paylens.Sandbox().client()` for the embedded simulator. Safe to share between threads.
    """

    def __init__(
        self,
        base_url: str,
        client_id: str,
        client_secret: str,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        **options: Any,
    ) -> None:
        super().__init__(base_url, client_id, client_secret, **options)
        self._sleep = sleep
        self._http = httpx.Client(transport=transport, **self._http_options)

    def request(self, call: Call[T]) -> T:
        """Send one call with the retry policy and return its parsed answer."""
        request, attempts = self._start(call)
        waited = 0.0
        while True:
            if self.rate_budget and (pause := self.rate_budget.reserve()):
                self._sleep(pause)
            attempts.begin()
            self.stats.count(retry=attempts.number > 1, waited=waited)
            failure: httpx.TransportError | None = None
            try:
                response = self._http.send(request)
                response.read()
            except httpx.TransportError as exc:
                failure = exc
            # decided outside the except block: a raised error must not chain the transport's
            # exception, whose request holds the Authorization header
            wait = (
                attempts.on_transport_error(failure)
                if failure is not None
                else attempts.on_response(response)
            )
            if wait is None:
                return self._finish(call, attempts, response)
            self._sleep(wait)
            waited = wait

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClient(_ClientBase):
    """The asyncio twin of `Client`: the same resources, each method returning an awaitable,
    and `async for` over `list(...)`. Use it to run many requests concurrently."""

    def __init__(
        self,
        base_url: str,
        client_id: str,
        client_secret: str,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Any] = asyncio.sleep,
        **options: Any,
    ) -> None:
        super().__init__(base_url, client_id, client_secret, **options)
        self._sleep = sleep
        self._http = httpx.AsyncClient(transport=transport, **self._http_options)

    async def request(self, call: Call[T]) -> T:  # type: ignore[override]
        """Send one call with the retry policy and return its parsed answer."""
        request, attempts = self._start(call)
        waited = 0.0
        while True:
            if self.rate_budget and (pause := self.rate_budget.reserve()):
                await self._sleep(pause)
            attempts.begin()
            self.stats.count(retry=attempts.number > 1, waited=waited)
            failure: httpx.TransportError | None = None
            try:
                response = await self._http.send(request)
                await response.aread()
            except httpx.TransportError as exc:
                failure = exc
            wait = (
                attempts.on_transport_error(failure)
                if failure is not None
                else attempts.on_response(response)
            )
            if wait is None:
                return self._finish(call, attempts, response)
            await self._sleep(wait)
            waited = wait

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
