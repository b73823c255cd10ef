"""paylens: the analyst's toolkit for the payments and wallet account service.

import paylens
sandbox = paylens.Sandbox()                 # the embedded simulator
client = sandbox.client()                   # or paylens.Client.from_env()
for tx in client.transactions.list(type="OUTGOING", status="PENDING"):
    print(tx.id, tx.sent_amount)
wh = paylens.Warehouse("data/paylens.duckdb"); wh.sync(client)
paylens.analysis.fee_breakdown(wh); paylens.ops.plan_cancel(wh, "status = 'PENDING'")
client, wh = paylens.connect()    # both at once: the service if PAYLENS_* is set, else a sandbox

Everything a user types after `paylens.` is here; the errors are at hand at once, and the
client (httpx behind it), the warehouse, analysis, ops and the sandbox (and pandas, DuckDB,
matplotlib, numpy behind them) load when first asked for: a process that only runs a sync loads
nothing it does not use, and can refuse what it never needs before anything asks for it.
"""

from typing import TYPE_CHECKING

from paylens import _lazy, errors, models
from paylens._version import __version__
from paylens.errors import (
    APIConnectionError,
    APIError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    ConfigurationError,
    ConflictError,
    InternalServerError,
    InvalidArgumentError,
    InvalidSignatureError,
    LakeError,
    LockedError,
    NotFoundError,
    OutcomeUnknownError,
    PaginationError,
    PaylensError,
    RateLimitError,
    ReportError,
    RequestIdMissingError,
    ResponseValidationError,
    TieOutError,
    UnexpectedStatusError,
    WalletOperationPendingError,
    WalletSignatureBodyMismatchError,
    WalletSignatureInvalidError,
    WalletSignatureMalformedError,
    WalletSignatureMissingError,
    WarehouseEmptyError,
    WarehouseError,
    WarehouseFileError,
    WarehouseLockedError,
    WarehouseNotFoundError,
    WarehouseSourceError,
    WarehouseStorageError,
)

if TYPE_CHECKING:
    from paylens import analysis, close, ops
    from paylens.client import (
        AsyncClient,
        AsyncPaginator,
        Client,
        Paginator,
        RawPage,
        RetryPolicy,
        SessionKey,
        TextPage,
    )
    from paylens.connection import connect
    from paylens.lake import Lake
    from paylens.ops import Plan
    from paylens.sandbox import Sandbox
    from paylens.warehouse import (
        Freshness,
        SyncKeywords,
        SyncOptions,
        SyncReport,
        Warehouse,
        sync_file,
    )

#: What loads on first use: name -> (module, attribute or None for the module itself).
_LAZY: _lazy.Table = {
    "AsyncClient": ("paylens.client", "AsyncClient"),
    "AsyncPaginator": ("paylens.client", "AsyncPaginator"),
    "Client": ("paylens.client", "Client"),
    "Paginator": ("paylens.client", "Paginator"),
    "RawPage": ("paylens.client", "RawPage"),
    "RetryPolicy": ("paylens.client", "RetryPolicy"),
    "TextPage": ("paylens.client", "TextPage"),
    "SessionKey": ("paylens.client", "SessionKey"),
    "Sandbox": ("paylens.sandbox", "Sandbox"),
    "Warehouse": ("paylens.warehouse", "Warehouse"),
    "SyncReport": ("paylens.warehouse", "SyncReport"),
    "SyncOptions": ("paylens.warehouse", "SyncOptions"),
    "SyncKeywords": ("paylens.warehouse", "SyncKeywords"),
    "Freshness": ("paylens.warehouse", "Freshness"),
    "sync_file": ("paylens.warehouse", "sync_file"),
    "Plan": ("paylens.ops", "Plan"),
    "Lake": ("paylens.lake", "Lake"),
    "connect": ("paylens.connection", "connect"),
    "ops": ("paylens.ops", None),
    "analysis": ("paylens.analysis", None),
    "close": ("paylens.close", None),
}


__all__ = [
    "APIConnectionError",
    "APIError",
    "APITimeoutError",
    "AsyncClient",
    "AsyncPaginator",
    "AuthenticationError",
    "BadRequestError",
    "Client",
    "ConfigurationError",
    "ConflictError",
    "Freshness",
    "InternalServerError",
    "InvalidArgumentError",
    "InvalidSignatureError",
    "Lake",
    "LakeError",
    "LockedError",
    "NotFoundError",
    "OutcomeUnknownError",
    "PaginationError",
    "Paginator",
    "PaylensError",
    "Plan",
    "RateLimitError",
    "RawPage",
    "ReportError",
    "RequestIdMissingError",
    "ResponseValidationError",
    "RetryPolicy",
    "Sandbox",
    "SessionKey",
    "SyncKeywords",
    "SyncOptions",
    "SyncReport",
    "TextPage",
    "TieOutError",
    "UnexpectedStatusError",
    "WalletOperationPendingError",
    "WalletSignatureBodyMismatchError",
    "WalletSignatureInvalidError",
    "WalletSignatureMalformedError",
    "WalletSignatureMissingError",
    "Warehouse",
    "WarehouseEmptyError",
    "WarehouseError",
    "WarehouseFileError",
    "WarehouseLockedError",
    "WarehouseNotFoundError",
    "WarehouseSourceError",
    "WarehouseStorageError",
    "__version__",
    "analysis",
    "close",
    "connect",
    "errors",
    "models",
    "ops",
    "sync_file",
]

__getattr__, __dir__ = _lazy.attributes(__name__, _LAZY, __all__)
