"""Bulk revoke of wallet sessions on the plan -> review -> apply framework.

    stale = wh.stale_sessions(max_age=timedelta(hours=8))
    plan = paylens.ops.plan_revoke_sessions(wh, stale, signer=keys_by_account)
    plan                                  # review: each session, eligible or why not
    plan.apply(client)                    # signed retries, journal, re-read before acting

Each revoke is a signed retry (spec §5.4) stamped by a session key of the same account, so the
plan needs a signer per account: one signer (a `SessionKey` or a callable payload -> stamp) for
every account, or a mapping `account_id -> signer`. Sessions of an account without one are
skipped at plan time. Just
before acting, the account's sessions are listed again; a session no longer active is
`skipped_changed`. A success marks the session `ended_at` with end_reason `revoked`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from paylens.client import Signer
from paylens.errors import InvalidArgumentError

from ._actions import ELIGIBLE, Action, Planned
from ._plan import Plan, Selection, make_plan

if TYPE_CHECKING:
    from paylens.client import Client
    from paylens.warehouse import Warehouse

Signers = Signer | Mapping[str, Signer]

_COLUMNS = "id, account_id, type, nickname, credential_id, created_at, expires_at, ended_at"


def _signer_lookup(signer: Signers) -> Callable[[str], Signer | None]:
    if isinstance(signer, Mapping):
        return signer.get
    if callable(signer):
        return lambda _account: signer
    raise InvalidArgumentError(
        "signer", "expected a SessionKey (or callable payload -> stamp), or a mapping of them"
    )


@dataclass(frozen=True)
class _Sessions:
    """Wallet sessions as the items of a bulk action."""

    signers: Callable[[str], Signer | None]

    def read(self, client: Client, row: dict[str, Any]) -> set[str]:
        """The account's active sessions."""
        return {s.id for s in client.auth.sessions.list(row["account_id"])}

    def effect(self, action: Action, row: dict[str, Any], current: Any) -> bool:
        return row["id"] not in current

    def changed(self, row: dict[str, Any], current: Any) -> str | None:
        return None if row["id"] in current else "no longer active (revoked elsewhere or expired)"

    def waiting(self, action: Action, row: dict[str, Any], current: Any) -> bool:
        return row["id"] in current

    def shown(self, current: Any) -> str:
        return "the session no longer listed"

    def contradicts(self, action: Action, answer: Any) -> str | None:
        return None

    def send(self, plan: Planned, client: Client, row: dict[str, Any]) -> Any:
        signer = self.signers(row["account_id"])
        assert signer is not None, "the plan checked it"
        client.auth.sessions.revoke(row["id"], signer=signer)
        return {"id": row["id"]}

    def store(self, wh: Warehouse, answers: list[Any]) -> None:
        ended = [a["id"] for a in answers if isinstance(a, dict) and "id" in a]
        wh.mark_sessions_ended(ended, "revoked")

    def describe(self, plan: Planned, row: dict[str, Any]) -> str:
        return f"DELETE /auth/sessions/{row['id']} (signed retry, account {row['account_id']})"


def plan_revoke_sessions(wh: Warehouse, select: Selection, *, signer: Signers) -> Plan:
    """Plan revoking wallet sessions of the inventory (`wh.sync_wallets`). `select` is a list of
    session ids, a DataFrame with an `id` column (e.g. `wh.stale_sessions()`), or a SQL filter
    over `wallet_sessions`. `signer`: see the module docstring."""
    wh.ensure_wallet_tables()
    signers = _signer_lookup(signer)

    def check(row: dict[str, Any]) -> str:
        if row["ended_at"] is not None and str(row["ended_at"]) not in ("NaT", "<NA>"):
            return "skipped: already ended"
        if signers(row["account_id"]) is None:
            return "skipped: no signing key for its account"
        return ELIGIBLE

    action = Action(
        "revoke_session",
        "revoked",
        "",
        check,
        table="wallet_sessions",
        item_kind="wallet_session",
        columns=_COLUMNS,
        shown=("id", "account_id", "type", "created_at", "expires_at", "eligibility"),
        state=("id", "account_id", "expires_at"),
        kind=_Sessions(signers),
    )
    return make_plan(wh, action, select, {})
