"""The service's resources as client attributes (`client.transactions`, `client.cards`, ...).

Each method builds one `Call` (path, checked parameters, how to read the answer) and hands it to
the client, so the same resource serves `Client` (returns the value) and `AsyncClient` (returns
an awaitable). Python names are snake_case; the wire keeps the interface's names.
"""

from __future__ import annotations

import builtins
import functools
import uuid
from collections.abc import Callable, Iterable
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, TypeVar, cast

import httpx
import orjson

from paylens import models as m
from paylens.errors import InvalidArgumentError, ResponseValidationError

from . import _params as p
from ._pagination import AsyncPaginator, Paginator, parse_with
from ._policy import Call

if TYPE_CHECKING:
    from ._clients import AsyncClient, Client

T = TypeVar("T")

#: What the list filters take (card transactions are listed, but no filter selects them).
TRANSACTION_TYPES = ("INCOMING", "OUTGOING")
TRANSACTION_STATUSES = frozenset(m.TransactionStatus)
SORT_ORDERS = ("asc", "desc")
_TRANSACTION_ID_TYPES = ("Transaction", "CardTransaction")

DateLike = date | datetime | str


def _parse(item_type: type[T]) -> Callable[[httpx.Response], T]:
    """Reader of one record of the model `item_type`."""
    return cast("Callable[[httpx.Response], T]", _reader(cast(Any, item_type)))


@functools.cache
def _reader(item_type: Any) -> Callable[[httpx.Response], Any]:
    from pydantic import TypeAdapter  # loaded by typed reads only: a sync's pages are raw

    return parse_with(TypeAdapter(item_type).validate_json)


def parse_transaction(response: httpx.Response) -> m.Transaction:
    """Reader of a transaction (the interface's union), through the fast known-kinds path."""
    read: Callable[[httpx.Response], m.Transaction] = _reader_of(m.parse_transaction)
    return read(response)


def parse_customer(response: httpx.Response) -> m.Customer:
    """Reader of a customer (the interface's union of kinds)."""
    return _reader(m.Customer)(response)  # type: ignore[no-any-return]


@functools.cache
def _reader_of(validate: Callable[[bytes], Any]) -> Callable[[httpx.Response], Any]:
    return parse_with(validate)


@functools.cache
def _parse_data_list(item_type: Any) -> Callable[[httpx.Response], list[Any]]:
    """Reader of an unpaginated `{data: [...]}` list, returning the items."""
    from pydantic import TypeAdapter

    inner = parse_with(TypeAdapter(m.ItemList[item_type]).validate_json)

    def parse(response: httpx.Response) -> list[Any]:
        return inner(response).data

    return parse


class _Resource:
    def __init__(self, client: Client | AsyncClient) -> None:
        self._client = client

    def _run(self, call: Call[T]) -> T:
        # an AsyncClient answers with a coroutine: its resources are typed as awaitables
        # (`_async_resources`), these for the sync client
        return cast(T, self._client.request(call))

    def _list(self, path: str, params: dict[str, str], item_type: str) -> Paginator[Any]:
        """A paginator of `item_type` (a model's name: built only when typed pages are asked
        for, so that a sync reading JSON texts builds no pydantic model)."""
        listing = AsyncPaginator if self._client.is_async else Paginator
        return cast(Paginator[Any], listing(self._client, path, params, item_type))


def _limit(limit: int | None) -> int:
    return p.page_size(p.MAX_PAGE_SIZE if limit is None else limit)


def _sort(sort_order: str | None) -> str | None:
    return None if sort_order is None else p.one_of("sort_order", sort_order, SORT_ORDERS)


class Transactions(_Resource):
    """`/transactions`: list (every filter of the interface), get, cancel, approve, reject and
    confirm receipt delivery."""

    def list(
        self,
        *,
        customer_id: str | None = None,
        platform_customer_id: str | None = None,
        account_identifier: str | None = None,
        sender_account_identifier: str | None = None,
        receiver_account_identifier: str | None = None,
        status: str | None = None,
        type: str | None = None,
        reference: str | None = None,
        start_date: DateLike | None = None,
        end_date: DateLike | None = None,
        sort_order: str | None = None,
        limit: int | None = None,
    ) -> Paginator[m.Transaction]:
        """Every transaction matching the filters, across pages (100 per page by default).

        `start_date` and `end_date` are inclusive: a `date` is a whole UTC day, a datetime must
        carry a zone. `status` is a transaction or card-transaction status; `type` is
        INCOMING, OUTGOING or CARD; `sort_order` is "asc" or "desc" (the service's default).
        """
        params = p.query(
            customerId=customer_id and p.text("customer_id", customer_id),
            platformCustomerId=platform_customer_id
            and p.text("platform_customer_id", platform_customer_id),
            accountIdentifier=account_identifier
            and p.text("account_identifier", account_identifier),
            senderAccountIdentifier=sender_account_identifier
            and p.text("sender_account_identifier", sender_account_identifier),
            receiverAccountIdentifier=receiver_account_identifier
            and p.text("receiver_account_identifier", receiver_account_identifier),
            status=None if status is None else p.one_of("status", status, TRANSACTION_STATUSES),
            type=None if type is None else p.one_of("type", type, TRANSACTION_TYPES),
            reference=reference and p.text("reference", reference),
            startDate=None if start_date is None else p.timestamp("start_date", start_date),
            endDate=None
            if end_date is None
            else p.timestamp("end_date", end_date, end_of_day=True),
            sortOrder=_sort(sort_order),
            limit=_limit(limit),
        )
        return self._list("transactions", params, "Transaction")

    def _path(self, transaction_id: str, action: str = "") -> str:
        tid = p.record_id("transaction_id", transaction_id, *_TRANSACTION_ID_TYPES)
        return f"transactions/{tid}" + (f"/{action}" if action else "")

    def _call(
        self, transaction_id: str, action: str = "", body: dict[str, Any] | None = None
    ) -> Call[m.Transaction]:
        """The call reading (GET) or acting on (POST `action`) one transaction: its answer
        must carry that transaction (the union, read by its `type`: an approval of an agent's
        payout answers an OUTGOING one, where the interface names an incoming one)."""
        path = self._path(transaction_id, action)
        tid = path.split("/")[1]  # the id as `_path` checked it
        if not action:
            return Call("GET", path, parse_transaction, record_id=tid)
        return Call("POST", path, parse_transaction, json=body, record_id=tid)

    def get(self, transaction_id: str) -> m.Transaction:
        """One transaction by id."""
        return self._run(self._call(transaction_id))

    def cancel(self, transaction_id: str, *, reason: str | None = None) -> m.Transaction:
        """Ask to cancel a pending ACH transfer or wire (spec §4.1). 409 ConflictError
        `TRANSACTION_NOT_CANCELLABLE` when the partner refuses or the window passed; 400 for
        a type that cannot be cancelled."""
        body = {} if reason is None else {"reason": p.text("reason", reason)}
        return self._run(self._call(transaction_id, "cancel", body))

    def approve(
        self, transaction_id: str, *, receiver_customer_info: dict[str, Any] | None = None
    ) -> m.Transaction:
        """Platform approval of a transaction pending it (409 otherwise): an incoming payment
        or an agent's outgoing payout, answered with its record of either type."""
        body = (
            {}
            if receiver_customer_info is None
            else {"receiverCustomerInfo": receiver_customer_info}
        )
        return self._run(self._call(transaction_id, "approve", body))

    def reject(self, transaction_id: str, *, reason: str | None = None) -> m.Transaction:
        """Platform rejection of a transaction pending approval (409 otherwise), incoming or
        an agent's outgoing payout."""
        body = {} if reason is None else {"reason": p.text("reason", reason)}
        return self._run(self._call(transaction_id, "reject", body))

    def confirm_receipt(
        self, transaction_id: str, *, confirmed_at: DateLike | None = None
    ) -> m.Transaction:
        """Record that the platform delivered the receipt (now, unless `confirmed_at`)."""
        body = (
            {}
            if confirmed_at is None
            else {"receiptDeliveryConfirmedAt": p.timestamp("confirmed_at", confirmed_at)}
        )
        return self._run(self._call(transaction_id, "confirm", body))


class Cards(_Resource):
    """`/cards`: list, get, and state changes (freeze, unfreeze, close)."""

    def list(
        self,
        *,
        cardholder_id: str | None = None,
        account_id: str | None = None,
        platform_card_id: str | None = None,
        state: str | None = None,
        sort_order: str | None = None,
        limit: int | None = None,
    ) -> Paginator[m.Card]:
        params = p.query(
            cardholderId=cardholder_id and p.text("cardholder_id", cardholder_id),
            accountId=account_id and p.text("account_id", account_id),
            platformCardId=platform_card_id and p.text("platform_card_id", platform_card_id),
            state=None if state is None else p.one_of("state", state, m.CardState),
            sortOrder=_sort(sort_order),
            limit=_limit(limit),
        )
        return self._list("cards", params, "Card")

    def get(self, card_id: str) -> m.Card:
        cid = p.record_id("card_id", card_id, "Card")
        return self._run(Call[m.Card]("GET", f"cards/{cid}", _parse(m.Card), record_id=cid))

    def update(
        self,
        card_id: str,
        *,
        state: str | None = None,
        funding_sources: Iterable[str] | None = None,
        max_spend_per_transaction: int | None = None,
    ) -> m.Card:
        """Change a card's state (ACTIVE, FROZEN, CLOSED; spec §3) or its settings."""
        body: dict[str, Any] = {}
        if state is not None:
            body["state"] = p.one_of("state", state, ("ACTIVE", "FROZEN", "CLOSED"))
        if funding_sources is not None:
            body["fundingSources"] = [p.text("funding_sources", s) for s in funding_sources]
        if max_spend_per_transaction is not None:
            body["maxSpendPerTransaction"] = max_spend_per_transaction
        if not body:
            raise InvalidArgumentError(
                "update",
                "nothing to change: pass state, funding_sources or max_spend_per_transaction",
            )
        cid = p.record_id("card_id", card_id, "Card")
        return self._run(
            Call[m.Card]("PATCH", f"cards/{cid}", _parse(m.Card), json=body, record_id=cid)
        )


class Customers(_Resource):
    """`/customers`: list and get."""

    def list(
        self,
        *,
        platform_customer_id: str | None = None,
        customer_type: str | None = None,
        created_after: DateLike | None = None,
        created_before: DateLike | None = None,
        updated_after: DateLike | None = None,
        updated_before: DateLike | None = None,
        region: str | None = None,
        currency: str | None = None,
        include_deleted: bool | None = None,
        limit: int | None = None,
    ) -> Paginator[m.Customer]:
        params = p.query(
            platformCustomerId=platform_customer_id,
            customerType=None
            if customer_type is None
            else p.one_of("customer_type", customer_type, ("INDIVIDUAL", "BUSINESS")),
            createdAfter=None
            if created_after is None
            else p.timestamp("created_after", created_after),
            createdBefore=None
            if created_before is None
            else p.timestamp("created_before", created_before, end_of_day=True),
            updatedAfter=None
            if updated_after is None
            else p.timestamp("updated_after", updated_after),
            updatedBefore=None
            if updated_before is None
            else p.timestamp("updated_before", updated_before, end_of_day=True),
            region=region,
            currency=currency,
            isIncludingDeleted=None
            if include_deleted is None
            else str(bool(include_deleted)).lower(),
            limit=_limit(limit),
        )
        return self._list("customers", params, "Customer")

    def get(self, customer_id: str) -> m.Customer:
        cid = p.record_id("customer_id", customer_id, "Customer")
        return self._run(Call[m.Customer]("GET", f"customers/{cid}", parse_customer, record_id=cid))


class InternalAccounts(_Resource):
    """Internal accounts of customers (paginated) and of the platform."""

    def list(
        self,
        *,
        customer_id: str | None = None,
        currency: str | None = None,
        type: str | None = None,
        limit: int | None = None,
    ) -> Paginator[m.InternalAccount]:
        params = p.query(
            customerId=customer_id,
            currency=currency,
            type=None if type is None else p.one_of("type", type, m.InternalAccountType),
            limit=_limit(limit),
        )
        return self._list("customers/internal-accounts", params, "InternalAccount")

    def list_platform(
        self, *, currency: str | None = None, type: str | None = None
    ) -> builtins.list[m.InternalAccount]:
        params = p.query(
            currency=currency,
            type=None if type is None else p.one_of("type", type, m.InternalAccountType),
        )
        return self._run(
            Call[builtins.list[m.InternalAccount]](
                "GET",
                "platform/internal-accounts",
                _parse_data_list(m.InternalAccount),
                params=params,
            )
        )


class ExternalAccounts(_Resource):
    """External accounts of customers and of the platform (both paginated)."""

    def list(
        self,
        *,
        customer_id: str | None = None,
        currency: str | None = None,
        limit: int | None = None,
    ) -> Paginator[m.ExternalAccount]:
        params = p.query(customerId=customer_id, currency=currency, limit=_limit(limit))
        return self._list("customers/external-accounts", params, "ExternalAccount")

    def list_platform(
        self, *, currency: str | None = None, limit: int | None = None
    ) -> Paginator[m.ExternalAccount]:
        params = p.query(currency=currency, limit=_limit(limit))
        return self._list("platform/external-accounts", params, "ExternalAccount")


class Quotes(_Resource):
    """`/quotes`: read one, or create one (`immediately_execute=True` also executes it)."""

    def get(self, quote_id: str) -> m.Quote:
        qid = p.record_id("quote_id", quote_id, "Quote")
        return self._run(Call[m.Quote]("GET", f"quotes/{qid}", _parse(m.Quote), record_id=qid))

    def create(
        self,
        /,
        *,
        source: dict[str, Any],
        destination: dict[str, Any],
        locked_currency_side: str,
        locked_currency_amount: int,
        immediately_execute: bool | None = None,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> m.Quote:
        """Create a quote. `source`/`destination` are wire objects (e.g. `{"sourceType":
        "ACCOUNT", "accountId": ...}`); extra wire fields go in `fields` under their wire names."""
        if (
            isinstance(locked_currency_amount, bool)
            or not isinstance(locked_currency_amount, int)
            or locked_currency_amount <= 0
        ):
            raise InvalidArgumentError(
                "locked_currency_amount",
                f"must be a positive integer in minor units, got {locked_currency_amount!r}",
            )
        body = {
            "source": source,
            "destination": destination,
            "lockedCurrencySide": p.one_of(
                "locked_currency_side", locked_currency_side, ("SENDING", "RECEIVING")
            ),
            "lockedCurrencyAmount": locked_currency_amount,
            **fields,
        }
        if immediately_execute is not None:
            body["immediatelyExecute"] = bool(immediately_execute)
        # a key on every create, so the policy may re-send it after a lost answer: the service
        # answers a replay with the first quote instead of making a second one
        headers = {"Idempotency-Key": idempotency_key or str(uuid.uuid4())}
        return self._run(
            Call[m.Quote]("POST", "quotes", _parse(m.Quote), json=body, headers=headers)
        )

    def execute(self, quote_id: str, *, idempotency_key: str | None = None) -> m.Quote:
        """Execute a quote (moves money). Sent with an `Idempotency-Key` (yours, or a new one)
        so a retry after a lost answer cannot execute it twice."""
        qid = p.record_id("quote_id", quote_id, "Quote")
        headers = {"Idempotency-Key": idempotency_key or str(uuid.uuid4())}
        return self._run(
            Call[m.Quote](
                "POST", f"quotes/{qid}/execute", _parse(m.Quote), headers=headers, record_id=qid
            )
        )


class ExchangeRates(_Resource):
    """`/exchange-rates`: current rates with their fees (cached by the service ~5 minutes)."""

    def list(
        self,
        *,
        source_currency: str | None = None,
        destination_currencies: Iterable[str] | None = None,
        sending_amount: int | None = None,
    ) -> list[m.ExchangeRate]:
        params: list[tuple[str, str]] = []
        if source_currency is not None:
            params.append(("sourceCurrency", p.text("source_currency", source_currency)))
        for code in destination_currencies or ():
            params.append(("destinationCurrency", p.text("destination_currencies", code)))
        if sending_amount is not None:
            params.append(("sendingAmount", str(sending_amount)))
        call = Call[builtins.list[m.ExchangeRate]](
            "GET", "exchange-rates", _parse_data_list(m.ExchangeRate), params=params
        )
        return self._run(call)


class Config(_Resource):
    """`/config`: the platform configuration, with `feeConfigs`."""

    def get(self) -> m.PlatformConfig:
        return self._run(Call[m.PlatformConfig]("GET", "config", _parse(m.PlatformConfig)))

    def get_id(self) -> str | None:
        """The configuration's `id` alone (None when the answer has none), read without the
        model: what tells one platform's data from another's at one base URL, on every sync."""
        return self._run(Call[str | None]("GET", "config", _id_of))


def _id_of(response: httpx.Response) -> str | None:
    """A record's `id` from its raw JSON answer (None when it has none); an answer that is no
    JSON object is a `ResponseValidationError`, as a typed read's would be."""
    try:
        body = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        body = None
    if not isinstance(body, dict):
        raise ResponseValidationError(
            f"{response.request.method} {response.request.url.path} answered a body that is "
            "not a JSON object"
        )
    found = body.get("id")
    return found if isinstance(found, str) else None


__all__ = [
    "Cards",
    "Config",
    "Customers",
    "ExchangeRates",
    "ExternalAccounts",
    "InternalAccounts",
    "Quotes",
    "Transactions",
]
