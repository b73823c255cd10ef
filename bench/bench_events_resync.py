"""The re-sync's cost with and without webhook events: requests of a full sync, then of an
incremental sync after an advance, for a warehouse without an event store (the rolling
re-verification at `verify_syncs`, default 7) and for one whose receiver was up without a gap
(`verify_syncs_with_events`, default 30), the sandbox served over loopback HTTP and its request
counter read around each sync.

    python bench/bench_events_resync.py --transactions 50000 --advance-hours 24

Prints one JSON line per warehouse: requests of the full sync and of the re-sync, their ratio,
the records re-verified, and the share of records new or changed.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from paylens import Client, Sandbox
from paylens.warehouse import SyncOptions, Warehouse
from paylens.webhooks import EventStore, events_path


def measure(transactions: int, hours: float, with_events: bool, tmp: Path) -> dict[str, object]:
    sandbox = Sandbox(seed=1, transactions=transactions)
    path = tmp / f"{'events' if with_events else 'plain'}.duckdb"
    store = EventStore(events_path(path)) if with_events else None
    if store is not None:
        store.receiver_started("bench")  # up for the whole run: no gap
    options = SyncOptions(progress=False)
    with sandbox.serve() as server, Warehouse(path) as wh:
        client = Client(server.base_url, sandbox.client_id, sandbox.client_secret, timeout=60)
        before = sandbox.requests.count()
        full = wh.sync(client, resources=["transactions"], options=options)
        full_requests = sandbox.requests.count() - before
        # a first incremental sync: it has a previous sync to be covered since
        wh.sync(client, resources=["transactions"], options=options)
        sandbox.advance(timedelta(hours=hours))
        if store is not None:
            store.receiver_alive("bench")
        before = sandbox.requests.count()
        cpu = time.process_time()
        again = wh.sync(client, resources=["transactions"], options=options)
        resync_requests = sandbox.requests.count() - before
        changed = again.new + again.changed
    return {
        "with_events": with_events,
        "transactions": transactions,
        "advance_hours": hours,
        "full_requests": full_requests,
        "full_records": full.new,
        "resync_requests": resync_requests,
        "resync_share_of_full": round(resync_requests / full_requests, 4),
        "resync_cpu_s": round(time.process_time() - cpu, 2),
        "reverified": again.reverified,
        "changed_share": round(changed / max(1, full.new), 4),
        "verify_syncs": again.events.verify_syncs if again.events else options.verify_syncs,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transactions", type=int, default=50_000)
    parser.add_argument("--advance-hours", type=float, default=24.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for with_events in (False, True):
            line = measure(args.transactions, args.advance_hours, with_events, Path(tmp))
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
