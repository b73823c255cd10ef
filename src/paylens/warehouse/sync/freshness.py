"""How fresh the smaller resources are kept: `Freshness` (how old each may grow before a sync
re-reads it whole), what the warehouse knows of their last reads, and why one is read whole."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from paylens.errors import InvalidArgumentError

from .catalog import FRESHNESS


class Freshness:
    """How old a resource may grow before a sync re-reads it whole (in the service's time):
    one keyword per resource of the catalogue (`catalog.Resource.freshness` is its default),
    e.g. `Freshness(internal_accounts=timedelta(0))`.

    Cards and accounts are listed only whole, so each is re-read when its last whole read is
    at least this old (or `full=True`, or `resources=` names it). Customers are read every
    sync by what changed (`updatedAfter`) and checked by counts; `customers` is how often
    they are read whole anyway, to find what no filter shows.

    The defaults: balances (internal accounts) move with every payment and are what operators
    look at, so 10 minutes; a card's state (frozen, closed) matters within the hour; external
    (beneficiary) accounts, the customers' and the platform's, change rarely and are the
    largest listing, so 12 hours; customers, 24 hours. A `timedelta(0)` re-reads on every
    sync. Immutable and hashable; `limits` is every resource's."""

    __slots__ = ("limits",)
    limits: Mapping[str, timedelta]

    def __init__(self, **limits: timedelta) -> None:
        for name, value in limits.items():
            if name not in FRESHNESS:
                raise InvalidArgumentError(
                    "freshness",
                    f"names no resource read whole: {name!r} (known: {', '.join(FRESHNESS)})",
                )
            if not isinstance(value, timedelta) or value < timedelta(0):
                raise InvalidArgumentError(
                    f"freshness.{name}", f"must be a timedelta, 0 or more; got {value!r}"
                )
        object.__setattr__(self, "limits", {**FRESHNESS, **limits})

    def __getattr__(self, name: str) -> timedelta:
        try:
            return self.limits[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Freshness is immutable: {name} is not set")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Freshness) and self.limits == other.limits

    def __hash__(self) -> int:
        return hash(tuple(self.limits.items()))

    def __repr__(self) -> str:
        return f"Freshness({', '.join(f'{k}={v!r}' for k, v in self.limits.items())})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (_freshness, (dict(self.limits),))

    def limit(self, resource: str) -> timedelta:
        return self.limits[resource]


def _freshness(limits: dict[str, timedelta]) -> Freshness:
    return Freshness(**limits)


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
