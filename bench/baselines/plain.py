"""The plain baseline: what an analyst writes by hand to get the transactions into DuckDB.

One sequential cursor loop with httpx; each page parsed with `json`, flattened into a pandas
DataFrame (`pd.json_normalize`, lists kept as JSON text) and inserted row by row with
`executemany`. New columns are added as they appear (the three transaction kinds carry
different fields). Prints one JSON line: seconds, rows, requests, peak RSS.

    python bench/baselines/plain.py BASE_URL CLIENT_ID SECRET DB [--max-records N]
"""

from __future__ import annotations

import argparse
import json
import resource
import time

import duckdb
import httpx
import numpy as np
import pandas as pd


def duck_type(series: pd.Series) -> str:
    if pd.api.types.is_bool_dtype(series):
        return "BOOLEAN"
    if pd.api.types.is_integer_dtype(series):
        return "BIGINT"
    if pd.api.types.is_float_dtype(series):
        return "DOUBLE"
    return "VARCHAR"


def as_cell(value: object) -> object:
    if isinstance(value, list | dict):
        return json.dumps(value)
    if isinstance(value, float) and np.isnan(value):
        return None
    if isinstance(value, np.generic):
        return value.item()
    return value


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("base_url")
    parser.add_argument("client_id")
    parser.add_argument("secret")
    parser.add_argument("db")
    parser.add_argument("--max-records", type=int, default=None, help="stop after a prefix")
    args = parser.parse_args()

    started = time.perf_counter()
    con = duckdb.connect(args.db)
    columns: list[str] = []
    requests = rows = 0
    cursor = None
    with httpx.Client(auth=(args.client_id, args.secret), timeout=60) as http:
        while True:
            params: dict[str, str | int] = {"limit": 100}
            if cursor:
                params["cursor"] = cursor
            response = http.get(f"{args.base_url}/transactions", params=params)
            response.raise_for_status()
            requests += 1
            page = json.loads(response.text)
            df = pd.json_normalize(page["data"])
            if not columns:
                con.execute(
                    "CREATE TABLE transactions ("
                    + ", ".join(f'"{c}" {duck_type(df[c])}' for c in df.columns)
                    + ")"
                )
                columns = list(df.columns)
            for new in [c for c in df.columns if c not in columns]:
                con.execute(f'ALTER TABLE transactions ADD COLUMN "{new}" {duck_type(df[new])}')
                columns.append(new)
            names = ", ".join(f'"{c}"' for c in df.columns)
            marks = ", ".join("?" for _ in df.columns)
            values = [[as_cell(v) for v in row] for row in df.itertuples(index=False)]
            con.executemany(f"INSERT INTO transactions ({names}) VALUES ({marks})", values)
            rows += len(df)
            cursor = page.get("nextCursor")
            if not page.get("hasMore") or (args.max_records and rows >= args.max_records):
                break
    con.close()
    print(
        json.dumps(
            {
                "seconds": time.perf_counter() - started,
                "rows": rows,
                "requests": requests,
                "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }
        )
    )


if __name__ == "__main__":
    main()
