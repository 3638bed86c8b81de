"""Lesson 11 pictures: the FSDP streams (compute and communication, layer by layer), context parallelism's
compute against exposed communication, goodput against the checkpoint interval, and the schedules' span
bubble next to their memory. Data in (distlab results as plain arrays), artists out; the widgets update the
artists in place. (The pipeline grid itself is distlab.plots.pipeline's.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence, cast

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.transforms import blended_transform_factory

from ._style import BLUE, GREEN, MUTED, ORANGE, PURPLE, RED, finish_axes, nice_ceiling, swatch

__all__ = [
    "STREAM_PARTS",
    "StreamPlot",
    "stream_plot",
    "stream_legend_html",
    "stream_figure",
    "ContextBars",
    "context_bars",
    "context_legend_html",
    "context_figure",
    "GoodputCurve",
    "GOODPUT_X_RANGE",
    "goodput_curve",
    "goodput_legend_html",
    "goodput_figure",
    "schedules_figure",
]

FORWARD, BACKWARD, GATHER, REGATHER, REDUCE = BLUE, ORANGE, GREEN, PURPLE, RED
STREAM_PARTS = (
    ("forward", FORWARD),
    ("backward", BACKWARD),
    ("all-gather (forward)", GATHER),
    ("all-gather (backward)", REGATHER),
    ("reduce-scatter (+ HSDP all-reduce)", REDUCE),
)
COMPUTE_COLOUR, HIDDEN_COLOUR, EXPOSED_COLOUR = BLUE, "#b9c7e0", RED


def _boxes(starts, ends, y: float, height: float) -> np.ndarray:
    """(n, 4, 2) corners of the boxes [start, end] x [y, y + height], skipping NaN starts."""
    a = np.asarray(starts, dtype=float)
    b = np.asarray(ends, dtype=float)
    keep = np.isfinite(a)
    a, b = a[keep], b[keep]
    out = np.empty((a.size, 4, 2))
    out[:, :, 0] = np.stack([a, b, b, a], axis=1)
    out[:, :, 1] = [y, y, y + height, y + height]
    return out


# ----------------------------------------------------------------------------------------
# FSDP: the compute stream above the communication stream


@dataclass
class StreamPlot:
    """Two rows of boxes on one time axis: compute (top) and communication (bottom), from the event arrays
    of a distlab.fsdp.FsdpTimeline (passed as plain arrays: f_start, f_end, ..., step_s, compute_s)."""

    ax: Axes
    boxes: PolyCollection
    step_line: Line2D
    ideal_line: Line2D

    @property
    def animated_artists(self) -> list:
        return [self.boxes, self.step_line, self.ideal_line]

    def update(self, events: dict | None, faded: bool = False, x_max: float | None = None) -> bool:
        """Show the events (None or faded: fade the picture). x_max: a fixed x range (boxes beyond are clipped);
        None: it follows the step. True when the x range changed (full redraw)."""
        if events is None or faded:
            self.boxes.set_alpha(0.25)
            return False
        self.boxes.set_alpha(1.0)
        parts, colours = [], []
        for key, colour, y in (
            ("f", FORWARD, 0.55),
            ("b", BACKWARD, 0.55),
            ("ag", GATHER, 0.05),
            ("bg", REGATHER, 0.05),
            ("rs", REDUCE, 0.05),
        ):
            part = _boxes(events[f"{key}_start"], events[f"{key}_end"], y, 0.4)
            parts.append(part)
            colours += [colour] * len(part)
        # one (n, 4, 2) array, a sequence of n boxes to matplotlib: its vectorised path
        self.boxes.set_verts(cast(Sequence[np.ndarray], np.concatenate(parts)))
        self.boxes.set_facecolor(colours)
        step, ideal = float(events["step_s"]), float(events["compute_s"])
        self.step_line.set_xdata([step, step])
        self.ideal_line.set_xdata([ideal, ideal])
        before = self.ax.get_xlim()
        self.ax.set_xlim(0.0, x_max if x_max is not None else nice_ceiling(step * 1.02))
        return self.ax.get_xlim() != before


def stream_plot(ax) -> StreamPlot:
    """Create the empty two-stream plot on `ax` (time in the caller's unit on x)."""
    boxes = PolyCollection([], edgecolors="white", linewidths=0.3)
    ax.add_collection(boxes)
    step = ax.axvline(0.0, color="black", lw=1.5)
    ideal = ax.axvline(0.0, color=MUTED, lw=1.0, ls="--")
    ax.set_ylim(0.0, 1.0)
    ax.set_xlim(0.0, 1.0)
    ax.set_yticks([0.25, 0.75], ["comm", "compute"], fontsize=8)
    ax.tick_params(axis="x", labelsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    return StreamPlot(ax, boxes, step, ideal)


def stream_legend_html() -> str:
    """The stream plot's legend as HTML (text stays out of the per-frame render)."""
    return (
        "".join(swatch(c, name) for name, c in STREAM_PARTS)
        + swatch("black", "step ends", "line")
        + swatch(MUTED, "compute alone", "dashed")
    )


def stream_figure(events: dict, title: str = "", unit: str = "ms", width: float = 7.6) -> Figure:
    """A static figure of one FSDP microbatch (events in seconds, drawn in `unit`)."""
    scale = {"s": 1.0, "ms": 1e3, "us": 1e6}[unit]
    scaled = {k: (np.asarray(v, dtype=float) * scale) for k, v in events.items()}
    fig = Figure(figsize=(width, 2.0), layout="constrained")
    ax = fig.add_subplot()
    plot = stream_plot(ax)
    plot.update(scaled)
    for artist in plot.animated_artists:
        artist.set_animated(False)
    ax.set_xlabel(f"time ({unit})", fontsize=9)
    # proxy patches carry the names (a bar's own patch is labelled '_nolegend_'); the legend sits outside the axes,
    # below them, where constrained layout makes room for it
    handles: list = [Rectangle((0, 0), 1, 1, color=c, label=name) for name, c in STREAM_PARTS]
    # the two vertical lines, named as the app's HTML legend names them (stream_legend_html; review v19: unnamed here)
    handles += [
        Line2D([], [], color="black", lw=1.5, label="step ends"),
        Line2D([], [], color=MUTED, lw=1.0, ls="--", label="compute alone"),
    ]
    fig.legend(handles=handles, fontsize=7, frameon=False, ncols=4, loc="outside lower center")
    if title:
        ax.set_title(title, fontsize=10)
    return fig


# ----------------------------------------------------------------------------------------
# Context parallelism: attention compute against the communication each method leaves exposed


@dataclass
class ContextBars:
    """One row per method: the attention compute (blue), the communication hidden under it (light) and the
    communication left exposed (red), per layer, forward + backward."""

    ax: Axes
    compute: list[Rectangle]
    hidden: list[Rectangle]
    exposed: list[Rectangle]
    #: per row, shown where the method cannot run (a blank row read as "takes no time": lesson 11b's Ulysses row
    #: at a cp that does not divide the heads, review v16); the text under the picture says why
    notes: list = field(default_factory=list)

    @property
    def animated_artists(self) -> list:
        return [*self.compute, *self.hidden, *self.exposed, *self.notes]

    def update(self, rows: list | None, x_max: float | None = None) -> bool:
        """rows: (compute, comm, exposed) per method, in the caller's unit; None for a method that cannot run.
        x_max: a fixed x range (bars beyond it are clipped; the widget passes times relative to one compute,
        so the axes never change); None: the range follows the data. True when the x range changed."""
        if rows is None:
            for bar in self.animated_artists:
                bar.set_alpha(0.25)
            return False
        top = 0.0
        for i, row in enumerate(rows):
            if i < len(self.notes):
                self.notes[i].set_visible(row is None)
            compute, comm, exposed = row if row is not None else (0.0, 0.0, 0.0)
            hidden = max(comm - exposed, 0.0)
            self.compute[i].set_width(compute)
            self.hidden[i].set_x(compute - hidden)
            self.hidden[i].set_width(hidden)
            self.exposed[i].set_x(compute)
            self.exposed[i].set_width(exposed)
            for bar in (self.compute[i], self.hidden[i], self.exposed[i]):
                bar.set_alpha(1.0 if row is not None else 0.0)
            top = max(top, compute + exposed)
        before = self.ax.get_xlim()
        self.ax.set_xlim(0.0, x_max if x_max is not None else nice_ceiling(top * 1.05))
        return self.ax.get_xlim() != before


#: what a row of ContextBars says where its method cannot run (the text under the picture gives the reason)
CANNOT_RUN = "cannot run here: the text below says why"


def context_bars(ax, labels: list) -> ContextBars:
    """Create the empty bars, one row per label (top to bottom)."""
    y = np.arange(len(labels))[::-1]
    compute = list(ax.barh(y, np.zeros(len(y)), height=0.6, color=COMPUTE_COLOUR))
    hidden = list(ax.barh(y, np.zeros(len(y)), height=0.3, color=HIDDEN_COLOUR))
    exposed = list(ax.barh(y, np.zeros(len(y)), height=0.6, color=EXPOSED_COLOUR))
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_ylim(-0.6, len(y) - 0.4)
    ax.set_xlim(0.0, 1.0)
    ax.tick_params(axis="x", labelsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    at = blended_transform_factory(ax.transAxes, ax.transData)  # x: a step in from the axis, y: the row
    notes = [
        ax.text(0.01, row, CANNOT_RUN, transform=at, va="center", fontsize=8, color=MUTED, visible=False) for row in y
    ]
    return ContextBars(ax, compute, hidden, exposed, notes)


def context_legend_html() -> str:
    return (
        swatch(COMPUTE_COLOUR, "attention compute")
        + swatch(HIDDEN_COLOUR, "communication hidden under it")
        + swatch(EXPOSED_COLOUR, "communication exposed")
    )


def context_figure(labels: list, rows: list, title: str = "", unit: str = "ms", width: float = 7.0) -> Figure:
    """A static figure of ContextBars (rows in `unit`)."""
    fig = Figure(figsize=(width, 0.8 + 0.45 * len(labels)), layout="constrained")
    ax = fig.add_subplot()
    bars = context_bars(ax, labels)
    bars.update(rows)
    ax.set_xlabel(f"per layer, forward + backward ({unit})", fontsize=9)
    for name, colour in (
        ("attention compute", COMPUTE_COLOUR),
        ("hidden communication", HIDDEN_COLOUR),
        ("exposed communication", EXPOSED_COLOUR),
    ):
        ax.barh([0], [0], color=colour, label=name)
    finish_axes(ax, title)
    # under the plot, in one row: inside it ('best') the legend sat on the bars, which fill the width
    handles, names = ax.get_legend_handles_labels()
    legend = ax.get_legend()
    if legend is not None:
        legend.remove()
    fig.legend(handles, names, loc="outside lower center", ncol=3, fontsize=8, frameon=False)
    return fig


# ----------------------------------------------------------------------------------------
# Checkpointing: goodput against the interval


@dataclass
class GoodputCurve:
    """Goodput (%) against the checkpoint interval (minutes, log axis), with the chosen interval marked."""

    ax: Axes
    curve: Line2D
    chosen: Line2D
    young: Line2D

    @property
    def animated_artists(self) -> list:
        return [self.curve, self.chosen, self.young]

    def update(self, intervals_min=None, goodput_pct=None, chosen=None, young_min=None) -> bool:
        """New curve and markers (None: fade). True when the x range changed."""
        if intervals_min is None:
            self.curve.set_alpha(0.25)
            self.chosen.set_alpha(0.25)
            return False
        self.curve.set_alpha(1.0)
        self.chosen.set_alpha(1.0)
        self.curve.set_data(intervals_min, goodput_pct)
        # an interval off the fixed axis (asynchronous checkpoints at 131,072 GPUs: Daly's 137 ms, left of 0.6 s) is
        # marked at the edge it lies beyond, as an arrowhead pointing there, not left out with its legend entry kept
        low, high = GOODPUT_X_RANGE
        self.chosen.set_data([min(max(chosen[0], low), high)], [chosen[1]])
        self.chosen.set_marker("<" if chosen[0] < low else ">" if chosen[0] > high else "o")
        self.young.set_xdata([young_min, young_min])
        return False  # the axes are fixed (GOODPUT_X_RANGE, 0-100 %): always a blit


#: The goodput curve's fixed x range, minutes: 0.6 s to 1 week (the widget clips intervals to it).
GOODPUT_X_RANGE = (0.01, 1e4)


def goodput_curve(ax) -> GoodputCurve:
    """Create the empty goodput curve on `ax` (y fixed at 0-100 %, x at GOODPUT_X_RANGE)."""
    (curve,) = ax.plot([], [], color=BLUE, lw=2)
    (chosen,) = ax.plot([], [], "o", color=GREEN, ms=8)
    young = ax.axvline(1.0, color=MUTED, lw=1, ls="--")
    ax.set_xscale("log")
    ax.set_xlim(*GOODPUT_X_RANGE)
    ax.set_ylim(0, 100)
    ax.tick_params(labelsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    return GoodputCurve(ax, curve, chosen, young)


def goodput_legend_html() -> str:
    return (
        swatch(BLUE, "goodput", "line")
        + swatch(GREEN, "Daly's interval", "dot")
        + swatch(MUTED, "Young's √(2δM)", "dashed")
    )


def goodput_figure(curves: dict, title: str = "", width: float = 6.4) -> Figure:
    """Static: {label: (intervals in minutes, goodput %, (chosen min, chosen %))}, one line each."""
    fig = Figure(figsize=(width, 3.0), layout="constrained")
    ax = fig.add_subplot()
    colours = (BLUE, ORANGE, GREEN, RED, PURPLE)
    for (label, (x, y, best)), colour in zip(curves.items(), colours):
        ax.plot(x, y, color=colour, lw=2, label=label)
        ax.plot([best[0]], [best[1]], "o", color=colour, ms=7)
    # the dots, one key for all, in each curve's colour (review v16: no key said what they mark)
    ax.plot([], [], "o", color=MUTED, ms=7, label="the best interval (Daly)")
    ax.set_xscale("log")
    ax.set_xlabel("checkpoint interval (minutes)", fontsize=9)
    ax.set_ylabel("goodput (%)", fontsize=9)
    finish_axes(ax, title)
    return fig


# ----------------------------------------------------------------------------------------
# The schedules side by side: idle inside a stage's span, and peak activations


def schedules_figure(names: list, span_idle: list, peak_in_flight: list, title: str = "", width: float = 7.6) -> Figure:
    """Two bar charts: each schedule's worst idle inside a stage's span (in t_F) and its peak microbatches
    in flight (activation memory, in one stage's microbatch activations), each bar labelled with its value (a
    zero bar, ZB-V's idle, would otherwise be no bar at all)."""
    fig = Figure(figsize=(width, 2.6), layout="constrained")
    ax1, ax2 = fig.subplots(1, 2)
    x = np.arange(len(names))
    idle = ax1.bar(x, span_idle, color=RED)
    ax1.set_ylabel("idle inside a span (t_F)", fontsize=9)
    peak = ax2.bar(x, peak_in_flight, color=PURPLE)
    ax2.set_ylabel("peak in flight (microbatches)", fontsize=9)
    for ax, bars in ((ax1, idle), (ax2, peak)):
        ax.set_xticks(x, names, fontsize=8, rotation=20)
        ax.spines[["top", "right"]].set_visible(False)
        ax.bar_label(bars, fmt="%g", fontsize=7, padding=1)  # a zero bar is invisible: its "0" says it is there
        ax.margins(y=0.15)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig
