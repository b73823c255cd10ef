"""Plans: what a bulk action would do to each selected item (a transaction, or a wallet session
for `plan_revoke_sessions`), and why, before anything is sent. A plan is made from the warehouse
and its journal only; it sends no request."""

from __future__ import annotations

import hashlib
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson
import pandas as pd

from paylens._select import select_ids
from paylens.errors import InvalidArgumentError
from paylens.models import format_minor

from ._actions import ACTIONS, ELIGIBLE, FINAL_REFUSALS, Action, receiver_decisions
from ._apply import apply_plan

if TYPE_CHECKING:
    from paylens.client import Client
    from paylens.warehouse import Warehouse


Selection = Sequence[str] | pd.DataFrame | str


@dataclass
class Plan:
    """What a bulk action will do: every selected item with its eligibility and the reason,
    totals per currency, and a fingerprint that names exactly this plan.

    Review it (it renders as a table in Jupyter, as text in a shell), then `apply(client)`.
    """

    warehouse: Warehouse
    action: Action
    items: pd.DataFrame
    body: dict[str, Any] = field(default_factory=dict)

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the action, its body and every item with its planned state."""
        rows = self.items[[*self.action.state, "eligibility"]].astype(str).values.tolist()
        text = orjson.dumps(
            {"action": self.action.name, "body": self.body, "items": rows},
            option=orjson.OPT_SORT_KEYS,
        )
        return hashlib.sha256(text).hexdigest()

    @property
    def eligible(self) -> pd.DataFrame:
        return self.items[self.items["eligibility"] == ELIGIBLE]

    @property
    def totals(self) -> pd.DataFrame:
        """Per currency: items selected, eligible, and the eligible amount in minor units
        (items without an amount: selected and eligible only)."""
        frame = self.items.assign(is_eligible=self.items["eligibility"] == ELIGIBLE)
        if "amount_minor" not in frame.columns:
            return pd.DataFrame(
                {"selected": [len(frame)], "eligible": [int(frame["is_eligible"].sum())]}
            )
        frame = frame.assign(eligible_minor=frame["amount_minor"].where(frame["is_eligible"], 0))
        grouped = frame.groupby(["currency", "decimals"], dropna=False, observed=True)
        return grouped.agg(
            selected=("id", "size"),
            eligible=("is_eligible", "sum"),
            eligible_amount_minor=("eligible_minor", "sum"),
        ).reset_index()

    def summary(self) -> str:
        counts = self.items["eligibility"].value_counts()
        noun = self.action.table.replace("wallet_", "")
        lines = [
            f"plan to {self.action.name} — {len(self.eligible):,} of {len(self.items):,} selected "
            f"{noun} eligible (fingerprint {self.fingerprint[:12]})"
        ]
        if self.warehouse.is_sandbox:
            lines[0] = "[SANDBOX DATA] " + lines[0]
        lines += [f"  {n:6,}  {reason}" for reason, n in counts.items()]
        totals = self.totals
        if "currency" in totals.columns:
            for total in totals.to_dict("records"):
                if total["eligible"]:
                    amount = format_minor(
                        int(total["eligible_amount_minor"]), int(total["decimals"])
                    )
                    lines.append(
                        f"  {total['currency']}: {total['eligible']:,} eligible, "
                        f"{amount} {total['currency']}"
                    )
        return "\n".join(lines)

    def __str__(self) -> str:
        shown = self.items[list(self.action.shown)]
        return self.summary() + "\n\n" + shown.to_string(index=False, max_rows=50)

    def __repr__(self) -> str:
        return f"Plan({self.action.name}, {len(self.eligible)}/{len(self.items)} eligible, {self.fingerprint[:12]})"

    def _repr_html_(self) -> str:
        head = "<br>".join(html.escape(line) for line in self.summary().splitlines())
        shown = self.items[list(self.action.shown)]
        return f"<div><p>{head}</p>{shown.to_html(index=False, max_rows=50)}</div>"

    def apply(
        self,
        client: Client,
        *,
        concurrency: int = 4,
        rate_limit: float | None = None,
        max_items: int | None = None,
        max_total_minor: Mapping[str, int] | None = None,
        dry_run: bool = False,
        progress: bool = True,
        refresh: bool = True,
        resend_unknown: bool = False,
    ) -> pd.DataFrame:
        """Act on the eligible items at most once each; see `paylens.ops.apply_plan`."""
        return apply_plan(
            self,
            client,
            concurrency=concurrency,
            rate_limit=rate_limit,
            max_items=max_items,
            max_total_minor=max_total_minor,
            dry_run=dry_run,
            progress=progress,
            refresh=refresh,
            resend_unknown=resend_unknown,
        )


def _selected_ids(wh: Warehouse, select: Selection, table: str = "transactions") -> list[str]:
    if isinstance(select, str):
        return select_ids(wh, select, table)
    if isinstance(select, pd.DataFrame):
        if "id" not in select.columns:
            raise InvalidArgumentError("select", "a DataFrame selection needs an `id` column")
        return [str(i) for i in select["id"]]
    if isinstance(select, list | tuple):
        return [str(i) for i in select]
    raise InvalidArgumentError(
        "select", f"expected {table} ids, a DataFrame with `id`, or a SQL filter"
    )


def make_plan(
    wh: Warehouse, action_name: str | Action, select: Selection, body: dict[str, Any]
) -> Plan:
    action = ACTIONS[action_name] if isinstance(action_name, str) else action_name
    ids = list(dict.fromkeys(_selected_ids(wh, select, action.table)))
    known = wh.sql(
        f"SELECT {action.columns} FROM {wh.current_rows(action.table)}"
        " WHERE id IN (SELECT unnest(?::VARCHAR[]))",
        [ids],
    )
    done = wh.journal_outcomes(action.name, (action.verb, *FINAL_REFUSALS), ids)
    decided = receiver_decisions(wh) if action.receiver_decides else {}
    by_id = {str(r["id"]): {str(k): v for k, v in r.items()} for r in known.to_dict("records")}
    rows: list[dict[str, Any]] = []
    for tid in ids:
        row = by_id.get(tid)
        if row is None:
            rows.append({"id": tid, "eligibility": "skipped: not found in the warehouse"})
            continue
        verdict = action.eligibility(row)
        if tid in decided:
            verdict = f"skipped: decided by the webhook receiver ({decided[tid]})"
        elif done.get(tid) == action.verb:
            verdict = f"skipped: already {action.verb} (journal)"
        elif tid in done:  # asked again, the service would only refuse again
            verdict = f"skipped: refused by the service before ({done[tid]}, journal)"
        rows.append({**row, "eligibility": verdict})
    items = pd.DataFrame(rows, columns=[*known.columns, "eligibility"])
    for column in known.columns:
        items[column] = items[column].astype(known[column].dtype)
    items["eligibility"] = items["eligibility"].astype("string[pyarrow]")
    return Plan(wh, action, items, body)


def plan_cancel(wh: Warehouse, select: Selection, *, reason: str | None = None) -> Plan:
    """Plan cancelling pending bank transfers (ACH push/pull, wire; spec §4.1). `select` is a
    list of transaction ids, a DataFrame with an `id` column, or a SQL filter over the
    `transactions` table (e.g. "payment_rail = 'ACH' AND status = 'PENDING'")."""
    return make_plan(wh, "cancel", select, {} if reason is None else {"reason": reason})


def plan_approve(wh: Warehouse, select: Selection) -> Plan:
    """Plan approving agent-initiated transactions waiting for platform approval. A payment
    the webhook receiver decided is skipped, saying so (`receiver_decisions`)."""
    return make_plan(wh, "approve", select, {})


def plan_reject(wh: Warehouse, select: Selection, *, reason: str | None = None) -> Plan:
    """Plan rejecting agent-initiated transactions waiting for platform approval. A payment
    the webhook receiver decided is skipped, saying so (`receiver_decisions`)."""
    return make_plan(wh, "reject", select, {} if reason is None else {"reason": reason})


def plan_confirm_receipt(wh: Warehouse, select: Selection) -> Plan:
    """Plan confirming receipt delivery (now) for transactions not confirmed yet."""
    return make_plan(wh, "confirm_receipt", select, {})
