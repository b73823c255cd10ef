"""The re-sync's cost with and without webhook events: requests of a full sync, then of an
incremental sync after an advance, for a warehouse without an event store (the rolling
re-verification at `verify_syncs`, default 7) and for one whose receiver was up without a gap
(`verify_syncs_with_events`, default 30) and stored the webhook of every transition the
sandbox made in the advance (its world's own transitions, as its sender would post them,
appended to the store directly: the receiver's cost is `bench_webhooks.py`'s), the sandbox
served over loopback HTTP and its request counter read around each sync.

    python bench/bench_events_resync.py --transactions 50000 --advance-hours 24

Prints one JSON line per warehouse: requests of the full sync and of the re-sync, their ratio,
the records re-verified, and the share of records new or changed.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from paylens import Client, Sandbox
from paylens.sandbox.wire.webhooks import webhook_body
from paylens.sandbox.world.events import Transition
from paylens.warehouse import SyncOptions, SyncReport, Warehouse
from paylens.webhooks import Event, EventStore, events_path, stamp


def measure(transactions: int, hours: float, tmp: Path) -> list[dict[str, object]]:
    """Both warehouses against one sandbox: each synced in full and once more, the clock
    advanced, each synced again."""
    sandbox = Sandbox(seed=1, transactions=transactions)
    options = SyncOptions(progress=False)
    store = EventStore(events_path(tmp / "events.duckdb"))
    store.receiver_started("bench")  # up for the whole run: no gap
    done = threading.Event()

    def heartbeat() -> None:  # as a running receiver beats (a silent one was killed)
        while not done.wait(5):
            store.receiver_alive("bench")

    beating = threading.Thread(target=heartbeat, daemon=True)
    beating.start()
    lines: list[dict[str, object]] = []
    with (
        sandbox.serve() as server,
        Warehouse(tmp / "plain.duckdb") as plain,
        Warehouse(tmp / "events.duckdb") as kept,
    ):
        client = Client(server.base_url, sandbox.client_id, sandbox.client_secret, timeout=60)

        def sync(wh: Warehouse) -> tuple[SyncReport, int, float]:
            before, cpu = sandbox.requests.count(), time.process_time()
            report = wh.sync(client, resources=["transactions"], options=options)
            return report, sandbox.requests.count() - before, time.process_time() - cpu

        fulls = [sync(wh) for wh in (plain, kept)]
        for wh in (plain, kept):  # a first incremental sync: the next is covered since it
            sync(wh)
        events: list[Event] = []

        def webhook(transition: Transition) -> None:
            webhook_id, body = webhook_body(transition.event, transition.at, transition.record)
            sent = datetime.fromtimestamp(transition.at / 1e6, UTC)
            events.append(Event(webhook_id, transition.event, stamp(sent), body))

        sandbox.world.on_transition = webhook
        sandbox.advance(timedelta(hours=hours))
        store.append(events)
        store.receiver_alive("bench")
        for wh, (full, full_requests, _) in zip((plain, kept), fulls, strict=True):
            again, requests, cpu = sync(wh)
            lines.append(
                {
                    "with_events": wh is kept,
                    "transactions": transactions,
                    "advance_hours": hours,
                    "full_requests": full_requests,
                    "resync_requests": requests,
                    "resync_share_of_full": round(requests / full_requests, 4),
                    "resync_cpu_s": round(cpu, 2),
                    "reverified": again.reverified,
                    "changed_share": round((again.new + again.changed) / max(1, full.new), 4),
                    "verify_syncs": again.events.verify_syncs if again.events else None,
                    "events_applied": again.events.applied if again.events else None,
                    "events_exact": again.events.exact if again.events else None,
                }
            )
    done.set()
    beating.join()
    store.close()
    lines.append({"peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)})
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transactions", type=int, default=50_000)
    parser.add_argument("--advance-hours", type=float, default=24.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for line in measure(args.transactions, args.advance_hours, Path(tmp)):
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
