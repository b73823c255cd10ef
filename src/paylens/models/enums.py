"""The interface's enumerations, as `StrEnum`s.

Fields use them through `OpenEnum[...]`, so a value added by a newer service version is kept as
a plain `str` instead of failing: compare with `==` against members or strings, never `is`.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "COARSE_PAYOUT_FAILURE_REASON",
    "GRANULAR_PAYOUT_FAILURE_REASONS",
    "REMOVED_OUTGOING_FAILURE_REASONS",
    "AccountType",
    "AuthMethodType",
    "BeneficiaryVerificationStatus",
    "CardBrand",
    "CardForm",
    "CardState",
    "CardStateReason",
    "CardTransactionStatus",
    "CryptoNetwork",
    "CustomerType",
    "DestinationType",
    "ExternalAccountStatus",
    "FeeType",
    "IncomingTransactionFailureReason",
    "InternalAccountStatus",
    "InternalAccountType",
    "KycStatus",
    "OutgoingTransactionFailureReason",
    "OutgoingTransactionStatus",
    "OwnershipType",
    "PaymentRail",
    "QuoteStatus",
    "RailSelectionMode",
    "RefundReason",
    "RefundStatus",
    "SourceType",
    "TransactionDirection",
    "TransactionPendingReason",
    "TransactionStatus",
    "TransactionType",
]


class TransactionType(StrEnum):
    INCOMING = "INCOMING"
    OUTGOING = "OUTGOING"
    CARD = "CARD"


class TransactionStatus(StrEnum):
    """Status of a transaction in general (incoming ones use all of these)."""

    CREATED = "CREATED"
    PENDING = "PENDING"
    PENDING_AUTHORIZATION = "PENDING_AUTHORIZATION"
    PROCESSING = "PROCESSING"
    COMPLETED = "COMPLETED"
    REJECTED = "REJECTED"
    FAILED = "FAILED"
    REFUNDED = "REFUNDED"
    EXPIRED = "EXPIRED"


class OutgoingTransactionStatus(StrEnum):
    PENDING = "PENDING"
    PENDING_AUTHORIZATION = "PENDING_AUTHORIZATION"
    EXPIRED = "EXPIRED"
    PROCESSING = "PROCESSING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"


class CardTransactionStatus(StrEnum):
    AUTHORIZED = "AUTHORIZED"
    PARTIALLY_SETTLED = "PARTIALLY_SETTLED"
    SETTLED = "SETTLED"
    REFUNDED = "REFUNDED"
    EXCEPTION = "EXCEPTION"


class TransactionPendingReason(StrEnum):
    COUNTERPARTY_DECLARATION_REQUIRED = "COUNTERPARTY_DECLARATION_REQUIRED"
    WALLET_VERIFICATION_REQUIRED = "WALLET_VERIFICATION_REQUIRED"
    COUNTERPARTY_INFORMATION_REQUIRED = "COUNTERPARTY_INFORMATION_REQUIRED"
    COMPLIANCE_REVIEW = "COMPLIANCE_REVIEW"


class TransactionDirection(StrEnum):
    CREDIT = "CREDIT"
    DEBIT = "DEBIT"


class PaymentRail(StrEnum):
    ACH = "ACH"
    ACH_COLOMBIA = "ACH_COLOMBIA"
    BANK_TRANSFER = "BANK_TRANSFER"
    BRE_B = "BRE_B"
    CIPS = "CIPS"
    FAST = "FAST"
    FASTER_PAYMENTS = "FASTER_PAYMENTS"
    FEDNOW = "FEDNOW"
    INSTAPAY = "INSTAPAY"
    MOBILE_MONEY = "MOBILE_MONEY"
    NEFT = "NEFT"
    PAYNOW = "PAYNOW"
    PESONET = "PESONET"
    PIX = "PIX"
    RTGS = "RTGS"
    RTP = "RTP"
    SEPA = "SEPA"
    SEPA_INSTANT = "SEPA_INSTANT"
    SPEI = "SPEI"
    SWIFT = "SWIFT"
    UNIONPAY = "UNIONPAY"
    UPI = "UPI"
    WIRE = "WIRE"


class RailSelectionMode(StrEnum):
    """`MANUAL` when the platform chose the rail on the destination, `AUTO` when the service did."""

    AUTO = "AUTO"
    MANUAL = "MANUAL"


class IncomingTransactionFailureReason(StrEnum):
    LNURLP_FAILED = "LNURLP_FAILED"
    PAY_REQUEST_FAILED = "PAY_REQUEST_FAILED"
    PAYMENT_APPROVAL_WEBHOOK_ERROR = "PAYMENT_APPROVAL_WEBHOOK_ERROR"
    PAYMENT_APPROVAL_TIMED_OUT = "PAYMENT_APPROVAL_TIMED_OUT"
    OFFRAMP_FAILED = "OFFRAMP_FAILED"
    MISSING_MANDATORY_PAYEE_DATA = "MISSING_MANDATORY_PAYEE_DATA"
    QUOTE_EXPIRED = "QUOTE_EXPIRED"
    QUOTE_EXECUTION_FAILED = "QUOTE_EXECUTION_FAILED"
    COMPLIANCE_REJECTED = "COMPLIANCE_REJECTED"
    COLLECTION_FAILED = "COLLECTION_FAILED"


class OutgoingTransactionFailureReason(StrEnum):
    """Current reasons, plus the four removed ones that old records still carry.

    See `REMOVED_OUTGOING_FAILURE_REASONS`, `GRANULAR_PAYOUT_FAILURE_REASONS` and
    `COARSE_PAYOUT_FAILURE_REASON`.
    """

    QUOTE_EXPIRED = "QUOTE_EXPIRED"
    QUOTE_RATE_UNAVAILABLE = "QUOTE_RATE_UNAVAILABLE"
    QUOTE_EXECUTION_FAILED = "QUOTE_EXECUTION_FAILED"
    FUNDING_AMOUNT_MISMATCH = "FUNDING_AMOUNT_MISMATCH"
    SCA_NOT_COMPLETED = "SCA_NOT_COMPLETED"
    PAYOUT_RETURNED = "PAYOUT_RETURNED"
    LIMIT_EXCEEDED = "LIMIT_EXCEEDED"
    ACCOUNT_CANNOT_RECEIVE = "ACCOUNT_CANNOT_RECEIVE"
    ACCOUNT_INVALID = "ACCOUNT_INVALID"
    COMPLIANCE_REJECTED = "COMPLIANCE_REJECTED"
    LIGHTNING_PAYMENT_FAILED = "LIGHTNING_PAYMENT_FAILED"
    COUNTERPARTY_POST_TX_FAILED = "COUNTERPARTY_POST_TX_FAILED"
    # Removed by the service (no longer returned); kept so that old data still reads.
    EXECUTION_FAILED_POST_DEBIT = "EXECUTION_FAILED_POST_DEBIT"
    SETTLEMENT_FAILED = "SETTLEMENT_FAILED"
    TIMEOUT = "TIMEOUT"
    MANUAL_REFUND = "MANUAL_REFUND"


REMOVED_OUTGOING_FAILURE_REASONS: frozenset[str] = frozenset(
    {
        OutgoingTransactionFailureReason.EXECUTION_FAILED_POST_DEBIT,
        OutgoingTransactionFailureReason.SETTLEMENT_FAILED,
        OutgoingTransactionFailureReason.TIMEOUT,
        OutgoingTransactionFailureReason.MANUAL_REFUND,
    }
)
"""Outgoing failure reasons the service no longer returns: the first two were folded into
`QUOTE_EXECUTION_FAILED`; a manual refund now shows on the refund object."""

GRANULAR_PAYOUT_FAILURE_REASONS: frozenset[str] = frozenset(
    {
        OutgoingTransactionFailureReason.PAYOUT_RETURNED,
        OutgoingTransactionFailureReason.LIMIT_EXCEEDED,
        OutgoingTransactionFailureReason.ACCOUNT_CANNOT_RECEIVE,
        OutgoingTransactionFailureReason.ACCOUNT_INVALID,
        OutgoingTransactionFailureReason.COMPLIANCE_REJECTED,
    }
)
"""Reasons returned when a payout partner rejects or fails a payment and says why."""

COARSE_PAYOUT_FAILURE_REASON = OutgoingTransactionFailureReason.COUNTERPARTY_POST_TX_FAILED
"""Fallback payout failure used only when no granular reason is available."""


class SourceType(StrEnum):
    ACCOUNT = "ACCOUNT"
    UMA_ADDRESS = "UMA_ADDRESS"
    REALTIME_FUNDING = "REALTIME_FUNDING"


class DestinationType(StrEnum):
    ACCOUNT = "ACCOUNT"
    UMA_ADDRESS = "UMA_ADDRESS"


class CryptoNetwork(StrEnum):
    BITCOIN = "BITCOIN"
    ETHEREUM = "ETHEREUM"
    SOLANA = "SOLANA"
    BASE = "BASE"
    POLYGON = "POLYGON"
    TRON = "TRON"
    PLASMA = "PLASMA"
    SPARK = "SPARK"


class RefundStatus(StrEnum):
    PENDING = "PENDING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"


class RefundReason(StrEnum):
    TRANSACTION_FAILED = "TRANSACTION_FAILED"
    USER_CANCELLATION = "USER_CANCELLATION"
    TIMEOUT = "TIMEOUT"


class AccountType(StrEnum):
    """`accountType` of payment instructions and external accounts: bank accounts, wallets."""

    USD_ACCOUNT = "USD_ACCOUNT"
    BRL_ACCOUNT = "BRL_ACCOUNT"
    MXN_ACCOUNT = "MXN_ACCOUNT"
    DKK_ACCOUNT = "DKK_ACCOUNT"
    EUR_ACCOUNT = "EUR_ACCOUNT"
    INR_ACCOUNT = "INR_ACCOUNT"
    NGN_ACCOUNT = "NGN_ACCOUNT"
    CAD_ACCOUNT = "CAD_ACCOUNT"
    GBP_ACCOUNT = "GBP_ACCOUNT"
    HKD_ACCOUNT = "HKD_ACCOUNT"
    IDR_ACCOUNT = "IDR_ACCOUNT"
    MYR_ACCOUNT = "MYR_ACCOUNT"
    PHP_ACCOUNT = "PHP_ACCOUNT"
    SGD_ACCOUNT = "SGD_ACCOUNT"
    THB_ACCOUNT = "THB_ACCOUNT"
    VND_ACCOUNT = "VND_ACCOUNT"
    AED_ACCOUNT = "AED_ACCOUNT"
    KES_ACCOUNT = "KES_ACCOUNT"
    MWK_ACCOUNT = "MWK_ACCOUNT"
    RWF_ACCOUNT = "RWF_ACCOUNT"
    TZS_ACCOUNT = "TZS_ACCOUNT"
    UGX_ACCOUNT = "UGX_ACCOUNT"
    XOF_ACCOUNT = "XOF_ACCOUNT"
    ZAR_ACCOUNT = "ZAR_ACCOUNT"
    ZMW_ACCOUNT = "ZMW_ACCOUNT"
    BWP_ACCOUNT = "BWP_ACCOUNT"
    XAF_ACCOUNT = "XAF_ACCOUNT"
    BDT_ACCOUNT = "BDT_ACCOUNT"
    ARS_ACCOUNT = "ARS_ACCOUNT"
    COP_ACCOUNT = "COP_ACCOUNT"
    EGP_ACCOUNT = "EGP_ACCOUNT"
    GHS_ACCOUNT = "GHS_ACCOUNT"
    GTQ_ACCOUNT = "GTQ_ACCOUNT"
    HTG_ACCOUNT = "HTG_ACCOUNT"
    JMD_ACCOUNT = "JMD_ACCOUNT"
    PKR_ACCOUNT = "PKR_ACCOUNT"
    SLV_ACCOUNT = "SLV_ACCOUNT"
    SWIFT_ACCOUNT = "SWIFT_ACCOUNT"
    CNY_ACCOUNT = "CNY_ACCOUNT"
    ILS_ACCOUNT = "ILS_ACCOUNT"
    SPARK_WALLET = "SPARK_WALLET"
    LIGHTNING = "LIGHTNING"
    SOLANA_WALLET = "SOLANA_WALLET"
    TRON_WALLET = "TRON_WALLET"
    PLASMA_WALLET = "PLASMA_WALLET"
    POLYGON_WALLET = "POLYGON_WALLET"
    BASE_WALLET = "BASE_WALLET"
    ETHEREUM_WALLET = "ETHEREUM_WALLET"
    BITCOIN_L1 = "BITCOIN_L1"
    EMBEDDED_WALLET = "EMBEDDED_WALLET"


class CardState(StrEnum):
    PENDING_KYC = "PENDING_KYC"
    PROCESSING = "PROCESSING"
    ACTIVE = "ACTIVE"
    FROZEN = "FROZEN"
    CLOSED = "CLOSED"


class CardStateReason(StrEnum):
    """Why a card is in its state. The service's own closure reason has no member here on
    purpose (its wire value carries the upstream product name); it still reads, as a `str`."""

    ISSUER_REJECTED = "ISSUER_REJECTED"
    CLOSED_BY_PLATFORM = "CLOSED_BY_PLATFORM"


class CardBrand(StrEnum):
    VISA = "VISA"
    MASTERCARD = "MASTERCARD"


class CardForm(StrEnum):
    VIRTUAL = "VIRTUAL"


class CustomerType(StrEnum):
    INDIVIDUAL = "INDIVIDUAL"
    BUSINESS = "BUSINESS"


class KycStatus(StrEnum):
    """Identity verification status; the same values serve `kycStatus` and `kybStatus`."""

    UNVERIFIED = "UNVERIFIED"
    PENDING = "PENDING"
    APPROVED = "APPROVED"
    REJECTED = "REJECTED"
    HOLD = "HOLD"


class AuthMethodType(StrEnum):
    PASSKEY = "PASSKEY"
    OAUTH = "OAUTH"
    EMAIL_OTP = "EMAIL_OTP"
    SMS_OTP = "SMS_OTP"


class InternalAccountType(StrEnum):
    INTERNAL_FIAT = "INTERNAL_FIAT"
    INTERNAL_CRYPTO = "INTERNAL_CRYPTO"
    EMBEDDED_WALLET = "EMBEDDED_WALLET"


class InternalAccountStatus(StrEnum):
    PENDING = "PENDING"
    ACTIVE = "ACTIVE"
    CLOSED = "CLOSED"
    FROZEN = "FROZEN"
    FAILED = "FAILED"


class ExternalAccountStatus(StrEnum):
    PENDING = "PENDING"
    ACTIVE = "ACTIVE"
    PENDING_OWNERSHIP_VERIFICATION = "PENDING_OWNERSHIP_VERIFICATION"
    UNVERIFIED = "UNVERIFIED"
    UNDER_REVIEW = "UNDER_REVIEW"
    INACTIVE = "INACTIVE"


class OwnershipType(StrEnum):
    FIRST_PARTY = "FIRST_PARTY"
    THIRD_PARTY = "THIRD_PARTY"


class BeneficiaryVerificationStatus(StrEnum):
    MATCHED = "MATCHED"
    PARTIAL_MATCH = "PARTIAL_MATCH"
    NOT_MATCHED = "NOT_MATCHED"
    UNSUPPORTED = "UNSUPPORTED"
    CHECKED_BY_RECEIVING_FI = "CHECKED_BY_RECEIVING_FI"
    PENDING = "PENDING"


class QuoteStatus(StrEnum):
    PENDING = "PENDING"
    PENDING_AUTHORIZATION = "PENDING_AUTHORIZATION"
    PROCESSING = "PROCESSING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    EXPIRED = "EXPIRED"


class FeeType(StrEnum):
    CROSS_CURRENCY_TRANSACTION = "CROSS_CURRENCY_TRANSACTION"
