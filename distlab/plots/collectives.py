"""Pictures of collectives: a simulated all-reduce drawn state by state, and cost curves.

The ring picture is drawn from a CollectiveTrace (distlab.collectives): every GPU is a
panel of chunk columns, and each column is cut into one stripe per GPU. A stripe has
that GPU's colour when the chunk already sums its data, and is grey otherwise, so a full
column of all colours is a finished sum. Nothing is drawn by hand: the colours of every
state come from the trace's contributor record, the arrows from its sends.
"""

from __future__ import annotations

from typing import Any, cast

from dataclasses import dataclass, field

import numpy as np
from matplotlib.collections import PathCollection, PolyCollection
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.path import Path

from ..errors import ConfigurationError
from ..units import format_bytes, format_seconds
from ._style import BLUE, GREEN, PURPLE, RED, decade_labels

__all__ = [
    "GPU_COLOURS",
    "EMPTY",
    "MAX_PICTURE_GPUS",
    "gpu_colours",
    "CollectiveFrames",
    "collective_frames",
    "CollectivePicture",
    "collective_picture",
    "collective_states_figure",
    "cost_vs_size_figure",
    "busiest_load_figure",
]

#: Sixteen distinguishable colours, one per GPU (tab20's strong and light halves interleaved).
GPU_COLOURS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    "#aec7e8",
    "#ffbb78",
    "#98df8a",
    "#ff9896",
    "#c5b0d5",
    "#c49c94",
)
EMPTY = "#e9ebee"
#: Most GPUs a picture shows (the stripes get thinner than a pixel beyond).
MAX_PICTURE_GPUS = 16

_EDGE_IDLE = to_rgba("#9aa0a6")
_EDGE_NEW = to_rgba("#111111")
_ARROW_IDLE = to_rgba("#c7cbd1")
_ARROW_BUSY = to_rgba("#111111")
_EMPTY_PATH = Path(np.zeros((1, 2)), [Path.MOVETO])


def gpu_colours(n: int) -> np.ndarray:
    """(n, 4) RGBA colours, one per GPU."""
    if n > len(GPU_COLOURS):
        raise ConfigurationError(f"a picture shows at most {MAX_PICTURE_GPUS} GPUs, got {n}")
    return np.array([to_rgba(c) for c in GPU_COLOURS[:n]])


@dataclass
class CollectiveFrames:
    """What every state of one trace shows, computed once from its record: index with the state t (0..steps).

    holds[t, g, c, j]: GPU g's chunk c sums GPU j's data in state t (the trace's contributor record);
    received[t, g, c]: GPU g received chunk c in step t-1; busy[t, i]: arrow pairs[i] carried a
    message in step t-1.
    """

    holds: np.ndarray
    received: np.ndarray
    busy: np.ndarray
    pairs: list  # (sender, receiver) of every arrow


def collective_frames(trace) -> CollectiveFrames:
    """The per-state record the picture draws: contributors, received chunks and busy links of `trace`."""
    n, chunks = trace.gpus, trace.n_chunks
    if n > MAX_PICTURE_GPUS:
        raise ConfigurationError(f"a picture shows at most {MAX_PICTURE_GPUS} GPUs; this trace has {n}")
    states = trace.steps + 1
    holds = np.stack([trace.holds_matrix(t) for t in range(states)])  # [t, gpu, chunk, contributor]
    received = np.zeros((states, n, chunks), dtype=bool)
    pairs = _pairs(trace)
    index = {p: i for i, p in enumerate(pairs)}
    busy = np.zeros((states, len(pairs)), dtype=bool)
    for k in range(trace.steps):
        receivers = np.nonzero(trace.recv_from[k] >= 0)[0]
        received[k + 1, receivers, trace.recv_chunk[k, receivers].astype(np.int64)] = True
        for g in receivers:
            busy[k + 1, index[(int(trace.recv_from[k, g]), int(g))]] = True
    return CollectiveFrames(holds, received, busy, pairs)


def _pairs(trace) -> list:
    ks, senders = np.nonzero(trace.send_to >= 0)
    receivers = trace.send_to[ks, senders]
    return sorted({(int(s), int(r)) for s, r in zip(senders, receivers)})


def _layout(trace):
    """Centres of the GPU panels and the panel size: a ring, or a star around the server."""
    n = trace.gpus
    if trace.server is None:
        order = np.arange(n)
        ring = n
    else:
        order = np.array([g for g in range(n) if g != trace.server])
        ring = max(n - 1, 1)
    angles = np.pi / 2 - 2 * np.pi * np.arange(ring) / ring
    centres = np.zeros((n, 2))
    centres[order] = np.column_stack([np.cos(angles), np.sin(angles)])[: order.size]
    size = 0.5 if ring <= 2 else min(0.5, 1.25 * np.sin(np.pi / ring))
    return centres, angles, order, size


def _compound(polys) -> Path:
    """One Path of many closed polygons ((k, vertices, 2) array), or an empty path."""
    polys = np.asarray(polys, dtype=float)
    return Path.make_compound_path_from_polys(polys) if len(polys) else _EMPTY_PATH


def _lines(lines) -> Path:
    """One Path of many open polylines (each an (m, 2) array)."""
    if not lines:
        return _EMPTY_PATH
    vertices = np.concatenate(lines)
    codes = np.full(len(vertices), Path.LINETO, dtype=Path.code_type)
    codes[np.cumsum([0] + [len(line) for line in lines[:-1]])] = Path.MOVETO
    return Path(vertices, codes)


@dataclass
class CollectivePicture:
    """The artists of one collective's picture. show(t) swaps in the precomputed paths of state t.

    Static (drawn with the axes): the grey chunk columns, the idle arrows and the labels.
    Animated (redrawn per frame): one compound path per GPU colour holding every stripe of that
    colour, the outlines of the chunks just received, and the busy arrows. Four artists and
    about twenty paths per frame, whatever N is (a patch per stripe is 4,096 patches at N = 16,
    about 12 ms of Agg time per frame on its own).
    """

    ax: Any
    trace: Any
    frames: CollectiveFrames
    stripe_rects: np.ndarray  # (gpus, chunks, contributors, 4, 2): every stripe's corners
    column_rects: np.ndarray  # (gpus, chunks, 4, 2)
    stripes: PathCollection
    outlines: PathCollection
    busy_lines: PathCollection
    busy_heads: PathCollection
    static: list = field(default_factory=list)
    labels: list = field(default_factory=list)
    state: int = 0
    _paths: list = field(default_factory=list, repr=False)

    @property
    def animated_artists(self) -> list:
        """What changes from state to state: redrawn per frame when blitting."""
        return [self.stripes, self.outlines, self.busy_lines, self.busy_heads]

    def show(self, t: int) -> None:
        """Show state t (after t steps; 0 = the start): stripes held, chunks just received, busy arrows."""
        stripes, outline, lines, heads = self._paths[t]
        self.stripes.set_paths(stripes)
        self.outlines.set_paths([outline])
        self.busy_lines.set_paths([lines])
        self.busy_heads.set_paths([heads])
        self.state = t

    def remove(self) -> None:
        for artist in [*self.animated_artists, *self.static, *self.labels]:
            artist.remove()


def collective_picture(ax, trace, t: int = 0, labels: bool = True) -> CollectivePicture:
    """Draw `trace` in state t on `ax`: GPU panels on a ring (or a star around the parameter server)."""
    frames = collective_frames(trace)
    n, chunks, contributors = trace.gpus, trace.n_chunks, trace.n_contributors
    centres, angles, order, size = _layout(trace)
    width = size * min(1.0, chunks / 3)  # a lone chunk column is drawn narrower than a full panel
    column_rects, stripe_rects, y0 = _panel_rects(centres, size, width, n, chunks, contributors)

    idle_edges = _EDGE_IDLE if n <= 8 else "none"
    columns = PolyCollection(
        cast(Any, column_rects.reshape(-1, 4, 2)), facecolors=EMPTY, edgecolors=idle_edges, linewidths=0.6
    )
    ax.add_collection(columns)
    arrows = [_arrow(trace, centres, angles, size, width, s, r) for s, r in frames.pairs]
    arrow_lines, arrow_heads = [a for a, _ in arrows], [h for _, h in arrows]
    idle_lines = PathCollection([_lines(arrow_lines)], facecolors="none", edgecolors=[_ARROW_IDLE], linewidths=1.0)
    idle_heads = PathCollection([_compound(arrow_heads)], facecolors=[_ARROW_IDLE], edgecolors="none")
    ax.add_collection(idle_lines)
    ax.add_collection(idle_heads)

    colours = gpu_colours(contributors)
    paths = _state_paths(trace, frames, _received_marks(column_rects, y0, n), stripe_rects, arrow_lines, arrow_heads)
    # axis-aligned rectangles: snapped to whole pixels they stay crisp and rasterise about twice as fast
    stripe_coll = PathCollection(paths[t][0], facecolors=colours, edgecolors="none", linewidths=0, snap=True)
    if n <= 8:
        outline_coll = PathCollection(
            [paths[t][1]], facecolors="none", edgecolors=[_EDGE_NEW], linewidths=2.2, snap=True
        )
    else:
        outline_coll = PathCollection([paths[t][1]], facecolors=[_EDGE_NEW], edgecolors="none", snap=True)
    busy_lines = PathCollection([paths[t][2]], facecolors="none", edgecolors=[_ARROW_BUSY], linewidths=1.8)
    busy_heads = PathCollection([paths[t][3]], facecolors=[_ARROW_BUSY], edgecolors="none")
    for artist in (stripe_coll, outline_coll, busy_lines, busy_heads):
        ax.add_collection(artist, autolim=False)
    texts = _gpu_labels(ax, trace, centres, size, colours) if labels else []
    ax.set_xlim(-1.62, 1.62)
    ax.set_ylim(-1.55, 1.55)
    ax.set_aspect("equal")
    ax.set_axis_off()
    picture = CollectivePicture(
        ax,
        trace,
        frames,
        stripe_rects,
        column_rects,
        stripe_coll,
        outline_coll,
        busy_lines,
        busy_heads,
        [columns, idle_lines, idle_heads],
        texts,
        t,
        paths,
    )
    picture.show(t)
    return picture


def _panel_rects(centres, size, width, n: int, chunks: int, contributors: int):
    """(column rectangles (gpus, chunks, 4, 2), stripe rectangles (gpus, chunks, contributors, 4, 2), column bottoms):
    each GPU panel split into one column per chunk, each column into one stripe per contributing GPU."""
    col_w = width / chunks
    row_h = size / contributors
    gap = col_w * 0.12
    x0 = centres[:, 0, None] - width / 2 + np.arange(chunks)[None, :] * col_w + gap / 2  # (gpus, chunks)
    x1 = x0 + col_w - gap
    y0 = np.broadcast_to(centres[:, 1, None] - size / 2, (n, chunks))
    column_rects = np.stack(
        [np.stack([x0, y0], -1), np.stack([x1, y0], -1), np.stack([x1, y0 + size], -1), np.stack([x0, y0 + size], -1)],
        axis=2,
    )
    top = (y0 + size)[..., None] - np.arange(contributors) * row_h  # (gpus, chunks, contributors)
    xs0 = np.broadcast_to(x0[..., None], top.shape)
    xs1 = np.broadcast_to(x1[..., None], top.shape)
    stripe_rects = np.stack(
        [
            np.stack([xs0, top - row_h], -1),
            np.stack([xs1, top - row_h], -1),
            np.stack([xs1, top], -1),
            np.stack([xs0, top], -1),
        ],
        axis=3,
    )
    return column_rects, stripe_rects, y0


def _received_marks(column_rects, y0, n: int):
    """What marks a chunk just received: its column's outline (n <= 8), else a bar under the column."""
    if n <= 8:  # outline the chunks just received
        return column_rects
    # columns a few pixels wide: a bar under each chunk just received, which hides no stripe
    below = column_rects.copy()
    below[..., 1] = np.where(below[..., 1] > y0[..., None], y0[..., None] - 0.015, y0[..., None] - 0.05)
    return below


def _state_paths(trace, frames, marks, stripe_rects, arrow_lines, arrow_heads) -> list:
    """Per state: (the stripes each contributor's data fills, the received marks, the busy arrows' lines, heads)."""
    contributors = trace.n_contributors
    paths = []
    for state in range(trace.steps + 1):
        held = frames.holds[state]
        stripes = [_compound(stripe_rects[:, :, j][held[:, :, j]]) for j in range(contributors)]
        outline = _compound(marks[frames.received[state]])
        busy = np.nonzero(frames.busy[state])[0]
        paths.append(
            (stripes, outline, _lines([arrow_lines[i] for i in busy]), _compound([arrow_heads[i] for i in busy]))
        )
    return paths


def _gpu_labels(ax, trace, centres, size, colours) -> list:
    """'GPU g' beside each panel, outward from the ring's centre (the server's below its panel)."""
    n = trace.gpus
    texts = []
    fontsize = 9 if n <= 8 else 7
    for g in range(n):
        if trace.server is not None and g == trace.server:
            pos, ha, va = centres[g] - (0, size / 2 + 0.04), "center", "top"
            text = f"GPU {g}\n(server)"
        else:
            direction = centres[g] / max(np.linalg.norm(centres[g]), 1e-9)
            pos = centres[g] + direction * (size / 2 + 0.05)
            ha = "center" if abs(direction[0]) < 0.35 else ("left" if direction[0] > 0 else "right")
            va = "center" if abs(direction[1]) < 0.35 else ("bottom" if direction[1] > 0 else "top")
            text = f"GPU {g}"
        texts.append(
            ax.text(pos[0], pos[1], text, ha=ha, va=va, fontsize=fontsize, color=colours[g], fontweight="bold")
        )
    return texts


def _arrow(trace, centres, angles, size, width, sender, receiver):
    """(polyline, head triangle) of the arrow from sender to receiver, in data coordinates."""
    if trace.server is None:
        # an arc inside the ring of panels, from the sender's angle toward the receiver's
        radius = 1.0 - size / 2 - 0.12
        spacing = 2 * np.pi / len(angles)
        margin = min(0.35, 0.15 * spacing)
        theta = np.linspace(angles[sender] - margin, angles[sender] - spacing + margin, 32)
        points = np.column_stack([radius * np.cos(theta), radius * np.sin(theta)])
    else:
        a, b = centres[sender], centres[receiver]
        direction = (b - a) / np.linalg.norm(b - a)
        normal = np.array([-direction[1], direction[0]]) * 0.035
        reach = 0.62 * np.hypot(width, size)
        points = np.array([a + direction * reach + normal, b - direction * reach + normal])
    tip = points[-1]
    direction = tip - points[-2]
    direction = direction / np.linalg.norm(direction)
    normal = np.array([-direction[1], direction[0]])
    length = 0.075
    base = tip - direction * length
    head = np.array([tip, base + normal * length * 0.4, base - normal * length * 0.4])
    body = points.copy()
    body[-1] = base
    return body, head


def collective_states_figure(trace, states, titles=None) -> Figure:
    """A static row of pictures of `trace`, one per state in `states` (for lesson notebooks)."""
    states = list(states)
    fig = Figure(figsize=(3.3 * len(states), 3.6), layout="constrained")
    axes = fig.subplots(1, len(states), squeeze=False)[0]
    for index, (ax, t) in enumerate(zip(axes, states)):
        collective_picture(ax, trace, t)
        if titles is not None:
            ax.set_title(titles[index], fontsize=10)
    return fig


# ----------------------------------------------------------------------------------------
# Cost curves


def cost_vs_size_figure(sizes, curves: dict, crossovers: dict | None = None, title: str = "") -> Figure:
    """Time of a collective against its size, one colour per link (log-log), with the crossovers marked.

    curves: {label: (total, latency term, bandwidth term)}, each an array of seconds at `sizes`
    (bytes); the total is drawn solid, the latency term dashed (flat), the bandwidth term dotted.
    crossovers: {label: (size, time)} where the two terms are equal (marked and labelled).
    """
    sizes = np.asarray(sizes, dtype=float)
    fig = Figure(figsize=(7.2, 4.0), layout="constrained")
    ax = fig.add_subplot()
    palette = (BLUE, RED, GREEN, PURPLE)
    offsets = (((10, -26), "left"), ((-10, 10), "right"), ((10, -40), "left"), ((-10, 24), "right"))
    for colour, (label, (total, latency, bandwidth)), (offset, ha) in zip(palette, curves.items(), offsets):
        ax.loglog(sizes, total, color=colour, linewidth=2, label=f"{label}: total")
        ax.loglog(sizes, latency, color=colour, linestyle="--", linewidth=1, label=f"{label}: latency term")
        ax.loglog(sizes, bandwidth, color=colour, linestyle=":", linewidth=1.2, label=f"{label}: bandwidth term")
        if crossovers and label in crossovers:
            cross, at = crossovers[label]
            ax.plot([cross], [at], "o", color=colour)
            ax.annotate(
                f"crossover {format_bytes(cross)}\n({format_seconds(at)})",
                (cross, at),
                textcoords="offset points",
                xytext=offset,
                ha=ha,
                fontsize=8,
                color=colour,
                bbox=dict(facecolor="white", edgecolor="none", alpha=0.85, pad=1),
            )
    ax.set_xlabel("message size M")
    ax.set_ylabel("time")
    if title:
        ax.set_title(title, fontsize=10)
    ax.set_ylim(bottom=max(ax.get_ylim()[0], 1e-6))
    decade_labels(ax, "x", format_bytes)  # 1 kB ... 100 GB, not 10^3 ... 10^11 (review v18)
    decade_labels(ax, "y", format_seconds)
    ax.legend(fontsize=7, loc="upper left", frameon=False)
    ax.grid(True, which="major", alpha=0.3)
    return fig


def busiest_load_figure(ns, loads: dict, size: float) -> Figure:
    """Bytes the busiest GPU sends in one all-reduce against the GPU count, one line per algorithm.

    loads: {label: bytes at each of ns}; size: the all-reduce's M in bytes (the y axis is in units of M).
    """
    ns = np.asarray(ns, dtype=int)
    m = float(size)
    fig = Figure(figsize=(7.2, 3.6), layout="constrained")
    ax = fig.add_subplot()
    for (label, load), colour in zip(loads.items(), (RED, BLUE, GREEN)):
        ax.plot(ns, np.asarray(load, dtype=float) / m, "o-", color=colour, label=label, markersize=4)
    ax.axhline(2.0, color=BLUE, linestyle=":", linewidth=1)
    ax.text(ns[-1], 2.0, "2 M", color=BLUE, va="bottom", ha="right", fontsize=9)
    ax.set_yscale("log")
    ax.set_xscale("log", base=2)
    ax.set_xticks(ns, [str(n) for n in ns])
    ax.set_xlabel("GPUs N")
    ax.set_ylabel("bytes sent by the busiest GPU (in units of M)")
    ax.set_title(f"one all-reduce of M = {format_bytes(m)}", fontsize=10)
    ax.legend(fontsize=8, frameon=False)
    ax.grid(True, which="major", alpha=0.3)
    return fig
