"""Lesson 6 app: the GPU assignment grid of 3D parallelism (D x T x P), computed by distlab.mesh.

Each cell is a GPU, cells are grouped by node, and fills show the groups of the chosen kind. The grid is drawn
in the browser (distlab.widgets.browser.GridPicture): its slider, or a click on a cell, picks a GPU, whose TP, DP
and PP groups are outlined. The layout and the text of every GPU are sent at once, so stepping through the GPUs
needs no kernel round trip; D, T, P, the node size and the order change the layout (the picked GPU's text answers
first, the others follow in the kernel's later turns: common.fill_in_turns); the colour choice only resends the
fills. The pictures of every state one change of D, T, P, the node size, the order or the colour away are computed
in the kernel's idle turns and held by the browser (distlab.widgets.prefetch, issue 32), so such a change redraws
there at once and the kernel confirms it (the layout's warnings, under the grid, come with the kernel's answer).
"""

from __future__ import annotations

import itertools

import ipywidgets as widgets

from .. import mesh
from ..errors import ConfigurationError, DistlabError
from ..plots.parallelism_3d import grid_geometry
from .browser import GridPicture
from .common import LessonApp, attempt, event_loop_running, fill_order, fill_positions
from .prefetch import Prefetcher, PrefetchingApp

__all__ = [
    "MAX_GRID_GPUS",
    "ORDERS",
    "COLOUR_BY",
    "SHOW",
    "PENDING",
    "MESH_CONTROLS",
    "mesh_layout",
    "mesh_frames",
    "mesh_payload_steps",
    "MeshApp",
    "APPS",
]

#: Most GPUs the grid draws (cells get smaller than a few pixels beyond).
MAX_GRID_GPUS = 512
ORDERS = ["-".join(p) for p in itertools.permutations(("tp", "dp", "pp"))]
COLOUR_BY = [
    ("TP groups", "tp"),
    ("DP groups", "dp"),
    ("PP groups", "pp"),
    ("pipeline stage", "stage"),
    ("node", "node"),
]
SHOW = ("tp", "dp", "pp")
#: The text under the grid at a GPU still being described (in a kernel, for a moment after a change).
PENDING = "describing this GPU ..."


#: MeshApp's controls whose labels key the browser's cache (distlab.widgets.prefetch, issue 32), in the picture's
#: order; a state is these values and "pick_max" (the grid's last GPU now: an invalid layout keeps the slider's range).
MESH_CONTROLS = ("dp", "tp", "pp", "gpus_per_node", "order", "colour_by")
#: GPUs described per step of mesh_payload_steps (about a millisecond).
RANKS_PER_STEP = 32


def mesh_layout(s: dict) -> mesh.RankLayout:
    """The RankLayout of state `s` (distlab.mesh.layout); our error beyond MAX_GRID_GPUS."""
    world = s["dp"] * s["tp"] * s["pp"]
    if world > MAX_GRID_GPUS:
        raise ConfigurationError(
            f"D x T x P = {s['dp']} x {s['tp']} x {s['pp']} = {world} GPUs; the grid draws at "
            f"most {MAX_GRID_GPUS} (distlab.mesh.layout computes any size)"
        )
    return mesh.layout(dp=s["dp"], tp=s["tp"], pp=s["pp"], order=s["order"], gpus_per_node=s["gpus_per_node"])


def mesh_pick_max(s: dict, kept: int) -> int:
    """The grid's last GPU in state `s` (the pick slider's max): its layout's, or at an invalid layout the range `kept`
    (the slider's as it was). MeshApp.state and mesh_neighbour both use it."""
    lay = attempt(mesh_layout, s)
    return lay.world_size - 1 if isinstance(lay, mesh.RankLayout) else kept


def mesh_neighbour(s: dict, name: str, value) -> dict:
    """The state MeshApp reaches when the student sets `name` to `value` in state `s`: the grid's last GPU is the new
    layout's, or at an invalid one s's (the slider keeps its range). Two changes one after the other can keep
    another range than one change straight there (an invalid layout after a valid one: prefetch.neighbour_jobs leaves
    that state to the kernel)."""
    after = {**s, name: value}
    after["pick_max"] = mesh_pick_max(after, s["pick_max"])
    return after


#: The shape (width / height) the grid's nodes are stacked to for an output narrower than the picture: grid.js lays
#: the picture out again with these cells (fewer columns of nodes, taller) instead of shrinking its text.
NARROW_ASPECT = 0.9


def mesh_frames(lay: mesh.RankLayout, by: str) -> dict:
    """The grid's drawing data (distlab.widgets.browser.GridPicture) of `lay`, cells filled by `by`; "narrow": the
    same cells stacked to NARROW_ASPECT, for an output narrower than the picture (grid.js's layout)."""
    x, y, _, _, width, height = grid_geometry(lay.world_size, lay.gpus_per_node)
    nx, ny, _, _, nwidth, nheight = grid_geometry(lay.world_size, lay.gpus_per_node, NARROW_ASPECT)
    narrow = {"x": nx.tolist(), "y": ny.tolist(), "width": float(nwidth), "height": float(nheight)}
    if by == "stage":
        fill, kind, count = lay.coordinate_array("pp"), "ramp", lay.pp
    elif by == "node":
        fill, kind, count = lay.node_ids(), "groups", lay.nodes
    else:
        fill, kind, count = lay.group_index(by), "groups", lay.world_size // lay.sizes[by]
    return {
        "x": x.tolist(),
        "y": y.tolist(),
        "width": float(width),
        "height": float(height),
        "narrow": narrow,
        "gpus_per_node": lay.gpus_per_node,
        "fill": [int(v) for v in fill],
        "fill_kind": kind,
        "fill_count": int(count),
        "colour_by": dict((v, k) for k, v in COLOUR_BY)[by],
        "groups": {d: [int(v) for v in lay.group_index(d)] for d in SHOW},
        "sizes": {d: int(lay.sizes[d]) for d in SHOW},
        # the layout's warnings, in red under the grid's text (grid.js): with the grid, so a change the browser
        # draws from its cache shows its own warnings at once (issue 31: they waited for the kernel)
        # each on one line as before: grid.js fits the note to the picture (mesh.warnings breaks it for a notebook)
        "note": "\n".join("warning: " + " ".join(w.split()) for w in lay.warnings()),
    }


def mesh_payload_steps(s: dict):
    """A generator computing what the grid shows in state `s`, RANKS_PER_STEP GPUs' texts per step
    (distlab.widgets.prefetch runs it in the kernel's idle turns): {"summaries", "errors", "frames", "min", "max"} and
    the canvas "height" (an invalid layout: our message at every position of the slider as it is, the height kept)."""
    lay = attempt(mesh_layout, s)
    if isinstance(lay, DistlabError):
        count = s["pick_max"] + 1
        return {"summaries": [""] * count, "errors": [str(lay)] * count, "frames": {}, "min": 0, "max": count - 1}
    shared = MeshApp._shared_lines(lay)
    texts = []
    for r in range(lay.world_size):
        texts.append(MeshApp._describe(lay, r, shared))
        if len(texts) % RANKS_PER_STEP == 0:
            yield r
    frames = mesh_frames(lay, s["colour_by"])
    return {
        "summaries": texts,
        "errors": [""] * lay.world_size,
        "frames": frames,
        "min": 0,
        "max": lay.world_size - 1,
        "height": _fitted_height(frames),
    }


def _order_label(order: str) -> str:
    if order == "tp-dp-pp":
        return "tp-dp-pp (Megatron default)"
    if order == "pp-dp-tp":
        return "pp-dp-tp (reversed)"
    return order


class MeshApp(PrefetchingApp, LessonApp):
    """D, T, P, GPUs per node and the order -> the rank layout drawn as a grid of GPUs by node.

    `result` holds the current RankLayout (None on invalid input); `error` our message instead.
    `pick` (the picture's own slider, in the browser) selects a GPU; its TP, DP and PP groups are outlined.
    """

    PREFETCH_CONTROLS = MESH_CONTROLS
    prefetch_neighbour = staticmethod(mesh_neighbour)

    summary_in_picture = True

    def __init__(self, dp=4, tp=4, pp=4, gpus_per_node=8, order="tp-dp-pp", colour_by="dp", picked=0):
        self.dp = widgets.IntSlider(value=dp, min=1, max=32, description="D (data)")
        self.tp = widgets.IntSlider(value=tp, min=1, max=16, description="T (tensor)")
        self.pp = widgets.IntSlider(value=pp, min=1, max=16, description="P (pipeline)")
        self.gpus_per_node = widgets.Dropdown(options=[2, 4, 8, 16], value=gpus_per_node, description="GPUs/node")
        self.order = widgets.Dropdown(options=[(_order_label(o), o) for o in ORDERS], value=order, description="order")
        self.colour_by = widgets.ToggleButtons(
            options=COLOUR_BY, value=colour_by, description="colour", style={"button_width": "96px"}
        )
        self.picture = GridPicture(description="pick GPU", width=GRID_WIDTH, height=GRID_MAX_HEIGHT)
        self.picture.show(0, max(dp * tp * pp - 1, 0), [""] * max(dp * tp * pp, 1), value=picked)
        self.pick = self.picture
        self.status = widgets.HTML()
        self.result: mesh.RankLayout | None = None
        self.error: str | None = None
        self._layout: mesh.RankLayout | DistlabError | None = None
        self._texts: dict = {}  # rank -> the text under the grid, for the current layout
        for control in (self.dp, self.tp, self.pp, self.gpus_per_node, self.order):
            control.observe(self._on_change, names="value")
        self.colour_by.observe(self._on_colour, names="value")
        # the browser's cache of the states one change away (issue 32): grid.js watches these controls
        self.picture.controls = [getattr(self, name) for name in MESH_CONTROLS]
        self.prefetcher = Prefetcher(self.picture, mesh_payload_steps)
        controls = widgets.VBox(
            [
                widgets.HBox([self.dp, self.gpus_per_node]),
                widgets.HBox([self.tp, self.order]),
                self.pp,
                self.colour_by,
            ]
        )
        super().__init__([controls, self.picture, self.status])
        self._refresh()
        self.picture.observe(self._on_pick, names="value")

    _syncing = False
    #: The background filling of the other GPUs' texts in a kernel (an asyncio.Future; None when done at once).
    filling = None

    def state(self) -> dict:
        """The controls' values and the slider's last GPU: what the grid shows depends on these (and the pick)."""
        values = {name: getattr(self, name).value for name in MESH_CONTROLS}
        return {**values, "pick_max": mesh_pick_max(values, self.pick.max)}

    # -- events ------------------------------------------------------------------------
    def _on_change(self, change=None):
        self.prefetcher.forget(change)
        self._moved = change.get("owner") if change is not None else None
        self._refresh()

    def _on_colour(self, change=None):
        self.prefetcher.forget(change)
        self._moved = change.get("owner") if change is not None else None
        if isinstance(self._layout, mesh.RankLayout):
            self._send()
        if self.filling is None or self.filling.done():  # else: the fill's end prefetches around the new colour
            self._prefetch(self._generation)

    def _on_pick(self, change=None):
        if not self._syncing:
            self.update()

    def _refresh(self) -> None:
        """The layout of the controls and the text of every GPU, sent at once: the picked GPU's text first (the
        others PENDING), the others in later turns of the kernel's event loop (at once outside one). Then, in a
        kernel, the states one control change away are prefetched into the browser (_prefetch)."""
        self._generation += 1
        generation = self._generation
        self.prefetcher.stop()
        lay = self._layout = attempt(self._compute_layout)
        self._texts = {}
        known = self.prefetcher.lookup(self.state())
        if known is not None:  # computed already (prefetched, or shown before): every GPU's text at once
            self.filling = None
            if isinstance(lay, mesh.RankLayout):  # kept, as a fill keeps them: a new colour resends these texts
                self._texts = dict(enumerate(known["summaries"]))
            self._show(known)
            self._prefetch(generation)
            return
        if isinstance(lay, DistlabError):
            self._send()
            self.filling = None
            self._prefetch(generation)
            return
        current = min(self.pick.value, lay.world_size - 1)
        self._texts[current] = self._describe(lay, current)
        if event_loop_running():
            self._send()
        pending = fill_order([r for r in range(lay.world_size) if r != current], current)
        shared = self._shared_lines(lay)

        def describe(r: int) -> None:
            self._texts[r] = self._describe(lay, r, shared)

        self.filling = fill_positions(pending, describe, lambda: generation == self._generation, self._send)
        if self.filling is not None:
            self.filling.add_done_callback(lambda _: self._prefetch(generation))
        else:
            self._prefetch(generation)

    def _send(self) -> None:
        """The grid and the text of every GPU described so far to the picture (PENDING where not yet); once every
        GPU is described, the kernel remembers them (a change back here is shown complete at once)."""
        lay = self._layout
        if isinstance(lay, DistlabError):
            count = self.pick.max + 1
            self._show({"summaries": [""] * count, "errors": [str(lay)] * count, "frames": {}, "max": count - 1})
        elif lay is not None:
            texts = [self._texts.get(r, PENDING) for r in range(lay.world_size)]
            frames = self._frames(lay)
            shown = {"summaries": texts, "frames": frames, "max": lay.world_size - 1, "height": _fitted_height(frames)}
            if len(self._texts) == lay.world_size:
                self.prefetcher.remember(self.state(), {**shown, "errors": [""] * lay.world_size, "min": 0})
            self._show(shown)

    def _show(self, shown: dict) -> None:
        """The picture's positions 0..shown["max"] with these texts (and messages, frames, height)."""
        self._syncing = True
        try:
            extra = {"height": shown["height"]} if "height" in shown else {}
            self.picture.show(0, shown["max"], shown["summaries"], shown.get("errors"), frames=shown["frames"], **extra)
        finally:
            self._syncing = False
        self.update()

    def _frames(self, lay: mesh.RankLayout) -> dict:
        return mesh_frames(lay, self.colour_by.value)

    # -- model -------------------------------------------------------------------------
    def _compute_layout(self) -> mesh.RankLayout:
        return mesh_layout(self.state())

    def compute(self) -> mesh.RankLayout:
        """The RankLayout of the controls (distlab.mesh.layout, computed by _refresh); raises our error."""
        if self._layout is None:
            self._layout = attempt(self._compute_layout)
        if isinstance(self._layout, DistlabError):
            raise self._layout
        return self._layout

    def picture_note(self, lay: mesh.RankLayout) -> str:
        """Nothing in the status panel: the grid draws the layout's warnings in red under its text (mesh_frames'
        "note"), so a change drawn from the browser's cache carries them."""
        return ""

    def shown_texts(self) -> list[str]:
        """LessonApp's, and the warnings the grid shows under its text (none at a position with our message)."""
        note = "" if self.error is not None else self.picture.frames.get("note", "")
        return super().shown_texts() + ([note] if note else [])

    def status_kind(self, lay: mesh.RankLayout) -> str:
        return "warn" if lay.warnings() else "ok"

    def describe(self, lay: mesh.RankLayout) -> str:
        """The grid's text: the picked GPU's coordinates and groups, where each kind runs (warnings: picture_note)."""
        r = self.pick.value
        text = self._texts.get(r)
        return text if text is not None and lay is self._layout else self._describe(lay, r)

    @staticmethod
    def _shared_lines(lay: mesh.RankLayout) -> tuple[str, list]:
        head = (
            f"{lay.world_size} GPUs = D {lay.dp} x T {lay.tp} x P {lay.pp}, order "
            f"{'-'.join(d for d in lay.order if d in SHOW)} (leftmost varies fastest), {lay.nodes} "
            f"node{'s' if lay.nodes > 1 else ''} of {lay.gpus_per_node} [mesh.layout]"
        )
        tail = []
        for d in SHOW:
            if lay.sizes[d] > 1:
                crossing = int(lay.crosses_nodes(d).sum())
                total = lay.world_size // lay.sizes[d]
                tail.append(f"{d.upper()}: {total} groups of {lay.sizes[d]}, {crossing} cross nodes")
        return head, tail  # the warnings are the picture's note, in red under it (picture_note), once

    @classmethod
    def _describe(cls, lay: mesh.RankLayout, r: int, shared=None) -> str:
        head, tail = cls._shared_lines(lay) if shared is None else shared
        c = lay.coords(r)
        lines = [
            head,
            f"GPU {r} on node {lay.node_of(r)}: tp rank {c['tp']}, dp rank {c['dp']}, pipeline stage {c['pp']}",
        ]
        for d in SHOW:
            group = lay.group_of(r, d)
            nodes = sorted({lay.node_of(g) for g in group})
            where = f"inside node {nodes[0]}" if len(nodes) == 1 else f"across nodes {_ranges(nodes)}"
            kind = "intra-node link" if len(nodes) == 1 else "inter-node link"
            lines.append(f"  {d.upper()} group {_short(group)}: {where} ({kind})")
        return "\n".join(lines + tail)


#: The grid's canvas: its width (px), the most height it takes, the room for node labels (cells) and the legend (px).
GRID_WIDTH, GRID_MAX_HEIGHT, LABEL_ROOM, LEGEND_PX = 660, 330, 3.2, 30


def _fitted_height(frames: dict) -> int:
    """The canvas height that fits the grid at the scale its width allows (grid.js scales cells to the smaller of
    the two), so a few nodes leave no empty band under them."""
    scale = (GRID_WIDTH - 8) / (frames["width"] + LABEL_ROOM)
    return int(min(GRID_MAX_HEIGHT, max(120, round(scale * frames["height"] + LEGEND_PX + 8))))


def _short(group: list, limit: int = 12) -> str:
    if len(group) <= limit:
        return "[" + ", ".join(map(str, group)) + "]"
    return "[" + ", ".join(map(str, group[: limit - 2])) + f", ..., {group[-1]}] ({len(group)} GPUs)"


def _ranges(values: list) -> str:
    if len(values) <= 6:
        return ", ".join(map(str, values))
    return f"{values[0]}, {values[1]}, ..., {values[-1]} ({len(values)} nodes)"


#: The lesson apps of this module (constructible without arguments); the widget fuzz tests use it.
APPS = [MeshApp]
