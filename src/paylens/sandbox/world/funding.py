"""Funds arriving for a quote funded in real time (`POST /sandbox/send`).

A quote whose source is REALTIME_FUNDING waits in PENDING, with `paymentInstructions`, for the
platform to send its `totalSendingAmount` before it expires. `POST /sandbox/send` simulates that
transfer arriving now:

- the quote's amount in its sending currency (or no `currencyAmount`): the quote executes
  (PROCESSING, then it settles on its rail);
- another amount: the transaction fails with FUNDING_AMOUNT_MISMATCH ("funds received did not
  match the expected amount");
- a quote that is not REALTIME_FUNDING, not PENDING or already expired, or another currency than
  the quote's: 400 naming the field, nothing changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..currencies import CURRENCY_CODES
from ..generate.schema import OUT_FAILURE_CODE, SRC_FUNDING, STATUS_CODE

if TYPE_CHECKING:
    from .world import World


class FundingRefused(Exception):
    """Funds that cannot be applied to the quote (answered 400 naming `field`)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def send_funds(world: World, row: int, currency: str, amount: int | None) -> dict[str, Any]:
    """Funds of `amount` minor units of `currency` arrive for the quote of OUTGOING `row`;
    returns the transaction."""
    s = world.store
    if s.col("source_kind")[row] != SRC_FUNDING:
        raise FundingRefused("quoteId", "the quote's source is not REALTIME_FUNDING")
    if s.col("status")[row] != STATUS_CODE["PENDING"] or s.col("t1")[row] <= world.now_us:
        raise FundingRefused("quoteId", "the quote no longer waits for funds")
    expected = CURRENCY_CODES[int(s.col("send_cur")[row])]
    if currency != expected:
        raise FundingRefused("currencyCode", f"must be {expected}, the quote's sending currency")
    at = world.now_us // 1000 * 1000
    if amount is None or amount == int(s.col("sent")[row]):
        world.execute_row(row)
    else:
        world.update_row(
            row, t1=at, t2=at, final=STATUS_CODE["FAILED"], failure=OUT_FAILURE_CODE["FUNDING_AMOUNT_MISMATCH"],
            touched=at,
        )  # fmt: skip
    return world.tx.transactions(np.array([row]), world.now_us)[0]
