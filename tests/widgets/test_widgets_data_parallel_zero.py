"""Headless tests of the lesson-3 apps: ZeRO memory vs GPU count, and the overlap timeline."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from distlab import dataparallel, memory
from distlab.units import format_bytes
from distlab.widgets.common import GPU_COUNTS
from distlab.widgets.data_parallel_zero import APPS, CUSTOM, PENDING, OverlapApp, ZeroMemoryApp


@pytest.fixture(scope="module")
def zero_app():
    return ZeroMemoryApp(model="llama2-7b", gpu="h100-sxm", gpus=8, fabric="ib-ndr")


def test_initial_state_matches_distlab(zero_app):
    r = zero_app.result
    assert zero_app.error is None and r.gpus == 8
    for stage in range(4):
        want = memory.training_memory("llama2-7b", zero=stage, dp=8, gpu="h100-sxm", count_activations=False)
        assert r.memory[stage].total_bytes == pytest.approx(want.total_bytes)
        # ZeRO-3 layer by layer over Llama-2-7B's 32 layers, as the step model prices it
        comm = dataparallel.step_communication("llama2-7b", zero=stage, dp=8, link="ib-ndr", layers=32)
        assert r.communication[stage].bytes_sent_per_gpu == pytest.approx(comm.bytes_sent_per_gpu)
        assert r.communication[stage].time_s == pytest.approx(comm.time_s)
        # the bar of this stage at N = 8 stacks weights, gradients and optimizer states, in GB
        bar = zero_app.picture.frames["bars"][zero_app.picture.index][stage]
        assert bar == pytest.approx([want.parts()[k] / 1e9 for k in ("weights", "gradients", "optimizer")])
        assert sum(bar) == pytest.approx(want.total_bytes / 1e9)
    # llama2-7b: plain DP 16 x 6.74e9 = 108 GB > 84.9 GB (the H100's 79.11 GiB); ZeRO-1 (4 + 12/8) x 6.74e9 = 37 GB fits
    assert r.smallest_fitting_stage == 1
    assert zero_app.picture.frames["capacity"] == pytest.approx(79.11 * 2**30 / 1e9)
    assert zero_app.picture.frames["labels"] == ["plain DP", "ZeRO-1", "ZeRO-2", "ZeRO-3"]
    assert "smallest stage that fits: ZeRO-1" in zero_app.picture.summary
    assert zero_app.picture.summary == zero_app.summary()


def test_every_gpu_count_is_sent_at_once_and_the_slider_needs_no_new_data(zero_app):
    frames, summaries = zero_app.picture.frames, list(zero_app.picture.summaries)
    assert zero_app.picture.options == list(GPU_COUNTS) and len(frames["bars"]) == len(GPU_COUNTS)
    params = zero_app.result.params  # llama2-7b: 6.74e9
    for k, n in enumerate(GPU_COUNTS):
        # ZeRO-3 shards all 16 bytes per parameter (2 + 2 + K = 12, ZeRO paper §5.2): 16 x params / N
        assert sum(frames["bars"][k][3]) == pytest.approx(16 * params / n / 1e9)
    for n in (1, 2, 13, 64, 1024, 8):
        zero_app.gpus.value = n
        assert zero_app.picture.frames is frames and zero_app.picture.summaries == summaries
        assert zero_app.result.gpus == n and zero_app.picture.summary == zero_app.summary()
    zero_app.gpu.value = "a100-40gb"
    # the A100 40GB's 39.50 GiB visible to CUDA = 39.5 x 1.073741824 = 42.41 GB
    assert zero_app.picture.frames["capacity_label"].endswith(": 42.4 GB (sold as 40 GB HBM2; CUDA sees 39.5 GiB)")
    assert zero_app.picture.frames["capacity"] == pytest.approx(39.5 * 2**30 / 1e9)
    zero_app.gpu.value = "h100-sxm"


def test_custom_size_and_invalid_input(zero_app):
    zero_app.model.value = CUSTOM
    zero_app.custom_params.value = 7.5
    zero_app.gpus.value = 64
    # ZeRO paper Table 1, 7.5B at N = 64: 31.4, 16.6, 1.88 GB
    got = [zero_app.result.memory[s].total_bytes / 1e9 for s in (1, 2, 3)]
    assert got == pytest.approx([31.40625, 16.640625, 1.875])
    zero_app.custom_params.value = -2
    assert zero_app.result is None and "size (B) must be a positive number" in zero_app.error
    assert zero_app.picture.summary == f"Cannot compute: {zero_app.error}"
    assert zero_app.shown_texts() == [f"Cannot compute: {zero_app.error}"] and "Traceback" not in zero_app.status.value
    assert all(zero_app.picture.errors) and zero_app.picture.frames == {}
    zero_app.custom_params.value = 7.5
    assert zero_app.error is None and not any(zero_app.picture.errors)
    zero_app.model.value = "llama2-7b"
    zero_app.gpus.value = 8


def test_the_app_shows_in_a_notebook():
    # a notebook shows a widget through repr(): a method named like one of ipywidgets' own (Widget._compare) once
    # broke it, and the cell printed a traceback instead of the app
    assert repr(ZeroMemoryApp()).startswith("ZeroMemoryApp(children=")


def test_in_a_kernel_the_zero_bars_answer_with_the_current_count_and_fill_the_rest_in_later_turns():
    import asyncio

    async def run():
        app = ZeroMemoryApp(gpus=8)
        await app.filling
        app.model.value = "llama2-70b"
        # answered: the current count priced and sent, every other one pending
        answered = list(app.picture.summaries)
        await app.filling
        return answered, app

    answered, app = asyncio.run(run())
    k = GPU_COUNTS.index(8)
    assert answered[k] == app.picture.summaries[k] and "on 8 x" in answered[k]
    assert all(text == PENDING for i, text in enumerate(answered) if i != k)
    once = ZeroMemoryApp(model="llama2-70b", gpus=8)  # outside an event loop: all at once
    assert app.picture.summaries == once.picture.summaries and app.picture.frames == once.picture.frames


@pytest.mark.parametrize("model", ["llama2-7b", "gpt3-175b", CUSTOM])
def test_every_control_combination_gives_a_result_or_our_message(model):
    app = ZeroMemoryApp(model=model)
    grid = [
        (gpu, gpus, fabric, 7.5)
        for (gpu, fabric), gpus in itertools.product(
            [("h100-sxm", "nvlink4"), ("a100-40gb", "ib-ndr"), ("mi300x", "ethernet-100g")], [1, 7, 1024]
        )
    ]
    if model == CUSTOM:
        grid += [
            ("h100-sxm", gpus, "ib-ndr", size) for gpus, size in itertools.product([1, 1024], [0.0, -1.0, 1e-3, 1e4])
        ]
    for gpu, gpus, fabric, size in grid:
        app.gpu.value, app.gpus.value, app.fabric.value, app.custom_params.value = gpu, gpus, fabric, size
        text = (app.status.value + app.picture.summary).lower()
        if app.error is None:
            for stage in range(4):
                assert math.isfinite(app.result.memory[stage].total_bytes)
                assert math.isfinite(app.result.communication[stage].time_s)
            assert "nan" not in text and "inf " not in text
        else:
            assert model == CUSTOM and size <= 0
            assert app.result is None and "cannot compute" in text and "traceback" not in text


# ----------------------------------------------------------------------------------------
# Overlap app


def test_overlap_app_matches_bucketed_overlap():
    app = OverlapApp(model="llama2-7b", gpus=8, fabric="ib-ndr", backward_ms=800, buckets=4)
    want = dataparallel.bucketed_overlap(dataparallel.gradient_bytes("llama2-7b"), 0.8, 8, buckets=4, link="ib-ndr")
    assert app.result.exposed_s == pytest.approx(want.exposed_s)
    assert np.allclose(app.result.end_s, want.end_s)
    # the drawn bars are the timeline, as fractions of the time range shown (chart.x_max ms, the drawn ticks' end)
    comm_bars = [p.vertices[:4] for p in app.chart.comm.get_paths()]
    assert len(comm_bars) == 4
    x_max = app.chart.x_max
    assert np.allclose([bar[:, 0].min() * x_max for bar in comm_bars], want.start_s * 1e3)
    assert np.allclose([bar[:, 0].max() * x_max for bar in comm_bars], want.end_s * 1e3)
    # 4 buckets of 800 ms of backward: the last all-reduce ends after 800 ms, so the range is its end x 1.05
    # rounded up to 1, 1.5, 2, 3, 4, 5, 6 or 8 x 10^k ms
    assert want.end_s[-1] * 1e3 * 1.05 <= x_max < 2 * want.end_s[-1] * 1e3 * 1.05
    assert app.chart.ticks.labels[0] == "0" and float(app.chart.ticks.labels[-1]) <= x_max
    assert "only the last bucket shows" in app.summary()
    app.backward_ms.value = 100  # communication-bound now
    assert "queue up" in app.summary()
    assert app.result.exposed_s == pytest.approx(
        dataparallel.exposed_communication_time(app.result.comm_total_s, 0.1, 4), rel=1e-9
    )


def test_overlap_sliders_blit_whatever_the_time_range():
    # the time ticks are drawn ticks over fixed limits: a new range (1,000 to 150 ms and back) is a blit too
    app = OverlapApp(backward_ms=800, buckets=4)
    calls = []
    app.renderer.refresh = lambda full=False: calls.append(full)
    for b in (5, 6, 7, 8):
        app.buckets.value = b
    app.backward_ms.value = 100
    app.backward_ms.value = 800
    assert calls == [False] * 6


@pytest.mark.parametrize("gpus", [1, 2, 1024])
def test_overlap_grid_gives_a_result_or_our_message(gpus):
    app = OverlapApp(gpus=gpus)
    settings = [(0.0, 1), (10.0, 3), (5000.0, 64), (10.0, 64), (5000.0, 1)]
    for (model, fabric), (backward, buckets) in itertools.product(
        [("llama2-7b", "nvlink4"), ("gpt3-175b", "ib-hdr")], settings
    ):
        app.model.value, app.fabric.value, app.backward_ms.value, app.buckets.value = model, fabric, backward, buckets
        assert app.error is None  # every slider position is valid
        r = app.result
        assert math.isfinite(r.exposed_s) and 0 <= r.exposed_s <= r.comm_total_s + 1e-12
        text = app.status.value.lower()
        assert "nan" not in text and "inf " not in text
        if gpus == 1:
            assert r.comm_total_s == 0 and "nothing to all-reduce" in text


def test_apps_construct_without_arguments():
    for cls in APPS:
        app = cls()
        assert app.error is None and app.result is not None


def test_bar_totals_are_written_as_the_text_writes_them(zero_app):
    # each stage's bar carries its total in format_bytes' form (the text's), not the browser's own 3 digits of GB
    frames = zero_app.picture.frames
    for bars, written in zip(frames["bars"], frames["totals"]):
        assert written == [format_bytes(sum(bar) * 1e9) for bar in bars]
