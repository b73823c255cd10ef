"""Webhook receiver benchmark: verified events per second sustained, and the acknowledgement
latency at a steady rate, against `paylens webhooks serve` in processes of its own, posted to
over loopback by an asyncio poster of pre-rendered HTTP/1.1 requests on keep-alive connections.

    python bench/bench_webhooks.py                                  # defaults below
    python bench/bench_webhooks.py --events 30000 --receivers 2 --connections 128 --rate 500

Every event is signed beforehand (P-256, DER, as the service signs), so the poster spends its CPU
on HTTP only; the receivers verify each signature, check the envelope, store it in a durable
commit (group commits) and answer. Measured:

- throughput: all `--events` posted as fast as `--connections` connections go, to
  `--receivers` receiver processes sharing one store; events/s over the wall time, and the
  receivers' CPU seconds (user + system, from /proc) per 1,000 events;
- latency: `--latency-events` events posted open-loop at `--rate` events/s (each sent at its
  scheduled instant, whatever the answers before it), to one receiver; p50/p99/max of the time
  from sending to its 2xx.

Prints one JSON line per measurement, and the load (`uptime`) before each; `--out FILE` also
writes them to FILE.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _events(key: ec.EllipticCurvePrivateKey, count: int, prefix: str) -> list[tuple[bytes, str]]:
    """`count` card transaction webhooks of ~600 bytes, each with its signature header."""
    import base64

    signed = []
    for n in range(count):
        body = orjson.dumps(
            {
                "id": f"Webhook:{prefix}-{n}",
                "type": "CARD_TRANSACTION.SETTLED",
                "timestamp": "2025-10-01T12:00:00Z",
                "data": {
                    "id": f"Transaction:{prefix}-{n}",
                    "type": "CARD",
                    "status": "SETTLED",
                    "cardId": "Card:019542f5-b3e7-1d02-0000-000000000001",
                    "customerId": "Customer:019542f5-b3e7-1d02-0000-000000000002",
                    "platformCustomerId": "18d3e5f7b4a9c2",
                    "authorizedAmount": {"amount": 1250 + n % 997, "currency": {"code": "USD"}},
                    "settledAmount": {"amount": 1250 + n % 997, "currency": {"code": "USD"}},
                    "merchant": {"name": "Coffee Shop", "mcc": "5814", "country": "US"},
                    "authorizedAt": "2025-10-01T11:58:00Z",
                    "settledAt": "2025-10-01T12:00:00Z",
                    "createdAt": "2025-10-01T11:58:00Z",
                    "updatedAt": "2025-10-01T12:00:00Z",
                },
            }
        )
        signature = base64.b64encode(key.sign(body, ec.ECDSA(hashes.SHA256()))).decode()
        signed.append((body, signature))
    return signed


#: The receiver as `paylens webhooks serve` runs it, each request's time in the receiver (from
#: its first byte parsed to its answer's start) written to a file: the receiver's own share of
#: an acknowledgement's latency, apart from the poster's and the kernel's.
_TIMED = """
import sys, time
from pathlib import Path
from paylens.webhooks import app
from paylens.webhooks._serve import serve
import paylens.webhooks._serve as served

out = open(sys.argv[3], "a")
inner = app(sys.argv[1], public_keys=[Path(sys.argv[2])])

async def timed(scope, receive, send):
    if scope["type"] != "http":
        return await inner(scope, receive, send)
    started = time.perf_counter()
    async def answer(message):
        if message["type"] == "http.response.start":
            out.write(f"{time.perf_counter() - started}\\n")
            out.flush()
        await send(message)
    await inner(scope, receive, answer)

served.app = lambda *a, **k: timed
serve(sys.argv[1], public_keys=[Path(sys.argv[2])], port=0, ready=lambda u: print(u, flush=True))
"""


def _start(db: Path, key: Path, timings: Path | None = None) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "PYTHONPATH": SRC}
    if timings is None:
        command = [sys.executable, "-m", "paylens.cli", "webhooks", "serve", "--db", str(db),
                   "--public-key", str(key), "--port", "0"]  # fmt: skip
    else:
        command = [sys.executable, "-c", _TIMED, str(db), str(key), str(timings)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


class _Connection:
    """One keep-alive HTTP/1.1 connection posting pre-rendered requests, one at a time: a
    poster that spends tens of microseconds a request, so the receivers have the cores (an
    httpx poster cost twice a receiver's CPU per event and was the bottleneck)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, url: str) -> _Connection:
        address = httpx.URL(url)
        return cls(*await asyncio.open_connection(address.host, address.port))

    async def post(self, request: bytes) -> int:
        self.writer.write(request)
        head = await self.reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        if length:
            await self.reader.readexactly(length)
        return int(head[9:12])

    def close(self) -> None:
        self.writer.close()


def _rendered(url: str, events: list[tuple[bytes, str]]) -> list[bytes]:
    """Each event as the bytes of its POST to `url`."""
    address = httpx.URL(url)
    out = []
    for body, signature in events:
        head = (
            f"POST {address.raw_path.decode()} HTTP/1.1\r\nHost: {address.host}:{address.port}"
            f"\r\nContent-Type: application/json\r\nX-Service-Signature: {signature}"
            f"\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        out.append(head.encode() + body)
    return out


async def _flood(urls: list[str], events: list[tuple[bytes, str]], connections: int) -> float:
    """Post every event over `connections` connections (spread over `urls`); wall seconds."""
    queues = [_rendered(url, events) for url in urls]
    next_event = iter(range(len(events)))

    async def worker(i: int) -> None:
        connection = await _Connection.open(urls[i % len(urls)])
        requests = queues[i % len(urls)]
        try:
            for n in next_event:
                status = await connection.post(requests[n])
                assert status == 200, status
        finally:
            connection.close()

    started = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(connections)))
    return time.perf_counter() - started


async def _steady(url: str, events: list[tuple[bytes, str]], rate: float) -> list[float]:
    """Post each event at its instant (`rate` a second, open loop) over a pool of keep-alive
    connections; seconds from each send to its 2xx."""
    latencies: list[float] = []
    requests = _rendered(url, events)
    pool: asyncio.Queue[_Connection] = asyncio.Queue()
    for _ in range(64):
        pool.put_nowait(await _Connection.open(url))

    async def one(request: bytes, due: float) -> None:
        connection = await pool.get()
        status = await connection.post(request)
        latencies.append(time.perf_counter() - due)
        pool.put_nowait(connection)
        assert status == 200, status

    started = time.perf_counter()
    tasks = []
    for n, request in enumerate(requests):
        # yield at each send, even when late, so the answers are read as they come
        await asyncio.sleep(max(0.0, started + n / rate - time.perf_counter()))
        tasks.append(asyncio.create_task(one(request, started + n / rate)))
    await asyncio.gather(*tasks)
    while not pool.empty():
        pool.get_nowait().close()
    return sorted(latencies)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--receivers", type=int, default=2)
    parser.add_argument("--connections", type=int, default=128)
    parser.add_argument("--rate", type=float, default=500.0)
    parser.add_argument("--latency-events", type=int, default=5_000)
    parser.add_argument("--out", type=Path, help="also write the results here (JSON)")
    args = parser.parse_args(argv)
    key = ec.generate_private_key(ec.SECP256R1())
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        pem = Path(tmp) / "key.pem"
        pem.write_bytes(
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        db = Path(tmp) / "wh.duckdb"
        flood = _events(key, args.events, "flood")
        steady = _events(key, args.latency_events, "steady")

        load = _uptime()
        receivers = [_start(db, pem) for _ in range(args.receivers)]
        try:
            cpu_before = sum(_cpu_seconds(p.pid) for p, _ in receivers)
            poster_before = _cpu_seconds(os.getpid())
            seconds = asyncio.run(_flood([u for _, u in receivers], flood, args.connections))
            cpu = sum(_cpu_seconds(p.pid) for p, _ in receivers) - cpu_before
            poster = _cpu_seconds(os.getpid()) - poster_before
        finally:
            for process, _ in receivers:
                process.terminate()
                process.wait()
        results["throughput"] = {
            "events": args.events, "receivers": args.receivers,
            "connections": args.connections, "seconds": round(seconds, 2),
            "events_per_s": round(args.events / seconds),
            "receiver_cpu_s_per_1000": round(1000 * cpu / args.events, 3),
            "events_per_receiver_cpu_s": round(args.events / cpu),
            "poster_cpu_s_per_1000": round(1000 * poster / args.events, 3),
            # what 2 cores sustain when receivers and poster have them to themselves
            "events_per_s_on_2_cores": round(2 * args.events / (cpu + poster)),
            "load": load,
        }  # fmt: skip
        print(json.dumps({"throughput": results["throughput"]}), flush=True)

        load = _uptime()
        timings = Path(tmp) / "timings.txt"
        process, url = _start(db, pem, timings)
        try:
            latencies = asyncio.run(_steady(url, steady, args.rate))
        finally:
            process.terminate()
            process.wait()
        inside = sorted(float(line) for line in timings.read_text().split())

        def at(values: list[float], q: float) -> float:
            return round(1000 * values[min(len(values) - 1, int(q * len(values)))], 1)

        results["latency"] = {
            "events": len(latencies), "rate_per_s": args.rate,
            "poster_p50_ms": at(latencies, 0.50), "poster_p99_ms": at(latencies, 0.99),
            "receiver_p50_ms": at(inside, 0.50), "receiver_p99_ms": at(inside, 0.99),
            "receiver_max_ms": round(1000 * inside[-1], 1), "load": load,
        }  # fmt: skip
        print(json.dumps({"latency": results["latency"]}), flush=True)
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    main()
