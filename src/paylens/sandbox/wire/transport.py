"""In-process ways into the sandbox: httpx transports that hand each request to the app core
without sockets. A dropped connection surfaces as the same httpx error a real one would."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import httpx

from .app import Reply, SandboxApp


def _target(request: httpx.Request) -> str:
    return request.url.raw_path.decode("ascii")


def _response(reply: Reply, request: httpx.Request) -> httpx.Response:
    if reply.drop:
        raise httpx.RemoteProtocolError(
            "Server disconnected without sending a response.", request=request
        )
    return httpx.Response(reply.status, headers=reply.headers, content=reply.body, request=request)


class SandboxTransport(httpx.BaseTransport):
    """Sync transport: `httpx.Client(transport=SandboxTransport(app))`."""

    def __init__(self, app: SandboxApp, sleep: Callable[[float], None] = time.sleep) -> None:
        self.app = app
        self.sleep = sleep

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        reply = self.app.handle(request.method, _target(request), request.headers, request.read())
        if reply.delay:
            self.sleep(reply.delay)
        return _response(reply, request)


class AsyncSandboxTransport(httpx.AsyncBaseTransport):
    """Async transport; latency is awaited, so concurrent requests overlap as over a network."""

    def __init__(self, app: SandboxApp) -> None:
        self.app = app

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        reply = self.app.handle(request.method, _target(request), request.headers, body)
        if reply.delay:
            await asyncio.sleep(reply.delay)
        return _response(reply, request)
