"""When generated transactions happen: the arrival process the world draws from, at generation
and as the clock advances."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from .entities import US_PER_DAY, pick_cumulative
from .schema import MINUTE_MS


def _intraday() -> np.ndarray:
    """Each minute of the (UTC) day's weight: a floor, and a peak around 15:00."""
    hours = np.arange(1440) / 60.0
    dist = np.minimum(np.abs(hours - 15.0), 24.0 - np.abs(hours - 15.0))
    peak = np.exp(-0.5 * (dist / 3.5) ** 2) / (3.5 * np.sqrt(2 * np.pi))
    return np.asarray(0.25 / 24 + 0.75 * peak)


#: looked up per minute bin rather than computed for each of a period's ~10^5 minutes
_INTRADAY = _intraday()
_WEEK = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 0.6, 0.5])  # Monday first


@dataclass(frozen=True)
class Arrivals:
    """When transactions happen: more on weekdays and in (UTC) business hours, and a growth of
    activity over the generated period (0.7x at its start to 1.3x at its end, flat after)."""

    period_start_ms: int
    period_end_ms: int

    def weights(self, bins_ms: np.ndarray) -> np.ndarray:
        intraday = _INTRADAY[(bins_ms // MINUTE_MS) % 1440]
        week = _WEEK[(bins_ms // (US_PER_DAY // 1000) + 3) % 7]  # Monday = 0
        span = max(self.period_end_ms - self.period_start_ms, 1)
        growth = 0.7 + 0.6 * np.clip((bins_ms - self.period_start_ms) / span, 0.0, 1.0)
        return np.asarray(intraday * week * growth)

    def draw(
        self,
        rng: np.random.Generator,
        first_ms: int,
        last_ms: int,
        n: int | None,
        per_weight: float = 0.0,
    ) -> tuple[np.ndarray, float]:
        """Arrival times (µs, whole ms, sorted) in [first_ms, last_ms]: exactly `n`, or a Poisson
        number with mean `per_weight` times the total weight. Also returns that total weight."""
        if last_ms < first_ms:
            return np.zeros(0, np.int64), 0.0
        lo, hi, cum, total = _minutes(self, first_ms, last_ms)
        count = n if n is not None else int(rng.poisson(per_weight * total))
        b = pick_cumulative(rng, cum, count)
        ms = lo[b] + (rng.random(count) * (hi[b] - lo[b])).astype(np.int64)
        return np.sort(ms) * 1000, total


@functools.lru_cache(maxsize=4)
def _minutes(
    arrivals: Arrivals, first_ms: int, last_ms: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """The minute bins of [first_ms, last_ms] (their bounds, cumulative weights and total
    weight): the same for every world of one period, so built once for all (read-only)."""
    edges = np.arange(first_ms - first_ms % MINUTE_MS, last_ms + 1, MINUTE_MS, dtype=np.int64)
    lo = np.maximum(edges, first_ms)
    hi = np.minimum(edges + MINUTE_MS, last_ms + 1)
    w = arrivals.weights(edges) * (hi - lo) / MINUTE_MS
    cum = np.cumsum(w, dtype=np.float64)
    for array in (lo, hi, cum):
        array.setflags(write=False)
    return lo, hi, cum, float(w.sum())
