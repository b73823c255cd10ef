"""Helpers shared by tests."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

_INSTANT = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def same_instants(value: Any) -> Any:
    """A wire value with every ISO timestamp read as an instant, so `…:48Z` equals `…:48.000Z`
    (the same instant spelled two ways) while every other value must match exactly."""
    if isinstance(value, dict):
        return {k: same_instants(v) for k, v in value.items()}
    if isinstance(value, list):
        return [same_instants(v) for v in value]
    if isinstance(value, str) and _INSTANT.match(value):
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value
