"""Month-end close: a closed period is a stored snapshot of the platform's P&L that never
changes; later changes to its transfers show as adjustments in the period they happened in.

    from paylens.close import close_month, adjustments
    closed = close_month(wh, "2025-09", reference_rates=rates)   # stored in the warehouse
    adjustments(wh, reference_rates=rates)  # what moved in closed periods since, and when

Reads the warehouse only (no request to the service)."""

from __future__ import annotations

import json
import re
from typing import Any

import pandas as pd

from ..analysis._fees import ReferenceRates
from ..analysis._pnl import PNL_COLUMNS, pnl_by_period, pnl_rows
from ..errors import InvalidArgumentError
from ..warehouse import Warehouse

__all__ = [
    "FINAL_STATUSES",
    "adjustments",
    "close_month",
    "closed_figures",
    "closed_tables",
]

#: Statuses after which a transfer is no longer open (an accrual).
FINAL_STATUSES = ("COMPLETED", "FAILED", "EXPIRED", "REJECTED", "CANCELLED")
_ACCRUALS = ["id", "type", "status", "currency", "amount_minor"]
_FIGURES = [c for c in PNL_COLUMNS if c.endswith(("_minor", "_count"))]


def _bounds(month: str) -> tuple[pd.Timestamp, pd.Timestamp]:
    if not isinstance(month, str) or not re.fullmatch(r"\d{4}-(0[1-9]|1[0-2])", month):
        raise InvalidArgumentError("month", f"must be YYYY-MM, got {month!r}")
    start = pd.Timestamp(f"{month}-01", tz="UTC")
    return start, start + pd.offsets.MonthBegin(1)


def _snapshot(wh: Warehouse, month: str, rates: ReferenceRates | None) -> str:
    _, end = _bounds(month)
    rows = pnl_rows(wh, reference_rates=rates)
    rows = rows[rows["period"] == month]
    figures = pnl_by_period(rows)
    open_rows = wh.sql(
        f"SELECT {', '.join(_ACCRUALS)} FROM transactions"
        " WHERE type IN ('INCOMING', 'OUTGOING') AND created_at < ? AND (status NOT IN ('COMPLETED', 'FAILED', 'EXPIRED',"
        " 'REJECTED', 'CANCELLED') OR COALESCE(settled_at, updated_at) >= ?)"
        " ORDER BY id",
        [end.to_pydatetime(), end.to_pydatetime()],
    )
    payload = {
        "period": month,
        "figures": _records(figures),
        "transfers": _records(rows),
        "accruals": _records(open_rows),
    }
    return json.dumps(payload, sort_keys=True, separators=(",", ":"))


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [
        {
            str(k): (None if pd.isna(v) else (int(v) if not isinstance(v, str) else v))
            for k, v in r.items()
        }
        for r in frame.to_dict("records")
    ]


def close_month(wh: Warehouse, month: str, *, reference_rates: ReferenceRates | None = None) -> str:
    """Close `month` (YYYY-MM): its P&L per currency (`figures`), what each settled transfer
    contributed (`transfers`) and the transfers open at its end (`accruals`, created before
    the end and not final by then), stored in the warehouse as JSON text and returned. A
    period closed before returns its stored snapshot, byte for byte, whatever changed since."""
    _bounds(month)
    return wh.store_closed_period(month, _snapshot(wh, month, reference_rates))


def closed_figures(snapshot: str) -> pd.DataFrame:
    """A stored snapshot's P&L as a frame (the columns of `platform_pnl`)."""
    return pd.DataFrame(json.loads(snapshot)["figures"], columns=PNL_COLUMNS)


def closed_tables(wh: Warehouse, month: str) -> dict[str, pd.DataFrame]:
    """A closed month's stored snapshot as its three tables, for `analysis.export`: `figures`
    (as `closed_figures`), `transfers` and `accruals`, each labelled (`attrs["source"]`) with
    the period and the warehouse's data. Raises `InvalidArgumentError` when `month` is not
    closed (nothing is closed here: `close_month` does that)."""
    _bounds(month)
    snapshot = wh.closed_periods().get(month)
    if snapshot is None:
        raise InvalidArgumentError(
            "month", f"{month} is not closed (close it first: close_month or `paylens close`)"
        )
    stored = json.loads(snapshot)
    tables = {
        "figures": closed_figures(snapshot),
        "transfers": pd.DataFrame(stored["transfers"]),
        "accruals": pd.DataFrame(stored["accruals"], columns=_ACCRUALS),
    }
    for frame in tables.values():
        frame.attrs["source"] = f"closed period {month} of {wh.label}"
    return tables


def adjustments(wh: Warehouse, *, reference_rates: ReferenceRates | None = None) -> pd.DataFrame:
    """What changed in closed periods since they closed: one row per transfer whose
    contribution to a closed period differs now, in the period the change happened in (the
    UTC month of the transfer's `updatedAt`), with the closed period, the reason and the
    difference of every figure (now - closed). Per closed period and currency, the
    adjustments sum to the period's figures now minus its closed figures."""
    now = pnl_rows(wh, reference_rates=reference_rates).set_index("id")
    info = wh.sql("SELECT id, status, updated_at FROM transactions").set_index("id")
    out: list[dict[str, Any]] = []
    for period, snapshot in wh.closed_periods().items():
        closed = {r["id"]: r for r in json.loads(snapshot)["transfers"]}
        current = now[now["period"] == period]
        ids = sorted(set(closed) | set(current.index))
        for tid in ids:
            was = closed.get(tid)
            is_ = current.loc[tid].to_dict() if tid in current.index else None
            delta = {c: (is_ or {}).get(c, 0) - (was or {}).get(c, 0) for c in _FIGURES}
            if not any(delta.values()):
                continue
            status = str(info.loc[tid, "status"]) if tid in info.index else "removed"
            if was is None:
                reason = "settled late into the closed period"
            elif is_ is None:
                reason = f"left the closed period (now {status})"
            else:
                reason = "figures changed"
            when = info.loc[tid, "updated_at"] if tid in info.index else pd.NaT
            ref = is_ or was or {}
            out.append(
                {
                    "period": pd.Timestamp(when).tz_convert("UTC").strftime("%Y-%m")
                    if pd.notna(when)
                    else None,
                    "closed_period": period,
                    "transfer_id": tid,
                    "reason": reason,
                    "currency": ref["currency"],
                    "decimals": int(ref["decimals"]),
                    **{c: int(v) for c, v in delta.items()},
                }
            )
    columns = [
        "period",
        "closed_period",
        "transfer_id",
        "reason",
        "currency",
        "decimals",
        *_FIGURES,
    ]
    return pd.DataFrame(out, columns=columns)
