"""The transaction store: one numpy column per field, rows in (createdAt, id) order.

New rows (from `advance` or quotes) are always created after every existing row, so they append
at the end and a row's index never changes: the index is the pagination position. Lookups use
small indices kept beside the columns: by id (sorted high halves of the UUIDs), and postings
(rows grouped by customer, account, type and status) that grow with appends and are rebuilt
lazily when statuses change. `live` lists the rows with planned events still ahead of the clock.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..generate.schema import COLUMNS, NEVER, STATUSES, next_event, status_at


class Postings:
    """Rows grouped by a small non-negative integer key, each group in ascending row order."""

    def __init__(self, keys: np.ndarray, n_keys: int) -> None:
        self.n_keys = n_keys
        self.order = np.argsort(keys, kind="stable").astype(np.int64)
        self.start = np.concatenate(([0], np.cumsum(np.bincount(keys, minlength=n_keys)))).astype(
            np.int64
        )

    def rows(self, key: int) -> np.ndarray:
        if not 0 <= key < self.n_keys:
            return self.order[:0]
        return self.order[self.start[key] : self.start[key + 1]]

    def extend(self, keys: np.ndarray, first_row: int) -> None:
        """Add rows first_row, first_row + 1, ... (all after the existing ones) with `keys`."""
        order = np.argsort(keys, kind="stable")
        self.order = np.insert(self.order, self.start[keys[order] + 1], first_row + order)
        self.start[1:] += np.cumsum(np.bincount(keys, minlength=self.n_keys))


class IdIndex:
    """Rows by the high 64 bits of their UUID."""

    def __init__(self, hi: np.ndarray) -> None:
        self.perm = np.argsort(hi, kind="stable").astype(np.int64)
        self.sorted = hi[self.perm]

    def rows(self, hi: int) -> np.ndarray:
        key = np.uint64(hi)
        return self.perm[
            np.searchsorted(self.sorted, key, "left") : np.searchsorted(self.sorted, key, "right")
        ]

    def extend(self, hi: np.ndarray, first_row: int) -> None:
        order = np.argsort(hi, kind="stable")
        at = np.searchsorted(self.sorted, hi[order], "right")
        self.sorted = np.insert(self.sorted, at, hi[order])
        self.perm = np.insert(self.perm, at, first_row + order)


@dataclass(frozen=True)
class Keyed:
    """How a posting key is computed from columns, and how many keys there are."""

    n_keys: int
    dynamic: bool  # changes after creation (status): rebuilt when statuses changed


class TransactionStore:
    """Columns of every transaction, with the indices that answer list queries quickly."""

    def __init__(
        self, cols: dict[str, np.ndarray], now: int, n_customers: int, n_accounts: int
    ) -> None:
        self.n = len(cols["hi"])
        self.changes = 0  # plans changed through the interface (`update`)
        self._cols = {name: np.ascontiguousarray(cols[name]) for name in COLUMNS}
        self._keyed = {
            "customer": Keyed(n_customers, False),
            "sender": Keyed(n_accounts + 1, False),
            "receiver": Keyed(n_accounts + 1, False),
            "kind": Keyed(3, False),
            "status": Keyed(len(STATUSES), True),
            "kind_status": Keyed(3 * 16, True),
        }
        self._postings: dict[str, Postings] = {}
        self._ids = IdIndex(self.col("hi"))
        nxt = next_event(self._cols, now)
        self.live = np.flatnonzero(nxt != NEVER)
        self.live_next = nxt[self.live]

    # --- columns ------------------------------------------------------------------------------

    def col(self, name: str) -> np.ndarray:
        return self._cols[name][: self.n]

    def gather(
        self, rows: np.ndarray, names: tuple[str, ...] | None = None
    ) -> dict[str, np.ndarray]:
        return {name: self._cols[name][rows] for name in (names or tuple(COLUMNS))}

    def append(self, cols: dict[str, np.ndarray], now: int) -> np.ndarray:
        """Add rows (all created after every existing row); returns their indices."""
        k = len(cols["hi"])
        first = self.n
        capacity = len(self._cols["hi"])
        if first + k > capacity:
            grown = max(first + k, capacity + capacity // 4 + 1024)
            for name, arr in self._cols.items():
                bigger = np.empty(grown, dtype=arr.dtype)
                bigger[:first] = arr[:first]
                self._cols[name] = bigger
        for name, arr in self._cols.items():
            arr[first : first + k] = cols[name]
        self.n = first + k
        for name, postings in list(self._postings.items()):
            if self._keyed[name].dynamic:
                del self._postings[name]
            else:
                postings.extend(self._key(name, np.arange(first, first + k)), first)
        self._ids.extend(cols["hi"], first)
        rows = np.arange(first, first + k)
        self.track(rows, now)
        return rows

    def update(self, row: int, now: int, **values: object) -> None:
        """Change fields of one row (a change made through the interface), then re-plan it.
        The world calls this through `World._update`, which also drops the row's kept wire
        text: rendered rows are kept until their next planned event otherwise."""
        for name, value in values.items():
            self._cols[name][row] = value
        self.changes += 1
        self.refresh(np.array([row]), now)

    def refresh(self, rows: np.ndarray, now: int) -> np.ndarray:
        """Recompute the status of `rows` at `now`; returns the rows whose status changed."""
        if not len(rows):
            return rows
        new = status_at(self.gather(rows, ("kind", "t1", "t2", "t3", "flags", "final")), now)
        changed = rows[new != self._cols["status"][rows]]
        if len(changed):
            self._cols["status"][rows] = new
            self._postings.pop("status", None)
            self._postings.pop("kind_status", None)
        self.track(rows, now)
        return np.asarray(changed)

    def track(self, rows: np.ndarray, now: int) -> None:
        """Keep `live` in step with the plans of `rows`."""
        keep = ~np.isin(self.live, rows)
        nxt = next_event(self.gather(rows, ("t1", "t2", "t3")), now)
        ahead = nxt != NEVER
        self.live = np.concatenate([self.live[keep], rows[ahead]])
        self.live_next = np.concatenate([self.live_next[keep], nxt[ahead]])

    def due(self, until: int) -> np.ndarray:
        """Live rows with a planned event at or before `until`."""
        return np.sort(self.live[self.live_next <= until])

    # --- indices ------------------------------------------------------------------------------

    def _key(self, name: str, rows: np.ndarray | slice) -> np.ndarray:
        if name in ("sender", "receiver"):
            return self._cols[name][rows].astype(np.int64) + 1
        if name == "kind_status":
            kind = self._cols["kind"][rows].astype(np.int64)
            return np.asarray(kind * 16 + self._cols["status"][rows])
        return self._cols[name][rows].astype(np.int64)

    def postings(self, name: str) -> Postings:
        got = self._postings.get(name)
        if got is None:
            got = self._postings[name] = Postings(
                self._key(name, slice(0, self.n)), self._keyed[name].n_keys
            )
        return got

    def rows_by_hi(self, hi: int) -> np.ndarray:
        return self._ids.rows(hi)

    def rows_with(self, name: str, value: int) -> np.ndarray:
        """Rows whose `name` column ("sender", "receiver", ...) equals `value`."""
        return self.postings(name).rows(value + 1 if name in ("sender", "receiver") else value)


@dataclass(frozen=True)
class RowSet:
    """Rows matching a query, ascending: an explicit array, or the range [lo, hi)."""

    rows: np.ndarray | None
    lo: int = 0
    hi: int = 0

    @classmethod
    def range(cls, lo: int, hi: int) -> RowSet:
        return cls(None, lo, max(lo, hi))

    @classmethod
    def of(cls, rows: np.ndarray) -> RowSet:
        return cls(np.asarray(rows, dtype=np.int64))

    @classmethod
    def empty(cls) -> RowSet:
        return cls(np.zeros(0, dtype=np.int64))

    def __len__(self) -> int:
        return self.hi - self.lo if self.rows is None else len(self.rows)

    def page(self, after: int | None, ascending: bool, limit: int) -> tuple[np.ndarray, bool]:
        """Up to `limit` rows beyond row `after` (None: from the start) in the given direction,
        and whether more follow."""
        if self.rows is None:
            if ascending:
                first = self.lo if after is None else max(self.lo, after + 1)
                stop = min(self.hi, first + limit)
                return np.arange(first, stop), stop < self.hi
            end = self.hi if after is None else min(self.hi, after)
            stop = max(self.lo, end - limit)
            return np.arange(end - 1, stop - 1, -1), stop > self.lo
        if ascending:
            i = 0 if after is None else int(np.searchsorted(self.rows, after, "right"))
            return self.rows[i : i + limit], i + limit < len(self.rows)
        j = len(self.rows) if after is None else int(np.searchsorted(self.rows, after, "left"))
        return self.rows[max(0, j - limit) : j][::-1], j - limit > 0
