"""Fast parsing entry points, with their validators built once at import.

JSON bytes go straight to pydantic's Rust JSON parser (`validate_json`); dicts that are already
decoded go through `validate_python`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field, TypeAdapter, ValidationError

from ._customers import Customer
from ._pages import Page
from ._transactions import CardTransaction, IncomingTransaction, OutgoingTransaction, Transaction

__all__ = [
    "CUSTOMER_ADAPTER",
    "TRANSACTION_ADAPTER",
    "TRANSACTION_PAGE_ADAPTER",
    "WireData",
    "page_adapter",
    "parse_customer",
    "parse_page",
    "parse_transaction",
]

WireData = bytes | bytearray | str | Mapping[str, Any]
"""A wire body: raw JSON (bytes or text) or an already decoded JSON object."""

TRANSACTION_ADAPTER: TypeAdapter[Transaction] = TypeAdapter(Transaction)
TRANSACTION_PAGE_ADAPTER: TypeAdapter[Page[Transaction]] = TypeAdapter(Page[Transaction])
CUSTOMER_ADAPTER: TypeAdapter[Customer] = TypeAdapter(Customer)

# The known kinds only, told apart by `type` inside pydantic-core. The open union's catch-all
# needs a Python discriminator, which costs a conversion of every JSON record to Python objects;
# this first try avoids it. A body it rejects (a new kind, or invalid data) is validated again by
# the open adapter, which returns the `UnknownTransaction` or raises the error the caller sees.
_KnownTransaction = Annotated[
    IncomingTransaction | OutgoingTransaction | CardTransaction, Field(discriminator="type")
]
_KNOWN_TRANSACTION_ADAPTER: TypeAdapter[Any] = TypeAdapter(_KnownTransaction)
_KNOWN_TRANSACTION_PAGE_ADAPTER: TypeAdapter[Any] = TypeAdapter(Page[_KnownTransaction])


def _validate(adapter: TypeAdapter[Any], data: WireData) -> Any:
    if isinstance(data, bytes | bytearray | str):
        return adapter.validate_json(data)
    return adapter.validate_python(data)


def _validate_known_first(fast: TypeAdapter[Any], open_: TypeAdapter[Any], data: WireData) -> Any:
    try:
        return _validate(fast, data)
    except ValidationError:
        return _validate(open_, data)


def parse_transaction(data: WireData) -> Transaction:
    """Parse one transaction into its variant (`UnknownTransaction` for a new `type`)."""
    parsed: Transaction = _validate_known_first(
        _KNOWN_TRANSACTION_ADAPTER, TRANSACTION_ADAPTER, data
    )
    return parsed


def parse_customer(data: WireData) -> Customer:
    """Parse one customer into `IndividualCustomer`, `BusinessCustomer` or `UnknownCustomer`."""
    parsed: Customer = _validate(CUSTOMER_ADAPTER, data)
    return parsed


_PAGE_ADAPTERS: dict[Any, TypeAdapter[Page[Any]]] = {Transaction: TRANSACTION_PAGE_ADAPTER}


def page_adapter(item_type: Any) -> TypeAdapter[Page[Any]]:
    """The (cached) validator of `Page[item_type]`."""
    adapter = _PAGE_ADAPTERS.get(item_type)
    if adapter is None:
        adapter = _PAGE_ADAPTERS[item_type] = TypeAdapter(Page[item_type])
    return adapter


def parse_page(data: WireData, item_type: Any = Transaction) -> Page[Any]:
    """Parse a list response (`data`, `hasMore`, `nextCursor`, `totalCount`) of `item_type`."""
    page: Page[Any]
    if item_type is Transaction:
        page = _validate_known_first(
            _KNOWN_TRANSACTION_PAGE_ADAPTER, TRANSACTION_PAGE_ADAPTER, data
        )
    else:
        page = _validate(page_adapter(item_type), data)
    return page
