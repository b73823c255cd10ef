"""Webhooks: the events the service pushes, verified, stored once and folded into the warehouse.

The event store (`EventStore`, a SQLite file beside the warehouse at `events_path(db)`) is where
every receiver process writes and where the sync reads; see `paylens.webhooks._store` for why.
The receiver (`app`, `serve`) and the approval policies load on first use: a sync that folds
events in loads neither the signature checks nor the web server.
"""

from typing import TYPE_CHECKING

from paylens import _lazy
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

if TYPE_CHECKING:
    from paylens.webhooks._approve import VERDICTS, Verdict, approve_where
    from paylens.webhooks._receive import MAX_BODY_BYTES, app
    from paylens.webhooks._serve import serve

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

_LAZY: _lazy.Table = {
    "VERDICTS": ("._approve", "VERDICTS"),
    "Verdict": ("._approve", "Verdict"),
    "approve_where": ("._approve", "approve_where"),
    "MAX_BODY_BYTES": ("._receive", "MAX_BODY_BYTES"),
    "app": ("._receive", "app"),
    "serve": ("._serve", "serve"),
}
__getattr__, __dir__ = _lazy.attributes(__name__, _LAZY, __all__)
