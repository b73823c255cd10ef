"""The sandbox's mid-market reference rates as a daily time series, so an analysis can measure
the FX margin of sandbox transfers without bringing its own rates.

The sandbox trades at a fixed snapshot of reference prices (`_currencies.MID`): every day of the
series carries the same rate per corridor. The shape is what a market-data feed gives
(`date`, `sent_currency`, `received_currency`, `mid_rate`: sending major units per receiving
major unit, the interface's direction for `exchangeRate`), which `paylens.analysis` accepts as
`reference_rates`.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import TYPE_CHECKING

from .currencies import CURRENCY_CODES, mid_rate

if TYPE_CHECKING:
    import pandas as pd


def mid_rate_series(start: date | datetime | str, end: date | datetime | str) -> pd.DataFrame:
    """One row per UTC day in [start's day, end's day] and cross-currency corridor."""
    import numpy as np
    import pandas as pd  # only when asked: the sandbox itself never needs pandas

    days = pd.date_range(pd.Timestamp(start).normalize(), pd.Timestamp(end).normalize(), freq="D")
    pairs = [(s, r, mid_rate(s, r)) for s in CURRENCY_CODES for r in CURRENCY_CODES if s != r]
    sent, received, mids = (np.array(column, dtype=object) for column in zip(*pairs, strict=True))
    # day by day, every corridor in the same order (columns built whole, not row by row)
    columns = ["date", "sent_currency", "received_currency", "mid_rate"]
    frame = (
        pd.DataFrame([], columns=columns)
        if days.empty
        else pd.DataFrame(
            {
                "date": np.repeat(np.array([day.date() for day in days], dtype=object), len(pairs)),
                "sent_currency": np.tile(sent, len(days)),
                "received_currency": np.tile(received, len(days)),
                "mid_rate": np.tile(mids.astype(float), len(days)),
            }
        )
    )
    frame.attrs["source"] = "SANDBOX DATA: reference mid rates of paylens' sandbox"
    return frame
