"""The platform's P&L in one reporting currency: every figure converted at the reference rate
of its settlement day (UTC), the rate and its date beside it, rounded half-even per figure in
minor units of the reporting currency; a missing rate is an error naming currency and date.
Recomputed here from the records' raw JSON and the rates frame, with `decimal` (not the
helper's code)."""

from __future__ import annotations

import json
from collections import defaultdict
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

import pandas as pd
import pytest

from paylens.analysis import platform_pnl
from paylens.errors import InvalidArgumentError
from paylens.warehouse import Warehouse

from .test_platform_pnl import data, month

__all__ = ["data"]  # the fixture, shared: the sandbox and the second generator


def _daily(rates: pd.DataFrame) -> dict[tuple[str, str, str], float]:
    """(day, sending, receiving) -> the day's last mid rate."""
    days = pd.to_datetime(rates["date"], utc=True).dt.strftime("%Y-%m-%d")
    return {
        (d, s, r): float(m)
        for d, s, r, m in zip(
            days,
            rates["sent_currency"],
            rates["received_currency"],
            rates["mid_rate"],
            strict=True,
        )
    }


def _rate(mids: dict[tuple[str, str, str], float], code: str, day: str, to: str) -> Decimal:
    """`to` units per `code` unit on `day`: the day's rate to→code (sending units per
    receiving unit), else the inverse of code→to's; 1 for the same currency."""
    if code == to:
        return Decimal(1)
    if (day, to, code) in mids:
        return Decimal(repr(mids[(day, to, code)]))
    return 1 / Decimal(repr(mids[(day, code, to)]))


def _raw(wh: Warehouse) -> dict[tuple[str, str, str], dict[str, int]]:
    """Per (period, currency, settlement day): platform fees of outgoing transfers and fees of
    incoming ones, from the raw JSON, with the currency's decimals."""
    out: dict[tuple[str, str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for raw in wh.sql("SELECT raw FROM transactions")["raw"]:
        r: dict[str, Any] = json.loads(raw)
        if r["status"] != "COMPLETED" or not r.get("settledAt") or "sentAmount" not in r:
            continue
        if r["type"] not in ("OUTGOING", "INCOMING"):
            continue
        day = pd.Timestamp(r["settledAt"]).tz_convert("UTC").strftime("%Y-%m-%d")
        cur = r["sentAmount"]["currency"]
        row = out[(month(r["settledAt"]), cur["code"], day)]
        row["decimals"] = cur["decimals"]
        if r["type"] == "OUTGOING":
            row["platform_revenue_minor"] += r.get("platformFees", 0)
        else:
            row["service_incoming_fees_minor"] += r.get("fees", 0)
    return out


def test_each_figure_is_converted_at_its_settlement_days_rate_half_even(
    data: tuple[Warehouse, pd.DataFrame],
) -> None:
    wh, rates = data
    usd = platform_pnl(wh, reporting_currency="USD", reference_rates=rates)
    want, mids = _raw(wh), _daily(rates)
    assert len(usd) == len(want)
    assert "half-even per figure, in minor units of USD (2 decimals)" in usd.attrs["rounding"]
    for r in usd.itertuples():
        w = want[(r.period, r.currency, r.settled_on)]
        rate = _rate(mids, r.currency, r.settled_on, "USD")
        assert (r.reporting_currency, r.reporting_decimals) == ("USD", 2)
        assert r.rate_date == r.settled_on  # the rate shown is the settlement day's
        assert float(r.rate) == pytest.approx(float(rate), rel=1e-12)
        for column in ("platform_revenue_minor", "service_incoming_fees_minor"):
            assert getattr(r, column) == w[column], column
            exact = Decimal(w[column]) * rate * Decimal(10) ** (2 - w["decimals"])
            converted = int(exact.quantize(Decimal(1), rounding=ROUND_HALF_EVEN))
            assert getattr(r, column.replace("_minor", "_reporting_minor")) == converted, column
    same = usd[usd["currency"] == "USD"]
    assert len(same) and (same["rate"] == 1.0).all()
    assert (same["platform_revenue_reporting_minor"] == same["platform_revenue_minor"]).all()


def test_a_missing_rate_is_an_error_naming_currency_and_date(
    data: tuple[Warehouse, pd.DataFrame],
) -> None:
    wh, rates = data
    plain = platform_pnl(wh)
    code = next(c for c in plain["currency"] if c != "USD")
    settled = platform_pnl(wh, reporting_currency="USD", reference_rates=rates)
    day = settled.loc[settled["currency"] == code, "settled_on"].iloc[0]
    on = pd.to_datetime(rates["date"], utc=True).dt.strftime("%Y-%m-%d") == day
    either = (rates["sent_currency"] == code) | (rates["received_currency"] == code)
    with pytest.raises(InvalidArgumentError, match=f"no reference rate for {code}.*{day}"):
        platform_pnl(wh, reporting_currency="USD", reference_rates=rates[~(on & either)])
    with pytest.raises(InvalidArgumentError, match="dated"):
        platform_pnl(wh, reporting_currency="USD", reference_rates={("USD", code): 1.1})
    with pytest.raises(InvalidArgumentError, match="reference_rates"):
        platform_pnl(wh, reporting_currency="USD")
