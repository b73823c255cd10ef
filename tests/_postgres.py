"""A real PostgreSQL server for the tests, started in a temporary directory (initdb refuses
root: run as the `postgres` user when root), on a free port with its unix socket there too,
and stopped at the end."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _binaries() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(versions[-1]).parent if versions else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def postgres_server() -> Iterator[str | None]:
    """Yield a `postgresql://` URL of a fresh database, or None when PostgreSQL is absent."""
    bin_dir = _binaries()
    if bin_dir is None:
        yield None
        return
    root = Path(tempfile.mkdtemp(prefix="paylens-pg-"))
    as_postgres: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        as_postgres = ["runuser", "-u", "postgres", "--"]
    data, port = root / "data", _free_port()
    subprocess.run(
        [*as_postgres, str(bin_dir / "initdb"), "-D", str(data), "-U", "paylens", "-A", "trust"],
        check=True,
        capture_output=True,
    )
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
    pg_ctl = [*as_postgres, str(bin_dir / "pg_ctl"), "-D", str(data)]
    subprocess.run(
        [*pg_ctl, "-o", options, "-l", str(root / "log"), "-w", "start"],
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgresql+psycopg2://paylens@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*pg_ctl, "-m", "immediate", "-w", "stop"], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
