"""The public surface: flat, lazy where it saves start-up, and per-call options that never
mutate a shared client."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import paylens
from paylens import Sandbox


def test_every_public_name_resolves() -> None:
    missing = [name for name in paylens.__all__ if not hasattr(paylens, name)]
    assert missing == []
    assert paylens.Warehouse.__module__ == "paylens.warehouse"
    assert paylens.ops.plan_cancel and paylens.analysis.fee_breakdown
    assert paylens.SyncReport.__name__ == "SyncReport"
    assert paylens.connect.__module__ == "paylens.connection"


def test_a_client_lists_its_resources_before_their_first_use() -> None:
    """Tab completion in a notebook (`client.<Tab>`) reads dir(): the resources built on first
    use must be there before any is touched."""
    for client in (
        Sandbox(seed=1, transactions=10).client(),
        paylens.AsyncClient(
            base_url="https://api.example.com/2025-10-13", client_id="id", client_secret="s"
        ),
    ):
        names = dir(client)
        assert {"transactions", "cards", "customers", "auth", "with_options"} <= set(names)
        assert "transactions" not in vars(client)  # still built on first use
        assert client.transactions is client.transactions


def test_one_default_sandbox_size_everywhere() -> None:
    import inspect

    from paylens import cli
    from paylens.connection import SANDBOX_TRANSACTIONS, connect, sandbox_warehouse

    def default(function: object, name: str = "transactions") -> object:
        return inspect.signature(function).parameters[name].default  # type: ignore[arg-type]

    assert default(Sandbox) == SANDBOX_TRANSACTIONS
    assert default(connect) == default(sandbox_warehouse) == SANDBOX_TRANSACTIONS
    sizes = {
        action.default
        for parser in _parsers(cli.build_parser())
        for action in parser._actions
        if action.dest == "transactions"
    }
    assert sizes == {SANDBOX_TRANSACTIONS}


def test_connect_without_a_service_says_its_warehouse_is_not_the_path_given(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from paylens.connection import connect

    _no_paylens_variables(monkeypatch)
    client, wh = connect("data/mine.duckdb", transactions=300)
    try:
        said = capsys.readouterr()
        banner = said.out + said.err
        assert f"in a temporary warehouse ({wh.path}, not data/mine.duckdb)" in banner
        assert wh.path != Path("data/mine.duckdb") and not Path("data/mine.duckdb").exists()
    finally:
        wh.close()
        client.close()


def _no_paylens_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("PAYLENS_")]:
        monkeypatch.delenv(name)


@pytest.mark.parametrize(
    ("set_", "missing"),
    [
        ("PAYLENS_CLIENT_ID", ["PAYLENS_BASE_URL", "PAYLENS_CLIENT_SECRET"]),
        ("PAYLENS_SESSION_KEY", ["PAYLENS_BASE_URL", "PAYLENS_CLIENT_ID", "PAYLENS_CLIENT_SECRET"]),
    ],
)
def test_connect_with_any_paylens_variable_set_is_the_service_never_the_sandbox(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, set_: str, missing: list[str]
) -> None:
    """README: `connect` gives "the service when any `PAYLENS_*` variable is set" (a session
    key too: it is set only to act on the service's data), and the service's settings missing
    are a `ConfigurationError` naming them and the variable that chose the service."""
    from paylens.connection import connect
    from paylens.errors import ConfigurationError

    _no_paylens_variables(monkeypatch)
    monkeypatch.setenv(set_, "11" * 32)
    with pytest.raises(ConfigurationError) as refused:
        connect(tmp_path / "w.duckdb", transactions=200)
    said = str(refused.value)
    assert said.startswith(f"connect() uses the service because {set_} is set; ")
    assert f"variable(s) {', '.join(missing)} not set" in said, said
    assert not (tmp_path / "w.duckdb").exists()


def _parsers(parser: object) -> list:
    import argparse

    found = [parser]
    for action in parser._actions:  # type: ignore[attr-defined]
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found += _parsers(child)
    return found


def test_the_error_tree_drawn_is_the_error_tree_exported() -> None:
    drawn = set(re.findall(r"[├└]── (\w+)", paylens.errors.__doc__ or ""))
    exported = {
        name
        for name in paylens.errors.__all__
        if isinstance(getattr(paylens.errors, name), type)
        and issubclass(getattr(paylens.errors, name), paylens.PaylensError)
    }
    assert drawn == exported - {"PaylensError"}
    assert all(getattr(paylens, name) is getattr(paylens.errors, name) for name in drawn)
    # the report's errors are the tree's, not classes of their own beside it
    from paylens import report

    assert report.ReportError is paylens.ReportError
    assert report.TieOutError is paylens.TieOutError
    assert not issubclass(paylens.TieOutError, AssertionError)  # `python -O` would not drop it


def test_import_paylens_loads_no_client_dataframe_or_plotting_stack_model_or_sandbox() -> None:
    heavy = ("pandas", "duckdb", "matplotlib", "numpy", "papermill", "paylens.sandbox")
    heavy += ("paylens.warehouse", "paylens.models._transactions", "paylens.models._account_info")
    heavy += ("httpx", "pydantic", "cryptography")  # the client loads when first asked for
    code = (
        f"import sys, paylens, paylens.cli; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _sync_process_imports(env: dict[str, str], db: Path, *options: str) -> set[str]:
    """The modules a `paylens sync` process imports (or tries to: a refused import has its
    line too)."""
    command = ["paylens.cli", "sync", "--quiet", "--db", str(db), *options]
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", *command],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "sync #1 (full" in out.stdout
    return {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines()}


def test_a_sync_process_loads_no_package_it_does_not_use(
    sandbox: Sandbox, server: Any, tmp_path: Path
) -> None:
    loaded = _sync_process_imports(sandbox.env(server), tmp_path / "w.duckdb")
    assert "duckdb" in loaded and "pyarrow" in loaded
    assert not {"matplotlib", "papermill", "paylens.sandbox"} & loaded
    assert "cryptography" not in loaded  # the wallet calls' signing: their resources unbuilt
    assert "asyncio" not in loaded  # only AsyncClient's waits use it
    # pyarrow asks for pandas and numpy, httpcore for trio, httpx for its command line's
    # click, rich and pygments; each is refused (a line for the attempt): nothing of them loads
    for package in ("pandas", "numpy", "trio", "click", "rich", "pygments"):
        assert not [name for name in loaded if name.startswith(f"{package}.")], package


def test_a_transaction_sync_loads_no_typed_model_validation(
    sandbox: Sandbox, server: Any, tmp_path: Path
) -> None:
    # pages stay raw and valid records are never judged one by one (the smaller resources
    # read the platform's configuration, typed, for its currencies)
    loaded = _sync_process_imports(
        sandbox.env(server), tmp_path / "w.duckdb", "--resources", "transactions"
    )
    assert "duckdb" in loaded and "pyarrow" in loaded
    assert not {"pydantic", "cryptography"} & loaded


def test_a_sync_process_sets_bad_records_aside_without_what_it_refuses(
    sandbox: Sandbox, server: Any, tmp_path: Path
) -> None:
    """What a sync process refuses (pandas, numpy, ...) is never needed on its rarer paths: a
    transaction and an internal account the service serves malformed are judged by the typed
    models, set aside in `rejected_records`, and the sync goes on."""
    client = sandbox.client()
    every = [t.id for t in client.transactions.list(limit=100)]
    transaction = every[3]
    account = next(iter(client.internal_accounts.list())).id
    sandbox.faults.corrupt_ids = {transaction, account}
    db = tmp_path / "w.duckdb"
    loaded = _sync_process_imports(sandbox.env(server), db)
    assert "pydantic" in loaded  # the models judged the bad records
    for package in ("pandas", "numpy"):
        assert not [name for name in loaded if name.startswith(f"{package}.")], package
    with paylens.Warehouse(db, read_only=True) as wh:
        rejected = wh.rejected_records()
        stored = set(wh.sql("SELECT id FROM transactions")["id"])
    assert dict(zip(rejected["record_id"], rejected["resource"], strict=True)) == {
        transaction: "transactions",
        account: "internal_accounts",
    }
    assert stored == set(every) - {transaction}


def test_with_options_returns_a_sibling_and_leaves_the_client_alone() -> None:
    sandbox = Sandbox(seed=1, transactions=200)
    client = sandbox.client()
    before = (client.retry_policy, client.rate_budget, id(client.stats))
    paced = client.with_options(rate_limit=50, max_retries=0, timeout=3)
    assert (client.retry_policy, client.rate_budget, id(client.stats)) == before
    assert paced.retry_policy.max_retries == 0 and client.retry_policy.max_retries == 5
    assert paced.rate_budget is not None and paced.rate_budget.rate == 50
    assert paced._http is client._http  # one connection pool
    assert paced.transactions._client is paced
    paced.config.get()
    client.config.get()
    assert paced.stats.snapshot()["requests"] == 1
    assert client.stats.snapshot()["requests"] == 2  # its own and its sibling's


def test_a_sync_counts_only_its_own_requests_and_leaves_the_client_alone(tmp_path) -> None:
    sandbox = Sandbox(seed=2, transactions=500)
    client = sandbox.client()
    budget = client.rate_budget
    stop = threading.Event()

    tid = next(iter(sandbox.world.all_transactions()))["id"]

    def chatter() -> None:  # another thread using the same client meanwhile
        while not stop.is_set():
            client.transactions.get(tid)
            # a breath between calls: a thread spinning in pure Python starves DuckDB's own
            # calls back into the interpreter on an idle machine (seen: the sync's open took
            # minutes when this test ran alone)
            time.sleep(0.001)

    other = threading.Thread(target=chatter)
    other.start()
    try:
        sandbox.requests.reset()
        with paylens.Warehouse(tmp_path / "w.duckdb") as wh:
            report = wh.sync(client, progress=False, rate_limit=10_000)
    finally:
        stop.set()
        other.join()
    assert client.rate_budget is budget
    not_chatter = sum(
        1 for method, path, _ in sandbox.requests.entries if not path.endswith(f"/{tid}")
    )
    assert report.requests == not_chatter


def test_async_resources_answer_awaitables_of_the_same_models() -> None:
    import asyncio

    sandbox = Sandbox(seed=3, transactions=300)
    tid = next(iter(sandbox.world.all_transactions()))["id"]

    async def run() -> tuple[object, object, int]:
        async with sandbox.async_client() as client:
            one = await client.transactions.get(tid)
            config = await client.config.get()
            count = 0
            async for _ in client.transactions.list(limit=100):
                count += 1
            return one, config, count

    one, config, count = asyncio.run(run())
    with sandbox.client() as client:
        assert one == client.transactions.get(tid)
        assert config == client.config.get()
    assert count == 300


def test_sync_options_and_keyword_arguments_are_not_mixed_silently(tmp_path) -> None:
    import pytest

    from paylens.warehouse import SyncOptions

    sandbox = Sandbox(seed=4, transactions=100)
    with paylens.Warehouse(tmp_path / "w.duckdb") as wh:
        with pytest.raises(paylens.InvalidArgumentError, match="concurrency"):
            wh.sync(sandbox.client(), options=SyncOptions(), concurrency=4)
        with pytest.raises(paylens.InvalidArgumentError, match="verify_syncs"):
            wh.sync(sandbox.client(), verify_syncs=0)
        report = wh.sync(sandbox.client(), options=SyncOptions(progress=False))
    assert report.resources["transactions"]["new"] == 100


def _private_doors(root: Path) -> list[str]:
    """`file:line: module` for each import of another package's private module."""
    found = []
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        owner = parts[1] if len(parts) > 1 else ""  # the package (or module) of paylens it is in
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [
                    f"{node.module}.{alias.name}"
                    for alias in node.names
                    if alias.name[0] == "_" and not alias.name.startswith("__")
                ]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                bits = name.split(".")
                private = any(bit.startswith("_") for bit in bits[2:])
                shared = len(bits) > 1 and bits[1].startswith("_")  # paylens' own, for all of it
                if (
                    bits[0] == "paylens"
                    and len(bits) > 2
                    and private
                    and bits[1] not in (owner,)
                    and not shared
                ):
                    found.append(f"{path.name}:{node.lineno}: {name}")
    return found


def test_no_package_imports_another_packages_private_module() -> None:
    """Layers meet at public doors: what `report` needs of `analysis`, or the warehouse of the
    client, is exported by that package; a module shared by two packages lives at the top
    (`paylens._urls`), owned by neither."""
    assert _private_doors(Path(paylens.__file__).parent) == []


#: Built-in exceptions paylens still raises, and why none reaches a user as such: each is
#: caught where it is raised (the sandbox turns it into its error answer, a page reader into a
#: `ResponseValidationError`), is what the language asks for (pydantic validators raise
#: ValueError; an unknown keyword is a TypeError; pickling refused), or is a programming error.
_BUILTIN_RAISES = {
    "sandbox/crypto.py": "a stamp, CBOR or attestation the sandbox refuses: caught, 401/400",
    "sandbox/wire/app.py": "a control request's body: caught, 400",
    "sandbox/routes/pagination.py": "a cursor the sandbox did not issue: caught, 400",
    "sandbox/routes/registry.py": "a route registered twice: a programming error at import",
    "sandbox/world/lifecycle.py": "an unknown keyword setting: TypeError, as Python's own",
    "sandbox/wire/faults.py": "an unknown keyword setting: TypeError, as Python's own",
    "models/_auth.py": "a pydantic validator (pydantic turns it into its ValidationError)",
    "client/_signing.py": "pickling a SessionKey refused (TypeError, as pickle expects)",
    "client/_pagination.py": "a page that is no page: caught, ResponseValidationError",
    "warehouse/sync/readers.py": "work given to the readers' pool after its shutdown: "
    "RuntimeError, as concurrent.futures' executors (a programming error)",
}


def test_every_exception_raised_is_in_the_tree() -> None:
    """What paylens raises is a `PaylensError` (arguments: `InvalidArgumentError`, also a
    ValueError), but for the built-in exceptions named above, none of which reaches a user."""
    root = Path(paylens.__file__).parent
    raising = set()
    builtins = {"ValueError", "TypeError", "RuntimeError", "KeyError", "AssertionError"}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                name = getattr(node.exc.func, "id", None)
                if name in builtins or name == "Exception":
                    raising.add(str(path.relative_to(root)))
    assert raising == set(_BUILTIN_RAISES)


def test_one_lazy_import_mechanism() -> None:
    """Names load on first use through `paylens._lazy` alone (the package's, the client's,
    the models', the report's, and a client's resources): no other module imports by name
    or defines a module-level `__getattr__`."""
    root = Path(paylens.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        if path == root / "_lazy.py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute | ast.Name) and (
                getattr(node, "attr", None) == "import_module"
                or getattr(node, "id", None) in ("import_module", "__import__")
            ):
                found.append(f"{path.relative_to(root)}:{node.lineno}: imports by name")
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
                found.append(f"{path.relative_to(root)}:{node.lineno}: its own __getattr__")
    assert found == []
