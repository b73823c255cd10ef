"""paylens side by side with what else gets this service's data into DuckDB, in one run.

    python bench/bench_compare.py --sizes 100000 1000000 --repeats 3 \
        --out bench/results/compare.json --markdown bench/results/compare.md

For each size, one sandbox is served over loopback HTTP in its own process (seed 0) and every
tool reads it in turn, each as its own subprocess landing every transaction in a fresh DuckDB
file; the rows landed are counted afterwards and must equal the size. Runs are interleaved
(one of each tool per repeat) so that machine noise falls on all of them alike:

- `paylens`: `paylens.warehouse.sync_file(..., concurrency=16, resources=["transactions"])`;
- `paylens_inprocess`: the same sync against the sandbox in-process (no HTTP; a diagnostic
  of what the HTTP stack costs, `bench/baselines/paylens_inprocess.py`);
- `plain`: a sequential httpx cursor loop, `json`, a DataFrame per page, row inserts
  (`bench/baselines/plain.py`);
- `dlt_default`, `dlt_tuned`, `dlt_parallel`: dlt's `rest_api` source into its DuckDB
  destination (`bench/baselines/dlt_rest_api.py`); dlt's fastest is the fastest of the last two;
- `ceiling_duckdb`, `ceiling_arrow`: the same pages' JSON, fetched once beforehand, parsed and
  inserted with no HTTP (`bench/baselines/ceiling.py`); the ceiling is the faster of the two.

Then, after the tools at each size, the incremental re-sync request ratio (the sandbox's
clock moved on 12 hours, paylens re-syncing its last warehouse); the sliced-versus-sequential
speed-up under 50 ms and 100 ms of latency (on a smaller served sandbox); and each analysis
helper at 1,000,000 and 10,000,000 rows. Those reuse `bench_sync.py` and `bench_analysis.py`.

Times are each tool's own, from its first request to its last commit (interpreter start and
imports excluded for every tool alike; `wall_seconds` in the JSON includes them). A run that
would take longer than `--budget` seconds (projected from an earlier run of the same tool)
reads a prefix of the records instead and is extrapolated linearly to the full size; the JSON
and the table say so. Peak memory is the largest resident set of any one process of a tool
(`wait4`'s `ru_maxrss`) and, sampled every 0.2 s, the sum over the tool's process tree.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bench_sync
import duckdb
from bench_sync import control, served

HERE = Path(__file__).parent
BASELINES = HERE / "baselines"
TOOLS = (
    "paylens",
    "paylens_inprocess",
    "plain",
    "dlt_default",
    "dlt_tuned",
    "dlt_parallel",
    "ceiling_duckdb",
    "ceiling_arrow",
)
#: Where each tool's transactions land in its DuckDB file.
TABLES = {"dlt_default": "payments.transactions", "dlt_tuned": "payments.transactions"}
TABLES["dlt_parallel"] = "payments.transactions"


# -- running one tool -------------------------------------------------------------------------


def _tree_rss_bytes(root: int) -> int:
    """Resident bytes of `root` and all its descendants, read from /proc."""
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    tree, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        children = [p for p, parent in parents.items() if parent == pid and p not in tree]
        tree.update(children)
        frontier += children
    total = 0
    for pid in tree:
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return total * os.sysconf("SC_PAGE_SIZE")


def measure(cmd: list[str]) -> dict[str, Any]:
    """Run a tool's subprocess: its JSON report, wall time and peak memory."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    streams: dict[str, str] = {}
    readers = [
        threading.Thread(target=lambda n=n, f=f: streams.__setitem__(n, f.read()), daemon=True)
        for n, f in (("out", proc.stdout), ("err", proc.stderr))
    ]
    peak_tree = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak_tree
        while not done.wait(0.2):
            peak_tree = max(peak_tree, _tree_rss_bytes(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    for thread in [*readers, sampler]:
        thread.start()
    _, status, usage = os.wait4(proc.pid, 0)  # reaped here, for its rusage
    proc.returncode = os.waitstatus_to_exitcode(status)
    done.set()
    for thread in [*readers, sampler]:
        thread.join()
    wall = time.perf_counter() - started
    out, err = streams.get("out", ""), streams.get("err", "")
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:3]} failed ({proc.returncode}):\n{err[-4000:]}")
    report = json.loads(out.strip().splitlines()[-1])
    report["wall_seconds"] = wall
    report["peak_rss_mib"] = max(report.get("peak_rss_mib", 0), usage.ru_maxrss / 1024)
    report["peak_tree_rss_mib"] = peak_tree / 2**20
    return report


def command(
    tool: str, creds: tuple[str, str, str], db: str, pages: Path, size: int, prefix: int | None
) -> list[str]:
    py = sys.executable
    limit = ["--max-records", str(prefix)] if prefix else []
    if tool == "paylens":
        return [py, "-c", bench_sync._SYNC, *creds, db, "16"]
    if tool == "paylens_inprocess":
        return [py, str(BASELINES / "paylens_inprocess.py"), str(size), db]
    if tool == "plain":
        return [py, str(BASELINES / "plain.py"), *creds, db, *limit]
    if tool.startswith("dlt_"):
        config = tool.removeprefix("dlt_")
        return [py, str(BASELINES / "dlt_rest_api.py"), *creds, db, "--config", config, *limit]
    if tool.startswith("ceiling_"):
        engine = tool.removeprefix("ceiling_")
        return [py, str(BASELINES / "ceiling.py"), "load", str(pages), db, "--engine", engine]
    raise ValueError(tool)


def landed(tool: str, db: str) -> int:
    con = duckdb.connect(db, read_only=True)
    try:
        row = con.execute(f"SELECT count(*) FROM {TABLES.get(tool, 'transactions')}").fetchone()
        return int(row[0]) if row else 0
    finally:
        con.close()


def remove_db(db: str) -> None:
    for path in (db, db + ".wal", db + ".syncing", db + ".syncing.wal"):
        Path(path).unlink(missing_ok=True)


# -- one size -----------------------------------------------------------------------------------


def compare_size(
    size: int,
    tools: list[str],
    repeats: int,
    budget: float,
    rates: dict[str, float],
    workdir: Path,
) -> dict[str, Any]:
    """Every tool `repeats` times on one served sandbox of `size` transactions."""
    result: dict[str, Any] = {"transactions": size, "runs": {t: [] for t in tools}}
    with served(size) as env:
        creds = (env["PAYLENS_BASE_URL"], env["PAYLENS_CLIENT_ID"], env["PAYLENS_CLIENT_SECRET"])
        result["sandbox_generation_seconds"] = float(env["generated_seconds"])
        pages = workdir / f"pages-{size}.jsonl"
        if any(t.startswith("ceiling_") for t in tools):
            fetched = subprocess.run(
                [sys.executable, str(BASELINES / "ceiling.py"), "fetch", *creds, str(pages)],
                capture_output=True,
                text=True,
                check=True,
            )
            result["ceiling_pages"] = json.loads(fetched.stdout.strip().splitlines()[-1])
            log({"size": size, "ceiling_pages": result["ceiling_pages"]})
        keep = str(workdir / f"paylens-{size}-kept.duckdb")
        for repeat in range(repeats):
            for tool in tools:
                db = str(workdir / f"{tool}-{size}.duckdb")
                remove_db(db)
                prefix = None
                if tool in rates and size / rates[tool] > budget:
                    prefix = min(size, max(20_000, int(rates[tool] * budget / 3) // 100 * 100))
                load = os.getloadavg()[0]
                run = measure(command(tool, creds, db, pages, size, prefix))
                run["load_average_before"] = load
                run["repeat"] = repeat
                run["rows_landed"] = landed(tool, db)
                # a prefix is whatever the tool read before stopping, as it reports it
                expected = run.get("rows", run.get("new")) if prefix else size
                run["rows_expected"] = expected
                run["verified"] = run["rows_landed"] == expected
                if prefix:
                    run["extrapolated"] = True
                    run["measured_seconds"] = run["seconds"]
                    run["seconds"] = run["seconds"] * size / run["rows_landed"]
                else:
                    rates[tool] = size / run["seconds"]
                result["runs"][tool].append(run)
                log({"size": size, "tool": tool, **run})
                if tool == "paylens":
                    remove_db(keep)
                    shutil.move(db, keep)
                else:
                    remove_db(db)
        if "paylens" in tools:
            result["incremental"] = incremental(env, creds, keep, result["runs"]["paylens"][-1])
            log({"size": size, "incremental": result["incremental"]})
        remove_db(keep)
        pages.unlink(missing_ok=True)
        pages.with_suffix(".type").unlink(missing_ok=True)
    result["summary"] = summarize(result["runs"], size)
    return result


def incremental(
    env: dict[str, str], creds: tuple[str, str, str], db: str, full: dict[str, Any]
) -> dict[str, Any]:
    """A re-sync after the sandbox's clock moved on 12 hours: requests against the full sync's
    (as `bench_sync.py` measures it)."""
    changes = control(env, "advance", {"seconds": 12 * 3600})
    again = bench_sync.run(bench_sync._SYNC, *creds, db, "16")
    return {
        "advance_hours": 12,
        "sandbox_changes": changes,
        "full_requests": full["requests"],
        "requests": again["requests"],
        "request_ratio": again["requests"] / full["requests"],
        "new": again["new"],
        "changed": again["changed"],
        "seconds": again["seconds"],
        "full_seconds": full["seconds"],
    }


def summarize(runs: dict[str, list[dict[str, Any]]], size: int) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for tool, done in runs.items():
        if not done:
            continue
        seconds = [r["seconds"] for r in done]
        summary[tool] = {
            "median_seconds": statistics.median(seconds),
            "min_seconds": min(seconds),
            "max_seconds": max(seconds),
            "runs": len(done),
            "records_per_second": size / statistics.median(seconds),
            "peak_rss_mib": max(r["peak_rss_mib"] for r in done),
            "peak_tree_rss_mib": max(r["peak_tree_rss_mib"] for r in done),
            "rows_landed": sorted({r["rows_landed"] for r in done}),
            "verified": all(r["verified"] for r in done),
            "extrapolated": any(r.get("extrapolated") for r in done),
        }
    fastest = {
        "dlt_fastest": [t for t in ("dlt_tuned", "dlt_parallel") if t in summary],
        "ceiling": [t for t in ("ceiling_duckdb", "ceiling_arrow") if t in summary],
    }
    for name, candidates in fastest.items():
        if candidates:
            best = min(candidates, key=lambda t: summary[t]["median_seconds"])
            summary[name] = {**summary[best], "is": best}
    if "paylens" in summary:
        base = summary["paylens"]["median_seconds"]
        for entry in summary.values():
            entry["vs_paylens"] = entry["median_seconds"] / base
    return summary


# -- latency and analysis (the existing benchmarks' pieces) -------------------------------------


def latency_speedups(transactions: int, repeats: int) -> list[dict[str, Any]]:
    """Sequential cursor walk against paylens's sliced sync under 50 ms and 100 ms, each
    measured `repeats` times by `bench_sync.measure_latency` (a served sandbox apiece)."""
    results = []
    for latency in (0.05, 0.1):
        runs = [bench_sync.measure_latency(transactions, latency) for _ in range(repeats)]
        sequential = [r["sequential_seconds"] for r in runs]
        sliced = [r["sliced_seconds"] for r in runs]
        entry = {
            "latency_seconds": latency,
            "transactions": transactions,
            "sequential_seconds": _spread(sequential),
            "sliced_seconds": _spread(sliced),
            "speedup": statistics.median(sequential) / statistics.median(sliced),
            "speedups": _spread([r["speedup"] for r in runs]),
        }
        results.append(entry)
        log({"latency": entry})
    return results


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def replicated_warehouse(source: Path, copies: int) -> Path:
    """The 1M warehouse's transaction-level rows `copies` times, each copy's ids suffixed
    (`~r<k>`) so they stay unique; timestamps, amounts, statuses and the dimension tables
    (customers, cards, accounts) are the original's. Cached beside the source."""
    size = f"{copies * 1_000_000}-replicated"
    target = source.with_name(source.stem.replace("1000000", size) + ".duckdb")
    if target.exists():
        return target
    staged = target.with_name(target.stem + ".building.duckdb")
    staged.unlink(missing_ok=True)
    shutil.copyfile(source, staged)
    started = time.perf_counter()
    con = duckdb.connect(str(staged))
    con.execute("SET memory_limit = '4GB'; SET enable_progress_bar = false")
    keyed = {
        "transactions": "id",
        "outgoing_fees": "id",
        "card_transactions": "id",
        "payment_instructions": "transaction_id",
        "status_history": "id",
    }
    for table, key in keyed.items():
        for k in range(1, copies):
            con.execute(
                f"INSERT INTO {table} SELECT * REPLACE ({key} || '~r{k}' AS {key}) "
                f"FROM {table} WHERE NOT contains({key}, '~r')"
            )
    con.execute("CHECKPOINT")
    con.close()
    staged.rename(target)
    log({"replicated": str(target), "seconds": time.perf_counter() - started})
    return target


def analysis_helpers(sizes: list[int], repeats: int) -> dict[str, Any]:
    """Each `paylens.analysis` helper (the cases of `bench_analysis.py`) at each size; sizes
    above the 1M warehouse are that warehouse replicated."""
    import bench_analysis
    import matplotlib

    from paylens.warehouse import Warehouse

    matplotlib.use("Agg")
    base, mids = bench_analysis.build(1_000_000, 0)
    results: dict[str, Any] = {}
    for size in sizes:
        path = base if size == 1_000_000 else replicated_warehouse(base, size // 1_000_000)
        cases: dict[str, Any] = {}
        with Warehouse(path, read_only=True) as wh:
            count = wh.sql("SELECT count(*) AS n FROM transactions")["n"].tolist()
            for name, case in bench_analysis.cases(mids).items():
                out = case(wh)  # warm-up: file pages cached, as in a notebook's second cell
                times = []
                for _ in range(repeats):
                    started = time.perf_counter()
                    out = case(wh)
                    times.append(time.perf_counter() - started)
                cases[name] = {
                    **_spread(times),
                    "rows": len(out) if hasattr(out, "__len__") else None,
                }
                log({"analysis": size, "case": name, **cases[name]})
        results[str(size)] = {"transactions": count[0] if count else None, "cases": cases}
    return results


# -- report -------------------------------------------------------------------------------------

LABELS = {
    "paylens": "paylens full sync",
    "paylens_inprocess": "paylens full sync, in-process sandbox (no HTTP; diagnostic)",
    "plain": "plain baseline (httpx, json, pandas, row inserts)",
    "dlt_default": "dlt rest_api, default",
    "dlt_tuned": "dlt rest_api, documented perf settings",
    "dlt_parallel": "dlt rest_api, perf settings + parallel slices",
    "ceiling_duckdb": "ceiling: no HTTP, DuckDB read_json",
    "ceiling_arrow": "ceiling: no HTTP, Arrow JSON + insert",
}


def markdown(results: dict[str, Any]) -> str:
    lines: list[str] = []
    for size_result in results["sizes"]:
        size, summary = size_result["transactions"], size_result["summary"]
        lines += [
            f"### {size:,} transactions",
            "",
            "| tool | median s | min s | max s | runs | records/s | × paylens time"
            " | peak RSS MiB (largest process / tree) | rows landed |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for tool in TOOLS:
            if tool not in summary:
                continue
            s = summary[tool]
            mark = " *(extrapolated from a prefix)*" if s["extrapolated"] else ""
            rows = ", ".join(f"{r:,}" for r in s["rows_landed"])
            check = "✓" if s["verified"] else "✗"
            lines.append(
                f"| {LABELS[tool]}{mark} | {s['median_seconds']:.2f} | {s['min_seconds']:.2f} "
                f"| {s['max_seconds']:.2f} | {s['runs']} | {s['records_per_second']:,.0f} "
                f"| {s.get('vs_paylens', float('nan')):.2f} "
                f"| {s['peak_rss_mib']:,.0f} / {s['peak_tree_rss_mib']:,.0f} | {rows} {check} |"
            )
        lines += ["", *goals(summary), ""]
        if "incremental" in size_result:
            inc = size_result["incremental"]
            lines += [
                f"Incremental re-sync after {inc['advance_hours']} h: {inc['requests']:,} "
                f"requests against {inc['full_requests']:,} for the full sync "
                f"(ratio {inc['request_ratio']:.3f}), {inc['new']:,} new and "
                f"{inc['changed']:,} changed records, {inc['seconds']:.1f} s.",
                "",
            ]
    if results.get("latency"):
        lines += [
            "### Sliced versus sequential under latency",
            "",
            "| latency | transactions | sequential s (median, min–max) | sliced s | speed-up |",
            "|---:|---:|---:|---:|---:|",
        ]
        for e in results["latency"]:
            q, s = e["sequential_seconds"], e["sliced_seconds"]
            lines.append(
                f"| {e['latency_seconds'] * 1000:.0f} ms | {e['transactions']:,} "
                f"| {q['median']:.1f} ({q['min']:.1f}–{q['max']:.1f}) "
                f"| {s['median']:.2f} ({s['min']:.2f}–{s['max']:.2f}) | {e['speedup']:.1f}× |"
            )
        lines.append("")
    if results.get("analysis"):
        sizes = list(results["analysis"])
        head = " | ".join(f"{int(s):,} rows: median s (min–max)" for s in sizes)
        lines += [
            "### Analysis helpers",
            "",
            f"| case | {head} |",
            "|---|" + "---:|" * len(sizes),
        ]
        names = list(results["analysis"][sizes[0]]["cases"])
        for name in names:
            cells = []
            for s in sizes:
                c = results["analysis"][s]["cases"].get(name)
                cells.append(f"{c['median']:.2f} ({c['min']:.2f}–{c['max']:.2f})" if c else "")
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def goals(summary: dict[str, Any]) -> list[str]:
    if "paylens" not in summary:
        return []
    paylens = summary["paylens"]["median_seconds"]
    rows = ["| goal | figure | met |", "|---|---:|:---:|"]

    def add(label: str, name: str, target: float, figure: Callable[[float], float]) -> None:
        if name in summary:
            value = figure(summary[name]["median_seconds"])
            which = f" ({LABELS[summary[name]['is']]})" if "is" in summary[name] else ""
            rows.append(f"| {label}{which} | {value:.2f}× | {'yes' if value >= target else 'no'} |")

    add("paylens ≥ 5× faster than the plain baseline", "plain", 5, lambda t: t / paylens)
    add("paylens ≥ 5× faster than dlt default", "dlt_default", 5, lambda t: t / paylens)
    add("paylens at least as fast as dlt's fastest", "dlt_fastest", 1, lambda t: t / paylens)
    add(
        "paylens within 2× of the no-HTTP ceiling (ceiling time × 2 / paylens time)",
        "ceiling",
        1,
        lambda t: 2 * t / paylens,
    )
    return rows


def log(entry: dict[str, Any]) -> None:
    print(json.dumps(entry, default=str), flush=True)


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    versions = {}
    for name in ("paylens", "duckdb", "pyarrow", "pandas", "httpx", "dlt", "orjson"):
        try:
            versions[name] = __import__(name).__version__
        except (ImportError, AttributeError):
            versions[name] = None
    import paylens

    repo = Path(paylens.__file__).resolve().parents[2]
    commit = subprocess.run(
        ["git", "-C", str(HERE), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    return {
        "paylens_imported_from": str(repo),
        "repository_head": commit,
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "memory_gib": round(memory, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": versions,
        "load_average_at_start": os.getloadavg(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tools", nargs="+", choices=TOOLS, default=list(TOOLS))
    parser.add_argument(
        "--budget",
        type=float,
        default=1200,
        help="seconds a run may take; beyond it (projected) a prefix is timed and extrapolated",
    )
    parser.add_argument(
        "--rates-from", type=Path, help="an earlier result whose rates project run times"
    )
    parser.add_argument("--latency-transactions", type=int, default=30_000)
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--analysis-sizes", type=int, nargs="*", default=[1_000_000, 10_000_000])
    parser.add_argument("--out", type=Path, default=HERE / "results" / "compare.json")
    parser.add_argument("--markdown", type=Path, help="also write the tables here")
    parser.add_argument(
        "--report", type=Path, nargs="+", help="only print the tables of earlier results, merged"
    )
    args = parser.parse_args()
    if args.report:
        merged: dict[str, Any] = {"sizes": []}
        for path in args.report:
            earlier = json.loads(path.read_text())
            merged["sizes"] += earlier.get("sizes", [])
            for key in ("latency", "analysis"):
                merged[key] = earlier.get(key) or merged.get(key)
        table = markdown(merged)
        if args.markdown:
            args.markdown.write_text(table + "\n")
        print(table)
        return

    results: dict[str, Any] = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": machine(),
        "sizes": [],
    }
    rates: dict[str, float] = {}
    if args.rates_from:
        for earlier in json.loads(args.rates_from.read_text())["sizes"]:
            for tool, s in earlier["summary"].items():
                if tool in TOOLS and not s["extrapolated"]:
                    rates[tool] = s["records_per_second"]
    args.out.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        args.out.write_text(json.dumps(results, indent=2, default=str))

    with tempfile.TemporaryDirectory(prefix="paylens-compare-") as tmp:
        workdir = Path(tmp)
        for size in args.sizes:
            results["sizes"].append(
                compare_size(size, args.tools, args.repeats, args.budget, rates, workdir)
            )
            save()
        if not args.skip_latency:
            results["latency"] = latency_speedups(args.latency_transactions, args.repeats)
            save()
    if args.analysis_sizes:
        results["analysis"] = analysis_helpers(args.analysis_sizes, args.repeats)
        save()
    table = markdown(results)
    if args.markdown:
        args.markdown.write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
