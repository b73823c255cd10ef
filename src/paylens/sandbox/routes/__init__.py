"""The service's routes, a module per resource; each registers its handlers with
`registry.route`, and importing this package imports them all, so `dispatch` serves every one."""

from . import accounts, cards, customers, platform, quotes, sandbox, transactions, wallets
from .registry import INTERFACE_ONLY, ROUTES, dispatch, route

__all__ = [
    "INTERFACE_ONLY",
    "ROUTES",
    "accounts",
    "cards",
    "customers",
    "dispatch",
    "platform",
    "quotes",
    "route",
    "sandbox",
    "transactions",
    "wallets",
]
