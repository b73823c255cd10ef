"""The wallet inventory in the warehouse (credentials and sessions of many accounts, the accounts
with one credential, stale sessions) and the bulk session revoke on the plan/apply framework."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from paylens import Client, Sandbox, SessionKey, ops
from paylens.warehouse import Warehouse

from . import test_wallet_flows as flows
from .test_wallet_flows import login, plain

sandbox, sleeps, client = flows.sandbox, flows.sleeps, flows.client


@pytest.fixture
def wh(tmp_path: Path) -> Iterator[Warehouse]:
    with Warehouse(tmp_path / "wallets.duckdb") as w:
        yield w


def truth(sandbox: Sandbox) -> tuple[dict[str, int], set[str], set[str]]:
    """Credentials per account, active session ids and stale ones (open > 8 h), from the world."""
    w = sandbox.world.wallets
    now = sandbox.world.now_us
    counts = {w.account_ids[a]: len(creds) for a, creds in w.credentials.items()}
    active = {s.id for ss in w.sessions.values() for s in ss if s.expires > now}
    stale = {
        s.id
        for ss in w.sessions.values()
        for s in ss
        if s.expires > now and s.created <= now - 8 * 3600 * 1_000_000
    }
    return counts, active, stale


def test_the_inventory_holds_every_credential_and_active_session(
    sandbox: Sandbox, client: Client, wh: Warehouse
) -> None:
    counts, active, stale = truth(sandbox)
    found = wh.sync_wallets(client)
    assert found == {
        "accounts": len(counts),
        "credentials": sum(counts.values()),
        "sessions": len(active),
    }
    credentials = wh.credentials()
    assert credentials.groupby("account_id").size().to_dict() == counts
    assert set(wh.sessions()["id"]) == active
    assert set(credentials.columns) >= {"id", "account_id", "type", "nickname", "credential_id"}
    assert str(credentials["created_at"].dtype).startswith("timestamp[us, tz=")
    single = wh.single_credential_accounts()
    assert set(single["account_id"]) == {a for a, n in counts.items() if n == 1}
    assert set(single["type"]) == {"EMAIL_OTP"}
    old = wh.stale_sessions(max_age=timedelta(hours=8), as_of=sandbox.now)
    assert set(old["id"]) == stale and stale
    assert (old["age_hours"] >= 8).all()
    assert wh.credentials().attrs["source"].startswith("SANDBOX DATA")


def test_a_later_inventory_closes_what_is_gone(
    sandbox: Sandbox, client: Client, wh: Warehouse
) -> None:
    wh.sync_wallets(client)
    account = plain(client)
    key, session = login(client, account.id)
    client.auth.sessions.revoke(session.id, signer=key)  # opened and closed between looks
    first = next(iter(sandbox.world.wallets.sessions[_row(sandbox, account.id)]), None)
    sandbox.advance(timedelta(hours=13))  # every generated session expires
    wh.sync_wallets(client, [account.id])
    ended = wh.sessions(include_ended=True)
    mine = ended[ended["account_id"] == account.id]
    assert len(mine) and mine["ended_at"].notna().all()
    assert set(mine["end_reason"]) == {"gone"}
    assert session.id not in set(ended["id"])
    assert first is None or first.id in set(mine["id"])
    others = ended[ended["account_id"] != account.id]
    assert others["ended_at"].isna().all()  # accounts not inventoried again stay as they were


def _row(sandbox: Sandbox, account_id: str) -> int:
    return next(r for r, a in sandbox.world.wallets.account_ids.items() if a == account_id)


def test_no_session_secret_reaches_the_warehouse(
    sandbox: Sandbox, client: Client, wh: Warehouse, tmp_path: Path
) -> None:
    account = plain(client)
    key, _ = login(client, account.id)
    wh.sync_wallets(client)
    for table in ("wallet_credentials", "wallet_sessions", "wallet_inventory"):
        columns = " ".join(wh.sql(f"DESCRIBE {table}")["column_name"])
        assert "key" not in columns.lower() and "encrypted" not in columns.lower()
        dump = wh.sql(f"SELECT * FROM {table}").to_csv()
        assert key.export_private_hex() not in dump and key.public_key_hex not in dump
    wh.close()
    raw = (tmp_path / "wallets.duckdb").read_bytes()
    assert key.export_private_hex().encode() not in raw


def test_bulk_revoke_of_stale_sessions(sandbox: Sandbox, client: Client, wh: Warehouse) -> None:
    keys: dict[str, SessionKey] = {}
    for n in range(4):  # three of them hold a session open more than 8 hours
        account = plain(client, n)
        keys[account.id] = login(client, account.id)[0]
    wh.sync_wallets(client)
    stale = wh.stale_sessions(as_of=sandbox.now)
    plan = ops.plan_revoke_sessions(wh, stale, signer=keys)
    eligible = set(plan.eligible["id"])
    expected = set(stale[stale["account_id"].isin(list(keys))]["id"])
    assert eligible == expected and len(eligible) == 3
    assert set(plan.items["eligibility"]) <= {
        "eligible",
        "skipped: no signing key for its account",
    }
    assert "wallet sessions" not in plan.summary() and "sessions eligible" in plan.summary()
    dry = plan.apply(client, dry_run=True, progress=False)
    assert dry.attrs["all_as_planned"]
    assert all(
        "DELETE /auth/sessions/" in r for r in dry[dry["outcome"] == "would_send"]["request"]
    )
    # one of them ends elsewhere between the plan and its application
    gone = sorted(eligible)[0]
    account_of_gone = stale.set_index("id").loc[gone, "account_id"]
    client.auth.sessions.revoke(gone, signer=keys[account_of_gone])
    result = plan.apply(client, progress=False, concurrency=3)
    outcomes = result.set_index("id")["outcome"].to_dict()
    assert outcomes[gone] == "skipped_changed"
    assert {outcomes[i] for i in eligible - {gone}} == {"revoked"}
    _, active, _ = truth(sandbox)
    assert not eligible & active
    ended = wh.sessions(include_ended=True).set_index("id")
    assert set(ended.loc[list(eligible - {gone}), "end_reason"]) == {"revoked"}
    assert not eligible & set(wh.sessions()["id"]) - {gone}
    journal = wh.journal()
    assert set(journal[journal["action"] == "revoke_session"]["outcome"]) == {
        "revoked",
        "skipped_changed",
    }
    again = ops.plan_revoke_sessions(wh, list(eligible - {gone}), signer=keys)
    assert set(again.items["eligibility"]) <= {
        "skipped: already ended",
        "skipped: already revoked (journal)",
    }


def test_a_session_filter_in_sql_and_a_single_signer(
    sandbox: Sandbox, client: Client, wh: Warehouse
) -> None:
    account = plain(client)
    key, mine = login(client, account.id)
    wh.sync_wallets(client)
    plan = ops.plan_revoke_sessions(wh, f"account_id = '{account.id}'", signer=key)
    assert mine.id in set(plan.eligible["id"])
    others = [i for i in plan.eligible["id"] if i != mine.id]
    result = ops.plan_revoke_sessions(wh, others, signer=key).apply(client, progress=False)
    assert set(result["outcome"]) <= {"revoked"}
    assert {s.id for s in client.auth.sessions.list(account.id)} == {mine.id}
