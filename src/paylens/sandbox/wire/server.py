"""The sandbox as a real HTTP/1.1 server on loopback (stdlib, one thread per connection, with
keep-alive), so any HTTP client can point at it. Dropped connections are real: the socket is
reset without an answer."""

from __future__ import annotations

import ipaddress
import logging
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from paylens.errors import InvalidArgumentError

from .app import SandboxApp

logger = logging.getLogger("paylens.sandbox")

#: The served sandbox's base path before the version segment; it labels the data as sandbox data.
BASE_PATH = "/sandbox"


def check_loopback_host(host: str) -> str:
    """`host` when it is a loopback address: `localhost`, 127.0.0.0/8 or ::1. Anything else
    (0.0.0.0, an empty host, a LAN address, another name) is refused: a served sandbox is for
    this machine's own tools (its secret is printed, its control route moves its clock)."""
    bare = host.strip("[]")
    try:
        loopback = bare == "localhost" or ipaddress.ip_address(bare).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise InvalidArgumentError(
            "host",
            f"must be a loopback address (127.0.0.1, another of 127.0.0.0/8, ::1 or localhost): "
            f"a served sandbox is for this machine only; got {host!r}",
        )
    return bare


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # small answers written in two pieces would otherwise wait ~40 ms for a delayed ACK
    disable_nagle_algorithm = True
    server: _Server

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        reply = self.server.app.handle(self.command, self.path, headers, body)
        if reply.delay:
            time.sleep(reply.delay)
        if reply.drop:
            self.close_connection = True
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            return
        # not `send_response`: its Date is this machine's clock, the reply's is the sandbox's
        self.send_response_only(reply.status)
        self.send_header("Server", self.version_string())
        for name, value in reply.headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(reply.body)

    def __getattr__(self, name: str) -> Any:
        # every method reaches the app, which answers an undeclared one 405 in the error shape
        # (the stdlib's own answer would be 501 in HTML)
        if name.startswith("do_") and name[3:].isupper():
            return self._serve
        raise AttributeError(name)

    def log_message(self, format: str, *args: object) -> None:
        logger.debug("%s " + format, self.address_string(), *args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, address: tuple[str, int], app: SandboxApp) -> None:
        self.app = app
        if ":" in address[0]:  # ::1
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)

    def handle_error(self, request: object, client_address: object) -> None:
        # a client that hangs up (or a connection the faults dropped) is not a server error
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError | TimeoutError):
            logger.debug("connection from %s ended: %r", client_address, error)
        else:
            logger.exception("sandbox server error with %s", client_address)


class SandboxServer:
    """A running loopback server; stop it with `stop()` or use it as a context manager. A host
    that is not loopback is refused (`check_loopback_host`)."""

    def __init__(self, app: SandboxApp, host: str = "127.0.0.1", port: int = 0) -> None:
        host = check_loopback_host(host)
        self._server = _Server((host, port), app)
        self.host, self.port = host, int(self._server.server_address[1])
        netloc = f"[{host}]" if ":" in host else host
        self.base_url = f"http://{netloc}:{self.port}{BASE_PATH}/{app.version}"
        # `stop` waits for the serving loop to notice: every 50 ms, not the default 0.5 s
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="paylens-sandbox",
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def wait(self) -> None:
        """Block until interrupted (for `paylens sandbox serve`)."""
        try:
            while self._thread.is_alive():
                self._thread.join(0.5)
        except KeyboardInterrupt:
            self.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"SandboxServer({self.base_url})"
