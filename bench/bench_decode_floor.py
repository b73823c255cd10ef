"""The floor of a sync's per-record work: what the parts it is made of cost on the same pages,
each timed alone in one process (CPU seconds of the process, `time.process_time`, per record).

The pages are read once from a served sandbox with plain httpx (pages of 100, one cursor) and
kept in memory; each stage then runs over all of them:

- `simdjson split`: each page split into its records' JSON texts (what the sync's readers do);
- `orjson + from_pylist`: each page decoded by orjson, its records turned into one Arrow table
  by `pyarrow.Table.from_pylist` (nested records: structs and lists);
- `arrow read_json`: the records' texts, newline-delimited, read by Arrow's JSON reader
  against the sync's schema (`paylens.frames.parse_records`), one read per 20,000 records;
- `transaction_tables`: the sync's whole typing of those batches (the read, the columns, the
  child tables and the raw column);
- `duckdb read_json`: the pages written to one file, read by DuckDB's `read_json` (one thread)
  and the `data` arrays unnested into a table in memory.

    paylens sandbox serve --transactions 200000 > env.txt &
    python bench/bench_decode_floor.py env.txt [--out results/decode-floor.json]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import httpx
import orjson
import pyarrow as pa

from paylens.client._pagination import parse_text_page
from paylens.frames import parse_records, transaction_tables

BATCH = 20_000


def fetch_pages(env: dict[str, str]) -> list[bytes]:
    base = env["PAYLENS_BASE_URL"].rstrip("/") + "/transactions"
    pages: list[bytes] = []
    cursor = None
    with httpx.Client(
        auth=(env["PAYLENS_CLIENT_ID"], env["PAYLENS_CLIENT_SECRET"]), timeout=60
    ) as http:
        while True:
            params: dict[str, Any] = {"limit": 100}
            if cursor:
                params["cursor"] = cursor
            answer = http.get(base, params=params)
            answer.raise_for_status()
            pages.append(answer.content)
            body = orjson.loads(answer.content)
            if not body.get("hasMore"):
                return pages
            cursor = body["nextCursor"]


def timed(name: str, records: Callable[[], int], work: Callable[[], Any]) -> dict[str, Any]:
    cpu, wall = time.process_time(), time.perf_counter()
    work()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    row = {"stage": name, "cpu_s": cpu, "wall_s": wall, "us_per_record": cpu / records() * 1e6}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("env_file")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    env = dict(
        line.strip().split("=", 1)
        for line in Path(args.env_file).read_text().splitlines()
        if "=" in line
    )
    pages = fetch_pages(env)
    texts: list[bytes] = []

    def split() -> None:
        for body in pages:
            texts.extend(parse_text_page(httpx.Response(200, content=body)).records)

    rows = [timed("simdjson split (the readers)", lambda: len(texts), split)]
    records = len(texts)
    count = lambda: records  # noqa: E731
    batches = [texts[i : i + BATCH] for i in range(0, records, BATCH)]

    def from_pylist() -> None:
        for start in range(0, len(pages), BATCH // 100):
            chunk = [
                r
                for body in pages[start : start + BATCH // 100]
                for r in orjson.loads(body)["data"]
            ]
            pa.Table.from_pylist(chunk)

    rows.append(timed("orjson + Table.from_pylist", count, from_pylist))
    rows.append(
        timed(
            "arrow read_json (sync schema)",
            count,
            lambda: [parse_records("transactions", b) for b in batches],
        )
    )
    rows.append(
        timed(
            "transaction_tables (whole typing)",
            count,
            lambda: [transaction_tables(raw=b) for b in batches],
        )
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "pages.ndjson"
        path.write_bytes(b"\n".join(pages))
        con = duckdb.connect()
        con.execute("SET threads = 1")

        def duck() -> None:
            con.execute(
                f"""CREATE OR REPLACE TABLE t AS SELECT unnest(data, recursive := true)
                    FROM read_json('{path}', format = 'newline_delimited',
                                   maximum_object_size = 100000000)"""
            )

        rows.append(timed("duckdb read_json (1 thread)", count, duck))
    result = {"records": records, "pages": len(pages), "stages": rows}
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
