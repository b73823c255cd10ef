"""The ceiling: the same pages' JSON parsed and inserted into DuckDB with no HTTP at all.

    python bench/baselines/ceiling.py fetch BASE_URL CLIENT_ID SECRET PAGES   # untimed, once
    python bench/baselines/ceiling.py load PAGES DB --engine duckdb|arrow     # timed

`fetch` walks the cursor once and writes each page's body as received, one per line (the
service's JSON is compact), plus the DuckDB type of a page (`PAGES.type`), inferred from every
page, so the timed read need not infer it. `load` reads that file and lands every record in
one `transactions` table (top-level fields as columns, nested objects as STRUCTs), using:

- `duckdb`: DuckDB's own multi-threaded JSON reader (`read_json` with the declared page type,
  `unnest` of `data`) in one `CREATE TABLE AS`;
- `arrow`: Arrow's multi-threaded C++ JSON reader over the same file, the `data` lists
  flattened, then inserted into DuckDB from Arrow in one statement.

Prints one JSON line: seconds, rows, peak RSS.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path


def fetch(base_url: str, client_id: str, secret: str, pages: Path) -> None:
    import duckdb
    import httpx

    started = time.perf_counter()
    count = records = 0
    cursor = None
    with httpx.Client(auth=(client_id, secret), timeout=60) as http, pages.open("wb") as out:
        while True:
            params: dict[str, str | int] = {"limit": 100}
            if cursor:
                params["cursor"] = cursor
            response = http.get(f"{base_url}/transactions", params=params)
            response.raise_for_status()
            body = response.content
            if b"\n" in body:
                raise ValueError("a page body spans lines; the pages file needs one per line")
            out.write(body + b"\n")
            page = json.loads(body)
            count += 1
            records += len(page["data"])
            cursor = page.get("nextCursor")
            if not page.get("hasMore"):
                break
    con = duckdb.connect()
    kind = con.execute(
        "SELECT typeof(data) FROM read_json(?, format='newline_delimited', sample_size=-1, "
        "maximum_object_size=134217728) LIMIT 1",
        [str(pages)],
    ).fetchone()
    assert kind is not None
    pages.with_suffix(".type").write_text(kind[0])
    print(
        json.dumps(
            {
                "pages": count,
                "records": records,
                "bytes": pages.stat().st_size,
                "seconds": time.perf_counter() - started,
            }
        )
    )


def load(pages: Path, db: str, engine: str) -> None:
    import duckdb

    kind = pages.with_suffix(".type").read_text()
    started = time.perf_counter()
    con = duckdb.connect(db)
    if engine == "duckdb":
        con.execute(
            "CREATE TABLE transactions AS SELECT unnest(data, max_depth := 2) FROM read_json(?, "
            "format='newline_delimited', columns={'data': '" + kind + "'}, "
            "maximum_object_size=134217728)",
            [str(pages)],
        )
    else:
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.json as pj

        table = pj.read_json(pages, read_options=pj.ReadOptions(block_size=1 << 24))
        items = pc.list_flatten(table.column("data"))
        records = pa.Table.from_struct_array(items)  # noqa: F841 (read by DuckDB below)
        con.execute("CREATE TABLE transactions AS SELECT * FROM records")
    con.close()
    elapsed = time.perf_counter() - started
    rows = duckdb.connect(db, read_only=True).execute("SELECT count(*) FROM transactions")
    print(
        json.dumps(
            {
                "seconds": elapsed,
                "rows": rows.fetchone()[0],  # type: ignore[index]
                "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fetch")
    f.add_argument("base_url")
    f.add_argument("client_id")
    f.add_argument("secret")
    f.add_argument("pages", type=Path)
    lo = sub.add_parser("load")
    lo.add_argument("pages", type=Path)
    lo.add_argument("db")
    lo.add_argument("--engine", choices=("duckdb", "arrow"), default="duckdb")
    args = parser.parse_args()
    if args.command == "fetch":
        fetch(args.base_url, args.client_id, args.secret, args.pages)
    else:
        load(args.pages, args.db, args.engine)


if __name__ == "__main__":
    main()
