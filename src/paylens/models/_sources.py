"""Where money comes from and goes to: the `source` and `destination` of transactions and quotes.

Both are open unions: `sourceType` picks `AccountSource`, `UmaAddressSource` or
`RealtimeFundingSource`; `destinationType` picks `AccountDestination` or `UmaAddressDestination`;
a kind this version does not know becomes `UnknownSource` / `UnknownDestination`, kept whole.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Tag

from ._base import FALLBACK_TAG, OpenEnum, WireModel, tag_by
from ._enums import CryptoNetwork, DestinationType, PaymentRail, SourceType

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


class _SourceBase(WireModel):
    _always_sent: ClassVar[frozenset[str]] = frozenset({"source_type"})

    currency: str | None = None


class AccountSource(_SourceBase):
    """Funds taken from an internal or external account."""

    source_type: OpenEnum[SourceType] = SourceType.ACCOUNT
    account_id: str
    customer_id: str | None = None
    on_chain_transaction: OnChainTransaction | None = None


class UmaAddressSource(_SourceBase):
    source_type: OpenEnum[SourceType] = SourceType.UMA_ADDRESS
    uma_address: str


class RealtimeFundingSource(_SourceBase):
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


class UnknownSource(_SourceBase):
    """A `sourceType` this version does not know; its other fields are in `model_extra`."""

    source_type: str


class _DestinationBase(WireModel):
    _always_sent: ClassVar[frozenset[str]] = frozenset({"destination_type"})

    currency: str | None = None


class AccountDestination(_DestinationBase):
    """An internal or external account; `payment_rail` is set when the platform chose the rail."""

    destination_type: OpenEnum[DestinationType] = DestinationType.ACCOUNT
    account_id: str
    payment_rail: OpenEnum[PaymentRail] | None = None
    on_chain_transaction: OnChainTransaction | None = None


class UmaAddressDestination(_DestinationBase):
    destination_type: OpenEnum[DestinationType] = DestinationType.UMA_ADDRESS
    uma_address: str


class UnknownDestination(_DestinationBase):
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
