"""The `paylens` command mirrors the library: every bulk action, `--sandbox` wherever data is
read or written, help with defaults, one line for every error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from paylens import Warehouse

SIZE = "1500"


def _cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAYLENS_")}
    return subprocess.run(
        [sys.executable, "-m", "paylens.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        input=stdin,
        timeout=180,
    )


@pytest.fixture(scope="module")
def synced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("cli") / "cli.duckdb"
    done = _cli("sync", "--sandbox", "--transactions", SIZE, "--db", str(db), "--quiet")
    assert done.returncode == 0, done.stderr
    assert "SANDBOX DATA" in done.stdout
    return db


def test_every_bulk_action_runs_against_the_embedded_sandbox(synced: Path) -> None:
    approve = _cli(
        "approve",
        "--sandbox",
        "--transactions",
        SIZE,
        "--db",
        str(synced),
        "--where",
        "agent_id IS NOT NULL AND status = 'PENDING'",
        "--apply",
        "--yes",
    )
    assert approve.returncode == 0, approve.stderr
    approved = approve.stdout.strip().splitlines()[-1]
    assert approved.startswith("approved ") and int(approved.split()[1]) > 0
    confirm = _cli(
        "confirm-receipt",
        "--sandbox",
        "--transactions",
        SIZE,
        "--db",
        str(synced),
        "--where",
        "type = 'OUTGOING' AND status = 'COMPLETED' AND receipt_delivery_confirmed_at IS NULL",
        "--dry-run",
    )
    assert confirm.returncode == 0 and "would_send" in confirm.stdout
    with Warehouse(synced, read_only=True) as wh:
        journal = wh.journal()
    assert set(journal["action"]) == {"approve"}
    assert (journal["outcome"] == "approved").sum() == int(approved.split()[1])


def test_a_dry_run_needs_no_credentials_and_writes_nothing(synced: Path) -> None:
    before = synced.read_bytes()
    dry = _cli("reject", "--db", str(synced), "--where", "status = 'PENDING'", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert synced.read_bytes() == before


def test_missing_configuration_says_what_to_do_in_one_line(synced: Path) -> None:
    done = _cli("cancel", "--db", str(synced), "--where", "status = 'PENDING'", "--apply")
    assert done.returncode == 2
    err = done.stderr.strip()
    assert err.count("\n") == 0 and "PAYLENS_BASE_URL" in err and "--sandbox" in err


def test_help_shows_defaults() -> None:
    text = _cli("sync", "--help").stdout
    assert "(default: data/paylens.duckdb)" in text and "(default: 20000)" in text
    assert "(default: None)" not in text and "(default: False)" not in text
