"""The notebooks beyond what nbval runs (every notebook, top to bottom, on the embedded sandbox,
key cells checked): on the service (the `PAYLENS_*` variables set, here pointing at a sandbox
served on loopback), never showing the secret; and bulk cancellation with `APPLY = True`."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from paylens import Sandbox

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
SECRET = "sk_sandbox_notebook-test-secret-9e107d9d372bb682"


def _run(name: str, folder: Path, **parameters: Any) -> dict[str, Any]:
    """Execute a notebook from `folder` (its `../data` is the test's) and return it as JSON."""
    import papermill  # here: collecting the suite (every worker) need not load it and boto3

    folder.mkdir(parents=True, exist_ok=True)
    out = folder / name
    papermill.execute_notebook(
        str(NOTEBOOKS / name), str(out), parameters=parameters, cwd=str(folder), progress_bar=False
    )
    return json.loads(out.read_text(encoding="utf-8"))


def _outputs(notebook: dict[str, Any], code: str) -> str:
    """The plain-text outputs of the code cells containing `code`."""
    texts = []
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code" and code in "".join(cell["source"]):
            for output in cell["outputs"]:
                text = output.get("text") or output.get("data", {}).get("text/plain", "")
                texts.append("".join(text))
    return "\n".join(texts)


@pytest.mark.http
def test_quickstart_on_the_service_never_shows_the_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox = Sandbox(seed=2, transactions=1_000, client_secret=SECRET)
    with sandbox.serve() as server:
        for name, value in sandbox.env(server).items():
            monkeypatch.setenv(name, value)
        notebook = _run("00_quickstart.ipynb", tmp_path / "notebooks")
    banner = _outputs(notebook, "connect(")
    assert f"from {server.base_url} (client {sandbox.client_id})" in banner
    assert "SANDBOX DATA" in banner  # a served sandbox is still sandbox data
    assert re.search(r"transactions\s+1000\n", _outputs(notebook, "row_count"))
    # a served sandbox's data, kept apart from the service's
    assert (tmp_path / "data" / "sandbox.duckdb").exists()
    assert not (tmp_path / "data" / "paylens.duckdb").exists()
    assert SECRET not in (tmp_path / "notebooks" / "00_quickstart.ipynb").read_text()


def test_bulk_cancellation_applies_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("PAYLENS_BASE_URL", "PAYLENS_CLIENT_ID", "PAYLENS_CLIENT_SECRET"):
        monkeypatch.delenv(name, raising=False)
    notebook = _run("05_bulk_cancellation.ipynb", tmp_path / "notebooks", APPLY=True)
    applied = _outputs(notebook, "if APPLY:")
    assert "cancelled" in applied and "would_send" not in applied
    assert "nothing was sent" not in applied
    journal = _outputs(notebook, "wh.journal()")
    assert "cancelled" in journal and "TRANSACTION_NOT_CANCELLABLE" in journal
