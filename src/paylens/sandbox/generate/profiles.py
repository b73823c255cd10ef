"""Shapes of the generated world: how many customers stand behind the transactions, and how
many accounts and cards each holds.

- `default`: a platform of active customers (one per ~50 transactions, 30 to 20,000), each
  with an internal account in its home currency (some also USD, an embedded wallet, crypto),
  its own bank account and a few beneficiaries; cards on about a third of eligible accounts.
- `remittance`: a remittance platform: about one customer per transaction; 60 % of customers
  hold an internal account (the others only receive), every customer its own bank account and
  some a beneficiary (1.2 external accounts per customer), cards for 10 % of customers. At
  20,000 transactions: 20,000 customers, ~24,000 external accounts, ~12,000 internal accounts,
  2,000 cards.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from paylens.errors import InvalidArgumentError

if TYPE_CHECKING:
    from .entities import Customers


@dataclass(frozen=True)
class Profile:
    """How the entities are shaped (per customer)."""

    name: str
    #: customers per generated transaction (None: one per ~50, 30 to 20,000)
    customers_per_transaction: float | None = None
    #: share of customers holding an internal account in their home currency (the others only
    #: receive: they never start a transaction)
    internal_share: float = 1.0
    #: extra internal accounts (USD beside a foreign home currency, embedded wallets, crypto)
    extra_internal: bool = True
    #: mean third-party external accounts (beneficiaries) per customer, at most 4 each
    beneficiaries: float = 1.6
    #: cards per customer (None: a card on ~35 % of eligible accounts, some a second one)
    cards_per_customer: float | None = None


DEFAULT = Profile("default")
PROFILES = {
    "default": DEFAULT,
    "remittance": Profile(
        "remittance",
        customers_per_transaction=1.0,
        internal_share=0.6,
        extra_internal=False,
        beneficiaries=0.2,
        cards_per_customer=0.1,
    ),
}


def profile_named(name: str | Profile) -> Profile:
    if isinstance(name, Profile):
        return name
    try:
        return PROFILES[name]
    except KeyError:
        raise InvalidArgumentError(
            "profile", f"must be one of {', '.join(PROFILES)}; got {name!r}"
        ) from None


def internal_holders(
    rng: np.random.Generator, customers: Customers, profile: Profile
) -> np.ndarray:
    """Customers holding a home internal account; the others get no activity (weight 0). The
    first customer always holds one (the planted scenarios need a USD bank customer)."""
    n = len(customers)
    if profile.internal_share >= 1.0:
        return np.arange(n)
    holds = rng.random(n) < profile.internal_share
    holds[0] = True
    customers.weight[~holds] = 0.0
    return np.flatnonzero(holds)


def card_accounts(
    rng: np.random.Generator, eligible: np.ndarray, customers: int, profile: Profile
) -> np.ndarray:
    """Accounts given a card: `cards_per_customer` of the customers' count, drawn from the
    eligible accounts (one card each)."""
    assert profile.cards_per_customer is not None
    wanted = min(len(eligible), round(customers * profile.cards_per_customer))
    return np.sort(rng.choice(eligible, size=wanted, replace=False))
