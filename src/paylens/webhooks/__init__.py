"""Webhooks: the events the service pushes, verified, stored once and folded into the warehouse.

The event store (`EventStore`, a SQLite file beside the warehouse at `events_path(db)`) is where
every receiver process writes and where the sync reads; see `paylens.webhooks._store` for why.
"""

from paylens.webhooks._approve import VERDICTS, Verdict, approve_where
from paylens.webhooks._receive import MAX_BODY_BYTES, app
from paylens.webhooks._serve import serve
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
    "MAX_BODY_BYTES",
    "VERDICTS",
    "Decision",
    "Event",
    "EventStore",
    "StoredEvent",
    "Verdict",
    "app",
    "approve_where",
    "events_path",
    "merge_intervals",
    "now_text",
    "serve",
    "stamp",
]
