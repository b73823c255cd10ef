"""The answers the sandbox keeps by idempotency key: world state, read and written by the wire
layer's `Idempotency-Key` handling (`wire.idempotency`, where the semantics are stated)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import orjson


class IdempotencyKeys:
    """First answers by (operation, key), with the fingerprint of the request that made them."""

    def __init__(self) -> None:
        self._answers: dict[tuple[str, str], tuple[str, int, bytes]] = {}
        self._lock = threading.Lock()

    def run(
        self, operation: str, key: str, fingerprint: str, answer: Callable[[], tuple[int, Any]]
    ) -> tuple[int, Any]:
        with self._lock:
            kept = self._answers.get((operation, key))
            if kept is None:
                status, value = answer()
                body = value if isinstance(value, bytes) else orjson.dumps(value)
                if 200 <= status < 300:
                    self._answers[(operation, key)] = (fingerprint, status, body)
                return status, body
        if kept[0] != fingerprint:
            raise KeyReused(key)
        return kept[1], kept[2]


class KeyReused(Exception):
    """An idempotency key replayed with another request than the one it was first used with."""
