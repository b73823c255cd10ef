"""Money owed to customers: transfers that failed after the sender was debited and whose
refund is not done (refund PENDING or FAILED), aged."""

from __future__ import annotations

from datetime import datetime

import pandas as pd

from paylens.errors import InvalidArgumentError

from ._common import Data, instant, source
from ._lifecycle import LIFECYCLE, REFUND_FAILED, REFUND_PENDING

#: Age buckets (days since the transfer's last update), edges inclusive: 0-7, 8-30, 31-90, 91+.
AGE_BUCKETS = (
    ("0-7 days", 0, 7),
    ("8-30 days", 8, 30),
    ("31-90 days", 31, 90),
    ("over 90 days", 91, None),
)


def refunds_owed(data: Data, *, as_of: datetime | str) -> pd.DataFrame:
    """One row per currency, lifecycle (`refund_pending`, `refund_failed`) and age bucket:
    `transaction_count` and `owed_minor` (the transfer's amount, `amount_minor`: what the
    sender was debited in the transfer's currency), aged in whole days from `updated_at` to
    `as_of` (pass the sync's time, e.g. the service's clock). Nothing adds two currencies."""
    when = instant("as_of", as_of)
    if when is None:  # typed away, but a notebook may pass it: never an AssertionError
        raise InvalidArgumentError("as_of", "give the instant to age the refunds to")
    src = source(data, "transactions", required=["status", "amount_minor", "currency"])
    rows = src.run(
        [
            (
                "_in",
                src.input_cte(
                    [
                        "type",
                        "status",
                        "failure_reason",
                        "refund_status",
                        "refund_reason",
                        "updated_at",
                        "decimals",
                    ]
                ),
            )
        ],
        f"SELECT id, currency, decimals, amount_minor, updated_at, {LIFECYCLE} AS lifecycle"
        " FROM _in",
    )
    rows = rows[rows["lifecycle"].isin([REFUND_PENDING, REFUND_FAILED])].copy()
    days = (when - pd.to_datetime(rows["updated_at"], utc=True)).dt.days
    rows["age"] = pd.Series(pd.NA, index=rows.index, dtype="string")
    for label, low, high in AGE_BUCKETS:
        rows.loc[(days >= low) & ((days <= high) if high is not None else True), "age"] = label
    out = (
        rows.groupby(["currency", "decimals", "lifecycle", "age"], as_index=False)
        .agg(transaction_count=("id", "size"), owed_minor=("amount_minor", "sum"))
        .sort_values(["currency", "lifecycle", "age"], ignore_index=True)
    )
    out["transaction_count"] = out["transaction_count"].astype("int64")
    out["owed_minor"] = out["owed_minor"].astype("int64")
    return out
