"""The bulk-operations journal's statements. One row per item an apply run acts on: claimed in
one transaction before anything is sent (outcome `claimed`, with the run's claim token),
marked `requested` just before its request goes out, completed with the outcome after. A
`claimed` row of a run that died sent nothing; a `requested` or `unknown` one is *in doubt*
until a read of the record shows the effect (or that the item moved on); nothing here ever
re-sends."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import duckdb

from ._store import OLD_JOURNAL_KIND, journal_columns, transaction

#: Outcomes that mean a request may have reached the service and its effect is not known
#: yet: the run died after sending (`requested`), or the answer was lost and the record
#: showed no effect yet (`unknown`). (Journals written before `claimed` existed hold
#: `requested` for claims too: read as in doubt, the safe side.)
IN_DOUBT = ("requested", "unknown")
#: Claimed, nothing sent yet.
CLAIMED = "claimed"


#: The journal's columns, in this order whatever the layout the file was first written in.
COLUMNS = (
    "entry_id",
    "plan_fingerprint",
    "action",
    "item_kind",
    "item_id",
    "outcome",
    "http_status",
    "error_code",
    "message",
    "attempts",
    "requested_at",
    "finished_at",
    "claim",
)


def entries(con: duckdb.DuckDBPyConnection) -> str:
    """A FROM item (named `ops_journal`) of the journal's entries with this layout's columns:
    the table, or, in a file of a layout before 5 opened read-only (so not migrated), its
    `transaction_id` read as `item_id` and the kind told by the action."""
    if "transaction_id" not in journal_columns(con):
        return "ops_journal"
    return (
        f"(SELECT * EXCLUDE (transaction_id), transaction_id AS item_id, {OLD_JOURNAL_KIND} "
        "AS item_kind FROM ops_journal) AS ops_journal"
    )


@dataclass(frozen=True)
class Claim:
    """What claiming an item found: the new entry (None when not claimed), whether a success
    is already journalled, whether a live run holds it, and the in-doubt entries of dead runs."""

    entry_id: int | None
    done: bool = False
    busy: bool = False
    in_doubt: tuple[int, ...] = ()
    outcome: str | None = None  # with `done`: the success, or the final refusal, recorded
    #: claims of dead runs that sent nothing
    unsent: tuple[int, ...] = ()


def claim(
    con: duckdb.DuckDBPyConnection,
    *,
    fingerprint: str,
    action: str,
    item_kind: str,
    item_id: str,
    success: str,
    token: str,
    live: Collection[str],
    final: Sequence[str] = (),
) -> Claim:
    """Claim `item_id` for `action` in one transaction (the caller holds the file's lock):
    refused (`done`) when the journal records `success`, or one of the `final` outcomes (a
    refusal no later request can change)."""
    with transaction(con):
        rows = con.execute(
            """SELECT entry_id, outcome, claim FROM ops_journal
               WHERE action = ? AND item_id = ? AND outcome IN (SELECT unnest(?::VARCHAR[]))""",
            [action, item_id, [success, *final, *IN_DOUBT, CLAIMED]],
        ).fetchall()
        recorded = {outcome for _, outcome, _ in rows}
        for ended in (success, *final):
            if ended in recorded:
                return Claim(None, done=True, outcome=ended)
        if any(outcome in ("requested", CLAIMED) and holder in live for _, outcome, holder in rows):
            return Claim(None, busy=True)
        found = con.execute(
            """INSERT INTO ops_journal (entry_id, plan_fingerprint, action, item_kind, item_id,
                      outcome, requested_at, claim)
               VALUES (nextval('ops_journal_ids'), ?, ?, ?, ?, ?, ?, ?) RETURNING entry_id""",
            [fingerprint, action, item_kind, item_id, CLAIMED, datetime.now(UTC), token],
        ).fetchall()
    return Claim(
        int(found[0][0]),
        in_doubt=tuple(int(r[0]) for r in rows if r[1] in IN_DOUBT),
        unsent=tuple(int(r[0]) for r in rows if r[1] == CLAIMED),
    )


def mark_requested(con: duckdb.DuckDBPyConnection, entry_id: int) -> None:
    """The claimed entry's request is about to go out: from now on it is in doubt until an
    outcome is known."""
    con.execute(
        "UPDATE ops_journal SET outcome = 'requested', requested_at = ? WHERE entry_id = ?",
        [datetime.now(UTC), entry_id],
    )


def finish(
    con: duckdb.DuckDBPyConnection,
    entry_ids: Sequence[int],
    outcome: str,
    *,
    http_status: int | None = None,
    error_code: str | None = None,
    message: str | None = None,
    attempts: int | None = None,
) -> None:
    """Complete entries with their outcome (one statement: all or none)."""
    if not entry_ids:
        return
    con.execute(
        """UPDATE ops_journal SET outcome = ?, http_status = ?, error_code = ?, message = ?,
                  attempts = coalesce(?, attempts, 0), finished_at = ?
           WHERE entry_id IN (SELECT unnest(?::BIGINT[]))""",
        [outcome, http_status, error_code, message, attempts, datetime.now(UTC), list(entry_ids)],
    )


def record(
    con: duckdb.DuckDBPyConnection,
    *,
    fingerprint: str,
    action: str,
    item_kind: str,
    item_id: str,
    outcome: str,
    message: str,
) -> None:
    """An outcome reached without a request (a skip decided at apply time)."""
    now = datetime.now(UTC)
    con.execute(
        """INSERT INTO ops_journal (entry_id, plan_fingerprint, action, item_kind, item_id,
                  outcome, message, attempts, requested_at, finished_at)
           VALUES (nextval('ops_journal_ids'), ?, ?, ?, ?, ?, ?, 0, ?, ?)""",
        [fingerprint, action, item_kind, item_id, outcome, message, now, now],
    )


def in_doubt(
    con: duckdb.DuckDBPyConnection, action: str, live: Collection[str]
) -> list[tuple[int, str, bool]]:
    """(entry, item, sent) of `action`'s entries left unfinished by runs no longer alive:
    `sent` False for a claim that sent nothing, True for one in doubt."""
    rows = con.execute(
        f"""SELECT entry_id, item_id, claim, outcome FROM {entries(con)}
           WHERE action = ? AND outcome IN (SELECT unnest(?::VARCHAR[])) ORDER BY entry_id""",
        [action, [*IN_DOUBT, CLAIMED]],
    ).fetchall()
    return [(int(e), str(i), o != CLAIMED) for e, i, holder, o in rows if holder not in live]


def outcomes(
    con: duckdb.DuckDBPyConnection, action: str, wanted: Sequence[str], ids: Sequence[str]
) -> dict[str, str]:
    """Per item, the first of the `wanted` outcomes the journal records for this action on
    it (`wanted` in order of precedence: a success before a refusal)."""
    if not ids:
        return {}
    rows = con.execute(
        f"""SELECT DISTINCT item_id, outcome FROM {entries(con)}
           WHERE action = ? AND outcome IN (SELECT unnest(?::VARCHAR[]))
             AND item_id IN (SELECT unnest(?::VARCHAR[]))""",
        [action, list(wanted), list(ids)],
    ).fetchall()
    found: dict[str, str] = {}
    for item, outcome in sorted(rows, key=lambda r: list(wanted).index(r[1]), reverse=True):
        found[item] = outcome
    return found
