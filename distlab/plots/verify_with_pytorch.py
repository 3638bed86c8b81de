"""Lesson 9 pictures: measured all-reduce times against the alpha-beta ring model.

Pure drawing: the times come from distlab.verify (measurements) and distlab.collectives
(the model's predictions), computed by the caller.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from ..units import format_bytes
from ._style import BLUE, BROWN, GREEN, ORANGE, PURPLE, RED

__all__ = ["all_reduce_figure"]

_COLOURS = [BLUE, ORANGE, GREEN, PURPLE, RED, BROWN]


def all_reduce_figure(
    sizes_bytes,
    measured: dict,
    predicted: dict,
    shared_cpu: dict | None = None,
    typical: dict | None = None,
    title: str = "",
) -> Figure:
    """Log-log time against message size: one colour per group size N.

    ``measured``/``predicted``/``shared_cpu``/``typical`` map N to arrays of seconds over
    ``sizes_bytes``: points (fastest repetition), solid ring-model lines, dashed ring-model
    lines with the CPU shared, and faint points (median repetition).
    """
    fig = Figure(figsize=(7.2, 3.8), layout="constrained")
    ax = fig.add_subplot()
    m = np.asarray(sizes_bytes, dtype=float)
    for i, n in enumerate(measured):
        colour = _COLOURS[i % len(_COLOURS)]
        if typical and n in typical:
            ax.plot(m, 1e3 * np.asarray(typical[n]), "o", color=colour, alpha=0.3, markersize=4)
        ax.plot(m, 1e3 * np.asarray(measured[n]), "o", color=colour, markersize=5, label=f"N = {n}: measured")
        if n in predicted:
            ax.plot(m, 1e3 * np.asarray(predicted[n]), "-", color=colour, linewidth=1.4, label=f"N = {n}: ring model")
        if shared_cpu and n in shared_cpu:
            ax.plot(
                m,
                1e3 * np.asarray(shared_cpu[n]),
                "--",
                color=colour,
                linewidth=1.0,
                label=f"N = {n}: ring model, CPU shared",
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    # decimal sizes, as the lesson's table and every other byte the kit prints (distlab.units.format_bytes: 1 kB =
    # 1000 B): the axis said '1 KiB' where the table beside it said '1.02 kB' for the same message
    ticks = [10.0**k for k in range(int(np.floor(np.log10(m.min()))), int(np.ceil(np.log10(m.max()))) + 1)]
    ax.set_xticks(ticks, [format_bytes(t) for t in ticks], fontsize=8)
    ax.set_xlabel("message size M (float32 buffer on each process)", fontsize=9)
    ax.set_ylabel("all-reduce time (ms)", fontsize=9)
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(fontsize=7, frameon=False, ncols=2)
    if title:
        ax.set_title(title, fontsize=10)
    return fig
