"""Applying a plan: act on its eligible items only, each re-read just before acting, under a
bounded concurrency and request-rate budget, with caps, a progress bar and the journal."""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from paylens.client import Call, Client
from paylens.client._policy import RateBudget
from paylens.errors import APIConnectionError, APIError, NotFoundError, PaylensError
from paylens.models import Transaction

from . import _journal
from ._plan import ELIGIBLE, Plan

if TYPE_CHECKING:
    from paylens.warehouse import Warehouse

logger = logging.getLogger("paylens.ops")

#: What each refusal of the service means for the item, by status and code.
_REFUSALS = {
    (409, "TRANSACTION_NOT_CANCELLABLE"): "not_cancellable",
    (409, "TRANSACTION_NOT_PENDING_PLATFORM_APPROVAL"): "not_pending_approval",
    (404, None): "not_found",
    (400, None): "rejected_type",
}


@dataclass
class _Outcome:
    id: str
    outcome: str
    http_status: int | None = None
    error_code: str | None = None
    message: str | None = None
    attempts: int = 0
    request: str | None = None


def _refusal(error: APIError) -> str:
    return (
        _REFUSALS.get((error.status, error.code)) or _REFUSALS.get((error.status, None)) or "failed"
    )


def _within_caps(
    plan: Plan, max_items: int | None, max_total_minor: Mapping[str, int] | None
) -> tuple[list[dict[str, Any]], list[_Outcome]]:
    """The eligible items to act on, in plan order, and those beyond a cap."""
    acting, over = [], []
    spent: defaultdict[str, int] = defaultdict(int)
    for row in plan.eligible.to_dict("records"):
        currency, amount = row.get("currency"), int(row.get("amount_minor") or 0)
        limit = (max_total_minor or {}).get(currency)
        if max_items is not None and len(acting) >= max_items:
            over.append(
                _Outcome(row["id"], "skipped_over_cap", message=f"beyond max_items={max_items}")
            )
        elif limit is not None and spent[currency] + amount > limit:
            over.append(
                _Outcome(
                    row["id"],
                    "skipped_over_cap",
                    message=f"beyond max_total_minor[{currency}]={limit}",
                )
            )
        else:
            spent[currency] += amount
            acting.append(row)
    return acting, over


def apply_plan(
    plan: Plan,
    client: Client,
    *,
    concurrency: int = 4,
    rate_limit: float | None = None,
    max_items: int | None = None,
    max_total_minor: Mapping[str, int] | None = None,
    dry_run: bool = False,
    progress: bool = True,
    refresh: bool = True,
) -> pd.DataFrame:
    """Act on the plan's eligible items and return one row per selected item with its outcome.

    - Each item is re-read just before acting and skipped (`skipped_changed`) when it moved
      since the plan (a transaction's status or `updated_at`; a session no longer active); an
      item the journal records as done is never sent again.
    - `concurrency` requests at once (default 4), at most `rate_limit` per second; 429s are
      waited out by the client's retry policy (`Retry-After`).
    - Caps: `max_items`, and `max_total_minor` per currency (minor units); items beyond them
      are `skipped_over_cap`.
    - `dry_run=True` sends nothing: each row shows the request that would be sent.
    - Outcomes: the action's success (`cancelled`, `approved`, `rejected`, `confirmed`,
      `revoked`), `not_cancellable` / `not_pending_approval` (409), `rejected_type` (400),
      `not_found` (404), `failed` (any other error, with status, code, message and attempts),
      or a skip.
    - With `refresh`, the answers are stored in the warehouse, which then shows the new states.

    The frame's `attrs["all_as_planned"]` tells whether every item acted on succeeded.
    """
    wh = plan.warehouse
    action = plan.action
    fingerprint = plan.fingerprint
    acting, outcomes = _within_caps(plan, max_items, max_total_minor)
    skipped = [
        _Outcome(r["id"], "skipped", message=r["eligibility"])
        for r in plan.items.to_dict("records")
        if r["eligibility"] != ELIGIBLE
    ]
    if dry_run:
        kind = plan.action.kind or TRANSACTIONS
        outcomes += [
            _Outcome(r["id"], "would_send", request=kind.describe(plan, r)) for r in acting
        ]
        return _frame(plan, skipped + outcomes, fingerprint, dry_run=True)
    ids = [r["id"] for r in acting]
    done = _journal.succeeded(wh, action.name, ids)
    budget_before = client.rate_budget
    if rate_limit:
        client.rate_budget = RateBudget(rate_limit)
    bar = _bar(progress, len(acting), action.name)
    answers: list[dict[str, Any]] = []
    lock = threading.Lock()

    def act(row: dict[str, Any]) -> _Outcome:
        outcome = _act(plan, client, fingerprint, row, done)
        with lock:
            if outcome.outcome == _journal.SUCCESSES[action.name] and isinstance(
                outcome.request, dict
            ):
                answers.append(outcome.request)
                outcome.request = None
        bar.update(1)
        return outcome

    try:
        with ThreadPoolExecutor(
            max_workers=max(1, concurrency), thread_name_prefix="paylens-ops"
        ) as pool:
            outcomes += list(pool.map(act, acting))
    finally:
        bar.close()
        client.rate_budget = budget_before
    if refresh and answers:
        (action.kind or TRANSACTIONS).store(wh, answers)
    return _frame(plan, skipped + outcomes, fingerprint, dry_run=False)


class _Transactions:
    """Transactions as the items of a bulk action: re-read by id, acted on by a POST."""

    def changed(self, client: Client, row: dict[str, Any]) -> str | None:
        current = client.transactions.get(row["id"])
        return f"changed since the plan: now {current.status}" if _changed(row, current) else None

    def send(self, plan: Plan, client: Client, row: dict[str, Any]) -> tuple[int, Any]:
        path = f"transactions/{row['id']}/{plan.action.path}"
        response = client.request(Call("POST", path, lambda r: r, json=plan.body))
        return response.status_code, response.json()

    def store(self, wh: Warehouse, answers: list[Any]) -> None:
        wh.store_transactions(answers)

    def describe(self, plan: Plan, row: dict[str, Any]) -> str:
        body = f" {plan.body}" if plan.body else ""
        return f"POST /transactions/{row['id']}/{plan.action.path}{body}"


TRANSACTIONS = _Transactions()


def _act(
    plan: Plan, client: Client, fingerprint: str, row: dict[str, Any], done: set[str]
) -> _Outcome:
    wh: Warehouse = plan.warehouse
    action = plan.action
    kind = action.kind or TRANSACTIONS
    tid = row["id"]
    if tid in done:
        return _Outcome(tid, "skipped_journal", message=f"already {action.verb} (journal)")
    try:
        message = kind.changed(client, row)
    except NotFoundError as exc:
        return _Outcome(tid, "not_found", exc.status, exc.code, exc.message, exc.attempts)
    except (APIError, APIConnectionError) as exc:
        return _failed(tid, exc)
    if message is not None:
        _journal.record(wh, fingerprint, action.name, tid, "skipped_changed", message)
        return _Outcome(tid, "skipped_changed", message=message)
    entry = _journal.begin(wh, fingerprint, action.name, tid)
    try:
        status, answer = kind.send(plan, client, row)
    except APIError as exc:
        outcome = _Outcome(tid, _refusal(exc), exc.status, exc.code, exc.message, exc.attempts)
    except (APIConnectionError, PaylensError) as exc:
        outcome = _failed(tid, exc)
    else:
        outcome = _Outcome(tid, action.verb, status, attempts=1, request=answer)
    _journal.finish(
        wh,
        entry,
        outcome.outcome,
        http_status=outcome.http_status,
        error_code=outcome.error_code,
        message=outcome.message,
        attempts=outcome.attempts,
    )
    return outcome


def _failed(tid: str, exc: Exception) -> _Outcome:
    status = getattr(exc, "status", None)
    return _Outcome(
        tid,
        "failed",
        status,
        getattr(exc, "code", None),
        str(exc)[:500],
        getattr(exc, "attempts", 1),
    )


def _changed(row: dict[str, Any], current: Transaction) -> bool:
    planned_updated = row.get("updated_at")
    now_updated = getattr(current, "updated_at", None)
    if str(current.status) != row["status"]:
        return True
    if planned_updated is None or pd.isna(planned_updated) or now_updated is None:
        return False
    return pd.Timestamp(now_updated) != pd.Timestamp(planned_updated)


def _frame(
    plan: Plan, outcomes: list[_Outcome], fingerprint: str, *, dry_run: bool
) -> pd.DataFrame:
    order = {tid: i for i, tid in enumerate(plan.items["id"])}
    rows = sorted(outcomes, key=lambda o: order.get(o.id, len(order)))
    frame = pd.DataFrame(
        [
            {
                "id": o.id,
                "outcome": o.outcome,
                "http_status": o.http_status,
                "error_code": o.error_code,
                "message": o.message,
                "attempts": o.attempts,
                "request": o.request if isinstance(o.request, str) else None,
            }
            for o in rows
        ]
    ).astype({"http_status": "Int64", "attempts": "Int64"})
    acted = frame[~frame["outcome"].isin(["skipped"])]
    frame.attrs["fingerprint"] = fingerprint
    frame.attrs["action"] = plan.action.name
    frame.attrs["dry_run"] = dry_run
    frame.attrs["all_as_planned"] = bool(
        (acted["outcome"] == (("would_send") if dry_run else plan.action.verb)).all()
    )
    if plan.warehouse.is_sandbox:
        frame.attrs["source"] = "SANDBOX DATA"
    return frame


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def _bar(enabled: bool, total: int, label: str) -> Any:
    if not enabled:
        return _NoBar()
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=label, unit=" items", leave=False)
