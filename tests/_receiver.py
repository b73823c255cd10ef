"""What the receiver's tests share: a P-256 signer of our own (not the sandbox's), the
interface's webhook bodies, and the receiver served by uvicorn, in this process (a thread) or
as `paylens webhooks serve` (a real process, for kills, locks and races)."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from paylens.webhooks import EventStore

SRC = str(Path(__file__).resolve().parents[1] / "src")


class Signer:
    """A P-256 key pair signing bodies as the service does: base64 of the DER ECDSA-SHA256."""

    def __init__(self) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.public_pem = self.key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def write_public(self, path: Path) -> Path:
        path.write_bytes(self.public_pem)
        return path

    def der(self, body: bytes) -> bytes:
        return self.key.sign(body, ec.ECDSA(hashes.SHA256()))

    def sign(self, body: bytes) -> str:
        return base64.b64encode(self.der(body)).decode()

    def sign_p1363(self, body: bytes) -> str:
        r, s = decode_dss_signature(self.der(body))
        return base64.b64encode(r.to_bytes(32) + s.to_bytes(32)).decode()

    def headers(self, body: bytes) -> dict[str, str]:
        return {"X-Service-Signature": self.sign(body), "Content-Type": "application/json"}


@pytest.fixture
def signer() -> Signer:
    """A new key pair (the service's, as far as a test's receiver knows)."""
    return Signer()


@pytest.fixture
def store(tmp_path: Path) -> EventStore:
    """The event store beside a warehouse path of the test's own."""
    return EventStore.beside(tmp_path / "wh.duckdb")


def card_event(n: int, status: str = "SETTLED") -> bytes:
    """A `CARD_TRANSACTION.*` webhook, id `Webhook:card-<n>`."""
    return orjson.dumps(
        {
            "id": f"Webhook:card-{n}",
            "type": f"CARD_TRANSACTION.{status}",
            "timestamp": "2025-10-01T12:00:00Z",
            "data": {
                "id": f"Transaction:card-{n}",
                "status": status,
                "type": "CARD",
                "cardId": "Card:1",
            },
        }
    )


def incoming_pending(
    webhook: str,
    transaction: str,
    amount: int = 50_000,
    *,
    uma: bool = True,
    requested: dict[str, bool] | None = None,
) -> bytes:
    """An `INCOMING_PAYMENT.PENDING` as the interface's example has it: over UMA (an approval
    rail), or `uma=False` a bank-rail one (informational); `requested`: the receiver's
    information the sender asks for (`requestedReceiverCustomerInfoFields`: name, mandatory)."""
    data: dict[str, Any] = {
        "id": transaction,
        "status": "PENDING",
        "type": "INCOMING",
        "direction": "CREDIT",
        "customerId": "Customer:1",
        "platformCustomerId": "18d3e5f7b4a9c2",
        "receivedAmount": {
            "amount": amount,
            "currency": {
                "code": "USD",
                "name": "United States Dollar",
                "symbol": "$",
                "decimals": 2,
            },
        },
        "createdAt": "2025-08-15T14:25:18Z",
    }
    if uma:
        data["destination"] = {"destinationType": "UMA_ADDRESS", "umaAddress": "$r@uma.domain"}
        data["senderUmaAddress"] = "$sender@external.domain"
        data["receiverUmaAddress"] = "$r@uma.domain"
    else:
        data["destination"] = {"destinationType": "ACCOUNT", "accountId": "InternalAccount:1"}
        data["paymentRail"] = "SWIFT"
    if requested is not None:
        data["requestedReceiverCustomerInfoFields"] = [
            {"name": name, "mandatory": mandatory} for name, mandatory in requested.items()
        ]
    return orjson.dumps(
        {
            "id": webhook,
            "type": "INCOMING_PAYMENT.PENDING",
            "timestamp": "2025-08-15T14:32:00Z",
            "data": data,
        }
    )


@contextmanager
def served_app(asgi: Any) -> Iterator[str]:
    """`asgi` served by uvicorn on a free loopback port in a thread; yields its /webhooks URL."""
    import socket

    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(asgi, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:  # startup is a few ms; uvicorn offers no event to wait on
            if not thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            threading.Event().wait(0.005)
        yield f"http://127.0.0.1:{port}/webhooks"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}


def start_cli(
    db: Path, *keys: Path, extra: tuple[str, ...] = ()
) -> tuple[subprocess.Popen[str], str]:
    """`paylens webhooks serve` in its own process; (process, URL) once it printed its URL."""
    args = [
        sys.executable,
        "-m",
        "paylens.cli",
        "webhooks",
        "serve",
        "--db",
        str(db),
        "--port",
        "0",
    ]
    for key in keys:
        args += ["--public-key", str(key)]
    process = subprocess.Popen(
        [*args, *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env()
    )
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if not line:
        process.wait(timeout=30)
        raise RuntimeError(f"serve exited {process.returncode}: {process.stderr.read()}")
    return process, line


#: A receiver process on a slow disk: each commit takes `delay` seconds more before it is made,
#: so an answer sent before its event's commit would be seen by a kill test.
_SLOW_DISK = """
import sys, time
from pathlib import Path
from paylens.webhooks import EventStore
from paylens.webhooks._serve import serve

class SlowDisk(EventStore):
    def append(self, events):
        time.sleep(float(sys.argv[3]))
        return super().append(events)

serve(SlowDisk.beside(sys.argv[1]), public_keys=[Path(sys.argv[2])], port=0,
      ready=lambda url: print(url, flush=True))
"""


def start_slow_disk(db: Path, key: Path, delay: float) -> tuple[subprocess.Popen[str], str]:
    """A receiver process whose commits are `delay` s slower; (process, URL) once ready."""
    process = subprocess.Popen(
        [sys.executable, "-c", _SLOW_DISK, str(db), str(key), str(delay)],
        stdout=subprocess.PIPE,
        text=True,
        env=env(),
    )
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if not line:
        raise RuntimeError(f"the slow-disk receiver exited {process.wait(timeout=30)}")
    return process, line
