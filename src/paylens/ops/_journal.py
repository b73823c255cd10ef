"""The journal: one row per request a bulk action sends, written before the request (intent)
and completed after it (outcome), in the warehouse. It is what makes a re-run never act twice."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from paylens.warehouse import Warehouse

#: Outcomes that mean the action took effect.
SUCCESSES = {
    "cancel": "cancelled",
    "approve": "approved",
    "reject": "rejected",
    "confirm_receipt": "confirmed",
    "revoke_session": "revoked",
}


def succeeded(wh: Warehouse, action: str, ids: Sequence[str]) -> set[str]:
    """Transactions the journal records this action as having succeeded on."""
    if not ids:
        return set()
    frame = wh.sql(
        """SELECT DISTINCT transaction_id FROM ops_journal
           WHERE action = ? AND outcome = ? AND transaction_id IN (SELECT unnest(?::VARCHAR[]))""",
        [action, SUCCESSES[action], list(ids)],
    )
    return set(frame["transaction_id"])


def unfinished(wh: Warehouse, action: str, ids: Sequence[str]) -> set[str]:
    """Transactions with a request written but no outcome: a run died while it was in flight."""
    if not ids:
        return set()
    frame = wh.sql(
        """SELECT DISTINCT transaction_id FROM ops_journal
           WHERE action = ? AND outcome = 'requested' AND transaction_id IN (SELECT unnest(?::VARCHAR[]))""",
        [action, list(ids)],
    )
    return set(frame["transaction_id"])


def begin(wh: Warehouse, fingerprint: str, action: str, transaction_id: str) -> int:
    """Write the intent before sending; returns the entry's id."""
    row = wh._write(
        """INSERT INTO ops_journal (entry_id, plan_fingerprint, action, transaction_id, outcome, requested_at)
           VALUES (nextval('ops_journal_ids'), ?, ?, ?, 'requested', ?) RETURNING entry_id""",
        [fingerprint, action, transaction_id, datetime.now(UTC)],
    )
    return int(row[0])


def finish(
    wh: Warehouse,
    entry_id: int,
    outcome: str,
    *,
    http_status: int | None,
    error_code: str | None,
    message: str | None,
    attempts: int,
) -> None:
    wh._write(
        """UPDATE ops_journal SET outcome = ?, http_status = ?, error_code = ?, message = ?,
                  attempts = ?, finished_at = ? WHERE entry_id = ?""",
        [outcome, http_status, error_code, message, attempts, datetime.now(UTC), entry_id],
    )


def record(
    wh: Warehouse, fingerprint: str, action: str, transaction_id: str, outcome: str, message: str
) -> None:
    """An outcome reached without a request (a skip decided at apply time)."""
    now = datetime.now(UTC)
    wh._write(
        """INSERT INTO ops_journal (entry_id, plan_fingerprint, action, transaction_id, outcome, message,
                  attempts, requested_at, finished_at)
           VALUES (nextval('ops_journal_ids'), ?, ?, ?, ?, ?, 0, ?, ?)""",
        [fingerprint, action, transaction_id, outcome, message, now, now],
    )


def entries(wh: Warehouse, fingerprint: str | None = None) -> Any:
    if fingerprint is None:
        return wh.sql("SELECT * FROM ops_journal ORDER BY entry_id")
    return wh.sql(
        "SELECT * FROM ops_journal WHERE plan_fingerprint = ? ORDER BY entry_id", [fingerprint]
    )
