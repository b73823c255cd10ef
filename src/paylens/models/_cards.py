"""Cards and the parts of a card transaction: merchant and the aggregates of its child events."""

from __future__ import annotations

from ._base import Count, MinorUnits, OpenEnum, UtcDatetime, WireModel
from .enums import CardBrand, CardForm, CardState, CardStateReason

__all__ = [
    "Card",
    "CardMerchant",
    "CardPullSummary",
    "CardRefundSummary",
    "CardSettlementSummary",
]


class CardMerchant(WireModel):
    """The merchant as the card network describes it; `mcc` is the merchant category code."""

    descriptor: str
    mcc: str | None = None
    country: str | None = None


class _CardEventSummary(WireModel):
    count: Count
    total_amount: MinorUnits


class CardPullSummary(_CardEventSummary):
    """Pulls of funds for the authorization: how many, their total, how many still pending."""

    pending_count: Count | None = None


class CardRefundSummary(_CardEventSummary):
    """Refunds reconciled against the authorization: how many and their total (minor units)."""


class CardSettlementSummary(_CardEventSummary):
    """Clearings (settlements) of the authorization: how many and their total (minor units)."""


class Card(WireModel):
    """A card issued to a cardholder (a customer), funded by internal accounts."""

    id: str
    cardholder_id: str
    platform_card_id: str | None = None
    state: OpenEnum[CardState]
    state_reason: OpenEnum[CardStateReason] | None = None
    brand: OpenEnum[CardBrand] | None = None
    form: OpenEnum[CardForm]
    last4: str | None = None
    exp_month: Count | None = None
    exp_year: Count | None = None
    funding_sources: list[str]
    max_spend_per_transaction: MinorUnits | None
    currency: str | None = None
    processor_ref: str | None = None
    issuer_ref: str | None = None
    created_at: UtcDatetime
    updated_at: UtcDatetime
