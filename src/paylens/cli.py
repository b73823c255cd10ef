"""The `paylens` command: each subcommand is a thin call of a public function.

paylens sandbox serve --port 8765 --seed 0 --transactions 10000
paylens sandbox advance --hours 24
paylens demo
paylens report --db data/paylens.duckdb --start 2025-09-01 --end 2025-10-01 --out reports/
paylens cancel|approve|reject|confirm-receipt --where "..." --dry-run
paylens sync-wallets
paylens revoke-sessions --where "..." --dry-run

Exit status: 0 done; 1 failed (a bulk action: not every item ended as planned); 2 the command
cannot run as typed or configured (a usage error, missing PAYLENS_* variables, no warehouse).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from paylens import errors
from paylens._version import __version__
from paylens.connection import DEFAULT_DB, SANDBOX_TRANSACTIONS

if TYPE_CHECKING:
    from paylens.client import Client
    from paylens.ops import Plan


def _sandbox_serve(args: argparse.Namespace) -> int:
    from paylens.sandbox import Sandbox

    started = time.perf_counter()
    sandbox = Sandbox(
        seed=args.seed,
        transactions=args.transactions,
        scenarios=args.scenarios,
        clock=args.clock,
        profile=args.profile,
    )
    sandbox.faults.configure(
        latency=args.latency, rate_429=args.rate_429, rate_limit=args.rate_limit
    )
    try:
        server = sandbox.serve(port=args.port, host=args.host)
    except OSError as exc:
        print(
            f"paylens sandbox serve: cannot listen on {args.host} port {args.port}: "
            f"{exc.strerror or exc} (choose another with --port, or 0 for any free port)",
            file=sys.stderr,
        )
        return 1
    for name, value in sandbox.env(server).items():
        print(f"{name}={value}")
    print(
        f"# paylens sandbox (SANDBOX DATA): {args.transactions:,} transactions "
        f"({args.profile} profile), seed {args.seed}, "
        f"generated in {time.perf_counter() - started:.1f}s; serving until interrupted",
        file=sys.stderr,
        flush=True,
    )
    sys.stdout.flush()
    server.wait()
    return 0


def _demo(args: argparse.Namespace) -> int:
    """The main job against the embedded sandbox: sync it into the warehouse file (incremental
    on a re-run), run the report over it, and print headline figures per currency and the
    report's path. Exit 0, or 1 when the sync or the report failed."""
    from paylens import PaylensError
    from paylens.report import Period, ReportError, render_report
    from paylens.sandbox import Sandbox
    from paylens.warehouse import Warehouse, sync_file

    started = time.perf_counter()
    sandbox = Sandbox(seed=args.seed, transactions=args.transactions)
    print(
        f"paylens {__version__} — SANDBOX DATA: the embedded sandbox, seed {args.seed}, "
        f"{args.transactions:,} transactions (generated in {time.perf_counter() - started:.1f}s)"
    )
    progress = sys.stderr.isatty()
    try:
        print(sync_file(args.db, sandbox.client(), progress=progress))
        if not progress:  # no bar to show it: say what the next seconds are spent on
            print("running the report notebook in a kernel...", flush=True)
        report_started = time.perf_counter()
        page = render_report(args.db, out=args.out, progress=progress)
    except ReportError as exc:
        print(
            f"paylens demo: the report failed: {exc}\n  partial report: {exc.html}", file=sys.stderr
        )
        return 1
    except PaylensError as exc:
        print(f"paylens demo: {exc}", file=sys.stderr)
        return 1
    print(f"report run in {time.perf_counter() - report_started:.1f}s")
    with Warehouse(args.db, read_only=True) as wh:
        period = Period(wh)
        headline, rates = period.headline(), period.rates()
    print("\nheadline figures (SANDBOX DATA), per currency, never added across currencies:")
    print(headline.head(args.currencies).to_string())
    print()
    print(rates.rename_axis(None).to_string(header=False))
    print(f"\ndone in {time.perf_counter() - started:.1f}s; the report: {page}")
    return 0


def _report(args: argparse.Namespace) -> int:
    """`paylens report`: run the report notebook over a warehouse and write it as HTML. Exit 0
    with the HTML's path, 1 when a tie-out check or the notebook failed (the partial report
    is still written), 2 when there is no warehouse or the arguments are wrong."""
    from paylens import WarehouseError
    from paylens.report import ReportError, render_report

    progress = not args.quiet and sys.stderr.isatty()
    try:
        db = args.db
        if args.sandbox:
            from paylens.connection import sandbox_warehouse

            db = sandbox_warehouse(
                seed=args.seed, transactions=args.transactions, progress=progress
            )
        page = render_report(
            db,
            start=args.start,
            end=args.end,
            currency=args.currency,
            out=args.out,
            reference_rates=args.reference_rates,
            progress=progress,
        )
    except (FileNotFoundError, ValueError, WarehouseError) as exc:
        print(f"paylens report: {exc}", file=sys.stderr)
        return 2
    except ReportError as exc:
        print(f"paylens report: FAILED: {exc}", file=sys.stderr)
        if exc.html is not None:
            print(exc.html)
        return 1
    print(page)
    return 0


def _sync(args: argparse.Namespace) -> int:
    """`paylens sync`: the scheduled job. Exit 0 on success, 1 when the sync failed, 2 when it
    cannot run as typed or configured (an option out of range, no PAYLENS_* service, a file
    that is not a warehouse)."""
    from paylens import ConfigurationError, PaylensError
    from paylens.warehouse import sync_file

    try:
        client = _client(args)
    except ConfigurationError as exc:
        print(f"paylens sync: {exc}", file=sys.stderr)
        return 2
    try:
        report = sync_file(
            args.db,
            client,
            wait=args.wait,
            verify_syncs=args.verify_syncs,
            since=args.since,
            full=args.full,
            concurrency=args.concurrency,
            rate_limit=args.rate_limit,
            progress=not args.quiet and sys.stderr.isatty(),
            resources=args.resources,
        )
    except _SETUP_ERRORS as exc:
        print(f"paylens sync: {exc}", file=sys.stderr)
        return 2
    except PaylensError as exc:
        print(f"paylens sync: failed: {exc}", file=sys.stderr)
        return 1
    print(report)
    return 0


#: The bulk actions a shell can run: command -> (ops planner, what a request does, body args).
_BULK = {
    "cancel": ("plan_cancel", "cancellation", ("reason",)),
    "approve": ("plan_approve", "approval", ()),
    "reject": ("plan_reject", "rejection", ("reason",)),
    "confirm-receipt": ("plan_confirm_receipt", "receipt confirmation", ()),
}


def _client(args: argparse.Namespace) -> Client:
    """The embedded sandbox's client with `--sandbox`, else the PAYLENS_* service; either with
    the options of `_client_options`."""
    import os

    from paylens import Client, ConfigurationError
    from paylens.client._config import ENV_BASE_URL, ENV_CLIENT_ID, ENV_CLIENT_SECRET

    options = {"max_retries": args.max_retries}
    if getattr(args, "sandbox", False):
        from paylens.sandbox import Sandbox

        return Sandbox(seed=args.seed, transactions=args.transactions).client(**options)
    missing = [n for n in (ENV_BASE_URL, ENV_CLIENT_ID, ENV_CLIENT_SECRET) if not os.environ.get(n)]
    if missing:  # said for a shell, not for Python
        raise ConfigurationError(
            f"{', '.join(missing)} not set: export the service's PAYLENS_* variables (for a local "
            "simulator, the lines `paylens sandbox serve` prints), or pass --sandbox for the "
            "embedded simulator"
        )
    return Client.from_env(**options)


def _bulk(args: argparse.Namespace) -> int:
    """`paylens cancel|approve|reject|confirm-receipt`: plan, print, confirm, apply. Exit 0
    when every item ended as planned, 1 otherwise (or when the operator declined), 2 when not
    configured. A dry run opens the warehouse read-only and needs no credentials."""
    from paylens import ConfigurationError, ops
    from paylens.warehouse import Warehouse

    planner, noun, body_args = _BULK[args.command]
    body = {name: getattr(args, name) for name in body_args if getattr(args, name, None)}
    try:
        client = None if args.dry_run else _client(args)
    except ConfigurationError as exc:
        print(f"paylens {args.command}: {exc}", file=sys.stderr)
        return 2
    with Warehouse(args.db, read_only=args.dry_run, wait=args.wait) as wh:
        plan = getattr(ops, planner)(wh, args.where, **body)
        return _review_and_apply(args, plan, client, noun)


def _review_and_apply(
    args: argparse.Namespace, plan: Plan, client: Client | None, noun: str
) -> int:
    """Print the plan; with --dry-run show what would be sent, else confirm and apply; print
    each item's outcome and their counts. Exit 0 when every item ended as planned."""
    print(plan)
    if not len(plan.eligible):
        print(f"nothing to {args.command}")
        return 0
    if args.dry_run:
        result = plan.apply(client, dry_run=True, progress=False)  # type: ignore[arg-type]
    else:
        if not args.yes and not _confirm(f"send {len(plan.eligible):,} {noun} request(s)?"):
            print("not applied")
            return 1
        assert client is not None
        result = plan.apply(
            client, concurrency=args.concurrency, progress=not args.quiet and sys.stderr.isatty()
        )
    print(result.to_string(index=False, max_rows=100))
    print(", ".join(f"{k} {v:,}" for k, v in result["outcome"].value_counts().items()))
    if result.attrs["all_as_planned"]:
        return 0
    if not args.dry_run:
        print(
            f"paylens {args.command}: not every item ended as planned (see the outcomes above); "
            "exit 1",
            file=sys.stderr,
        )
    return 1


def _revoke_sessions(args: argparse.Namespace) -> int:
    """`paylens revoke-sessions`: plan, print, confirm, apply `ops.plan_revoke_sessions` over
    the wallet inventory (`wh.sync_wallets`). Each revoke is signed by the session key whose
    private key (hex) is in the variable `--key-env`. A dry run opens the warehouse read-only
    and needs neither credentials nor a key. Exit codes as `paylens cancel`."""
    import os

    from paylens import ConfigurationError, SessionKey, ops
    from paylens.warehouse import Warehouse

    signer: SessionKey | None = None
    try:
        if not args.dry_run:
            key = os.environ.get(args.key_env)
            if not key:
                raise ConfigurationError(
                    f"{args.key_env} is not set: it holds the private key (hex) of a session "
                    "key of the sessions' account, which signs each revoke."
                )
            signer = SessionKey.from_private_hex(key)
        client = None if args.dry_run else _client(args)
    except ConfigurationError as exc:
        print(f"paylens {args.command}: {exc}", file=sys.stderr)
        return 2

    def unsigned(payload: str | bytes) -> str:  # a dry run shows the plan and signs nothing
        raise ConfigurationError(f"a dry run signs nothing; set {args.key_env} to apply")

    with Warehouse(args.db, read_only=args.dry_run, wait=args.wait) as wh:
        plan = ops.plan_revoke_sessions(wh, args.where, signer=signer or unsigned)
        return _review_and_apply(args, plan, client, "session revoke")


def _sync_wallets(args: argparse.Namespace) -> int:
    """`paylens sync-wallets`: take the wallet inventory (`wh.sync_wallets`) that
    `paylens revoke-sessions` selects from. Exit 0, 1 when it failed, 2 when not configured."""
    from paylens.warehouse import Warehouse

    client = _client(args)
    with Warehouse(args.db, wait=args.wait) as wh:
        found = wh.sync_wallets(client, args.accounts, concurrency=args.concurrency)
    print(
        f"wallet inventory of {args.db}: "
        + ", ".join(f"{count:,} {what}" for what, count in found.items())
    )
    return 0


def _confirm(question: str) -> bool:
    try:
        return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:  # nothing to read the answer from (cron, a pipe)
        print("no answer (pass --yes to apply without being asked)")
        return False


def _sandbox_advance(args: argparse.Namespace) -> int:
    """Move a served sandbox's clock ahead (PAYLENS_* variables) and print what changed."""
    from datetime import timedelta

    from paylens.sandbox import advance_served

    changed = advance_served(timedelta(hours=args.hours))
    print(" ".join(f"{name}={count}" for name, count in sorted(changed.items())))
    return 0


class _Parser(argparse.ArgumentParser):
    """Usage mistakes in one line naming what was wrong (the usage is a `--help` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _instant(text: str) -> str:
    """A date option's value: an ISO 8601 date (a UTC day), or an instant, UTC unless it names
    its zone (handed on with it); anything else is refused here, before any file is touched."""
    from datetime import UTC, datetime

    value = text.strip()
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a date (YYYY-MM-DD) or an ISO 8601 instant"
        ) from None
    if len(value) <= 10:  # a date: the command reads it as that UTC day
        return value
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).isoformat()


class _Formatter(argparse.HelpFormatter):
    """Help that shows each option's default, where it has one worth saying."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        quiet = action.default is None or action.default is False
        if not quiet and action.default != argparse.SUPPRESS and "%(default)" not in text:
            text += " (default: %(default)s)"
        return text


def _sandbox_options(
    parser: argparse.ArgumentParser,
    what: str = "use the embedded sandbox instead of the PAYLENS_* service",
) -> None:
    parser.add_argument("--sandbox", action="store_true", help=what)
    parser.add_argument("--seed", type=int, default=0, help="sandbox seed (with --sandbox)")
    parser.add_argument(
        "--transactions",
        type=int,
        default=SANDBOX_TRANSACTIONS,
        help="sandbox size (with --sandbox)",
    )


def _client_options(parser: argparse.ArgumentParser) -> None:
    """What every command that talks to the service takes for its client (see `_client`)."""
    from paylens.client import RetryPolicy

    parser.add_argument(
        "--max-retries",
        type=int,
        default=RetryPolicy.max_retries,
        help="retries of a failed request (connection errors, 408, 429, 5xx) before giving "
        "up, with backoff between them; a request that changes state is retried only when "
        "the service certainly did not act on it; 0: none",
    )


def _wait_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--wait",
        type=float,
        default=0.0,
        help="seconds to wait for another writer of the file to finish (0: fail at once)",
    )


def _bulk_options(parser: argparse.ArgumentParser, noun: str, table: str, example: str) -> None:
    """What every bulk command takes: the selection, dry run or apply, and the sandbox."""
    parser.add_argument("--db", default=DEFAULT_DB, help="warehouse file")
    parser.add_argument(
        "--where", required=True, help=f"one SQL condition over {table}, e.g. {example}"
    )
    parser.add_argument("--concurrency", type=int, default=4, help="requests at once")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--dry-run", action="store_true", help="show what would be sent; send and write nothing"
    )
    mode.add_argument("--apply", action="store_true", help=f"send the {noun} requests")
    parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    _wait_option(parser)
    _sandbox_options(parser)
    _client_options(parser)


_RESOURCES = ("transactions", "customers", "cards", "internal_accounts", "external_accounts")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="paylens",
        description=__doc__.splitlines()[0],
        epilog=_EXIT_STATUS,
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action="version", version=f"paylens {__version__}")
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="-v: what paylens does (INFO); -vv: every HTTP request too (DEBUG)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sandbox = commands.add_parser(
        "sandbox", formatter_class=_Formatter, help="the embedded simulator of the service"
    )
    sandbox_commands = sandbox.add_subparsers(
        dest="sandbox_command", required=True, metavar="{serve,advance}"
    )
    serve = sandbox_commands.add_parser(
        "serve",
        formatter_class=_Formatter,
        help="serve a sandbox over HTTP on loopback and print the PAYLENS_* lines to export",
    )
    serve.add_argument("--port", type=int, default=8765, help="port to listen on (0: any free)")
    serve.add_argument("--host", default="127.0.0.1", help="loopback address to listen on")
    serve.add_argument("--seed", type=int, default=0, help="seed of the generated data")
    serve.add_argument(
        "--transactions", type=int, default=SANDBOX_TRANSACTIONS, help="sandbox size"
    )
    serve.add_argument("--latency", type=float, default=0.0, help="seconds added to each request")
    serve.add_argument(
        "--profile",
        choices=("default", "remittance"),
        default="default",
        help="the data's shape: default (one customer per ~50 transactions) or remittance "
        "(one customer per transaction, 1.2 external and 0.6 internal accounts each, cards "
        "for 10 %%)",
    )
    serve.add_argument(
        "--scenarios",
        type=int,
        default=None,
        help="planted rows per scenario (pending transfers in and past their window, approvals)"
        " (default: scaled to --transactions)",
    )
    serve.add_argument(
        "--rate-429", type=float, default=0.0, help="fraction of requests answered 429"
    )
    serve.add_argument(
        "--rate-limit", type=float, help="requests per second answered (default: no limit)"
    )
    serve.add_argument(
        "--clock",
        choices=("wall", "fixed"),
        default="wall",
        help="wall: history ends now and time follows the wall clock; fixed: time moves only "
        "with `paylens sandbox advance` (reproducible)",
    )
    serve.set_defaults(run=_sandbox_serve)
    advance = sandbox_commands.add_parser(
        "advance",
        formatter_class=_Formatter,
        help="move a served sandbox's clock ahead (PAYLENS_* variables)",
    )
    advance.add_argument("--hours", type=float, required=True, help="how far to jump ahead")
    advance.set_defaults(run=_sandbox_advance)

    sync = commands.add_parser(
        "sync",
        formatter_class=_Formatter,
        help="bring a warehouse file in step with the service (PAYLENS_* variables)",
    )
    sync.add_argument("--db", default=DEFAULT_DB, help="warehouse file")
    sync.add_argument(
        "--since",
        type=_instant,
        help="only records created from this date (YYYY-MM-DD) or instant (UTC unless it names "
        "its zone) (default: everything)",
    )
    _sandbox_options(sync)
    sync.add_argument("--full", action="store_true", help="re-read everything")
    sync.add_argument(
        "--resources",
        nargs="+",
        choices=_RESOURCES,
        default=None,
        metavar="RESOURCE",
        help=f"sync only these ({', '.join(_RESOURCES)}); the customers, cards and accounts "
        "named are re-read whole whatever their age (default: all five)",
    )
    sync.add_argument("--concurrency", type=int, default=16, help="time slices read at once")
    sync.add_argument(
        "--rate-limit", type=float, help="requests per second sent (default: no limit)"
    )
    sync.add_argument("--quiet", action="store_true", help="no progress bar")
    sync.add_argument(
        "--verify-syncs",
        type=int,
        default=7,
        help="every stored record is re-read at least once every this many syncs",
    )
    _wait_option(sync)
    _client_options(sync)
    sync.set_defaults(run=_sync)

    helps = {
        "cancel": "cancel pending ACH and wire transfers selected from the warehouse",
        "approve": "approve payments waiting for platform approval, selected from the warehouse",
        "reject": "reject payments waiting for platform approval, selected from the warehouse",
        "confirm-receipt": "confirm receipt delivery of transactions selected from the warehouse",
    }
    for command, (_, noun, body_args) in _BULK.items():
        bulk = commands.add_parser(
            command, help=helps[command], epilog=_EXIT_STATUS, formatter_class=_Formatter
        )
        _bulk_options(bulk, noun, "the transactions table", "\"status = 'PENDING'\"")
        if "reason" in body_args:
            bulk.add_argument(
                "--reason", help=f"free-text reason sent with each {noun} (default: none)"
            )
        bulk.set_defaults(run=_bulk)
    wallets = commands.add_parser(
        "sync-wallets",
        formatter_class=_Formatter,
        help="take the inventory of wallet credentials and sessions (PAYLENS_* variables), "
        "which revoke-sessions selects from",
    )
    wallets.add_argument("--db", default=DEFAULT_DB, help="warehouse file")
    wallets.add_argument(
        "--accounts",
        nargs="+",
        metavar="ACCOUNT_ID",
        help="these wallet accounts only (default: every embedded wallet account)",
    )
    wallets.add_argument("--concurrency", type=int, default=8, help="accounts read at once")
    _wait_option(wallets)
    _sandbox_options(wallets)
    _client_options(wallets)
    wallets.set_defaults(run=_sync_wallets)
    revoke = commands.add_parser(
        "revoke-sessions",
        formatter_class=_Formatter,
        epilog=_EXIT_STATUS,
        help="revoke wallet sessions selected from the warehouse's inventory (sync-wallets)",
    )
    _bulk_options(
        revoke,
        "session revoke",
        "the wallet_sessions table (paylens sync-wallets)",
        "\"account_id = 'InternalAccount:…'\"",
    )
    revoke.add_argument(
        "--key-env",
        default="PAYLENS_SESSION_KEY",
        help="environment variable holding the private key (hex) of a session key of the "
        "sessions' account, which signs each revoke (not needed for --dry-run)",
    )
    revoke.set_defaults(run=_revoke_sessions)

    report = commands.add_parser(
        "report",
        formatter_class=_Formatter,
        help="run the report notebook over a warehouse and write it as HTML",
    )
    report.add_argument("--db", default=DEFAULT_DB, help="warehouse file (read only)")
    _sandbox_options(report, "instead of --db: a warehouse synced from the embedded sandbox")
    report.add_argument("--quiet", action="store_true", help="no progress display")
    report.add_argument(
        "--start",
        type=_instant,
        help="period start, inclusive (UTC date or instant) (default: the first record)",
    )
    report.add_argument(
        "--end",
        type=_instant,
        help="period end, exclusive (UTC date or instant) (default: after the last)",
    )
    report.add_argument(
        "--currency", help="one currency only, e.g. USD (default: every currency, each apart)"
    )
    report.add_argument("--out", default="reports", help="folder for the report")
    report.add_argument(
        "--reference-rates",
        metavar="CSV",
        help="mid-market rates (date, sent_currency, received_currency, mid_rate) for the FX"
        " margin (default: the sandbox's own for sandbox data, else the margin is unknown)",
    )
    report.set_defaults(run=_report)

    demo = commands.add_parser(
        "demo",
        formatter_class=_Formatter,
        help="the main job on the embedded sandbox: sync, report, headline figures",
    )
    demo.add_argument("--seed", type=int, default=0, help="sandbox seed")
    demo.add_argument("--transactions", type=int, default=SANDBOX_TRANSACTIONS, help="sandbox size")
    demo.add_argument("--db", default=DEFAULT_DB, help="warehouse file")
    demo.add_argument("--out", default="reports", help="folder for the report")
    demo.add_argument(
        "--currencies", type=int, default=6, help="currencies shown in the headline figures"
    )
    demo.set_defaults(run=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command; whatever goes wrong is one line on stderr, never a traceback. Called
    for the process's own command line (`argv` None), `paylens sync` loads no pandas (nor
    other packages it never uses) and exits as soon as its file is committed (see `_refuse`)."""
    if argv is None and _command(sys.argv[1:]) == "sync":
        _refuse(_NOT_IN_ANY_SYNC)  # before the parser, whose options load the client
    args = build_parser().parse_args(argv)
    if argv is None and args.command == "sync" and not args.sandbox:
        _refuse(_NOT_IN_A_SYNC)
    if argv is None and args.command == "sync":
        _honour_ctrl_c()
    if argv is None and args.command in ("report", "demo"):
        _report_process()
    level = {0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(name)s: %(message)s")
    logging.getLogger("paylens").setLevel(level)
    # httpx/httpcore speak at DEBUG only with -vv; paylens' own client logs requests at DEBUG
    logging.getLogger("paylens.client").setLevel(
        logging.DEBUG if args.verbose > 1 else max(level, logging.INFO)
    )
    name = " ".join(
        n for n in ("paylens", args.command, getattr(args, "sandbox_command", None)) if n
    )
    code = _run(args, name)
    if argv is None and args.command == "sync":
        _exit_now(code)
    return code


def _run(args: argparse.Namespace, name: str) -> int:
    try:
        try:
            return int(args.run(args))
        except Exception as exc:
            from paylens.warehouse._open import interrupted

            if interrupted(exc):  # a Ctrl-C that DuckDB took as its own error
                raise KeyboardInterrupt from None
            raise
    except KeyboardInterrupt:
        print(
            f"{name}: interrupted; what was committed is kept, and the next run resumes",
            file=sys.stderr,
        )
        return 130
    except _SETUP_ERRORS as exc:  # what to set up or type differently: exit 2, as usage errors
        print(f"{name}: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # the last net: one line, the real error named
        if args.verbose:
            logging.getLogger("paylens").exception("%s failed", name)
        first = (str(exc).strip().splitlines() or [""])[0]
        print(f"{name}: {type(exc).__name__}: {first}", file=sys.stderr)
        return 1


_EXIT_STATUS = __doc__.split("\n\n")[-1].strip()

#: Errors that say the command cannot run as typed or configured (exit 2, as a usage error):
#: missing settings, a refused argument, no warehouse at the path or another program's file.
_SETUP_ERRORS = (
    errors.ConfigurationError,
    errors.InvalidArgumentError,
    errors.WarehouseNotFoundError,
    errors.WarehouseFileError,
)


def _command(words: Sequence[str]) -> str | None:
    """The command a command line names: its first word that is not an option (the options
    before the command take no value)."""
    return next((word for word in words if not word.startswith("-")), None)


def _refuse(names: tuple[str, ...]) -> None:
    """Refuse, in this process, packages its libraries load when installed and it never uses,
    as if they were not installed (each library supports that; see `_NOT_IN_A_SYNC`)."""
    refused = {name for name in names if name not in sys.modules}
    if refused:
        sys.meta_path.insert(0, _Refused(refused))


def _honour_ctrl_c() -> None:
    """Ctrl-C in a process running `paylens sync`: raised as KeyboardInterrupt as always, and
    also kept (`CTRL_C`), because a statement DuckDB runs on the main thread when the signal
    comes takes the KeyboardInterrupt as its own and may drop it; the sync then stops at its
    next wait instead of running on to the end."""
    import signal

    from paylens.warehouse.sync.run import CTRL_C

    def on_ctrl_c(signum: int, frame: object) -> None:
        CTRL_C.set()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_ctrl_c)


def _report_process() -> None:
    """Set up a process that renders the report: nbformat imports jsonschema, which imports
    `rfc3987_syntax` when it is installed (JupyterLab's jupyter_events asks for it) for its
    `iri` format checker, building that grammar at import: ~1.2 s before the first cell. No
    notebook schema uses that format; blocked here, jsonschema goes without that checker."""
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]


#: What no `paylens sync` loads: httpx's command line (its `cli` extra: click, rich, pygments,
#: ~0.05 s of imports), which `import httpx` loads when it is installed.
_NOT_IN_ANY_SYNC = ("click", "rich", "pygments")
#: What a `paylens sync` against a service (not `--sandbox`) does not load either: pandas,
#: which pyarrow imports (a third of a second or more) merely to ask whether each list it
#: converts is a pandas object; numpy, which pyarrow loads when present (~0.1 s, and
#: OpenBLAS's threads spinning beside the sync), though a sync converts no array; trio, which
#: httpcore loads for async code a sync does not run.
_NOT_IN_A_SYNC = ("pandas", "numpy", "trio")


class _Refused:
    """An import finder refusing some packages (their importers then read "not installed")."""

    def __init__(self, names: set[str]) -> None:
        self.names = names

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name.partition(".")[0] in self.names:
            raise ImportError(f"paylens sync does not use {name}: it is not loaded")


def _exit_now(code: int) -> None:
    """Leave once the file is committed and closed: output flushed, the interpreter's teardown
    of DuckDB, Arrow and the thread pools skipped."""
    import os

    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
