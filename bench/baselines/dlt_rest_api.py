"""dlt's `rest_api` source into its DuckDB destination, configured for this API's cursor
pagination (a benchmark-only dependency: `pip install -e '.[bench]'`).

    python bench/baselines/dlt_rest_api.py BASE_URL CLIENT_ID SECRET DB --config default
    python bench/baselines/dlt_rest_api.py ... --config tuned      # documented perf settings
    python bench/baselines/dlt_rest_api.py ... --config parallel   # tuned + parallel slices

- `default`: one resource, the cursor paginator (`nextCursor` -> `cursor`), HTTP basic auth,
  `data_selector: data`, `limit=100`; dlt's default settings (insert-values files, no file
  rotation, normalize in the main process).
- `tuned`: the same resource with dlt's documented performance settings: parquet loader files
  (the DuckDB destination page: "Loading is faster"), larger in-memory buffers, extract and
  normalize file rotation so normalize runs in worker processes, uncompressed intermediary files.
- `parallel`: `tuned`, and the date range split into slices (`startDate`/`endDate`), each its
  own `parallelized` resource landing in the same table and extracted in dlt's thread pool
  (a cursor cannot be split, so this is how dlt reads one endpoint concurrently). The two probes
  that find the date range are timed with the rest.

Prints one JSON line: seconds, rows, requests, peak RSS (of this process; normalize workers
are separate processes, measured by the caller).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from datetime import UTC, datetime, timedelta
from typing import Any

SETTINGS: dict[str, dict[str, str]] = {
    "default": {},
    "tuned": {
        "DATA_WRITER__BUFFER_MAX_ITEMS": "100000",
        "EXTRACT__DATA_WRITER__FILE_MAX_ITEMS": "100000",
        "NORMALIZE__DATA_WRITER__FILE_MAX_ITEMS": "100000",
        "DATA_WRITER__DISABLE_COMPRESSION": "true",
        "NORMALIZE__WORKERS": "2",
    },
}
SETTINGS["parallel"] = {**SETTINGS["tuned"], "EXTRACT__WORKERS": "16"}
SLICES = 64  # 4 per extract worker, as paylens slices its reads


def _iso(instant: datetime) -> str:
    return instant.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _slices(base_url: str, auth: tuple[str, str], count: int) -> list[tuple[str, str]]:
    """`count` inclusive [startDate, endDate] ranges covering every record, from two probes."""
    import httpx

    def edge(order: str) -> datetime:
        page = httpx.get(
            f"{base_url}/transactions",
            params={"limit": 1, "sortOrder": order},
            auth=auth,
            timeout=60,
        ).json()
        return datetime.fromisoformat(page["data"][0]["createdAt"].replace("Z", "+00:00"))

    oldest, newest = edge("asc"), edge("desc")
    step = (newest - oldest) / count
    tick = timedelta(milliseconds=1)
    bounds = [oldest + step * i for i in range(count)]
    bounds = [b.replace(microsecond=b.microsecond // 1000 * 1000) for b in bounds]
    ends = [b - tick for b in bounds[1:]] + [newest.astimezone(UTC)]
    return [(_iso(a), _iso(b)) for a, b in zip(bounds, ends, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("base_url")
    parser.add_argument("client_id")
    parser.add_argument("secret")
    parser.add_argument("db")
    parser.add_argument("--config", choices=sorted(SETTINGS), default="default")
    parser.add_argument("--max-records", type=int, default=None, help="stop after a prefix")
    parser.add_argument("--slices", type=int, default=SLICES, help="date slices (parallel)")
    args = parser.parse_args()

    os.environ.update(SETTINGS[args.config])
    os.environ["RUNTIME__DLTHUB_TELEMETRY"] = "false"  # no calls home from the benchmark
    import dlt
    from dlt.sources.rest_api import rest_api_source

    started = time.perf_counter()
    endpoint: dict[str, Any] = {
        "path": "transactions",
        "params": {"limit": 100},
        "data_selector": "data",
    }
    if args.config == "parallel":
        ranges = _slices(args.base_url, (args.client_id, args.secret), args.slices)
        resources: list[Any] = [
            {
                "name": f"transactions_{i:03d}",
                "table_name": "transactions",
                "parallelized": True,
                "endpoint": {**endpoint, "params": {"limit": 100, "startDate": a, "endDate": b}},
            }
            for i, (a, b) in enumerate(ranges)
        ]
    else:
        resources = [{"name": "transactions", "endpoint": endpoint}]
    source = rest_api_source(
        {
            "client": {
                "base_url": args.base_url + "/",
                "auth": {
                    "type": "http_basic",
                    "username": args.client_id,
                    "password": args.secret,
                },
                "paginator": {
                    "type": "cursor",
                    "cursor_path": "nextCursor",
                    "cursor_param": "cursor",
                },
            },
            "resources": resources,
        }
    )
    if args.max_records:
        source.add_limit(-(-args.max_records // (100 * len(resources))))  # pages per resource
    with tempfile.TemporaryDirectory() as pipelines_dir:
        pipeline = dlt.pipeline(
            pipeline_name=f"bench_{args.config}",
            destination=dlt.destinations.duckdb(args.db),
            dataset_name="payments",
            pipelines_dir=pipelines_dir,
        )
        file_format = None if args.config == "default" else "parquet"
        pipeline.run(source, loader_file_format=file_format)
        elapsed = time.perf_counter() - started
        steps = {
            step.step: (step.finished_at - step.started_at).total_seconds()
            for step in pipeline.last_trace.steps
            if step.finished_at is not None
        }
        with pipeline.sql_client() as client:
            rows = client.execute_sql("SELECT count(*) FROM transactions")[0][0]
    print(
        json.dumps(
            {
                "seconds": elapsed,
                "rows": rows,
                "steps_seconds": steps,
                "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }
        )
    )


if __name__ == "__main__":
    main()
