"""`Client` and `AsyncClient`: the same resources and policy, one sending with httpx.Client, the
other with httpx.AsyncClient. Everything but sending and sleeping lives in the policy core."""

from __future__ import annotations

import copy
import dataclasses
import random
import ssl
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

import httpx

from paylens import _lazy
from paylens._urls import is_sandbox_url

from ._config import (
    Credentials,
    check_base_url,
    is_loopback_host,
    settings_from_env,
)
from ._policy import Attempts, Call, RateBudget, RequestStats, RetryPolicy, logger

if TYPE_CHECKING:  # the resources load on first use (see `_ClientBase._RESOURCES`)
    from . import _async_resources as aio
    from . import _auth, _resources

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
        self.base_url, self.api_version = check_base_url(
            base_url, allow_insecure=allow_insecure, secret=client_secret
        )
        self._credentials = Credentials(client_id, client_secret)
        policy = retry or RetryPolicy()
        if max_retries is not None:
            policy = dataclasses.replace(policy, max_retries=max_retries)
        self.retry_policy = policy
        self.stats = RequestStats()
        self.rate_budget = RateBudget(rate_limit) if rate_limit else None
        self._rng = random.Random(seed)
        self._timeout: httpx.Timeout | None = None  # a sibling's own, per request
        self._http_options: dict[str, Any] = {
            "base_url": self.base_url + "/",
            "auth": httpx.BasicAuth(client_id, client_secret),
            "timeout": timeout,
            "headers": {"Accept": "application/json", "User-Agent": _USER_AGENT},
            "limits": httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
        }
        if self.base_url.startswith("http:") and is_loopback_host(httpx.URL(self.base_url).host):
            # never TLS (`paylens sandbox serve`): no CA bundle read (~0.05 s a process); a
            # context that trusts nothing, so that TLS, were it ever asked for, fails closed
            self._http_options["verify"] = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self._bind_resources()

    #: attribute -> (module, class) of its resource (sync or async twins, by client), imported
    #: and built on first use: a process that only lists transactions (a sync) loads neither
    #: the signing of wallet calls (cryptography) nor the typed models' validation (pydantic)
    _RESOURCES: ClassVar[dict[str, tuple[str, str]]] = {}

    def _bind_resources(self) -> None:
        """Forget the resources built so far (a sibling's copy holds its original's)."""
        for name in self._RESOURCES:
            self.__dict__.pop(name, None)

    if not TYPE_CHECKING:  # to type checkers each resource is a declared attribute

        def __getattr__(self, name: str) -> Any:
            spec = type(self)._RESOURCES.get(name)
            if spec is None:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            module, kind = spec
            resource = _lazy.load(module, kind, __package__)(self)
            self.__dict__[name] = resource
            return resource

    def __dir__(self) -> list[str]:
        # tab completion in a notebook lists the resources before their first use
        return sorted({*super().__dir__(), *self._RESOURCES})

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
        return is_sandbox_url(self.base_url)

    def __repr__(self) -> str:
        # read from what is set: a client whose `__init__` raised (a traceback's locals, a
        # debugger) has a repr too, and never one that fails
        credentials = self.__dict__.get("_credentials")
        client_id = getattr(credentials, "client_id", None)
        return f"{type(self).__name__}(base_url={self.__dict__.get('base_url')!r}, client_id={client_id!r})"

    def with_options(
        self,
        *,
        timeout: float | httpx.Timeout | None = None,
        max_retries: int | None = None,
        retry: RetryPolicy | None = None,
        rate_limit: float | None = None,
    ) -> Self:
        """A sibling client with other options for some calls, sharing this one's connection
        pool and credentials; this client is left as it was. The sibling counts its own
        requests (`stats`; this client's count them too), so a sync's report counts only its
        own.

            fast = client.with_options(timeout=5, max_retries=0)
            paced = client.with_options(rate_limit=20)   # requests per second
        """
        sibling = copy.copy(self)
        policy = retry or self.retry_policy
        if max_retries is not None:
            policy = dataclasses.replace(policy, max_retries=max_retries)
        sibling.retry_policy = policy
        sibling.stats = RequestStats(parent=self.stats)
        if rate_limit is not None:
            sibling.rate_budget = RateBudget(rate_limit)
        if timeout is not None:
            sibling._timeout = (
                timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)
            )
        sibling._rng = random.Random(self._rng.random())
        sibling._bind_resources()
        return sibling

    def _start(self, call: Call[Any]) -> tuple[httpx.Request, Attempts]:
        request = call.build(self._http)
        if self._timeout is not None:
            request.extensions["timeout"] = self._timeout.as_dict()
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

    _RESOURCES: ClassVar[dict[str, tuple[str, str]]] = {
        "transactions": ("._resources", "Transactions"),
        "cards": ("._resources", "Cards"),
        "customers": ("._resources", "Customers"),
        "internal_accounts": ("._resources", "InternalAccounts"),
        "external_accounts": ("._resources", "ExternalAccounts"),
        "quotes": ("._resources", "Quotes"),
        "exchange_rates": ("._resources", "ExchangeRates"),
        "config": ("._resources", "Config"),
        "auth": ("._auth", "Auth"),
    }
    transactions: _resources.Transactions
    cards: _resources.Cards
    customers: _resources.Customers
    internal_accounts: _resources.InternalAccounts
    external_accounts: _resources.ExternalAccounts
    quotes: _resources.Quotes
    exchange_rates: _resources.ExchangeRates
    config: _resources.Config
    auth: _auth.Auth
    _http: httpx.Client
    is_async: ClassVar[bool] = False

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
            failure: httpx.RequestError | None = None
            try:
                response = self._http.send(request)
                response.read()
            except httpx.RequestError as exc:  # a transport's, or a body that does not decode
                failure = exc
            # decided outside the except block: a raised error must not chain the transport's
            # exception, whose request holds the Authorization header
            wait = (
                attempts.on_transport_error(failure)
                if failure is not None
                else attempts.on_response(response)
            )
            if wait is None:
                self.stats.saw(response)
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

    #: each sync resource's twin: the same name with Async before it
    _RESOURCES: ClassVar[dict[str, tuple[str, str]]] = {
        name: ("._async_resources", f"Async{kind}") for name, (_, kind) in Client._RESOURCES.items()
    }
    transactions: aio.AsyncTransactions
    cards: aio.AsyncCards
    customers: aio.AsyncCustomers
    internal_accounts: aio.AsyncInternalAccounts
    external_accounts: aio.AsyncExternalAccounts
    quotes: aio.AsyncQuotes
    exchange_rates: aio.AsyncExchangeRates
    config: aio.AsyncConfig
    auth: aio.AsyncAuth
    _http: httpx.AsyncClient
    is_async: ClassVar[bool] = True

    def __init__(
        self,
        base_url: str,
        client_id: str,
        client_secret: str,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Any] | None = None,
        **options: Any,
    ) -> None:
        super().__init__(base_url, client_id, client_secret, **options)
        if sleep is None:  # asyncio's: loaded here, so that sync code never loads asyncio
            import asyncio

            sleep = asyncio.sleep
        self._sleep = sleep
        self._http = httpx.AsyncClient(transport=transport, **self._http_options)

    async def request(self, call: Call[T]) -> T:
        """Send one call with the retry policy and return its parsed answer."""
        request, attempts = self._start(call)
        waited = 0.0
        while True:
            if self.rate_budget and (pause := self.rate_budget.reserve()):
                await self._sleep(pause)
            attempts.begin()
            self.stats.count(retry=attempts.number > 1, waited=waited)
            failure: httpx.RequestError | None = None
            try:
                response = await self._http.send(request)
                await response.aread()
            except httpx.RequestError as exc:  # a transport's, or a body that does not decode
                failure = exc
            wait = (
                attempts.on_transport_error(failure)
                if failure is not None
                else attempts.on_response(response)
            )
            if wait is None:
                self.stats.saw(response)
                return self._finish(call, attempts, response)
            await self._sleep(wait)
            waited = wait

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
