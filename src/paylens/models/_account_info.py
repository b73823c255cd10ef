"""Where to pay: account and wallet details, and the payment instructions that carry them.

`accountOrWalletInfo` (payment instructions) and `accountInfo` (external accounts) are chosen by
`accountType`, grouped here by shape rather than one class per currency:

- `BankAccountInfo`: every `*_ACCOUNT` type (bank, SWIFT, mobile money, QR and link payments);
  the per-currency fields not declared here stay readable in `model_extra`.
- `CryptoWalletInfo`: on-chain wallets (`SPARK_WALLET`, `SOLANA_WALLET`, ..., `BITCOIN_L1`).
- `LightningInfo`: `LIGHTNING` (an invoice, BOLT12 offer or lightning address).
- `EmbeddedWalletInfo`: `EMBEDDED_WALLET` (a payload to sign).
- `UnknownAccountInfo`: any other `accountType` this version does not know, kept whole. (A new
  `*_ACCOUNT` type reads as a `BankAccountInfo`.)
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Tag

from ._base import FALLBACK_TAG, OpenEnum, WireModel, tag_by
from .enums import AccountType, PaymentRail

__all__ = [
    "AccountOrWalletInfo",
    "BankAccountInfo",
    "CryptoWalletInfo",
    "EmbeddedWalletInfo",
    "LightningInfo",
    "PaymentInstructions",
    "UnknownAccountInfo",
]

_CRYPTO_WALLET_TYPES = frozenset(
    {
        AccountType.SPARK_WALLET,
        AccountType.SOLANA_WALLET,
        AccountType.TRON_WALLET,
        AccountType.PLASMA_WALLET,
        AccountType.POLYGON_WALLET,
        AccountType.BASE_WALLET,
        AccountType.ETHEREUM_WALLET,
        AccountType.BITCOIN_L1,
    }
)


class _AccountInfoBase(WireModel):
    """What every account or wallet info has: its `accountType`."""

    account_type: OpenEnum[AccountType]


class BankAccountInfo(_AccountInfoBase):
    """A bank, SWIFT or mobile-money account; which fields are present depends on the currency."""

    account_type: OpenEnum[AccountType]
    payment_rails: list[OpenEnum[PaymentRail]] | None = None
    account_holder_name: str | None = None
    account_number: str | None = None
    routing_number: str | None = None
    iban: str | None = None
    swift_code: str | None = None
    sort_code: str | None = None
    clabe_number: str | None = None
    bank_name: str | None = None
    country: str | None = None
    phone_number: str | None = None
    provider: str | None = None
    reference: str | None = None
    beneficiary: dict[str, Any] | None = None


class CryptoWalletInfo(_AccountInfoBase):
    """An on-chain wallet address and the asset it takes (`USDC`, `USDT`, `BTC`, ...)."""

    account_type: OpenEnum[AccountType]
    address: str
    asset_type: str | None = None
    network: str | None = None
    invoice: str | None = None
    beneficiary: dict[str, Any] | None = None


class LightningInfo(_AccountInfoBase):
    account_type: OpenEnum[AccountType] = AccountType.LIGHTNING
    invoice: str | None = None
    bolt12: str | None = None
    lightning_address: str | None = None


class EmbeddedWalletInfo(_AccountInfoBase):
    account_type: OpenEnum[AccountType] = AccountType.EMBEDDED_WALLET
    payload_to_sign: str | None = None


class UnknownAccountInfo(_AccountInfoBase):
    """An `accountType` this version does not know; every other field is kept in `model_extra`."""

    account_type: str


_WALLET_TAGS = {
    **{kind.value: "crypto_wallet" for kind in _CRYPTO_WALLET_TYPES},
    AccountType.LIGHTNING.value: "lightning",
    AccountType.EMBEDDED_WALLET.value: "embedded_wallet",
}


def _tag_of_other_account_type(account_type: str) -> str:
    # Every `*_ACCOUNT` type of the interface is a bank-style account; so is a new currency's
    # one, read as a `BankAccountInfo` (all of whose fields are optional).
    return "bank" if account_type.endswith("_ACCOUNT") else FALLBACK_TAG


AccountOrWalletInfo = Annotated[
    Annotated[BankAccountInfo, Tag("bank")]
    | Annotated[CryptoWalletInfo, Tag("crypto_wallet")]
    | Annotated[LightningInfo, Tag("lightning")]
    | Annotated[EmbeddedWalletInfo, Tag("embedded_wallet")]
    | Annotated[UnknownAccountInfo, Tag(FALLBACK_TAG)],
    tag_by("accountType", _WALLET_TAGS, _tag_of_other_account_type),
]
"""Account or wallet details, the variant chosen by `accountType` (see the module docstring)."""


class PaymentInstructions(WireModel):
    """How to fund or execute a payment: the account or wallet to pay, and notes."""

    account_or_wallet_info: AccountOrWalletInfo
    instructions_notes: str | None = None
    is_platform_account: bool | None = None
