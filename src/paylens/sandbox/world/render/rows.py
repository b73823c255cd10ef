"""Rendered rows as the wire layer sends them (`WireRows`: pre-encoded JSON that reads as
dicts), and the ids derived from a transaction's UUID: its reference and its quote's id."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, SupportsIndex

import numpy as np
import orjson

from ...currencies import CHANNELS
from ...generate.schema import CARD, INCOMING, OUTGOING, STATUS_CODE

REFERENCE_MASK = 0x5EED_CAFE_F00D_D00D
_QUOTE_MASK_HI = 0x3C5A_96E1_7D2B_0F48 & 0xFFFF_FFFF_FFFF_0FFF  # keeps the version nibble
_QUOTE_MASK_LO = 0x2E4D_6A8B_1C3F_5E70 & 0x3FFF_FFFF_FFFF_FFFF  # keeps the variant bits
#: Payouts to external crypto wallets report `onChainTransaction` instead of a reference.
ON_CHAIN = {
    CHANNELS.index("SPARK"): "SPARK",
    CHANNELS.index("SOLANA"): "SOLANA",
    CHANNELS.index("BASE"): "BASE",
}


_ON_CHAIN_CHANNELS = np.array(sorted(ON_CHAIN))
ON_CHAIN_TABLE = np.isin(np.arange(256), _ON_CHAIN_CHANNELS)


def hi_of_reference(reference: str) -> int | None:
    """The UUID high half of the transaction whose reference this is: a reference is "SBX-" and
    16 upper-case hex digits of that half masked (see `reference_hex`)."""
    if len(reference) != 20 or not reference.startswith("SBX-"):
        return None
    try:
        return int(reference[4:], 16) ^ REFERENCE_MASK
    except ValueError:
        return None


def quote_uuid(hi: Any, lo: Any) -> tuple[Any, Any]:
    """The quote's UUID halves from its transaction's, and back (an involution); ints or
    uint64 arrays."""
    if isinstance(hi, np.ndarray):
        return hi ^ np.uint64(_QUOTE_MASK_HI), lo ^ np.uint64(_QUOTE_MASK_LO)
    return hi ^ _QUOTE_MASK_HI, lo ^ _QUOTE_MASK_LO


def shows_reference(kind: np.ndarray, status: np.ndarray, channel: np.ndarray) -> np.ndarray:
    """Which rows show `reconciliationInstructions.reference` (what the reference filter sees)."""
    return np.asarray(
        (kind != CARD)
        & ~((kind == INCOMING) & (status == STATUS_CODE["CREATED"]))
        & ~((kind == OUTGOING) & np.isin(channel, _ON_CHAIN_CHANNELS))
    )


class WireRows(list):  # type: ignore[type-arg]
    """Transactions rendered to JSON text, as the list a page's `data` is.

    It holds one `orjson.Fragment` per row, which the wire layer's `orjson.dumps` copies as it
    is: encoding a page costs a memcpy, not a walk over dicts. Python code that reads the rows
    instead (tests calling `dispatch` directly, the corrupt-record fault) sees them as dicts:
    its first access decodes them in place, and from then on this is a plain list of dicts.
    """

    _texts: list[bytes] | None = None

    @classmethod
    def of(cls, texts: list[bytes]) -> WireRows:
        rows = cls(map(orjson.Fragment, texts))
        rows._texts = texts
        return rows

    def decoded(self) -> WireRows:
        if self._texts is not None:
            list.__setitem__(self, slice(None), decode(self._texts))
            self._texts = None
        return self

    def __iter__(self) -> Iterator[Any]:
        return list.__iter__(self.decoded())

    def __reversed__(self) -> Iterator[Any]:
        return list.__reversed__(self.decoded())

    def __getitem__(self, index: Any) -> Any:
        return list.__getitem__(self.decoded(), index)

    def __contains__(self, item: object) -> bool:
        return list.__contains__(self.decoded(), item)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, WireRows):
            other.decoded()
        return list.__eq__(self.decoded(), other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None

    def __add__(self, other: Any) -> Any:
        return list(self) + list(other)

    def __radd__(self, other: Any) -> Any:
        return list(other) + list(self)

    def __repr__(self) -> str:
        return list.__repr__(self.decoded())

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        return (list, (list(self),))

    def copy(self) -> list[Any]:
        return list(self)

    def index(self, *args: Any) -> int:
        return list.index(self.decoded(), *args)

    def count(self, value: Any) -> int:
        return list.count(self.decoded(), value)


def decode(texts: list[bytes]) -> list[dict[str, Any]]:
    """JSON texts of records as their values, in one orjson call."""
    return orjson.loads(b"[" + b",".join(texts) + b"]") if texts else []
