"""Where the client connects and with which credentials: base URL rules and the environment."""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

from paylens.errors import ConfigurationError

API_VERSION = "2025-10-13"
ENV_BASE_URL = "PAYLENS_BASE_URL"
ENV_CLIENT_ID = "PAYLENS_CLIENT_ID"
ENV_CLIENT_SECRET = "PAYLENS_CLIENT_SECRET"

_VERSION_SEGMENT = re.compile(r"^\d{4}-\d{2}-\d{2}$")


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


def check_base_url(base_url: str, *, allow_insecure: bool = False) -> tuple[str, str]:
    """Validate a base URL and return it without a trailing slash, with its API version.

    It must be https (plain http only on a loopback address) and end in the version segment
    (`…/2025-10-13`), since every path of the interface is relative to it.
    """
    url = base_url.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        # a request's own parameters replace a base URL's query, so a token put there would
        # be dropped unseen; and what follows `?` or `#` may be a secret: never echoed
        shown = urlunsplit(parts._replace(query="", fragment="", netloc=parts.hostname or ""))
        raise ConfigurationError(
            f"base URL {shown!r}… must not carry a query or fragment; every path of the "
            "interface is relative to it (credentials go in client_id and client_secret)"
        )
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(f"base URL {url!r} is not an http(s) URL")
    if parts.username or parts.password:
        raise ConfigurationError(
            "base URL must not carry credentials; pass client_id and client_secret instead"
        )
    if parts.scheme == "http" and not (allow_insecure or is_loopback_host(parts.hostname)):
        raise ConfigurationError(
            f"base URL {url!r} must use https (plain http is allowed only on loopback addresses)"
        )
    version = parts.path.rsplit("/", 1)[-1]
    if not _VERSION_SEGMENT.match(version):
        raise ConfigurationError(
            f"base URL {url!r} must end with the API version segment, "
            f"for example https://…/{API_VERSION}"
        )
    return url, version


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


def is_sandbox_url(base_url: str) -> bool:
    """True when a base URL points at a sandbox (paylens' own, in-process or served, or any
    service URL that names itself one): its data must be labelled sandbox data."""
    parts = urlsplit(base_url)
    return "sandbox" in (parts.hostname or "") or "/sandbox" in parts.path
