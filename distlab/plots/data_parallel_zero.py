"""ZeRO pictures: per-GPU memory against the GPU count for each stage, and the overlap timeline.

Pure drawing: the numbers come in (from distlab.dataparallel and distlab.memory), artists
go out, and widgets update them in place.
"""

from __future__ import annotations

from typing import Any

import html
import math
from dataclasses import dataclass, field

import numpy as np
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, NullLocator

from ..units import format_bytes, format_seconds
from ._ticks import DrawnTicks, drawn_ticks
from ._style import BLUE, CAPACITY_COLOUR, GREEN, GREY, ORANGE, RED, decade_labels, nice_ceiling, swatch

__all__ = [
    "STAGES",
    "STAGE_LABELS",
    "STAGE_COLOURS",
    "COMPUTE_COLOURS",
    "COMM_COLOURS",
    "EXPOSED_COLOUR",
    "ZeroCurves",
    "zero_memory_axes",
    "legend_html",
    "zero_memory_figure",
    "OverlapChart",
    "overlap_axes",
    "overlap_figure",
]

STAGES = (0, 1, 2, 3)
STAGE_LABELS = {0: "plain DP", 1: "ZeRO-1", 2: "ZeRO-2", 3: "ZeRO-3"}
STAGE_COLOURS = {0: GREY, 1: ORANGE, 2: GREEN, 3: BLUE}
COMPUTE_COLOURS = ("#b9c9e6", "#8fa9d6")
COMM_COLOURS = ("#f0b27a", "#e08e45")
EXPOSED_COLOUR = RED


def _decade_range(low: float, high: float) -> tuple[float, float]:
    """Whole decades around [low, high] (GB), so continuous controls never move the axis."""
    return 10.0 ** math.floor(math.log10(low * 0.9)), 10.0 ** math.ceil(math.log10(high * 1.1))


@dataclass
class ZeroCurves:
    """Artists of the memory-vs-GPU-count chart: one line per stage, the capacity line, the current GPU count."""

    ax: Any
    lines: dict = field(default_factory=dict)
    dots: dict = field(default_factory=dict)
    marker: Any = None
    capacity_line: Any = None
    capacity_text: Any = None
    #: (low, high) in GB that the y axis always spans (None: just the data): a widget sets the catalog's range,
    #: so changing the model or the GPU replaces the curves without rescaling the axis.
    y_span: tuple | None = None
    #: False: the capacity line carries no label on the canvas (a widget names the GPU in its HTML legend)
    label_capacity: bool = True

    @property
    def animated_artists(self) -> list:
        """What moves with the GPU-count slider: the vertical marker and one dot per stage."""
        return [self.marker, *self.dots.values()]

    @property
    def data_artists(self) -> list:
        """What a model or GPU change replaces: the curves and the capacity line with its label."""
        return [*self.lines.values(), self.capacity_line, self.capacity_text]

    def set_curves(self, dps, curves: dict, capacity: float | None = None, capacity_label: str = ""):
        """curves: {stage: bytes per GPU at each of dps}. Returns True when the axes changed, 'data' when only
        the curves or the capacity line did (distlab.widgets.common.DATA), False when nothing did."""
        ax = self.ax
        before = self._static_state()
        data_before = self._data_state()
        dps = np.asarray(dps, dtype=float)
        parts = []
        for stage in STAGES:
            gb = np.asarray(curves[stage], dtype=float) / 1e9
            self.lines[stage].set_data(dps, gb)
            parts.append(gb)
        values = np.concatenate(parts)
        low, high = float(values.min()), float(values.max())
        if capacity is not None:
            cap = capacity / 1e9
            self.capacity_line.set_ydata([cap, cap])
            self.capacity_line.set_visible(True)
            self.capacity_text.set_position((dps[-1], cap))
            self.capacity_text.set_text(capacity_label or f"{format_bytes(capacity)} per GPU")
            self.capacity_text.set_visible(self.label_capacity)
            low, high = min(low, cap), max(high, cap)
        else:
            self.capacity_line.set_visible(False)
            self.capacity_text.set_visible(False)
        if self.y_span is not None:
            low, high = min(low, self.y_span[0]), max(high, self.y_span[1])
        ax.set_xlim(dps[0] / 1.15, dps[-1] * 1.15)
        ax.set_ylim(*_decade_range(low, high))
        if before != self._static_state():
            return True
        return "data" if data_before != self._data_state() else False

    def _static_state(self):
        return (self.ax.get_xlim(), self.ax.get_ylim())

    def _data_state(self):
        return (
            tuple(tuple(np.round(line.get_ydata(), 9)) for line in self.lines.values()),
            self.capacity_line.get_visible(),
            tuple(self.capacity_line.get_ydata()),
            self.capacity_text.get_text(),
        )

    def set_marker(self, gpus: int, values: dict | None) -> None:
        """Move the marker to `gpus` and the dots to each stage's bytes there (None: hide the dots)."""
        self.marker.set_xdata([gpus, gpus])
        for stage, dot in self.dots.items():
            if values is None:
                dot.set_visible(False)
            else:
                dot.set_data([gpus], [values[stage] / 1e9])
                dot.set_visible(True)


def zero_memory_axes(ax, legend: bool = True) -> ZeroCurves:
    """Empty log-log axes with one line per stage, a capacity line and a GPU-count marker; fill with set_curves."""
    chart = ZeroCurves(ax)
    for stage in STAGES:
        (chart.lines[stage],) = ax.plot([1], [1], color=STAGE_COLOURS[stage], linewidth=2, label=STAGE_LABELS[stage])
        (chart.dots[stage],) = ax.plot([1], [1], "o", color=STAGE_COLOURS[stage], markersize=7, markeredgecolor="white")
    chart.marker = ax.axvline(1, color="#333333", linewidth=1, linestyle=":")
    chart.capacity_line = ax.axhline(1, color=CAPACITY_COLOUR, linestyle="--", linewidth=1.5)
    chart.capacity_text = ax.text(1, 1, "", color=CAPACITY_COLOUR, ha="right", va="top", fontsize=9)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ticks = [2**k for k in range(0, 11)]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.grid(True, which="major", alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)
    if legend:
        ax.set_xlabel("data-parallel GPUs N")
        ax.set_ylabel("model states per GPU (GB)")
        ax.legend(loc="lower left", fontsize=8, frameon=False)
    return chart


def legend_html(capacity: str = "GPU memory") -> str:
    """The stage colours as HTML, for widgets that keep text out of the per-frame render; `capacity` names the
    dashed line (e.g. 'H100 SXM: 80 GB')."""
    items = "".join(swatch(STAGE_COLOURS[s], STAGE_LABELS[s], "line", margin="0 4px 3px 12px") for s in STAGES)
    return (
        f'<div style="font-size:12px"><b>model states per GPU</b> (GB, log scale) against the data-parallel '
        f'GPU count N:{items} <span style="color:{CAPACITY_COLOUR};margin-left:8px;white-space:nowrap">'
        f"- - {html.escape(capacity)}</span></div>"
    )


def zero_memory_figure(
    dps,
    curves: dict,
    capacity: float | None = None,
    capacity_label: str = "",
    title: str = "",
    marks: dict | None = None,
) -> Figure:
    """A static figure of memory per GPU against N for every stage; marks={stage: (N, bytes)} adds dots."""
    fig = Figure(figsize=(7.2, 4.0), layout="constrained")
    ax = fig.add_subplot()
    chart = zero_memory_axes(ax)
    chart.set_curves(dps, curves, capacity, capacity_label)
    chart.marker.set_visible(False)
    for stage, dot in chart.dots.items():
        if marks and stage in marks:
            n, value = marks[stage]
            dot.set_data([n], [value / 1e9])
        else:
            dot.set_visible(False)
    ax.set_ylabel("model states per GPU")
    decade_labels(ax, "y", lambda gb: format_bytes(gb * 1e9))  # 10 MB ... 1 TB, not 10^-2 ... 10^3 GB (review v18)
    if title:
        ax.set_title(title, fontsize=10)
    return fig


# ----------------------------------------------------------------------------------------
# Overlap timeline


@dataclass
class OverlapChart:
    """Two lanes on a time axis: backward compute (one segment per bucket) and the buckets' communication.

    With `ticks` (a widget's chart, overlap_axes(ax, fixed=True)) the x axis keeps the fixed limits 0 to 1, the
    times are drawn as fractions of the range shown and the time ticks are drawn ticks (plots._ticks): a new
    range is a blit, not a full redraw."""

    ax: Any
    compute: Any = None  # PolyCollection, built in overlap_axes
    comm: Any = None
    exposed: Any = None
    backward_end: Any = None
    ticks: DrawnTicks | None = None
    #: the time range shown (ms): the x axis's right end
    x_max: float = 1.0

    @property
    def animated_artists(self) -> list:
        return [self.compute, self.comm, self.exposed, self.backward_end, *([self.ticks] if self.ticks else [])]

    def update(self, timeline) -> bool:
        """Draw an OverlapTimeline (times shown in ms). Returns True when the axes changed (a new time range
        without drawn ticks)."""
        before = self.ax.get_xlim()
        ready = np.asarray(timeline.ready_s) * 1e3
        start, end = np.asarray(timeline.start_s) * 1e3, np.asarray(timeline.end_s) * 1e3
        backward = timeline.backward_s * 1e3
        exposed = timeline.exposed_s * 1e3
        finish = max(backward, float(end[-1]) if len(end) else 0.0)
        x_max = nice_ceiling(max(finish, 1e-9) * 1.05)
        # with drawn ticks the axis runs from 0 to 1: each time is drawn as its fraction of the range
        scale = 1.0 / x_max if self.ticks is not None else 1.0
        begin = np.concatenate(([0.0], ready[:-1]))
        self.compute.set_verts(_bars(begin * scale, ready * scale, 1.0))
        self.compute.set_facecolor([COMPUTE_COLOURS[i % 2] for i in range(len(ready))])
        self.comm.set_verts(_bars(start * scale, end * scale, 0.0))
        self.comm.set_facecolor([COMM_COLOURS[i % 2] for i in range(len(start))])
        self.exposed.set_verts(
            _bars(np.array([backward * scale]), np.array([(backward + exposed) * scale]), 0.0, height=0.7)
            if exposed > 0
            else []
        )
        self.backward_end.set_xdata([backward * scale, backward * scale])
        self.x_max = x_max
        if self.ticks is not None:
            self.ticks.set_range(x_max)
            return False
        self.ax.set_xlim(0, x_max)
        return before != self.ax.get_xlim()


def _bars(begin, end, lane: float, height: float = 0.6) -> list:
    lo, hi = lane - height / 2, lane + height / 2
    return [[(b, lo), (e, lo), (e, hi), (b, hi)] for b, e in zip(begin, end)]


def overlap_axes(ax, labels: bool = True, fixed: bool = False) -> OverlapChart:
    """Empty overlap lanes; fill with OverlapChart.update(timeline). fixed: the x axis keeps fixed limits and
    its time ticks are drawn ticks, so no time range changes the axes (for a widget)."""
    chart = OverlapChart(ax)
    chart.compute = PolyCollection([], edgecolors="white", linewidths=0.8)
    chart.comm = PolyCollection([], edgecolors="white", linewidths=0.8)
    chart.exposed = PolyCollection([], facecolors="none", edgecolors=EXPOSED_COLOUR, linewidths=2, hatch="///")
    for artist in (chart.compute, chart.comm, chart.exposed):
        ax.add_collection(artist, autolim=False)
    chart.backward_end = ax.axvline(0, color="#333333", linewidth=1, linestyle="--")
    ax.set_ylim(-0.6, 1.6)
    ax.set_yticks([0, 1], ["gradient\nsync", "backward"] if labels else ["", ""])
    ax.spines[["top", "right", "left"]].set_visible(False)
    ax.tick_params(axis="y", length=0)
    if labels:
        ax.set_xlabel("time from the start of backward (ms)")
    if fixed:
        ax.set_xlim(0.0, 1.0)
        chart.ticks = drawn_ticks(ax, "x", labelsize=None)  # matplotlib's tick label size, as before
    return chart


def overlap_figure(timelines, titles) -> Figure:
    """Static lanes for several OverlapTimelines, one above the other, on a shared time axis."""
    fig = Figure(figsize=(7.2, 1.35 * len(timelines) + 0.6), layout="constrained")
    axes = fig.subplots(len(timelines), 1, sharex=True, squeeze=False)[:, 0]
    finish = 0.0
    for ax, timeline, title in zip(axes, timelines, titles):
        chart = overlap_axes(ax, labels=True)
        chart.update(timeline)
        finish = max(finish, ax.get_xlim()[1])
        ax.set_title(f"{title}: {format_seconds(timeline.exposed_s)} exposed", fontsize=9, loc="left")
        if ax is not axes[-1]:
            ax.set_xlabel("")
    for ax in axes:
        ax.set_xlim(0, finish)
    return fig
