"""The report's balance roll-forward: the months of `analysis.balance_rollforward` that overlap
the report's period (in its currency), as a table per account and currency, and its tie-out:
each row's closing is the balance read at the month's end and its movements are the ones it
lists."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from paylens.analysis import balance_rollforward
from paylens.models import format_minor

from ._format import MISSING_LABEL, format_instant

if TYPE_CHECKING:
    from ._figures import Period

_KEYS = ["account_id", "currency", "period"]

#: The movement columns as the table heads them.
_MOVED = {
    "incoming_credits_minor": "incoming credits",
    "outgoing_debits_minor": "outgoing debits",
    "outgoing_fees_minor": "fees paid",
    "refunds_credited_minor": "refunds credited",
    "card_pulls_minor": "card pulls",
    "card_refunds_minor": "card refunds",
}


def _months(period: Period, frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of the months overlapping [start, end), in the period's currency."""
    keep = pd.Series(True, index=frame.index)
    if period.start is not None:
        keep &= frame["period_end"] > period.start
    if period.end is not None:
        keep &= frame["period_start"] < period.end
    if period.currency is not None:
        keep &= frame["currency"] == period.currency
    return frame[keep]


def rollforward(period: Period) -> pd.DataFrame:
    """The monthly roll-forward rows of the report's period (`balance_rollforward`)."""
    rows = _months(period, balance_rollforward(period.wh, period="month"))
    return rows.reset_index(drop=True)


def rollforward_check(period: Period) -> tuple[str, object, object]:
    """A tie-out: roll-forward rows whose closing is not the last balance read at or before
    the month's end (read straight from `balance_reads`), whose expected closing is not the
    opening plus the movements it lists (`movements=True`), or whose break is not the
    closing less the expected closing. Expected 0."""
    rows = rollforward(period)
    keys = {"account_id": object, "currency": object}
    reads = period.wh.sql(
        "SELECT account_id, currency, read_at AS _read_at, total_balance_minor AS _read_minor"
        " FROM balance_reads ORDER BY read_at"
    ).astype(keys)
    listed = balance_rollforward(period.wh, period="month", movements=True)
    sums = listed.groupby(_KEYS)["amount_minor"].sum().rename("_moved").reset_index()
    ends = rows.astype(keys).assign(_end=rows["period_end"].astype("datetime64[us, UTC]"))
    reads["_read_at"] = reads["_read_at"].astype("datetime64[us, UTC]")
    tied = pd.merge_asof(
        ends.sort_values("_end"),
        reads,
        left_on="_end",
        right_on="_read_at",
        by=list(keys),
        direction="backward",
    ).merge(sums.astype(keys), on=_KEYS, how="left")
    moved = tied["_moved"].fillna(0)
    wrong = int(
        (
            tied["_read_minor"].isna()
            | (tied["_read_minor"] != tied["closing_balance_minor"])
            | (tied["opening_balance_minor"] + moved != tied["expected_closing_minor"])
            | (
                tied["closing_balance_minor"] - tied["expected_closing_minor"]
                != tied["break_minor"]
            )
        ).sum()
    )
    return (
        "balance roll-forward rows not tying to the balances read and the movements listed",
        0,
        wrong,
    )


def rollforward_table(rows: pd.DataFrame, first: int = 40) -> tuple[str, pd.DataFrame]:
    """A heading and the table of the roll-forward rows, those with a break first, each part
    by currency, account and month: money in each currency's major units, the account by the
    start of its uuid; the heading names the reads the months roll between."""
    order = rows.assign(_clean=rows["break_minor"] == 0).sort_values(
        ["_clean", "currency", "account_id", "period"]
    )
    shown = order.head(first)

    def money(column: str) -> list[str]:
        return [
            MISSING_LABEL if pd.isna(v) else format_minor(int(v), int(d))
            for v, d in zip(shown[column], shown["decimals"], strict=True)
        ]

    def read(value: object) -> str:
        return format_instant(value).removesuffix(":00 UTC").removesuffix(" UTC")

    table = pd.DataFrame(
        {
            # the uuid's first 8 characters: the full id would push the breaks off the page
            "account": [
                str(a).removeprefix("InternalAccount:")[:8] + "…" for a in shown["account_id"]
            ],
            "currency": list(shown["currency"]),
            "month": list(shown["period"]),
            "opening": money("opening_balance_minor"),
            **{name: money(column) for column, name in _MOVED.items()},
            "expected closing": money("expected_closing_minor"),
            "reported closing": money("closing_balance_minor"),
            "break": money("break_minor"),
        }
    )
    breaks = int((rows["break_minor"] != 0).sum())
    more = f"; the first {first} shown, breaks first" if len(rows) > first else ""
    reads = sorted({*rows["opening_read_at"], *rows["closing_read_at"]})
    said = ", ".join(read(r) for r in reads[:6]) + (", …" if len(reads) > 6 else "")
    heading = (
        f"{len(rows):,} account-months, {breaks:,} with a break{more}; rolled between the "
        f"balances read at {said or MISSING_LABEL} (UTC)"
    )
    return heading, table
