"""The whole sync, as whole processes, against `paylens sandbox serve --profile remittance`
(20,000 transactions; behind them about 20,000 customers, 24,000 external accounts, 12,000
internal accounts, 2,000 cards) over loopback at 20 ms per request, in one run:

- `paylens sync` (all five resources) against the careful sequential baseline
  (`bench/baselines/careful.py`: one cursor per resource, one bulk insert each), run
  alternately `--repeats` times (medians), target >= 4x;
- `paylens sync` again with nothing changed: its requests as a share of a full sync's,
  target <= 20 %;
- transactions alone (`paylens sync --resources transactions`) against the baseline on
  transactions alone, target >= 4x.

    python bench/bench_sync_whole.py --out bench/results/sync-whole.json

Times are wall clock of each process from its start to its exit (interpreter start, imports,
opening the file and the final commit included). The sandbox's clock is fixed, so nothing
changes between syncs unless the benchmark says so.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_compare import machine
from bench_sync import served

HERE = Path(__file__).parent
CAREFUL = HERE / "baselines" / "careful.py"
_REQUESTS = re.compile(r"([\d,]+) requests")


def whole_process(cmd: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run one process to its exit: wall seconds and what it printed."""
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env})
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{cmd[:4]} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return {"seconds": seconds, "stdout": done.stdout}


def paylens_sync(env: dict[str, str], db: Path, *options: str) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "paylens.cli", "sync", "--db", str(db), "--quiet", *options]
    run = whole_process(cmd, env)
    found = _REQUESTS.search(run["stdout"])
    run["requests"] = int(found.group(1).replace(",", "")) if found else None
    run["report"] = run.pop("stdout").strip().splitlines()
    return run


def careful(env: dict[str, str], db: Path, *resources: str) -> dict[str, Any]:
    creds = [env["PAYLENS_BASE_URL"], env["PAYLENS_CLIENT_ID"], env["PAYLENS_CLIENT_SECRET"]]
    cmd = [sys.executable, str(CAREFUL), *creds, str(db)]
    if resources:
        cmd += ["--resources", *resources]
    run = whole_process(cmd, env)
    answer = json.loads(run.pop("stdout").strip().splitlines()[-1])
    return {"seconds": run["seconds"], "inner_seconds": answer["seconds"], **answer}


def _fresh(tmp: Path, name: str) -> Path:
    db = tmp / f"{name}.duckdb"
    for path in tmp.glob(f"{name}.duckdb*"):
        path.unlink()
    return db


def _median(runs: list[dict[str, Any]], key: str = "seconds") -> float:
    return statistics.median(r[key] for r in runs)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transactions", type=int, default=20_000)
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results: dict[str, Any] = {"machine": machine(), "latency_seconds": args.latency}
    extra = ["--profile", "remittance", "--clock", "fixed"]
    with (
        tempfile.TemporaryDirectory() as tmp_name,
        served(args.transactions, args.latency, extra=extra) as env,
    ):
        tmp = Path(tmp_name)
        results["sandbox_generation_seconds"] = float(env["generated_seconds"])
        whole: dict[str, list[dict[str, Any]]] = {"careful": [], "paylens": []}
        alone: dict[str, list[dict[str, Any]]] = {"careful": [], "paylens": []}
        resync: list[dict[str, Any]] = []
        for repeat in range(args.repeats):  # alternating, so load falls on both alike
            whole["careful"].append(careful(env, _fresh(tmp, "careful")))
            db = _fresh(tmp, "paylens")
            whole["paylens"].append(paylens_sync(env, db))
            resync.append(paylens_sync(env, db))
            alone["paylens"].append(
                paylens_sync(env, _fresh(tmp, "alone"), "--resources", "transactions")
            )
            alone["careful"].append(careful(env, _fresh(tmp, "careful"), "transactions"))
            print(
                json.dumps(
                    {
                        "repeat": repeat,
                        "whole": {k: v[-1]["seconds"] for k, v in whole.items()},
                        "alone": {k: v[-1]["seconds"] for k, v in alone.items()},
                        "resync_requests": resync[-1]["requests"],
                    }
                ),
                flush=True,
            )
        full_requests = _median(whole["paylens"], "requests")
        results["whole"] = {
            "careful_seconds": _median(whole["careful"]),
            "careful_requests": _median(whole["careful"], "requests"),
            "paylens_seconds": _median(whole["paylens"]),
            "paylens_requests": full_requests,
            "speedup": _median(whole["careful"]) / _median(whole["paylens"]),
            "records": whole["careful"][0]["records"],
            "paylens_report": whole["paylens"][-1]["report"],
        }
        results["unchanged_resync"] = {
            "seconds": _median(resync),
            "requests": _median(resync, "requests"),
            "share_of_full_sync_requests": _median(resync, "requests") / full_requests,
            "report": resync[-1]["report"],
        }
        results["transactions_alone"] = {
            "careful_seconds": _median(alone["careful"]),
            "paylens_seconds": _median(alone["paylens"]),
            "paylens_requests": _median(alone["paylens"], "requests"),
            "speedup": _median(alone["careful"]) / _median(alone["paylens"]),
        }
        results["runs"] = {"whole": whole, "alone": alone, "resync": resync}
    results["load_average_at_end"] = os.getloadavg()
    if args.out:
        args.out.write_text(json.dumps(results, indent=2, default=str))
    summary = {k: v for k, v in results.items() if k != "runs"}
    print(json.dumps(summary, indent=2, default=str))


if __name__ == "__main__":
    main()
