"""Fee decomposition of outgoing transactions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from ._common import (
    TRANSACTION,
    By,
    Data,
    Out,
    count_where,
    half_up,
    render,
    rows_cte,
    source,
    sql_double,
    sql_string,
    sql_strings,
    statuses,
)

#: Mid rates per corridor: `{("USD", "EUR"): 0.92}` or `{"USD→EUR": 0.92}` (sending major
#: units per receiving major unit, as `exchange_rate`), or a DataFrame with `sent_currency`,
#: `received_currency` (or `corridor`) and `mid_rate`.
ReferenceRates = Mapping[str | tuple[str, str], float] | pd.DataFrame

_REQUIRED = (
    "id",
    "sent_amount_minor",
    "sent_amount_currency",
    "sent_amount_decimals",
    "received_amount_minor",
    "received_amount_currency",
    "received_amount_decimals",
    "exchange_rate",
    "fees_minor",
    "platform_fees_minor",
    "counterparty_fixed_fee_minor",
    "grid_api_fixed_fee_minor",
    "grid_api_variable_fee_rate",
    "grid_api_variable_fee_amount_minor",
)
_USES = (*_REQUIRED, "status", "created_at", "customer_id", "payment_rail")

# Expressions over one input row: x (S major per R major; 1 when S = R and no rate is given),
# 10^(dS - dR) as the float64 SQL's power gives, and C_s, all in float64 as the formula says.
_X = "coalesce(exchange_rate, CASE WHEN sent_amount_currency = received_amount_currency THEN 1.0 END)"
_P10 = "power(10, sent_amount_decimals - received_amount_decimals)"
_CS = half_up(f"CAST(counterparty_fixed_fee_minor AS DOUBLE) * {_X} * {_P10}")
_MID = "CASE WHEN sent_amount_currency = received_amount_currency THEN 1.0 ELSE _rates.mid END"
_COMPONENTS = (
    "coalesce(grid_api_fixed_fee_minor, 0) + coalesce(grid_api_variable_fee_amount_minor, 0)"
    f" + coalesce(platform_fees_minor, 0) + coalesce({_CS}, 0)"
)

_S, _R = "sent_decimals", "received_decimals"
_ROW = [
    *TRANSACTION,
    Out("sent_currency", "sent_amount_currency"),
    Out("sent_decimals", "sent_amount_decimals"),
    Out("received_currency", "received_amount_currency"),
    Out("received_decimals", "received_amount_decimals"),
    Out("sent_minor", "sent_amount_minor", _S),
    Out("received_minor", "received_amount_minor", _R),
    Out("exchange_rate", "_x"),
    Out("reference_rate", "_mid"),
    Out("fees_minor", "fees_minor", _S),
    Out("service_fixed_fee_minor", "grid_api_fixed_fee_minor", _S),
    Out("service_variable_fee_minor", "grid_api_variable_fee_amount_minor", _S),
    Out("platform_fee_minor", "platform_fees_minor", _S),
    Out("counterparty_fixed_fee_minor", "_cs", _S),
    Out("counterparty_fixed_fee_received_minor", "counterparty_fixed_fee_minor", _R),
    Out("components_minor", "_components", _S),
    Out("residual_minor", "fees_minor - _components", _S),
    Out("service_variable_fee_rate", "grid_api_variable_fee_rate"),
    Out(
        "service_variable_fee_mismatch_minor",
        "grid_api_variable_fee_amount_minor"
        f" - {half_up('CAST(sent_amount_minor AS DOUBLE) * grid_api_variable_fee_rate')}",
        _S,
    ),
    Out("fx_spread_bps", "(_x / _mid - 1) * 10000"),
    Out("fx_spread_cost_minor", "_spread_cost", _S),
    Out("total_cost_minor", "fees_minor + _spread_cost", _S),
    Out("take_rate_bps", "CAST(fees_minor AS DOUBLE) / nullif(sent_amount_minor, 0) * 10000"),
    Out(
        "all_in_cost_bps",
        "CAST(fees_minor + _spread_cost AS DOUBLE) / nullif(sent_amount_minor, 0) * 10000",
    ),
]


def _sum(name: str, decimals: str = _S, column: str | None = None) -> Out:
    return Out(name, f"CAST(sum({column or name}) AS BIGINT)", decimals)


_CONVERTED = "CAST(received_minor AS DOUBLE) * power(10, sent_decimals - received_decimals)"
_CROSS = "FILTER (WHERE sent_currency <> received_currency)"
_SENDING_METRICS = [
    Out("transaction_count", "count(*)"),
    _sum("sent_minor"),
    _sum("fees_minor"),
    _sum("service_fixed_fee_minor"),
    _sum("service_variable_fee_minor"),
    _sum("platform_fee_minor"),
    _sum("counterparty_fixed_fee_minor"),
    _sum("components_minor"),
    _sum("residual_minor"),
    count_where("residual_count", "residual_minor <> 0"),
    count_where("service_variable_fee_mismatch_count", "service_variable_fee_mismatch_minor <> 0"),
    Out("with_reference_count", "count(reference_rate)"),
    _sum("fx_spread_cost_minor"),
    Out(
        "fx_spread_bps",
        f"sum({_CONVERTED} * (exchange_rate - reference_rate)) {_CROSS}"
        f" / sum({_CONVERTED} * reference_rate) {_CROSS} * 10000",
    ),
    Out("take_rate_bps", "CAST(sum(fees_minor) AS DOUBLE) / nullif(sum(sent_minor), 0) * 10000"),
    Out(
        "all_in_cost_bps",
        "CAST(sum(total_cost_minor) AS DOUBLE)"
        " / nullif(sum(sent_minor) FILTER (WHERE total_cost_minor IS NOT NULL), 0) * 10000",
    ),
]
_RECEIVING_METRICS = [
    _sum("received_minor", _R),
    _sum("counterparty_fixed_fee_received_minor", _R),
]
_RECEIVING_KEYS = {"corridor", "received_currency", "received_amount_currency"}


def fee_breakdown(
    data: Data,
    by: By = None,
    *,
    reference_rates: ReferenceRates | None = None,
    status: str | Sequence[str] | None = None,
    major: bool = False,
) -> pd.DataFrame:
    """Fees of outgoing transactions taken apart: integer minor units of the sending currency
    S (receiving currency R where named), rates in basis points of the amount sent.

        fees_minor                            = fees (the total the service reports)
        service_fixed_fee_minor          F    = rateDetails.gridApiFixedFee
        service_variable_fee_minor       V    = rateDetails.gridApiVariableFeeAmount
        platform_fee_minor               P    = platformFees
        counterparty_fixed_fee_received_minor C = rateDetails.counterpartyFixedFee  (in R)
        counterparty_fixed_fee_minor     C_s  = round_half_up(C * x * 10^(dS - dR))  (in S)
        components_minor                      = F + V + P + C_s
        residual_minor                        = fees - components   (0 when fully explained)
        take_rate_bps                         = fees / sentAmount * 10_000
        fx_spread_bps                         = (x / mid - 1) * 10_000
        fx_spread_cost_minor                  = round_half_up(received * 10^(dS - dR) * (x - mid))
        total_cost_minor                      = fees + fx_spread_cost
        all_in_cost_bps                       = total_cost / sentAmount * 10_000

    x is `exchange_rate` (S major units per R major unit), dS and dR the decimals each amount
    carries (no currency table), mid the corridor's reference rate from `reference_rates`
    (1 when S = R; unknown otherwise, making the spread, total cost and all-in cost NULL).
    round_half_up(y) = floor(y + 0.5) with every step in float64 in the order written, so the
    formula the sandbox documents reproduces exactly: every residual is 0 on sandbox data. The
    spread cost is what the amount delivered cost at x beyond its cost at mid. A missing
    component counts as 0 in `components_minor`, so the residual shows what it leaves unexplained.

    What the interface guarantees: `fees` is in minor units of S and includes `platformFees`;
    F and V are in minor units of S, C in minor units of R and its S equivalent moves with x;
    V is the sending amount times the variable rate; x is S units per R unit. What is inferred
    (from data, and exact for the sandbox): that `fees` is exactly F + V + P + C_s, how C_s and
    V are rounded (half up), and that the rate is a fraction of `sentAmount` (fees included).
    `service_variable_fee_mismatch_minor` = V - round_half_up(sentAmount * rate) checks the last.

    `by` groups by one or more of `corridor`, `rail`, `customer`, `month` (UTC), `status`, any
    per-row column or any input column; None gives one row per transaction. Groups are always
    also split by `sent_currency` (and by `received_currency` when grouping by corridor or
    receiving currency, which adds sums in R): no sum adds two currencies. Group rates are
    volume-weighted (sums divided by sums); `fx_spread_bps` of a group is over its
    cross-currency rows with a reference rate; `all_in_cost_bps` over rows with a known total.
    `status` keeps some statuses only (`"COMPLETED"` for fees actually earned); `major=True`
    adds a `_major` column (amount / 10^decimals, float) after each `_minor` one.
    """
    src = source(data, "outgoing_fees", required=_REQUIRED)
    where = ["TRUE"]
    if src.has("type"):
        where.append("type = 'OUTGOING'")
    wanted = statuses(status)
    if wanted is not None:
        where.append(f"status IN {sql_strings(wanted)}")
    keys = src.keys(by, _ROW, {"rail": "rail"})
    receiving = bool(keys and _RECEIVING_KEYS.intersection(keys))
    fee = (
        f"SELECT _in.*, {_X} AS _x, {_MID} AS _mid, {_CS} AS _cs, {_COMPONENTS} AS _components,"
        f" {half_up(f'CAST(received_amount_minor AS DOUBLE) * {_P10} * ({_X} - ({_MID}))')}"
        " AS _spread_cost FROM _in LEFT JOIN _rates"
        " ON _rates.s = sent_amount_currency AND _rates.r = received_amount_currency"
    )
    final = render(
        _ROW,
        keys,
        currency=["sent_currency", "sent_decimals"]
        + (["received_currency", "received_decimals"] if receiving else []),
        metrics=_SENDING_METRICS + (_RECEIVING_METRICS if receiving else []),
        major=major,
        order="created_at, id",
    )
    ctes = [
        ("_in", src.input_cte(_USES, " AND ".join(where))),
        ("_rates", _rates_sql(reference_rates)),
        ("_fee", fee),
        ("_rows", rows_cte(_ROW, keys, "_fee")),
    ]
    return src.run(ctes, final)


def _rates_sql(rates: ReferenceRates | None) -> str:
    """The reference rates as a VALUES list (s, r, mid)."""
    pairs = _rate_pairs(rates)
    if not pairs:
        return "SELECT NULL::VARCHAR AS s, NULL::VARCHAR AS r, NULL::DOUBLE AS mid WHERE FALSE"
    values = ", ".join(
        f"({sql_string(s)}, {sql_string(r)}, {sql_double(mid)})" for (s, r), mid in pairs.items()
    )
    return f"SELECT * FROM (VALUES {values}) AS t(s, r, mid)"


def _rate_pairs(rates: ReferenceRates | None) -> dict[tuple[str, str], float]:
    if rates is None:
        return {}
    if isinstance(rates, pd.DataFrame):
        if "corridor" in rates.columns and "sent_currency" not in rates.columns:
            items = zip(rates["corridor"], rates["mid_rate"], strict=True)
        else:
            corridors = zip(rates["sent_currency"], rates["received_currency"], strict=True)
            items = zip(corridors, rates["mid_rate"], strict=True)
        rates = dict(items)
    pairs: dict[tuple[str, str], float] = {}
    for key, mid in rates.items():
        if isinstance(key, str):
            sending, sep, receiving = key.replace("/", "→").partition("→")
            if not sep:
                raise ValueError(f"a corridor is 'USD→EUR' or ('USD', 'EUR'), not {key!r}")
            key = (sending, receiving)
        if not mid > 0:
            raise ValueError(f"reference rate of {key} must be > 0, not {mid!r}")
        pairs[(str(key[0]), str(key[1]))] = float(mid)
    return pairs
