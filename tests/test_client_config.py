"""Client configuration: environment, base URL rules, and secrets kept out of sight."""

from __future__ import annotations

import logging
import ssl
from pathlib import Path

import pytest

from paylens import Client, ConfigurationError, Sandbox
from paylens.client import AsyncClient

from ._helpers import run_cli


def test_from_env_names_every_missing_variable() -> None:
    with pytest.raises(ConfigurationError) as info:
        Client.from_env({})
    message = str(info.value)
    for name in ("PAYLENS_BASE_URL", "PAYLENS_CLIENT_ID", "PAYLENS_CLIENT_SECRET"):
        assert name in message


def test_from_env_names_only_the_missing_one() -> None:
    with pytest.raises(ConfigurationError) as info:
        Client.from_env(
            {"PAYLENS_BASE_URL": "https://api.example.com/2025-10-13", "PAYLENS_CLIENT_ID": "id"}
        )
    missing_part = str(info.value).split(" not set")[0]
    assert "PAYLENS_CLIENT_SECRET" in missing_part
    assert "PAYLENS_CLIENT_ID" not in missing_part and "PAYLENS_BASE_URL" not in missing_part


def test_from_env_builds_a_working_client(sandbox: Sandbox) -> None:
    with sandbox.serve() as server:
        env = sandbox.env(server)
        with Client.from_env(env) as client:
            assert client.base_url == server.base_url
            assert client.api_version == "2025-10-13"
            assert client.is_sandbox
            assert client.config.get() is not None


@pytest.mark.parametrize(
    "url",
    [
        "http://api.example.com/2025-10-13",  # plain http off loopback
        "https://api.example.com",  # no version segment
        "https://api.example.com/v1",
        "ftp://api.example.com/2025-10-13",
        "https://user:pw@api.example.com/2025-10-13",
    ],
)
def test_bad_base_urls_are_refused(url: str) -> None:
    with pytest.raises(ConfigurationError):
        Client(url, "id", "secret")


@pytest.mark.parametrize(
    "url",
    [
        "https://api.example.com/2025-10-13?token=tok_live_5ec2e7",  # would be dropped unseen
        "http://api.example.com/v1?token=tok_live_5ec2e7",  # and refused for other reasons too
        "ftp://api.example.com/2025-10-13?token=tok_live_5ec2e7",
        "https://api.example.com/2025-10-13#tok_live_5ec2e7",
    ],
)
def test_a_base_url_with_a_query_or_fragment_is_refused_without_echoing_it(
    url: str, tmp_path: Path
) -> None:
    """A request's own parameters replace a base URL's query, so a token put there would be
    dropped unseen; and what follows `?` or `#` may be a secret, never shown in the error."""
    with pytest.raises(ConfigurationError, match="must not carry a query or fragment") as raised:
        Client(url, "id", "secret")
    assert "tok_live_5ec2e7" not in str(raised.value)
    env = {"PAYLENS_BASE_URL": url, "PAYLENS_CLIENT_ID": "id", "PAYLENS_CLIENT_SECRET": "secret"}
    done = run_cli("sync", "--db", str(tmp_path / "w.duckdb"), env=env)
    assert done.returncode == 2, done
    assert "tok_live_5ec2e7" not in done.stderr + done.stdout
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("url", "trusted"),
    [
        ("https://api.example.com/2025-10-13", True),
        ("http://127.0.0.1:8765/sandbox/2025-10-13", False),
        ("http://localhost:9000/2025-10-13", False),
    ],
)
@pytest.mark.parametrize("kind", [Client, AsyncClient])
def test_only_a_tls_client_loads_the_trust_store(
    monkeypatch: pytest.MonkeyPatch, url: str, trusted: bool, kind: type[Client | AsyncClient]
) -> None:
    """An https client verifies the service against the CA bundle (verification required);
    one of a loopback http URL (`paylens sandbox serve`) never speaks TLS, so it does not read
    the bundle (~0.05 s of each process's start)."""
    loaded: list[object] = []
    real = ssl.SSLContext.load_verify_locations

    def counting(self: ssl.SSLContext, *args: object, **kwargs: object) -> None:
        loaded.append(self)
        real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counting)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    kind(url, "id", "secret")
    assert bool(loaded) is trusted
    for context in loaded:
        assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "url",
    [
        "https://api.example.com/2025-10-13",
        "https://api.example.com/2025-10-13/",
        "http://127.0.0.1:8765/sandbox/2025-10-13",
        "http://localhost:9000/2025-10-13",
        "http://[::1]:9000/2025-10-13",
    ],
)
def test_good_base_urls_are_accepted(url: str) -> None:
    client = Client(url, "id", "secret")
    assert client.base_url == url.rstrip("/")
    assert not client.base_url.endswith("/")
    client.close()


def test_secret_never_shows(caplog: pytest.LogCaptureFixture, sandbox: Sandbox) -> None:
    secret = sandbox.client_secret
    caplog.set_level(logging.DEBUG)
    client = sandbox.client()
    assert secret not in repr(client) and secret not in str(client)
    assert secret not in repr(sandbox)
    assert secret not in repr(client._credentials)
    list(client.transactions.list(limit=5).pages())
    assert secret not in caplog.text
    bad = Client(
        client.base_url, sandbox.client_id, "wrong-secret-value", transport=client._http._transport
    )
    with pytest.raises(Exception) as info:
        bad.config.get()
    assert "wrong-secret-value" not in str(info.value) and "wrong-secret-value" not in repr(
        info.value
    )
    async_client = AsyncClient("https://api.example.com/2025-10-13", "id", "topsecret-123")
    assert "topsecret-123" not in repr(async_client)


@pytest.mark.parametrize("value", [-1, -5])
def test_a_negative_max_retries_is_refused_by_name(value: int) -> None:
    from paylens import InvalidArgumentError, RetryPolicy

    sandbox = Sandbox(seed=1, transactions=50)
    with pytest.raises(InvalidArgumentError, match="max_retries"):
        sandbox.client(max_retries=value)
    with pytest.raises(InvalidArgumentError, match="max_retries"):
        RetryPolicy(max_retries=value)
    with sandbox.client() as client, pytest.raises(InvalidArgumentError, match="max_retries"):
        client.with_options(max_retries=value)


SECRET = "sk_live_9f8e7d6c5b4a"


def _chain(exc: BaseException | None) -> str:
    """Every message and repr down an exception's chain (`__cause__` and `__context__`)."""
    said: list[str] = []
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        said += [str(exc), repr(exc), repr(exc.args)]
        exc = exc.__cause__ or exc.__context__
    return "\n".join(said)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"https://api.example.com/2025-10-13/{SECRET}", "https://api.example.com/…"),
        (f"https://api.example.com/{SECRET}", "https://api.example.com/…"),
        (f"http://api.example.com/{SECRET}/2025-10-13", "http://api.example.com/…/2025-10-13"),
        (f"ftp://api.example.com/{SECRET}/2025-10-13", "ftp://api.example.com/…/2025-10-13"),
        (f"https://api.example.com:{SECRET}/2025-10-13", "https://api.example.com/2025-10-13"),
        (f"https://[{SECRET}/2025-10-13", "…"),
        (
            f"https://api.example.com/{SECRET}/2025-10-13?x=1",
            "https://api.example.com/…/2025-10-13",
        ),
        (f"https://{SECRET}.example.com/2025-10-13", None),  # the client secret itself
        (f"https://api.example.com/v1/{SECRET}/2025-10-13", "https://api.example.com/…/2025-10-13"),
    ],
)
@pytest.mark.parametrize("kind", [Client, AsyncClient])
def test_a_base_url_is_never_echoed_with_a_secret(
    url: str, shown: str | None, kind: type[Client | AsyncClient]
) -> None:
    """A refused base URL is shown by its scheme, host and version segment only: any other
    path segment may be a token, and the client secret is never shown, wherever it is."""
    with pytest.raises(ConfigurationError) as raised:
        kind(url, "id", SECRET)
    text = _chain(raised.value)
    assert SECRET.lower() not in text.lower(), text
    if shown is not None:
        assert repr(shown) in str(raised.value) or f"{shown!r}…" in str(raised.value), text


@pytest.mark.parametrize("kind", [Client, AsyncClient])
def test_the_repr_of_a_client_whose_construction_failed_is_safe(
    kind: type[Client | AsyncClient],
) -> None:
    """A traceback's locals or a debugger show `self` of an `__init__` that raised: its repr
    names what was set and never fails."""
    empty = kind.__new__(kind)
    assert repr(empty) == f"{kind.__name__}(base_url=None, client_id=None)"
    half = kind.__new__(kind)
    half.base_url = "https://api.example.com/2025-10-13"  # set before Credentials refused
    assert repr(half) == f"{kind.__name__}(base_url={half.base_url!r}, client_id=None)"
    seen: list[str] = []

    class Watched(kind):  # type: ignore[valid-type,misc]
        def __init__(self, *args: object) -> None:
            try:
                super().__init__(*args)
            finally:
                seen.append(repr(self))

    with pytest.raises(ConfigurationError):
        Watched("https://api.example.com/2025-10-13", "id", "")
    assert seen == ["Watched(base_url='https://api.example.com/2025-10-13', client_id=None)"]
    whole = kind("https://api.example.com/2025-10-13", "id", SECRET)
    assert repr(whole) == f"{kind.__name__}(base_url={whole.base_url!r}, client_id='id')"


def test_a_secret_too_short_to_be_real_is_not_looked_for_in_the_url() -> None:
    """A one-letter secret (a test's) is in most URLs by chance: not taken for a leak."""
    with Client("https://api.example.com/2025-10-13", "id", "s") as client:
        assert client.base_url == "https://api.example.com/2025-10-13"
    with pytest.raises(ConfigurationError, match="must use https") as raised:
        Client("http://api.example.com/2025-10-13", "id", "s")
    assert "'http://api.example.com/2025-10-13'" in str(raised.value)
