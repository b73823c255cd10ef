"""Where a plot's panels go: sized and placed once, from the texts they show.

A constrained layout measures every text of a figure on every draw (the report's revenue
figure spent more time laying out than drawing); here each plot, once drawn on, is given its
size and places by `place`, from the widest bar label and legend entry and the lines of its
titles and axis labels, and nothing moves afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: Every figure's width, a row of bars' height (in a small multiple) and the least width of a
#: small multiple's bars, in inches; `_PAD` is kept clear around each block of text.
_WIDTH = 11.0
_ROW_HEIGHT = 0.35
_GRID_ROW = 0.25
_GRID_BARS = 2.0
_PAD = 0.1


def figure(panels: int = 1) -> tuple[Figure, list[Axes]]:
    """A figure of `panels` axes (at least one); `place` sizes it and places them once drawn on."""
    from matplotlib.figure import Figure  # matplotlib loads only when a plot is asked for

    fig = Figure(figsize=(_WIDTH, 4.0))
    return fig, [fig.add_subplot(max(panels, 1), 1, i + 1) for i in range(max(panels, 1))]


def place(
    fig: Figure,
    axes: Sequence[Axes],
    *,
    grid: bool = False,
    title: str = "",
    handles: Sequence[Artist] = (),
) -> None:
    """Size the figure and place its panels from what they show, measured once: the widest bar
    label and legend entry, the lines of each title and axis label. Nothing is laid out again
    when the figure is drawn (a constrained layout measures every text on every draw).

    One panel a row, each legend right of its bars; or, with `grid`, small multiples: as many
    panels a row as leave each at least `_GRID_BARS` inches of bars, the grouping said once a
    row, and the figure's `title` and one legend of `handles` above them all."""
    from matplotlib import rcParams
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.font_manager import FontProperties
    from matplotlib.ticker import MaxNLocator

    measure = RendererAgg(1, 1, fig.dpi)

    def points(size: float | str) -> float:
        return float(FontProperties(size=size).get_size_in_points())

    def widest(texts: Sequence[str], size: float) -> float:
        """In points, with a tenth to spare: hinted glyphs are wider at a lower resolution."""
        font = FontProperties(size=size)
        pixels = max(
            (measure.get_text_width_height_descent(t, font, ismath=False)[0] for t in texts if t),
            default=0.0,
        )
        return 1.1 * pixels * 72 / fig.dpi

    def lines(text: str) -> int:
        return text.count("\n") + 1 if text else 0

    tick, label = points(rcParams["ytick.labelsize"]), points(rcParams["axes.labelsize"])
    heading, key = points(rcParams["axes.titlesize"]), points("small")
    ticks = rcParams["ytick.major.size"] + rcParams["ytick.major.pad"]
    labels = widest([t.get_text() for ax in axes for t in ax.get_yticklabels()], tick)
    ylabel = 1.2 * label + rcParams["axes.labelpad"] if any(ax.get_ylabel() for ax in axes) else 0
    # a legend right of the bars: its pads outside and in, the handle, a gap, the widest entry
    legends = [legend for ax in axes if (legend := ax.get_legend()) is not None]
    entries = [t.get_text() for legend in legends for t in legend.get_texts()]
    legend_width = widest(entries, key) + 4.1 * key if entries else 0.0
    left = (ylabel + labels + ticks) / 72 + _PAD  # inches left of each panel's bars
    right = max(legend_width / 72, 0.3)  # room for the legend, or for the last tick's label
    usable = _WIDTH - 2 * _PAD
    columns = 1
    if grid:
        columns = max(1, min(len(axes), int(usable // (left + right + _GRID_BARS))))
    column = usable / columns
    bars = (column - left - right) / (1.01 if entries else 1.0)  # the legend sits at 1.01
    rows = max(max((len(ax.get_yticks()) for ax in axes), default=1), 1)
    height = (_GRID_ROW if grid else _ROW_HEIGHT) * rows + 0.5
    if entries:
        per_legend = max(len(legend.get_texts()) for legend in legends)
        height = max(height, (1.5 * per_legend + 1.0) * key / 72)
    above = (max(lines(ax.get_title()) for ax in axes) * 1.2 * heading + 6.0) / 72 + _PAD
    below = (ticks + 1.2 * tick + rcParams["axes.labelpad"]) / 72 + _PAD
    below += max(lines(ax.get_xlabel()) for ax in axes) * 1.2 * label / 72
    top = _PAD + (lines(title) * 1.2 * heading / 72 + _PAD if title else 0.0)
    top += 1.6 * key / 72 + _PAD if handles else 0.0
    grid_rows = -(-len(axes) // columns)
    total = top + grid_rows * (above + height + below) + _PAD
    fig.set_size_inches(_WIDTH, total)
    for i, ax in enumerate(axes):
        row, col = divmod(i, columns)
        x = _PAD + col * column + left
        y = total - top - row * (above + height + below) - above - height
        ax.set_position((x / _WIDTH, y / total, bars / _WIDTH, height / total))
        # no more amounts along the axis than fit side by side (the default counts on the
        # font's size, not the labels': in a narrow panel 350000 ran into 400000)
        texts = ax.xaxis.get_major_formatter().format_ticks(list(ax.xaxis.get_major_locator()()))
        fits = int(bars / (1.5 * widest(texts, tick) / 72)) if any(texts) else len(texts)
        if len(texts) > fits and ax.get_xscale() == "linear":  # a log axis names its ticks
            ax.xaxis.set_major_locator(MaxNLocator(nbins=max(1, fits)))
        if col:
            ax.set_ylabel("")  # said by the row's first panel
    if title:
        fig.suptitle(title, x=0.5, y=1 - _PAD / total, va="top", fontsize=heading)
    if handles:
        fig.legend(
            handles=handles,
            loc="upper center",
            bbox_to_anchor=(0.5, 1 - (top - 1.6 * key / 72 - _PAD) / total),
            ncols=len(handles),
            fontsize="small",
            frameon=False,
        )
