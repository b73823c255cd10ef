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
