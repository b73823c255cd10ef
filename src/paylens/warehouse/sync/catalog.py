"""The resource catalogue: one declaration per synced resource, from which the rest is derived.

A `Resource` says what the warehouse needs to know of one listing of the service: its table
(and the frames table declaring its Arrow columns), its wire model, how a client lists it, its
primary key, the tables hanging off it, how a sync reads it (`Windows`: time windows with
reconciliation; `Cursor`: what changed since a stored watermark, checked by counts; `Whole`:
the whole listing, split by currency or by creation time) and how old it may grow before a
sync reads it whole again. From `RESOURCES` come the store's keys and tables, the typing and
landing of the smaller resources, their fetch's branches, `Freshness`' limits, the resources a
sync (and the CLI's `--resources`) accepts, and the `Warehouse`'s generic reader.

Adding a resource the interface lists is one `Resource` below, its wire model (`paylens.models`)
and its Arrow columns (`paylens.frames`), and its tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from paylens.frames import arrow_schema
from paylens.models import enums

if TYPE_CHECKING:  # the client loads with the first sync, not with the catalogue
    from paylens.client import Client, Paginator

#: How a client lists a resource: the bound `list` of one of its resource attributes.
Listing = Callable[["Client"], Callable[..., "Paginator[Any]"]]


@dataclass(frozen=True)
class Windows:
    """Read by creation-time windows, reconciled by counts per status (the transactions'
    engine: `plan`, `fetch`, `save`, `run`)."""


@dataclass(frozen=True)
class ByCurrency:
    """A whole read cut into one listing per currency (`filter`), when the per-currency counts
    add up to the whole's; the candidates are the stored values of `column` and the platform's
    currencies. A currency larger than its share is cut again by `then` (a filter and its
    values), when given."""

    column: str = "currency"
    filter: str = "currency"
    then: tuple[str, type[StrEnum]] | None = None


@dataclass(frozen=True)
class ByCreation:
    """A whole read cut by creation time (`created_after`/`created_before`, inclusive) into
    parts of about equal counts: at the stored quantiles of `created_at`, or (nothing stored)
    where counts of the records created before instants going back from now place them."""


@dataclass(frozen=True)
class Whole:
    """Read only whole, when its last whole read is older than its freshness limit (or the
    sync is full, or names it). `split`: how a large whole is cut into listings read at once
    (None: one listing; its filters would not cut it evenly)."""

    split: ByCurrency | ByCreation | None = None


@dataclass(frozen=True)
class Count:
    """A count the service gives (a listing with `filters`) beside the stored rows it must
    equal (those matching `where`, of the rows the last reads did not mark removed)."""

    filters: Mapping[str, Any]
    where: str = "TRUE"


@dataclass(frozen=True)
class Cursor:
    """Read on every sync by what changed since the newest stored `column` (the listing's
    `filter`, e.g. `updatedAfter`), then checked: when the service's `counts` do not equal the
    stored ones, or the last whole read is older than the freshness limit, read whole (`whole`
    says how)."""

    filter: str
    column: str
    counts: tuple[Count, ...] = (Count({}),)
    whole: Whole = Whole()


@dataclass(frozen=True)
class Child:
    """A table whose rows hang off a record of the resource (`parent`: the column naming it)."""

    table: str
    key: tuple[str, ...]
    parent: str = "id"


@dataclass(frozen=True)
class Resource:
    """One synced resource.

    - `name`: its table, its name in `resources=` and `--resources`, and in reports;
    - `model`: its wire model's name in `paylens.models` (loaded only to say why a record is
      refused);
    - `listing`: how a client lists it (`defaults`: filters given unless the caller gives
      them, e.g. deleted customers included);
    - `columns`: the `paylens.frames` table declaring its Arrow columns (default: `name`);
    - `key`, `children`: its primary key and the tables hanging off it;
    - `read`: `Windows`, `Cursor` or `Whole`;
    - `freshness`: how old it may grow before a sync reads it whole (`Freshness`' default);
    - `judged`: columns whose null has the typed model judge the record (it may refuse it);
    - `order`: the order of the `Warehouse`'s rows of it.
    """

    name: str
    model: str
    listing: Listing
    read: Windows | Cursor | Whole
    key: tuple[str, ...] = ("id",)
    children: tuple[Child, ...] = ()
    columns: str = ""
    defaults: Mapping[str, Any] = field(default_factory=dict)
    freshness: timedelta | None = None
    judged: tuple[str, ...] = ()
    order: str = "created_at"

    @property
    def table(self) -> str:
        """The `paylens.frames` table of its Arrow columns."""
        return self.columns or self.name

    @property
    def schema(self) -> pa.Schema:
        """Its Arrow schema (the record's raw JSON included)."""
        return arrow_schema(self.table)

    @property
    def small(self) -> bool:
        """Read by the smaller resources' sync (a cursor or whole), not by windows."""
        return not isinstance(self.read, Windows)


#: Every synced resource, in the order a sync reads and reports them.
CATALOGUE: tuple[Resource, ...] = (
    Resource(
        "transactions",
        model="Transaction",
        listing=lambda client: client.transactions.list,
        read=Windows(),
        children=(
            Child("outgoing_fees", ("id",)),
            Child("card_transactions", ("id",)),
            Child("payment_instructions", ("transaction_id", "position"), "transaction_id"),
        ),
    ),
    Resource(
        "customers",
        model="Customer",
        listing=lambda client: client.customers.list,
        defaults={"include_deleted": True},
        read=Cursor(
            "updated_after",
            "updated_at",
            counts=(
                Count({}),
                Count({"include_deleted": False}, "NOT coalesce(is_deleted, false)"),
            ),
            whole=Whole(ByCreation()),
        ),
        freshness=timedelta(hours=24),
        judged=("platform_customer_id", "customer_type"),
    ),
    Resource(
        "cards",
        model="Card",
        listing=lambda client: client.cards.list,
        read=Whole(),  # a few pages: their filters would not split them evenly
        freshness=timedelta(hours=1),
        judged=("cardholder_id", "state", "form", "created_at", "updated_at"),
    ),
    Resource(
        "internal_accounts",
        model="InternalAccount",
        listing=lambda client: client.internal_accounts.list,
        read=Whole(ByCurrency("balance_currency", then=("type", enums.InternalAccountType))),
        freshness=timedelta(minutes=10),
        judged=("customer_id", "type", "status"),
    ),
    Resource(
        "external_accounts",
        model="ExternalAccount",
        listing=lambda client: client.external_accounts.list,
        read=Whole(ByCurrency()),
        freshness=timedelta(hours=12),
        judged=("customer_id", "status", "currency"),
        order="id",
    ),
    Resource(
        "platform_external_accounts",
        model="ExternalAccount",
        listing=lambda client: client.external_accounts.list_platform,
        columns="external_accounts",
        read=Whole(ByCurrency()),
        freshness=timedelta(hours=12),
        judged=("status", "currency"),
        order="id",
    ),
)

#: The catalogue by name.
RESOURCES: Mapping[str, Resource] = {r.name: r for r in CATALOGUE}
#: Every resource's name, in the order a sync reads them.
NAMES: tuple[str, ...] = tuple(RESOURCES)
#: The resources beside transactions (a cursor or whole reads), in the order a sync reports them.
SMALL_RESOURCES: tuple[str, ...] = tuple(r.name for r in CATALOGUE if r.small)
#: Each record table with its primary key: the resources' and the tables hanging off them.
PRIMARY_KEYS: Mapping[str, tuple[str, ...]] = {
    table: key
    for r in CATALOGUE
    for table, key in ((r.name, r.key), *((c.table, c.key) for c in r.children))
}
#: The frames table declaring each record table's Arrow columns.
COLUMNS: Mapping[str, str] = {
    **{table: table for table in PRIMARY_KEYS},
    **{r.name: r.table for r in CATALOGUE},
}
#: How old each smaller resource may grow before a sync reads it whole (`Freshness`' defaults).
FRESHNESS: Mapping[str, timedelta] = {
    r.name: r.freshness for r in CATALOGUE if r.freshness is not None
}
