"""distlab.moe.cost: FLOPs, capacity, imbalance, memory over EP and expert-DP, all-to-all bytes and time
(Lesson 10 §1-§6). Values derived by hand in the comments, or tied to distlab.flops / memory / collectives."""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from distlab import collectives, flops, hardware, memory, models, moe
from distlab.errors import ConfigurationError, DistlabError

# --- FLOPs -----------------------------------------------------------------------------------


def test_mixtral_weight_flops_are_six_active_block_params_per_token():
    f = moe.moe_step_flops("mixtral-8x7b", 2, 4096)
    # blocks with 2 of 8 experts: 32 x 394,305,536 = 12,617,777,152 (test_moe_catalog's derivation)
    assert f.weights == 6 * 2 * 4096 * 12_617_777_152
    # attention core: 3 passes x tokens x 32 layers x 2 x 4096 keys x (32 x 128 + 32 x 128)
    assert f.attention == 3 * 2 * 4096 * 32 * 2 * 4096 * (4096 + 4096)
    assert f.logits == 3 * 2 * 4096 * 2 * 4096 * 32000


def test_one_expert_top_one_equals_the_dense_counter_plus_the_router():
    shape = dict(layers=4, hidden=256, heads=4, vocab=1000)
    dense = models.TransformerModel(name="d", ffn=512, gated_mlp=True, norm="rmsnorm", **shape)
    sparse = moe.MoEModel(name="s", experts=1, expert_ffn=512, top_k=1, **shape)
    a, b = flops.step_flops(dense, 3, 128, "full"), moe.moe_step_flops(sparse, 3, 128, "full")
    tokens = 3 * 128
    assert b.weights - a.weights == pytest.approx(6 * tokens * 4 * 256)  # the router, h x 1 per layer
    assert b.attention == pytest.approx(a.attention) and b.logits == pytest.approx(a.logits)
    assert b.recomputation - a.recomputation == pytest.approx(2 * tokens * 4 * 256)


def test_banded_layers_see_only_the_window():
    m = moe.model("gpt-oss-120b")
    f = moe.moe_step_flops(m, 1, 4096)
    # 18 full layers x 4096 keys + 18 banded x 128 keys; q/k and v widths 64 x 64 each
    assert f.attention == 3 * 4096 * 2 * (18 * 4096 + 18 * 128) * (4096 + 4096)


def test_deepseek_mla_core_uses_192_wide_queries_and_128_wide_values():
    f = moe.moe_step_flops("deepseek-v3", 1, 4096)
    assert f.attention == 3 * 4096 * 2 * 61 * 4096 * (128 * 192 + 128 * 128)


# --- routing ----------------------------------------------------------------------------------


def test_capacity_by_hand():
    assert moe.expert_capacity(4096, 8, 2, 1.0) == 1024  # 4096 x 2 / 8
    assert moe.expert_capacity(4096, 8, 2, 1.25) == 1280
    assert moe.expert_capacity(10, 3, 1, 1.0) == 4  # ceil(3.33)


def test_drops_and_imbalance_by_hand():
    loads = [1500, 900, 700, 1000]
    assert moe.dropped_tokens(loads, 1024) == 476  # 1500 - 1024
    assert moe.imbalance_factor(loads, 4) == pytest.approx(1500 / 1025)
    assert moe.imbalance_factor(loads, 2) == pytest.approx(2400 / 2050)
    assert moe.imbalance_factor([5, 5, 5, 5], 4) == 1.0


# --- memory ------------------------------------------------------------------------------------


def test_deepseek_memory_by_hand():
    # DeepSeek-V3's run (report Sec. 3.2): 2048 GPUs, PP 16, EP 64, ZeRO-1 data parallelism
    mem = moe.expert_parallel_memory("deepseek-v3", 2048, pp=16, ep=64)
    experts = 58 * 256 * 44_040_192
    dense = 671_026_419_200 - experts
    assert (mem.dp, mem.edp, mem.experts_per_gpu) == (128, 2, 4)  # 2048/16; 2048/(64 x 16); 256/64
    assert mem.dense_weights == 2 * dense / 16
    assert mem.dense_optimizer == 12 * dense / 16 / 128
    assert mem.expert_gradients == 2 * experts / (64 * 16)
    assert mem.expert_optimizer == 12 * experts / (64 * 16) / 2


def test_no_expert_parallelism_is_the_dense_recipe():
    m = moe.model("mixtral-8x7b")
    mem = moe.expert_parallel_memory(m, 16, tp=2, etp=2, pp=2, zero=1)
    want = memory.model_state_bytes(m.parameter_count(), zero=1, dp=4, tp=2, pp=2)
    assert mem.total_bytes == pytest.approx(sum(want), rel=1e-12)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(ep=3, gpus=24), "ep=3 does not divide the 8 experts"),
        (dict(etp=5), "etp x ep x pp = 5 does not divide"),
        (dict(pp=64, gpus=64), "pp=64 is more than the 32 layers"),
        (dict(tp=3), "tp x cp x pp = 3"),
    ],
)
def test_memory_refuses_invalid_groups(kwargs, words):
    gpus = kwargs.pop("gpus", 16)
    with pytest.raises(ConfigurationError, match=words):
        moe.expert_parallel_memory("mixtral-8x7b", gpus, **kwargs)


# --- all-to-all --------------------------------------------------------------------------------


def test_bytes_by_hand():
    # 4096 tokens x 2 copies x 4096 x 2 B = 67,108,864 B send buffer; EP 8 in two nodes of 4 members
    b = moe.all_to_all_bytes(4096, 4096, 2, 8, ep_per_node=4)
    assert b["send_buffer"] == 67_108_864
    assert b["intra"] == 67_108_864 * 3 / 8 and b["inter"] == 67_108_864 * 4 / 8
    # capacity padding: 8 experts x 1280 x 4096 x 2 B
    assert moe.all_to_all_bytes(4096, 4096, 2, 8, experts=8, capacity_factor=1.25)["send_buffer"] == 8 * 1280 * 8192


def test_remote_nodes_limits():
    # every expert chosen (k = E): every node is hit, n - 1 of them remote
    assert moe.expected_remote_nodes(16, 16, 4) == pytest.approx(3)
    # E = 2 on 2 nodes, k = 1: one node hit, remote with probability 1/2
    assert moe.expected_remote_nodes(2, 1, 2) == pytest.approx(0.5)
    # node limit M = 1: one node hit, remote with probability (n-1)/n
    assert moe.expected_remote_nodes(256, 8, 8, max_nodes=1) == pytest.approx(7 / 8)
    assert moe.expected_remote_nodes(256, 8, 8, max_nodes=4) == pytest.approx(4 * 7 / 8)
    with pytest.raises(ConfigurationError, match="do not fit"):
        moe.expected_remote_nodes(16, 8, 4, max_nodes=1)


def test_node_limit_cuts_inter_node_bytes_below_k_copies():
    free = moe.all_to_all_bytes(4096, 7168, 8, 64, ep_per_node=8, experts=256)
    limited = moe.all_to_all_bytes(4096, 7168, 8, 64, ep_per_node=8, experts=256, max_nodes=4)
    assert limited["inter"] == pytest.approx(4096 * 7168 * 2 * moe.expected_remote_nodes(256, 8, 8, 4))
    assert limited["inter"] < 4096 * 7168 * 2 * 4 * 7 / 8 + 1 < free["inter"]


def test_intra_node_time_is_the_pairwise_all_to_all():
    c = hardware.cluster("dgx-h100", 1)
    b = moe.all_to_all_bytes(4096, 4096, 2, 8)
    t = moe.all_to_all_time(b["intra"], b["inter"], 8, c)
    assert t == pytest.approx(collectives.collective_cost("all-to-all", b["send_buffer"], 8, link="nvlink4").time_s)


def test_inter_node_time_uses_the_fabric_share():
    c = hardware.cluster("dgx-h100", 8)
    # EP 64 over 8 nodes, 8 per node: 56 remote messages of the fabric's alpha, bytes at 50 GB/s per GPU
    t = moe.all_to_all_time(0.0, 1e9, 64, c, ep_per_node=8)
    assert t == pytest.approx(56 * c.fabric.latency + 1e9 / c.inter_node_bandwidth_per_gpu)
    assert c.inter_node_bandwidth_per_gpu == pytest.approx(50e9)


def test_members_per_node_follow_megatron_expert_layout():
    assert moe.ep_members_per_node(etp=1, ep=8) == 8
    assert moe.ep_members_per_node(etp=2, ep=8) == 4  # ranks 0, 2, 4, 6 on node 0
    assert moe.ep_members_per_node(etp=8, ep=4) == 1
    assert moe.ep_members_per_node(etp=1, ep=64) == 8


def test_layer_cost_by_hand():
    c = moe.moe_layer_cost("mixtral-8x7b", "dgx-h100", seq_len=4096, ep=8, recompute="full")
    one = 4096 * 2 * 4096 * 2 * 7 / 8  # T k h B (ep-1)/ep
    assert c.all_to_alls == 6 and c.all_to_all_intra_bytes == pytest.approx(6 * one)
    assert c.expert_flops == 4 * 2 * 3 * 4096 * 14336 * 4096 * 2  # (3 + 1 recompute) passes
    slow = moe.moe_layer_cost("mixtral-8x7b", "dgx-h100", seq_len=4096, ep=8, tp=8, etp=8, imbalance=2.0)
    assert slow.link == "inter-node" and slow.ep_per_node == 1 and slow.expert_flops == 2 * slow.balanced_expert_flops


# --- fuzz ----------------------------------------------------------------------------------

ANY = st.one_of(
    st.integers(-5, 300), st.floats(allow_nan=True, allow_infinity=True), st.none(), st.text(max_size=4), st.booleans()
)


@settings(max_examples=80, deadline=None)
@given(a=ANY, b=ANY, c=ANY, d=ANY)
# found by CI's hypothesis run: loads near the float maximum summed to inf (imbalance_factor's mean, dropped_tokens)
@example(a=0, b=0, c=8.988465674311579e307, d=8.98846567431158e307)
@example(a=8.988465674311579e307, b=8.98846567431158e307, c=0, d=None)
def test_fuzz_every_function_returns_or_raises_our_error(a, b, c, d):
    calls = [
        lambda: moe.expert_capacity(a, b, c, d),
        lambda: moe.dropped_tokens([a, b] if not isinstance(a, str) else a, c),
        lambda: moe.imbalance_factor([a, b, c, d], 2),
        lambda: moe.expert_groups(a, tp=b, ep=c, pp=d),
        lambda: moe.expert_parallel_memory("mixtral-8x7b", a, tp=b, ep=c, pp=d),
        lambda: moe.expected_remote_nodes(a, b, c, d),
        lambda: moe.all_to_all_bytes(a, 64, b, c, experts=d, capacity_factor=1.0),
        lambda: moe.all_to_all_time(a, b, c, "dgx-h100", ep_per_node=d),
        lambda: moe.ep_members_per_node(etp=a, ep=b, gpus_per_node=c),
        lambda: moe.moe_layer_cost("qwen3-235b-a22b", "dgx-h100", seq_len=a, ep=b, tp=c, imbalance=d),
        lambda: moe.moe_step_flops("deepseek-v3", a, b, d),
        lambda: moe.moe_step_cost("mixtral-8x7b", "dgx-h100", a, microbatches=b, pp=c, ep=d),
    ]
    for call in calls:
        try:
            value = call()
        except DistlabError:
            continue
        numbers = (
            [value]
            if isinstance(value, (int, float))
            else (
                list(value.values())
                if isinstance(value, dict)
                else [v for v in value.to_dict().values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
            )
        )
        assert all(math.isfinite(v) and v >= 0 for v in numbers)


def test_step_cost_is_layers_times_microbatches_times_one_layer():
    s = moe.moe_step_cost("deepseek-v3", "dgx-h100", 2048, microbatches=120, pp=16, ep=64, max_nodes=4)
    # ceil(61 / 16) = 4 layers on the busiest stage, all MoE there; 120 microbatches
    assert s.moe_layers == 4
    assert s.all_to_all_time_s == pytest.approx(4 * 120 * s.layer.all_to_all_time_s)
    assert s.expert_flops == pytest.approx(4 * 120 * s.layer.expert_flops)
    assert s.memory.total_bytes == moe.expert_parallel_memory("deepseek-v3", 2048, pp=16, ep=64).total_bytes
    # no pipeline: all 58 MoE layers
    assert moe.moe_step_cost("deepseek-v3", "dgx-h100", 256, ep=256).moe_layers == 58
