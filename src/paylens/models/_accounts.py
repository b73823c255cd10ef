"""Accounts: internal accounts (held at the service) and external accounts (bank or wallet)."""

from __future__ import annotations

from typing import Any

from ._account_info import AccountOrWalletInfo, PaymentInstructions
from ._base import OpenEnum, UtcDatetime, WireModel
from ._money import CurrencyAmount
from .enums import (
    BeneficiaryVerificationStatus,
    ExternalAccountStatus,
    InternalAccountStatus,
    InternalAccountType,
    OwnershipType,
)

__all__ = ["ExternalAccount", "InternalAccount"]


class InternalAccount(WireModel):
    """An account held at the service (fiat, crypto or embedded wallet) and how to fund it."""

    id: str
    customer_id: str | None = None
    type: OpenEnum[InternalAccountType]
    status: OpenEnum[InternalAccountStatus]
    balance: CurrencyAmount
    total_balance: CurrencyAmount | None = None
    funding_payment_instructions: list[PaymentInstructions]
    private_enabled: bool | None = None
    created_at: UtcDatetime
    updated_at: UtcDatetime


class ExternalAccount(WireModel):
    """A customer's or the platform's account elsewhere; `account_info` by `accountType`."""

    id: str
    customer_id: str | None = None
    status: OpenEnum[ExternalAccountStatus]
    platform_account_id: str | None = None
    ownership_type: OpenEnum[OwnershipType] | None = None
    currency: str
    default_uma_deposit_account: bool | None = None
    beneficiary_verification_status: OpenEnum[BeneficiaryVerificationStatus] | None = None
    beneficiary_verified_data: dict[str, Any] | None = None
    account_info: AccountOrWalletInfo
