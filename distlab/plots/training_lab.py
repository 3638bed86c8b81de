"""Step-time breakdown bars: compute, overlap slowdown, TP communication, bubble, p2p, exposed DP communication, optimizer.

Data in (StepEstimate.parts(): seconds per component), artists out; the widget updates them in place.
The bars themselves are in plots/_bars.py, shared with lesson 8.
"""

from __future__ import annotations

from matplotlib.collections import PathCollection
from matplotlib.figure import Figure

from ._bars import (  # lesson 7's names for the shared step-time bars
    STEP_COLOURS as COLOURS,
    STEP_PARTS as PARTS,
    StepBars,
    step_bars,
    step_legend_html as legend_html,
)
from ..units import format_bytes, format_seconds
from ._style import BLUE, RED, decade_labels

__all__ = ["COLOURS", "PARTS", "StepBars", "legend_html", "plan_scatter", "step_bars", "step_time_figure"]

#: The area (points^2) of a scatter legend key: 5 pt across, 7 px at 100 dpi (the 4 pt^2 points drew a 2.8 px key)
LEGEND_POINT_SIZE = 25


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
    ax.scatter(mem[ok], t[ok], s=6, color=BLUE, label="feasible", rasterized=True)
    if ok.any():
        best = plan.row(0)
        ax.scatter(
            [best["memory_per_gpu_bytes"] / 1e9],
            [best["step_time_s"]],
            s=80,
            marker="*",
            color=RED,
            label="fastest feasible",
            zorder=3,
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("memory per GPU")
    ax.set_ylabel("step time")
    decade_labels(ax, "x", lambda gb: format_bytes(gb * 1e9))  # '100 GB', not 10^2 (review v18)
    decade_labels(ax, "y", format_seconds)
    legend = ax.legend(fontsize=8, frameon=False)
    for handle in legend.legend_handles:  # thousands of small points; their keys at a size a student sees (7 px)
        if isinstance(handle, PathCollection) and max(handle.get_sizes(), default=0) < LEGEND_POINT_SIZE:
            handle.set_sizes([LEGEND_POINT_SIZE])
    if title:
        ax.set_title(title, fontsize=11)
    return fig
