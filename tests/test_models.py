"""Tests of `paylens.models`: wire round trips, forward compatibility, exact money, secrets.

The example bodies are written by hand in the interface's shapes; where the shared contract
validator is available they are also checked against the interface description.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from paylens.models import (
    COARSE_PAYOUT_FAILURE_REASON,
    ERROR_CODES,
    GRANULAR_PAYOUT_FAILURE_REASONS,
    REMOVED_OUTGOING_FAILURE_REASONS,
    TRANSACTION_ADAPTER,
    TRANSACTION_PAGE_ADAPTER,
    AccountDestination,
    AccountSource,
    AccountType,
    AuthMethod,
    AuthSession,
    BankAccountInfo,
    BusinessCustomer,
    Card,
    CardState,
    CardTransaction,
    CryptoWalletInfo,
    Customer,
    ErrorBody,
    ExchangeRate,
    ExternalAccount,
    FieldError,
    IncomingTransaction,
    IndividualCustomer,
    InternalAccount,
    LightningInfo,
    OutgoingTransaction,
    OutgoingTransactionFailureReason,
    OutgoingTransactionStatus,
    Page,
    PasskeyAuthChallenge,
    PaymentRail,
    PlatformConfig,
    Quote,
    RailSelectionMode,
    RealtimeFundingSource,
    Session,
    SignedRetryChallenge,
    TransactionStatus,
    UnknownAccountInfo,
    UnknownCustomer,
    UnknownDestination,
    UnknownSource,
    UnknownTransaction,
    WalletOperationProcessing,
    parse_customer,
    parse_page,
    parse_transaction,
)

from ._helpers import contract_errors

# --- example bodies, shaped per the interface -------------------------------------------------

USD = {"code": "USD", "name": "United States Dollar", "symbol": "$", "decimals": 2}
EUR = {"code": "EUR", "name": "Euro", "symbol": "€", "decimals": 2}
BTC = {"code": "BTC", "name": "Bitcoin", "symbol": "₿", "decimals": 8}
STAMP = "2025-08-15T14:25:18Z"


def outgoing_body() -> dict[str, Any]:
    return {
        "id": "Transaction:019542f5-b3e7-1d02-0000-000000000004",
        "status": "PROCESSING",
        "type": "OUTGOING",
        "direction": "DEBIT",
        "source": {
            "sourceType": "ACCOUNT",
            "accountId": "InternalAccount:019542f5-b3e7-1d02-0000-000000000002",
            "currency": "USD",
        },
        "destination": {
            "destinationType": "ACCOUNT",
            "accountId": "ExternalAccount:019542f5-b3e7-1d02-0000-000000000009",
            "currency": "EUR",
            "paymentRail": "SEPA_INSTANT",
        },
        "customerId": "Customer:019542f5-b3e7-1d02-0000-000000000001",
        "platformCustomerId": "18d3e5f7b4a9c2",
        "sentAmount": {"amount": 10550, "currency": USD},
        "receivedAmount": {"amount": 9706, "currency": EUR},
        "exchangeRate": 1.087,
        "fees": 125,
        "platformFees": 25,
        "quoteId": "Quote:019542f5-b3e7-1d02-0000-000000000006",
        "description": "Invoice 2025-0815",
        "createdAt": STAMP,
        "updatedAt": "2025-08-15T14:25:19.250Z",
        "counterpartyInformation": {"FULL_NAME": "Jane Receiver", "NATIONALITY": "DE"},
        "reconciliationInstructions": {"reference": "REF-123456789"},
        "paymentInstructions": [
            {
                "accountOrWalletInfo": {
                    "accountType": "USD_ACCOUNT",
                    "accountNumber": "123456789",
                    "routingNumber": "021000021",
                    "bankName": "Chase",
                    "paymentRails": ["ACH", "WIRE"],
                    "reference": "UMA-Q12345-REF",
                },
                "instructionsNotes": "Include the reference in the transfer memo",
                "isPlatformAccount": True,
            },
            {
                "accountOrWalletInfo": {
                    "accountType": "SPARK_WALLET",
                    "address": "spark1pgssyuuuhnrrdjswal5c3s3rafw9w3y5dd4cjy3duxlf7hjzkp0rqx6dj6mrhu",
                    "assetType": "BTC",
                },
            },
        ],
        "rateDetails": {
            "counterpartyMultiplier": 1.08,
            "counterpartyFixedFee": 10,
            "gridApiMultiplier": 0.925,
            "gridApiFixedFee": 10,
            "gridApiVariableFeeRate": 0.3,
            "gridApiVariableFeeAmount": 30,
        },
        "paymentRail": "SEPA_INSTANT",
        "railSelectionMode": "MANUAL",
        "expectedSettlementAt": None,
        "settlementTimelineSeconds": 10,
    }


def incoming_body() -> dict[str, Any]:
    return {
        "id": "Transaction:019542f5-b3e7-1d02-0000-000000000005",
        "status": "COMPLETED",
        "type": "INCOMING",
        "direction": "CREDIT",
        "source": {
            "sourceType": "REALTIME_FUNDING",
            "currency": "BTC",
            "customerId": "Customer:019542f5-b3e7-1d02-0000-000000000001",
            "onChainTransaction": {
                "transactionHash": "4a5e1e4baab89f3a32518a88c31bc87f618f76673e2cc77ab2127b7afdeda33b",
                "network": "BITCOIN",
            },
        },
        "destination": {
            "destinationType": "ACCOUNT",
            "accountId": "InternalAccount:019542f5-b3e7-1d02-0000-000000000002",
            "currency": "BTC",
        },
        "customerId": "Customer:019542f5-b3e7-1d02-0000-000000000001",
        "platformCustomerId": "18d3e5f7b4a9c2",
        "receivedAmount": {"amount": 125000, "currency": BTC},
        "fees": 0,
        "reconciliationInstructions": {"reference": "REF-987654321"},
        "createdAt": STAMP,
        "settledAt": "2025-08-15T15:02:44Z",
        "refund": {
            "reference": "RFD-20250815-1",
            "initiatedAt": "2025-08-15T16:00:00Z",
            "status": "PENDING",
            "reason": "USER_CANCELLATION",
        },
    }


def card_transaction_body() -> dict[str, Any]:
    return {
        "type": "CARD",
        "id": "CardTransaction:019542f5-b3e7-1d02-0000-000000000010",
        "cardId": "Card:019542f5-b3e7-1d02-0000-000000000011",
        "customerId": "Customer:019542f5-b3e7-1d02-0000-000000000001",
        "platformCustomerId": "18d3e5f7b4a9c2",
        "issuerTransactionToken": "itx_7f3a9c",
        "status": "PARTIALLY_SETTLED",
        "direction": "DEBIT",
        "merchant": {"descriptor": "BLUE BOTTLE COFFEE SF", "mcc": "5814", "country": "US"},
        "authorizedAmount": {"amount": 1250, "currency": USD},
        "settledAmount": {"amount": 1000, "currency": USD},
        "accountId": "InternalAccount:019542f5-b3e7-1d02-0000-000000000002",
        "pullSummary": {"count": 2, "totalAmount": 1250, "pendingCount": 1},
        "refundSummary": {"count": 0, "totalAmount": 0},
        "settlementSummary": {"count": 1, "totalAmount": 1000},
        "authorizedAt": STAMP,
        "lastEventAt": "2025-08-16T09:00:00Z",
        "createdAt": STAMP,
        "updatedAt": "2025-08-16T09:00:00Z",
    }


def internal_account_body() -> dict[str, Any]:
    return {
        "id": "InternalAccount:019542f5-b3e7-1d02-0000-000000000002",
        "customerId": "Customer:019542f5-b3e7-1d02-0000-000000000001",
        "type": "INTERNAL_FIAT",
        "status": "ACTIVE",
        "balance": {"amount": 1234567, "currency": USD},
        "totalBalance": {"amount": 1300000, "currency": USD},
        "fundingPaymentInstructions": [
            {
                "accountOrWalletInfo": {
                    "accountType": "USD_ACCOUNT",
                    "accountNumber": "987654321",
                    "routingNumber": "026009593",
                    "paymentRails": ["ACH", "WIRE", "RTP"],
                    "reference": "FUND-7788",
                },
            },
            {"accountOrWalletInfo": {"accountType": "LIGHTNING", "invoice": "lnbc1500n1pn2s3"}},
        ],
        "createdAt": STAMP,
        "updatedAt": STAMP,
    }


def external_account_body() -> dict[str, Any]:
    return {
        "id": "ExternalAccount:019542f5-b3e7-1d02-0000-000000000009",
        "customerId": "Customer:019542f5-b3e7-1d02-0000-000000000001",
        "status": "ACTIVE",
        "ownershipType": "THIRD_PARTY",
        "currency": "USD",
        "accountInfo": {
            "accountType": "USD_ACCOUNT",
            "accountNumber": "000123456789",
            "routingNumber": "021000021",
            "bankName": "Chase",
            "paymentRails": ["ACH"],
            "beneficiary": {"beneficiaryType": "INDIVIDUAL", "fullName": "Jane Receiver"},
        },
    }


def quote_body() -> dict[str, Any]:
    return {
        "id": "Quote:019542f5-b3e7-1d02-0000-000000000006",
        "status": "PENDING",
        "createdAt": STAMP,
        "expiresAt": "2025-08-15T14:30:18Z",
        "source": {"sourceType": "ACCOUNT", "accountId": "InternalAccount:1"},
        "destination": {
            "destinationType": "UMA_ADDRESS",
            "umaAddress": "$receiver@uma.example.com",
            "currency": "EUR",
        },
        "sendingCurrency": USD,
        "receivingCurrency": EUR,
        "totalSendingAmount": 10550,
        "totalReceivingAmount": 9706,
        "exchangeRate": 1.087,
        "feesIncluded": 125,
        "platformFeesIncluded": 25,
        "transactionId": "Transaction:019542f5-b3e7-1d02-0000-000000000004",
    }


def exchange_rate_body() -> dict[str, Any]:
    return {
        "sourceCurrency": USD,
        "destinationCurrency": EUR,
        "destinationPaymentRail": "SEPA",
        "sendingAmount": 10000,
        "minSendingAmount": 100,
        "maxSendingAmount": 10000000,
        "receivingAmount": 9200,
        "exchangeRate": 1.087,
        "fees": {"fixed": 50, "total": 80},
        "updatedAt": STAMP,
    }


def platform_config_body() -> dict[str, Any]:
    return {
        "id": "PlatformConfig:019542f5-b3e7-1d02-0000-000000000020",
        "umaDomain": "pay.example.com",
        "webhookEndpoint": "https://api.example.com/webhooks",
        "supportedCurrencies": [
            {
                "currencyCode": "USD",
                "minAmount": 100,
                "maxAmount": 1000000,
                "requiredCounterpartyFields": [{"name": "FULL_NAME", "mandatory": True}],
                "enabledTransactionTypes": ["INCOMING", "OUTGOING"],
            }
        ],
        "cardTokenization2faConfig": {"channels": ["SMS"]},
        "feeConfigs": [
            {
                "feeType": "CROSS_CURRENCY_TRANSACTION",
                "sourceCurrency": "USD",
                "variableFeeBps": 50,
                "fixedFee": {"amount": 25, "currency": "USD"},
            }
        ],
        "createdAt": STAMP,
        "updatedAt": STAMP,
    }


def card_body() -> dict[str, Any]:
    return {
        "id": "Card:019542f5-b3e7-1d02-0000-000000000011",
        "cardholderId": "Customer:019542f5-b3e7-1d02-0000-000000000001",
        "state": "ACTIVE",
        "brand": "VISA",
        "form": "VIRTUAL",
        "last4": "4242",
        "expMonth": 12,
        "expYear": 2028,
        "fundingSources": ["InternalAccount:019542f5-b3e7-1d02-0000-000000000002"],
        "maxSpendPerTransaction": 50000,
        "currency": "USD",
        "createdAt": STAMP,
        "updatedAt": STAMP,
    }


def individual_customer_body() -> dict[str, Any]:
    return {
        "id": "Customer:019542f5-b3e7-1d02-0000-000000000001",
        "platformCustomerId": "18d3e5f7b4a9c2",
        "customerType": "INDIVIDUAL",
        "umaAddress": "$jane@uma.example.com",
        "region": "US",
        "currencies": ["USD"],
        "email": "jane@example.com",
        "kycStatus": "APPROVED",
        "fullName": "Jane Doe",
        "birthDate": "1990-01-15",
        "nationality": "US",
        "address": {
            "line1": "1 Main St",
            "city": "San Francisco",
            "state": "CA",
            "postalCode": "94105",
            "country": "US",
        },
        "createdAt": STAMP,
        "updatedAt": STAMP,
    }


def business_customer_body() -> dict[str, Any]:
    return {
        "id": "Customer:019542f5-b3e7-1d02-0000-000000000003",
        "platformCustomerId": "biz-42",
        "customerType": "BUSINESS",
        "umaAddress": "$acme@uma.example.com",
        "kybStatus": "PENDING",
        "businessInfo": {"legalName": "Acme Corp", "country": "US"},
    }


def auth_method_body() -> dict[str, Any]:
    return {
        "id": "AuthMethod:019542f5-b3e7-1d02-0000-000000000030",
        "accountId": "InternalAccount:019542f5-b3e7-1d02-0000-000000000002",
        "type": "EMAIL_OTP",
        "nickname": "jane@example.com",
        "createdAt": STAMP,
        "updatedAt": STAMP,
        "otpEncryptionTargetBundle": "eyJ0YXJnZXRQdWJsaWMiOiIwNGE...",
    }


def auth_session_body() -> dict[str, Any]:
    return {
        "id": "Session:019542f5-b3e7-1d02-0000-000000000031",
        "accountId": "InternalAccount:019542f5-b3e7-1d02-0000-000000000002",
        "type": "PASSKEY",
        "nickname": "MacBook Touch ID",
        "credentialId": "KEbWNCc7NgaYnUyrNeFGX9_3Y-8oJVLwiSfwmLZ4C0Q",
        "createdAt": STAMP,
        "updatedAt": STAMP,
        "expiresAt": "2025-08-15T14:40:18Z",
        "encryptedSessionSigningKey": "w99a5xV6A75TfoAUkZn869fVyDYvgVsKrawMALZXmrauZd8hEv66EkPU1Z42CUaHESQjcA5",
    }


def signed_retry_body() -> dict[str, Any]:
    return {
        "type": "EMAIL_OTP",
        "payloadToSign": '{"requestId":"Request:1","op":"VERIFY", "body":{"a":1}}',
        "requestId": "Request:019542f5-b3e7-1d02-0000-000000000040",
        "expiresAt": "2025-08-15T14:30:18Z",
    }


def error_body() -> dict[str, Any]:
    return {
        "status": 400,
        "code": "INVALID_INPUT",
        "message": "2 fields are invalid",
        "details": {
            "errors": [
                {"field": "address.postalCode", "constraint": {"minLength": 3}, "message": "short"},
                {"field": "email", "message": "not an email"},
            ]
        },
    }


# --- helpers -------------------------------------------------------------------------------------


def unrecognised_fields(model: Any, path: str = "") -> list[str]:
    """Wire fields that landed in `model_extra` anywhere in the tree (a misspelt alias)."""
    if isinstance(model, list):
        return [f for i, item in enumerate(model) for f in unrecognised_fields(item, f"{path}{i}.")]
    if not isinstance(model, BaseModel):
        return []
    found = [path + name for name in model.model_extra or {}]
    for name in type(model).model_fields:
        found += unrecognised_fields(getattr(model, name), f"{path}{name}.")
    return found


# --- round trips ---------------------------------------------------------------------------------

ROUND_TRIPS = [
    pytest.param(
        outgoing_body, OutgoingTransaction, "OutgoingTransaction", id="OutgoingTransaction"
    ),
    pytest.param(
        incoming_body, IncomingTransaction, "IncomingTransaction", id="IncomingTransaction"
    ),
    pytest.param(card_transaction_body, CardTransaction, "CardTransaction", id="CardTransaction"),
    pytest.param(internal_account_body, InternalAccount, "InternalAccount", id="InternalAccount"),
    pytest.param(external_account_body, ExternalAccount, "ExternalAccount", id="ExternalAccount"),
    pytest.param(quote_body, Quote, "Quote", id="Quote"),
    pytest.param(exchange_rate_body, ExchangeRate, "ExchangeRate", id="ExchangeRate"),
    pytest.param(platform_config_body, PlatformConfig, "PlatformConfig", id="PlatformConfig"),
    pytest.param(card_body, Card, "Card", id="Card"),
    pytest.param(
        individual_customer_body, IndividualCustomer, "IndividualCustomer", id="IndividualCustomer"
    ),
    pytest.param(
        business_customer_body, BusinessCustomer, "BusinessCustomer", id="BusinessCustomer"
    ),
    pytest.param(auth_method_body, AuthMethod, "AuthMethodResponse", id="AuthMethodResponse"),
    pytest.param(auth_session_body, AuthSession, "AuthSession", id="AuthSession"),
    pytest.param(
        signed_retry_body,
        SignedRetryChallenge,
        "AuthSignedRequestChallenge",
        id="AuthSignedRequestChallenge",
    ),
    pytest.param(error_body, ErrorBody, "Error400", id="Error400"),
]


@pytest.mark.parametrize(("make_body", "model", "schema"), ROUND_TRIPS)
def test_examples_conform_to_the_interface(make_body: Any, model: Any, schema: str) -> None:
    errors = contract_errors()
    if errors is None:
        pytest.skip("shared/tools/validate_contract.py not found")
    assert errors(make_body(), schema) == []


@pytest.mark.parametrize(("make_body", "model", "schema"), ROUND_TRIPS)
def test_wire_round_trip_keeps_every_field(make_body: Any, model: Any, schema: str) -> None:
    body = make_body()
    parsed = model.model_validate(body)
    assert parsed.to_wire() == body
    assert unrecognised_fields(parsed) == []
    assert model.model_validate_json(json.dumps(body)).to_wire() == body


@pytest.mark.parametrize(
    ("make_body", "variant"),
    [
        (outgoing_body, OutgoingTransaction),
        (incoming_body, IncomingTransaction),
        (card_transaction_body, CardTransaction),
    ],
)
def test_transaction_union_picks_the_variant_by_type(make_body: Any, variant: type) -> None:
    body = make_body()
    from_dict = parse_transaction(body)
    from_bytes = parse_transaction(json.dumps(body).encode())
    assert type(from_dict) is variant
    assert type(from_bytes) is variant
    assert from_bytes.to_wire() == body
    assert type(TRANSACTION_ADAPTER.validate_python(body)) is variant


def test_outgoing_fields_are_typed() -> None:
    tx = parse_transaction(outgoing_body())
    assert isinstance(tx, OutgoingTransaction)
    assert tx.status is OutgoingTransactionStatus.PROCESSING
    assert tx.sent_amount.amount == 10550
    assert tx.sent_amount.currency_code == "USD"
    assert tx.sent_amount.decimals == 2
    assert tx.fees == 125
    assert tx.platform_fees == 25
    assert tx.payment_rail is PaymentRail.SEPA_INSTANT
    assert tx.expected_settlement_at is None
    assert "expected_settlement_at" in tx.model_fields_set
    assert isinstance(tx.source, AccountSource)
    assert isinstance(tx.destination, AccountDestination)
    assert tx.destination.payment_rail is PaymentRail.SEPA_INSTANT
    bank, wallet = (p.account_or_wallet_info for p in tx.payment_instructions or [])
    assert isinstance(bank, BankAccountInfo)
    assert bank.routing_number == "021000021"
    assert bank.payment_rails == [PaymentRail.ACH, PaymentRail.WIRE]
    assert isinstance(wallet, CryptoWalletInfo)
    assert wallet.asset_type == "BTC"
    assert tx.rate_details is not None
    assert tx.rate_details.grid_api_variable_fee_amount == 30
    assert type(tx.rate_details.grid_api_variable_fee_amount) is int
    assert tx.rate_details.grid_api_multiplier == 0.925
    assert tx.counterparty_information == {"FULL_NAME": "Jane Receiver", "NATIONALITY": "DE"}


def test_incoming_realtime_funding_source_carries_the_on_chain_leg() -> None:
    tx = parse_transaction(incoming_body())
    assert isinstance(tx, IncomingTransaction)
    assert isinstance(tx.source, RealtimeFundingSource)
    assert tx.source.on_chain_transaction is not None
    assert tx.source.on_chain_transaction.network == "BITCOIN"
    assert tx.refund is not None
    assert tx.refund.initiated_at == datetime(2025, 8, 15, 16, 0, tzinfo=UTC)


def test_card_transaction_summaries_are_exact_ints() -> None:
    tx = parse_transaction(card_transaction_body())
    assert isinstance(tx, CardTransaction)
    assert tx.pull_summary is not None
    assert (tx.pull_summary.count, tx.pull_summary.total_amount) == (2, 1250)
    assert tx.pull_summary.pending_count == 1
    assert tx.settlement_summary is not None
    assert tx.settlement_summary.total_amount == 1000
    assert tx.merchant.mcc == "5814"


# --- forward compatibility -----------------------------------------------------------------------


def test_unknown_enum_values_and_fields_survive_a_round_trip() -> None:
    body = outgoing_body()
    body["status"] = "ON_HOLD"
    body["failureReason"] = "PAYOUT_BLOCKED_BY_BENEFICIARY_BANK"
    body["paymentRail"] = "PROMPTPAY"
    body["destination"]["paymentRail"] = "PROMPTPAY"
    body["paymentInstructions"][0]["accountOrWalletInfo"]["accountType"] = "NZD_ACCOUNT"
    body["riskScore"] = {"value": 12, "model": "v7"}
    body["sentAmount"]["currency"]["isoNumeric"] = "840"

    tx = parse_transaction(json.dumps(body).encode())

    assert isinstance(tx, OutgoingTransaction)
    assert tx.status == "ON_HOLD"
    assert type(tx.status) is str
    assert tx.failure_reason == "PAYOUT_BLOCKED_BY_BENEFICIARY_BANK"
    assert type(tx.payment_rail) is str
    info = (tx.payment_instructions or [])[0].account_or_wallet_info
    assert isinstance(info, BankAccountInfo)
    assert info.account_type == "NZD_ACCOUNT"
    assert tx.model_extra == {"riskScore": {"value": 12, "model": "v7"}}
    assert tx.to_wire() == body


def test_known_enum_values_become_members() -> None:
    tx = parse_transaction(outgoing_body())
    assert isinstance(tx, OutgoingTransaction)
    assert tx.rail_selection_mode is RailSelectionMode.MANUAL
    info = (tx.payment_instructions or [])[0].account_or_wallet_info
    assert info.account_type is AccountType.USD_ACCOUNT


def test_unknown_transaction_type_parses_and_round_trips() -> None:
    body = {
        "id": "Transaction:019542f5-b3e7-1d02-0000-000000000099",
        "type": "STABLECOIN",
        "status": "MINTED",
        "direction": "CREDIT",
        "mintedAmount": {"amount": 5000000, "currency": {"code": "USDC", "decimals": 6}},
        "createdAt": STAMP,
    }
    tx = parse_transaction(json.dumps(body).encode())
    assert isinstance(tx, UnknownTransaction)
    assert (tx.type, tx.id, tx.status) == ("STABLECOIN", body["id"], "MINTED")
    assert tx.model_extra is not None
    assert tx.model_extra["mintedAmount"]["amount"] == 5000000
    assert tx.to_wire() == body


def test_a_page_mixing_known_and_unknown_types_keeps_both() -> None:
    unknown = {"type": "STABLECOIN", "id": "Transaction:9", "status": "COMPLETED"}
    body = {"data": [outgoing_body(), unknown], "hasMore": True, "nextCursor": "c-2"}
    page = parse_page(json.dumps(body).encode())
    assert [type(tx) for tx in page.data] == [OutgoingTransaction, UnknownTransaction]
    assert page.data[1].status is TransactionStatus.COMPLETED
    assert page.to_wire() == body


@pytest.mark.parametrize(
    ("union_body", "field", "fallback"),
    [
        ({"sourceType": "CARD_FUNDING", "cardId": "Card:1"}, "source", UnknownSource),
        (
            {"destinationType": "IBAN", "iban": "DE89370400440532013000"},
            "destination",
            UnknownDestination,
        ),
    ],
)
def test_unknown_source_and_destination_kinds_parse(
    union_body: dict[str, Any], field: str, fallback: type
) -> None:
    body = outgoing_body()
    body[field] = union_body
    tx = parse_transaction(body)
    assert type(getattr(tx, field)) is fallback
    assert tx.to_wire() == body


def test_unknown_account_type_that_is_no_bank_account_keeps_everything() -> None:
    body = internal_account_body()
    body["fundingPaymentInstructions"][1]["accountOrWalletInfo"] = {
        "accountType": "CARDANO_WALLET",
        "address": "addr1qx2fxv2umyhttkxyxp8x0dlpdt3k6cwng5pxj3jhsydzer3n0d3vllmyqwsx5wktcd8cc3sq835lu7drv2xwl2wywfgse35a3x",
    }
    account = InternalAccount.model_validate(body)
    info = account.funding_payment_instructions[1].account_or_wallet_info
    assert isinstance(info, UnknownAccountInfo)
    assert info.account_type == "CARDANO_WALLET"
    assert account.to_wire() == body
    first = account.funding_payment_instructions[0].account_or_wallet_info
    assert isinstance(first, BankAccountInfo)
    lightning = InternalAccount.model_validate(internal_account_body())
    assert isinstance(
        lightning.funding_payment_instructions[1].account_or_wallet_info, LightningInfo
    )


def test_customer_union_by_customer_type() -> None:
    assert type(parse_customer(individual_customer_body())) is IndividualCustomer
    assert type(parse_customer(json.dumps(business_customer_body()))) is BusinessCustomer
    trust = {"customerType": "TRUST", "platformCustomerId": "t-1", "trustDeed": "TD-9"}
    customer = parse_customer(trust)
    assert isinstance(customer, UnknownCustomer)
    assert customer.to_wire() == trust
    page = parse_page(
        json.dumps({"data": [individual_customer_body(), trust], "hasMore": False}), Customer
    )
    assert [type(c) for c in page.data] == [IndividualCustomer, UnknownCustomer]


# --- exact money -------------------------------------------------------------------------------


@pytest.mark.parametrize("bad_amount", [12.5, 12.0, True, "1250"])
def test_non_integer_amount_is_rejected_with_its_path(bad_amount: Any) -> None:
    body = outgoing_body()
    body["sentAmount"]["amount"] = bad_amount
    with pytest.raises(ValidationError) as direct:
        OutgoingTransaction.model_validate(body)
    assert [e["loc"] for e in direct.value.errors()] == [("sentAmount", "amount")]
    for data in (body, json.dumps(body).encode()):
        with pytest.raises(ValidationError) as via_union:
            parse_transaction(data)
        assert [e["loc"] for e in via_union.value.errors()] == [
            ("OUTGOING", "sentAmount", "amount")
        ]


@pytest.mark.parametrize(
    ("path", "bad_value"),
    [
        (("fees",), 125.0),
        (("platformFees",), 2.5),
        (("rateDetails", "gridApiVariableFeeAmount"), 30.5),
        (("rateDetails", "gridApiVariableFeeAmount"), 2.0**60),  # whole, but not exact
        (("rateDetails", "counterpartyFixedFee"), 10.5),
    ],
)
def test_fee_fields_reject_floats(path: tuple[str, ...], bad_value: float) -> None:
    body = outgoing_body()
    target = body
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = bad_value
    with pytest.raises(ValidationError) as caught:
        OutgoingTransaction.model_validate_json(json.dumps(body))
    assert [e["loc"] for e in caught.value.errors()] == [path]


def test_the_variable_fee_amount_is_a_json_number_holding_a_whole_amount() -> None:
    """The interface types it `number` (format int64: "the sending amount times the rate"):
    `30.0` is 30 minor units, exactly; a fraction is refused above, never rounded."""
    body = outgoing_body()
    body["rateDetails"]["gridApiVariableFeeAmount"] = 30.0
    parsed = OutgoingTransaction.model_validate_json(json.dumps(body))
    assert parsed.rate_details is not None
    amount = parsed.rate_details.grid_api_variable_fee_amount
    assert amount == 30 and type(amount) is int


def test_card_summary_total_rejects_floats() -> None:
    body = card_transaction_body()
    body["pullSummary"]["totalAmount"] = 1250.0
    with pytest.raises(ValidationError) as caught:
        CardTransaction.model_validate(body)
    assert [e["loc"] for e in caught.value.errors()] == [("pullSummary", "totalAmount")]


def test_rates_are_floats_even_when_sent_as_integers() -> None:
    body = outgoing_body()
    body["exchangeRate"] = 1
    body["rateDetails"]["gridApiVariableFeeRate"] = 0
    tx = OutgoingTransaction.model_validate(body)
    assert type(tx.exchange_rate) is float
    assert tx.rate_details is not None
    assert type(tx.rate_details.grid_api_variable_fee_rate) is float


# --- failure reasons ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reason", ["EXECUTION_FAILED_POST_DEBIT", "SETTLEMENT_FAILED", "TIMEOUT", "MANUAL_REFUND"]
)
def test_removed_failure_reasons_still_read_and_are_flagged(reason: str) -> None:
    body = outgoing_body()
    body["status"] = "FAILED"
    body["failureReason"] = reason
    tx = parse_transaction(body)
    assert isinstance(tx, OutgoingTransaction)
    assert tx.failure_reason is OutgoingTransactionFailureReason(reason)
    assert tx.failure_reason in REMOVED_OUTGOING_FAILURE_REASONS
    assert tx.to_wire() == body


def test_failure_reason_groups() -> None:
    assert "QUOTE_EXECUTION_FAILED" not in REMOVED_OUTGOING_FAILURE_REASONS
    assert len(REMOVED_OUTGOING_FAILURE_REASONS) == 4
    assert {
        "PAYOUT_RETURNED",
        "LIMIT_EXCEEDED",
        "ACCOUNT_CANNOT_RECEIVE",
        "ACCOUNT_INVALID",
        "COMPLIANCE_REJECTED",
    } == GRANULAR_PAYOUT_FAILURE_REASONS
    assert COARSE_PAYOUT_FAILURE_REASON == "COUNTERPARTY_POST_TX_FAILED"
    assert COARSE_PAYOUT_FAILURE_REASON not in GRANULAR_PAYOUT_FAILURE_REASONS
    assert len(OutgoingTransactionFailureReason) == 16


# --- time ----------------------------------------------------------------------------------------


def test_timestamps_are_utc_and_written_with_z() -> None:
    body = outgoing_body()
    body["createdAt"] = "2025-08-15T16:25:18+02:00"
    body["settledAt"] = "2025-08-15T14:30:00"
    tx = OutgoingTransaction.model_validate(body)
    for stamp in (tx.created_at, tx.settled_at, tx.updated_at):
        assert stamp is not None
        assert stamp.utcoffset() == timedelta(0)
        assert stamp.tzinfo == UTC
    assert tx.created_at == datetime(2025, 8, 15, 14, 25, 18, tzinfo=UTC)
    wire = tx.to_wire()
    assert wire["createdAt"] == "2025-08-15T14:25:18Z"
    assert wire["settledAt"] == "2025-08-15T14:30:00Z"
    assert wire["updatedAt"] == "2025-08-15T14:25:19.250Z"


# --- secrets and models built in Python ---------------------------------------------------------


def test_session_signing_key_is_out_of_repr_but_on_the_wire() -> None:
    session = AuthSession.model_validate(auth_session_body())
    secret = auth_session_body()["encryptedSessionSigningKey"]
    assert session.encrypted_session_signing_key == secret
    assert secret not in repr(session)
    assert secret not in str(session)
    assert "encrypted_session_signing_key" not in repr(session)
    assert session.to_wire()["encryptedSessionSigningKey"] == secret
    assert isinstance(session, Session)


def test_variants_built_in_python_put_their_discriminator_on_the_wire() -> None:
    destination = AccountDestination(account_id="ExternalAccount:1", payment_rail="ACH")
    assert destination.to_wire() == {
        "destinationType": "ACCOUNT",
        "accountId": "ExternalAccount:1",
        "paymentRail": "ACH",
    }
    assert WalletOperationProcessing(message="settling").to_wire() == {
        "status": "PROCESSING",
        "message": "settling",
    }
    customer = IndividualCustomer(platform_customer_id="p-1", full_name="Jane Doe")
    assert customer.to_wire() == {
        "platformCustomerId": "p-1",
        "customerType": "INDIVIDUAL",
        "fullName": "Jane Doe",
    }


# --- auth, errors, pages -------------------------------------------------------------------------


def test_signed_retry_payload_is_kept_byte_for_byte() -> None:
    body = signed_retry_body()
    challenge = SignedRetryChallenge.model_validate_json(json.dumps(body))
    assert challenge.payload_to_sign == body["payloadToSign"]
    passkey = PasskeyAuthChallenge.model_validate(
        {"challenge": "9f86d081884c7d65", "requestId": "Request:2", "expiresAt": STAMP}
    )
    assert passkey.challenge == "9f86d081884c7d65"


def test_error_body_lists_its_field_errors() -> None:
    error = ErrorBody.model_validate(error_body())
    assert error.field_errors == [
        FieldError(field="address.postalCode", constraint={"minLength": 3}, message="short"),
        FieldError(field="email", message="not an email"),
    ]
    assert ErrorBody(status=404, code="TRANSACTION_NOT_FOUND", message="no").field_errors == []


def test_error_codes_by_status() -> None:
    assert "RATE_LIMITED" in ERROR_CODES[429]
    assert "DAILY_VOLUME_LIMIT_EXCEEDED" in ERROR_CODES[429]
    assert {
        "UNAUTHORIZED",
        "INVALID_SIGNATURE",
        "WALLET_SIGNATURE_MISSING",
        "WALLET_SIGNATURE_MALFORMED",
        "WALLET_SIGNATURE_BODY_MISMATCH",
        "WALLET_SIGNATURE_INVALID",
        "REQUEST_ID_MISSING",
    } == ERROR_CODES[401]
    assert "TRANSACTION_NOT_CANCELLABLE" in ERROR_CODES[409]
    assert "SCA_SESSION_REQUIRED" in ERROR_CODES[409]
    assert "SCA_SESSION_REQUIRED" not in ERROR_CODES[401]
    assert ERROR_CODES[500] == {"SERVICE_SWITCH_ERROR", "INTERNAL_ERROR"}
    assert ERROR_CODES[423] == {"ACCOUNT_LOCKED"}
    assert len(ERROR_CODES[400]) == 43


def test_transaction_page_parses_from_bytes() -> None:
    body = {
        "data": [outgoing_body(), incoming_body(), card_transaction_body()],
        "hasMore": True,
        "nextCursor": "eyJvZmZzZXQiOjN9",
        "totalCount": 57,
    }
    raw = json.dumps(body).encode()
    page = parse_page(raw)
    assert [type(tx) for tx in page.data] == [
        OutgoingTransaction,
        IncomingTransaction,
        CardTransaction,
    ]
    assert (page.has_more, page.next_cursor, page.total_count) == (True, "eyJvZmZzZXQiOjN9", 57)
    assert page.to_wire() == body
    assert TRANSACTION_PAGE_ADAPTER.validate_json(raw).to_wire() == body
    errors = contract_errors()
    if errors is not None:
        assert errors(body, "TransactionListResponse") == []


def test_page_of_another_item_type() -> None:
    body = {"data": [card_body()], "hasMore": False}
    page = parse_page(json.dumps(body).encode(), Card)
    assert isinstance(page, Page)
    assert page.data[0].state is CardState.ACTIVE
    assert page.next_cursor is None
    assert page.to_wire() == body
