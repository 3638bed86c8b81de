"""Lesson 6 app: the GPU assignment grid of 3D parallelism (D x T x P), computed by distlab.mesh.

Each cell is a GPU, cells are grouped by node, and fills show the groups of the chosen kind.
Pick a GPU (click its cell, or type its number) to outline all its groups. The cells are a
fixed pool (distlab.plots.parallelism_3d.GpuGrid) rebuilt only when the number of GPUs or the node
size changes; otherwise a control change only swaps colours and is redrawn by blitting.
"""

from __future__ import annotations

import itertools

import ipywidgets as widgets

from .. import mesh
from ..errors import ConfigurationError
from ..plots.parallelism_3d import grid_colours, gpu_grid, legend_html
from .common import BlitRenderer, LessonApp, figure_canvas

__all__ = ["MAX_GRID_GPUS", "ORDERS", "COLOUR_BY", "SHOW", "MeshApp", "APPS"]

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


def _order_label(order: str) -> str:
    if order == "tp-dp-pp":
        return "tp-dp-pp (Megatron default)"
    if order == "pp-dp-tp":
        return "pp-dp-tp (reversed)"
    return order


class MeshApp(LessonApp):
    """D, T, P, GPUs per node and the order -> the rank layout drawn as a grid of GPUs by node.

    `result` holds the current RankLayout (None on invalid input); `error` our message instead.
    `pick` selects a GPU (also by clicking its cell); its TP, DP and PP groups are outlined.
    """

    def __init__(self, dp=4, tp=4, pp=4, gpus_per_node=8, order="tp-dp-pp", colour_by="dp", picked=0):
        self._updating = False
        self.dp = widgets.IntSlider(value=dp, min=1, max=32, description="D (data)")
        self.tp = widgets.IntSlider(value=tp, min=1, max=16, description="T (tensor)")
        self.pp = widgets.IntSlider(value=pp, min=1, max=16, description="P (pipeline)")
        self.gpus_per_node = widgets.Dropdown(options=[2, 4, 8, 16], value=gpus_per_node, description="GPUs/node")
        self.order = widgets.Dropdown(options=[(_order_label(o), o) for o in ORDERS], value=order, description="order")
        self.colour_by = widgets.ToggleButtons(
            options=COLOUR_BY, value=colour_by, description="colour", style={"button_width": "96px"}
        )
        self.pick = widgets.BoundedIntText(
            value=picked,
            min=0,
            max=max(dp * tp * pp - 1, 0),
            description="pick GPU",
            layout=widgets.Layout(width="180px"),
        )
        self.status = widgets.HTML()
        self.fig, self.canvas = figure_canvas((6.6, 3.3), dict(left=0.01, right=0.99, bottom=0.01, top=0.99))
        self.ax = self.fig.add_subplot()
        self.grid = gpu_grid(self.ax)
        # the static part (node frames and labels, the limits) follows the grid's size: a size shown before is
        # restored, not drawn again
        self.renderer = BlitRenderer(
            self.canvas, self.grid.animated_artists, static_key=lambda: (self.grid.world, self.grid.gpus_per_node)
        )
        self.canvas.mpl_connect("button_press_event", self.on_click)
        self.result: mesh.RankLayout | None = None
        self.error: str | None = None
        for control in (self.dp, self.tp, self.pp, self.gpus_per_node, self.order, self.colour_by, self.pick):
            control.observe(self._on_change, names="value")
        controls = widgets.VBox(
            [
                widgets.HBox([self.dp, self.gpus_per_node]),
                widgets.HBox([self.tp, self.order]),
                widgets.HBox([self.pp, self.pick]),
                self.colour_by,
            ]
        )
        super().__init__([controls, widgets.HTML(legend_html(SHOW)), self.canvas, self.status])
        self.update()

    # -- events ------------------------------------------------------------------------
    def _on_change(self, change=None):
        if not self._updating:
            self.update()

    def on_click(self, event) -> None:
        """Canvas click: pick the GPU under the pointer (a matplotlib button_press_event)."""
        if self.result is None or event.inaxes is not self.ax:
            return
        rank = self.grid.cell_at(event.xdata, event.ydata)
        if rank is not None:
            self.pick.value = rank

    # -- model -------------------------------------------------------------------------
    def compute(self) -> mesh.RankLayout:
        """The RankLayout of the controls (distlab.mesh.layout)."""
        world = self.dp.value * self.tp.value * self.pp.value
        if world > MAX_GRID_GPUS:
            raise ConfigurationError(
                f"D x T x P = {self.dp.value} x {self.tp.value} x {self.pp.value} = {world} GPUs; the grid draws at "
                f"most {MAX_GRID_GPUS} (distlab.mesh.layout computes any size)"
            )
        return mesh.layout(
            dp=self.dp.value,
            tp=self.tp.value,
            pp=self.pp.value,
            order=self.order.value,
            gpus_per_node=self.gpus_per_node.value,
        )

    def render(self, lay: mesh.RankLayout) -> bool:
        """Recolour the cells in place (rebuilding them when the size changed): True when rebuilt."""
        self._updating = True
        try:
            self.pick.max = lay.world_size - 1  # clamps the value when the grid shrank
        finally:
            self._updating = False
        rebuilt = self.grid.rebuild(lay.world_size, lay.gpus_per_node)
        self.grid.update(*grid_colours(lay, self.colour_by.value, self.pick.value, SHOW))
        return rebuilt

    def fade(self) -> bool:
        self.grid.hide()
        return False

    def status_kind(self, lay: mesh.RankLayout) -> str:
        return "warn" if lay.warnings() else "ok"

    def describe(self, lay: mesh.RankLayout) -> str:
        """The text under the grid: the picked GPU's coordinates and groups, where each kind runs, warnings."""
        r = self.pick.value
        c = lay.coords(r)
        lines = [
            f"{lay.world_size} GPUs = D {lay.dp} x T {lay.tp} x P {lay.pp}, order {'-'.join(d for d in lay.order if d in SHOW)} "
            f"(leftmost varies fastest), {lay.nodes} node{'s' if lay.nodes > 1 else ''} of {lay.gpus_per_node} "
            "[mesh.layout]",
            f"GPU {r} on node {lay.node_of(r)}: tp rank {c['tp']}, dp rank {c['dp']}, pipeline stage {c['pp']}",
        ]
        for d in SHOW:
            group = lay.group_of(r, d)
            nodes = sorted({lay.node_of(g) for g in group})
            where = f"inside node {nodes[0]}" if len(nodes) == 1 else f"across nodes {_ranges(nodes)}"
            kind = "intra-node link" if len(nodes) == 1 else "inter-node link"
            lines.append(f"  {d.upper()} group {_short(group)}: {where} ({kind})")
        for d in SHOW:
            if lay.sizes[d] > 1:
                crossing = int(lay.crosses_nodes(d).sum())
                total = lay.world_size // lay.sizes[d]
                lines.append(f"{d.upper()}: {total} groups of {lay.sizes[d]}, {crossing} cross nodes")
        lines.extend("warning: " + w for w in lay.warnings())
        return "\n".join(lines)


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
