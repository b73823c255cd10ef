"""The commands: each a thin call of the public function of the same name, with the
same options (the parser is `_parser`)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast, overload

from paylens import errors, ops
from paylens._version import __version__

if TYPE_CHECKING:
    from paylens.client import Client
    from paylens.ops import Plan
    from paylens.sandbox import Sandbox
    from paylens.warehouse import SyncKeywords

#: Errors that say the command cannot run as typed or configured (exit 2, as a usage error):
#: missing settings, a refused argument, no warehouse at the path or another program's file.
_SETUP_ERRORS = (
    errors.ConfigurationError,
    errors.InvalidArgumentError,
    errors.WarehouseNotFoundError,
    errors.WarehouseEmptyError,
    errors.WarehouseFileError,
    errors.WarehouseSourceError,
)


def served_secret(seed: int) -> str:
    """The client secret `paylens sandbox serve --seed SEED` serves: the same on every start
    for one seed, so exported PAYLENS_* variables (a notebook's, a cron line's) stay valid
    after a restart. Derived from the seed, not random: the served sandbox listens on loopback
    only and holds generated data, so the secret guards no one's data; it is never stored."""
    import hashlib

    digest = hashlib.sha256(f"paylens sandbox serve, seed {seed}".encode()).hexdigest()
    return f"sk_sandbox_{digest[:32]}"


def _write_webhook_key(sandbox: Sandbox, args: argparse.Namespace) -> str:
    """Write the served sandbox's webhook public key (PEM) and return the file's path."""
    import tempfile
    from pathlib import Path

    default = Path(tempfile.gettempdir()) / f"paylens-sandbox-seed{args.seed}-webhook-key.pem"
    path = Path(args.webhook_public_key_file or default)
    path.write_text(sandbox.webhook_public_key_pem)
    return str(path)


def _sandbox_serve(args: argparse.Namespace) -> int:
    from paylens.sandbox import Sandbox
    from paylens.sandbox.wire.server import check_loopback_host

    check_loopback_host(args.host)  # refused before the sandbox is generated
    started = time.perf_counter()
    from paylens.sandbox.wire.webhooks import seeded_key

    sandbox = Sandbox(
        seed=args.seed,
        transactions=args.transactions,
        client_secret=served_secret(args.seed),
        scenarios=args.scenarios,
        clock=args.clock,
        profile=args.profile,
        webhook_url=args.webhook_url,
        webhook_key=seeded_key(args.seed),
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
    lines = sandbox.env(server)
    if args.webhook_url is not None:
        try:
            lines["PAYLENS_WEBHOOK_PUBLIC_KEY_FILE"] = _write_webhook_key(sandbox, args)
        except OSError as exc:
            print(
                f"paylens sandbox serve: cannot write the webhook public key: {exc}",
                file=sys.stderr,
            )
            server.stop()
            return 1
    for name, value in lines.items():
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
        page = render_report(
            _data_file(args, progress=progress),
            progress=progress,
            **_same_names(args, "start", "end", "currency", "out", "reference_rates"),
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


def _close(args: argparse.Namespace) -> int:
    """`paylens close`: close a month and print its stored snapshot (JSON). Exit 0 done, 2 when
    there is no warehouse or the arguments are wrong. Closing a closed month prints the stored
    snapshot unchanged."""
    from paylens import PaylensError
    from paylens.close import close_month
    from paylens.warehouse import Warehouse

    try:
        rates = None
        if args.reference_rates is not None:
            import pandas as pd

            rates = pd.read_csv(args.reference_rates)
        with Warehouse(_data_file(args), create=False) as wh:
            snapshot = close_month(wh, args.month, reference_rates=rates)
    except (OSError, PaylensError) as exc:
        print(f"paylens close: {exc}", file=sys.stderr)
        return 2
    print(snapshot)
    return 0


def _export(args: argparse.Namespace) -> int:
    """`paylens export`: one analysis helper's table, or a closed month's tables, written by
    `analysis.export`; prints the path. Exit 0 done, 2 when there is no warehouse, the month
    is not closed or the arguments are wrong."""
    from paylens import PaylensError, analysis
    from paylens.close import closed_tables
    from paylens.warehouse import Warehouse

    try:
        with Warehouse(_data_file(args), create=False) as wh:
            if args.what.startswith("closed:"):
                frames: Any = closed_tables(wh, args.what.removeprefix("closed:"))
            elif args.what == "refunds_owed":
                now = datetime.now(UTC) if args.as_of is None else args.as_of
                frames = analysis.refunds_owed(wh, as_of=now)
            else:
                frames = getattr(analysis, args.what)(wh)
            out = analysis.export(frames, args.out)
    except (OSError, PaylensError) as exc:
        print(f"paylens export: {exc}", file=sys.stderr)
        return 2
    print(out)
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
        keywords = _sync_keywords(args)
        keywords["progress"] = not args.quiet and sys.stderr.isatty()
        report = sync_file(args.db, client, wait=args.wait, **keywords)
    except _SETUP_ERRORS as exc:
        print(f"paylens sync: {exc}", file=sys.stderr)
        return 2
    except PaylensError as exc:
        print(f"paylens sync: failed: {for_a_shell(exc, args)}", file=sys.stderr)
        return 1
    print(report)
    return 0


def _publish(args: argparse.Namespace) -> int:
    """`paylens publish`: the warehouse's tables into the team's Iceberg catalog (after each
    scheduled sync). Exit 0 done (nothing changed included), 1 failed, 2 no warehouse."""
    from paylens import PaylensError, Warehouse

    try:
        with Warehouse(_data_file(args), read_only=True) as wh:
            report = wh.publish(args.catalog, args.namespace, location=args.location)
    except _SETUP_ERRORS as exc:
        print(f"paylens publish: {exc}", file=sys.stderr)
        return 2
    except PaylensError as exc:
        print(f"paylens publish: failed: {exc}", file=sys.stderr)
        return 1
    if not report.changed:
        print(f"nothing changed since the last publish (sync run {report.run_id})")
    else:
        rows = sum(t["rows"] for t in report.tables.values())
        print(
            f"published sync run {report.run_id}: {len(report.tables)} tables, "
            f"{rows:,} rows rewritten, {report.bytes_written:,} bytes written"
        )
    return 0


def for_a_shell(exc: Exception, args: argparse.Namespace) -> str:
    """An error's message as a shell user reads it. A writer lock's refusal names the holder
    and says what a shell can do (the library's own message advises Python: `wait=`,
    `read_only=True`); any other error is its message."""
    if isinstance(exc, errors.WarehouseLockedError) and exc.holder is not None:
        then = (
            ", or run this again with --wait SECONDS to wait for it"
            if getattr(args, "wait", None) is not None
            else ""
        )
        return f"the warehouse {exc.path} is being written by {exc.holder}: let it finish{then}"
    return str(exc)


def _sync_keywords(args: argparse.Namespace) -> SyncKeywords:
    """The sync's keywords (`SyncKeywords`, the library's one list) the command line gives;
    those left to the library's default (`LibraryDefault`) are not handed on."""
    from paylens.warehouse import SyncKeywords

    given = {
        name: getattr(args, name)
        for name in SyncKeywords.__optional_keys__
        if hasattr(args, name) and not isinstance(getattr(args, name), LibraryDefault)
    }
    return cast("SyncKeywords", given)


class LibraryDefault:
    """An option left to the library's default (`SyncOptions`'), shown in the help by its
    value: read when the help is shown, so that building the parser loads no warehouse."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __str__(self) -> str:
        from paylens.warehouse import SyncOptions

        return str(getattr(SyncOptions, self.name))


class CatalogueNames(Sequence[str]):
    """The resources a sync reads (the catalogue's, `paylens.warehouse.RESOURCES`), read when
    first asked for, so that building the parser loads no warehouse."""

    def _names(self) -> tuple[str, ...]:
        from paylens.warehouse import RESOURCES

        return tuple(RESOURCES)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return self._names()[index]

    def __len__(self) -> int:
        return len(self._names())

    def __contains__(self, value: object) -> bool:
        return value in self._names()


def _data_file(args: argparse.Namespace, *, progress: bool = False) -> str:
    """The warehouse file a data command reads: `--db`, or with `--sandbox` a file synced from
    the embedded sandbox of `--seed` and `--transactions`."""
    if not args.sandbox:
        return str(args.db)
    from paylens.connection import sandbox_warehouse

    return str(sandbox_warehouse(seed=args.seed, transactions=args.transactions, progress=progress))


def _same_names(args: argparse.Namespace, *names: str) -> dict[str, Any]:
    """The options that a command hands on under the library's own names (the CLI mirrors
    the library: `--rate-limit` is `rate_limit=`)."""
    return {name: getattr(args, name) for name in names}


#: The bulk actions a shell can run, as `paylens.ops` declares them: command -> action.
_BULK = {name.replace("_", "-"): action for name, action in ops.ACTIONS.items()}


def _client(args: argparse.Namespace) -> Client:
    """The embedded sandbox's client with `--sandbox`, else the PAYLENS_* service; either with
    the options of `_client_options`."""
    import os

    from paylens import Client, ConfigurationError
    from paylens.client import ENV_BASE_URL, ENV_CLIENT_ID, ENV_CLIENT_SECRET

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
    when every item ended as planned, 3 when the others were refused for good by the service
    (e.g. past the bank's window), 1 otherwise (or when the operator declined), 2 when not
    configured. A dry run opens the warehouse read-only and needs no credentials."""
    from paylens import ConfigurationError
    from paylens.warehouse import Warehouse

    action = _BULK[args.command]
    body = {name: getattr(args, name) for name in action.body if getattr(args, name, None)}
    try:
        client = None if args.dry_run else _client(args)
    except ConfigurationError as exc:
        print(f"paylens {args.command}: {exc}", file=sys.stderr)
        return 2
    with Warehouse(_file(args.db), read_only=args.dry_run, wait=args.wait, create=False) as wh:
        plan = getattr(ops, f"plan_{action.name}")(wh, args.where, **body)
        return _review_and_apply(args, plan, client, action.noun)


def _review_and_apply(
    args: argparse.Namespace, plan: Plan, client: Client | None, noun: str
) -> int:
    """Print the plan; with --dry-run show what would be sent, else confirm and apply; print
    each item's outcome and their counts. Exit 0 when every item ended as planned."""
    caps = _same_names(args, "max_items", "rate_limit") | {
        "max_total_minor": _currency_caps(args.max_total_minor)
    }
    print(plan)
    if not len(plan.eligible):
        print(f"nothing to {args.command}")
        return 0
    if args.dry_run:
        result = plan.apply(client, dry_run=True, progress=False, **caps)  # type: ignore[arg-type]
    else:
        if not args.yes and not _confirm(f"send {len(plan.eligible):,} {noun} request(s)?"):
            print("not applied")
            print(
                f"paylens {args.command}: not applied: nothing was sent (pass --yes to apply "
                "without being asked); exit 1",
                file=sys.stderr,
            )
            return 1
        assert client is not None
        result = plan.apply(
            client,
            concurrency=args.concurrency,
            progress=not args.quiet and sys.stderr.isatty(),
            resend_unknown=args.resend_unknown,
            **caps,
        )
    print(result.to_string(index=False, max_rows=100))
    print(", ".join(f"{k} {v:,}" for k, v in result["outcome"].value_counts().items()))
    if result.attrs["all_as_planned"]:
        return 0
    ended = "would end" if args.dry_run else "ended"
    planned = "would_send" if args.dry_run else plan.action.verb
    others = int((~result["outcome"].isin(["skipped", planned])).sum())
    if others and others == result.attrs["refused_for_good"]:
        print(
            f"paylens {args.command}: done; {others:,} refused for good by the service (its "
            "decision, e.g. past the bank's window; see the outcomes above); exit 3",
            file=sys.stderr,
        )
        return 3
    print(
        f"paylens {args.command}: not every item {ended} as planned (see the outcomes above); "
        "exit 1",
        file=sys.stderr,
    )
    return 1


def _currency_caps(caps: list[tuple[str, int]] | None) -> dict[str, int] | None:
    """`--max-total-minor`'s pairs as `apply_plan`'s mapping; a currency named twice (in any
    case) is refused, as `apply_plan` refuses it, never kept once."""
    if caps is None:
        return None
    from paylens.errors import InvalidArgumentError

    found: dict[str, int] = {}
    for code, limit in caps:
        if code.upper() in (known.upper() for known in found):
            raise InvalidArgumentError("max_total_minor", f"{code.upper()} is capped twice")
        found[code] = limit
    return found


def _revoke_sessions(args: argparse.Namespace) -> int:
    """`paylens revoke-sessions`: plan, print, confirm, apply `ops.plan_revoke_sessions` over
    the wallet inventory (`wh.sync_wallets`). Each revoke is signed by the session key whose
    private key (hex) is in the variable `--key-env`. A dry run opens the warehouse read-only
    and needs neither credentials nor a key. Exit codes as `paylens cancel`."""
    import os

    from paylens import ConfigurationError, SessionKey
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

    with Warehouse(_file(args.db), read_only=args.dry_run, wait=args.wait, create=False) as wh:
        plan = ops.plan_revoke_sessions(wh, args.where, signer=signer or unsigned)
        return _review_and_apply(args, plan, client, "session revoke")


def _sync_wallets(args: argparse.Namespace) -> int:
    """`paylens sync-wallets`: take the wallet inventory (`wh.sync_wallets`) that
    `paylens revoke-sessions` selects from. Exit 0, 1 when it failed, 2 when not configured."""
    from paylens.warehouse import Warehouse

    client = _client(args)
    with Warehouse(_file(args.db), wait=args.wait) as wh:
        found = wh.sync_wallets(client, args.accounts, concurrency=args.concurrency)
    print(
        f"wallet inventory of {args.db}: "
        + ", ".join(f"{count:,} {what}" for what, count in found.items())
    )
    return 0


def _file(db: str) -> str:
    """The warehouse file `--db` names. `:memory:` is a file's name here, as it is to
    `paylens sync` (which writes `./:memory:`), not the library's empty in-memory database: a
    bulk action on it would select from nothing and exit 0."""
    from pathlib import Path

    from paylens.warehouse import MEMORY

    return str(Path(db).absolute()) if db == MEMORY else db


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


def _webhooks_serve(args: argparse.Namespace) -> int:
    """Serve the webhook receiver until interrupted; one line on stdout, its URL, once ready."""
    from pathlib import Path

    from paylens.webhooks import approve_where, serve

    folder = Path(args.db).resolve().parent
    if not folder.is_dir():
        raise errors.InvalidArgumentError(
            "db", f"{folder} is no folder: the event store is kept beside the warehouse file"
        )
    policy = None if args.approve_where is None else approve_where(args.approve_where)

    def ready(url: str) -> None:
        print(url, flush=True)

    try:
        serve(
            args.db,
            public_keys=[Path(p) for p in args.public_key],
            host=args.host,
            port=args.port,
            approve=policy,
            ready=ready,
            **({} if args.max_body_bytes is None else {"max_body_bytes": args.max_body_bytes}),
        )
    except OSError as exc:
        print(
            f"paylens webhooks serve: cannot listen on {args.host} port {args.port}: "
            f"{exc.strerror or exc} (choose another with --port, or 0 for any free port)",
            file=sys.stderr,
        )
        return 1
    return 0
