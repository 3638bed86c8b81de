"""Lesson 1 pictures: stacked memory bars (weights, gradients, optimizer, activations) against a GPU's
capacity line. The bars themselves are in plots/_bars.py, shared with lessons 7 and 8."""

from __future__ import annotations

from matplotlib.figure import Figure

from ._bars import (  # lesson 1's names for the shared memory bars
    MEMORY_COLOURS as COLOURS,
    MEMORY_COMPONENTS as COMPONENTS,
    MEMORY_LABELS as LABELS,
    MemoryBars,
    memory_bars,
    memory_legend_html as legend_html,
)
from ._style import CAPACITY_COLOUR

__all__ = [
    "CAPACITY_COLOUR",
    "COLOURS",
    "COMPONENTS",
    "LABELS",
    "MemoryBars",
    "legend_html",
    "memory_bars",
    "memory_wall_figure",
]


def __getattr__(name):
    if name == "nice_ceiling":  # moved to plots/_style.py, shared by every plot module
        import warnings

        from ._style import nice_ceiling

        warnings.warn(
            "distlab.plots.memory_wall.nice_ceiling moved to distlab.plots._style.nice_ceiling",
            DeprecationWarning,
            stacklevel=2,
        )
        return nice_ceiling
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def memory_wall_figure(
    breakdowns: list, labels: list[str], capacity: float | None = None, capacity_label: str = "", title: str = ""
) -> Figure:
    """A static figure: one stacked bar per MemoryBreakdown, and the GPU's capacity line."""
    fig = Figure(figsize=(7.2, 3.8), layout="constrained")
    ax = fig.add_subplot()
    bars = memory_bars(ax, len(breakdowns))
    bars.update([bd.parts() for bd in breakdowns], labels, capacity, capacity_label)
    if title:
        ax.set_title(title, fontsize=11)
    return fig
