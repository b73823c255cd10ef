"""Transactions: incoming, outgoing and card, told apart by `type`, plus their parts.

    TransactionBase                 fields every kind shares (id, status, direction, customer)
    ├── PaymentTransactionBase      the common transaction fields of the interface
    │   ├── IncomingTransaction     type INCOMING
    │   └── OutgoingTransaction     type OUTGOING
    └── CardTransaction             type CARD (an authorization and its pulls, clearings, refunds)
    UnknownTransaction              a `type` this version does not know, kept whole

`Transaction` is the open union of the four; parse it with `paylens.models.parse_transaction`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Tag

from ._account_info import PaymentInstructions
from ._base import (
    FALLBACK_TAG,
    Count,
    MinorNumber,
    MinorUnits,
    OpenEnum,
    Rate,
    UtcDatetime,
    WireModel,
    tag_by,
)
from ._cards import CardMerchant, CardPullSummary, CardRefundSummary, CardSettlementSummary
from ._money import CurrencyAmount
from ._sources import TransactionDestination, TransactionSource
from .enums import (
    CardTransactionStatus,
    IncomingTransactionFailureReason,
    OutgoingTransactionFailureReason,
    OutgoingTransactionStatus,
    PaymentRail,
    RailSelectionMode,
    RefundReason,
    RefundStatus,
    TransactionDirection,
    TransactionPendingReason,
    TransactionStatus,
    TransactionType,
)

__all__ = [
    "CardTransaction",
    "CounterpartyInformation",
    "IncomingTransaction",
    "OutgoingRateDetails",
    "OutgoingTransaction",
    "PaymentTransactionBase",
    "ReconciliationInstructions",
    "Refund",
    "Transaction",
    "TransactionBase",
    "UnknownTransaction",
]

CounterpartyInformation = dict[str, Any]
"""Free-form facts about the counterparty, keyed as the service sends them (`FULL_NAME`, ...)."""


class ReconciliationInstructions(WireModel):
    """What to quote with a payment so it matches, and (deprecated) the settlement hash."""

    reference: str | None = None
    transaction_hash: str | None = None


class Refund(WireModel):
    reference: str
    initiated_at: UtcDatetime
    settled_at: UtcDatetime | None = None
    status: OpenEnum[RefundStatus]
    reason: OpenEnum[RefundReason] | None = None


class OutgoingRateDetails(WireModel):
    """How the quoted rate and fees were built. Fees are ints in minor units, rates floats.

    `counterparty_fixed_fee` is in the receiving currency; the service's fixed and variable fee
    amounts are in the sending currency.
    """

    counterparty_multiplier: Rate
    counterparty_fixed_fee: MinorUnits
    grid_api_multiplier: Rate
    grid_api_fixed_fee: MinorUnits
    grid_api_variable_fee_rate: Rate
    grid_api_variable_fee_amount: MinorNumber


class TransactionBase(WireModel):
    """Fields every kind of transaction carries."""

    id: str
    type: str
    status: OpenEnum[TransactionStatus]
    direction: OpenEnum[TransactionDirection]
    customer_id: str
    platform_customer_id: str
    created_at: UtcDatetime | None = None
    updated_at: UtcDatetime | None = None


class PaymentTransactionBase(TransactionBase):
    """The common transaction fields of the interface, shared by incoming and outgoing ones."""

    pending_reason: OpenEnum[TransactionPendingReason] | None = None
    destination: TransactionDestination
    settled_at: UtcDatetime | None = None
    receipt_delivery_confirmed_at: UtcDatetime | None = None
    agent_id: str | None = None
    description: str | None = None
    sent_amount: CurrencyAmount | None = None
    exchange_rate: Rate | None = None
    quote_id: str | None = None
    refund: Refund | None = None
    counterparty_information: CounterpartyInformation | None = None
    received_amount: CurrencyAmount | None = None
    fees: MinorUnits | None = None
    reconciliation_instructions: ReconciliationInstructions | None = None


class IncomingTransaction(PaymentTransactionBase):
    """Money received into a customer's account."""

    type: Literal["INCOMING"] = TransactionType.INCOMING.value
    received_amount: CurrencyAmount
    source: TransactionSource | None = None
    failure_reason: OpenEnum[IncomingTransactionFailureReason] | None = None


class OutgoingTransaction(PaymentTransactionBase):
    """Money sent from a customer's account; `fees` already include `platform_fees`."""

    type: Literal["OUTGOING"] = TransactionType.OUTGOING.value
    status: OpenEnum[OutgoingTransactionStatus]
    source: TransactionSource
    sent_amount: CurrencyAmount
    platform_fees: MinorUnits | None = None
    payment_instructions: list[PaymentInstructions] | None = None
    rate_details: OutgoingRateDetails | None = None
    failure_reason: OpenEnum[OutgoingTransactionFailureReason] | None = None
    payment_rail: OpenEnum[PaymentRail] | None = None
    rail_selection_mode: OpenEnum[RailSelectionMode] | None = None
    expected_settlement_at: UtcDatetime | None = None
    settlement_timeline_seconds: Count | None = None


class CardTransaction(TransactionBase):
    """A card authorization and the pulls, clearings and refunds reconciled against it."""

    type: Literal["CARD"] = TransactionType.CARD.value
    status: OpenEnum[CardTransactionStatus]
    card_id: str | None = None
    issuer_transaction_token: str | None = None
    merchant: CardMerchant
    authorized_amount: CurrencyAmount
    settled_amount: CurrencyAmount | None = None
    refunded_amount: CurrencyAmount | None = None
    account_id: str
    pull_summary: CardPullSummary | None = None
    refund_summary: CardRefundSummary | None = None
    settlement_summary: CardSettlementSummary | None = None
    authorized_at: UtcDatetime
    last_event_at: UtcDatetime | None = None
    created_at: UtcDatetime
    updated_at: UtcDatetime


class UnknownTransaction(WireModel):
    """A transaction `type` this version does not know (say a future `STABLECOIN`).

    Only `type`, `id` and `status` are typed, and required as of every transaction (a body
    without them is not a transaction, whatever its type); every other field is kept in
    `model_extra` and written back unchanged by `to_wire()`.
    """

    type: str
    id: str
    status: OpenEnum[TransactionStatus]


Transaction = Annotated[
    Annotated[IncomingTransaction, Tag(TransactionType.INCOMING)]
    | Annotated[OutgoingTransaction, Tag(TransactionType.OUTGOING)]
    | Annotated[CardTransaction, Tag(TransactionType.CARD)]
    | Annotated[UnknownTransaction, Tag(FALLBACK_TAG)],
    tag_by("type", TransactionType),
]
"""Any transaction, the variant chosen by `type`; unknown types become `UnknownTransaction`."""
