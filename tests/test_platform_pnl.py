"""The platform's P&L recomputed from the records' raw JSON in plain Python (not the helpers'
code), on the sandbox and on the second generator (a fee formula that is not the sandbox's)."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest

from paylens import Sandbox
from paylens.analysis import platform_pnl
from paylens.warehouse import Warehouse

from . import _second_generator as second


@pytest.fixture(scope="module", params=["sandbox", "second"])
def data(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Warehouse, pd.DataFrame]]:
    folder = tmp_path_factory.mktemp(request.param)
    with Warehouse(folder / "w.duckdb") as wh:
        if request.param == "sandbox":
            sandbox = Sandbox(seed=7, transactions=1_500)
            wh.sync(sandbox.client(), progress=False)
            yield wh, sandbox.reference_rates()
        else:
            wh.store_transactions(second.records())
            yield wh, second.mid_series()


def half_up(value: float) -> int:
    return math.floor(value + 0.5)


def month(text: str) -> str:
    return pd.Timestamp(text).tz_convert("UTC").strftime("%Y-%m")


def recompute(wh: Warehouse, rates: pd.DataFrame) -> dict[tuple[str, str], dict[str, int]]:
    series = rates.copy()
    series["at"] = pd.to_datetime(series["date"]).dt.tz_localize("UTC")
    mids = {
        k: p.sort_values("at") for k, p in series.groupby(["sent_currency", "received_currency"])
    }
    sums: dict[tuple[str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for (raw,) in wh.sql("SELECT raw FROM transactions").itertuples(index=False):
        r: dict[str, Any] = json.loads(raw)
        if r["status"] != "COMPLETED" or not r.get("settledAt"):
            continue
        if r["type"] == "INCOMING":
            if "sentAmount" not in r:
                continue
            row = sums[(month(r["settledAt"]), r["sentAmount"]["currency"]["code"])]
            row["incoming_count"] += 1
            row["service_incoming_fees_minor"] += r.get("fees", 0)
            continue
        if r["type"] != "OUTGOING":
            continue
        s, rc = r["sentAmount"]["currency"], r["receivedAmount"]["currency"]
        row = sums[(month(r["settledAt"]), s["code"])]
        details = r.get("rateDetails") or {}
        x = r["exchangeRate"]
        shift = 10.0 ** (s["decimals"] - rc["decimals"])
        cpty = half_up(details.get("counterpartyFixedFee", 0) * x * shift)
        service = details.get("gridApiFixedFee", 0) + details.get("gridApiVariableFeeAmount", 0)
        platform = r.get("platformFees", 0)
        row["outgoing_count"] += 1
        row["platform_revenue_minor"] += platform
        row["service_fees_minor"] += service
        row["counterparty_fees_minor"] += cpty
        row["unattributed_fees_minor"] += r.get("fees", 0) - service - platform - cpty
        if s["code"] != rc["code"]:
            pair = mids.get((s["code"], rc["code"]))
            known = pair[pair["at"] <= pd.Timestamp(r["createdAt"])] if pair is not None else []
            if len(known) == 0:
                row["fx_margin_unknown_count"] += 1
            else:
                mid = known["mid_rate"].iloc[-1]
                row["service_fx_margin_minor"] += half_up(
                    r["receivedAmount"]["amount"] * shift * (x - mid)
                )
    return sums


def test_platform_pnl_agrees_with_the_raw_records(
    data: tuple[Warehouse, pd.DataFrame],
) -> None:
    wh, rates = data
    frame = platform_pnl(wh, reference_rates=rates)
    want = recompute(wh, rates)
    assert sorted(want) == list(zip(frame["period"], frame["currency"], strict=True))
    figures = [c for c in frame.columns if c.endswith(("_minor", "_count"))]
    for row in frame.to_dict("records"):
        own = want[(row["period"], row["currency"])]
        assert {c: row[c] for c in figures} == {c: own.get(c, 0) for c in figures}
    assert frame["platform_revenue_minor"].sum() > 0  # not a test of zeros
    if "sandbox" in str(wh.path):  # the second generator's incoming transfers carry no fees
        assert frame["service_incoming_fees_minor"].sum() > 0
