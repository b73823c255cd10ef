"""The resource catalogue (`warehouse/sync/catalog.py`): what is derived from it agrees with it
everywhere, and the resource added by one entry (the platform's external accounts) is synced,
stored, read and offered by the CLI like the others."""

from __future__ import annotations

import argparse
import pickle
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest

from paylens import Freshness, Sandbox
from paylens.cli import build_parser
from paylens.errors import InvalidArgumentError, WarehouseEmptyError
from paylens.lake import TABLES as PUBLISHED
from paylens.warehouse import RESOURCES, SyncOptions, Warehouse
from paylens.warehouse.sync import SMALL_RESOURCES

from ._helpers import run_cli

NEW = "platform_external_accounts"


def _resources_choices() -> list[str]:
    sync = next(
        action.choices["sync"]
        for action in build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    )
    (option,) = [a for a in sync._actions if "--resources" in a.option_strings]
    return list(option.choices)


def test_what_is_derived_agrees_with_the_catalogue(tmp_path: Path) -> None:
    names = list(RESOURCES)
    assert names == [
        "transactions",
        "customers",
        "cards",
        "internal_accounts",
        "external_accounts",
        NEW,
    ]
    assert _resources_choices() == names
    assert list(SMALL_RESOURCES) == names[1:]
    assert list(Freshness().limits) == names[1:]
    assert set(names) | {"outgoing_fees", "card_transactions", "payment_instructions"} <= set(
        PUBLISHED
    )
    with Warehouse(tmp_path / "w.duckdb") as wh:
        tables = set(wh.sql("SELECT table_name FROM duckdb_tables()")["table_name"])
        declared = {
            name: list(wh.sql(f"DESCRIBE {name}")["column_name"])[: len(entry.schema)]
            for name, entry in RESOURCES.items()
        }
        removable = set(
            wh.sql("SELECT table_name FROM duckdb_columns() WHERE column_name = 'removed_at'")[
                "table_name"
            ]
        )
    assert declared == {name: entry.schema.names for name, entry in RESOURCES.items()}
    assert declared[NEW] == declared["external_accounts"]
    children = {c.table for c in RESOURCES["transactions"].children}
    assert set(names) | children <= tables
    assert removable == set(names)


def test_the_new_resource_is_synced_stored_and_read_like_the_others(tmp_path: Path) -> None:
    sandbox = Sandbox(seed=3, transactions=100)
    client = sandbox.client()
    listed = {a.id: a for a in client.external_accounts.list_platform()}
    assert len(listed) == 2  # the sandbox's platform holds a few of its own
    with Warehouse(tmp_path / "w.duckdb") as wh:
        report = wh.sync(client, progress=False)
        assert report.reads[NEW] == "whole: never read whole"
        assert report.resources[NEW]["new"] == 2
        rows = wh.records(NEW)
        assert list(rows["id"]) == sorted(listed)
        assert list(rows["currency"]) == [listed[i].currency for i in sorted(listed)]
        assert list(rows["status"]) == [listed[i].status for i in sorted(listed)]
        assert rows["customer_id"].isna().all()  # the platform's own: no customer
        assert "raw" not in wh.records(NEW, raw=False).columns
        # the customers' external accounts are a table of their own, none of the platform's
        assert not set(wh.records("external_accounts")["id"]) & set(listed)
        sandbox.advance(timedelta(hours=1))
        again = wh.sync(client, progress=False)
        assert again.not_reread[NEW] == timedelta(hours=1)
        fresh = wh.sync(client, progress=False, freshness=Freshness(**{NEW: timedelta(0)}))
        assert fresh.reads[NEW] == "whole: last read whole 60m ago (limit 0s)"
        assert fresh.resources[NEW]["unchanged"] == 2


def test_the_cli_syncs_the_new_resource_alone(tmp_path: Path) -> None:
    db = tmp_path / "w.duckdb"
    done = run_cli(
        "sync", "--sandbox", "--transactions", "100", "--db", str(db), "--quiet",
        "--resources", NEW,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    listed = sorted(
        a.id for a in Sandbox(seed=0, transactions=100).client().external_accounts.list_platform()
    )
    with Warehouse(db, read_only=True) as wh:
        assert list(wh.records(NEW)["id"]) == listed
        assert wh.sql("SELECT count(*) AS n FROM transactions")["n"][0] == 0
    wrong = run_cli("sync", "--sandbox", "--db", str(db), "--resources", "platform_accounts")
    assert wrong.returncode == 2
    assert "invalid choice: 'platform_accounts'" in wrong.stderr


def test_an_older_file_gets_the_table_of_a_resource_added_since(tmp_path: Path) -> None:
    path = tmp_path / "w.duckdb"
    client = Sandbox(seed=3, transactions=100).client()
    with Warehouse(path) as wh:
        wh.sync(client, progress=False)
        customers = len(wh.records("external_accounts"))
    # the file as the paylens before the new resource wrote it: same schema version, no table
    con = duckdb.connect(str(path))
    con.execute(f"DROP TABLE {NEW}")
    con.execute("DELETE FROM paylens_meta WHERE key = 'record_tables'")
    con.execute("DELETE FROM resource_reads WHERE resource = ?", [NEW])
    con.close()
    with Warehouse(path, read_only=True) as wh:
        with pytest.raises(WarehouseEmptyError, match=f"holds no {NEW} yet"):
            wh.records(NEW)
        assert len(wh.records("external_accounts")) == customers
    with Warehouse(path) as wh:
        report = wh.sync(client, progress=False)
        assert report.resources[NEW]["new"] == 2
        assert len(wh.records(NEW)) == 2


def test_the_generic_reader_names_what_it_reads() -> None:
    with Warehouse(":memory:") as wh, pytest.raises(InvalidArgumentError, match="resource"):
        wh.records("transactions")  # read by `wh.transactions()`, with its filters


def test_freshness_has_one_limit_per_resource_read_whole_and_stays_a_value() -> None:
    limits = Freshness(cards=timedelta(0))
    assert limits.cards == timedelta(0)
    assert limits.external_accounts == timedelta(hours=12) == limits.platform_external_accounts
    assert limits == Freshness(cards=timedelta(0)) != Freshness()
    assert hash(limits) == hash(Freshness(cards=timedelta(0)))
    assert pickle.loads(pickle.dumps(limits)) == limits
    assert repr(Freshness()).startswith("Freshness(customers=datetime.timedelta(days=1), ")
    with pytest.raises(InvalidArgumentError, match="names no resource read whole: 'card'"):
        Freshness(card=timedelta(0))
    with pytest.raises(AttributeError):
        limits.cards = timedelta(1)  # type: ignore[misc]
    with pytest.raises(AttributeError):
        _ = limits.transactions


def test_the_sync_keywords_have_one_set_of_defaults(tmp_path: Path) -> None:
    sandbox = Sandbox(seed=3, transactions=100)
    with Warehouse(tmp_path / "w.duckdb") as wh:
        with pytest.raises(TypeError, match="concurency"):
            wh.sync(sandbox.client(), concurency=4)  # type: ignore[call-arg]
        # a keyword equal to its default says nothing options= does not
        report = wh.sync(
            sandbox.client(),
            options=SyncOptions(progress=False),
            concurrency=SyncOptions.concurrency,
            verify_syncs=SyncOptions.verify_syncs,
        )
        assert report.resources["transactions"]["new"] == 100
