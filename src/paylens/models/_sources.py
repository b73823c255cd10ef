"""Where money comes from and goes to: the `source` and `destination` of transactions and quotes.

Both are open unions: `sourceType` picks `AccountSource`, `UmaAddressSource` or
`RealtimeFundingSource`; `destinationType` picks `AccountDestination` or `UmaAddressDestination`;
a kind this version does not know becomes `UnknownSource` / `UnknownDestination`, kept whole.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Tag

from ._base import FALLBACK_TAG, OpenEnum, WireModel, tag_by
from .enums import CryptoNetwork, DestinationType, PaymentRail, SourceType

__all__ = [
    "AccountDestination",
    "AccountSource",
    "OnChainTransaction",
    "RealtimeFundingSource",
    "TransactionDestination",
    "TransactionSource",
    "UmaAddressDestination",
    "UmaAddressSource",
    "UnknownDestination",
    "UnknownSource",
]


class OnChainTransaction(WireModel):
    """The on-chain leg of a crypto transfer to or from an external wallet, once settled."""

    transaction_hash: str
    network: OpenEnum[CryptoNetwork]


class _Endpoint(WireModel):
    """What sources and destinations share: the currency (a code) of that side."""

    currency: str | None = None


class AccountSource(_Endpoint):
    """Funds taken from an internal or external account."""

    source_type: OpenEnum[SourceType] = SourceType.ACCOUNT
    account_id: str
    customer_id: str | None = None
    on_chain_transaction: OnChainTransaction | None = None


class UmaAddressSource(_Endpoint):
    source_type: OpenEnum[SourceType] = SourceType.UMA_ADDRESS
    uma_address: str


class RealtimeFundingSource(_Endpoint):
    """Funds pushed in real time from outside (a bank transfer or a crypto deposit)."""

    source_type: OpenEnum[SourceType] = SourceType.REALTIME_FUNDING
    customer_id: str | None = None
    account_holder_name: str | None = None
    account_identifier: str | None = None
    bank_name: str | None = None
    bank_identifier: str | None = None
    payment_rail: OpenEnum[PaymentRail] | None = None
    remittance_information: str | None = None
    end_to_end_id: str | None = None
    trace_number: str | None = None
    crypto_network: str | None = None
    on_chain_transaction: OnChainTransaction | None = None


class UnknownSource(_Endpoint):
    """A `sourceType` this version does not know; its other fields are in `model_extra`."""

    source_type: str


class AccountDestination(_Endpoint):
    """An internal or external account; `payment_rail` is set when the platform chose the rail."""

    destination_type: OpenEnum[DestinationType] = DestinationType.ACCOUNT
    account_id: str
    payment_rail: OpenEnum[PaymentRail] | None = None
    on_chain_transaction: OnChainTransaction | None = None


class UmaAddressDestination(_Endpoint):
    destination_type: OpenEnum[DestinationType] = DestinationType.UMA_ADDRESS
    uma_address: str


class UnknownDestination(_Endpoint):
    """A `destinationType` this version does not know; its other fields are in `model_extra`."""

    destination_type: str


TransactionSource = Annotated[
    Annotated[AccountSource, Tag(SourceType.ACCOUNT)]
    | Annotated[UmaAddressSource, Tag(SourceType.UMA_ADDRESS)]
    | Annotated[RealtimeFundingSource, Tag(SourceType.REALTIME_FUNDING)]
    | Annotated[UnknownSource, Tag(FALLBACK_TAG)],
    tag_by("sourceType", SourceType),
]
"""Source of a transaction or quote, chosen by `sourceType`."""

TransactionDestination = Annotated[
    Annotated[AccountDestination, Tag(DestinationType.ACCOUNT)]
    | Annotated[UmaAddressDestination, Tag(DestinationType.UMA_ADDRESS)]
    | Annotated[UnknownDestination, Tag(FALLBACK_TAG)],
    tag_by("destinationType", DestinationType),
]
"""Destination of a transaction or quote, chosen by `destinationType`."""
