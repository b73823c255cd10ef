"""Arguments that name one of a set of values (an enum member, a currency, a column): the one
place where readers and helpers check them, so a misspelling is refused, never matched by no row.

A value is matched case-insensitively to the accepted one (the interface's enum values are upper
case: `"usd"` is `"USD"`, `"failed"` is `"FAILED"`); anything else raises `InvalidArgumentError`
naming the accepted values, with the closest first ("did you mean ...").
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from datetime import UTC, date, datetime, time, timedelta

from paylens.errors import InvalidArgumentError

__all__ = ["did_you_mean", "one_of", "some_of", "utc_instant"]


def did_you_mean(word: str, accepted: Iterable[str]) -> str:
    """`" (did you mean 'FAILED'?)"` for the accepted values closest to `word`, or `""`."""
    names = list(accepted)
    by_upper = {n.upper(): n for n in names}
    close = difflib.get_close_matches(word.upper(), list(by_upper), n=3, cutoff=0.6)
    close += [n for u, n in by_upper.items() if len(word) > 2 and word.upper() in u]
    close = list(dict.fromkeys(by_upper.get(c, c) for c in close))[:3]
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


def _listed(accepted: Sequence[str]) -> str:
    shown = ", ".join(accepted[:30])
    return shown + (f", … ({len(accepted)} in all)" if len(accepted) > 30 else "")


def one_of(argument: str, value: object, accepted: Iterable[str], what: str = "") -> str:
    """`value` spelled as the accepted value it names (case aside), else `InvalidArgumentError`
    naming the accepted values (`what` says what they are, e.g. "the currencies it holds")."""
    names = sorted({str(a) for a in accepted})
    if isinstance(value, str):
        for name in names:
            if value.strip().upper() == name.upper():
                return name
    among = f"{what}: " if what else "one of "
    if not names:
        raise InvalidArgumentError(argument, f"{value!r} matches nothing: {what or 'none'}")
    hint = did_you_mean(value, names) if isinstance(value, str) else ""
    raise InvalidArgumentError(
        argument, f"{value!r} is not known{hint}; give {among}{_listed(names)}"
    )


def some_of(
    argument: str, value: str | Sequence[str], accepted: Iterable[str], what: str = ""
) -> list[str]:
    """One value or a non-empty list of them, each checked by `one_of`."""
    names = list(accepted)
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, Sequence) or isinstance(values, bytes) or not values:
        raise InvalidArgumentError(
            argument, f"give a value or a non-empty list of them, from {_listed(sorted(names))}"
        )
    return list(dict.fromkeys(one_of(argument, v, names, what) for v in values))


#: How an instant may be written, said by every refusal of one.
ACCEPTED_INSTANTS = (
    "give 'YYYY-MM-DD' (e.g. '2025-09-01', a whole UTC day), a date-time with its zone"
    " ('2025-09-01T00:00:00Z'), a datetime.date or an aware datetime"
)


def utc_instant(argument: str, value: object, *, end_of_day: bool = False) -> datetime:
    """An aware UTC datetime from a `date` (a UTC day: its first instant, or with `end_of_day`
    its last), an aware `datetime`, or their ISO 8601 text (`'2025-09-01'`,
    `'2025-09-01T12:00:00Z'`); anything else (`'2025/09/01'`, `'Sept 2025'`, a datetime with
    no zone) raises `InvalidArgumentError` naming the accepted forms."""
    if isinstance(value, str):
        try:
            value = (
                date.fromisoformat(value)
                if len(value) == 10
                else datetime.fromisoformat(value.replace("Z", "+00:00"))
            )
        except ValueError:
            raise InvalidArgumentError(
                argument, f"{value!r} is not a date: {ACCEPTED_INSTANTS}"
            ) from None
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise InvalidArgumentError(
                argument, f"{value!r} has no time zone: {ACCEPTED_INSTANTS} (e.g. tzinfo=UTC)"
            )
        return value.astimezone(UTC)
    if isinstance(value, date):
        first = datetime.combine(value, time(0), tzinfo=UTC)
        return first + timedelta(days=1, microseconds=-1) if end_of_day else first
    raise InvalidArgumentError(argument, f"{value!r} is not a date: {ACCEPTED_INSTANTS}")
