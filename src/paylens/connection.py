"""One way in for a notebook or a script: the service when configured, else the embedded sandbox.

    import paylens
    client, wh = paylens.connect("../data/paylens.duckdb")   # shows where the data comes from
    wh.sync(client)

With no PAYLENS_* variable set, `connect` builds an embedded sandbox and a fresh warehouse in
a temporary folder (so a notebook reads the same data on every run) and says loudly that it is
sandbox data. With any of them set (PAYLENS_SESSION_KEY too) it connects to the service
(`Client.from_env()`, which names what is missing) and opens the warehouse file given. The secret is never shown: banners name the base URL and the client id only.
"""

from __future__ import annotations

import atexit
import html
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from paylens._version import __version__

if TYPE_CHECKING:  # the client (httpx) and the warehouse (DuckDB, pandas) load when a
    # connection is made: the CLI imports this module for its defaults
    from paylens.client import Client
    from paylens.warehouse import Warehouse

__all__ = ["SANDBOX_DB", "SANDBOX_TRANSACTIONS", "Banner", "connect", "sandbox_warehouse"]

#: The one default size of an embedded sandbox: `connect`, the report, every CLI command and
#: the README use it, and it is `Sandbox()`'s own default (a test holds the two together).
SANDBOX_TRANSACTIONS = 10_000
#: The warehouse file when none is named (as `paylens.warehouse.DEFAULT_PATH`, kept light here).
DEFAULT_DB = "data/paylens.duckdb"
#: Where sandbox data goes when no file is named (`paylens demo`, `connect` on a served
#: sandbox): never the service's file, so the two never meet in one warehouse.
SANDBOX_DB = "data/sandbox.duckdb"


@dataclass(frozen=True)
class Banner:
    """A line saying where data comes from: a loud red box for sandbox data."""

    text: str
    sandbox: bool

    def __str__(self) -> str:
        return f"*** {self.text} ***" if self.sandbox else self.text

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        if not self.sandbox:
            return f"<p><b>{html.escape(self.text)}</b></p>"
        return (
            "<div style='border:3px solid #b00;background:#fee;color:#b00;padding:0.6em 1em;"
            f"font-size:1.3em;font-weight:bold'>{html.escape(self.text)}</div>"
        )


def _temporary_folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="paylens-notebook-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _show(banner: Banner) -> None:
    from IPython.display import display  # present wherever a notebook runs

    display(banner)


def connect(
    db: str | os.PathLike[str] | None = None,
    *,
    folder: str | os.PathLike[str] = "data",
    seed: int = 0,
    transactions: int = SANDBOX_TRANSACTIONS,
    read_only: bool = True,
) -> tuple[Client, Warehouse]:
    """A client and a read-only warehouse of its data, and a banner saying which data this is.

    The service when any PAYLENS_* variable is set (`_service_variables`; PAYLENS_BASE_URL,
    PAYLENS_CLIENT_ID and PAYLENS_CLIENT_SECRET are then required, and a `ConfigurationError`
    names those missing), its data in the warehouse file `db`, by default one per source in
    `folder`: `paylens.duckdb` for the service's data, `sandbox.duckdb` for a served
    sandbox's (where `paylens demo` writes), so the two never meet. The file is opened
    read-only, so an open notebook never keeps the scheduled `paylens sync` out; its
    `wh.sync(client)` syncs a staged copy and swaps it in as `paylens sync` does, and a file
    not there yet is synced first. `read_only=False` opens it read-write instead, for a
    notebook that writes (a bulk action's journal): it then holds the file's writer lock, and
    keeps a scheduled sync out, until `wh.close()`. Otherwise the embedded sandbox (`seed`, `transactions`) and
    a fresh warehouse in a temporary folder, removed when the kernel exits."""
    from paylens.client import ENV_BASE_URL, ENV_CLIENT_ID, ENV_CLIENT_SECRET, Client
    from paylens.errors import ConfigurationError
    from paylens.warehouse import SANDBOX_LABEL, Warehouse, sync_file

    chosen = _service_variables()
    if chosen:
        try:
            client = Client.from_env()
        except ConfigurationError as exc:  # say why the service, not the sandbox, was meant
            raise ConfigurationError(
                f"connect() uses the service because {', '.join(chosen)} "
                f"{'is' if len(chosen) == 1 else 'are'} set; {exc}"
            ) from None
        name = Path(SANDBOX_DB if client.is_sandbox else DEFAULT_DB).name
        path = Path(folder) / name if db is None else Path(db)
        if read_only and not path.exists():
            sync_file(path, client)
        wh = Warehouse(path, read_only=read_only)
        label = SANDBOX_LABEL if client.is_sandbox else "service data"
        banner = Banner(
            f"{label} — paylens {__version__}, from {client.base_url} "
            f"(client {client.client_id}), warehouse {wh.path}"
            + (" (read-only)" if read_only else " (read-write: close it when done)"),
            sandbox=client.is_sandbox,
        )
    else:
        from paylens.sandbox import Sandbox

        client = Sandbox(seed=seed, transactions=transactions).client()
        wh = Warehouse(_temporary_folder() / "sandbox.duckdb")
        service = Path(folder) / Path(DEFAULT_DB).name if db is None else db
        banner = Banner(
            f"{SANDBOX_LABEL} — paylens {__version__}, the embedded sandbox (seed {seed}, "
            f"{transactions:,} transactions), not the service, in a temporary warehouse "
            f"({wh.path}, not {service}). Set {ENV_BASE_URL}, {ENV_CLIENT_ID} and "
            f"{ENV_CLIENT_SECRET} to work on the service's data in {service}.",
            sandbox=True,
        )
    _show(banner)
    return client, wh


def _service_variables() -> list[str]:
    """The PAYLENS_* variables set (not empty) in this environment, sorted: any of them means
    the service was meant (a session key, say, is set only to act on the service's data), so
    `connect` never answers it with sandbox data."""
    return sorted(
        name for name, value in os.environ.items() if name.startswith("PAYLENS_") and value
    )


def sandbox_warehouse(
    *, seed: int = 0, transactions: int = SANDBOX_TRANSACTIONS, progress: bool = False
) -> Path:
    """A warehouse file synced from an embedded sandbox, in a temporary folder removed when the
    process exits: what the report reads when it is given no database (`paylens report
    --sandbox`). `progress` shows the sync's bar."""
    from paylens.sandbox import Sandbox
    from paylens.warehouse import Warehouse

    path = _temporary_folder() / "sandbox.duckdb"
    with Warehouse(path) as wh:
        wh.sync(Sandbox(seed=seed, transactions=transactions).client(), progress=progress)
    return path
