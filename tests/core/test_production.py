"""Lesson 8's physics (distlab.production, the rail/oversubscription model, the OOM triage): hand-derived
values, independent implementations, invariants and refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from distlab import collectives, dataparallel, efficiency, hardware, memory, production, training, triage
from distlab.errors import ConfigurationError

SCENARIO = dict(global_batch=256, seq_len=8192)
FIT = dict(tp=8, pp=4, zero=1, recompute="selective", sequence_parallel=True)


# ----------------------------------------------------------------------------------------
# 1. Bucketing


def test_best_bucket_count_hand_derived():
    # N = 2, alpha = 0.5 ms: a bucket pays L = 2(N-1) alpha = 1 ms of latency; M = 1 GB at 10 GB/s:
    # M s = 2(N-1)/N x M / beta = 100 ms; backward T = 200 ms. exposed(B) = max(L + Ms/B, B L + Ms - T + T/B)
    # = max(1 + 100/B, B - 100 + 200/B) ms; the branches meet at B^2 - 101 B + 100 = 0 -> B = 100
    # = (T - Ms) / L, where exposed = 1 + 100/100 = 2 ms (B = 99: 2.0101 ms; B = 101: 2.98 ms).
    sweep = production.bucket_sweep(1e9, 0.2, 2, bandwidth=1e10, latency=0.5e-3, max_buckets=400)
    assert sweep.best_buckets == 100
    assert sweep.best_exposed_s == pytest.approx(2e-3, rel=1e-9)
    assert sweep.at(99)["exposed_s"] == pytest.approx(1e-3 + 0.1 / 99, rel=1e-9)
    assert sweep.at(101)["exposed_s"] == pytest.approx(101e-3 - 0.1 + 0.2 / 101, rel=1e-9)
    assert sweep.at(1)["exposed_s"] == pytest.approx(0.101, rel=1e-9)  # one bucket: nothing hides
    # a 10 MB bucket: 2(N-1)/N x 10 MB / 10 GB/s = 1 ms of bytes after 1 ms of latency: half the link's rate
    assert sweep.at(100)["bandwidth_share"] == pytest.approx(0.5, rel=1e-9)


def test_sweep_equals_the_bucketed_timeline_and_brute_force():
    grad, backward, dp = 3.2e9, 0.2, 16  # bytes 2 x 15/16 x 3.2 GB / 50 GB/s = 120 ms, L = 30 x 9.6 us: B* = 277.8
    sweep = production.bucket_sweep(grad, backward, dp, link="ib-ndr", max_buckets=300)
    brute = [
        dataparallel.bucketed_overlap(grad, backward, dp, buckets=b, link="ib-ndr").exposed_s for b in range(1, 301)
    ]
    np.testing.assert_allclose(sweep.exposed_s, brute, rtol=1e-9, atol=1e-15)
    assert sweep.best_buckets == int(np.argmin(brute)) + 1
    for b in (1, 7, 150, 300):  # the sweep's own timeline is bucketed_overlap's
        mine, theirs = sweep.timeline(b), dataparallel.bucketed_overlap(grad, backward, dp, buckets=b, link="ib-ndr")
        np.testing.assert_allclose(mine.end_s, theirs.end_s, rtol=1e-12)
        assert mine.exposed_s == pytest.approx(sweep.at(b)["exposed_s"], rel=1e-9)
    # and the closed form of the docstring: B* = (T - M s) / L, the optimum here because
    # (T - M s)^2 = (80 ms)^2 >= T L = 200 ms x 288 us
    cost = collectives.collective_cost("all-reduce", grad, dp, link="ib-ndr")
    b_star = (backward - cost.bandwidth_time_s) / cost.latency_time_s
    assert sweep.closed_form_buckets == pytest.approx(b_star, rel=1e-12) and sweep.closed_form_applies
    assert sweep.best_buckets in (math.floor(b_star), math.ceil(b_star))


@pytest.mark.parametrize("ms, b_star, best", [(0.90, 100, 100), (0.97, 30, 32), (0.99, 10, 32)])
def test_closed_form_is_the_optimum_only_when_b_star_reaches_sqrt_t_over_l(ms, b_star, best):
    # N = 2, alpha = 0.5 ms: L = 1 ms; T = 1 s, so T / L = 1000 and sqrt(T / L) = 31.6. M s = ms x T.
    # exposed(B) = max(L + M s / B, B L + M s - T + T / B). B* = (T - M s) / L.
    # ms = 0.90: B* = 100 >= 31.6: (T - Ms)^2 = 0.01 >= T L = 0.001, the optimum, exposed 1 + 900/100 = 10 ms.
    # ms = 0.97: B* = 30 < 31.6: beyond B* exposed = B L + T / B - 30 ms still falls while T / B^2 > L;
    #   B = 31: 31 + 32.258 - 30 = 33.258 ms; B = 32: 32 + 31.25 - 30 = 33.25 ms; B = 33: 33.303 ms -> best 32.
    # ms = 0.99: B* = 10, exposed there 1 + 99 = 100 ms; the best is again 32: 32 + 31.25 - 10 = 53.25 ms.
    sweep = production.bucket_sweep(ms * 1e10, 1.0, 2, bandwidth=1e10, latency=0.5e-3, max_buckets=400)
    assert sweep.closed_form_buckets == pytest.approx(b_star, rel=1e-9)
    assert sweep.closed_form_applies == (b_star >= math.sqrt(1000))
    assert sweep.best_buckets == best
    expected = {100: 10e-3, 30: 33.25e-3, 10: 53.25e-3}[b_star]
    assert sweep.best_exposed_s == pytest.approx(expected, rel=1e-9)


def test_hierarchical_buckets_pay_fewer_latency_steps():
    # 64 GPUs on 8 DGX H100: L = 2 x 7 x 3.4 us (NVLink) + 2 x 7 x 9.6 us (NDR) = 182 us per bucket,
    # against 2 x 63 x 9.6 us = 1.21 ms for one flat ring over the fabric
    h = production.bucket_sweep(
        13.5e9, 0.2, 64, link="nvlink4", algorithm="hierarchical", gpus_per_node=8, inter_link="ib-ndr", max_buckets=50
    )
    r = production.bucket_sweep(13.5e9, 0.2, 64, link="ib-ndr", max_buckets=50)
    assert h.latency_s == pytest.approx(14 * 3.4e-6 + 14 * 9.6e-6)
    assert r.latency_s == pytest.approx(126 * 9.6e-6)
    # bytes: 2 x 7/8 x M / 450 GB/s + 2 x 7/8 x (M/8) / 50 GB/s
    assert h.seconds_per_byte == pytest.approx(2 * 7 / 8 / 450e9 + 2 * 7 / 8 / 8 / 50e9)


@settings(max_examples=60, deadline=None)
@given(
    grad=st.floats(1e6, 1e11),
    backward=st.floats(1e-3, 5.0),
    dp=st.integers(2, 512),
    fabric=st.sampled_from(["nvlink4", "ib-ndr", "ethernet-100g"]),
)
def test_bucket_sweep_invariants(grad, backward, dp, fabric):
    s = production.bucket_sweep(grad, backward, dp, link=fabric, max_buckets=512)
    assert np.all(np.isfinite(s.exposed_s)) and np.all(s.exposed_s > 0)
    assert s.exposed_s[0] == pytest.approx(s.comm_total_s[0])  # one bucket hides nothing
    assert s.best_exposed_s <= s.exposed_s.min() + 1e-15
    # while all buckets' communication fits in backward, only the last bucket shows, and more buckets
    # never hurt there (exposed non-increasing); beyond that point it is not monotone (latency grows)
    inside = s.comm_total_s <= backward
    np.testing.assert_allclose(s.exposed_s[inside], s.per_bucket_s[inside], rtol=1e-12)
    assert np.all(np.diff(s.exposed_s[inside]) <= 1e-15)
    assert np.all((s.bandwidth_share > 0) & (s.bandwidth_share <= 1))
    assert np.all(np.diff(s.bandwidth_share) <= 0)  # smaller buckets never use the link better


def test_backward_time_calibrated_by_hand():
    # Llama-2-7B, one 4,096-token sequence on an H100 SXM (989.4 TFLOP/s bf16 dense, 3.35 TB/s HBM), the step
    # model's calibrated compute (distlab.efficiency): every part of a pass is priced 3 times (forward, and the
    # backward's input and weight gradients), so backward is 2/3 of the three.
    #   matmuls: 32 layers x 3 x 2 x 202,383,360 weights + 3 x 2 x h 4096 x V 32000 (logits) = 39,644,037,120
    #            FLOP per token (38,857,605,120 in the layers, 786,432,000 logits) at 0.82 (fitted share) x 794.5 / 989
    #            (H100 MAMF) of peak x each GEMM's shape factor
    #   attention core (causal flash): 32 layers x 3.5 x (4 x s 4096 x a d_head 4096) / 2 = 3,758,096,384 FLOP per
    #            token executed (the masked half skipped, the backward recomputing the scores: Dao 2023, Sec. 4.1)
    #            at FlashAttention-2's 335 TFLOP/s on H100 (Sec. 4.1, Fig. 7)
    #   element-wise: 32 layers x 3 passes x 1.4 (fitted traffic) x the bytes the fused element-wise kernels of a
    #            layer move per token, x 4096 tokens / HBM rate: Llama 2 7B (h = q = kv = 4096, f 11,008, RMSNorm,
    #            RoPE, no dropout), e = 2: norms 2 x 2e h = 32,768; residual adds 2 x 3e h = 49,152; SwiGLU 3e f =
    #            66,048; RoPE 2e (q + kv) = 32,768: 180,736 B
    #   loss: 1.4 x (48 + 2e) V = 1.4 x 52 x 32,000 B per token (fp32 cross-entropy, forward and backward) / HBM rate
    per_token = 2 * 4 * 4096 + 2 * 6 * 4096 + 6 * 11008 + 4 * (4096 + 4096)
    assert per_token == 180_736 == efficiency.elementwise_bytes_per_token("llama2-7b", 4096)
    tokens, peak = 4096, 989.4e12
    # matmuls at their shape factors (efficiency.layer_gemm_slowdown_array; tests/core/test_gemm_efficiency.py derives
    # them): 1 / factor averaged over forward, input- and weight-gradient GEMMs, weighted by FLOPs
    up = (2 * 2772 / 2752 + 33 / 32) / 3
    down = (33 / 32 + 2 * 1452 / 1376) / 3
    layer_slow = (3 * 33 / 32 + 33 / 32 + 5.375 * up + 2.6875 * down) / 12.0625  # 1.0277
    logit_slow = (2 * 4092 / 4000 + 33 / 32) / 3  # 1.0258
    matmul = (38_857_605_120 * layer_slow + 786_432_000 * logit_slow) * tokens / (peak * 0.82 * 794.5 / 989)
    core = 3_758_096_384 * tokens / 335e12
    elementwise = (32 * 3 * 1.4 * per_token + 1.4 * 52 * 32_000) * tokens / 3.35e12
    want = 2 / 3 * (matmul + core + elementwise)  # 2/3 x (0.2560 + 0.0459 + 0.0297 + 0.0028) = 0.2230 s
    assert production.backward_time("llama2-7b", tokens) == pytest.approx(want, rel=1e-12)
    assert round(want, 4) == 0.2230
    # a number keeps Lesson 7 §1's fixed share on 6PT: 4 x 6,738,415,616 x 4096 / (989.4e12 x 0.5) = 0.2232 s
    fixed = production.backward_time("llama2-7b", tokens, efficiency=0.5)
    assert fixed == pytest.approx(4 * 6_738_415_616 * 4096 / (peak * 0.5), rel=1e-12)


def test_backward_time_is_two_thirds_of_the_step_models_compute():
    # the same compute model as training.estimate: pure data parallelism on one DGX H100 node, one sequence per
    # GPU and no recomputation, so a GPU's compute is one forward and one backward of one sequence
    for name, seq, attention in (
        ("llama2-7b", 4096, "flash"),
        ("llama3.1-8b", 8192, "unfused"),
        ("megatron-gpt-1.7b", 2048, "flash"),
    ):
        est = training.estimate(
            name, "dgx-h100", nodes=1, fabric="ib-ndr", global_batch=8, seq_len=seq, attention=attention
        )
        got = production.backward_time(name, seq, seq_len=seq, attention=attention)
        assert got == pytest.approx(2 / 3 * est.compute_s, rel=1e-12)
    # linear in the tokens at a fixed sequence length; longer sequences cost more per token (attention)
    one = production.backward_time("llama2-7b", 4096)
    assert production.backward_time("llama2-7b", 3 * 4096) == pytest.approx(3 * one, rel=1e-12)
    assert (
        production.backward_time("llama2-7b", 4096, seq_len=2048)
        < one
        < production.backward_time("llama2-7b", 4096, seq_len=8192)
    )


# ----------------------------------------------------------------------------------------
# 2. The network


def test_dp_all_reduce_hand_values():
    # 4 DGX H100 on NDR, 3:1, tp = 1: the DP group is all 32 ranks, 8 per node (l = 8, k = 4 nodes).
    # hierarchical: intra ring over 8 on NVLink (450 GB/s, 3.4 us) + inter ring of M/8 over 4 nodes.
    M = 14e9
    intra = 2 * 7 * 3.4e-6 + 2 * 7 / 8 * M / 450e9  # 54.49 ms
    for rails, bw in ((True, 50e9), (False, 50e9 / 3)):
        cl = hardware.cluster("dgx-h100", 4, oversubscription="3:1", rail_optimized=rails)
        h = production.dp_all_reduce(cl, M, algorithm="hierarchical")
        assert (h.local_members, h.nodes, h.same_local_rank) == (8, 4, True)
        assert h.time_s == pytest.approx(intra + 2 * 3 * 9.6e-6 + 2 * 3 / 4 * (M / 8) / bw, rel=1e-12)
        # every GPU of a node sends its M/8 share across at once: f = 8 transfers per node, 8 / (3 x 8) < 1
        assert h.flows_per_node == 8
        # one flat ring of 32: hops 7->8, 15->16, ..., 31->0 join local rank 7 to 0 (the spine), one hop
        # leaving each node: f = 1. Without rails a 3:1 leaf has uplinks for 8/3 of a node's 8 ports, so
        # the one transfer keeps the full 50 GB/s: min(1, 8 / (3 x 1)) = 1. On rails all four rank-7 NICs
        # hang off rail 7's leaf and all four send across the spine: one transfer per port, 50/3 GB/s.
        r = production.dp_all_reduce(cl, M, algorithm="ring")
        assert not r.same_local_rank and r.flows_per_node == 1
        ring_bw = 50e9 / 3 if rails else 50e9
        assert r.fabric_bw == pytest.approx(ring_bw, rel=1e-12)
        assert r.time_s == pytest.approx(2 * 31 * 9.6e-6 + 2 * 31 / 32 * M / ring_bw, rel=1e-12)
    # tp = 8: one member per node; the flat ring IS the hierarchical one (same local rank, along a rail)
    cl = hardware.cluster("dgx-h100", 4, oversubscription=3, rail_optimized=True)
    h = production.dp_all_reduce(cl, M / 8, tp=8)
    r = production.dp_all_reduce(cl, M / 8, tp=8, algorithm="ring")
    assert h.time_s == pytest.approx(r.time_s, rel=1e-12) and h.same_local_rank and r.same_local_rank
    assert h.fabric_bw == 50e9


def test_flat_ring_taper_counts_the_transfers_leaving_a_node():
    # 4 DGX H100 nodes, 3:1, no rails, flat ring through each DP group (stride tp, order tp-dp):
    # the tp groups' rings each cross every node boundary once, so f = tp transfers leave a node;
    # per transfer: 50 GB/s x min(1, 8 / (3 tp)). tp = 1: 50 (no taper), tp = 2: 50, tp = 4: 33.3, tp = 8: 16.7.
    M = 8e9
    for tp, bw in ((1, 50e9), (2, 50e9), (4, 50e9 * 8 / 12), (8, 50e9 / 3)):
        cl = hardware.cluster("dgx-h100", 4, oversubscription=3)
        r = production.dp_all_reduce(cl, M, tp=tp, algorithm="ring")
        n = 32 // tp
        assert r.flows_per_node == tp
        assert r.fabric_bw == pytest.approx(bw, rel=1e-12)
        assert r.time_s == pytest.approx(2 * (n - 1) * 9.6e-6 + 2 * (n - 1) / n * M / bw, rel=1e-12)
        # the hierarchical algorithm sends from every GPU of a node at once (f = 8): the full taper
        h = production.dp_all_reduce(cl, M, tp=tp)
        assert h.flows_per_node == 8 and h.fabric_bw == pytest.approx(50e9 / 3, rel=1e-12)
    # the Cluster formula itself: share x min(1, g / (k f)); on rails, cross-rail always pays 1/k
    cl = hardware.cluster("dgx-h100", 4, oversubscription=3)
    assert cl.fabric_bandwidth_per_gpu(False, flows_per_node=2) == pytest.approx(50e9)
    assert cl.fabric_bandwidth_per_gpu(False, flows_per_node=6) == pytest.approx(50e9 * 8 / 18)
    assert cl.fabric_bandwidth_per_gpu(False) == pytest.approx(50e9 / 3)  # f = g by default
    railed = hardware.cluster("dgx-h100", 4, oversubscription=3, rail_optimized=True)
    assert railed.fabric_bandwidth_per_gpu(False, flows_per_node=1) == pytest.approx(50e9 / 3)
    assert railed.fabric_bandwidth_per_gpu(True, flows_per_node=8) == pytest.approx(50e9)


def test_rails_in_the_step_model_need_equal_local_ranks():
    # 3 DGX H100 nodes (24 GPUs), 3:1, tp = 1, pp = 2, dp = 12: DP group 0 is ranks 0-11, all of node 0 and
    # local ranks 0-3 of node 1; group 1 is ranks 12-23. tp x dp = 12 is neither a multiple nor a divisor
    # of 8, so the inter-node traffic joins different local ranks and crosses the spine, rails or not.
    kw = dict(global_batch=48, seq_len=2048, tp=1, pp=2, zero=1)
    no = production.network_step("llama2-7b", nodes=3, oversubscription=3, **kw)
    yes = production.network_step("llama2-7b", nodes=3, oversubscription=3, rail_optimized=True, **kw)
    assert yes.dp_comm_s == pytest.approx(no.dp_comm_s, rel=1e-12)
    # The group does not split evenly over nodes (8 members on node 0, 4 on node 1): no hierarchical
    # all-reduce exists (dp_all_reduce refuses it, below), so the step model prices one flat ring through
    # the 12 members, each of its 2 (N-1) = 22 steps as slow as its fabric hop. By hand: M = P / pp x 2 B;
    # the hop joins different local ranks (7 -> 0 of the next node), every GPU of a node counted as
    # sending (the step model's convention): 50 GB/s / 3 at NDR's achieved share, 48 of 50 GB/s (nccl-tests busbw,
    # distlab.efficiency); 9.6 us NDR latency per step.
    P = 6738415616  # llama2-7b
    M = P / 2 * 2
    assert no.dp_comm_s == pytest.approx(2 * 11 * 9.6e-6 + 2 * 11 / 12 * M / (48e9 / 3), rel=1e-9)
    # on a non-blocking fabric the taper convention does not matter: the step model's DP time is
    # production.dp_all_reduce's flat ring over the real layout (an independent path through distlab.mesh),
    # which lesson 8 prices at line rate, while the calibrated step model runs it at NDR's achieved 48 of 50 GB/s
    flat = production.network_step("llama2-7b", nodes=3, **kw)
    ring = production.dp_all_reduce(hardware.cluster("dgx-h100", 3), M, pp=2, algorithm="ring")
    assert ring.members == tuple(range(12))
    assert ring.time_s == pytest.approx(2 * 11 * 9.6e-6 + 2 * 11 / 12 * M / 50e9, rel=1e-9)
    assert flat.dp_comm_s == pytest.approx(2 * 11 * 9.6e-6 + 2 * 11 / 12 * M / 48e9, rel=1e-9)
    assert not training.equal_local_ranks_array(12, 1, 8)
    assert not production.dp_all_reduce(
        hardware.cluster("dgx-h100", 3, oversubscription=3, rail_optimized=True), M, pp=2, algorithm="ring"
    ).same_local_rank
    with pytest.raises(ConfigurationError, match="same number on each"):
        production.dp_all_reduce(hardware.cluster("dgx-h100", 3, oversubscription=3, rail_optimized=True), M, pp=2)


@pytest.mark.parametrize("nodes", [1, 2, 3, 4])
def test_equal_local_ranks_rule_matches_the_layout(nodes):
    # the step model's rule (n, stride, g) against the real layout: every node a DP group spans holds
    # the same local ranks of it, for every DP group
    from distlab import mesh

    g = 8
    gpus = nodes * g
    for tp in (1, 2, 4, 8):
        for pp in (1, 2, 3, 4, 6, 8):
            if gpus % (tp * pp):
                continue
            dp = gpus // (tp * pp)
            lay = mesh.layout(gpus, tp=tp, pp=pp, dp=dp, gpus_per_node=g)
            truth = True
            for grp in np.asarray(lay.groups("dp")):
                per = [set(grp[grp // g == k] % g) for k in np.unique(grp // g)]
                truth &= all(p == per[0] for p in per)
            assert bool(training.equal_local_ranks_array(dp, tp, g)) == truth, (nodes, tp, pp)


def test_placement_that_breaks_the_hierarchy():
    # tp = 3 on 24 GPUs: DP stride 3 puts ranks 0,3,6 | 9,12,15 | 18,21 on the nodes: 3, 3, 2 members
    cl = hardware.cluster(hardware.Node("odd", "h100-sxm", 8, "nvlink4", "ib-ndr", 8), 3)
    with pytest.raises(ConfigurationError, match="same number on each"):
        production.dp_all_reduce(cl, 1e9, tp=3)
    r = production.dp_all_reduce(cl, 1e9, tp=3, algorithm="ring")
    assert r.members == (0, 3, 6, 9, 12, 15, 18, 21) and r.nodes == 3


@settings(max_examples=40, deadline=None)
@given(
    nodes=st.sampled_from([2, 4, 8, 16]),
    tp=st.sampled_from([1, 2, 4, 8]),
    pp=st.sampled_from([1, 2]),
    k=st.floats(1.0, 6.0),
    k2=st.floats(1.0, 6.0),
    fabric=st.sampled_from(["ib-ndr", "ethernet-100g", "ib-hdr"]),
    size=st.floats(1e6, 1e11),
)
def test_network_invariants(nodes, tp, pp, k, k2, fabric, size):
    lo, hi = sorted((k, k2))
    t = {}
    for rails in (False, True):
        for ratio in (lo, hi):
            cl = hardware.cluster("dgx-h100", nodes, fabric, ratio, rails)
            for algo in production.ALGORITHMS:
                t[rails, ratio, algo] = production.dp_all_reduce(cl, size, tp=tp, pp=pp, algorithm=algo).time_s
    for rails in (False, True):
        for algo in production.ALGORITHMS:
            assert t[rails, hi, algo] >= t[rails, lo, algo] * (1 - 1e-12)  # a k:1 taper never speeds up
    for ratio in (lo, hi):
        # rails never slow the hierarchical all-reduce (its ring joins equal local ranks or pays the same taper)
        assert t[True, ratio, "hierarchical"] <= t[False, ratio, "hierarchical"] * (1 + 1e-12)
        # NVLink is faster than any fabric here, so on rails the hierarchy never loses to the flat ring
        assert t[True, ratio, "hierarchical"] <= t[True, ratio, "ring"] * (1 + 1e-12)


def test_rails_and_taper_in_the_step_model():
    base = training.estimate("llama3.1-70b", hardware.cluster("dgx-h100", 32), **SCENARIO, **FIT)
    rail1 = training.estimate("llama3.1-70b", hardware.cluster("dgx-h100", 32, rail_optimized=True), **SCENARIO, **FIT)
    assert rail1.step_time_s == base.step_time_s  # a non-blocking fabric has nothing to spare
    tapered = production.network_step("llama3.1-70b", nodes=32, oversubscription=3, **SCENARIO, **FIT)
    railed = production.network_step(
        "llama3.1-70b", nodes=32, oversubscription=3, rail_optimized=True, **SCENARIO, **FIT
    )
    assert tapered.dp_comm_s == pytest.approx(3 * base.dp_comm_s, rel=0.05)  # inter-node phase dominates
    assert tapered.step_time_s >= base.step_time_s
    assert railed.dp_comm_s == pytest.approx(base.dp_comm_s, rel=1e-12)  # DP rides the rails: no taper
    # pipeline neighbours here are tp x dp = 64 ranks apart (a multiple of 8): same local rank as well
    assert railed.p2p_s == pytest.approx(base.p2p_s, rel=1e-12)


def test_pipeline_hop_between_local_ranks_pays_the_spine():
    # tp 2 x dp 2 x pp 8 on 4 nodes: neighbours 4 ranks apart; the hop 4 -> 8 joins local rank 4 to 0
    kw = dict(global_batch=64, seq_len=2048, tp=2, pp=8, zero=1)
    rails = production.network_step("llama2-7b", nodes=4, oversubscription=4, rail_optimized=True, **kw)
    flat = production.network_step("llama2-7b", nodes=4, oversubscription=4, rail_optimized=False, **kw)
    assert rails.p2p_s == pytest.approx(flat.p2p_s, rel=1e-12)
    assert rails.dp_comm_s == flat.dp_comm_s  # tp x dp = 4 <= 8: the DP group stays on NVLink
    # by hand: stages 0-1 on node 0, 2-3 on node 1, ...: of the 7 boundaries 1->2, 3->4, 5->6 cross
    # nodes (at 50/4 GB/s, 9.6 us) and 4 stay on NVLink (450 GB/s, 3.4 us), each at its achieved share (nccl-tests
    # busbw, distlab.efficiency: NVLink4 370 of 450 GB/s, NDR 48 of 50); each hop b s h 2 / tp bytes, forward and
    # back (2 (p - 1) hops)
    msg = 1 * 2048 * 4096 * 2 / 2
    nvlink, fabric = msg / 370e9 + 3.4e-6, msg / (48e9 / 4) + 9.6e-6
    assert flat.p2p_s == pytest.approx(2 * (4 * nvlink + 3 * fabric), rel=1e-12)
    assert training.pipeline_crossings_array(8, 4, 8) == 3
    # a pipeline inside one node never touches the fabric: tp 2 x dp 1 x pp 4 on one node
    one = production.network_step(
        "llama2-7b", nodes=1, oversubscription=4, global_batch=8, seq_len=2048, tp=2, pp=4, zero=1
    )
    assert one.p2p_s == pytest.approx(2 * 3 * nvlink, rel=1e-12)


def test_cluster_rail_flag_and_describe():
    cl = hardware.cluster("dgx-h100", 4, oversubscription=2, rail_optimized=True)
    assert cl.fabric_bandwidth_per_gpu(True) == pytest.approx(50e9)
    assert cl.fabric_bandwidth_per_gpu(False) == pytest.approx(25e9) == cl.inter_node_bandwidth_per_gpu
    assert "rail-optimized" in cl.describe() and "along a rail" in cl.describe()
    assert hardware.cluster("dgx-h100", 4, oversubscription=2).fabric_bandwidth_per_gpu(True) == pytest.approx(25e9)
    with pytest.raises(ConfigurationError, match="rail_optimized='yes' must be True or False"):
        hardware.cluster("dgx-h100", 4, rail_optimized="yes")


# ----------------------------------------------------------------------------------------
# 3. FP8


def test_fp8_halves_what_it_should_and_not_the_rest():
    cmp = production.fp8_comparison("llama3.1-70b", hardware.cluster("dgx-h100", 32), **SCENARIO, **FIT)
    r = cmp.ratios()
    # Llama has no dropout: in distlab's simplified recipe every stored activation is a 2-byte tensor -> half
    assert r["activations per GPU (fp8 saving: upper bound)"] == pytest.approx(0.5, rel=1e-12)
    # FP8 GEMMs write bf16 outputs: TP collectives and pipeline sends carry 2-byte elements in both.
    # By hand (b = 1, s = 8192, h = 8192, tp = 8): TP message 1 x 8192 x 8192 x 2 B = 134,217,728 B;
    # pipeline send 134,217,728 / 8 = 16,777,216 B, the same in bf16 and fp8.
    rows = {name: (b16, b8) for name, b16, b8, _ in cmp.rows}
    assert rows["TP all-reduce message (b s h e_msg)"] == (8192 * 8192 * 2, 8192 * 8192 * 2)
    assert rows["pipeline send (b s h e_msg / tp)"] == (8192 * 8192 * 2 / 8, 8192 * 8192 * 2 / 8)
    assert cmp.fp8.tp_comm_s == pytest.approx(cmp.bf16.tp_comm_s, rel=1e-12)
    assert cmp.fp8.p2p_s == pytest.approx(cmp.bf16.p2p_s, rel=1e-12)
    assert memory.precision_recipe("fp8").message_bytes == 2 and memory.precision_recipe("fp8").activation_bytes == 1
    assert r["weights per GPU"] == 0.5
    assert r["DP gradient all-reduce (M per GPU)"] == 1.0  # bf16 gradients
    assert r["optimizer state per GPU"] == 1.0 and r["gradients per GPU"] == 1.0
    assert r["model-state bytes per parameter"] == pytest.approx(15 / 16)  # 1 + 2 + 12
    assert r["dense peak per GPU"] == pytest.approx(1978.9 / 989.4, rel=1e-12)
    assert cmp.fp8.dp_comm_s == cmp.bf16.dp_comm_s
    assert 0.5 < r["memory per GPU"] < 1 and 0.5 < r["step time"] < 1
    assert "fp8/bf16" in cmp.table()


def test_fp8_activations_with_dropout_are_more_than_half():
    # GPT-3 keeps 1-byte dropout masks: per layer s b h (34 + 5 a s / h) in bf16 (Korthikanti Table 2);
    # in fp8 the 2-byte tensors halve, the masks (2 s b h + a s^2 b bytes) do not.
    m = memory.activation_bytes_per_layer("gpt3-175b", 1, 2048, precision="mixed")
    f = memory.activation_bytes_per_layer("gpt3-175b", 1, 2048, precision="fp8")
    s, b, h, a = 2048, 1, 12288, 96
    assert m == pytest.approx(s * b * h * (34 + 5 * a * s / h))
    masks = 2 * s * b * h + a * s * s * b
    assert f == pytest.approx((m - masks) / 2 + masks)


# ----------------------------------------------------------------------------------------
# 4. Ring attention


def test_ring_attention_hand_values():
    # Llama-3.1-70B, S = 131,072, cp = 16: chunk 8,192 tokens; K/V width 8 heads x 128 = 1,024;
    # block = 2 x 8192 x 1024 x 2 B = 33.55 MB; NVLink: 3.4 us + 33.55 MB / 450 GB/s = 78.0 us.
    # causal, load-balanced: 1/2 x 4 x 8192^2 x 8192 = 1.0995e12 FLOP at flash attention's measured H100 rate,
    # 335 TFLOP/s (FlashAttention-2, Dao 2023 Sec. 4.1; distlab.efficiency.FLASH_ATTENTION_RATE) = 3.2821 ms.
    r = production.ring_attention_step("llama3.1-70b", 131072, 16)
    assert r.kv_block_bytes == 2 * 8192 * 1024 * 2
    assert r.comm_s == pytest.approx(3.4e-6 + 2 * 8192 * 1024 * 2 / 450e9, rel=1e-12)
    assert r.compute_s == pytest.approx(0.5 * 4 * 8192**3 / 335e12, rel=1e-12)
    # a rate given explicitly replaces it: at half of the 989.4 TFLOP/s peak, 2.2226 ms
    half = production.ring_attention_step("llama3.1-70b", 131072, 16, efficiency=0.5)
    assert half.compute_s == pytest.approx(0.5 * 4 * 8192**3 / (989.4e12 * 0.5), rel=1e-12)
    assert r.hidden and r.exposed_s == 0
    # the crossover: hidden at S*, not one chunk-per-GPU shorter
    assert production.ring_attention_step("llama3.1-70b", r.crossover_seq_len, 16).hidden
    assert not production.ring_attention_step("llama3.1-70b", r.crossover_seq_len - 16, 16).hidden
    # over the fabric (50 GB/s) it takes ~9x longer to hide
    ib = production.ring_attention_step("llama3.1-70b", 131072, 16, link="ib-ndr")
    assert ib.crossover_seq_len > 4 * r.crossover_seq_len


def test_the_modelers_sequence_parallel_arithmetic_is_off_by_1000():
    # The bandwidth-modeler reference: "(2 x 2048 x 8192 x 2) / 100e9 = 0.67 us per layer". It is 671 us:
    # a 64-head model with h = 8192 (K/V width 8192), 2,048 tokens per GPU, 100 GB/s, no latency.
    r = production.ring_attention_step("megatron-gpt-39.1b", 2048 * 4, 4, bandwidth="100 GB/s", latency=0)
    assert r.kv_block_bytes == 2 * 2048 * 8192 * 2
    assert r.comm_s == pytest.approx(671.0888e-6, rel=1e-6)


@settings(max_examples=40, deadline=None)
@given(
    cp=st.sampled_from([2, 4, 8, 16, 32]),
    k=st.integers(1, 64),
    b=st.integers(1, 4),
    link=st.sampled_from(["nvlink4", "ib-ndr", "ethernet-100g"]),
    causal=st.booleans(),
)
def test_ring_attention_longer_sequences_hide_better(cp, k, b, link, causal):
    s = 1024 * k * cp
    one = production.ring_attention_step("llama3.1-8b", s, cp, micro_batch_size=b, link=link, causal=causal)
    two = production.ring_attention_step("llama3.1-8b", 2 * s, cp, micro_batch_size=b, link=link, causal=causal)
    assert two.ratio < one.ratio  # compute grows as (s/cp)^2, the block as s/cp
    assert one.hidden == (s >= one.crossover_seq_len)
    assert math.isfinite(one.comm_s) and math.isfinite(one.compute_s)


# ----------------------------------------------------------------------------------------
# 5. Stragglers


@pytest.mark.parametrize(
    "n, tabulated",
    [
        (2, 1 / math.sqrt(math.pi)),
        (3, 3 / (2 * math.sqrt(math.pi))),
        (5, 1.16296),
        (10, 1.53875),
        (100, 2.50759),
        (1000, 3.24144),
    ],
)
def test_expected_max_of_normals_matches_tippett(n, tabulated):
    # n = 2 and 3 are exact closed forms; the others from Tippett (1925) / Harter (1961) tables
    assert production.expected_max_normal(n) == pytest.approx(tabulated, abs=2e-5)


def test_simulation_matches_exact_and_extreme_value_growth():
    previous = 0.0
    for n in (8, 64, 512, 4096):
        sim = production.simulate_slowest(n, 0.05, steps=4000, seed=1)
        exact = production.expected_slowest(n, 0.05)
        se = sim.std(ddof=1) / math.sqrt(sim.size)
        assert abs(sim.mean() - exact) < 4 * se  # the simulation agrees within 4 standard errors
        mu = (exact - 1) / 0.05
        assert mu > previous  # the expected slowest grows with the group
        previous = mu
        if n >= 64:  # Gumbel: sqrt(2 ln n) - (ln ln n + ln 4 pi) / (2 sqrt(2 ln n)) + gamma / sqrt(2 ln n)
            assert production.gumbel_expected_max(n) == pytest.approx(mu, rel=0.025)
        assert mu < math.sqrt(2 * math.log(n))  # the leading term overestimates


def test_leading_term_and_straggler_mfu():
    assert production.leading_term_max_normal(1000) == pytest.approx(math.sqrt(2 * math.log(1000)))  # 3.717
    np.testing.assert_allclose(production.leading_term_max_normal([2, 256]), np.sqrt(2 * np.log([2, 256])))
    cl = hardware.cluster("dgx-h100", 32)
    s = production.straggler_step("llama3.1-70b", cl, slow_factor=1.2, **SCENARIO, **FIT)
    # MFU with the wait: the healthy step's model FLOPs over the longer step
    assert s.mfu == pytest.approx(s.healthy.mfu * s.healthy.step_time_s / s.step_time_s, rel=1e-12)
    assert s.mfu < s.healthy.mfu


def test_one_slow_gpu_hand_value():
    # sigma = 0, one GPU 1.25x slow. The independent implementation: distlab.pipeline's timeline simulator
    # with the stage's per-microbatch time t = compute / m and the slow GPU's stage (the last: the worst
    # placement for 1F1B) 1.25x slower; the step grows by exactly what the simulated timeline grows by,
    # (k - 1) m t = 0.25 x compute, and the bubble ((p - 1) t of the healthy timeline) does not stretch.
    from distlab import pipeline

    kw = dict(**SCENARIO, **FIT)
    cl = hardware.cluster("dgx-h100", 32)
    healthy = training.estimate("llama3.1-70b", cl, **kw)
    slow = production.straggler_step("llama3.1-70b", cl, slow_factor=1.25, **kw)
    p, m = healthy.config["pp"], healthy.microbatches
    t = healthy.compute_s / m
    third = [t / 3] * p  # F : B : W = 1 : 1 : 1 (the split does not matter for GPipe / 1F1B)
    slowed = [t / 3] * (p - 1) + [1.25 * t / 3]
    for kind in ("1f1b", "gpipe"):
        base = pipeline.schedule(kind, p, m, t_f=third, t_b=third, t_w=third).step_time
        late = pipeline.schedule(kind, p, m, t_f=slowed, t_b=slowed, t_w=slowed).step_time
        assert base == pytest.approx((m + p - 1) * t, rel=1e-9)
        assert slow.wait_s == pytest.approx(late - base, rel=1e-9)
    assert slow.step_time_s == pytest.approx(healthy.step_time_s + (late - base), rel=1e-12)
    assert production.straggler_step("llama3.1-70b", cl, **kw).step_time_s == healthy.step_time_s
    assert production.expected_slowest(16, 0.05, 1.5) >= 1.5
    sim = production.simulate_slowest(16, 0.05, slow_factor=1.5, steps=20000, seed=3)
    exact = production.expected_slowest(16, 0.05, 1.5)
    assert abs(sim.mean() - exact) < 4 * sim.std(ddof=1) / math.sqrt(sim.size)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 4096), sigma=st.floats(0, 0.25), k=st.floats(1, 3))
def test_straggler_never_faster(n, sigma, k):
    e = production.expected_slowest(n, sigma, k)
    assert math.isfinite(e) and e >= k * (1 - 1e-7)
    if k == 1 and sigma > 0.01 and n > 1:
        assert e > 1


# ----------------------------------------------------------------------------------------
# 6. OOM triage


def _kw(**extra):
    return dict(fabric="ib-ndr", nodes=32, **SCENARIO, **extra)


def test_triage_ladder_production_order_and_first_fit():
    t = triage.oom_triage("llama3.1-70b", "dgx-h100", **_kw(tp=8, pp=4, micro_batch_size=4))
    assert not t.already_fits
    kinds = [triage.TRIAGE_ORDER.index(s.kind) for s in t.ladder]
    assert kinds == sorted(kinds)  # micro-batch, recomputation, ZeRO, TP, PP
    first = t.first_fit
    assert first is t.ladder[-1] and first.fits
    assert all(not s.fits for s in t.ladder[:-1])
    for s in t.ladder:  # every rung is estimate() re-run on its configuration
        if s.skipped is None:
            again = training.estimate("llama3.1-70b", "dgx-h100", **s.config)
            assert again.memory.total_bytes == s.memory_per_gpu_bytes
            assert again.step_time_s == pytest.approx(s.step_time_s)
    total = t.base.memory.total_bytes - first.memory_per_gpu_bytes
    assert first.saves_total_bytes == pytest.approx(total)
    assert sum(s.saves_bytes for s in t.ladder) == pytest.approx(total)
    assert "first fit" in t.summary()


def test_smaller_micro_batch_helps_only_once_the_pipeline_is_full():
    # 1F1B keeps min(pp, m) microbatches in flight: b x min(pp, m) sequences of activations.
    # tp 8 x pp 4 x dp 8, B = 256: b = 4 -> m = 8 >= 4: 4 x 4 = 16 sequences; b = 2 -> m = 16: 4 x 2 = 8.
    t = triage.oom_triage("llama3.1-70b", "dgx-h100", **_kw(tp=8, pp=4, micro_batch_size=4))
    step = t.fixes[0]
    assert step.kind == "micro-batch" and step.change == "micro_batch_size=2"
    assert step.estimate.memory.activations_bytes == pytest.approx(t.base.memory.activations_bytes / 2)
    # dp 64 x pp 4, b = 4: m = 1 < pp: one microbatch of 4 in flight; b = 2 -> m = 2: two of 2. No saving.
    t2 = triage.oom_triage("llama3.1-70b", "dgx-h100", **_kw(dp=64, pp=4, micro_batch_size=4))
    assert t2.fixes[0].saves_bytes == pytest.approx(0.0, abs=1)
    # the ladder keeps such rungs, says why they save nothing, and climbs on
    rungs = [r for r in t2.ladder if r.kind == "micro-batch"]
    assert [r.change for r in rungs] == ["micro_batch_size=2", "micro_batch_size=1"]
    assert all(
        r.saves_bytes == pytest.approx(0.0, abs=1) and r.note.startswith("saves nothing while m <= p") for r in rungs
    )
    assert "b x m = 4 either way" in t2.summary() and t2.first_fit is not None
    assert step.note is None  # the halving that does save says nothing extra


@settings(max_examples=25, deadline=None)
@given(
    tp=st.sampled_from([1, 2, 4]),
    pp=st.sampled_from([1, 2, 4]),
    b=st.sampled_from([1, 2, 4]),
    zero=st.integers(0, 2),
    rec=st.sampled_from(["none", "selective"]),
    sp=st.booleans(),
)
def test_triage_fixes_never_add_memory(tp, pp, b, zero, rec, sp):
    assume(256 % (256 // (tp * pp) * b) == 0)  # whole microbatches per replica
    cfg = dict(tp=tp, pp=pp, micro_batch_size=b, zero=zero, recompute=rec, sequence_parallel=sp)
    t = triage.oom_triage("llama3.1-70b", "dgx-h100", **_kw(**cfg))
    for f in t.fixes:
        if f.skipped:
            assert f.saves_bytes == 0
            continue
        # b x min(pp, m) sequences in flight, m = B / (dp b): never more when b shrinks. (Doubling TP or PP
        # halves dp, so m doubles and more microbatches may be in flight: those can cost memory.)
        if f.kind in ("micro-batch", "recomputation", "ZeRO"):
            assert f.saves_bytes >= 0
        if f.kind in ("recomputation", "ZeRO"):
            assert f.saves_bytes > 0
        assert math.isfinite(f.step_time_s) and f.step_time_s > 0


def test_triage_already_fits_and_refusals():
    t = triage.oom_triage("llama3.1-70b", "dgx-h100", **_kw(**FIT))
    assert t.already_fits and t.ladder == () and t.first_fit is None
    assert t.summary().startswith("already fits")
    assert triage.explain_infeasible("llama3.1-70b", "dgx-h100", **_kw(**FIT)) == []
    with pytest.raises(ConfigurationError, match="micro_batch_size=0 must be a positive whole number"):
        triage.oom_triage("llama3.1-70b", "dgx-h100", **_kw(micro_batch_size=0))
    with pytest.raises(ConfigurationError, match=r"tp x pp = 3 x 1 = 3 does not divide the cluster's 256 GPUs"):
        triage.oom_triage("llama3.1-70b", "dgx-h100", **_kw(tp=3))
    with pytest.raises(ConfigurationError, match=r"tp x pp = 8 x 64 = 512 is more than the cluster's 256 GPUs"):
        triage.oom_triage("llama3.1-70b", "dgx-h100", **_kw(tp=8, pp=64))


def test_explain_infeasible_keeps_its_single_fixes():
    fixes = triage.explain_infeasible("llama3.1-70b", "dgx-h100", **_kw(dp=256))
    # flash attention (estimate's default) stores no scores, so selective recomputation is not offered
    assert {f["change"] for f in fixes} == {"ZeRO-1", "ZeRO-2", "ZeRO-3", "full recomputation", "tp=2", "pp=2"}
    unfused = triage.explain_infeasible("llama3.1-70b", "dgx-h100", **_kw(dp=256), attention="unfused")
    assert {f["change"] for f in unfused} == {
        "ZeRO-1",
        "ZeRO-2",
        "ZeRO-3",
        "selective recomputation",
        "full recomputation",
        "tp=2",
        "pp=2",
    }
    by = {f["change"]: f for f in fixes}
    assert by["tp=2"]["config"] == dict(tp=2, dp=128) and by["ZeRO-3"]["config"] == dict(zero=3)


# ----------------------------------------------------------------------------------------
# Refusals: our message, never a bare exception, NaN or inf


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: production.bucket_sweep(0, 1, 8, link="ib-ndr"), "grad_bytes must be positive"),
        (lambda: production.bucket_sweep(1e9, float("nan"), 8, link="ib-ndr"), "backward_time=nan"),
        (lambda: production.bucket_sweep(1e9, 1, 8, link="ib-ndr", max_buckets=0), "max_buckets=0 must be a whole"),
        (lambda: production.bucket_sweep(1e9, 1, 8, link="ib-ndr", max_buckets=2.5), "max_buckets=2.5"),
        (lambda: production.bucket_sweep(1e9, 1, 8, link="ib-ndr", op="broadcast"), "op='broadcast'"),
        (lambda: production.bucket_sweep(1e9, 1, 8, link="ib-ndr").at(2000), "buckets=2000"),
        (lambda: production.dp_all_reduce(hardware.cluster("dgx-h100", 2), 1e9, tp=3), "must divide the cluster's 16"),
        (lambda: production.dp_all_reduce(hardware.cluster("dgx-h100", 2), 1e9, algorithm="tree"), "algorithm='tree'"),
        (lambda: production.dp_all_reduce(hardware.cluster("dgx-h100", 2), 1e9, group=99), "group=99"),
        (lambda: production.ring_attention_step("llama3.1-8b", 1000, 3), "cp=3 does not divide seq_len=1000"),
        (lambda: production.ring_attention_step("llama3.1-8b", 4096, 2, efficiency=1.5), "efficiency=1.5"),
        (lambda: production.ring_attention_step("llama3.1-8b", 4096, 2, tp=3), "tp=3"),
        (lambda: production.expected_slowest(8, 0.5), "sigma=0.5 must be at most 0.25"),
        (lambda: production.expected_slowest(8, 0.1, 0.5), "slow_factor=0.5 must be >= 1"),
        (lambda: production.expected_slowest(0, 0.1), "gpus=0"),
        (lambda: production.simulate_slowest(100000, 0.1, steps=10000), "draws is over"),
        (lambda: production.gumbel_expected_max(1), "needs n >= 2"),
        (lambda: production.backward_time("llama2-7b", -5), "tokens_per_gpu must be positive"),
        (lambda: production.backward_time("llama2-7b", 4096, seq_len=0), "seq_len=0 must be a whole number from 1"),
        (lambda: production.backward_time("llama2-7b", 4096, attention="sparse"), "attention='sparse'; valid: flash"),
        (lambda: production.backward_time("llama2-7b", 4096, efficiency=1.5), "efficiency=1.5"),
        (lambda: hardware.cluster("dgx-h100", 2, oversubscription="1:3"), "must be >= 1"),
    ],
)
def test_invalid_inputs_raise_our_message(call, message):
    with pytest.raises(ConfigurationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call()


# ----------------------------------------------------------------------------------------
# Accuracy for very large groups, cp = 1, and random inputs


@pytest.mark.parametrize("n, reference", [(10**10, 6.44667682661), (10**12, 7.11246368477), (10**15, 8.01114072278)])
def test_expected_max_normal_keeps_its_accuracy_for_huge_n(n, reference):
    # Independent high-precision values: mpmath 1.3 at 40 digits, E = int x n phi(x) Phi(x)^(n-1) dx
    # (mp.quad over [-inf, 0, r-2, r-1, r, r+1, r+2, inf], r = sqrt(2 ln n)). Phi rounds to 1 in double
    # precision above x ~ 8.2, so 1 - Phi^n computed directly lost 7e-6 at n = 1e12 and 8e-3 at 1e15.
    assert production.expected_max_normal(n) == pytest.approx(reference, abs=1e-9)
    with pytest.raises(ConfigurationError, match="more than 1,000,000,000,000,000"):
        production.expected_max_normal(10**16)


def test_ring_attention_refuses_cp_1():
    # one GPU holds the whole sequence: there is no ring, no K/V block passed, nothing to price
    with pytest.raises(ConfigurationError, match="cp=1: .* context parallelism needs cp >= 2"):
        production.ring_attention_step("llama3.1-8b", 4096, 1)


def _all_finite(obj, depth=0) -> bool:
    """Every number in a result (floats, arrays, dataclass fields, tuples, dicts), recursively."""
    import dataclasses

    if depth > 4 or obj is None or isinstance(obj, (str, bool)):
        return True
    if isinstance(obj, (int, float, np.floating, np.integer)):
        return math.isfinite(float(obj))
    if isinstance(obj, np.ndarray):
        return obj.dtype.kind not in "fc" or bool(np.all(np.isfinite(obj)))
    if isinstance(obj, production.ShardingPlan):
        # its FSDP timeline marks events that do not happen (the last layer's backward gather) with NaN
        numbers = (obj.memory_bytes, obj.network_sent_bytes, obj.nvlink_sent_bytes, obj.exposed_s, obj.timeline.step_s)
        return all(math.isfinite(v) for v in numbers)
    if dataclasses.is_dataclass(obj):
        return all(_all_finite(getattr(obj, f.name), depth + 1) for f in dataclasses.fields(obj))
    if isinstance(obj, dict):
        return all(_all_finite(v, depth + 1) for v in obj.values())
    if isinstance(obj, (tuple, list)):
        return all(_all_finite(v, depth + 1) for v in obj)
    return True


_SMALL = hardware.cluster("dgx-h100", 2, "ib-ndr")
_STEP = dict(global_batch=16, seq_len=2048, tp=8, pp=1)
#: Every public function of distlab.production, and lesson 8's OOM triage (distlab.triage.oom_triage, under
#: production's old, deprecated name triage_oom, which production.__all__ no longer lists): (call, valid keywords).
_PUBLIC = {
    "bucket_sweep": (
        production.bucket_sweep,
        dict(grad_bytes=1e9, backward_time=0.1, dp=8, bandwidth=50e9, latency=1e-5, max_buckets=64),
    ),
    "backward_time": (
        production.backward_time,
        dict(model="llama2-7b", tokens_per_gpu=4096, efficiency=None, seq_len=4096, attention="flash"),
    ),
    "dp_all_reduce": (production.dp_all_reduce, dict(cluster=_SMALL, size=1e9, tp=1, pp=1, group=0)),
    "network_step": (production.network_step, dict(model="llama2-7b", nodes=2, oversubscription=3.0, **_STEP)),
    "fp8_comparison": (production.fp8_comparison, dict(model="llama2-7b", cluster=_SMALL, **_STEP)),
    "ring_attention_step": (
        production.ring_attention_step,
        dict(
            model="llama3.1-8b",
            seq_len=8192,
            cp=2,
            micro_batch_size=1,
            tp=1,
            bandwidth=50e9,
            latency=1e-5,
            efficiency=0.5,
        ),
    ),
    "triage_oom": (triage.oom_triage, dict(model="llama2-7b", cluster=_SMALL, **_STEP)),
    "causal_work_per_rank": (production.causal_work_per_rank, dict(cp=4, load_balanced=True)),
    "context_parallel_layer": (
        production.context_parallel_layer,
        dict(
            model="llama3.1-8b",
            seq_len=8192,
            cp=2,
            method="ring",
            load_balanced=True,
            micro_batch_size=1,
            tp=1,
            pp=1,
            recompute="selective",
            bandwidth=50e9,
            latency=1e-5,
            efficiency=0.5,
        ),
    ),
    "compare_context_parallel": (
        production.compare_context_parallel,
        dict(
            model="llama3.1-8b",
            seq_len=8192,
            cp=2,
            micro_batch_size=1,
            tp=1,
            bandwidth=50e9,
            latency=1e-5,
            efficiency=0.5,
        ),
    ),
    "ulysses_limit": (production.ulysses_limit, dict(model="llama3.1-8b", cp=8, tp=1)),
    "sharding_plan": (
        production.sharding_plan,
        dict(
            model="llama2-7b",
            cluster="dgx-h100",
            sharding="full",
            nodes=2,
            micro_batch_size=1,
            seq_len=2048,
            efficiency=0.5,
            prefetch=1,
            recompute="none",
        ),
    ),
    "compare_sharding": (production.compare_sharding, dict(model="llama2-7b", cluster="dgx-h100", nodes=2)),
    "expected_max_normal": (production.expected_max_normal, dict(n=64)),
    "gumbel_expected_max": (production.gumbel_expected_max, dict(n=64)),
    "leading_term_max_normal": (production.leading_term_max_normal, dict(n=64)),
    "expected_slowest": (production.expected_slowest, dict(gpus=64, sigma=0.05, slow_factor=1.2)),
    "simulate_slowest": (production.simulate_slowest, dict(gpus=8, sigma=0.05, slow_factor=1.2, steps=10, seed=0)),
    "straggler_step": (
        production.straggler_step,
        dict(model="llama2-7b", cluster=_SMALL, slow_factor=1.2, sigma=0.02, **_STEP),
    ),
}
#: Values no numeric or named parameter accepts.
_NEVER_VALID = [float("nan"), float("inf"), -float("inf"), -1.0, -1e300, "abc", [1, -2], object()]


def test_every_public_function_is_fuzzed():
    public = {
        name
        for name in production.__all__
        if callable(getattr(production, name)) and not isinstance(getattr(production, name), type)
    }
    assert public | {"triage_oom"} == set(_PUBLIC)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_invalid_inputs_raise_distlab_error(data):
    from distlab.errors import DistlabError

    name = data.draw(st.sampled_from(sorted(_PUBLIC)))
    call, kwargs = _PUBLIC[name]
    key = data.draw(st.sampled_from(sorted(k for k in kwargs if k not in ("model", "cluster"))))
    bad = data.draw(st.sampled_from(_NEVER_VALID))
    with pytest.raises(DistlabError):
        call(**{**kwargs, key: bad})


_ANY = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(10**20), 10**20),
    st.sampled_from([0, 1, 2, 3, 8, 1e-300, 1e300, 2.5, "8", "1 GB", "50 GB/s", "2 ms", None]),
)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_random_inputs_give_distlab_error_or_finite_results(data):
    from distlab.errors import DistlabError

    name = data.draw(st.sampled_from(sorted(_PUBLIC)))
    call, kwargs = _PUBLIC[name]
    if name in ("network_step", "fp8_comparison", "triage_oom", "straggler_step"):
        keys = ["global_batch", "seq_len", "tp", "pp"]
    else:
        keys = sorted(k for k in kwargs if k not in ("model", "cluster"))
    changes = data.draw(st.dictionaries(st.sampled_from(keys), _ANY, min_size=1, max_size=3))
    try:
        result = call(**{**kwargs, **changes})
    except DistlabError:
        return
    assert _all_finite(result), (name, changes)


@settings(max_examples=80, deadline=None)
@given(
    grad=st.floats(1.0, 1e15),
    backward=st.floats(0.0, 1e4),
    dp=st.integers(1, 100_000),
    bw=st.floats(1e6, 1e13),
    lat=st.floats(0.0, 1e-2),
    tokens=st.floats(1.0, 1e15),
    n=st.integers(1, 10**15),
    sigma=st.floats(0.0, 0.25),
    k=st.floats(1.0, 100.0),
    cp=st.sampled_from([2, 4, 8, 16, 64]),
    chunk=st.integers(1, 2**16),
    b=st.integers(1, 64),
)
def test_valid_inputs_give_finite_results(grad, backward, dp, bw, lat, tokens, n, sigma, k, cp, chunk, b):
    assert _all_finite(production.bucket_sweep(grad, backward, dp, bandwidth=bw, latency=lat, max_buckets=32))
    assert _all_finite(production.backward_time("llama2-7b", tokens))
    assert _all_finite(production.backward_time("llama2-7b", tokens, efficiency=0.5))
    assert _all_finite(production.expected_max_normal(n)) and _all_finite(production.leading_term_max_normal(n))
    assert _all_finite(production.expected_slowest(min(n, 10**6), sigma, k))
    r = production.ring_attention_step("llama3.1-8b", cp * chunk, cp, micro_batch_size=b, bandwidth=bw, latency=lat)
    assert _all_finite(r) and r.crossover_seq_len > 0


def test_the_message_size_is_size_and_the_old_keyword_warns():
    cl = hardware.cluster("dgx-h100", 2)
    with pytest.warns(DeprecationWarning, match="size="):
        old = production.dp_all_reduce(cl, size_bytes=1e9)
    assert old.time_s == production.dp_all_reduce(cl, size=1e9).time_s
