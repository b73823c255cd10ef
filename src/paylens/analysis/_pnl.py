"""The platform's P&L per settlement period and currency: who earned what of the fees."""

from __future__ import annotations

from collections.abc import Collection
from decimal import ROUND_HALF_EVEN, Decimal

import pandas as pd

from ..errors import InvalidArgumentError
from ._common import Data, source
from ._fees import ReferenceRates, _series_frame, fee_breakdown

#: The columns of `platform_pnl`, money in integer minor units of `currency`.
PNL_COLUMNS = [
    "period",
    "currency",
    "decimals",
    "outgoing_count",
    "incoming_count",
    "platform_revenue_minor",
    "service_fees_minor",
    "service_incoming_fees_minor",
    "service_fx_margin_minor",
    "counterparty_fees_minor",
    "unattributed_fees_minor",
    "fx_margin_unknown_count",
]

#: Who earns each money column of `platform_pnl`, as tables and charts name it.
PNL_PARTS = {
    "platform revenue (platform fees)": "platform_revenue_minor",
    "service fees (outgoing)": "service_fees_minor",
    "service fees (incoming)": "service_incoming_fees_minor",
    "service FX margin": "service_fx_margin_minor",
    "counterparty pass-through": "counterparty_fees_minor",
    "fees no party explains": "unattributed_fees_minor",
}

_MONEY = [c for c in PNL_COLUMNS if c.endswith("_minor")]


def settlement_period(settled_at: pd.Series) -> pd.Series:
    """The one definition of a period: a COMPLETED transfer settled in month M (UTC month of
    `settledAt`) belongs to period M, whenever it was created."""
    return pd.to_datetime(settled_at, utc=True).dt.strftime("%Y-%m")


def platform_pnl(
    data: Data,
    *,
    reference_rates: ReferenceRates | None = None,
    reporting_currency: str | None = None,
    transfers: Collection[str] | None = None,
) -> pd.DataFrame:
    """The platform's P&L: one row per settlement period (`YYYY-MM`, see `settlement_period`)
    and currency, of COMPLETED transfers only, each column named by the party that earns it.

        platform_revenue_minor      = platformFees of outgoing transfers (the platform's own)
        service_fees_minor          = gridApiFixedFee + gridApiVariableFeeAmount (outgoing)
        service_incoming_fees_minor = `fees` of incoming transfers (the receive quote's fees;
                                      the interface gives incoming transfers no platform share)
        service_fx_margin_minor     = the FX margin the service earns through its quoted rate
                                      (`fee_breakdown`'s fx_spread_cost; needs reference_rates)
        counterparty_fees_minor     = counterpartyFixedFee in the sending currency (pass-through)
        unattributed_fees_minor     = fees - the parts above (0 when the fees are explained)

    Outgoing figures are in the sending currency; incoming fees in the sender's currency
    (`sentAmount`), so an incoming transfer without one is left out and counted in
    `attrs["incoming_without_currency"]`. `fx_margin_unknown_count` counts cross-currency
    transfers without a reference rate (their margin is not in the sum). Nothing adds two
    currencies.

    `reporting_currency="USD"` consolidates (see `consolidate`): one row per period,
    currency and settlement day, each figure beside its conversion into the reporting
    currency at that day's reference rate (`reference_rates` must then be a dated series).
    `transfers`: only these transaction ids (e.g. the ones a report's period selects).
    """
    rows = pnl_rows(
        data, reference_rates=reference_rates, settled_on=reporting_currency is not None
    )
    if transfers is not None:
        kept = rows[rows["id"].isin(set(transfers))]
        kept.attrs.update(rows.attrs)
        rows = kept
    if reporting_currency is not None:
        return consolidate(rows, reporting_currency, reference_rates)
    return pnl_by_period(rows)


#: A consolidated P&L's columns before the figures (see `consolidate`).
CONSOLIDATED_KEYS = [
    "period",
    "settled_on",
    "currency",
    "decimals",
    "reporting_currency",
    "reporting_decimals",
    "rate",
    "rate_date",
]


def consolidate(
    rows: pd.DataFrame, reporting_currency: str, reference_rates: ReferenceRates | None
) -> pd.DataFrame:
    """`pnl_rows` (with `settled_on`) summed per period, currency and settlement day (UTC),
    each money column `X_minor` beside `X_reporting_minor`: the sum converted into the
    reporting currency P at that day's reference rate,

        X_reporting_minor = round_half_even(X_minor * rate * 10^(dP - dC))

    one rounding per figure, in minor units of P (`attrs["rounding"]` says so). `rate` is P
    major units per unit of the row's currency C, `rate_date` the day it is of: the day's last
    rate P→C of `reference_rates` (sending units per receiving unit), else the inverse of
    C→P's; 1 when C is P. A currency without a rate on a settlement day raises
    `InvalidArgumentError` naming the currency and the day (never a silent zero). P's decimals
    come from the data's records in P. Rows in one reporting currency may be added:
    `frame.groupby("period")[reporting_columns].sum()`."""
    target = str(reporting_currency).strip().upper()
    if not isinstance(reference_rates, pd.DataFrame) or "date" not in reference_rates.columns:
        raise InvalidArgumentError(
            "reference_rates",
            f"consolidating into {target} needs dated reference rates (a DataFrame with"
            " `date`, `sent_currency`, `received_currency`, `mid_rate`), one per settlement day",
        )
    rates = _series_frame(reference_rates)
    rates["day"] = rates["at"].dt.strftime("%Y-%m-%d")
    daily = rates.drop_duplicates(["day", "s", "r"], keep="last")
    mids: dict[tuple[str, str, str], float] = {
        (str(d), str(a), str(b)): float(m)
        for d, a, b, m in zip(daily["day"], daily["s"], daily["r"], daily["mid"], strict=True)
    }
    places = rows.loc[rows["currency"] == target, "decimals"]
    if places.empty:
        raise InvalidArgumentError(
            "reporting_currency", f"no record in {target} says how many decimals it has"
        )
    target_decimals = int(places.iloc[0])
    counts = ["outgoing_count", "incoming_count", "fx_margin_unknown_count"]
    summed = (
        rows.groupby(["period", "settled_on", "currency", "decimals"], as_index=False)[
            [*counts, *_MONEY]
        ]
        .sum()
        .sort_values(["period", "settled_on", "currency"], ignore_index=True)
    )
    rate_of: list[float] = []
    for day, code in zip(summed["settled_on"], summed["currency"], strict=True):
        if code == target:
            rate_of.append(1.0)
        elif (day, target, code) in mids:
            rate_of.append(mids[(day, target, code)])
        elif (day, code, target) in mids:
            rate_of.append(1.0 / mids[(day, code, target)])
        else:
            raise InvalidArgumentError(
                "reference_rates",
                f"no reference rate for {code} on {day} (to consolidate into {target}):"
                f" give a {target}→{code} or {code}→{target} rate dated {day}",
            )
    summed["reporting_currency"] = target
    summed["reporting_decimals"] = target_decimals
    summed["rate"] = rate_of
    summed["rate_date"] = summed["settled_on"]
    columns = list(CONSOLIDATED_KEYS) + counts
    for column in _MONEY:
        converted = column.replace("_minor", "_reporting_minor")
        summed[converted] = [
            _half_even(int(v), rate, target_decimals - int(d))
            for v, rate, d in zip(summed[column], summed["rate"], summed["decimals"], strict=True)
        ]
        summed[converted] = summed[converted].astype("int64")
        columns += [column, converted]
    result = summed[columns]
    result.attrs.update(rows.attrs)
    result.attrs["rounding"] = (
        f"half-even per figure, in minor units of {target} ({target_decimals} decimals)"
    )
    result.attrs["rates"] = (
        f"reference rate of each settlement day (UTC), {target} per unit of the currency"
    )
    return result


def _half_even(minor: int, rate: float, shift: int) -> int:
    """minor * rate * 10^shift rounded half-even, exactly (the rate as its shortest decimal)."""
    exact = Decimal(minor) * Decimal(repr(rate)) * Decimal(10) ** shift
    return int(exact.quantize(Decimal(1), rounding=ROUND_HALF_EVEN))


def pnl_by_period(rows: pd.DataFrame) -> pd.DataFrame:
    """`pnl_rows` summed per period and currency (the rows `platform_pnl` returns)."""
    counts = ["outgoing_count", "incoming_count", "fx_margin_unknown_count"]
    result = (
        rows.groupby(["period", "currency", "decimals"], as_index=False)[[*counts, *_MONEY]]
        .sum()
        .sort_values(["period", "currency"], ignore_index=True)
    )[PNL_COLUMNS]
    result.attrs.update(rows.attrs)
    return result


def _keys(frame: pd.DataFrame, currency: str, decimals: str) -> dict[str, pd.Series]:
    """A transfer's id, settlement period and day, currency and decimals."""
    return {
        "id": frame["id"].astype(str),
        "period": settlement_period(frame["settled_at"]),
        "settled_on": pd.to_datetime(frame["settled_at"], utc=True).dt.strftime("%Y-%m-%d"),
        "currency": frame[currency].astype(str),
        "decimals": frame[decimals].astype("int64"),
    }


def pnl_rows(
    data: Data, *, reference_rates: ReferenceRates | None = None, settled_on: bool = False
) -> pd.DataFrame:
    """One row per COMPLETED settled transfer (`id`, then the columns of `platform_pnl`):
    what each transfer contributes to its period; `settled_on=True` adds its settlement's
    UTC day (`YYYY-MM-DD`)."""
    out = fee_breakdown(data, None, reference_rates=reference_rates, status="COMPLETED")
    out = out[out["settled_at"].notna()]
    outgoing = pd.DataFrame(
        {
            **_keys(out, "sent_currency", "sent_decimals"),
            "outgoing_count": 1,
            "incoming_count": 0,
            "platform_revenue_minor": out["platform_fee_minor"].fillna(0).astype("int64"),
            "service_fees_minor": (
                out["service_fixed_fee_minor"].fillna(0)
                + out["service_variable_fee_minor"].fillna(0)
            ).astype("int64"),
            "service_incoming_fees_minor": 0,
            "service_fx_margin_minor": out["fx_spread_cost_minor"].fillna(0).astype("int64"),
            "counterparty_fees_minor": out["counterparty_fixed_fee_minor"]
            .fillna(0)
            .astype("int64"),
            "unattributed_fees_minor": out["residual_minor"].fillna(0).astype("int64"),
            # a transfer without a received currency (receivedAmount is optional) may be
            # cross-currency: its margin is unknown too
            "fx_margin_unknown_count": (
                out["sent_currency"].ne(out["received_currency"]).fillna(True)
                & out["fx_spread_cost_minor"].isna()
            ).astype("int64"),
        }
    )
    src = source(data, "transactions", required=["type", "status", "fees_minor"])
    incoming = src.run(
        [
            (
                "_in",
                src.input_cte(
                    [
                        "type",
                        "status",
                        "settled_at",
                        "fees_minor",
                        "sent_amount_currency",
                        "sent_amount_decimals",
                    ],
                    "type = 'INCOMING' AND status = 'COMPLETED' AND settled_at IS NOT NULL",
                ),
            )
        ],
        "SELECT id, settled_at, fees_minor, sent_amount_currency AS currency,"
        " sent_amount_decimals AS decimals FROM _in",
    )
    missing = int(incoming["currency"].isna().sum())
    incoming = incoming[incoming["currency"].notna()]
    inc = pd.DataFrame(
        {
            **_keys(incoming, "currency", "decimals"),
            "outgoing_count": 0,
            "incoming_count": 1,
            "service_incoming_fees_minor": incoming["fees_minor"].fillna(0).astype("int64"),
        }
    )
    rows = pd.concat([outgoing, inc], ignore_index=True).fillna(0)
    counts = ["outgoing_count", "incoming_count", "fx_margin_unknown_count"]
    for column in _MONEY + counts:
        rows[column] = rows[column].astype("int64")
    kept = ["id", *PNL_COLUMNS, *(["settled_on"] if settled_on else [])]
    rows = rows[kept].sort_values(["period", "id"], ignore_index=True)
    rows.attrs["incoming_without_currency"] = missing
    return rows
