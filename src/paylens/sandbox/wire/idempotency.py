"""`Idempotency-Key` on the operations the sandbox serves of those whose interface declares
it (`POST /quotes`, `POST /quotes/{quoteId}/execute`; the interface declares it on transfers,
agent quotes, stablecoins and KYC links too, which are not served): "if the same key is sent multiple times, the server will return
the same response as the first request".

- A key is scoped to its operation. Its first successful (2xx) answer is kept, byte for byte,
  for the life of the sandbox; a replay with the same path and body gets that answer again and
  changes nothing.
- A replay whose path or body differs is refused: 400 INVALID_INPUT naming `Idempotency-Key`
  (the interface documents no 409 on `POST /quotes`, and 400 on both operations).
- An error answer is not kept: the client may retry the same key once the cause is fixed.
- Requests without the header are not deduplicated (two quotes are two quotes).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import Any

import orjson

from ..errors import invalid
from ..world.idempotency import KeyReused
from .request import Handler, Request

#: The longest key accepted (keys are opaque; a UUID is the usual choice).
MAX_KEY_LENGTH = 255


def idempotent(operation: str) -> Callable[[Handler], Handler]:
    """The decorated handler with the Idempotency-Key header honoured (as `operation`)."""

    def decorate(handler: Handler) -> Handler:
        return functools.partial(_idempotent, operation, handler)

    return decorate


def _idempotent(operation: str, handler: Handler, r: Request) -> tuple[int, Any]:
    key = r.headers.get("idempotency-key")
    if key is None:
        return handler(r)
    if not key or len(key) > MAX_KEY_LENGTH:
        raise invalid(
            [
                {
                    "field": "Idempotency-Key",
                    "message": f"must be 1 to {MAX_KEY_LENGTH} characters",
                }
            ]
        )
    fingerprint = hashlib.sha256(
        orjson.dumps([r.args, r.body], option=orjson.OPT_SORT_KEYS)
    ).hexdigest()
    try:
        return r.world.idempotency.run(operation, key, fingerprint, lambda: handler(r))
    except KeyReused:
        raise invalid(
            [
                {
                    "field": "Idempotency-Key",
                    "message": "was already used with another request; use a new key",
                }
            ],
            "the idempotency key was used with a different request",
        ) from None
