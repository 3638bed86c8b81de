"""Headless tests of the lesson 8 apps: their numbers are distlab.production's, artists update in place."""

from __future__ import annotations

import numpy as np
import pytest

from distlab import dataparallel, hardware, production, training, triage
from distlab.widgets.production import BucketApp, ProductionStepApp, TriageApp


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
    app.buckets.value = want.best_buckets
    assert app.plot.done is line and app.plot.current.get_xdata()[0] == want.best_buckets
    assert app.result[1].exposed_s == pytest.approx(want.best_exposed_s, rel=1e-9)
    # the all-reduced curve ends at M when the last bucket's all-reduce ends
    assert app.plot.done.get_ydata()[-1] == pytest.approx(grad / 1e9)
    assert app.plot.done.get_xdata()[-1] == pytest.approx(1e3 * app.result[1].end_s[-1])


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
    assert app.bars.rects["waiting for the slowest GPU"][2] is rect and rect.get_width() == pytest.approx(
        app.result.wait_s
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
    # 125 GB given, 80.2 GB and 57.8 GB after the rungs, 80 GB of H100: the axis, fixed by the capacity, ends at
    # 2 x 80 x 1.08 = 172.8 GB rounded up to 200 GB (1, 1.5, 2, 3, 4, 5, 6, 8 x 10^k); nothing is cut
    assert frames["top"] == 200 and frames["capacity"] == 80 and frames["clipped"] == [[False] * len(bars)]
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
    app = ProductionStepApp()
    close(app)
    app.nodes.value = 4
    app.pp.value = 8  # 4 nodes = 32 GPUs cannot hold tp 8 x pp 8
    assert app.result is None and "tp x pp = 8 x 8 = 64 is more than the cluster's 32 GPUs" in app.error
    assert "dp x tp x pp = 0" not in app.error
    assert "Cannot compute" in app.status.value and "Traceback" not in app.status.value
    app.pp.value = 4
    assert app.error is None


def test_triage_app_invalid_shows_our_message():
    app = TriageApp()
    app.nodes.value = 4
    app.pp.value = 8
    assert app.result is None and "tp x pp = 8 x 8 = 64 is more than the cluster's 32 GPUs" in app.error
    assert "Traceback" not in app.status.value
    # the picture fades (the browser fades a position in error) and shows our message in place of its text
    assert app.picture.errors == [app.error] and app.picture.summary == f"Cannot compute: {app.error}"
    app.pp.value = 4
    assert app.error is None and app.picture.errors == [""]
    app.close()
