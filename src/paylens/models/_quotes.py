"""Quotes (a priced, expiring offer to move money) and the exchange rates listed for corridors."""

from __future__ import annotations

from typing import Any

from ._account_info import PaymentInstructions
from ._base import MinorUnits, OpenEnum, Rate, UtcDatetime, WireModel
from ._money import Currency
from ._sources import TransactionDestination, TransactionSource
from ._transactions import CounterpartyInformation, OutgoingRateDetails
from .enums import PaymentRail, QuoteStatus

__all__ = ["ExchangeRate", "ExchangeRateFees", "Quote"]


class Quote(WireModel):
    """A quote; totals are ints in minor units of the sending or receiving currency.

    `fees_included` is in the sending currency and already contains `platform_fees_included`.
    `sca_challenge` is present when Strong Customer Authentication must authorize the quote.
    """

    id: str
    status: OpenEnum[QuoteStatus]
    created_at: UtcDatetime
    expires_at: UtcDatetime
    source: TransactionSource
    destination: TransactionDestination
    sending_currency: Currency
    receiving_currency: Currency
    total_sending_amount: MinorUnits
    total_receiving_amount: MinorUnits
    exchange_rate: Rate
    fees_included: MinorUnits
    platform_fees_included: MinorUnits | None = None
    payment_instructions: list[PaymentInstructions] | None = None
    transaction_id: str
    counterparty_information: CounterpartyInformation | None = None
    rate_details: OutgoingRateDetails | None = None
    sca_challenge: dict[str, Any] | None = None


class ExchangeRateFees(WireModel):
    """Fees of a listed rate, in minor units of the sending currency."""

    fixed: MinorUnits | None = None
    total: MinorUnits | None = None


class ExchangeRate(WireModel):
    """One corridor of `GET /exchange-rates`: a sample amount, its limits, rate and fees.

    Amounts are ints in minor units; `exchange_rate` is sending-currency units per receiving
    unit. Rates are cached by the service for about five minutes and include platform fees.
    """

    source_currency: Currency
    destination_currency: Currency
    destination_payment_rail: OpenEnum[PaymentRail]
    sending_amount: MinorUnits
    min_sending_amount: MinorUnits
    max_sending_amount: MinorUnits
    receiving_amount: MinorUnits
    exchange_rate: Rate
    fees: ExchangeRateFees
    updated_at: UtcDatetime
