"""The tables of the report's sections, made for reading: headers in words, money in each
currency's major units with its own decimals, months as 'Sep 2025' (partial ones marked),
durations in minutes, hours or days, instants to the second; wide results pivoted or split.
Every figure comes from an analysis helper over the period's rows."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pandas as pd

from paylens.analysis import (
    PNL_PARTS,
    card_summary,
    failure_breakdown,
    fees_collected,
    month_label,
    refund_summary,
    settlement_times,
    words,
)
from paylens.models import format_minor

from ._format import MISSING_LABEL, format_check, format_duration, format_instant, format_rate

if TYPE_CHECKING:
    from ._figures import Period


def records(frame: pd.DataFrame) -> Iterator[Any]:
    """A frame's rows as named tuples whose fields are any value (a helper's typed columns)."""
    return iter(frame.itertuples())


def _money(minor: Any, decimals: Any) -> str:
    if minor is None or pd.isna(minor):
        return MISSING_LABEL
    return format_minor(int(minor), None if decimals is None or pd.isna(decimals) else decimals)


def _rate(value: Any) -> str:
    return MISSING_LABEL if value is None or pd.isna(value) else format_rate(value)


def _duration(value: Any) -> str:
    return MISSING_LABEL if value is None or pd.isna(value) else format_duration(value)


def _label(value: Any, key: str) -> str:
    return f"unknown {words(key)}" if value is None or pd.isna(value) else str(value)


def checks(frame: pd.DataFrame) -> pd.DataFrame:
    """The tie-out checks: each with what was expected, what was found, and ✓ or ✗."""
    return pd.DataFrame(
        {
            "": [format_check(p) for p in frame["passed"]],
            "check": list(frame.index),
            "expected": [f"{v:,}" if isinstance(v, int) else str(v) for v in frame["expected"]],
            "found": [f"{v:,}" if isinstance(v, int) else str(v) for v in frame["actual"]],
        }
    )


def revenue_by_month(period: Period) -> pd.DataFrame:
    """Fees charged on transfers settled in the period, per sending currency (rows) and month
    (columns, 'Sep 2025', partial months marked), in each currency's major units: the 100-row
    long frame pivoted to one row a currency."""
    frame = fees_collected(
        period.settled_fees, by="settlement_month", reference_rates=period.reference_rates
    )
    if frame.empty:
        return pd.DataFrame({"currency": []})
    span = period.span()
    months = sorted(frame["settlement_month"].dropna().unique())
    names = {m: month_label(m, span) for m in months}
    order = frame.groupby("sent_currency")["transaction_count"].sum().sort_values(ascending=False)
    rows = []
    for code in order.index:
        part = frame[frame["sent_currency"] == code].set_index("settlement_month")
        decimals = part["sent_decimals"].iloc[0]
        row: dict[str, str] = {"currency": str(code)}
        for m in months:
            row[names[m]] = (
                _money(part.loc[m, "fees_minor"], decimals) if m in part.index else MISSING_LABEL
            )
        row["total"] = _money(part["fees_minor"].sum(), decimals)
        rows.append(row)
    return pd.DataFrame(rows)


def revenue_by_currency(period: Period) -> pd.DataFrame:
    """Per sending currency, of the transfers settled in the period: how many, the amount
    sent, fees charged by party,
    take rate and FX margin against the reference rates (unknown without them)."""
    frame = fees_collected(period.settled_fees, by=[], reference_rates=period.reference_rates)
    frame = frame.sort_values("transaction_count", ascending=False, kind="stable")
    rows = []
    for r in records(frame):
        d = r.sent_decimals
        rows.append(
            {
                "currency": r.sent_currency,
                "completed transfers": f"{r.transaction_count:,}",
                "sent": _money(r.sent_minor, d),
                "fees charged": _money(r.fees_minor, d),
                "service fees": _money(r.service_fixed_fee_minor + r.service_variable_fee_minor, d),
                "platform fee": _money(r.platform_fee_minor, d),
                "counterparty fee": _money(r.counterparty_fixed_fee_minor, d),
                "take rate": _rate(r.take_rate),
                "FX margin": _money(r.fx_margin_minor, d),
                "FX margin rate": _rate(r.fx_margin_rate),
            }
        )
    return pd.DataFrame(rows)


def platform_pnl(period: Period) -> pd.DataFrame:
    """The period's P&L (`Period.pnl`): per settlement month and currency, the platform's
    revenue, then what the service and the counterparty earned of what the senders paid, each
    column named by who earns it, in the currency's major units."""
    frame = period.pnl()
    span = period.span()
    rows = []
    for r in records(frame):
        row: dict[str, str] = {
            "settled in": month_label(pd.Timestamp(f"{r.period}-01"), span),
            "currency": str(r.currency),
            "transfers": f"{r.outgoing_count + r.incoming_count:,}",
        }
        for header, column in PNL_PARTS.items():
            row[header] = _money(getattr(r, column), r.decimals)
        if r.fx_margin_unknown_count:
            row["service FX margin"] += f" ({r.fx_margin_unknown_count:,} without a rate)"
        rows.append(row)
    return pd.DataFrame(rows, columns=["settled in", "currency", "transfers", *PNL_PARTS])


def settlement_by_rail(period: Period) -> pd.DataFrame:
    """Outgoing transfers per rail and funding source, the busiest first: completed and open
    counts, failure rate, Kaplan–Meier p50 and p90, the share settled later than expected,
    open ones overdue and instant transfers over a minute."""
    frame = settlement_times(
        period.fees, by=["rail", "source_type"], status_history=period.history, as_of=period.as_of
    ).sort_values("transaction_count", ascending=False, kind="stable")
    return pd.DataFrame(
        {
            "rail": [_label(v, "rail") for v in frame["rail"]],
            "funding source": [_label(v, "source_type") for v in frame["source_type"]],
            "completed": [f"{v:,}" for v in frame["completed_count"]],
            "open": [f"{v:,}" for v in frame["open_count"]],
            "failure rate": [_rate(v) for v in frame["failure_rate"]],
            "settled in (p50)": [_duration(v) for v in frame["p50_seconds"]],
            "settled in (p90)": [_duration(v) for v in frame["p90_seconds"]],
            "later than expected": [_rate(v) for v in frame["expected_breach_rate"]],
            "open past expected": [f"{v:,}" for v in frame["open_overdue_count"]],
            "instant over 1 min": [_rate(v) for v in frame["sla_breach_rate"]],
        }
    )


def failure_reasons(period: Period) -> pd.DataFrame:
    """Unsuccessful transfers per type, lifecycle and reason, the most frequent first."""
    frame = failure_breakdown(period.transactions)
    bad = frame[~frame["lifecycle"].isin(["open", "completed"])]
    counts = (
        bad.groupby(["type", "lifecycle", "failure_reason"], dropna=False)
        .size()
        .sort_values(ascending=False, kind="stable")
    )
    return pd.DataFrame(
        {
            "type": [str(t).lower() for t, _, _ in counts.index],
            "lifecycle": [words(str(life)) for _, life, _ in counts.index],
            "reason": [_label(r, "reason") for _, _, r in counts.index],
            "transfers": [f"{n:,}" for n in counts],
        }
    )


def refunds(period: Period) -> pd.DataFrame:
    """Refunded transfers per type, reason and currency: how many, how their refunds stand,
    and the median time a refund took."""
    frame = refund_summary(period.transactions, by="refund_reason")
    frame = frame[frame["refunded_count"] > 0]
    return pd.DataFrame(
        {
            "type": [str(t).lower() for t in frame["type"]],
            "refund reason": [_label(r, "refund_reason") for r in frame["refund_reason"]],
            "currency": list(frame["currency"]),
            "refunded": [f"{v:,}" for v in frame["refunded_count"]],
            "completed": [f"{v:,}" for v in frame["refund_completed_count"]],
            "pending": [f"{v:,}" for v in frame["refund_pending_count"]],
            "failed": [f"{v:,}" for v in frame["refund_failed_count"]],
            "median refund time": [_duration(v) for v in frame["p50_seconds"]],
        }
    )


def cards_by_category(period: Period, top: int = 15) -> pd.DataFrame:
    """The `top` merchant categories by transactions, in each currency: amounts authorized,
    net settled, refunded and still held, stale holds, over-settlements and exceptions."""
    frame = card_summary(period.cards, by="mcc", status_history=period.history)
    frame = frame.sort_values("transaction_count", ascending=False, kind="stable").head(top)
    rows = []
    for r in records(frame):
        d = r.decimals
        rows.append(
            {
                "merchant category": _label(r.mcc, "mcc"),
                "currency": r.currency,
                "transactions": f"{r.transaction_count:,}",
                "authorized": _money(r.authorized_minor, d),
                "net settled": _money(r.net_settled_minor, d),
                "refunded": _money(r.refunded_minor, d),
                "held": _money(r.open_hold_minor, d),
                "stale holds": f"{r.stale_hold_count:,}",
                "over-settled": f"{r.over_settled_count:,}",
                "exceptions": f"{r.exception_count:,}",
                "left unpulled": _money(r.exception_exposure_minor, d),
            }
        )
    return pd.DataFrame(rows)


def exceptions_by_kind(
    exceptions: pd.DataFrame, newest: int = 25
) -> list[tuple[str, pd.DataFrame]]:
    """The exceptions split by kind (a heading each, so no table carries a kind column), the
    `newest` of each, instants to the second."""
    parts = []
    for kind, rows in exceptions.groupby("kind", sort=True):
        shown = rows.head(newest)
        table = pd.DataFrame(
            {
                "transaction": list(shown["id"]),
                "status": list(shown["status"]),
                "created": [format_instant(v) for v in shown["created_at"]],
                "amount": list(shown["amount"]),
                "detail": list(shown["detail"]),
            }
        )
        more = f", the newest {newest}" if len(rows) > newest else ""
        parts.append((f"{kind} ({len(rows):,}{more})", table))
    return parts
