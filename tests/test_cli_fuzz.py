"""The command line's promises, driven adversarially: argv drawn from the real parser
(`build_parser()`, so a new option is drawn as soon as it exists), with valid and hostile values,
run in process (`main`) in a temporary folder holding a small synced warehouse and files that
are not warehouses.

Whatever the command line, the command exits 0, 1 or 2 and nothing else escapes; a failure is one
line on stderr naming the command and never a traceback; a warehouse is unchanged by a command that
failed, was a dry run or only read; no bulk action sends a state-changing request without
`--yes`; the client secret is never shown.

The default run draws a few derandomized examples; `pytest -m slow tests/test_cli_fuzz.py` draws
more, `CLI_FUZZ_EXAMPLES` (how many per property) and `CLI_FUZZ_SEED` (a seed, else random)
choose how many and which.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import logging
import os
import shutil
import tempfile
import unittest.mock as mock
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, example, given, seed, settings
from hypothesis import strategies as st

from paylens.cli import build_parser, main

#: The secret every sandbox the commands build is given (its real one is random), and the one
#: the PAYLENS_* property exports: neither may ever be shown.
SECRET = "sk_sandbox_FUZZ-never-shown-7f3a9c"
ENV_SECRET = "sk_live_FUZZ-env-secret-1b2c3d"
SESSION_KEY = "ab" * 32  # a private key's hex (not necessarily a valid key)
UNROUTABLE = "http://127.0.0.1:9/2025-10-13"  # refused at once, nothing waits

#: The bulk actions (each acts on money or sessions only with --apply and --yes).
BULK = ("cancel", "approve", "reject", "confirm-receipt", "revoke-sessions")
#: What the journal records when a request was sent and acted on.
ACTED = ("cancelled", "approved", "rejected", "confirmed", "revoked")
TRANSACTIONS = 300

# -- the folder each example runs in ----------------------------------------------------------


@pytest.fixture(scope="module")
def warehouse_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A warehouse synced from a small sandbox, with its wallet inventory: copied per example."""
    from paylens import Sandbox, Warehouse
    from paylens.warehouse import sync_file

    db = tmp_path_factory.mktemp("fuzz-base") / "w.duckdb"
    sandbox = Sandbox(seed=5, transactions=TRANSACTIONS)
    with sandbox.client() as client:
        sync_file(db, client, progress=False)
        with Warehouse(db) as wh:
            wh.sync_wallets(client)
    return db


WAREHOUSE = "data/paylens.duckdb"  # the commands' default path, relative to the example's cwd
#: Files that are not warehouses, each of which must be left byte for byte as it was.
NOT_WAREHOUSES = ("notes.duckdb", "empty.duckdb", "foreign.duckdb", "rates.csv")


def _lay_out(folder: Path, base: Path) -> None:
    (folder / "data").mkdir()
    shutil.copyfile(base, folder / WAREHOUSE)
    (folder / "data" / "link.duckdb").symlink_to(folder / WAREHOUSE)
    (folder / "notes.duckdb").write_text("not a database\n")
    (folder / "empty.duckdb").touch()
    with contextlib.closing(duckdb.connect(str(folder / "foreign.duckdb"))) as con:
        con.execute("CREATE TABLE transactions (id VARCHAR, amount INTEGER)")
        con.execute("INSERT INTO transactions VALUES ('t1', 5)")
    (folder / "rates.csv").write_text("date,sent_currency,received_currency,mid_rate\nx,y,z,w\n")
    (folder / "a_dir").mkdir()


@dataclass
class Rows:
    """A warehouse's rows: each table's count, and a checksum of the transactions."""

    counts: dict[str, int]
    transactions: str


def rows_of(path: Path) -> Rows:
    with contextlib.closing(duckdb.connect(str(path), read_only=True)) as con:
        tables = sorted(r[0] for r in con.execute("SHOW TABLES").fetchall())
        counts = {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}
        text = con.execute(
            "SELECT string_agg(CAST(t AS VARCHAR), '|' ORDER BY id) FROM transactions t"
        ).fetchone()[0]
    return Rows(counts, hashlib.sha256((text or "").encode()).hexdigest())


def opens_as_warehouse(path: Path) -> None:
    from paylens import Warehouse

    with Warehouse(path, read_only=True) as wh:
        assert wh.source is not None


# -- what the commands are run with ------------------------------------------------------------


@dataclass
class Seen:
    """The sandboxes the commands built (to read their request logs)."""

    sandboxes: list[Any] = field(default_factory=list)


@contextlib.contextmanager
def instrumented() -> Iterator[Seen]:
    """Every sandbox built gets `SECRET` and is recorded; a served sandbox stops at once instead
    of serving until interrupted; the report notebook is written unexecuted (its kernel run is
    test_report's; what is refused before it starts is what is fuzzed here)."""
    import papermill

    import paylens.sandbox
    from paylens.sandbox.wire.server import SandboxServer

    seen = Seen()
    real = paylens.sandbox.Sandbox

    class Recorded(real):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("client_secret", SECRET)
            super().__init__(*args, **kwargs)
            seen.sandboxes.append(self)

    def unexecuted(source: str, output: str, **_: Any) -> None:
        shutil.copyfile(source, output)

    with (
        mock.patch.object(paylens.sandbox, "Sandbox", Recorded),
        mock.patch.object(SandboxServer, "wait", SandboxServer.stop),
        mock.patch.object(papermill, "execute_notebook", unexecuted),
    ):
        yield seen


@dataclass
class Run:
    argv: list[str]
    code: int
    stdout: str
    stderr: str
    escaped: BaseException | None


def run_main(argv: list[str], env: dict[str, str]) -> Run:
    """`main(argv)` as `tests._helpers.run_cli` runs it, but any exception that escapes `main`
    (other than argparse's SystemExit) is kept, not raised."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PAYLENS_")}
    out, err = io.StringIO(), io.StringIO()
    loggers = [logging.getLogger(name) for name in ("paylens", "paylens.client")]
    levels = [logger.level for logger in loggers]
    escaped: BaseException | None = None
    code = -1
    try:
        with (
            mock.patch.dict(os.environ, {**clean, **env}, clear=True),
            mock.patch("sys.stdin", io.StringIO("")),
            redirect_stdout(out),
            redirect_stderr(err),
        ):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except BaseException as exc:
                escaped = exc
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
    return Run(argv, code, out.getvalue(), err.getvalue(), escaped)


# -- argv drawn from the parser ----------------------------------------------------------------

HOSTILE = st.sampled_from(
    [
        "",
        " ",
        "\t\n",
        "nan",
        "NaN",
        "inf",
        "-inf",
        "-1",
        "0",
        "1e309",
        "9" * 40,
        "-" + "9" * 40,
        "1.5",
        "0x10",
        "1_000",
        "٣",  # an Arabic-Indic three: int() reads it
        "é",
        "日本語",
        "\udcff",  # a lone surrogate: an argv byte that is not UTF-8
        "a\x00b",
        "x" * 5000,
        "--",
        "-",
        "--where",
        "'; DROP TABLE transactions; --",
        "\u202e",
        "None",
        "true",
    ]
)
SMALL_INTS = st.sampled_from(["0", "1", "2", "3", "4", "16", "1025", "100000000"])
SIZES = st.sampled_from(["0", "1", "50", "300"])  # sandbox sizes (generation is the slow part)
HOSTILE_SIZES = st.sampled_from(["-1", "-300", "abc", "", "1e3", "9" * 25, "nan"])
FLOATS = st.sampled_from(
    ["0", "0.0", "0.5", "1", "-1", "-0.0", "nan", "inf", "-inf", "1e308", "1e-320", "abc", ""]
)
DATES = st.sampled_from(
    [
        "2025-09-01",
        "2025-10-01",
        "2025-10-01T06:00:00Z",
        "2025-10-01T06:00:00+14:00",
        "2025-10-01T06:00:00-23:59",
        "2025-10-01T06:00:00.123456789",
        "2025-10-01 06:00",
        "2025-10-01T06:00:00+05:30:15",
        "0001-01-01",
        "0001-01-01T00:00:00+01:00",
        "9999-12-31",
        "9999-12-31T23:59:59-12:00",
        "20250901",
        "2025-W36-1",
        "2025-244",
        "2025-13-01",
        "2025-02-30",
        "2025-09-01T25:00",
        "1970-01-01T00:00:00Z",
        "2100-01-01",
        "soon",
        "",
    ]
)
WHERE = st.sampled_from(
    [
        "TRUE",
        "FALSE",
        "status = 'PENDING'",
        "status IN ('PENDING', 'PROCESSING')",
        "agent_id IS NOT NULL AND status = 'PENDING'",
        "type = 'OUTGOING' AND status = 'COMPLETED'",
        "account_id IS NOT NULL",
        "1=1; DROP TABLE transactions",
        "TRUE; DELETE FROM transactions",
        "TRUE) OR (TRUE",
        "TRUE) --",
        "TRUE --",
        "TRUE /*",
        "id IN (SELECT id FROM transactions)",
        "(SELECT count(*) FROM read_csv('/etc/passwd')) > 0",
        "(SELECT count(*) FROM 'data/paylens.duckdb') > 0",
        "TRUE UNION SELECT 'x'",
        "TRUE ORDER BY id",
        "amount_minor / 0 > 1",
        "CAST('x' AS INTEGER) = 1",
        "NULL",
        "1",
        "'a'",
        "status",
        "random() < 2",
        "current_setting('threads') > 0",
        "stauts = 'PENDING'",
        "status = ",
        "'",
        '"',
        ";",
        "",
        "   ",
        "ATTACH 'x.duckdb'",
        "COPY transactions TO 'out.csv'",
        "status = 'PENDING'\x00; DROP TABLE transactions",
        "id = '\udcff'",
        "id = 'é'",
        "amount_minor > 99999999999999999999999999999",
        "created_at > '2025-13-01'",
        "sleep_ms(0) IS NULL",
    ]
)
PATHS = st.sampled_from(
    [
        WAREHOUSE,
        "./data/../data/paylens.duckdb",
        "data/link.duckdb",
        "data",
        "a_dir",
        "missing/deeper/w.duckdb",
        "new.duckdb",
        "notes.duckdb",
        "empty.duckdb",
        "foreign.duckdb",
        "rates.csv",
        "notes.duckdb/w.duckdb",
        "",
        " ",
        ":memory:",
        "/dev/null",
        "/proc/version",
        "a\x00b.duckdb",
        "\udcff.duckdb",
        "x" * 300 + ".duckdb",
        "-",
    ]
)
FOLDERS = st.sampled_from(
    ["reports", "a_dir", "notes.duckdb", "notes.duckdb/sub", "missing/deeper", "", "/proc/x"]
)
HOSTS = st.sampled_from(
    ["127.0.0.1", "localhost", "::1", "127.0.0.2", "0.0.0.0", "::", "", "1.2.3.4", "[::1]", "x"]
)
TEXT = st.text(max_size=12) | HOSTILE


@st.composite
def value_for(draw: st.DrawFn, command: str, action: argparse.Action, sandboxed: bool) -> str:
    """One value of `action` (of `command`): mostly one of its own kind, sometimes anything
    hostile; `sandboxed` keeps sandbox sizes small."""
    if draw(st.integers(0, 7)) == 0:
        return draw(HOSTILE if not (sandboxed and action.dest == "transactions") else SIZES)
    return draw(_kind_of(command, action, sandboxed))


def _kind_of(command: str, action: argparse.Action, sandboxed: bool) -> st.SearchStrategy[str]:
    dest = action.dest
    if action.choices is not None:
        return st.sampled_from([str(c) for c in action.choices])
    if dest in ("transactions", "scenarios"):
        return SIZES | HOSTILE_SIZES
    if dest == "seed":
        return st.sampled_from(["0", "1", "5", "-1", "9" * 25])
    if dest == "port":
        return st.sampled_from(["0", "-1", "65536", "99999999999", "abc"])
    if dest == "host":
        return HOSTS
    if dest in ("db",):
        return PATHS
    if dest in ("out",):
        return FOLDERS
    if dest == "reference_rates":
        return PATHS | st.just("rates.csv")
    if dest == "where":
        return WHERE
    if dest == "key_env":
        return st.sampled_from(["PAYLENS_SESSION_KEY", "PATH", "NOPE", "", "="])
    if dest == "accounts":
        return st.sampled_from(["InternalAccount:x", "", "'"])
    kind = getattr(action.type, "__name__", "")
    if kind in ("int", "whole"):
        return SMALL_INTS
    if kind in ("float", "amount", "_positive"):
        return FLOATS
    if kind == "_instant":
        return DATES
    return TEXT


def leaves(
    parser: argparse.ArgumentParser, words: tuple[str, ...] = ()
) -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """Every runnable command's words and parser."""
    found: dict[tuple[str, ...], argparse.ArgumentParser] = {}
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return {words: parser}
    for sub in subs:
        for name, child in sub.choices.items():
            found |= leaves(child, (*words, name))
    return found


PARSER = build_parser()
COMMANDS = leaves(PARSER)


@st.composite
def command_lines(
    draw: st.DrawFn, commands: tuple[tuple[str, ...], ...], service: bool = False
) -> list[str]:
    """A command line of one of `commands`; `service`: against the PAYLENS_* service (no
    --sandbox, --max-retries 0 where it is an option, so that nothing waits)."""
    words = draw(st.sampled_from(commands))
    parser = COMMANDS[words]
    actions = [
        a
        for a in parser._actions
        if a.option_strings and not isinstance(a, (argparse._HelpAction,))
    ]
    sandboxed = words[0] in ("demo", "sandbox") or (not service and draw(st.booleans()))
    argv: list[str] = []
    if draw(st.integers(0, 9)) == 0:
        argv.append(draw(st.sampled_from(["-v", "-vv", "--verbose"])))
    argv.extend(words)
    options: list[list[str]] = []
    for action in actions:
        flag = draw(st.sampled_from(action.option_strings))
        if action.dest == "sandbox":
            if sandboxed:
                options.append([flag])
            continue
        wanted = action.required or draw(st.integers(0, 3)) == 0
        if action.required and draw(st.integers(0, 19)) == 0:
            wanted = False  # a required option left out
        if action.dest in ("dry_run", "apply"):  # their group is required: one of them, mostly
            wanted = draw(st.integers(0, 2)) > 0
        if not wanted:
            continue
        if action.nargs == 0:
            options.append([flag])
            continue
        values = value_for(words[-1], action, sandboxed)
        count = draw(st.integers(1, 3)) if action.nargs == "+" else 1
        option = [flag, *(draw(values) for _ in range(count))]
        if draw(st.integers(0, 9)) == 0:  # `--flag=value`
            option = [f"{flag}={option[1]}", *option[2:]]
        options.append(option)
        if draw(st.integers(0, 14)) == 0:  # repeated
            options.append([flag, draw(values)])
    # keep sandboxes small whatever else was drawn: --transactions and --scenarios decide how
    # long a sandbox takes to build
    if sandboxed and any(a.dest == "transactions" for a in actions):
        flag = "--transactions"
        if not any(o[0].startswith(flag) for o in options):
            options.append([flag, draw(SIZES)])
    if service and any(a.dest == "max_retries" for a in actions):
        options = [o for o in options if not o[0].startswith("--max-retries")]
        options.append(["--max-retries", "0"])
    options = draw(st.permutations(options))
    for option in options:
        argv.extend(option)
    if draw(st.integers(0, 14)) == 0:
        argv.insert(draw(st.integers(0, len(argv))), draw(st.sampled_from(["--nope", "junk"])))
    return argv


FAST = tuple(w for w in COMMANDS)


# -- the promises ------------------------------------------------------------------------------


def _flag(argv: list[str], flag: str) -> bool:
    return any(a == flag or a.startswith(flag + "=") for a in argv)


def check_promises(run: Run, folder: Path, before: Rows, files: dict[str, bytes], seen: Seen):
    shown = run.stdout + run.stderr
    assert run.escaped is None, f"{run.argv!r} raised {run.escaped!r}"
    assert run.code in (0, 1, 2), (run.argv, run.code, run.stderr)
    assert "Traceback" not in shown, (run.argv, shown[-2000:])
    if run.code != 0:
        lines = run.stderr.splitlines()
        assert len(lines) == 1 and run.stderr.endswith("\n"), (run.argv, run.stderr)
        assert lines[0].startswith("paylens") and lines[0].strip(), (run.argv, run.stderr)
    command = next((a for a in run.argv if not a.startswith("-")), "")
    if command == "sandbox" and run.code == 0:  # `sandbox serve` prints the lines to export
        shown = shown.replace(f"PAYLENS_CLIENT_SECRET={SECRET}\n", "")
    assert SECRET not in shown and ENV_SECRET not in shown and SESSION_KEY not in shown
    applied_with_yes = command in BULK and _flag(run.argv, "--apply") and _flag(run.argv, "--yes")
    # a demo syncs, then runs the report: a report that fails after the sync keeps the sync
    demo_synced = command == "demo" and "sync #" in run.stdout
    wrote = (command in ("sync", "sync-wallets") and run.code == 0) or applied_with_yes
    wrote = wrote or demo_synced
    if not applied_with_yes:
        for sandbox in seen.sandboxes:
            changing = [e for e in sandbox.requests.entries if e[0] not in ("GET", "HEAD")]
            assert not changing, (run.argv, changing[:5])
    path = folder / WAREHOUSE
    opens_as_warehouse(path)
    after = rows_of(path)
    if not wrote:
        assert after == before, (run.argv, run.code, run.stderr)
    if not applied_with_yes:
        from paylens import Warehouse

        with Warehouse(path, read_only=True) as wh:
            outcomes = set(wh.journal()["outcome"])
        assert not outcomes & set(ACTED), (run.argv, outcomes)
    for name, content in files.items():
        assert (folder / name).read_bytes() == content, (run.argv, name)


def run_example(argv: list[str], base: Path, env: dict[str, str]) -> None:
    folder = Path(tempfile.mkdtemp(prefix="cli-fuzz-"))
    cwd = os.getcwd()
    try:
        _lay_out(folder, base)
        before = rows_of(folder / WAREHOUSE)
        files = {name: (folder / name).read_bytes() for name in NOT_WAREHOUSES}
        os.chdir(folder)
        try:
            with instrumented() as seen:
                run = run_main(argv, env)
        finally:
            os.chdir(cwd)
        if LOG:  # what was run and said, for a look at what the draws reach
            with open(LOG, "a", encoding="utf-8", errors="backslashreplace") as log:
                log.write(f"{run.code}\t{run.argv!r}\t{run.stderr.strip()[:300]!r}\n")
        check_promises(run, folder, before, files, seen)
    finally:
        os.chdir(cwd)
        shutil.rmtree(folder, ignore_errors=True)


# -- properties ---------------------------------------------------------------------------------

EXAMPLES = int(os.environ.get("CLI_FUZZ_EXAMPLES", "200"))
SEED = os.environ.get("CLI_FUZZ_SEED")
LOG = os.environ.get("CLI_FUZZ_LOG")


def _settings(examples: int, derandomize: bool) -> settings:
    return settings(
        max_examples=examples,
        derandomize=derandomize,
        deadline=None,
        database=None,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
        ],
        print_blob=True,
    )


def _seeded(test: Any) -> Any:
    return seed(int(SEED))(test) if SEED else test


UNSET: dict[str, str] = {}
SOME_SET = st.fixed_dictionaries(
    {},
    optional={
        "PAYLENS_BASE_URL": st.sampled_from([UNROUTABLE, "not a url", "ftp://x/", ""]),
        "PAYLENS_CLIENT_ID": st.sampled_from(["fuzz-client", ""]),
        "PAYLENS_CLIENT_SECRET": st.just(ENV_SECRET),
        "PAYLENS_SESSION_KEY": st.sampled_from([SESSION_KEY, "zz", ""]),
    },
)


@pytest.mark.slow
@_seeded
@given(argv=command_lines(FAST))
@_settings(EXAMPLES, derandomize=False)
def test_any_command_line_keeps_the_promises(argv: list[str], warehouse_file: Path) -> None:
    run_example(argv, warehouse_file, UNSET)


@pytest.mark.slow
@_seeded
@given(argv=command_lines(FAST, service=True), env=SOME_SET)
@_settings(EXAMPLES, derandomize=False)
def test_any_command_line_against_an_unreachable_service_keeps_the_promises(
    argv: list[str], env: dict[str, str], warehouse_file: Path
) -> None:
    run_example(argv, warehouse_file, env)


@given(argv=command_lines(FAST))
@example(argv=["cancel", "--where", "status = 'PENDING'", "--dry-run"])
@example(argv=["approve", "--where", "TRUE", "--apply", "--sandbox", "--transactions", "0"])
@example(argv=["revoke-sessions", "--db", "data/link.duckdb", "--where", "TRUE", "--dry-run"])
@_settings(3, derandomize=True)
def test_a_few_command_lines_keep_the_promises(argv: list[str], warehouse_file: Path) -> None:
    run_example(argv, warehouse_file, UNSET)


# -- what the fuzzing found, each as one readable case ------------------------------------------


def _one_line_usage_error(done: Any, said: str) -> None:
    assert done.returncode == 2, done
    assert done.stderr.count("\n") == 1 and said in done.stderr, done.stderr
    assert "Traceback" not in done.stderr + done.stdout


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["sync", "--sandbox", "--transactions", "-1"], "argument --transactions: '-1' is not a"),
        (["report", "--sandbox", "--transactions", "-300"], "argument --transactions: '-300'"),
        (["demo", "--transactions", "-1"], "argument --transactions: '-1' is not a whole number"),
        (["sandbox", "serve", "--scenarios", "-1"], "argument --scenarios: '-1' is not a whole"),
        (["sandbox", "serve", "--port", "70000"], "argument --port: '70000' is not a whole number"),
        (["sandbox", "serve", "--port", "-1"], "argument --port: '-1' is not a whole number from"),
        (["sandbox", "serve", "--latency", "nan"], "argument --latency: 'nan' is not a finite"),
        (["sandbox", "serve", "--latency", "-1"], "argument --latency: '-1' is not a finite"),
        (["sandbox", "serve", "--rate-429", "2"], "argument --rate-429: '2' is not a finite num"),
        (["sandbox", "serve", "--rate-limit", "0"], "argument --rate-limit: '0' is not a finite"),
        (["sandbox", "advance", "--hours", "nan"], "argument --hours: 'nan' is not a finite"),
        (["sandbox", "advance", "--hours", "inf"], "argument --hours: 'inf' is not a finite"),
        (["sandbox", "advance", "--hours", "1e308"], "argument --hours: '1e308' is not a finite"),
        (["sandbox", "advance", "--hours", "-1"], "argument --hours: '-1' is not a finite number"),
        (
            ["cancel", "--where", "TRUE", "--apply", "--yes", "--concurrency", "0"],
            "argument --concurrency: '0' is not a whole number 1 or more",
        ),
        (["sync-wallets", "--concurrency", "-2"], "argument --concurrency: '-2' is not a whole"),
        (
            ["report", "--start", "9999-12-31T23:59:59-12:00"],
            "argument --start: '9999-12-31T23:59:59-12:00' is outside the years 1 to 9999 once",
        ),
        (
            ["sync", "--since", "0001-01-01T00:00:00+01:00"],
            "argument --since: '0001-01-01T00:00:00+01:00' is outside the years 1 to 9999 once",
        ),
    ],
)
def test_a_value_no_command_can_use_is_a_usage_error_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], said: str
) -> None:
    """Each of these exited 1 with a Python exception's name (`ValueError: transactions must
    be >= 0`, `OverflowError: bind(): port must be 0-65535.`, `ValueError: cannot convert float
    NaN to integer`, `OverflowError: date value out of range`), after generating a sandbox or
    opening the warehouse, or was taken silently (a latency of nan served every request an
    error; a bulk --concurrency of 0 ran with 1)."""
    from ._helpers import run_cli

    monkeypatch.chdir(tmp_path)
    db = [] if args[0] == "sandbox" else ["--db", str(tmp_path / "w.duckdb")]
    done = run_cli(*args, *db)
    _one_line_usage_error(done, said)
    assert list(tmp_path.iterdir()) == []


def test_a_sync_concurrency_past_what_any_read_uses_is_refused_before_any_file(
    tmp_path: Path,
) -> None:
    """`paylens sync --concurrency 100000000` took all the machine's memory (23 GB) until the
    kernel killed it: a sync cuts its customers into `concurrency` parts up front."""
    from paylens import InvalidArgumentError
    from paylens.warehouse import SyncOptions

    from ._helpers import run_cli

    assert SyncOptions(concurrency=1024).concurrency == 1024
    with pytest.raises(InvalidArgumentError, match="concurrency: must be at most 1024"):
        SyncOptions(concurrency=1025)
    db = tmp_path / "w.duckdb"
    done = run_cli("sync", "--sandbox", "--transactions", "300", "--db", str(db), "--concurrency",
                   "100000000", "--quiet")  # fmt: skip
    _one_line_usage_error(done, "paylens sync: concurrency: must be at most 1024 slices at once")
    assert list(tmp_path.iterdir()) == []


def test_an_iso_date_in_any_spelling_is_that_utc_day() -> None:
    """`--since 20250901` (ISO 8601's basic form) passed the parser as a date and was then
    refused by the sync: `since: datetime.datetime(2025, 9, 1, 0, 0) has no time zone; pass an
    aware datetime (e.g. tzinfo=UTC) or a date` (Python, said to a shell)."""
    from paylens.cli._parser import _instant

    assert _instant("20250901") == "2025-09-01"
    assert _instant("2025-W36-1") == "2025-09-01"
    assert _instant(" 2025-09-01 ") == "2025-09-01"
    assert _instant("20250901T060000") == "2025-09-01T06:00:00+00:00"


def test_a_sync_since_a_basic_iso_date_stores_what_the_extended_one_does(tmp_path: Path) -> None:
    from paylens import Warehouse

    from ._helpers import run_cli

    ids = []
    for name, since in (("basic", "20251001"), ("extended", "2025-10-01")):
        db = tmp_path / f"{name}.duckdb"
        done = run_cli("sync", "--sandbox", "--transactions", "300", "--db", str(db),
                       "--since", since, "--quiet")  # fmt: skip
        assert done.returncode == 0, done.stderr
        with Warehouse(db, read_only=True) as wh:
            ids.append(sorted(wh.sql("SELECT id FROM transactions")["id"]))
    assert ids[0] == ids[1] and 0 < len(ids[0]) < 300


def test_reference_rates_that_cannot_be_read_are_refused_before_the_kernel_starts(
    warehouse_file: Path, tmp_path: Path
) -> None:
    """A missing `--reference-rates` file was found by the notebook's kernel, ~8 s later:
    exit 1, `FAILED: InvalidArgumentError: reference_rates: cannot read ...`, and a partial
    report written."""
    from ._helpers import run_cli

    out = tmp_path / "reports"
    for rates, said in ((tmp_path / "missing.csv", "No such file"), (tmp_path, "Is a directory")):
        done = run_cli("report", "--db", str(warehouse_file), "--reference-rates", str(rates),
                       "--out", str(out), "--quiet")  # fmt: skip
        _one_line_usage_error(done, f"paylens report: reference_rates: cannot read {rates}: ")
        assert said in done.stderr and done.stdout == ""
        assert not out.exists()  # no notebook run, no partial report


def test_memory_is_a_file_name_to_a_bulk_action_as_it_is_to_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`paylens sync --db :memory:` writes the file `./:memory:`; `paylens cancel --db :memory:`
    selected from an empty in-memory database instead: `0 of 0 selected`, exit 0."""
    from ._helpers import run_cli

    monkeypatch.chdir(tmp_path)
    dry = ["--db", ":memory:", "--where", "TRUE", "--dry-run"]
    missing = run_cli("cancel", *dry)
    _one_line_usage_error(missing, f"no warehouse at {tmp_path / ':memory:'}")
    synced = run_cli("sync", "--sandbox", "--transactions", "300", "--db", ":memory:", "--quiet")
    assert synced.returncode == 0 and (tmp_path / ":memory:").is_file()
    planned = run_cli("cancel", *dry)
    assert planned.returncode == 0, planned.stderr
    assert "of 300 selected transactions eligible" in planned.stdout


def test_an_apply_declined_says_so_in_one_line_on_stderr(tmp_path: Path) -> None:
    """An apply without --yes and no terminal to ask exited 1 with nothing on stderr: a
    failure every other command says there in one line."""
    from ._helpers import run_cli

    db = tmp_path / "w.duckdb"
    assert run_cli("sync", "--sandbox", "--transactions", "300", "--db", str(db)).returncode == 0
    done = run_cli("approve", "--sandbox", "--transactions", "300", "--db", str(db),
                   "--where", "agent_id IS NOT NULL", "--apply")  # fmt: skip
    assert done.returncode == 1
    assert done.stdout.rstrip().endswith("not applied")
    assert done.stderr == (
        "paylens approve: not applied: nothing was sent (pass --yes to apply without being "
        "asked); exit 1\n"
    )


def test_a_filter_with_a_byte_that_is_not_utf8_is_a_usage_error(warehouse_file: Path) -> None:
    """A command line's byte that is not UTF-8 reaches Python as a lone surrogate; in --where
    it failed in DuckDB's binding: exit 1, `TypeError: extract_statements(): incompatible
    function arguments. The following argument types are supported:`."""
    from ._helpers import run_cli

    done = run_cli("cancel", "--db", str(warehouse_file), "--where", "id = '\udcff'", "--dry-run")
    _one_line_usage_error(
        done, "paylens cancel: select: \"id = '\\udcff'\" is not a SQL condition: surrogates"
    )


@pytest.mark.parametrize("command", ["sync", "sync-wallets"])
def test_a_warehouse_name_that_is_not_utf8_is_a_usage_error(tmp_path: Path, command: str) -> None:
    """`--db $'\\xff.duckdb'` failed in DuckDB as `RuntimeError: std::bad_cast` (exit 1),
    after the sync had made its lock and staged files beside it."""
    from ._helpers import run_cli

    db = tmp_path / "\udcff.duckdb"
    done = run_cli(command, "--sandbox", "--transactions", "300", "--db", str(db))
    _one_line_usage_error(done, f"{db} is a file name that is not UTF-8, which DuckDB cannot open")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args",
    [
        ["cancel", "--where", "TRUE", "--dry-run"],
        ["revoke-sessions", "--where", "TRUE", "--dry-run"],
        ["report", "--quiet"],
    ],
)
def test_a_duckdb_file_with_no_table_is_no_warehouse_to_any_reader(
    tmp_path: Path, args: list[str]
) -> None:
    """A bulk dry run on a DuckDB file with no table exited 1 (`WarehouseError: ... is not a
    paylens warehouse`) where the report, on the same file, exited 2."""
    from ._helpers import run_cli

    empty = tmp_path / "empty.duckdb"
    duckdb.connect(str(empty)).close()
    content = empty.read_bytes()
    done = run_cli(
        *args, "--db", str(empty), *(["--out", str(tmp_path / "r")] * (args[0] == "report"))
    )
    _one_line_usage_error(done, f"{empty} is not a paylens warehouse (a DuckDB database with no")
    assert empty.read_bytes() == content and not (tmp_path / "r").exists()


def test_a_report_folder_that_cannot_be_made_is_a_usage_error(
    warehouse_file: Path, tmp_path: Path
) -> None:
    """`--out` naming a file (or a folder under one) exited 1 with `FileExistsError: [Errno
    17] File exists: ...`, a Python exception's name for a mistyped option."""
    from ._helpers import run_cli

    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine\n")
    for out, said in ((a_file, "File exists"), (a_file / "sub", "Not a directory")):
        done = run_cli("report", "--db", str(warehouse_file), "--out", str(out), "--quiet")
        _one_line_usage_error(done, f"paylens report: out: cannot make the folder {out}: {said}")
    assert a_file.read_text() == "mine\n"


def test_more_scenarios_than_a_sandbox_can_plant_is_a_usage_error() -> None:
    """`sandbox serve --transactions 300 --scenarios 50` exited 1 with `ValueError:
    scenarios=50 needs at least 350 transactions`."""
    from ._helpers import run_cli

    done = run_cli("sandbox", "serve", "--port", "0", "--transactions", "300", "--scenarios", "50")
    _one_line_usage_error(
        done,
        "paylens sandbox serve: scenarios: 50 planted rows per scenario need at least 350 "
        "transactions; got 300",
    )
    assert done.stdout == ""
