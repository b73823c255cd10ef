"""paylens: the analyst's toolkit for the payments and wallet account service.

import paylens
sandbox = paylens.Sandbox()                 # the embedded simulator
client = sandbox.client()                   # or paylens.Client.from_env()
for tx in client.transactions.list(type="OUTGOING", status="PENDING"):
    print(tx.id, tx.sent_amount)
"""

from typing import TYPE_CHECKING, Any

from paylens import errors, models
from paylens._version import __version__
from paylens.client import AsyncClient, Client, Paginator, RawPage, RetryPolicy, TextPage
from paylens.client._signing import SessionKey
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
    LockedError,
    NotFoundError,
    PaginationError,
    PaylensError,
    RateLimitError,
    RequestIdMissingError,
    ResponseValidationError,
    UnexpectedStatusError,
    WalletOperationPendingError,
    WalletSignatureBodyMismatchError,
    WalletSignatureInvalidError,
    WalletSignatureMalformedError,
    WalletSignatureMissingError,
)

if TYPE_CHECKING:
    from paylens.sandbox import Sandbox


def __getattr__(name: str) -> Any:
    # the simulator (and numpy behind it) loads only when first asked for
    if name == "Sandbox":
        from paylens.sandbox import Sandbox

        return Sandbox
    raise AttributeError(f"module 'paylens' has no attribute {name!r}")


__all__ = [
    "APIConnectionError",
    "APIError",
    "APITimeoutError",
    "AsyncClient",
    "AuthenticationError",
    "BadRequestError",
    "Client",
    "ConfigurationError",
    "ConflictError",
    "InternalServerError",
    "InvalidArgumentError",
    "InvalidSignatureError",
    "LockedError",
    "NotFoundError",
    "PaginationError",
    "Paginator",
    "PaylensError",
    "RateLimitError",
    "RawPage",
    "RequestIdMissingError",
    "ResponseValidationError",
    "RetryPolicy",
    "Sandbox",
    "SessionKey",
    "TextPage",
    "UnexpectedStatusError",
    "WalletOperationPendingError",
    "WalletSignatureBodyMismatchError",
    "WalletSignatureInvalidError",
    "WalletSignatureMalformedError",
    "WalletSignatureMissingError",
    "__version__",
    "errors",
    "models",
]
