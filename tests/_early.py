"""Loaded before any plugin (`-p tests._early` in `pyproject.toml`): the suite's processes
skip building the grammar of an optional format checker that nothing here uses.

jsonschema (imported by nbformat, which nbval and papermill load) imports `rfc3987_syntax`,
when it is installed (jupyter_events asks for it), for its `iri` format checker; building
that grammar at import costs each process ~1.2 s. No schema here, nor the interface
description, uses the `iri` format. See `paylens.cli.main`, which does the same.

And it sets how many workers `-n auto` starts, before xdist asks.
"""

import os
import sys

sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]

# `-n auto` (pyproject.toml) starts a worker per core and one more: a worker waiting on a
# kernel, a `paylens` process or a served sandbox leaves its core to the others
_cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
os.environ.setdefault("PYTEST_XDIST_AUTO_NUM_WORKERS", str((_cores or 1) + 1))
