"""The platform's configuration (`GET /config`), including its fee configurations."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ._base import Count, MinorUnits, OpenEnum, UtcDatetime, WireModel
from .enums import FeeType, TransactionType

__all__ = ["FeeConfig", "FixedFee", "PlatformConfig", "PlatformCurrencyConfig"]


class FixedFee(WireModel):
    """A fixed fee: `amount` in minor units of `currency` (a currency code)."""

    amount: MinorUnits
    currency: str


class FeeConfig(WireModel):
    """The platform's fee on cross-currency transactions: a rate in basis points and/or fixed."""

    fee_type: OpenEnum[FeeType]
    source_currency: str
    variable_fee_bps: Count
    fixed_fee: FixedFee


class PlatformCurrencyConfig(WireModel):
    """Limits (minor units) and required counterparty fields for one supported currency."""

    currency_code: str
    min_amount: MinorUnits
    max_amount: MinorUnits
    required_counterparty_fields: list[dict[str, Any]]
    provider_required_customer_fields: list[str] | None = None
    provider_required_counterparty_customer_fields: list[str] | None = None
    enabled_transaction_types: list[OpenEnum[TransactionType]]


class PlatformConfig(WireModel):
    """Platform settings: UMA domain, webhook endpoint, currencies, wallet and fee settings."""

    id: str | None = None
    uma_domain: str | None = None
    proxy_uma_subdomain: str | None = None
    webhook_endpoint: str | None = None
    supported_currencies: list[PlatformCurrencyConfig] | None = None
    is_regulated_financial_institution: bool | None = None
    embedded_wallet_config: dict[str, Any] | None = None
    card_tokenization_2fa_config: dict[str, Any] | None = Field(
        default=None, alias="cardTokenization2faConfig"
    )
    fee_configs: list[FeeConfig] | None = None
    created_at: UtcDatetime | None = None
    updated_at: UtcDatetime | None = None
