"""The simulated service's error answers: `ServiceError` (status, code, message, details) and
`invalid`, the 400 INVALID_INPUT with one FieldError per bad field. The wire layer renders them
as the interface's error body."""

from __future__ import annotations

from typing import Any


class ServiceError(Exception):
    """An error answer of the simulated service; the wire layer renders it as the spec's error body."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.headers = headers


def invalid(errors: list[dict[str, str]], message: str = "invalid parameters") -> ServiceError:
    """400 INVALID_INPUT with one FieldError per bad field."""
    return ServiceError(400, "INVALID_INPUT", message, {"errors": errors})


def unauthorized(code: str, message: str, reason: str | None = None) -> ServiceError:
    """401 `code`, with `details.reason` when given (the wallets' signed writes)."""
    return ServiceError(401, code, message, {"reason": reason} if reason else None)


def signature_refused(reason: str, message: str) -> ServiceError:
    """401 INVALID_SIGNATURE for `reason`: a signed write or a credential proof refused."""
    return unauthorized("INVALID_SIGNATURE", message, reason)
