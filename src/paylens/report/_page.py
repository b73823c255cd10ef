"""The report's page: a summary first, then sections a reader can fold (`<details>`), each
holding prose, tables and figures, written as one HTML block a notebook cell shows."""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from ._format import show

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: The page's own rules: tables no wider than the page (long cells wrap), figures scaled to
#: it, sections set apart. Shown once, with the summary.
STYLE = """<style>
.paylens { max-width: 100%; font-size: 14px; }
.paylens table { max-width: 100%; border-collapse: collapse; margin: 0.4em 0 0.8em; }
.paylens th, .paylens td { padding: 2px 8px; }
.paylens td { text-align: right; white-space: nowrap; }
.paylens td:first-child, .paylens th:first-child { text-align: left; }
.paylens td:last-child { white-space: normal; }
.paylens thead th { border-bottom: 1px solid #999; vertical-align: bottom; text-align: right; }
.paylens img { max-width: 100%; height: auto; }
.paylens details { border-top: 1px solid #ddd; padding: 0.3em 0; }
.paylens summary { font-size: 1.25em; font-weight: 600; cursor: pointer; padding: 0.3em 0; }
.paylens .banner { font-weight: 700; padding: 4px 8px; background: #fff3cd; display: inline-block; }
.paylens .facts { color: #444; margin: 0.3em 0; }
</style>"""

Part = str | pd.DataFrame | Any


def figure_html(fig: Figure) -> str:
    """A figure as an SVG image (its words text, not drawn glyphs), scaled to the page."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="svg")
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img src="data:image/svg+xml;base64,{data}" alt="{html.escape(_title(fig))}">'


def _title(fig: Figure) -> str:
    titles = [fig.get_suptitle(), *(ax.get_title() for ax in fig.axes[:1])]
    return next((t.splitlines()[0] for t in titles if t), "figure")


def part_html(part: Part) -> str:
    """Prose (already HTML), a frame (through `show`), a Styler, a figure or anything with
    an HTML form."""
    from matplotlib.figure import Figure

    if isinstance(part, str):
        return part
    if isinstance(part, pd.DataFrame):
        return show(part).to_html()
    if isinstance(part, Figure):
        return figure_html(part)
    if hasattr(part, "to_html"):
        return str(part.to_html())
    return str(part._repr_html_())


class Section:
    """A part of the report under a heading a reader can fold (closed unless `open`)."""

    def __init__(self, title: str, *parts: Part, open: bool = False) -> None:
        self.title = title
        self.parts: Sequence[Part] = parts
        self.open = open

    def _repr_html_(self) -> str:
        body = "\n".join(part_html(p) for p in self.parts)
        state = " open" if self.open else ""
        return (
            f'<div class="paylens"><details{state}><summary>{html.escape(self.title)}</summary>'
            f"\n{body}\n</details></div>"
        )

    def __repr__(self) -> str:
        return f"Section({self.title!r}, {len(self.parts)} parts)"
