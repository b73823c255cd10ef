"""Fees collected on completed outgoing transfers: what the senders paid, by who earns it
(the service, the platform, the counterparty), and the service's FX margin. Not the
platform's revenue: that is `platform_pnl`'s `platform_revenue_minor` (once called `revenue`,
this helper added the others' fees to it)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ._common import By, Data
from ._fees import ReferenceRates, fee_breakdown

#: What `fx_margin_status` says of a group.
NO_REFERENCE = "no reference rate: FX margin unknown (pass reference_rates=)"
PARTIAL_REFERENCE = "partial: FX margin of the rows with a reference rate only"
SAME_CURRENCY = "no FX (same currency)"
COMPLETE = "complete"

_RENAMED = {
    "fx_spread_cost_minor": "fx_margin_minor",
    "fx_spread_cost_major": "fx_margin_major",
    "fx_spread_rate": "fx_margin_rate",
    "all_in_cost_rate": "all_in_rate",
}
_KEPT = [
    "transaction_count",
    "sent_minor",
    "fees_minor",
    "service_fixed_fee_minor",
    "service_variable_fee_minor",
    "platform_fee_minor",
    "counterparty_fixed_fee_minor",
    "residual_minor",
    "take_rate",
    "cross_currency_count",
    "with_reference_count",
    "fx_margin_minor",
    "fx_margin_rate",
    "all_in_rate",
    "fx_margin_status",
]


def fees_collected(
    data: Data,
    by: By = "settlement_month",
    *,
    reference_rates: ReferenceRates | None = None,
    status: str | Sequence[str] | None = "COMPLETED",
    major: bool = False,
) -> pd.DataFrame:
    """What completed outgoing transfers collected from their senders, per group and
    sending currency, each part named by who earns it, in integer minor units of the sending
    currency S and fractions of the amount sent (`_rate`). Only `platform_fee_minor` is the
    platform's revenue (see `platform_pnl`); the rest is the service's or the counterparty's.

        fees_minor                    = F + V + P + C_s (+ residual): what the sender paid in fees
        service_fixed_fee_minor   F,  service_variable_fee_minor V: the service's fees
        platform_fee_minor        P   = platformFees: the platform's share, inside `fees`
        counterparty_fixed_fee_minor C_s: the counterparty's fixed fee, in S at the quote's rate
        take_rate                     = fees / sent, over the transfers whose fees are known
        fx_margin_minor               = sum of round_half_up(received * 10^(dS - dR) * (x - mid))
        fx_margin_rate                = FX margin / (cross-currency amount with a reference, at mid)
        all_in_rate                   = (fees + FX margin) / sent

    The figures are those of `fee_breakdown` (same formulas, same rounding) on COMPLETED
    transfers: a failed, expired or open transfer earns nothing (`status` widens it). The
    default grouping is `settlement_month`, the UTC month of `settledAt`, when the money was
    earned; any `by` of `fee_breakdown` works (`rail`, `corridor`, `customer`, `month`, ...).
    Groups always split by sending currency: nothing adds two currencies.

    The mid-market rate is not in the interface: the FX margin needs `reference_rates` (a
    static mapping or a dated series; `Sandbox.reference_rates()` gives the sandbox's).
    `fx_margin_status` says plainly per group whether the margin is `complete`, `partial` (some
    cross-currency rows had no rate), unknown (no rate at all) or moot (same currency), and
    `with_reference_count` of `cross_currency_count` rows had one. `major=True` adds `_major`
    amounts (float).
    """
    frame = fee_breakdown(
        data, by, reference_rates=reference_rates, status=status, major=major
    ).rename(columns=_RENAMED)
    if by is None:
        return frame
    frame["fx_margin_status"] = pd.array(
        _status(frame["cross_currency_count"], frame["with_reference_count"]),
        dtype="string[pyarrow]",
    )
    keys = [c for c in frame.columns if c not in _KEPT and c not in _RENAMED.values()]
    keys = [c for c in keys if not c.endswith("_major") and c not in _DROPPED]
    kept = [*keys, *_KEPT]
    if major:
        kept += [c for c in frame.columns if c.endswith("_major")]
    result = frame[kept]
    result.attrs.update(frame.attrs)
    return result


_DROPPED = {
    "components_minor",
    "residual_count",
    "service_variable_fee_mismatch_count",
    "multiplier_mismatch_count",
    "received_minor",
    "counterparty_fixed_fee_received_minor",
}


def _status(cross: pd.Series, referenced: pd.Series) -> list[str]:
    cross_, referenced_ = cross.to_numpy(dtype=np.int64), referenced.to_numpy(dtype=np.int64)
    return [
        SAME_CURRENCY
        if c == 0
        else COMPLETE
        if r == c
        else NO_REFERENCE
        if r == 0
        else PARTIAL_REFERENCE
        for c, r in zip(cross_, referenced_, strict=True)
    ]
