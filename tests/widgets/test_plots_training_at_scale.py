"""Lesson 11's static figures draw what they are given (the notebook shows them; nbval checks the notebook)."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from distlab import fsdp, production
from distlab.plots.training_at_scale import context_figure, goodput_figure, schedules_figure, stream_figure


def test_stream_figure_has_one_box_per_event():
    tl = fsdp.fsdp_timeline(1.0, 2.0, 0.5, 0.5, layers=4)
    events = {
        k: getattr(tl, k)
        for k in (
            "f_start",
            "f_end",
            "b_start",
            "b_end",
            "ag_start",
            "ag_end",
            "bg_start",
            "bg_end",
            "rs_start",
            "rs_end",
        )
    }
    fig = stream_figure({**events, "step_s": tl.step_s, "compute_s": tl.compute_s}, unit="s")
    assert isinstance(fig, Figure)
    boxes = fig.axes[0].collections[0]
    # 4 forwards + 4 backwards + 4 forward gathers + 3 backward gathers + 4 reductions
    assert len(boxes.get_paths()) == 19
    assert fig.axes[0].get_xlim() == (0.0, 15.0)  # nice ceiling of 13 x 1.02
    # the legend names every part (lesson 11 showed '_nolegend_' six times) and covers no bar
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    (legend,) = fig.legends
    names = [t.get_text() for t in legend.get_texts()]
    assert names and not any(n.startswith("_") for n in names)
    renderer = canvas.get_renderer()
    assert not legend.get_window_extent(renderer).overlaps(fig.axes[0].get_window_extent(renderer))


def test_context_and_goodput_and_schedule_figures():
    cmp = production.compare_context_parallel("llama3.1-8b", 131072, 8)
    rows = [(r.compute_s, r.comm_s, r.exposed_s) for r in cmp.values()]
    fig = context_figure(list(cmp), rows, unit="s")
    widths = [p.get_width() for p in fig.axes[0].patches[:3]]
    assert widths == [r[0] for r in rows]
    fig = goodput_figure({"a": (np.array([1.0, 10.0]), np.array([50.0, 60.0]), (10.0, 60.0))})
    assert fig.axes[0].get_xscale() == "log"
    fig = schedules_figure(["1f1b", "zb-v"], [9.0, 0.0], [4.0, 4.0])
    assert [p.get_height() for p in fig.axes[0].patches] == [9.0, 0.0]


def test_no_context_row_is_left_blank():
    # a method that cannot run (Ulysses at a cp that does not divide the heads per TP rank: Llama-3.1-70B's 64 heads
    # over tp = 8 leave 8, and cp = 16) says so in its row; a blank row read as "takes no time" (review v16). Every
    # row shows a bar or the note, never neither, in every cp the app offers
    from distlab.plots.training_at_scale import CANNOT_RUN
    from distlab.widgets.training_at_scale import ContextApp

    app = ContextApp()
    try:
        blocked = 0
        for cp in app.cp.options:
            app.cp.value = cp
            bars = app.bars
            for i, r in enumerate(app.result.values()):
                drawn = bars.compute[i].get_width() > 0 and bars.compute[i].get_alpha() > 0
                noted = bars.notes[i].get_visible() and bars.notes[i].get_text() == CANNOT_RUN
                assert drawn != noted, (cp, i, drawn, noted)
                blocked += isinstance(r, str)
        assert blocked  # the check saw a method that cannot run
    finally:
        app.close()
