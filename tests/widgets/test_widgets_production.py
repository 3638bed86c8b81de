"""Headless tests of the lesson 8 apps: their numbers are distlab.production's, artists update in place."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from distlab import dataparallel, hardware, production, training, triage
from distlab.plots.production import BUCKET_TIME_SPAN, bucket_figure, exposed_decades
from distlab.units import format_seconds
from distlab.widgets.common import axes_state
from distlab.widgets.controls import nearest_on_log_scale
from distlab.widgets.production import (
    BUCKET_COUNTS,
    BUCKET_FABRICS,
    BUCKET_MODELS,
    DPS,
    EXPOSED_RANGE_S,
    TOKENS,
    BucketApp,
    ProductionStepApp,
    TriageApp,
    _bucket_sweep,
)


@pytest.fixture
def close():
    apps = []
    yield apps.append
    import matplotlib.pyplot as plt

    for a in apps:
        plt.close(a.fig)


def test_bucket_app_shows_the_sweep_and_the_timeline(close):
    app = BucketApp()
    close(app)
    sweep, timeline = app.result
    grad = dataparallel.gradient_bytes("llama2-7b")  # 6.74e9 x 2 B = 13.5 GB
    want = production.bucket_sweep(
        grad,
        production.backward_time("llama2-7b", 4096),
        64,
        max_buckets=2000,
        link="nvlink4",
        algorithm="hierarchical",
        gpus_per_node=8,
        inter_link="ib-ndr",
    )
    assert sweep.best_buckets == want.best_buckets
    np.testing.assert_allclose(app.plot.curve.get_ydata(), want.exposed_s)
    assert app.plot.best.get_xdata()[0] == want.best_buckets
    assert f"best: {want.best_buckets} buckets" in app.status.value
    line = app.plot.done
    # the slider offers about ten counts a decade (BUCKET_COUNTS, on the curve's log axis): the one nearest the best
    nearest = nearest_on_log_scale(want.best_buckets, BUCKET_COUNTS)
    app.buckets.value = nearest
    assert app.plot.done is line and app.plot.current.get_xdata()[0] == nearest
    assert app.result[1].exposed_s == pytest.approx(want.at(nearest)["exposed_s"], rel=1e-9)
    # the all-reduced curve reaches 100 % of the gradients when the last bucket's all-reduce ends, in backward passes
    assert app.plot.done.get_ydata()[-1] == pytest.approx(100)
    assert app.plot.done.get_xdata()[-1] == pytest.approx(app.result[1].end_s[-1] / want.backward_s)
    # four equal buckets: a staircase of 25 % steps, each at its all-reduce's end (time / backward)
    app.buckets.value = 4
    ends = app.result[1].end_s / want.backward_s
    np.testing.assert_allclose(app.plot.done.get_xdata(), [0, *np.repeat(ends, 2)])
    np.testing.assert_allclose(app.plot.done.get_ydata(), [0, 0, 25, 25, 50, 50, 75, 75, 100])
    assert not app.plot.off_edge.get_visible()  # it ends within the time axis
    # the text under the plots keeps the absolute numbers: 4 buckets end T + exposed after backward starts
    shown = app.shown_texts()[-1]
    assert f"ends {format_seconds(want.backward_s + want.at(4)['exposed_s'])} after backward starts" in shown


def test_bucket_axes_hold_every_offered_configuration():
    # every sweep the app offers (4 models x 3 fabrics x 2 algorithms x 4 DP sizes x 6 token counts), computed: its
    # exposed communication lies inside the fixed axis, and the axis is no wider than the whole decades it needs
    # (the lowest and the highest decade are both reached); exposed >= one bucket's time > 0: a log axis holds it
    low, high = EXPOSED_RANGE_S
    lowest, highest = np.inf, 0.0
    for values in itertools.product(BUCKET_MODELS, BUCKET_FABRICS, ("hierarchical", "ring"), DPS, TOKENS):
        sweep = _bucket_sweep(*values)
        assert sweep.latency_s > 0 and np.all(sweep.exposed_s >= sweep.per_bucket_s - 1e-15)
        lowest, highest = min(lowest, sweep.exposed_s.min()), max(highest, sweep.exposed_s.max())
    assert low <= lowest < 10 * low and high / 10 < highest <= high


def test_bucket_controls_never_redraw_the_axes(close):
    # fixed axes: every control's every value is a blit (a new sweep repaints only its curve over the kept axes), the
    # axes and tick labels never change, and what is shown is pixel for pixel what a full draw paints
    app = BucketApp()
    close(app)
    app.canvas._handle_message(app.canvas, {"type": "initialized"}, [])
    app.fig.canvas.draw()
    axes = axes_state(app.fig)
    draws = []
    original = app.canvas.draw
    app.canvas.draw = lambda: (draws.append(1), original())[1]
    for control, options in (
        (app.model, BUCKET_MODELS),
        (app.link, BUCKET_FABRICS),
        (app.algorithm, ["ring", "hierarchical", "ring"]),
        (app.dp, DPS),
        (app.tokens, [*TOKENS, 2048]),
        (app.buckets, [1, 7, 300, 2000, 1]),
    ):
        for value in options:
            control.value = value
            assert axes_state(app.fig) == axes
    assert draws == []
    # the last state, one bucket on a flat ring of 256 GPUs over 100G Ethernet after 2,048 tokens' backward: the
    # all-reduce runs off the time axis
    assert app.plot.off_edge.get_visible() and app.plot.off_edge_text.get_visible()
    shown = np.asarray(app.canvas.get_renderer().buffer_rgba()).copy()
    app.canvas.draw = original
    app.canvas.draw()
    assert np.array_equal(shown, np.asarray(app.canvas.get_renderer().buffer_rgba()))


def test_bucket_timeline_past_the_time_axis_is_marked_at_its_edge(close):
    # one flat ring of 64 GPUs over IB NDR, one bucket: it starts when backward ends and runs comm(1), so it ends at
    # 1 + comm(1) / T backward passes, past the axis's BUCKET_TIME_SPAN; nothing is all-reduced before, so the line
    # leaves the axis at 0 %, and the marker there says where it ends
    app = BucketApp(algorithm="ring", buckets=1)
    close(app)
    sweep = app.result[0]
    end = 1 + sweep.comm_total_s[0] / sweep.backward_s
    assert end > BUCKET_TIME_SPAN
    assert app.plot.off_edge.get_visible()
    assert list(app.plot.off_edge.get_xdata()) == [BUCKET_TIME_SPAN] and list(app.plot.off_edge.get_ydata()) == [0]
    assert app.plot.off_edge_text.get_text() == f"all-reduce ends at\n{end:.2f}× backward"
    app.algorithm.value = "hierarchical"  # 112 ms in one piece after 223 ms of backward: ends at 1.5, on the axis
    assert not app.plot.off_edge.get_visible() and not app.plot.off_edge_text.get_visible()


def test_bucket_figure_draws_its_own_decades(close):
    sweep = production.bucket_sweep(1e9, 0.1, 8, bandwidth=100e9, latency=1e-5)
    # the docstring's sweep: one bucket leaves L + M s = 0.14 ms + 17.5 ms exposed (the most), the best 0.17 ms (the
    # least): the decades 100 us .. 100 ms
    assert exposed_decades(sweep) == pytest.approx((1e-4, 1e-1))
    fig = bucket_figure(sweep, sweep.timeline(16))
    ax = fig.axes[0]
    assert ax.get_ylim() == pytest.approx((1e-4, 1e-1)) and ax.get_xlim() == pytest.approx((1, 1024))
    assert [t.get_text() for t in ax.get_yticklabels()] == ["100 µs", "1 ms", "10 ms", "100 ms"]


@settings(max_examples=40, deadline=None)
@given(
    grad=st.floats(1e3, 1e13),
    backward=st.floats(0, 100),
    latency=st.floats(1e-7, 1e-2),
    bandwidth=st.floats(1e8, 1e12),
    top=st.integers(1, 300),
)
def test_exposed_decades_are_the_whole_decades_that_hold_the_curve(grad, backward, latency, bandwidth, top):
    sweep = production.bucket_sweep(grad, backward, 8, max_buckets=top, bandwidth=bandwidth, latency=latency)
    low, high = exposed_decades(sweep)
    for edge in (low, high):
        assert np.log10(edge) == pytest.approx(round(np.log10(edge)))
    assert low <= sweep.exposed_s.min() < 10 * low * (1 + 1e-12)
    assert high >= sweep.exposed_s.max() and (high / 10 < sweep.exposed_s.max() * (1 + 1e-12) or high == 10 * low)


def test_bucket_slider_blits_and_ring_is_slower(close):
    app = BucketApp()
    close(app)
    calls = []
    original = app.renderer.refresh
    app.renderer.refresh = lambda full=False: calls.append(full) or original(full)
    try:
        for b in (10, 30, 100, 300):
            app.buckets.value = b
    finally:
        app.renderer.refresh = original
    assert calls and not all(calls)
    hier = app.result[0].comm_total_s[0]
    app.algorithm.value = "ring"
    assert app.result[0].comm_total_s[0] > hier  # one flat ring over the fabric moves 8x the bytes per NIC
    app.dp.value = 8  # inside one node: NVLink, the algorithm does not matter
    assert "NVLink, one node" in app.status.value


def test_production_app_taper_rails_fp8_and_stragglers(close):
    app = ProductionStepApp()
    close(app)
    cfg = dict(global_batch=256, seq_len=8192, tp=8, pp=4, zero=1, recompute="selective", sequence_parallel=True)
    base = training.estimate("llama3.1-70b", hardware.cluster("dgx-h100", 32), **cfg)
    assert app.result.step_time_s == pytest.approx(base.step_time_s)
    app.oversubscription.value = 3.0
    tapered = app.result.healthy.dp_comm_s
    assert tapered > base.dp_comm_s
    app.rail.value = True
    assert app.result.healthy.dp_comm_s == pytest.approx(base.dp_comm_s)  # rails spare the DP ring the taper
    assert "rail-optimized" in app.status.value
    app.precision.value = "fp8"
    # the dense fp8 peak is 2x bf16's (1978.9 vs 989.4 TFLOP/s): the matmuls take half the time, while the
    # memory-bound element-wise work of the calibrated compute model (distlab.efficiency) does not speed up
    fp8 = app.result.healthy.compute_s
    assert base.compute_s * 989.4 / 1978.9 < fp8 < base.compute_s
    assert fp8 == pytest.approx(
        training.estimate("llama3.1-70b", hardware.cluster("dgx-h100", 32), **cfg, precision="fp8").compute_s
    )
    rect = app.bars.rects["waiting for the slowest GPU"][2]
    app.slow.value = 1.5
    # one GPU 1.5x slow stretches its stage's m microbatches, not the bubble: + 0.5 x compute
    want = app.result.healthy.step_time_s + 0.5 * app.result.healthy.compute_s
    assert app.result.step_time_s == pytest.approx(want, rel=1e-6)
    # the bars are drawn as fractions of the time range the drawn ticks label (app.bars.x_max seconds)
    assert app.bars.rects["waiting for the slowest GPU"][2] is rect and rect.get_width() * app.bars.x_max == (
        pytest.approx(app.result.wait_s)
    )
    # the MFU the status shows is the step's with the wait: model FLOPs / (slow step x GPUs x peak)
    e = app.result.healthy
    assert app.result.mfu == pytest.approx(e.model_flops / (app.result.step_time_s * e.gpus * e.peak_flops))
    assert f"MFU {100 * app.result.mfu:.1f}%" in app.status.value


def test_triage_app_ladder_bars():
    app = TriageApp()
    want = triage.oom_triage(
        "llama3.1-70b",
        hardware.cluster("dgx-h100", 32, "ib-ndr"),
        global_batch=256,
        seq_len=8192,
        tp=8,
        pp=4,
        micro_batch_size=4,
        sequence_parallel=True,
    )
    assert [s.change for s in app.result.ladder] == [s.change for s in want.ladder]
    # the browser draws the bars it is sent: the given configuration and one bar per rung, no empty slot after the
    # last rung (before: at least 4 slots were shown), each the sum of its parts
    frames = app.picture.frames
    (bars,) = frames["bars"]
    assert len(bars) == len(frames["labels"]) == len(want.ladder) + 1
    assert [sum(bar) for bar in bars] == pytest.approx(
        [want.base.memory.total_bytes / 1e9] + [s.memory_per_gpu_bytes / 1e9 for s in want.ladder]
    )
    # 125 GB given, 80.2 GB and 57.8 GB after the rungs, 84.94 GB of H100 (79.11 GiB): the axis, fixed by the
    # capacity, ends at 2 x 84.94 x 1.08 = 183.5 GB rounded up to 200 GB (1, 1.5, 2, 3, 4, 5, 6, 8 x 10^k); nothing
    # is cut
    assert frames["top"] == 200 and frames["capacity"] == pytest.approx(79.11 * 2**30 / 1e9)
    assert frames["clipped"] == [[False] * len(bars)]
    # flash attention (the default) stores no scores: the ladder skips selective recomputation, and a
    # smaller micro-batch is the first rung that fits: marked on its bar
    assert "selective recomputation" not in [s.change for s in want.ladder]
    assert want.first_fit is not None and f"first fit: {want.first_fit.change}" in app.picture.summary
    assert frames["mark"] == [[[want.ladder.index(want.first_fit) + 1, "first fit"]]]
    assert app.picture.summary == app.summary() and app.picture.errors == [""]
    app.recompute.value = "selective"
    app.zero.value = 1
    app.micro_batch_size.value = 1
    assert app.result.already_fits and "already fits" in app.picture.summary
    assert len(app.picture.frames["bars"][0]) == 1 and app.picture.frames["mark"] == [[[0, "fits"]]]
    app.close()


def test_production_app_invalid_shows_our_message(close):
    app = ProductionStepApp(nodes=4, pp=8)  # 4 nodes = 32 GPUs cannot hold tp 8 x pp 8 (a student is never offered it)
    close(app)
    assert app.result is None and "tp x pp = 8 x 8 = 64 is more than the cluster's 32 GPUs" in app.error
    assert "dp x tp x pp = 0" not in app.error
    assert app.shown_texts() == [f"Cannot compute: {app.error}"] and "Traceback" not in app.status.value
    app.pp.value = 4
    assert app.error is None and app.pp.options == (1, 2, 4)  # left, pp = 8 is not offered here again


def test_triage_app_invalid_shows_our_message():
    app = TriageApp(nodes=4, pp=8)
    assert app.result is None and "tp x pp = 8 x 8 = 64 is more than the cluster's 32 GPUs" in app.error
    assert "Traceback" not in app.status.value
    # the picture fades (the browser fades a position in error) and shows our message in place of its text
    assert app.picture.errors == [app.error] and app.picture.summary == f"Cannot compute: {app.error}"
    app.pp.value = 4
    assert app.error is None and app.picture.errors == [""] and app.pp.options == (1, 2, 4)
    app.close()


@pytest.mark.parametrize("app_class", [ProductionStepApp, TriageApp])
def test_lesson_8s_layouts_offer_what_runs_and_say_why_not_the_rest(app_class):
    app = app_class()
    try:
        app.nodes.value = 4  # 32 GPUs: tp 8 x pp 8 = 64 was offered, and answered only with our error
        assert app.pp.options == (1, 2, 4) and app.error is None
        assert "PP = 8 (tp x pp = 8 x 8 = 64 is more than the cluster's 32 GPUs" in app.pp.tooltip
        assert app.pp.tooltips == (app.pp.tooltip,) * 3
        app.tp.value = 4  # pp = 8 runs again: offered, nothing moved
        assert app.pp.options == (1, 2, 4, 8) and app.pp.tooltip is None and app.pp.value == 4
    finally:
        app.close()


def test_the_triage_app_offers_no_tp_whose_replicas_split_the_batch_unevenly():
    app = TriageApp()
    try:
        app.nodes.value = 64  # 512 GPUs at pp 4: tp 1 gives dp 128 x micro-batch 4 = 512 > 256 sequences
        assert app.tp.options == (2, 4, 8) and app.error is None
        assert "TP = 1 (global_batch=256 is not a multiple of dp x micro_batch_size = 128 x 4" in app.tp.tooltip
    finally:
        app.close()


def test_the_layouts_offered_are_those_the_step_model_runs():
    # layouts.layout_refusal against training.estimate itself (not the checks it calls), at every count, TP, PP and
    # micro-batch the lesson 8 apps offer, for every model the triage offers: refused exactly where estimate() refuses,
    # in estimate()'s own words
    from distlab import models
    from distlab.errors import ConfigurationError
    from distlab.widgets.layouts import layout_refusal
    from distlab.widgets.production import TRIAGE_MODELS

    for name in TRIAGE_MODELS:
        model = models.model(name)
        for nodes in (4, 8, 16, 32, 64, 128):
            cl = hardware.cluster("dgx-h100", nodes, "ib-ndr")
            for tp, pp, b in itertools.product((1, 2, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8)):
                try:
                    training.estimate(model, cl, global_batch=256, tp=tp, pp=pp, micro_batch_size=b)
                    refused = None
                except ConfigurationError as error:
                    refused = str(error)
                values = dict(nodes=nodes, tp=tp, pp=pp, micro_batch_size=b)
                assert layout_refusal(values, name) == refused, values
