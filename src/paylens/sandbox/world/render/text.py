"""Column formatting for the renderer: JSON values, numbers, UUIDs, hex and ISO timestamps
as byte strings, a column at a time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np
import orjson

from ..entities import iso
from .rows import REFERENCE_MASK


class EncodedCache(dict[int, bytes]):
    """JSON texts by entity row, each made by `make` the first time it is asked for."""

    def __init__(self, make: Callable[[int], bytes]) -> None:
        super().__init__()
        self.make = make

    def __missing__(self, key: int) -> bytes:
        got = self[key] = self.make(key)
        return got

    def texts(self, keys: np.ndarray) -> list[bytes]:
        return list(map(self.__getitem__, keys.tolist()))


def format_rows(template: bytes, *columns: Any) -> list[bytes]:
    """`template % row` for the rows of equally long columns."""
    return list(map(template.__mod__, zip(*columns, strict=True)))


def byte_table(texts: list[bytes | None], size: int = 256) -> np.ndarray:
    """An object array of `texts` by code, b"" past them (NONE8 and other absent codes)."""
    out = np.full(size, b"", dtype=object)
    out[: len(texts)] = texts
    return out


def json_bytes(value: Any) -> bytes:
    """orjson's text of a value, in bytes of its own size: orjson's keeps its 4 KiB buffer,
    too much for what is kept."""
    return bytes(memoryview(orjson.dumps(value)))


def number_texts(*columns: np.ndarray) -> list[list[bytes]]:
    """orjson's text of each value (an int, a float in its shortest round-trip form, or None)
    of equally long columns, in one call."""
    n = len(columns[0])
    if not n:
        return [[] for _ in columns]
    values: list[Any] = []
    for column in columns:  # each column keeps its type: ints stay ints
        values += column.tolist()
    texts = orjson.dumps(values)[1:-1].split(b",")
    return [texts[k * n : (k + 1) * n] for k in range(len(columns))]


DIGIT_TEXT = np.array([b"%d" % k for k in range(10)], dtype=object)
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
_UPPER_HEX = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)
_UUID_DIGITS = np.array([k for k in range(36) if k not in (8, 13, 18, 23)])


def _hex_digits(values: np.ndarray, digits: np.ndarray) -> np.ndarray:
    """The hex digits (as ASCII codes, one row per value) of uint64 values, 16 per value."""
    octets = values.astype(">u8").view(np.uint8).reshape(len(values), -1)
    nibbles = np.empty((len(values), 2 * octets.shape[1]), dtype=np.uint8)
    nibbles[:, 0::2] = octets >> 4
    nibbles[:, 1::2] = octets & 15
    return digits[nibbles]


def uuid_bytes(hi: np.ndarray, lo: np.ndarray) -> list[bytes]:
    """Canonical texts of UUIDs given as high and low halves (as `uuid_text`, vectorised)."""
    out = np.full((len(hi), 36), ord("-"), dtype=np.uint8)
    out[:, _UUID_DIGITS] = _hex_digits(np.stack([hi, lo], axis=1), _HEX)
    return out.view("S36").ravel().tolist()


def token_hex(lo: np.ndarray) -> list[bytes]:
    """The 10 hex digits of a card transaction's `issuerTransactionToken` (low 40 bits)."""
    digits = _hex_digits(lo & np.uint64(0xFF_FFFF_FFFF), _HEX)[:, 6:]
    return np.ascontiguousarray(digits).view("S10").ravel().tolist()


def reference_hex(hi: np.ndarray) -> list[bytes]:
    """The 16 upper-case hex digits after "SBX-" of the rows' references."""
    masked = hi ^ np.uint64(REFERENCE_MASK)
    return np.ascontiguousarray(_hex_digits(masked, _UPPER_HEX)).view("S16").ravel().tolist()


_DAY_ZERO = -25_567  # 1900-01-01, in days since 1970-01-01
_DAYS = 109_574  # through 2199-12-31


def _digits(values: np.ndarray, width: int) -> np.ndarray:
    """Decimal digits (ASCII codes, zero-padded to `width`) of non-negative ints, one row each."""
    return (values[:, None] // 10 ** np.arange(width - 1, -1, -1) % 10 + 48).astype(np.uint8)


def _date_table() -> np.ndarray:
    """ "YYYY-MM-DD" (ASCII codes) of the days from _DAY_ZERO on: the civil date of each day
    number by H. Hinnant's algorithm."""
    z = np.arange(_DAY_ZERO, _DAY_ZERO + _DAYS, dtype=np.int64) + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    month = np.where(mp < 10, mp + 3, mp - 9)
    year = yoe + era * 400 + (month <= 2)
    out = np.full((_DAYS, 10), ord("-"), dtype=np.uint8)
    out[:, 0:4] = _digits(year, 4)
    out[:, 5:7] = _digits(month, 2)
    out[:, 8:10] = _digits(doy - (153 * mp + 2) // 5 + 1, 2)
    return out


def _clock_table() -> np.ndarray:
    """ "HH:MM:SS" (ASCII codes) of each second of a day."""
    second = np.arange(86_400)
    out = np.full((86_400, 8), ord(":"), dtype=np.uint8)
    out[:, 0:2] = _digits(second // 3600, 2)
    out[:, 3:5] = _digits(second // 60 % 60, 2)
    out[:, 6:8] = _digits(second % 60, 2)
    return out


_DATE, _CLOCK, _MILLIS = _date_table(), _clock_table(), _digits(np.arange(1000), 3)


def iso_texts(us: np.ndarray) -> list[bytes]:
    """RFC 3339 UTC timestamps (milliseconds, "Z") of microsecond epoch times, exactly as `iso`
    writes them, from tables of dates and times of day."""
    days, ms_of_day = np.divmod(us // 1000, 86_400_000)
    days -= _DAY_ZERO
    if len(days) and (days.min() < 0 or days.max() >= _DAYS):
        return [t.encode() for t in iso(us)]
    seconds, millis = np.divmod(ms_of_day, 1000)
    out = np.empty((len(us), 24), dtype=np.uint8)
    out[:, 0:10] = _DATE[days]
    out[:, 10] = ord("T")
    out[:, 11:19] = _CLOCK[seconds]
    out[:, 19] = ord(".")
    out[:, 20:23] = _MILLIS[millis]
    out[:, 23] = ord("Z")
    return out.view("S24").ravel().tolist()


def iso_stamps(
    wanted: dict[str, tuple[np.ndarray, np.ndarray | None]],
) -> dict[str, list[bytes | None]]:
    """Named lists of the timestamps `us` where `shown` (everywhere when None; None elsewhere),
    formatted at once."""
    picks = {
        name: None if shown is None else np.flatnonzero(shown)
        for name, (_, shown) in wanted.items()
    }
    texts = iso_texts(
        np.concatenate(
            [us if picks[name] is None else us[picks[name]] for name, (us, _) in wanted.items()]
        )
    )
    out: dict[str, list[bytes | None]] = {}
    first = 0
    for name, (us, _) in wanted.items():
        pick = picks[name]
        if pick is None:
            out[name] = cast("list[bytes | None]", texts[first : first + len(us)])
            first += len(us)
        else:
            column = np.full(len(us), None, dtype=object)
            column[pick] = texts[first : first + len(pick)]
            first += len(pick)
            out[name] = column.tolist()
    return out
