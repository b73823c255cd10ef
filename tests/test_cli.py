"""The `paylens` command mirrors the library: every bulk action, `--sandbox` wherever data is
read or written, help with defaults, one line for every error. Run in process (`main`): these
tests are about the commands, not about processes."""

from __future__ import annotations

import argparse
import io
import logging
from contextlib import redirect_stdout
from pathlib import Path
from unittest import mock

import pytest

from paylens import Client, Sandbox, Warehouse, ops
from paylens.cli import build_parser, main

from ._helpers import run_cli
from .test_wallet_flows import login, plain

SIZE = "1500"


@pytest.fixture(scope="module")
def synced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("cli") / "cli.duckdb"
    done = run_cli("sync", "--sandbox", "--transactions", SIZE, "--db", str(db), "--quiet")
    assert done.returncode == 0, done.stderr
    assert "SANDBOX DATA" in done.stdout
    return db


def test_every_bulk_action_runs_against_the_embedded_sandbox(synced: Path) -> None:
    approve = run_cli(
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
    confirm = run_cli(
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
    dry = run_cli("cancel", "--db", str(synced), "--where", "status = 'PENDING'", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would_send" in dry.stdout
    assert synced.read_bytes() == before


def test_bulk_caps_and_rate_limit_mean_what_apply_plan_makes_of_them(synced: Path) -> None:
    """`--max-items`, `--max-total-minor CODE=MINOR` and `--rate-limit` are `apply_plan`'s
    `max_items`, `max_total_minor` and `rate_limit`: the items beyond a cap are
    `skipped_over_cap`, as the library says of the same plan (a dry run applies the caps too)."""
    where = "status IN ('PENDING', 'PROCESSING', 'CREATED')"
    with Warehouse(synced, read_only=True) as wh:
        plan = ops.plan_cancel(wh, where)
        usd = [int(a) for a in plan.eligible.query("currency == 'USD'")["amount_minor"]]
        cap = sum(usd[:2])
        expected = plan.apply(
            None,  # type: ignore[arg-type]  # a dry run sends nothing
            dry_run=True,
            progress=False,
            max_items=len(plan.eligible) - 1,
            max_total_minor={"usd": cap},
        )
    over = expected["outcome"].value_counts()["skipped_over_cap"]
    assert len(usd) > 2 and over >= 2, expected  # the currency's cap and max_items both bite
    real_apply = ops.Plan.apply
    with mock.patch.object(ops.Plan, "apply", autospec=True, side_effect=real_apply) as spied:
        done = run_cli(
            "cancel", "--db", str(synced), "--where", where, "--dry-run",
            "--max-items", str(len(plan.eligible) - 1), "--max-total-minor", f"usd={cap}",
            "--rate-limit", "2.5",
        )  # fmt: skip
    assert done.returncode == 1, done  # not every item would end as planned: some are capped
    counts = ", ".join(f"{k} {v:,}" for k, v in expected["outcome"].value_counts().items())
    assert done.stdout.strip().splitlines()[-1] == counts
    assert f"skipped_over_cap {over:,}" in counts
    kwargs = spied.call_args.kwargs
    assert (kwargs["max_items"], kwargs["max_total_minor"], kwargs["rate_limit"]) == (
        len(plan.eligible) - 1,
        {"usd": cap},
        2.5,
    )


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("--max-items", "-1", "argument --max-items: '-1' is not a whole number 0 or more"),
        ("--max-total-minor", "USD", "argument --max-total-minor: 'USD' is not CODE=MINOR_UNITS"),
        ("--max-total-minor", "USD=1.5", "argument --max-total-minor: '1.5' is not a whole"),
        ("--rate-limit", "0", "argument --rate-limit: '0' is not a finite number more than 0"),
    ],
)
def test_a_bulk_cap_no_apply_can_use_is_a_usage_error(
    synced: Path, option: str, value: str, said: str
) -> None:
    done = run_cli("cancel", "--db", str(synced), "--where", "TRUE", "--dry-run", option, value)
    assert done.returncode == 2 and done.stderr.startswith(f"paylens cancel: {said}"), done


def test_a_currency_capped_twice_is_refused_before_anything_is_sent(synced: Path) -> None:
    done = run_cli(
        "cancel", "--db", str(synced), "--where", "TRUE", "--dry-run",
        "--max-total-minor", "USD=5", "--max-total-minor", "usd=7",
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == "", done
    assert done.stderr == "paylens cancel: max_total_minor: USD is capped twice\n"


def test_missing_configuration_says_what_to_do_in_one_line(synced: Path) -> None:
    done = run_cli("cancel", "--db", str(synced), "--where", "status = 'PENDING'", "--apply")
    assert done.returncode == 2
    err = done.stderr.strip()
    assert err.count("\n") == 0 and "PAYLENS_BASE_URL" in err and "--sandbox" in err
    assert "paylens.Sandbox()" not in err  # a shell's answer, not Python code


@pytest.mark.parametrize(
    ("args", "said"),
    [
        # a column that is not there: the closest names, then every column
        (
            ["cancel", "--where", "stauts = 'PENDING'", "--dry-run"],
            "no column 'stauts' (did you mean status?); the columns: id, type, status, ",
        ),
        (
            ["cancel", "--where", "rail = 'ACH'", "--dry-run"],
            "no column 'rail' (did you mean payment_rail?); the columns: id, ",
        ),
        (["approve", "--where", "status = ", "--dry-run"], "is not a SQL condition"),
    ],
)
def test_a_filter_mistake_is_one_line_naming_what_is_there(
    synced: Path, args: list[str], said: str
) -> None:
    done = run_cli(*args[:1], "--db", str(synced), *args[1:])
    assert done.returncode == 2, done
    assert done.stderr.strip().count("\n") == 0 and done.stderr.startswith(f"paylens {args[0]}: ")
    assert said in done.stderr
    assert "Traceback" not in done.stderr + done.stdout


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["sync", "--resources", "transaction"],
            "paylens sync: argument --resources: invalid choice: 'transaction' (choose from",
        ),
        (
            ["sync", "--since", "2025-13-01"],
            "paylens sync: argument --since: '2025-13-01' is not a date (YYYY-MM-DD) or an ISO",
        ),
        (
            ["report", "--start", "2025-13-01"],
            "paylens report: argument --start: '2025-13-01' is not a date (YYYY-MM-DD) or an ISO",
        ),
        (["report", "--end", "soon"], "paylens report: argument --end: 'soon' is not a date"),
        (["sandbox"], "paylens sandbox: the following arguments are required: {serve,advance}"),
        ([], "paylens: the following arguments are required: COMMAND"),
    ],
)
def test_a_usage_mistake_is_one_line_naming_the_option(
    tmp_path: Path, args: list[str], said: str
) -> None:
    db = ["--db", str(tmp_path / "w.duckdb")] if args and args[0] in ("sync", "report") else []
    done = run_cli(*args, *db)
    assert done.returncode == 2, done
    assert done.stderr.startswith(said), done.stderr
    assert done.stderr.count("\n") == 1 and "usage:" not in done.stderr
    assert done.stderr.rstrip().endswith("--help)")  # where the whole usage is
    assert list(tmp_path.iterdir()) == []  # refused before any file is touched


def test_a_date_option_without_a_zone_is_utc_as_the_report_reads_its_bounds() -> None:
    from paylens.cli._parser import _instant

    assert _instant("2025-09-01T06:00:00") == "2025-09-01T06:00:00+00:00"
    assert _instant("2025-09-01T06:00:00Z") == "2025-09-01T06:00:00+00:00"
    assert _instant("2025-09-01T06:00:00+02:00") == "2025-09-01T06:00:00+02:00"
    assert _instant("2025-09-01") == "2025-09-01"


@pytest.mark.parametrize(
    "args",
    [
        ["cancel", "--where", "TRUE", "--dry-run"],
        ["revoke-sessions", "--where", "TRUE", "--dry-run"],
        ["report"],
    ],
)
def test_no_warehouse_is_said_the_same_way_by_every_command(
    tmp_path: Path, args: list[str]
) -> None:
    missing = tmp_path / "typo.duckdb"
    done = run_cli(
        *args, "--db", str(missing), *(["--out", str(tmp_path)] if "report" in args else [])
    )
    assert done.returncode == 2, done
    assert done.stderr == (
        f"paylens {args[0]}: no warehouse at {missing}: run `paylens sync --db {missing}` first\n"
    )
    assert done.stdout == "" and list(tmp_path.iterdir()) == []


def test_an_error_in_a_folder_that_is_no_warehouse_is_one_line(tmp_path: Path) -> None:
    not_a_db = tmp_path / "notes.duckdb"
    not_a_db.write_text("not a database\n")
    done = run_cli("cancel", "--db", str(not_a_db), "--where", "TRUE", "--dry-run")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "Traceback" not in done.stderr
    assert "is not a DuckDB database" in done.stderr and not_a_db.read_text() == "not a database\n"
    under_a_file = str(not_a_db / "w.duckdb")
    done = run_cli("sync", "--sandbox", "--transactions", "300", "--db", under_a_file, "--quiet")
    assert done.returncode == 2 and done.stderr.startswith("paylens sync: ")
    assert f"the folder {str(not_a_db)!r} is a file, not a folder" in done.stderr
    assert done.stderr.strip().count("\n") == 0 and "Traceback" not in done.stderr


def _parsers(
    parser: argparse.ArgumentParser, path: str = "paylens"
) -> dict[str, argparse.ArgumentParser]:
    found = {path: parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found |= _parsers(child, f"{path} {name}")
    return found


def test_every_option_has_help_and_shows_its_default() -> None:
    flags = (argparse._StoreTrueAction, argparse._HelpAction, argparse._VersionAction)
    for path, parser in _parsers(build_parser()).items():
        formatter = parser._get_formatter()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction) or not action.option_strings:
                continue
            text = formatter._get_help_string(action) or ""
            assert action.help, f"{path} {action.option_strings[0]} has no help"
            if isinstance(action, flags) or action.required:
                continue
            assert "(default:" in text, f"{path} {action.option_strings[0]}: {text!r}"
            assert "(default: None)" not in formatter._expand_help(action)


def test_sandbox_wherever_a_command_reads_or_writes_data() -> None:
    parsers = _parsers(build_parser())
    groups = ("paylens sandbox", "paylens webhooks")  # groups of subcommands
    commands = [p for p in parsers if p.count(" ") == 1 and p not in groups]
    assert {"paylens revoke-sessions", "paylens report", "paylens cancel"} <= set(commands)
    for path in commands:
        options = {o for a in parsers[path]._actions for o in a.option_strings}
        if path == "paylens demo":  # the demo is the embedded sandbox, always
            assert "--transactions" in options
            continue
        assert {"--sandbox", "--seed", "--transactions"} <= options, path


def _help(*command: str) -> str:
    """What `paylens COMMAND --help` prints, on one line (argparse wraps the epilog)."""
    with pytest.raises(SystemExit), redirect_stdout(io.StringIO()) as out:
        main([*command, "--help"])
    return " ".join(out.getvalue().split())


def test_every_command_says_its_exit_statuses_under_help() -> None:
    commands: list[tuple[str, ...]] = []
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                groups = [a for a in sub._actions if isinstance(a, argparse._SubParsersAction)]
                if groups:
                    commands += [(name, n) for n in groups[0].choices]
                else:
                    commands.append((name,))
    assert ("sandbox", "serve") in commands and ("sync",) in commands and len(commands) >= 11
    for command in commands:
        text = _help(*command)
        assert "Exit status: 0 " in text and "; 2 the command cannot run as typed" in text, command


def test_help_shows_defaults() -> None:
    with pytest.raises(SystemExit), redirect_stdout(io.StringIO()) as out:
        main(["sync", "--help"])
    text = out.getvalue()
    assert "(default: data/paylens.duckdb)" in text and "(default: 10000)" in text
    assert "(default: None)" not in text and "(default: False)" not in text


@pytest.mark.http
def test_max_retries_reaches_the_client(tmp_path: Path) -> None:
    sandbox = Sandbox(seed=3, transactions=300)
    sync = ["sync", "--db", str(tmp_path / "r.duckdb"), "--quiet", "--resources", "transactions"]
    sent: dict[int, int] = {}
    with sandbox.serve() as server:
        env = sandbox.env(server)
        for retries in (0, 2):
            sandbox.requests.reset()
            # Retry-After: 0, no backoff to wait out (a gateway's HTML 503 would carry none)
            sandbox.faults.inject(503, "SERVICE_UNAVAILABLE", count=50, retry_after=0)
            failed = run_cli(*sync, "--max-retries", str(retries), env=env)
            sandbox.faults.clear()
            assert failed.returncode == 1 and failed.stderr.startswith("paylens sync: failed: 503")
            assert ("3 attempts" in failed.stderr) == (retries == 2), failed.stderr
            sent[retries] = sandbox.requests.count("GET")
        assert run_cli(*sync, "--max-retries", "0", env=env).returncode == 0  # faults cleared
    # each of the sync's first reads was sent once, then once and twice more
    assert sent[0] > 0 and sent[2] == 3 * sent[0]
    # a negative count is refused in one line naming it, before anything is opened
    fresh = ["sync", "--sandbox", "--db", str(tmp_path / "r2.duckdb"), "--quiet"]
    bad = run_cli(*fresh, "--max-retries", "-1")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    assert "max_retries: must be a whole number of retries, 0 or more; got -1" in bad.stderr
    assert not (tmp_path / "r2.duckdb").exists()


def test_verbosity_is_info_then_http(
    synced: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "v.duckdb"
    sync = ["sync", "--sandbox", "--transactions", "300", "--db", str(db), "--quiet"]
    assert run_cli("-v", *sync).returncode == 0
    info = [r for r in caplog.records if r.name.startswith("paylens")]
    assert any(r.levelno == logging.INFO for r in info)
    assert not any(r.levelno == logging.DEBUG for r in info)
    caplog.clear()
    assert run_cli("-vv", *sync).returncode == 0
    http = [r for r in caplog.records if r.name.startswith("paylens.client")]
    assert any(r.levelno == logging.DEBUG and " -> 200 " in r.getMessage() for r in http)


def test_revoke_sessions_dry_run_needs_no_key_or_credentials(synced: Path, tmp_path: Path) -> None:
    db = tmp_path / "wallets.duckdb"
    sandbox = Sandbox(seed=2, transactions=500)
    with Warehouse(db) as wh:
        found = wh.sync_wallets(sandbox.client())
        active = len(wh.sessions())
    assert found["sessions"] == active > 0
    dry = run_cli("revoke-sessions", "--db", str(db), "--where", "TRUE", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would_send" in dry.stdout and "DELETE /auth/sessions/" in dry.stdout
    assert dry.stdout.strip().splitlines()[-1] == f"would_send {active:,}"
    keyless = run_cli("revoke-sessions", "--db", str(db), "--where", "TRUE", "--apply", "--sandbox")
    assert keyless.returncode == 2 and "PAYLENS_SESSION_KEY is not set" in keyless.stderr
    assert keyless.stderr.strip().count("\n") == 0


@pytest.mark.http
def test_revoke_sessions_applies_signed_revokes(tmp_path: Path) -> None:
    sandbox = Sandbox(seed=2, transactions=500)
    db = tmp_path / "wallets.duckdb"
    with sandbox.serve() as server:
        env = sandbox.env(server)
        with Client(env["PAYLENS_BASE_URL"], sandbox.client_id, sandbox.client_secret) as client:
            account = plain(client)
            key, mine = login(client, account.id)
            with Warehouse(db) as wh:
                wh.sync_wallets(client)
            where = f"account_id = '{account.id}' AND id <> '{mine.id}'"
            # the revoke is answered PROCESSING once and sent again: one 0.5 s pause, where
            # the seed's draw gave two (0.5 s, then 1 s; the doubling is test_wallet_protocol's)
            sandbox.world.wallets.processing_rate = 0.0
            sandbox.world.wallets.force_processing(account.id, 1)
            sandbox.requests.reset()
            done = run_cli(
                "revoke-sessions",
                "--db",
                str(db),
                "--where",
                where,
                "--apply",
                "--yes",
                env={**env, "PAYLENS_SESSION_KEY": key.export_private_hex()},
            )
            assert done.returncode == 0, done.stderr + done.stdout
            revoked = done.stdout.strip().splitlines()[-1]
            assert revoked.startswith("revoked ") and int(revoked.split()[1]) > 0
            # challenged (202), answered PROCESSING (200), sent again and done (204)
            statuses = [s for m, _, s in sandbox.requests.entries if m == "DELETE"]
            assert statuses == [202, 200, 204]
            assert {s.id for s in client.auth.sessions.list(account.id)} == {mine.id}
    with Warehouse(db, read_only=True) as wh:  # the revoked ones are marked ended
        sessions = wh.sessions()
    assert set(sessions[sessions["account_id"] == account.id]["id"]) == {mine.id}


def test_report_on_the_embedded_sandbox(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`paylens report --sandbox` hands render_report a warehouse synced from the sandbox (the
    notebook run itself is tested in test_report.py)."""
    import paylens.report

    seen: dict[str, object] = {}

    def render(db: Path, **options: object) -> Path:
        with Warehouse(db, read_only=True) as wh:
            seen["rows"] = int(wh.sql("SELECT count(*) AS n FROM transactions")["n"].iloc[0])
            seen["sandbox"] = wh.is_sandbox
        seen.update(options)
        return tmp_path / "page.html"

    monkeypatch.setattr(paylens.report, "render_report", render)
    done = run_cli(
        "report", "--sandbox", "--transactions", "300", "--out", str(tmp_path), "--quiet"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(tmp_path / "page.html")
    assert seen["sandbox"] is True and seen["rows"] == 300
    assert seen["progress"] is False and seen["out"] == str(tmp_path)


@pytest.mark.parametrize(
    ("option", "value", "named"),
    [
        ("--concurrency", "0", "concurrency: must be a whole number of slices at once"),
        ("--verify-syncs", "0", "verify_syncs: must be a whole number of syncs"),
        (
            "--verify-syncs-with-events",
            "0",
            "verify_syncs_with_events: must be a whole number of syncs",
        ),
        ("--rate-limit", "-3", "rate_limit: must be more than 0 requests per second"),
    ],
)
def test_a_sync_option_out_of_range_is_one_line_and_touches_no_file(
    tmp_path: Path, option: str, value: str, named: str
) -> None:
    db = tmp_path / "w.duckdb"
    done = run_cli("sync", "--sandbox", "--transactions", "300", "--db", str(db), option, value)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert named in done.stderr
    assert list(tmp_path.iterdir()) == []  # no lock, no staged copy, no file


def test_sync_options_refuse_what_no_sync_can_run() -> None:
    from paylens import InvalidArgumentError
    from paylens.warehouse import SyncOptions

    for bad in ({"concurrency": 0}, {"concurrency": True}, {"verify_syncs": 0}, {"rate_limit": 0}):
        with pytest.raises(InvalidArgumentError, match=next(iter(bad))):
            SyncOptions(**bad)  # type: ignore[arg-type]


def test_a_report_that_cannot_run_is_refused_before_its_kernel_starts(
    synced: Path, tmp_path: Path
) -> None:
    """What the notebook would find only after its kernel started (seconds later, with a
    partial HTML report and its path on stdout) is refused at once, in one line, exit 2."""
    empty = tmp_path / "empty.duckdb"
    empty.touch()
    text = tmp_path / "notes.duckdb"
    text.write_text("not a database\n")
    fresh = tmp_path / "fresh.duckdb"
    Warehouse(fresh).close()
    out = tmp_path / "reports"
    cases = [
        (["--db", str(empty)], "is an empty file, not a paylens warehouse"),
        (["--db", str(text)], "is not a DuckDB database"),
        (
            ["--db", str(fresh)],
            f"no sync has succeeded into {fresh} yet: run `paylens sync --db {fresh}` first",
        ),
        (
            ["--db", str(synced), "--currency", "xyz"],
            "currency: no transaction in cli.duckdb is in XYZ (its currencies: ",
        ),
    ]
    for args, said in cases:
        done = run_cli("report", *args, "--out", str(out), "--quiet")
        assert done.returncode == 2 and said in done.stderr, (args, done)
        assert done.stderr.count("\n") == 1 and done.stdout == ""
        assert not out.exists()  # no notebook run, no partial report
    with Warehouse(synced, read_only=True) as wh:
        currencies = sorted(
            wh.sql("SELECT DISTINCT currency FROM transactions")["currency"].dropna()
        )
    done = run_cli("report", "--db", str(synced), "--currency", "xyz", "--out", str(out))
    assert done.stderr.rstrip().endswith(f"(its currencies: {', '.join(currencies)})")


def test_an_apply_without_a_terminal_to_ask_sends_nothing_and_says_to_pass_yes(
    synced: Path,
) -> None:
    before = synced.read_bytes()
    done = run_cli(
        "cancel", "--sandbox", "--transactions", SIZE, "--db", str(synced),
        "--where", "status = 'PENDING'", "--apply",
    )  # fmt: skip
    assert done.returncode == 1, done
    assert "no answer (pass --yes to apply without being asked)" in done.stdout
    assert done.stdout.rstrip().endswith("not applied")
    assert synced.read_bytes() == before  # no journal entry, nothing sent


def test_an_apply_whose_other_items_the_service_refused_for_good_exits_3(tmp_path: Path) -> None:
    """Items past the bank's window are refused for good (`not_cancellable`): the service's
    decision, not a failure; exit 3 tells it from a failure (1) and from all done (0)."""
    db = tmp_path / "partial.duckdb"
    assert (
        run_cli("sync", "--sandbox", "--transactions", SIZE, "--db", str(db), "--quiet").returncode
        == 0
    )
    done = run_cli(
        "cancel", "--sandbox", "--transactions", SIZE, "--db", str(db),
        "--where", "status = 'PROCESSING' AND payment_rail IN ('ACH', 'WIRE')", "--apply", "--yes",
    )  # fmt: skip
    counts = dict(
        (outcome, int(n.replace(",", "")))
        for outcome, n in (
            part.split() for part in done.stdout.strip().splitlines()[-1].split(", ")
        )
    )
    assert counts.get("cancelled", 0) > 0 and counts.get("not_cancellable", 0) > 0, counts
    assert done.returncode == 3, done
    refused = counts["not_cancellable"]
    assert set(counts) == {"cancelled", "not_cancellable"}, counts
    assert done.stderr == (
        f"paylens cancel: done; {refused:,} refused for good by the service (its decision, e.g."
        " past the bank's window; see the outcomes above); exit 3\n"
    )
    for command in ("cancel", "approve", "reject", "confirm-receipt"):
        assert "3 done, the others refused for good by the service" in _help(command)


def test_revoke_sessions_asks_for_the_inventory_that_sync_wallets_takes(
    synced: Path, tmp_path: Path
) -> None:
    none = run_cli("revoke-sessions", "--db", str(synced), "--where", "TRUE", "--dry-run")
    assert none.returncode == 1 and none.stderr.count("\n") == 1
    assert f"{synced} holds no wallet inventory yet: take one first (`paylens sync-wallets" in (
        none.stderr
    )
    db = tmp_path / "wallets.duckdb"
    taken = run_cli(
        "sync-wallets", "--sandbox", "--seed", "2", "--transactions", "500", "--db", str(db)
    )
    assert taken.returncode == 0, taken.stderr
    with Warehouse(db, read_only=True) as wh:
        accounts, credentials, sessions = (
            wh.sql(f"SELECT count(*) AS n FROM {t}")["n"].iloc[0]
            for t in ("wallet_inventory", "wallet_credentials", "wallet_sessions")
        )
        active = len(wh.sessions())
    assert taken.stdout == (
        f"wallet inventory of {db}: {accounts:,} accounts, {credentials:,} credentials, "
        f"{sessions:,} sessions\n"
    )
    dry = run_cli("revoke-sessions", "--db", str(db), "--where", "TRUE", "--dry-run")
    assert dry.returncode == 0 and dry.stdout.strip().splitlines()[-1] == f"would_send {active:,}"


def test_an_item_in_doubt_is_sent_again_only_with_resend_unknown(tmp_path: Path) -> None:
    """A cancel whose run died after sending it is in doubt: `paylens cancel --apply` reads
    the record, sees nothing yet and does not send it (exit 1, `skipped_unknown`);
    `--resend-unknown` sends it."""
    db = tmp_path / "doubt.duckdb"
    assert run_cli("sync", "--sandbox", "--transactions", SIZE, "--db", str(db)).returncode == 0
    with Warehouse(db) as wh:
        plan = ops.plan_cancel(wh, "status = 'PROCESSING' AND payment_rail IN ('ACH', 'WIRE')")
        item = str(plan.eligible["id"].iloc[0])
        claim = wh.journal_claim(
            fingerprint="an earlier run",
            action="cancel",
            item_id=item,
            success="cancelled",
            token="a run that died",
            live=set(),
        )
        assert claim.entry_id is not None
        wh.journal_requested(claim.entry_id)
    args = ["cancel", "--sandbox", "--transactions", SIZE, "--db", str(db), "--where"]
    held = run_cli(*args, f"id = '{item}'", "--apply", "--yes")
    assert held.returncode == 1 and held.stdout.splitlines()[-1] == "skipped_unknown 1"
    sent = run_cli(*args, f"id = '{item}'", "--apply", "--yes", "--resend-unknown")
    with Warehouse(db, read_only=True) as wh:
        journal = list(wh.journal().sort_values("entry_id")["outcome"])
    outcome = sent.stdout.splitlines()[-1].split()[0]
    assert outcome in ("cancelled", "not_cancellable"), sent.stdout
    assert journal == ["superseded", "skipped_unknown", outcome]


def test_cli_sync_since_stores_only_records_created_from_that_date(tmp_path: Path) -> None:
    """README: `paylens sync --db ... [--since 2025-01-01]`; help: "only records created
    from this date (YYYY-MM-DD) ... (UTC unless it names its zone)"."""
    db = tmp_path / "w.duckdb"
    done = run_cli(
        "sync", "--db", str(db), "--sandbox", "--transactions", "500", "--since", "2025-10-01",
        "--quiet",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    truth = {
        t["id"]
        for t in Sandbox(seed=0, transactions=500).world.all_transactions()
        if t["createdAt"] >= "2025-10-01"
    }
    assert 0 < len(truth) < 500
    with Warehouse(db, read_only=True) as wh:
        assert set(wh.sql("SELECT id FROM transactions")["id"]) == truth


def test_cli_sync_resources_syncs_only_those_it_names(tmp_path: Path) -> None:
    """README: "`--resources` syncs only those it names, and re-reads whole the
    customers, cards and accounts it names"."""
    db = tmp_path / "w.duckdb"
    sandbox = ["--db", str(db), "--sandbox", "--transactions", "500", "--quiet"]
    first = run_cli("sync", *sandbox, "--resources", "transactions")
    assert first.returncode == 0, first.stderr
    truth = Sandbox(seed=0, transactions=500)
    with truth.client() as client:
        cards = {c.id for c in client.cards.list()}
    with Warehouse(db, read_only=True) as wh:
        assert len(wh.transactions()) == 500
        for table in ("cards", "customers", "internal_accounts", "external_accounts"):
            assert wh.sql(f"SELECT count(*) AS n FROM {table}")["n"].iloc[0] == 0, table
    second = run_cli("sync", *sandbox, "--resources", "cards")
    assert second.returncode == 0, second.stderr
    with Warehouse(db, read_only=True) as wh:
        assert set(wh.sql("SELECT id FROM cards")["id"]) == cards
        assert wh.sql("SELECT count(*) AS n FROM customers")["n"].iloc[0] == 0
        reads = wh.sql("SELECT resource FROM resource_reads")
        assert list(reads["resource"]) == ["cards"]


def test_sync_wallets_accounts_takes_the_inventory_of_those_accounts_only(
    tmp_path: Path,
) -> None:
    """`paylens sync-wallets --help`: `--accounts`: "these wallet accounts only (default: every
    embedded wallet account)"."""

    with Sandbox(seed=0, transactions=500).client() as client:
        wallets = sorted(
            a.id for a in client.internal_accounts.list() if a.type == "EMBEDDED_WALLET"
        )
    assert len(wallets) >= 2
    db = tmp_path / "w.duckdb"
    sandbox = ["--db", str(db), "--sandbox", "--transactions", "500"]
    assert run_cli("sync", *sandbox, "--quiet").returncode == 0
    one = run_cli("sync-wallets", *sandbox, "--accounts", wallets[0])
    assert one.returncode == 0, one.stderr
    with Warehouse(db, read_only=True) as wh:
        held = set(wh.sql("SELECT DISTINCT account_id FROM wallet_credentials")["account_id"])
    assert held == {wallets[0]}
    every = run_cli("sync-wallets", *sandbox)
    assert every.returncode == 0, every.stderr
    with Warehouse(db, read_only=True) as wh:
        held = set(wh.sql("SELECT DISTINCT account_id FROM wallet_credentials")["account_id"])
    assert held == set(wallets)


@pytest.mark.parametrize(
    "args",
    [
        ["sync", "--sandbox"],
        ["cancel", "--where", "TRUE", "--dry-run"],
        ["sync-wallets", "--sandbox"],
        ["report"],
        ["demo"],
    ],
)
@pytest.mark.parametrize("name", ["", "  "])
def test_an_empty_warehouse_name_is_a_usage_error_that_makes_no_file(
    args: list[str], name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--db ""` named the current folder: a sync made `<folder>.lock` beside it."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    done = run_cli(*args, "--db", name)
    assert done.returncode == 2, done
    assert done.stderr.startswith(f"paylens {args[0]}: argument --db: ") and "empty" in done.stderr
    assert done.stderr.count("\n") == 1
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["work"]


@pytest.mark.parametrize(
    "args",
    [
        ["sync", "--sandbox", "--quiet"],
        ["cancel", "--where", "TRUE", "--dry-run"],
        ["sync-wallets", "--sandbox"],
        ["report"],
    ],
)
def test_a_db_in_a_folder_that_does_not_exist_is_a_usage_error_that_makes_nothing(
    args: list[str], tmp_path: Path
) -> None:
    """`--db dta/paylens.duckdb` (a typo) made the folder and started a full sync there."""
    db = tmp_path / "dta" / "paylens.duckdb"
    done = run_cli(*args, "--db", str(db))
    assert done.returncode == 2, done
    assert done.stderr == (
        f"paylens {args[0]}: error: argument --db: {str(db)!r}: the folder "
        f"{str(db.parent)!r} does not exist (a mistyped path? create the folder first if it is"
        f" meant) (see paylens {args[0]} --help)\n"
    ).replace(": error:", ":")
    assert list(tmp_path.iterdir()) == []


def test_output_into_a_pipe_closed_early_ends_quietly(synced: Path) -> None:
    """`paylens cancel --dry-run … | head`: the reader is gone before the plan is printed (its
    end of the pipe closed before the process starts): no BrokenPipeError, exit 0."""
    import os
    import subprocess
    import sys

    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "paylens.cli", "cancel", "--db", str(synced),
             "--where", "TRUE", "--dry-run"],
            stdout=write, stderr=subprocess.PIPE, text=True, timeout=120, check=False,
        )  # fmt: skip
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (0, "")


def _served_env(seed: str) -> dict[str, str]:
    """The PAYLENS_* lines a `paylens sandbox serve` process prints, then the process stopped."""
    import subprocess
    import sys

    served = subprocess.Popen(
        [sys.executable, "-m", "paylens.cli", "sandbox", "serve", "--port", "0",
         "--seed", seed, "--transactions", "50"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        assert served.stdout is not None
        lines = [served.stdout.readline().strip() for _ in range(3)]
    finally:
        served.terminate()
        served.wait(timeout=30)
    return dict(line.split("=", 1) for line in lines)


@pytest.mark.http
def test_sandbox_serve_keeps_its_secret_across_starts_for_one_seed() -> None:
    """Saved exports of a served sandbox's variables stay valid after a restart."""
    first, again, other = _served_env("4"), _served_env("4"), _served_env("5")
    assert first["PAYLENS_CLIENT_SECRET"].startswith("sk_sandbox_")
    assert again["PAYLENS_CLIENT_SECRET"] == first["PAYLENS_CLIENT_SECRET"]
    assert other["PAYLENS_CLIENT_SECRET"] != first["PAYLENS_CLIENT_SECRET"]
    assert again["PAYLENS_CLIENT_ID"] == first["PAYLENS_CLIENT_ID"]
