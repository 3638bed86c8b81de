"""The step model (training.estimate) and the planner on mixture-of-experts models (issue 16, "through the
library"): a hand derivation, invariants, agreement with distlab.moe's scalar formulas, errors and fuzzing."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from distlab import hardware, memory, mesh, models, moe, planner, training
from distlab.errors import ConfigurationError

GPU = hardware.Accelerator("toy-gpu", {"bf16": 1e14}, 80e9, 1e12)
NVL = hardware.Link("toy-nvlink", 100e9, 0.0, "intra-node")
NIC = hardware.Link("toy-nic", 10e9, 0.0, "inter-node")
NODE = hardware.Node("toy-node", GPU, 4, NVL, NIC, 4)
CLUSTER = hardware.Cluster(NODE, 2, NIC)  # 2 nodes of 4 GPUs, 100 GB/s NVLink, 10 GB/s fabric per GPU, no latency

TOY = moe.MoEModel(
    name="toy-moe",
    layers=2,
    hidden=512,
    heads=4,
    kv_heads=4,
    vocab=1000,
    experts=8,
    expert_ffn=256,
    top_k=2,
    seq_len=128,
)


def test_small_moe_configuration_by_hand():
    """8 GPUs, dp 8, ep 8 (etp = tp = 1), one 128-token sequence per GPU (m = 1), ZeRO-1, 50% of peak."""
    e = training.estimate(TOY, CLUSTER, global_batch=8, seq_len=128, ep=8, zero=1, efficiency=0.5)
    # parameters: attention 2 x 512 x 512 (Q, O) + 2 x 512 x 4 x 128 (K, V) = 1,048,576; norms 2 x 512; router
    # 512 x 8 = 4,096; one expert 3 x 512 x 256 = 393,216. Active block: 1,048,576 + 1,024 + 4,096 + 2 x 393,216
    # = 1,840,128. Routed experts 2 layers x 8 x 393,216 = 6,291,456; non-expert 9,423,360 - 6,291,456 = 3,131,904
    assert TOY.moe_layer_active_params() == 1_840_128
    assert (TOY.routed_expert_parameter_count(), TOY.non_expert_parameter_count()) == (6_291_456, 3_131_904)
    # compute per token: a layer's forward 2 x 1,840,128 + 4 x s 128 x (q/k width 512 + v width 512) / 2
    # = 3,680,256 + 262,144 = 3,942,400; logits 2 x 512 x 1000 = 1,024,000; 2 layers x 3 + logits x 3
    # = 23,654,400 + 3,072,000 = 26,726,400 FLOP, x 128 tokens / (1e14 x 0.5)
    t_mb = 26_726_400 * 128 / 5e13
    assert e.microbatches == 1 and e.compute_s == pytest.approx(t_mb, rel=1e-12)
    # the same count as moe_step_flops (PaLM's model FLOPs): 26,726,400 per token x 8 x 128 tokens
    assert e.model_flops == pytest.approx(26_726_400 * 8 * 128, rel=1e-12)
    # all-to-all: EP members 1 rank apart, 4 per node (ep 8 over 2 nodes). Send buffer 128 tokens x top-2 x 512 x
    # 2 B = 262,144 B; 3/8 of it to the 3 others on the node (98,304 B at 100 GB/s = 0.98 us), 4/8 across nodes
    # (131,072 B at 10 GB/s = 13.1072 us): the slower part sets the time; x 4 all-to-alls x 2 MoE layers x m 1
    assert e.ep_comm_s == pytest.approx(4 * 2 * 131_072 / 10e9, rel=1e-12)
    assert e.parts()["EP all-to-all"] == e.ep_comm_s
    assert (e.tp_comm_s, e.bubble_s, e.p2p_s, e.cp_comm_s) == (0.0, 0.0, 0.0, 0.0)
    # model states, 16 B per parameter, ZeRO-1: non-expert over dp 8: 3,131,904 x (2 + 2 + 12/8) = 17,225,472;
    # experts over ep 8 (786,432 each), edp = 8 / 8 = 1: 786,432 x 16 = 12,582,912; together 29,808,384
    states = e.memory.weights_bytes + e.memory.gradients_bytes + e.memory.optimizer_bytes
    assert states == pytest.approx(17_225_472 + 12_582_912, rel=1e-12)
    assert states == pytest.approx(moe.expert_parallel_memory(TOY, 8, ep=8, zero=1).total_bytes, rel=1e-12)
    # gradients: the non-expert 3,131,904 x 2 B = 6,263,808 B over the 8 DP ranks (2 nodes of 4: hierarchical,
    # a ring over 4 on NVLink 2 x 3/4 x M / 100 GB/s + a ring over 2 nodes of M/4 at 10 GB/s 2 x 1/2 x M/4 / 10 GB/s);
    # the expert gradients have edp 1: nothing to reduce
    M = 6_263_808
    ar = 2 * 3 / 4 * M / 100e9 + 2 * 1 / 2 * (M / 4) / 10e9
    assert e.dp_comm_s == pytest.approx(ar, rel=1e-12)
    # one 25 MiB bucket (7,836,672 B of gradients): the reduce-scatter and all-gather are fully exposed
    assert math.ceil((M + 786_432 * 2) / (25 * 2**20)) == 1
    assert e.dp_exposed_s == pytest.approx(ar, rel=1e-12)
    # optimizer: (2 x optimizer + gradients + weights) / 1 TB/s; optimizer 4,697,856 + 9,437,184 = 14,135,040 B,
    # gradients = weights = 6,263,808 + 1,572,864 = 7,836,672 B
    assert e.optimizer_s == pytest.approx((2 * 14_135_040 + 2 * 7_836_672) / 1e12, rel=1e-12)
    assert e.step_time_s == pytest.approx(e.compute_s + e.ep_comm_s + e.dp_exposed_s + e.optimizer_s, rel=1e-12)
    assert e.config["ep"] == 8 and e.config["etp"] == 1


def test_expert_gradients_reduce_over_the_expert_data_parallel_group_by_hand():
    # ep 2 on 8 GPUs: edp = 8 / 2 = 4, members 2 ranks apart (mesh.expert_layout: {0, 2, 4, 6}), 2 per node:
    # hierarchical, a ring over 2 on NVLink + a ring of M/2 over 2 nodes at the fabric (equal local ranks)
    e2 = training.estimate(TOY, CLUSTER, global_batch=8, seq_len=128, ep=2, zero=0, efficiency=0.5)
    assert mesh.expert_layout(8, ep=2, gpus_per_node=4).group_of(0, "dp") == [0, 2, 4, 6]
    dense, expert = 6_263_808, 6_291_456 / 2 * 2
    ar_dense = 2 * 3 / 4 * dense / 100e9 + 2 * 1 / 2 * (dense / 4) / 10e9
    ar_expert = 2 * 1 / 2 * expert / 100e9 + 2 * 1 / 2 * (expert / 2) / 10e9
    assert e2.dp_comm_s == pytest.approx(ar_dense + ar_expert, rel=1e-12)


def test_all_to_all_equals_moe_layer_cost_on_a_real_cluster():
    # an independent path: moe_layer_cost (scalar, EP members per node from mesh.expert_layout's rank grid,
    # collectives' pairwise all-to-all, the fabric share inter_node_bandwidth_per_gpu) x MoE layers x microbatches.
    # The fixed-efficiency model prices links at line rate, as moe_layer_cost does.
    cl = hardware.cluster("dgx-h100", 4, "ib-ndr")
    for tp, ep, etp in ((1, 8, 1), (2, 8, 2), (2, 8, 1), (4, 8, 4), (1, 4, 1), (8, 2, 8)):
        e = training.estimate(
            "mixtral-8x7b",
            cl,
            global_batch=64,
            seq_len=4096,
            tp=tp,
            ep=ep,
            etp=etp,
            sequence_parallel=True,
            efficiency=0.5,
            zero=1,
        )
        layer = moe.moe_layer_cost("mixtral-8x7b", cl, seq_len=4096, tp=tp, ep=ep, etp=etp)
        assert e.ep_comm_s == pytest.approx(32 * e.microbatches * layer.all_to_all_time_s, rel=1e-12), (tp, ep, etp)


def test_deepseek_v3_stage_holds_ceil_layers_moe_layers():
    # 61 layers on 16 stages: the busiest stage ceil(61 / 16) = 4 MoE layers, as moe_step_cost counts them
    cl = hardware.cluster("dgx-h100", 256, "ib-ndr")
    e = training.estimate(
        "deepseek-v3", cl, global_batch=1920, seq_len=4096, pp=16, ep=64, zero=1, efficiency=0.5, recompute="full"
    )
    ref = moe.moe_step_cost("deepseek-v3", cl, 2048, microbatches=e.microbatches, pp=16, ep=64, recompute="full")
    assert ref.moe_layers == 4
    assert e.ep_comm_s == pytest.approx(ref.all_to_all_time_s, rel=1e-12)


ONE = moe.MoEModel(
    name="one-expert",
    layers=4,
    hidden=512,
    heads=8,
    kv_heads=4,
    vocab=1000,
    experts=1,
    expert_ffn=768,
    top_k=1,
    seq_len=256,
)
DENSE = models.TransformerModel(
    name="dense-twin",
    layers=4,
    hidden=512,
    heads=8,
    kv_heads=4,
    ffn=768,
    vocab=1000,
    gated_mlp=True,
    norm="rmsnorm",
    seq_len=256,
)


@settings(max_examples=40, deadline=None)
@given(
    tp=st.sampled_from([1, 2, 4]),
    pp=st.sampled_from([1, 2, 4]),
    zero=st.integers(0, 3),
    recompute=st.sampled_from(["none", "selective", "full"]),
    b=st.sampled_from([1, 2]),
)
def test_one_expert_at_ep_1_is_the_dense_path(tp, pp, zero, recompute, b):
    """A one-expert MoE at ep 1 is the dense SwiGLU model plus its router and its dispatched copy (h x 1 weights per layer, so L x h more
    parameters): every part equals the dense path's but for those router weights, which scale the model states and
    the gradient traffic by P_moe / P_dense and add 2 x 3 x h FLOPs per token and layer to the compute."""
    assume(tp * pp <= 8)  # the 8 GPUs of CLUSTER
    assert ONE.parameter_count() == DENSE.parameter_count() + 4 * 512
    kw = dict(
        global_batch=16,
        seq_len=256,
        tp=tp,
        pp=pp,
        zero=zero,
        recompute=recompute,
        micro_batch_size=b,
        sequence_parallel=tp > 1,
        efficiency=0.5,
    )
    m, d = training.estimate(ONE, CLUSTER, **kw), training.estimate(DENSE, CLUSTER, **kw)
    assert m.ep_comm_s == 0.0
    assert (m.tp_comm_s, m.p2p_s, m.cp_comm_s) == (d.tp_comm_s, d.p2p_s, d.cp_comm_s)
    # activations: an MoE layer keeps, beyond the dense SwiGLU layer, its router scores (E = 1) and combine weights
    # (k = 1) and the dispatched copy's input and output (2 x etp x k x h, etp = tp gathered), per token on the GPU
    # (b 256 / tp), 2 bytes each; full recomputation keeps the layer input only, as the dense layer
    stored = "selective" if recompute == "none" else recompute  # estimate's flash attention never keeps scores
    dense_layer = memory.activation_bytes_per_layer(DENSE, b, 256, tp, tp > 1, stored)
    moe_layer = moe.moe_activation_bytes(ONE, b, 256, tp=tp, recompute=stored).total
    extra = 0 if recompute == "full" else b * 256 / tp * (1 + 1 + 2 * tp * 1 * 512) * 2
    assert moe_layer - dense_layer == extra
    # both paths multiply their per-layer bytes by the same layers and microbatches in flight
    assert m.memory.activations_bytes == pytest.approx(d.memory.activations_bytes * moe_layer / dense_layer, rel=1e-12)
    ratio = ONE.parameter_count() / DENSE.parameter_count()
    states = lambda e: e.memory.weights_bytes + e.memory.gradients_bytes + e.memory.optimizer_bytes  # noqa: E731
    assert states(m) == pytest.approx(states(d) * ratio, rel=1e-12)
    assert m.dp_comm_s == pytest.approx(d.dp_comm_s * ratio, rel=1e-12)  # no latency: ring time is linear in bytes
    passes = 3 + (recompute == "full")
    layers = math.ceil(4 / pp)
    router = m.microbatches * layers * passes * 2 * 512 * b * 256 / (tp * 1e14 * 0.5)
    assert m.compute_s - d.compute_s == pytest.approx(router, rel=1e-9)
    assert m.model_flops - d.model_flops == pytest.approx(3 * 2 * 4 * 512 * 16 * 256, rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    tp=st.sampled_from([1, 2, 4, 8]),
    pp=st.sampled_from([1, 2, 4]),
    zero=st.integers(0, 3),
    recipe=st.sampled_from(["zero-paper", "megatron", "megatron-distributed-optimizer", "deepspeed", "fsdp2"]),
    etp_is_tp=st.booleans(),
)
def test_more_expert_parallelism_never_increases_memory_per_gpu(tp, pp, zero, recipe, etp_is_tp):
    from distlab import memory_recipes

    if zero not in memory_recipes.memory_recipe(recipe).zero_stages:
        return
    cl = hardware.cluster("dgx-h100", 8, "ib-ndr")
    etp = tp if etp_is_tp else 1
    totals = []
    for ep in (x for x in (1, 2, 4, 8) if 64 % (etp * x * pp) == 0):
        e = training.estimate(
            "mixtral-8x7b",
            cl,
            global_batch=64,
            seq_len=4096,
            tp=tp,
            pp=pp,
            ep=ep,
            etp=etp,
            zero=zero,
            memory_recipe=recipe,
            sequence_parallel=True,
        )
        totals.append(e.memory.total_bytes)
    assert all(b <= a * (1 + 1e-12) for a, b in zip(totals, totals[1:])), totals


def test_invalid_expert_parallelism_names_the_valid_values():
    kw = dict(global_batch=64, seq_len=4096)
    with pytest.raises(ConfigurationError, match=r"ep=3 does not divide the 8 routed experts.*valid ep: 1, 2, 4, 8"):
        training.estimate("mixtral-8x7b", "dgx-h100", nodes=2, fabric="ib-ndr", ep=3, **kw)
    with pytest.raises(ConfigurationError, match=r"etp=4.*valid etp: 1, 2"):
        training.estimate(
            "mixtral-8x7b", "dgx-h100", nodes=2, fabric="ib-ndr", tp=2, sequence_parallel=True, ep=2, etp=4, **kw
        )
    with pytest.raises(ConfigurationError, match=r"needs sequence_parallel=True"):
        training.estimate("mixtral-8x7b", "dgx-h100", nodes=2, fabric="ib-ndr", tp=2, ep=2, **kw)
    with pytest.raises(ConfigurationError, match=r"does not divide the 16 GPUs.*valid ep here: 1, 2, 4"):
        training.estimate("mixtral-8x7b", "dgx-h100", nodes=2, fabric="ib-ndr", pp=4, ep=8, etp=1, **kw)
    with pytest.raises(ConfigurationError, match=r"llama2-7b is dense \(valid: ep=1, etp=None\)"):
        training.estimate("llama2-7b", "dgx-h100", nodes=2, fabric="ib-ndr", ep=2, **kw)
    with pytest.raises(ConfigurationError, match=r"ep=0"):
        training.estimate("mixtral-8x7b", "dgx-h100", nodes=2, fabric="ib-ndr", ep=0, **kw)


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(sorted(moe.MOE_MODELS)),
    ep=st.one_of(st.integers(-2, 300), st.floats(allow_nan=True), st.none(), st.text(max_size=3)),
    etp=st.one_of(st.none(), st.integers(-1, 16), st.floats(allow_nan=True)),
    tp=st.sampled_from([1, 2, 8]),
    pp=st.sampled_from([1, 2, 4]),
    zero=st.integers(0, 3),
    recompute=st.sampled_from(["none", "selective", "full"]),
)
def test_fuzz_expert_parallelism_gives_a_finite_estimate_or_our_error(name, ep, etp, tp, pp, zero, recompute):
    try:
        e = training.estimate(
            name,
            "dgx-h100",
            nodes=32,
            fabric="ib-ndr",
            global_batch=512,
            seq_len=4096,
            tp=tp,
            pp=pp,
            ep=ep,
            etp=etp,
            zero=zero,
            recompute=recompute,
            sequence_parallel=True,
        )
    except ConfigurationError as err:
        assert str(err)
        return
    values = [e.step_time_s, e.ep_comm_s, e.memory.total_bytes, e.mfu, *e.parts().values()]
    assert all(np.isfinite(v) and v >= 0 for v in values)
    assert e.step_time_s == pytest.approx(sum(e.parts().values()), rel=1e-9)


def test_planner_rows_equal_estimate_for_an_moe_model():
    kw = dict(nodes=4, fabric="ib-ndr", global_batch=256, seq_len=4096)
    p = planner.plan("mixtral-8x7b", "dgx-h100", **kw)
    assert 0 < p.feasible_count < len(p)
    ep, etp, tp, pp = (p.columns[k] for k in ("ep", "etp", "tp", "pp"))
    assert set(ep.tolist()) == {1, 2, 4, 8} and np.all((etp == 1) | (etp == tp))
    assert np.all(32 % (etp * ep * pp) == 0) and np.all((tp == 1) | (p.columns["sequence_parallel"] == 1))
    rng = np.random.default_rng(1)
    for rank in [0, 1, *rng.integers(0, len(p), 20)]:
        row = p.row(int(rank))
        args = {
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
                "ep",
                "etp",
            )
        }
        e = training.estimate("mixtral-8x7b", "dgx-h100", **kw, **args)
        assert e.step_time_s == pytest.approx(row["step_time_s"], rel=1e-12)
        assert e.mfu == pytest.approx(row["mfu"], rel=1e-12)
        assert e.memory.total_bytes == pytest.approx(row["memory_per_gpu_bytes"], rel=1e-12)
        assert e.feasible == row["fits"]
    assert "ep etp" in p.table(3)
    d = p.deciding_assumption(0, 1)
    assert abs(sum(d.differences_s.values()) - d.step_time_difference_s) < 1e-9


def test_planner_counts_the_expert_layouts_it_searches():
    # Mixtral on 16 GPUs, one dense row (tp 2, pp 1, sequence parallel): ep in {1, 2, 4, 8} x etp in {1, 2}, all
    # dividing 16: 8 rows; with pp 4 only etp x ep x 4 | 16: (1,1) (2,1) (4,1) (1,2) (2,2) = 5
    cols = {name: np.array([value, value]) for name, value in zip(planner.COLUMNS, (8, 2, 1, 1, 1, 1, 0, 1, 1, 1))}
    cols["pp"] = np.array([1, 4])
    out = planner.expert_parallel_columns(moe.model("mixtral-8x7b"), cols, 16, 8, {})
    pairs = sorted(zip(out["pp"].tolist(), out["ep"].tolist(), out["etp"].tolist()))
    assert [p[1:] for p in pairs if p[0] == 1] == [(1, 1), (1, 2), (2, 1), (2, 2), (4, 1), (4, 2), (8, 1), (8, 2)]
    assert [p[1:] for p in pairs if p[0] == 4] == [(1, 1), (1, 2), (2, 1), (2, 2), (4, 1)]


def test_members_per_node_closed_form_equals_the_rank_layout():
    # an independent implementation: moe.ep_members_per_node reads mesh.expert_layout's rank grid (Megatron's
    # RankGenerator order tp-ep-dp-pp with tp = etp)
    from distlab.moe import step

    for g in (4, 8):
        for etp in (x for x in (1, 2, 4, 8) if g % x == 0):
            for ep in (1, 2, 4, 8, 16, 32, 64, 128, 256):
                want = moe.ep_members_per_node(etp=etp, ep=ep, gpus_per_node=g)
                assert float(step.ep_members_per_node_array(ep, etp, g)) == want, (g, etp, ep)


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(sorted(moe.MOE_MODELS)),
    gpus=st.integers(-4, 5000),
    tp=st.one_of(st.integers(-1, 16), st.floats(allow_nan=True)),
    cp=st.integers(1, 4),
    pp=st.integers(1, 64),
    ep=st.one_of(st.integers(-1, 512), st.none(), st.text(max_size=2)),
    etp=st.one_of(st.none(), st.integers(-1, 16)),
    sp=st.booleans(),
)
def test_fuzz_check_expert_parallel_accepts_or_names_the_rule(name, gpus, tp, cp, pp, ep, etp, sp):
    from distlab.moe import step

    try:
        ep_ok, etp_ok = step.check_expert_parallel(
            name, gpus, tp=tp, cp=cp, pp=pp, ep=ep, etp=etp, sequence_parallel=sp, gpus_per_node=8
        )
    except (ConfigurationError, TypeError) as err:
        assert isinstance(err, ConfigurationError), f"a bare {type(err).__name__}: {err}"
        return
    m = moe.model(name)
    assert tp >= 1 and gpus >= 1 and m.experts % ep_ok == 0 and etp_ok in (1, tp)
    assert gpus % (etp_ok * ep_ok * pp) == 0 and (tp == 1 or sp)


@settings(max_examples=12, deadline=None)
@given(
    name=st.sampled_from(["mixtral-8x7b", "qwen3-235b-a22b", "gpt-oss-120b"]),
    nodes=st.sampled_from([1, 2, 4]),
    batch=st.sampled_from([32, 64, 128]),
    seq=st.sampled_from([2048, 4096]),
)
def test_fuzz_planner_searches_only_valid_expert_layouts(name, nodes, batch, seq):
    if name not in moe.MOE_MODELS:
        return
    p = planner.plan(name, "dgx-h100", nodes=nodes, fabric="ib-ndr", global_batch=batch, seq_len=seq)
    n, m = 8 * nodes, moe.model(name)
    ep, etp, tp, pp = (p.columns[k] for k in ("ep", "etp", "tp", "pp"))
    assert np.all(m.experts % ep == 0) and np.all((etp == 1) | (etp == tp)) and np.all(n % (etp * ep * pp) == 0)
    assert np.all(np.isfinite(p.results["step_time_s"])) and np.all(p.results["ep_comm_s"] >= 0)
    assert np.all(p.results["ep_comm_s"][ep == 1] == 0)  # no expert parallelism, no all-to-all


# --------------------------------------------------------------------------- routing knobs (Lesson 10 §3, §5)


def test_imbalance_slows_the_busiest_gpus_experts_by_hand():
    # TOY on 8 GPUs, ep 8, m = 1, 50% of peak. The busiest GPU takes 1.5x the copies: its routed-expert forward is
    # 0.5 x k 2 x 393,216 parameters x 2 FLOP more per token and MoE layer; x 3 passes x 2 layers x 128 tokens
    base = training.estimate(TOY, CLUSTER, global_batch=8, seq_len=128, ep=8, zero=1, efficiency=0.5)
    busy = training.estimate(TOY, CLUSTER, global_batch=8, seq_len=128, ep=8, zero=1, efficiency=0.5, moe_imbalance=1.5)
    extra = 0.5 * 2 * 393_216 * 2 * 3 * 2 * 128 / 5e13
    assert busy.compute_s - base.compute_s == pytest.approx(extra, rel=1e-9)
    # MFU counts useful FLOPs: the same model FLOPs over a longer step
    assert busy.model_flops == base.model_flops and busy.mfu < base.mfu
    # activations: the busiest GPU keeps 1.5x the copies' inputs, outputs (2 x 2 x 512 x 2 B per token) and SwiGLU
    # intermediates (2 x 3 x 256 x 2 B): 0.5 x (4,096 + 3,072) B x 128 tokens x 2 MoE layers x 1 in flight
    assert busy.memory.activations_bytes - base.memory.activations_bytes == 0.5 * (4096 + 3072) * 128 * 2
    assert busy.ep_comm_s == base.ep_comm_s  # the dispatch sends T k copies either way (moe_layer_cost's model)
    assert busy.config["moe_imbalance"] == 1.5
    # ep 1: one GPU takes every copy, so no imbalance is possible
    with pytest.raises(ConfigurationError, match=r"moe_imbalance=1.5 is more than min\(ep, experts / top_k\) = 1"):
        training.estimate(TOY, CLUSTER, global_batch=8, seq_len=128, ep=1, moe_imbalance=1.5)


@pytest.mark.parametrize("routing", [dict(capacity_factor=1.25), dict(max_nodes=1), dict(capacity_factor=0.5)])
def test_capacity_and_node_limit_all_to_all_equal_moe_layer_cost(routing):
    # the independent scalar path (cost.all_to_all_bytes with capacity padding or node-limited routing, timed by
    # all_to_all_time) x MoE layers x microbatches; EP 32 of Qwen3-235B over 4 nodes
    cl = hardware.cluster("dgx-h100", 8, "ib-ndr")
    knobs = dict(capacity_factor=routing.get("capacity_factor"), max_nodes_per_token=routing.get("max_nodes"))
    e = training.estimate(
        "qwen3-235b-a22b", cl, global_batch=64, seq_len=4096, pp=2, ep=32, zero=1, efficiency=0.5, **knobs
    )
    layer = moe.moe_layer_cost("qwen3-235b-a22b", cl, seq_len=4096, ep=32, **routing)
    assert e.ep_comm_s == pytest.approx(47 * e.microbatches * layer.all_to_all_time_s, rel=1e-12)  # 94 layers / pp 2
    base = training.estimate("qwen3-235b-a22b", cl, global_batch=64, seq_len=4096, pp=2, ep=32, zero=1, efficiency=0.5)
    if "capacity_factor" in routing:  # padded buffers: every GPU runs capacity_factor x the balanced copies
        c = routing["capacity_factor"]
        assert (e.compute_s > base.compute_s) == (c > 1) and (e.ep_comm_s > base.ep_comm_s) == (c > 1)
    else:  # one copy per remote node instead of one per remote expert: 1 x 3/4 of 8 x 3/4
        assert e.ep_comm_s < base.ep_comm_s and e.compute_s == base.compute_s


def test_routing_knobs_default_to_the_dropless_balanced_model():
    kw = dict(global_batch=8, seq_len=128, ep=8, zero=1, efficiency=0.5)
    base = training.estimate(TOY, CLUSTER, **kw)
    same = training.estimate(TOY, CLUSTER, **kw, moe_imbalance=1, capacity_factor=None, max_nodes_per_token=None)
    assert base.to_dict() == same.to_dict()


@pytest.mark.parametrize(
    "knobs, match",
    [
        (dict(moe_imbalance=0.9), r"moe_imbalance=0.9 must be a number >= 1 and <= 4"),
        (dict(moe_imbalance=float("inf")), "moe_imbalance=inf"),
        (dict(moe_imbalance="2"), "moe_imbalance='2'"),
        (dict(capacity_factor=0), r"capacity_factor=0 must be a number > 0 and <= 4"),
        (dict(capacity_factor=True), "capacity_factor=True"),
        (dict(max_nodes_per_token=0), "max_nodes_per_token=0 must be a whole number"),
        (dict(max_nodes_per_token=2, capacity_factor=1.0), "not both"),
    ],
)
def test_routing_knob_errors(knobs, match):
    with pytest.raises(ConfigurationError, match=match):
        training.estimate(TOY, CLUSTER, global_batch=8, seq_len=128, ep=8, **knobs)
    with pytest.raises(ConfigurationError, match=match):
        planner.plan(TOY, CLUSTER, global_batch=8, seq_len=128, **knobs)


def test_routing_knobs_on_a_dense_model_are_our_error():
    for knobs in (dict(moe_imbalance=2.0), dict(capacity_factor=1.0), dict(max_nodes_per_token=2)):
        with pytest.raises(ConfigurationError, match="dense"):
            training.estimate(DENSE, CLUSTER, global_batch=8, seq_len=256, **knobs)
        with pytest.raises(ConfigurationError, match="dense"):
            planner.plan(DENSE, CLUSTER, global_batch=8, seq_len=256, **knobs)


def test_plan_prices_each_candidate_at_its_clipped_imbalance():
    # every candidate of the plan equals estimate() of that configuration, the imbalance clipped at min(ep, E / k)
    p = planner.plan(TOY, CLUSTER, global_batch=8, seq_len=128, efficiency=0.5, moe_imbalance=1.5)
    for i in p.order[:40:4]:
        c = {k: v[i] for k, v in p.columns.items()}
        ep = int(c["ep"])
        e = training.estimate(
            TOY,
            CLUSTER,
            global_batch=8,
            seq_len=128,
            dp=int(c["dp"]),
            tp=int(c["tp"]),
            pp=int(c["pp"]),
            cp=int(c["cp"]),
            chunks=int(c["chunks"]),
            micro_batch_size=int(c["micro_batch_size"]),
            zero=int(c["zero"]),
            recompute=memory.RECOMPUTE_MODES[int(c["recompute_code"])],
            sequence_parallel=bool(c["sequence_parallel"]),
            schedule=training.SCHEDULES[int(c["schedule_code"])],
            efficiency=0.5,
            ep=ep,
            etp=int(c["etp"]),
            moe_imbalance=min(1.5, ep),
        )
        assert float(p.results["step_time_s"][i]) == pytest.approx(e.step_time_s, rel=1e-9)
        assert float(p.results["memory_bytes"][i]) == pytest.approx(e.memory.total_bytes, rel=1e-9)
