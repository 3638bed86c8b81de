"""Drawn ticks (distlab/plots/_ticks.py): ticks a widget draws as one animated artist over fixed axes limits, so a
new range is a blit (issue 19). Checked against matplotlib's own ticks, the independent implementation: the same
labels (ScalarFormatter) and the labels' ink where matplotlib's axis puts it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import ScalarFormatter

from distlab.plots._ticks import drawn_ticks, nice_ticks


@pytest.mark.parametrize("top", [1.0, 3.0, 8.0, 15.0, 150.0, 1500.0, 40000.0, 0.003])
def test_tick_labels_are_what_matplotlibs_formatter_writes(top):
    values, labels = nice_ticks(top)
    fig = Figure()
    ax = fig.add_subplot()
    formatter = ScalarFormatter(useOffset=False)
    ax.xaxis.set_major_formatter(formatter)
    ax.set_xlim(0.0, top)
    ax.set_xticks(values)
    assert labels == formatter.format_ticks(values)


def test_nice_ticks_by_hand():
    # 0 to 1,500 ms in at most 6 bins of 1, 2, 2.5 or 5 x 10^k: 1,500 / 6 = 250 -> steps of 250
    assert nice_ticks(1500.0) == (
        [0.0, 250.0, 500.0, 750.0, 1000.0, 1250.0, 1500.0],
        ["0", "250", "500", "750", "1000", "1250", "1500"],
    )
    # 0 to 15: 15 / 6 = 2.5 -> steps of 2.5, one decimal
    assert nice_ticks(15.0)[1] == ["0.0", "2.5", "5.0", "7.5", "10.0", "12.5", "15.0"]


@settings(max_examples=60, deadline=None)
@given(st.floats(min_value=1e-6, max_value=1e9, allow_nan=False, allow_infinity=False))
def test_nice_ticks_lie_on_the_axis_and_read_back(top):
    values, labels = nice_ticks(top)
    assert values[0] == 0.0 and 2 <= len(values) <= 8
    assert all(0.0 <= v <= top * (1 + 1e-9) for v in values)
    step = values[1] - values[0]
    mantissa = step / 10 ** math.floor(math.log10(step))
    assert any(math.isclose(mantissa, m, rel_tol=1e-6) for m in (1.0, 2.0, 2.5, 5.0, 10.0))
    assert np.allclose(np.diff(values), step, rtol=1e-6)
    assert len(set(labels)) == len(labels)  # no two ticks read alike
    assert all(abs(float(label) - v) <= step / 2 for label, v in zip(labels, values))


def _label_boxes(drawn: bool, axis: str) -> list:
    """The ink box (first and last dark row and column) of each tick's mark and label: matplotlib's own ticks, or
    drawn ticks at the same values."""
    fig = Figure(figsize=(4, 2), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0.2, 0.3, 0.7, 0.6))
    top = 1500 if axis == "x" else 16
    ax.set_xlim(0, 1500)
    ax.set_ylim(0, 16)
    values = [0, 250, 500, 750, 1000, 1250, 1500] if axis == "x" else [0, 4, 8, 12, 16]
    if drawn:
        drawn_ticks(ax, axis, labelsize=None).set_ticks([v / top for v in values], [str(v) for v in values])
    else:
        (ax.set_xticks if axis == "x" else ax.set_yticks)(values)
    ax.spines[:].set_visible(False)
    fig.canvas.draw()
    dark = np.asarray(fig.canvas.buffer_rgba())[..., :3].min(axis=2) < 128
    height = dark.shape[0]
    box = ax.bbox
    boxes = []
    for v in values:
        if axis == "x":  # under the axes, around the tick's column, half the spacing either side
            middle, half = box.x0 + v / top * box.width, box.width / len(values) / 2
            window = dark[height - int(box.y0) :, int(middle - half) : int(middle + half)]
            offset = (height - int(box.y0), int(middle - half))
        else:  # left of the axes, around the tick's row
            middle, half = height - (box.y0 + v / top * box.height), box.height / len(values) / 2
            window = dark[int(middle - half) : int(middle + half), : int(box.x0)]
            offset = (int(middle - half), 0)
        rows, cols = np.flatnonzero(window.any(axis=1)), np.flatnonzero(window.any(axis=0))
        boxes.append((rows[0] + offset[0], rows[-1] + offset[0], cols[0] + offset[1], cols[-1] + offset[1]))
    return boxes


@pytest.mark.parametrize("axis", ["x", "y"])
def test_drawn_ticks_put_their_marks_and_labels_where_matplotlib_does(axis):
    # each tick's ink (its mark and label together) within a pixel of matplotlib's own tick on every side
    ours, theirs = np.array(_label_boxes(True, axis)), np.array(_label_boxes(False, axis))
    assert np.abs(ours - theirs).max() <= 1, (ours, theirs)


def test_the_all_to_all_matrix_and_bars_number_every_gpu_up_to_eight_then_every_other():
    from distlab.widgets.mixture_of_experts import EP_SIZES, AllToAllApp

    app = AllToAllApp()
    for ep in EP_SIZES:
        app.ep.value = ep
        shown = list(range(ep)) if ep <= 8 else list(range(0, ep, 2))  # 16 GPUs: 0, 2, ..., 14
        x, y = app.matrix.ticks
        for ticks in (x, y, app.loads.ticks):
            assert ticks.labels == tuple(str(i) for i in shown)
        # GPU i's cell spans i/ep to (i + 1)/ep of the square: its tick at the middle, rows from the top
        assert np.allclose(x.fractions, [(i + 0.5) / ep for i in shown])
        assert np.allclose(y.fractions, [1 - (i + 0.5) / ep for i in shown])
        assert np.allclose(app.loads.ticks.fractions, [(i + 0.5) / ep for i in shown])
        bars = [bar for bar in app.loads.kept if bar.get_visible()]
        assert len(bars) == ep
        assert np.allclose([bar.get_x() + bar.get_width() / 2 for bar in bars], [(i + 0.5) / ep for i in range(ep)])
        assert np.asarray(app.matrix.image.get_array()).shape == (ep, ep)
        assert app.matrix.image.get_extent() == [0.0, 1.0, 1.0, 0.0]  # the fixed square
    app.close()
