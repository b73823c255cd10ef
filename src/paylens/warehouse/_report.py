"""What a sync did: `SyncReport`, as a line for a shell and a table for a notebook."""

from __future__ import annotations

import html
from dataclasses import asdict, dataclass, field
from datetime import timedelta

from .sync import ResourceResult
from .sync.freshness import age_text

SANDBOX_LABEL = "SANDBOX DATA"


@dataclass
class SyncReport:
    """What one sync did. `source` is where the data came from; sandbox data says so.
    `reverified`: records re-read by the rolling re-verification (its cost; they are counted
    in `unchanged` or `changed` too). `reads`: how each smaller resource was read ("whole",
    "changes" or "not re-read", and why); `not_reread`: the resources this sync did not
    re-read (by the `Freshness` policy), with how old their last whole read is."""

    run_id: int
    mode: str
    source: str
    is_sandbox: bool
    new: int = 0
    changed: int = 0
    unchanged: int = 0
    rejected: int = 0
    reverified: int = 0
    requests: int = 0
    retries: int = 0
    duration_seconds: float = 0.0
    resources: dict[str, dict[str, int]] = field(default_factory=dict)
    reads: dict[str, str] = field(default_factory=dict)
    not_reread: dict[str, timedelta | None] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return SANDBOX_LABEL if self.is_sandbox else "service data"

    def __str__(self) -> str:
        lines = [
            f"sync #{self.run_id} ({self.mode}, {self.label} from {self.source}): "
            f"{self.new:,} new, {self.changed:,} changed, {self.unchanged:,} unchanged, "
            f"{self.rejected:,} rejected, {self.reverified:,} re-verified; "
            f"{self.requests:,} requests ({self.retries:,} retries) "
            f"in {self.duration_seconds:.1f}s"
        ]
        lines += [
            f"  {name}: {c['new']:,} new, {c['changed']:,} changed, {c['unchanged']:,} unchanged"
            + (f" ({self.reads[name]})" if name in self.reads else "")
            for name, c in self.resources.items()
        ]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        banner = f"<b style='color:#b00'>{SANDBOX_LABEL}</b> — " if self.is_sandbox else ""
        rows = "".join(
            f"<tr><th style='text-align:left'>{k}</th><td>{html.escape(str(v))}</td></tr>"
            for k, v in asdict(self).items()
            if k not in ("resources", "reads", "not_reread")
        )
        return f"<div>{banner}sync report<table>{rows}</table></div>"


def describe_read(result: ResourceResult) -> str:
    if result.read == "not re-read":
        age = "never read" if result.age is None else f"last read whole {age_text(result.age)} ago"
        return f"not re-read: {age}"
    return f"{result.read}: {result.reason}"
