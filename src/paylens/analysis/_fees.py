"""Fee decomposition of outgoing transactions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import orjson
import pandas as pd

from paylens.errors import InvalidArgumentError
from paylens.models import TransactionStatus

from ._common import (
    TRANSACTION,
    By,
    Data,
    Out,
    count_where,
    half_up,
    month_of,
    render,
    rows_cte,
    source,
    sql_string,
    sql_strings,
    statuses,
)

#: Mid rates per corridor, sending major units per receiving major unit (as `exchange_rate`):
#: a static `{("USD", "EUR"): 0.92}` or `{"USD→EUR": 0.92}`, or a time series: a DataFrame
#: with `date` (the UTC day, or instant, from which a rate holds until the next),
#: `sent_currency`, `received_currency` (or `corridor`) and `mid_rate` (`Sandbox.reference_rates()`
#: gives one). A corridor given only the other way round uses the inverse.
ReferenceRates = Mapping[str | tuple[str, str], float] | pd.DataFrame
#: Statuses a `status=` may name.
STATUSES = tuple(TransactionStatus)

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
_USES = (
    *_REQUIRED,
    "status",
    "created_at",
    "settled_at",
    "customer_id",
    "payment_rail",
    "grid_api_multiplier",
    "counterparty_multiplier",
)

# Expressions over one input row: x (S major per R major; 1 when S = R and no rate is given),
# 10^(dS - dR) as the float64 SQL's power gives, and C_s, all in float64 as the formula says.
_X = "coalesce(exchange_rate, CASE WHEN sent_amount_currency = received_amount_currency THEN 1.0 END)"
_P10 = "power(10, sent_amount_decimals - received_amount_decimals)"
_CS = half_up(f"CAST(counterparty_fixed_fee_minor AS DOUBLE) * {_X} * {_P10}")
_MID = "CASE WHEN sent_amount_currency = received_amount_currency THEN 1.0 ELSE _rates.mid END"
# when the rate used was dated (NULL for a static rate)
_MID_AT = (
    "CASE WHEN sent_amount_currency <> received_amount_currency"
    " THEN nullif(_rates.valid_from, TIMESTAMPTZ '1970-01-01 00:00:00+00') END"
)
# x from the multipliers: gridApiMultiplier * counterpartyMultiplier = (1 - v) * 10^(dR - dS) / x
_MX = (
    "(1 - grid_api_variable_fee_rate) * power(10, received_amount_decimals - sent_amount_decimals)"
    " / nullif(grid_api_multiplier * counterparty_multiplier, 0)"
)
_COMPONENTS = (
    "coalesce(grid_api_fixed_fee_minor, 0) + coalesce(grid_api_variable_fee_amount_minor, 0)"
    f" + coalesce(platform_fees_minor, 0) + coalesce({_CS}, 0)"
)

_S, _R = "sent_decimals", "received_decimals"
_ROW = [
    *TRANSACTION,
    Out("settled_at", "settled_at"),
    Out("settlement_month", month_of("settled_at")),
    Out("sent_currency", "sent_amount_currency"),
    Out("sent_decimals", "sent_amount_decimals"),
    Out("received_currency", "received_amount_currency"),
    Out("received_decimals", "received_amount_decimals"),
    Out("sent_minor", "sent_amount_minor", _S),
    Out("received_minor", "received_amount_minor", _R),
    Out("exchange_rate", "_x"),
    Out("reference_rate", "_mid"),
    Out("reference_rate_at", "_mid_at"),
    Out("multiplier_rate", "_mx"),
    Out("multiplier_gap_rate", "_mx / _x - 1"),
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
    Out("fx_spread_rate", "_x / _mid - 1"),
    Out("fx_spread_cost_minor", "_spread_cost", _S),
    Out("total_cost_minor", "fees_minor + _spread_cost", _S),
    Out("take_rate", "CAST(fees_minor AS DOUBLE) / nullif(sent_amount_minor, 0)"),
    Out(
        "all_in_cost_rate",
        "CAST(fees_minor + _spread_cost AS DOUBLE) / nullif(sent_amount_minor, 0)",
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
    count_where("cross_currency_count", "sent_currency <> received_currency"),
    Out("with_reference_count", f"count(reference_rate) {_CROSS}"),
    count_where("multiplier_mismatch_count", "abs(multiplier_gap_rate) > 1e-6"),
    # cross-currency rows only: a group whose rows lack a reference has no margin (NULL), not 0
    Out(
        "fx_spread_cost_minor",
        f"CASE WHEN count(*) {_CROSS} = 0 THEN 0"
        f" ELSE CAST(sum(fx_spread_cost_minor) {_CROSS} AS BIGINT) END",
        _S,
    ),
    Out(
        "fx_spread_rate",
        # the rounded per-row margins over the amount at mid: agrees with fx_spread_cost_minor
        f"CAST(sum(fx_spread_cost_minor) {_CROSS} AS DOUBLE)"
        f" / sum(CASE WHEN fx_spread_cost_minor IS NOT NULL THEN {_CONVERTED} * reference_rate END)"
        f" {_CROSS}",
    ),
    # over the transfers whose fees are known, as `all_in_cost_rate` (`fees` is optional)
    Out(
        "take_rate",
        "CAST(sum(fees_minor) AS DOUBLE)"
        " / nullif(sum(sent_minor) FILTER (WHERE fees_minor IS NOT NULL), 0)",
    ),
    Out(
        "all_in_cost_rate",
        "CAST(sum(total_cost_minor) AS DOUBLE)"
        " / nullif(sum(sent_minor) FILTER (WHERE total_cost_minor IS NOT NULL), 0)",
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
    status: str | Sequence[str] | None = "COMPLETED",
    major: bool = False,
) -> pd.DataFrame:
    """Fees of outgoing transactions taken apart: integer minor units of the sending currency
    S (receiving currency R where named); `_rate` columns are fractions (0.0123 = 1.23 %).

        fees_minor                            = fees (the total the service reports)
        service_fixed_fee_minor          F    = rateDetails.gridApiFixedFee
        service_variable_fee_minor       V    = rateDetails.gridApiVariableFeeAmount
        platform_fee_minor               P    = platformFees
        counterparty_fixed_fee_received_minor C = rateDetails.counterpartyFixedFee  (in R)
        counterparty_fixed_fee_minor     C_s  = round_half_up(C * x * 10^(dS - dR))  (in S)
        components_minor                      = F + V + P + C_s
        residual_minor                        = fees - components   (0 when fully explained)
        take_rate                             = fees / sentAmount  (a group: over the rows
                                                whose fees are known; `fees` is optional)
        fx_spread_rate                        = x / mid - 1
        fx_spread_cost_minor                  = round_half_up(received * 10^(dS - dR) * (x - mid))
        total_cost_minor                      = fees + fx_spread_cost
        all_in_cost_rate                      = total_cost / sentAmount
        multiplier_rate                       = (1 - v) * 10^(dR - dS) / (gridApiMultiplier
                                                 * counterpartyMultiplier)
        multiplier_gap_rate                   = multiplier_rate / x - 1

    x is `exchange_rate` (S major units per R major unit), dS and dR the decimals each amount
    carries (no currency table), mid the corridor's reference rate from `reference_rates` at the
    transaction's creation (the latest rate of the series dated at or before it; 1 when S = R;
    unknown otherwise, making the spread, total cost and all-in cost NULL: the interface gives
    no mid-market rate; `with_reference_count` says how many of the `cross_currency_count`
    rows had one).
    `multiplier_rate` is x as the two rate multipliers imply it, a check on x
    (`multiplier_gap_rate`; `multiplier_mismatch_count` counts gaps above 1e-6), not a reference: both carry the same quote.
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

    `status` is COMPLETED by default: fees actually earned (a failed, expired or open transfer
    earns none); name other statuses, or None for every one. `by` groups by one or more of
    `corridor`, `rail`, `customer`, `month` (UTC month of creation), `settlement_month` (UTC
    month of `settledAt`), `status`, any per-row column or any input column; None gives one row
    per transaction. Groups are always also split by `sent_currency` (and by
    `received_currency` when grouping by corridor or receiving currency, which adds sums in R):
    no sum adds two currencies. Group rates are volume-weighted (sums divided by sums);
    `fx_spread_rate` of a group is over its cross-currency rows with a reference rate;
    `all_in_cost_rate` over rows with a known total. `major=True` adds a `_major` column
    (amount / 10^decimals, float) after each `_minor` one.
    """
    wanted = statuses(status, STATUSES)
    series = reference_series(reference_rates)
    src = source(data, "outgoing_fees", required=_REQUIRED)
    if len(series):  # only the corridors the input has: the rates go into the SQL's text
        pairs = src.distinct("sent_amount_currency", "received_amount_currency")
        series = series[[(s, r) in pairs for s, r in zip(series["s"], series["r"], strict=True)]]
    where = ["TRUE"]
    if src.has("type"):
        where.append("type = 'OUTGOING'")
    if wanted is not None:
        where.append(f"status IN {sql_strings(wanted)}")
    keys = src.keys(by, _ROW, {"rail": "rail"})
    receiving = bool(keys and _RECEIVING_KEYS.intersection(keys))
    fee = (
        f"SELECT _in.*, {_X} AS _x, {_MID} AS _mid, {_MID_AT} AS _mid_at, {_MX} AS _mx,"
        f" {_CS} AS _cs, {_COMPONENTS} AS _components,"
        f" {half_up(f'CAST(received_amount_minor AS DOUBLE) * {_P10} * ({_X} - ({_MID}))')}"
        " AS _spread_cost FROM _in ASOF LEFT JOIN _rates"
        " ON _rates.s = sent_amount_currency AND _rates.r = received_amount_currency"
        " AND _in.created_at >= _rates.valid_from"
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
        ("_rates", _rates_sql(series)),
        ("_fee", fee),
        ("_rows", rows_cte(_ROW, keys, "_fee")),
    ]
    return src.run(ctes, final)


#: The instant a static rate holds from.
_ALWAYS = pd.Timestamp("1970-01-01", tz="UTC")


def _rates_sql(series: pd.DataFrame) -> str:
    """A reference series (see `reference_series`) as rows (valid_from, s, r, mid): one JSON
    text of four columns, unpacked by DuckDB. A VALUES list of a year of daily rates (tens of
    thousands of rows) made a query of megabytes that took 10 s to parse and bind at each
    call; the JSON text is one token. Each rate is its `repr`, read back exactly by the cast."""
    if series.empty:
        return (
            "SELECT NULL::TIMESTAMPTZ AS valid_from, NULL::VARCHAR AS s, NULL::VARCHAR AS r,"
            " NULL::DOUBLE AS mid WHERE FALSE"
        )
    mids = series["mid"].astype(float)
    if not np.isfinite(mids).all():
        bad = float(mids[~np.isfinite(mids)].iloc[0])
        raise InvalidArgumentError("value", f"not a finite number: {bad!r}")
    at = pd.to_datetime(series["at"], utc=True).dt.strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")
    columns = {
        "at": at.tolist(),
        "s": series["s"].astype(str).tolist(),
        "r": series["r"].astype(str).tolist(),
        "mid": [repr(m) for m in mids.tolist()],
    }
    shape = sql_string(orjson.dumps({name: "VARCHAR[]" for name in columns}).decode())
    return (
        "SELECT CAST(unnest(j.at) AS TIMESTAMPTZ) AS valid_from, unnest(j.s) AS s,"
        " unnest(j.r) AS r, CAST(unnest(j.mid) AS DOUBLE) AS mid FROM (SELECT from_json("
        f"{sql_string(orjson.dumps(columns).decode())}, {shape}) AS j)"
    )


def reference_series(rates: ReferenceRates | None) -> pd.DataFrame:
    """Reference rates as a series (at, s, r, mid): checked, sorted, changes only, with the
    inverse of each corridor given only the other way round (vectorised: a year of daily rates
    for every corridor is a few hundred thousand rows)."""
    columns = ["at", "s", "r", "mid"]
    if rates is None:
        return pd.DataFrame(columns=columns)
    if isinstance(rates, pd.DataFrame):
        frame = _series_frame(rates)
    elif isinstance(rates, Mapping):
        rows = [(_ALWAYS, *_corridor(key), mid) for key, mid in rates.items()]
        frame = pd.DataFrame(rows, columns=columns)
    else:
        raise InvalidArgumentError(
            "reference_rates", f"give a mapping of corridors to rates or a DataFrame, not {rates!r}"
        )
    mid = pd.to_numeric(frame["mid"], errors="coerce")
    bad = frame[~(mid > 0)]
    if len(bad):
        first = bad.iloc[0]
        raise InvalidArgumentError(
            "reference_rates",
            f"a rate must be a number > 0, not {first['mid']!r} ({first['s']}→{first['r']})",
        )
    frame = frame.assign(mid=mid.astype(float))
    frame = frame.sort_values(["s", "r", "at"], kind="stable").drop_duplicates(
        ["s", "r", "at"], keep="last"
    )
    changed = frame.groupby(["s", "r"], sort=False)["mid"].shift().ne(frame["mid"])
    frame = frame[changed]
    given = frame["s"] + "\x00" + frame["r"]
    one_way = ~(frame["r"] + "\x00" + frame["s"]).isin(set(given))
    picked = frame[one_way]
    inverse = picked.assign(s=picked["r"], r=picked["s"], mid=1.0 / picked["mid"])
    return pd.concat([frame, inverse], ignore_index=True)[columns]


def _series_frame(rates: pd.DataFrame) -> pd.DataFrame:
    names = set(rates.columns)
    if "mid_rate" not in names or not (
        {"sent_currency", "received_currency"} <= names or "corridor" in names
    ):
        raise InvalidArgumentError(
            "reference_rates",
            "a DataFrame needs `mid_rate` and `sent_currency` + `received_currency` (or"
            f" `corridor`), and optionally `date`; it has {sorted(map(str, names))}",
        )
    if {"sent_currency", "received_currency"} <= names:
        sending, receiving = rates["sent_currency"], rates["received_currency"]
    else:
        pairs = {c: _corridor(c) for c in rates["corridor"].unique()}
        sending = rates["corridor"].map(lambda c: pairs[c][0])
        receiving = rates["corridor"].map(lambda c: pairs[c][1])
    if "date" in names:
        try:  # a naive date or time is UTC (as utc_timestamp reads one)
            at = pd.to_datetime(rates["date"], utc=True)
        except (ValueError, TypeError) as exc:
            raise InvalidArgumentError(
                "reference_rates", f"a `date` is not a date: {exc}"
            ) from None
    else:
        at = pd.Series(_ALWAYS, index=rates.index)
    return pd.DataFrame(
        {
            "at": at,
            "s": sending.astype(str),
            "r": receiving.astype(str),
            "mid": rates["mid_rate"],
        }
    ).reset_index(drop=True)


def _corridor(key: object) -> tuple[str, str]:
    if isinstance(key, tuple) and len(key) == 2:
        return str(key[0]), str(key[1])
    if isinstance(key, str):
        sending, sep, receiving = key.replace("/", "→").partition("→")
        if sep and sending and receiving:
            return sending, receiving
    raise InvalidArgumentError(
        "reference_rates", f"a corridor is 'USD→EUR' or ('USD', 'EUR'), not {key!r}"
    )
