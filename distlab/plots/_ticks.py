"""Tick marks and tick labels drawn as one ordinary artist, the labels from remembered bitmaps (issue 19).

For a widget whose axis range follows a control (a time axis that grows with the step, one tick per GPU of an
EP group): the axes keep fixed limits and no ticks of their own, so their static picture never changes and a
new range is a blit. matplotlib's own axis lays out and rasterises every tick label on each full draw (about
1 ms per label with matplotlib 3.11, most of a 15-35 ms full draw); here a label's text is rasterised once per
(text, size, colour, dpi) and then copied. The ticks are placed in axes fractions (0 = left or bottom), so the
caller maps its own data range onto the fixed limits.
"""

from __future__ import annotations

import math
import threading

import numpy as np
from matplotlib.artist import Artist
from matplotlib.path import Path
from matplotlib.transforms import IdentityTransform

from ._style import TEXT_COLOUR

__all__ = ["DrawnTicks", "drawn_ticks", "nice_ticks", "tick_label"]

#: matplotlib's default major tick: 3.5 pt long, 0.8 pt wide, the label 3.5 pt beyond its end.
TICK_LENGTH_PT = 3.5
TICK_WIDTH_PT = 0.8
TICK_PAD_PT = 3.5
#: Remembered label bitmaps (text, size, colour, dpi) -> (rgba rows bottom first, width, height, baseline offset).
_SPRITES: dict = {}
_SPRITES_KEPT = 4096
#: Held for each eviction and insertion: an app drawing on a kernel subshell's thread and a cell building or drawing
#: another on the main thread may both add labels (issue 32); unheld, both could evict the same oldest label (KeyError).
_SPRITES_LOCK = threading.Lock()


def _sprite(text: str, size: float, colour: str, dpi: float):
    """The label rasterised once by matplotlib's Agg text renderer: RGBA rows (bottom first, as draw_image takes
    them), the text box's width and height and its descent, in pixels."""
    key = (text, size, colour, dpi)
    hit = _SPRITES.get(key)
    if hit is not None:
        return hit
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.font_manager import FontProperties

    prop = FontProperties(size=size)
    measure = RendererAgg(1, 1, dpi)
    width, height, descent = measure.get_text_width_height_descent(text, prop, ismath=False)
    pad = 2
    w, h = int(math.ceil(width)) + 2 * pad, int(math.ceil(height)) + 2 * pad
    renderer = RendererAgg(w, h, dpi)
    gc = renderer.new_gc()
    gc.set_foreground(colour)
    renderer.draw_text(gc, pad, h - pad - descent, text, prop, 0.0)  # x, y: the baseline's left end, y down
    gc.restore()
    rgba = np.asarray(renderer.buffer_rgba())[::-1].copy()  # bottom row first
    hit = (rgba, width, height, descent, pad)
    with _SPRITES_LOCK:
        if len(_SPRITES) >= _SPRITES_KEPT:
            _SPRITES.pop(next(iter(_SPRITES)))
        _SPRITES[key] = hit
    return hit


class DrawnTicks(Artist):
    """The ticks of one side of an axes box: a mark (out, as matplotlib's) and a label at each position, given in
    axes fractions along that side (0: left or bottom, 1: right or top). axis "x": below the box, labels centred;
    "y": left of the box, labels right-aligned. marks=False: the labels alone, `pad` from the box (row names)."""

    def __init__(
        self, ax, axis: str = "x", labelsize: float | None = 8.0, colour: str = TEXT_COLOUR, marks: bool = True
    ):
        super().__init__()
        self.ax = ax
        self.axis = axis
        self.marks = marks
        self.labelsize = _tick_label_points(axis) if labelsize is None else float(labelsize)
        self.colour = colour
        self.fractions: tuple = ()
        self.labels: tuple = ()
        self.set_figure(ax.get_figure(root=True))
        self.set_transform(IdentityTransform())

    def set_ticks(self, fractions, labels) -> bool:
        """Ticks at these axes fractions with these labels (same length). Returns whether they changed."""
        fractions = tuple(float(f) for f in fractions)
        labels = tuple(str(s) for s in labels)
        changed = (fractions, labels) != (self.fractions, self.labels)
        self.fractions, self.labels = fractions, labels
        self.stale = self.stale or changed
        return changed

    def set_range(self, top: float, nbins: int = 6) -> bool:
        """Ticks for a range from 0 to `top` drawn over the whole side: nice_ticks(top, nbins), each at its
        fraction of the range. Returns whether they changed."""
        values, labels = nice_ticks(top, nbins)
        return self.set_ticks([v / top for v in values], labels)

    def remember(self, labels) -> None:
        """Rasterise these labels now, at the figure's current resolution (an app that knows the labels it will
        show, GPU numbers, pays for them once when it is built instead of on a first visit)."""
        dpi = self._dpi()
        for text in labels:
            _sprite(str(text), self.labelsize, self.colour, dpi)

    def _dpi(self) -> float:
        figure = self.get_figure(root=True)
        return float(figure.dpi) if figure is not None else 72.0

    def _anchors(self) -> list:
        box = self.ax.bbox
        if self.axis == "x":
            return [(box.x0 + f * box.width, box.y0) for f in self.fractions]
        return [(box.x0, box.y0 + f * box.height) for f in self.fractions]

    def draw(self, renderer):
        if not self.get_visible() or not self.fractions:
            return
        dpi = self._dpi()
        points = dpi / 72.0
        length, pad = (TICK_LENGTH_PT * points if self.marks else 0.0), TICK_PAD_PT * points
        anchors = self._anchors()
        if self.marks:
            self._draw_marks(renderer, anchors, length)
        gc = renderer.new_gc()
        for (x, y), text in zip(anchors, self.labels):
            rgba, width, height, descent, extra = _sprite(text, self.labelsize, self.colour, dpi)
            if self.axis == "x":  # centred under the mark, its top `pad` below the mark's end
                left, bottom = x - width / 2, y - length - pad - height
            else:  # right-aligned left of the mark, centred on it
                left, bottom = x - length - pad - width, y - height / 2
            renderer.draw_image(gc, int(round(left)) - extra, int(round(bottom)) - extra, rgba)
        gc.restore()
        self.stale = False

    def _draw_marks(self, renderer, anchors, length: float) -> None:
        gc = renderer.new_gc()
        gc.set_foreground(self.colour)
        gc.set_linewidth(TICK_WIDTH_PT)  # in points
        gc.set_capstyle("butt")
        gc.set_snap(True)
        vertices, codes = [], []
        for x, y in anchors:
            end = (x, y - length) if self.axis == "x" else (x - length, y)
            vertices += [(x, y), end]
            codes += [Path.MOVETO, Path.LINETO]
        renderer.draw_path(gc, Path(np.array(vertices), codes), IdentityTransform())
        gc.restore()


def _tick_label_points(axis: str) -> float:
    """matplotlib's tick label size (rcParams, "medium" by default) in points."""
    from matplotlib import rcParams
    from matplotlib.font_manager import FontProperties

    return float(
        FontProperties(size=rcParams["xtick.labelsize" if axis == "x" else "ytick.labelsize"]).get_size_in_points()
    )


def drawn_ticks(
    ax, axis: str = "x", labelsize: float | None = 8.0, widest: str = "00", marks: bool = True
) -> DrawnTicks:
    """DrawnTicks on one side of `ax`, added to it, with matplotlib's own ticks of that side turned off and the
    axis label moved out past the drawn labels (`widest`: the widest label a y axis will show). labelsize: in
    points; None: matplotlib's tick label size. marks=False: labels without tick marks."""
    ticks = DrawnTicks(ax, axis, labelsize, marks=marks)
    _, width, height, _, _ = _sprite(widest if axis == "y" else "0", ticks.labelsize, TEXT_COLOUR, 72.0)  # points
    room = (TICK_LENGTH_PT if marks else 0.0) + TICK_PAD_PT + (width if axis == "y" else height)
    if axis == "x":
        ax.set_xticks([])
        ax.xaxis.labelpad += room
    else:
        ax.set_yticks([])
        ax.yaxis.labelpad += room
    ax.add_artist(ticks)
    return ticks


def tick_label(value: float, step: float) -> str:
    """A tick's label as matplotlib writes it (no thousands separator, no offset), with as many decimals as the
    spacing between ticks needs (2.5 -> 1, 0.25 -> 2, 200 -> 0)."""
    decimals = 0
    while (
        decimals < 9 and step > 0 and abs(step * 10**decimals - round(step * 10**decimals)) > 1e-6 * step * 10**decimals
    ):
        decimals += 1
    return f"{value:.{decimals}f}"


def nice_ticks(top: float, nbins: int = 6) -> tuple[list, list]:
    """Tick values on [0, top] at 1, 2, 2.5 or 5 x 10^k steps (matplotlib's MaxNLocator), and their labels."""
    from matplotlib.ticker import MaxNLocator

    values = [
        v
        for v in MaxNLocator(nbins=nbins, steps=[1, 2, 2.5, 5, 10]).tick_values(0.0, top)
        if -1e-9 <= v <= top * (1 + 1e-9)
    ]
    step = values[1] - values[0] if len(values) > 1 else top
    return [float(v) for v in values], [tick_label(float(v), step) for v in values]
