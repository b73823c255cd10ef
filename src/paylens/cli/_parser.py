"""The command line's parser: every option with its help and default, usage mistakes in one
line."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any, NoReturn

from paylens._version import __version__
from paylens.connection import DEFAULT_DB, SANDBOX_DB, SANDBOX_TRANSACTIONS

from ._commands import (
    _BULK,
    CatalogueNames,
    LibraryDefault,
    _bulk,
    _close,
    _demo,
    _export,
    _publish,
    _report,
    _revoke_sessions,
    _sandbox_advance,
    _sandbox_serve,
    _sync,
    _sync_wallets,
    _webhooks_serve,
)

#: How every command exits, shown under `--help`.
EXIT_STATUS = (
    "Exit status: 0 done; 1 failed; 2 the command cannot run as typed or configured (a usage "
    "error, missing PAYLENS_* variables, no warehouse or one never synced); 130 interrupted."
)
#: How a bulk action exits, shown under its `--help`.
BULK_EXIT_STATUS = (
    "Exit status: 0 every item ended as planned; 3 done, the others refused for good by the "
    "service (its decision, e.g. not_cancellable past the bank's window: not a failure); 1 "
    "failed (an error, an outcome not known, or the confirmation declined); 2 the command "
    "cannot run as typed or configured (a usage error, missing PAYLENS_* variables, no "
    "warehouse); 130 interrupted."
)


class _Parser(argparse.ArgumentParser):
    """Usage mistakes in one line naming what was wrong (the usage is a `--help` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _instant(text: str) -> str:
    """A date option's value: an ISO 8601 date (a UTC day), or an instant, UTC unless it names
    its zone (handed on with it); anything else is refused here, before any file is touched.
    A date is handed on as YYYY-MM-DD however ISO 8601 spells it (`20250901`, `2025-W36-1`),
    and an instant only when it is one in UTC too (`9999-12-31T23:59:59-12:00` is not)."""
    from datetime import UTC, date, datetime

    value = text.strip()
    try:
        return date.fromisoformat(value).isoformat()  # a date: the command reads that UTC day
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a date (YYYY-MM-DD) or an ISO 8601 instant"
        ) from None
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    try:
        moment.astimezone(UTC)
    except OverflowError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is outside the years 1 to 9999 once in UTC"
        ) from None
    return moment.isoformat()


def _whole(least: int, most: int | None = None) -> Callable[[str], int]:
    """An option's whole number from `least` (to `most`), refused here otherwise: a size,
    a port or a count that no command can use is a usage error, not a failure later."""

    def whole(text: str) -> int:
        try:
            number = int(text)
        except ValueError:
            number = None
        if number is None or number < least or (most is not None and number > most):
            span = f"from {least} to {most}" if most is not None else f"{least} or more"
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number {span}")
        return number

    return whole


def _amount(least: float, most: float | None = None) -> Callable[[str], float]:
    """An option's finite number from `least` (to `most`), refused here otherwise (nan, inf)."""

    def amount(text: str) -> float:
        try:
            number = float(text)
        except ValueError:
            number = math.nan
        if not (least <= number <= (math.inf if most is None else most)) or math.isinf(number):
            span = f"from {least:g} to {most:g}" if most is not None else f"{least:g} or more"
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number {span}")
        return number

    return amount


def _positive(text: str) -> float:
    """A rate: a finite number more than 0."""
    number = _amount(0.0)(text)
    if number == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number more than 0")
    return number


#: The hours `paylens sandbox advance` may jump (a `timedelta` holds under a billion days).
MAX_HOURS = 999_999_999 * 24.0


#: Each command's line in `paylens --help`.
_HELPS = {
    "sandbox": "the embedded simulator of the service",
    "serve": "serve a sandbox over HTTP on loopback and print the PAYLENS_* lines to export",
    "advance": "move a served sandbox's clock ahead (PAYLENS_* variables)",
    "webhooks": "the service's webhooks: verified, stored once beside the warehouse",
    "webhooks serve": "receive the service's webhooks at /webhooks (prints its URL when ready)",
    "sync": "bring a warehouse file in step with the service (PAYLENS_* variables)",
    "cancel": "cancel pending ACH and wire transfers selected from the warehouse",
    "approve": "approve payments waiting for platform approval, selected from the warehouse",
    "reject": "reject payments waiting for platform approval, selected from the warehouse",
    "confirm-receipt": "confirm receipt delivery of transactions selected from the warehouse",
    "sync-wallets": "take the inventory of wallet credentials and sessions (PAYLENS_* "
    "variables), which revoke-sessions selects from",
    "revoke-sessions": "revoke wallet sessions selected from the warehouse's inventory "
    "(sync-wallets)",
    "close": "close a month: store its P&L snapshot in the warehouse (a closed month never "
    "moves) and print it as JSON",
    "publish": "publish a warehouse's tables as Iceberg tables in a SQL catalog (team tables)",
    "report": "run the report notebook over a warehouse and write it as HTML",
    "export": "write an analysis helper's table or a closed month's tables to .csv, .parquet "
    "or .xlsx",
    "demo": "the main job on the embedded sandbox: sync, report, headline figures",
}


def _command(
    parent: Any,  # what add_subparsers returned
    name: str,
    run: Callable[[argparse.Namespace], int] | None,
    *,
    key: str | None = None,  # its line in _HELPS, when not its name (`webhooks serve`)
    **options: Any,
) -> argparse.ArgumentParser:
    """A subcommand that runs `run` (None: a group of subcommands), its help with defaults."""
    options.setdefault("epilog", EXIT_STATUS if run is not None else None)
    command: argparse.ArgumentParser = parent.add_parser(
        name, help=_HELPS[key or name], formatter_class=_Formatter, **options
    )
    if run is not None:
        command.set_defaults(run=run)
    return command


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
        type=_whole(0),
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


def _file_name(text: str) -> str:
    """A file's name, refused here when empty (`--db ""` named the current folder) or in a
    folder that does not exist: a mistyped folder would start a new warehouse and a full sync.
    Only the defaults' folder (`data/`) is made when missing."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is an empty file name")
    from pathlib import Path

    folder = Path(text).parent
    if text not in (DEFAULT_DB, SANDBOX_DB) and not folder.is_dir():
        what = "is a file, not a folder" if folder.exists() else "does not exist"
        raise argparse.ArgumentTypeError(
            f"{text!r}: the folder {str(folder)!r} {what} (a mistyped path? create the"
            " folder first if it is meant)"
        )
    return text


def _db_option(
    parser: argparse.ArgumentParser, help: str = "warehouse file", default: str = DEFAULT_DB
) -> None:
    parser.add_argument("--db", type=_file_name, default=default, help=help)


def _wait_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--wait",
        type=float,
        default=0.0,
        help="seconds to wait for another writer of the file to finish (0: fail at once)",
    )


def _bulk_options(parser: argparse.ArgumentParser, noun: str, table: str, example: str) -> None:
    """What every bulk command takes: the selection, dry run or apply, and the sandbox."""
    _db_option(parser)
    parser.add_argument(
        "--where", required=True, help=f"one SQL condition over {table}, e.g. {example}"
    )
    parser.add_argument("--concurrency", type=_whole(1), default=4, help="requests at once")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--dry-run", action="store_true", help="show what would be sent; send and write nothing"
    )
    mode.add_argument("--apply", action="store_true", help=f"send the {noun} requests")
    parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    parser.add_argument(
        "--resend-unknown",
        action="store_true",
        help="send again the items whose earlier request has no known outcome and whose record "
        "shows no effect yet (only once you have checked at the service that it never got them)",
    )
    parser.add_argument(
        "--max-items",
        type=_whole(0),
        help="act on at most this many eligible items, in plan order; the others are "
        "skipped_over_cap (default: no cap)",
    )
    parser.add_argument(
        "--max-total-minor",
        type=_currency_cap,
        action="append",
        metavar="CODE=MINOR_UNITS",
        help="act on items of currency CODE while their amounts add up to at most MINOR_UNITS "
        "(e.g. USD=500000 is 5,000.00 USD); once per currency (default: no cap)",
    )
    parser.add_argument(
        "--rate-limit", type=_positive, help="requests per second sent (default: no limit)"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    _wait_option(parser)
    _sandbox_options(parser)
    _client_options(parser)


def _currency_cap(text: str) -> tuple[str, int]:
    """`--max-total-minor`'s CODE=MINOR_UNITS: a currency code and a whole number, 0 or more."""
    code, equals, limit = text.partition("=")
    if not equals or not code.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not CODE=MINOR_UNITS, e.g. USD=500000")
    return code.strip(), _whole(0)(limit.strip())


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="paylens",
        description="paylens: the payments and wallet account service's data, analysis and "
        "bulk actions",
        epilog=EXIT_STATUS,
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
    for add in (
        _add_sandbox,
        _add_sync,
        _add_bulk_actions,
        _add_publish,
        _add_sync_wallets,
        _add_revoke_sessions,
        _add_report,
        _add_close,
        _add_export,
        _add_demo,
        _add_webhooks,
    ):
        add(commands)
    return parser


def _add_sandbox(commands: Any) -> None:
    """The embedded sandbox: serve, advance."""
    sandbox = _command(commands, "sandbox", None)
    sandbox_commands = sandbox.add_subparsers(
        dest="sandbox_command", required=True, metavar="{serve,advance}"
    )
    serve = _command(sandbox_commands, "serve", _sandbox_serve)
    serve.add_argument(
        "--port", type=_whole(0, 65535), default=8765, help="port to listen on (0: any free)"
    )
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        help="loopback address to listen on (127.0.0.0/8, ::1 or localhost; others are refused)",
    )
    serve.add_argument("--seed", type=int, default=0, help="seed of the generated data")
    serve.add_argument(
        "--transactions", type=_whole(0), default=SANDBOX_TRANSACTIONS, help="sandbox size"
    )
    serve.add_argument(
        "--latency", type=_amount(0.0), default=0.0, help="seconds added to each request"
    )
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
        type=_whole(0),
        default=None,
        help="planted rows per scenario (pending transfers in and past their window, approvals)"
        " (default: scaled to --transactions)",
    )
    serve.add_argument(
        "--rate-429", type=_amount(0.0, 1.0), default=0.0, help="fraction of requests answered 429"
    )
    serve.add_argument(
        "--rate-limit", type=_positive, help="requests per second answered (default: no limit)"
    )
    serve.add_argument(
        "--clock",
        choices=("wall", "fixed"),
        default="wall",
        help="wall: history ends now and time follows the wall clock; fixed: time moves only "
        "with `paylens sandbox advance` (reproducible)",
    )
    serve.add_argument(
        "--webhook-url",
        help="post every transition of the sandbox there as the interface's signed webhook "
        "(its public key is written to --webhook-public-key-file, printed as "
        "PAYLENS_WEBHOOK_PUBLIC_KEY_FILE) (default: none, no webhooks are sent)",
    )
    serve.add_argument(
        "--webhook-public-key-file",
        help="where to write the webhooks' public key (PEM), derived from --seed: the same on "
        "every start (default: paylens-sandbox-seed<SEED>-webhook-key.pem in the temporary "
        "directory)",
    )
    advance = _command(sandbox_commands, "advance", _sandbox_advance)
    advance.add_argument(
        "--hours", type=_amount(0.0, MAX_HOURS), required=True, help="how far to jump ahead"
    )


def _add_sync(commands: Any) -> None:
    """`paylens sync`."""
    sync = _command(commands, "sync", _sync)
    _db_option(sync)
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
        choices=CatalogueNames(),
        default=None,
        metavar="RESOURCE",
        help="sync only these (%(choices)s); those named beside transactions are re-read "
        "whole whatever their age (default: all)",
    )
    sync.add_argument(
        "--concurrency",
        type=int,
        default=LibraryDefault("concurrency"),
        help="time slices read at once at most; fewer while the reading is ahead of the "
        "commits (default: %(default)s)",
    )
    sync.add_argument(
        "--rate-limit", type=float, help="requests per second sent (default: no limit)"
    )
    sync.add_argument("--quiet", action="store_true", help="no progress bar")
    sync.add_argument(
        "--verify-syncs",
        type=int,
        default=LibraryDefault("verify_syncs"),
        help="every stored record is re-read at least once every this many syncs "
        "(default: %(default)s)",
    )
    sync.add_argument(
        "--verify-syncs-with-events",
        type=int,
        default=LibraryDefault("verify_syncs_with_events"),
        help="the same while webhook receivers were up without a gap since the previous sync "
        "(default: %(default)s)",
    )
    _wait_option(sync)
    _client_options(sync)


def _add_publish(commands: Any) -> None:
    """`paylens publish`."""
    publish = _command(commands, "publish", _publish)
    _db_option(publish)
    publish.add_argument(
        "--catalog",
        required=True,
        help="the SQL catalog's database URL: postgresql://user@host/db, or sqlite:///path.db",
    )
    publish.add_argument("--namespace", required=True, help="the namespace of the tables")
    publish.add_argument(
        "--location",
        default=None,
        help="where new tables put their data files, a directory or a URL (default: none, "
        "enough once the tables exist)",
    )
    _sandbox_options(publish, "instead of --db: a warehouse synced from the embedded sandbox")


def _add_bulk_actions(commands: Any) -> None:
    """`paylens cancel|approve|reject|confirm-receipt`."""
    for command, action in _BULK.items():
        bulk = _command(commands, command, _bulk, epilog=BULK_EXIT_STATUS)
        _bulk_options(bulk, action.noun, "the transactions table", "\"status = 'PENDING'\"")
        if "reason" in action.body:
            bulk.add_argument(
                "--reason", help=f"free-text reason sent with each {action.noun} (default: none)"
            )


def _add_sync_wallets(commands: Any) -> None:
    """`paylens sync-wallets`."""
    wallets = _command(commands, "sync-wallets", _sync_wallets)
    _db_option(wallets)
    wallets.add_argument(
        "--accounts",
        nargs="+",
        metavar="ACCOUNT_ID",
        help="these wallet accounts only (default: every embedded wallet account)",
    )
    wallets.add_argument("--concurrency", type=_whole(1), default=8, help="accounts read at once")
    _wait_option(wallets)
    _sandbox_options(wallets)
    _client_options(wallets)


def _add_revoke_sessions(commands: Any) -> None:
    """`paylens revoke-sessions`."""
    revoke = _command(commands, "revoke-sessions", _revoke_sessions)
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


def _add_report(commands: Any) -> None:
    """`paylens report`."""
    report = _command(commands, "report", _report)
    _db_option(report, "warehouse file (read only)")
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
    report.add_argument(
        "--out",
        default="reports",
        help="a folder (the report is paylens-report_{period}_run-{date}.html in it), or a "
        "file name template ending in .html with {date} (the run's UTC day), {time} and "
        "{period}, e.g. reports/paylens-{date}.html",
    )
    report.add_argument(
        "--reference-rates",
        metavar="CSV",
        help="mid-market rates (date, sent_currency, received_currency, mid_rate) for the FX"
        " margin (default: the sandbox's own for sandbox data, else the margin is unknown)",
    )


def _add_close(commands: Any) -> None:
    """`paylens close`."""
    close = _command(commands, "close", _close)
    _db_option(close, "warehouse file (the snapshot is written into it)")
    _sandbox_options(close, "instead of --db: a warehouse synced from the embedded sandbox")
    close.add_argument("--month", required=True, help="the month to close, YYYY-MM (UTC)")
    close.add_argument(
        "--reference-rates",
        metavar="CSV",
        help="mid-market rates (date, sent_currency, received_currency, mid_rate) for the FX"
        " margin (default: the margin is unknown and counted in fx_margin_unknown_count)",
    )


#: What `paylens export --what` names: an analysis helper, or `closed:YYYY-MM`.
EXPORTABLE = (
    "platform_pnl",
    "fees_collected",
    "fee_breakdown",
    "refunds_owed",
    "balance_rollforward",
)


def _exportable(text: str) -> str:
    if text in EXPORTABLE or text.startswith("closed:"):
        return text
    choices = ", ".join([*EXPORTABLE, "closed:YYYY-MM"])
    raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from {choices})")


def _add_export(commands: Any) -> None:
    """`paylens export`."""
    export = _command(commands, "export", _export)
    _db_option(export, "warehouse file (read only)")
    _sandbox_options(export, "instead of --db: a warehouse synced from the embedded sandbox")
    export.add_argument(
        "--what",
        required=True,
        type=_exportable,
        metavar="{" + ",".join(EXPORTABLE) + ",closed:YYYY-MM}",
        help="an analysis helper's table, or a closed month's (figures, transfers, accruals;"
        " close it first with `paylens close`)",
    )
    export.add_argument(
        "--out",
        required=True,
        type=_file_name,
        help="the file: .csv or .parquet (several tables: a folder of that name), .xlsx (a sheet"
        " per table, a provenance sheet, money in major units beside the minor)",
    )
    export.add_argument(
        "--as-of",
        type=_instant,
        help="refunds_owed: the instant refunds are aged to (UTC date or instant) (default: now)",
    )


def _add_demo(commands: Any) -> None:
    """`paylens demo`."""
    demo = _command(commands, "demo", _demo)
    demo.add_argument("--seed", type=int, default=0, help="sandbox seed")
    demo.add_argument(
        "--transactions", type=_whole(0), default=SANDBOX_TRANSACTIONS, help="sandbox size"
    )
    _db_option(demo, "warehouse file of the sandbox's data (never the service's)", SANDBOX_DB)
    demo.add_argument(
        "--out", default="reports", help="a folder or a file name template, as for `report`"
    )
    demo.add_argument(
        "--currencies", type=_whole(0), default=6, help="currencies shown in the headline figures"
    )


def _add_webhooks(commands: Any) -> None:
    """`paylens webhooks serve`."""
    webhooks = _command(commands, "webhooks", None)
    webhooks_commands = webhooks.add_subparsers(
        dest="webhooks_command", required=True, metavar="{serve}"
    )
    serve = _command(webhooks_commands, "serve", _webhooks_serve, key="webhooks serve")
    _db_option(serve, "warehouse file beside which the event store is kept (never opened)")
    serve.add_argument(
        "--public-key",
        action="append",
        required=True,
        metavar="PEM_FILE",
        help="the service's P-256 public key (PEM); repeat it during a key rotation",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument(
        "--port", type=_whole(0, 65535), default=8780, help="port to listen on (0: any free)"
    )
    serve.add_argument(
        "--approve-where",
        metavar="CONDITION",
        default=None,
        help="approve incoming payments on approval rails where this SQL condition over the "
        "transactions table holds, reject the others (as `paylens approve --where` selects) "
        "(default: none; such payments are answered 202 and nothing is decided)",
    )
    serve.add_argument(
        "--max-body-bytes",
        type=_whole(1),
        default=None,
        help="larger bodies are refused (413) (default: 1 MiB, paylens.webhooks.MAX_BODY_BYTES)",
    )
