"""Every figure of the analysis helpers recomputed from the records' raw JSON, here, with this
file's own SQL and Python (not the helpers' code), on two independent data sets: the sandbox,
and a second generator whose fee formula differs (platform fees inside the service's fees),
so a zero residual cannot be the formula validating itself."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from paylens import Sandbox, WarehouseEmptyError
from paylens.analysis import (
    card_summary,
    failure_breakdown,
    fee_breakdown,
    fees_collected,
    refund_summary,
    settlement_times,
)
from paylens.warehouse import Warehouse

from . import _second_generator as second

REMOVED = {"EXECUTION_FAILED_POST_DEBIT", "SETTLEMENT_FAILED", "TIMEOUT", "MANUAL_REFUND"}
PAYOUT = {"PAYOUT_RETURNED", "LIMIT_EXCEEDED", "ACCOUNT_CANNOT_RECEIVE", "ACCOUNT_INVALID",
          "COMPLIANCE_REJECTED", "COUNTERPARTY_POST_TX_FAILED"}  # fmt: skip


@dataclass
class DataSet:
    name: str
    wh: Warehouse
    as_of: datetime
    rates: pd.DataFrame
    cards: Any  # what card_summary reads: the warehouse, or rows with their funding currency


@pytest.fixture(scope="module", params=["sandbox", "second"])
def data(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DataSet]:
    folder = tmp_path_factory.mktemp(request.param)
    with Warehouse(folder / "w.duckdb") as wh:
        if request.param == "sandbox":
            sandbox = Sandbox(seed=5, transactions=3_000)
            wh.sync(sandbox.client(), progress=False)
            yield DataSet("sandbox", wh, sandbox.now, sandbox.reference_rates(), wh)
        else:
            wh.store_transactions(second.records())
            # the second generator funds each card in its own currency (no account records)
            cards = wh.sql(
                "SELECT *, authorized_amount_currency AS funding_currency,"
                " authorized_amount_decimals AS funding_decimals FROM card_transactions"
            )
            yield DataSet("second", wh, second.AS_OF, second.mid_series(), cards)


def records(wh: Warehouse, kind: str) -> list[dict[str, Any]]:
    raw = wh.sql("SELECT raw FROM transactions WHERE type = ? ORDER BY id", [kind])["raw"]
    return [json.loads(r) for r in raw]


def at(text: str | None) -> pd.Timestamp | None:
    return None if text is None else pd.Timestamp(text)


def lifecycle(r: dict[str, Any]) -> str:
    status, refund = r["status"], r.get("refund") or {}
    if refund.get("reason") == "USER_CANCELLATION" and status != "COMPLETED":
        return "cancelled"
    table = {"COMPLETED": "completed", "EXPIRED": "expired", "REJECTED": "rejected"}
    if status in table:
        return table[status]
    if status == "REFUNDED" or (
        status == "FAILED" and refund and refund.get("status") == "COMPLETED"
    ):
        return "refunded"
    if status == "FAILED" and refund and refund.get("status") == "FAILED":
        return "refund_failed"
    if status == "FAILED" and refund and refund.get("status") is not None:
        return "refund_pending"
    return "failed" if status == "FAILED" else "open"


def km(times: list[float], settled: list[bool], q: float) -> float | None:
    """Kaplan–Meier: the first settlement time where the share not yet settled is <= 1 - q;
    None over fewer than 1/(1 - q) observations (2 for p50, 10 for p90, 100 for p99)."""
    if len(times) < round(1 / (1 - q)):
        return None
    survival = 1.0
    pairs = sorted(zip(times, settled, strict=True))
    for t in sorted(set(times)):
        events = sum(1 for u, e in pairs if u == t and e)
        if events:
            at_risk = sum(1 for u, _ in pairs if u >= t)
            survival *= 1 - events / at_risk
            if survival <= 1 - q + 1e-9:
                return t
    return None


# -- lifecycle and failures -------------------------------------------------------------------


def test_failure_breakdown_from_raw(data: DataSet) -> None:
    rows = []
    for kind in ("OUTGOING", "INCOMING"):
        for r in records(data.wh, kind):
            money = r["sentAmount"] if kind == "OUTGOING" else r["receivedAmount"]
            reason = r.get("failureReason")
            rows.append(
                {
                    "type": kind,
                    "currency": money["currency"]["code"],
                    "amount": money["amount"],
                    "lifecycle": lifecycle(r),
                    "reason": "QUOTE_EXECUTION_FAILED" if reason in REMOVED else reason,
                    # payout reasons are outgoing ones (an incoming COMPLIANCE_REJECTED is not)
                    "payout": kind == "OUTGOING" and reason in PAYOUT,
                    "coarse": kind == "OUTGOING" and reason == "COUNTERPARTY_POST_TX_FAILED",
                }
            )
    mine = pd.DataFrame(rows)
    frame = failure_breakdown(data.wh, by=[])
    assert set(frame["type"]) == {"OUTGOING", "INCOMING"}
    for (kind, currency), part in mine.groupby(["type", "currency"]):
        got = frame[(frame["type"] == kind) & (frame["currency"] == currency)]
        resolved = part[part["lifecycle"] != "open"]
        failures = (
            part["lifecycle"].isin(["failed", "refunded", "refund_pending", "refund_failed"]).sum()
        )
        assert set(got["attempted_count"]) == {len(part)}
        assert set(got["open_count"]) == {(part["lifecycle"] == "open").sum()}
        assert set(got["resolved_count"]) == {len(resolved)}
        if len(resolved):
            assert set(got["failure_rate"]) == {failures / len(resolved)}
        bad = part[~part["lifecycle"].isin(["open", "completed"])]
        expected = {
            (life, reason or "-"): (len(rows), rows["amount"].sum())
            for (life, reason), rows in bad.fillna({"reason": "-"}).groupby(["lifecycle", "reason"])
        }
        shown = got[got["transaction_count"] > 0]
        assert {
            (r.lifecycle, "-" if pd.isna(r.failure_reason) else r.failure_reason): (
                r.transaction_count,
                r.amount_minor,
            )
            for r in shown.itertuples()
        } == expected
        if part["payout"].any():
            assert set(got["coarse_payout_share"]) == {part["coarse"].sum() / part["payout"].sum()}
    # the second data set has every lifecycle, removed and deprecated reasons
    if data.name == "second":
        assert set(mine["lifecycle"]) >= {"open", "completed", "failed", "refunded",
                                          "expired", "rejected", "cancelled"}  # fmt: skip
        rows_of = failure_breakdown(data.wh)
        assert (
            rows_of["reason_removed"].sum()
            == sum(1 for r in records(data.wh, "OUTGOING") if r.get("failureReason") in REMOVED)
            > 0
        )


# -- settlement --------------------------------------------------------------------------------


def test_settlement_times_from_raw(data: DataSet) -> None:
    as_of = pd.Timestamp(data.as_of)
    rows = []
    for r in records(data.wh, "OUTGOING"):
        created, settled = at(r["createdAt"]), at(r.get("settledAt"))
        life = lifecycle(r)
        done = life == "completed" and settled is not None and settled <= as_of
        is_open = life == "open" or (life == "completed" and not done)
        expected = at(r.get("expectedSettlementAt"))
        seconds = (settled - created).total_seconds() if done else None
        age = (as_of - created).total_seconds()
        breach = None
        if expected is not None and done:
            breach = settled > expected
        elif expected is not None and is_open and as_of > expected:
            breach = True
        prefunded = (r.get("source") or {}).get("sourceType") != "REALTIME_FUNDING"
        instant = expected is None and r.get("settlementTimelineSeconds") is not None
        sla = None
        if instant and prefunded:
            sla = seconds > 60 if done else (True if is_open and age > 60 else None)
        rows.append(
            {
                "rail": r.get("paymentRail"),
                "lifecycle": life,
                "time": seconds if done else (age if is_open else None),
                "event": done,
                "breach": breach,
                "overdue": is_open and expected is not None and as_of > expected,
                "sla": sla,
            }
        )
    mine = pd.DataFrame(rows)
    frame = settlement_times(data.wh, by="rail", as_of=data.as_of)
    assert frame["transaction_count"].sum() == len(mine)
    for row in frame.itertuples():
        part = mine[mine["rail"].isna()] if pd.isna(row.rail) else mine[mine["rail"] == row.rail]
        lives = part["lifecycle"].value_counts()
        assert row.open_count == lives.get("open", 0)
        assert row.cancelled_count == lives.get("cancelled", 0)
        resolved = len(part) - lives.get("open", 0)
        failures = sum(
            lives.get(k, 0) for k in ("failed", "refunded", "refund_pending", "refund_failed")
        )
        assert row.resolved_count == resolved
        assert row.failure_rate == (failures / resolved if resolved else row.failure_rate)
        timed = part[part["time"].notna()]
        for q, got in ((0.5, row.p50_seconds), (0.9, row.p90_seconds), (0.99, row.p99_seconds)):
            want = km(list(timed["time"]), list(timed["event"]), q)
            assert (pd.isna(got) and want is None) or got == pytest.approx(want, rel=1e-12)
        known = part[part["breach"].notna()]
        assert row.expected_count == len(known)
        assert row.expected_breach_count == known["breach"].astype(bool).sum()
        assert row.open_overdue_count == part["overdue"].sum()
        sla = part[part["sla"].notna()]
        assert (row.sla_count, row.sla_breach_count) == (len(sla), sla["sla"].astype(bool).sum())
    # the figures the issue was about: open transfers are in, overdue ones count as breaches
    assert frame["open_count"].sum() > 0 and frame["sla_count"].sum() > 0
    if data.name == "second":
        assert frame["open_overdue_count"].sum() > 0


# -- revenue -----------------------------------------------------------------------------------


def half_up(value: float) -> int:
    return math.floor(value + 0.5)


def test_revenue_from_raw(data: DataSet) -> None:
    series = data.rates.copy()
    series["at"] = pd.to_datetime(series["date"]).dt.tz_localize("UTC")
    rates = {
        key: part.sort_values("at")
        for key, part in series.groupby(["sent_currency", "received_currency"])
    }
    own = data.wh.sql(
        """
        SELECT raw->>'$.sentAmount.currency.code' AS s,
               CAST(date_trunc('month', timezone('UTC', CAST(raw->>'$.settledAt' AS TIMESTAMPTZ)))
                    AS DATE) AS settlement_month,
               count(*) AS n,
               CAST(sum(CAST(raw->>'$.sentAmount.amount' AS BIGINT)) AS BIGINT) AS sent,
               CAST(sum(CAST(raw->>'$.fees' AS BIGINT)) AS BIGINT) AS fees,
               CAST(sum(CAST(raw->>'$.platformFees' AS BIGINT)) AS BIGINT) AS platform,
               CAST(sum(CAST(raw->>'$.rateDetails.gridApiFixedFee' AS BIGINT)) AS BIGINT) AS fixed,
               CAST(sum(CAST(raw->>'$.rateDetails.gridApiVariableFeeAmount' AS BIGINT)) AS BIGINT)
                   AS variable
        FROM transactions WHERE type = 'OUTGOING' AND raw->>'$.status' = 'COMPLETED'
        GROUP BY ALL ORDER BY settlement_month, s
        """
    )
    margin: dict[tuple[str, Any], int] = {}
    cpty: dict[tuple[str, Any], int] = {}
    for r in records(data.wh, "OUTGOING"):
        if r["status"] != "COMPLETED":
            continue
        s, rc = r["sentAmount"]["currency"], r["receivedAmount"]["currency"]
        settled = pd.Timestamp(r["settledAt"])
        key = (s["code"], settled.tz_convert("UTC").replace(day=1).date())
        x = r["exchangeRate"]
        shift = 10.0 ** (s["decimals"] - rc["decimals"])
        c = r["rateDetails"]["counterpartyFixedFee"]
        cpty[key] = cpty.get(key, 0) + half_up(c * x * shift)
        if s["code"] == rc["code"]:
            continue
        pair = rates[(s["code"], rc["code"])]
        mid = pair[pair["at"] <= pd.Timestamp(r["createdAt"])]["mid_rate"].iloc[-1]
        cost = half_up(r["receivedAmount"]["amount"] * shift * (x - mid))
        margin[key] = margin.get(key, 0) + cost
    frame = fees_collected(data.wh, reference_rates=data.rates)
    assert len(frame) == len(own)
    for got, want in zip(frame.itertuples(), own.itertuples(), strict=True):
        key = (want.s, want.settlement_month)
        assert (got.sent_currency, got.settlement_month) == key
        assert (got.transaction_count, got.sent_minor, got.fees_minor) == (
            want.n,
            want.sent,
            want.fees,
        )
        assert (got.service_fixed_fee_minor, got.service_variable_fee_minor) == (
            want.fixed,
            want.variable,
        )
        assert got.platform_fee_minor == want.platform
        assert got.counterparty_fixed_fee_minor == cpty[key]
        assert got.residual_minor == want.fees - (
            want.fixed + want.variable + want.platform + cpty[key]
        )
        assert got.take_rate == pytest.approx(want.fees / want.sent, rel=1e-12)
        if key in margin:
            assert got.fx_margin_minor == margin[key]
            assert got.fx_margin_status == "complete"
            assert got.all_in_rate == pytest.approx(
                (want.fees + margin[key]) / want.sent, rel=1e-12
            )
    residuals = int(frame["residual_minor"].sum())
    if data.name == "sandbox":
        assert residuals == 0
    else:  # the platform fee is inside the service's fees: it shows as a negative residual
        assert residuals == -int(frame["platform_fee_minor"].sum()) != 0
    assert frame["fx_margin_minor"].sum() > 0


def test_fee_breakdown_defaults_to_completed_and_says_when_no_reference(data: DataSet) -> None:
    completed = data.wh.sql(
        "SELECT count(*) AS n FROM transactions WHERE type = 'OUTGOING' AND status = 'COMPLETED'"
    )["n"].iloc[0]
    assert len(fee_breakdown(data.wh)) == completed
    every = fee_breakdown(data.wh, status=None)
    assert len(every) == len(records(data.wh, "OUTGOING")) > completed
    blind = fees_collected(data.wh, by=[])
    unknown = (
        blind["fx_margin_status"] == "no reference rate: FX margin unknown (pass reference_rates=)"
    )
    same = blind["fx_margin_status"] == "no FX (same currency)"
    assert unknown.any() and (unknown | same).all()
    assert blind.loc[unknown, "fx_margin_minor"].isna().all()
    assert (blind.loc[same, "fx_margin_minor"] == 0).all()


# -- refunds -------------------------------------------------------------------------------


def test_refunds_from_raw(data: DataSet) -> None:
    as_of = pd.Timestamp(data.as_of)
    frame = refund_summary(data.wh, by=[], as_of=data.as_of)
    for kind in ("OUTGOING", "INCOMING"):
        rows = [
            (
                (r["sentAmount"] if kind == "OUTGOING" else r["receivedAmount"])["currency"][
                    "code"
                ],
                lifecycle(r),
                r.get("refund"),
            )
            for r in records(data.wh, kind)
        ]
        mine = pd.DataFrame(rows, columns=["currency", "lifecycle", "refund"])
        for currency, part in mine.groupby("currency"):
            got = frame[(frame["type"] == kind) & (frame["currency"] == currency)].iloc[0]
            refunds = [x for x in part["refund"] if isinstance(x, dict)]
            resolved = (part["lifecycle"] != "open").sum()
            assert got["refunded_count"] == len(refunds)
            assert got["refund_rate"] == (
                len(refunds) / resolved if resolved else got["refund_rate"]
            )
            for status in ("PENDING", "COMPLETED", "FAILED"):
                n = sum(1 for x in refunds if x["status"] == status)
                assert got[f"refund_{status.lower()}_count"] == n
            times, events = [], []
            for x in refunds:
                start, end = pd.Timestamp(x["initiatedAt"]), at(x.get("settledAt"))
                if x["status"] == "COMPLETED" and end is not None and end <= as_of:
                    times.append((end - start).total_seconds())
                    events.append(True)
                elif x["status"] == "PENDING" or x["status"] == "COMPLETED":
                    times.append((as_of - start).total_seconds())
                    events.append(False)
            want = km(times, events, 0.5)
            got_p50 = got["p50_seconds"]
            assert (pd.isna(got_p50) and want is None) or got_p50 == pytest.approx(want, rel=1e-12)


# -- cards -------------------------------------------------------------------------------------


def test_cards_from_raw(data: DataSet) -> None:
    as_of = pd.Timestamp(data.as_of)
    frame = card_summary(data.cards, by=[], as_of=data.as_of)
    rows = []
    for r in records(data.wh, "CARD"):
        auth = r["authorizedAmount"]["amount"]
        settled = (r.get("settledAmount") or {}).get("amount", 0)
        refunded = (r.get("refundedAmount") or {}).get("amount", 0)
        holding = r["status"] in ("AUTHORIZED", "PARTIALLY_SETTLED")
        age = (as_of - pd.Timestamp(r["authorizedAt"])).total_seconds() / 86_400
        pulled = (r.get("pullSummary") or {}).get("totalAmount", 0)
        rows.append(
            {
                "currency": r["authorizedAmount"]["currency"]["code"],
                # a hold older than the 30-day hold window is expired, not open
                "open": max(auth - settled, 0) if holding and age <= 30 else 0,
                "expired": max(auth - settled, 0) if holding and age > 30 else 0,
                "is_expired": holding and age > 30,
                "stale": holding and 7 < age <= 30,
                "bucket": None
                if not holding
                else "0_7"
                if math.floor(age) <= 7  # whole days
                else "8_30"
                if math.floor(age) <= 30
                else "over_30",
                "over": max(settled - auth, 0),
                "exposure": max(settled - pulled, 0) if r["status"] == "EXCEPTION" else 0,
                "exception": r["status"] == "EXCEPTION",
                "pulled": pulled,
                "settle_gap": (r.get("settlementSummary") or {}).get("totalAmount", 0) != settled,
                "refund_gap": (r.get("refundSummary") or {}).get("totalAmount", 0) != refunded,
            }
        )
    mine = pd.DataFrame(rows)
    assert frame["transaction_count"].sum() == len(mine)
    for currency, part in mine.groupby("currency"):
        got = frame[frame["currency"] == currency].iloc[0]
        assert got["stale_hold_count"] == part["stale"].sum()
        assert got["stale_hold_minor"] == part.loc[part["stale"], "open"].sum()
        assert got["expired_hold_count"] == part["is_expired"].sum()
        assert got["expired_hold_minor"] == part["expired"].sum()
        for bucket in ("0_7", "8_30", "over_30"):
            chosen = part[(part["bucket"] == bucket) & ~part["is_expired"]]
            assert got[f"open_hold_{bucket}_count"] == len(chosen)
            assert got[f"open_hold_{bucket}_minor"] == chosen["open"].sum()
        assert (got["over_settled_count"], got["over_settled_minor"]) == (
            (part["over"] > 0).sum(),
            part["over"].sum(),
        )
        assert got["exception_exposure_minor"] == part.loc[part["exception"], "exposure"].sum()
        assert got["pull_total_minor"] == part["pulled"].sum()
        assert got["settlement_summary_mismatch_count"] == part["settle_gap"].sum()
        assert got["refund_summary_mismatch_count"] == part["refund_gap"].sum()
    # partially settled holds are stale too (the issue: 290 of 310 were never flagged)
    partial = card_summary(data.cards, by="status", as_of=data.as_of).set_index("status")
    assert partial.loc[["PARTIALLY_SETTLED"], "stale_hold_count"].sum() > 0
    if data.name == "second":
        assert frame["settlement_summary_mismatch_count"].sum() > 0


def test_as_of_later_moves_open_transfers_not_settled_ones(data: DataSet) -> None:
    now = settlement_times(data.wh, by=[], as_of=data.as_of).iloc[0]
    later = settlement_times(data.wh, by=[], as_of=data.as_of + timedelta(days=30)).iloc[0]
    assert later["completed_count"] == now["completed_count"]
    assert later["open_overdue_count"] >= now["open_overdue_count"]
    assert later["open_max_seconds"] == now["open_max_seconds"] + 30 * 86_400


# -- empty and single-kind warehouses ------------------------------------------------------------


@pytest.mark.parametrize("kind", ["", "OUTGOING", "INCOMING", "CARD"])
def test_every_helper_plot_and_report_figure_on_a_single_kind(tmp_path: Path, kind: str) -> None:
    from paylens.analysis import (
        plot_card_summary,
        plot_failure_breakdown,
        plot_fee_breakdown,
        plot_fees_collected,
        plot_settlement_times,
    )
    from paylens.report import Period

    with Warehouse(tmp_path / "one.duckdb") as wh:
        chosen = [
            r for r in second.records(outgoing=60, incoming=60, cards=60) if r["type"] == kind
        ]
        wh.store_transactions(chosen)
        if not chosen:  # a file nothing was ever stored into: each says so, in one line
            for helper in (fees_collected, fee_breakdown, settlement_times, plot_fees_collected):
                with pytest.raises(WarehouseEmptyError, match="has no data: run `paylens sync"):
                    helper(wh)
            return
        for frame in (
            fees_collected(wh, reference_rates=second.mid_series()),
            fee_breakdown(wh, "corridor"),
            settlement_times(wh, "rail"),
            settlement_times(wh, "month", type="INCOMING"),
            failure_breakdown(wh, "rail"),
            refund_summary(wh, "refund_reason"),
            card_summary(wh, "merchant"),
        ):
            assert isinstance(frame, pd.DataFrame)
        for fig in (
            plot_fees_collected(wh),
            plot_fee_breakdown(wh),
            plot_settlement_times(wh),
            plot_failure_breakdown(wh, type="INCOMING"),
            plot_card_summary(wh),
        ):
            # every artist drawn (texts laid out, ticks located), no pixels: rendering a
            # PNG is checked by tests/test_analysis_plots.py and by every notebook
            fig.draw_without_rendering()
        period = Period(wh)
        checks = period.tie_outs()
        # nothing was synced (records were stored), and the second generator's fees hold the
        # platform fee inside the service's: the report's fee tie-outs must say so
        fee_checks = [
            "fee components explain every fee (transactions with a residual)",
            "sum of fee residuals, every currency",
        ]
        assert checks.drop(["last sync succeeded", *fee_checks])["passed"].all()
        assert checks.loc[fee_checks, "passed"].tolist() == [kind != "OUTGOING"] * 2
        period.headline()
        assert len(period.rates()) == 9
        period.exceptions()
