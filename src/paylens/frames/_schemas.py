"""The declared schema of every warehouse table: one `Column` per field, its Arrow type and
the path that reads it from a wire record. Money is int64 minor units beside its currency code
and decimals; timestamps are UTC; enums are strings (unknown values kept); every row also keeps
its record's raw JSON, so a field can be surfaced later without a re-pull."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

UTC_TIMESTAMP = pa.timestamp("us", tz="UTC")
STRINGS = pa.list_(pa.string())

Path = tuple[str, ...]


@dataclass(frozen=True)
class First:
    """The first present value of several paths (a coalesce)."""

    paths: tuple[Path, ...]


@dataclass(frozen=True)
class ByType:
    """A path chosen by the record's `type` (the amount that is "the" amount of each kind)."""

    paths: dict[str, Path]


@dataclass(frozen=True)
class Column:
    """A table column: its name, Arrow type, and where its value is in the wire record."""

    name: str
    type: pa.DataType
    path: Path | First | ByType

    def paths(self) -> list[Path]:
        if isinstance(self.path, First):
            return list(self.path.paths)
        if isinstance(self.path, ByType):
            return [("type",), *self.path.paths.values()]
        return [self.path]


def _money(prefix: str, wire: str) -> list[Column]:
    """`<prefix>_minor`, `<prefix>_currency`, `<prefix>_decimals` from a CurrencyAmount field."""
    return [
        Column(f"{prefix}_minor", pa.int64(), (wire, "amount")),
        Column(f"{prefix}_currency", pa.string(), (wire, "currency", "code")),
        # the interface bounds `decimals` below only (>= 0): int16, not int8
        Column(f"{prefix}_decimals", pa.int16(), (wire, "currency", "decimals")),
    ]


_HEADLINE = {"OUTGOING": "sentAmount", "INCOMING": "receivedAmount", "CARD": "authorizedAmount"}


def _headline(*tail: str) -> ByType:
    return ByType({kind: (field, *tail) for kind, field in _HEADLINE.items()})


TRANSACTIONS = [
    Column("id", pa.string(), ("id",)),
    Column("type", pa.string(), ("type",)),
    Column("status", pa.string(), ("status",)),
    Column("direction", pa.string(), ("direction",)),
    Column("customer_id", pa.string(), ("customerId",)),
    Column("platform_customer_id", pa.string(), ("platformCustomerId",)),
    Column("created_at", UTC_TIMESTAMP, ("createdAt",)),
    Column("updated_at", UTC_TIMESTAMP, ("updatedAt",)),
    Column("settled_at", UTC_TIMESTAMP, ("settledAt",)),
    Column("pending_reason", pa.string(), ("pendingReason",)),
    Column("failure_reason", pa.string(), ("failureReason",)),
    Column("amount_minor", pa.int64(), _headline("amount")),
    Column("currency", pa.string(), _headline("currency", "code")),
    Column("decimals", pa.int16(), _headline("currency", "decimals")),
    *_money("sent_amount", "sentAmount"),
    *_money("received_amount", "receivedAmount"),
    Column("exchange_rate", pa.float64(), ("exchangeRate",)),
    Column("fees_minor", pa.int64(), ("fees",)),
    Column("payment_rail", pa.string(), First((("paymentRail",), ("source", "paymentRail")))),
    Column("source_type", pa.string(), ("source", "sourceType")),
    Column("source_account_id", pa.string(), ("source", "accountId")),
    Column("destination_type", pa.string(), ("destination", "destinationType")),
    Column("destination_account_id", pa.string(), ("destination", "accountId")),
    Column("reference", pa.string(), ("reconciliationInstructions", "reference")),
    Column("quote_id", pa.string(), ("quoteId",)),
    Column("agent_id", pa.string(), ("agentId",)),
    Column("description", pa.string(), ("description",)),
    Column("receipt_delivery_confirmed_at", UTC_TIMESTAMP, ("receiptDeliveryConfirmedAt",)),
    Column("refund_status", pa.string(), ("refund", "status")),
    Column("refund_reason", pa.string(), ("refund", "reason")),
    Column("card_id", pa.string(), ("cardId",)),
]

OUTGOING_FEES = [
    Column("id", pa.string(), ("id",)),
    Column("status", pa.string(), ("status",)),
    Column("customer_id", pa.string(), ("customerId",)),
    Column("created_at", UTC_TIMESTAMP, ("createdAt",)),
    Column("settled_at", UTC_TIMESTAMP, ("settledAt",)),
    *_money("sent_amount", "sentAmount"),
    *_money("received_amount", "receivedAmount"),
    Column("exchange_rate", pa.float64(), ("exchangeRate",)),
    Column("fees_minor", pa.int64(), ("fees",)),
    Column("platform_fees_minor", pa.int64(), ("platformFees",)),
    Column("counterparty_multiplier", pa.float64(), ("rateDetails", "counterpartyMultiplier")),
    Column("counterparty_fixed_fee_minor", pa.int64(), ("rateDetails", "counterpartyFixedFee")),
    Column("grid_api_multiplier", pa.float64(), ("rateDetails", "gridApiMultiplier")),
    Column("grid_api_fixed_fee_minor", pa.int64(), ("rateDetails", "gridApiFixedFee")),
    Column("grid_api_variable_fee_rate", pa.float64(), ("rateDetails", "gridApiVariableFeeRate")),
    Column(
        "grid_api_variable_fee_amount_minor",
        pa.int64(),
        ("rateDetails", "gridApiVariableFeeAmount"),
    ),
    Column("payment_rail", pa.string(), ("paymentRail",)),
    Column("rail_selection_mode", pa.string(), ("railSelectionMode",)),
    Column("expected_settlement_at", UTC_TIMESTAMP, ("expectedSettlementAt",)),
    Column("settlement_timeline_seconds", pa.int64(), ("settlementTimelineSeconds",)),
    Column("failure_reason", pa.string(), ("failureReason",)),
]

CARD_TRANSACTIONS = [
    Column("id", pa.string(), ("id",)),
    Column("card_id", pa.string(), ("cardId",)),
    Column("account_id", pa.string(), ("accountId",)),
    Column("customer_id", pa.string(), ("customerId",)),
    Column("platform_customer_id", pa.string(), ("platformCustomerId",)),
    Column("status", pa.string(), ("status",)),
    Column("direction", pa.string(), ("direction",)),
    Column("issuer_transaction_token", pa.string(), ("issuerTransactionToken",)),
    Column("merchant_descriptor", pa.string(), ("merchant", "descriptor")),
    Column("merchant_mcc", pa.string(), ("merchant", "mcc")),
    Column("merchant_country", pa.string(), ("merchant", "country")),
    *_money("authorized_amount", "authorizedAmount"),
    *_money("settled_amount", "settledAmount"),
    *_money("refunded_amount", "refundedAmount"),
    Column("pull_count", pa.int64(), ("pullSummary", "count")),
    Column("pull_total_minor", pa.int64(), ("pullSummary", "totalAmount")),
    Column("pull_pending_count", pa.int64(), ("pullSummary", "pendingCount")),
    Column("settlement_count", pa.int64(), ("settlementSummary", "count")),
    Column("settlement_total_minor", pa.int64(), ("settlementSummary", "totalAmount")),
    Column("refund_count", pa.int64(), ("refundSummary", "count")),
    Column("refund_total_minor", pa.int64(), ("refundSummary", "totalAmount")),
    Column("authorized_at", UTC_TIMESTAMP, ("authorizedAt",)),
    Column("last_event_at", UTC_TIMESTAMP, ("lastEventAt",)),
    Column("created_at", UTC_TIMESTAMP, ("createdAt",)),
    Column("updated_at", UTC_TIMESTAMP, ("updatedAt",)),
]

PAYMENT_INSTRUCTIONS = [
    Column("transaction_id", pa.string(), ("transactionId",)),
    Column("position", pa.int32(), ("position",)),
    Column("account_type", pa.string(), ("accountOrWalletInfo", "accountType")),
    Column("payment_rails", STRINGS, ("accountOrWalletInfo", "paymentRails")),
    Column("bank_name", pa.string(), ("accountOrWalletInfo", "bankName")),
    Column("reference", pa.string(), ("accountOrWalletInfo", "reference")),
    Column("asset_type", pa.string(), ("accountOrWalletInfo", "assetType")),
    Column("address", pa.string(), ("accountOrWalletInfo", "address")),
    Column("instructions_notes", pa.string(), ("instructionsNotes",)),
    Column("is_platform_account", pa.bool_(), ("isPlatformAccount",)),
]

CARDS = [
    Column("id", pa.string(), ("id",)),
    Column("cardholder_id", pa.string(), ("cardholderId",)),
    Column("platform_card_id", pa.string(), ("platformCardId",)),
    Column("state", pa.string(), ("state",)),
    Column("state_reason", pa.string(), ("stateReason",)),
    Column("brand", pa.string(), ("brand",)),
    Column("form", pa.string(), ("form",)),
    Column("last4", pa.string(), ("last4",)),
    Column("exp_month", pa.int8(), ("expMonth",)),
    Column("exp_year", pa.int64(), ("expYear",)),  # "four digits", but not bounded
    Column("currency", pa.string(), ("currency",)),
    Column("max_spend_per_transaction_minor", pa.int64(), ("maxSpendPerTransaction",)),
    Column("funding_sources", STRINGS, ("fundingSources",)),
    Column("created_at", UTC_TIMESTAMP, ("createdAt",)),
    Column("updated_at", UTC_TIMESTAMP, ("updatedAt",)),
]

CUSTOMERS = [
    Column("id", pa.string(), ("id",)),
    Column("platform_customer_id", pa.string(), ("platformCustomerId",)),
    Column("customer_type", pa.string(), ("customerType",)),
    Column("region", pa.string(), ("region",)),
    Column("email", pa.string(), ("email",)),
    Column("uma_address", pa.string(), ("umaAddress",)),
    Column("currencies", STRINGS, ("currencies",)),
    Column("kyc_status", pa.string(), First((("kycStatus",), ("kybStatus",)))),
    Column("full_name", pa.string(), ("fullName",)),
    Column("is_deleted", pa.bool_(), ("isDeleted",)),
    Column("created_at", UTC_TIMESTAMP, ("createdAt",)),
    Column("updated_at", UTC_TIMESTAMP, ("updatedAt",)),
]

INTERNAL_ACCOUNTS = [
    Column("id", pa.string(), ("id",)),
    Column("customer_id", pa.string(), ("customerId",)),
    Column("type", pa.string(), ("type",)),
    Column("status", pa.string(), ("status",)),
    *_money("balance", "balance"),
    Column("total_balance_minor", pa.int64(), ("totalBalance", "amount")),
    Column("private_enabled", pa.bool_(), ("privateEnabled",)),
    Column("created_at", UTC_TIMESTAMP, ("createdAt",)),
    Column("updated_at", UTC_TIMESTAMP, ("updatedAt",)),
]

EXTERNAL_ACCOUNTS = [
    Column("id", pa.string(), ("id",)),
    Column("customer_id", pa.string(), ("customerId",)),
    Column("status", pa.string(), ("status",)),
    Column("currency", pa.string(), ("currency",)),
    Column("platform_account_id", pa.string(), ("platformAccountId",)),
    Column("ownership_type", pa.string(), ("ownershipType",)),
    Column("account_type", pa.string(), ("accountInfo", "accountType")),
    Column("beneficiary_verification_status", pa.string(), ("beneficiaryVerificationStatus",)),
]

#: Every record table, by name; each also gets `raw` (the record's JSON) when stored.
TABLES: dict[str, list[Column]] = {
    "transactions": TRANSACTIONS,
    "outgoing_fees": OUTGOING_FEES,
    "card_transactions": CARD_TRANSACTIONS,
    "payment_instructions": PAYMENT_INSTRUCTIONS,
    "cards": CARDS,
    "customers": CUSTOMERS,
    "internal_accounts": INTERNAL_ACCOUNTS,
    "external_accounts": EXTERNAL_ACCOUNTS,
}

#: Tables whose rows each keep the raw JSON of their record.
WITH_RAW = frozenset(
    {"transactions", "cards", "customers", "internal_accounts", "external_accounts"}
)


def arrow_schema(table: str) -> pa.Schema:
    """The Arrow schema of a table, `raw` included where the table keeps it."""
    fields = [pa.field(c.name, c.type) for c in TABLES[table]]
    if table in WITH_RAW:
        fields.append(pa.field("raw", pa.string()))
    return pa.schema(fields)
