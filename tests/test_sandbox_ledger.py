"""The sandbox's internal accounts' balances move with the money its transactions move: each
balance read agrees with the raw records listed at that time, and the balance roll-forward of a
warehouse synced several times as the clock moves has no break but the ones its docstring
explains (a card transaction with events on both sides of a read, all dated at its last)."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from paylens import Sandbox
from paylens.analysis import balance_rollforward
from paylens.sandbox.routes import dispatch
from paylens.sandbox.world.world import World
from paylens.warehouse import Warehouse

from .test_balance_rollforward import check, seen_reads
from .test_sandbox_cards_simulate import MERCHANT, _card, authorize
from .test_sandbox_world import call

STEPS = [0, 2, 6, 11, 19]  # days the clock moves before each sync (crosses a month's end)


def listed(sandbox: Sandbox, path: str) -> list[dict[str, Any]]:
    """Every record a list endpoint answers now, raw, page after page."""
    out: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params = {"limit": ["100"]} | ({"cursor": [cursor]} if cursor else {})
        status, page = dispatch(sandbox.world, "GET", path, params, None, {})
        assert status == 200
        out += page["data"]
        cursor = page.get("nextCursor")
        if not page.get("hasMore"):
            return out


def money_moved(records: list[dict[str, Any]]) -> dict[str, int]:
    """Per internal account, the money the records move by now, as their fields show it
    (statuses and summaries, not times): what the service says each record did to it."""
    out: dict[str, int] = defaultdict(int)
    for r in records:
        if r["type"] == "INCOMING":
            if r["status"] == "COMPLETED" and "accountId" in r["destination"]:
                out[r["destination"]["accountId"]] += r["receivedAmount"]["amount"]
        elif r["type"] == "OUTGOING":
            account, refund = r["source"].get("accountId"), r.get("refund") or {}
            if account and (r["status"] == "COMPLETED" or refund):
                out[account] -= r["sentAmount"]["amount"]
            if account and refund.get("status") == "COMPLETED":
                out[account] += r["sentAmount"]["amount"]
        else:
            out[r["accountId"]] += card_net(r)
    return out


def card_net(r: dict[str, Any]) -> int:
    """What a card transaction moved its funding account by, as its summaries show now."""
    return -r["pullSummary"]["totalAmount"] + r["refundSummary"]["totalAmount"]


def held(records: list[dict[str, Any]]) -> dict[str, int]:
    """Per internal account, what its outgoing transfers in PROCESSING hold."""
    out: dict[str, int] = defaultdict(int)
    for r in records:
        if r["type"] == "OUTGOING" and r["status"] == "PROCESSING":
            account = r["source"].get("accountId")
            if account:
                out[account] += r["sentAmount"]["amount"]
    return out


@pytest.mark.parametrize("seed", [2, 5, 9])
def test_balances_follow_the_records_and_roll_forward_without_unexplained_breaks(
    tmp_path: Path, seed: int
) -> None:
    sandbox = Sandbox(seed=seed, transactions=600)
    client = sandbox.client()
    reads: list[tuple[str, str, Any, int]] = []
    accounts_at: list[dict[str, dict[str, Any]]] = []  # per sync: account id -> record
    records_at: list[list[dict[str, Any]]] = []  # per sync: every transaction listed
    read_times: list[pd.Timestamp] = []
    with Warehouse(tmp_path / "w.duckdb") as wh:
        for days in STEPS:
            sandbox.advance(timedelta(days=days))
            wh.sync(client, progress=False)
            seen = seen_reads(wh, client)
            reads += seen
            read_times.append(pd.Timestamp(seen[0][2]))
            accounts_at.append(
                {a["id"]: a for a in listed(sandbox, "/customers/internal-accounts")}
            )
            records_at.append(listed(sandbox, "/transactions"))

        # each read agrees with the raw records at its time: the total moved by exactly what
        # the records moved since the first read, the available balance less what is held
        first_total = {i: a["totalBalance"]["amount"] for i, a in accounts_at[0].items()}
        # the opening balances cover the history's debits: nothing below zero at its end
        assert min(a["balance"]["amount"] for a in accounts_at[0].values()) >= 0
        first_moved = money_moved(records_at[0])
        compared = 0
        for accounts, records in zip(accounts_at, records_at, strict=True):
            moved, holds = money_moved(records), held(records)
            for i, a in accounts.items():
                total = a["totalBalance"]["amount"]
                assert total == first_total[i] + moved[i] - first_moved[i], i
                assert a["balance"]["amount"] == total - holds[i], i
                compared += 1
        assert sum(1 for m in money_moved(records_at[-1]).values() if m) > 20

        # the roll-forward agrees with its rules recomputed from the raw records
        assert check(wh, reads) > 1000
        # the only breaks: card transactions whose money moved on both sides of a read,
        # every movement dated at their last event. From the summaries each read listed,
        # the card money that really moved between two reads, less what the roll-forward
        # dates inside them (the final record, at its last event)
        cards = [{r["id"]: r for r in records if r["type"] == "CARD"} for records in records_at]
        final = cards[-1]
        for unit in ("month", "day"):
            got = balance_rollforward(wh, period=unit)
            breaks = 0
            for row in got.to_dict("records"):
                o = read_times.index(row["opening_read_at"])
                c = read_times.index(row["closing_read_at"])
                really = sum(
                    card_net(r) - (card_net(cards[o][i]) if i in cards[o] else 0)
                    for i, r in cards[c].items()
                    if r["accountId"] == row["account_id"]
                )
                dated = sum(
                    card_net(r)
                    for r in final.values()
                    if r["accountId"] == row["account_id"]
                    and row["opening_read_at"]
                    < pd.Timestamp(r.get("lastEventAt") or r["authorizedAt"])
                    <= row["closing_read_at"]
                )
                assert row["break_minor"] == really - dated, (row["account_id"], row["period"])
                breaks += row["break_minor"] != 0
            # such breaks happen (the check above explains each), and are rare: most
            # account-periods roll forward exactly (4 to 10 on these seeds)
            assert 0 < breaks < len(got) // 10, (unit, breaks, len(got))


def test_a_balance_change_is_announced_once_per_account_and_advance(tmp_path: Path) -> None:
    sandbox = Sandbox(seed=4, transactions=600)
    world = sandbox.world
    seen: list[Any] = []
    world.on_transition = seen.append
    before = {a["id"]: a for a in listed(sandbox, "/customers/internal-accounts")}
    world.advance(timedelta(days=3))
    after = {a["id"]: a for a in listed(sandbox, "/customers/internal-accounts")}
    updates = [t for t in seen if t.event == "INTERNAL_ACCOUNT.BALANCE_UPDATED"]
    changed = {
        i
        for i, a in after.items()
        if (a["balance"], a["totalBalance"]) != (before[i]["balance"], before[i]["totalBalance"])
    }
    assert len(changed) > 5
    assert sorted(t.record["id"] for t in updates) == sorted(changed)  # once each
    for t in updates:  # the account as it reads now, at its last change
        assert t.record == after[t.record["id"]]
        assert pd.Timestamp(t.at, unit="us", tz="UTC") == pd.Timestamp(t.record["updatedAt"])
        assert t.record["updatedAt"] > before[t.record["id"]]["updatedAt"]
    stamps = [t.at for t in seen]
    assert stamps == sorted(stamps)  # announced in the order the changes happened


def test_a_card_authorized_through_the_interface_pulls_its_amount_and_is_announced() -> None:
    world = World(seed=6, transactions=600)
    seen: list[Any] = []
    world.on_transition = seen.append
    card = _card(world)

    def account() -> dict[str, Any]:
        status, page = call(
            world, "GET", "/customers/internal-accounts", {"customerId": card["cardholderId"]}
        )
        assert status == 200
        (found,) = [a for a in page["data"] if a["id"] == card["fundingSources"][0]]
        return dict(found)

    before = account()
    assert authorize(world, card, 1234, MERCHANT["descriptor"]) == 1
    after = account()
    for name in ("balance", "totalBalance"):
        assert after[name]["amount"] == before[name]["amount"] - 1234
    updates = [t for t in seen if t.event == "INTERNAL_ACCOUNT.BALANCE_UPDATED"]
    assert [t.record for t in updates] == [after]
