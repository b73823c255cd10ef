"""paylens's full sync against the sandbox in-process (its in-memory transport, no HTTP): what
the sync costs when the HTTP stack is not what is measured. The sandbox (same seed, same size
as the served one) is generated before the clock starts; it renders its pages in this process.

    python bench/baselines/paylens_inprocess.py TRANSACTIONS DB [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import resource
import time

import paylens
from paylens.warehouse import sync_file


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transactions", type=int)
    parser.add_argument("db")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sandbox = paylens.Sandbox(seed=args.seed, transactions=args.transactions)
    client = sandbox.client()
    started = time.perf_counter()
    report = sync_file(args.db, client, progress=False, concurrency=16, resources=["transactions"])
    print(
        json.dumps(
            {
                "seconds": time.perf_counter() - started,
                "requests": report.requests,
                "new": report.new,
                "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }
        )
    )


if __name__ == "__main__":
    main()
