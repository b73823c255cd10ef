"""Progress bars only where someone can see them: a terminal or a notebook, never a pipe or a
cron log (where a bar is a line of carriage returns)."""

from __future__ import annotations

import io
import sys
from contextlib import redirect_stderr
from pathlib import Path
from typing import ClassVar

import pytest

from paylens import Sandbox, Warehouse
from paylens._bars import visible_bar


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_sync_piped_to_a_log_writes_no_bar(tmp_path: Path) -> None:
    sandbox = Sandbox(seed=5, transactions=600)
    log = io.StringIO()
    with redirect_stderr(log), Warehouse(tmp_path / "w.duckdb") as wh:
        report = wh.sync(sandbox.client())  # progress=True, the default
    assert report.resources["transactions"]["new"] == 600
    assert log.getvalue() == ""


def test_a_terminal_gets_the_bar() -> None:
    terminal = _Terminal()
    with redirect_stderr(terminal):
        bar = visible_bar(total=3, desc="sync", leave=True, file=sys.stderr)
        assert bar is not None
        bar.update(3)
        bar.close()
    assert "sync: 100%" in terminal.getvalue()
    with redirect_stderr(io.StringIO()):
        assert visible_bar(total=3) is None


def test_a_notebook_kernel_gets_the_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    class Shell:
        config: ClassVar[dict[str, object]] = {"IPKernelApp": {}}

    class IPython:
        @staticmethod
        def get_ipython() -> Shell:
            return Shell()

    monkeypatch.setitem(sys.modules, "IPython", IPython)
    with redirect_stderr(io.StringIO()):
        bar = visible_bar(total=1, disable=True)  # seen; disabled only so it draws nothing here
    assert bar is not None
