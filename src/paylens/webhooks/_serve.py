"""Serving the receiver with uvicorn (`paylens webhooks serve`).

uvicorn is the ASGI server Starlette's own documentation deploys with: HTTP/1.1 keep-alive with a
C parser (httptools), graceful shutdown on SIGTERM/SIGINT (in-flight requests finish, then the
app's lifespan records the receiver's stop), and no thread per connection. TLS is left to a
proxy in front (see the how-to), which is where certificates are renewed.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ._approve import Policy
from ._receive import MAX_BODY_BYTES, app
from ._store import EventStore


def serve(
    db_or_store: str | Path | EventStore,
    *,
    public_keys: Sequence[str | bytes | Path],
    host: str = "127.0.0.1",
    port: int = 8780,
    approve: Policy | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    ready: Callable[[str], Any] | None = None,
) -> None:
    """Serve the receiver (`app`, the same arguments) on `host`:`port` (0: any free port) until
    interrupted; `ready(url)` is called once it takes requests, with the endpoint's URL."""
    import uvicorn

    asgi = app(db_or_store, public_keys=public_keys, approve=approve, max_body_bytes=max_body_bytes)
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError:
        sock.close()
        raise
    bound = sock.getsockname()[1]
    shown = f"[{host.strip('[]')}]" if family == socket.AF_INET6 else host
    url = f"http://{shown}:{bound}/webhooks"

    class _Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if ready is not None and not self.should_exit:
                ready(url)

    config = uvicorn.Config(
        asgi,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=10,
        # longer than a proxy's idle upstream connections live (nginx: 60 s), so the proxy never
        # sends a request on a connection the receiver is closing (uvicorn's default is 5 s)
        timeout_keep_alive=75,
        server_header=False,
    )
    _Server(config).run(sockets=[sock])
