"""paylens: the analyst's toolkit for the payments and wallet account service.

    import paylens
    sandbox = paylens.Sandbox()                 # the embedded simulator
    client = sandbox.client()                   # or paylens.Client.from_env()
    for tx in client.transactions.list(type="OUTGOING", status="PENDING"):
        print(tx.id, tx.sent_amount)
"""

from paylens import errors, models
from paylens._version import __version__
from paylens.client import AsyncClient, Client, Paginator, RawPage, RetryPolicy
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
    LockedError,
    NotFoundError,
    PaginationError,
    PaylensError,
    RateLimitError,
    ResponseValidationError,
    UnexpectedStatusError,
)
from paylens.sandbox import Sandbox

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
    "LockedError",
    "NotFoundError",
    "Paginator",
    "PaginationError",
    "PaylensError",
    "RateLimitError",
    "RawPage",
    "ResponseValidationError",
    "RetryPolicy",
    "Sandbox",
    "UnexpectedStatusError",
    "__version__",
    "errors",
    "models",
]
