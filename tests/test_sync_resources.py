"""The smaller resources' sync (customers by what changed, cards and accounts by the freshness
policy), against the sandbox's answers, with time driven by the sandbox's clock."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from paylens import Client, Freshness, Sandbox
from paylens.errors import InvalidArgumentError
from paylens.warehouse import SyncOptions, Warehouse

from ._helpers import same_instants

SMALL = [
    "customers",
    "cards",
    "internal_accounts",
    "external_accounts",
    "platform_external_accounts",
]
LISTS = {
    "customers": "/customers",
    "cards": "/cards",
    "internal_accounts": "/customers/internal-accounts",
    "external_accounts": "/customers/external-accounts",
    "platform_external_accounts": "/platform/external-accounts",
}


@pytest.fixture
def sandbox() -> Sandbox:
    """conftest's sandbox with fewer transactions: the resources synced here (30 customers, 13
    cards, 121 accounts) are the same whatever the number of transactions, which each sync
    of everything reads too."""
    return Sandbox(seed=11, transactions=300)


@pytest.fixture
def wh(tmp_path: Path) -> Any:
    with Warehouse(tmp_path / "w.duckdb") as warehouse:
        yield warehouse


def truth(client: Client, resource: str) -> dict[str, Any]:
    """Every record the service lists now (customers: deleted ones too), by id."""
    pages = {
        "customers": lambda: client.customers.list(include_deleted=True),
        "cards": client.cards.list,
        "internal_accounts": client.internal_accounts.list,
        "external_accounts": client.external_accounts.list,
        "platform_external_accounts": client.external_accounts.list_platform,
    }[resource]().pages(raw=True)
    return {r["id"]: same_instants(r) for page in pages for r in page.data}


def stored(wh: Warehouse, resource: str) -> dict[str, Any]:
    rows = wh.sql(f"SELECT id, raw FROM {resource} WHERE removed_at IS NULL")
    return {
        i: same_instants(orjson.loads(raw)) for i, raw in zip(rows["id"], rows["raw"], strict=True)
    }


def list_requests(sandbox: Sandbox, resource: str) -> int:
    """Requests that listed a resource (counts, parts and pages)."""
    path = LISTS[resource]
    return sum(
        1 for method, p, _ in sandbox.requests.entries if method == "GET" and p.endswith(path)
    )


def sync(wh: Warehouse, client: Client, **kw: Any) -> Any:
    return wh.sync(client, progress=False, **kw)


def test_a_first_sync_stores_every_resource_as_the_service_lists_it(
    sandbox: Sandbox, client: Client, wh: Warehouse
) -> None:
    report = sync(wh, client)
    for name in SMALL:
        assert stored(wh, name) == truth(client, name), name
        assert report.reads[name].startswith("whole"), report.reads[name]
        assert report.resources[name]["new"] == len(truth(client, name))
    reads = wh.sql("SELECT resource, whole_at, run_id FROM resource_reads ORDER BY 1")
    assert list(reads["resource"]) == sorted(SMALL)
    assert set(reads["run_id"]) == {report.run_id}
    assert {t.to_pydatetime() for t in reads["whole_at"]} == {sandbox.now}
    assert report.not_reread == {}


def test_a_resource_not_due_is_not_reread_and_the_report_says_how_old(
    sandbox: Sandbox, client: Client, wh: Warehouse
) -> None:
    sync(wh, client)
    sandbox.advance(timedelta(minutes=5))
    sandbox.requests.reset()
    report = sync(wh, client)
    five = timedelta(minutes=5)
    whole_only = ("cards", "internal_accounts", "external_accounts", "platform_external_accounts")
    assert report.not_reread == dict.fromkeys(whole_only, five)
    for name in whole_only:
        assert list_requests(sandbox, name) == 0
        assert report.reads[name] == "not re-read: last read whole 5m ago"
    assert report.reads["customers"].startswith("changes")
    assert "not re-read: last read whole 5m ago" in str(report)


def test_each_resource_is_reread_once_its_interval_has_passed(
    sandbox: Sandbox, client: Client, wh: Warehouse
) -> None:
    sync(wh, client)
    sandbox.advance(timedelta(minutes=10))
    report = sync(wh, client)
    ten = timedelta(minutes=10)
    assert report.not_reread == {
        "cards": ten,
        "external_accounts": ten,
        "platform_external_accounts": ten,
    }
    assert report.reads["internal_accounts"] == "whole: last read whole 10m ago (limit 10m)"
    sandbox.advance(timedelta(minutes=50))  # an hour since cards were read
    report = sync(wh, client)
    assert report.not_reread == {
        "external_accounts": timedelta(hours=1),
        "platform_external_accounts": timedelta(hours=1),
    }
    assert report.reads["cards"] == "whole: last read whole 60m ago (limit 60m)"
    sandbox.advance(timedelta(hours=11))
    report = sync(wh, client)
    assert report.not_reread == {}
    for name in ("external_accounts", "platform_external_accounts"):
        assert report.reads[name] == "whole: last read whole 12.0h ago (limit 12.0h)"
    assert report.reads["customers"].startswith("changes")
    sandbox.advance(timedelta(hours=12))  # a day since customers were read whole
    report = sync(wh, client)
    assert report.reads["customers"] == "whole: last read whole 24.0h ago (limit 24.0h)"


def test_full_or_naming_a_resource_rereads_it_whatever_its_age(
    sandbox: Sandbox, client: Client, wh: Warehouse
) -> None:
    sync(wh, client)
    sandbox.requests.reset()
    report = sync(wh, client, resources=["cards"])
    assert list(report.resources) == ["cards"]
    assert report.reads["cards"] == "whole: asked for"
    assert list_requests(sandbox, "cards") > 0
    assert list_requests(sandbox, "external_accounts") == 0
    report = sync(wh, client, full=True)
    assert {name: report.reads[name] for name in SMALL} == dict.fromkeys(SMALL, "whole: asked for")


def test_the_policy_is_an_option_like_the_others(
    sandbox: Sandbox, client: Client, wh: Warehouse
) -> None:
    sync(wh, client)
    sandbox.advance(timedelta(minutes=1))
    every_sync = Freshness(internal_accounts=timedelta(0), cards=timedelta(0))
    report = sync(wh, client, freshness=every_sync)
    assert set(report.not_reread) == {"external_accounts", "platform_external_accounts"}
    report = wh.sync(client, options=SyncOptions(progress=False, freshness=every_sync))
    assert set(report.not_reread) == {"external_accounts", "platform_external_accounts"}
    with pytest.raises(InvalidArgumentError, match="not both"):
        wh.sync(client, options=SyncOptions(), freshness=every_sync)
    with pytest.raises(InvalidArgumentError, match=r"freshness\.cards"):
        Freshness(cards=timedelta(minutes=-1))
    with pytest.raises(InvalidArgumentError, match="resources"):
        sync(wh, client, resources=["accounts"])


def test_a_closed_card_is_stored_closed_within_the_policy(
    sandbox: Sandbox, client: Client, wh: Warehouse
) -> None:
    sync(wh, client)
    card = next(c for c in client.cards.list() if str(c.state) == "ACTIVE")
    client.cards.update(card.id, state="CLOSED")
    sandbox.advance(timedelta(minutes=30))
    sync(wh, client)  # not due: the stored state is half an hour old, as the report says
    state = "SELECT state FROM cards WHERE id = ?"
    assert wh.sql(state, [card.id])["state"].iloc[0] == "ACTIVE"
    sandbox.advance(timedelta(minutes=30))
    report = sync(wh, client)
    assert wh.sql(state, [card.id])["state"].iloc[0] == "CLOSED"
    assert report.resources["cards"]["changed"] == 1
    assert stored(wh, "cards") == truth(client, "cards")


def test_customers_changed_between_syncs_are_read_by_what_changed_exactly(
    sandbox: Sandbox, client: Client, wh: Warehouse
) -> None:
    sync(wh, client)
    customers = list(client.customers.list())
    sandbox.advance(timedelta(hours=1))
    changed = customers[3]
    client.auth.update_customer_email(
        changed.id, "moved@example.com", customer_type=str(changed.customer_type)
    )
    sandbox.advance(timedelta(hours=1))
    sandbox.requests.reset()
    report = sync(wh, client)
    assert report.reads["customers"].startswith("changes: updated since")
    # two counts and the filter's one page: not the whole listing
    assert list_requests(sandbox, "customers") == 3
    # what the filter brings: the changed customer, and those at the watermark (inclusive)
    everyone = truth(client, "customers")
    watermark = max(c["updatedAt"] for i, c in everyone.items() if i != changed.id)
    at_mark = sum(1 for i, c in everyone.items() if i != changed.id and c["updatedAt"] == watermark)
    assert report.resources["customers"] == {"new": 0, "changed": 1, "unchanged": at_mark}
    assert stored(wh, "customers") == everyone
    row = wh.sql("SELECT email, updated_at FROM customers WHERE id = ?", [changed.id]).iloc[0]
    assert row["email"] == "moved@example.com"


def test_customers_the_filter_cannot_show_are_found_by_the_counts(wh: Warehouse) -> None:
    sandbox = Sandbox(seed=7, transactions=3_000)  # one of its customers is deleted
    client = sandbox.client()
    sync(wh, client)
    gone = wh.sql("SELECT id FROM customers ORDER BY id LIMIT 2")["id"].tolist()
    with wh._writing() as con:  # as if a sync had missed them (the counts no longer match)
        con.execute("DELETE FROM customers WHERE id IN (SELECT unnest(?::VARCHAR[]))", [gone])
    report = sync(wh, client)
    assert report.reads["customers"] == "whole: counts differ from what is stored"
    assert report.resources["customers"]["new"] == 2
    assert stored(wh, "customers") == truth(client, "customers")
    deleted = [i for i, c in truth(client, "customers").items() if c.get("isDeleted")]
    assert deleted  # the sandbox has deleted customers: kept, marked so
    flags = wh.sql("SELECT id FROM customers WHERE is_deleted")["id"].tolist()
    assert sorted(flags) == sorted(deleted)


def test_a_record_no_longer_listed_keeps_its_row_marked_removed(
    sandbox: Sandbox, client: Client, wh: Warehouse
) -> None:
    sync(wh, client)
    with wh._writing() as con:  # a card the service once listed and no longer does
        con.execute(
            """INSERT INTO cards (id, state, raw, first_run_id, last_changed_run_id, sync_run_id)
               VALUES ('Card:gone', 'ACTIVE', '{"id": "Card:gone"}', 1, 1, 1)"""
        )
    report = sync(wh, client, resources=["cards"])
    row = wh.sql("SELECT removed_at, last_changed_run_id FROM cards WHERE id = 'Card:gone'")
    assert row["removed_at"].iloc[0].to_pydatetime() == sandbox.now
    assert row["last_changed_run_id"].iloc[0] == report.run_id
    assert stored(wh, "cards") == truth(client, "cards")


def test_rejected_records_are_quarantined_and_retried_until_stored(
    sandbox: Sandbox, client: Client, wh: Warehouse
) -> None:
    accounts = list(truth(client, "internal_accounts"))
    bad = {accounts[1], accounts[-1]}
    sandbox.faults.corrupt_ids = bad
    report = sync(wh, client)
    rejected = wh.rejected_records()
    mine = rejected[rejected["resource"] == "internal_accounts"]
    assert set(mine["record_id"]) == bad
    assert all("balance" in e for e in mine["error"])
    assert report.rejected == 2
    assert set(stored(wh, "internal_accounts")) == set(accounts) - bad
    report = sync(wh, client)  # not due by age, but quarantined records are retried
    assert report.reads["internal_accounts"] == "whole: 2 quarantined record(s) to retry"
    sandbox.faults.corrupt_ids = set()
    report = sync(wh, client)
    assert report.reads["internal_accounts"] == "whole: 2 quarantined record(s) to retry"
    assert report.resources["internal_accounts"]["new"] == 2
    assert stored(wh, "internal_accounts") == truth(client, "internal_accounts")
    report = sync(wh, client)
    assert "internal_accounts" in report.not_reread  # nothing left to retry


def test_an_unchanged_resync_reads_little(sandbox: Sandbox, client: Client, wh: Warehouse) -> None:
    """Nothing changed: cards and accounts are not listed, customers only by what changed (their
    two counts and one page of changes). (An unchanged re-sync's share of a full sync's requests,
    #19's measure, is taken on the remittance profile in bench/.)"""
    sync(wh, client)
    before = {name: list_requests(sandbox, name) for name in SMALL}
    again = sync(wh, client)
    assert again.new == again.changed == 0
    listed = {name: list_requests(sandbox, name) - before[name] for name in SMALL}
    assert listed == {"customers": 3, **dict.fromkeys(SMALL[1:], 0)}


def test_a_listing_of_a_few_pages_is_read_whole_and_a_long_one_by_currency(
    tmp_path: Path,
) -> None:
    """Accounts are read in parts by currency only when there are enough of them for the parts
    to pay: a few pages cost their count and their pages (a count per currency would cost more
    requests than it saves); hundreds of records are cut by currency, read at once. Either way
    the warehouse holds what the service lists."""
    small = Sandbox(seed=8, transactions=300, profile="remittance")  # 364 and 184 accounts
    large = Sandbox(seed=8, transactions=1_000, profile="remittance")  # 1,200 and 613
    for sandbox, split in ((small, set()), (large, {"external_accounts"})):
        client = sandbox.client()
        with Warehouse(tmp_path / f"{len(split)}.duckdb") as wh:
            sync(wh, client)
            for name in ("internal_accounts", "external_accounts"):
                listed = list_requests(sandbox, name)
                service = truth(client, name)
                assert stored(wh, name) == service, name
                pages = -(-len(service) // 100)
                if name in split:
                    assert listed > 1 + pages + 5, name  # the count, one per currency, the parts
                else:
                    assert listed == 1 + pages, name  # the count, then the pages


def _stopped_at_the_third_part(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """The next sync reading `name` (a resource read only whole) stops, as a Ctrl-C stops it,
    as the third part of its whole read is read: one reader reads the parts in turn, and the
    resource's runner commits each as it is read."""
    from paylens.warehouse.sync import resources

    read, parts = resources.read, []

    def stopping(client: Client, resource: str, filters: dict[str, Any], *rest: Any) -> Any:
        if resource == name:
            parts.append(filters)
            if len(parts) == 3:
                monkeypatch.setattr(resources, "read", read)
                raise KeyboardInterrupt
        return read(client, resource, filters, *rest)

    monkeypatch.setattr(resources, "read", stopping)


def _parts(wh: Warehouse, name: str) -> dict[str, tuple[int, bool]]:
    rows = wh.sql(f"SELECT slice_key, run_id, done FROM sync_slices WHERE resource = '{name}'")
    return {
        k: (r, d) for k, r, d in zip(rows["slice_key"], rows["run_id"], rows["done"], strict=True)
    }


def test_a_stopped_whole_read_is_finished_by_the_next_run_reading_only_its_parts_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox = Sandbox(seed=8, transactions=1_000, profile="remittance")  # 1,200 external accounts
    client = sandbox.client()
    name = "external_accounts"
    with Warehouse(tmp_path / "w.duckdb") as wh:
        sync(wh, client, resources=[name])
        with wh._writing() as con:  # an account the service once listed and no longer does
            con.execute(
                f"""INSERT INTO {name} (id, raw, first_run_id, last_changed_run_id, sync_run_id)
                    VALUES ('ExternalAccount:gone', '{{"id": "ExternalAccount:gone"}}', 1, 1, 1)"""
            )
        _stopped_at_the_third_part(monkeypatch, name)
        with pytest.raises(KeyboardInterrupt):
            sync(wh, client, resources=[name], full=True, concurrency=1)
        assert list(wh.sync_runs()["status"]) == ["succeeded", "stopped"]
        parts = _parts(wh, name)
        done = sorted(k for k, (run, d) in parts.items() if d and run == 2)
        left = sorted(k for k, (run, d) in parts.items() if not d)
        assert len(done) == 2 and len(left) > 1
        # nothing is marked removed before the last part is in
        gone = f"SELECT removed_at FROM {name} WHERE id = 'ExternalAccount:gone'"
        assert wh.sql(gone)["removed_at"].isna().all()
        service = truth(client, name)
        pages = sum(
            -(-sum(r["currency"] == orjson.loads(k)["currency"] for r in service.values()) // 100)
            for k in left
        )
        before = list_requests(sandbox, name)
        # named, so read whole: the read begun is finished rather than begun again
        report = sync(wh, client, resources=[name])
        # the first count (which tells the service's clock) and the pages of the parts left:
        # no count per currency, no part read again
        assert list_requests(sandbox, name) - before == 1 + pages
        assert report.reads[name] == "whole: the rest of an interrupted whole read"
        assert stored(wh, name) == service
        assert wh.sql(gone)["removed_at"].iloc[0].to_pydatetime() == sandbox.now
        assert all(d and run == 2 for run, d in _parts(wh, name).values())
        # the stopped run is marked interrupted by the next sync of transactions, which
        # resumes its windows (it had none here)
        assert list(wh.sync_runs()["status"]) == ["succeeded", "stopped", "succeeded"]


def test_a_stopped_whole_read_older_than_the_freshness_limit_is_read_again_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox = Sandbox(seed=8, transactions=1_000, profile="remittance")
    client = sandbox.client()
    name = "external_accounts"
    with Warehouse(tmp_path / "w.duckdb") as wh:
        _stopped_at_the_third_part(monkeypatch, name)
        with pytest.raises(KeyboardInterrupt):
            sync(wh, client, resources=[name], concurrency=1)
        sandbox.advance(timedelta(hours=13))  # past external accounts' 12 hours
        report = sync(wh, client, resources=[name])
        assert report.reads[name] == "whole: asked for"  # not the rest of the stale read
        assert stored(wh, name) == truth(client, name)
        # the new read's parts all read; the parts the stale one left dropped
        parts = _parts(wh, name).values()
        assert any(run == 2 for run, _ in parts) and all(d for _, d in parts)
