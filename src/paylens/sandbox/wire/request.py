"""What a route handler reads: the request, its query parameters, and the checks of values
every route shares (int64 integers, ISO 8601 instants)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..clock import to_us
from ..errors import invalid

if TYPE_CHECKING:
    from ..world.world import World

#: What a currency code looks like (ISO 4217 and the service's crypto codes: USD, BTC, USDC).
_CURRENCY_CODE = re.compile(r"[A-Z]{3,4}")
#: Integers of the interface are int64: larger ones are refused, never stored or computed with.
INT64_MAX = 2**63 - 1


@dataclass
class Request:
    world: World
    args: list[str]
    params: dict[str, list[str]]
    body: Any
    headers: Mapping[str, str]


Handler = Callable[[Request], tuple[int, Any]]


class Query:
    """Reads query parameters, collecting one FieldError per bad parameter."""

    def __init__(self, params: dict[str, list[str]]) -> None:
        self.params = params
        self.errors: list[dict[str, str]] = []

    def fail(self, name: str, message: str) -> None:
        self.errors.append({"field": name, "message": message})

    def text(self, name: str) -> str | None:
        """A scalar parameter; given more than once it is refused (never cut to its first
        value: a client sending a list would read a part of the answer as the whole)."""
        values = self.params.get(name)
        if values and len(values) > 1:
            self.fail(name, "is a single value and was given more than once")
            return None
        return values[0] if values else None

    def texts(self, name: str) -> list[str]:
        """An array parameter as official clients send it: repeated (`a=X&a=Y`), comma-joined
        (`a=X,Y`), or both; empty items are dropped."""
        return [item for value in self.params.get(name, ()) for item in value.split(",") if item]

    def currency(self, name: str) -> str | None:
        """A currency code filter: an unknown code matches nothing, but a value not shaped like
        a code (`USD`, `USDC`) is refused."""
        value = self.text(name)
        if value is not None and not _CURRENCY_CODE.fullmatch(value):
            self.fail(name, "must be a currency code, e.g. USD")
            return None
        return value

    def currencies(self, name: str) -> list[str]:
        """An array of currency codes (repeated or comma-joined), each shaped like a code."""
        values = self.texts(name)
        if not all(_CURRENCY_CODE.fullmatch(v) for v in values):
            self.fail(name, "must be currency codes, e.g. USD")
            return []
        return values

    def choice(self, name: str, allowed: tuple[str, ...]) -> str | None:
        value = self.text(name)
        if value is not None and value not in allowed:
            self.fail(name, f"must be one of {', '.join(allowed)}")
            return None
        return value

    def time(self, name: str) -> int | None:
        value = self.text(name)
        if value is None:
            return None
        at = parse_time(value)
        if at is None:
            self.fail(
                name, "must be an ISO 8601 date-time with a time zone, e.g. 2025-10-01T00:00:00Z"
            )
        return at

    def integer(self, name: str, default: int, low: int, high: int = INT64_MAX) -> int:
        value = self.text(name)
        if value is None:
            return default
        try:
            number = int(value)
        except ValueError:
            number = None
        if number is None or not is_int(number, low, high):
            self.fail(name, f"must be an integer from {low} to {high}")
            return default
        return number

    def boolean(self, name: str) -> bool | None:
        value = self.choice(name, ("true", "false"))
        return None if value is None else value == "true"

    def check(self) -> None:
        if self.errors:
            raise invalid(self.errors)


def is_int(value: Any, low: int = 0, high: int = INT64_MAX) -> bool:
    """True for a JSON integer (not a boolean) in [low, high]."""
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def parse_time(value: str) -> int | None:
    """Microseconds since the epoch of an ISO 8601 date-time with a zone (a '+' that arrived as
    a space in an unencoded query is read as '+')."""
    text = value.strip().replace(" ", "+")
    if "T" not in text and "t" not in text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return None if moment.tzinfo is None else to_us(moment)


def optional_text(body: dict[str, Any], name: str, errors: list[dict[str, str]]) -> str | None:
    """An optional string field: absent is None, but a present one (null included) must be text."""
    value = body.get(name)
    if name in body and not isinstance(value, str):
        errors.append({"field": name, "message": "must be a string"})
        return None
    return value
