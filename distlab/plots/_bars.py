"""Stacked bars shared by several lessons: memory per GPU (lessons 1, 7, 8) and step time (lessons 7, 8).

Data in (MemoryBreakdown.parts(), StepEstimate.parts()), artists out; `update` moves them in place.
"""

from __future__ import annotations

from typing import Any

from dataclasses import dataclass, field

from matplotlib.ticker import MaxNLocator

from ..step_parts import (
    MEMORY_COLOURS,
    MEMORY_COMPONENTS,
    MEMORY_LABELS,
    STEP_LABELS,
    STEP_PARTS as _PARTS,
)
from ..units import format_bytes
from ._style import CAPACITY_COLOUR, FADED_ALPHA, nice_ceiling, swatch
from ._ticks import DrawnTicks, drawn_ticks

# --------------------------------------------------------------------------- memory per GPU

# MEMORY_COMPONENTS, MEMORY_LABELS and MEMORY_COLOURS: distlab.step_parts (data only, read without matplotlib by the
# browser pictures; every picture draws the memory parts in these colours)


def set_alpha(artist, alpha: float) -> None:
    """artist.set_alpha(alpha) unless it has that alpha already (a patch's set_alpha recomputes its colours: about
    25 us, and a chart of a hundred bars sets them on every frame)."""
    if artist.get_alpha() != alpha:
        artist.set_alpha(alpha)


@dataclass
class MemoryBars:
    """Artists of a stacked memory bar chart, updated in place by `update` (no redraw from scratch)."""

    ax: Any
    rects: dict = field(default_factory=dict)  # component -> list of Rectangle, one per bar
    totals: list = field(default_factory=list)  # Text above each bar
    capacity_line: Any = None
    capacity_text: Any = None
    #: the chart has its own matplotlib legend (memory_bars(legend=True), a static figure): `update` makes it name
    #: the parts drawn and the capacity line, whose label then stands in the legend, not on the line
    legend: bool = False

    @property
    def animated_artists(self) -> list:
        """The artists redrawn per frame when blitting: the bars and totals that change with every
        value, then the capacity line and its label, so they stay on top of a bar taller than the GPU."""
        return (
            [r for rects in self.rects.values() for r in rects]
            + list(self.totals)
            + [self.capacity_line, self.capacity_text]
        )

    def update(
        self,
        parts: list[dict],
        labels: list[str] | None = None,
        capacity: float | None = None,
        capacity_label: str = "",
        faded: bool = False,
    ) -> bool:
        """parts: one {component: bytes} per bar. Heights in GB (10^9 bytes).

        Returns True when the static part (y range, labels, capacity line) changed, i.e. a
        full redraw is needed; False when only the animated bars and totals moved.
        """
        ax = self.ax
        # the x tick labels change only when new labels are given (update never moves the x range): reading them
        # makes matplotlib place every tick, so they are compared only then
        before = (
            ax.get_ylim(),
            [t.get_text() for t in ax.get_xticklabels()] if labels is not None else None,
            self.capacity_line.get_ydata()[0],
            self.capacity_line.get_visible(),
            self.capacity_text.get_text(),
        )
        top = 0.0
        for index, bar_parts in enumerate(parts):
            bottom = 0.0
            for component in MEMORY_COMPONENTS:
                height = bar_parts.get(component, 0.0) / 1e9
                rect = self.rects[component][index]
                rect.set_y(bottom)
                rect.set_height(height)
                set_alpha(rect, FADED_ALPHA if faded else 1.0)
                rect.set_visible(height != 0.0)  # an empty part paints nothing: skip it (~0.2 ms a patch)
                bottom += height
            total_bytes = sum(bar_parts.values())
            self.totals[index].set_position((index, bottom))
            self.totals[index].set_text("" if faded else format_bytes(total_bytes))
            top = max(top, bottom)
        if labels is not None:
            ax.set_xticks(range(len(labels)), labels)
        if capacity is not None:
            cap = capacity / 1e9
            self.capacity_line.set_ydata([cap, cap])
            self.capacity_line.set_visible(True)
            self.capacity_text.set_position((-0.55, cap))
            self.capacity_text.set_text(capacity_label or f"{format_bytes(capacity)} per GPU")
            self.capacity_text.set_visible(True)
            top = max(top, cap)
        else:
            self.capacity_line.set_visible(False)
            self.capacity_text.set_visible(False)
        if not faded:
            ax.set_ylim(0, nice_ceiling(top * 1.12))
        if self.legend:
            self._relabel_legend()
        after = (
            ax.get_ylim(),
            [t.get_text() for t in ax.get_xticklabels()] if labels is not None else None,
            self.capacity_line.get_ydata()[0],
            self.capacity_line.get_visible(),
            self.capacity_text.get_text(),
        )
        return before != after

    def _relabel_legend(self) -> None:
        """The legend names the parts some bar shows (not activations that no bar has) and the capacity line. Its
        label goes in the legend: drawn on the line, it overprinted the total of a bar just above the line (lesson
        1: '112 GB' of the 7B bar under 'h100-sxm: 84.9 GB'). The parts are listed as the bars stack them, the top
        one first (listed bottom first, lesson 1's and 8b's legends read weights, gradients, optimizer states over
        bars that stacked them the other way up; the apps' legends read top first)."""
        handles, labels = _drawn_entries((MEMORY_LABELS[c], rects) for c, rects in reversed(self.rects.items()))
        if self.capacity_line.get_visible():
            handles.append(self.capacity_line)
            labels.append(self.capacity_text.get_text())
        self.capacity_text.set_visible(False)
        self.ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)


def _drawn_entries(parts) -> tuple[list, list]:
    """(handles, labels) of a static chart's legend: for each (label, rectangles) part, its first visible rectangle,
    and none for a part no bar draws (MemoryBars and StepBars, legend=True)."""
    handles, labels = [], []
    for label, rects in parts:
        shown = [r for r in rects if r.get_visible()]
        if shown:
            handles.append(shown[0])
            labels.append(label)
    return handles, labels


def memory_bars(ax, n_bars: int, legend: bool = True) -> MemoryBars:
    """Create n_bars empty stacked bars with a capacity line; fill them with update().

    legend=False leaves the legend and the y-axis label to the caller (widgets show them as
    HTML, which keeps text, the slowest thing to render, out of every frame).
    """
    bars = MemoryBars(ax, legend=legend)
    positions = list(range(n_bars))
    for component in MEMORY_COMPONENTS:
        container = ax.bar(
            positions, [0.0] * n_bars, width=0.55, color=MEMORY_COLOURS[component], label=MEMORY_LABELS[component]
        )
        bars.rects[component] = list(container.patches)
    bars.totals = [ax.text(i, 0, "", ha="center", va="bottom", fontsize=9) for i in positions]
    bars.capacity_line = ax.axhline(0, color=CAPACITY_COLOUR, linestyle="--", linewidth=1.5)
    bars.capacity_text = ax.text(
        -0.55,
        0,
        "",
        color=CAPACITY_COLOUR,
        ha="left",
        va="bottom",
        fontsize=9,
        bbox=dict(facecolor="white", edgecolor="none", alpha=0.8, pad=1),
    )
    if legend:
        ax.set_ylabel("memory per GPU (GB = 10⁹ bytes)")
    ax.set_xlim(-0.6, n_bars - 0.4)
    if legend:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.yaxis.set_major_locator(MaxNLocator(nbins=5))
    ax.spines[["top", "right"]].set_visible(False)
    return bars


def memory_legend_html() -> str:
    """The colour legend as HTML, for widgets that keep text out of the per-frame render. The capacity's entry, keyed
    by dashes, is kept on one line, a space before it to break at (in a 320 px output "- - GPU memory" broke after its
    first dash)."""
    items = "".join(swatch(MEMORY_COLOURS[c], MEMORY_LABELS[c]) for c in MEMORY_COMPONENTS)
    return (
        f'<div style="font-size:12px"><b>memory per GPU</b>, GB (10<sup>9</sup> bytes):{items}'
        f' <span style="color:{CAPACITY_COLOUR};margin-left:8px;white-space:nowrap">- - GPU memory</span></div>'
    )


# --------------------------------------------------------------------------- step time

#: StepEstimate.parts() keys, in stacking order, with their colours: the labels of distlab.step_parts.STEP_PARTS
#: (the table of distlab.step.TERMS).
STEP_PARTS = STEP_LABELS
STEP_COLOURS = {p.label: p.colour for p in _PARTS}


@dataclass
class StepBars:
    """Horizontal stacked bars of the step-time components, updated in place by `update`.

    With `ticks` (step_bars(..., fixed=True), for a widget) the x axis keeps the fixed limits 0 to 1, each bar is
    drawn as its fraction of the range shown (`x_max` seconds) and the time ticks are drawn ticks (plots._ticks):
    a new range is a blit, not a full redraw."""

    ax: Any
    rects: dict = field(default_factory=dict)  # part -> list of Rectangle, one per bar
    names: tuple = STEP_PARTS  # the parts, in stacking order
    ticks: DrawnTicks | None = None
    #: the time range shown (s): the x axis's right end
    x_max: float = 1.0
    #: the chart has its own matplotlib legend (step_bars(legend=True), a static figure): `update` makes it name only
    #: the parts some bar draws
    legend: bool = False

    @property
    def animated_artists(self) -> list:
        return [r for rects in self.rects.values() for r in rects] + ([self.ticks] if self.ticks else [])

    def update(self, parts: list[dict], labels: list[str] | None = None, faded: bool = False) -> bool:
        """parts: one {component: seconds} per bar (bar 0 at the top). Returns True when the axes changed
        (a full redraw is needed), False when only the bars (and drawn ticks) moved."""
        ax = self.ax
        # the y tick labels change only when new labels are given (update never moves the y range)
        labelled = labels is not None
        before = (ax.get_xlim(), [t.get_text() for t in ax.get_yticklabels()] if labelled else None)
        totals = [sum(float(bar_parts.get(name, 0.0)) for name in self.names) for bar_parts in parts]
        right = max(totals, default=0.0)
        limit = self.x_max if self.ticks is not None else ax.get_xlim()[1]
        if not faded and right > 0 and not 0.4 * limit <= right * 1.05 <= limit:
            limit = nice_ceiling(right * 1.05)  # else keep the range while the bars fill it well: blits only
        self.x_max = limit
        scale = 1.0 / self.x_max if self.ticks is not None else 1.0
        for index, bar_parts in enumerate(parts):
            left = 0.0
            for name in self.names:
                width = float(bar_parts.get(name, 0.0))
                rect = self.rects[name][index]
                rect.set_x(left * scale)
                rect.set_width(width * scale)
                set_alpha(rect, FADED_ALPHA if faded else 1.0)
                rect.set_visible(width != 0.0)  # an empty part paints nothing: skip it
                left += width
        if labels is not None:
            ax.set_yticks(range(len(labels)), labels)
        if self.ticks is not None:
            self.ticks.set_range(self.x_max, nbins=5)
        elif ax.get_xlim()[1] != limit:
            ax.set_xlim(0, limit)
        if self.legend:
            self._relabel_legend()
        return before != (ax.get_xlim(), [t.get_text() for t in ax.get_yticklabels()] if labelled else None)

    def _relabel_legend(self) -> None:
        """The legend names the parts some bar draws: listing every part, lesson 7's and 8b's static step bars named
        'CP communication (exposed)' and 'EP all-to-all', which none of their bars has."""
        handles, labels = _drawn_entries((name, self.rects[name]) for name in self.names)
        self.ax.legend(
            handles, labels, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=3, fontsize=8, frameon=False
        )


def step_bars(
    ax,
    n_bars: int,
    legend: bool = True,
    parts: tuple = STEP_PARTS,
    colours: dict = STEP_COLOURS,
    fixed: bool = False,
) -> StepBars:
    """n_bars empty horizontal stacked bars (bar 0 on top) of `parts`; fill them with update(). fixed: the x axis
    keeps fixed limits and its time ticks are drawn ticks, so no step time changes the axes (for a widget)."""
    bars = StepBars(ax, names=tuple(parts), legend=legend)
    positions = list(range(n_bars))
    for name in parts:
        container = ax.barh(positions, [0.0] * n_bars, height=0.55, color=colours[name], label=name)
        bars.rects[name] = list(container.patches)
    ax.set_ylim(n_bars - 0.4, -0.6)  # bar 0 on top
    ax.set_xlabel("seconds per training step")
    ax.xaxis.set_major_locator(MaxNLocator(nbins=5))
    ax.spines[["top", "right"]].set_visible(False)
    if fixed:
        ax.set_xlim(0.0, 1.0)
        bars.ticks = drawn_ticks(ax, "x", labelsize=None)  # matplotlib's tick label size
    if legend:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=3, fontsize=8, frameon=False)
    return bars


def step_legend_html(parts: tuple = STEP_PARTS, colours: dict = STEP_COLOURS) -> str:
    """The colour legend as HTML (widgets keep text out of the per-frame render)."""
    items = "".join(swatch(colours[p], p) for p in parts)
    return f'<div style="font-size:12px"><b>step time</b>, s:{items}</div>'
