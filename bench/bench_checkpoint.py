"""What each commit of a full `paylens sync --resources transactions` takes, and the process's
CPU, at checkpoint thresholds of the write connection: the commit whose log crosses the
threshold checkpoints the file, and a Ctrl-C landing on it waits for it (#34).

    cd bench && python bench_checkpoint.py --transactions 200000 128MB 1GB 128MB 1GB
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_resume import with_threshold
from bench_sync import served

_SYNC = r"""
import sys, time
from paylens.cli import main
from paylens.warehouse.sync import run

land = run.TransactionSync._land

def timed(self, batch):
    started = time.perf_counter()
    land(self, batch)
    print("commit", batch.records, time.perf_counter() - started, flush=True)

run.TransactionSync._land = timed
sys.argv = ["paylens", "sync", "--db", sys.argv[1], "--resources", "transactions", "--quiet"]
main()
"""


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transactions", type=int, default=200_000)
    parser.add_argument("thresholds", nargs="+", help="DuckDB sizes, e.g. 128MB 1GB")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as tmp,
        served(args.transactions, extra=["--clock", "fixed"]) as env,
    ):
        env = {k: v for k, v in env.items() if k.startswith("PAYLENS_")}
        for i, threshold in enumerate(args.thresholds):
            load, cpu, started = os.getloadavg()[0], _cpu(), time.perf_counter()
            out = subprocess.run(
                [sys.executable, "-c", with_threshold(_SYNC, threshold), f"{tmp}/{i}.duckdb"],
                capture_output=True,
                text=True,
                env={**os.environ, **env},
                check=True,
            ).stdout
            seconds = sorted(
                float(line.split()[2]) for line in out.splitlines() if line.startswith("commit ")
            )
            print(
                json.dumps(
                    {
                        "threshold": threshold,
                        "load": round(load, 1),
                        "commits": len(seconds),
                        "longest_commits": [round(s, 2) for s in seconds[-4:]],
                        "commit_seconds": round(sum(seconds), 2),
                        "cpu_seconds": round(_cpu() - cpu, 2),
                        "wall_seconds": round(time.perf_counter() - started, 2),
                    }
                ),
                flush=True,
            )
            for path in Path(tmp).glob(f"{i}.duckdb*"):
                path.unlink()


if __name__ == "__main__":
    main()
