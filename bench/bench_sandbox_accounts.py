"""Sandbox benchmark: `GET /customers/internal-accounts` pages of a 100,000-transaction sandbox,
whose balances are computed from its transactions (`sandbox.world.ledger`).

    python bench/bench_sandbox_accounts.py

Times (CPU, `time.process_time`) `sandbox.app.handle` on up to 20 pages of 100 accounts, then
again after the clock moved one hour (the first page recomputes the balances).
"""

from __future__ import annotations

import base64
import statistics
import time
from datetime import timedelta

import orjson

from paylens.sandbox import API_VERSION, Sandbox


def main() -> None:
    sandbox = Sandbox(seed=0, transactions=100_000)
    secret = f"{sandbox.client_id}:{sandbox.client_secret}".encode()
    auth = {"authorization": "Basic " + base64.b64encode(secret).decode()}

    def pages(n: int = 20) -> list[float]:
        out, cursor = [], None
        for _ in range(n):
            target = f"/{API_VERSION}/customers/internal-accounts?limit=100"
            target += f"&cursor={cursor}" if cursor else ""
            started = time.process_time()
            reply = sandbox.app.handle("GET", target, auth, b"")
            out.append(time.process_time() - started)
            cursor = orjson.loads(reply.body).get("nextCursor")
            if not cursor:
                break
        return out

    first = pages()
    sandbox.advance(timedelta(hours=1))
    after = pages()
    print(
        f"{len(first)} pages: median {statistics.median(first) * 1000:.2f} ms, first page "
        f"{first[0] * 1000:.1f} ms; after advance: first page {after[0] * 1000:.1f} ms, median "
        f"{statistics.median(after) * 1000:.2f} ms"
    )


if __name__ == "__main__":
    main()
