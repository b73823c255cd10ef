"""The typed client of the service: `Client`, `AsyncClient`, their policy and pagination."""

from ._clients import AsyncClient, Client
from ._config import API_VERSION, ENV_BASE_URL, ENV_CLIENT_ID, ENV_CLIENT_SECRET
from ._pagination import AsyncPaginator, Paginator, RawPage, TextPage
from ._policy import Call, RateBudget, RequestStats, RetryPolicy

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
    "TextPage",
]
