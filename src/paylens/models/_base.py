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

from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, ClassVar, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
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

    # Fields with a default other than None: the discriminators (`type`, `sourceType`, ...).
    # `to_wire()` sends them even when not passed, so a variant built in Python says which it is.
    _always_sent: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls._always_sent = frozenset(
            name
            for name, field in cls.model_fields.items()
            if not field.is_required() and field.default is not None
        )

    def __init__(self, /, **data: Any) -> None:
        super().__init__(**data)
        if self._always_sent:
            self.__pydantic_fields_set__.update(self._always_sent)

    # Only Python construction needs the hook above; this marker (the one pydantic's own
    # RootModel uses) keeps parsing in Rust instead of calling `__init__` for every nested model.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    def to_wire(self) -> dict[str, Any]:
        """Return the JSON-ready wire form: camelCase names, unset fields left out, times in UTC."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


E = TypeVar("E")

OpenEnum = Annotated[E | str, Field(union_mode="left_to_right")]
"""`OpenEnum[SomeStrEnum]`: the member for a known value, the plain `str` for an unknown one."""

MinorUnits = Annotated[int, Strict()]
"""Money in the currency's smallest unit (cents, satoshis). Never a float."""


def whole_number(value: object) -> object:
    """A JSON number holding a whole amount as an int (`30.0` is 30); anything else as it is.
    Below 2**53 a float holds every whole number exactly; past it, `30.0` may be a rounding,
    so it is left for the strict check to refuse."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2.0**53:
        return int(value)
    return value


MinorNumber = Annotated[int, BeforeValidator(whole_number), Strict()]
"""Money the interface types as a JSON number of format int64 (a variable fee amount, "the
sending amount times the rate"): a whole number, spelt `30` or `30.0`; a fraction is refused
(no smallest unit has parts), never rounded."""

Rate = Annotated[float, Strict()]
"""A ratio, multiplier or percentage; a JSON integer is accepted and becomes a float."""

Count = Annotated[int, Strict()]
"""A whole number that is not money: counts, seconds, decimals, HTTP statuses."""


_NO_OFFSET = timedelta(0)


def _as_utc(value: datetime) -> datetime:
    # A `Z` or `+00:00` time is kept with the parser's own UTC tzinfo (equal to `datetime.UTC`,
    # read as UTC by pandas): replacing it would cost more than the rest of the timestamp.
    zone = value.tzinfo
    if zone is None:  # the interface always sends an offset; a bare time is read as UTC
        return value.replace(tzinfo=UTC)
    if zone is UTC or zone.utcoffset(None) == _NO_OFFSET:
        return value
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


def _fallback(kind: str) -> str:
    return FALLBACK_TAG


def tag_by(
    wire_field: str,
    tags: Mapping[str, str] | Iterable[str],
    tag_of_new_kind: Callable[[str], str] = _fallback,
) -> Discriminator:
    """Discriminator choosing a union variant by `wire_field`.

    `tags` maps wire values to variant tags (an iterable: each value is its own tag). A value not
    in `tags` gets `tag_of_new_kind(value)`, by default `FALLBACK_TAG`; a missing one, always.
    """
    tag_of_value = {
        str(k): str(v)
        for k, v in (tags.items() if isinstance(tags, Mapping) else zip(tags, tags, strict=True))
    }
    attribute = to_snake(wire_field)

    def tag(value: Any) -> str:
        if isinstance(value, dict):
            kind = value.get(wire_field, value.get(attribute))
        else:
            kind = getattr(value, attribute, None)
        if not isinstance(kind, str):
            return FALLBACK_TAG
        known = tag_of_value.get(kind)
        return known if known is not None else tag_of_new_kind(kind)

    return Discriminator(tag)
