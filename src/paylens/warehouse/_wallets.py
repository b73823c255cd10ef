"""Wallet inventory: the credentials and sessions of embedded wallet accounts, as tables.

    wallet_credentials  one row per credential: id, account_id, type, nickname, credential_id,
                        created_at, updated_at, first_seen_at, last_seen_at, removed_at
    wallet_sessions     one row per session: id, account_id, type, nickname, credential_id,
                        created_at, expires_at, first_seen_at, last_seen_at, ended_at, end_reason
    wallet_inventory    per account, when its inventory was last taken (account_id, taken_at)

Fetching and saving are separate: `fetch_inventory` yields one `AccountInventory` per account
(listed concurrently), `save_inventory` writes a batch of them in one transaction. A credential
or session that a later inventory of its account no longer lists gets `removed_at` / `ended_at`
(end_reason `gone`: revoked elsewhere, or expired); a bulk revoke records `revoked`. Timestamps
of the inventory (`*_seen_at`, `taken_at`, `ended_at`) are this machine's clock; `created_at`
and `expires_at` are the service's.

Session signing keys and `encryptedSessionSigningKey` are never stored: the tables hold only the
columns above.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from paylens import models as m

from . import _store
from .sync import utcnow

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

    from paylens.client import Client

    from . import Warehouse

logger = logging.getLogger("paylens.warehouse")

_TABLES = (
    """CREATE TABLE IF NOT EXISTS wallet_credentials (
        id VARCHAR PRIMARY KEY, account_id VARCHAR, type VARCHAR, nickname VARCHAR,
        credential_id VARCHAR, created_at TIMESTAMPTZ, updated_at TIMESTAMPTZ,
        first_seen_at TIMESTAMPTZ, last_seen_at TIMESTAMPTZ, removed_at TIMESTAMPTZ)""",
    """CREATE TABLE IF NOT EXISTS wallet_sessions (
        id VARCHAR PRIMARY KEY, account_id VARCHAR, type VARCHAR, nickname VARCHAR,
        credential_id VARCHAR, created_at TIMESTAMPTZ, expires_at TIMESTAMPTZ,
        first_seen_at TIMESTAMPTZ, last_seen_at TIMESTAMPTZ, ended_at TIMESTAMPTZ,
        end_reason VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS wallet_inventory (
        account_id VARCHAR PRIMARY KEY, taken_at TIMESTAMPTZ)""",
)
_CREDENTIAL_COLUMNS = ("id", "account_id", "type", "nickname", "credential_id")
_SESSION_COLUMNS = ("id", "account_id", "type", "nickname", "credential_id")
BATCH = 50


@dataclass(frozen=True)
class AccountInventory:
    """What one account holds: its credentials and active sessions, as listed."""

    account_id: str
    credentials: list[m.AuthMethod]
    sessions: list[m.AuthSession]


def ensure_tables(con: duckdb.DuckDBPyConnection) -> None:
    for statement in _TABLES:
        con.execute(statement)


def wallet_account_ids(wh: Warehouse, client: Client) -> list[str]:
    """Embedded wallet accounts: from the warehouse's internal accounts when synced, else
    listed from the service."""
    frame = wh.sql(
        "SELECT id FROM internal_accounts WHERE type = 'EMBEDDED_WALLET' ORDER BY created_at, id"
    )
    if len(frame):
        return list(frame["id"])
    return [a.id for a in client.internal_accounts.list(type="EMBEDDED_WALLET")]


def fetch_inventory(
    client: Client, account_ids: Iterable[str], *, concurrency: int = 8
) -> Iterator[AccountInventory]:
    """Each account's credentials and sessions, `concurrency` accounts at a time, in order."""

    def one(account_id: str) -> AccountInventory:
        return AccountInventory(
            account_id,
            client.auth.credentials.list(account_id),
            client.auth.sessions.list(account_id),
        )

    with ThreadPoolExecutor(max(1, concurrency), thread_name_prefix="paylens-wallets") as pool:
        yield from pool.map(one, account_ids)


def _credential_row(c: m.AuthMethod, now: datetime) -> tuple[Any, ...]:
    return (c.id, c.account_id, str(c.type), c.nickname, c.credential_id, c.created_at,
            c.updated_at, now, now)  # fmt: skip


def _session_row(s: m.AuthSession, now: datetime) -> tuple[Any, ...]:
    return (s.id, s.account_id, str(s.type), s.nickname, s.credential_id, s.created_at,
            s.expires_at, now, now)  # fmt: skip


def save_inventory(
    con: duckdb.DuckDBPyConnection, batch: Sequence[AccountInventory], now: datetime
) -> None:
    """Write a batch of inventories in one transaction: upsert what is listed, and close what
    an inventoried account no longer lists."""
    accounts = [inv.account_id for inv in batch]
    credentials = [_credential_row(c, now) for inv in batch for c in inv.credentials]
    sessions = [_session_row(s, now) for inv in batch for s in inv.sessions]
    with _store.transaction(con):
        if credentials:
            con.executemany(
                """INSERT INTO wallet_credentials (id, account_id, type, nickname, credential_id,
                       created_at, updated_at, first_seen_at, last_seen_at)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT (id) DO UPDATE SET nickname = excluded.nickname,
                       updated_at = excluded.updated_at, last_seen_at = excluded.last_seen_at,
                       removed_at = NULL""",
                credentials,
            )
        if sessions:
            con.executemany(
                """INSERT INTO wallet_sessions (id, account_id, type, nickname, credential_id,
                       created_at, expires_at, first_seen_at, last_seen_at)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT (id) DO UPDATE SET nickname = excluded.nickname,
                       expires_at = excluded.expires_at, last_seen_at = excluded.last_seen_at""",
                sessions,
            )
        for table, closed in (
            ("wallet_credentials", "removed_at"),
            ("wallet_sessions", "ended_at"),
        ):
            extra = ", end_reason = 'gone'" if table == "wallet_sessions" else ""
            con.execute(
                f"""UPDATE {table} SET {closed} = $now{extra}
                    WHERE account_id IN (SELECT unnest($accounts::VARCHAR[]))
                      AND {closed} IS NULL AND last_seen_at < $now""",
                {"now": now, "accounts": accounts},
            )
        con.executemany(
            "INSERT OR REPLACE INTO wallet_inventory VALUES (?, ?)", [(a, now) for a in accounts]
        )


def sync_wallets(
    wh: Warehouse,
    client: Client,
    account_ids: Sequence[str] | None = None,
    *,
    concurrency: int = 8,
) -> dict[str, int]:
    """Take the inventory of `account_ids` (default: every embedded wallet account) and say how
    many accounts, credentials and active sessions it found."""
    if wh.read_only:
        from paylens.errors import WarehouseError

        raise WarehouseError(f"{wh.path} is open read-only; open it read-write to sync")
    wh._check_source(client)
    ids = list(
        dict.fromkeys(account_ids if account_ids is not None else wallet_account_ids(wh, client))
    )
    now = utcnow()
    counts = {"accounts": 0, "credentials": 0, "sessions": 0}
    with wh._lock:
        ensure_tables(wh._con)
    batch: list[AccountInventory] = []
    for inventory in fetch_inventory(client, ids, concurrency=concurrency):
        batch.append(inventory)
        counts["accounts"] += 1
        counts["credentials"] += len(inventory.credentials)
        counts["sessions"] += len(inventory.sessions)
        if len(batch) >= BATCH:
            with wh._lock:
                save_inventory(wh._con, batch, now)
            batch = []
    if batch:
        with wh._lock:
            save_inventory(wh._con, batch, now)
    logger.info("wallet inventory: %s", counts)
    return counts


def mark_sessions_ended(wh: Warehouse, session_ids: Sequence[str], reason: str) -> None:
    """Record sessions ended by paylens itself (e.g. a bulk revoke)."""
    if session_ids:
        with wh._writing() as con:
            con.execute(
                """UPDATE wallet_sessions SET ended_at = ?, end_reason = ?
                   WHERE id IN (SELECT unnest(?::VARCHAR[])) AND ended_at IS NULL""",
                [utcnow(), reason, list(session_ids)],
            )


# --- frames -----------------------------------------------------------------------------------


def has_tables(wh: Warehouse) -> bool:
    return bool(len(wh.sql("SELECT 1 FROM duckdb_tables() WHERE table_name = 'wallet_sessions'")))


def _frame(wh: Warehouse, query: str, params: Any = None) -> pd.DataFrame:
    if not has_tables(wh):
        with wh._lock:
            if wh.read_only:
                import pandas as pd

                return pd.DataFrame()
            ensure_tables(wh._con)
    return wh.sql(query, params)


def credentials(wh: Warehouse, *, include_removed: bool = False) -> pd.DataFrame:
    where = "TRUE" if include_removed else "removed_at IS NULL"
    return _frame(
        wh, f"SELECT * FROM wallet_credentials WHERE {where} ORDER BY account_id, created_at, id"
    )


def sessions(wh: Warehouse, *, include_ended: bool = False) -> pd.DataFrame:
    where = "TRUE" if include_ended else "ended_at IS NULL"
    return _frame(
        wh, f"SELECT * FROM wallet_sessions WHERE {where} ORDER BY account_id, created_at, id"
    )


def single_credential_accounts(wh: Warehouse) -> pd.DataFrame:
    """Inventoried accounts holding exactly one credential (they cannot revoke it, and losing
    it locks the wallet): account_id, the credential's type and nickname, taken_at."""
    return _frame(
        wh,
        """SELECT c.account_id, any_value(c.type) AS type, any_value(c.nickname) AS nickname,
                  any_value(i.taken_at) AS taken_at
           FROM wallet_credentials c JOIN wallet_inventory i USING (account_id)
           WHERE c.removed_at IS NULL GROUP BY c.account_id HAVING count(*) = 1
           ORDER BY c.account_id""",
    )


def stale_sessions(
    wh: Warehouse, *, max_age: timedelta = timedelta(hours=8), as_of: datetime | None = None
) -> pd.DataFrame:
    """Sessions still active at `as_of` (not ended in the inventory, `expires_at` after it)
    that were opened more than `max_age` before it, oldest first, with `age_hours`.
    `as_of` is now by default; pass the service's time (e.g. `sandbox.now`) when it differs."""
    moment = as_of or datetime.now(UTC)
    return _frame(
        wh,
        """SELECT *, date_diff('second', created_at, $as_of::TIMESTAMPTZ) / 3600.0 AS age_hours
           FROM wallet_sessions
           WHERE ended_at IS NULL AND expires_at > $as_of::TIMESTAMPTZ
             AND created_at <= $as_of::TIMESTAMPTZ - $max_age::INTERVAL
           ORDER BY created_at, id""",
        {"as_of": moment, "max_age": max_age},
    )
