"""Building blocks shared by every wire model: the base class and the field types.

- `WireModel`: snake_case attributes, camelCase wire names, unknown fields kept, `to_wire()`.
- `OpenEnum[E]`: a known value becomes the `StrEnum` member, an unknown one stays a plain `str`.
- `MinorUnits`: money, a strict `int` in the currency's smallest unit (floats and bools rejected).
- `Rate`: a float ratio or multiplier (ints accepted, bools and strings rejected).
- `Count`: a strict `int` that is not money (counts, seconds, decimals).
- `UtcDatetime`: parses to a tz-aware UTC `datetime`; goes back on the wire as ISO 8601 with `Z`.
- `tag_by`: the callable discriminator of the open unions, with a fallback tag for unknown kinds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PlainSerializer,
    Strict,
)
from pydantic.alias_generators import to_camel, to_snake

__all__ = [
    "FALLBACK_TAG",
    "Count",
    "MinorUnits",
    "OpenEnum",
    "Rate",
    "UtcDatetime",
    "WireModel",
    "tag_by",
]


class WireModel(BaseModel):
    """Base of every model: snake_case in Python, the interface's camelCase on the wire.

    Unknown fields are kept (`model_extra`) and written back by `to_wire()`, so data from a newer
    service version survives a read-modify-write round trip.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
    )

    # Fields whose defaults are sent even when the caller did not pass them: the discriminators,
    # so that a variant built in Python still says on the wire which variant it is.
    _always_sent: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, /, **data: Any) -> None:
        super().__init__(**data)
        if self._always_sent:
            self.__pydantic_fields_set__.update(self._always_sent)

    def to_wire(self) -> dict[str, Any]:
        """Return the JSON-ready wire form: camelCase names, unset fields left out, times in UTC."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


E = TypeVar("E")

OpenEnum = Annotated[E | str, Field(union_mode="left_to_right")]
"""`OpenEnum[SomeStrEnum]`: the member for a known value, the plain `str` for an unknown one."""

MinorUnits = Annotated[int, Strict()]
"""Money in the currency's smallest unit (cents, satoshis). Never a float."""

Rate = Annotated[float, Strict()]
"""A ratio, multiplier or percentage; a JSON integer is accepted and becomes a float."""

Count = Annotated[int, Strict()]
"""A whole number that is not money: counts, seconds, decimals, HTTP statuses."""


def _as_utc(value: datetime) -> datetime:
    if value.tzinfo is UTC:
        return value
    if value.tzinfo is None:  # the interface always sends an offset; a bare time is read as UTC
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def _wire_timestamp(value: datetime) -> str:
    value = _as_utc(value)
    if value.microsecond == 0:
        timespec = "seconds"
    elif value.microsecond % 1000 == 0:
        timespec = "milliseconds"
    else:
        timespec = "microseconds"
    return value.isoformat(timespec=timespec).replace("+00:00", "Z")


UtcDatetime = Annotated[
    datetime,
    AfterValidator(_as_utc),
    PlainSerializer(_wire_timestamp, return_type=str, when_used="json"),
]
"""A tz-aware UTC timestamp; on the wire `2025-08-15T14:25:18Z` (milli/microseconds when set)."""


FALLBACK_TAG = "unknown"
"""Tag of the catch-all variant of an open union (a kind this version does not know)."""


def tag_by(wire_field: str, tags: Mapping[str, str] | Iterable[str]) -> Discriminator:
    """Discriminator choosing a union variant by `wire_field`, or `FALLBACK_TAG` for new kinds.

    `tags` maps wire values to variant tags; an iterable means each value is its own tag.
    """
    tag_of_value = dict(tags) if isinstance(tags, Mapping) else {value: value for value in tags}
    attribute = to_snake(wire_field)

    def tag(value: Any) -> str:
        if isinstance(value, dict):
            kind = value.get(wire_field, value.get(attribute))
        else:
            kind = getattr(value, attribute, None)
        return tag_of_value.get(kind, FALLBACK_TAG) if isinstance(kind, str) else FALLBACK_TAG

    return Discriminator(tag)
