"""The whole sync, as whole processes, against two services served over loopback at 20 ms a
request, each in its own process:

- `paylens sandbox serve --profile remittance --clock fixed` (20,000 transactions; behind
  them about 20,000 customers, 24,000 external accounts, 12,000 internal accounts, 2,000
  cards);
- the independent second service of `tests/_second_service.py`, built to the same shape and
  frozen, each page rendered once and kept (`second_serve.py`: its own CPU off the clock; a
  warm-up round asks for every page the measured runs ask for).

Against each, in one run:

- `paylens sync` (all five resources) against the careful sequential baseline
  (`bench/baselines/careful.py`: one cursor per resource, one bulk insert each), run
  alternately `--repeats` times (medians), target >= 4x;
- `paylens sync` again with nothing changed: its requests as a share of a full sync's,
  target <= 20 %;
- transactions alone (`paylens sync --resources transactions`) against the baseline on
  transactions alone, target >= 4x;
- with `--before OTHER/src`, another version's two syncs too, alternating with this one's.

    python bench/bench_sync_whole.py --out bench/results/sync-whole.json [--service second]

Times are wall clock of each process from its start to its exit (interpreter start, imports,
opening the file and the final commit included); beside them each process's CPU seconds
(`getrusage` of the children) and the server's during it (`/proc/<pid>/stat`). The services'
clocks are fixed, so nothing changes between syncs unless the benchmark says so.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from bench_compare import machine
from bench_sync import served, serving

HERE = Path(__file__).parent
CAREFUL = HERE / "baselines" / "careful.py"
_REQUESTS = re.compile(r"([\d,]+) requests")


def whole_process(cmd: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run one process to its exit: wall seconds and what it printed (`env`: the service's
    PAYLENS_* variables, and PYTHONPATH when another version of paylens is measured)."""
    service = {k: v for k, v in env.items() if k.startswith("PAYLENS_") or k == "PYTHONPATH"}
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **service})
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


def _server_cpu(pid: int) -> float:
    """CPU seconds (user + system) the serving process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _second_stats(env: dict[str, str]) -> dict[str, Any]:
    root = env["PAYLENS_BASE_URL"].rsplit("/", 1)[0]
    answer: dict[str, Any] = httpx.get(f"{root}/_bench/stats", timeout=30).json()
    return answer


def _measured(
    run: Any, env: dict[str, str], db: Path, second: bool, *options: str
) -> dict[str, Any]:
    """One whole process, with the server's CPU during it and, for the second service, how
    many of its answers had to be rendered during it (a rendered page costs the server CPU on
    the clock; a warm-up round renders them beforehand)."""
    pid = int(env["pid"])
    before = _second_stats(env) if second else None
    cpu = _server_cpu(pid)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    result: dict[str, Any] = run(env, db, *options)
    after_children = resource.getrusage(resource.RUSAGE_CHILDREN)
    result["cpu_seconds"] = (after_children.ru_utime - children.ru_utime) + (
        after_children.ru_stime - children.ru_stime
    )
    result["server_cpu_seconds"] = _server_cpu(pid) - cpu
    if before is not None:
        after = _second_stats(env)
        result["served"] = after["served"] - before["served"]
        result["rendered"] = after["rendered"] - before["rendered"]
        was = before["served_by_path"]
        result["served_by_path"] = {
            path: n - was.get(path, 0)
            for path, n in after["served_by_path"].items()
            if n > was.get(path, 0)
        }
    return result


def measure(
    env: dict[str, str],
    tmp: Path,
    repeats: int,
    warmups: int,
    second: bool,
    before: Path | None = None,
) -> dict[str, Any]:
    """The measurements of the module's docstring against one served service (`before`:
    another version's `src`, whose two syncs run too, alternating with this one's)."""
    older = {**env, "PYTHONPATH": str(before)}
    results: dict[str, Any] = {"load_average_before": os.getloadavg()}
    if second:
        results["records"] = _second_stats(env)["records"]
    for _ in range(warmups):  # every distinct page asked for once, off the clock
        careful(env, _fresh(tmp, "careful"))
        for version in (env, older) if before else (env,):
            db = _fresh(tmp, "paylens")
            paylens_sync(version, db)
            paylens_sync(version, db)
            paylens_sync(version, _fresh(tmp, "alone"), "--resources", "transactions")
    whole: dict[str, list[dict[str, Any]]] = {"careful": [], "paylens": [], "before": []}
    alone: dict[str, list[dict[str, Any]]] = {"careful": [], "paylens": [], "before": []}
    resync: list[dict[str, Any]] = []
    for repeat in range(repeats):  # alternating, so load falls on both alike
        whole["careful"].append(_measured(careful, env, _fresh(tmp, "careful"), second))
        db = _fresh(tmp, "paylens")
        whole["paylens"].append(_measured(paylens_sync, env, db, second))
        resync.append(_measured(paylens_sync, env, db, second))
        if before:
            whole["before"].append(_measured(paylens_sync, older, _fresh(tmp, "before"), second))
        alone["paylens"].append(
            _measured(
                paylens_sync, env, _fresh(tmp, "alone"), second, "--resources", "transactions"
            )
        )
        alone["careful"].append(
            _measured(careful, env, _fresh(tmp, "careful"), second, "transactions")
        )
        if before:
            alone["before"].append(
                _measured(
                    paylens_sync, older, _fresh(tmp, "alone"), second, "--resources", "transactions"
                )
            )
        print(
            json.dumps(
                {
                    "repeat": repeat,
                    "whole": {k: v[-1]["seconds"] for k, v in whole.items() if v},
                    "alone": {k: v[-1]["seconds"] for k, v in alone.items() if v},
                    "resync_requests": resync[-1]["requests"],
                    "load": os.getloadavg(),
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
        "careful_cpu_seconds": _median(whole["careful"], "cpu_seconds"),
        "paylens_cpu_seconds": _median(whole["paylens"], "cpu_seconds"),
        "server_cpu_seconds": {k: _median(v, "server_cpu_seconds") for k, v in whole.items() if v},
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
        "careful_cpu_seconds": _median(alone["careful"], "cpu_seconds"),
        "paylens_cpu_seconds": _median(alone["paylens"], "cpu_seconds"),
        "server_cpu_seconds": {k: _median(v, "server_cpu_seconds") for k, v in alone.items() if v},
    }
    if before:
        for key, runs in (("whole", whole), ("transactions_alone", alone)):
            results[key]["before_seconds"] = _median(runs["before"])
            results[key]["before_cpu_seconds"] = _median(runs["before"], "cpu_seconds")
            results[key]["before_speedup"] = _median(runs["careful"]) / _median(runs["before"])
    results["runs"] = {"whole": whole, "alone": alone, "resync": resync}
    results["load_average_after"] = os.getloadavg()
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transactions", type=int, default=20_000)
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--service",
        choices=("sandbox", "second", "both"),
        default="both",
        help="the sandbox, the independent second service (bench/second_serve.py), or both",
    )
    parser.add_argument(
        "--warmups",
        type=int,
        default=1,
        help="unmeasured rounds first (the second service renders each page once)",
    )
    parser.add_argument(
        "--before", type=Path, help="another version's src/: its syncs alternate with this one's"
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results: dict[str, Any] = {"machine": machine(), "latency_seconds": args.latency}
    services = ("sandbox", "second") if args.service == "both" else (args.service,)
    for service in services:
        if service == "sandbox":
            extra = ["--profile", "remittance", "--clock", "fixed"]
            serving_it = served(args.transactions, args.latency, extra=extra)
        else:
            serving_it = serving(
                [
                    sys.executable,
                    str(HERE / "second_serve.py"),
                    "--transactions",
                    str(args.transactions),
                    "--latency",
                    str(args.latency),
                ]
            )
        with tempfile.TemporaryDirectory() as tmp_name, serving_it as env:
            result = measure(
                env, Path(tmp_name), args.repeats, args.warmups, service == "second", args.before
            )
            result["generation_seconds"] = float(env["generated_seconds"])
            results[service] = result
    if args.out:
        args.out.write_text(json.dumps(results, indent=2, default=str))
    summary = {
        service: {k: v for k, v in results[service].items() if k != "runs"} for service in services
    }
    print(json.dumps(summary, indent=2, default=str))


if __name__ == "__main__":
    main()
