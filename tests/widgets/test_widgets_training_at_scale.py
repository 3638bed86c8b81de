"""Lesson 11's apps: each shows what the library computes, our message on invalid input, and redraws in place."""

from __future__ import annotations

import re

import numpy as np
import pytest

from distlab import failures, pipeline, production
from distlab.plots.training_at_scale import GOODPUT_X_RANGE
from distlab.widgets.training_at_scale import APPS, SCHEDULES, CheckpointApp, ContextApp, FsdpApp, ScheduleApp
from test_widget_fuzz import markers_off_their_axes


def test_schedule_app_is_the_simulator():
    app = ScheduleApp(kind="zb-v", stages=4, microbatches=8)
    assert app.error is None
    chosen, base = app.result
    assert chosen.step_time == pipeline.schedule("zb-v", 4, 8).step_time == 25.5
    assert base.step_time == pipeline.schedule("1f1b", 4, 8).step_time == 33
    # ZB-V: no idle inside a span, step 25.5, peak 4; 1F1B: (p-1)(F+B+W) = 9 idle, step 33, peak 4
    assert "  zb-v                      0                 25.5            4" in app.summary()
    assert "  1f1b                      9                   33            4" in app.summary()
    # the op times are in t_F (t_f = 1): the headline says 'step 25.5 t_F', not seconds (issue 31: 'step 25.5 s')
    assert "step 25.5 t_F" in app.summary() and " s," not in app.summary().splitlines()[0]
    app.kind.value = "dualpipe"
    app.stages.value = 3  # DualPipe needs an even p: our message
    assert app.result is None and "even number of stages" in app.error
    app.kind.value = "zb-v"
    assert app.error is None


def _named_figures(text: str, name: str) -> set[str]:
    """The figures printed right after `name` ("bubble 5.88%" -> {"5.88%"})."""
    return set(re.findall(rf"\b{name}\s+(-?[\d.,]+\s*(?:%|t_F)?)", text))


@pytest.mark.parametrize("kind", list(SCHEDULES))
def test_schedule_app_names_each_quantity_as_the_lesson_does_with_one_value(kind):
    """A quantity the text names has one meaning and one value in it (review v19: ZB-V's headline printed "bubble
    5.88%", the idle share with the warm-up and drain, over a table of 0 idle inside the span, the bubble Lesson 11
    and the papers count; and "peak in flight" both until B and until W). No "bubble" other than the span idle, and
    one figure per named quantity of the chosen schedule."""
    app = ScheduleApp(kind=kind, stages=4, microbatches=8)
    try:
        text, (chosen, _) = app.summary(), app.result
        for name in ("bubble", "peak in flight", "overhead"):
            figures = _named_figures(text, name)
            assert len(figures) <= 1, f"{kind}: {name} printed as {figures}"
        assert _named_figures(text, "bubble") <= {f"{float(chosen.span_idle.max()):g} t_F"}, text
    finally:
        app.close()


def test_schedule_app_slider_keeps_the_axes_most_of_the_time():
    app = ScheduleApp(kind="zb-v", stages=4, microbatches=32)
    app.fig.canvas.draw()
    before = app.fig.axes[0].get_xlim()
    app.microbatches.value = 31  # step 98.5 -> 95.5 t_F: the x range (nice ceiling 100) stays
    assert app.fig.axes[0].get_xlim() == before


def test_fsdp_app_is_sharding_plan():
    app = FsdpApp(model="llama2-7b", nodes=4, sharding="full")
    plan, other = app.result
    want = production.sharding_plan("llama2-7b", "dgx-h100", nodes=4)
    assert plan.exposed_s == want.exposed_s and plan.network_sent_bytes == want.network_sent_bytes
    assert other.sharding == "hybrid" and "HSDP on the same cluster" in app.summary()
    app.sharding.value = "hybrid"
    app.nodes.value = 1  # HSDP cannot run on one node: greyed out, FSDP shown (review v20: it was offered, and refused)
    assert app.sharding.disabled and app.sharding.value == "full"
    assert app.error is None and app.result[1] is None  # no comparison line


def test_context_app_is_compare_context_parallel():
    app = ContextApp(model="llama3.1-70b", seq_len=131072, cp=8, tp=8)
    # cp 8 x tp 8 = 64 GPUs: eight DGX H100 nodes, so the default link is their fabric, InfiniBand NDR
    assert app.link.value == "ib-ndr"
    want = production.compare_context_parallel("llama3.1-70b", 131072, 8, tp=8, link="ib-ndr")
    assert [r.exposed_s for r in app.result.values()] == [r.exposed_s for r in want.values()]
    # bars in units of the balanced compute: ring 1, contiguous ring 2 - 1/8, Ulysses 1 with its all-to-alls exposed
    widths = [bar.get_width() for bar in app.bars.compute]
    assert widths == pytest.approx([1.0, 2 - 1 / 8, 1.0])
    assert app.bars.exposed[2].get_width() == pytest.approx(want["ulysses"].exposed_s / want["ring"].compute_s)
    app.cp.value = 128
    assert "Ulysses: cannot run" in app.summary()
    widths = [bar.get_width() for bar in app.bars.compute]
    assert widths[2] == 0 and widths[0] > 0
    assert app.fig.axes[0].get_xlim() == (0.0, 2.5)  # fixed axes: every change is a blit


def test_checkpoint_app_is_checkpoint_plan():
    app = CheckpointApp()
    plan, intervals, good, _ = app.result
    want = failures.checkpoint_plan("llama3.1-405b", 16384, storage_bandwidth=2e12)
    assert plan.goodput == pytest.approx(want.goodput) and plan.interval_s == pytest.approx(want.interval_s)
    # the curve's maximum is near the marked interval (Daly's estimate of the optimum)
    assert good.max() - plan.goodput < 0.002
    assert "419 expected interruptions" in app.summary()
    app.mode.value = "async"
    assert np.all(app.result[1] >= app.result[0].write_s)


def test_apps_construct_without_arguments():
    for App in APPS:
        app = App()
        assert app.error is None and app.summary()


def test_an_interval_off_the_goodput_axis_is_marked_at_its_edge():
    # asynchronous checkpoints of Llama 3.1 8B on 131,072 GPUs at 10 TB/s and 1e-3 failures per GPU-hour: Daly's
    # interval is about 27 ms, left of the axis's 0.6 s; it is drawn at the left edge as an arrowhead pointing left
    app = CheckpointApp(model="llama3.1-8b", gpus=131072, mode="async", storage_tbps=10.0, rate=1e-3, restart_min=0.0)
    assert app.result[0].interval_s / 60 < GOODPUT_X_RANGE[0]
    assert app.curve.chosen.get_xdata()[0] == GOODPUT_X_RANGE[0] and app.curve.chosen.get_marker() == "<"
    assert not markers_off_their_axes(app)
    app.mode.value, app.rate.value = "sync", 1e-5  # an interval on the axis: the usual dot
    assert GOODPUT_X_RANGE[0] < app.result[0].interval_s / 60 < GOODPUT_X_RANGE[1]
    assert app.curve.chosen.get_marker() == "o" and not markers_off_their_axes(app)
