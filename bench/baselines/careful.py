"""The careful sequential baseline: what a careful engineer writes by hand to get the service's
five resources into DuckDB, without paylens.

One cursor per resource, one after another, with plain httpx (one keep-alive connection,
pages of 100, each page parsed once with orjson); each resource's records are written to one
newline-delimited JSON file and loaded with one bulk `CREATE TABLE ... AS SELECT * FROM
read_json_auto(...)`. Prints one JSON line: seconds, requests, records per resource.

    python bench/baselines/careful.py BASE_URL CLIENT_ID SECRET DB [--resources transactions ...]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import duckdb
import httpx
import orjson

#: Resource -> its list path.
PATHS = {
    "transactions": "transactions",
    "customers": "customers",
    "cards": "cards",
    "internal_accounts": "customers/internal-accounts",
    "external_accounts": "customers/external-accounts",
}


def main() -> None:
    parser = argparse.ArgumentParser(description="the careful sequential baseline")
    parser.add_argument("service", nargs=3, metavar=("BASE_URL", "CLIENT_ID", "SECRET"))
    parser.add_argument("db", help="DuckDB file to create")
    parser.add_argument("--resources", nargs="+", choices=list(PATHS), default=list(PATHS))
    args = parser.parse_args()
    base_url, client_id, secret = args.service

    started = time.perf_counter()
    con = duckdb.connect(args.db)
    requests = 0
    records: dict[str, int] = {}
    base = base_url.rstrip("/") + "/"
    with (
        httpx.Client(auth=(client_id, secret), timeout=60) as http,
        tempfile.TemporaryDirectory() as tmp,
    ):
        for name in args.resources:
            target = Path(tmp) / f"{name}.ndjson"
            count = 0
            cursor = None
            with target.open("wb") as out:
                while True:
                    params: dict[str, str | int] = {"limit": 100}
                    if cursor:
                        params["cursor"] = cursor
                    answer = http.get(base + PATHS[name], params=params)
                    requests += 1
                    answer.raise_for_status()
                    page = orjson.loads(answer.content)
                    for item in page["data"]:
                        out.write(orjson.dumps(item) + b"\n")
                    count += len(page["data"])
                    cursor = page.get("nextCursor")
                    if not page.get("hasMore") or not cursor:
                        break
            records[name] = count
            if count:
                con.execute(
                    f"CREATE OR REPLACE TABLE {name} AS SELECT * FROM "
                    f"read_json_auto('{target}', format='newline_delimited', "
                    "sample_size=-1, union_by_name=true)"
                )
    con.close()
    print(
        json.dumps(
            {"seconds": time.perf_counter() - started, "requests": requests, "records": records}
        )
    )


if __name__ == "__main__":
    main()
