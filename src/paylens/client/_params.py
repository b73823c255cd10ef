"""Checks and conversions of arguments, done before any request is sent, so a mistake is named
precisely (which argument, what it accepts) instead of costing a round trip."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime
from enum import Enum
from urllib.parse import quote

from paylens._choices import utc_instant
from paylens.errors import InvalidArgumentError

MAX_PAGE_SIZE = 100
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_ID = re.compile(rf"^(?P<type>[A-Za-z]+):{_UUID}$")


def record_id(argument: str, value: object, *types: str) -> str:
    """A `<Type>:<uuid>` identifier of one of `types`, quoted for use as a path segment."""
    if not isinstance(value, str):
        raise InvalidArgumentError(argument, f"expected an id string, got {type(value).__name__}")
    match = _ID.match(value)
    if not match or (types and match["type"] not in types):
        forms = " or ".join(f"'{t}:<uuid>'" for t in types) or "'<Type>:<uuid>'"
        raise InvalidArgumentError(argument, f"{value!r} is not an id of the form {forms}")
    return quote(value, safe=":")


def page_size(value: object) -> int:
    """A page size: an int from 1 to 100."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_PAGE_SIZE:
        raise InvalidArgumentError(
            "limit", f"must be an integer from 1 to {MAX_PAGE_SIZE}, got {value!r}"
        )
    return value


def one_of(argument: str, value: object, allowed: Iterable[str]) -> str:
    """A value from a closed set (enum members or their strings)."""
    text = value.value if isinstance(value, Enum) else value
    options = sorted(str(a) for a in allowed)
    if not isinstance(text, str) or text not in options:
        raise InvalidArgumentError(argument, f"{value!r} is not one of {', '.join(options)}")
    return text


def text(argument: str, value: object) -> str:
    """A non-empty string."""
    if not isinstance(value, str) or not value:
        raise InvalidArgumentError(argument, f"expected a non-empty string, got {value!r}")
    return value


def timestamp(argument: str, value: object, *, end_of_day: bool = False) -> str:
    """An instant for the wire, as ISO 8601 UTC with `Z`.

    A `date` is a UTC day: its first instant, or with `end_of_day` its last (so an inclusive
    `end_date=date(2025, 1, 31)` covers the whole of the 31st). A datetime must carry a zone;
    a string is read as ISO 8601 under the same rules, and keeps the fraction digits past the
    microsecond that a `datetime` cannot hold (a service may write nanoseconds).
    """
    finer = ""
    if isinstance(value, str) and (digits := _FINER.search(value)):
        finer = digits.group(1).rstrip("0")
    instant = utc_instant(argument, value, end_of_day=end_of_day)
    return format_instant(instant, finer)


#: The fraction digits of an ISO 8601 time past the sixth (`datetime` drops them).
_FINER = re.compile(r"T\d\d:\d\d:\d\d[.,]\d{6}(\d+)")


def format_instant(instant: datetime, finer: str = "") -> str:
    """ISO 8601 in UTC with a `Z`, microseconds only when present (`finer`: digits past the
    microsecond)."""
    spec = "microseconds" if instant.microsecond or finer else "seconds"
    return instant.astimezone(UTC).replace(tzinfo=None).isoformat(timespec=spec) + finer + "Z"


def query(**values: str | int | None) -> dict[str, str]:
    """Query parameters with the unset ones dropped."""
    return {key: str(value) for key, value in values.items() if value is not None}
