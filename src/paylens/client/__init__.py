"""The typed client of the service: `Client`, `AsyncClient`, their policy and pagination."""

from typing import TYPE_CHECKING

from paylens import _lazy

from ._clients import AsyncClient, Client
from ._config import API_VERSION, ENV_BASE_URL, ENV_CLIENT_ID, ENV_CLIENT_SECRET
from ._pagination import AsyncPaginator, Paginator, RawPage, TextPage
from ._params import timestamp
from ._policy import Call, RateBudget, RequestStats, RetryPolicy

if TYPE_CHECKING:
    from ._signing import SessionKey, Signer

__all__ = [
    "API_VERSION",
    "ENV_BASE_URL",
    "ENV_CLIENT_ID",
    "ENV_CLIENT_SECRET",
    "AsyncClient",
    "AsyncPaginator",
    "Call",
    "Client",
    "Paginator",
    "RateBudget",
    "RawPage",
    "RequestStats",
    "RetryPolicy",
    "SessionKey",
    "Signer",
    "TextPage",
    "timestamp",
]

# the wallets' signing loads `cryptography`: only for those who ask for it (a sync never does)
__getattr__, __dir__ = _lazy.attributes(
    __name__,
    {name: ("paylens.client._signing", name) for name in ("SessionKey", "Signer")},
    __all__,
)
