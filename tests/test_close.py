"""Period close: a closed month's snapshot never moves; later changes to its transfers (a
returned payout, a late settlement) show as adjustments in the month they happened in, summing
to the difference. Data: the second generator's records (a service that is not the sandbox),
then those records changed and stored again as a sync would store them."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from paylens.close import adjustments, close_month, closed_figures
from paylens.errors import InvalidArgumentError
from paylens.warehouse import Warehouse

from . import _second_generator as second
from .test_platform_pnl import month, recompute


def _iso(t: pd.Timestamp) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def test_a_closed_month_never_moves_and_changes_become_adjustments(tmp_path: Path) -> None:
    records = second.records()
    rates = second.mid_series()
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.store_transactions(records)
        completed = [
            r for r in records
            if r["type"] == "OUTGOING" and r["status"] == "COMPLETED" and r.get("settledAt")
        ]  # fmt: skip
        closing = month(completed[0]["settledAt"])
        first = close_month(wh, closing, reference_rates=rates)
        # the snapshot's figures are the raw records' own, recomputed in plain Python
        own = recompute(wh, rates)
        figures = closed_figures(first)
        assert len(figures) == sum(1 for p, _ in own if p == closing) > 0
        for row in figures.to_dict("records"):
            want = own[(closing, row["currency"])]
            for column, value in row.items():
                if column.endswith(("_minor", "_count")):
                    assert value == want.get(column, 0), column
        # then the service's records change, two months after the close
        later = pd.Timestamp(f"{closing}-01", tz="UTC") + pd.offsets.MonthBegin(2)
        returned = next(
            r for r in completed
            if month(r["settledAt"]) == closing and r.get("platformFees", 0) > 0
        )  # fmt: skip
        back = copy.deepcopy(returned)
        back.update(status="FAILED", failureReason="PAYOUT_RETURNED", updatedAt=_iso(later))
        back.pop("settledAt")
        pending = next(
            (r for r in records if r["type"] == "OUTGOING" and r["status"] == "PENDING"), None
        )
        changed: list[dict[str, Any]] = [back]
        if pending is not None:
            late = copy.deepcopy(pending)
            late.update(
                status="COMPLETED",
                settledAt=_iso(pd.Timestamp(f"{closing}-28T12:00:00", tz="UTC")),
                updatedAt=_iso(later + pd.Timedelta(days=3)),
            )
            changed.append(late)
        wh.store_transactions(changed)
        assert close_month(wh, closing, reference_rates=rates) == first  # byte-identical
        moved = adjustments(wh, reference_rates=rates)
        assert set(moved["period"]) == {later.strftime("%Y-%m")}
        assert set(moved["closed_period"]) == {closing}
        assert returned["id"] in set(moved["transfer_id"])
        back_row = moved[moved["transfer_id"] == returned["id"]].iloc[0]
        assert back_row["reason"] == "left the closed period (now FAILED)"
        assert back_row["platform_revenue_minor"] == -returned["platformFees"]
        # adjustments per currency = the period's figures now - its closed figures
        now = recompute(wh, rates)
        for row in figures.to_dict("records"):
            adj = moved[moved["currency"] == row["currency"]]
            want = now.get((closing, row["currency"]), {})
            for column in ("platform_revenue_minor", "service_fees_minor", "outgoing_count"):
                assert row[column] + int(adj[column].sum()) == want.get(column, 0)
        # the stored snapshot is JSON text with the accruals of the period's end
        assert {"period", "figures", "transfers", "accruals"} == set(json.loads(first))


def test_close_month_refuses_a_malformed_month(tmp_path: Path) -> None:
    with Warehouse(tmp_path / "w.duckdb") as wh, pytest.raises(InvalidArgumentError):
        close_month(wh, "2025-13")


def test_paylens_close_prints_the_stored_snapshot_twice_the_same(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from paylens.cli import main

    db = tmp_path / "w.duckdb"
    with Warehouse(db) as wh:
        wh.store_transactions(second.records())
        period = wh.sql("SELECT max(settled_at) AS t FROM transactions")["t"][0]
    closing = pd.Timestamp(period).tz_convert("UTC").strftime("%Y-%m")
    assert main(["close", "--month", closing, "--db", str(db)]) == 0
    first = capsys.readouterr().out
    assert json.loads(first)["period"] == closing and json.loads(first)["figures"]
    assert main(["close", "--month", closing, "--db", str(db)]) == 0
    assert capsys.readouterr().out == first
    assert main(["close", "--month", "2025-5", "--db", str(db)]) == 2
    assert capsys.readouterr().err.strip() == (
        "paylens close: month: must be YYYY-MM, got '2025-5'"
    )
