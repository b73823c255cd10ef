"""Progress bars where someone can see them: in a terminal, or in a Jupyter kernel (tqdm's
widget). Anywhere else (cron, a pipe, a log file) there is none: a bar there is only a line of
carriage returns in the log."""

from __future__ import annotations

import sys
from typing import Any


def visible_bar(**options: Any) -> Any | None:
    """A `tqdm.auto` bar with `options` when it can be seen, else None."""
    if not _seen():
        return None
    from tqdm.auto import tqdm

    return tqdm(**options)


def _seen() -> bool:
    isatty = getattr(sys.stderr, "isatty", None)
    if isatty is not None and isatty():
        return True
    ipython = sys.modules.get("IPython")  # loaded already in a kernel: never imported here
    shell = getattr(ipython, "get_ipython", lambda: None)()
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})
