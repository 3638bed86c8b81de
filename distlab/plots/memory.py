"""Stacked memory bars (weights, gradients, optimizer, activations) against a GPU's capacity line."""

from __future__ import annotations

from dataclasses import dataclass, field

from matplotlib.figure import Figure

from ..units import format_bytes

COMPONENTS = ("weights", "gradients", "optimizer", "activations")
COLOURS = {
    "weights": "#4c72b0",
    "gradients": "#dd8452",
    "optimizer": "#55a868",
    "activations": "#8172b3",
}
LABELS = {"weights": "weights", "gradients": "gradients", "optimizer": "optimizer states", "activations": "activations"}
CAPACITY_COLOUR = "#c44e52"


@dataclass
class MemoryBars:
    """Artists of a stacked memory bar chart, updated in place by `update` (no redraw from scratch)."""

    ax: object
    rects: dict = field(default_factory=dict)  # component -> list of Rectangle, one per bar
    totals: list = field(default_factory=list)  # Text above each bar
    capacity_line: object = None
    capacity_text: object = None

    @property
    def animated_artists(self) -> list:
        """The artists redrawn per frame when blitting: the bars and totals that change with every
        value, then the capacity line and its label, so they stay on top of a bar taller than the GPU."""
        return ([r for rects in self.rects.values() for r in rects] + list(self.totals)
                + [self.capacity_line, self.capacity_text])

    def update(self, parts: list[dict], labels: list[str] | None = None, capacity: float | None = None,
               capacity_label: str = "", faded: bool = False) -> bool:
        """parts: one {component: bytes} per bar. Heights in GB (10^9 bytes).

        Returns True when the static part (y range, labels, capacity line) changed, i.e. a
        full redraw is needed; False when only the animated bars and totals moved.
        """
        ax = self.ax
        before = (ax.get_ylim(), [t.get_text() for t in ax.get_xticklabels()],
                  self.capacity_line.get_ydata()[0], self.capacity_line.get_visible(), self.capacity_text.get_text())
        top = 0.0
        for index, bar_parts in enumerate(parts):
            bottom = 0.0
            for component in COMPONENTS:
                height = bar_parts.get(component, 0.0) / 1e9
                rect = self.rects[component][index]
                rect.set_y(bottom)
                rect.set_height(height)
                rect.set_alpha(0.25 if faded else 1.0)
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
        after = (ax.get_ylim(), [t.get_text() for t in ax.get_xticklabels()],
                 self.capacity_line.get_ydata()[0], self.capacity_line.get_visible(), self.capacity_text.get_text())
        return before != after


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 1.5, 2, 3, 4, 5, 6, 8 x 10^k at or above value (stable axis ranges)."""
    import math

    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    for step in (1, 1.5, 2, 3, 4, 5, 6, 8, 10):
        if step * power >= value * (1 - 1e-12):
            return step * power
    return 10 * power


def memory_bars(ax, n_bars: int, legend: bool = True) -> MemoryBars:
    """Create n_bars empty stacked bars with a capacity line; fill them with update().

    legend=False leaves the legend and the y-axis label to the caller (widgets show them as
    HTML, which keeps text, the slowest thing to render, out of every frame).
    """
    bars = MemoryBars(ax)
    positions = list(range(n_bars))
    for component in COMPONENTS:
        container = ax.bar(positions, [0.0] * n_bars, width=0.55, color=COLOURS[component], label=LABELS[component])
        bars.rects[component] = list(container.patches)
    bars.totals = [ax.text(i, 0, "", ha="center", va="bottom", fontsize=9) for i in positions]
    bars.capacity_line = ax.axhline(0, color=CAPACITY_COLOUR, linestyle="--", linewidth=1.5)
    bars.capacity_text = ax.text(-0.55, 0, "", color=CAPACITY_COLOUR, ha="left", va="bottom", fontsize=9,
                                 bbox=dict(facecolor="white", edgecolor="none", alpha=0.8, pad=1))
    if legend:
        ax.set_ylabel("memory per GPU (GB = 10^9 bytes)")
    ax.set_xlim(-0.6, n_bars - 0.4)
    if legend:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(nbins=5))
    ax.spines[["top", "right"]].set_visible(False)
    return bars


def legend_html() -> str:
    """The colour legend as HTML, for widgets that keep text out of the per-frame render."""
    items = "".join(
        f'<span style="display:inline-block;width:12px;height:12px;background:{COLOURS[c]};'
        f'margin:0 4px 0 12px;vertical-align:middle"></span>{LABELS[c]}'
        for c in COMPONENTS
    )
    return (f'<div style="font-size:12px"><b>memory per GPU</b>, GB (10<sup>9</sup> bytes):{items}'
            f'<span style="color:{CAPACITY_COLOUR};margin-left:12px">- - GPU memory</span></div>')


def memory_wall_figure(breakdowns: list, labels: list[str], capacity: float | None = None,
                       capacity_label: str = "", title: str = "") -> Figure:
    """A static figure: one stacked bar per MemoryBreakdown, and the GPU's capacity line."""
    fig = Figure(figsize=(7.2, 3.8), layout="constrained")
    ax = fig.add_subplot()
    bars = memory_bars(ax, len(breakdowns))
    bars.update([bd.parts() for bd in breakdowns], labels, capacity, capacity_label)
    if title:
        ax.set_title(title, fontsize=11)
    return fig
