"""Applying a plan: act on its eligible items at most once each, under a bounded concurrency
and request-rate budget, with caps, a progress bar and the journal.

For each item, in this order:
1. **claim** it in the journal, in one transaction (`Warehouse.journal_claim`): an item the
   journal records as done, or that another apply running now holds, is skipped; one process
   writes the file and every `Warehouse` on it in that process shares one lock, so no two
   runs can claim one item;
2. **read** it at the service: the read resolves what earlier requests left in doubt (a run
   killed after sending, an answer lost): the effect seen means one took effect; the item
   gone from the state the action applies to, without the effect, leaves it `unresolved`
   (nothing more is sent); the item still waiting leaves it in doubt, and nothing is sent
   (`skipped_unknown`), since the service may still act on it (a cancel is decided by the
   bank, spec §4.1), unless the caller says `resend_unknown=True`. The read also skips an
   item that moved since the plan;
3. **send** one request (journalled `requested` just before), never retried once it may have
   reached the service (the client's policy). An answer is judged by the record it returns
   (a 200 showing the payment FAILED is `no_effect`); when it is lost (`OutcomeUnknownError`)
   or refused with 409, the record is **read** again and the journal says what it shows.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from paylens._bars import visible_bar
from paylens.client import Client, RateBudget
from paylens.errors import (
    APIConnectionError,
    APIError,
    ConflictError,
    InvalidArgumentError,
    NotFoundError,
    OutcomeUnknownError,
    PaylensError,
    ResponseValidationError,
    WalletOperationPendingError,
    WarehouseError,
)

from ._actions import ELIGIBLE, FINAL_REFUSALS, Planned, receiver_decisions

if TYPE_CHECKING:
    from paylens.warehouse import Warehouse

logger = logging.getLogger("paylens.ops")

#: What a read that gave no record of the item raises: a refusal, no connection, or an answer
#: that is not its record (unreadable, or another record's: a misrouted or cached answer).
_UNREAD = (APIError, APIConnectionError, ResponseValidationError)

_CONFIRMED_LATER = "confirmed by reading the record later"
_NOT_SENT = "claimed by a run that ended before sending it"

#: Claim tokens of the apply runs alive in this process: a `requested` journal row holding
#: another token belongs to a run that died, and is in doubt until its record is read. The
#: journal is read against these tokens under `_LIVE_LOCK`: read against a copy taken before,
#: a run that started, and claimed an item, in between was taken for dead, and its item was
#: sent twice (two applies at once in one process, under load).
_LIVE: set[str] = set()
_LIVE_LOCK = threading.Lock()


@dataclass
class _Outcome:
    id: str
    outcome: str
    http_status: int | None = None
    error_code: str | None = None
    message: str | None = None
    attempts: int = 0
    request: str | None = None
    answer: Any = None


def _within_caps(
    plan: Planned, max_items: int | None, max_total_minor: Mapping[str, int] | None
) -> tuple[list[dict[str, Any]], list[_Outcome]]:
    """The eligible items to act on, in plan order, and those beyond a cap."""
    caps = _currency_caps(max_total_minor)
    acting: list[dict[str, Any]] = []
    over: list[_Outcome] = []
    spent: dict[str, int] = {}
    for record in plan.eligible.to_dict("records"):
        row = {str(k): v for k, v in record.items()}
        currency, amount = row.get("currency"), int(row.get("amount_minor") or 0)
        limit = caps.get(str(currency))
        if max_items is not None and len(acting) >= max_items:
            over.append(
                _Outcome(row["id"], "skipped_over_cap", message=f"beyond max_items={max_items}")
            )
        elif limit is not None and spent.get(str(currency), 0) + amount > limit:
            over.append(
                _Outcome(
                    row["id"],
                    "skipped_over_cap",
                    message=f"beyond max_total_minor[{currency}]={limit}",
                )
            )
        else:
            spent[str(currency)] = spent.get(str(currency), 0) + amount
            acting.append(row)
    return acting, over


def _currency_caps(max_total_minor: Mapping[str, int] | None) -> dict[str, int]:
    """The caps by currency code as the service spells it (`usd` caps USD, as the report
    reads `usd`); a cap that is not a whole number of minor units, 0 or more, is refused,
    never ignored."""
    caps: dict[str, int] = {}
    for code, limit in (max_total_minor or {}).items():
        if not isinstance(code, str) or not code.strip():
            raise InvalidArgumentError("max_total_minor", f"{code!r} is not a currency code")
        InvalidArgumentError.unless_count(
            f"max_total_minor[{code!r}]", limit, least=0, unit="minor units"
        )
        key = code.strip().upper()
        if key in caps:
            raise InvalidArgumentError("max_total_minor", f"{key} is capped twice")
        caps[key] = limit
    return caps


def apply_plan(
    plan: Planned,
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
    """Act on the plan's eligible items, each at most once, and return one row per selected
    item with its outcome.

    - Each item is claimed in the journal, then read at the service just before acting and
      skipped (`skipped_changed`) when it moved since the plan (a transaction's status or
      `updated_at`; a session no longer active); an item the journal records as done is
      never sent again (`skipped_journal`), nor one another apply running now holds
      (`skipped_claimed`).
    - A request is sent once. When its answer is lost, the record is read and the journal
      says what it shows: the effect (`cancelled` ... confirmed by the read), `unresolved`
      (the item moved on without showing it: nothing more is sent) or `unknown` (nothing
      shows yet). A later apply reads an item left `unknown` first and does not send it
      again while the record shows nothing (`skipped_unknown`): the service may still act
      on it (a cancel is decided by the bank). `resend_unknown=True` sends such items again,
      once you have checked at the service that the earlier request did not reach it (the
      earlier entry is then journalled `superseded`).
    - `concurrency` requests at once (default 4), at most `rate_limit` per second; 429s are
      waited out by the client's retry policy (`Retry-After`).
    - Caps: `max_items`, and `max_total_minor` per currency (minor units); items beyond them
      are `skipped_over_cap`.
    - `dry_run=True` sends nothing and writes nothing: each row shows the request that would
      be sent.
    - Outcomes: the action's success (`cancelled`, `approved`, `rejected`, `confirmed`,
      `revoked`), `no_effect` (answered, but the record it returned shows the action did not
      happen, e.g. an approval of a payment that had FAILED), `not_cancellable` (409 to a
      cancel) / `not_pending_approval` (409 to an approval or rejection), `rejected_type`
      (400 to a cancel: a type that cannot be cancelled), `not_found` (404), `failed` (any
      other error, with status, code, message and attempts), `unknown`, `unresolved`, or a
      skip.
    - With `refresh`, what was answered or read is stored in the warehouse.

    The frame's `attrs["all_as_planned"]` tells whether every item acted on succeeded, and
    `attrs["refused_for_good"]` how many the service refused for good (`FINAL_REFUSALS`).
    """
    wh = plan.warehouse
    if wh.closed:
        raise WarehouseError(
            f"the plan's warehouse ({wh.path}) is closed: apply while it is open (inside its "
            "`with` block), or plan again in an open one"
        )
    action = plan.action
    fingerprint = plan.fingerprint
    acting, outcomes = _within_caps(plan, max_items, max_total_minor)
    skipped = [
        _Outcome(r["id"], "skipped", message=r["eligibility"])
        for r in plan.items.to_dict("records")
        if r["eligibility"] != ELIGIBLE
    ]
    if dry_run:
        kind = plan.action.kind
        outcomes += [
            _Outcome(r["id"], "would_send", request=kind.describe(plan, r)) for r in acting
        ]
        return _frame(plan, skipped + outcomes, fingerprint, dry_run=True)
    if acting and wh.read_only:
        raise WarehouseError(
            f"{wh.path} is open read-only, and an apply journals every item there before "
            "sending: plan on a Warehouse opened read-write (a dry run needs only read-only)"
        )
    if acting:  # before anything is claimed or sent
        wh.check_platform(client)
    budget = RateBudget(rate_limit) if rate_limit else None
    run = _Run(plan, client, fingerprint, budget, resend_unknown)
    bar = _bar(progress, len(acting), action.name)

    def act(row: dict[str, Any]) -> _Outcome:
        try:
            return run.act(row)
        finally:
            bar.update(1)

    with _LIVE_LOCK:
        _LIVE.add(run.token)
    try:
        run.resolve_in_doubt()
        with ThreadPoolExecutor(
            max_workers=max(1, concurrency), thread_name_prefix="paylens-ops"
        ) as pool:
            outcomes += list(pool.map(act, acting))
    finally:
        bar.close()
        with _LIVE_LOCK:
            _LIVE.discard(run.token)
    answers = [o.answer for o in outcomes if o.answer is not None]
    if refresh and answers:
        action.kind.store(wh, answers)
    return _frame(plan, skipped + outcomes, fingerprint, dry_run=False)


class _Run:
    """One apply run: its claim token, and how it acts on one item (see the module docstring)."""

    def __init__(
        self,
        plan: Planned,
        client: Client,
        fingerprint: str,
        budget: RateBudget | None,
        resend_unknown: bool = False,
    ) -> None:
        self.plan = plan
        self.client = client
        self.fingerprint = fingerprint
        self.budget = budget
        self.resend_unknown = resend_unknown
        self.token = uuid.uuid4().hex
        self.kind = plan.action.kind
        self.wh: Warehouse = plan.warehouse

    def _pace(self) -> None:
        if self.budget is not None and (pause := self.budget.reserve()):
            time.sleep(pause)

    def _finish(self, entries: list[int], outcome: _Outcome) -> _Outcome:
        self.wh.journal_finish(
            entries,
            outcome.outcome,
            http_status=outcome.http_status,
            error_code=outcome.error_code,
            message=outcome.message,
            attempts=outcome.attempts,
        )
        return outcome

    def _read(self, row: dict[str, Any]) -> Any:
        self._pace()
        return self.kind.read(self.client, row)

    def resolve_in_doubt(self) -> None:
        """Resolve what dead runs left of this action (any plan): a claim that sent nothing
        is `not_sent`; a request in doubt is resolved by reading its record (see `_settle`),
        and stays in doubt while the record shows nothing and the item still waits. Items of
        this plan are also resolved when claimed (see `act`)."""
        action = self.plan.action
        with _LIVE_LOCK:  # see `_LIVE`
            in_doubt = list(self.wh.journal_in_doubt(action.name, set(_LIVE)))
        entries: dict[str, list[int]] = {}
        for entry, item, sent in in_doubt:
            if sent:
                entries.setdefault(item, []).append(entry)
            else:
                self._finish([entry], _Outcome(item, "not_sent", message=_NOT_SENT))
        if not entries:
            return
        rows = self.wh.sql(
            f"SELECT {action.columns} FROM {action.table} WHERE id IN (SELECT unnest(?::VARCHAR[]))",
            [list(entries)],
        ).to_dict("records")
        for record in rows:
            row = {str(k): v for k, v in record.items()}
            try:
                current = self._read(row)
            except NotFoundError as exc:
                self._finish(entries[row["id"]], _error_outcome(row["id"], exc, "not_found"))
                continue
            except _UNREAD:
                continue
            self._settle(entries[row["id"]], row, current)

    def _settle(self, in_doubt: list[int], row: dict[str, Any], current: Any) -> bool | None:
        """Journal what a read shows of requests left in doubt: the effect (True), the item
        gone from the state the action applies to without it (`unresolved`, False), or
        nothing yet (None: they stay in doubt)."""
        action = self.plan.action
        if self.kind.effect(action, row, current):
            if in_doubt:
                self._finish(in_doubt, _Outcome(row["id"], action.verb, message=_CONFIRMED_LATER))
            return True
        if self.kind.waiting(action, row, current):
            return None
        if in_doubt:
            shown = self.kind.shown(current)
            said = (
                f"the record now shows {shown} without the effect: whether the request took "
                "effect is not known; nothing more is sent"
            )
            self._finish(in_doubt, _Outcome(row["id"], "unresolved", message=said))
        return False

    def act(self, row: dict[str, Any]) -> _Outcome:
        action, tid = self.plan.action, row["id"]
        with _LIVE_LOCK:  # see `_LIVE`
            claim = self.wh.journal_claim(
                fingerprint=self.fingerprint,
                action=action.name,
                item_kind=action.item_kind,
                item_id=tid,
                success=action.verb,
                token=self.token,
                live=set(_LIVE),
                final=FINAL_REFUSALS,
            )
        if claim.done:
            said = (
                f"already {action.verb} (journal)"
                if claim.outcome == action.verb
                else f"refused by the service before ({claim.outcome}, journal)"
            )
            return _Outcome(tid, "skipped_journal", message=said)
        if claim.busy:
            return _Outcome(tid, "skipped_claimed", message="another apply running now holds it")
        assert claim.entry_id is not None
        entry, in_doubt = [claim.entry_id], list(claim.in_doubt)
        if claim.unsent:
            self._finish(list(claim.unsent), _Outcome(tid, "not_sent", message=_NOT_SENT))
        try:
            current = self._read(row)
        except NotFoundError as exc:
            return self._finish(entry + in_doubt, _error_outcome(tid, exc, "not_found"))
        except _UNREAD as exc:
            # nothing sent now; what earlier runs left in doubt stays so, for the next run
            return self._finish(entry, _error_outcome(tid, exc, "failed"))
        settled = self._settle(in_doubt, row, current)
        if settled:
            if in_doubt:
                done = _Outcome(
                    tid, "skipped_journal", message=f"already {action.verb} (confirmed by a read)"
                )
            else:
                done = _Outcome(
                    tid, "skipped_changed", message=f"already {action.verb} at the service"
                )
            done.answer = current
            return self._finish(entry, done)
        if settled is None and in_doubt:
            if not self.resend_unknown:
                said = (
                    f"an earlier {action.name} request has no known outcome and the record "
                    "shows no effect yet; the service may still act on it, so it is not sent "
                    "again (check at the service; apply(resend_unknown=True) sends it again)"
                )
                outcome = _Outcome(tid, "skipped_unknown", message=said, answer=current)
                return self._finish(entry, outcome)
            said = "superseded by a request sent again on the caller's word (resend_unknown=True)"
            self._finish(in_doubt, _Outcome(tid, "superseded", message=said))
        if (moved := self.kind.changed(row, current)) is not None:
            outcome = _Outcome(tid, "skipped_changed", message=moved, answer=current)
            return self._finish(entry, outcome)
        if action.receiver_decides and (
            decided := receiver_decisions(self.wh).get(tid)
        ):  # the webhook receiver decided it after the plan was made: never decided twice
            said = f"decided by the webhook receiver since the plan ({decided})"
            return self._finish(entry, _Outcome(tid, "skipped_changed", message=said))
        self.wh.journal_requested(claim.entry_id)
        return self._finish(entry, self._send(row))

    def _send(self, row: dict[str, Any]) -> _Outcome:
        tid, action = row["id"], self.plan.action
        self._pace()
        try:
            answer = self.kind.send(self.plan, self.client, row)
        except ConflictError as exc:
            return self._resolve(row, exc, action.refusal(exc.status, exc.code))
        except (OutcomeUnknownError, WalletOperationPendingError) as exc:
            # a pending wallet operation was accepted: the service reconciles it on its own
            return self._resolve(row, exc, "unknown")
        except APIError as exc:
            return _error_outcome(tid, exc, action.refusal(exc.status, exc.code))
        except (APIConnectionError, PaylensError) as exc:
            # the client gives up without an unknown outcome only when nothing was sent
            return _error_outcome(tid, exc, "failed")
        contradiction = self.kind.contradicts(action, answer)
        if contradiction is not None:
            return _Outcome(tid, "no_effect", 200, message=contradiction, attempts=1, answer=answer)
        return _Outcome(tid, action.verb, 200, attempts=1, answer=answer)

    def _resolve(self, row: dict[str, Any], exc: PaylensError, otherwise: str) -> _Outcome:
        """After a lost answer, a pending wallet operation or a 409: the record says whether
        the action took effect."""
        tid, verb = row["id"], self.plan.action.verb
        try:
            current = self._read(row)
        except _UNREAD as read_error:
            out = _error_outcome(tid, exc, otherwise)
            # said first: the request's own error is long, and the message is cut at 500
            out.message = f"the record could not be read ({read_error}); {out.message}"[:500]
            return out
        if self.kind.effect(self.plan.action, row, current):
            why = "answer lost" if isinstance(exc, OutcomeUnknownError) else f"{exc}"
            return _Outcome(
                tid,
                verb,
                getattr(exc, "status", None),
                getattr(exc, "code", None),
                f"confirmed by reading the record ({why})"[:500],
                getattr(exc, "attempts", 1),
                answer=current,
            )
        out = _error_outcome(tid, exc, otherwise)
        out.answer = current
        if otherwise == "unknown":
            if self.kind.waiting(self.plan.action, row, current):
                out.message = (
                    "no answer known, and the record shows no effect yet: not sent again; the "
                    f"next apply reads it first ({exc})"
                )[:500]
            else:
                out.outcome = "unresolved"
                out.message = (
                    f"no answer known, and the record now shows {self.kind.shown(current)} "
                    f"without the effect: nothing more is sent ({exc})"
                )[:500]
        return out


def _error_outcome(tid: str, exc: Exception, outcome: str) -> _Outcome:
    return _Outcome(
        tid,
        outcome,
        getattr(exc, "status", None),
        getattr(exc, "code", None),
        str(getattr(exc, "message", None) or exc)[:500],
        getattr(exc, "attempts", 1),
    )


def _frame(
    plan: Planned, outcomes: list[_Outcome], fingerprint: str, *, dry_run: bool
) -> pd.DataFrame:
    order = {tid: i for i, tid in enumerate(plan.items["id"])}
    rows = sorted(outcomes, key=lambda o: order.get(o.id, len(order)))
    columns = ("id", "outcome", "http_status", "error_code", "message", "attempts", "request")
    frame = pd.DataFrame(
        [
            (o.id, o.outcome, o.http_status, o.error_code, o.message, o.attempts, o.request)
            for o in rows
        ],
        columns=list(columns),
    ).astype(
        {
            "id": "string[pyarrow]",
            "outcome": "string[pyarrow]",
            "http_status": "int64[pyarrow]",
            "error_code": "string[pyarrow]",
            "message": "string[pyarrow]",
            "attempts": "int64[pyarrow]",
            "request": "string[pyarrow]",
        }
    )
    acted = frame[~frame["outcome"].isin(["skipped"])]
    frame.attrs["fingerprint"] = fingerprint
    frame.attrs["action"] = plan.action.name
    frame.attrs["dry_run"] = dry_run
    frame.attrs["all_as_planned"] = bool(
        (acted["outcome"] == (("would_send") if dry_run else plan.action.verb)).all()
    )
    # refused for good by the service (e.g. past the bank's window): its decision, not a failure
    frame.attrs["refused_for_good"] = int(acted["outcome"].isin(FINAL_REFUSALS).sum())
    if plan.warehouse.is_sandbox:
        frame.attrs["source"] = "SANDBOX DATA"
    return frame


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def _bar(enabled: bool, total: int, label: str) -> Any:
    shown = visible_bar(total=total, desc=label, unit=" items", leave=False) if enabled else None
    return _NoBar() if shown is None else shown
