"""The bulk actions, declared once: for each, the request it sends (the client call), the
items it applies to (their statuses and other rules), what the record shows once it took
effect, and the journal's words for its success and for the service's refusals. Plans and
applies derive their branches from these declarations; `ItemKind` says how one kind of item
(transactions here, wallet sessions in `_sessions`) is read, acted on and stored."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from paylens.errors import PaylensError

if TYPE_CHECKING:
    import pandas as pd

    from paylens.client import Client
    from paylens.warehouse import Warehouse

#: Eligibility outcomes a plan can give an item.
ELIGIBLE = "eligible"

#: What the service's 409s say for good (a transfer past its cancellation window, a payment
#: no longer waiting for approval): a plan skips an item the journal records one for.
NOT_CANCELLABLE, NOT_PENDING_APPROVAL = FINAL_REFUSALS = ("not_cancellable", "not_pending_approval")

#: Rails whose pending transfers the banking partner can still cancel (spec §4.1).
CANCELLABLE_RAILS = frozenset({"ACH", "WIRE"})

_COLUMNS = (
    "id, type, status, payment_rail, direction, source_type, source_account_id, agent_id, amount_minor, currency, "
    "decimals, created_at, updated_at, receipt_delivery_confirmed_at, customer_id"
)
_SHOWN = ("id", "type", "status", "payment_rail", "amount_minor", "currency", "eligibility")


class Planned(Protocol):
    """What acting on a plan reads of it (`_plan.Plan`)."""

    @property
    def warehouse(self) -> Warehouse: ...
    @property
    def action(self) -> Action: ...
    @property
    def items(self) -> pd.DataFrame: ...
    @property
    def body(self) -> dict[str, Any]: ...
    @property
    def fingerprint(self) -> str: ...
    @property
    def eligible(self) -> pd.DataFrame: ...


class ItemKind(Protocol):
    """How `apply_plan` handles one kind of item: read it at the service, tell whether the
    action already took effect or the item moved since the plan, act on it, store what was
    read. Transactions are the default (`TRANSACTIONS`); `_sessions` has wallet sessions."""

    def read(self, client: Client, row: dict[str, Any]) -> Any:
        """The item as the service has it now (NotFoundError when it is gone)."""

    def effect(self, action: Action, row: dict[str, Any], current: Any) -> bool:
        """Whether `current` shows `action`'s effect (however it came about)."""

    def changed(self, row: dict[str, Any], current: Any) -> str | None:
        """Why the item no longer is as planned, or None."""

    def waiting(self, action: Action, row: dict[str, Any], current: Any) -> bool:
        """Whether `current` is still in the state the action applies to (a request in doubt
        may then still take effect)."""

    def shown(self, current: Any) -> str:
        """What `current` shows, in a few words (for the journal)."""

    def contradicts(self, action: Action, answer: Any) -> str | None:
        """Why a successful answer shows the action did not happen, or None."""

    def send(self, plan: Planned, client: Client, row: dict[str, Any]) -> Any:
        """Act on the item (one request, never retried blindly); the answer to store."""

    def store(self, wh: Warehouse, answers: list[Any]) -> None:
        """Record what was read or answered in the warehouse."""

    def describe(self, plan: Planned, row: dict[str, Any]) -> str:
        """The request a dry run would send."""


def _any_row(row: dict[str, Any]) -> str:
    return ELIGIBLE


@dataclass(frozen=True)
class Action:
    """A bulk action, declared: its name; the journal's word for its success (`verb`); the
    request it sends (`call`, given the client, the item's id and the plan's body; `path` for a dry run); the items it applies to (`statuses`, None for any, after
    `check`'s other rules); what a record shows once it took effect (`effect`) and what a
    successful answer's record cannot show (`contrary`); the journal's word for each refusal
    of the service (`refusals`, by HTTP status and error code, None for any code); what one
    request is called and the body fields its planner takes (`noun`, `body`: the commands
    of `paylens` are derived from them); and the items it acts on (the warehouse table and columns a plan reads; transactions unless
    said)."""

    name: str
    verb: str
    path: str
    check: Callable[[dict[str, Any]], str] = _any_row  # ELIGIBLE or the reason to skip
    statuses: frozenset[str] | None = None
    call: Callable[[Client, str, Mapping[str, Any]], Any] | None = None
    effect: Callable[[Any], bool] = lambda record: False
    contrary: frozenset[str] = frozenset()
    refusals: Mapping[tuple[int, str | None], str] = field(default_factory=dict)
    noun: str = ""  # what one request is called ("cancellation"), for a confirmation prompt
    body: tuple[str, ...] = ()  # the fields of the request's body its planner takes
    table: str = "transactions"
    item_kind: str = "transaction"  # what the journal calls one item
    columns: str = _COLUMNS
    shown: tuple[str, ...] = _SHOWN  # columns a review shows
    state: tuple[str, ...] = ("id", "status", "updated_at")  # what the fingerprint pins
    kind: ItemKind = field(default_factory=lambda: TRANSACTIONS)
    #: the webhook receiver decides these items too (an incoming payment awaiting approval):
    #: one it decided is never decided again (`receiver_decisions`)
    receiver_decides: bool = False

    def eligibility(self, row: dict[str, Any]) -> str:
        """ELIGIBLE, or why the action does not apply to `row` (its rules, then its status)."""
        verdict = self.check(row)
        if verdict == ELIGIBLE and self.statuses is not None and row["status"] not in self.statuses:
            return f"skipped: already {row['status']}"
        return verdict

    def refusal(self, status: int, code: str | None) -> str:
        """The journal's word for the service's refusal (404: `not_found`; else `failed`)."""
        if status == 404:
            return "not_found"
        found = self.refusals.get((status, code)) or self.refusals.get((status, None))
        return found or "failed"


def is_ach_pull(row: dict[str, Any]) -> bool:
    """An incoming transfer pulled from the customer's own external bank account in USD: the
    interface names no rail on such a source, so a pull is known by its source (decided here;
    the service has the last word and answers 400 for what it cannot cancel)."""
    source = row.get("source_account_id") or ""
    return (
        row["type"] == "INCOMING"
        and source.startswith("ExternalAccount:")
        and row["currency"] == "USD"
    )


def _cancel_check(row: dict[str, Any]) -> str:
    if row["type"] == "CARD":
        return "skipped: card transactions cannot be cancelled"
    if row["type"] == "INCOMING" and not is_ach_pull(row):
        return "skipped: incoming, not an ACH pull"
    if row["type"] == "OUTGOING" and row["payment_rail"] not in CANCELLABLE_RAILS:
        rail = row["payment_rail"]
        if not isinstance(rail, str) or not rail:  # None or <NA>: the record names no rail
            return "skipped: no rail given (not ACH or wire)"
        return f"skipped: rail {rail} is not ACH or wire"
    return ELIGIBLE


def _agent_check(row: dict[str, Any]) -> str:
    return ELIGIBLE if row["agent_id"] else "skipped: not initiated by an agent"


def _receipt_check(row: dict[str, Any]) -> str:
    import pandas as pd  # loaded by the plan that asks; the declarations load without it

    if row["type"] == "CARD":
        return "skipped: card transactions have no receipt confirmation"
    if row["receipt_delivery_confirmed_at"] is not None and not pd.isna(
        row["receipt_delivery_confirmed_at"]
    ):
        return "skipped: receipt already confirmed"
    return ELIGIBLE


def _status_in(*statuses: str) -> Callable[[Any], bool]:
    return lambda record: str(getattr(record, "status", "")) in statuses


def _cancelled(record: Any) -> bool:
    refund = getattr(record, "refund", None)
    return refund is not None and str(refund.reason) == "USER_CANCELLATION"


class _Transactions:
    """Transactions as the items of a bulk action, acted on through the client's resources
    as each action declares."""

    def read(self, client: Client, row: dict[str, Any]) -> Any:
        return client.transactions.get(row["id"])

    def effect(self, action: Action, row: dict[str, Any], current: Any) -> bool:
        # judged by the record alone: an item is claimed only while it waits (PENDING for an
        # approval), and `row` may be the warehouse's, which a sync since has brought up to
        # date (compared with it, an approval a dead run made would read as no effect)
        return action.effect(current)

    def changed(self, row: dict[str, Any], current: Any) -> str | None:
        return f"changed since the plan: now {current.status}" if _changed(row, current) else None

    def waiting(self, action: Action, row: dict[str, Any], current: Any) -> bool:
        # still in the state the action applies to, as the record shows it now
        now = {
            **row,
            "status": str(getattr(current, "status", "")),
            "receipt_delivery_confirmed_at": getattr(
                current, "receipt_delivery_confirmed_at", None
            ),
        }
        return action.eligibility(now) == ELIGIBLE

    def shown(self, current: Any) -> str:
        return str(getattr(current, "status", "?"))

    def contradicts(self, action: Action, answer: Any) -> str | None:
        status = str(getattr(answer, "status", ""))
        if status in action.contrary:
            return f"answered, but the record it returned shows {status}: not {action.name}ed"[:500]
        return None

    def send(self, plan: Planned, client: Client, row: dict[str, Any]) -> Any:
        if plan.action.call is None:
            raise PaylensError(f"no request for the action {plan.action.name!r}")
        return plan.action.call(client, row["id"], plan.body)

    def store(self, wh: Warehouse, answers: list[Any]) -> None:
        wh.store_transactions([a.to_wire() for a in answers if hasattr(a, "to_wire")])

    def describe(self, plan: Planned, row: dict[str, Any]) -> str:
        body = f" {plan.body}" if plan.body else ""
        return f"POST /transactions/{row['id']}/{plan.action.path}{body}"


TRANSACTIONS: ItemKind = _Transactions()


def _changed(row: dict[str, Any], current: Any) -> bool:
    import pandas as pd

    planned_updated = row.get("updated_at")
    now_updated = getattr(current, "updated_at", None)
    if str(current.status) != row["status"]:
        return True
    if planned_updated is None or pd.isna(planned_updated) or now_updated is None:
        return False
    return bool(pd.Timestamp(now_updated) != pd.Timestamp(planned_updated))


_NOT_PENDING_APPROVAL: Mapping[tuple[int, str | None], str] = {
    (409, "TRANSACTION_NOT_PENDING_PLATFORM_APPROVAL"): NOT_PENDING_APPROVAL
}

ACTIONS = {
    action.name: action
    for action in (
        Action(
            "cancel",
            "cancelled",
            "cancel",
            _cancel_check,
            statuses=frozenset({"PENDING", "PROCESSING", "CREATED"}),
            call=lambda client, tid, body: client.transactions.cancel(
                tid, reason=body.get("reason")
            ),
            effect=_cancelled,
            noun="cancellation",
            body=("reason",),
            contrary=frozenset({"COMPLETED"}),
            refusals={
                (409, "TRANSACTION_NOT_CANCELLABLE"): NOT_CANCELLABLE,
                # spec §4.1 rule 4: a type that cannot be cancelled is refused with 400
                (400, None): "rejected_type",
            },
        ),
        Action(
            "approve",
            "approved",
            "approve",
            _agent_check,
            statuses=frozenset({"PENDING"}),
            call=lambda client, tid, body: client.transactions.approve(tid),
            effect=_status_in("PROCESSING", "COMPLETED"),
            noun="approval",
            contrary=frozenset({"FAILED", "EXPIRED", "REJECTED", "REFUNDED"}),
            refusals=_NOT_PENDING_APPROVAL,
            receiver_decides=True,
        ),
        Action(
            "reject",
            "rejected",
            "reject",
            _agent_check,
            statuses=frozenset({"PENDING"}),
            call=lambda client, tid, body: client.transactions.reject(
                tid, reason=body.get("reason")
            ),
            effect=_status_in("REJECTED", "FAILED"),
            noun="rejection",
            body=("reason",),
            contrary=frozenset({"PROCESSING", "COMPLETED"}),
            refusals=_NOT_PENDING_APPROVAL,
            receiver_decides=True,
        ),
        Action(
            "confirm_receipt",
            "confirmed",
            "confirm",
            _receipt_check,
            call=lambda client, tid, body: client.transactions.confirm_receipt(tid),
            noun="receipt confirmation",
            effect=lambda record: (
                getattr(record, "receipt_delivery_confirmed_at", None) is not None
            ),
        ),
    )
}


def receiver_decisions(wh: Warehouse) -> dict[str, str]:
    """The payments the webhook receiver decided (`EventStore.decisions` of the store beside
    the warehouse, when there is one), each with what it answered: approved (200), rejected
    (403) or more information asked (422). A 202 decided nothing (the platform was to approve
    or reject by a call, which a plan may make), so it is left out."""
    from paylens.webhooks import VERDICTS, EventStore, events_path

    path = events_path(wh.path)
    if not path.exists():
        return {}
    with EventStore(path) as store:
        decisions = store.decisions()
    return {
        d.transaction_id: f"{VERDICTS[d.status]}, {d.status}, {d.decided_at}"
        for d in decisions
        if d.status != 202
    }
