"""Webhooks: the events the service pushes, verified, stored once and folded into the warehouse.

The event store (`EventStore`, a SQLite file beside the warehouse at `events_path(db)`) is where
every receiver process writes and where the sync reads; see `paylens.webhooks._store` for why.
"""

from paylens.webhooks._store import (
    Decision,
    Event,
    EventStore,
    StoredEvent,
    events_path,
    merge_intervals,
    now_text,
    stamp,
)

__all__ = [
    "Decision",
    "Event",
    "EventStore",
    "StoredEvent",
    "events_path",
    "merge_intervals",
    "now_text",
    "stamp",
]
