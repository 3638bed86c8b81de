"""A slider over more than two decades steps on a log scale (review v16 row 17: lesson 8's bucket count, an IntSlider
from 1 to 2,000, moved linearly while the U-curve's axis is logarithmic: 1-10 took half a percent of the slider and
one arrow key moved the marker by 1/2,000 of the range). Every lesson app's numeric sliders (a linear slider's steps,
a log slider's exponent steps, a selection slider's numeric options) give each whole decade they span a fair share
of their positions: at least half of what an even log scale gives it."""

from __future__ import annotations

import math

import ipywidgets as widgets
import numpy as np
import pytest

from lesson_apps import lesson_apps as _apps
from lesson_apps import walk as _walk

#: a slider spanning more decades than this is checked (a linear slider over two decades still gives its first
#: decade ten percent of its width)
DECADES = 2


def slider_positions(w) -> list[float] | None:
    """The values a slider's positions stand for, in order; None for a control that is not a numeric slider."""
    if isinstance(w, widgets.FloatLogSlider):
        last = round((w.max - w.min) / w.step)
        return [w.base ** (w.min + k * w.step) for k in range(last + 1)]
    if isinstance(w, (widgets.IntSlider, widgets.FloatSlider)):
        return list(np.arange(w.min, w.max + w.step / 2, w.step))
    if isinstance(w, widgets.SelectionSlider):
        values = [o[1] if isinstance(o, tuple) else o for o in w.options]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            return [float(v) for v in values]
    return None


def scale_problem(positions: list[float]) -> str | None:
    """Why a slider over `positions` is not on a log scale, or None: a whole decade with fewer than half the
    positions an even log scale gives it. A slider reaching zero (backward time 0-5,000 ms) counts a linear
    quantity, which no log scale holds: not checked."""
    positive = [v for v in positions if v > 0]
    if len(positive) < len(positions) or len(positive) < 2 or positive[-1] / positive[0] <= 10**DECADES:
        return None
    span = math.log10(positive[-1] / positive[0])
    low = positive[0]
    while low * 10 <= positive[-1] * (1 + 1e-12):
        share = sum(low <= v < low * 10 for v in positive) / len(positive)
        if share < 0.5 / span:
            return f"{low:g}-{low * 10:g} has {share:.1%} of the positions, an even log scale gives it {1 / span:.0%}"
        low *= 10
    return None


def app_problems(app) -> list[str]:
    found = []
    for w in _walk(app):
        positions = slider_positions(w)
        problem = scale_problem(positions) if positions else None
        if problem:
            found.append(f"{w.description or type(w).__name__}: {problem}")
    return found


@pytest.mark.parametrize("app_class", _apps(), ids=lambda a: f"{a.__module__.rsplit('.', 1)[1]}.{a.__name__}")
def test_a_slider_over_many_decades_steps_on_a_log_scale(app_class):
    app = app_class()
    try:
        assert not app_problems(app), f"{app_class.__name__}: " + "; ".join(app_problems(app))
    finally:
        app.close()


def test_the_check_finds_a_linear_slider_over_decades_and_passes_log_ones():
    assert scale_problem(slider_positions(widgets.IntSlider(min=1, max=2000)))
    assert scale_problem(slider_positions(widgets.FloatSlider(min=0.01, max=10, step=0.01)))
    assert not scale_problem(slider_positions(widgets.IntSlider(min=1, max=64)))  # under two decades
    assert not scale_problem(slider_positions(widgets.FloatSlider(min=0, max=5000, step=10)))  # from zero: linear
    assert not scale_problem(slider_positions(widgets.FloatLogSlider(min=-7, max=-3, step=0.1)))
    from distlab.widgets.controls import GPU_COUNTS
    from distlab.widgets.production import BUCKET_COUNTS

    for counts in (GPU_COUNTS, BUCKET_COUNTS):
        assert not scale_problem(slider_positions(widgets.SelectionSlider(options=counts)))


def test_the_bucket_slider_steps_through_its_counts_and_starts_at_the_nearest():
    from distlab.widgets.production import BUCKET_COUNTS, MAX_BUCKETS, BucketApp

    assert BUCKET_COUNTS[0] == 1 and BUCKET_COUNTS[-1] == MAX_BUCKETS and list(BUCKET_COUNTS) == sorted(BUCKET_COUNTS)
    app = BucketApp(buckets=23)  # not offered: the nearest count on the log scale
    try:
        assert app.buckets.value == 25 and app.result[1].buckets == 25
    finally:
        app.close()
