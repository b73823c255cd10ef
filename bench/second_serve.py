"""The independent second service (`tests/_second_service.py`) served over loopback HTTP for
benchmarks, in its own process, with its own cost kept off the clock.

    python bench/second_serve.py --transactions 20000 --latency 0.02 [--port 0]

It builds a remittance-shaped state once (about `--transactions` transactions through their
lifecycles over 30 days; 20,000 customers of which 1 % deleted, 12,000 internal accounts,
24,000 external accounts, 2,000 cards: the shape of `paylens sandbox serve --profile
remittance`) and then freezes it: its clock never moves, so each distinct request has one
answer. Each answer is rendered once, the first time its URL is asked for, and kept as the
bytes of a whole HTTP/1.1 response; afterwards a request costs a dictionary look-up and a
write. Every answer leaves `--latency` seconds after its request arrived (timers on one event
loop: waiting costs no CPU, and requests wait side by side).

Prints `PAYLENS_BASE_URL=`, `PAYLENS_CLIENT_ID=`, `PAYLENS_CLIENT_SECRET=` lines once it
listens (as `paylens sandbox serve` does). `GET /_bench/stats` (outside the API, answered at
once) tells the requests served, the answers rendered (cache misses: those cost rendering on
the clock) and their seconds, and the record counts.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import random
import sys
import time
from collections import Counter
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests import _second_service as second

#: The remittance profile's shape (besides its transactions).
CUSTOMERS, INTERNAL, EXTERNAL, CARDS, DELETED = 20_000, 12_000, 24_000, 2_000, 200
DAYS = 30


def build(transactions: int, seed: int) -> second.SecondService:
    """The second service's state: `transactions` (about: its generator draws them) through
    their lifecycles, then the smaller resources filled to the remittance shape."""
    # a bulk payout (30 % of the 6-hour steps) adds 32.5 records on average
    bursts = 4 * DAYS * 0.3 * 32.5
    per_day = max(1, round((transactions - bursts) / DAYS))
    svc = second.SecondService(seed, days=DAYS, per_day=per_day)
    rng = random.Random(f"{seed}-shape")
    while len(svc.customers) < CUSTOMERS:
        svc._new_customer()
    for name, keep in (("internal", INTERNAL), ("cards", CARDS)):
        records: dict[str, Any] = getattr(svc, name)
        for key in rng.sample(sorted(records), max(0, len(records) - keep)):
            del records[key]
    owners = sorted(svc.customers)
    while len(svc.external) < EXTERNAL:
        svc._new_external(rng.choice(owners))
    live = [c for c in svc.customers.values() if not c["isDeleted"]]
    for customer in rng.sample(live, max(0, DELETED - (len(svc.customers) - len(live)))):
        customer["isDeleted"] = True
    return svc


def _speed_up_rendering() -> None:
    """The service hashes each record's id (its tie order) and parses its stamps on every
    listing; they never change, so keep them (a first render of a page of 20,000 then costs
    milliseconds, not a tenth of a second). Nothing about the answers changes."""
    second._tie = functools.cache(second._tie)
    second._inv = functools.cache(second._inv)
    second.parse_ns = functools.cache(second.parse_ns)


def whole(response: httpx.Response) -> bytes:
    """`response` as the bytes of an HTTP/1.1 response."""
    body = response.read()
    head = [
        f"HTTP/1.1 {response.status_code} {response.reason_phrase}",
        f"Date: {response.headers['date']}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
    ]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


class Pages:
    """Whole HTTP responses by request target, rendered once each."""

    def __init__(self, svc: second.SecondService, port: int) -> None:
        self.svc = svc
        self.port = port
        self.cache: dict[bytes, bytes] = {}
        self.served = 0
        self.by_path: Counter[str] = Counter()
        self.rendered = 0
        self.render_seconds = 0.0

    def answer(self, target: bytes) -> bytes:
        self.served += 1
        self.by_path[target.split(b"?", 1)[0].decode("latin-1")] += 1
        found = self.cache.get(target)
        if found is None:
            started = time.perf_counter()
            found = self.cache[target] = self._render(target)
            self.rendered += 1
            self.render_seconds += time.perf_counter() - started
        return found

    def _render(self, target: bytes) -> bytes:
        url = f"http://127.0.0.1:{self.port}{target.decode('latin-1')}"
        response = self.svc.handle(httpx.Request("GET", url))
        self.svc.requests.clear()  # the service's own log of requests: not needed here
        return whole(response)

    def refusal(self) -> bytes:
        """What the read-only service answers to anything but GET."""
        return whole(self.svc._error(405, "INVALID_INPUT", "read-only service"))

    def stats(self) -> bytes:
        svc = self.svc
        body = json.dumps(
            {
                "served": self.served,
                "served_by_path": dict(self.by_path),
                "rendered": self.rendered,
                "render_seconds": round(self.render_seconds, 3),
                "records": {
                    "transactions": len(svc.listed()),
                    "customers": sum(not c["isDeleted"] for c in svc.customers.values()),
                    "customers_deleted": sum(c["isDeleted"] for c in svc.customers.values()),
                    "internal_accounts": len(svc.internal),
                    "external_accounts": len(svc.external),
                    "cards": len(svc.cards),
                },
            }
        ).encode()
        now = format_datetime(svc.clock.replace(microsecond=0), usegmt=True)
        head = f"HTTP/1.1 200 OK\r\nDate: {now}\r\nContent-Type: application/json\r\n"
        return (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body


class Connection(asyncio.Protocol):
    """One keep-alive connection: requests without bodies (the sync only reads), each
    answered `latency` seconds after it arrived."""

    def __init__(self, pages: Pages, latency: float) -> None:
        self.pages = pages
        self.latency = latency
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            head, self.buffer = self.buffer[:end], self.buffer[end + 4 :]
            method, target, _ = head.split(b"\r\n", 1)[0].split(b" ", 2)
            if target == b"/_bench/stats":
                self._write(self.pages.stats())
                continue
            if method != b"GET":
                self._write(self.pages.refusal())
                continue
            answer = self.pages.answer(target)
            asyncio.get_running_loop().call_later(self.latency, self._write, answer)

    def _write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)


async def _serve(svc: second.SecondService, port: int, latency: float) -> None:
    loop = asyncio.get_running_loop()
    pages = Pages(svc, port)
    server = await loop.create_server(
        lambda: Connection(pages, latency), "127.0.0.1", port, backlog=256
    )
    pages.port = server.sockets[0].getsockname()[1]
    print(f"PAYLENS_BASE_URL=http://127.0.0.1:{pages.port}/2025-10-13")
    print(f"PAYLENS_CLIENT_ID={svc.client_id}")
    print(f"PAYLENS_CLIENT_SECRET={svc.client_secret}", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transactions", type=int, default=20_000)
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--seed", type=int, default=34)
    args = parser.parse_args()
    svc = build(args.transactions, args.seed)
    _speed_up_rendering()
    asyncio.run(_serve(svc, args.port, args.latency))  # until terminated


if __name__ == "__main__":
    main()
