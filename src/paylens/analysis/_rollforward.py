"""The balance roll-forward: per internal account, currency and period, the balance the service
reported at the period's opening, the movements the listed transactions made since, and the
balance it reported at the close; the difference is a break."""

from __future__ import annotations

import pandas as pd

from paylens.errors import InvalidArgumentError
from paylens.warehouse import Warehouse

from ._common import Data, choice

#: Period lengths `balance_rollforward` accepts, with their pandas period frequency.
PERIODS = {"MONTH": "M", "WEEK": "W-SUN", "DAY": "D"}

#: Each kind of movement, in the order the roll-forward shows them, with its column.
MOVEMENT_KINDS = {
    "incoming_credit": "incoming_credits_minor",
    "outgoing_debit": "outgoing_debits_minor",
    "outgoing_fee": "outgoing_fees_minor",
    "refund_credit": "refunds_credited_minor",
    "card_pull": "card_pulls_minor",
    "card_refund": "card_refunds_minor",
}

#: The columns of `balance_rollforward`, money in integer minor units of `currency`.
ROLLFORWARD_COLUMNS = [
    "account_id",
    "currency",
    "decimals",
    "period",
    "period_start",
    "period_end",
    "opening_read_at",
    "opening_balance_minor",
    *MOVEMENT_KINDS.values(),
    "movement_count",
    "expected_closing_minor",
    "closing_read_at",
    "closing_balance_minor",
    "break_minor",
]

#: The columns of `balance_rollforward(..., movements=True)`.
MOVEMENT_COLUMNS = [
    "account_id",
    "currency",
    "decimals",
    "period",
    "kind",
    "transaction_id",
    "at",
    "amount_minor",
]

_REFUND_INITIATED = "CAST(json_extract_string(raw, '$.refund.initiatedAt') AS TIMESTAMPTZ)"
_REFUND_SETTLED = "CAST(json_extract_string(raw, '$.refund.settledAt') AS TIMESTAMPTZ)"


def _movements_sql(transactions: str, cards: str) -> str:
    """Every movement of an account's balance the listed records show, signed (credits > 0)."""
    debit_at = (
        "CASE WHEN status = 'COMPLETED' THEN coalesce(settled_at, updated_at)"
        " WHEN status = 'FAILED' AND failure_reason = 'PAYOUT_RETURNED'"
        f" AND settled_at IS NOT NULL THEN settled_at ELSE {_REFUND_INITIATED} END"
    )
    card_at = "coalesce(last_event_at, authorized_at, created_at)"
    # a card transaction's pulls and refunds are in its funding account's currency
    card_currency = (
        "coalesce((SELECT any_value(r.currency) FROM balance_reads AS r"
        " WHERE r.account_id = c.account_id), settled_amount_currency,"
        " authorized_amount_currency)"
    )
    return f"""
    WITH t AS (SELECT * FROM {transactions}),
    outgoing AS (
        SELECT id, source_account_id AS account_id, currency, amount_minor,
               coalesce(fees_minor, 0) AS fees_minor, {debit_at} AS debit_at,
               json_extract_string(raw, '$.refund.status') AS refund_state,
               {_REFUND_SETTLED} AS refunded_at
        FROM t WHERE type = 'OUTGOING')
    SELECT destination_account_id AS account_id, currency, 'incoming_credit' AS kind,
           id AS transaction_id, settled_at AS at, amount_minor
    FROM t WHERE type = 'INCOMING' AND status = 'COMPLETED' AND settled_at IS NOT NULL
    UNION ALL
    SELECT account_id, currency, 'outgoing_debit', id, debit_at, -(amount_minor - fees_minor)
    FROM outgoing WHERE debit_at IS NOT NULL
    UNION ALL
    SELECT account_id, currency, 'outgoing_fee', id, debit_at, -fees_minor
    FROM outgoing WHERE debit_at IS NOT NULL AND fees_minor <> 0
    UNION ALL
    SELECT account_id, currency, 'refund_credit', id, refunded_at, amount_minor
    FROM outgoing
    WHERE debit_at IS NOT NULL AND refund_state = 'COMPLETED' AND refunded_at IS NOT NULL
    UNION ALL
    SELECT account_id, {card_currency}, 'card_pull', id, {card_at}, -pull_total_minor
    FROM (SELECT * FROM {cards}) AS c WHERE coalesce(pull_total_minor, 0) <> 0
    UNION ALL
    SELECT account_id, {card_currency}, 'card_refund', id, {card_at}, refund_total_minor
    FROM (SELECT * FROM {cards}) AS c WHERE coalesce(refund_total_minor, 0) <> 0
    """


def _label(starts: pd.Series, unit: str) -> pd.Series:
    """A period by its start: `2025-09` for a month, the first day's date otherwise."""
    # no period at all (no balance read) leaves the column untyped: type it before formatting
    labels: pd.Series = pd.to_datetime(starts, utc=True).dt.strftime(
        "%Y-%m" if unit == "MONTH" else "%Y-%m-%d"
    )
    return labels


def _reads(wh: Warehouse) -> pd.DataFrame:
    found = wh.sql(
        "SELECT count(*) AS n FROM information_schema.tables WHERE table_name = 'balance_reads'"
    )
    if not int(found["n"][0]):  # a file of an older layout opened read-only
        return pd.DataFrame(
            {
                "account_id": pd.Series(dtype="string"),
                "currency": pd.Series(dtype="string"),
                "decimals": pd.Series(dtype="int64"),
                "read_at": pd.Series(dtype="datetime64[us, UTC]"),
                "reported_minor": pd.Series(dtype="int64"),
            }
        )
    return wh.sql(
        "SELECT account_id, currency, CAST(decimals AS BIGINT) AS decimals, read_at,"
        " total_balance_minor AS reported_minor FROM balance_reads"
        " WHERE total_balance_minor IS NOT NULL ORDER BY read_at"
    )


def _keys_plain(frame: pd.DataFrame) -> pd.DataFrame:
    """Account and currency as plain objects, so every join matches them by value."""
    return frame.assign(
        account_id=frame["account_id"].astype(object), currency=frame["currency"].astype(object)
    )


def _periods(reads: pd.DataFrame, unit: str) -> pd.DataFrame:
    """Per account and currency, every period from its first read's to its last read's, with
    the reads at its edges: opening = the last read at or before the start (the account's
    first read when none), closing = the last read at or before the end."""
    freq = PERIODS[unit]
    rows = []
    for (account, currency), group in reads.groupby(["account_id", "currency"], sort=True):
        first, last = group["read_at"].iloc[0], group["read_at"].iloc[-1]
        starts = pd.period_range(
            first.tz_convert("UTC").tz_localize(None).to_period(freq),
            last.tz_convert("UTC").tz_localize(None).to_period(freq),
        )
        for p in starts:
            rows.append(
                (
                    account,
                    currency,
                    int(group["decimals"].iloc[-1]),
                    p.start_time.tz_localize("UTC"),
                    (p + 1).start_time.tz_localize("UTC"),
                )
            )
    periods = _keys_plain(
        pd.DataFrame(
            rows, columns=["account_id", "currency", "decimals", "period_start", "period_end"]
        )
    )
    if periods.empty:
        return periods.assign(
            opening_read_at=pd.Series(dtype="datetime64[us, UTC]"),
            opening_balance_minor=pd.Series(dtype="int64"),
            closing_read_at=pd.Series(dtype="datetime64[us, UTC]"),
            closing_balance_minor=pd.Series(dtype="int64"),
        )
    at = reads[["account_id", "currency", "read_at", "reported_minor"]].copy()
    at["read_at"] = at["read_at"].astype("datetime64[us, UTC]")
    for edge, name in (("period_start", "opening"), ("period_end", "closing")):
        periods[edge] = periods[edge].astype("datetime64[us, UTC]")
        periods = pd.merge_asof(
            periods.sort_values(edge),
            at.rename(
                columns={"read_at": f"{name}_read_at", "reported_minor": f"{name}_balance_minor"}
            ).sort_values(f"{name}_read_at"),
            left_on=edge,
            right_on=f"{name}_read_at",
            by=["account_id", "currency"],
            direction="backward",
            allow_exact_matches=True,
        )
    firsts = _keys_plain(at.groupby(["account_id", "currency"], as_index=False).first())
    firsts.columns = ["account_id", "currency", "_first_at", "_first_minor"]
    periods = periods.merge(firsts, on=["account_id", "currency"])
    none = periods["opening_read_at"].isna()
    periods.loc[none, "opening_read_at"] = periods.loc[none, "_first_at"]
    periods.loc[none, "opening_balance_minor"] = periods.loc[none, "_first_minor"]
    return periods.drop(columns=["_first_at", "_first_minor"]).sort_values(
        ["account_id", "currency", "period_start"], ignore_index=True
    )


def balance_rollforward(
    data: Data, *, period: str = "month", movements: bool = False
) -> pd.DataFrame:
    """expected_closing_minor = opening_balance_minor + the movements below; break_minor =
    closing_balance_minor - expected_closing_minor. Integer minor units of `currency`, one row
    per internal account, currency and period (`month`, `week` from Monday, or `day`, UTC);
    nothing adds two currencies.

    The balances are the service's `totalBalance` (pending and held funds included) as each
    sync read it (`Warehouse.balance_reads`). A period rolls from its **opening read**, the
    last read at or before the period's start (for an account's first period, when there is
    none, its first read, inside the period), to its **closing read**, the last read at or
    before the period's end: so one period's closing read is the next one's opening read, and
    a period with no read inside it has the same read at both edges and no movement (what
    happened in it rolls into the next period that has a read). The movements are those
    dated after the opening read and at or before the closing read; movements before an
    account's first read are part of its opening balance, those after its last read wait for
    the next read. Periods run from the one holding an account's first read to the one
    holding its last.

    A movement is signed (credits > 0) and dated as the records stamp it:

        incoming_credits_minor  + receivedAmount of a COMPLETED incoming transfer, at settledAt
        outgoing_debits_minor   - (sentAmount - fees) of an outgoing transfer that was debited:
                                  COMPLETED (at settledAt), a returned payout that had settled
                                  (at settledAt), else one with a refund (at refund.initiatedAt)
        outgoing_fees_minor     - fees of the same transfers (the sender pays them within
                                  sentAmount: the quote's fees are included in what it sends)
        refunds_credited_minor  + sentAmount of a debited transfer whose refund COMPLETED, at
                                  refund.settledAt
        card_pulls_minor        - pullSummary.totalAmount of a card transaction, at lastEventAt
                                  (else authorizedAt): the interface dates no single pull
        card_refunds_minor      + refundSummary.totalAmount, at lastEventAt

    (A card transaction's summaries are in its funding account's currency.) The interface
    dates no single card event, so a card transaction with events on both sides of a read
    (a clearing in parts, a refund after the settlement) has all of them dated at its last
    event: its earlier events show as a break in that window, and the list of movements
    names the transaction.

    A movement is kept on the account it names (an outgoing transfer's source account, an
    incoming one's destination, a card transaction's account) in the movement's currency.
    A break is money the service moved that no listed record explains (or a record's stamp
    on the other side of a read than the service posted it). `movements=True` gives one row
    per movement instead, with the period whose window holds it: filter it on the periods
    with a break to list the transactions in the break's window."""
    unit = choice("period", period, list(PERIODS))
    if not isinstance(data, Warehouse):
        raise InvalidArgumentError(
            "data",
            "the roll-forward reads the balances each sync kept: pass a Warehouse, not "
            f"{type(data).__name__}",
        )
    data.require_data()
    reads = _keys_plain(_reads(data))
    periods = _periods(reads, unit)
    found = data.sql(
        _movements_sql(data.current_rows("transactions"), data.current_rows("card_transactions"))
    )
    found = _keys_plain(found[found["account_id"].notna() & found["at"].notna()])
    found["at"] = found["at"].astype("datetime64[us, UTC]")
    windows = periods[periods["opening_read_at"] < periods["closing_read_at"]][
        ["account_id", "currency", "period_start", "opening_read_at", "closing_read_at"]
    ]
    placed = pd.merge_asof(
        found.sort_values("at"),
        windows.sort_values("closing_read_at"),
        left_on="at",
        right_on="closing_read_at",
        by=["account_id", "currency"],
        direction="forward",
        allow_exact_matches=True,
    )
    placed = placed[placed["opening_read_at"].notna() & (placed["at"] > placed["opening_read_at"])]
    placed = placed.merge(
        periods[["account_id", "currency", "period_start", "decimals"]],
        on=["account_id", "currency", "period_start"],
    )
    if movements:
        out = placed.assign(period=_label(placed["period_start"], unit))
        out = out.sort_values(
            ["account_id", "currency", "at", "transaction_id", "kind"], ignore_index=True
        )[MOVEMENT_COLUMNS]
        out["amount_minor"] = out["amount_minor"].astype("int64")
        out["decimals"] = out["decimals"].astype("int64")
        return _typed(out, data)
    keys = ["account_id", "currency", "period_start"]
    by_kind = placed.groupby([*keys, "kind"])["amount_minor"].sum().unstack("kind")
    sums = by_kind.reindex(columns=list(MOVEMENT_KINDS)).rename(columns=MOVEMENT_KINDS)
    sums["movement_count"] = placed.groupby(keys).size()
    out = periods.merge(sums.reset_index(), on=keys, how="left")
    money = [*MOVEMENT_KINDS.values(), "movement_count"]
    out[money] = out[money].fillna(0).astype("int64")
    for column in ("opening_balance_minor", "closing_balance_minor", "decimals"):
        out[column] = out[column].astype("int64")
    out["expected_closing_minor"] = out["opening_balance_minor"] + out[
        list(MOVEMENT_KINDS.values())
    ].sum(axis=1)
    out["break_minor"] = out["closing_balance_minor"] - out["expected_closing_minor"]
    out["period"] = _label(out["period_start"], unit)
    return _typed(out[ROLLFORWARD_COLUMNS], data)


def _typed(frame: pd.DataFrame, wh: Warehouse) -> pd.DataFrame:
    out = frame.reset_index(drop=True)
    for column in out.columns:
        if out[column].dtype == object:
            out[column] = out[column].astype("string")
    out.attrs["source"] = wh.label
    return out
