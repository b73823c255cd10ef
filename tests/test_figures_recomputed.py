"""The analysis figures recomputed by hand, in plain Python from the records' raw JSON, on
hand-built records that are valid per the interface (each checked against its schema at test
time) but unlike the sandbox's: several currencies with 0, 2, 3 and 8 decimals in one warehouse,
a currency without `decimals`, transfers without `rateDetails`, `fees` or `platformFees`,
counterparty fees in the receiving currency, failed transfers with pending and completed
refunds, removed and deprecated failure reasons, refunded incoming payments, card transactions
partly settled, over-settled, refunded, settled in another currency, statuses this version does
not know, and `createdAt` with offsets other than Z on month boundaries.

The expected figure is written here from the helper's docstring formula, never from its SQL.
The cases at the end are what this found, each a minimal reproduction: card amounts in another
currency read 0 where they are unknown, a sale refunded in another currency counted as kept,
absent card summaries raised as mismatches, a take rate over transfers without fees, the
refunds' default `as_of` before the refunds' own times, and a transfer without `createdAt`
dropped from the settlement counts.
"""

from __future__ import annotations

import math
import uuid
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, date, datetime
from typing import Any

import pandas as pd
import pytest

from ._helpers import OPENAPI
from .test_interface_records import FakeService, schema, synced, transfer

jsonschema = pytest.importorskip("jsonschema")
pytestmark = pytest.mark.skipif(not OPENAPI.exists(), reason="the interface description is absent")

AS_OF = "2025-12-01T00:00:00Z"

# -- interface validation ---------------------------------------------------------------------

#: fields whose enums the conventions call open (values this version does not know are kept)
OPEN_ENUMS = {"status", "failureReason"}


def _open(node: Any, names: set[str]) -> Any:
    """The schema with the enums of `names` properties dropped (open enums), everything else kept."""
    if isinstance(node, list):
        return [_open(x, names) for x in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for k, v in node.items():
        if k == "properties":
            out[k] = {p: (_strip_enum(s) if p in names else _open(s, names)) for p, s in v.items()}
        else:
            out[k] = _open(v, names)
    return out


def _strip_enum(node: Any) -> Any:
    if isinstance(node, list):
        return [_strip_enum(x) for x in node]
    if not isinstance(node, dict):
        return node
    return {k: _strip_enum(v) for k, v in node.items() if k != "enum"}


def check_valid(
    record: dict[str, Any], name: str = "TransactionOneOf", *, open_: bool = False
) -> None:
    """The record is valid per the interface's schema `name` (open enums: statuses and failure
    reasons may be values the current enum does not list)."""
    resolved = schema(name)
    if open_:
        resolved = _open(resolved, OPEN_ENUMS)
    validator = jsonschema.Draft202012Validator(resolved, format_checker=jsonschema.FormatChecker())
    error = jsonschema.exceptions.best_match(validator.iter_errors(record))
    assert error is None, (record.get("id"), list(error.absolute_path), error.message[:300])


# -- records ----------------------------------------------------------------------------------


def cur(code: str, decimals: int | None) -> dict[str, Any]:
    return {"code": code} if decimals is None else {"code": code, "decimals": decimals}


def amt(amount: int, code: str, decimals: int | None) -> dict[str, Any]:
    return {"amount": amount, "currency": cur(code, decimals)}


def tid(n: int, prefix: str = "Transaction") -> str:
    return f"{prefix}:{uuid.UUID(int=n)}"


def outgoing(n: int, created: str, sent: dict, **fields: Any) -> dict[str, Any]:
    """An interface-valid OUTGOING transfer of customer A, without fees unless given."""
    chosen = {
        "source": {"sourceType": "ACCOUNT", "accountId": "InternalAccount:usd"},
        "customerId": "Customer:A",
        "platformCustomerId": "p-A",
        "createdAt": created,
        "sentAmount": sent,
    }
    record = transfer(n, **(chosen | fields))
    if "fees" not in fields:
        del record["fees"]
    return record


def incoming(n: int, created: str, received: dict, **fields: Any) -> dict[str, Any]:
    record = {
        "id": tid(n),
        "type": "INCOMING",
        "status": "COMPLETED",
        "direction": "CREDIT",
        "destination": {"destinationType": "ACCOUNT", "accountId": "InternalAccount:usd"},
        "customerId": "Customer:B",
        "platformCustomerId": "p-B",
        "createdAt": created,
        "receivedAmount": received,
    }
    record.update(fields)
    return record


def rate(ff: int, vf: int, vr: float, cf: int, gm: float = 1.0, cm: float = 1.0) -> dict[str, Any]:
    return {
        "counterpartyMultiplier": cm,
        "counterpartyFixedFee": cf,
        "gridApiMultiplier": gm,
        "gridApiFixedFee": ff,
        "gridApiVariableFeeRate": vr,
        "gridApiVariableFeeAmount": vf,
    }


def refund(
    status: str, initiated: str, settled: str | None = None, reason: str = "TRANSACTION_FAILED"
) -> dict:
    r = {
        "reference": f"R-{initiated}",
        "initiatedAt": initiated,
        "status": status,
        "reason": reason,
    }
    if settled is not None:
        r["settledAt"] = settled
    return r


def card(
    n: int,
    status: str,
    authorized: dict,
    at: str,
    account: str = "InternalAccount:usd",
    **fields: Any,
) -> dict[str, Any]:
    record = {
        "type": "CARD",
        "id": tid(n, "CardTransaction"),
        "cardId": "Card:1",
        "customerId": "Customer:C",
        "platformCustomerId": "p-C",
        "status": status,
        "direction": "DEBIT",
        "merchant": {"descriptor": f"SHOP {n % 3}", "mcc": "5814", "country": "US"},
        "authorizedAmount": authorized,
        "accountId": account,
        "authorizedAt": at,
        "createdAt": at,
        "updatedAt": at,
    }
    record.update(fields)
    return record


def summary(count: int, total: int, pending: int | None = None) -> dict[str, Any]:
    s = {"count": count, "totalAmount": total}
    if pending is not None:
        s["pendingCount"] = pending
    return s


def account(key: str, code: str, decimals: int) -> dict[str, Any]:
    return {
        "id": f"InternalAccount:{key}",
        "customerId": "Customer:C",
        "type": "INTERNAL_FIAT",
        "status": "ACTIVE",
        "balance": amt(0, code, decimals),
        "totalBalance": amt(0, code, decimals),
        "fundingPaymentInstructions": [],
        "createdAt": "2025-01-01T00:00:00Z",
        "updatedAt": "2025-01-01T00:00:00Z",
    }


USD, JPY, KWD, BTC, EUR = ("USD", 2), ("JPY", 0), ("KWD", 3), ("BTC", 8), ("EUR", 2)

TRANSFERS: list[dict[str, Any]] = [
    # USD -> JPY, counterparty fee in JPY (0 decimals), createdAt +09:00 on a month boundary:
    # 2025-11-01T05:00+09:00 is 2025-10-31T20:00Z (October in UTC)
    outgoing(
        1,
        "2025-11-01T05:00:00+09:00",
        amt(10_000, *USD),
        receivedAmount=amt(14_800, *JPY),
        exchangeRate=0.0066,
        fees=250,
        platformFees=50,
        rateDetails=rate(100, 30, 0.003, 10),
        paymentRail="ACH",
        settledAt="2025-11-01T00:30:00+01:00",
        customerId="Customer:A",
    ),
    # KWD (3) -> BTC (8): counterparty fee 1000 sats; x = 20000 KWD per BTC
    outgoing(
        2,
        "2025-10-15T12:00:00-05:00",
        amt(1_000_000, *KWD),
        receivedAmount=amt(4_990_000, *BTC),
        exchangeRate=20_000.0,
        fees=2_450,
        platformFees=0,
        rateDetails=rate(1_000, 1_000, 0.001, 1_000),
        paymentRail="RTP",
        settledAt="2025-10-15T17:00:05Z",
        customerId="Customer:B",
    ),
    # JPY -> JPY without rateDetails and without fees
    outgoing(
        3,
        "2025-10-20T00:00:00Z",
        amt(5_000, *JPY),
        receivedAmount=amt(5_000, *JPY),
        paymentRail="ACH",
        settledAt="2025-10-20T00:10:00Z",
    ),
    # USD -> USD: fees present, platformFees absent
    outgoing(
        4,
        "2025-10-21T10:00:00Z",
        amt(20_000, *USD),
        receivedAmount=amt(19_900, *USD),
        fees=100,
        rateDetails=rate(60, 40, 0.002, 0),
        paymentRail="WIRE",
        settledAt="2025-10-22T10:00:00Z",
    ),
    # USD -> USD, completed, fees but no rateDetails, no settledAt
    outgoing(
        5,
        "2025-10-22T10:00:00Z",
        amt(30_000, *USD),
        fees=90,
        platformFees=10,
        paymentRail="WIRE",
        updatedAt="2025-10-22T12:00:00+00:00",
    ),
    # JPY -> JPY completed with fees: one corridor, one with fees and one without
    outgoing(
        18,
        "2025-10-29T00:00:00Z",
        amt(10_000, *JPY),
        receivedAmount=amt(9_950, *JPY),
        fees=50,
        platformFees=0,
        paymentRail="ACH",
        settledAt="2025-10-29T00:20:00Z",
    ),
    # USD -> JPY completed, second one of the corridor, Z, in November (UTC)
    outgoing(
        6,
        "2025-11-02T00:00:00Z",
        amt(50_000, *USD),
        receivedAmount=amt(74_500, *JPY),
        exchangeRate=0.0067,
        fees=700,
        platformFees=100,
        rateDetails=rate(300, 150, 0.003, 25),
        paymentRail="ACH",
        settledAt="2025-11-02T03:00:00Z",
        customerId="Customer:B",
    ),
    # failed with refund PENDING
    outgoing(
        7,
        "2025-10-23T00:00:00Z",
        amt(12_345, *USD),
        status="FAILED",
        failureReason="QUOTE_EXECUTION_FAILED",
        fees=45,
        refund=refund("PENDING", "2025-10-23T01:00:00Z"),
    ),
    # failed with refund COMPLETED, offsets on the refund's times
    outgoing(
        8,
        "2025-10-24T00:00:00Z",
        amt(1_500, *KWD),
        status="FAILED",
        failureReason="PAYOUT_RETURNED",
        refund=refund("COMPLETED", "2025-10-24T02:00:00+02:00", "2025-10-24T03:30:00+01:00"),
    ),
    # removed and deprecated reasons (old records; open enum)
    outgoing(
        9,
        "2025-10-25T00:00:00Z",
        amt(700, *USD),
        status="FAILED",
        failureReason="EXECUTION_FAILED_POST_DEBIT",
    ),
    outgoing(10, "2025-10-25T01:00:00Z", amt(800, *USD), status="FAILED", failureReason="TIMEOUT"),
    outgoing(
        11,
        "2025-10-25T02:00:00Z",
        amt(900, *USD),
        status="FAILED",
        failureReason="MANUAL_REFUND",
        refund=refund("COMPLETED", "2025-10-25T03:00:00Z", "2025-10-25T04:00:00Z"),
    ),
    outgoing(
        12,
        "2025-10-25T03:00:00Z",
        amt(1_000, *USD),
        status="FAILED",
        failureReason="COUNTERPARTY_POST_TX_FAILED",
        paymentRail="ACH",
    ),
    outgoing(
        13,
        "2025-10-25T04:00:00Z",
        amt(2_000, *BTC),
        status="FAILED",
        failureReason="LIGHTNING_PAYMENT_FAILED",
        paymentRail="RTP",
    ),
    # a status this version does not know (open enum)
    outgoing(14, "2025-10-26T00:00:00Z", amt(4_444, *USD), status="ON_HOLD", paymentRail="ACH"),
    # cancelled
    outgoing(
        15,
        "2025-10-27T00:00:00Z",
        amt(5_555, *USD),
        status="FAILED",
        refund=refund(
            "COMPLETED", "2025-10-27T01:00:00Z", "2025-10-27T02:00:00Z", "USER_CANCELLATION"
        ),
        paymentRail="ACH",
    ),
    # a sending currency whose decimals the record does not give; completed
    outgoing(
        16,
        "2025-10-28T00:00:00Z",
        amt(777, "USDC", None),
        fees=7,
        platformFees=1,
        settledAt="2025-10-28T00:00:30Z",
    ),
    # open, processing
    outgoing(17, "2025-11-20T00:00:00Z", amt(6_000, *USD), status="PROCESSING", paymentRail="ACH"),
    # incoming: completed with a completed refund; failed with a pending refund; created; failed
    incoming(
        31,
        "2025-10-10T23:30:00-03:00",
        amt(5_000, *EUR),
        refund=refund("COMPLETED", "2025-10-12T00:00:00Z", "2025-10-13T00:00:00Z"),
    ),
    incoming(
        32,
        "2025-10-11T00:00:00Z",
        amt(600, *JPY),
        status="FAILED",
        failureReason="COMPLIANCE_REJECTED",
        refund=refund("PENDING", "2025-10-11T06:00:00Z"),
    ),
    incoming(33, "2025-10-12T00:00:00Z", amt(3_000, *EUR), status="CREATED"),
    incoming(
        34,
        "2025-10-13T00:00:00Z",
        amt(1_234, *KWD),
        status="FAILED",
        failureReason="COLLECTION_FAILED",
    ),
    incoming(35, "2025-10-14T00:00:00Z", amt(8_000, *EUR), settledAt="2025-10-14T00:05:00Z"),
]

CARDS: list[dict[str, Any]] = [
    # settled in full, summaries in USD (funding account USD)
    card(
        41,
        "SETTLED",
        amt(5_000, *USD),
        "2025-10-01T10:00:00Z",
        settledAmount=amt(5_000, *USD),
        settlementSummary=summary(1, 5_000),
        pullSummary=summary(1, 5_000, 0),
        lastEventAt="2025-10-02T10:00:00Z",
    ),
    # partially settled
    card(
        42,
        "PARTIALLY_SETTLED",
        amt(10_000, *USD),
        "2025-10-05T10:00:00Z",
        settledAmount=amt(4_000, *USD),
        settlementSummary=summary(1, 4_000),
        pullSummary=summary(1, 4_000, 0),
        lastEventAt="2025-10-06T10:00:00Z",
    ),
    # over-settled with a tip (two pulls)
    card(
        43,
        "SETTLED",
        amt(2_000, *USD),
        "2025-10-07T10:00:00Z",
        settledAmount=amt(2_400, *USD),
        settlementSummary=summary(2, 2_400),
        pullSummary=summary(2, 2_400, 0),
        lastEventAt="2025-10-08T12:00:00Z",
    ),
    # refunded in part
    card(
        44,
        "REFUNDED",
        amt(3_000, *USD),
        "2025-10-09T10:00:00Z",
        settledAmount=amt(3_000, *USD),
        refundedAmount=amt(1_000, *USD),
        settlementSummary=summary(1, 3_000),
        refundSummary=summary(1, 1_000),
        pullSummary=summary(1, 3_000, 0),
        lastEventAt="2025-10-12T10:00:00Z",
    ),
    # authorized in EUR, settled in USD (another currency), funding USD
    card(
        45,
        "SETTLED",
        amt(1_000, *EUR),
        "2025-10-10T10:00:00Z",
        settledAmount=amt(1_100, *USD),
        settlementSummary=summary(1, 1_100),
        pullSummary=summary(1, 1_100, 0),
        lastEventAt="2025-10-11T10:00:00Z",
    ),
    # authorized in EUR, partially settled in USD: the open hold is unknown
    card(
        46,
        "PARTIALLY_SETTLED",
        amt(5_000, *EUR),
        "2025-10-10T11:00:00Z",
        settledAmount=amt(2_000, *USD),
        settlementSummary=summary(1, 2_000),
        pullSummary=summary(1, 2_000, 0),
        lastEventAt="2025-10-11T11:00:00Z",
    ),
    # settled in USD, refunded in EUR (another currency)
    card(
        47,
        "REFUNDED",
        amt(4_000, *USD),
        "2025-10-13T10:00:00Z",
        settledAmount=amt(4_000, *USD),
        refundedAmount=amt(3_500, *EUR),
        settlementSummary=summary(1, 4_000),
        refundSummary=summary(1, 3_700),
        lastEventAt="2025-10-14T10:00:00Z",
    ),
    # a status this version does not know (open enum), JPY card funded from a JPY account
    card(
        48,
        "DISPUTED",
        amt(900, *JPY),
        "2025-10-15T10:00:00Z",
        account="InternalAccount:jpy",
        settledAmount=amt(900, *JPY),
        lastEventAt="2025-10-16T10:00:00Z",
    ),
    # authorized only, JPY, month boundary: +02:00 makes it October in UTC
    card(
        49,
        "AUTHORIZED",
        amt(12_000, *JPY),
        "2025-11-01T01:00:00+02:00",
        account="InternalAccount:jpy",
    ),
    # authorized only, KWD (3 decimals) funded from a KWD account, old hold
    card(50, "AUTHORIZED", amt(7_250, *KWD), "2025-09-01T00:00:00Z", account="InternalAccount:kwd"),
    # exception: settled 3000 USD, pulled 1000
    card(
        51,
        "EXCEPTION",
        amt(3_000, *USD),
        "2025-10-20T10:00:00Z",
        settledAmount=amt(3_000, *USD),
        settlementSummary=summary(1, 3_000),
        pullSummary=summary(1, 1_000, 1),
        lastEventAt="2025-10-21T10:00:00Z",
    ),
]

ACCOUNTS = [account("usd", *USD), account("jpy", *JPY), account("kwd", *KWD)]

#: records whose status or failure reason the current enums do not list (old or new values)
OPEN_IDS = {tid(n) for n in (9, 10, 11, 14)} | {tid(48, "CardTransaction")}


def test_every_record_is_valid_per_the_interface() -> None:
    for record in [*TRANSFERS, *CARDS]:
        check_valid(record, open_=record["id"] in OPEN_IDS)
    for record in CARDS:
        check_valid(record, "CardTransaction", open_=record["id"] in OPEN_IDS)
    for record in ACCOUNTS:
        check_valid(record, "InternalAccount")


@pytest.fixture(scope="module")
def wh() -> Iterator[Any]:
    service = FakeService(transactions=[*TRANSFERS, *CARDS], internal_accounts=ACCOUNTS)
    with synced(service) as (warehouse, _report):
        assert warehouse.sql("SELECT count(*) AS n FROM rejected_records")["n"].tolist() == [0]
        yield warehouse


# -- plain-Python reading of the raw JSON -----------------------------------------------------


def instant(text: str | None) -> datetime | None:
    if text is None:
        return None
    return datetime.fromisoformat(text.upper().replace("Z", "+00:00")).astimezone(UTC)


def month(text: str | None) -> date | None:
    t = instant(text)
    return None if t is None else date(t.year, t.month, 1)


def half_up(y: float) -> int:
    return math.floor(y + 0.5)


def na(value: Any) -> Any:
    """A frame value as Python: missing is None."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    try:
        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, pd.Timestamp):
        return value.to_pydatetime()
    return value


def frame_rows(frame: pd.DataFrame, keys: list[str], values: list[str]) -> dict[tuple, dict]:
    out = {}
    for row in frame.to_dict("records"):
        key = tuple(na(row[k]) for k in keys)
        assert key not in out, key
        out[key] = {v: na(row[v]) for v in values}
    return out


def close(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)
    return a == b


def assert_same(observed: dict, expected: dict) -> None:
    assert set(observed) == set(expected), (sorted(map(str, observed)), sorted(map(str, expected)))
    bad = {
        k: {f: (observed[k].get(f), v) for f, v in e.items() if not close(observed[k].get(f), v)}
        for k, e in expected.items()
    }
    bad = {k: v for k, v in bad.items() if v}
    assert not bad, bad


def money(record: dict, name: str) -> tuple[Any, Any, Any]:
    m = record.get(name)
    if m is None:
        return None, None, None
    return m["amount"], m["currency"].get("code"), m["currency"].get("decimals")


def by_id(records: list[dict]) -> dict[str, dict]:
    return {r["id"]: r for r in records}


def of_type(kind: str) -> list[dict]:
    return [r for r in TRANSFERS if r["type"] == kind]


def total(values: list[Any]) -> Any:
    """A SQL sum: of the known values; None when none is known."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def ratio(a: Any, b: Any) -> Any:
    return None if a is None or b is None or b == 0 else a / b


# -- fee_breakdown and revenue ----------------------------------------------------------------


def fee_row(r: dict) -> dict[str, Any]:
    """One outgoing transfer's figures by `fee_breakdown`'s docstring formulas."""
    sent, s, ds = money(r, "sentAmount")
    received, rc, dr = money(r, "receivedAmount")
    rd = r.get("rateDetails") or {}
    x = r.get("exchangeRate")
    if x is None and s is not None and s == rc:
        x = 1.0
    cf = rd.get("counterpartyFixedFee")
    cs = None
    if cf is not None and x is not None and ds is not None and dr is not None:
        cs = half_up(float(cf) * x * 10.0 ** (ds - dr))
    f, v, p, fees = (
        rd.get("gridApiFixedFee"),
        rd.get("gridApiVariableFeeAmount"),
        r.get("platformFees"),
        r.get("fees"),
    )
    components = sum(c or 0 for c in (f, v, p, cs))
    return {
        "status": r["status"],
        "month": month(r["createdAt"]),
        "settlement_month": month(r.get("settledAt")),
        "customer_id": r["customerId"],
        "rail": r.get("paymentRail"),
        "corridor": f"{s or '?'}→{rc or '?'}",
        "sent_currency": s,
        "sent_decimals": ds,
        "received_currency": rc,
        "received_decimals": dr,
        "sent_minor": sent,
        "received_minor": received,
        "exchange_rate": x,
        "fees_minor": fees,
        "service_fixed_fee_minor": f,
        "service_variable_fee_minor": v,
        "platform_fee_minor": p,
        "counterparty_fixed_fee_received_minor": cf,
        "counterparty_fixed_fee_minor": cs,
        "components_minor": components,
        "residual_minor": None if fees is None else fees - components,
        "take_rate": ratio(fees, sent),
    }


FEE_ROW_FIELDS = list(fee_row(TRANSFERS[0]))


def test_fee_breakdown_per_transfer(wh: Any) -> None:
    from paylens.analysis import fee_breakdown

    frame = fee_breakdown(wh, status=None)
    expected = {(r["id"],): fee_row(r) for r in of_type("OUTGOING")}
    assert_same(frame_rows(frame, ["id"], FEE_ROW_FIELDS), expected)


SUMMED = [
    "sent_minor",
    "fees_minor",
    "service_fixed_fee_minor",
    "service_variable_fee_minor",
    "platform_fee_minor",
    "counterparty_fixed_fee_minor",
    "components_minor",
    "residual_minor",
]


def fee_groups(keys: list[str], status: str | None = "COMPLETED") -> dict[tuple, dict]:
    """Groups of `fee_breakdown` by `keys` + sending currency (+ receiving when by corridor)."""
    receiving = "corridor" in keys
    cur_keys = ["sent_currency", "sent_decimals"] + (
        ["received_currency", "received_decimals"] if receiving else []
    )
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in of_type("OUTGOING"):
        if status is not None and r["status"] != status:
            continue
        row = fee_row(r)
        groups[tuple(row[k] for k in [*keys, *cur_keys])].append(row)
    out = {}
    for key, rows in groups.items():
        e = {"transaction_count": len(rows)}
        e.update({c: total([row[c] for row in rows]) for c in SUMMED})
        e["residual_count"] = sum(1 for row in rows if row["residual_minor"] not in (None, 0))
        e["cross_currency_count"] = sum(
            1
            for row in rows
            if row["received_currency"] is not None
            and row["sent_currency"] != row["received_currency"]
        )
        # over the rows whose fees are known (`fees` is optional), as `all_in_cost_rate`
        known = [row["sent_minor"] for row in rows if row["fees_minor"] is not None]
        e["take_rate"] = ratio(e["fees_minor"], total(known))
        if receiving:
            e["received_minor"] = total([row["received_minor"] for row in rows])
            e["counterparty_fixed_fee_received_minor"] = total(
                [row["counterparty_fixed_fee_received_minor"] for row in rows]
            )
        out[key] = e
    return out


@pytest.mark.parametrize("by", ["corridor", "rail", "month", "customer", "settlement_month"])
def test_fee_breakdown_groups(wh: Any, by: str) -> None:
    from paylens.analysis import fee_breakdown

    column = {"customer": "customer_id"}.get(by, by)
    expected = fee_groups([column])
    frame = fee_breakdown(wh, by=by)
    keys = [column, "sent_currency", "sent_decimals"]
    if by == "corridor":
        keys += ["received_currency", "received_decimals"]
    fields = sorted({f for e in expected.values() for f in e})
    assert_same(frame_rows(frame, keys, fields), expected)


@pytest.mark.parametrize("by", ["settlement_month", "month", "rail", "corridor"])
def test_revenue_groups(wh: Any, by: str) -> None:
    from paylens.analysis import fees_collected

    column = {"customer": "customer_id"}.get(by, by)
    expected = fee_groups([column])
    frame = fees_collected(wh, by=by)
    # the figures recomputed here that `revenue` also gives (it renames the FX ones)
    fields = [f for f in next(iter(expected.values())) if f in frame.columns]
    expected = {k: {f: v[f] for f in fields} for k, v in expected.items()}
    keys = [column, "sent_currency", "sent_decimals"]
    if by == "corridor":
        keys += ["received_currency", "received_decimals"]
    assert_same(frame_rows(frame, keys, fields), expected)


def test_revenue_fx_margin_with_a_reference_rate(wh: Any) -> None:
    """fx_margin = round_half_up(received * 10^(dS - dR) * (x - mid)), per transfer, summed;
    fx_margin_rate = margin / (received * 10^(dS-dR) * mid) over the rows with a reference."""
    from paylens.analysis import fees_collected

    mid = {("USD", "JPY"): 0.0065}
    frame = fees_collected(wh, by="corridor", reference_rates=mid)
    rows = [fee_row(r) for r in of_type("OUTGOING") if r["status"] == "COMPLETED"]
    usdjpy = [r for r in rows if r["corridor"] == "USD→JPY"]
    margin = sum(
        half_up(
            float(r["received_minor"])
            * 10.0 ** (r["sent_decimals"] - r["received_decimals"])
            * (r["exchange_rate"] - 0.0065)
        )
        for r in usdjpy
    )
    at_mid = sum(r["received_minor"] * 10.0**2 * 0.0065 for r in usdjpy)
    spread = sum(r["received_minor"] * 10.0**2 * (r["exchange_rate"] - 0.0065) for r in usdjpy)
    got = frame_rows(
        frame,
        ["corridor"],
        ["fx_margin_minor", "fx_margin_rate", "all_in_rate", "fx_margin_status"],
    )
    fees = sum(r["fees_minor"] for r in usdjpy)
    sent = sum(r["sent_minor"] for r in usdjpy)
    assert got[("USD→JPY",)]["fx_margin_minor"] == margin
    assert close(got[("USD→JPY",)]["fx_margin_rate"], margin / at_mid)  # the rounded margin
    assert spread != margin
    assert close(got[("USD→JPY",)]["all_in_rate"], (fees + margin) / sent)
    assert got[("USD→JPY",)]["fx_margin_status"] == "complete"
    # no reference for KWD→BTC: unknown, not 0
    assert got[("KWD→BTC",)]["fx_margin_minor"] is None


# -- the lifecycle vocabulary (paylens.analysis.LIFECYCLES, as its docstring words it) ---------

REMOVED = {"EXECUTION_FAILED_POST_DEBIT", "SETTLEMENT_FAILED", "TIMEOUT", "MANUAL_REFUND"}
DEPRECATED = {"LIGHTNING_PAYMENT_FAILED", "COUNTERPARTY_POST_TX_FAILED"}
PAYOUT = {
    "PAYOUT_RETURNED",
    "LIMIT_EXCEEDED",
    "ACCOUNT_CANNOT_RECEIVE",
    "ACCOUNT_INVALID",
    "COMPLIANCE_REJECTED",
    "COUNTERPARTY_POST_TX_FAILED",
}
RESOLVED = {
    "completed",
    "failed",
    "refunded",
    "refund_pending",
    "refund_failed",
    "expired",
    "rejected",
    "cancelled",
}
UNSUCCESSFUL = RESOLVED - {"completed"}
FAILURES = {"failed", "refunded", "refund_pending", "refund_failed"}


def lifecycle(r: dict) -> str:
    status, ref = r["status"], r.get("refund")
    if ref and ref.get("reason") == "USER_CANCELLATION" and status != "COMPLETED":
        return "cancelled"
    if status == "COMPLETED":
        return "completed"
    if status in ("EXPIRED", "REJECTED"):
        return status.lower()
    if status == "REFUNDED" or (status == "FAILED" and ref and ref.get("status") == "COMPLETED"):
        return "refunded"
    if status == "FAILED" and ref and ref.get("status") == "FAILED":
        return "refund_failed"
    if status == "FAILED" and ref and ref.get("status") is not None:
        return "refund_pending"
    return "failed" if status == "FAILED" else "open"


def reason(r: dict) -> str | None:
    reported = r.get("failureReason")
    if r["type"] == "OUTGOING" and reported in REMOVED:
        return "QUOTE_EXECUTION_FAILED"
    return reported


def headline(r: dict) -> tuple[Any, Any, Any]:
    return money(r, "sentAmount" if r["type"] == "OUTGOING" else "receivedAmount")


def base_row(r: dict) -> dict[str, Any]:
    _, s, _ = money(r, "sentAmount")
    _, rc, _ = money(r, "receivedAmount")
    return {
        "type": r["type"],
        "month": month(r.get("createdAt")),
        "customer_id": r["customerId"],
        "rail": r.get("paymentRail"),
        "corridor": f"{s or '?'}→{rc or '?'}",
        "status": r["status"],
    }


def failure_groups(key: str) -> dict[tuple, dict]:
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in TRANSFERS:
        amount, code, dec = headline(r)
        row = {
            **base_row(r),
            "lifecycle": lifecycle(r),
            "failure_reason": reason(r),
            "amount": amount,
            "removed": r["type"] == "OUTGOING" and r.get("failureReason") in REMOVED,
            "deprecated": r["type"] == "OUTGOING" and r.get("failureReason") in DEPRECATED,
            "coarse": r["type"] == "OUTGOING"
            and r.get("failureReason") == "COUNTERPARTY_POST_TX_FAILED",
            "payout": r["type"] == "OUTGOING" and r.get("failureReason") in PAYOUT,
        }
        groups[(r["type"], row[key], code, dec)].append(row)
    out = {}
    for g, rows in groups.items():
        resolved = [x for x in rows if x["lifecycle"] in RESOLVED]
        common = {
            "attempted_count": len(rows),
            "open_count": sum(x["lifecycle"] == "open" for x in rows),
            "resolved_count": len(resolved),
            "completed_count": sum(x["lifecycle"] == "completed" for x in rows),
            "failure_rate": ratio(sum(x["lifecycle"] in FAILURES for x in rows), len(resolved)),
            "resolved_amount_minor": sum(x["amount"] for x in resolved),
            "coarse_payout_share": ratio(
                sum(x["coarse"] for x in rows), sum(x["payout"] for x in rows)
            ),
        }
        bad: dict[tuple, list[dict]] = defaultdict(list)
        for x in rows:
            if x["lifecycle"] in UNSUCCESSFUL:
                bad[(x["lifecycle"], x["failure_reason"])].append(x)
        if not bad:
            out[(*g, None, None)] = {**common, "transaction_count": 0, "amount_minor": 0}
        for (lc, fr), xs in bad.items():
            amount = sum(x["amount"] for x in xs)
            out[(*g, lc, fr)] = {
                **common,
                "transaction_count": len(xs),
                "amount_minor": amount,
                "share_of_resolved": ratio(len(xs), len(resolved)),
                "amount_rate": ratio(amount, common["resolved_amount_minor"]),
                "reason_removed": any(x["removed"] for x in xs),
                "reason_deprecated": any(x["deprecated"] for x in xs),
                "reason_coarse": any(x["coarse"] for x in xs),
            }
    return out


@pytest.mark.parametrize("by", ["month", "corridor", "rail", "customer"])
def test_failure_breakdown_groups(wh: Any, by: str) -> None:
    from paylens.analysis import failure_breakdown

    column = {"customer": "customer_id"}.get(by, by)
    expected = failure_groups(column)
    fields = sorted({f for e in expected.values() for f in e})
    frame = failure_breakdown(wh, by=by)
    keys = ["type", column, "currency", "decimals", "lifecycle", "failure_reason"]
    assert_same(frame_rows(frame, keys, fields), expected)


def test_failure_breakdown_per_transaction_keeps_the_reported_reason(wh: Any) -> None:
    from paylens.analysis import failure_breakdown

    frame = failure_breakdown(wh)
    expected = {}
    for r in TRANSFERS:
        amount, code, dec = headline(r)
        expected[(r["id"],)] = {
            "lifecycle": lifecycle(r),
            "failure_reason": reason(r),
            "reported_failure_reason": r.get("failureReason"),
            "amount_minor": amount,
            "currency": code,
            "decimals": dec,
            "month": month(r["createdAt"]),
        }
    fields = list(next(iter(expected.values())))
    assert_same(frame_rows(frame, ["id"], fields), expected)


# -- Kaplan–Meier as the settlement_times docstring states it -----------------------------------


def km_quantiles(obs: list[tuple[float, bool]]) -> dict[str, Any]:
    """p50/p90/p99: the smallest event time t with 1 - S(t) >= p; S(t) = prod over event times
    t_i <= t of (1 - d_i / n_i), n_i the observations with a time >= t_i; None over fewer than
    2, 10, 100 observations (settled and censored)."""
    out: dict[str, Any] = {"p50_seconds": None, "p90_seconds": None, "p99_seconds": None}
    enough = {"p50_seconds": 2, "p90_seconds": 10, "p99_seconds": 100}
    s = 1.0
    for t in sorted({t for t, event in obs if event}):
        d = sum(1 for u, e in obs if e and u == t)
        n = sum(1 for u, _ in obs if u >= t)
        s *= 1 - d / n
        for q, name in ((0.5, "p50_seconds"), (0.9, "p90_seconds"), (0.99, "p99_seconds")):
            if out[name] is None and 1 - s >= q - 1e-9 and len(obs) >= enough[name]:
                out[name] = t
    return out


def settled_at(r: dict) -> datetime | None:
    """settledAt, else (a completed transfer) the updatedAt its COMPLETED was observed with,
    else the observation itself (the sync, after AS_OF)."""
    if r["status"] != "COMPLETED":
        return None
    return instant(r.get("settledAt") or r.get("updatedAt")) or datetime.now(UTC)


def settlement_rows(kind: str, as_of: datetime) -> list[dict]:
    rows = []
    for r in of_type(kind):
        created = instant(r["createdAt"])
        if created > as_of:
            continue
        lc, at = lifecycle(r), settled_at(r)
        done = lc == "completed" and at is not None and at <= as_of
        open_ = lc == "open" or (lc == "completed" and at is not None and at > as_of)
        rows.append(
            {
                **base_row(r),
                "id": r["id"],
                "lifecycle": lc,
                "settlement_seconds": (at - created).total_seconds() if done else None,
                "open_seconds": (as_of - created).total_seconds() if open_ else None,
            }
        )
    return rows


@pytest.mark.parametrize("kind", ["OUTGOING", "INCOMING"])
def test_settlement_times_per_transfer(wh: Any, kind: str) -> None:
    from paylens.analysis import settlement_times

    frame = settlement_times(wh, type=kind, as_of=AS_OF)
    rows = settlement_rows(kind, instant(AS_OF))
    fields = ["lifecycle", "settlement_seconds", "open_seconds", "month", "rail", "corridor"]
    expected = {(r["id"],): {f: r[f] for f in fields} for r in rows}
    assert_same(frame_rows(frame, ["id"], fields), expected)


@pytest.mark.parametrize("by", ["rail", "month", "customer", "corridor"])
def test_settlement_times_groups(wh: Any, by: str) -> None:
    from paylens.analysis import settlement_times

    column = {"customer": "customer_id"}.get(by, by)
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in settlement_rows("OUTGOING", instant(AS_OF)):
        groups[(r[column],)].append(r)
    expected = {}
    for g, rows in groups.items():
        resolved = [r for r in rows if r["lifecycle"] in RESOLVED]
        e = {
            "transaction_count": len(rows),
            **{
                f"{lc}_count": sum(r["lifecycle"] == lc for r in rows)
                for lc in (
                    "open",
                    "completed",
                    "failed",
                    "refunded",
                    "refund_pending",
                    "refund_failed",
                    "cancelled",
                )
            },
            "resolved_count": len(resolved),
            "failure_rate": ratio(sum(r["lifecycle"] in FAILURES for r in rows), len(resolved)),
        }
        obs = [(r["settlement_seconds"], True) for r in rows if r["settlement_seconds"] is not None]
        obs += [(r["open_seconds"], False) for r in rows if r["open_seconds"] is not None]
        e.update(km_quantiles(obs))
        expected[g] = e
    frame = settlement_times(wh, by=by, as_of=AS_OF)
    fields = sorted({f for e in expected.values() for f in e})
    assert_same(frame_rows(frame, [column], fields), expected)


# -- refunds --------------------------------------------------------------------------------------


@pytest.mark.parametrize("by", ["month", "customer", "refund_status"])
def test_refund_summary_groups(wh: Any, by: str) -> None:
    from paylens.analysis import refund_summary

    column = {"customer": "customer_id"}.get(by, by)
    as_of = instant(AS_OF)
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in TRANSFERS:
        amount, code, dec = headline(r)
        ref = r.get("refund")
        row = {
            **base_row(r),
            "lifecycle": lifecycle(r),
            "ref": ref,
            "amount": amount,
            "refund_status": ref["status"] if ref else None,
        }
        groups[(r["type"], row[column], code, dec)].append(row)
    expected = {}
    for g, rows in groups.items():
        refs = [x for x in rows if x["ref"]]
        resolved = sum(x["lifecycle"] in RESOLVED for x in rows)
        ended = [x for x in refs if x["ref"]["status"] in ("COMPLETED", "FAILED")]
        obs = []
        for x in refs:
            start, end = instant(x["ref"]["initiatedAt"]), instant(x["ref"].get("settledAt"))
            if x["ref"]["status"] == "COMPLETED" and end <= as_of:
                obs.append(((end - start).total_seconds(), True))
            elif x["ref"]["status"] == "PENDING" or (
                x["ref"]["status"] == "COMPLETED" and end > as_of
            ):
                obs.append(((as_of - start).total_seconds(), False))
        expected[g] = {
            "transaction_count": len(rows),
            "resolved_count": resolved,
            "refunded_count": len(refs),
            "refund_rate": ratio(len(refs), resolved),
            **{
                f"refund_{s.lower()}_count": sum(x["ref"]["status"] == s for x in refs)
                for s in ("PENDING", "COMPLETED", "FAILED")
            },
            "refund_failure_rate": ratio(
                sum(x["ref"]["status"] == "FAILED" for x in ended), len(ended)
            ),
            "refunded_amount_minor": sum(x["amount"] for x in refs),
            **km_quantiles(obs),
        }
    frame = refund_summary(wh, by=by, as_of=AS_OF)
    fields = sorted({f for e in expected.values() for f in e})
    assert_same(frame_rows(frame, ["type", column, "currency", "decimals"], fields), expected)


# -- cards ----------------------------------------------------------------------------------------

FUNDING = {
    a["id"]: (a["balance"]["currency"]["code"], a["balance"]["currency"]["decimals"])
    for a in ACCOUNTS
}
HOLDING = {"AUTHORIZED", "PARTIALLY_SETTLED"}


def same_currency(r: dict, name: str) -> Any:
    """0 when absent, None when in another currency than the authorization."""
    amount, code, _ = money(r, name)
    if amount is None:
        return 0
    return amount if code == r["authorizedAmount"]["currency"]["code"] else None


def card_row(r: dict, as_of: datetime) -> dict[str, Any]:
    auth, code, dec = money(r, "authorizedAmount")
    settled, refunded = same_currency(r, "settledAmount"), same_currency(r, "refundedAmount")
    holding = r["status"] in HOLDING
    fcode, fdec = FUNDING.get(r["accountId"], (None, None))
    same_funding = fcode == code
    pulls = r.get("pullSummary")
    cleared = bool(r.get("settlementSummary", {}).get("count")) or "settledAmount" in r
    refunded_any = bool(r.get("refundSummary", {}).get("count")) or "refundedAmount" in r
    age = (as_of - instant(r["authorizedAt"])).total_seconds() if holding else None
    last = instant(r.get("lastEventAt")) if cleared and not refunded_any else None
    return {
        "status": r["status"],
        "month": month(r["authorizedAt"]),
        "currency": code,
        "decimals": dec,
        "funding_currency": fcode,
        "funding_decimals": fdec,
        "authorized_minor": auth,
        "settled_minor": settled,
        "refunded_minor": refunded,
        # a hold older than the 30-day hold window is expired exposure, not open
        "open_hold_minor": (None if settled is None else max(auth - settled, 0))
        if holding and age <= 30 * 86_400
        else 0,
        "over_settled_minor": None if settled is None else max(settled - auth, 0),
        "currency_mismatch": settled is None or refunded is None,
        "hold_age_seconds": age,
        "stale_hold": bool(holding and 7 * 86_400 < age <= 30 * 86_400),
        "settlement_seconds": None
        if last is None
        else (last - instant(r["authorizedAt"])).total_seconds(),
        "exception_exposure_minor": 0
        if r["status"] != "EXCEPTION"
        else (max(settled - (pulls or {}).get("totalAmount", 0), 0) if same_funding else None),
        "pull_total_minor": (pulls or {}).get("totalAmount"),
        # a summary the record does not carry is unknown: not comparable (never a false alarm)
        "settlement_summary_mismatch": (
            r["settlementSummary"]["totalAmount"] != settled
            if same_funding and "settlementSummary" in r
            else None
        ),
        "pull_shortfall": (
            pulls["totalAmount"] < settled
            if same_funding
            and r["status"] != "EXCEPTION"
            and pulls
            and not pulls.get("pendingCount")
            else None
        ),
    }


#: per-row columns compared in the main card test; the others are in the findings below
CARD_HELD = [
    "status",
    "month",
    "currency",
    "decimals",
    "funding_currency",
    "funding_decimals",
    "authorized_minor",
    "settled_minor",
    "refunded_minor",
    "currency_mismatch",
    "hold_age_seconds",
    "stale_hold",
    "settlement_seconds",
    "exception_exposure_minor",
    "pull_total_minor",
]


def test_card_summary_per_transaction(wh: Any) -> None:
    from paylens.analysis import card_summary

    frame = card_summary(wh, as_of=AS_OF)
    expected = {(r["id"],): card_row(r, instant(AS_OF)) for r in CARDS}
    # rows where the open hold and over-settlement are known (see the findings for the others)
    for key, e in expected.items():
        if e["settled_minor"] is not None:
            CARD_HELD_ROW = [*CARD_HELD, "open_hold_minor", "over_settled_minor"]
        else:
            CARD_HELD_ROW = CARD_HELD
        expected[key] = {f: e[f] for f in CARD_HELD_ROW}
    assert_same(
        frame_rows(frame, ["id"], CARD_HELD),
        {k: {f: v[f] for f in CARD_HELD} for k, v in expected.items()},
    )
    got = frame_rows(frame, ["id"], ["open_hold_minor", "over_settled_minor"])
    for key, e in expected.items():
        for f in ("open_hold_minor", "over_settled_minor"):
            if f in e:
                assert got[key][f] == e[f], (key, f)


@pytest.mark.parametrize("by", ["month", "merchant", "status"])
def test_card_summary_groups(wh: Any, by: str) -> None:
    """Group sums of the amounts that are known (the same currency as the authorization)."""
    from paylens.analysis import card_summary

    as_of = instant(AS_OF)
    column = {"merchant": "merchant"}.get(by, by)
    groups: dict[tuple, list[tuple[dict, dict]]] = defaultdict(list)
    for r in CARDS:
        row = card_row(r, as_of)
        key = {
            "month": row["month"],
            "merchant": r["merchant"]["descriptor"],
            "status": r["status"],
        }[by]
        groups[(key, row["currency"], row["funding_currency"])].append((r, row))
    expected = {}
    for g, pairs in groups.items():
        rows = [row for _, row in pairs]
        if any(row["currency_mismatch"] for row in rows):
            continue  # see the findings
        settled = sum(row["settled_minor"] for row in rows)
        refunded = sum(row["refunded_minor"] for row in rows)
        cleared = sorted(
            row["settlement_seconds"] for row in rows if row["settlement_seconds"] is not None
        )
        expected[g] = {
            "transaction_count": len(rows),
            "authorized_minor": sum(row["authorized_minor"] for row in rows),
            "settled_minor": settled,
            "refunded_minor": refunded,
            "net_settled_minor": settled - refunded,
            "open_hold_minor": sum(row["open_hold_minor"] for row in rows),
            "cleared_count": len(cleared),
            "settlement_p50_seconds": float(pd.Series(cleared, dtype=float).quantile(0.5))
            if len(cleared) >= 2
            else None,
            "stale_hold_count": sum(row["stale_hold"] for row in rows),
            "over_settled_count": sum(row["over_settled_minor"] > 0 for row in rows),
            "over_settled_minor": sum(row["over_settled_minor"] for row in rows),
            "exception_count": sum(row["status"] == "EXCEPTION" for row in rows),
            "exception_exposure_minor": total(
                [row["exception_exposure_minor"] for row in rows if row["status"] == "EXCEPTION"]
            ),
            "pull_total_minor": sum(row["pull_total_minor"] or 0 for row in rows),
        }
    frame = card_summary(wh, by=by, as_of=AS_OF)
    fields = sorted({f for e in expected.values() for f in e})
    got = frame_rows(frame, [column, "currency", "funding_currency"], fields)
    assert_same({k: v for k, v in got.items() if k in expected}, expected)


def test_a_refund_pending_then_completed_is_read_from_the_latest_record() -> None:
    """Held: a FAILED transfer whose refund is PENDING at one sync and COMPLETED at the next reads
    COMPLETED, its refund time settledAt - initiatedAt (7200 s)."""
    import tempfile
    from pathlib import Path

    from paylens.analysis import refund_summary
    from paylens.warehouse import Warehouse

    pending = outgoing(
        1,
        "2025-10-01T00:00:00Z",
        amt(1_000, *USD),
        status="FAILED",
        failureReason="QUOTE_EXECUTION_FAILED",
        updatedAt="2025-10-01T01:00:00Z",
        refund=refund("PENDING", "2025-10-01T01:00:00Z"),
    )
    done = {
        **pending,
        "updatedAt": "2025-10-01T03:00:00+00:00",
        "refund": refund("COMPLETED", "2025-10-01T01:00:00Z", "2025-10-01T04:00:00+01:00"),
    }
    for record in (pending, done):
        check_valid(record)
    service = FakeService(transactions=[pending])
    with (
        tempfile.TemporaryDirectory(dir="/tmp") as folder,
        Warehouse(Path(folder) / "w.duckdb") as wh,
    ):
        with service.client() as client:
            wh.sync(client, progress=False)
        first = refund_summary(wh, as_of="2025-10-02")
        assert first["refund_status"].tolist() == ["PENDING"]
        service.transactions = [done]
        with service.client() as client:
            wh.sync(client, progress=False)
        second = refund_summary(wh, as_of="2025-10-02")
        assert second["refund_status"].tolist() == ["COMPLETED"]
        assert second["refund_seconds"].tolist() == [7200.0]
        # one refund is too few for a median (a q-quantile needs 1/(1 - q) observations)
        assert refund_summary(wh, by=[], as_of="2025-10-02")["p50_seconds"].isna().all()


# -- what this found: each a minimal reproduction -----------------


def small(*records: dict, accounts: list | None = None) -> Any:
    for r in records:
        check_valid(r, open_=r["id"] in OPEN_IDS)
    return synced(FakeService(transactions=list(records), internal_accounts=accounts or ACCOUNTS))


def test_the_open_hold_of_a_hold_cleared_in_another_currency_is_unknown() -> None:
    """open_hold_minor = authorized - settled. A PARTIALLY_SETTLED EUR authorization cleared in
    USD has settled_minor NULL ("not added to anything: it reads NULL"), so its open hold is
    unknown: NULL, not 0 (nor is its over-settlement 0)."""
    from paylens.analysis import card_summary

    hold = card(
        46,
        "PARTIALLY_SETTLED",
        amt(5_000, *EUR),
        "2025-10-10T11:00:00Z",
        settledAmount=amt(2_000, *USD),
        lastEventAt="2025-10-11T11:00:00Z",
    )
    with small(hold) as (wh, _):
        row = card_summary(wh, as_of="2025-10-20").iloc[0]  # 10 days: within the hold window
        assert na(row["settled_minor"]) is None and bool(row["currency_mismatch"])
        assert na(row["open_hold_minor"]) is None  # read 0
        assert na(row["over_settled_minor"]) is None  # read 0
        row = card_summary(wh, as_of=AS_OF).iloc[0]  # 52 days: expired, its exposure unknown
        assert row["open_hold_minor"] == 0 and na(row["expired_hold_minor"]) is None


def test_a_group_whose_amounts_are_all_in_another_currency_totals_unknown() -> None:
    """A group whose every settled amount is in another currency has no known settled total:
    `settled_minor` should be missing like `net_settled_minor` beside it, not 0 (and its hold,
    counted stale and > 30 days, is not 0 minor units)."""
    from paylens.analysis import card_summary

    hold = card(
        46,
        "PARTIALLY_SETTLED",
        amt(5_000, *EUR),
        "2025-10-10T11:00:00Z",
        settledAmount=amt(2_000, *USD),
        lastEventAt="2025-10-11T11:00:00Z",
    )
    with small(hold) as (wh, _):
        row = card_summary(wh, by="month", as_of="2025-10-20").iloc[0]  # stale, not expired
        assert na(row["net_settled_minor"]) is None
        assert na(row["settled_minor"]) is None  # read 0
        assert row["stale_hold_count"] == 1
        assert na(row["stale_hold_minor"]) is None  # read 0


def test_net_settled_leaves_out_a_sale_whose_refund_is_in_another_currency() -> None:
    """net_settled_minor = settled - refunded, over the rows where both are known. A USD sale
    of 4000 refunded 3500 EUR: its net in USD is unknown, so it is left out (and counted in
    `currency_mismatch_count`), never counted as kept. Beside another USD sale (3000, 1000
    refunded in USD) the month's net is 2000 (it read 7000 - 1000 = 6000); alone, unknown."""
    from paylens.analysis import card_summary

    sale = card(
        47,
        "REFUNDED",
        amt(4_000, *USD),
        "2025-10-13T10:00:00Z",
        settledAmount=amt(4_000, *USD),
        refundedAmount=amt(3_500, *EUR),
        lastEventAt="2025-10-14T10:00:00Z",
    )
    other = card(
        44,
        "REFUNDED",
        amt(3_000, *USD),
        "2025-10-09T10:00:00Z",
        settledAmount=amt(3_000, *USD),
        refundedAmount=amt(1_000, *USD),
        lastEventAt="2025-10-12T10:00:00Z",
    )
    with small(sale) as (wh, _):
        assert na(card_summary(wh, by="month", as_of=AS_OF).iloc[0]["net_settled_minor"]) is None
    with small(sale, other) as (wh, _):
        row = card_summary(wh, by="month", as_of=AS_OF).iloc[0]
        assert row["currency_mismatch_count"] == 1
        assert row["net_settled_minor"] == 3_000 - 1_000  # read 6000


def test_absent_card_summaries_are_not_compared() -> None:
    """The summaries are optional. A SETTLED USD transaction of 900 funded in USD that carries
    no settlementSummary and no pullSummary: nothing says the service's totals disagree or
    that less was pulled than settled ("elsewhere they are NULL (not comparable), never a false
    alarm"); observed: settlement_summary_mismatch and pull_shortfall both TRUE."""
    from paylens.analysis import card_summary

    bare = card(
        52,
        "SETTLED",
        amt(900, *USD),
        "2025-10-15T10:00:00Z",
        settledAmount=amt(900, *USD),
        lastEventAt="2025-10-16T10:00:00Z",
    )
    with small(bare) as (wh, _):
        row = card_summary(wh, as_of=AS_OF).iloc[0]
        assert row["funding_currency"] == "USD"
        assert na(row["settlement_summary_mismatch"]) is None  # read True
        assert na(row["pull_shortfall"]) is None  # read True


def test_the_take_rate_is_over_transfers_whose_fees_are_known() -> None:
    """take_rate = fees / sentAmount. Two completed JPY transfers, 10000 with fees 50 and 5000
    whose record carries no `fees`: the take rate known is 50 / 10000 = 0.005; observed
    50 / 15000 (the unknown fee read as 0), while all_in_cost_rate beside it is taken over
    rows with a known total only."""
    from paylens.analysis import fee_breakdown, fees_collected

    with_fees = outgoing(
        18,
        "2025-10-29T00:00:00Z",
        amt(10_000, *JPY),
        receivedAmount=amt(9_950, *JPY),
        fees=50,
        platformFees=0,
    )
    without = outgoing(3, "2025-10-20T00:00:00Z", amt(5_000, *JPY), receivedAmount=amt(5_000, *JPY))
    with small(with_fees, without) as (wh, _):
        group = fee_breakdown(wh, by="corridor").iloc[0]
        assert group["fees_minor"] == 50 and group["sent_minor"] == 15_000
        assert group["all_in_cost_rate"] == 0.005
        assert close(na(fees_collected(wh, by="corridor").iloc[0]["take_rate"]), 0.005)
        assert close(na(group["take_rate"]), 0.005)  # read 0.00333...


def test_the_refunds_default_as_of_includes_the_refunds_times() -> None:
    """as_of "is by default the latest instant in the data". A failed transfer (no updatedAt)
    refunded 01:00 -> 02:00: the refund's settledAt is in the data, so refund_seconds = 3600
    and p50 = 3600; observed NULL for both (as_of = createdAt, before the refund: the
    completed refund is censored, at a negative age)."""
    from paylens.analysis import refund_summary

    failed = outgoing(
        1,
        "2025-10-01T00:00:00Z",
        amt(1_000, *USD),
        status="FAILED",
        failureReason="QUOTE_EXECUTION_FAILED",
        refund=refund("COMPLETED", "2025-10-01T01:00:00Z", "2025-10-01T02:00:00Z"),
    )
    with small(failed) as (wh, _):
        assert refund_summary(wh, as_of="2025-10-02")["refund_seconds"].tolist() == [3600.0]
        assert na(refund_summary(wh)["refund_seconds"].iloc[0]) == 3600.0  # read NULL
        # one refund is too few for a median (a q-quantile needs 1/(1 - q) observations)
        assert na(refund_summary(wh, by=[])["p50_seconds"].iloc[0]) is None


def test_a_completed_transfer_without_created_at_is_counted_in_settlement_times() -> None:
    """`createdAt` is optional. Two COMPLETED USD transfers, one without `createdAt`: its
    settlement time is unknown, but it completed. failure_breakdown counts 2 attempts and 2
    completed, fee_breakdown and revenue 2 transfers; settlement_times counts 1 (the other is
    not in any count, nor in `time_unknown_count`)."""
    from paylens.analysis import failure_breakdown, settlement_times

    dated = outgoing(1, "2025-10-01T00:00:00Z", amt(1_000, *USD), settledAt="2025-10-01T00:10:00Z")
    undated = {
        k: v
        for k, v in outgoing(2, "", amt(2_000, *USD), settledAt="2025-10-01T00:20:00Z").items()
        if k != "createdAt"
    }
    with small(dated, undated) as (wh, _):
        assert failure_breakdown(wh, by=[])["completed_count"].tolist() == [2]
        got = settlement_times(wh, by=[], as_of=AS_OF).iloc[0]
        assert (got["transaction_count"], got["completed_count"]) == (2, 2)  # read (1, 1)
