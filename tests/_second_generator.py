"""A second, independent source of transaction records for the analysis tests.

It shares no code with the sandbox and follows other habits, all within the interface:

- fees: the platform's fee is taken INSIDE the service's fees (P = 20 % of F + V), so
  `fees = F + V + C_s` where the sandbox has `fees = F + V + P + C_s`; V is computed in integers
  from a rate in basis points; C_s rounds half to even; the amount received is floored;
- exchange rates move daily around a mid-rate series that changes every day (`MIDS`);
- lifecycles include every kind: open (some overdue), completed, failed with and without a
  refund, cancelled (FAILED with a USER_CANCELLATION refund), expired, rejected, refunded, old
  records carrying removed reasons, deprecated and coarse reasons;
- card transactions: holds of every age, partial settlements, tips, exceptions, refunds, and a
  few summaries that disagree with the amounts.

Records are wire JSON (camelCase, currency objects), stored through `Warehouse.store_transactions`.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd

START = datetime(2025, 1, 1, tzinfo=UTC)
DAYS = 90
#: The instant the data set describes: nothing happens after it.
AS_OF = START + timedelta(days=DAYS)
DECIMALS = {"USD": 2, "EUR": 2, "JPY": 0, "KWD": 3, "BTC": 8}
#: USD per one major unit on day 0; each currency drifts by its own daily rate.
_USD = {"USD": 1.0, "EUR": 1.05, "JPY": 0.0065, "KWD": 3.2, "BTC": 90_000.0}
_DRIFT = {"USD": 0.0, "EUR": 0.0004, "JPY": -0.0002, "KWD": 0.0001, "BTC": 0.002}
#: Rails: (name or None, timeline seconds or None, instant).
RAILS = [
    ("SEPA", 86_400, False),
    ("WIRE", 4 * 3600, False),
    ("FEDNOW", 5, True),
    (None, None, True),
]


def usd_price(code: str, day: int) -> float:
    return _USD[code] * (1.0 + _DRIFT[code]) ** day


def mid(sending: str, receiving: str, day: int) -> float:
    """Sending major units per receiving major unit on `day` (days since START)."""
    return usd_price(receiving, day) / usd_price(sending, day)


def mid_series() -> pd.DataFrame:
    """The reference series: one row per day and corridor (`date`, `sent_currency`,
    `received_currency`, `mid_rate`)."""
    rows = [
        ((START + timedelta(days=d)).date(), s, r, mid(s, r, d))
        for d in range(DAYS + 1)
        for s in DECIMALS
        for r in DECIMALS
        if s != r
    ]
    return pd.DataFrame(rows, columns=["date", "sent_currency", "received_currency", "mid_rate"])


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _money(amount: int, code: str) -> dict[str, Any]:
    return {"amount": int(amount), "currency": {"code": code, "decimals": DECIMALS[code]}}


def _minor(usd: float, code: str, day: int) -> int:
    """`usd` dollars in minor units of `code` on `day`."""
    return max(int(usd / usd_price(code, day) * 10 ** DECIMALS[code]), 1)


def _half_even(value: float) -> int:
    return round(value)


class _Gen:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.n = 0

    def uid(self, kind: str) -> str:
        self.n += 1
        return f"{kind}:00000000-0000-4000-8000-{self.n:012d}"

    def created(self, recent: bool = False) -> datetime:
        span = 3 * 86_400 if recent else DAYS * 86_400 - 86_400
        base = AS_OF - timedelta(seconds=span) if recent else START
        return base + timedelta(seconds=float(self.rng.uniform(0, span)))


_FAILURES = [
    # (failureReason, refunded) of outgoing failures, with removed, deprecated and coarse ones
    ("QUOTE_RATE_UNAVAILABLE", False),
    ("ACCOUNT_INVALID", True),
    ("PAYOUT_RETURNED", True),
    ("COUNTERPARTY_POST_TX_FAILED", True),
    ("LIGHTNING_PAYMENT_FAILED", False),
    ("SETTLEMENT_FAILED", True),
    ("TIMEOUT", False),
    ("QUOTE_EXECUTION_FAILED", True),
]


def _outgoing(g: _Gen) -> dict[str, Any]:
    rng = g.rng
    currencies = list(DECIMALS)
    send = str(rng.choice(["USD", "USD", "EUR", "KWD"]))
    recv = str(rng.choice(currencies))
    rail, timeline, is_instant = RAILS[int(rng.integers(0, len(RAILS)))]
    funding = bool(rng.random() < 0.15)
    u = rng.random()
    recent = u > 0.9
    created = g.created(recent=recent)
    day = (created - START).days
    ds, dr = DECIMALS[send], DECIMALS[recv]
    amount = _minor(float(rng.uniform(10, 5_000)), send, day)
    x = 1.0 if send == recv else mid(send, recv, day) * (1 + float(rng.uniform(0.001, 0.012)))
    bps = 0 if send == recv else int(rng.integers(10, 60))
    fixed = _minor(float(rng.uniform(0.2, 3.0)), send, day)
    variable = (amount * bps + 5_000) // 10_000
    platform = (fixed + variable) * 20 // 100
    cpty = 0 if rng.random() < 0.5 else _minor(float(rng.uniform(0.01, 0.8)), recv, day)
    cpty_s = _half_even(cpty * x * 10.0 ** (ds - dr))
    fees = fixed + variable + cpty_s
    received = int((amount - fees) * 10.0 ** (dr - ds) / x)
    m_s = 1e11 / (usd_price("BTC", day) / usd_price(send, day) * 10**ds)
    grid_multiplier = (1 - bps / 10_000) * m_s
    cpty_multiplier = (1 - bps / 10_000) * 10.0 ** (dr - ds) / (x * grid_multiplier)
    if rng.random() < 0.05:  # a quote whose multipliers disagree with its rate by ~1 bp
        cpty_multiplier *= 1.0001
    record: dict[str, Any] = {
        "id": g.uid("Transaction"),
        "type": "OUTGOING",
        "direction": "DEBIT",
        "customerId": f"Customer:c{int(rng.integers(0, 20)):02d}",
        "platformCustomerId": "second",
        "source": (
            {"sourceType": "REALTIME_FUNDING", "currency": send}
            if funding
            else {"sourceType": "ACCOUNT", "accountId": "InternalAccount:a1", "currency": send}
        ),
        "destination": {"destinationType": "ACCOUNT", "accountId": "ExternalAccount:e1"},
        "sentAmount": _money(amount, send),
        "receivedAmount": _money(received, recv),
        "exchangeRate": x,
        "fees": fees,
        "platformFees": platform,
        "rateDetails": {
            "counterpartyMultiplier": cpty_multiplier,
            "counterpartyFixedFee": cpty,
            "gridApiMultiplier": grid_multiplier,
            "gridApiFixedFee": fixed,
            "gridApiVariableFeeRate": bps / 10_000,
            "gridApiVariableFeeAmount": variable,
        },
        "paymentRail": rail,
        "settlementTimelineSeconds": None if funding else timeline,
        "expectedSettlementAt": (
            None if funding or is_instant else _iso(created + timedelta(seconds=timeline or 0))
        ),
        "createdAt": _iso(created),
    }
    wait = float(rng.uniform(3_600, 6 * 3_600)) if funding else float(rng.lognormal(3.0, 1.0))
    duration = float((timeline or 30) * rng.uniform(0.3, 1.6))
    settled = created + timedelta(seconds=wait + duration)
    if (recent and u > 0.95) or settled > AS_OF:
        record["status"] = str(rng.choice(["PENDING", "PROCESSING"]))
        record["updatedAt"] = _iso(created)
        return record
    v = rng.random()
    done = min(settled, AS_OF)
    record["updatedAt"] = _iso(done)
    if v < 0.78:
        record["status"] = "COMPLETED"
        record["settledAt"] = _iso(settled)
    elif v < 0.84:
        record["status"] = "EXPIRED"
    elif v < 0.87:  # cancelled by the user: FAILED with a USER_CANCELLATION refund
        record["status"] = "FAILED"
        record["failureReason"] = "QUOTE_EXECUTION_FAILED"
        record["refund"] = _refund(g, done, "USER_CANCELLATION")
    else:
        reason, refunded = _FAILURES[int(rng.integers(0, len(_FAILURES)))]
        record["status"] = "FAILED"
        record["failureReason"] = reason
        if refunded:
            record["refund"] = _refund(g, done, "TRANSACTION_FAILED")
    return record


def _refund(g: _Gen, start: datetime, reason: str) -> dict[str, Any]:
    status = str(g.rng.choice(["COMPLETED", "COMPLETED", "COMPLETED", "PENDING", "FAILED"]))
    refund = {
        "reference": f"RF-{g.n}",
        "initiatedAt": _iso(start),
        "status": status,
        "reason": reason,
    }
    if status != "PENDING":
        refund["settledAt"] = _iso(start + timedelta(seconds=float(g.rng.uniform(60, 86_400))))
    return refund


def _incoming(g: _Gen) -> dict[str, Any]:
    rng = g.rng
    code = str(rng.choice(["USD", "EUR", "JPY"]))
    created = g.created()
    amount = int(rng.integers(100, 90_000))
    status = str(
        rng.choice(["COMPLETED"] * 8 + ["FAILED", "REJECTED", "REFUNDED", "PENDING", "CREATED"])
    )
    record: dict[str, Any] = {
        "id": g.uid("Transaction"),
        "type": "INCOMING",
        "direction": "CREDIT",
        "status": status,
        "customerId": f"Customer:c{int(rng.integers(0, 20)):02d}",
        "platformCustomerId": "second",
        "destination": {"destinationType": "ACCOUNT", "accountId": "InternalAccount:a1"},
        "sentAmount": _money(amount, code),
        "receivedAmount": _money(amount, code),
        "exchangeRate": 1.0,
        "fees": 0,
        "createdAt": _iso(created),
        "updatedAt": _iso(created + timedelta(hours=2)),
    }
    if status == "COMPLETED":
        record["settledAt"] = _iso(created + timedelta(hours=2))
    if status in ("FAILED", "REFUNDED"):
        record["failureReason"] = "COLLECTION_FAILED"
        record["refund"] = _refund(g, created + timedelta(hours=2), "TRANSACTION_FAILED")
    return record


def _card(g: _Gen) -> dict[str, Any]:
    rng = g.rng
    code = str(rng.choice(["USD", "EUR", "JPY"]))
    authorized_at = g.created()
    auth = int(rng.integers(500, 60_000))
    kind = str(rng.choice(["hold", "partial", "settled", "tip", "exception", "refunded"]))
    settled = {
        "hold": 0,
        "partial": auth * 6 // 10,
        "settled": auth,
        "tip": auth + auth // 5,
        "exception": auth,
        "refunded": auth,
    }[kind]
    status = {
        "hold": "AUTHORIZED",
        "partial": "PARTIALLY_SETTLED",
        "settled": "SETTLED",
        "tip": "SETTLED",
        "exception": "EXCEPTION",
        "refunded": "REFUNDED",
    }[kind]
    pulled = 0 if kind == "exception" else max(auth, settled)
    refunded = auth // 2 if kind == "refunded" else 0
    summary_settled = settled + (1 if rng.random() < 0.03 else 0)  # a few disagree
    last = authorized_at + timedelta(days=float(rng.uniform(0.5, 3)))
    record: dict[str, Any] = {
        "type": "CARD",
        "id": g.uid("CardTransaction"),
        "cardId": f"Card:k{int(rng.integers(0, 5))}",
        "customerId": "Customer:c00",
        "platformCustomerId": "second",
        "status": status,
        "direction": "DEBIT",
        "merchant": {"descriptor": str(rng.choice(["CAFE", "FUEL", "HOTEL"])), "mcc": "5812"},
        "authorizedAmount": _money(auth, code),
        "accountId": "InternalAccount:a1",
        "pullSummary": {
            "count": 2 if kind == "tip" else 1,
            "totalAmount": pulled,
            "pendingCount": 0,
        },
        "refundSummary": {"count": int(refunded > 0), "totalAmount": refunded},
        "settlementSummary": {"count": int(settled > 0), "totalAmount": summary_settled},
        "authorizedAt": _iso(authorized_at),
        "createdAt": _iso(authorized_at),
        "updatedAt": _iso(min(last, AS_OF)),
    }
    if settled:
        record["settledAmount"] = _money(settled, code)
        record["lastEventAt"] = _iso(min(last, AS_OF))
    if refunded:
        record["refundedAmount"] = _money(refunded, code)
    return record


def records(
    seed: int = 3, outgoing: int = 1_200, incoming: int = 300, cards: int = 300
) -> list[dict[str, Any]]:
    """The data set: wire records of every kind, deterministic from `seed`."""
    g = _Gen(seed)
    made = [_outgoing(g) for _ in range(outgoing)]
    made += [_incoming(g) for _ in range(incoming)]
    made += [_card(g) for _ in range(cards)]
    return made
