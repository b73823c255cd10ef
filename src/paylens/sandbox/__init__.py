"""`paylens.Sandbox`: an embedded simulator of the service, deterministic from a seed.

    sandbox = paylens.Sandbox(seed=0, transactions=10_000)
    client = sandbox.client()                 # in-process, no sockets
    with sandbox.serve(port=8765) as server:  # or real HTTP on loopback
        print(server.env_lines())
    sandbox.advance(timedelta(days=1))        # settle, fail, expire what is due; new activity
    sandbox.faults.configure(latency=0.05, rate_429=0.1)
    paylens.Sandbox(clock="wall")             # history ends now; time follows the wall clock
    paylens.Sandbox(webhook_url="http://127.0.0.1:9000/webhooks")  # posts every transition

Everything it serves is sandbox data and says so: its URLs carry "sandbox", its answers carry
an `X-Paylens-Sandbox` header, and paylens labels what it stores from it.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from paylens._urls import is_sandbox_url

from .clock import Clock, WallClock, advance_served
from .errors import ServiceError
from .midrates import mid_rate_series
from .wire.app import RequestLog, SandboxApp
from .wire.faults import Faults
from .wire.server import SandboxServer
from .wire.transport import AsyncSandboxTransport, SandboxTransport
from .wire.webhooks import Delivery, WebhookSender
from .world.world import World

if TYPE_CHECKING:
    import pandas as pd
    from cryptography.hazmat.primitives.asymmetric import ec

    from paylens.client import AsyncClient, Client

API_VERSION = "2025-10-13"
#: Base URL of the in-process sandbox (no socket is ever opened to it).
IN_PROCESS_BASE_URL = f"https://sandbox.paylens.invalid/{API_VERSION}"
SANDBOX_CLIENT_ID = "sandbox-platform"

__all__ = [
    "IN_PROCESS_BASE_URL",
    "Faults",
    "RequestLog",
    "Sandbox",
    "SandboxServer",
    "ServiceError",
    "advance_served",
    "is_sandbox_url",
    "mid_rate_series",
]


class Sandbox:
    """A simulated service with generated customers, accounts, cards and transactions.

    `seed` and the generation options (`transactions`, `start`, `end`, ... passed on to the
    world) fix the data. Credentials are `client_id` and a random `client_secret` (or yours).
    `clock="fixed"` (the default: reproducible) ends the history at `end` and moves time only
    with `advance`; `clock="wall"` ends it now and follows the wall clock (see `clock`).

    `webhook_url`: every transition of the world is posted there as the interface's webhook,
    signed with `webhook_key` (a P-256 private key; default a new random one, its public half in
    `webhook_public_key_pem`), from background threads (`webhooks`, see `wire.webhooks`;
    `webhooks_drain` waits for them); `webhook_lanes` of them post at once, the events of one
    record always in order (1: every event in the order the world made them).
    """

    def __init__(
        self,
        seed: int = 0,
        transactions: int = 10_000,
        *,
        client_id: str = SANDBOX_CLIENT_ID,
        client_secret: str | None = None,
        clock: str | WallClock = "fixed",
        webhook_url: str | None = None,
        webhook_key: ec.EllipticCurvePrivateKey | None = None,
        webhook_lanes: int = 4,
        **world_options: Any,
    ) -> None:
        self.seed = seed
        time = Clock(clock)
        wall_now = time.now()
        if wall_now is not None and world_options.get("end") is None:
            world_options["end"] = wall_now  # the history ends now
        self.world = World(seed=seed, transactions=transactions, **world_options)
        self.faults = Faults(seed=seed)
        self.client_id = client_id
        self._client_secret = client_secret or "sk_sandbox_" + secrets.token_urlsafe(24)
        self.app = SandboxApp(
            self.world, self.faults, client_id, self._client_secret, API_VERSION, time
        )
        #: the webhook sender (its `url` is None when no endpoint is configured)
        self.webhooks = WebhookSender(
            webhook_url,
            self.faults,
            key=webhook_key,
            lanes=webhook_lanes,
            on_answer=self._apply_decision,
        )
        if webhook_url is not None:
            self.world.on_transition = self.webhooks
            self.world.test_webhook = self._send_test_webhook

    def __repr__(self) -> str:
        return f"Sandbox(seed={self.seed}, transactions={self.world.transaction_count()}, now={self.now.isoformat()})"

    @property
    def client_secret(self) -> str:
        """The secret a client must present (kept out of the repr)."""
        return self._client_secret

    @property
    def requests(self) -> RequestLog:
        """Every request received: `sandbox.requests.count("POST", suffix="/cancel")`."""
        return self.app.log

    @property
    def now(self) -> datetime:
        """The sandbox clock (tz-aware UTC): with `clock="fixed"` it moves only with `advance`;
        with `clock="wall"` it follows the wall clock (plus every `advance`)."""
        self.app.catch_up()
        return self.world.now

    @property
    def webhook_public_key_pem(self) -> str:
        """The public key (PEM) that verifies this sandbox's `X-Service-Signature`s."""
        return self.webhooks.public_key_pem

    def webhooks_drain(self, timeout: float = 30.0) -> bool:
        """Wait until every webhook queued so far is answered (or given up after its retries);
        False when `timeout` seconds passed first."""
        return self.webhooks.drain(timeout)

    def _apply_decision(self, delivery: Delivery, status: int) -> None:
        """The platform's answer to a pending incoming payment's webhook, applied when it
        still waits for one (200 approves, 403 rejects)."""
        if delivery.type != "INCOMING_PAYMENT.PENDING" or status not in (200, 403):
            return
        with self.app.lock:
            try:
                if status == 200:
                    self.world.approve(delivery.key)
                else:
                    self.world.reject(delivery.key)
            except ServiceError:  # decided already, or its window closed
                pass

    def _send_test_webhook(self) -> dict[str, Any]:
        import httpx

        try:
            status, body = self.webhooks.send_test(self.world.now_us)
        except httpx.HTTPError as exc:
            raise ServiceError(
                400, "WEBHOOK_DELIVERY_ERROR", f"the webhook endpoint could not be reached: {exc}"
            ) from None
        return {"url": self.webhooks.url, "response_status": status, "response_body": body}

    def reference_rates(self) -> pd.DataFrame:
        """The mid-market rates the sandbox trades around (they move daily, see `midrates`),
        one row per UTC day and corridor from its first generated day to now: pass it to
        `paylens.analysis` as `reference_rates`."""
        from .clock import from_us

        return mid_rate_series(from_us(self.world._start), self.now, seed=self.seed)

    def advance(self, delta: timedelta) -> dict[str, int]:
        """Move the clock ahead: settle, fail and expire what is due and create new activity.
        Returns the counts of what changed (`created`, and per status reached)."""
        return self.app.advance(delta)

    def client(self, **options: Any) -> Client:
        """A `paylens.Client` wired to this sandbox in-process (no sockets)."""
        from paylens.client import Client

        return Client(
            IN_PROCESS_BASE_URL,
            self.client_id,
            self._client_secret,
            transport=SandboxTransport(self.app),
            **options,
        )

    def async_client(self, **options: Any) -> AsyncClient:
        """A `paylens.AsyncClient` wired to this sandbox in-process."""
        from paylens.client import AsyncClient

        return AsyncClient(
            IN_PROCESS_BASE_URL,
            self.client_id,
            self._client_secret,
            transport=AsyncSandboxTransport(self.app),
            **options,
        )

    def serve(self, port: int = 0, host: str = "127.0.0.1") -> SandboxServer:
        """Serve this sandbox over HTTP on a loopback address (port 0 picks a free one):
        `localhost`, 127.0.0.0/8 or ::1; any other host is refused (`InvalidArgumentError`), as
        the served sandbox takes anyone who reaches it for the platform."""
        return SandboxServer(self.app, host=host, port=port)

    def env(self, server: SandboxServer) -> dict[str, str]:
        """The PAYLENS_* variables that point a client at a served sandbox."""
        return {
            "PAYLENS_BASE_URL": server.base_url,
            "PAYLENS_CLIENT_ID": self.client_id,
            "PAYLENS_CLIENT_SECRET": self._client_secret,
        }
