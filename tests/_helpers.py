"""Helpers shared by tests."""

from __future__ import annotations

import functools
import io
import logging
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from unittest import mock

from paylens.cli import main

if TYPE_CHECKING:
    from paylens import Sandbox
    from paylens.warehouse import SyncOptions

#: `../shared` beside the repository (or the machine's copy of it, for a worktree elsewhere):
#: the interface description and its contract validator, read at test time, never copied.
SHARED = next(
    (
        p
        for p in (Path(__file__).resolve().parents[2] / "shared", Path("/work/shared"))
        if (p / "reference" / "openapi.yaml").is_file()
    ),
    Path(__file__).resolve().parents[2] / "shared",
)
OPENAPI = SHARED / "reference" / "openapi.yaml"


_INTERFACE_READ = threading.Lock()


def interface() -> dict[str, Any]:
    """The interface description, parsed once per process by libyaml where PyYAML has it
    (1 MB of YAML: 0.35 s, against 1.6 s in pure Python; the same document). Once even when
    a sync's threads ask at once (a fake service's first lists): `functools.cache` alone lets
    each of them parse it, ~3 s of CPU."""
    with _INTERFACE_READ:
        return _parsed_interface()


@functools.cache
def _parsed_interface() -> dict[str, Any]:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    parsed: dict[str, Any] = yaml.load(OPENAPI.read_text(), Loader=loader)
    return parsed


@functools.cache
def contract_errors() -> Callable[..., list[str]] | None:
    """`errors(body, schema, limit=10)` of the shared contract validator, or None where it is
    absent. Its own read of the description is pure-Python YAML; it is handed `interface()`."""
    tools = SHARED / "tools"
    if not (tools / "validate_contract.py").is_file():
        return None
    sys.path.insert(0, str(tools))
    import validate_contract  # type: ignore[import-not-found]

    validate_contract._spec = interface
    errors: Callable[..., list[str]] = validate_contract.errors
    return errors


_INSTANT = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def same_instants(value: Any) -> Any:
    """A wire value with every ISO timestamp read as an instant, so `…:48Z` equals `…:48.000Z`
    (the same instant spelled two ways) while every other value must match exactly."""
    if isinstance(value, dict):
        return {k: same_instants(v) for k, v in value.items()}
    if isinstance(value, list):
        return [same_instants(v) for v in value]
    if isinstance(value, str) and _INSTANT.match(value):
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value


@dataclass
class CliRun:
    returncode: int
    stdout: str
    stderr: str


def run_cli(*args: str, stdin: str = "", env: dict[str, str] | None = None) -> CliRun:
    """`paylens ARGS` in this process (`main`), with no PAYLENS_* variable but those in `env`:
    for what a command does and says; its exit code is the one the process would exit with.
    What only a process shows (signals, locks held by another process, the process's exit
    path) is tested by running `python -m paylens.cli`."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PAYLENS_")}
    out, err = io.StringIO(), io.StringIO()
    loggers = [logging.getLogger(name) for name in ("paylens", "paylens.client")]
    levels = [logger.level for logger in loggers]
    try:
        with (
            mock.patch.dict(os.environ, {**clean, **(env or {})}, clear=True),
            mock.patch("sys.stdin", io.StringIO(stdin)),
            redirect_stdout(out),
            redirect_stderr(err),
        ):
            try:
                code = main(list(args))
            except SystemExit as exc:  # a usage error: argparse exits, as the process would
                code = exc.code if isinstance(exc.code, int) else 1
    finally:  # main sets the verbosity of paylens' loggers: leave them as they were
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
    return CliRun(code, out.getvalue(), err.getvalue())


@contextmanager
def hold_answers(
    sandbox: Sandbox, start: Callable[[str, str, int], bool] = lambda *_: True
) -> Iterator[threading.Event]:
    """From the first request `start` picks (by method, path and status, once served), every
    request is served and logged but its answer held back until the block ends (a failing
    test too leaves no server thread held); yields the event set once holding. A process
    whose answers are held is mid-run for as long as the test needs, however fast or loaded
    the machine: no pacing, no polling."""
    log, record = sandbox.requests, sandbox.requests.record
    holding, released, lock = threading.Event(), threading.Event(), threading.Lock()

    def record_then_hold(method: str, path: str, status: int) -> None:
        record(method, path, status)
        with lock:
            if not holding.is_set() and start(method, path, status):
                holding.set()
        if holding.is_set():
            released.wait(60)

    log.record = record_then_hold  # type: ignore[method-assign]
    try:
        yield holding
    finally:
        released.set()
        del log.record  # answers go out again as they are served


def differential_options(hold_window: timedelta, **overrides: Any) -> SyncOptions:
    """The differential tests' sync options: a short re-verification bound (3 syncs) so that
    "gone within `verify_syncs` syncs" is checked within a few advances."""
    from paylens.warehouse import SyncOptions

    chosen: dict[str, Any] = {
        "concurrency": 4,
        "progress": False,
        "verify_syncs": 3,
        "hold_window": hold_window,
    }
    return SyncOptions(**(chosen | overrides))
