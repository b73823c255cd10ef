"""The `Warehouse`: a DuckDB file of the service's data, its readers, its sync's door, the
bulk-operations journal and the wallet inventory (see the package's docstring)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, Unpack

import duckdb
import pyarrow as pa

from paylens._choices import one_of, some_of
from paylens.client import Client, timestamp
from paylens.errors import (
    InvalidArgumentError,
    WarehouseEmptyError,
    WarehouseError,
    WarehouseFileError,
)
from paylens.frames import to_pandas
from paylens.models import enums

from . import _journal, _staged, _store, _wallets
from ._open import MEMORY, close_store, not_found, open_store, storage_errors, sync_memory
from ._report import SANDBOX_LABEL, SyncReport
from ._run import (
    PLATFORM_CONFIG_ID,
    SyncKeywords,
    SyncRun,
    check_source,
    other_platform,
    platform_config_id,
    sync_options,
)
from .sync import SyncOptions, catalog, utcnow

if TYPE_CHECKING:  # pandas loads when a frame is first asked for, not for a sync
    import pandas as pd

    from paylens.lake import PublishReport

DEFAULT_PATH = Path("data/paylens.duckdb")

#: The statuses a reader's `status=` accepts, per table.
_STATUSES: dict[str, Iterable[str]] = {
    "transactions": enums.TransactionStatus,
    "outgoing_fees": enums.OutgoingTransactionStatus,
    "card_transactions": enums.CardTransactionStatus,
}


def _json_text(record: dict[str, Any]) -> bytes:
    """A record's JSON text: orjson's, or the standard library's for what orjson refuses (an
    integer past 64 bits), so that such a record is set aside as a sync would, not raised."""
    import json

    import orjson

    try:
        return orjson.dumps(record)
    except TypeError:
        return json.dumps(record, default=str).encode()


def wanted_resources(resources: Sequence[str] | None) -> list[str]:
    """The resources a sync reads, in order: those named, or all of them."""
    known = catalog.NAMES
    unknown = [r for r in resources or () if r not in known]
    if unknown or (resources is not None and not resources):
        raise InvalidArgumentError(
            "resources", f"must name some of {', '.join(known)}; got {list(resources or [])!r}"
        )
    return [r for r in known if r in (resources or known)]


class Warehouse:
    """A DuckDB file holding the service's data. Open it read-write to sync into it and to
    journal bulk actions, or `read_only=True` to query it.

    Who may hold the file at once: any number of read-only readers (notebooks, the report)
    beside the scheduled `paylens sync`, which writes a staged copy and swaps it in; and one
    writer, across processes and within one (a read-write `Warehouse`, an apply, a sync).
    Every `Warehouse` on one file in one process shares one connection, so they take turns.
    A second writer gets `WarehouseLockedError` naming the holder, or waits up to `wait`
    seconds for it. A file that is not a paylens warehouse is refused and never altered.
    A read-write open of a path with no file starts a new warehouse there, unless
    `create=False` (then `WarehouseNotFoundError`: a bulk action on a mistyped path).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = DEFAULT_PATH,
        *,
        read_only: bool = False,
        wait: float = 0.0,
        create: bool = True,
    ) -> None:
        self.path = Path(path)
        if not create and str(path) != MEMORY and not self.path.exists():
            raise not_found(self.path)
        self.read_only = read_only
        self._closed = False
        self._store = open_store(self.path, read_only=read_only, wait=wait)
        self._con = self._store.con
        self._lock = self._store.lock
        if not self._store.read_only:
            try:
                with self._lock, storage_errors(self.path):
                    _store.ensure_schema(self._con)
            except BaseException:
                self.close()
                raise
        elif "paylens_meta" not in {r[0] for r in self._con.execute("SHOW TABLES").fetchall()}:
            self.close()
            raise WarehouseFileError(  # a DuckDB file with no table at all: left as is
                f"{self.path} is not a paylens warehouse (a DuckDB database with no table); "
                f"run `paylens sync --db {self.path}` first"
            )

    def __repr__(self) -> str:
        mode = "read-only" if self.read_only else "read-write"
        return f"Warehouse({str(self.path)!r}, {mode}, source={self.source or 'none yet'})"

    # -- provenance ------------------------------------------------------------------------

    @property
    def source(self) -> str | None:
        """The service base URL the data came from (None before the first sync)."""
        return self._meta().get("source_url")

    @property
    def is_sandbox(self) -> bool:
        return self._meta().get("is_sandbox") == "true"

    def check_platform(self, client: Client) -> None:
        """Raise `WarehouseError` when `client` reaches another platform than the one whose
        data this file holds (its configuration id, which a sync records; one `GET /config`).
        Nothing is asked before a sync has recorded it."""
        recorded = self._meta().get(PLATFORM_CONFIG_ID)
        if recorded is None:
            return
        reached = platform_config_id(client)
        if reached is not None and reached != recorded:
            raise other_platform(self.path, recorded, reached, "nothing was sent.")

    def _meta(self) -> dict[str, str]:
        with self._lock:
            return _store.meta(self._con)

    # -- sync ------------------------------------------------------------------------------

    def sync(
        self,
        client: Client,
        *,
        options: SyncOptions | None = None,
        **keywords: Unpack[SyncKeywords],
    ) -> SyncReport:
        """Bring the warehouse in step with the service and say what changed.

        The first sync reads everything (from `since`, if given); later ones read what is new
        or changed (see `paylens.warehouse.sync` for how and what it guarantees): a change any
        listing shows is stored by the next sync, and any other difference is gone within
        `verify_syncs` syncs (each re-reads about 1/`verify_syncs` of the older range; the
        report's `reverified` is that cost). Up to `concurrency` time slices are paged at once
        (fewer, down to four, while the readers are ahead of the commits: a service that
        answers fast needs fewer requests under way), under `rate_limit` requests per second
        when given. DuckDB's memory is capped at 160 MB while the sync writes, and given back
        after. Works in scripts, cron and inside a running Jupyter kernel (threads, no event
        loop). `resources` limits the sync to some
        of the catalogue's (`paylens.warehouse.RESOURCES`: transactions, customers, cards,
        internal_accounts, external_accounts, platform_external_accounts); naming one beside
        transactions re-reads it whole whatever its age. `freshness` (a `Freshness`) says how
        old cards and accounts may grow before a sync re-reads them whole (customers are read
        by what changed on every sync); `full=True` re-reads everything; `progress` shows a
        bar. The keywords (`SyncKeywords`) default to `SyncOptions`' values. `options` (a
        `SyncOptions`) sets everything at once, instead of the keyword arguments. A read-only
        Warehouse syncs as `paylens sync` does (`sync_file`: a staged copy swapped in) and
        then reads the new file: it never holds the writer lock between calls, so a
        notebook's never keeps the scheduled sync out.
        """
        if self.read_only:
            if options is not None:
                raise InvalidArgumentError(
                    "options", "a read-only Warehouse syncs with keyword arguments only"
                )
            return self._sync_staged(client, keywords)
        opts = sync_options(keywords, options)
        resources = keywords.get("resources")
        wanted = wanted_resources(resources)
        forced = frozenset(resources or ())
        # one sync of a file at a time in this process (a second waits): two would reconcile
        # counts against each other's half-written state
        with (
            self._store.sync_lock,
            storage_errors(self.path),
            sync_memory(self._con, self._lock),
        ):
            return SyncRun(self._con, self._lock, self.path).run(client, opts, wanted, forced)

    def _sync_staged(self, client: Client, keywords: SyncKeywords) -> SyncReport:
        """A read-only Warehouse's sync: the scheduled sync's (`sync_file`: a staged copy
        swapped in, the writer lock held only while it runs), then the file opened again to
        read what it brought (when this is the only Warehouse on the file in this process;
        others keep the snapshot they opened). A notebook that syncs this way never holds the
        writer lock between cells, so the nightly `paylens sync` is never kept out."""
        from ._sync_file import sync_file

        if str(self.path) == MEMORY or self._closed:
            raise WarehouseError(f"{self.path}: this Warehouse is closed or in memory")
        report = sync_file(self.path, client, **keywords)
        close_store(self._store)
        self._store = open_store(self.path, read_only=True)
        self._con, self._lock = self._store.con, self._store.lock
        return report

    def _check_source(self, client: Client) -> None:
        check_source(self._con, self._lock, self.path, client)

    # -- reading ---    # -- reading -----------------------------------------------------------------------------

    def sql(self, query: str, params: Sequence[Any] | dict[str, Any] | None = None) -> pd.DataFrame:
        """Run parameterised SQL (`?` or `$name`) and return an Arrow-backed DataFrame."""
        with self._lock:
            table = self._con.sql(query, params=params).to_arrow_table()
        frame = to_pandas(table)
        frame.attrs["source"] = self.label
        return frame

    @property
    def label(self) -> str:
        """What every frame read from this warehouse says it is (`frame.attrs["source"]`): the
        service's base URL, `"sandbox data from <url>"` for the embedded simulator's, or
        `"nowhere yet"` before the first sync."""
        meta = self._meta()
        source = meta.get("source_url", "nowhere yet")
        return f"{SANDBOX_LABEL} from {source}" if meta.get("is_sandbox") == "true" else source

    def require_data(self) -> None:
        """Raise `WarehouseEmptyError` when no sync has filled this file and nothing was stored
        into it: a reader would answer an empty frame that looks like "nothing matched"."""
        with self._lock:
            meta = _store.meta(self._con)
            if "source_url" in meta:
                return
            filled = self._con.execute(
                "SELECT EXISTS (SELECT 1 FROM transactions) OR EXISTS (SELECT 1 FROM"
                " outgoing_fees) OR EXISTS (SELECT 1 FROM card_transactions)"
            ).fetchall()[0][0]
        if not filled:
            raise WarehouseEmptyError(
                f"{self.path} has no data: run `paylens sync --db {self.path}` first"
            )

    def _accepted(self, table: str, column: str, enum: Iterable[str] | None) -> list[str]:
        """The values a filter on `column` may name: the interface's (`enum`) and any other
        the file holds (an open enum's newer value); for currencies, those the file holds."""
        with self._lock:
            held = self._con.execute(
                f"SELECT DISTINCT {column} FROM {table} WHERE {column} IS NOT NULL"
            ).fetchall()
        return sorted({*(enum or ()), *(r[0] for r in held)})

    def _checked(self, table: str, filters: dict[str, Any]) -> dict[str, Any]:
        """The filters with each enum value or currency spelled as stored, or refused."""
        choices: dict[str, Iterable[str] | None] = {
            "type": enums.TransactionType,
            "status": _STATUSES[table],
            "payment_rail": enums.PaymentRail,
            "currency": None,
        }
        checked = dict(filters)
        for column, enum in choices.items():
            value = filters.get(column)
            if value is None:
                continue
            accepted = self._accepted(table, column, enum)
            what = "the currencies this warehouse holds" if enum is None else ""
            if enum is None and not accepted:
                what = "this warehouse holds no currency yet"
            checked[column] = (
                one_of(column, value, accepted, what)
                if isinstance(value, str)
                else some_of(column, value, accepted, what)
            )
        return checked

    def _select(
        self,
        table: str,
        filters: dict[str, Any],
        order: str = "created_at",
        raw: bool = False,
        include_removed: bool = False,
    ) -> pd.DataFrame:
        self.require_data()
        clauses, params = [], []
        for column, value in self._checked(table, filters).items():
            if value is None:
                continue
            if column in ("start", "end"):
                op = ">=" if column == "start" else "<="
                clauses.append(f"created_at {op} ?::TIMESTAMPTZ")
                params.append(timestamp(column, value, end_of_day=column == "end"))
            elif isinstance(value, (list, tuple, set, frozenset)):
                clauses.append(f"{column} IN ({', '.join('?' * len(value))})")
                params.extend(value)
            else:
                clauses.append(f"{column} = ?")
                params.append(value)
        where = " AND ".join(clauses) or "TRUE"
        # the raw JSON is most of a frame's memory: only when asked for
        hidden = [] if raw else [c for c in ("raw", "raw_hash") if c in self._column_names(table)]
        columns = f"* EXCLUDE ({', '.join(hidden)})" if hidden else "*"
        rows = self.current_rows(table, include_removed=include_removed)
        return self.sql(f"SELECT {columns} FROM {rows} WHERE {where} ORDER BY {order}", params)

    def transactions(
        self,
        *,
        type: str | None = None,
        status: str | Sequence[str] | None = None,
        customer_id: str | None = None,
        currency: str | None = None,
        payment_rail: str | None = None,
        start: date | datetime | str | None = None,
        end: date | datetime | str | None = None,
        raw: bool = False,
        include_removed: bool = False,
    ) -> pd.DataFrame:
        """Transactions of every kind (common fields), oldest first; `start`/`end` bound
        `created_at` inclusively (a date is a whole UTC day); `raw=True` adds each record's
        JSON as the service sent it. A transaction the service no longer has (`removed_at`
        set) is left out, as from every reader, unless `include_removed=True`."""
        return self._select(
            "transactions",
            {
                "type": type,
                "status": status,
                "customer_id": customer_id,
                "currency": currency,
                "payment_rail": payment_rail,
                "start": start,
                "end": end,
            },
            raw=raw,
            include_removed=include_removed,
        )

    def fees(
        self,
        *,
        status: str | Sequence[str] | None = None,
        payment_rail: str | None = None,
        start: date | datetime | str | None = None,
        end: date | datetime | str | None = None,
        raw: bool = False,
        include_removed: bool = False,
    ) -> pd.DataFrame:
        """One row per outgoing transaction with its fees and every rate detail."""
        return self._select(
            "outgoing_fees",
            {"status": status, "payment_rail": payment_rail, "start": start, "end": end},
            raw=raw,
            include_removed=include_removed,
        )

    def card_transactions(
        self,
        *,
        status: str | Sequence[str] | None = None,
        card_id: str | None = None,
        start: date | datetime | str | None = None,
        end: date | datetime | str | None = None,
        raw: bool = False,
        include_removed: bool = False,
    ) -> pd.DataFrame:
        """Card transactions with their pull, settlement and refund summaries and merchant."""
        return self._select(
            "card_transactions",
            {"status": status, "card_id": card_id, "start": start, "end": end},
            raw=raw,
            include_removed=include_removed,
        )

    def payment_instructions(self, *, include_removed: bool = False) -> pd.DataFrame:
        self.require_data()
        rows = self.current_rows("payment_instructions", include_removed=include_removed)
        return self.sql(f"SELECT * FROM {rows} ORDER BY transaction_id, position")

    def records(self, resource: str, *, raw: bool = True) -> pd.DataFrame:
        """The stored rows of one resource of the catalogue (`paylens.warehouse.RESOURCES`)
        beside transactions, in its order; a record its last whole read no longer listed keeps
        its row, with `removed_at` set. `raw=False` leaves out each record's JSON."""
        entry = catalog.RESOURCES.get(resource)
        if entry is None or not entry.small:
            names = ", ".join(catalog.SMALL_RESOURCES)
            raise InvalidArgumentError("resource", f"must be one of {names}; got {resource!r}")
        self.require_data()
        with self._lock:
            held = self._con.execute(
                "SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [resource]
            ).fetchall()[0][0]
        if not held:  # a file of an older paylens, opened read-only since
            raise WarehouseEmptyError(
                f"{self.path} holds no {resource} yet (written by an older paylens): run "
                f"`paylens sync --db {self.path}` to store them"
            )
        columns = "*" if raw else "* EXCLUDE (raw, raw_hash)"
        return self.sql(f"SELECT {columns} FROM {resource} ORDER BY {entry.order}")

    def cards(self) -> pd.DataFrame:
        return self.records("cards")

    def customers(self) -> pd.DataFrame:
        return self.records("customers")

    def internal_accounts(self) -> pd.DataFrame:
        return self.records("internal_accounts")

    def balance_reads(self) -> pd.DataFrame:
        """Every read of an internal account's balance a sync made: `account_id`, `currency`,
        `decimals`, `balance_minor` (available), `total_balance_minor` (with pending and held
        funds), `read_at` (the service's time of the read, UTC) and `run_id` (the sync); one
        row per account, currency and read, oldest first."""
        self.require_data()
        return self.sql("SELECT * FROM balance_reads ORDER BY account_id, currency, read_at")

    def external_accounts(self) -> pd.DataFrame:
        """The customers' external accounts (the platform's: `records("platform_external_accounts")`)."""
        return self.records("external_accounts")

    def status_history(
        self, transaction_id: str | None = None, *, include_removed: bool = False
    ) -> pd.DataFrame:
        """Every status change observed: previous and new status, and when it was seen."""
        rows = self.current_rows("status_history", include_removed=include_removed)
        if transaction_id is None:
            return self.sql(f"SELECT * FROM {rows} ORDER BY observed_at, id")
        return self.sql(f"SELECT * FROM {rows} WHERE id = ? ORDER BY observed_at", [transaction_id])

    def rejected_records(self) -> pd.DataFrame:
        return self.sql("SELECT * FROM rejected_records ORDER BY rejected_at")

    def sync_runs(self) -> pd.DataFrame:
        return self.sql("SELECT * FROM sync_runs ORDER BY run_id")

    def synced_at(self) -> datetime | None:
        """When this file last read the service, in the service's clock (its `Date`, recorded
        with each read of a resource): what the service said was open was still open then.
        None before any sync (or in a file of an older layout)."""
        with self._lock:
            found = self._con.execute(
                "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'resource_reads'"
                " AND schema_name = current_schema()"
            ).fetchall()
            if not found[0][0]:
                return None
            rows = self._con.execute("SELECT max(read_at) FROM resource_reads").fetchall()
        value = rows[0][0]
        return value.astimezone(UTC) if isinstance(value, datetime) else None

    def last_sync(self) -> dict[str, Any] | None:
        """The latest sync of this file (a `sync_runs` row as a dict; None before any): its
        last run, or a later `paylens sync` that failed or was stopped before its copy was
        swapped in (recorded in the staged copy the next run resumes), so that a failed
        scheduled sync is never hidden behind the last one that succeeded."""
        runs = self.sql("SELECT * FROM sync_runs ORDER BY run_id DESC LIMIT 1")
        own = {str(k): v for k, v in runs.iloc[0].items()} if len(runs) else None
        attempt = _staged.last_attempt(self.path) if str(self.path) != MEMORY else None
        if attempt is not None and (own is None or attempt["run_id"] > own["run_id"]):
            return attempt
        return own

    def _writable(self) -> None:
        if self.read_only:
            raise WarehouseError(f"{self.path} is open read-only; open it read-write to write")
        if self._closed:
            raise WarehouseError(f"{self.path}: this Warehouse is closed")

    @contextlib.contextmanager
    def _writing(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The connection for a write: refused on a read-only or closed Warehouse, under the
        file's lock, with storage errors typed."""
        self._writable()
        with self._lock, storage_errors(self.path):
            yield self._con

    # -- closed periods (paylens.close writes them through these) ----------------------------

    def store_closed_period(self, period: str, snapshot: str) -> str:
        """Keep `snapshot` (text) as period `period`'s closed figures, under the writer lock,
        unless the period is closed already: then the stored snapshot is returned unchanged
        (a closed period never moves)."""
        with self._writing() as con:
            con.execute(
                "CREATE TABLE IF NOT EXISTS closed_periods (period VARCHAR PRIMARY KEY,"
                " snapshot VARCHAR NOT NULL, closed_at TIMESTAMPTZ NOT NULL)"
            )
            # fetched whole: a result left unfinished makes the connection refuse the next query
            rows = con.execute(
                "SELECT snapshot FROM closed_periods WHERE period = ?", [period]
            ).fetchall()
            if rows:
                return str(rows[0][0])
            con.execute("INSERT INTO closed_periods VALUES (?, ?, now())", [period, snapshot])
            return snapshot

    def closed_periods(self) -> dict[str, str]:
        """Every closed period's stored snapshot, by period."""
        with self._lock:
            have = self._con.execute(
                "SELECT count(*) FROM information_schema.tables WHERE table_name = 'closed_periods'"
            ).fetchone()
            if not have or not have[0]:
                return {}
            rows = self._con.execute(
                "SELECT period, snapshot FROM closed_periods ORDER BY period"
            ).fetchall()
        return {str(p): str(s) for p, s in rows}

    # -- the bulk-operations journal (paylens.ops writes it through these) -------------------

    def journal_claim(
        self,
        *,
        fingerprint: str,
        action: str,
        item_id: str,
        success: str,
        token: str,
        item_kind: str = "transaction",
        live: Sequence[str] | set[str],
        final: Sequence[str] = (),
    ) -> _journal.Claim:
        """Claim an item for an apply run in one transaction, before its request is sent:
        refused when the journal records `success` (or one of the `final` refusals) for it
        or a live run (`live` tokens) holds it; the claim lists the entries dead runs left:
        in doubt (to resolve by reading the record) or claimed and never sent. Every Warehouse on the file shares one lock, and one process writes the file,
        so no two runs can claim one item."""
        with self._writing() as con:
            return _journal.claim(
                con,
                fingerprint=fingerprint,
                action=action,
                item_kind=item_kind,
                item_id=item_id,
                success=success,
                token=token,
                live=live,
                final=final,
            )

    def journal_finish(
        self,
        entry_ids: Sequence[int],
        outcome: str,
        *,
        http_status: int | None = None,
        error_code: str | None = None,
        message: str | None = None,
        attempts: int | None = None,
    ) -> None:
        """Complete journal entries with their outcome."""
        with self._writing() as con:
            _journal.finish(
                con,
                entry_ids,
                outcome,
                http_status=http_status,
                error_code=error_code,
                message=message,
                attempts=attempts,
            )

    def journal_record(
        self,
        *,
        fingerprint: str,
        action: str,
        item_id: str,
        outcome: str,
        message: str,
        item_kind: str = "transaction",
    ) -> None:
        """Journal an outcome reached without a request (a skip decided at apply time)."""
        with self._writing() as con:
            _journal.record(
                con,
                fingerprint=fingerprint,
                action=action,
                item_kind=item_kind,
                item_id=item_id,
                outcome=outcome,
                message=message,
            )

    def journal_requested(self, entry_id: int) -> None:
        """Mark a claimed entry as sent (just before its request goes out): from then on it is
        in doubt until its outcome is known."""
        with self._writing() as con:
            _journal.mark_requested(con, entry_id)

    def journal_in_doubt(
        self, action: str, live: Sequence[str] | set[str]
    ) -> list[tuple[int, str, bool]]:
        """(entry id, item id, sent) of `action`'s journal entries left unfinished by runs not
        in `live`: a claim that sent nothing (`sent` False), or a request whose outcome is not
        known, to resolve by reading the record."""
        with self._lock:
            return _journal.in_doubt(self._con, action, live)

    def journal_outcomes(
        self, action: str, outcomes: Sequence[str], ids: Sequence[str]
    ) -> dict[str, str]:
        """Per item, the first of `outcomes` (in order of precedence) the journal records for
        `action` on it: what a plan skips (done, or refused for good by the service)."""
        with self._lock:
            return _journal.outcomes(self._con, action, outcomes, ids)

    def mark_sessions_ended(self, session_ids: Sequence[str], reason: str) -> None:
        """Record wallet sessions ended by paylens itself (e.g. a bulk revoke)."""
        _wallets.mark_sessions_ended(self, session_ids, reason)

    def ensure_wallet_tables(self) -> None:
        """Create the wallet inventory's tables when missing. A warehouse opened read-only
        that has none raises `WarehouseError`: no inventory was ever taken into it."""
        if self.read_only:
            if not _wallets.has_tables(self):
                raise WarehouseError(
                    f"{self.path} holds no wallet inventory yet: take one first "
                    f"(`paylens sync-wallets --db {self.path}`, or wh.sync_wallets(client))"
                )
            return
        with self._lock:
            _wallets.ensure_tables(self._con)

    def store_transactions(self, records: Sequence[dict[str, Any]]) -> None:
        """Store transaction records just read from the service (e.g. the answers of a bulk
        action), exactly as a sync would: status history included, a record given twice
        stored once (its last), one that does not fit the declared schema set aside in
        `rejected_records` (read again by the next sync). Anything but a JSON object (a dict)
        is refused with `InvalidArgumentError`, before anything is written."""
        from paylens.warehouse.sync.save import typed

        buffer: dict[str, bytes] = {}
        no_id: list[bytes] = []
        for i, record in enumerate(records):
            if not isinstance(record, dict):
                raise InvalidArgumentError(
                    "records", f"item {i} is {type(record).__name__}, not a record (a dict)"
                )
            text = _json_text(record)
            if isinstance(record.get("id"), str):
                buffer[record["id"]] = text
            else:
                no_id.append(text)
        if not buffer and not no_id:
            return
        now = utcnow()
        tables, rejects = typed(buffer, no_id, run_id=0, at=now)
        with self._writing() as con, _store.transaction(con):
            if tables is not None:
                _store.upsert_transaction_tables(con, tables, run_id=0, now=now)
            _store.record_rejects(con, rejects)

    # -- wallet inventory (credentials and sessions of embedded wallets; see _wallets) ----------

    def sync_wallets(
        self, client: Client, account_ids: Sequence[str] | None = None, *, concurrency: int = 8
    ) -> dict[str, int]:
        """Inventory the credentials and sessions of `account_ids` (default: every embedded
        wallet account); returns how many accounts, credentials and sessions it found."""
        return _wallets.sync_wallets(self, client, account_ids, concurrency=concurrency)

    def credentials(self, *, include_removed: bool = False) -> pd.DataFrame:
        """Wallet credentials of the inventory, by account."""
        return _wallets.credentials(self, include_removed=include_removed)

    def sessions(self, *, include_ended: bool = False) -> pd.DataFrame:
        """Wallet sessions of the inventory (active at its last look, unless `include_ended`)."""
        return _wallets.sessions(self, include_ended=include_ended)

    def single_credential_accounts(self) -> pd.DataFrame:
        """Inventoried wallet accounts that hold exactly one credential."""
        return _wallets.single_credential_accounts(self)

    def stale_sessions(
        self, *, max_age: timedelta = timedelta(hours=8), as_of: datetime | None = None
    ) -> pd.DataFrame:
        """Sessions still active at `as_of` (default now; pass the service's clock, e.g.
        `sandbox.now`) that were opened more than `max_age` before it."""
        return _wallets.stale_sessions(self, max_age=max_age, as_of=as_of)

    def journal(self) -> pd.DataFrame:
        """The bulk-operations journal: every request sent, before and after; one row per
        item an apply acted on, named by `item_kind` (`transaction`, `wallet_session`) and
        `item_id`."""
        with self._lock:
            source = _journal.entries(self._con)
        return self.sql(f"SELECT {', '.join(_journal.COLUMNS)} FROM {source} ORDER BY entry_id")

    def _column_names(self, table: str) -> list[str]:
        with self._lock:
            return [r[0] for r in self._con.execute(f"DESCRIBE {table}").fetchall()]

    def snapshot(self, table: str) -> pa.Table:
        """An Arrow copy of a table's current rows (`current_rows`) without its raw JSON, to
        evaluate a user's expression on away from the file (see `paylens.ops`)."""
        kept = ", ".join(c for c in self._column_names(table) if c != "raw")
        with self._lock:
            return self._con.sql(f"SELECT {kept} FROM {self.current_rows(table)}").to_arrow_table()

    def publish(
        self, catalog: str, namespace: str, *, location: str | os.PathLike[str] | None = None
    ) -> PublishReport:
        """Publish every table as Apache Iceberg tables in `namespace` of the SQL catalog at
        `catalog` (`postgresql://...` or `sqlite:///...`), data files under `location`; only
        partitions whose rows changed are rewritten (see `paylens.lake.publish`). Needs the
        `lake` extra."""
        from paylens.lake import publish  # pyiceberg only when publishing

        return publish(self, catalog, namespace, location=location)

    def current_rows(self, table: str, *, include_removed: bool = False) -> str:
        """SQL naming a table's current rows (a FROM item called `table`): a transaction the
        service no longer has (`removed_at` set) and the rows hanging off it (fees, card
        summaries, payment instructions, status history) are left out unless
        `include_removed=True`. `sql()` reads the tables as they are."""
        # a file of an older layout opened read-only has no `removed_at`: nothing is removed
        removable = "removed_at" in self._column_names("transactions")
        return _store.current(table, include_removed=include_removed or not removable)

    def relation(self, table: str, *, include_removed: bool = False) -> duckdb.DuckDBPyRelation:
        """A lazy DuckDB relation over a table's current rows (`current_rows`), for analysis on
        millions of rows."""
        rows = self.current_rows(table, include_removed=include_removed)
        return self._con.table(table) if rows == table else self._con.sql(f"SELECT * FROM {rows}")

    # -- lifecycle -------------------------------------------------------------------------

    def _checkpoint(self) -> None:
        """Write the log into the file now: closing the file does it too, but fails silently
        (a full disk), leaving the log beside it."""
        with self._lock, storage_errors(self.path):
            self._con.execute("CHECKPOINT")

    @property
    def closed(self) -> bool:
        """Whether this Warehouse was closed (its queries and writes then refused)."""
        return self._closed

    def close(self) -> None:
        """Let go of the file (the last Warehouse on it in this process closes it)."""
        if not self._closed:
            self._closed = True
            close_store(self._store)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
