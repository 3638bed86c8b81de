"""Headless tests of the lesson 7 training calculator: the numbers are distlab.training's, artists update in place."""

from __future__ import annotations

import pytest

from distlab import training
from distlab.widgets.training_lab import TrainingLabApp


@pytest.fixture(scope="module")
def app():
    a = TrainingLabApp()
    yield a
    import matplotlib.pyplot as plt

    plt.close(a.fig)


def widths(app):
    return {name: rects[0].get_width() for name, rects in app.time_bars.rects.items()}


def test_initial_state_is_the_estimate(app):
    want = training.estimate(
        "llama3.1-70b",
        "dgx-h100",
        nodes=32,
        fabric="ib-ndr",
        global_batch=256,
        seq_len=8192,
        tp=4,
        pp=2,
        zero=2,
        recompute="selective",
        sequence_parallel=True,
        memory_recipe="deepspeed",
    )  # the lab's default: an engine's memory, with its reserve
    assert app.error is None and app.result.step_time_s == pytest.approx(want.step_time_s)
    assert "deepspeed recipe" in app.status.value and "reserved" in app.status.value
    assert sum(widths(app).values()) == pytest.approx(want.step_time_s)
    mem = sum(app.mem_bars.rects[c][0].get_height() for c in ("weights", "gradients", "optimizer", "activations"))
    assert mem == pytest.approx(want.memory.total_bytes / 1e9)
    assert app.mem_bars.capacity_line.get_ydata()[0] == pytest.approx(80)
    assert f"MFU {100 * want.mfu:.1f}%" in app.status.value and "fits" in app.status.value


def test_infeasible_configuration_says_why_and_what_fits(app):
    rect = app.time_bars.rects["compute"][0]
    app.zero.value = 0  # 4 x 2 x 32, plain DP: 70B states / 8 x 16 B + activations > 80 GB
    assert not app.result.fits
    assert "NOT FEASIBLE" in app.status.value and "would fit: ZeRO-" in app.status.value
    text = app.summary()  # one widget protocol: summary() is the text, as for every app
    assert isinstance(text, str) and "[training.estimate]" in text and "[triage.explain_infeasible]" in text
    assert app.time_bars.rects["compute"][0] is rect  # same artists, updated
    app.zero.value = 2


def test_slower_fabric_never_faster(app):
    times = {}
    for fabric in ("ethernet-100g", "ib-hdr", "ib-ndr"):
        app.fabric.value = fabric
        times[fabric] = app.result.step_time_s
    assert times["ethernet-100g"] >= times["ib-hdr"] >= times["ib-ndr"]


def test_invalid_combination_shows_our_message(app):
    app.schedule.value = "interleaved"
    assert not app.chunks.disabled
    app.chunks.value = 20  # 80 layers / (pp 2 x 20) = 2 per chunk: valid
    assert app.error is None and app.result.config["chunks"] == 20
    app.chunks.value = 1
    app.schedule.value = "1f1b"
    assert app.chunks.disabled
    app.model.value = "gpt3-175b"
    app.tp.value = 8
    app.pp.value = 16
    app.nodes.value = 1  # 8 GPUs cannot hold tp 8 x pp 16
    assert app.result is None and "tp x pp = 8 x 16 = 128 is more than the cluster's 8 GPUs" in app.error
    assert "Cannot compute" in app.status.value and "Traceback" not in app.status.value
    app.nodes.value = 32
    assert app.error is None


def test_efficiency_slider_blits(app):
    calls = []
    original = app.renderer.refresh
    app.renderer.refresh = lambda full=False: calls.append(full) or original(full)
    try:
        for value in (0.5, 0.6, None, 0.4):
            app.efficiency.value = value
    finally:
        app.renderer.refresh = original
    assert calls and not all(calls)  # at least some frames are blits, not full redraws


def test_moe_models_are_offered_and_ep_is_only_for_them(app):
    from distlab import moe

    assert set(moe.MOE_MODELS) <= set(app.model.options)
    app.model.value = "llama3.1-70b"
    assert app.ep.disabled and app.etp.disabled and "ep" not in app.result.config
    app.model.value = "mixtral-8x7b"
    assert not app.ep.disabled and app.error is None
    app.model.value = "llama3.1-70b"


def test_ep_control_is_the_estimate_and_draws_the_all_to_all(app):
    controls = dict(
        node="dgx-h100",
        nodes=32,
        fabric="ib-ndr",
        global_batch=256,
        seq_len=8192,
        tp=4,
        pp=2,
        zero=2,
        recompute="selective",
        sequence_parallel=True,
        memory_recipe="deepspeed",
        schedule="1f1b",
        micro_batch_size=1,
        efficiency=None,
        cp=1,
    )
    for name, value in controls.items():
        getattr(app, name).value = value
    app.model.value = "mixtral-8x7b"
    app.ep.value, app.etp.value = 8, 1
    want = training.estimate(
        "mixtral-8x7b",
        "dgx-h100",
        nodes=32,
        fabric="ib-ndr",
        global_batch=256,
        seq_len=8192,
        tp=4,
        pp=2,
        zero=2,
        recompute="selective",
        sequence_parallel=True,
        memory_recipe="deepspeed",
        ep=8,
        etp=1,
    )
    assert app.error is None and app.result.step_time_s == pytest.approx(want.step_time_s, rel=1e-12)
    assert want.ep_comm_s > 0
    assert widths(app)["EP all-to-all"] == pytest.approx(want.ep_comm_s)
    assert "ep=8 x etp=1" in app.status.value and "EP all-to-all" in app.status.value
    app.ep.value = 256  # Mixtral has 8 experts: our message, naming the valid sizes, in place of the result
    assert app.result is None and "valid ep: 1, 2, 4, 8" in app.error and "Traceback" not in app.status.value
    app.ep.value, app.etp.value = 1, None
    app.model.value = "llama3.1-70b"
