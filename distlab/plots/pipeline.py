"""Pipeline pictures: the stages x time grid of a simulated step, bubble curves, per-stage memory.

Pure drawing: every function takes data computed by distlab.pipeline (a Timeline, arrays of
bubble fractions, StageActivations) and returns Axes artists or a Figure.
"""

from __future__ import annotations

import math
from typing import Any, cast

from dataclasses import dataclass

import numpy as np
from matplotlib.artist import Artist
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure

from ..units import format_bytes
from ._ticks import DrawnTicks, drawn_ticks
from ._style import (
    BLUE,
    BROWN,
    CAPACITY_COLOUR,
    GREEN,
    MUTED,
    ORANGE,
    PURPLE,
    RED,
    TEXT_COLOUR,
    glyph_key,
    nice_ceiling,
    swatch,
)

__all__ = [
    "COLOURS",
    "IDLE_COLOUR",
    "STEP_COLOUR",
    "IDEAL_COLOUR",
    "LABELS",
    "PALETTE",
    "timeline_codes",
    "stage_ticks",
    "ROW_NAMES_PT",
    "grid_margins",
    "TimelinePixels",
    "TimelineGrid",
    "timeline_grid",
    "legend_html",
    "draw_timeline",
    "timeline_figure",
    "schedules_figure",
    "bubble_curve_figure",
    "stage_memory_figure",
]

#: Colours of forward, backward (input gradient) and weight-gradient ops, idle time, markers.
COLOURS = {"F": BLUE, "B": ORANGE, "W": GREEN}
IDLE_COLOUR = "#cfcfcf"
STEP_COLOUR = "#b3261e"
IDEAL_COLOUR = TEXT_COLOUR
#: Row names ("stage 0") are at least this many times their point size apart; fewer rows are named otherwise.
ROW_NAME_SPACING = 1.25
#: The room, in points, the rows' names need left of a fixed grid's axes: "stage 15" at 8 pt (35 pt), 3.5 pt from
#: the grid and 3.5 pt from the figure's edge.
ROW_NAMES_PT = 42.0
LABELS = {"F": "forward (F)", "B": "backward (B)", "W": "weight gradient (W)", "idle": "idle (bubble)"}
_LIGHTEN = 0.30  # odd microbatches are drawn this much lighter, so neighbouring ops stay apart

_KIND_CODES = {"F": 0, "B": 1, "W": 2}
_IDLE, _AFTER, _EDGE = 6, 7, 8


def _palette() -> np.ndarray:
    rows = []
    for kind in ("F", "B", "W"):
        base = np.array(to_rgba(COLOURS[kind]))
        light = base + (1.0 - base) * _LIGHTEN
        light[3] = 1.0
        rows += [base, light]
    rows.append(np.array(to_rgba(IDLE_COLOUR)))  # idle inside the step
    rows.append(np.zeros(4))  # after the step: transparent
    rows.append(np.array([1.0, 1.0, 1.0, 1.0]))  # a white gap at the start of a wide op
    return np.round(np.array(rows) * 255).astype(np.uint8)


PALETTE = _palette()


def timeline_codes(timeline, columns: int, x_max: float) -> np.ndarray:
    """(stages, columns) palette indices: the op running at the middle of each column of [0, x_max].

    F/B/W of even microbatches (0, 2, 4) and of odd ones (lighter), idle within the step,
    transparent after it, and a white first column for ops at least 4 columns wide.
    """
    p = timeline.stages
    middles = (np.arange(columns) + 0.5) * (x_max / columns)
    codes = np.full((p, columns), _AFTER, dtype=np.int64)
    codes[:, middles < timeline.step_time] = _IDLE
    kind = timeline.kind
    op_code = 2 * ((kind == "B") + 2 * (kind == "W")) + (timeline.microbatch % 2)
    width = (timeline.end - timeline.start) * (columns / x_max)
    index = timeline.ops_at(middles)  # (stages, columns), -1 when idle
    running = index >= 0
    codes[running] = op_code[index[running]]
    first = running & np.concatenate([np.ones((p, 1), bool), index[:, 1:] != index[:, :-1]], axis=1)
    codes[first & (width[np.maximum(index, 0)] >= 4.0)] = _EDGE
    return codes


def stage_ticks(p: int, most: int = 16):
    """Tick positions and labels for p stage rows: every stage up to `most`, then every k-th (the static grids name
    up to 16; a widget's grid as many as its height fits, TimelineGrid._name_rows)."""
    step = math.ceil(p / max(1, most))
    rows = list(range(0, p, step))
    return [r + 0.5 for r in rows], [f"stage {r}" if p <= 16 else str(r) for r in rows]


class TimelinePixels(Artist):
    """A timeline drawn as an image exactly one device pixel per pixel over its axes' box.

    No resampling (an AxesImage is resampled on every draw): the op under the middle of each
    pixel column is found with distlab's op times, the p stage rows share the box's height
    (top row = stage 0) with a white pixel row between stages when rows are at least 6
    pixels tall. The end of the step (a solid 2-pixel line) and the ideal end, the busiest
    stage's compute (a dashed line), are painted into the same image, so one artist is all
    a frame draws. Recomputed at draw time, so it follows the canvas's resolution.
    """

    def __init__(self, ax):
        super().__init__()
        self.ax = ax
        self.timeline = None
        self.x_max = 1.0
        self.faded = False
        self.set_clip_box(ax.bbox)
        self._cache = (None, None)

    def set_timeline(self, timeline, x_max: float) -> None:
        self.timeline, self.x_max, self.faded = timeline, float(x_max), False
        self.stale = True

    @property
    def step_time(self) -> float | None:
        """Where the solid line is drawn: the end of the step (None when nothing is shown)."""
        return None if self.timeline is None or self.faded else float(self.timeline.step_time)

    @property
    def ideal_time(self) -> float | None:
        """Where the dashed line is drawn: the busiest stage's compute, the step without a bubble."""
        return None if self.timeline is None or self.faded else float(self.timeline.busy.max())

    def _column(self, x: float, width: int) -> int:
        return min(width - 1, max(0, int(x / self.x_max * width)))

    def pixels(self, width: int, height: int) -> np.ndarray:
        """The RGBA array (height, width, 4) for a box of that many device pixels."""
        key = (id(self.timeline), self.x_max, width, height, self.faded)
        if self._cache[0] == key:
            return self._cache[1]
        p = self.timeline.stages
        codes = timeline_codes(self.timeline, width, self.x_max)
        rows = (np.arange(height) * p) // height  # from the top: stage 0 first
        if height >= 6 * p and p > 1:
            rows[np.flatnonzero(np.diff(rows)) + 1] = -1  # a white pixel row between stages
        palette = PALETTE.copy()
        if self.faded:
            palette[:, 3] //= 4
        colours = palette.view(np.uint32)[:, 0]  # one 32-bit RGBA word per palette entry
        lines = np.vstack([colours[codes], np.full((1, width), colours[_EDGE], dtype=np.uint32)])
        # Agg fills images from the bottom row up; whole pixel rows are copied (np.take)
        image = np.take(lines, rows[::-1], axis=0)
        ideal_time, step_time = self.ideal_time, self.step_time  # None only when faded
        if ideal_time is not None and step_time is not None:
            ideal = self._column(ideal_time, width)
            from_top = height - 1 - np.arange(height)
            image[from_top % 5 < 3, ideal] = _LINE_WORDS[1]  # dashed from the top: 3 on, 2 off
            step = self._column(step_time, width)
            image[:, max(0, step - 1) : step + 1] = _LINE_WORDS[0]
        rgba = image.view(np.uint8).reshape(height, width, 4)
        self._cache = (key, rgba)
        return rgba

    def draw(self, renderer):
        if not self.get_visible() or self.timeline is None:
            return
        box = self.ax.bbox
        x0, y0 = int(round(box.x0)), int(round(box.y0))
        width, height = int(round(box.x1)) - x0, int(round(box.y1)) - y0
        if width < 1 or height < 1:
            return
        gc = renderer.new_gc()
        gc.set_clip_rectangle(box)
        renderer.draw_image(gc, x0, y0, self.pixels(width, height))
        gc.restore()
        self.stale = False


_LINE_WORDS = (
    np.round(np.array([to_rgba(STEP_COLOUR), to_rgba(IDEAL_COLOUR)]) * 255).astype(np.uint8).view(np.uint32)[:, 0]
)


@dataclass
class TimelineGrid:
    """The artist of a stages x time grid (one pixel image), updated in place by `update`.

    The x range is the step time rounded up to 1, 1.5, 2, 3, 4, 5, 6 or 8 x 10^k, so most
    control changes keep the axes and take the blit path; the stage rows live inside the
    image (top = stage 0), so a change of p does not touch the axes either.
    """

    ax: Any
    pixels: TimelinePixels
    #: the time ticks drawn with the grid (timeline_grid(ax, fixed=True)), or None: the axes' own ticks
    ticks: DrawnTicks | None = None
    #: the rows' names ("stage 0" on top) drawn left of the grid (timeline_grid(ax, fixed=True)), or None
    rows: DrawnTicks | None = None

    @property
    def animated_artists(self) -> list:
        return [self.pixels, *(artist for artist in (self.ticks, self.rows) if artist is not None)]

    def _name_rows(self, stages: int) -> None:
        """Name the rows that fit: every stage when their names are at least ROW_NAME_SPACING apart, else every
        k-th (as the browser's grid does), each name centred on its row."""
        if self.rows is None:
            return
        figure = self.ax.get_figure(root=True)
        room = self.ax.bbox.height * 72.0 / float(figure.dpi)  # the rows' height in points
        centres, names = stage_ticks(stages, most=int(room // (self.rows.labelsize * ROW_NAME_SPACING)))
        self.rows.set_ticks([1.0 - c / stages for c in centres], names)

    def update(self, timeline=None, faded: bool = False, x_max: float | None = None) -> bool:
        """Show `timeline` (or fade the current picture when None/faded). Returns True when the
        static part (the x range, without drawn ticks) changed, i.e. a full redraw is needed. x_max: the x range
        to use (default: the step time rounded up as above)."""
        ax = self.ax
        if timeline is None or faded:
            self.pixels.faded = True
            self.pixels.stale = True
            return False
        x_max = nice_ceiling(timeline.step_time * 1.02) if x_max is None else float(x_max)
        self.pixels.set_timeline(timeline, x_max)
        self._name_rows(timeline.stages)
        if self.ticks is not None:  # the image spans the box whatever the range: only the ticks follow it
            self.ticks.set_range(x_max)
            return False
        before = ax.get_xlim()
        ax.set_xlim(0.0, x_max)
        return ax.get_xlim() != before


def grid_margins(width_in: float, bottom: float) -> dict:
    """The margins of a fixed grid's figure `width_in` inches wide: ROW_NAMES_PT points left for the rows' names."""
    return dict(left=ROW_NAMES_PT / (width_in * 72), right=0.98, bottom=bottom, top=0.98)


def timeline_grid(ax, fixed: bool = False) -> TimelineGrid:
    """Create an empty stages x time grid on `ax` (the rows are in the image, stage 0 on top; the axis labels
    belong in the caller's HTML); fill it with TimelineGrid.update. fixed: the time ticks and the rows' names
    ("stage 0" ...) are drawn (plots._ticks) over fixed limits, so neither a time range nor p changes the axes;
    the caller leaves ROW_NAMES_PT points left of the axes for the names."""
    from matplotlib.ticker import MaxNLocator

    pixels = TimelinePixels(ax)
    ax.add_artist(pixels)
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.0)
    ax.set_yticks([])
    ax.xaxis.set_major_locator(MaxNLocator(nbins=6, steps=[1, 2, 2.5, 5, 10]))
    ax.tick_params(axis="x", labelsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    if not fixed:
        return TimelineGrid(ax, pixels)
    rows = drawn_ticks(ax, "y", labelsize=8, widest="stage 15", marks=False)
    rows.remember([f"stage {s}" for s in range(16)])
    return TimelineGrid(ax, pixels, drawn_ticks(ax, "x", labelsize=8), rows)


def legend_html(split: bool = True, rows: str = "") -> str:
    """The colour legend as HTML (widgets keep text out of the per-frame render); `rows` adds a
    line that names the axes."""
    kinds = ("F", "B", "W") if split else ("F", "B")
    items = "".join(swatch(COLOURS[k], LABELS[k]) for k in kinds) + swatch(IDLE_COLOUR, LABELS["idle"])
    return (
        f'<div style="font-size:12px">{items}'
        + glyph_key(STEP_COLOUR, "&#9474;", "step ends")
        + glyph_key(IDEAL_COLOUR, "&#9478;", "ideal (busiest stage's compute)")
        + f' <span style="margin-left:12px;color:{MUTED};white-space:nowrap">lighter = odd microbatch</span>'
        + (f'<br><span style="color:{MUTED}">{rows}</span>' if rows else "")
        + "</div>"
    )


def draw_timeline(ax, timeline, labels: bool = True, title: str = "", x_max: float | None = None) -> None:
    """A static grid with one rectangle per op and, where it fits, its label (F3, B3.1, W2)."""
    p = timeline.stages
    x_max = x_max or nice_ceiling(timeline.step_time * 1.02)
    ax.add_patch(_rect(0, 0, timeline.step_time, p, IDLE_COLOUR, 0.0))
    kind = timeline.kind
    base = np.array([to_rgba(COLOURS[str(k)]) for k in kind])
    odd = (timeline.microbatch % 2 == 1)[:, None]
    faces = np.where(odd, base + (1 - base) * _LIGHTEN, base)
    faces[:, 3] = 1.0
    from matplotlib.collections import PolyCollection

    x0, x1 = timeline.start, timeline.end
    y0 = timeline.stage.astype(float)
    verts = np.stack(
        [np.stack([x0, y0], 1), np.stack([x1, y0], 1), np.stack([x1, y0 + 1], 1), np.stack([x0, y0 + 1], 1)], 1
    )
    ax.add_collection(PolyCollection(cast(Any, verts), facecolors=faces, edgecolors="white", linewidths=0.6))
    if labels:
        # label the ops wide enough for their text: 6.5 pt characters are about 0.6 x 6.5 / 72 inch
        # wide; the axes take about 85 % of the figure's width
        axis_inches = ax.figure.get_figwidth() * 0.85
        chars = 4.6 if timeline.chunks > 1 else 2.8
        min_width = x_max * chars * 0.6 * 6.5 / 72 / axis_inches
        for i in np.flatnonzero(x1 - x0 >= min_width):
            ax.text(
                (x0[i] + x1[i]) / 2,
                y0[i] + 0.5,
                timeline.label(int(i)),
                ha="center",
                va="center",
                fontsize=6.5,
                color="white",
                # on a patch of its box's colour, over the lines: the ideal end's dashed line crossed "B3", "B4"
                bbox=dict(boxstyle="square,pad=0.1", facecolor=faces[i], edgecolor="none"),
                zorder=4,
            )
    ax.axvline(timeline.step_time, color=STEP_COLOUR, linewidth=1.4)
    ax.axvline(float(timeline.busy.max()), color=IDEAL_COLOUR, linewidth=1.0, linestyle=(0, (3, 2)))
    ax.set_xlim(0, x_max)
    ax.set_ylim(p, 0)
    ticks, names = stage_ticks(p)
    ax.set_yticks(ticks, names)
    ax.tick_params(axis="y", length=0, labelsize=8)
    ax.tick_params(axis="x", labelsize=8)
    ax.spines[["top", "right"]].set_visible(False)
    if title:
        ax.set_title(title, fontsize=9, loc="left")


def _rect(x, y, w, h, colour, lw):
    from matplotlib.patches import Rectangle

    return Rectangle((x, y), w, h, facecolor=colour, edgecolor="none", linewidth=lw)


def timeline_figure(timeline, title: str = "", labels: bool = True, width: float = 7.6) -> Figure:
    """One schedule as a static figure (rectangles and labels), for notebooks and reports."""
    fig = Figure(figsize=(width, 0.9 + 0.28 * timeline.stages), layout="constrained")
    ax = fig.add_subplot()
    draw_timeline(ax, timeline, labels, title)
    ax.set_xlabel("time (one stage's forward = 1)", fontsize=8)
    return fig


def schedules_figure(timelines: list, titles: list[str], labels: bool = True, width: float = 7.6) -> Figure:
    """Several schedules stacked on one shared time axis: compare where each step ends."""
    p_total = sum(t.stages for t in timelines)
    fig = Figure(figsize=(width, 0.6 + 0.3 * p_total + 0.35 * len(timelines)), layout="constrained")
    axes = fig.subplots(len(timelines), 1, sharex=True, gridspec_kw=dict(height_ratios=[t.stages for t in timelines]))
    axes = np.atleast_1d(axes)
    x_max = nice_ceiling(max(t.step_time for t in timelines) * 1.02)
    for ax, tl, title in zip(axes, timelines, titles):
        draw_timeline(ax, tl, labels, title, x_max)
    axes[-1].set_xlabel("time (one stage's forward = 1)", fontsize=8)
    fig.legend(
        handles=_legend_handles("W" in {str(k) for t in timelines for k in set(t.kind.tolist())}),
        loc="outside upper right",
        ncols=6,
        fontsize=7,
        frameon=False,
    )
    return fig


def _legend_handles(split: bool) -> list:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list[Any] = [Patch(color=COLOURS[k], label=LABELS[k]) for k in (("F", "B", "W") if split else ("F", "B"))]
    handles.append(Patch(color=IDLE_COLOUR, label=LABELS["idle"]))
    handles.append(Line2D([], [], color=STEP_COLOUR, label="step ends"))
    handles.append(Line2D([], [], color=IDEAL_COLOUR, linestyle=(0, (3, 2)), label="ideal"))
    return handles


def bubble_curve_figure(
    microbatches, measured: dict, formula: dict, threshold: float | None = None, title: str = ""
) -> Figure:
    """Bubble (idle share of the step) against m: simulator points over closed-form curves.

    ``measured`` and ``formula`` map a label (e.g. 'p = 8') to arrays of fractions over
    ``microbatches``; ``threshold`` draws a horizontal line (e.g. 0.10).
    """
    fig = Figure(figsize=(7.2, 3.4), layout="constrained")
    ax = fig.add_subplot()
    ms = np.asarray(microbatches)
    colours = [BLUE, ORANGE, GREEN, PURPLE, RED, BROWN]
    for i, label in enumerate(formula):
        colour = colours[i % len(colours)]
        ax.plot(ms, 100 * np.asarray(formula[label]), color=colour, linewidth=1.5, label=f"{label}: (p-1)/(m+p-1)")
        if label in measured:
            ax.plot(
                ms, 100 * np.asarray(measured[label]), "o", color=colour, markersize=3.5, label=f"{label}: simulated"
            )
    if threshold is not None:
        ax.axhline(100 * threshold, color=MUTED, linestyle="--", linewidth=1)
        ax.text(ms.max(), 100 * threshold, f" {100 * threshold:g}%", va="bottom", ha="right", fontsize=8, color=MUTED)
    ax.set_xlabel("microbatches m", fontsize=9)
    ax.set_ylabel("bubble: idle share of the step (%)", fontsize=9)
    ax.set_ylim(0, None)
    ax.set_xlim(0, ms.max() + 1)
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(fontsize=7, frameon=False, ncols=2)
    if title:
        ax.set_title(title, fontsize=10)
    return fig


def stage_memory_figure(
    groups: dict, capacity: float | None = None, capacity_label: str = "", title: str = ""
) -> Figure:
    """Grouped bars: each stage's peak activation memory (GB) for each StageActivations in `groups`."""
    fig = Figure(figsize=(7.2, 3.2), layout="constrained")
    ax = fig.add_subplot()
    labels = list(groups)
    p = max(groups[k].stages for k in labels)
    width = 0.8 / len(labels)
    colours = [PURPLE, BLUE, ORANGE, GREEN]
    for i, label in enumerate(labels):
        act = groups[label]
        x = np.arange(act.stages) - 0.4 + width * (i + 0.5)
        bars = ax.bar(x, act.per_stage_bytes / 1e9, width * 0.92, color=colours[i % len(colours)], label=label)
        for rect, value in zip(bars, act.per_stage_bytes):
            ax.text(
                rect.get_x() + rect.get_width() / 2,
                rect.get_height(),
                format_bytes(value),
                ha="center",
                va="bottom",
                fontsize=7,
            )
    if capacity is not None:
        ax.axhline(capacity / 1e9, color=CAPACITY_COLOUR, linestyle="--", linewidth=1.2)
        ax.text(
            -0.45,
            capacity / 1e9,
            capacity_label or format_bytes(capacity),
            color=CAPACITY_COLOUR,
            va="bottom",
            fontsize=8,
        )
    ax.set_xticks(range(p), [f"stage {s}" for s in range(p)])
    ax.set_ylabel("activation memory (GB = 10⁹ B)", fontsize=9)
    ax.spines[["top", "right"]].set_visible(False)
    top = max([capacity or 0.0] + [groups[k].peak_bytes for k in labels]) / 1e9
    ax.set_ylim(0, top * 1.25)  # room for the legend above the bars and the capacity line
    ax.legend(fontsize=8, frameon=False, loc="upper right", ncols=len(labels))
    if title:
        ax.set_title(title, fontsize=10)
    return fig
