"""The `paylens` command: each subcommand is a thin call of a public function.

paylens sandbox serve --port 8765 --seed 0 --transactions 100000
paylens demo
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence

from paylens._version import __version__


def _sandbox_serve(args: argparse.Namespace) -> int:
    from paylens.sandbox import Sandbox

    started = time.perf_counter()
    sandbox = Sandbox(seed=args.seed, transactions=args.transactions, scenarios=args.scenarios)
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
    """The main job against the embedded sandbox: serve it on loopback, pull every transaction
    through the typed client, and print headline figures per currency."""
    from paylens import Client
    from paylens.sandbox import Sandbox

    started = time.perf_counter()
    sandbox = Sandbox(seed=args.seed, transactions=args.transactions)
    with (
        sandbox.serve() as server,
        Client(server.base_url, sandbox.client_id, sandbox.client_secret) as client,
    ):
        print(f"paylens {__version__} — SANDBOX DATA from {server.base_url}")
        by_type: Counter[str] = Counter()
        by_status: Counter[str] = Counter()
        sent: defaultdict[str, int] = defaultdict(int)
        decimals: dict[str, int] = {}
        pages = 0
        for page in client.transactions.list(sort_order="asc").pages():
            pages += 1
            for tx in page.data:
                by_type[str(tx.type)] += 1
                by_status[str(tx.status)] += 1
                amount = getattr(tx, "sent_amount", None)
                if tx.type == "OUTGOING" and amount is not None and str(tx.status) == "COMPLETED":
                    sent[amount.currency.code] += amount.amount
                    decimals[amount.currency.code] = amount.currency.decimals or 0
        elapsed = time.perf_counter() - started
        print(f"pulled {sum(by_type.values()):,} transactions in {pages:,} pages, {elapsed:.1f}s")
        print("by type:   " + ", ".join(f"{k} {v:,}" for k, v in sorted(by_type.items())))
        print("by status: " + ", ".join(f"{k} {v:,}" for k, v in by_status.most_common()))
        print("completed outgoing volume sent, per currency (top 8):")
        for code, minor in sorted(sent.items(), key=lambda kv: -kv[1])[:8]:
            d = decimals[code]
            major = f"{minor // 10**d:,}" + (f".{minor % 10**d:0{d}d}" if d else "")
            print(f"  {code} {major}")
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
    serve.set_defaults(run=_sandbox_serve)

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

    demo = commands.add_parser("demo", help="the main job against the embedded sandbox")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--transactions", type=int, default=20_000)
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
