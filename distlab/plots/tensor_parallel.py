"""Pictures of tensor parallelism: per-layer compute against communication, and the Megatron MLP split.

Data in (distlab.tensor results), Axes/Figure out; nothing here computes physics.
"""

from __future__ import annotations

from typing import Any

from dataclasses import dataclass, field

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import FixedLocator, NullLocator

from ..units import format_seconds
from ._style import BLUE, ORANGE, PALETTE

__all__ = [
    "COMPUTE_COLOUR",
    "COMM_COLOUR",
    "GPU_COLOURS",
    "TIME_RANGE",
    "CommComputeBars",
    "comm_compute_bars",
    "link_comparison_figure",
    "mlp_split_figure",
]

COMPUTE_COLOUR = BLUE
COMM_COLOUR = ORANGE
#: Colours of the tensor-parallel GPUs in the split pictures.
GPU_COLOURS = PALETTE
#: The fixed time axis of the bars (s): 1 us to 100 s, log scale, so a control change never rescales it.
TIME_RANGE = (1e-6, 100.0)
_TICKS = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0)


def _tick_label(seconds: float) -> str:
    return format_seconds(seconds).replace(".0 ", " ")


@dataclass
class CommComputeBars:
    """Two horizontal bars, compute and TP communication per layer per GPU, on a fixed log time axis.

    update() moves only the bars and their value labels (the animated artists); the axes never
    change, so a widget can always blit.
    """

    ax: Any
    bars: list = field(default_factory=list)
    labels: list = field(default_factory=list)

    @property
    def animated_artists(self) -> list:
        return list(self.bars) + list(self.labels)

    def update(self, compute_s: float | None, comm_s: float | None, faded: bool = False) -> bool:
        """Set the bar lengths in seconds (None or faded: an empty, greyed state). Returns False:
        the static part never changes."""
        left = TIME_RANGE[0]
        for bar, label, value in zip(self.bars, self.labels, (compute_s, comm_s)):
            if value is None or faded or not np.isfinite(value) or value <= 0:
                bar.set_width(0.0)
                label.set_text("")
                continue
            right = min(max(value, left), TIME_RANGE[1])
            bar.set_width(right - left)
            bar.set_alpha(1.0)
            label.set_position((right * 1.15, bar.get_y() + bar.get_height() / 2))
            label.set_text(format_seconds(value))
        return False


def comm_compute_bars(ax, compute_label: str = "compute", comm_label: str = "TP communication") -> CommComputeBars:
    """Create the two empty bars on a log time axis from 1 us to 100 s; fill them with update()."""
    bars = CommComputeBars(ax)
    for y, colour in ((1, COMPUTE_COLOUR), (0, COMM_COLOUR)):
        rect = Rectangle((TIME_RANGE[0], y - 0.3), 0.0, 0.6, color=colour)
        ax.add_patch(rect)
        bars.bars.append(rect)
        bars.labels.append(ax.text(TIME_RANGE[0], y, "", va="center", ha="left", fontsize=10))
    ax.set_xscale("log")
    ax.set_xlim(*TIME_RANGE)
    ax.set_ylim(-0.6, 1.6)
    ax.xaxis.set_major_locator(FixedLocator(_TICKS))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticks(_TICKS, [_tick_label(t) for t in _TICKS], fontsize=8)
    ax.set_yticks([1, 0], [compute_label, comm_label], fontsize=9)
    ax.grid(axis="x", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.spines[["top", "right"]].set_visible(False)
    return bars


def link_comparison_figure(costs: dict, title: str = "") -> Figure:
    """Compute and TP communication per layer for several setups (label -> TPLayerCost), on a linear
    time axis in ms, two bars per setup."""
    labels = list(costs)
    fig = Figure(figsize=(7.2, 1.1 + 0.7 * len(labels)), layout="constrained")
    ax = fig.add_subplot()
    y = np.arange(len(labels))[::-1].astype(float)
    compute = np.array([costs[k].compute_time_s for k in labels]) * 1e3
    comm = np.array([costs[k].comm_time_s for k in labels]) * 1e3
    ax.barh(y + 0.18, compute, height=0.34, color=COMPUTE_COLOUR, label="compute per GPU")
    ax.barh(y - 0.18, comm, height=0.34, color=COMM_COLOUR, label="TP communication")
    top = max(compute.max(), comm.max())
    for yy, c, m in zip(y, compute, comm):
        ax.text(c + top * 0.01, yy + 0.18, format_seconds(c / 1e3), va="center", fontsize=8)
        ax.text(m + top * 0.01, yy - 0.18, format_seconds(m / 1e3), va="center", fontsize=8)
    ax.set_xlim(0, top * 1.15)
    ax.set_yticks(y, labels, fontsize=9)
    ax.set_xlabel("time per layer per microbatch (ms)")
    ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncols=2, fontsize=8, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    if title:
        ax.set_title(title, fontsize=10, loc="right")
    return fig


def _block(ax, x, y, width, height, colour, label="", alpha=1.0, fontsize=8):
    ax.add_patch(Rectangle((x, y), width, height, facecolor=colour, edgecolor="white", linewidth=1.0, alpha=alpha))
    if label:
        ax.text(x + width / 2, y + height / 2, label, ha="center", va="center", fontsize=fontsize, color="white")


def mlp_split_figure(tp: int, title: str = "") -> Figure:
    """Megatron's MLP split drawn for tp GPUs: X replicated; A split by columns; act(X A_i) local;
    B split by rows; partial outputs Z_i summed by one all-reduce. Block i has GPU i's colour."""
    t = int(tp)
    colours = [GPU_COLOURS[i % len(GPU_COLOURS)] for i in range(t)]
    fig = Figure(figsize=(8.6, 2.1), layout="constrained")
    ax = fig.add_subplot()
    grey = "#9aa0a6"
    # geometry (arbitrary units): X n x h, A h x f, Y n x f, B f x h, Z n x h; f = 4h
    n, h, f = 1.0, 1.0, 2.4
    x0 = 0.0
    _block(ax, x0, 0, h, n, grey, "X")
    ax.text(x0 + h / 2, n + 0.12, "X (every GPU)", ha="center", fontsize=8)
    ax.text(x0 + h + 0.25, n / 2, "@", ha="center", va="center", fontsize=11)
    ax0 = x0 + h + 0.5
    for i in range(t):
        _block(ax, ax0 + i * f / t, -0.4, f / t, h + 0.4, colours[i], f"A{i}" if t <= 8 else "")
    ax.text(ax0 + f / 2, h + 0.12, "A split by columns", ha="center", fontsize=8)
    ax.text(ax0 + f + 0.35, n / 2, "->", ha="center", va="center", fontsize=11)
    y0 = ax0 + f + 0.7
    for i in range(t):
        _block(ax, y0 + i * f / t, 0, f / t, n, colours[i], f"Y{i}" if t <= 8 else "")
    ax.text(y0 + f / 2, n + 0.12, "Y_i = GeLU(X A_i), local", ha="center", fontsize=8)
    ax.text(y0 + f + 0.25, n / 2, "@", ha="center", va="center", fontsize=11)
    b0 = y0 + f + 0.5
    for i in range(t):
        _block(ax, b0, n + 0.3 - (i + 1) * (f / t) * 0.55, h, (f / t) * 0.55, colours[i], f"B{i}" if t <= 8 else "")
    ax.text(b0 + h / 2, n + 0.42, "B split by rows", ha="center", fontsize=8)
    ax.text(b0 + h + 0.35, n / 2, "->", ha="center", va="center", fontsize=11)
    z0 = b0 + h + 0.7
    shown = min(t, 4)
    for i in range(shown):
        _block(ax, z0 + i * 0.16, -0.25 + i * 0.16, h * 0.8, n * 0.8, colours[i], "", alpha=0.9)
    ax.text(z0 + 0.5, n + 0.35, f"partials Z_i = Y_i B_i\n({t} of them, full shape)", ha="center", fontsize=8)
    ax.text(z0 + h * 0.8 + shown * 0.16 + 0.55, n / 2, "all-reduce\n(sum)", ha="center", va="center", fontsize=8)
    r0 = z0 + h * 0.8 + shown * 0.16 + 1.1
    _block(ax, r0, 0, h, n, "#2f3b4c", "Z")
    ax.text(r0 + h / 2, n + 0.12, "Z on every GPU", ha="center", fontsize=8)
    ax.set_xlim(-0.2, r0 + h + 0.2)
    ax.set_ylim(-0.6, n + 0.75)
    ax.set_aspect("equal")
    ax.set_axis_off()
    if title:
        ax.set_title(title, fontsize=10)
    return fig
