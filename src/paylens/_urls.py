"""What a base URL says about itself, shared by the client (which labels sandbox data) and
the sandbox (which names its own URLs): the two share no other code."""

from __future__ import annotations

from urllib.parse import urlsplit


def is_sandbox_url(base_url: str) -> bool:
    """True when a base URL points at a sandbox (paylens' own, in-process or served, or any
    service URL that names itself one): its data must be labelled sandbox data."""
    parts = urlsplit(base_url)
    return "sandbox" in (parts.hostname or "") or "/sandbox" in parts.path
