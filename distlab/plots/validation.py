"""Predicted against measured step time: a log-log scatter with the y = x line and +-5 % / +-15 % bands.

Data in (validation.compare() rows, or their to_dict()), a Figure out; nothing here computes physics.
Lesson 7 §8 ("How good is this model?").
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from ..units import format_seconds
from ._style import decade_labels

#: Point colour per role.
ROLE_COLOURS = {"calibration": "#4c72b0", "validation": "#dd8452", "reference": "#8c8c8c"}
#: The error bands drawn around y = x (fractions): issue 14's goals are 5 % mean and 15 % max.
BANDS = (0.05, 0.15)


def _field(row, name):
    return row[name] if isinstance(row, dict) else getattr(row, name)


def predicted_vs_measured_figure(rows, title: str = "Step time: predicted vs published measurement") -> Figure:
    """Log-log scatter of predicted against measured step time (s), one point per row that has both, coloured by
    role; the y = x line and shaded +-5 % and +-15 % bands. Rows without a prediction are counted in the legend.

    Lesson 7 §8.
    """
    fig = Figure(figsize=(6.4, 6.0))
    ax = fig.add_subplot()
    values = [(_field(r, "measured_s"), _field(r, "predicted_s"), _field(r, "role"), _field(r, "status")) for r in rows]
    pairs = [(m, p) for m, p, _, _ in values if m is not None and p is not None]
    if pairs:
        low = min(min(m, p) for m, p in pairs) / 1.5
        high = max(max(m, p) for m, p in pairs) * 1.5
    else:
        low, high = 0.1, 100.0
    x = np.geomspace(low, high, 50)
    # the inner band's key at 0.45: at 0.3 the two keys were 9 CIELAB units apart, alike in the legend
    for band, alpha, goal in zip(sorted(BANDS, reverse=True), (0.25, 0.55), ("max", "mean")):
        key = f"±{100 * band:g}% (the goal's {goal})"
        ax.fill_between(x, x * (1 - band), x * (1 + band), color="#55a868", alpha=alpha, linewidth=0, label=key)
    ax.plot(x, x, color="black", linewidth=1, label="y = x")
    for role, colour in ROLE_COLOURS.items():
        priced = [(m, p, s) for m, p, r, s in values if r == role and m is not None and p is not None]
        if not priced:
            continue
        fit = [(m, p) for m, p, s in priced if s == "predicted"]
        over = [(m, p) for m, p, s in priced if s != "predicted"]
        unpriced = sum(1 for m, p, r, s in values if r == role and (m is None or p is None))
        label = f"{role} ({len(fit)})" + (f", {unpriced} not priced" if unpriced else "")
        if fit:
            xs, ys = zip(*fit)
            ax.scatter(xs, ys, color=colour, s=28, label=label, zorder=3)
        if over:
            xs, ys = zip(*over)
            ax.scatter(
                xs,
                ys,
                facecolors="none",
                edgecolors=colour,
                s=28,
                zorder=3,
                label=f"{role}: does not fit ({len(over)})",
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(low, high)
    ax.set_ylim(low, high)
    ax.set_aspect("equal")
    ax.set_xlabel("measured step time")
    ax.set_ylabel("predicted step time")
    decade_labels(ax, "x", format_seconds)  # '10 s', not 10^1 (review v18)
    decade_labels(ax, "y", format_seconds)
    ax.set_title(title)
    ax.legend(loc="upper left", fontsize="small")
    ax.grid(True, which="both", alpha=0.2)
    return fig


__all__ = ["ROLE_COLOURS", "BANDS", "predicted_vs_measured_figure"]
