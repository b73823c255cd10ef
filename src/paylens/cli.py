"""The `paylens` command: each subcommand is a thin call of a public function.

paylens sandbox serve --port 8765 --seed 0 --transactions 100000
paylens sandbox advance --hours 24
paylens demo
paylens report --db data/paylens.duckdb --start 2025-09-01 --end 2025-10-01 --out reports/
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence

from paylens._version import __version__


def _sandbox_serve(args: argparse.Namespace) -> int:
    from paylens.sandbox import Sandbox

    started = time.perf_counter()
    sandbox = Sandbox(
        seed=args.seed, transactions=args.transactions, scenarios=args.scenarios, clock=args.clock
    )
    sandbox.faults.configure(
        latency=args.latency, rate_429=args.rate_429, rate_limit=args.rate_limit
    )
    server = sandbox.serve(port=args.port, host=args.host)
    for name, value in sandbox.env(server).items():
        print(f"{name}={value}")
    print(
        f"# paylens sandbox (SANDBOX DATA): {args.transactions:,} transactions, seed {args.seed}, "
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
    try:
        print(sync_file(args.db, sandbox.client(), progress=sys.stderr.isatty()))
        report_started = time.perf_counter()
        page = render_report(args.db, out=args.out)
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
    from paylens.report import ReportError, render_report

    try:
        page = render_report(
            args.db, start=args.start, end=args.end, currency=args.currency, out=args.out
        )
    except (FileNotFoundError, ValueError) as exc:
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
    """`paylens sync`: the scheduled job. Exit 0 on success, 1 when the sync failed, 2 when
    paylens is not configured to reach a service."""
    from paylens import Client, ConfigurationError, PaylensError
    from paylens.warehouse import sync_file

    try:
        if args.sandbox:
            from paylens.sandbox import Sandbox

            client = Sandbox(seed=args.seed, transactions=args.transactions).client()
        else:
            client = Client.from_env()
    except ConfigurationError as exc:
        print(f"paylens sync: {exc}", file=sys.stderr)
        return 2
    try:
        report = sync_file(
            args.db,
            client,
            since=args.since,
            full=args.full,
            concurrency=args.concurrency,
            rate_limit=args.rate_limit,
            progress=not args.quiet and sys.stderr.isatty(),
        )
    except PaylensError as exc:
        print(f"paylens sync: failed: {exc}", file=sys.stderr)
        return 1
    print(report)
    return 0


def _cancel(args: argparse.Namespace) -> int:
    """`paylens cancel`: plan, print, confirm, apply. Exit 0 when every item ended as planned,
    1 otherwise (or when the operator declined), 2 when not configured."""
    from paylens import Client, ConfigurationError, PaylensError, ops
    from paylens.warehouse import Warehouse

    try:
        client = Client.from_env()
    except ConfigurationError as exc:
        print(f"paylens cancel: {exc}", file=sys.stderr)
        return 2
    try:
        with Warehouse(args.db) as wh:
            plan = ops.plan_cancel(wh, args.where, reason=args.reason)
            print(plan)
            if not len(plan.eligible):
                print("nothing to cancel")
                return 0
            if args.dry_run:
                result = plan.apply(client, dry_run=True, progress=False)
            else:
                if not args.yes and not _confirm(
                    f"send {len(plan.eligible):,} cancellation request(s)?"
                ):
                    print("not applied")
                    return 1
                result = plan.apply(
                    client, concurrency=args.concurrency, progress=sys.stderr.isatty()
                )
    except PaylensError as exc:
        print(f"paylens cancel: {exc}", file=sys.stderr)
        return 1
    print(result.to_string(index=False, max_rows=100))
    print(", ".join(f"{k} {v:,}" for k, v in result["outcome"].value_counts().items()))
    return 0 if result.attrs["all_as_planned"] else 1


def _confirm(question: str) -> bool:
    try:
        return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False


def _sandbox_advance(args: argparse.Namespace) -> int:
    """Move a served sandbox's clock ahead (PAYLENS_* variables) and print what changed."""
    from datetime import timedelta

    from paylens.sandbox import advance_served

    changed = advance_served(timedelta(hours=args.hours))
    print(" ".join(f"{name}={count}" for name, count in sorted(changed.items())))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="paylens", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"paylens {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug lines to stderr")
    commands = parser.add_subparsers(dest="command", required=True)

    sandbox = commands.add_parser("sandbox", help="the embedded simulator of the service")
    sandbox_commands = sandbox.add_subparsers(dest="sandbox_command", required=True)
    serve = sandbox_commands.add_parser(
        "serve",
        help="serve a sandbox over HTTP on loopback and print the PAYLENS_* lines to export",
    )
    serve.add_argument("--port", type=int, default=8765)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--seed", type=int, default=0)
    serve.add_argument("--transactions", type=int, default=100_000)
    serve.add_argument("--latency", type=float, default=0.0, help="seconds added to each request")
    serve.add_argument(
        "--scenarios",
        type=int,
        default=None,
        help="planted rows per scenario (pending transfers in and past their window, approvals)",
    )
    serve.add_argument(
        "--rate-429", type=float, default=0.0, help="fraction of requests answered 429"
    )
    serve.add_argument("--rate-limit", type=float, default=None, help="requests per second")
    serve.add_argument(
        "--clock",
        choices=("wall", "fixed"),
        default="wall",
        help="wall: history ends now and time follows the wall clock; fixed: time moves only "
        "with `paylens sandbox advance` (reproducible)",
    )
    serve.set_defaults(run=_sandbox_serve)
    advance = sandbox_commands.add_parser(
        "advance", help="move a served sandbox's clock ahead (PAYLENS_* variables)"
    )
    advance.add_argument("--hours", type=float, required=True, help="how far to jump ahead")
    advance.set_defaults(run=_sandbox_advance)

    sync = commands.add_parser(
        "sync", help="bring a warehouse file in step with the service (PAYLENS_* variables)"
    )
    sync.add_argument("--db", default="data/paylens.duckdb", help="warehouse file")
    sync.add_argument("--since", help="only records created from this date (YYYY-MM-DD)")
    sync.add_argument("--sandbox", action="store_true", help="sync from the embedded sandbox")
    sync.add_argument("--seed", type=int, default=0, help="sandbox seed (with --sandbox)")
    sync.add_argument(
        "--transactions", type=int, default=20_000, help="sandbox size (with --sandbox)"
    )
    sync.add_argument("--full", action="store_true", help="re-read everything")
    sync.add_argument("--concurrency", type=int, default=16)
    sync.add_argument("--rate-limit", type=float, default=None, help="requests per second")
    sync.add_argument("--quiet", action="store_true", help="no progress bar")
    sync.set_defaults(run=_sync)

    cancel = commands.add_parser(
        "cancel", help="cancel pending ACH and wire transfers selected from the warehouse"
    )
    cancel.add_argument("--db", default="data/paylens.duckdb", help="warehouse file")
    cancel.add_argument("--where", required=True, help="SQL filter over the transactions table")
    cancel.add_argument("--reason", help="free-text reason sent with each cancellation")
    cancel.add_argument("--concurrency", type=int, default=4)
    mode = cancel.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--dry-run", action="store_true", help="show what would be sent; send nothing"
    )
    mode.add_argument("--apply", action="store_true", help="send the cancellations")
    cancel.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    cancel.set_defaults(run=_cancel)

    report = commands.add_parser(
        "report", help="run the report notebook over a warehouse and write it as HTML"
    )
    report.add_argument("--db", default="data/paylens.duckdb", help="warehouse file (read only)")
    report.add_argument("--start", help="period start, inclusive (UTC date or instant)")
    report.add_argument("--end", help="period end, exclusive (UTC date or instant)")
    report.add_argument("--currency", help="one currency only (e.g. USD)")
    report.add_argument("--out", default="reports", help="folder for the report")
    report.set_defaults(run=_report)

    demo = commands.add_parser(
        "demo", help="the main job on the embedded sandbox: sync, report, headline figures"
    )
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--transactions", type=int, default=20_000)
    demo.add_argument("--db", default="data/paylens.duckdb", help="warehouse file")
    demo.add_argument("--out", default="reports", help="folder for the report")
    demo.add_argument(
        "--currencies", type=int, default=6, help="currencies shown in the headline figures"
    )
    demo.set_defaults(run=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, stream=sys.stderr)
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
