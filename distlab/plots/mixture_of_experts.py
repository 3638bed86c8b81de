"""Pictures of mixture-of-experts layers: the all-to-all byte matrix, per-GPU expert load against capacity,
all-to-all time inside and across nodes, and total against active parameters.

Data in (distlab.moe results: RoutingTrace arrays, MoELayerCost numbers, catalog counts), artists out;
nothing here computes physics. `update` methods move artists in place and return True only when the
static part (axes, ticks) changed, so the widgets can blit (Lesson 10).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.lines import Line2D
from matplotlib.ticker import NullLocator

from ..units import format_seconds
from ._ticks import DrawnTicks, drawn_ticks
from ._style import (
    BLUE,
    CAPACITY_COLOUR,
    FADED_ALPHA,
    GREEN,
    GREY,
    MUTED,
    ORANGE,
    RED,
    finish_axes,
    nice_ceiling,
    swatch,
)

__all__ = [
    "INTRA_COLOUR",
    "INTER_COLOUR",
    "LOAD_COLOUR",
    "DROP_COLOUR",
    "TIME_RANGE",
    "ByteMatrix",
    "byte_matrix",
    "byte_matrix_scale",
    "LOAD_RANGE",
    "LoadBars",
    "load_bars",
    "TimeBars",
    "time_bars",
    "load_legend_html",
    "total_vs_active_figure",
    "byte_matrix_figure",
]

INTRA_COLOUR = BLUE
INTER_COLOUR = ORANGE
LOAD_COLOUR = GREEN
DROP_COLOUR = RED
#: The fixed time axis of the all-to-all bars (s), log scale.
TIME_RANGE = (1e-5, 10.0)
_TIME_TICKS = (1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0)


# --------------------------------------------------------------------------- the byte matrix


@dataclass
class ByteMatrix:
    """An ep x ep image of the bytes GPU i sends GPU j in one all-to-all; cells not yet delivered (a pairwise
    step later than the one shown) are blank. The image is the animated artist.

    With `ticks` (a widget's matrix, byte_matrix(ax, fixed=True)), the image fills a fixed unit square whatever
    the EP size and the GPU numbers are drawn ticks (plots._ticks) that move with the image: a new EP size
    leaves the axes as they are (a blit, not a full redraw)."""

    ax: Axes
    image: AxesImage = None  # type: ignore[assignment]  # byte_matrix always gives the image
    size: int = 0
    #: (x ticks, y ticks) drawn with the image (a widget's fixed square), or None: the axes' own ticks
    ticks: tuple | None = None

    @property
    def animated_artists(self) -> list:
        return [self.image, *(self.ticks or ())]

    def update(self, matrix, delivered=None, faded: bool = False) -> bool:
        """matrix: (ep, ep) bytes; delivered: a boolean mask of the cells sent so far (None: all).
        Returns True when the axes changed (a new matrix size without drawn ticks: a full redraw)."""
        data = np.asarray(matrix, dtype=float) / 1e6
        shown = np.where(delivered, data, np.nan) if delivered is not None else data
        n = data.shape[0]
        full = n != self.size and self.ticks is None
        if n != self.size:
            self.size = n
            ticks = list(range(0, n, max(1, n // 8)))
            if self.ticks is None:
                self.image.set_extent((-0.5, n - 0.5, n - 0.5, -0.5))
                self.ax.set_xlim(-0.5, n - 0.5)
                self.ax.set_ylim(n - 0.5, -0.5)
                self.ax.set_xticks(ticks)
                self.ax.set_yticks(ticks)
            else:  # the unit square, GPU i's cell from i/n to (i + 1)/n, row 0 on top
                self.ticks[0].set_ticks([(i + 0.5) / n for i in ticks], ticks)
                self.ticks[1].set_ticks([1 - (i + 0.5) / n for i in ticks], ticks)
        clim = byte_matrix_scale(matrix)
        if self.image.get_clim()[1] != clim:
            self.image.set_clim(0.0, clim)
        self.image.set_data(shown)
        self.image.set_alpha(FADED_ALPHA if faded else 1.0)
        return full


def byte_matrix_scale(matrix) -> float:
    """The top of a byte matrix's colour scale, in MB: the largest cell rounded up to a nice number (plots.nice_ceiling),
    1 MB for an empty matrix. The darkest blue is this many MB, white 0 (lesson 10's all-to-all app says so in its
    text: its matrix has no colour bar)."""
    data = np.asarray(matrix, dtype=float) / 1e6
    top = float(np.nanmax(data)) if np.isfinite(data).any() and np.nanmax(data) > 0 else 1.0
    return float(nice_ceiling(top))


def byte_matrix(ax, fixed: bool = False) -> ByteMatrix:
    """The byte-matrix artists on `ax` (rows: sending GPU, columns: receiving GPU, colour: MB). fixed: the
    matrix fills a unit square with drawn GPU ticks, so no EP size changes the axes (for a widget)."""
    image = ax.imshow(np.zeros((1, 1)), cmap="Blues", vmin=0.0, vmax=1.0, interpolation="nearest")
    ax.set_xlabel("to GPU", fontsize=9)
    ax.set_ylabel("from GPU", fontsize=9)
    ax.tick_params(labelsize=8)
    ticks = None
    if fixed:
        image.set_extent((0.0, 1.0, 1.0, 0.0))
        ax.set_xlim(0.0, 1.0)
        ax.set_ylim(1.0, 0.0)
        ticks = (drawn_ticks(ax, "x"), drawn_ticks(ax, "y"))
    return ByteMatrix(ax, image, 0, ticks)


# --------------------------------------------------------------------------- load per GPU against capacity

#: The fixed y range of the load bars, in multiples of the mean load (the busiest GPU of a balanced router
#: sits near 1; bars above the top are clipped at it).
LOAD_RANGE = (0.0, 5.0)


@dataclass
class LoadBars:
    """One bar per GPU of the EP group: token copies its experts accept (green) and drop (red, stacked), in
    multiples of the mean load on a fixed axis (LOAD_RANGE), with the capacity per GPU as a dashed line and
    the mean (1) dotted. The bars share a fixed x range (0 to 1, GPU i's slot from i/n to (i + 1)/n) and the
    GPU numbers are drawn ticks (plots._ticks): no number of GPUs changes the axes."""

    ax: Axes
    kept: list = field(default_factory=list)
    dropped: list = field(default_factory=list)
    capacity_line: Line2D = None  # type: ignore[assignment]  # load_bars always gives both lines
    mean_line: Line2D = None  # type: ignore[assignment]
    ticks: DrawnTicks = None  # type: ignore[assignment]  # load_bars always gives them
    size: int = 0

    @property
    def animated_artists(self) -> list:
        return list(self.kept) + list(self.dropped) + [self.capacity_line, self.ticks]

    def update(self, kept, dropped, capacity=None, mean=None, faded: bool = False) -> bool:
        """kept, dropped: copies per GPU; capacity: copies a GPU accepts (None: dropless); mean: copies per GPU
        on average. Returns False: the axes never change (the bars and ticks are animated)."""
        kept = np.asarray(kept, dtype=float)
        dropped = np.asarray(dropped, dtype=float)
        n = kept.size
        scale = 1.0 / mean if mean else 1.0
        top = LOAD_RANGE[1]
        for i, (bar, drop) in enumerate(zip(self.kept, self.dropped)):
            visible = i < n
            bar.set_visible(visible)
            drop.set_visible(visible)
            if visible:
                for artist in (bar, drop):
                    artist.set_x((i + 0.1) / n)
                    artist.set_width(0.8 / n)
                k = min(kept[i] * scale, top)
                bar.set_height(k)
                drop.set_y(k)
                drop.set_height(min(dropped[i] * scale, top - k))
                for artist in (bar, drop):
                    artist.set_alpha(FADED_ALPHA if faded else 1.0)
        self.capacity_line.set_visible(capacity is not None)
        if capacity is not None:
            level = min(capacity * scale, top)
            self.capacity_line.set_ydata([level, level])
        if n != self.size:
            self.size = n
            labelled = list(range(0, n, max(1, n // 8)))
            self.ticks.set_ticks([(i + 0.5) / n for i in labelled], labelled)
        return False


def load_bars(ax, n_max: int) -> LoadBars:
    """Load-bar artists for up to n_max GPUs on `ax` (y: copies / mean, fixed range LOAD_RANGE; x: a fixed 0 to 1
    shared by the GPUs shown, numbered by drawn ticks)."""
    x = np.arange(n_max)
    kept = list(ax.bar(x, np.zeros(n_max), color=LOAD_COLOUR, width=0.8, align="edge"))
    dropped = list(ax.bar(x, np.zeros(n_max), color=DROP_COLOUR, width=0.8, align="edge"))
    capacity = ax.axhline(0.0, color=CAPACITY_COLOUR, linestyle="--", linewidth=1.2)
    mean = ax.axhline(1.0, color=GREY, linestyle=":", linewidth=1.2)
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(*LOAD_RANGE)
    ax.set_xlabel("GPU of the EP group", fontsize=9)
    ax.set_ylabel("token copies / mean", fontsize=9)
    ax.tick_params(labelsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    return LoadBars(ax, kept, dropped, capacity, mean, drawn_ticks(ax, "x"))


# --------------------------------------------------------------------------- all-to-all time, intra vs inter


#: what a TimeBars row says where its part takes no time at all
NO_TIME = "none: nothing goes this way"


@dataclass
class TimeBars:
    """Horizontal bars on a fixed log time axis (TIME_RANGE): one per named part, value labels beside."""

    ax: object
    bars: list = field(default_factory=list)
    labels: list = field(default_factory=list)

    @property
    def animated_artists(self) -> list:
        return list(self.bars) + list(self.labels)

    def update(self, seconds, faded: bool = False) -> bool:
        left = TIME_RANGE[0]
        for bar, label, value in zip(self.bars, self.labels, seconds):
            if value is None or faded or not np.isfinite(value) or value <= 0:
                bar.set_width(0.0)
                # no time at all (the network part of an EP group inside one node): a log axis has no bar for it, so
                # the row says so rather than stand blank (lesson 10, review v17)
                zero = value is not None and not faded and value == 0
                label.set_position((left * 1.15, bar.get_y() + bar.get_height() / 2))
                label.set_text(NO_TIME if zero else "")
                continue
            right = min(max(value, left), TIME_RANGE[1])
            bar.set_width(right - left)
            label.set_position((right * 1.15, bar.get_y() + bar.get_height() / 2))
            label.set_text(format_seconds(value))
        return False


def time_bars(ax, names, colours) -> TimeBars:
    """One horizontal bar per name (top to bottom) on a fixed log axis from 10 us to 10 s."""
    y = np.arange(len(names))[::-1]
    bars = list(ax.barh(y, np.zeros(len(names)), left=TIME_RANGE[0], color=list(colours), height=0.6))
    labels = [ax.text(TIME_RANGE[0], yi, "", va="center", fontsize=8, color=MUTED) for yi in y]
    ax.set_xscale("log")
    ax.set_xlim(*TIME_RANGE)
    # the decades as times ('10 µs' ... '10 s'): bare powers of ten gave the axis no unit (lesson 10, review v14)
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticks(_TIME_TICKS, [format_seconds(t) for t in _TIME_TICKS])
    ax.set_yticks(y)
    ax.set_yticklabels(names, fontsize=8)
    ax.tick_params(axis="x", labelsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    return TimeBars(ax, bars, labels)


def load_legend_html() -> str:
    """The HTML legend of the all-to-all app's two panels (text stays out of the per-frame render)."""
    return (
        '<div style="font-size:12px"><b>left</b>: MB each GPU sends each GPU in one dispatch (after the chosen '
        "pairwise step); <b>right</b>: token copies per GPU over the mean "
        + swatch(LOAD_COLOUR, "accepted")
        + swatch(DROP_COLOUR, "dropped")
        + ", dashed: capacity, dotted: the mean</div>"
    )


# --------------------------------------------------------------------------- static figures for the notebook


def total_vs_active_figure(names, total, active, active_flops_share=None) -> Figure:
    """Grouped bars: total and active parameters (billions) of each model, log scale."""
    fig = Figure(figsize=(6.4, 3.0))
    ax = fig.add_subplot()
    x = np.arange(len(names))
    ax.bar(x - 0.2, np.asarray(total) / 1e9, width=0.4, color=BLUE, label="total parameters")
    ax.bar(x + 0.2, np.asarray(active) / 1e9, width=0.4, color=ORANGE, label="active per token")
    for xi, t, a in zip(x, total, active):
        ax.text(xi + 0.2, a / 1e9 * 1.1, f"{a / t:.0%}", ha="center", fontsize=8, color=MUTED)
    ax.set_yscale("log")
    ax.set_xticks(x)
    ax.set_xticklabels(names, fontsize=8)
    ax.set_ylabel("billions", fontsize=9)
    finish_axes(ax, "what a token pays for: active parameters")
    fig.subplots_adjust(left=0.1, right=0.98, bottom=0.14, top=0.9)
    return fig


def byte_matrix_figure(matrix, title: str = "") -> Figure:
    """A static byte-matrix picture (MB) of one all-to-all, with a colour bar."""
    fig = Figure(figsize=(4.2, 3.4))
    ax = fig.add_subplot()
    art = byte_matrix(ax)
    art.update(matrix)
    fig.colorbar(art.image, ax=ax, label="MB sent")
    if title:
        ax.set_title(title, fontsize=10)
    return fig
