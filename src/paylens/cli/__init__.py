"""The `paylens` command: each subcommand is a thin call of a public function.

paylens sandbox serve --port 8765 --seed 0 --transactions 10000
paylens sandbox advance --hours 24
paylens demo
paylens report --db data/paylens.duckdb --start 2025-09-01 --end 2025-10-01 --out reports/
paylens cancel|approve|reject|confirm-receipt --where "..." --dry-run
paylens sync-wallets
paylens revoke-sessions --where "..." --dry-run
paylens webhooks serve --db data/paylens.duckdb --public-key service.pem [--approve-where "..."]

Exit status: see `paylens --help` (`_parser.EXIT_STATUS`). The handlers are in `_commands`, the
parser in `_parser`; this module runs a command line in its process.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from paylens import errors

from ._commands import _SETUP_ERRORS, for_a_shell
from ._parser import build_parser

__all__ = ["build_parser", "main"]


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
        n
        for n in (
            "paylens",
            args.command,
            getattr(args, "sandbox_command", None),
            getattr(args, "webhooks_command", None),
        )
        if n
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
            from paylens.warehouse import interrupted

            if interrupted(exc):  # a Ctrl-C that DuckDB took as its own error
                raise KeyboardInterrupt from None
            raise
    except KeyboardInterrupt:
        print(
            f"{name}: interrupted; what was committed is kept, and the next run resumes",
            file=sys.stderr,
        )
        return 130
    except BrokenPipeError:  # `paylens … | head` stopped reading: nothing is wrong, say nothing
        _quiet_stdout()
        return 0
    except errors.WarehouseLockedError as exc:  # another writer: what a shell can do about it
        print(f"{name}: {for_a_shell(exc, args)}", file=sys.stderr)
        return 1
    except _SETUP_ERRORS as exc:  # what to set up or type differently: exit 2, as usage errors
        print(f"{name}: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # the last net: one line, the real error named
        if args.verbose:
            logging.getLogger("paylens").exception("%s failed", name)
        first = (str(exc).strip().splitlines() or [""])[0]
        print(f"{name}: {type(exc).__name__}: {first}", file=sys.stderr)
        return 1


def _quiet_stdout() -> None:
    """Point stdout at /dev/null: its reader is gone, and the interpreter's flush at exit
    would otherwise raise BrokenPipeError again (the Python documentation's recipe)."""
    import os

    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's StringIO)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


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
