"""How fresh the smaller resources are kept: `Freshness` (how old each may grow before a sync
re-reads it whole), what the warehouse knows of their last reads, and why one is read whole."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime, timedelta

from paylens.errors import InvalidArgumentError


@dataclass(frozen=True)
class Freshness:
    """How old a resource may grow before a sync re-reads it whole (in the service's time).

    Cards and accounts are listed only whole, so each is re-read when its last whole read is
    at least this old (or `full=True`, or `resources=` names it). Customers are read every
    sync by what changed (`updatedAfter`) and checked by counts; `customers` is how often
    they are read whole anyway, to find what no filter shows.

    The defaults: balances (internal accounts) move with every payment and are what operators
    look at, so 10 minutes; a card's state (frozen, closed) matters within the hour; external
    (beneficiary) accounts change rarely and are the largest listing, so 12 hours. A `timedelta(0)`
    re-reads on every sync."""

    internal_accounts: timedelta = timedelta(minutes=10)
    cards: timedelta = timedelta(hours=1)
    external_accounts: timedelta = timedelta(hours=12)
    customers: timedelta = timedelta(hours=24)

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if not isinstance(value, timedelta) or value < timedelta(0):
                raise InvalidArgumentError(
                    f"freshness.{item.name}", f"must be a timedelta, 0 or more; got {value!r}"
                )

    def limit(self, resource: str) -> timedelta:
        value: timedelta = getattr(self, resource)
        return value


@dataclass(frozen=True)
class LastRead:
    """What the warehouse knows of a resource's last reads."""

    whole_at: datetime | None = None  # the service's time when its last whole read began
    watermark: datetime | None = None  # customers: the newest stored `updatedAt`
    quarantined: int = 0  # records rejected and not stored since


def whole_reason(
    resource: str, last: LastRead, now: datetime, freshness: Freshness, *, forced: bool
) -> str | None:
    """Why the resource is read whole now, or None (customers: read by what changed)."""
    if forced:
        return "asked for"
    if last.whole_at is None:
        return "never read whole"
    if last.quarantined:
        return f"{last.quarantined} quarantined record(s) to retry"
    limit = freshness.limit(resource)
    if now - last.whole_at >= limit:
        return f"last read whole {age_text(now - last.whole_at)} ago (limit {age_text(limit)})"
    return None


def age_text(delta: timedelta) -> str:
    """A duration as a person reads it: 45s, 10m, 2.5h, 3.0d."""
    seconds = max(0, int(delta.total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"
