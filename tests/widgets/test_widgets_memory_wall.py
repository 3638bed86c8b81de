"""Headless widget tests: set control values, assert on state and results (no browser)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st

from distlab import memory
from distlab.units import format_bytes
from distlab.widgets.memory_wall import CUSTOM, MemoryWallApp


@pytest.fixture(scope="module")
def app():
    return MemoryWallApp(model="llama2-7b", gpu="h100-sxm", gpus=1, zero=0)


def heights(app, bar):
    """The stacked parts (GB) the browser is sent for the current GPU count: weights, gradients, optimizer, and
    activations when they are counted."""
    frames = app.picture.frames
    counted = ["activations"] if app.activations.value else []
    assert frames["parts"] == ["weights", "gradients", "optimizer states", *counted]
    return frames["bars"][app.picture.options.index(app.gpus.value)][bar]


def test_initial_state_matches_distlab(app):
    want = memory.training_memory("llama2-7b", gpu="h100-sxm", count_activations=False)
    assert app.error is None
    assert app.result.total_bytes == pytest.approx(want.total_bytes)
    assert sum(heights(app, 1)) == pytest.approx(want.total_bytes / 1e9)
    # H100 SXM: 79.11 GiB visible to CUDA = 79.11 x 1.073741824 = 84.94 GB (hardware_catalog)
    assert app.picture.frames["capacity"] == pytest.approx(79.11 * 2**30 / 1e9)
    assert app.picture.frames["capacity_label"] == "h100-sxm: 84.9 GB (sold as 80 GB HBM3; CUDA sees 79.11 GiB)"
    assert "does not fit" in app.picture.summary and app.picture.summary == app.summary()


def test_zero3_over_8_gpus_fits(app):
    app.gpus.value = 8
    app.zero.value = 3
    want = memory.training_memory("llama2-7b", zero=3, dp=8, count_activations=False)
    assert app.result.total_bytes == pytest.approx(want.total_bytes)
    assert app.result.fits and "fits" in app.picture.summary
    assert sum(heights(app, 1)) == pytest.approx(want.total_bytes / 1e9)
    # the left bar is always the unsharded single-GPU reference
    assert sum(heights(app, 0)) == pytest.approx(16 * want.config["params"] / 1e9)


def test_plain_dp_does_not_change_the_bar(app):
    app.zero.value = 0
    app.gpus.value = 1
    one = app.result.total_bytes
    app.gpus.value = 1024
    assert app.result.total_bytes == one


def test_custom_size_and_invalid_input_shows_our_message(app):
    app.model.value = CUSTOM
    assert not app.custom_params.disabled
    app.custom_params.value = 70
    assert app.result.total_bytes == pytest.approx(1120e9)
    app.custom_params.value = -5
    assert app.result is None and "size (B) must be a positive number" in app.error
    assert app.shown_texts() == [f"Cannot compute: {app.error}"] and "Traceback" not in app.status.value
    app.custom_params.value = 7
    assert app.error is None and app.result.total_bytes == pytest.approx(112e9)


def test_activations_toggle_adds_korthikanti_activations():
    app = MemoryWallApp(model="llama2-7b", activations=True, recompute="none")
    per_layer = memory.activation_bytes_per_layer(app._model(), 1)
    assert app.result.activations_bytes == pytest.approx(per_layer * app._model().layers)
    app.recompute.value = "full"
    per_layer = memory.activation_bytes_per_layer(app._model(), 1, recompute="full")
    assert app.result.activations_bytes == pytest.approx(per_layer * app._model().layers)
    app.activations.value = False
    assert app.result.activations_bytes == 0 and app.recompute.disabled


@settings(max_examples=40, deadline=None)
@given(
    model=st.sampled_from(["llama2-7b", "gpt3-175b", CUSTOM]),
    size=st.floats(min_value=-10, max_value=2000, allow_nan=False),
    precision=st.sampled_from(["mixed", "fp32", "fp8"]),
    gpu=st.sampled_from(["h100-sxm", "a100-40gb", "mi300x"]),
    gpus=st.integers(1, 1024),  # the slider starts at the nearest count it offers
    zero=st.sampled_from([0, 1, 2, 3]),
    activations=st.booleans(),
    recompute=st.sampled_from(["none", "selective", "full"]),
)
def test_any_control_combination_gives_a_result_or_our_message(
    model, size, precision, gpu, gpus, zero, activations, recompute
):
    app = MemoryWallApp(
        model=model,
        custom_params_b=size,
        precision=precision,
        gpu=gpu,
        gpus=gpus,
        zero=zero,
        activations=activations,
        recompute=recompute,
    )
    if app.error is None:
        assert math.isfinite(app.result.total_bytes) and app.result.total_bytes > 0
        text = app.picture.summary.lower()
        assert text == app.summary().lower() and "nan" not in text and "inf " not in text
    else:
        assert app.result is None and app.shown_texts() == [f"Cannot compute: {app.error}"]


def test_every_gpu_count_is_sent_at_once_and_the_slider_needs_no_new_data():
    # The GPU slider lives in the browser picture: the bars and text of all 46 counts are sent with the other
    # controls; moving it sends nothing new, a ZeRO stage or a model sends every count again, once.
    from distlab.widgets.common import GPU_COUNTS

    app = MemoryWallApp(model="llama2-7b", zero=3)
    assert app.picture.options == list(GPU_COUNTS) and len(app.picture.summaries) == len(GPU_COUNTS)
    for n, summary, bars in zip(GPU_COUNTS, app.picture.summaries, app.picture.frames["bars"]):
        want = memory.training_memory("llama2-7b", zero=3, dp=n, count_activations=False)
        assert summary.startswith(f"{n} GPU") and sum(bars[1]) == pytest.approx(want.total_bytes / 1e9)
    sent = []
    app.picture.observe(lambda change: sent.append(change["name"]), names=["frames", "summaries"])
    for gpus in (2, 3, 64, 1024):
        app.gpus.value = gpus
        assert app.picture.summary == app.summary()
    assert sent == []
    app.zero.value = 1
    assert sorted(sent) == ["frames", "summaries"]
    app.gpus.value = 5  # not on the slider (1-16 every count): 5 is; 17 is not and snaps to 16
    assert app.gpus.value == 5
    app.gpus.value = 17
    assert app.gpus.value == 16


def test_precision_options_are_the_distinct_memory_recipes():
    from distlab.widgets.memory_wall import PRECISION_OPTIONS

    assert PRECISION_OPTIONS == ["mixed", "fp32", "fp8"]  # bf16 and fp16 store what mixed stores
    assert set(PRECISION_OPTIONS) <= set(memory.PRECISION_RECIPES)


def test_in_a_kernel_the_wall_answers_with_the_current_count_and_fills_the_rest_in_later_turns():
    # Inside a running event loop (as in a kernel) a ZeRO-stage change prices only the slider's current GPU count
    # before returning; the others read PENDING until the loop's later turns fill them, and then every count equals
    # what the same change computes at once without an event loop.
    import asyncio

    from distlab.widgets.memory_wall import PENDING

    reference = MemoryWallApp(model="llama2-7b", zero=2)

    async def run():
        app = MemoryWallApp(model="llama2-7b", zero=3)
        app.zero.value = 2
        answered = list(app.picture.summaries)
        await app.filling
        return answered, app

    answered, app = asyncio.run(run())
    k = app.picture.index
    assert answered[k] == reference.picture.summaries[k]
    assert sum(s == PENDING for s in answered) == len(answered) - 1
    assert app.picture.summaries == reference.picture.summaries
    assert app.picture.frames == reference.picture.frames


def test_the_legend_names_only_parts_the_bars_draw():
    # issue 31: with activations not counted the legend still listed "activations", a colour no bar drew
    app = MemoryWallApp()
    assert not app.activations.value and "activations" not in app.picture.frames["parts"]
    for frames_app in (app, MemoryWallApp(activations=True)):
        frames = frames_app.picture.frames
        for k, name in enumerate(frames["parts"]):
            assert any(bar[k] > 0 for position in frames["bars"] for bar in position), name
    assert "activations" in MemoryWallApp(activations=True).picture.frames["parts"]


def test_bar_totals_are_written_as_the_text_writes_them():
    # issue 31: a 70B model's states on one GPU were '1190 GB' on the bar (the browser wrote GB with 3 digits) and
    # '1.19 TB' in the text. Llama-2-70B: 68.98e9 x 16 B = 1.10 TB, written '1.1 TB' on the bars as in the text
    app = MemoryWallApp(model="llama2-70b", gpu="h100-sxm", gpus=1, zero=0)
    i = app.picture.options.index(app.gpus.value)
    totals = app.picture.frames["totals"][i]
    assert totals[0] == totals[1] and totals[0].endswith(" TB") and f"{totals[0]} per GPU" in app.picture.summary
    for n, bars, written in zip(app.picture.options, app.picture.frames["bars"], app.picture.frames["totals"]):
        want = memory.training_memory("llama2-70b", dp=n, count_activations=False).total_bytes
        assert written[1] == format_bytes(want) and sum(bars[1]) == pytest.approx(want / 1e9)


@pytest.mark.parametrize("kind", ["memory wall", "ZeRO bars"])
@pytest.mark.parametrize("typed", [-5, 0])
def test_a_custom_size_that_is_not_positive_is_our_message_in_the_boxs_own_units(kind, typed):
    """Issue 31 (screenshots of lessons 1 and 3): -5 typed in the "size (B)" box, in billions of parameters, read
    "params must be positive, got -5e+09": a name and a unit the student never typed. The message names the box and
    repeats its number."""
    from distlab.widgets.data_parallel_zero import ZeroMemoryApp
    from distlab.widgets.memory_wall import CUSTOM

    app = MemoryWallApp(model="llama2-7b") if kind == "memory wall" else ZeroMemoryApp(model="llama2-7b")
    app.model.value = CUSTOM
    app.custom_params.value = typed
    assert app.custom_params.description == "size (B)"
    assert app.shown_texts() == [
        f"Cannot compute: size (B) must be a positive number of billions of parameters, got {typed}"
    ]
    app.close()
