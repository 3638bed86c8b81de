"""distlab.fsdp (lesson 11 §2): FSDP2 / HSDP layer by layer. Values derived by hand (shown), from the ZeRO
paper's volumes, from invariants of the schedule, and (tests/core/test_verify_sharding_torch.py) from torch."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distlab import hardware, memory, models
from distlab.errors import ConfigurationError, DistlabError
from distlab.fsdp import (
    MAX_PREFETCH,
    collectives_per_microbatch,
    fsdp_timeline,
    layer_by_layer_exposed,
)
from distlab.production import compare_sharding, sharding_plan

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
times = st.floats(0.01, 5.0, allow_nan=False, allow_infinity=False)


# --------------------------------------------------------------------------- the schedule by hand


def test_prefetch_one_hides_all_but_the_first_gather_and_the_last_reduction():
    # f = 1, b = 2, g = r = 0.5, L = 4, d = 1. Forward: AG0 [0, .5], F0 [.5, 1.5]; AG1 issued at F0's start,
    # [.5, 1]; F1 [1.5, 2.5]; ... F3 [3.5, 4.5]. Backward: B3 [4.5, 6.5] (last layer kept); AG2 issued at B3's
    # start [4.5, 5]; RS3 [6.5, 7]; B2 [6.5, 8.5]; AG1 [7, 7.5]; RS2 [8.5, 9]; B1 [8.5, 10.5]; AG0 [9, 9.5];
    # RS1 [10.5, 11]; B0 [10.5, 12.5]; RS0 [12.5, 13]. Step 13 = compute 12 + 0.5 + 0.5.
    tl = fsdp_timeline(1.0, 2.0, 0.5, 0.5, layers=4)
    assert tl.step_s == 13.0 and tl.exposed_s == 1.0
    assert tl.f_start.tolist() == [0.5, 1.5, 2.5, 3.5]
    assert tl.b_start.tolist() == [10.5, 8.5, 6.5, 4.5]
    assert tl.bg_start[:3].tolist() == [9.0, 7.0, 4.5] and math.isnan(tl.bg_start[3])
    assert layer_by_layer_exposed(1.0, 2.0, 0.5, 0.5, 4) == 1.0


def test_without_prefetch_every_gather_shows():
    # d = 0: forward AG_l issued when F_{l-1} ends: 4 x 0.5 exposed. Backward: RS_l is issued at B_l's end,
    # then AG_{l-1}: B_{l-1} waits 0.5 + 0.5 for each of layers 2, 1, 0; the last RS0 0.5: 2 + 3 + 0.5 = 5.5
    assert fsdp_timeline(1.0, 2.0, 0.5, 0.5, layers=4, prefetch=0).exposed_s == 5.5


def test_without_resharding_the_backward_gathers_nothing():
    # reshard_after_forward=False (ZeRO-2-like): only the first gather and the last reduction show, and every
    # layer stays gathered from forward to backward
    tl = fsdp_timeline(1.0, 2.0, 0.5, 0.5, layers=4, reshard_after_forward=False)
    assert np.isnan(tl.bg_start).all() and tl.exposed_s == 1.0 and tl.peak_gathered == 4
    assert fsdp_timeline(1.0, 2.0, 0.5, 0.5, layers=4).peak_gathered == 2


def test_a_gather_longer_than_its_layer_shows_the_difference():
    # g = 3 > f = 1, d = 1: AG0 [0, 3], F0 [3, 4]; AG1 [3, 6], F1 [6, 7]; AG2 [6, 9], F2 [9, 10]: the forward
    # shows g + (L-1)(g - f) = 3 + 2 x 2 = 7
    tl = fsdp_timeline(1.0, 100.0, 3.0, 0.0, layers=3)
    assert tl.f_end[-1] - 3 * 1.0 == 7.0
    assert tl.gather_exposed_per_layer_s == 2.0


def test_collective_counts():
    # forward: one gather per layer; backward: again for every resharded layer (all but the last)
    assert collectives_per_microbatch(4) == {"all-gather": 7, "reduce-scatter": 4, "all-reduce": 0}
    assert collectives_per_microbatch(4, False, 3) == {"all-gather": 4, "reduce-scatter": 4, "all-reduce": 4}
    tl = fsdp_timeline(1.0, 2.0, 0.5, 0.5, layers=4)
    kinds = [k for k, _ in tl.comm_order()]
    assert kinds.count("all-gather") == 7 and kinds.count("reduce") == 4


# --------------------------------------------------------------------------- invariants (hypothesis)


@SETTINGS
@given(times, times, st.floats(0.0, 5.0), st.floats(0.0, 5.0), st.integers(1, 40), st.integers(0, 4), st.booleans())
def test_exposure_bounds(f, b, g, r, layers, d, reshard):
    tl = fsdp_timeline(f, b, g, r, layers, prefetch=d, reshard_after_forward=reshard)
    # the first gather and the last reduction overlap nothing; nothing is exposed beyond the stream's busy time
    assert tl.exposed_s >= g + r - 1e-9
    assert tl.exposed_s <= tl.communication_s + 1e-9
    # compute never overlaps itself and runs in order
    assert np.all(np.diff(tl.f_start) >= f - 1e-9) and np.all(-np.diff(tl.b_start) >= b - 1e-9)
    # the vectorised fast path agrees with the validated timeline
    assert layer_by_layer_exposed(f, b, g, r, layers, d, reshard) == pytest.approx(tl.exposed_s, abs=1e-9)


@SETTINGS
@given(times, times, st.floats(0.0, 5.0), st.floats(0.0, 5.0), st.integers(1, 20))
def test_more_prefetch_never_hurts_and_resharding_never_helps(f, b, g, r, layers):
    exposed = [fsdp_timeline(f, b, g, r, layers, prefetch=d).exposed_s for d in range(4)]
    assert all(later <= earlier + 1e-9 for earlier, later in zip(exposed, exposed[1:]))
    kept = fsdp_timeline(f, b, g, r, layers, reshard_after_forward=False).exposed_s
    assert kept <= exposed[1] + 1e-9


@settings(max_examples=300, deadline=None)
@given(times, times, st.floats(0.0, 5.0), st.floats(0.0, 5.0), st.integers(1, 30), st.integers(0, 4), st.booleans())
def test_the_fast_paths_closed_form_is_the_simulation(f, b, g, r, layers, d, reshard):
    # layer_by_layer_exposed uses closed forms (derived in fsdp._closed_form_step's docstring) and simulates only
    # prefetch >= 2 with resharding when the communication outlasts the backward: it must equal the timeline
    want = fsdp_timeline(f, b, g, r, layers, prefetch=d, reshard_after_forward=reshard).exposed_s
    assert layer_by_layer_exposed(f, b, g, r, layers, d, reshard) == pytest.approx(want, rel=1e-9, abs=1e-9)


def test_fast_path_broadcasts():
    out = layer_by_layer_exposed(np.array([1.0, 2.0, 0.25]), 2.0, 0.5, 0.5, 4)
    assert out.tolist() == [fsdp_timeline(x, 2.0, 0.5, 0.5, 4).exposed_s for x in (1.0, 2.0, 0.25)]
    # a sweep over pipeline depths: a layer count per configuration
    layers = np.array([[80], [40], [20]])
    gathers = np.array([0.5, 1.5])
    got = layer_by_layer_exposed(1.0, 2.0, gathers, 0.5, layers)
    want = [[fsdp_timeline(1.0, 2.0, g, 0.5, int(n)).exposed_s for g in gathers] for n in layers[:, 0]]
    assert got.shape == (3, 2) and np.allclose(got, want, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------- FSDP vs HSDP on a cluster


@pytest.fixture(scope="module")
def llama7b_on_4_nodes():
    return compare_sharding("llama2-7b", "dgx-h100", nodes=4)


def test_state_and_gathered_memory(llama7b_on_4_nodes):
    full, hybrid = llama7b_on_4_nodes
    m = models.model("llama2-7b")
    P, layer = m.parameter_count(), m.params_per_layer()
    # sharded model state: 16 B/param over the shard group (ZeRO-3 over 32 GPUs, or over the 8 of a node)
    assert full.state_bytes == pytest.approx(16 * P / 32) and hybrid.state_bytes == pytest.approx(16 * P / 8)
    assert full.state_bytes == pytest.approx(sum(memory.model_state_bytes(P, zero=3, dp=32)))
    # gathered: the layer computing + 1 prefetched, in bf16, and one layer's bf16 gradients before the RS
    assert full.gathered_bytes == pytest.approx(2 * layer * 2 + 2 * layer)


def test_traffic_placed_as_nccl_runs_it_and_hsdp_sends_the_network_a_shards_all_reduce(llama7b_on_4_nodes):
    full, hybrid = llama7b_on_4_nodes
    m = models.model("llama2-7b")
    L = m.layers
    layer = 2 * m.parameter_count() / L  # the step model's layer in bf16: the embedding and output spread over L
    assert full.layer_bytes == pytest.approx(layer)
    # FSDP: (2L - 1) gathers and L reduce-scatters per microbatch (ZeRO's 3M less the last layer's backward gather,
    # Rajbhandari et al. 2020, Sec. 7.2.2), each hierarchical as NCCL runs it: a ring of 8 on NVLink sends 7/8 of
    # the layer; the ring of 4 nodes sends 3/4 of each GPU's 1/8 share through that GPU's own NIC
    assert full.algorithm == "hierarchical"
    assert full.nvlink_sent_bytes == pytest.approx((2 * L - 1 + L) * 7 / 8 * layer)
    assert full.network_sent_bytes == pytest.approx((2 * L - 1 + L) * 3 / 4 * layer / 8)
    # HSDP: gathers and reduce-scatters over the 8 GPUs of a node; the network carries only the ring
    # all-reduce of the 1/8 shard across 4 nodes: 2 x 3/4 x layer / 8 per layer
    assert hybrid.nvlink_sent_bytes == pytest.approx((2 * L - 1 + L) * 7 / 8 * layer)
    assert hybrid.network_sent_bytes == pytest.approx(L * 2 * 3 / 4 * layer / 8)
    # (95 x 3/4) / (32 x 2 x 3/4) = 95 / 64: FSDP's gathers send the network only half again what HSDP's
    # all-reduces do (the flat ring through each GPU's NIC, the strawman, would send 95 x 31/32 x layer: 10x more)
    assert full.network_sent_bytes / hybrid.network_sent_bytes == pytest.approx(95 / 64)


def test_collective_times_by_hand_at_line_rate():
    # a fixed efficiency prices the links at line rate (the calibrated model at their achieved shares): NVLink 4
    # 450 GB/s per direction and 3.4 us, NDR 50 GB/s per GPU and 9.6 us; one layer M = 2 P / L bytes
    full, hybrid = compare_sharding("llama2-7b", "dgx-h100", nodes=4, efficiency=0.5)
    m = models.model("llama2-7b")
    M = 2 * m.parameter_count() / m.layers
    nv = hardware.link("nvlink4")
    cl = hardware.cluster("dgx-h100", 4)
    x_bw, x_lat = cl.fabric_bandwidth_per_gpu(same_local_rank=True), cl.fabric.latency
    assert (nv.bandwidth, x_bw) == (450e9, 50e9)
    inside = 7 * (nv.latency + M / (8 * nv.bandwidth))  # ring all-gather over the 8 GPUs of a node
    across = 3 * (x_lat + M / 8 / (4 * x_bw))  # ring all-gather of the 1/8 share over the 4 nodes
    assert full.gather_s == pytest.approx(inside + across, rel=1e-12)
    assert full.reduce_s == pytest.approx(inside + across, rel=1e-12)
    assert hybrid.gather_s == pytest.approx(inside, rel=1e-12)
    shard_all_reduce = 2 * 3 * (x_lat + M / 8 / (4 * x_bw))  # ring all-reduce of the 1/8 shard over 4 replicas
    assert hybrid.reduce_s == pytest.approx(inside + shard_all_reduce, rel=1e-12)
    # with one layer of prefetch both expose the first gather and the last reduction only, and FSDP's
    # reduce-scatter + all-gather between nodes is exactly HSDP's shard all-reduce: the same exposed time
    assert full.exposed_s == pytest.approx(hybrid.exposed_s, rel=1e-12)
    assert full.exposed_s == pytest.approx(full.gather_s + full.reduce_s, rel=1e-12)
    # without prefetch every gather shows, and FSDP's cross the network too: HSDP exposes less
    f0, h0 = compare_sharding("llama2-7b", "dgx-h100", nodes=4, efficiency=0.5, prefetch=0)
    assert h0.exposed_s < f0.exposed_s


def test_one_node_full_sharding_uses_nvlink():
    plan = sharding_plan("llama2-7b", "dgx-h100", nodes=1)
    assert plan.network_sent_bytes == 0 and plan.nvlink_sent_bytes > 0 and plan.replicas == 1
    assert plan.algorithm == "ring"


def test_recomputation_lengthens_the_backward_not_the_traffic():
    # full recomputation adds one layer's forward (not the logits, spread over the layers in the forward) to the
    # backward: 4096 x (2 x 202,383,360 + 4 x 4096 x 4096) FLOP at half of 989.4 TFLOP/s
    plain = sharding_plan("llama2-7b", "dgx-h100", nodes=2, efficiency=0.5, seq_len=4096)
    full = sharding_plan("llama2-7b", "dgx-h100", nodes=2, recompute="full", efficiency=0.5, seq_len=4096)
    layer_forward = 4096 * (2 * 202_383_360 + 4 * 4096 * 4096) / (0.5 * 989.4e12)
    assert full.timeline.backward_s == pytest.approx(plain.timeline.backward_s + layer_forward, rel=1e-12)
    assert full.network_sent_bytes == plain.network_sent_bytes


def test_summary_names_the_numbers(llama7b_on_4_nodes):
    text = llama7b_on_4_nodes[1].summary()
    assert "HSDP: shard over 8 GPUs of a node, 4 replicas" in text and "13.5 GB sharded state" in text


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: fsdp_timeline(0, 1, 1, 1, 4), "forward_s"),
        (lambda: fsdp_timeline(1, 1, -1, 1, 4), "gather_s"),
        (lambda: fsdp_timeline(1, 1, 1, 1, 0), "layers"),
        (lambda: fsdp_timeline(1, 1, 1, 1, 10**6), "layers=1000000"),
        (lambda: fsdp_timeline(1, 1, 1, 1, 4, prefetch=MAX_PREFETCH + 1), "prefetch"),
        (lambda: fsdp_timeline(1, 1, 1, 1, 4, prefetch=1.5), "prefetch"),
        (lambda: fsdp_timeline(1, 1, 1, 1, 4, reshard_after_forward="yes"), "reshard_after_forward"),
        (lambda: sharding_plan("llama2-7b", "dgx-h100", nodes=1, sharding="hybrid"), "replicates across nodes"),
        (lambda: sharding_plan("llama2-7b", "dgx-h100", sharding="zero"), "sharding='zero'"),
        (lambda: sharding_plan("llama2-7b", "dgx-h100", efficiency=1.5), "efficiency"),
        (lambda: sharding_plan("llama2-7b", "dgx-h100", seq_len=10**8), "too large"),
        (lambda: sharding_plan("llama2-7b", "dgx-h100", recompute="most"), "recompute"),
        (lambda: collectives_per_microbatch(0), "layers"),
        # the API fuzz test's findings (issue 19): strings, NaN, infinity, 10**68, complex numbers, arrays that do
        # not broadcast, fractional layers, and a simulated schedule past MAX_LAYERS reached layer_by_layer_exposed
        (lambda: layer_by_layer_exposed("5 seconds", 1, 1, 1, 4), "forward_s"),
        (lambda: layer_by_layer_exposed(1, float("nan"), 1, 1, 4), "backward_s"),
        (lambda: layer_by_layer_exposed(1, 1, float("inf"), 1, 4), "gather_s"),
        (lambda: layer_by_layer_exposed(1, 1, 1, -(10**68), 4), "reduce_scatter_s"),
        (lambda: layer_by_layer_exposed(1, 1, 1, 1, 0), "layers"),
        (lambda: layer_by_layer_exposed(1, 1, 1, 1, 2.5), "whole numbers"),
        (lambda: layer_by_layer_exposed(1, 1, 1, 1, 4, prefetch=1 + 2j), "prefetch"),
        (lambda: layer_by_layer_exposed(1, 1, 1, 1, 4, reshard_after_forward=0.5), "reshard_after_forward"),
        (lambda: layer_by_layer_exposed([1.0, 2.0], [1.0, 2.0, 3.0], 1, 1, 4), "broadcast"),
        (lambda: layer_by_layer_exposed(1, 1, 2, 2, 2**31, prefetch=2), "more than 1024"),
        (lambda: layer_by_layer_exposed(1e308, 1e308, 1, 1, 4), "not a finite number"),
        (lambda: fsdp_timeline(1e308, 1, 1, 1, 4), "not a finite number"),
        (lambda: sharding_plan("llama2-7b", "dgx-h100", sharding=np.array([1.0, 2.0])), "sharding="),
    ],
)
def test_invalid_inputs_raise_our_errors(call, match):
    with pytest.raises(ConfigurationError, match=match):
        call()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["llama2-7b", "llama2-70b", "gpt3-175b", "megatron-gpt-1.7b"]),
    st.sampled_from(["dgx-h100", "dgx-a100"]),
    st.integers(-1, 64),
    st.sampled_from(["full", "hybrid", "x"]),
    st.integers(-1, 8),
    st.integers(-1, 17),
    st.booleans(),
    st.sampled_from(["none", "selective", "full"]),
    st.floats(-0.5, 1.5),
    st.sampled_from([None, 1024, 131072]),
)
def test_any_plan_is_finite_or_our_error(model, node, nodes, sharding, b, d, reshard, recompute, eff, seq):
    try:
        plan = sharding_plan(
            model,
            node,
            nodes=nodes,
            sharding=sharding,
            micro_batch_size=b,
            prefetch=d,
            reshard_after_forward=reshard,
            recompute=recompute,
            efficiency=eff,
            seq_len=seq,
        )
    except DistlabError:
        return
    values = [plan.memory_bytes, plan.network_sent_bytes, plan.nvlink_sent_bytes, plan.exposed_s, plan.timeline.step_s]
    assert all(math.isfinite(v) and v >= 0 for v in values)


@settings(max_examples=60, deadline=None)
@given(
    st.one_of(st.integers(-3, 2000), st.floats(allow_nan=True), st.text(max_size=3), st.none()),
    st.one_of(st.booleans(), st.integers(0, 2), st.none()),
    st.one_of(st.integers(-2, 10), st.floats(allow_nan=True)),
)
def test_collective_counts_are_whole_or_our_error(layers, reshard, replicas):
    try:
        counts = collectives_per_microbatch(layers, reshard, replicas)
    except DistlabError:
        return
    assert all(isinstance(v, int) and v >= 0 for v in counts.values())
    assert counts["reduce-scatter"] == layers and counts["all-gather"] in (layers, 2 * layers - 1)


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_compute_is_the_step_models(recompute):
    """A layer's compute is the step model's own (training.step_model_array's per-layer forward and backward, no
    second pricing beside it): on one DGX H100 node, ZeRO-3, one 4,096-token sequence per GPU, the 32 layers'
    forward + backward are the step model's whole compute."""
    from distlab import training

    plan = sharding_plan("llama2-7b", "dgx-h100", nodes=1, seq_len=4096, recompute=recompute)
    est = training.estimate(
        "llama2-7b",
        hardware.cluster("dgx-h100", 1, "ib-ndr"),
        global_batch=8,
        seq_len=4096,
        zero=3,
        recompute=recompute,
    )
    layers = 32 * (plan.timeline.forward_s + plan.timeline.backward_s)
    assert est.compute_s == pytest.approx(layers, rel=1e-12)
    # a number keeps Lesson 7 §1's fixed share: forward = the layer's FLOPs plus its share of the logits' (2 h V per
    # token, over 32 layers) / (peak x efficiency)
    fixed = sharding_plan("llama2-7b", "dgx-h100", nodes=1, seq_len=4096, recompute=recompute, efficiency=0.5)
    per_token = 2 * 202_383_360 + 4 * 4096 * 4096 + 2 * 4096 * 32_000 / 32
    assert fixed.timeline.forward_s == pytest.approx(4096 * per_token / (0.5 * 989.4e12), rel=1e-12)
