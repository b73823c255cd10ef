"""A sync's progress display (tqdm, notebook-aware), or none."""

from __future__ import annotations

import threading
from typing import Any

from paylens._bars import visible_bar


class Progress:
    """Records and pages read, on a tqdm bar (notebook-aware) where it can be seen (a
    terminal, a notebook; `paylens._bars`) or nowhere; thread-safe. A full
    sync knows how many records to expect (the service's `totalCount`), so the bar shows a
    total and an ETA; the step under way (reading, reconciling, committing, the small
    resources, the checkpoint) is in its label, so the time after the last page is not
    silent."""

    def __init__(self, enabled: bool, is_sandbox: bool) -> None:
        self.pages = 0
        self.records = 0
        self.expected: int | None = None
        self.phases: list[str] = []
        self._lock = threading.Lock()
        self._bar: Any = None
        self._label = "sync (sandbox data)" if is_sandbox else "sync"
        if enabled:
            self._bar = visible_bar(desc=self._label, unit=" records", unit_scale=True, leave=False)

    def expect(self, records: int) -> None:
        with self._lock:
            self.expected = records
            if self._bar is not None:
                self._bar.total = records
                self._bar.refresh()

    def expect_more(self, records: int) -> None:
        """An incremental sync's window will read `records` more: the total grows with it."""
        with self._lock:
            self.expected = (self.expected or 0) + records
            if self._bar is not None:
                self._bar.total = self.expected
                self._bar.refresh()

    def phase(self, name: str) -> None:
        with self._lock:
            self.phases.append(name)
            if self._bar is not None:
                self._bar.set_description_str(f"{self._label}: {name}")

    def update(self, records: int) -> None:
        """One page of `records` records was read."""
        with self._lock:
            self.pages += 1
            self.records += records
            if self._bar is not None:
                self._bar.update(records)
                self._bar.set_postfix(pages=self.pages, refresh=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
