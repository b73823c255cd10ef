"""The README's and the documentation's examples are tests: every ```python block runs as
written, in order, in one namespace, against a served sandbox (the PAYLENS_* variables set as
`paylens sandbox serve` prints them), in a scratch folder. The pages run in the order they
build on one another: a guide's examples use the client and warehouse an earlier page made."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from paylens import Sandbox

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)

#: Every page with Python examples, in the order they run.
PAGES = [
    "README.md",
    "docs/client.md",
    "docs/warehouse.md",
    "docs/analysis.md",
    "docs/how-to/team-tables.md",
    "docs/how-to/month-end.md",
    "docs/how-to/bulk-cancel.md",
    "docs/wallets.md",
    "docs/sandbox.md",
    "docs/report.md",
    "docs/how-to/webhooks.md",
]

#: Pages whose examples are another page's, word for word (run there).
COPIES = {"docs/index.md": "README.md"}


def _blocks(page: Path = README) -> list[str]:
    return _BLOCK.findall(page.read_text())


def test_the_readme_has_examples() -> None:
    assert len(_blocks()) >= 1
    assert sum(len(_blocks(ROOT / page)) for page in PAGES) >= 10


def test_every_page_with_examples_runs_them() -> None:
    """A new page's examples are never left out: each page with a Python block is run (or
    is a copy of one that is)."""
    with_examples = {
        str(page.relative_to(ROOT)) for page in DOCS.rglob("*.md") if _blocks(page)
    } | {"README.md"}
    assert with_examples == set(PAGES) | set(COPIES)
    for copy, original in COPIES.items():
        assert _blocks(ROOT / copy) == _blocks(ROOT / original)


@pytest.mark.http
def test_every_readme_and_docs_example_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served = Sandbox(seed=0, transactions=2_000)
    with served.serve() as server:
        for name, value in served.env(server).items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("MPLBACKEND", "Agg")
        monkeypatch.chdir(tmp_path)
        namespace: dict[str, object] = {"__name__": "__readme__"}
        for page in PAGES:
            for number, block in enumerate(_blocks(ROOT / page), start=1):
                first = block.strip().splitlines()[0]
                try:
                    exec(compile(block, f"{page} python block {number}", "exec"), namespace)
                except Exception as exc:
                    pytest.fail(
                        f"{page} block {number} ({first!r}) failed: {type(exc).__name__}: {exc}"
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


@pytest.mark.parametrize(
    ("page", "number"),
    [(page, n) for page in PAGES for n in range(1, len(_blocks(ROOT / page)) + 1)],
)
def test_every_readme_example_pastes_into_a_python_shell(page: str, number: int) -> None:
    """A `for` or `with` block needs a blank line after it in a shell (`>>>`), or the next
    statement is a SyntaxError: each block must paste as it reads."""
    block = _blocks(ROOT / page)[number - 1]
    assert _PasteOnly().paste(block) == [], f"{page} python block {number}:\n{block}"
