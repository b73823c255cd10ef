"""Fast parsing entry points, with their validators built once at import.

JSON bytes go straight to pydantic's Rust JSON parser (`validate_json`); dicts that are already
decoded go through `validate_python`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter

from ._customers import Customer
from ._pages import Page
from ._transactions import Transaction

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


def _validate(adapter: TypeAdapter[Any], data: WireData) -> Any:
    if isinstance(data, bytes | bytearray | str):
        return adapter.validate_json(data)
    return adapter.validate_python(data)


def parse_transaction(data: WireData) -> Transaction:
    """Parse one transaction into its variant (`UnknownTransaction` for a new `type`)."""
    return _validate(TRANSACTION_ADAPTER, data)


def parse_customer(data: WireData) -> Customer:
    """Parse one customer into `IndividualCustomer`, `BusinessCustomer` or `UnknownCustomer`."""
    return _validate(CUSTOMER_ADAPTER, data)


_PAGE_ADAPTERS: dict[Any, TypeAdapter[Page[Any]]] = {Transaction: TRANSACTION_PAGE_ADAPTER}


def page_adapter(item_type: Any) -> TypeAdapter[Page[Any]]:
    """The (cached) validator of `Page[item_type]`."""
    adapter = _PAGE_ADAPTERS.get(item_type)
    if adapter is None:
        adapter = _PAGE_ADAPTERS[item_type] = TypeAdapter(Page[item_type])
    return adapter


def parse_page(data: WireData, item_type: Any = Transaction) -> Page[Any]:
    """Parse a list response (`data`, `hasMore`, `nextCursor`, `totalCount`) of `item_type`."""
    return _validate(page_adapter(item_type), data)
