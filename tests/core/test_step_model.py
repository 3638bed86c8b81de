"""The step-time model (training.estimate) and the planner: hand derivation, invariants, agreement."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from distlab import fsdp, flops, hardware, models, planner, training
from distlab.errors import ConfigurationError

TINY = models.TransformerModel(name="tiny", layers=4, hidden=1024, heads=8, ffn=4096, vocab=1000, seq_len=128)
GPU = hardware.Accelerator("toy-gpu", {"bf16": 1e14}, 80e9, 1e12)
NVL = hardware.Link("toy-nvlink", 100e9, 0.0, "intra-node")
NIC = hardware.Link("toy-nic", 10e9, 0.0, "inter-node")
NODE = hardware.Node("toy-node", GPU, 4, NVL, NIC, 4)
CLUSTER = hardware.Cluster(NODE, 2, NIC)


def test_small_configuration_by_hand():
    e = training.estimate(
        TINY, CLUSTER, global_batch=8, seq_len=128, dp=2, tp=2, pp=2, micro_batch_size=1, efficiency=0.5
    )
    P = TINY.parameter_count()
    # m = 8 / (dp 2 x b 1) = 4 microbatches. Per token (distlab.flops): a layer's forward is
    # 2 x 12,587,008 weights + 4 x s 128 x a d_head 1024 = 25,174,016 + 524,288 = 25,698,304 FLOP; the logits
    # 2 x 1024 x 1000 = 2,048,000. The busiest stage: 2 layers x 3 passes + the logits x 3 =
    # 154,189,824 + 6,144,000 = 160,333,824 FLOP per token; x 128 tokens / tp 2 / (1e14 x 0.5)
    assert TINY.params_per_layer() == 12_587_008 and TINY.heads * TINY.head_dim == 1024
    t_mb = 160_333_824 * 128 / 2 / 5e13
    assert e.microbatches == 4
    assert e.compute_s == pytest.approx(4 * t_mb, rel=1e-12)
    # TP: 4 all-reduces of b s h x 2 B = 262,144 B per layer; ring over 2 GPUs moves 2(1/2) x M at 100 GB/s:
    # 2.62144e-6 s each; x 4 all-reduces x 2 layers per stage x 4 microbatches = 8.388608e-5 s
    assert e.tp_comm_s == pytest.approx(8.388608e-5, rel=1e-12)
    # bubble: (p - 1)/v x (stage time per microbatch) = 1 x (t_mb + 2.097152e-5)
    assert e.bubble_s == pytest.approx(t_mb + 2.097152e-5, rel=1e-12)
    # p2p: pipeline neighbours are tp x dp = 4 ranks apart: the group (8 ranks) leaves a node of 4, so
    # the fabric: 4 NICs x 10 GB/s / 4 GPUs = 10 GB/s per GPU; 2 (p v - 1) = 2 hops of 262,144 / 2 B
    assert e.p2p_s == pytest.approx(2 * 131072 / 10e9, rel=1e-12)
    # DP: groups {r, r + 2}: 2 x 2 = 4 ranks fit one node -> ring over 2 on NVLink of M = P/4 x 2 B
    M = P / 4 * 2
    dp_time = M / 100e9
    assert e.dp_comm_s == pytest.approx(dp_time, rel=1e-12)
    buckets = math.ceil(M / (25 * 2**20))  # DDP bucket_cap_mb = 25 (MiB)
    # backward: 2 of the 3 passes of the layers and of the logits, (102,793,216 + 4,096,000) / 160,333,824 = 2/3
    backward = 4 / 6 * t_mb
    assert e.dp_exposed_s == pytest.approx(
        max(dp_time / buckets, dp_time - (buckets - 1) / buckets * backward), rel=1e-12
    )
    # optimizer: (2 x 12 + 2 + 2) bytes x P / 4 through 1 TB/s
    assert e.optimizer_s == pytest.approx(28 * P / 4 / 1e12, rel=1e-12)
    parts = e.compute_s + e.tp_comm_s + e.bubble_s + e.p2p_s + e.dp_exposed_s + e.optimizer_s
    assert e.step_time_s == pytest.approx(parts, rel=1e-12)
    # throughput and MFU by definition; model FLOPs per token (PaLM): 4 layers x 3 x 25,698,304 + 3 x 2,048,000
    # = 308,379,648 + 6,144,000 = 314,523,648, over 8 x 128 tokens
    assert e.tokens_per_s == pytest.approx(8 * 128 / e.step_time_s)
    assert e.model_flops == pytest.approx(314_523_648 * 8 * 128, rel=1e-12)
    assert e.mfu == pytest.approx(314_523_648 * 8 * 128 / (e.step_time_s * 8 * 1e14))
    assert e.hfu == e.mfu  # no recomputation


def test_full_recompute_hfu_adds_each_layers_forward_to_mfu():
    # per token: model 314,523,648 FLOP (above); full recomputation runs the 4 layers' forward again,
    # 4 x 25,698,304 = 102,793,216 (not the logits): HFU / MFU = 417,316,864 / 314,523,648 = 1.3268
    e = training.estimate(TINY, CLUSTER, global_batch=8, dp=8, recompute="full")
    assert e.hfu == pytest.approx(e.mfu * 417_316_864 / 314_523_648, rel=1e-12)
    # selective recomputation repeats the attention core, 4 layers x 524,288: 316,620,800 / 314,523,648
    sel = training.estimate(TINY, CLUSTER, global_batch=8, dp=8, recompute="selective")
    assert sel.hfu == pytest.approx(sel.mfu * 316_620_800 / 314_523_648, rel=1e-12)


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_estimate_counts_flops_with_the_flops_module(recompute):
    e = training.estimate(
        "llama3.1-70b",
        "dgx-h100",
        nodes=32,
        fabric="ib-ndr",
        global_batch=256,
        seq_len=8192,
        tp=8,
        pp=8,
        recompute=recompute,
    )
    counted = flops.step_flops("llama3.1-70b", 256, 8192, recompute)
    assert e.model_flops == counted.model_flops and e.hardware_flops == counted.hardware_flops


@pytest.mark.parametrize("name", ["megatron-gpt-1.7b", "gpt3-175b"])
def test_estimate_full_recompute_hardware_flops_are_narayanan_eq3(name):
    # Narayanan et al. 2021, Eq. 3: 96 B s l h^2 (1 + s/6h + V/16lh), plus the 13h norm and bias weights of each
    # layer that Eq. 3 leaves out, run 4 times at 2 FLOPs per token (see tests/core/test_flops.py)
    m = models.model(name)
    gpus = 8 * 16
    e = training.estimate(
        m,
        "dgx-a100",
        nodes=16,
        fabric="ib-hdr",
        global_batch=512,
        seq_len=2048,
        tp=8,
        pp=2 if m.layers % 2 == 0 else 1,
        recompute="full",
    )
    eq3 = training.megatron_flops_per_iteration(512, 2048, m.layers, m.hidden, m.vocab)
    assert e.gpus == gpus
    assert e.hardware_flops == pytest.approx(eq3 + 8 * 13 * m.hidden * m.layers * 512 * 2048, rel=1e-12)


def test_pure_dp_70b_is_flagged_not_priced_silently():
    # The peer tutorial prices Llama-3.1-70B with pure data parallelism on 256 H100s; it cannot run.
    e = training.estimate("llama3.1-70b", "dgx-h100", nodes=32, fabric="ib-ndr", global_batch=256, seq_len=8192)
    assert not e.fits and not e.feasible
    # model states alone: 16 B x 70.55e9 = 1.13 TB per GPU
    assert e.memory.total_bytes > 16 * 70.5e9
    # the H100's "80 GB" as CUDA sees it: 79.11 GiB x 1.073741824 = 84.9 GB, and the explanation says so
    assert (
        "over the 84.9 GB\n    (sold as 80 GB HBM3; CUDA sees 79.11 GiB)" in e.explain()
        and "NOT FEASIBLE" in e.summary()
    )


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(tp=8, dp=1), "tp=8 must divide the 4 GPUs"),
        (dict(dp=3), "must equal the cluster's 8 GPUs"),
        (dict(dp=2, tp=2, pp=2, schedule="interleaved", chunks=2, global_batch=6), "microbatches per pipeline m=3"),
        (dict(dp=8, chunks=2), "interleaved"),
        (dict(dp=8, global_batch=12), "multiple of dp"),
        (dict(dp=8, schedule="zigzag"), "valid: gpipe"),
        (dict(dp=8, efficiency=1.5), "efficiency"),
    ],
)
def test_invalid_configurations(kwargs, words):
    base = dict(global_batch=8, seq_len=128)
    with pytest.raises(ConfigurationError, match=words):
        training.estimate(TINY, CLUSTER, **(base | kwargs))


configs = st.fixed_dictionaries(
    {
        "tp": st.sampled_from([1, 2, 4]),
        "pp": st.sampled_from([1, 2]),
        "zero": st.integers(0, 3),
        "recompute": st.sampled_from(["none", "selective", "full"]),
        "micro_batch_size": st.sampled_from([1, 2]),
    }
)


def test_compute_beside_hidden_communication_is_slower_by_the_published_share():
    """The calibrated model adds efficiency.OVERLAP_SLOWDOWN (0.189) x the communication it prices as hidden: the DP
    traffic not exposed, and with tp_overlap the TP traffic hidden under the matmuls, which also lengthens the stage
    time the bubble is priced with. Derived from the estimate's own parts (invariants, no new arithmetic)."""
    s = 0.189
    kw = dict(global_batch=8, seq_len=128, dp=2, tp=2, pp=2, micro_batch_size=1, sequence_parallel=True, zero=1)
    plain = training.estimate(MID, CLUSTER, **kw)
    assert plain.compute_model.overlap_slowdown == s
    hidden_dp = plain.dp_comm_s - plain.dp_exposed_s
    assert hidden_dp > 0 and plain.overlap_s == pytest.approx(s * hidden_dp, rel=1e-12)
    assert plain.parts()["overlap slowdown"] == plain.overlap_s
    assert plain.step_time_s == pytest.approx(sum(plain.parts().values()), rel=1e-12)
    # tp_overlap: the TP traffic beyond the matmuls stays exposed, the rest is hidden and slows the compute beside it
    lapped = training.estimate(MID, CLUSTER, tp_overlap=True, **kw)
    hidden_tp = plain.tp_comm_s - lapped.tp_comm_s
    assert hidden_tp > 0
    assert lapped.overlap_s == pytest.approx(s * (hidden_dp + hidden_tp), rel=1e-12)
    # bubble = (p - 1) / v x the stage time of one microbatch: compute + exposed TP + its share of the slowdown
    m = lapped.microbatches
    assert lapped.bubble_s == pytest.approx((lapped.compute_s + lapped.tp_comm_s + s * hidden_tp) / m, rel=1e-12)
    assert lapped.step_time_s == pytest.approx(sum(lapped.parts().values()), rel=1e-12)
    # the fixed-efficiency model of Lesson 7 §1 prices hidden communication as free
    fixed = training.estimate(MID, CLUSTER, efficiency=0.5, **kw)
    assert fixed.overlap_s == 0.0 and "overlap slowdown" not in fixed.parts()


def test_overlap_slowdown_of_ring_attention_and_without_replicas():
    """Context parallelism: the ring's K/V transfers hidden under the attention core slow it by the same share. By hand
    for MID (h 2048, 16 heads of 128, K and V of 2048 each) at dp 2 x tp 2 x cp 2 on one toy node's NVLink (100 GB/s,
    no latency): a block is b (s / cp) 2 kv e / tp = 1 x 64 x 2 x 2048 x 2 / 2 = 262,144 B; the forward and the
    backward pass 3 (cp - 1) of them per layer, 4 layers, m = 8 / 2 = 4 microbatches: 48 blocks at the calibrated
    model's achieved NVLink rate (a link without a published figure: 48 / 50 of its 100 GB/s, efficiency.
    FALLBACK_LINK_SHARE), 1.31072e-4 s in all, of which cp_comm_s is exposed. Without replicas (dp x cp = 1) and without
    tp_overlap nothing is hidden."""
    s = 0.189
    kw = dict(global_batch=8, seq_len=128, tp=2, pp=1, micro_batch_size=1, sequence_parallel=True, zero=1)
    ring = training.estimate(MID, CLUSTER, dp=2, cp=2, **kw)
    assert ring.microbatches == 4
    ring_total = 4 * 4 * 3 * 262_144 / 96e9
    hidden_cp = ring_total - ring.cp_comm_s
    hidden_dp = ring.dp_comm_s - ring.dp_exposed_s
    assert hidden_cp > 0 and hidden_dp > 0
    assert ring.overlap_s == pytest.approx(s * (hidden_cp + hidden_dp), rel=1e-12)
    # one replica (dp x cp = 1: the cp ranks hold the same weights and reduce their gradients too) and no overlapped TP
    alone = training.estimate(MID, hardware.Cluster(NODE, 1, NIC), dp=1, cp=1, **{**kw, "tp": 4, "global_batch": 4})
    assert alone.dp_comm_s == 0.0 and alone.cp_comm_s == 0.0 and alone.overlap_s == 0.0


def test_overlap_slowdown_is_at_most_that_share_of_the_compute():
    """The published slowdown is of compute time: TP, CP and DP traffic hidden at once under the same compute slow no
    more than all of it (Llama 3.1 70B at 32K tokens, tp 8 x cp 8, TP overlapped: the hidden TP and ring traffic
    together outlast the compute)."""
    e = training.estimate(
        "llama3.1-70b",
        "dgx-h100",
        nodes=8,
        fabric="ib-ndr",
        global_batch=8,
        seq_len=32768,
        dp=1,
        tp=8,
        cp=8,
        pp=1,
        micro_batch_size=1,
        zero=3,
        recompute="none",
        sequence_parallel=True,
        tp_overlap=True,
    )
    assert 0 < e.overlap_s <= 0.189 * e.compute_s * (1 + 1e-12)


def _estimate(cfg, cluster=CLUSTER, global_batch=16):
    dp = cluster.gpus // (cfg["tp"] * cfg["pp"])
    return training.estimate(TINY, cluster, global_batch=global_batch, seq_len=128, dp=dp, **cfg)


@settings(max_examples=60, deadline=None)
@given(configs, st.floats(1.5, 100))
def test_more_bandwidth_is_never_slower(cfg, factor):
    fast_nic = hardware.Link("fast", NIC.bandwidth * factor, 0.0, "inter-node")
    fast_nvl = hardware.Link("fast-nvl", NVL.bandwidth * factor, 0.0, "intra-node")
    faster = hardware.Cluster(hardware.Node("n", GPU, 4, fast_nvl, fast_nic, 4), 2, fast_nic)
    assert _estimate(cfg, faster).step_time_s <= _estimate(cfg).step_time_s * (1 + 1e-12)


@settings(max_examples=60, deadline=None)
@given(configs)
def test_mfu_at_most_one_and_more_microbatches_never_a_larger_bubble_share(cfg):
    small, large = _estimate(cfg, global_batch=16), _estimate(cfg, global_batch=64)
    assert 0 < small.mfu <= 1 and 0 < large.mfu <= 1
    assert large.bubble_s / large.compute_s <= small.bubble_s / small.compute_s * (1 + 1e-12)


def test_planner_rows_equal_estimate_and_feasible_rank_first():
    p = planner.plan("llama3.1-70b", "dgx-h100", nodes=32, fabric="ib-ndr", global_batch=256, seq_len=8192)
    assert len(p) > 1000 and 0 < p.feasible_count < len(p)
    flags = p.feasible[p.order]
    assert not np.any(flags[1:] & ~flags[:-1]), "an infeasible configuration ranked above a feasible one"
    rng = np.random.default_rng(0)
    for rank in [0, 1, *rng.integers(0, len(p), 20)]:
        row = p.row(int(rank))
        kw = {
            k: row[k]
            for k in (
                "dp",
                "tp",
                "cp",
                "pp",
                "chunks",
                "micro_batch_size",
                "zero",
                "recompute",
                "sequence_parallel",
                "schedule",
            )
        }
        e = training.estimate(
            "llama3.1-70b", "dgx-h100", nodes=32, fabric="ib-ndr", global_batch=256, seq_len=8192, **kw
        )
        assert e.step_time_s == pytest.approx(row["step_time_s"], rel=1e-12)
        assert e.mfu == pytest.approx(row["mfu"], rel=1e-12)  # the same (PaLM) model FLOPs
        assert e.memory.total_bytes == pytest.approx(row["memory_per_gpu_bytes"], rel=1e-12)
        assert e.feasible == row["fits"]
    front = p.pareto_front()
    times = [r["step_time_s"] for r in front]
    mems = [r["memory_per_gpu_bytes"] for r in front]
    assert times == sorted(times) and mems == sorted(mems, reverse=True)


def test_planner_counts_at_least_ten_thousand_for_1024_gpus():
    p = planner.plan("llama3.1-70b", hardware.cluster("dgx-h100", 128, "ib-ndr"), global_batch=1024, seq_len=8192)
    assert len(p) >= 10_000


MID = models.TransformerModel(name="mid", layers=4, hidden=2048, heads=16, ffn=8192, vocab=1000, seq_len=128)


def test_zero3_traffic_is_paid_every_microbatch_by_hand():
    # dp 2 x tp 2 x pp 2 on 2 toy nodes of 4, global batch 8, b = 1: m = 8 / 2 = 4 microbatches.
    # DP groups {r, r + 2} sit on one node: NVLink, 100 GB/s, no latency. M = P / (tp pp) x 2 B.
    kw = dict(global_batch=8, seq_len=128, dp=2, tp=2, pp=2, micro_batch_size=1, efficiency=0.5)
    z1 = training.estimate(MID, CLUSTER, zero=1, **kw)
    z3 = training.estimate(MID, CLUSTER, zero=3, **kw)
    P = MID.parameter_count()
    M = P / 4 * 2
    buckets = math.ceil(M / (25 * 2**20))  # DDP's 25 MiB buckets: 4 here
    assert buckets == 4
    # one microbatch's forward + backward on a stage, per token: a layer's forward 2 x 50,339,840 + 4 x 128 x 2048
    # = 101,728,256; the logits 2 x 2048 x 1000 = 4,096,000; 2 layers x 3 + logits x 3 = 622,657,536 FLOP,
    # x 128 tokens / tp 2 / (1e14 x 0.5); the backward is 2/3 of it (2 of 3 passes of everything)
    assert MID.params_per_layer() == 50_339_840
    t_mb = 622_657_536 * 128 / 2 / 5e13
    # ZeRO-1: gradients accumulate over the 4 microbatches; ONE reduce-scatter + all-gather per step,
    # each (N-1)/N M = M/2 per GPU: M bytes at 100 GB/s. The reduce-scatter overlaps the last backward (4/6 of
    # t_mb), the all-gather the next step's first forward (2/6 of t_mb), each in the 4 buckets
    ar = M / 100e9
    assert z1.dp_comm_s == pytest.approx(ar, rel=1e-12)

    def exposed(comm, compute):
        return max(comm / buckets, comm - (buckets - 1) / buckets * compute)

    assert z1.dp_exposed_s == pytest.approx(exposed(ar / 2, 4 / 6 * t_mb) + exposed(ar / 2, 2 / 6 * t_mb), rel=1e-12)
    # ZeRO-3: every microbatch, layer by layer (2 layers on a stage, each holding M/2 of the shard), all-gathers
    # the layer's parameters in forward, again in backward, and reduce-scatters its gradients; each moves
    # (N-1)/N x M/2 = M/4 per GPU: 3 x 2 x M/4 = 1.5 M bytes per microbatch, 4 times per step
    gather = M / 4 / 100e9
    # the last layer stays unsharded from its forward to its backward (torchtitan): 3 x 2 - 1 collectives
    assert z3.dp_comm_s == pytest.approx(4 * (3 * 2 - 1) * gather, rel=1e-12)
    # one layer of prefetch on one communication stream (distlab.fsdp's schedule, checked against its event
    # simulation there): the exposed time of a microbatch is its end minus the 2 layers' compute
    f_layer, b_layer = 2 / 6 * t_mb / 2, 4 / 6 * t_mb / 2
    timeline = fsdp.fsdp_timeline(f_layer, b_layer, gather, gather, layers=2, prefetch=1, reshard_after_forward=True)
    assert z3.dp_exposed_s == pytest.approx(4 * timeline.exposed_s, rel=1e-9)
    # nothing else moves between the two (compute, TP, bubble, p2p are ZeRO-independent)
    assert (z3.compute_s, z3.tp_comm_s, z3.bubble_s, z3.p2p_s) == (z1.compute_s, z1.tp_comm_s, z1.bubble_s, z1.p2p_s)


@settings(max_examples=40, deadline=None)
@given(configs, st.sampled_from([16, 32, 64]))
def test_zero3_traffic_grows_with_microbatches_and_others_do_not(cfg, batch):
    # invariant: per step, ZeRO-0/1 move the same bytes whatever m; ZeRO-2 one reduce-scatter per microbatch
    # plus one all-gather (m + 1 halves of an all-reduce); ZeRO-3 m times its per-microbatch 3M
    small, large = _estimate(cfg, global_batch=batch), _estimate(cfg, global_batch=2 * batch)
    if cfg["zero"] == 3:
        assert large.dp_comm_s == pytest.approx(2 * small.dp_comm_s, rel=1e-12)
        assert large.dp_exposed_s == pytest.approx(2 * small.dp_exposed_s, rel=1e-12)
    elif cfg["zero"] == 2:
        m = small.microbatches
        assert large.dp_comm_s == pytest.approx(small.dp_comm_s * (2 * m + 1) / (m + 1), rel=1e-12)
    else:
        assert large.dp_comm_s == pytest.approx(small.dp_comm_s, rel=1e-12)


def test_balanced_stages_by_hand():
    """Llama 3's layout (balance_stages): 126 layers on 16 stages, the first and last one layer fewer: the middle
    stages hold ceil(128 / 16) = 8 layers and pace the pipeline, since one Llama-3.1-405B layer's training FLOPs
    outweigh the logits' (2 x 16,384 x 128,256 x 3 < 3 x (2 x params_per_layer + 4 s a d) per token). At a fixed 50%
    of peak, compute = m x 8 x 3 x layer forward FLOPs / (tp x peak x 0.5); the first stage's weights are 7 layers'."""
    model = models.model("llama3.1-405b")
    assert model.layers == 126
    kw = dict(
        nodes=128,
        fabric="ib-ndr",
        global_batch=128,
        seq_len=8192,
        tp=8,
        pp=16,
        zero=1,
        efficiency=0.5,
        memory_recipe="megatron-distributed-optimizer",
    )
    est = training.estimate(model, "dgx-h100", balance_stages=True, **kw)
    m, s = est.microbatches, 8192
    layer_forward = s * (2 * model.params_per_layer() + 4 * s * model.heads * model.head_dim)
    assert 2 * model.hidden * model.vocab * s < 3 * layer_forward
    assert est.compute_s == pytest.approx(m * 8 * 3 * layer_forward / (8 * 989.4e12 * 0.5), rel=1e-12)
    plain = training.estimate(model, "dgx-h100", **kw)  # ceil(126 / 16) = 8 layers plus the logits
    assert plain.compute_s == pytest.approx(
        m * (8 * 3 * layer_forward + 3 * 2 * model.hidden * model.vocab * s) / (8 * 989.4e12 * 0.5), rel=1e-12
    )
    # Megatron's first stage holds its layers and the embedding: 7 layers here, 8 without balancing
    per_param = 6 + 12 / est.config["dp"]
    first = (7 * model.params_per_layer() + model.embedding_params()) / 8
    assert est.memory.model_states_bytes == pytest.approx(first * per_param, rel=1e-12)


def test_balanced_interleaving_may_give_the_ends_their_own_chunk():
    """Llama 3 (Dubey et al. 2024, Sec. 3.3.2): one layer fewer on the first and last stage 'means that the first
    model chunk on the first stage has only the embedding, and the last ... only output projection and loss': 126
    layers + 2 fill pp x v = 16 x 8 = 128 chunks of one layer. Balanced, this is accepted (busiest stage: 8 layers,
    bubble (pp - 1) / (v m) of the stage time); unbalanced, 126 layers cannot fill 128 chunks."""
    kw = dict(nodes=2048, fabric="ib-ndr", global_batch=2048, seq_len=8192, tp=8, pp=16, schedule="interleaved")
    est = training.estimate("llama3.1-405b", "dgx-h100", chunks=8, balance_stages=True, efficiency=0.5, **kw)
    m = est.microbatches
    assert m == 16 and est.bubble_s == pytest.approx(15 / (8 * 16) * (est.compute_s + est.tp_comm_s), rel=1e-9)
    with pytest.raises(ConfigurationError, match="126 layers cannot fill pp x chunks = 128 chunks"):
        training.estimate("llama3.1-405b", "dgx-h100", chunks=8, efficiency=0.5, **kw)
