"""Settlement times of outgoing (or incoming) transactions, with open ones censored."""

from __future__ import annotations

from datetime import datetime, timedelta

import pandas as pd

from paylens.warehouse import Warehouse

from . import _lifecycle as lc
from ._common import (
    TRANSACTION,
    By,
    Data,
    History,
    Out,
    choice,
    count_where,
    fewest,
    instant,
    positive_duration,
    quote,
    rows_cte,
    seconds_between,
    source,
    sql_string,
    sql_timestamp,
)

SETTLED = "COMPLETED"
KINDS = ("OUTGOING", "INCOMING")
#: Quantiles estimated by Kaplan–Meier.
QUANTILES = (0.5, 0.9, 0.99)
#: Funding sources that wait for money to arrive before the rail starts.
FUNDING_WAIT = ("REALTIME_FUNDING",)

_REQUIRED = ("id", "status", "created_at")
_USES = (
    *_REQUIRED,
    *lc.USES,
    "settled_at",
    "updated_at",
    "customer_id",
    "payment_rail",
    "source_type",
    "sent_amount_currency",
    "received_amount_currency",
    "expected_settlement_at",
    "settlement_timeline_seconds",
)

_SETTLED_AT = f"CASE WHEN status = '{SETTLED}' THEN coalesce(settled_at, _seen.at) END"
_SETTLED_FROM = (
    f"CASE WHEN status = '{SETTLED}' AND settled_at IS NOT NULL THEN 'settled_at'"
    f" WHEN status = '{SETTLED}' AND _seen.at IS NOT NULL THEN 'status_history' END"
)
# settled by as_of: a settlement after as_of was not known then, so the row is open at as_of
_DONE = "(_lifecycle = 'completed' AND _settled_at <= _as_of)"
_OPEN = "(_lifecycle = 'open' OR (_lifecycle = 'completed' AND _settled_at > _as_of))"
_SECONDS = seconds_between("created_at", "_settled_at")
_AGE = seconds_between("created_at", "_as_of")
_LATE = seconds_between("expected_settlement_at", "_settled_at")
_INSTANT = "(expected_settlement_at IS NULL AND settlement_timeline_seconds IS NOT NULL)"
_PREFUNDED = f"coalesce(source_type NOT IN ({', '.join(map(sql_string, FUNDING_WAIT))}), TRUE)"


def _breach(done: str, open_: str) -> str:
    """TRUE: breached (settled late, or open past the bound); FALSE: settled in time; NULL:
    not settled and still within the bound, or no bound."""
    return f"CASE WHEN {_DONE} THEN {done} WHEN {_OPEN} AND {open_} THEN TRUE END"


_ROW = [
    *TRANSACTION,
    Out("source_type", "source_type"),
    *lc.columns("_kind"),
    Out("settled_at", "_settled_at"),
    Out("settled_at_source", "_settled_from"),
    Out("settlement_seconds", f"CASE WHEN {_DONE} THEN {_SECONDS} END"),
    Out("open_seconds", f"CASE WHEN {_OPEN} THEN {_AGE} END"),
    Out("expected_settlement_at", "expected_settlement_at"),
    Out("settlement_timeline_seconds", "settlement_timeline_seconds"),
    Out("late_seconds", f"CASE WHEN {_DONE} THEN {_LATE} END"),
    Out("overdue", f"CASE WHEN {_OPEN} THEN coalesce(_as_of > expected_settlement_at, FALSE) END"),
    Out("expected_breach", _breach(f"{_LATE} > 0", "_as_of > expected_settlement_at")),
    Out(
        "timeline_breach",
        _breach(
            f"{_SECONDS} > settlement_timeline_seconds", f"{_AGE} > settlement_timeline_seconds"
        ),
    ),
    Out("instant", _INSTANT),
    Out(
        "sla_breach",
        f"CASE WHEN {_INSTANT} AND {_PREFUNDED} THEN"
        f" {_breach(f'{_SECONDS} > _sla', f'{_AGE} > _sla')} END",
    ),
    # Kaplan–Meier observation: the time, and whether it is a settlement (else censored)
    Out("_km_seconds", f"CASE WHEN {_DONE} THEN {_SECONDS} WHEN {_OPEN} THEN {_AGE} END"),
    Out("_km_settled", _DONE),
]


def _rate(column: str) -> Out:
    return Out(
        f"{column}_rate",
        f"count(*) FILTER (WHERE {column}) / nullif(count({column}), 0)",
    )


_METRICS = [
    *lc.COUNTS,
    count_where("from_history_count", "settled_at_source = 'status_history'"),
    count_where("time_unknown_count", "lifecycle = 'completed' AND settled_at IS NULL"),
    Out("expected_count", "count(expected_breach)"),
    count_where("expected_breach_count", "expected_breach"),
    _rate("expected_breach"),
    count_where("open_overdue_count", "overdue"),
    Out("late_p50_seconds", "quantile_cont(late_seconds, 0.5) FILTER (WHERE late_seconds > 0)"),
    Out("late_max_seconds", "max(late_seconds) FILTER (WHERE late_seconds > 0)"),
    Out("timeline_count", "count(timeline_breach)"),
    count_where("timeline_breach_count", "timeline_breach"),
    _rate("timeline_breach"),
    Out("sla_count", "count(sla_breach)"),
    count_where("sla_breach_count", "sla_breach"),
    _rate("sla_breach"),
    Out("open_max_seconds", "max(open_seconds)"),
]


def settlement_times(
    data: Data,
    by: By = None,
    *,
    type: str = "OUTGOING",
    as_of: datetime | str | None = None,
    instant_sla: timedelta = timedelta(seconds=60),
    status_history: History = None,
) -> pd.DataFrame:
    """Time from creation to settlement, in seconds, with open transfers censored at `as_of`.

        settlement_seconds = settledAt - createdAt          (settled by as_of)
        open_seconds       = as_of - createdAt              (open at as_of: censored)
        p50/p90/p99_seconds: Kaplan–Meier quantiles over settled and open transfers
        expected_breach    = settled after expectedSettlementAt, or open past it at as_of
        failure_rate       = (failed + refunded + refund_pending + refund_failed) / resolved

    Every transaction has a `lifecycle` (see `paylens.analysis.LIFECYCLES`). Settlement time is
    the time to COMPLETED: completed transfers are events, open ones are censored at their age
    at `as_of` (a transfer settled after `as_of` is open then), and transfers that ended
    otherwise (failed, expired, rejected, cancelled) never settle, so they are left out of the
    times and counted in the rates. The Kaplan–Meier p-quantile is the smallest settlement time
    t with 1 - S(t) >= p, S(t) = prod over settlement times t_i <= t of (1 - d_i / n_i) (d_i
    settling at t_i, n_i settled or open with a time >= t_i); NULL when the open transfers leave
    S above 1 - p (not yet knowable). So a recent period is not flattered by its open tail.

    Breach rates are breaches / transfers whose outcome against the bound is known: settled
    ones, and open ones already past it (overdue); open ones within it are not counted yet.
    `expected_breach` uses `expectedSettlementAt`; `timeline_breach` uses
    `settlementTimelineSeconds` from creation. Instant rails carry no `expectedSettlementAt`
    and a timeline of seconds from quote execution, which creation-based times cannot meet
    (they include the wait for confirmation): their SLA measure is `sla_breach`, settled later
    than `instant_sla` (default 60 s) after creation, over instant transfers whose funding does
    not wait for money to arrive (source not REALTIME_FUNDING; unknown sources count), so the
    figure measures the rail and the service, not the payer. `sla_count` says how many it is over.

    When a completed transaction lacks `settledAt`, the status history supplies it: the
    record's `updatedAt` when COMPLETED was first observed (or the observation time), an upper
    bound (`settled_at_source` tells which).

    `by` groups by `rail`, `source_type` (the funding source), `corridor`, `customer`, `month`
    (UTC month of creation), `lifecycle`, `status`, any per-row column or any input column;
    None gives one row per transaction. `type` is OUTGOING (rail and expectations from the
    `outgoing_fees` table; source and refund from `transactions`) or INCOMING. `as_of` (a naive
    time is read as UTC) is by default, for a Warehouse, the time of its latest sync in the
    service's clock (`Warehouse.synced_at`: open transfers were open then), or the newest
    instant in the data when that is later or the data is a frame; never the wall clock;
    transactions created after it are left out. `status_history` replaces the history a
    Warehouse holds; a DataFrame input has none unless given one.
    """
    kind = choice("type", type, KINDS)
    when = instant("as_of", as_of)
    sla = positive_duration("instant_sla", instant_sla).total_seconds()
    table = "outgoing_fees" if kind == "OUTGOING" else "transactions"
    synced = data.synced_at() if isinstance(data, Warehouse) and when is None else None
    src = source(data, table, required=_REQUIRED, status_history=status_history)
    where = f"type = {sql_string(kind)}" if src.has("type") else "TRUE"
    src.check_as_of(when)
    keys = src.keys(by, _ROW, {"funding": "source_type"})
    newest = (
        "(SELECT greatest(max(created_at), max(updated_at), max(settled_at) FILTER"
        f" (WHERE status = '{SETTLED}')) FROM _all)"
    )
    latest = (
        sql_timestamp(when)
        if when is not None
        # open transfers were still open when the sync read them (records stored since
        # with later times move it on)
        else f"greatest({sql_timestamp(synced)}, {newest})"
        if synced is not None
        else newest
    )
    ctes = [
        ("_all", src.input_cte(_USES, where)),
        # a record without `createdAt` (optional) is kept: counted, its time unknown
        ("_in", f"SELECT * FROM _all WHERE created_at IS NULL OR created_at <= {latest}"),
        # history only for the completed transactions missing settledAt (few, or none)
        ("_need", f"SELECT id FROM _in WHERE status = '{SETTLED}' AND settled_at IS NULL"),
        (
            "_seen",
            "SELECT id, min(coalesce(record_updated_at, observed_at)) AS at FROM _history"
            f" WHERE status = '{SETTLED}' AND id IN (SELECT id FROM _need) GROUP BY id",
        ),
        (
            "_set",
            f"SELECT _in.*, {sql_string(kind)} AS _kind, {lc.LIFECYCLE} AS _lifecycle,"
            f" {_SETTLED_AT} AS _settled_at,"
            f" {_SETTLED_FROM} AS _settled_from, {latest} AS _as_of, {sla!r} AS _sla"
            " FROM _in LEFT JOIN _seen ON _seen.id = _in.id",
        ),
        ("_rows", rows_cte(_ROW, keys, "_set")),
    ]
    if keys is None:
        return src.run(ctes, f"SELECT {visible(_ROW)} FROM _rows ORDER BY created_at, id")
    ctes += kaplan_meier(keys)
    return src.run(ctes, with_quantiles(keys, _METRICS, split=len(lc.COUNTS)))


def kaplan_meier(keys: list[str]) -> list[tuple[str, str]]:
    """CTEs ending in `_km`: per group of `keys`, the Kaplan–Meier p50/p90/p99 of `_rows`'
    `_km_seconds` (an event where `_km_settled`, else censored).

    One sort serves every window (descending time within the group): n, the rows still at risk
    at t (time >= t), d, the events at t, and one row per distinct time carrying its factor
    1 - d/n; S(t) is the product of the factors of the times <= t."""
    cols = "".join(f"{quote(k)}, " for k in keys)
    part = f"PARTITION BY {', '.join(map(quote, keys))} " if keys else ""
    # over fewer observations than `fewest(q)` (settled and censored), a quantile is NA
    quantiles = ", ".join(
        f"CASE WHEN count(*) >= {fewest(q)} THEN min(t) FILTER (WHERE d > 0 AND s <= {1 - q!r}"
        f" + 1e-9) END AS p{round(q * 100)}_seconds"
        for q in QUANTILES
    )
    peers = "RANGE BETWEEN CURRENT ROW AND CURRENT ROW"
    return [
        (
            "_km_r",
            f"SELECT {cols}_km_seconds AS t,"
            " count(*) OVER (w RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS n,"
            f" count(*) OVER (w {peers}) AS c,"
            f" count(*) FILTER (WHERE _km_settled) OVER (w {peers}) AS d,"
            " row_number() OVER w AS r"
            " FROM _rows WHERE _km_seconds IS NOT NULL"
            f" WINDOW w AS ({part}ORDER BY _km_seconds DESC)",
        ),
        (
            "_km_s",
            "SELECT *, product(CASE WHEN r = n - c + 1 THEN 1 - d / n ELSE 1 END)"
            f" OVER ({part}ORDER BY t DESC RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING)"
            " AS s FROM _km_r",
        ),
        ("_km", f"SELECT {cols}{quantiles} FROM _km_s GROUP BY ALL"),
    ]


def visible(outputs: list[Out]) -> str:
    """The quoted names of the outputs a result shows (not the `_`-prefixed working ones)."""
    return ", ".join(quote(o.name) for o in outputs if not o.name.startswith("_"))


def with_quantiles(keys: list[str], metrics: list[Out], split: int | None = None) -> str:
    """The group metrics of `_rows` joined with the group's Kaplan–Meier quantiles (`_km`; NULL
    keys match NULL), the quantiles placed after the first `split` metrics (default: last)."""
    names = ", ".join(map(quote, keys))
    items = ", ".join(f"{m.sql} AS {quote(m.name)}" for m in metrics)
    head = f"{names}, " if keys else ""
    grouped = f"SELECT {head}{items} FROM _rows" + (f" GROUP BY {names}" if keys else "")
    on = " AND ".join(f"_g.{quote(k)} IS NOT DISTINCT FROM _km.{quote(k)}" for k in keys) or "TRUE"
    quantiles = [f"_km.p{round(q * 100)}_seconds" for q in QUANTILES]
    cut = len(metrics) if split is None else split
    shown = [f"_g.{quote(k)}" for k in keys] + [f"_g.{quote(m.name)}" for m in metrics[:cut]]
    shown += quantiles + [f"_g.{quote(m.name)}" for m in metrics[cut:]]
    return (
        f"SELECT {', '.join(shown)} FROM ({grouped}) AS _g LEFT JOIN _km ON {on}"
        f" ORDER BY {names or '1'}"
    )
