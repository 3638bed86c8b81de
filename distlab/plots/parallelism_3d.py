"""The GPU assignment grid: one cell per GPU, grouped by node, coloured by parallel group.

Data in (a distlab.mesh.RankLayout), artists out; nothing here computes a layout. The cells are
a fixed pool of rectangles, one per GPU, held in one PolyCollection (one artist: painting 256
separate Rectangle patches costs about 0.1 ms each, the collection a few ms for all), so a
colour change only swaps the colour arrays; the pool is rebuilt only when the number of GPUs
or the node size changes (geometry cached per size). Rank numbers and node labels are glyph
outlines in one compound PathPatch each (text artists are the slowest thing Agg renders), so
even the full redraw after a rebuild is cheap.
"""

from __future__ import annotations

from typing import Any

import math
from dataclasses import dataclass

import numpy as np
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.patches import PathPatch
from matplotlib.path import Path

from ._style import MUTED, TEXT_COLOUR, swatch

__all__ = [
    "GROUP_COLOURS",
    "GROUP_HATCHES",
    "group_hatches",
    "HIGHLIGHT",
    "HIGHLIGHT_DASH",
    "HIGHLIGHT_WIDTH",
    "IDLE_EDGE",
    "NODE_FACE",
    "NODE_EDGE",
    "LABEL_COLOUR",
    "LABEL_LIMIT",
    "NODE_LABEL_LIMIT",
    "GAP",
    "ROW_GAP",
    "BLOCK_GAP",
    "text_path",
    "grid_geometry",
    "GpuGrid",
    "gpu_grid",
    "group_colours",
    "stage_colours",
    "grid_colours",
    "legend_html",
    "FILL_WORDS",
    "KEY_HEIGHT",
    "grid_key",
    "grid_figure",
    "grids_figure",
]

#: Light face colours for groups, as the browser grid draws them (browser_js/grid.js): Okabe-Ito's seven colours
#: without its black, lightened by a quarter towards white, light enough for the dark rank numbers. The tab20 and
#: pastel tones they replace had near twins ("#aec7e8" and "#9ecae1", 8 CIELAB units apart) and repeated past 16.
GROUP_COLOURS = ("#ECB740", "#80C7EF", "#40B696", "#F4EB71", "#4095C5", "#E08640", "#D99BBD")
#: The second cue: each round of seven groups its own hatch, so up to 49 groups are told apart without colour alone
#: (grid.js's GROUP_HATCHES, in matplotlib's hatch notation); past 49 the fills repeat, neighbours still differ.
GROUP_HATCHES = ("", "//", "\\\\", "xx", "--", "||", "..")
HATCH_INK = (31 / 255, 35 / 255, 40 / 255, 0.45)
#: Edge colours marking the picked GPU's groups: tp, dp and pp as the lesson's app draws them (browser_js/grid.js's
#: OUTLINES, tests/widgets/test_grid_key.py), Okabe & Ito's blue and vermilion.
HIGHLIGHT = {"picked": "#000000", "tp": "#000000", "dp": "#0072B2", "pp": "#D55E00", "cp": "#7b3fa0", "ep": "#2e7d32"}
#: Their dash patterns (matplotlib's (offset, (on, off)) in points): the app's second cue, grid.js's OUTLINES dashes.
HIGHLIGHT_DASH: dict[str, Any] = {
    "picked": "solid",
    "tp": "solid",
    "dp": (0, (5, 3)),
    "pp": (0, (2, 2)),
    "cp": "solid",
    "ep": "solid",
}
HIGHLIGHT_WIDTH = {"picked": 3.6, "tp": 2.0, "dp": 2.0, "pp": 2.0, "cp": 2.0, "ep": 2.0}
IDLE_EDGE = "#ffffff"
NODE_FACE = "#eef1f5"
NODE_EDGE = "#c9ced6"
LABEL_COLOUR = MUTED
#: Most GPUs whose rank numbers are written in the cells.
LABEL_LIMIT = 128
#: Most nodes that get a 'node k' label.
NODE_LABEL_LIMIT = 32
GAP = 0.12  # between cells of a node
ROW_GAP = 0.45  # between node rows
BLOCK_GAP = 3.4  # between columns of nodes (room for the node labels)
_CACHE_SIZE = 32

_GLYPHS: dict = {}
_EMPTY_PATH = Path(np.zeros((1, 2)), [Path.MOVETO])
_GEOMETRY: dict = {}


def _glyph(char: str):
    """(vertices, codes, advance) of a character's outline at size 1 (DejaVu Sans), cached."""
    if char not in _GLYPHS and char.isspace():
        _GLYPHS[char] = (np.zeros((0, 2)), np.zeros(0, dtype=np.uint8), 0.318)  # DejaVu Sans space advance
    if char not in _GLYPHS:
        from matplotlib.textpath import TextPath

        path = TextPath((0, 0), char, size=1.0)
        zero = TextPath((0, 0), "0", size=1.0).get_extents().x1
        advance = TextPath((0, 0), char + "0", size=1.0).get_extents().x1 - zero
        _GLYPHS[char] = (
            np.asarray(path.vertices, dtype=float).reshape(-1, 2),
            np.asarray(path.codes if path.codes is not None else [], dtype=np.uint8),
            advance,
        )
    return _GLYPHS[char]


def text_path(text: str, x: float, y: float, height: float, ha: str = "center") -> tuple:
    """(vertices, codes) of `text` with its digits `height` tall, vertically centred on y (data units,
    y axis pointing down), horizontally centred on x (ha='center') or ending at x (ha='right')."""
    verts, codes, advance = [], [], 0.0
    for char in text:
        v, c, adv = _glyph(char)
        if len(v):
            verts.append(v + (advance, 0.0))
            codes.append(c)
        advance += adv
    scale = height / 0.73  # digit height of DejaVu Sans at size 1
    v = np.concatenate(verts) * scale
    width = advance * scale
    v[:, 0] += x - (width / 2 if ha == "center" else width)
    v[:, 1] = y + height / 2 - v[:, 1]  # flip: the grid's y axis points down
    return v, np.concatenate(codes)


def _compound(parts: list) -> Path:
    if not parts:
        return _EMPTY_PATH
    return Path(np.concatenate([v for v, _ in parts]), np.concatenate([c for _, c in parts]))


def _digit_height(digits: int) -> float:
    """Digit height in cell units so that a number of `digits` digits fits a unit cell."""
    return min(0.36, 0.78 * 0.73 / (digits * 0.636))


def grid_geometry(world: int, gpus_per_node: int, aspect: float = 1.9):
    """Cell positions: node k is a row of its GPUs; rows stack into columns of nodes to fit `aspect`.

    Returns (x, y) lower-left corners per rank (y grows downwards), the columns of nodes, the rows
    per column, and the total width and height.
    """
    g = gpus_per_node
    nodes = -(-world // g)
    best = None
    for cols in range(1, nodes + 1):
        rows = -(-nodes // cols)
        width = cols * g * (1 + GAP) + (cols - 1) * BLOCK_GAP
        height = rows * (1 + ROW_GAP)
        score = abs(math.log(width / height / aspect))
        if best is None or score < best[0] - 1e-9:
            best = (score, cols, rows, width, height)
    assert best is not None  # nodes >= 1: the loop ran
    _, cols, rows, width, height = best
    rank = np.arange(world)
    node, slot = rank // g, rank % g
    col, row = node // rows, node % rows
    x = col * (g * (1 + GAP) + BLOCK_GAP) + slot * (1 + GAP)
    y = row * (1 + ROW_GAP)
    return x.astype(float), y.astype(float), cols, rows, width, height


def _squares(x, y, width, height) -> np.ndarray:
    """(N, 4, 2) corners of axis-aligned rectangles with lower-left corners (x, y)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    w = np.broadcast_to(np.asarray(width, dtype=float), x.shape)
    h = np.broadcast_to(np.asarray(height, dtype=float), x.shape)
    return np.stack(
        [np.stack([x, y], -1), np.stack([x + w, y], -1), np.stack([x + w, y + h], -1), np.stack([x, y + h], -1)], axis=1
    )


@dataclass(frozen=True)
class _Geometry:
    x: np.ndarray
    y: np.ndarray
    cells: np.ndarray
    frames: np.ndarray
    numbers: Path
    labels: Path
    xlim: tuple
    ylim: tuple


def _geometry(world: int, gpus_per_node: int) -> _Geometry:
    key = (world, gpus_per_node)
    if key not in _GEOMETRY:
        if len(_GEOMETRY) >= _CACHE_SIZE:
            _GEOMETRY.pop(next(iter(_GEOMETRY)))
        g = gpus_per_node
        x, y, cols, rows, width, height = grid_geometry(world, g)
        nodes = -(-world // g)
        first = np.arange(nodes) * g
        count = np.minimum(g, world - first)
        frames = _squares(x[first] - 0.18, y[first] - 0.18, count * (1 + GAP) - GAP + 0.36, 1.36)
        numbers = _EMPTY_PATH
        if world <= LABEL_LIMIT:
            numbers = _compound(
                [text_path(str(r), a + 0.5, b + 0.5, _digit_height(len(str(r)))) for r, (a, b) in enumerate(zip(x, y))]
            )
        labels = _EMPTY_PATH
        if nodes <= NODE_LABEL_LIMIT:
            labels = _compound(
                [text_path(f"node {k}", x[first[k]] - 0.4, y[first[k]] + 0.5, 0.3, ha="right") for k in range(nodes)]
            )
        _GEOMETRY[key] = _Geometry(
            x,
            y,
            _squares(x, y, 1.0, 1.0),
            frames,
            numbers,
            labels,
            (-BLOCK_GAP + 0.2, width + 0.2),
            (height + 0.1, -0.5),
        )
    return _GEOMETRY[key]


@dataclass
class GpuGrid:
    """The grid's artists: node frames and cells (PolyCollections of rectangles, one per node and
    per GPU), rank numbers and node labels (glyph outlines, one PathPatch each)."""

    ax: Any
    frames: Any = None
    cells: Any = None
    numbers: Any = None
    labels: Any = None
    hatches: Any = None  # one PathPatch per hatch of GROUP_HATCHES after the first, over the cells that have it
    world: int = 0
    gpus_per_node: int = 0
    x: Any = None
    y: Any = None

    @property
    def animated_artists(self) -> list:
        """The artists a colour change redraws (cells, and the numbers painted over them); the node
        frames and labels change only on rebuild."""
        return [self.cells, *(self.hatches or ()), self.numbers]

    def rebuild(self, world: int, gpus_per_node: int) -> bool:
        """Lay out `world` cells in nodes of gpus_per_node (cached per size). Returns True when the
        geometry changed, False when it was already so."""
        if (world, gpus_per_node) == (self.world, self.gpus_per_node):
            return False
        self.world, self.gpus_per_node = world, gpus_per_node
        geo = _geometry(world, gpus_per_node)
        self.x, self.y = geo.x, geo.y
        self.cells.set_verts(geo.cells)
        self.frames.set_verts(geo.frames)
        self.numbers.set_path(geo.numbers)
        self.labels.set_path(geo.labels)
        self.ax.set_xlim(*geo.xlim)
        self.ax.set_ylim(*geo.ylim)
        return True

    def update(self, faces, edges, widths, hatches=None, dashes=None) -> None:
        """Per-GPU RGBA face colours (N, 4), edge colours (N, 4), edge widths (N,), hatch indices into
        GROUP_HATCHES (N,; None: no hatch) and edge dash patterns (N,; None: solid)."""
        self.cells.set_facecolor(faces)
        self.cells.set_edgecolor(edges)
        self.cells.set_linewidth(widths)
        self.cells.set_linestyle("solid" if dashes is None else list(dashes))
        self.numbers.set_visible(self.world <= LABEL_LIMIT)
        index = np.zeros(self.world, dtype=int) if hatches is None else np.asarray(hatches)
        for k, patch in enumerate(self.hatches or (), start=1):
            ranks = np.flatnonzero(index == k)
            square = _squares(self.x[ranks], self.y[ranks], 1.0, 1.0) if ranks.size else None
            patch.set_path(_EMPTY_PATH if square is None else Path.make_compound_path_from_polys(square))

    def hide(self) -> None:
        """An empty, faded state (used while the inputs are invalid)."""
        n = self.world
        self.update(np.tile(to_rgba("#f3f4f6"), (n, 1)), np.tile(to_rgba(IDLE_EDGE), (n, 1)), np.full(n, 0.5))
        self.numbers.set_visible(False)

    def cell_at(self, xdata, ydata) -> int | None:
        """The rank whose cell contains the point (data coordinates), or None."""
        if xdata is None or ydata is None or self.x is None:
            return None
        inside = (self.x <= xdata) & (xdata <= self.x + 1) & (self.y <= ydata) & (ydata <= self.y + 1)
        hits = np.flatnonzero(inside)
        return int(hits[0]) if hits.size else None


def gpu_grid(ax) -> GpuGrid:
    """Empty grid artists on ax (no axis decorations); lay them out with rebuild()."""
    grid = GpuGrid(ax)
    grid.frames = PolyCollection([], facecolor=NODE_FACE, edgecolor=NODE_EDGE, linewidth=0.8, zorder=1)
    grid.cells = PolyCollection([], zorder=2)
    grid.numbers = PathPatch(_EMPTY_PATH, facecolor=TEXT_COLOUR, edgecolor="none", zorder=3)
    grid.labels = PathPatch(_EMPTY_PATH, facecolor=LABEL_COLOUR, edgecolor="none", zorder=3)
    grid.hatches = [
        PathPatch(_EMPTY_PATH, facecolor="none", edgecolor=HATCH_INK, linewidth=0, hatch=h, zorder=2.5)
        for h in GROUP_HATCHES[1:]
    ]
    for patch in grid.hatches:
        ax.add_patch(patch)
    for artist in (grid.frames, grid.cells):
        ax.add_collection(artist, autolim=False)
    ax.add_patch(grid.numbers)
    ax.add_patch(grid.labels)
    ax.set_aspect("equal", adjustable="box", anchor="C")
    ax.set_axis_off()
    return grid


def group_colours(index: np.ndarray) -> np.ndarray:
    """(N, 4) RGBA: GROUP_COLOURS[index mod 7] for each GPU's group index."""
    palette = np.array([to_rgba(c) for c in GROUP_COLOURS])
    return palette[np.asarray(index) % len(palette)]


def group_hatches(index: np.ndarray) -> np.ndarray:
    """(N,) indices into GROUP_HATCHES for each GPU's group index: one hatch per round of len(GROUP_COLOURS) groups."""
    return (np.asarray(index) // len(GROUP_COLOURS)) % len(GROUP_HATCHES)


def stage_colours(stage: np.ndarray, stages: int) -> np.ndarray:
    """(N, 4) RGBA for pipeline stages: a light sequential ramp from the first to the last stage."""
    from matplotlib import colormaps

    ramp = colormaps["YlGnBu"]
    fraction = np.asarray(stage, dtype=float) / max(stages - 1, 1)
    return ramp(0.15 + 0.6 * fraction)


def grid_colours(layout, colour_by: str, picked: int | None = None, show=("tp", "dp", "pp")):
    """Faces, edges, widths, hatches (group_hatches) and edge dashes (HIGHLIGHT_DASH) for every GPU of a layout.

    colour_by: a dimension ('tp', 'dp', 'pp', ...: GPUs of one group share a colour), 'stage'
    (pipeline stage) or 'node'. picked: a rank whose groups of the dimensions in `show` get
    coloured edges (the rank itself a thick black one); the other GPUs are faded.
    """
    n = layout.world_size
    hatches = np.zeros(n, dtype=int)
    if colour_by == "stage":
        faces = stage_colours(layout.coordinate_array("pp"), layout.pp)
    else:
        groups = layout.node_ids() if colour_by == "node" else layout.group_index(colour_by)
        faces, hatches = group_colours(groups), group_hatches(groups)
    edges = np.tile(to_rgba(IDLE_EDGE), (n, 1))
    widths = np.full(n, 0.6)
    dashes: list[Any] = ["solid"] * n
    if picked is not None:
        member = np.zeros(n, dtype=bool)
        for d in show:
            if layout.sizes[d] == 1:
                continue
            ranks = layout.group_of(picked, d)
            edges[ranks] = to_rgba(HIGHLIGHT[d])
            widths[ranks] = HIGHLIGHT_WIDTH[d]
            member[ranks] = True
            for r in ranks:
                dashes[r] = HIGHLIGHT_DASH[d]
        member[picked] = True
        edges[picked] = to_rgba(HIGHLIGHT["picked"])
        widths[picked] = HIGHLIGHT_WIDTH["picked"]
        dashes[picked] = HIGHLIGHT_DASH["picked"]
        faces = faces.copy()
        faces[~member, 3] = 0.3
    return faces, edges, widths, hatches, dashes


def legend_html(show=("tp", "dp", "pp")) -> str:
    """The highlight legend as HTML (kept out of the canvas: text is slow to render)."""
    names = {"tp": "TP group", "dp": "DP group", "pp": "PP group", "cp": "CP group", "ep": "EP group"}
    items = "".join(swatch(HIGHLIGHT[d], names[d], "outline") for d in show)
    return (
        f'<div style="font-size:12px"><b>picked GPU</b> (thick black edge); its groups:{items}'
        f'<span style="margin-left:12px;color:{MUTED}">fills: the colour-by choice; GPUs outside the '
        f"picked GPU's groups are faded</span></div>"
    )


#: The fills of a static grid, said in its key (grid_key) by colour-by choice.
FILL_WORDS = {"stage": "pipeline stage (light: first)", "node": "node"}
#: The figure height (share) a static grid's key takes under the grids.
KEY_HEIGHT = 0.14


def grid_key(fig: Figure, layouts, colour_by: str, picked: int) -> None:
    """The key under a static grid: the picked GPU's thick black edge and each of its groups' outline (as
    grid_colours draws them, for the dimensions of more than one GPU in any of `layouts`), and what the fills show.
    The lesson's app says the same in its HTML legend (legend_html)."""
    from matplotlib.patches import Patch

    dims = [d for d in ("tp", "dp", "pp") if any(lay.sizes[d] > 1 for lay in layouts)]
    names = {"tp": "its TP group", "dp": "its DP group", "pp": "its PP group"}
    handles = [Patch(facecolor="none", edgecolor=HIGHLIGHT["picked"], linewidth=2.2, label=f"picked GPU {picked}")]
    handles += [
        Patch(facecolor="none", edgecolor=HIGHLIGHT[d], linewidth=1.4, linestyle=HIGHLIGHT_DASH[d], label=names[d])
        for d in dims
    ]
    fills = FILL_WORDS.get(colour_by, f"{colour_by.upper()} group")
    fig.legend(
        handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False, handlelength=1.2,
        title=f"fills: {fills}; faded: outside the picked GPU's groups", title_fontsize=8,
    )  # fmt: skip


def grid_figure(
    layout, colour_by: str = "dp", picked: int | None = None, title: str = "", ax=None, figsize=(7.2, 3.2)
) -> Figure:
    """A static picture of a layout's grid (for lessons), with its key when a GPU is picked; returns the figure."""
    fig = None
    if ax is None:
        fig = Figure(figsize=figsize)
        bottom = 0.02 + (KEY_HEIGHT if picked is not None else 0.0)
        ax = fig.add_axes((0.02, bottom, 0.96, (0.86 if title else 0.96) - bottom + 0.02))
        if picked is not None:
            grid_key(fig, [layout], colour_by, picked)
    grid = gpu_grid(ax)
    grid.rebuild(layout.world_size, layout.gpus_per_node)
    grid.update(*grid_colours(layout, colour_by, picked))
    if title:
        ax.set_title(title, fontsize=10)
    return fig if fig is not None else ax.figure


def grids_figure(layouts: dict, colour_by: str = "tp", picked: int | None = None) -> Figure:
    """Several layouts side by side (title -> RankLayout), e.g. an order and its reverse, with one key."""
    count = len(layouts)
    fig = Figure(figsize=(3.7 * count, 3.0 + (0.5 if picked is not None else 0.0)))
    width = 1.0 / count
    bottom = 0.02 + (KEY_HEIGHT if picked is not None else 0.0)
    for i, (title, lay) in enumerate(layouts.items()):
        ax = fig.add_axes((i * width + 0.01, bottom, width - 0.02, 0.86 - bottom + 0.02))
        grid_figure(lay, colour_by, picked, title, ax=ax)
    if picked is not None:
        grid_key(fig, list(layouts.values()), colour_by, picked)
    return fig
