"""The smaller resources (customers, cards, accounts): thousands of rows, not millions, so each
sync re-reads them whole."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

import duckdb
import orjson
import pyarrow as pa
from pydantic import TypeAdapter, ValidationError

from paylens import models
from paylens.client import Client, RawPage
from paylens.frames import to_arrow

from .. import _store

#: Resource name -> (how to list it from the client, its table).
SMALL_RESOURCES: dict[str, Callable[[Client], Iterable[RawPage]]] = {
    "customers": lambda c: c.customers.list().pages(raw=True),
    "cards": lambda c: c.cards.list().pages(raw=True),
    "internal_accounts": lambda c: c.internal_accounts.list().pages(raw=True),
    "external_accounts": lambda c: c.external_accounts.list().pages(raw=True),
}

_RESOURCE_MODELS: dict[str, Any] = {
    "customers": models.Customer,
    "cards": models.Card,
    "internal_accounts": models.InternalAccount,
    "external_accounts": models.ExternalAccount,
}


def sync_small_resource(
    con: duckdb.DuckDBPyConnection,
    db_lock: threading.Lock | threading.RLock,
    client: Client,
    resource: str,
    run_id: int,
    started: datetime,
) -> int:
    """Re-read a small resource whole (thousands of rows, not millions) and upsert it;
    returns how many records were rejected."""
    adapter = models.page_adapter(_RESOURCE_MODELS[resource])
    item = _RESOURCE_MODELS[resource]
    one = TypeAdapter(item)
    records: list[dict[str, Any]] = []
    rejects: list[tuple[Any, ...]] = []
    for page in SMALL_RESOURCES[resource](client):
        try:
            adapter.validate_json(page.content)
            records += page.data
        except ValidationError:
            for record in page.data:
                try:
                    one.validate_python(record)
                    records.append(record)
                except ValidationError as exc:
                    rid = record.get("id") if isinstance(record, dict) else None
                    rejects.append(
                        (
                            run_id,
                            resource,
                            rid,
                            None,
                            None,
                            str(exc)[:2000],
                            orjson.dumps(record).decode(),
                            started,
                        )
                    )
    unique = list({r["id"]: r for r in records}.values())
    batch: pa.Table = to_arrow(resource, unique)
    with db_lock, _store.transaction(con):
        _store.upsert(con, resource, batch, run_id=run_id, now=started)
        _store.record_rejects(con, rejects)
    return len(rejects)


def utcnow() -> datetime:
    return datetime.now(UTC)


def elapsed_since(start: float) -> float:
    return time.perf_counter() - start
