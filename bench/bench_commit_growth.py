"""What one commit of new transactions costs against the size of the table it lands in: a copy
of a synced file (`profile_sync.py` leaves one) gets batches of records none of which is stored
(stored records' texts under new ids), committed alternately as a sync did before (#34: the
upsert joins the batch with every stored key) and as it does now (the run's stored keys say
that none is stored, and nothing stored is read). A diagnostic, on private functions.

    python bench/profile_sync.py env.txt /tmp/p.duckdb      # a synced file, of any size
    python bench/bench_commit_growth.py /tmp/p.duckdb [--records 10000] [--rounds 6]

Prints the process's CPU seconds per commit (one thread: DuckDB's own threads are the
process's too), with the sync's settings (no checkpoint during the commits).
"""

from __future__ import annotations

import argparse
import re
import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from paylens.frames import transaction_tables
from paylens.warehouse import _open, _store
from paylens.warehouse.sync import save

_FIRST_ID = re.compile(rb'"id":"([^"]+)"')


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("db", help="a synced warehouse file (copied, never written)")
    parser.add_argument("--records", type=int, default=10_000, help="records per commit")
    parser.add_argument("--rounds", type=int, default=6, help="commits, alternating the ways")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        copy = str(Path(tmp) / "copy.duckdb")
        shutil.copy(args.db, copy)
        con = duckdb.connect(copy)
        con.execute(_open._WRITE_SETTINGS)
        stored = con.execute("SELECT count(*) FROM transactions").fetchall()[0][0]
        texts = [
            row[0].encode()
            for row in con.execute(
                f"SELECT raw FROM transactions USING SAMPLE {args.records} ROWS"
            ).fetchall()
        ]
        keys = save.StoredKeys()
        for round_ in range(args.rounds):
            renamed = b'"id":"\\1-c%d"' % round_  # the record's own id, made new
            fresh = [_FIRST_ID.sub(renamed, t, count=1) for t in texts]
            tables = transaction_tables(raw=fresh)
            way = "stored keys" if round_ % 2 else "join"
            cpu = time.process_time()
            with _store.transaction(con):
                new = way == "stored keys" and keys.none_stored(
                    con, tables["transactions"].column("id")
                )
                _store.upsert_transaction_tables(
                    con, tables, run_id=10**6, now=datetime.now(UTC), new=new
                )
            print(
                f"{stored:,} stored, {len(fresh):,} new by {way}"
                f"{' (none stored: ' + str(new) + ')' if new or round_ % 2 else ''}: "
                f"{time.process_time() - cpu:.3f} s CPU"
            )
        con.close()


if __name__ == "__main__":
    main()
