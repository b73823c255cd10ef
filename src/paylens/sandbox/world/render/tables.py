"""The encoded pieces the renderer joins: enum tables, the payment and card templates."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat
from typing import Any

import numpy as np

from ...currencies import CHANNELS, CURRENCY_CODES, N_RAILS, REGIONS, currency_wire
from ...generate.merchants import MEMOS, MERCHANTS
from ...generate.schema import (
    IN_FAILURES,
    OUT_FAILURES,
    PENDING_REASONS,
    RAIL_MODES,
    REFUND_REASONS,
    REFUND_STATUSES,
    STATUS_CODE,
    STATUSES,
)
from .text import byte_table, json_bytes

COMPLETED_CODE, FAILED_CODE, CREATED_CODE = (
    STATUS_CODE["COMPLETED"],
    STATUS_CODE["FAILED"],
    STATUS_CODE["CREATED"],
)


STATUS_TEXT = byte_table([s.encode() for s in STATUSES])
CODE_TEXT = [json_bytes(code) for code in CURRENCY_CODES]
CODE_TEXTS = np.array(CODE_TEXT, dtype=object)
ACCOUNT_SOURCE = b'{"sourceType":"ACCOUNT","accountId":%s,"currency":%s}'
ACCOUNT_DESTINATION = b'{"destinationType":"ACCOUNT","accountId":%s,"currency":%s}'
UMA_SOURCE = b'{"sourceType":"UMA_ADDRESS","umaAddress":%s,"currency":%s}'
UMA_DESTINATION = b'{"destinationType":"UMA_ADDRESS","umaAddress":%s,"currency":%s}'
OUTGOING_FUNDING = b'{"sourceType":"REALTIME_FUNDING","currency":%s,"customerId":%s}'
INCOMING_FUNDING = (
    b'{"sourceType":"REALTIME_FUNDING","currency":%s,"customerId":%s,"accountHolderName":%s%s}'
)


#: what an incoming real-time funding shows of its channel: a bank rail, or nothing
FUNDING_RAIL_TEXT = byte_table(
    [
        b',"bankName":"Paylens Sandbox Partner Bank","paymentRail":' + json_bytes(name)
        if ch < N_RAILS
        else b""
        for ch, name in enumerate(CHANNELS)
    ]
)


CURRENCY_TEXT = byte_table([json_bytes(currency_wire(i)) for i in range(len(CURRENCY_CODES))])
RAIL_TEXT = byte_table(
    [json_bytes(name if ch < N_RAILS else None) for ch, name in enumerate(CHANNELS)]
)


RAIL_MODE_TEXT = byte_table([json_bytes(mode) for mode in RAIL_MODES])
MERCHANT_TEXT = byte_table(
    [
        json_bytes({"descriptor": m.descriptor, "mcc": m.mcc, "country": m.country})
        for m in MERCHANTS
    ]
)


_MERCHANT_CODES = {m.descriptor: i for i, m in enumerate(MERCHANTS)}


def merchant_code(descriptor: str, mcc: str | None, country: str | None) -> int | None:
    """The `merchant` column code of a merchant named in a simulated authorization (codes past
    the generated merchants are kept for the process); None when the table is full."""
    if descriptor in _MERCHANT_CODES:
        return _MERCHANT_CODES[descriptor]
    code = len(_MERCHANT_CODES)
    if code >= len(MERCHANT_TEXT) - 1:  # the last code stays free
        return None
    merchant = {"descriptor": descriptor, "mcc": mcc, "country": country}
    MERCHANT_TEXT[code] = json_bytes({k: v for k, v in merchant.items() if v is not None})
    _MERCHANT_CODES[descriptor] = code
    return code


IN_FAILURE_TEXT = byte_table([b',"failureReason":' + json_bytes(f) for f in IN_FAILURES])
OUT_FAILURE_TEXT = byte_table([b',"failureReason":' + json_bytes(f) for f in OUT_FAILURES])
PENDING_REASON_TEXT = byte_table([b',"pendingReason":' + json_bytes(r) for r in PENDING_REASONS])
REGION_TEXT = np.array([json_bytes(region[0]) for region in REGIONS], dtype=object)
FAMILY_SUPPORT_TEXT, GOODS_TEXT = json_bytes("FAMILY_SUPPORT"), json_bytes("GOODS_OR_SERVICES")
COUNTERPARTY_IN = (
    b',"counterpartyInformation":{"FULL_NAME":%s,"COUNTRY_OF_RESIDENCE":%s,"NATIONALITY":%s}'
)


COUNTERPARTY_OUT = (
    b',"counterpartyInformation":{"FULL_NAME":%s,"COUNTRY_OF_RESIDENCE":%s,"PURPOSE_OF_PAYMENT":%s}'
)


ON_CHAIN_TAIL = b',"onChainTransaction":{"transactionHash":"%s","network":"%s"}}'
WAITING_STATUS = np.zeros(256, dtype=bool)


WAITING_STATUS[
    [
        STATUS_CODE["CREATED"],
        STATUS_CODE["PENDING"],
        STATUS_CODE["PENDING_AUTHORIZATION"],
        STATUS_CODE["PROCESSING"],
    ]
] = True


REFUND_STATUS_TEXT = [json_bytes(s) for s in REFUND_STATUSES]
REFUND_REASON_TEXT = [json_bytes(r) for r in REFUND_REASONS]
REFUND_DONE = b',"refund":{"reference":"SBX-%s-RF","initiatedAt":"%s","settledAt":"%s","status":%s,"reason":%s}'
REFUND_PENDING = (
    b',"refund":{"reference":"SBX-%s-RF","initiatedAt":"%s","status":"PENDING","reason":%s}'
)


#: `,"description":...` of each memo; numbered memos ("Invoice {n}") hold a %d for the number.
MEMO_TEXT = byte_table(
    [
        b',"description":'
        + (
            json_bytes("[sandbox] " + m.replace("%", "%%")).replace(b"{n}", b"%d")
            if "{n}" in m
            else json_bytes("[sandbox] " + m)
        )
        for m in MEMOS
    ]
)


MEMO_NUMBERED = np.array(["{n}" in m for m in MEMOS] + [False] * (256 - len(MEMOS)))


class _Template:
    """A record's JSON with `%s` holes, filled a column at a time: each row is one `b"".join`
    of the literal pieces and its column values (all JSON text, or raw text inside quotes)."""

    def __init__(self, text: bytes) -> None:
        self.pieces = text.split(b"%s")

    def fill(self, columns: Sequence[Sequence[bytes | None]]) -> list[bytes]:
        assert len(columns) == len(self.pieces) - 1, (len(columns), len(self.pieces))
        parts: list[Any] = [repeat(self.pieces[0])]
        for column, piece in zip(columns, self.pieces[1:], strict=True):
            parts.append(column)
            if piece:
                parts.append(repeat(piece))
        return list(map(b"".join, zip(*parts, strict=False)))  # the pieces repeat forever


# One template per variant; the optional members' holes hold `,"name":value` or b"", in the
# order the interface's variants list them.
_PAYMENT_HEAD = (
    b'{"id":"Transaction:%s","status":"%s","type":"{TYPE}","direction":"{DIRECTION}",'
    b'"source":%s,"destination":%s,%s,'
    b'"sentAmount":{"amount":%s,"currency":%s},"receivedAmount":{"amount":%s,"currency":%s},'
    b'"exchangeRate":%s,"fees":%s'
)


INCOMING_TEMPLATE = _Template(
    _PAYMENT_HEAD.replace(b"{TYPE}", b"INCOMING").replace(b"{DIRECTION}", b"CREDIT")
    + b',"createdAt":"%s","updatedAt":"%s"'
    # settledAt, description, reconciliationInstructions, failureReason, refund,
    # pendingReason, agentId, receiptDeliveryConfirmedAt, counterpartyInformation
    + b"%s%s%s%s%s%s%s%s%s}"
)


OUTGOING_TEMPLATE = _Template(
    _PAYMENT_HEAD.replace(b"{TYPE}", b"OUTGOING").replace(b"{DIRECTION}", b"DEBIT")
    + b',"platformFees":%s,"rateDetails":{"counterpartyMultiplier":%s,"counterpartyFixedFee":%s,'
    b'"gridApiMultiplier":%s,"gridApiFixedFee":%s,"gridApiVariableFeeRate":%s,'
    b'"gridApiVariableFeeAmount":%s},"quoteId":"Quote:%s","paymentRail":%s,'
    b'"railSelectionMode":%s,"expectedSettlementAt":%s,"settlementTimelineSeconds":%s'
    b',"createdAt":"%s","updatedAt":"%s"'
    # settledAt, description, reconciliationInstructions, paymentInstructions, failureReason,
    # refund, pendingReason, agentId, receiptDeliveryConfirmedAt, counterpartyInformation
    b"%s%s%s%s%s%s%s%s%s%s}"
)


CARD_TEMPLATE = _Template(
    b'{"type":"CARD","id":"CardTransaction:%s","cardId":%s,%s,'
    b'"issuerTransactionToken":"sbx_txn_%s","status":"%s","direction":"DEBIT","merchant":%s,'
    b'"authorizedAmount":{"amount":%s,"currency":%s}'
    b"%s%s"  # settledAmount, refundedAmount
    b',"accountId":%s,"pullSummary":{"count":%s,"totalAmount":%s,"pendingCount":%s},'
    b'"refundSummary":{"count":%s,"totalAmount":%s},'
    b'"settlementSummary":{"count":%s,"totalAmount":%s},"authorizedAt":"%s"'
    b"%s"  # lastEventAt
    b',"createdAt":"%s","updatedAt":"%s"}'
)
