"""Headless tests of the lesson 5 and 6 apps: set controls, assert on results, artists and messages."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st

from distlab import mesh, tensor
from distlab.widgets import parallelism_3d as mesh_widgets
from distlab.widgets import tensor_parallel as tp_widgets
from distlab.widgets.parallelism_3d import MAX_GRID_GPUS, MeshApp
from distlab.widgets.parallelism_3d import PENDING as MESH_PENDING
from distlab.widgets.tensor_parallel import TensorParallelApp, gpt_layer

# --- lesson 5: tensor parallelism ----------------------------------------------------------------


@pytest.fixture(scope="module")
def tp_app():
    return TensorParallelApp(tp=8, hidden=4096, seq_len=4096, link="nvlink4")


def test_tp_app_shows_what_distlab_tensor_computes(tp_app):
    want = tensor.tp_layer_cost(gpt_layer(4096, 4096), 8, seq_len=4096, link="nvlink4", gpus_per_node=8)
    assert tp_app.error is None
    assert tp_app.result.comm_time_s == pytest.approx(want.comm_time_s)
    assert tp_app.result.compute_time_s == pytest.approx(want.compute_time_s)
    compute_bar, comm_bar = tp_app.bars.bars
    # bars start at the axis' left end (1 us) and end at the value
    assert compute_bar.get_x() + compute_bar.get_width() == pytest.approx(want.compute_time_s)
    assert comm_bar.get_x() + comm_bar.get_width() == pytest.approx(want.comm_time_s)
    assert "4 ring all-reduces" in tp_app.status.value


def test_infiniband_makes_communication_dominate_in_place(tp_app):
    ids = [id(b) for b in tp_app.bars.bars]
    tp_app.link.value = "ib-ndr"
    assert tp_app.result.ratio > 1 and "communication exceeds compute" in tp_app.status.value
    assert [id(b) for b in tp_app.bars.bars] == ids
    tp_app.link.value = "nvlink4"


def test_the_tp_slider_offers_only_degrees_the_layer_and_link_allow(tp_app):
    # before: 16, 32 and 64 were offered on NVLink (a TP group must stay in a node of 8) and 64 for a 32-head
    # layer, and picking them blanked the chart
    assert tp_app.tp.options == (1, 2, 4, 8)  # h = 4096: 32 heads; nvlink4 inside a node of 8 GPUs
    tp_app.link.value = "ib-ndr"  # across nodes TP may leave the node (and is slow): up to the 32 heads
    assert tp_app.tp.options == (1, 2, 4, 8, 16, 32) and tp_app.tp.value == 8
    tp_app.tp.value = 16
    assert tp_app.error is None and tp_app.result.tp == 16
    tp_app.hidden.value = 8192  # 64 heads: 64 is offered now
    assert tp_app.tp.options[-1] == 64 and tp_app.result.tp == 16
    tp_app.link.value = "nvlink4"  # back in the node: the degree drops to the largest one allowed
    assert tp_app.tp.options == (1, 2, 4, 8) and tp_app.tp.value == 8 and tp_app.error is None
    assert tp_app.result.tp == 8
    tp_app.hidden.value = 4096


def test_sequence_parallel_and_fp8_in_the_app(tp_app):
    before = tp_app.result.comm_time_s
    tp_app.sequence_parallel.value = True
    # the 4 pairs take the all-reduces' time and the backward's 2 re-gathers half an all-reduce each: 5/4 of it
    assert tp_app.result.comm_time_s == pytest.approx(5 / 4 * before)
    assert "reduce-scatter + all-gather" in tp_app.status.value and "2 backward re-gathers" in tp_app.status.value
    compute = tp_app.result.compute_time_s
    tp_app.precision.value = "fp8"
    # fp8 GEMMs write bf16 outputs: the all-reduce still carries b s h x 2 B; the compute halves (fp8 peak)
    assert tp_app.result.message_bytes == pytest.approx(4096 * 4096 * 2)
    assert tp_app.result.comm_time_s == pytest.approx(5 / 4 * before)
    assert tp_app.result.compute_time_s == pytest.approx(compute * 989.4 / 1978.9)
    tp_app.precision.value = "mixed"
    tp_app.sequence_parallel.value = False


def test_tp_app_controls_never_force_a_full_redraw():
    app = TensorParallelApp()
    calls = []
    app.renderer.refresh = lambda full=False: calls.append(full)
    app.tp.value, app.seq_len.value, app.hidden.value, app.link.value = 4, 1024, 8192, "ib-ndr"
    app.tp.value = 16  # invalid on some setups, still a blit
    assert calls and not any(calls)


@settings(max_examples=20, deadline=None)
@given(
    tp=st.sampled_from(tp_widgets.TP_DEGREES),
    hidden=st.sampled_from(tp_widgets.HIDDEN_SIZES),
    seq=st.sampled_from(tp_widgets.SEQ_LENS),
    b=st.integers(1, 16),
    link=st.sampled_from(tp_widgets.LINKS),
    precision=st.sampled_from(["mixed", "fp8"]),
    sp=st.booleans(),
    gpu=st.sampled_from(["h100-sxm", "a100-80gb"]),
)
def test_any_tp_control_combination_gives_a_result_or_our_message(tp, hidden, seq, b, link, precision, sp, gpu):
    app = TensorParallelApp(
        tp=tp,
        hidden=hidden,
        seq_len=seq,
        micro_batch_size=b,
        link=link,
        precision=precision,
        sequence_parallel=sp,
        gpu=gpu,
    )
    if app.error is None:
        assert math.isfinite(app.result.ratio) and app.result.compute_time_s > 0
    else:
        assert app.result is None and app.shown_texts() == [f"Cannot compute: {app.error}"]


# --- lesson 6: the GPU assignment grid ------------------------------------------------------------


def outlined(app, rank):
    """The ranks the browser outlines for picked `rank`, per kind: those sharing its group index in the frames sent
    (decoded here as the grid module does, independently of distlab.mesh.group_of)."""
    f = app.picture.frames
    return {d: [r for r, g in enumerate(f["groups"][d]) if g == f["groups"][d][rank]] for d in ("tp", "dp", "pp")}


def test_mesh_app_megatron_example_and_picked_groups():
    app = MeshApp(dp=2, tp=2, pp=4, gpus_per_node=8, picked=5)
    lay = app.result
    assert lay.groups("dp").tolist() == mesh.layout(16, tp=2, pp=4).groups("dp").tolist()
    assert len(app.picture.frames["x"]) == 16 and app.picture.max == 15 and app.pick.value == 5
    # tp-dp-pp, tp fastest: rank = tp + 2 dp + 4 pp; GPU 5 = (tp 1, dp 0, pp 1): TP {4, 5}, DP {5, 7},
    # PP {1, 5, 9, 13}
    assert outlined(app, 5) == {"tp": [4, 5], "dp": [5, 7], "pp": [1, 5, 9, 13]}
    for d in ("tp", "dp", "pp"):
        assert outlined(app, 5)[d] == lay.group_of(5, d)
    text = app.picture.summary
    assert "GPU 5 on node 0: tp rank 1, dp rank 0, pipeline stage 1" in text
    assert "PP group [1, 5, 9, 13]: across nodes 0, 1 (inter-node link)" in text
    assert text == app.summary() and app.status.value == ""  # the text is under the picture


def test_picking_needs_no_new_data_and_colour_change_resends_only_the_fills():
    app = MeshApp(dp=4, tp=4, pp=2)
    frames, summaries = app.picture.frames, list(app.picture.summaries)
    for r in (13, 0, 31):
        app.pick.value = r
        assert app.picture.frames is frames and app.picture.summaries == summaries
        assert app.picture.summary == app.summary() and f"GPU {r} on node {r // 8}:" in app.picture.summary
    app.colour_by.value = "tp"
    fill = app.picture.frames["fill"]
    assert fill[12] == fill[13] and fill[13] != fill[16]  # same / other TP group (4 consecutive ranks)
    assert app.picture.summaries == summaries and app.picture.frames["groups"] == frames["groups"]
    app.colour_by.value = "stage"  # tp-dp-pp: ranks 0-15 stage 0, 16-31 stage 1
    assert app.picture.frames["fill"] == [0] * 16 + [1] * 16 and app.picture.frames["fill_kind"] == "ramp"


def test_a_new_colour_after_a_change_back_to_a_remembered_layout_keeps_every_gpus_text():
    """Issue 31 (screenshots of lesson 6): GPUs/node 8 -> 16 -> 8 (the second layout remembered: shown complete at
    once), then a new colour: the grid's text stayed "describing this GPU ..." for every GPU, with nothing left to
    fill it. The text does not depend on the colour, so it is the text shown before the colour change."""
    app = MeshApp(dp=4, tp=4, pp=4, gpus_per_node=8, colour_by="dp")
    summaries = list(app.picture.summaries)
    app.gpus_per_node.value = 16
    app.gpus_per_node.value = 8
    app.colour_by.value = "pp"
    assert list(app.picture.summaries) == summaries
    assert MESH_PENDING not in app.picture.summaries
    assert app.shown_texts()[0] == summaries[0]


def test_a_new_size_sends_a_new_grid():
    app = MeshApp(dp=2, tp=4, pp=2)
    app.dp.value = 4  # 4 x 4 x 2 = 32 GPUs
    assert len(app.picture.frames["x"]) == 32 and len(app.picture.summaries) == 32
    app.gpus_per_node.value = 4
    assert app.picture.frames["gpus_per_node"] == 4 and "8 nodes of 4" in app.picture.summary
    # the canvas is as tall as the grid needs at the scale its width allows: a few nodes leave no empty band
    assert app.picture.height < mesh_widgets.GRID_MAX_HEIGHT
    app.dp.value, app.tp.value, app.pp.value = 8, 8, 8  # 512 GPUs: 128 nodes of 4, as tall as allowed
    assert app.picture.height == mesh_widgets.GRID_MAX_HEIGHT


def test_reversed_order_warns_and_tp_beyond_a_node_warns():
    app = MeshApp(dp=2, tp=4, pp=4, order="pp-dp-tp")
    # shown once, in red under the grid (grid.js draws frames["note"]; issue 31: it printed twice, and in the status
    # panel it did not follow a change drawn from the browser's cache); the grid's own text does not repeat it
    note = app.picture.frames["note"]
    assert note.count("warning: TP leaves the node") == 1 and "warning" not in app.status.value
    assert "warning" not in app.picture.summary and " ".join(app.shown_texts()).count("TP leaves the node") == 1
    app.order.value = "tp-dp-pp"
    assert "warning" not in app.status.value + app.picture.summary + app.picture.frames["note"]
    app.tp.value = 16
    assert "tp=16 is more than the 8 GPUs of a node" in app.picture.frames["note"]


def test_too_many_gpus_is_our_message_and_pick_is_clamped():
    app = MeshApp(dp=4, tp=4, pp=4, picked=63)
    app.pp.value = 16  # 4 x 4 x 16 = 256 GPUs: drawn
    assert app.error is None and app.pick.value == 63
    app.dp.value = 32  # 2048 GPUs
    assert app.result is None and f"the grid draws at most {MAX_GRID_GPUS}" in app.error
    assert app.shown_texts() == [f"Cannot compute: {app.error}"] and "Traceback" not in app.status.value
    assert app.picture.summary == f"Cannot compute: {app.error}" and app.picture.frames == {}
    app.dp.value, app.pp.value = 1, 4
    assert app.error is None and app.pick.value == 15 and app.pick.max == 15


def test_in_a_kernel_the_grid_answers_with_the_picked_gpu_and_fills_the_rest_in_later_turns():
    import asyncio

    async def run():
        app = MeshApp(dp=4, tp=4, pp=4, picked=9)
        await app.filling
        app.pp.value = 8
        answered = list(app.picture.summaries)
        await app.filling
        return answered, app

    answered, app = asyncio.run(run())
    assert len(answered) == 128 and "GPU 9 on node 1:" in answered[9] and answered[9] == app.picture.summaries[9]
    assert all(text == mesh_widgets.PENDING for r, text in enumerate(answered) if r != 9)
    once = MeshApp(dp=4, tp=4, pp=8, picked=9)  # outside an event loop: all at once
    assert app.picture.summaries == once.picture.summaries and app.picture.frames == once.picture.frames


@settings(max_examples=20, deadline=None)
@given(
    dp=st.integers(1, 32),
    tp=st.integers(1, 16),
    pp=st.integers(1, 16),
    g=st.sampled_from([2, 4, 8, 16]),
    order=st.sampled_from(mesh_widgets.ORDERS),
    colour=st.sampled_from([v for _, v in mesh_widgets.COLOUR_BY]),
    picked=st.integers(0, 600),
)
def test_any_mesh_control_combination_gives_a_result_or_our_message(dp, tp, pp, g, order, colour, picked):
    app = MeshApp(
        dp=dp, tp=tp, pp=pp, gpus_per_node=g, order=order, colour_by=colour, picked=min(picked, dp * tp * pp - 1)
    )
    if app.error is None:
        assert app.result.world_size == dp * tp * pp <= MAX_GRID_GPUS
        assert len(app.picture.frames["x"]) == len(app.picture.summaries) == app.result.world_size
        assert app.picture.summary == app.summary()
    else:
        assert app.result is None and app.shown_texts() == [f"Cannot compute: {app.error}"]
        assert app.picture.summary == f"Cannot compute: {app.error}"


@pytest.mark.parametrize("module", [tp_widgets, mesh_widgets])
def test_apps_listed_for_the_fuzz_tests_build_without_arguments(module):
    for app_class in module.APPS:
        app = app_class()
        assert app.error is None and app.result is not None


def test_a_tp_layer_slower_to_communicate_than_to_compute_is_a_result_not_an_error():
    # issue 31: on ib-ndr the text turned red (the colour of our errors) although nothing is wrong
    from distlab.widgets.tensor_parallel import TensorParallelApp

    app = TensorParallelApp()
    app.link.value = "ib-ndr"
    assert app.error is None and app.result.ratio > 1
    assert "#b3261e" not in app.status.value
