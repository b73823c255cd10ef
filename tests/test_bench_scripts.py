"""The benchmarks stay runnable as the library changes: every name a `bench/` script takes
from paylens (or a private module of it) still exists. A renamed helper once left
`bench/bench_analysis.py` failing at its first line, unseen, since no test runs the benchmarks
(they take minutes each: BENCHMARKS.md)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
SCRIPTS = sorted(BENCH.glob("*.py"))


def _imports(path: Path) -> list[tuple[str, str | None]]:
    """(module, name) of every paylens import in a script, at any depth (None: the module)."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("paylens"):
            found += [(node.module or "", alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(a.name, None) for a in node.names if a.name.startswith("paylens")]
    return found


def test_the_benchmarks_are_found() -> None:
    assert len(SCRIPTS) >= 15 and any(p.name == "bench_analysis.py" for p in SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_name_a_benchmark_imports_from_paylens_exists(script: Path) -> None:
    missing = []
    for module, name in _imports(script):
        loaded = importlib.import_module(module)
        if name is not None and not hasattr(loaded, name):
            try:  # a submodule imported by name (`from paylens.warehouse import sync`)
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                missing.append(f"{module}.{name}")
    assert not missing, f"{script.name} imports what paylens no longer has: {missing}"
