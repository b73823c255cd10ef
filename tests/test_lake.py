"""paylens.lake: the warehouse published as Iceberg tables in a SQL catalog (a real PostgreSQL
server the tests start, real files), read back by an independent reader (pyiceberg's scan,
not paylens's Lake) and by `Lake`."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from paylens import ConflictError, Sandbox, Warehouse, WarehouseError, analysis
from paylens.lake import TABLES, Lake, publish
from paylens.lake._catalog import ensure_namespace, open_catalog
from tests._helpers import run_cli
from tests._postgres import postgres_server

pytest.importorskip("pyiceberg")

from pyiceberg.catalog.sql import SqlCatalog

KEYS = {
    "payment_instructions": ["transaction_id", "position"],
    "status_history": ["id", "observed_at", "status"],
    "ops_journal": ["entry_id"],
    "sync_runs": ["run_id"],
    "resource_reads": ["resource"],
    "balance_reads": ["account_id", "currency", "read_at"],
    "rejected_records": ["run_id", "record_id"],
    "paylens_meta": ["key"],
}


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A real PostgreSQL server for the catalog; required in CI (`.ci/run` installs it)."""
    with postgres_server() as url:
        if url is None:
            if os.environ.get("CI") == "true":
                pytest.fail("PostgreSQL is required in CI (.ci/run installs it with apt-get)")
            pytest.skip("PostgreSQL binaries (initdb, pg_ctl) are not installed here")
        yield url


@pytest.fixture
def pg_catalog(pg_url: str, request: pytest.FixtureRequest) -> str:
    """A fresh database on the session's server for one test."""
    import sqlalchemy

    name = "t_" + str(abs(hash(request.node.nodeid)))
    engine = sqlalchemy.create_engine(pg_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as con:
        con.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}")
        con.exec_driver_sql(f"CREATE DATABASE {name}")
    engine.dispose()
    return pg_url.rsplit("/", 1)[0] + "/" + name


def _independent(catalog: str, table: str, snapshot_id: int | None = None) -> list[dict[str, Any]]:
    """The rows of a published table, read by pyiceberg alone."""
    cat = SqlCatalog("paylens", uri=catalog)
    scan = cat.load_table(("team", table)).scan(snapshot_id=snapshot_id)
    return _sorted(scan.to_arrow().to_pylist(), table)


def _sorted(rows: list[dict[str, Any]], table: str) -> list[dict[str, Any]]:
    key = KEYS.get(table, ["id"])
    for row in rows:  # the unsigned raw-JSON hash is kept in an int64's bits
        if row.get("raw_hash") is not None and row["raw_hash"] < 0:
            row["raw_hash"] += 2**64
    return sorted(rows, key=lambda r: tuple(str(r[k]) for k in key))


def _warehouse_rows(wh: Warehouse, table: str) -> list[dict[str, Any]]:
    return _sorted(wh.relation(table, include_removed=True).to_arrow_table().to_pylist(), table)


def assert_published_equals(wh: Warehouse, catalog: str) -> None:
    for table in TABLES:
        assert _independent(catalog, table) == _warehouse_rows(wh, table), table


def _files(catalog: str, table: str) -> set[str]:
    cat = SqlCatalog("paylens", uri=catalog)
    return {t.file.file_path for t in cat.load_table(("team", table)).scan().plan_files()}


def _round(sandbox: Sandbox, wh: Warehouse, n: int) -> None:
    """A round of service changes: the clock moves on and a pending transfer is cancelled."""
    sandbox.advance(timedelta(hours=12 * (n + 1)))
    client = sandbox.client()
    pending = wh.sql(
        "SELECT id FROM transactions WHERE type = 'OUTGOING' AND payment_rail IN ('ACH', 'WIRE')"
        " AND status = 'PENDING' ORDER BY id"
    )
    for transaction_id in pending["id"]:
        try:
            client.transactions.cancel(str(transaction_id))
            break
        except ConflictError:  # past its cancellation window: the next one
            continue
    wh.sync(client, progress=False)


def test_publish_equals_the_warehouse_after_each_of_five_rounds(
    pg_catalog: str, tmp_path: Path
) -> None:
    sandbox = Sandbox(seed=35, transactions=400)
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.sync(sandbox.client(), progress=False)
        first = wh.publish(pg_catalog, "team", location=tmp_path / "lake")
        assert first.tables["transactions"]["rows"] == 400
        assert_published_equals(wh, pg_catalog)
        for n in range(5):
            before = _by_id(wh)
            files_before = _files(pg_catalog, "transactions")
            _round(sandbox, wh, n)
            report = wh.publish(pg_catalog, "team")
            assert report.run_id == n + 2
            assert_published_equals(wh, pg_catalog)
            # only the months holding a new or changed row (any column) were rewritten
            after = _by_id(wh)
            touched = {month for i, (month, row) in after.items() if before.get(i) != (month, row)}
            months = {month for month, _ in after.values()}
            assert report.tables["transactions"]["partitions"] == len(touched)
            assert len(touched) < len(months)
            kept = files_before & _files(pg_catalog, "transactions")
            assert len(kept) == len(months) - len(touched)
        # an unchanged warehouse publishes nothing: no snapshot, no file
        snapshots = {t: _snapshot(pg_catalog, t) for t in TABLES}
        again = wh.publish(pg_catalog, "team")
        assert not again.changed and again.bytes_written == 0
        assert {t: _snapshot(pg_catalog, t) for t in TABLES} == snapshots


def _by_id(wh: Warehouse) -> dict[str, tuple[str, tuple[Any, ...]]]:
    """Each transaction's UTC month of creation and whole row."""
    rows = wh.relation("transactions").to_arrow_table().to_pylist()
    return {
        r["id"]: (r["created_at"].astimezone(UTC).strftime("%Y-%m"), tuple(r.values()))
        for r in rows
    }


def _snapshot(catalog: str, table: str) -> int | None:
    current = SqlCatalog("paylens", uri=catalog).load_table(("team", table)).current_snapshot()
    return None if current is None else current.snapshot_id


def test_lake_gives_the_same_frames_and_helpers_and_any_sync_run(tmp_path: Path) -> None:
    catalog = f"sqlite:///{tmp_path / 'catalog.db'}"
    sandbox = Sandbox(seed=7, transactions=300)
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.sync(sandbox.client(), progress=False)
        publish(wh, catalog, "team", location=tmp_path / "lake")
        run1 = {"transactions": wh.transactions(raw=True), "revenue": analysis.fees_collected(wh)}
        _round(sandbox, wh, 0)
        publish(wh, catalog, "team")
        with Lake(catalog=catalog, namespace="team") as lake:
            assert lake.sync_run == 2
            assert lake.label == wh.label
            for frame in ("transactions", "fees", "card_transactions", "customers", "cards"):
                pd.testing.assert_frame_equal(getattr(lake, frame)(), getattr(wh, frame)())
            pd.testing.assert_frame_equal(lake.status_history(), wh.status_history())
            pd.testing.assert_frame_equal(lake.transactions(raw=True), wh.transactions(raw=True))
            for helper in (
                analysis.fees_collected,
                analysis.fee_breakdown,
                analysis.settlement_times,
            ):
                pd.testing.assert_frame_equal(helper(lake), helper(wh))
            with pytest.raises(WarehouseError, match="read-only"):
                lake.journal_requested(1)
        with Lake(catalog=catalog, namespace="team", sync_run=1) as old:
            assert old.sync_run == 1
            pd.testing.assert_frame_equal(old.transactions(raw=True), run1["transactions"])
            pd.testing.assert_frame_equal(analysis.fees_collected(old), run1["revenue"])


def test_a_transaction_the_service_deleted_is_left_out_of_the_lake_too(tmp_path: Path) -> None:
    """A removed transaction is published with its `removed_at` (kept, as in the file), and
    the lake's readers and helpers leave it and its fees out, as the file's do."""
    catalog = f"sqlite:///{tmp_path / 'catalog.db'}"
    sandbox = Sandbox(seed=8, transactions=300)
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.sync(sandbox.client(), progress=False)
        fees = wh.fees()
        gone = str(fees.loc[fees["status"] == "COMPLETED", "id"].iloc[0])
        sandbox.world.delete_transaction(gone)
        wh.sync(sandbox.client(), progress=False, full=True)
        assert gone not in set(wh.transactions()["id"])
        publish(wh, catalog, "team", location=tmp_path / "lake")
        with Lake(catalog=catalog, namespace="team") as lake:
            assert gone not in set(lake.transactions()["id"])
            assert gone not in set(lake.fees()["id"])
            assert gone in set(lake.transactions(include_removed=True)["id"])
            pd.testing.assert_frame_equal(lake.transactions(), wh.transactions())
            pd.testing.assert_frame_equal(analysis.fee_breakdown(lake), analysis.fee_breakdown(wh))


def test_a_window_is_pushed_down_to_the_scan(tmp_path: Path) -> None:
    catalog = f"sqlite:///{tmp_path / 'catalog.db'}"
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.sync(Sandbox(seed=5, transactions=300).client(), progress=False)
        publish(wh, catalog, "team", location=tmp_path / "lake")
        window = {"start": "2025-08-01", "end": "2025-08-31"}
        with Lake(catalog=catalog, namespace="team", **window) as lake:
            expected = wh.transactions(**window)
            assert 0 < len(expected) < len(wh.transactions())
            pd.testing.assert_frame_equal(lake.transactions(), expected)
            pd.testing.assert_frame_equal(lake.fees(), wh.fees(**window))
        # only August's file was read: one file of the table's several
        files = (
            SqlCatalog("paylens", uri=catalog)
            .load_table(("team", "transactions"))
            .scan(
                row_filter="created_at >= '2025-08-01T00:00:00+00:00'"
                " and created_at <= '2025-08-31T23:59:59.999999+00:00'"
            )
            .plan_files()
        )
        assert len(list(files)) == 1


def test_the_publish_command(tmp_path: Path) -> None:
    catalog = f"sqlite:///{tmp_path / 'catalog.db'}"
    db = tmp_path / "w.duckdb"
    with Warehouse(db) as wh:
        wh.sync(Sandbox(seed=4, transactions=100).client(), progress=False)
    where = ["--db", str(db), "--catalog", catalog, "--namespace", "team"]
    first = run_cli("publish", *where, "--location", str(tmp_path / "lake"))
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("published sync run 1: 16 tables, ")
    again = run_cli("publish", *where)
    assert (again.returncode, again.stdout) == (
        0,
        "nothing changed since the last publish (sync run 1)\n",
    )
    wrong = run_cli("publish", "--db", str(db), "--catalog", "mysql://x", "--namespace", "t")
    assert wrong.returncode == 2
    assert wrong.stderr == (
        "paylens publish: catalog: give a postgresql://... or sqlite:///... URL, not 'mysql://x'\n"
    )
    demo = run_cli(
        "publish",
        "--sandbox",
        "--transactions",
        "50",
        "--catalog",
        catalog,
        "--namespace",
        "demo",
        "--location",
        str(tmp_path / "demo"),
    )
    assert demo.returncode == 0, demo.stderr
    with Lake(catalog=catalog, namespace="demo") as lake:
        assert len(lake.transactions()) == 50
    missing = run_cli(
        "publish",
        "--db",
        str(tmp_path / "none.duckdb"),
        "--catalog",
        catalog,
        "--namespace",
        "team",
    )
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1


def test_the_warehouse_does_not_import_pyiceberg() -> None:
    """Only a publish or a Lake loads the Iceberg library (the `lake` extra)."""
    code = (
        "import sys, paylens, paylens.warehouse, paylens.lake, paylens.analysis\n"
        "paylens.Warehouse, paylens.Lake\n"
        "assert not [m for m in sys.modules if m.startswith('pyiceberg')], 'pyiceberg'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_new_column_evolves_the_table(tmp_path: Path) -> None:
    catalog = f"sqlite:///{tmp_path / 'catalog.db'}"
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.sync(Sandbox(seed=3, transactions=100).client(), progress=False)
        publish(wh, catalog, "team", location=tmp_path / "lake")
        wh._con.execute("ALTER TABLE customers ADD COLUMN loyalty_tier VARCHAR DEFAULT 'gold'")
        report = publish(wh, catalog, "team")
        assert set(report.tables) == {"customers"}
        assert_published_equals(wh, catalog)
        with Lake(catalog=catalog, namespace="team") as lake:
            assert set(lake.customers()["loyalty_tier"]) == {"gold"}


def test_a_publisher_that_loses_the_race_plans_again(pg_catalog: str, tmp_path: Path) -> None:
    """Publisher A's commit comes after publisher B's (run just before A commits): A's commit
    fails, A re-reads and re-plans, and each record is once in the end."""
    sandbox = Sandbox(seed=11, transactions=200)
    with Warehouse(tmp_path / "w.duckdb") as wh:
        wh.sync(sandbox.client(), progress=False)
        publish(wh, pg_catalog, "team", location=tmp_path / "lake")
        _round(sandbox, wh, 0)
        raced: list[str] = []

        def other_publisher_first(table: str) -> None:
            if table == "transactions" and not raced:
                raced.append(table)
                assert publish(wh, pg_catalog, "team").changed

        report = publish(wh, pg_catalog, "team", before_commit=other_publisher_first)
        assert raced == ["transactions"]
        # B wrote everything first: A, planning again, found nothing left to change
        assert "transactions" not in report.tables
        assert_published_equals(wh, pg_catalog)


def _create_at(
    start: threading.Barrier, cat: SqlCatalog, namespace: str, failed: list[str]
) -> None:
    start.wait()
    try:
        ensure_namespace(cat, namespace)
    except Exception as exc:  # what a publisher would have died of
        failed.append(type(exc).__name__)


def test_publishers_creating_the_namespace_at_once_all_go_on(pg_catalog: str) -> None:
    """Publishers that start together all find the namespace missing and create it: the one
    that loses the insert goes on with the namespace the other made (the catalog answers
    the loser with its driver's unique violation, not `NamespaceAlreadyExistsError`)."""
    catalogs = [open_catalog(pg_catalog) for _ in range(6)]
    for trial in range(8):
        start, failed = threading.Barrier(len(catalogs)), []
        threads = [
            threading.Thread(target=_create_at, args=(start, cat, f"race{trial}", failed))
            for cat in catalogs
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert failed == []
        assert (f"race{trial}",) in catalogs[0].list_namespaces()


_PUBLISH = (
    "import sys; from paylens import Warehouse\n"
    "with Warehouse(sys.argv[1], read_only=True) as wh:\n"
    "    wh.publish(sys.argv[2], 'team', location=sys.argv[3])\n"
)


def _publisher(db: Path, catalog: str, location: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", _PUBLISH, str(db), catalog, str(location)],
        stderr=subprocess.PIPE,
    )


def _next_state(sandbox: Sandbox, db: Path, trial: int) -> None:
    """The first sync, or another round of changes synced."""
    with Warehouse(db) as wh:
        if trial == 0:
            wh.sync(sandbox.client(), progress=False)
        else:
            _round(sandbox, wh, trial % 5)


def _publishers_at_once(pg_catalog: str, tmp_path: Path, trials: int) -> None:
    """Two publisher processes at once, after each of `trials` rounds of changes."""
    sandbox = Sandbox(seed=12, transactions=300)
    db = tmp_path / "w.duckdb"
    for trial in range(trials):
        _next_state(sandbox, db, trial)
        procs = [_publisher(db, pg_catalog, tmp_path / "lake") for _ in range(2)]
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err.decode()
        with Warehouse(db, read_only=True) as wh:
            assert_published_equals(wh, pg_catalog)
    _every_snapshot_readable(pg_catalog)


def test_two_publishers_at_once(pg_catalog: str, tmp_path: Path) -> None:
    _publishers_at_once(pg_catalog, tmp_path, trials=2)


@pytest.mark.slow
def test_two_publishers_at_once_twenty_times(pg_catalog: str, tmp_path: Path) -> None:
    _publishers_at_once(pg_catalog, tmp_path, trials=20)


def _every_snapshot_readable(catalog: str) -> None:
    cat = SqlCatalog("paylens", uri=catalog)
    for table in TABLES:
        iceberg = cat.load_table(("team", table))
        for snapshot in iceberg.snapshots():
            rows = iceberg.scan(snapshot_id=snapshot.snapshot_id).to_arrow().to_pylist()
            ids = [tuple(str(r[k]) for k in KEYS.get(table, ["id"])) for r in rows]
            assert len(ids) == len(set(ids)), (table, snapshot.snapshot_id)


def _killed_publishes(pg_catalog: str, tmp_path: Path, trials: int) -> int:
    """SIGKILL a publisher at a random instant after each round; the next publish completes
    the work. How many kills cut a publish short (it had not finished; the next had work)."""
    sandbox = Sandbox(seed=13, transactions=300)
    db = tmp_path / "w.duckdb"
    rng = random.Random(35)
    cut_short = 0
    for trial in range(trials):
        _next_state(sandbox, db, trial)
        proc = _publisher(db, pg_catalog, tmp_path / "lake")
        time.sleep(rng.uniform(0.3, 3.0))  # a random instant of the publish, not a wait for it
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        _every_snapshot_readable_if_any(pg_catalog)
        with Warehouse(db, read_only=True) as wh:
            report = publish(wh, pg_catalog, "team", location=tmp_path / "lake")
            assert_published_equals(wh, pg_catalog)
        cut_short += proc.returncode == -signal.SIGKILL and report.changed
    _every_snapshot_readable(pg_catalog)
    return cut_short


def _every_snapshot_readable_if_any(catalog: str) -> None:
    cat = SqlCatalog("paylens", uri=catalog)
    if ("team",) in cat.list_namespaces() and cat.list_tables("team"):
        for _, table in cat.list_tables("team"):
            iceberg = cat.load_table(("team", table))
            for snapshot in iceberg.snapshots():
                iceberg.scan(snapshot_id=snapshot.snapshot_id).to_arrow()


def test_a_killed_publish_leaves_the_last_snapshot_and_the_next_completes(
    pg_catalog: str, tmp_path: Path
) -> None:
    _killed_publishes(pg_catalog, tmp_path, trials=3)


@pytest.mark.slow
def test_twenty_killed_publishes(pg_catalog: str, tmp_path: Path) -> None:
    assert _killed_publishes(pg_catalog, tmp_path, trials=20) >= 5
