"""A period's bounds as UTC instants, read without pandas where the ISO format covers them (a
`paylens report` process then loads no pandas: the notebook's kernel does the figures)."""

from __future__ import annotations

from datetime import UTC, date, datetime


def instant(value: date | datetime | str | None) -> datetime | None:
    """A period bound as a UTC instant; a date or naive time is read as UTC. ISO dates and
    instants are read as they are; any other spelling pandas reads (`2025-9-1`, `1 Sep 2025`)
    is read by pandas."""
    if value is None or value == "":
        return None
    stamp: datetime
    if isinstance(value, datetime):
        stamp = value.to_pydatetime() if hasattr(value, "to_pydatetime") else value
    elif isinstance(value, date):
        stamp = datetime(value.year, value.month, value.day)
    else:
        try:
            stamp = datetime.fromisoformat(str(value).strip())
        except ValueError:
            import pandas as pd

            stamp = pd.Timestamp(value).to_pydatetime()
    return stamp.replace(tzinfo=UTC) if stamp.tzinfo is None else stamp.astimezone(UTC)
