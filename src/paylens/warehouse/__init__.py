"""The warehouse: the service's data as typed tables in one DuckDB file, kept in step by a sync.

    wh = paylens.Warehouse("data/paylens.duckdb")
    report = wh.sync(client)                   # full the first time, incremental after
    wh.transactions(status="FAILED")           # typed, Arrow-backed pandas DataFrames
    wh.sql("SELECT currency, sum(amount_minor) FROM transactions GROUP BY 1")

Tables: transactions, outgoing_fees, card_transactions, payment_instructions, cards, customers,
internal_accounts, external_accounts, platform_external_accounts (every resource of the
catalogue, `RESOURCES`), status_history, rejected_records, sync_runs, sync_slices,
resource_reads;
the wallet inventory (`wh.sync_wallets(client)`): wallet_credentials, wallet_sessions,
wallet_inventory.
"""

from __future__ import annotations

from paylens.errors import WarehouseError, WarehouseLockedError

from ._open import MEMORY, interrupted
from ._report import SANDBOX_LABEL as SANDBOX_LABEL
from ._report import SyncReport
from ._run import SyncKeywords
from ._store import SCHEMA_VERSION
from ._sync_file import sync_file
from ._warehouse import DEFAULT_PATH as DEFAULT_PATH
from ._warehouse import Warehouse
from .sync import Freshness, SyncOptions
from .sync.catalog import RESOURCES

__all__ = [
    "MEMORY",
    "RESOURCES",
    "SCHEMA_VERSION",
    "Freshness",
    "SyncKeywords",
    "SyncOptions",
    "SyncReport",
    "Warehouse",
    "WarehouseError",
    "WarehouseLockedError",
    "interrupted",
    "sync_file",
]

# public classes say where users import them from (as httpx does), not their private room
for _public in (SyncKeywords, SyncReport, Warehouse):
    _public.__module__ = __name__
