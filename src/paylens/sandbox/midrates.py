"""The sandbox's mid-market reference rates: they move with its clock, and are served as a daily
time series, so an analysis can measure the FX margin of sandbox transfers without bringing its
own rates.

A rate is a daily fixing: one mid rate per corridor and UTC day, the same for every instant of
that day. Each currency's USD price moves around its reference price (`currencies`) by seeded
smooth noise, a sum of sines of a few periods with phases drawn from the seed, so the rate of a
day depends on the seed and the day alone (no state carried from an earlier day):

    log(usd_c(day) / usd_c)  = sum_k a_k * sin(2 pi day / P_k + phase_{seed, c, k})
    mid(S, R, day)           = usd_R(day) / usd_S(day)   S major units per one R major unit

with (P_k, a_k) in `WAVES`: a currency stays within exp(+-RATE_BAND) of its reference price and a
corridor within exp(+-2 RATE_BAND) (+-5.1 %) of its reference mid rate; a day moves a corridor by
up to about 1.7 % (2 sum 2 pi a_k / P_k). USD and USDC do not move (the numeraire and its peg).

Quotes, generated transactions (at their creation's day) and `GET /exchange-rates` trade at
these rates; `mid_rate_series` gives them in a market-data feed's shape (`date`,
`sent_currency`, `received_currency`, `mid_rate`, the interface's direction for `exchangeRate`),
which `paylens.analysis` accepts as `reference_rates`.
"""

from __future__ import annotations

import functools
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from .currencies import CURRENCY_CODES, CURRENCY_INDEX, USD_PRICE

if TYPE_CHECKING:
    import pandas as pd

#: (period in days, amplitude of the log USD price) of each wave of a currency's move.
WAVES: tuple[tuple[float, float], ...] = ((6.1, 0.004), (19.0, 0.008), (53.0, 0.013))
#: The largest move of a currency's log USD price from its reference (the waves' amplitudes).
RATE_BAND = sum(a for _, a in WAVES)
_PERIODS = np.array([p for p, _ in WAVES])
_AMPLITUDES = np.array([a for _, a in WAVES])
_UNMOVED = [CURRENCY_INDEX["USD"], CURRENCY_INDEX["USDC"]]
_DAY_US = 86_400_000_000


@functools.lru_cache(maxsize=16)
def _phases(seed: int) -> np.ndarray:
    """Phases of the waves, (currency, wave), drawn from the seed alone."""
    rng = np.random.default_rng([seed % 2**64, 0x6D1D])
    return rng.uniform(0.0, 2 * np.pi, (len(USD_PRICE), len(WAVES)))


def usd_prices(seed: int, day: Any, currency: Any) -> Any:
    """USD per one major unit of `currency` (index, or array) on UTC `day` (days since the epoch)."""
    day = np.asarray(day, dtype=np.float64)[..., None]
    currency = np.asarray(currency)
    waves = _AMPLITUDES * np.sin(2 * np.pi * day / _PERIODS + _phases(seed)[currency])
    moved = np.where(np.isin(currency, _UNMOVED), 0.0, waves.sum(axis=-1))
    return USD_PRICE[currency] * np.exp(moved)


def mid_rates(seed: int, at_us: Any, sending: Any, receiving: Any) -> Any:
    """The mid rate at instants `at_us` (µs since the epoch) of corridors (sending, receiving)
    given as currency indexes: sending major units per one receiving major unit (1.0 where they
    are the same currency), elementwise over arrays."""
    day = np.asarray(at_us, dtype=np.int64) // _DAY_US
    sending, receiving = np.asarray(sending), np.asarray(receiving)
    rate = usd_prices(seed, day, receiving) / usd_prices(seed, day, sending)
    return np.where(sending == receiving, 1.0, rate)


def mid_rate_series(
    start: date | datetime | str, end: date | datetime | str, *, seed: int = 0
) -> pd.DataFrame:
    """One row per UTC day in [start's day, end's day] and cross-currency corridor: the mid rates
    of the sandbox of `seed` (`Sandbox.reference_rates()` passes its own)."""
    import pandas as pd  # only when asked: the sandbox itself never needs pandas

    days = pd.date_range(pd.Timestamp(start).normalize(), pd.Timestamp(end).normalize(), freq="D")
    n = len(CURRENCY_CODES)
    sent, received = (a.ravel() for a in np.indices((n, n)))
    cross = sent != received
    sent, received = sent[cross], received[cross]
    columns = ["date", "sent_currency", "received_currency", "mid_rate"]
    if days.empty:
        frame = pd.DataFrame([], columns=columns)
    else:
        epoch_days = (days.tz_localize(None) - pd.Timestamp(0)).days.to_numpy()
        day = np.repeat(epoch_days, len(sent))
        codes = np.array(CURRENCY_CODES, dtype=object)
        # day by day, every corridor in the same order (columns built whole, not row by row)
        frame = pd.DataFrame(
            {
                "date": np.repeat(np.array([d.date() for d in days], dtype=object), len(sent)),
                "sent_currency": np.tile(codes[sent], len(days)),
                "received_currency": np.tile(codes[received], len(days)),
                "mid_rate": mid_rates(
                    seed, day * _DAY_US, np.tile(sent, len(days)), np.tile(received, len(days))
                ).astype(float),
            }
        )
    frame.attrs["source"] = "SANDBOX DATA: reference mid rates of paylens' sandbox"
    return frame
