"""The balance roll-forward: each read of a balance kept with its time, and opening + movements
= closing per account, currency and period, recomputed in plain Python from the raw records
and the balances the service answered, on the sandbox and on the second service (whose
balances move with its records, so a movement it hides is a break)."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from paylens import Sandbox
from paylens.analysis import balance_rollforward
from paylens.analysis._rollforward import ROLLFORWARD_COLUMNS
from paylens.errors import InvalidArgumentError
from paylens.sandbox.routes import dispatch
from paylens.warehouse import Warehouse

from ._second_service import Habits, SecondService

KINDS = [
    "incoming_credits_minor",
    "outgoing_debits_minor",
    "outgoing_fees_minor",
    "refunds_credited_minor",
    "card_pulls_minor",
    "card_refunds_minor",
]

Reads = list[tuple[str, str, datetime, int]]


def ts(text: str) -> datetime:
    return pd.Timestamp(text).tz_convert("UTC").to_pydatetime()


def movements(wh: Warehouse, held: dict[str, str]) -> list[tuple[str, str, datetime, str, int]]:
    """(account, currency, when, column, signed amount) of every movement the raw records
    show, read as the roll-forward's docstring states the rules (`held`: each account's
    currency, which a card transaction's summaries are in)."""
    out = []
    for (raw,) in wh.sql("SELECT raw FROM transactions WHERE removed_at IS NULL").itertuples(
        index=False
    ):
        r = json.loads(raw)
        if r["type"] == "INCOMING":
            if r["status"] == "COMPLETED" and r.get("settledAt"):
                money = r["receivedAmount"]
                out.append(
                    (
                        r["destination"].get("accountId"),
                        money["currency"]["code"],
                        ts(r["settledAt"]),
                        "incoming_credits_minor",
                        money["amount"],
                    )
                )
        elif r["type"] == "OUTGOING":
            refund = r.get("refund") or {}
            if r["status"] == "COMPLETED":
                at = r.get("settledAt") or r.get("updatedAt")
            elif (
                r["status"] == "FAILED"
                and r.get("failureReason") == "PAYOUT_RETURNED"
                and r.get("settledAt")
            ):
                at = r["settledAt"]
            else:
                at = refund.get("initiatedAt")
            if not at:
                continue
            account = (r.get("source") or {}).get("accountId")
            sent, fees = r["sentAmount"], r.get("fees") or 0
            code = sent["currency"]["code"]
            out.append((account, code, ts(at), "outgoing_debits_minor", -(sent["amount"] - fees)))
            out.append((account, code, ts(at), "outgoing_fees_minor", -fees))
            if refund.get("status") == "COMPLETED" and refund.get("settledAt"):
                out.append(
                    (
                        account,
                        code,
                        ts(refund["settledAt"]),
                        "refunds_credited_minor",
                        sent["amount"],
                    )
                )
        else:
            at = ts(r.get("lastEventAt") or r.get("authorizedAt") or r["createdAt"])
            code = held.get(r.get("accountId"), r["authorizedAmount"]["currency"]["code"])
            pulled = (r.get("pullSummary") or {}).get("totalAmount") or 0
            refunded = (r.get("refundSummary") or {}).get("totalAmount") or 0
            out.append((r.get("accountId"), code, at, "card_pulls_minor", -pulled))
            out.append((r.get("accountId"), code, at, "card_refunds_minor", refunded))
    return out


def period_of(t: datetime, unit: str) -> tuple[datetime, datetime]:
    if unit == "month":
        start = datetime(t.year, t.month, 1, tzinfo=UTC)
        end = datetime(t.year + t.month // 12, t.month % 12 + 1, 1, tzinfo=UTC)
        return start, end
    start = datetime(t.year, t.month, t.day, tzinfo=UTC)
    return start, start + timedelta(days=1)


def recompute(wh: Warehouse, reads: Reads, unit: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Every roll-forward figure, from the raw records and the balances the test saw."""
    by_account: dict[tuple[str, str], list[tuple[datetime, int]]] = defaultdict(list)
    for account, code, at, amount in reads:
        by_account[(account, code)].append((at, amount))
    moved = movements(wh, {account: code for account, code, _, _ in reads})
    out = {}
    for (account, code), seen in by_account.items():
        seen.sort()
        start, end = period_of(seen[0][0], unit)
        while start <= seen[-1][0]:
            before = [s for s in seen if s[0] <= start]
            opening = before[-1] if before else seen[0]
            closing = [s for s in seen if s[0] <= end][-1]
            row: dict[str, Any] = {k: 0 for k in KINDS}
            row["movement_count"] = 0
            for a, c, t, kind, amount in moved:
                if a == account and c == code and opening[0] < t <= closing[0]:
                    row[kind] += amount
                    row["movement_count"] += amount != 0
            row["opening_balance_minor"] = opening[1]
            row["closing_balance_minor"] = closing[1]
            row["opening_read_at"] = pd.Timestamp(opening[0])
            row["closing_read_at"] = pd.Timestamp(closing[0])
            row["expected_closing_minor"] = opening[1] + sum(row[k] for k in KINDS)
            row["break_minor"] = closing[1] - row["expected_closing_minor"]
            label = start.strftime("%Y-%m" if unit == "month" else "%Y-%m-%d")
            out[(account, code, label)] = row
            start, end = period_of(end, unit)
    return out


def seen_reads(wh: Warehouse, client: Any) -> Reads:
    """The balances the service answers now, at the time the warehouse's last read of the
    accounts was stamped (the service's clock has not moved since)."""
    (read_at,) = wh.sql("SELECT read_at FROM resource_reads WHERE resource = 'internal_accounts'")[
        "read_at"
    ]
    at = pd.Timestamp(read_at).to_pydatetime()
    return [
        (a.id, a.total_balance.currency.code, at, a.total_balance.amount)
        for a in client.internal_accounts.list()
    ]


def check(wh: Warehouse, reads: Reads) -> int:
    """The warehouse kept exactly the reads seen; every roll-forward figure agrees with the
    recomputation, monthly and daily. Returns the number of figures compared."""
    kept = wh.balance_reads()
    assert sorted(
        zip(
            kept["account_id"],
            kept["currency"],
            kept["read_at"],
            kept["total_balance_minor"],
            strict=True,
        )
    ) == sorted((a, c, pd.Timestamp(t), m) for a, c, t, m in reads)
    compared = 0
    for unit in ("month", "day"):
        expected = recompute(wh, reads, unit)
        got = balance_rollforward(wh, period=unit)
        assert len(got) == len(expected)
        for row in got.to_dict("records"):
            want = expected[(row["account_id"], row["currency"], row["period"])]
            for name, value in want.items():
                assert row[name] == value, (row["account_id"], row["period"], name)
                compared += 1
        listed = balance_rollforward(wh, period=unit, movements=True)
        assert len(listed) == sum(r["movement_count"] for r in expected.values())
    return compared


@pytest.mark.parametrize("seed", [3, 11])
def test_rollforward_on_the_sandbox_agrees_with_the_raw_records(tmp_path: Path, seed: int) -> None:
    sandbox = Sandbox(seed=seed, transactions=600)
    client = sandbox.client()
    reads: Reads = []
    with Warehouse(tmp_path / "w.duckdb") as wh:
        for step, days in enumerate([0, 9, 24]):
            if days:
                sandbox.advance(timedelta(days=days))
                account = next(iter(client.internal_accounts.list()))
                status, _ = dispatch(  # money no listed record shows: a break
                    sandbox.world,
                    "POST",
                    f"/sandbox/internal-accounts/{account.id}/fund",
                    {},
                    {"amount": 1_000 * step, "currency": account.balance.currency.code},
                    {},
                )
                assert status == 200
            wh.sync(client, progress=False)
            reads += seen_reads(wh, client)
            # the same read again (the clock has not moved): nothing is added
            wh.sync(client, progress=False, full=True)
        assert len(wh.balance_reads()) == len(reads) > 0
        assert check(wh, reads) > 1000
        got = balance_rollforward(wh)
        # the sandbox's balances move only when funded: every movement is a break
        assert (got["break_minor"] != 0).any()


@pytest.mark.parametrize("seed", [1, 7])
def test_rollforward_on_the_second_service_agrees_with_the_raw_records(
    tmp_path: Path, seed: int
) -> None:
    service = SecondService(seed=seed, habits=Habits(ledger=True, late=0.0), days=20, per_day=8)
    client = service.client()
    reads: Reads = []
    with Warehouse(tmp_path / "w.duckdb") as wh:
        for days in (0, 6, 15):
            service.advance(timedelta(days=days))
            wh.sync(client, progress=False)
            reads += seen_reads(wh, client)
        assert check(wh, reads) > 500


def test_a_movement_no_record_shows_is_a_break_listed_in_its_window(tmp_path: Path) -> None:
    """Two runs of the same service; in one, 4,321 cents leave an account unlisted between
    two reads: that period's break is exactly -4,321 more, every other figure the same."""
    frames = {}
    for hidden in (False, True):
        service = SecondService(seed=5, habits=Habits(ledger=True, late=0.0), days=20, per_day=8)
        client = service.client()
        with Warehouse(tmp_path / f"{hidden}.duckdb") as wh:
            wh.sync(client, progress=False)
            service.advance(timedelta(days=3))
            account = sorted(service.internal)[0]
            if hidden:
                service.post(account, -4_321)
            service.advance(timedelta(days=3))
            wh.sync(client, progress=False)
            frames[hidden] = balance_rollforward(wh, period="day")
    plain, broken = frames[False], frames[True]
    diff = broken["break_minor"] - plain["break_minor"]
    assert diff.tolist().count(-4_321) == 1 and set(diff) == {0, -4_321}
    row = broken[diff == -4_321].iloc[0]
    assert (row["account_id"], row["period"]) == (account, "2025-09-26")
    # the window runs from the first read to the second (six days, nothing read between)
    assert (row["closing_read_at"] - row["opening_read_at"]) == pd.Timedelta(days=6)
    assert plain["break_minor"][diff == -4_321].tolist() == [0]
    moved = ["opening_read_at", "closing_read_at", *KINDS, "movement_count"]
    assert plain[moved].equals(broken[moved])
    # the day after the second read opens on it: the hidden movement is in its balance
    later = broken[(broken["account_id"] == account) & (broken["period"] == "2025-09-27")]
    assert later["break_minor"].tolist() == [0]


def test_rollforward_refuses_what_it_cannot_roll_and_reads_one_read_plainly(
    tmp_path: Path,
) -> None:
    with pytest.raises(InvalidArgumentError, match="period"):
        balance_rollforward(pd.DataFrame(), period="year")
    with pytest.raises(InvalidArgumentError, match="pass a Warehouse"):
        balance_rollforward(pd.DataFrame())
    with Warehouse(tmp_path / "w.duckdb") as wh:  # accounts, no transaction, one read
        wh.sync(Sandbox(seed=0, transactions=0).client(), progress=False)
        got = balance_rollforward(wh)
        assert list(got.columns) == ROLLFORWARD_COLUMNS and len(got) == len(wh.internal_accounts())
        assert (got["opening_read_at"] == got["closing_read_at"]).all()
        assert (got["break_minor"] == 0).all() and (got["movement_count"] == 0).all()
        assert len(balance_rollforward(wh, movements=True)) == 0
