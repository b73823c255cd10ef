"""Where the client connects and with which credentials: base URL rules and the environment."""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from paylens.errors import ConfigurationError

API_VERSION = "2025-10-13"
ENV_BASE_URL = "PAYLENS_BASE_URL"
ENV_CLIENT_ID = "PAYLENS_CLIENT_ID"
ENV_CLIENT_SECRET = "PAYLENS_CLIENT_SECRET"

_VERSION_SEGMENT = re.compile(r"^\d{4}-\d{2}-\d{2}$")
#: The shortest client secret looked for in a base URL.
_SECRET_LEAST = 8


@dataclass(frozen=True)
class Credentials:
    """Platform credentials for HTTP Basic; the secret never shows in a repr."""

    client_id: str
    client_secret: str = field(repr=False)

    def __post_init__(self) -> None:
        if not self.client_id:
            raise ConfigurationError("client_id is empty")
        if not self.client_secret:
            raise ConfigurationError("client_secret is empty")


def is_loopback_host(host: str) -> bool:
    """True for localhost, 127.0.0.0/8 and ::1."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_base_url(
    base_url: str, *, allow_insecure: bool = False, secret: str | None = None
) -> tuple[str, str]:
    """Validate a base URL and return it without a trailing slash, with its API version.

    It must be https (plain http only on a loopback address) and end in the version segment
    (`…/2025-10-13`), since every path of the interface is relative to it. It must not carry
    the client `secret` anywhere. A refusal shows it as `shown_url` does: never a path segment
    but the version, never the secret; and it chains no other exception.
    """
    url = base_url.strip().rstrip("/")
    if secret is not None and len(secret) < _SECRET_LEAST:
        secret = None  # so short, it is in most URLs by chance (a test's "s"): no real secret
    problem = _base_url_problem(url, allow_insecure=allow_insecure, secret=secret)
    if problem is not None:
        raise ConfigurationError(problem.format(url=repr(shown_url(url, secret=secret))))
    return url, urlsplit(url).path.rsplit("/", 1)[-1]


def _base_url_problem(url: str, *, allow_insecure: bool, secret: str | None) -> str | None:
    """What is wrong with a base URL, as a message with `{url}` where it is shown (None when
    nothing is)."""
    try:
        parts = urlsplit(url)
        port_ok = parts.port is None or parts.port > 0
    except ValueError:  # an unclosed IPv6 bracket, a port that is no number: said, not chained
        parts, port_ok = None, False
    if parts is None or not port_ok:
        return "base URL {url}… is not a URL (its host or port cannot be read)"
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        # a request's own parameters replace a base URL's query, so a token put there would
        # be dropped unseen; and what follows `?` or `#` may be a secret: never echoed
        return (
            "base URL {url}… must not carry a query or fragment; every path of the "
            "interface is relative to it (credentials go in client_id and client_secret)"
        )
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "base URL {url} is not an http(s) URL"
    if parts.username or parts.password:
        return "base URL must not carry credentials; pass client_id and client_secret instead"
    if secret and secret in url:
        return (
            "base URL {url} carries the client secret: it would show in every error and log "
            "line naming a request; pass it as client_secret only"
        )
    if parts.scheme == "http" and not (allow_insecure or is_loopback_host(parts.hostname)):
        return "base URL {url} must use https (plain http is allowed only on loopback addresses)"
    if not _VERSION_SEGMENT.match(parts.path.rsplit("/", 1)[-1]):
        return (
            "base URL {url} must end with the API version segment, "
            f"for example https://…/{API_VERSION}"
        )
    return None


def shown_url(url: str, *, secret: str | None = None) -> str:
    """A base URL as a message may show it: its scheme, host and port, and of its path only a
    last segment of the version's form (`https://host/…/2025-10-13`): any other segment may
    be a token. The client `secret` (of 8 characters or more) is never shown, wherever it
    appears."""
    try:
        parts = urlsplit(url)
    except ValueError:  # an unclosed IPv6 bracket
        parts = urlsplit("")
    try:
        port = parts.port
    except ValueError:  # a port that is no number: not shown
        port = None
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if not host:
        return "…"
    segments = [s for s in parts.path.split("/") if s]
    last = segments.pop() if segments and _VERSION_SEGMENT.match(segments[-1]) else None
    shown = f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")
    shown += ("/…" if segments else "") + (f"/{last}" if last else "")
    if secret and len(secret) >= _SECRET_LEAST:
        shown = re.sub(re.escape(secret), "…", shown, flags=re.IGNORECASE)
    return shown


def settings_from_env(environ: dict[str, str] | None = None) -> tuple[str, Credentials]:
    """Read PAYLENS_BASE_URL, PAYLENS_CLIENT_ID and PAYLENS_CLIENT_SECRET; name what is missing."""
    env = os.environ if environ is None else environ
    names = (ENV_BASE_URL, ENV_CLIENT_ID, ENV_CLIENT_SECRET)
    missing = [name for name in names if not env.get(name)]
    if missing:
        raise ConfigurationError(
            "cannot connect to the service: environment variable(s) "
            + ", ".join(missing)
            + " not set. Set all of "
            + ", ".join(names)
            + " (for a local simulator run `paylens sandbox serve` and export the lines it prints,"
            " or use paylens.Sandbox().client())."
        )
    return env[ENV_BASE_URL], Credentials(env[ENV_CLIENT_ID], env[ENV_CLIENT_SECRET])
