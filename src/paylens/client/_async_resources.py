"""The resources of `AsyncClient`, typed as what they are: awaitables.

Each method *is* the sync resource's own function: a resource hands its `Call` to the client,
and an `AsyncClient` (and the signed-retry driver) answers with a coroutine, so nothing is
written twice. `awaitable` only tells type checkers that the call returns `Awaitable[T]`, and
`same` that a method (a private helper) is shared as it is, and `listing` that a listing gives
an `AsyncPaginator` (walked with `async for`, its `pages()` and `await to_list()`), which the
shared method builds for an `AsyncClient`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar, cast

from ._auth import Auth, _Credentials, _Flows, _Sessions
from ._pagination import AsyncPaginator, Paginator
from ._resources import (
    Cards,
    Config,
    Customers,
    ExchangeRates,
    ExternalAccounts,
    InternalAccounts,
    Quotes,
    Transactions,
    _Resource,
)

if TYPE_CHECKING:
    from ._clients import AsyncClient

P = ParamSpec("P")
T = TypeVar("T")


def awaitable(
    method: Callable[Concatenate[Any, P], T],
) -> Callable[Concatenate[Any, P], Awaitable[T]]:
    """The sync resource's method, as an `AsyncClient` resource has it (types only)."""
    return cast("Callable[Concatenate[Any, P], Awaitable[T]]", method)


def listing(
    method: Callable[Concatenate[Any, P], Paginator[T]],
) -> Callable[Concatenate[Any, P], AsyncPaginator[T]]:
    """The sync resource's listing, as an `AsyncClient` resource has it (types only)."""
    return cast("Callable[Concatenate[Any, P], AsyncPaginator[T]]", method)


def same(method: Callable[Concatenate[Any, P], T]) -> Callable[Concatenate[Any, P], T]:
    """A method shared as it is (it sends nothing itself)."""
    return method


class AsyncTransactions(_Resource):
    __doc__ = Transactions.__doc__
    _path = same(Transactions._path)
    list = listing(Transactions.list)
    get = awaitable(Transactions.get)
    cancel = awaitable(Transactions.cancel)
    approve = awaitable(Transactions.approve)
    reject = awaitable(Transactions.reject)
    confirm_receipt = awaitable(Transactions.confirm_receipt)
    _call = same(Transactions._call)


class AsyncCards(_Resource):
    __doc__ = Cards.__doc__
    list = listing(Cards.list)
    get = awaitable(Cards.get)
    update = awaitable(Cards.update)


class AsyncCustomers(_Resource):
    __doc__ = Customers.__doc__
    list = listing(Customers.list)
    get = awaitable(Customers.get)


class AsyncInternalAccounts(_Resource):
    __doc__ = InternalAccounts.__doc__
    list = listing(InternalAccounts.list)
    list_platform = awaitable(InternalAccounts.list_platform)


class AsyncExternalAccounts(_Resource):
    __doc__ = ExternalAccounts.__doc__
    list = listing(ExternalAccounts.list)
    list_platform = listing(ExternalAccounts.list_platform)


class AsyncQuotes(_Resource):
    __doc__ = Quotes.__doc__
    get = awaitable(Quotes.get)
    create = awaitable(Quotes.create)
    execute = awaitable(Quotes.execute)


class AsyncExchangeRates(_Resource):
    __doc__ = ExchangeRates.__doc__
    list = awaitable(ExchangeRates.list)


class AsyncConfig(_Resource):
    __doc__ = Config.__doc__
    get = awaitable(Config.get)
    get_id = awaitable(Config.get_id)


class AsyncCredentials(_Resource):
    __doc__ = _Credentials.__doc__
    _flow = same(_Flows._flow)
    _add = same(_Credentials._add)
    _verify_otp = same(_Credentials._verify_otp)
    list = awaitable(_Credentials.list)
    add_email_otp = awaitable(_Credentials.add_email_otp)
    add_sms_otp = awaitable(_Credentials.add_sms_otp)
    add_oauth = awaitable(_Credentials.add_oauth)
    add_passkey = awaitable(_Credentials.add_passkey)
    challenge = awaitable(_Credentials.challenge)
    verify_email_otp = awaitable(_Credentials.verify_email_otp)
    verify_sms_otp = awaitable(_Credentials.verify_sms_otp)
    verify_oauth = awaitable(_Credentials.verify_oauth)
    verify_passkey = awaitable(_Credentials.verify_passkey)
    revoke = awaitable(_Credentials.revoke)


class AsyncSessions(_Resource):
    __doc__ = _Sessions.__doc__
    _flow = same(_Flows._flow)
    list = awaitable(_Sessions.list)
    revoke = awaitable(_Sessions.revoke)
    refresh = awaitable(_Sessions.refresh)


class AsyncAuth(_Resource):
    __doc__ = Auth.__doc__
    _flow = same(_Flows._flow)
    export_wallet = awaitable(Auth.export_wallet)
    update_customer_email = awaitable(Auth.update_customer_email)

    def __init__(self, client: AsyncClient) -> None:
        super().__init__(client)
        self.credentials = AsyncCredentials(client)
        self.sessions = AsyncSessions(client)
