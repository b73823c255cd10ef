"""The period a report covers: its rows, read once, and every figure the notebook shows."""

from __future__ import annotations

import functools
import html
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, cast

import pandas as pd

from paylens._version import __version__
from paylens.analysis import (
    FAILURE_LIFECYCLES,
    LIFECYCLES,
    RESOLVED_LIFECYCLES,
    card_summary,
    failure_breakdown,
    fee_breakdown,
    fees_collected,
    platform_pnl,
    refund_summary,
    settlement_times,
    words,
)
from paylens.connection import Banner, sandbox_warehouse
from paylens.errors import InvalidArgumentError, TieOutError
from paylens.models import format_minor
from paylens.warehouse import SANDBOX_LABEL, Warehouse

from ._balances import rollforward_check
from ._bounds import instant
from ._format import MISSING_LABEL, _when, format_check, format_duration, format_rate
from ._tables import records

#: Each transaction table: the column naming a row's own currency, and what its rows are read
#: with: `transactions` keep their JSON only when refunded (the refund's times are in it),
#: outgoing fees get their funding source and refund from `transactions`, card transactions
#: the currency of the internal account funding them.
_TABLES: dict[str, tuple[str, str]] = {
    "transactions": (
        "currency",
        "SELECT * EXCLUDE (raw, raw_hash),"
        " CASE WHEN refund_status IS NOT NULL THEN raw END AS raw FROM transactions",
    ),
    "outgoing_fees": (
        "sent_amount_currency",
        "SELECT f.*, t.updated_at, t.source_type, t.refund_status, t.refund_reason"
        " FROM outgoing_fees AS f"
        " LEFT JOIN transactions AS t ON t.id = f.id",
    ),
    "card_transactions": (
        "authorized_amount_currency",
        "SELECT c.*, a.balance_currency AS funding_currency,"
        " a.balance_decimals AS funding_decimals FROM card_transactions AS c"
        " LEFT JOIN internal_accounts AS a ON a.id = c.account_id",
    ),
}


@dataclass(frozen=True, repr=False)
class Header:
    """The run header: a banner saying where the data comes from, then facts and row counts."""

    banner: Banner
    facts: dict[str, str]
    counts: pd.DataFrame

    def __repr__(self) -> str:
        lines = [str(self.banner), *(f"{k}: {v}" for k, v in self.facts.items())]
        return "\n".join([*lines, self.counts.to_string(index=False)])

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th><td style='text-align:left'>"
            f"{html.escape(v)}</td></tr>"
            for k, v in self.facts.items()
        )
        counts = self.counts.to_html(index=False, border=0)
        return f"<div>{self.banner._repr_html_()}<table>{rows}</table><p>{counts}</p></div>"


class Period:
    """The warehouse rows created in [start, end) (UTC; None: unbounded), of one currency or
    all (a row's own currency: sent for outgoing, received for incoming, authorized for
    cards). Its frames carry the warehouse's source label, so tables and plots say sandbox.

    Money earned has one definition: a completed transfer counts in the period it settled in
    (`analysis.settlement_period`), whenever it was created. The headline, the revenue tables,
    the summary's money and the P&L read `settled_fees` and `settled` (completed transfers
    settled in [start, end)), and the checks tie them out; the rest (failures, settlement
    times, cards, exceptions) is about the transfers created in the period."""

    #: a CSV of mid-market rates given to `open` (None: see `reference_rates`)
    rates_file: Path | None = None

    def __init__(
        self,
        wh: Warehouse,
        start: date | datetime | str | None = None,
        end: date | datetime | str | None = None,
        currency: str | None = None,
    ) -> None:
        self.wh = wh
        self.start = instant(start)
        self.end = instant(end)
        # currency codes are upper case on the wire; `usd` means USD
        self.currency = currency.strip().upper() if currency and currency.strip() else None
        if self.start and self.end and self.start >= self.end:
            raise InvalidArgumentError(
                "start", f"the period is empty: start {start} is not before end {end}"
            )
        self.transactions = self._read("transactions")
        self.fees = self._read("outgoing_fees")
        self.cards = self._read("card_transactions")
        #: completed outgoing transfers settled in the period (their fee rows)
        self.settled_fees = self._read("outgoing_fees", on="settled_at")
        #: completed transfers settled in the period
        self.settled = self._read("transactions", on="settled_at")
        self._pnl: pd.DataFrame | None = None
        where, params = self._where("transactions")
        self.history = wh.sql(
            "SELECT * FROM status_history WHERE id IN"
            f" (SELECT id FROM transactions WHERE {where}) ORDER BY observed_at, id",
            params,
        )

    @classmethod
    def open(
        cls,
        db: str | os.PathLike[str] | None,
        start: date | datetime | str | None = None,
        end: date | datetime | str | None = None,
        currency: str | None = None,
        reference_rates: str | os.PathLike[str] | None = None,
    ) -> Period:
        """The period of the warehouse file `db`, opened read-only; None: a small embedded
        sandbox synced for this run (how the notebook runs when nobody passes a database).
        `reference_rates`: a CSV file of mid-market rates (`date`, `sent_currency`,
        `received_currency`, `mid_rate`) for the FX margin."""
        path = sandbox_warehouse() if db is None else Path(db)
        period = cls(Warehouse(path, read_only=True), start, end, currency)
        if reference_rates is not None:
            period.rates_file = Path(reference_rates)
        return period

    def _where(
        self, table: str, on: str = "created_at", currency: bool = True
    ) -> tuple[str, list[Any]]:
        """The rows of `table` whose `on` instant is in the period (`settled_at`: completed
        transfers only), in its currency (unless `currency=False`)."""
        # a transaction the service no longer has is not counted, nor the rows hanging off it
        clauses = [f"id IN (SELECT id FROM {self.wh.current_rows('transactions')})"]
        params: list[Any] = []
        if on == "settled_at":
            clauses.append("status = 'COMPLETED' AND settled_at IS NOT NULL")
        if self.start is not None:
            clauses.append(f"{on} >= ?")
            params.append(self.start)
        if self.end is not None:
            clauses.append(f"{on} < ?")
            params.append(self.end)
        if currency and self.currency is not None:
            clauses.append(f"{_TABLES[table][0]} = ?")
            params.append(self.currency)
        return " AND ".join(clauses), params

    def _read(self, table: str, on: str = "created_at") -> pd.DataFrame:
        where, params = self._where(table, on)
        rows = _TABLES[table][1]
        return self.wh.sql(f"SELECT * FROM ({rows}) WHERE {where} ORDER BY created_at, id", params)

    @functools.cached_property
    def as_of(self) -> pd.Timestamp | None:
        """What settlement times are measured to: when the warehouse last read the service, in
        the service's clock (`Warehouse.synced_at`; open transfers were open then), or the
        newest instant of its transactions when that is later (records stored since)."""
        newest = self.wh.sql(
            "SELECT greatest(max(created_at), max(updated_at), max(settled_at)) AS t"
            " FROM transactions"
        )["t"].iloc[0]
        found = [pd.Timestamp(t) for t in (self.wh.synced_at(), newest) if t is not None]
        found = [t for t in found if not pd.isna(t)]
        return max(found) if found else None

    def pnl(self) -> pd.DataFrame:
        """The platform's P&L of the period (`analysis.platform_pnl`'s rows and columns): the
        transfers that settled in [start, end) per the transactions table, summed per
        settlement month and currency (a period that is not whole months gives partial
        months). In one currency: the P&L rows in that currency (an incoming transfer's fees
        are in its sender's currency)."""
        if self._pnl is None:
            where, params = self._where("transactions", "settled_at", currency=False)
            ids = self.wh.sql(f"SELECT id FROM transactions WHERE {where}", params)["id"]
            pnl = platform_pnl(self.wh, reference_rates=self.reference_rates, transfers=ids)
            if self.currency is not None:
                pnl = pnl[pnl["currency"] == self.currency].reset_index(drop=True)
            self._pnl = pnl
            self._pnl.attrs["source"] = self.transactions.attrs.get("source")
        return self._pnl

    @property
    def reference_rates(self) -> pd.DataFrame | None:
        """Mid rates for the FX margin: for sandbox data, the series the sandbox trades around
        over the period's days; otherwise None (the interface gives no mid-market rate: the
        revenue table then says the margin is unknown)."""
        if self.rates_file is not None:
            return read_reference_rates(self.rates_file)
        # a transfer settled in the period may have been created (quoted) before it
        created = pd.concat([self.transactions["created_at"], self.settled["created_at"]])
        if not self.wh.is_sandbox or created.empty:
            return None
        from paylens.sandbox import mid_rate_series

        return mid_rate_series(created.min(), created.max())

    # -- the header -------------------------------------------------------------------------------

    def run_header(self) -> Header:
        """Version, data source (sandbox data said loudly), when the data was pulled, the
        period and the row counts."""
        wh = self.wh
        runs = wh.sync_runs()
        pulled = runs[runs["status"] == "succeeded"].tail(1)
        last = wh.last_sync()
        source = wh.source or "nowhere (never synced)"
        if wh.is_sandbox:
            banner = Banner(
                f"{SANDBOX_LABEL} — simulated by paylens' sandbox, not the service", True
            )
        else:
            banner = Banner(f"service data from {source}", False)
        created = self.transactions["created_at"]
        facts = {
            "paylens": __version__,
            "data source": f"{SANDBOX_LABEL} from {source}" if wh.is_sandbox else source,
            "database": str(wh.path),
            "data pulled": (
                f"{_when(pulled['finished_at'].iloc[0])} (sync #{pulled['run_id'].iloc[0]}, "
                f"{pulled['mode'].iloc[0]})"
                if len(pulled)
                else "never (no successful sync)"
            ),
            "last sync": f"#{last['run_id']} {last['status']}" if last else "none",
            "period": (
                f"{_when(self.start) if self.start else 'the first record'} to "
                f"{_when(self.end) + ' (exclusive)' if self.end else 'the last record'}; "
                f"data from {_when(created.min())} to {_when(created.max())}"
            ),
            "currency": self.currency or "every currency, each on its own",
            "report run": _when(datetime.now(UTC)),
        }
        rows = [
            *(
                (
                    f"{kind.lower()} transactions",
                    int((self.transactions["type"] == kind).sum()),
                    self._total("transactions", f"type = '{kind}'"),
                )
                for kind in ("INCOMING", "OUTGOING", "CARD")
            ),
            ("status changes", len(self.history), self._total("status_history")),
            ("customers", None, self._total("customers")),
            ("records rejected by sync", None, self._total("rejected_records")),
        ]
        counts = pd.DataFrame(
            [
                (name, MISSING_LABEL if n is None else f"{n:,}", f"{total:,}")
                for name, n, total in rows
            ],
            columns=["rows", "in the period", "in the warehouse"],
        )
        return Header(banner, facts, counts)

    def _total(self, table: str, condition: str = "TRUE") -> int:
        return int(self.wh.sql(f"SELECT count(*) AS n FROM {table} WHERE {condition}")["n"].iloc[0])

    # -- tie-outs ---------------------------------------------------------------------------------

    def tie_outs(self) -> pd.DataFrame:
        """Figures that must agree, each computed two ways: `expected`, `actual` and `passed`
        per `check` (the index). `assert_tie_outs` raises when any did not."""
        txs, fees, cards = self.transactions, self.fees, self.cards
        kinds = txs["type"].value_counts()
        settlement = settlement_times(fees, by=[], status_history=self.history, as_of=self.as_of)
        failures = failure_breakdown(txs)
        card_rows = card_summary(cards, by="status", status_history=self.history)
        fee_rows = fee_breakdown(fees, status=None)
        helper_volume = fee_rows.groupby("sent_currency")["sent_minor"].sum()
        sql_volume = fees.groupby("sent_amount_currency")["sent_amount_minor"].sum()
        volume_gaps = helper_volume.sub(sql_volume, fill_value=0).ne(0).sum()
        last_run = self.wh.last_sync()
        checks: list[tuple[str, object, object]] = [
            (
                "the outgoing fees table holds every outgoing transaction",
                int(kinds.get("OUTGOING", 0)),
                len(fees),
            ),
            (
                "the card transactions table holds every card transaction",
                int(kinds.get("CARD", 0)),
                len(cards),
            ),
            (
                "every outgoing transaction has one lifecycle",
                len(fees),
                int(settlement[[f"{name}_count" for name in LIFECYCLES]].sum().sum()),
            ),
            (
                "failure breakdown covers every incoming and outgoing transaction",
                int(kinds.get("INCOMING", 0) + kinds.get("OUTGOING", 0)),
                len(failures),
            ),
            (
                "card transactions by status add up",
                len(cards),
                int(card_rows["transaction_count"].sum()),
            ),
            (
                "fee components explain every fee (transactions with a residual)",
                0,
                int((fee_rows["residual_minor"] != 0).sum()),
            ),
            (
                "sum of fee residuals, every currency",
                0,
                int(fee_rows["residual_minor"].abs().sum()),
            ),
            ("currencies whose sent volume differs from the warehouse", 0, int(volume_gaps)),
            (
                "amounts without a currency",
                0,
                int((txs["amount_minor"].notna() & txs["currency"].isna()).sum()),
            ),
            (
                "last sync succeeded",
                "succeeded",
                str(last_run["status"]) if last_run else "never synced",
            ),
        ]
        checks += self._pnl_checks()
        checks.append(rollforward_check(self))
        frame = pd.DataFrame(checks, columns=["check", "expected", "actual"]).set_index("check")
        frame["passed"] = [e == a for _, e, a in checks]
        frame.attrs["source"] = txs.attrs.get("source")
        return frame

    def _pnl_checks(self) -> list[tuple[str, object, object]]:
        """The headline and the revenue table (read from the fee rows settled in the period)
        against the P&L (the transfers settled in it): the same money, one definition."""
        pnl = self.pnl()
        outgoing = pnl[pnl["outgoing_count"] > 0]
        charged = outgoing[list(FEE_PARTS)].sum(axis=1)
        pnl_fees = charged.groupby(outgoing["currency"]).sum()
        pnl_platform = outgoing.groupby("currency")["platform_revenue_minor"].sum()
        head = fee_breakdown(self.settled_fees, by=[], status="COMPLETED")
        head_fees = head.groupby("sent_currency")["fees_minor"].sum()
        head_platform = head.groupby("sent_currency")["platform_fee_minor"].sum()
        table = fees_collected(
            self.settled_fees, by="settlement_month", reference_rates=self.reference_rates
        )
        cells = {
            (pd.Timestamp(m).strftime("%Y-%m"), str(c)): (int(f), int(p), int(x or 0))
            for m, c, f, p, x in zip(
                table["settlement_month"],
                table["sent_currency"],
                table["fees_minor"],
                table["platform_fee_minor"],
                table["fx_margin_minor"].fillna(0),
                strict=True,
            )
        }
        pnl_cells = {
            (str(r.period), str(r.currency)): (
                int(f),
                int(r.platform_revenue_minor),
                int(r.service_fx_margin_minor),
            )
            for r, f in zip(records(outgoing), charged, strict=True)
        }
        return [
            (
                "headline fees = P&L fees, per currency (currencies that differ)",
                0,
                _differ(head_fees, pnl_fees),
            ),
            (
                "headline platform revenue = P&L, per currency (currencies that differ)",
                0,
                _differ(head_platform, pnl_platform),
            ),
            (
                "revenue table = P&L, per settlement month and currency (cells that differ)",
                0,
                sum(cells.get(k) != pnl_cells.get(k) for k in set(cells) | set(pnl_cells)),
            ),
        ]

    @staticmethod
    def assert_tie_outs(checks: pd.DataFrame) -> str:
        """'all N tie-out checks passed', or a `TieOutError` naming every check that failed."""
        failed = checks[~checks["passed"]]
        if len(failed):
            lines = [
                f"  {r.Index}: expected {r.expected}, got {r.actual}" for r in failed.itertuples()
            ]
            raise TieOutError(
                f"TIE-OUT FAILED: {len(failed)} of {len(checks)} checks\n" + "\n".join(lines)
            )
        return f"all {len(checks)} tie-out checks passed"

    def span(self) -> tuple[pd.Timestamp, pd.Timestamp] | None:
        """The instants the period covers: its bounds, or where the data starts and ends
        (which months it covers only in part)."""
        created = self.transactions["created_at"]
        if created.empty and (self.start is None or self.end is None):
            return None
        first = pd.Timestamp(self.start) if self.start else pd.Timestamp(created.min())
        last = (
            pd.Timestamp(self.end) - pd.Timedelta(microseconds=1)
            if self.end
            else pd.Timestamp(created.max())
        )
        return first, last

    # -- the summary ------------------------------------------------------------------------------

    def summary(self, checks: pd.DataFrame) -> Summary:
        """The report's first screen: where the data comes from, the period, the checks and
        exceptions in a line, and per currency (never added across currencies): transfers
        settled in the period, the amounts sent and received, fees charged and the platform's
        revenue (from the P&L), the outgoing failure rate, settlement p50 and p90 and refunds still owed (pending)
        or failed."""
        header = self.run_header()
        passed = int(checks["passed"].sum())
        exceptions = len(self.exceptions())
        span = self.span()
        line = {
            "period": MISSING_LABEL
            if span is None
            else f"{_when(span[0])} to {_when(span[1])}"
            + ("" if self.start or self.end else " (all the data)"),
            "data pulled": header.facts["data pulled"],
            "checks": f"{format_check(passed == len(checks))} {passed} of {len(checks)} passed",
            "exceptions to look at": f"{exceptions:,}",
        }
        return Summary(header.banner, line, self.per_currency())

    def per_currency(self) -> pd.DataFrame:
        """The summary's table: one row per currency, the busiest first, every cell text."""
        txs = self.transactions
        places: dict[str, int] = {}
        figures: dict[str, dict[str, Any]] = {}

        def put(code: Any, decimals: Any, **values: Any) -> None:
            if code is None or pd.isna(code):
                return
            if decimals is not None and not pd.isna(decimals):
                places.setdefault(str(code), int(decimals))
            row = figures.setdefault(str(code), {})
            for name, value in values.items():
                row[name] = row.get(name, 0) + value if isinstance(value, int) else value

        for (code, kind), part in self.settled.groupby(["currency", "type"]):
            amount = sum(int(v) for v in part["amount_minor"].dropna())
            decimals = part["decimals"].dropna()
            d = decimals.iloc[0] if len(decimals) else None
            if kind == "OUTGOING":
                put(code, d, completed=len(part), sent=amount)
            elif kind == "INCOMING":
                put(code, d, completed=len(part), received=amount)
        for r in records(fees_collected(self.settled_fees, by=[])):
            put(r.sent_currency, r.sent_decimals, fees=int(r.fees_minor))
        for r in records(self.pnl()):
            if r.outgoing_count:
                put(r.currency, r.decimals, revenue=platform_revenue(r))
        lives = failure_breakdown(txs, by=[], type="OUTGOING")
        for r in records(lives.drop_duplicates(["currency"])):
            put(r.currency, r.decimals, failure_rate=r.failure_rate)
        times = settlement_times(
            self.fees, by=["sent_amount_currency"], status_history=self.history, as_of=self.as_of
        )
        for r in records(times):
            put(r.sent_amount_currency, None, p50=r.p50_seconds, p90=r.p90_seconds)
        refunds = refund_summary(txs, by=[])
        for r in records(refunds):
            put(
                r.currency,
                r.decimals,
                refunds_pending=int(r.refund_pending_count),
                refunds_failed=int(r.refund_failed_count),
            )

        def money(code: str, value: Any) -> str:
            if not isinstance(value, int):
                return MISSING_LABEL
            if code not in places:  # no record said how many decimals: never guessed
                return f"{value:,} minor units"
            return format_minor(value, places[code])

        def count(value: Any) -> str:
            return f"{value:,}" if isinstance(value, int) else MISSING_LABEL

        def rate(value: Any) -> str:
            return MISSING_LABEL if value is None or value is pd.NA else format_rate(value)

        def duration(value: Any) -> str:
            return MISSING_LABEL if value is None or value is pd.NA else format_duration(value)

        rows = {
            code: {
                "completed transfers": count(f.get("completed")),
                "sent": money(code, f.get("sent")),
                "received": money(code, f.get("received")),
                "fees charged": money(code, f.get("fees")),
                "platform revenue": money(code, f.get("revenue")),
                "outgoing failure rate": rate(f.get("failure_rate")),
                "settlement p50": duration(f.get("p50")),
                "settlement p90": duration(f.get("p90")),
                "refunds pending": count(f.get("refunds_pending")),
                "refunds failed": count(f.get("refunds_failed")),
            }
            for code, f in figures.items()
        }
        frame = pd.DataFrame.from_dict(rows, orient="index").reindex(columns=list(_SUMMARY))
        order = txs["currency"].value_counts()
        frame = frame.loc[sorted(frame.index, key=lambda c: (-order.get(c, 0), c))]
        frame.index.name = "currency"
        frame.attrs["source"] = txs.attrs.get("source")
        return frame.reset_index()

    # -- headline figures -----------------------------------------------------------------------

    def headline(self) -> pd.DataFrame:
        """Per currency (never added across currencies): incoming transfers settled in the
        period and the amount received, outgoing ones settled in it with the amount sent,
        their fees and the platform's fee, card transactions created in it and their net
        settled amount, in major units of that currency."""
        txs = self.transactions
        settled = self.settled
        incoming = settled[(settled["type"] == "INCOMING") & settled["currency"].notna()]
        received = incoming.groupby(["currency", "decimals"], dropna=False)["amount_minor"].agg(
            ["size", "sum"]
        )
        fees = fee_breakdown(self.settled_fees, by=[], status="COMPLETED")
        cards = card_summary(self.cards, by=[], status_history=self.history)
        # integer figures per currency, summed over every group a helper splits it into (card
        # transactions by the currency of the account paying them, say): formatted at the end
        totals: dict[str, dict[str, int]] = {}
        places: dict[str, int] = {}  # a currency's decimals, from any record that gives them

        def add(currency: Any, decimals: Any, **figures: Any) -> None:
            code = str(currency)
            if decimals is not None and not pd.isna(decimals):
                places.setdefault(code, int(decimals))
            row = totals.setdefault(code, {})
            for name, value in figures.items():
                row[name] = row.get(name, 0) + int(value)

        def shown(code: str, name: str, value: int) -> str:
            if name.endswith("_count"):
                return f"{value:,}"
            if code not in places:  # no record said how many decimals: never guessed
                return f"{value:,} minor units"
            return format_minor(value, places[code])

        for key, got in received.iterrows():
            currency, decimals = cast(tuple[str, int], key)  # the (currency, decimals) index
            add(currency, decimals, incoming_count=got["size"], received=got["sum"])
        for f in fees.itertuples():
            add(f.sent_currency, f.sent_decimals, outgoing_count=f.transaction_count)
            add(f.sent_currency, f.sent_decimals, sent=f.sent_minor, fees=f.fees_minor)
            add(f.sent_currency, f.sent_decimals, platform=f.platform_fee_minor)
        for c in cards.itertuples():
            add(
                c.currency,
                c.decimals,
                card_count=c.transaction_count,
                net_settled=c.net_settled_minor,
            )
        columns = {
            "incoming_count": "incoming completed",
            "received": "received",
            "outgoing_count": "outgoing completed",
            "sent": "sent",
            "fees": "fees",
            "platform": "platform revenue",
            "card_count": "card transactions",
            "net_settled": "card net settled",
        }
        rows = {
            code: {name: shown(code, name, value) for name, value in figures.items()}
            for code, figures in totals.items()
        }
        frame = pd.DataFrame.from_dict(rows, orient="index").reindex(columns=list(columns))
        # every cell is text; a kind with no row in the period is an empty (float) column
        frame = frame.astype(object).fillna(MISSING_LABEL).rename(columns=columns)
        frame.index.name = "currency"
        order = txs["currency"].value_counts()
        frame = frame.loc[sorted(frame.index, key=lambda c: (-order.get(c, 0), c))]
        frame.attrs["source"] = txs.attrs.get("source")
        return frame

    def rates(self) -> pd.DataFrame:
        """Failure rates (failed and failed after debit / resolved: open transfers are in no
        rate), the Kaplan–Meier median and p90 time from creation to settlement of outgoing
        transfers (open ones censored), the share settled later than expected (overdue open ones
        count as late), open transfers, refunds, stale card holds and exceptions; counts and
        times, so every currency is in them."""
        rows = failure_breakdown(self.transactions)
        settled = settlement_times(self.fees, by=[], status_history=self.history, as_of=self.as_of)
        cards = card_summary(self.cards, by=[], status_history=self.history)
        first = settled.iloc[0] if len(settled) else pd.Series(dtype=object)

        nan = float("nan")

        def failure_rate(kind: str) -> str:
            lives = rows.loc[rows["type"] == kind, "lifecycle"]
            resolved = int(lives.isin(RESOLVED_LIFECYCLES).sum())
            failed = int(lives.isin(FAILURE_LIFECYCLES).sum())
            return format_rate(failed / resolved if resolved else nan)

        figures = {
            "outgoing failure rate": failure_rate("OUTGOING"),
            "incoming failure rate": failure_rate("INCOMING"),
            "median outgoing settlement time": format_duration(first.get("p50_seconds", nan)),
            "p90 outgoing settlement time": format_duration(first.get("p90_seconds", nan)),
            "outgoing settled later than expected": format_rate(
                first.get("expected_breach_rate", float("nan"))
            ),
            "open outgoing transfers": f"{int(first.get('open_count', 0)):,}",
            "cancelled outgoing transfers": f"{int(first.get('cancelled_count', 0)):,}",
            "stale card holds": f"{int(cards['stale_hold_count'].sum()):,}",
            "card transactions in EXCEPTION": f"{int(cards['exception_count'].sum()):,}",
        }
        frame = pd.DataFrame({"figure": list(figures), "value": list(figures.values())})
        frame.attrs["source"] = self.transactions.attrs.get("source")
        return frame.set_index("figure")

    # -- exceptions ---------------------------------------------------------------------------

    def exceptions(self) -> pd.DataFrame:
        """One row per thing to look at: failed transactions, outgoing ones settled later than
        expected or pending past their expectation, stale card holds, card transactions in
        EXCEPTION and those settled in another currency than authorized; newest first."""
        txs = self.transactions
        settled = settlement_times(self.fees, status_history=self.history, as_of=self.as_of)
        cards = card_summary(self.cards, status_history=self.history)
        lives = failure_breakdown(txs)
        amounts = txs.set_index("id")[["currency", "decimals", "amount_minor"]]
        parts = [
            _rows(
                "failed transaction",
                lives[lives["lifecycle"].isin(FAILURE_LIFECYCLES)],
                lambda r: (
                    f"{words(r.lifecycle)}: "
                    + ("no reason given" if pd.isna(r.failure_reason) else str(r.failure_reason))
                ),
            ),
            _rows(
                "settled later than expected",
                # `expected_breach` also counts open transfers past the bound (as late, for
                # the rate): listed here they would show twice, once as "– after"
                settled[settled["late_seconds"].fillna(0) > 0],
                lambda r: f"{format_duration(r.late_seconds)} after the expected time",
            ),
            _rows(
                "open past its expected settlement",
                settled[settled["overdue"].fillna(False)],
                lambda r: f"open for {format_duration(r.open_seconds)}",
            ),
            _rows(
                "stale card hold",
                cards[cards["stale_hold"]],
                lambda r: f"{r.status}, held {format_duration(r.hold_age_seconds)}",
            ),
            _rows(
                "card transaction in EXCEPTION",
                cards[cards["exception"]],
                lambda r: f"{r.pull_count} pull(s), {r.pull_pending_count} pending",
            ),
            _rows(
                "card settled in another currency",
                cards[cards["currency_mismatch"]],
                lambda r: "settled or refunded amount not in the authorized currency",
            ),
        ]
        frame = pd.concat(parts, ignore_index=True)
        frame = frame.join(amounts, on="id")
        frame["amount"] = [
            MISSING_LABEL if pd.isna(m) else f"{format_minor(m, d)} {c}"
            for m, d, c in zip(
                frame["amount_minor"], frame["decimals"], frame["currency"], strict=True
            )
        ]
        frame = frame.sort_values(["kind", "created_at"], ascending=[True, False], kind="stable")
        frame = frame[["kind", "id", "status", "created_at", "amount", "detail"]]
        frame.attrs["source"] = txs.attrs.get("source")
        return frame.reset_index(drop=True)


#: The P&L columns whose sum is the fees the senders paid on outgoing transfers.
FEE_PARTS = (
    "platform_revenue_minor",
    "service_fees_minor",
    "counterparty_fees_minor",
    "unattributed_fees_minor",
)


def _differ(left: pd.Series, right: pd.Series) -> int:
    """How many keys of two integer series (a currency each) differ, a key missing one side
    counting as 0 there."""
    return int(left.astype("int64").sub(right.astype("int64"), fill_value=0).ne(0).sum())


#: The summary's columns after the currency.
_SUMMARY = (
    "completed transfers",
    "sent",
    "received",
    "fees charged",
    "platform revenue",
    "outgoing failure rate",
    "settlement p50",
    "settlement p90",
    "refunds pending",
    "refunds failed",
)


def platform_revenue(row: Any) -> int:
    """The platform's revenue of a row of the P&L (`analysis.platform_pnl`), in minor units:
    the platform's own fees on completed transfers (the service's and the counterparty's fees
    are theirs). The one place the summary takes it from."""
    return int(row.platform_revenue_minor)


class Summary(Header):
    """The report's first screen: the banner, the facts in one line, then the table per
    currency (`counts`)."""

    def __repr__(self) -> str:
        facts = " · ".join(f"{k}: {v}" for k, v in self.facts.items())
        return "\n".join([str(self.banner), facts, self.counts.to_string(index=False)])

    def _repr_html_(self) -> str:
        from ._format import show
        from ._page import STYLE

        facts = " · ".join(
            f"<b>{html.escape(k)}:</b> {html.escape(v)}" for k, v in self.facts.items()
        )
        table = (
            "<p>No transactions in this period.</p>"
            if self.counts.empty
            else show(self.counts).to_html()
        )
        return (
            f'{STYLE}<div class="paylens" id="summary">{self.banner._repr_html_()}'
            f'<p class="facts">{facts}</p>{table}</div>'
        )


def _rows(kind: str, frame: pd.DataFrame, detail: Callable[[Any], Any]) -> pd.DataFrame:
    """Exception rows of one kind: id, status, creation time and a detail per row."""
    created = "created_at" if "created_at" in frame.columns else "authorized_at"
    return pd.DataFrame(
        {
            "kind": kind,
            "id": frame["id"].astype(str).to_numpy(),
            "status": frame["status"].astype(str).to_numpy(),
            "created_at": frame[created].to_numpy(),
            "detail": [str(detail(r)) for r in frame.itertuples()],
        }
    )


def exceptions_summary(exceptions: pd.DataFrame) -> pd.DataFrame:
    """How many exceptions of each kind."""
    return exceptions.groupby("kind").size().rename("count").to_frame()


#: Columns of a reference-rates file.
RATE_COLUMNS = ("date", "sent_currency", "received_currency", "mid_rate")


def read_reference_rates(path: Path) -> pd.DataFrame:
    """A CSV of mid-market rates, one row per day and corridor (the shape of
    `paylens.sandbox.mid_rate_series`), checked; a clear error names what is wrong."""
    from paylens.errors import InvalidArgumentError

    try:
        frame = pd.read_csv(path, dtype={"sent_currency": str, "received_currency": str})
    except (OSError, ValueError) as exc:
        raise InvalidArgumentError("reference_rates", f"cannot read {path}: {exc}") from None
    missing = [c for c in RATE_COLUMNS if c not in frame.columns]
    if missing:
        raise InvalidArgumentError(
            "reference_rates", f"{path} lacks the column(s) {', '.join(missing)}"
        )
    frame["date"] = pd.to_datetime(frame["date"]).dt.date
    frame.attrs["source"] = f"reference mid rates from {path.name}"
    return frame[list(RATE_COLUMNS)]
