"""Money owed to customers (refund PENDING or FAILED after a debit), recomputed from the raw
records in plain Python on the sandbox and the second generator."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from paylens import Sandbox
from paylens.analysis import refunds_owed
from paylens.warehouse import Warehouse

from . import _second_generator as second


@pytest.fixture(scope="module", params=["sandbox", "second"])
def data(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Warehouse, pd.Timestamp]]:
    folder: Path = tmp_path_factory.mktemp(request.param)
    with Warehouse(folder / "w.duckdb") as wh:
        if request.param == "sandbox":
            sandbox = Sandbox(seed=0, transactions=3_000)
            wh.sync(sandbox.client(), progress=False)
            yield wh, pd.Timestamp(sandbox.now)
        else:
            wh.store_transactions(second.records())
            yield wh, pd.Timestamp(second.AS_OF)


def bucket(days: int) -> str:
    if days <= 7:
        return "0-7 days"
    if days <= 30:
        return "8-30 days"
    return "31-90 days" if days <= 90 else "over 90 days"


def test_refunds_owed_from_the_raw_records(data: tuple[Warehouse, pd.Timestamp]) -> None:
    wh, as_of = data
    count: Counter[tuple[str, str, str]] = Counter()
    owed: Counter[tuple[str, str, str]] = Counter()
    for (raw,) in wh.sql("SELECT raw FROM transactions").itertuples(index=False):
        r = json.loads(raw)
        refund = r.get("refund") or {}
        if r["status"] != "FAILED" or refund.get("reason") == "USER_CANCELLATION":
            continue
        if refund.get("status") not in ("PENDING", "FAILED"):
            continue
        kind = "refund_failed" if refund["status"] == "FAILED" else "refund_pending"
        money = r["sentAmount"] if r["type"] == "OUTGOING" else r["receivedAmount"]
        age = (as_of.tz_convert("UTC") - pd.Timestamp(r["updatedAt"])).days
        key = (money["currency"]["code"], kind, bucket(age))
        count[key] += 1
        owed[key] += money["amount"]
    frame = refunds_owed(wh, as_of=as_of)
    got = {(r.currency, r.lifecycle, r.age): (r.transaction_count, r.owed_minor)
           for r in frame.itertuples()}  # fmt: skip
    assert got == {k: (count[k], owed[k]) for k in count}
    if "sandbox" in str(wh.path):
        assert "refund_failed" in {k[1] for k in got}
