"""Step-time breakdown bars: compute, TP communication, bubble, p2p, exposed DP communication, optimizer.

Data in (StepEstimate.parts(): seconds per component), artists out; the widget updates them in place.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from matplotlib.figure import Figure

from .memory import nice_ceiling

#: StepEstimate.parts() keys, in stacking order, with their colours.
PARTS = ("compute", "TP communication", "pipeline bubble", "pipeline p2p", "DP communication (exposed)",
         "optimizer step")
COLOURS = {
    "compute": "#4c72b0",
    "TP communication": "#dd8452",
    "pipeline bubble": "#c9c9c9",
    "pipeline p2p": "#937860",
    "DP communication (exposed)": "#c44e52",
    "optimizer step": "#55a868",
}


@dataclass
class StepBars:
    """Horizontal stacked bars of the step-time components, updated in place by `update`."""

    ax: object
    rects: dict = field(default_factory=dict)  # part -> list of Rectangle, one per bar
    names: tuple = PARTS  # the parts, in stacking order

    @property
    def animated_artists(self) -> list:
        return [r for rects in self.rects.values() for r in rects]

    def update(self, parts: list[dict], labels: list[str] | None = None, faded: bool = False) -> bool:
        """parts: one {component: seconds} per bar (bar 0 at the top). Returns True when the axes changed
        (a full redraw is needed), False when only the bars moved."""
        ax = self.ax
        before = (ax.get_xlim(), [t.get_text() for t in ax.get_yticklabels()])
        right = 0.0
        for index, bar_parts in enumerate(parts):
            left = 0.0
            for name in self.names:
                width = float(bar_parts.get(name, 0.0))
                rect = self.rects[name][index]
                rect.set_x(left)
                rect.set_width(width)
                rect.set_alpha(0.25 if faded else 1.0)
                left += width
            right = max(right, left)
        if labels is not None:
            ax.set_yticks(range(len(labels)), labels)
        if not faded and right > 0:
            limit = ax.get_xlim()[1]
            if not 0.4 * limit <= right * 1.05 <= limit:  # keep the axis while the bars fit it well: blits only
                ax.set_xlim(0, nice_ceiling(right * 1.05))
        return before != (ax.get_xlim(), [t.get_text() for t in ax.get_yticklabels()])


def step_bars(ax, n_bars: int, legend: bool = True, parts: tuple = PARTS, colours: dict = COLOURS) -> StepBars:
    """n_bars empty horizontal stacked bars (bar 0 on top) of `parts`; fill them with update()."""
    bars = StepBars(ax, names=tuple(parts))
    positions = list(range(n_bars))
    for name in parts:
        container = ax.barh(positions, [0.0] * n_bars, height=0.55, color=colours[name], label=name)
        bars.rects[name] = list(container.patches)
    ax.set_ylim(n_bars - 0.4, -0.6)  # bar 0 on top
    ax.set_xlabel("seconds per training step")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(nbins=5))
    ax.spines[["top", "right"]].set_visible(False)
    if legend:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=3, fontsize=8, frameon=False)
    return bars


def legend_html(parts: tuple = PARTS, colours: dict = COLOURS) -> str:
    """The colour legend as HTML (widgets keep text out of the per-frame render)."""
    items = "".join(
        f'<span style="display:inline-block;width:12px;height:12px;background:{colours[p]};'
        f'margin:0 4px 0 12px;vertical-align:middle"></span>{p}' for p in parts)
    return f'<div style="font-size:12px"><b>step time</b>, s:{items}</div>'


def step_time_figure(estimates: list, labels: list[str], title: str = "") -> Figure:
    """A static figure: one horizontal stacked bar of the step-time components per StepEstimate."""
    fig = Figure(figsize=(7.2, 1.2 + 0.5 * len(estimates)), layout="constrained")
    ax = fig.add_subplot()
    bars = step_bars(ax, len(estimates))
    bars.update([e.parts() for e in estimates], labels)
    if title:
        ax.set_title(title, fontsize=11)
    return fig


def plan_scatter(plan, title: str = "") -> Figure:
    """Every configuration of a planner.Plan: step time against memory per GPU, feasible ones coloured,
    the fastest feasible one marked."""

    fig = Figure(figsize=(7.2, 3.6), layout="constrained")
    ax = fig.add_subplot()
    t = plan.results["step_time_s"]
    mem = plan.results["memory_bytes"] / 1e9
    ok = plan.feasible
    ax.scatter(mem[~ok], t[~ok], s=4, color="#c9c9c9", label="infeasible", rasterized=True)
    ax.scatter(mem[ok], t[ok], s=6, color="#4c72b0", label="feasible", rasterized=True)
    if ok.any():
        best = plan.row(0)
        ax.scatter([best["memory_per_gpu_bytes"] / 1e9], [best["step_time_s"]], s=80, marker="*", color="#c44e52",
                   label="fastest feasible", zorder=3)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("memory per GPU (GB = 10^9 bytes)")
    ax.set_ylabel("step time (s)")
    ax.legend(fontsize=8, frameon=False)
    if title:
        ax.set_title(title, fontsize=11)
    return fig
