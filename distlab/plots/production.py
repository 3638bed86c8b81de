"""Lesson 8 pictures: the bucket-count U-curve and timeline, production step bars, the OOM ladder,
ring-attention overlap and the straggler growth law. Data in (distlab.production results), artists out;
the widgets update the artists in place.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FixedFormatter, FixedLocator, NullLocator

from ..errors import ConfigurationError
from ..units import format_bytes, format_seconds
from ._bars import (
    MEMORY_COLOURS,
    MEMORY_COMPONENTS,
    MEMORY_LABELS,
    STEP_COLOURS,
    STEP_PARTS,
    memory_bars,
    set_alpha,
    step_bars,
    step_legend_html,
)
from ._style import (
    BLUE,
    CAPACITY_COLOUR,
    GOOD,
    GREEN,
    MUTED,
    ORANGE,
    PURPLE,
    RED,
    decade_labels,
    finish_axes,
    glyph_key,
    nice_ceiling,
    swatch,
)

__all__ = [
    "EXPOSED_COLOUR",
    "BEST_COLOUR",
    "READY_COLOUR",
    "DONE_COLOUR",
    "WAIT",
    "PARTS",
    "COLOURS",
    "BUCKET_TIME_SPAN",
    "BucketPlot",
    "bucket_plot",
    "bucket_legend_html",
    "exposed_decades",
    "bucket_figure",
    "production_bars",
    "production_legend_html",
    "production_figure",
    "LADDER_BARS",
    "triage_bars",
    "update_triage_bars",
    "triage_figure",
    "LADDER_CLIP",
    "ladder_frames",
    "ring_attention_figure",
    "straggler_figure",
]

EXPOSED_COLOUR = RED
BEST_COLOUR = GOOD
READY_COLOUR = BLUE
DONE_COLOUR = ORANGE
WAIT = "waiting for the slowest GPU"
#: Production step parts: distlab.training's components plus the straggler wait.
PARTS = STEP_PARTS + (WAIT,)
COLOURS = {**STEP_COLOURS, WAIT: "#8c564b"}


# ----------------------------------------------------------------------------------------
# Bucketing: exposed communication against the bucket count, and one count's timeline

#: The timeline's time axis ends at this many backward passes: 76% of the bucket app's (configuration, count) pairs
#: end their all-reduce within it (lesson 8's flat ring of 64 GPUs over IB NDR ends near 2.5 at its best count); the
#: rest run off its edge, marked there.
BUCKET_TIME_SPAN = 3.0


@dataclass
class BucketPlot:
    """The U-curve (exposed vs bucket count, log-log) and the timeline of one bucket count, on axes whose ranges
    bucket_plot fixes: set_sweep and set_buckets move artists only, never an axis. The timeline is normalised:
    time in backward passes (backward ends at 1), the gradients as a share of all of them; a count whose
    all-reduce ends past the time axis runs off its edge, marked there with where it ends."""

    ax_curve: Any
    ax_time: Any
    time_span: float = BUCKET_TIME_SPAN
    curve: Any = None
    best: Any = None
    current: Any = None
    ready: Any = None
    done: Any = None
    backward_line: Any = None
    off_edge: Any = None
    off_edge_text: Any = None

    @property
    def animated_artists(self) -> list:
        """What a bucket count moves (the sweep's curve and best count are sweep_artists)."""
        return [self.current, self.done, self.off_edge, self.off_edge_text]

    @property
    def sweep_artists(self) -> list:
        """What a new sweep (model, fabric, algorithm, DP size, tokens) moves."""
        return [self.curve, self.best]

    def set_sweep(self, sweep) -> None:
        """The whole curve and the best count (the axes keep their ranges)."""
        self.curve.set_data(sweep.buckets, sweep.exposed_s)
        self.best.set_data([sweep.best_buckets], [sweep.best_exposed_s])

    def set_buckets(self, sweep, timeline) -> None:
        """Mark one bucket count on the curve; its timeline: the share of the gradients all-reduced so far over the
        time from the start of backward in backward passes. Past the time axis: a marker at its edge says where
        the all-reduce ends."""
        if sweep.backward_s <= 0:
            raise ConfigurationError(
                f"backward_time={sweep.backward_s:g} s: the timeline is drawn in units of backward, which must be > 0"
            )
        point = sweep.at(timeline.buckets)
        self.current.set_data([timeline.buckets], [point["exposed_s"]])
        ends = np.asarray(timeline.end_s, dtype=float) / sweep.backward_s
        done = 100.0 * np.cumsum(timeline.bucket_bytes) / sweep.grad_bytes
        # a staircase: flat until a bucket's all-reduce ends, then up by its share
        x = np.concatenate([[0.0], np.repeat(ends, 2)])
        y = np.concatenate([[0.0, 0.0], np.repeat(done, 2)[:-1]])
        self.done.set_data(x, y)
        end = float(ends[-1])
        beyond = end > self.time_span
        self.off_edge.set_visible(beyond)
        self.off_edge_text.set_visible(beyond)
        if beyond:
            at_edge = float(y[np.searchsorted(x, self.time_span, side="right") - 1])
            self.off_edge.set_data([self.time_span], [at_edge])
            self.off_edge_text.set_position((self.time_span, at_edge + (6 if at_edge < 80 else -6)))
            self.off_edge_text.set_verticalalignment("bottom" if at_edge < 80 else "top")
            self.off_edge_text.set_text(f"all-reduce ends at\n{end:.2f}× backward")


def bucket_plot(
    ax_curve,
    ax_time,
    exposed_range: tuple[float, float] = (1e-5, 1e2),
    max_buckets: int = 2000,
    time_span: float = BUCKET_TIME_SPAN,
    labels: bool = True,
) -> BucketPlot:
    """Bucket axes of fixed ranges: exposed communication from exposed_range[0] to exposed_range[1] seconds (whole
    decades, each labelled in plain units: "1 ms", "10 s") over 1..max_buckets buckets, and the timeline over 0 to
    time_span backward passes, 0-100 % of the gradients. Fill with set_sweep and set_buckets."""
    p = BucketPlot(ax_curve, ax_time, time_span=time_span)
    (p.curve,) = ax_curve.plot([], [], color=EXPOSED_COLOUR, linewidth=1.5)
    (p.best,) = ax_curve.plot([], [], "*", color=BEST_COLOUR, markersize=12, clip_on=False)
    (p.current,) = ax_curve.plot([], [], "o", color="black", markersize=6, clip_on=False)
    ax_curve.set_xscale("log")
    ax_curve.set_yscale("log")
    ax_curve.set_xlim(1, max_buckets)
    ax_curve.set_ylim(*exposed_range)
    low, high = (round(math.log10(v)) for v in exposed_range)
    decades = [10.0**k for k in range(low, high + 1)]
    ax_curve.yaxis.set_major_locator(FixedLocator(decades))
    ax_curve.yaxis.set_major_formatter(FixedFormatter([format_seconds(v) for v in decades]))
    counts = [10**k for k in range(math.floor(math.log10(max_buckets)) + 1)]
    ax_curve.xaxis.set_major_locator(FixedLocator(counts))
    ax_curve.xaxis.set_major_formatter(FixedFormatter([f"{c:,}" for c in counts]))
    for axis in (ax_curve.xaxis, ax_curve.yaxis):
        axis.set_minor_locator(NullLocator())
    ax_curve.tick_params(labelsize=8)
    # the gradients backward has produced: all of them by its end (x = 1)
    (p.ready,) = ax_time.plot([0, 1], [0, 100], color=READY_COLOUR, linewidth=1.5)
    (p.done,) = ax_time.plot([], [], color=DONE_COLOUR, linewidth=1.5)
    p.backward_line = ax_time.axvline(1, color=MUTED, linestyle=":", linewidth=1)
    (p.off_edge,) = ax_time.plot([], [], ">", color=DONE_COLOUR, markersize=7, clip_on=False, visible=False)
    p.off_edge_text = ax_time.text(
        time_span, 0, "", ha="right", va="bottom", fontsize=8, color=DONE_COLOUR, visible=False
    )
    ax_time.set_xlim(0, time_span)
    ax_time.set_ylim(0, 100)
    ax_time.xaxis.set_major_locator(FixedLocator(list(range(math.floor(time_span) + 1))))
    ax_time.yaxis.set_major_locator(FixedLocator([0, 25, 50, 75, 100]))
    ax_time.yaxis.set_major_formatter(FixedFormatter(["0%", "25%", "50%", "75%", "100%"]))
    ax_time.tick_params(labelsize=8)
    for ax in (ax_curve, ax_time):
        ax.spines[["top", "right"]].set_visible(False)
    if labels:
        ax_curve.set_xlabel("buckets", fontsize=9)
        ax_curve.set_ylabel("exposed communication", fontsize=9)
        ax_time.set_xlabel("time from backward's start (backward = 1)", fontsize=9)
        ax_time.set_ylabel("share of the gradients", fontsize=9)
    return p


def bucket_legend_html() -> str:
    return (
        '<div style="font-size:12px"><b>left</b>: exposed communication vs bucket count (log-log)'
        + swatch(EXPOSED_COLOUR, "exposed", "line")
        + swatch(BEST_COLOUR, "best count", "star")
        + swatch("black", "this count", "dot")
        + "<br><b>right</b>: gradients over time, in backward passes"
        + swatch(READY_COLOUR, "produced by backward", "line")
        + swatch(DONE_COLOUR, "all-reduced", "line")
        + glyph_key(MUTED, "&#8942;", "backward ends")
        + "</div>"
    )


def exposed_decades(*sweeps) -> tuple[float, float]:
    """The whole decades (s) that hold every sweep's exposed communication: 10^floor(log10 min) to
    10^ceil(log10 max) (one decade when the curve is flat on a power of ten)."""
    low = min(float(np.min(s.exposed_s)) for s in sweeps)
    high = max(float(np.max(s.exposed_s)) for s in sweeps)
    if low <= 0:
        raise ConfigurationError("a sweep with no exposed communication at some count has no log-scale picture")
    bottom, top = math.floor(math.log10(low)), math.ceil(math.log10(high))
    return 10.0**bottom, 10.0 ** max(top, bottom + 1)


def bucket_figure(sweep, timeline, title: str = "") -> Figure:
    """A static figure of bucket_plot for a sweep (its curve's whole decades) and one count's timeline."""
    fig = Figure(figsize=(7.6, 3.0), layout="constrained")
    ax1, ax2 = fig.subplots(1, 2)
    p = bucket_plot(ax1, ax2, exposed_decades(sweep), int(sweep.buckets[-1]))
    p.set_sweep(sweep)
    p.set_buckets(sweep, timeline)
    p.curve.set_label("exposed")
    p.best.set_label(f"best: {sweep.best_buckets} buckets")
    p.current.set_label(f"{timeline.buckets} buckets")
    ax1.legend(fontsize=8, frameon=False, loc="upper right")
    p.ready.set_label("produced by backward")
    p.done.set_label("all-reduced")
    p.backward_line.set_label("backward ends")  # as the app's HTML legend names it (review v19: unnamed here)
    ax2.legend(fontsize=8, frameon=False, loc="lower right")
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


# ----------------------------------------------------------------------------------------
# Production step bars: step components plus the wait for the slowest GPU


def production_bars(ax, n_bars: int, legend: bool = True, fixed: bool = False):
    """The shared step bars (plots/_bars.py) with the straggler wait as one more part (fixed: drawn time ticks over
    fixed axis limits, for a widget)."""
    return step_bars(ax, n_bars, legend, PARTS, COLOURS, fixed)


def production_legend_html(drawn=None) -> str:
    """The step legend; with `drawn` (part names), only those, so that it names no colour the bars do not draw
    (issue 31)."""
    return step_legend_html(tuple(p for p in PARTS if drawn is None or p in drawn), COLOURS)


def production_figure(parts: list[dict], labels: list[str], title: str = "") -> Figure:
    fig = Figure(figsize=(7.6, 1.6 + 0.5 * len(parts)), layout="constrained")
    ax = fig.add_subplot()
    production_bars(ax, len(parts)).update(parts, labels)
    if title:
        ax.set_title(title, fontsize=11)
    return fig


# ----------------------------------------------------------------------------------------
# The OOM ladder


#: Bars of a triage chart: the given configuration and up to this many rungs.
LADDER_BARS = 18


def triage_bars(ax, legend: bool = True):
    """Stacked memory bars (plots/_bars.py) for the given configuration and the ladder's rungs."""
    bars = memory_bars(ax, LADDER_BARS + 1, legend=legend)
    ax.set_xticks(range(LADDER_BARS + 1), ["given"] + [str(i) for i in range(1, LADDER_BARS + 1)], fontsize=8)
    if legend:
        ax.set_xlabel("ladder rung (each on top of the previous)")
    return bars


#: A ladder of at most this many rungs names each rung's change under its number on the static figure; a longer one
#: numbers them only (the names would collide), as its summary lists them.
NAMED_RUNGS = 5


def _wrapped_change(change: str, width: int = 13) -> str:
    """A rung's change on lines of at most about `width` characters, broken at spaces or after '_' and '='
    ('micro_batch_\nsize=2', 'selective\nrecomputation')."""
    lines: list[str] = []
    for word in re.findall(r"[^ _=]+[_=]?| ", change):
        if word == " ":
            if lines:
                lines[-1] += " "
        elif lines and len(lines[-1]) + len(word) <= width:
            lines[-1] += word
        else:
            lines.append(word)
    return "\n".join(line.strip() for line in lines)


def update_triage_bars(bars, triage, capacity_label: str = "") -> None:
    """Fill the bars from an OOMTriage (skipped rungs show the configuration they were tried on, faded), on exactly
    the rungs the ladder has (no empty slot after its last rung). For the static figure; the widget draws the
    ladder in the browser (ladder_frames)."""
    parts = [triage.base.memory.parts()]
    parts += [s.estimate.memory.parts() for s in triage.ladder[:LADDER_BARS]]
    parts += [{}] * (LADDER_BARS + 1 - len(parts))
    bars.update(parts, None, triage.base.memory.capacity_bytes, capacity_label)
    bars.ax.set_xlim(-0.6, len(triage.ladder[:LADDER_BARS]) + 0.6)  # the ticks of slots outside it are not drawn
    rungs = triage.ladder[:LADDER_BARS]
    if len(rungs) <= NAMED_RUNGS:  # few rungs: each named under its number (review look24: numbers alone)
        names = ["given"] + [f"{k}\n{_wrapped_change(s.change)}" for k, s in enumerate(rungs, start=1)]
        bars.ax.set_xticks(range(len(names)), names, fontsize=8)
    for text in bars.totals:  # numbers go in the text under the figure: 19 labels would collide
        text.set_text("")
        text.set_visible(False)
    for index, step in enumerate(triage.ladder[:LADDER_BARS], start=1):
        alpha = 0.3 if step.skipped else 1.0
        for rects in bars.rects.values():
            set_alpha(rects[index], alpha)


def triage_figure(triage, title: str = "") -> Figure:
    """A static figure of the ladder: memory per GPU at every rung against the GPU's memory."""
    fig = Figure(figsize=(7.6, 3.4), layout="constrained")
    ax = fig.add_subplot()
    bars = triage_bars(ax)
    update_triage_bars(
        bars, triage, f"{format_bytes(triage.base.memory.capacity_bytes)} ({triage.base.memory.gpu_name})"
    )
    first = triage.first_fit
    if first is not None:
        i = triage.ladder.index(first) + 1
        ax.annotate(
            "first fit",
            (i, first.memory_per_gpu_bytes / 1e9),
            xytext=(0, 18),
            textcoords="offset points",
            ha="center",
            fontsize=8,
            color=GOOD,
            arrowprops=dict(arrowstyle="->", color=GOOD),
        )
    if title:
        ax.set_title(title, fontsize=11)
    return fig


#: The ladder drawn in the browser (ladder_frames) ends its memory axis near this many times the GPU's capacity,
#: whatever the ladder: the capacity line stays put from one ladder to the next, so a move's bars compare with the
#: last's, and the rungs near the line stay readable beside a given configuration that needs terabytes.
LADDER_CLIP = 2.0


def ladder_frames(triage, capacity_label: str = "") -> dict:
    """The drawing data of an OOMTriage for distlab.widgets.browser.LadderPicture (one position): the given
    configuration and the first LADDER_BARS rungs, stacked memory per GPU in GB (10^9 bytes) by part.

    The memory axis ends at `top`, fixed by the capacity alone: LADDER_CLIP x the capacity x 1.08, rounded up
    (nice_ceiling; 200 GB for an 80 GB GPU); a taller bar is cut there and marked (`clipped`; its total is in
    `totals` and in the summary). Skipped rungs are `faded`; the first rung that fits (or the given configuration, when it fits
    already) is marked. `capacity_label`: the capacity line's label, one line per "\\n" (default: the GPU's
    memory and name)."""
    memory = triage.base.memory
    rungs = triage.ladder[:LADDER_BARS]
    breakdowns = [memory] + [s.estimate.memory for s in rungs]
    bars = [[b.parts().get(c, 0.0) / 1e9 for c in MEMORY_COMPONENTS] for b in breakdowns]
    sums = [sum(b.parts().values()) for b in breakdowns]
    capacity = memory.capacity_bytes / 1e9
    top = nice_ceiling(LADDER_CLIP * capacity * 1.08)
    if triage.already_fits:
        mark = [[0, "fits"]]
    else:
        mark = [[k, "first fit"] for k, s in enumerate(rungs, start=1) if s is triage.first_fit]
    return {
        "parts": [MEMORY_LABELS[c] for c in MEMORY_COMPONENTS],
        "bars": [bars],
        "labels": ["given"] + [f"{k} {s.change}" for k, s in enumerate(rungs, start=1)],
        "faded": [[False] + [bool(s.skipped) for s in rungs]],
        "totals": [[format_bytes(total) for total in sums]],
        "clipped": [[total / 1e9 > top for total in sums]],
        "top": top,
        "capacity": capacity,
        "capacity_label": capacity_label or f"{format_bytes(memory.capacity_bytes)}\n{memory.gpu_name}",
        "mark": [mark],
        "unit": "GB",
        "colours": [MEMORY_COLOURS[c] for c in MEMORY_COMPONENTS],
        "capacity_colour": CAPACITY_COLOUR,
    }


# ----------------------------------------------------------------------------------------
# Ring attention and stragglers


def ring_attention_figure(steps_by_label: dict, title: str = "") -> Figure:
    """Per ring step: K/V transfer time and attention compute time against the sequence length,
    one pair of curves per label ({label: [RingAttentionStep, ...]}), crossovers marked."""
    fig = Figure(figsize=(7.2, 3.4), layout="constrained")
    ax = fig.add_subplot()
    colours = [BLUE, ORANGE, GREEN, PURPLE]
    first = next(iter(steps_by_label.values()))
    s = [r.seq_len for r in first]
    ax.plot(s, [1e3 * r.compute_s for r in first], color="black", linewidth=2, label="attention compute per step")
    crossed = False
    for colour, (label, steps) in zip(colours, steps_by_label.items()):
        s = [r.seq_len for r in steps]
        ax.plot(s, [1e3 * r.comm_s for r in steps], color=colour, label=f"K/V transfer, {label}")
        cross = steps[0].crossover_seq_len
        if s[0] <= cross <= s[-1]:
            ax.axvline(cross, color=colour, linestyle=":", linewidth=1)
            crossed = True
    if (
        crossed
    ):  # the dotted lines, one key for all: each in its fabric's colour (review v16: no key said what they were)
        ax.plot([], [], color=MUTED, linestyle=":", linewidth=1, label="crossover: hidden from here on")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel("time per ring step")
    decade_labels(ax, "y", lambda ms: format_seconds(ms / 1e3))  # 10 µs ... 10 ms, not 10^-2 ... 10^1 ms (review v18)
    finish_axes(ax, title)
    # under the axes: the NVLink crossover's dotted line runs up the left edge, through a legend inside (review v16)
    ax.legend(fontsize=8, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3)
    return fig


def straggler_figure(gpus, exact, simulated, gumbel, leading, title: str = "") -> Figure:
    """E[max of N standard normals] against N: exact, simulated, the extreme-value approximation and the
    leading term sqrt(2 ln N) (production.expected_max_normal, simulate_slowest, gumbel_expected_max,
    leading_term_max_normal; all computed by the caller)."""
    fig = Figure(figsize=(6.4, 3.2), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(gpus, exact, color="black", label="exact (numerical integration)")
    ax.plot(gpus, simulated, "o", color=BLUE, markersize=4, label="simulated (seeded)")
    ax.plot(gpus, gumbel, "--", color=ORANGE, label="extreme-value approximation")
    ax.plot(gpus, leading, ":", color=MUTED, label="leading term √(2 ln N)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("GPUs in the synchronous group N")
    ax.set_ylabel("E[slowest] in standard deviations")
    finish_axes(ax, title)
    return fig
