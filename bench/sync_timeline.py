"""A sync's requests on a timeline: which listing's chain of pages bounds a whole sync. A
diagnostic beside `bench_sync_whole.py`, not a figure of merit (the sync runs in this process,
its client's transport wrapped to time each request).

    python bench/sync_timeline.py env.txt /tmp/t.duckdb [--resources transactions ...]

`env.txt` holds the PAYLENS_* lines a served service printed (`paylens sandbox serve`,
`bench/second_serve.py`). Prints the sync's wall seconds, then the listings (a path and its
filters, cursor and limit left out) with the most time between their first request's start
and their last answer's end: pages, that span, and the seconds spent waiting for answers. A
listing read by cursor cannot be read faster than its pages one after another: the longest
span is the floor the interface sets for the whole sync at this latency.
"""

from __future__ import annotations

import argparse
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx

from paylens import Client
from paylens.warehouse import sync_file


class Timed(httpx.BaseTransport):
    """Each request's listing, start and end (seconds from `origin`)."""

    def __init__(self, inner: httpx.BaseTransport, origin: float) -> None:
        self.inner = inner
        self.origin = origin
        self.lock = threading.Lock()
        self.requests: list[tuple[str, float, float]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        started = time.perf_counter() - self.origin
        response = self.inner.handle_request(request)
        response.read()
        ended = time.perf_counter() - self.origin
        filters = sorted(
            (k, v) for k, v in request.url.params.multi_items() if k not in ("cursor", "limit")
        )
        listing = request.url.path + (
            "?" + "&".join(f"{k}={v}" for k, v in filters) if filters else ""
        )
        with self.lock:
            self.requests.append((listing, started, ended))
        return response

    def close(self) -> None:
        self.inner.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("env", type=Path)
    parser.add_argument("db", type=Path)
    parser.add_argument("--resources", nargs="+")
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument("--all", action="store_true", help="every request, in order")
    args = parser.parse_args()
    env = dict(line.split("=", 1) for line in args.env.read_text().split() if "=" in line)
    origin = time.perf_counter()
    client = Client(env["PAYLENS_BASE_URL"], env["PAYLENS_CLIENT_ID"], env["PAYLENS_CLIENT_SECRET"])
    timed = Timed(client._http._transport, origin)
    client._http._transport = timed
    made = time.perf_counter() - origin
    keywords: dict[str, Any] = {"progress": False}
    if args.resources:
        keywords["resources"] = args.resources
    report = sync_file(args.db, client, **keywords)
    total = time.perf_counter() - origin
    print(f"client {made:.2f} s; sync_file {total - made:.2f} s; {report.requests} requests")
    if args.all:
        for listing, started, ended in sorted(timed.requests, key=lambda r: r[1]):
            print(f"{started:6.3f} {ended:6.3f} {listing}")
    chains: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for listing, started, ended in timed.requests:
        chains[listing].append((started, ended))
    first = min(s for _, s, _ in timed.requests)
    last = max(e for _, _, e in timed.requests)
    print(f"first request at {first:.2f} s, last answer at {last:.2f} s")
    spans = sorted(
        chains.items(), key=lambda kv: -(max(e for _, e in kv[1]) - min(s for s, _ in kv[1]))
    )
    for listing, times in spans[: args.top]:
        lo, hi = min(s for s, _ in times), max(e for _, e in times)
        waited = sum(e - s for s, e in times)
        print(
            f"{hi - lo:6.2f} s span ({lo:5.2f} to {hi:5.2f}), {len(times):4d} requests, "
            f"{waited:6.2f} s answering, {waited / len(times) * 1000:5.1f} ms each: {listing}"
        )


if __name__ == "__main__":
    main()
