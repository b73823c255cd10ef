"""The bulk-operations journal's layout: an item is named by `item_kind` and `item_id`
(transactions and wallet sessions alike); a file written by a paylens whose journal keyed
every item by `transaction_id` keeps every entry, read-only as it is, and migrated when opened
for writing, and the at-most-once rules read its entries as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from paylens import Sandbox, ops
from paylens.warehouse import SCHEMA_VERSION, Warehouse

#: The journal as layout 4 (and every layout before 5) wrote it.
OLD_JOURNAL_DDL = """CREATE TABLE ops_journal (
    entry_id BIGINT PRIMARY KEY, plan_fingerprint VARCHAR, action VARCHAR,
    transaction_id VARCHAR, outcome VARCHAR, http_status INTEGER, error_code VARCHAR,
    message VARCHAR, attempts INTEGER, requested_at TIMESTAMPTZ, finished_at TIMESTAMPTZ);
    ALTER TABLE ops_journal ADD COLUMN IF NOT EXISTS claim VARCHAR"""

SESSION = "Session:0a1b2c3d"


@pytest.fixture(scope="module")
def old_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A warehouse whose journal has the old layout, with four entries: a cancel done, a
    cancel refused for good, an approval left in doubt by a dead run, a session revoked."""
    path = tmp_path_factory.mktemp("journal") / "old.duckdb"
    with Warehouse(path) as wh:
        wh.sync(
            Sandbox(seed=3, transactions=300).client(), progress=False, resources=["transactions"]
        )
        plan = ops.plan_cancel(wh, "status IN ('PENDING', 'PROCESSING', 'CREATED')")
        ids = [str(i) for i in plan.eligible["id"][:3]]
    con = duckdb.connect(str(path))
    con.execute("DROP TABLE ops_journal")
    con.execute(OLD_JOURNAL_DDL)
    con.execute(
        """INSERT INTO ops_journal (entry_id, plan_fingerprint, action, transaction_id, outcome,
                  attempts, requested_at, claim) VALUES
           (nextval('ops_journal_ids'), 'f1', 'cancel', ?, 'cancelled', 1, now(), 'run1'),
           (nextval('ops_journal_ids'), 'f1', 'cancel', ?, 'not_cancellable', 1, now(), 'run1'),
           (nextval('ops_journal_ids'), 'f2', 'approve', ?, 'requested', 1, now(), 'dead'),
           (nextval('ops_journal_ids'), 'f3', 'revoke_session', ?, 'revoked', 1, now(), 'run3')""",
        [ids[0], ids[1], ids[2], SESSION],
    )
    con.execute("UPDATE paylens_meta SET value = '4' WHERE key = 'schema_version'")
    con.close()
    return path, ids


EXPECTED_KINDS = ["transaction", "transaction", "transaction", "wallet_session"]


def _entries(wh: Warehouse) -> list[tuple[str, str, str, str]]:
    journal = wh.journal()
    return list(
        journal[["action", "item_kind", "item_id", "outcome"]].itertuples(index=False, name=None)
    )


def _claim(wh: Warehouse, action: str, item: str, success: str) -> Any:
    return wh.journal_claim(
        fingerprint="f9", action=action, item_id=item, success=success, token="run9", live=set()
    )


def test_an_old_journal_read_only_is_read_in_the_new_layout(
    old_file: tuple[Path, list[str]],
) -> None:
    path, ids = old_file
    with Warehouse(path, read_only=True) as wh:
        assert _entries(wh) == [
            ("cancel", "transaction", ids[0], "cancelled"),
            ("cancel", "transaction", ids[1], "not_cancellable"),
            ("approve", "transaction", ids[2], "requested"),
            ("revoke_session", "wallet_session", SESSION, "revoked"),
        ]
        assert "transaction_id" not in wh.journal().columns
        # a dry run's plan reads the old entries: the cancelled and refused items are skipped
        plan = ops.plan_cancel(wh, ids[:2])
        assert list(plan.items["eligibility"]) == [
            "skipped: already cancelled (journal)",
            "skipped: refused by the service before (not_cancellable, journal)",
        ]
        assert wh.journal_in_doubt("approve", set()) == [(3, ids[2], True)]


def test_opening_an_old_journal_for_writing_migrates_it_and_keeps_every_entry(
    old_file: tuple[Path, list[str]], tmp_path: Path
) -> None:
    path = tmp_path / "copy.duckdb"
    path.write_bytes(old_file[0].read_bytes())
    ids = old_file[1]
    with Warehouse(path, read_only=True) as wh:
        before = _entries(wh)
    with Warehouse(path) as wh:
        assert wh._meta()["schema_version"] == str(SCHEMA_VERSION)
        columns = list(wh.sql("DESCRIBE ops_journal")["column_name"])
        assert "transaction_id" not in columns and {"item_id", "item_kind"} <= set(columns)
        assert _entries(wh) == before
        assert list(wh.journal()["item_kind"]) == EXPECTED_KINDS
        # at most once, as before: the item journalled cancelled is not claimed again
        claim = _claim(wh, "cancel", ids[0], "cancelled")
        assert claim.entry_id is None and claim.done and claim.outcome == "cancelled"
        fresh = _claim(wh, "approve", ids[2], "approved")
        assert fresh.in_doubt == (3,) and fresh.entry_id == 5
    with Warehouse(path) as wh:  # opened again: nothing left to migrate, nothing lost
        assert [row[:3] for row in _entries(wh)] == [row[:3] for row in before] + [
            ("approve", "transaction", ids[2])
        ]


def test_a_new_journal_names_each_item_by_its_kind(tmp_path: Path) -> None:
    with Warehouse(tmp_path / "new.duckdb") as wh:
        wh.journal_claim(
            fingerprint="f", action="cancel", item_id="Transaction:1", success="cancelled",
            token="t", live=set(),
        )  # fmt: skip
        wh.journal_claim(
            fingerprint="f", action="revoke_session", item_id=SESSION, success="revoked",
            token="t", live=set(), item_kind="wallet_session",
        )  # fmt: skip
        assert list(wh.journal().columns[:5]) == [
            "entry_id",
            "plan_fingerprint",
            "action",
            "item_kind",
            "item_id",
        ]
        assert _entries(wh) == [
            ("cancel", "transaction", "Transaction:1", "claimed"),
            ("revoke_session", "wallet_session", SESSION, "claimed"),
        ]
