"""Checks of request bodies that several routes share: every bad field of a request is reported
at once, as 400 INVALID_INPUT with one FieldError per field in `details.errors`."""

from __future__ import annotations

from typing import Any

from ..errors import invalid
from ..wire.request import Request


def body_object(request: Request) -> dict[str, Any]:
    if request.body is None:
        return {}
    if not isinstance(request.body, dict):
        raise invalid([{"field": "body", "message": "must be a JSON object"}])
    return request.body


def require_texts(
    obj: Any, names: tuple[str, ...], prefix: str, errors: list[dict[str, str]]
) -> None:
    """Each of `names` must be a non-empty string of the object `obj` (named `prefix`)."""
    if not isinstance(obj, dict):
        errors.append({"field": prefix.rstrip("."), "message": "is required and must be an object"})
        return
    for name in names:
        if not isinstance(obj.get(name), str) or not obj[name]:
            errors.append({"field": prefix + name, "message": "is required and must be a string"})


def raise_if_invalid(errors: list[dict[str, str]]) -> None:
    if errors:
        raise invalid(errors)
