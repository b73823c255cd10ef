"""The README's examples are tests: every ```python block runs as written, in order, in one
namespace, against a served sandbox (the PAYLENS_* variables set as `paylens sandbox serve`
prints them), in a scratch folder."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from paylens import Sandbox

README = Path(__file__).resolve().parents[1] / "README.md"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _blocks() -> list[str]:
    return _BLOCK.findall(README.read_text())


def test_the_readme_has_examples() -> None:
    assert len(_blocks()) >= 6


@pytest.mark.http
def test_every_readme_example_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = Sandbox(seed=0, transactions=2_000)
    with served.serve() as server:
        for name, value in served.env(server).items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("MPLBACKEND", "Agg")
        monkeypatch.chdir(tmp_path)
        namespace: dict[str, object] = {"__name__": "__readme__"}
        for number, block in enumerate(_blocks(), start=1):
            first = block.strip().splitlines()[0]
            try:
                exec(compile(block, f"README.md python block {number}", "exec"), namespace)
            except Exception as exc:
                pytest.fail(
                    f"README block {number} ({first!r}) failed: {type(exc).__name__}: {exc}"
                )


class _PasteOnly:
    """A Python shell's reading of pasted lines (`code.InteractiveConsole`), compiling each
    statement as the shell would and running none: what a paste would refuse."""

    def __init__(self) -> None:
        import code

        self.errors: list[str] = []
        errors = self.errors

        class Console(code.InteractiveConsole):
            def runcode(self, code: object) -> None:  # compiled is enough: run nothing
                pass

            def showsyntaxerror(self, filename: str | None = None, **kwargs: object) -> None:
                import sys

                errors.append(str(sys.exc_info()[1]))

        self.console = Console()

    def paste(self, text: str) -> list[str]:
        for line in text.splitlines():
            self.console.push(line)
        self.console.push("")
        return self.errors


@pytest.mark.parametrize("number", range(1, len(_blocks()) + 1))
def test_every_readme_example_pastes_into_a_python_shell(number: int) -> None:
    """A `for` or `with` block needs a blank line after it in a shell (`>>>`), or the next
    statement is a SyntaxError: each block must paste as it reads."""
    block = _blocks()[number - 1]
    assert _PasteOnly().paste(block) == [], f"README python block {number}:\n{block}"
