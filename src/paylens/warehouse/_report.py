"""What a sync did: `SyncReport`, as a line for a shell and a table for a notebook."""

from __future__ import annotations

import html
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta

from .sync import ResourceResult
from .sync.events import FoldResult
from .sync.freshness import age_text

SANDBOX_LABEL = "SANDBOX DATA"


@dataclass
class SyncReport:
    """What one sync did. `source` is where the data came from; sandbox data says so.
    `reverified`: records re-read by the rolling re-verification (its cost; they are counted
    in `unchanged` or `changed` too). `reads`: how each smaller resource was read ("whole",
    "changes" or "not re-read", and why); `not_reread`: the resources this sync did not
    re-read (by the `Freshness` policy), with how old their last whole read is. `events`: the
    webhook events the sync folded in first (how many applied, the oldest it could not and
    why, the receivers' gaps since the previous sync, the re-verification's round chosen);
    None when the warehouse has no event store beside it. `compacted`: the tables whose dead
    rows made this sync compact the file at its end (its time is in `duration_seconds`)."""

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
    events: FoldResult | None = None
    compacted: list[str] = field(default_factory=list)

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
        if self.events is not None and self.events.store is not None:
            lines += events_lines(self.events)
        if self.compacted:
            lines.append(
                "  file compacted: the room of rows replaced in "
                + ", ".join(self.compacted)
                + " reclaimed"
            )
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        banner = f"<b style='color:#b00'>{SANDBOX_LABEL}</b> — " if self.is_sandbox else ""
        rows = "".join(
            f"<tr><th style='text-align:left'>{k}</th><td>{html.escape(str(v))}</td></tr>"
            for k, v in asdict(self).items()
            if k not in ("resources", "reads", "not_reread", "events")
        )
        if self.events is not None and self.events.store is not None:
            text = html.escape("; ".join(line.strip() for line in events_lines(self.events)))
            rows += f"<tr><th style='text-align:left'>events</th><td>{text}</td></tr>"
        return f"<div>{banner}sync report<table>{rows}</table></div>"


def events_lines(fold: FoldResult) -> list[str]:
    """The fold's lines of a report: counts, the oldest event not applied, the gaps."""
    skipped = sum(fold.skipped.values())
    lines = [
        f"  events: {fold.applied:,} applied, {fold.stale:,} older than held, "
        f"{skipped:,} skipped, {fold.not_applied:,} not applied (up to #{fold.watermark}); "
        f"re-verification round: {fold.verify_syncs} syncs"
    ]
    if (oldest := fold.oldest_not_applied) is not None:
        lines.append(
            f"  oldest not applied: #{oldest.seq} {oldest.webhook_id} ({oldest.type}, sent "
            f"{oldest.sent_at}): {oldest.reason}"
        )
    coverage = fold.coverage
    if coverage is None or coverage.since is None:
        lines.append("  receiver: no previous sync to cover")
    elif coverage.covered:
        lines.append(f"  receiver: up without a gap since {_instant(coverage.since)}")
    else:
        gaps = ", ".join(f"{_instant(a)} to {_instant(b)}" for a, b in coverage.gaps)
        lines.append(f"  receiver gaps since the previous sync: {gaps}")
    if fold.exact:
        lines.append(
            "  transitions: all by events since the previous sync (older open statuses not listed)"
        )
    return lines


def _instant(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="seconds")


def describe_read(result: ResourceResult) -> str:
    if result.read == "not re-read":
        age = "never read" if result.age is None else f"last read whole {age_text(result.age)} ago"
        return f"not re-read: {age}"
    return f"{result.read}: {result.reason}"
