"""One definition of a period in the report: its headline, revenue tables, summary and P&L all
count a completed transfer in the period it settled in (`analysis.settlement_period`), whenever
it was created, and the report's checks tie them out. Figures are recomputed here from the
records' raw JSON (not the helpers' code), for several periods: a month with transfers created
the month before, a returned payout (COMPLETED, then FAILED), a half month and all the data."""

from __future__ import annotations

import copy
import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from paylens import Sandbox
from paylens.analysis import platform_pnl
from paylens.models import format_minor
from paylens.report import Period
from paylens.report import _tables as tables
from paylens.warehouse import Warehouse

from .test_platform_pnl import month


def _iso(t: pd.Timestamp) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.000Z")


@pytest.fixture(scope="module")
def wh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Warehouse]:
    """A sandbox warehouse (April to October 2025; transfers created in June settle in July),
    and one July payout returned in September: stored again FAILED, as a sync stores it."""
    path = tmp_path_factory.mktemp("settlement") / "w.duckdb"
    with Warehouse(path) as wh:
        wh.sync(Sandbox(seed=3, transactions=2_000).client(), progress=False)
        raws = [json.loads(r) for r in wh.sql("SELECT raw FROM transactions")["raw"]]
        returned = next(
            r for r in sorted(raws, key=lambda r: r["id"])
            if r["type"] == "OUTGOING" and r["status"] == "COMPLETED"
            and month(r["settledAt"]) == "2025-07" and r.get("platformFees", 0) > 0
        )  # fmt: skip
        back = copy.deepcopy(returned)
        back.update(
            status="FAILED",
            failureReason="PAYOUT_RETURNED",
            updatedAt=_iso(pd.Timestamp("2025-09-03T10:00:00Z")),
        )
        back.pop("settledAt")
        wh.store_transactions([back])
        yield wh


def _raw_figures(wh: Warehouse, start: str | None, end: str | None) -> dict[str, dict[str, int]]:
    """Per currency, from the raw JSON: completed transfers settled in [start, end) (UTC),
    their fees and platform fees (outgoing, in the sending currency), the amounts sent and
    received, and per settlement month the fees (`fees YYYY-MM`)."""
    lo = pd.Timestamp(start, tz="UTC") if start else None
    hi = pd.Timestamp(end, tz="UTC") if end else None
    out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for raw in wh.sql("SELECT raw FROM transactions")["raw"]:
        r: dict[str, Any] = json.loads(raw)
        if r["status"] != "COMPLETED" or not r.get("settledAt") or r["type"] == "CARD":
            continue
        at = pd.Timestamp(r["settledAt"])
        if (lo is not None and at < lo) or (hi is not None and at >= hi):
            continue
        if r["type"] == "OUTGOING":
            row = out[r["sentAmount"]["currency"]["code"]]
            row["outgoing"] += 1
            row["sent"] += r["sentAmount"]["amount"]
            row["fees"] += r.get("fees", 0)
            row["platform"] += r.get("platformFees", 0)
            row[f"fees {month(r['settledAt'])}"] += r.get("fees", 0)
        else:
            row = out[r["receivedAmount"]["currency"]["code"]]
            row["incoming"] += 1
            row["received"] += r["receivedAmount"]["amount"]
    return out


PERIODS = [
    ("2025-07-01", "2025-08-01"),  # transfers created in June settled in it; one returned later
    ("2025-09-01", "2025-10-01"),  # the month the payout came back in
    ("2025-06-15", "2025-07-15"),  # not a month: two partial settlement months
    (None, None),  # all the data
]


@pytest.mark.parametrize(("start", "end"), PERIODS)
def test_headline_revenue_summary_and_pnl_count_a_transfer_in_the_period_it_settled_in(
    wh: Warehouse, start: str | None, end: str | None
) -> None:
    period = Period(wh, start, end)
    want = _raw_figures(wh, start, end)
    places = dict(
        wh.sql(
            "SELECT DISTINCT currency, decimals FROM transactions WHERE decimals IS NOT NULL"
        ).itertuples(index=False)
    )
    headline = period.headline()
    summary = period.summary(period.tie_outs()).counts.set_index("currency")
    by_currency = tables.revenue_by_currency(period).set_index("currency")
    by_month = tables.revenue_by_month(period).set_index("currency")
    pnl = period.pnl()
    for code, w in want.items():
        d = places[code]
        if w["outgoing"]:
            assert headline.loc[code, "outgoing completed"] == f"{w['outgoing']:,}", code
            assert headline.loc[code, "sent"] == format_minor(w["sent"], d), code
            assert headline.loc[code, "fees"] == format_minor(w["fees"], d), code
            assert summary.loc[code, "fees charged"] == format_minor(w["fees"], d), code
            assert summary.loc[code, "platform revenue"] == format_minor(w["platform"], d), code
            assert by_currency.loc[code, "fees charged"] == format_minor(w["fees"], d), code
            assert by_currency.loc[code, "platform fee"] == format_minor(w["platform"], d), code
            assert by_month.loc[code, "total"] == format_minor(w["fees"], d), code
            mine = pnl[pnl["currency"] == code]
            assert int(mine["platform_revenue_minor"].sum()) == w["platform"], code
            parts = ["platform_revenue_minor", "service_fees_minor"]
            parts += ["counterparty_fees_minor", "unattributed_fees_minor"]
            assert int(mine[parts].to_numpy().sum()) == w["fees"], code
            assert int(mine["outgoing_count"].sum()) == w["outgoing"], code
        if w["incoming"]:
            assert headline.loc[code, "incoming completed"] == f"{w['incoming']:,}", code
            assert headline.loc[code, "received"] == format_minor(w["received"], d), code
        assert summary.loc[code, "completed transfers"] == (f"{w['outgoing'] + w['incoming']:,}"), (
            code
        )
    # nothing settled outside the period shows in its money
    outgoing = {c for c, w in want.items() if w["outgoing"]}
    assert set(by_currency.index) == outgoing
    assert set(pnl.loc[pnl["outgoing_count"] > 0, "currency"]) == outgoing
    if start is not None and start.endswith("-01") and end is not None:
        # a month: its P&L is `platform_pnl`'s row of that settlement period, figure for figure
        whole = platform_pnl(wh, reference_rates=period.reference_rates)
        whole = whole[whole["period"] == start[:7]].reset_index(drop=True)
        pd.testing.assert_frame_equal(pnl.reset_index(drop=True), whole, check_dtype=False)


@pytest.mark.parametrize(("start", "end"), PERIODS)
def test_the_checks_tie_the_headline_and_the_revenue_table_to_the_pnl(
    wh: Warehouse, start: str | None, end: str | None
) -> None:
    checks = Period(wh, start, end).tie_outs()
    for name in (
        "headline fees = P&L fees, per currency (currencies that differ)",
        "headline platform revenue = P&L, per currency (currencies that differ)",
        "revenue table = P&L, per settlement month and currency (cells that differ)",
    ):
        assert checks.loc[name, "expected"] == 0, name
        assert checks.loc[name, "actual"] == 0, name
        assert bool(checks.loc[name, "passed"]), name


def test_the_checks_catch_a_headline_on_another_basis_than_the_pnl(
    wh: Warehouse, tmp_path: Path
) -> None:
    """A transfer whose fee row says it settled in another month than the transfer itself (a
    warehouse out of step with itself) puts the headline and revenue table (read from the fee
    rows) and the P&L (the transfers settled in the period) on different bases: the checks
    say so."""
    broken = tmp_path / "broken.duckdb"
    wh.sql("CHECKPOINT")  # the file whole, its sync runs too
    broken.write_bytes(Path(wh.path).read_bytes())
    with Warehouse(broken) as other:
        other.sql(
            "UPDATE outgoing_fees SET settled_at = settled_at - INTERVAL 40 DAY WHERE id = ("
            "SELECT min(id) FROM outgoing_fees WHERE status = 'COMPLETED'"
            " AND sent_amount_currency = 'USD' AND platform_fees_minor > 0"
            " AND settled_at >= '2025-09-01' AND settled_at < '2025-09-20')"
        )
        checks = Period(other, "2025-09-01", "2025-10-01").tie_outs()
    failed = checks[~checks["passed"]]
    assert failed["actual"].to_dict() == {
        "headline fees = P&L fees, per currency (currencies that differ)": 1,
        "headline platform revenue = P&L, per currency (currencies that differ)": 1,
        "revenue table = P&L, per settlement month and currency (cells that differ)": 1,
    }


def test_the_report_censors_open_transfers_at_the_syncs_time(wh: Warehouse) -> None:
    """The report's settlement times count an open transfer as open until the sync read it
    (the service's clock then, `Warehouse.synced_at`), not until the newest record."""
    from paylens.analysis import settlement_times
    from paylens.report import format_duration

    period = Period(wh)
    synced = pd.Timestamp(wh.synced_at())
    assert period.as_of == max(
        synced, pd.Timestamp(wh.sql("SELECT max(updated_at) AS t FROM transactions")["t"][0])
    )
    overdue = period.exceptions()
    overdue = overdue[overdue["kind"] == "open past its expected settlement"]
    assert len(overdue)
    created = wh.sql("SELECT id, created_at FROM transactions").set_index("id")["created_at"]
    for r in overdue.itertuples():
        age = (period.as_of - pd.Timestamp(created[r.id])).total_seconds()
        assert r.detail == f"open for {format_duration(age)}", r.id
    rates = period.rates()
    whole = settlement_times(wh, by=[])  # a Warehouse: censored at the sync's time by default
    assert rates.loc["median outgoing settlement time", "value"] == format_duration(
        whole["p50_seconds"].iloc[0]
    )
