"""distlab.moe.moe_activation_bytes: an MoE layer's saved activations, term by term (Lesson 10 §4).

Values derived by hand from the per-tensor count in distlab/moe/activations.py's docstring (Korthikanti et al.
2022 §4.1's method on Megatron-Core's MoE layer); the PyTorch measurement is tests/core/test_verify_moe_torch.py.
"""

import math

import pytest
from hypothesis import given, settings, strategies as st

from distlab import memory, moe
from distlab.errors import ConfigurationError
from distlab.moe.step import routed_activation_extra_array, step_model


def test_mixtral_terms_by_hand():
    # Mixtral-8x7B: h 4096, E 8, k 2, F 14336, no shared expert; one 4,096-token sequence, bf16 (2 B), tp = cp = 1
    a = moe.moe_activation_bytes("mixtral-8x7b", 1, 4096)
    T = 4096
    assert a.norm_input == a.router_input == T * 4096 * 2  # 33,554,432
    assert a.router_scores == T * 8 * 2
    assert a.combine_weights == T * 2 * 2
    assert a.expert_inputs == a.expert_outputs == T * 2 * 4096 * 2  # 67,108,864 each
    assert a.expert_ffn == T * 2 * 3 * 14336 * 2  # 704,643,072
    assert a.shared_experts == 0
    # the attention half: Korthikanti's per-token terms without the MLP (norm-1 input h, QKV input h, Q h, K and V
    # 2 x 8 kv heads x 128 = 2048, out-proj input h: 4h + 2048) x 2 B, plus the softmax output a s^2 b x 2 B
    # (no dropout in Mixtral: no masks)
    assert a.attention == T * (4 * 4096 + 2048) * 2 + 32 * T * T * 2
    assert a.total == pytest.approx(2_130_788_352, abs=0)
    assert a.moe_block == a.total - a.attention


def test_deepseek_v3_with_tp_etp_ep():
    # DeepSeek-V3: h 7168, E 256, k 8, F 2048, one shared expert; tp 2, cp 2, etp 2, ep 64, one 4,096 sequence
    a = moe.moe_activation_bytes("deepseek-v3", 1, 4096, tp=2, cp=2, ep=64, etp=2)
    T = 4096 / (2 * 2)  # tokens per GPU with sequence and context parallelism
    assert a.router_scores == T * 256 * 2
    assert a.expert_inputs == a.expert_outputs == 2 * T * 8 * 7168 * 2  # etp all-gathers the copies
    assert a.expert_ffn == T * 8 * 3 * 2048 * 2  # each etp rank holds 3F / etp of etp x the copies
    assert a.shared_experts == T * 3 * 2048 * 2
    # etp 1: the copies are not gathered
    b = moe.moe_activation_bytes("deepseek-v3", 1, 4096, tp=2, cp=2, ep=64, etp=1)
    assert b.expert_inputs == a.expert_inputs / 2 and b.expert_ffn == a.expert_ffn


def test_load_factor_scales_only_the_dispatched_terms():
    # the busiest GPU of Mixtral at ep 8 holding 1.5x the average copies
    base = moe.moe_activation_bytes("mixtral-8x7b", 2, 1024, ep=8)
    busy = moe.moe_activation_bytes("mixtral-8x7b", 2, 1024, ep=8, load_factor=1.5)
    for name in ("expert_inputs", "expert_ffn", "expert_outputs"):
        assert getattr(busy, name) == 1.5 * getattr(base, name)
    for name in ("attention", "norm_input", "router_input", "router_scores", "combine_weights", "shared_experts"):
        assert getattr(busy, name) == getattr(base, name)
    # at most min(ep, E / k) = min(8, 4) = 4: every copy a GPU's one expert can take is one per token
    moe.moe_activation_bytes("mixtral-8x7b", 1, 64, ep=8, load_factor=4)
    with pytest.raises(ConfigurationError, match=r"load_factor=4.5 .* to 4 = min\(ep, experts / top_k\)"):
        moe.moe_activation_bytes("mixtral-8x7b", 1, 64, ep=8, load_factor=4.5)
    with pytest.raises(ConfigurationError, match="load_factor=1.5 .* to 1 "):  # one GPU takes every copy: exactly 1
        moe.moe_activation_bytes("mixtral-8x7b", 1, 64, load_factor=1.5)


def test_full_recomputation_keeps_the_layer_input():
    a = moe.moe_activation_bytes("qwen3-235b-a22b", 2, 4096, recompute="full")
    assert a.total == a.attention == 2 * 4096 * 4096 * 2  # b s h x 2 B (Qwen3-235B: h 4096)
    assert a.moe_block == 0


@settings(max_examples=30, deadline=None)
@given(
    name=st.sampled_from(sorted(moe.MOE_MODELS)),
    b=st.integers(1, 4),
    s=st.sampled_from([128, 1024, 4096]),
    tp=st.sampled_from([1, 2, 4]),
    cp=st.sampled_from([1, 2]),
    etp_is_tp=st.booleans(),
    recompute=st.sampled_from(["none", "selective", "full"]),
)
def test_step_model_decomposition_equals_the_layer_count(name, b, s, tp, cp, etp_is_tp, recompute):
    # invariant: the step model's dense-shaped layer (MLP width (k + S) F) plus its routed extra, put back on the
    # MoE layers (x layers / moe_layers), is the per-tensor count of one MoE layer
    m = moe.model(name)
    etp = tp if etp_is_tp else 1
    if m.expert_ffn % etp:
        return
    a = moe.moe_activation_bytes(m, b, s, tp=tp, cp=cp, etp=etp, recompute=recompute)
    view = step_model(m, s)
    code = memory.RECOMPUTE_MODES.index(recompute)
    dense = float(memory.activation_bytes_per_layer_array(view, b, s, tp, tp > 1, code, 2.0)) / cp
    extra = float(routed_activation_extra_array(view, b, s, tp, cp, etp, code, 2.0)) * m.layers / m.moe_layers
    assert a.total == pytest.approx(dense + extra, rel=1e-12)
    assert all(math.isfinite(v) and v >= 0 for v in a.parts().values())


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(micro_batch_size=0), "micro_batch_size"),
        (dict(seq_len=-1), "seq_len"),
        (dict(tp=0), "tp"),
        (dict(ep=3), "ep=3 does not divide the 8 routed experts"),
        (dict(etp=5), "etp=5 does not divide expert_ffn=14336"),
        (dict(recompute="some"), "recompute"),
        (dict(precision="fp7"), "precision"),
        (dict(load_factor=float("nan")), "load_factor"),
        (dict(load_factor=True), "load_factor"),
        (dict(micro_batch_size=2**20, seq_len=2**24), "tokens is more than"),
    ],
)
def test_invalid_inputs_are_our_errors(kwargs, match):
    with pytest.raises(ConfigurationError, match=match):
        moe.moe_activation_bytes("mixtral-8x7b", **kwargs)


def test_dense_first_layers_and_the_first_stage():
    # DeepSeek-V3's 3 dense layers have a SwiGLU MLP of dense_ffn = 18,432 = (8 routed + 1 shared) x 2,048: a dense
    # layer keeps the MoE layer's count minus exactly the routed extras (scores, combine weights, copies in and out)
    a = moe.moe_activation_bytes("deepseek-v3", 1, 4096, recompute="selective")
    assert moe.model("deepseek-v3").dense_ffn == 9 * 2048
    routed_extra = a.router_scores + a.combine_weights + a.expert_inputs + a.expert_outputs
    assert a.total - a.dense_layer == routed_extra
    # 16 stages: the first holds ceil(61 / 16) = 4 layers, 3 dense and 1 MoE, x 16 microbatches in flight (1F1B)
    stage = moe.stage_activation_bytes("deepseek-v3", 1, 4096, pp=16, recompute="selective")
    assert stage == pytest.approx((3 * a.dense_layer + a.total) * 16, rel=1e-15)
    # interleaved-like fraction of microbatches in flight, and an invalid one
    assert moe.stage_activation_bytes("mixtral-8x7b", 1, 4096, pp=4, in_flight=4.75) == pytest.approx(
        8 * 4.75 * moe.moe_activation_bytes("mixtral-8x7b", 1, 4096).total, rel=1e-15
    )
    with pytest.raises(ConfigurationError, match="in_flight"):
        moe.stage_activation_bytes("mixtral-8x7b", in_flight=float("nan"))


@pytest.mark.parametrize("name", sorted(moe.MOE_MODELS))
def test_the_shared_view_has_the_step_models_attention_shape(name):
    """moe.activations reads the attention shape from the catalog (moe.step imports it, so it cannot import moe.step
    back): the same hidden, heads and kv_heads as moe.step.step_model's view (MLA: one key/value head per query)."""
    from distlab.moe.activations import _shared_view

    m = moe.model(name)
    view, shared = step_model(m, 4096), _shared_view(m, 4096)
    assert (shared.hidden, shared.heads, shared.kv_heads) == (view.hidden, view.heads, view.kv_heads)
