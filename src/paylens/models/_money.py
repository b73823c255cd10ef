"""Money on the wire: a currency, and an amount in that currency's smallest unit."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ._base import Count, MinorUnits, WireModel

__all__ = ["Currency", "CurrencyAmount", "format_minor"]


class Currency(WireModel):
    """A currency as the service describes it; `decimals` says how many minor units make one."""

    code: str | None = None
    name: str | None = None
    symbol: str | None = None
    decimals: Count | None = None


class CurrencyAmount(WireModel):
    """An exact amount: `amount` is an int in minor units (cents, satoshis) of `currency`.

    The interface sends `currency` as a `Currency` object; a bare code string is also accepted
    (and written back as it came). Use `currency_code` to read the code either way.
    """

    amount: MinorUnits
    currency: Annotated[Currency | str, Field(union_mode="left_to_right")]

    @property
    def currency_code(self) -> str | None:
        """The currency's code (`USD`, `BTC`, `USDC`), whichever form the wire used."""
        return self.currency if isinstance(self.currency, str) else self.currency.code

    @property
    def decimals(self) -> int | None:
        """Minor-unit digits of the currency when the wire said so, else `None`."""
        return None if isinstance(self.currency, str) else self.currency.decimals


def format_minor(minor: int, decimals: int | None) -> str:
    """`123456, 2` -> `'1,234.56'`: an amount in minor units written in major units, exactly
    (integer arithmetic, no float on the way)."""
    places = 0 if decimals is None or decimals != decimals else int(decimals)
    sign = "-" if minor < 0 else ""
    whole, part = divmod(abs(int(minor)), 10**places)
    return f"{sign}{whole:,}" + (f".{part:0{places}d}" if places else "")
