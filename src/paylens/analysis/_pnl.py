"""The platform's P&L per settlement period and currency: who earned what of the fees."""

from __future__ import annotations

import pandas as pd

from ._common import Data, source
from ._fees import ReferenceRates, fee_breakdown

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


def platform_pnl(data: Data, *, reference_rates: ReferenceRates | None = None) -> pd.DataFrame:
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
    """
    result = pnl_by_period(pnl_rows(data, reference_rates=reference_rates))
    return result


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
    """A transfer's id, settlement period, currency and decimals."""
    return {
        "id": frame["id"].astype(str),
        "period": settlement_period(frame["settled_at"]),
        "currency": frame[currency].astype(str),
        "decimals": frame[decimals].astype("int64"),
    }


def pnl_rows(data: Data, *, reference_rates: ReferenceRates | None = None) -> pd.DataFrame:
    """One row per COMPLETED settled transfer (`id`, then the columns of `platform_pnl`):
    what each transfer contributes to its period."""
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
            "fx_margin_unknown_count": (
                (out["sent_currency"] != out["received_currency"])
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
    rows = rows[["id", *PNL_COLUMNS]].sort_values(["period", "id"], ignore_index=True)
    rows.attrs["incoming_without_currency"] = missing
    return rows
