"""distlab.tensor: Megatron shapes, TP communication by hand, compute, sequence and context parallelism,
and the real numerical demonstration (a split MLP equals the unsplit one)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from distlab import collectives, memory, models, tensor
from distlab.errors import ConfigurationError, DistlabError

# --- weight shapes -------------------------------------------------------------------------


def test_mit_quiz_qkv_params_per_gpu():
    # MIT 6.5940 ch. 6 quiz: T=4, d_model 4096, 32 heads of 128; Q, K, V column-parallel:
    # 3 x 4096 x (4096 / 4) = 12,582,912 parameters per GPU (Llama-2-7B has exactly this attention)
    shards = tensor.layer_shards("llama2-7b", 4)
    assert [shards.shard(n).shard_shape for n in ("query", "key", "value")] == [(4096, 1024)] * 3
    assert sum(shards.shard(n).params_per_gpu for n in ("query", "key", "value")) == 12_582_912
    assert shards.heads_per_gpu == 8


def test_mit_ffn_example_column_then_row():
    # MIT 6.5940 ch. 6: d_model 4096, d_ff 16384, T=8: A_i is [4096, 2048] = 8,388,608 params ("8M"),
    # B_i is [2048, 4096]. megatron-gpt-7.5b has that shape (h 4096, ffn 4h).
    shards = tensor.layer_shards("megatron-gpt-7.5b", 8)
    up, down = shards.shard("mlp up"), shards.shard("mlp down")
    assert (up.split, up.full_shape, up.shard_shape) == ("column", (4096, 16384), (4096, 2048))
    assert up.params_per_gpu == 8_388_608
    assert (down.split, down.shard_shape) == ("row", (2048, 4096))
    # row-parallel biases are added once after the all-reduce: every GPU keeps them whole
    assert shards.shard("mlp down bias").split == "replicated"
    assert shards.shard("mlp up bias").shard_shape == (2048,)


@pytest.mark.parametrize("name", sorted(models.MODELS))
def test_shards_add_up_to_the_layer(name):
    m = models.model(name)
    for t in tensor.valid_tp_degrees(m)[:4]:
        s = tensor.layer_shards(m, t)
        assert s.params_full == m.params_per_layer()
        # everything but the replicated weights is divided by t exactly
        assert s.params_per_gpu == (s.params_full - s.replicated_params) // t + s.replicated_params
        assert s.params_per_gpu * t >= s.params_full


def test_gated_mlp_has_three_column_or_row_blocks_and_gqa_splits_kv_heads():
    s = tensor.layer_shards("llama3.1-70b", 8)  # 64 query heads, 8 KV heads, ffn 28672
    assert (s.heads_per_gpu, s.kv_heads_per_gpu, s.ffn_per_gpu) == (8, 1, 3584)
    assert s.shard("key").shard_shape == (8192, 128)  # one KV head of 128 channels per GPU
    assert [x.name for x in s.shards if x.block == "mlp"] == ["mlp gate", "mlp up", "mlp down"]
    assert "mlp gate" in s.table() and "layer total" in str(s)


# --- validation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "model, tp, kwargs, words",
    [
        ("llama2-7b", 3, {}, "tp=3 does not divide the 32 attention heads of llama2-7b; valid: 1, 2, 4, 8, 16, 32"),
        ("llama3.1-70b", 16, {}, "does not divide the 8 key/value heads"),
        ("llama2-7b", 16, {"gpus_per_node": 8}, "tp=16 does not divide the 8 GPUs of a node; valid: 1, 2, 4, 8"),
        ("llama2-7b", 0, {}, "tp=0 must be a positive whole number"),
        ("llama2-7b", 2.5, {}, "must be a positive whole number"),
        (7e9, 2, {}, "needs the layer shapes"),
        ("llama-7b", 2, {}, "closest"),
    ],
)
def test_invalid_tp_raises_our_error(model, tp, kwargs, words):
    with pytest.raises(ConfigurationError) as info:
        tensor.check_tp(model, tp, **kwargs)
    assert words in str(info.value)


def test_valid_tp_degrees_follow_heads_kv_heads_and_node():
    assert tensor.valid_tp_degrees("llama3.1-70b") == [1, 2, 4, 8]
    assert tensor.valid_tp_degrees("gpt3-175b", gpus_per_node=8) == [1, 2, 4, 8]
    assert tensor.valid_tp_degrees("megatron-gpt-1.7b") == [1, 2, 3, 4, 6, 8, 12, 24]  # 24 heads


# --- communication, by hand ------------------------------------------------------------------

# Llama-2-7B, tp=8, b=1, s=4096, bf16: M = 1 x 4096 x 4096 x 2 = 33,554,432 B. A ring all-reduce over
# 8 GPUs sends 2 x 7/8 x M = 58,720,256 B per GPU; 4 per layer in training: 234,881,024 B.
# nvlink4: 450e9 B/s, alpha 3.4 us: one all-reduce = 14 x 3.4 us + 58,720,256 / 450e9 s = 178.0895 us.
# ib-ndr: 50e9 B/s, alpha 9.6 us: 14 x 9.6 us + 58,720,256 / 50e9 s = 1,308.8051 us.
M = 33_554_432
SENT = 4 * 58_720_256


def test_tp_communication_by_hand_on_nvlink_and_infiniband():
    nv = tensor.tp_layer_cost("llama2-7b", 8, seq_len=4096, link="nvlink4")
    assert nv.message_bytes == M
    assert [cost.op for _, cost in nv.collectives] == ["all-reduce"] * 4
    assert [name.split(":")[0] for name, _ in nv.collectives] == ["forward", "forward", "backward", "backward"]
    assert nv.comm_bytes_per_gpu == SENT
    assert nv.comm_time_s == pytest.approx(4 * (14 * 3.4e-6 + 58_720_256 / 450e9), rel=1e-12)
    ib = tensor.tp_layer_cost("llama2-7b", 8, seq_len=4096, link="ib-ndr")
    assert ib.comm_time_s == pytest.approx(4 * (14 * 9.6e-6 + 58_720_256 / 50e9), rel=1e-12)
    assert ib.comm_time_s / nv.comm_time_s == pytest.approx(1308.8051 / 178.0895, rel=1e-6)
    assert ib.ratio > 1 and ib.comm_share > 0.5
    assert ib.to_dict()["all_reduces"] == 4 and "ib-ndr" in str(ib)


def test_each_collective_is_priced_by_distlab_collectives():
    c = tensor.tp_layer_cost("llama2-7b", 8, seq_len=4096, link="nvlink4")
    want = collectives.collective_cost("all-reduce", M, 8, link="nvlink4")
    assert all(cost == want for _, cost in c.collectives)
    assert tensor.tp_comm_time(M, 8, 450e9, 3.4e-6) == pytest.approx(c.comm_time_s, rel=1e-12)


def test_sequence_parallelism_pairs_send_what_the_all_reduces_sent_plus_the_backward_re_gathers():
    # Korthikanti et al. 2022, Sec. 4.2.2: 4 all-gathers + 4 reduce-scatters; a ring all-reduce is a reduce-scatter
    # then an all-gather, so the pairs send what the all-reduces sent. Megatron-LM's column-parallel linears also
    # re-gather their s/t input in the backward (tests/core/test_sp_regather.py): 2 all-gathers, half an all-reduce
    # each, so 5/4 of plain TP's bytes and time (NVLink ring, no latency difference: each half has N-1 steps).
    plain = tensor.tp_layer_cost("gpt3-175b", 8, link="nvlink4")
    sp = tensor.tp_layer_cost("gpt3-175b", 8, link="nvlink4", sequence_parallel=True)
    assert sorted(cost.op for _, cost in sp.collectives) == ["all-gather"] * 6 + ["reduce-scatter"] * 4
    assert sp.all_reduces == 5
    pairs = sum(cost.bytes_sent_per_gpu for name, cost in sp.collectives if "re-gather" not in name)
    assert pairs == pytest.approx(plain.comm_bytes_per_gpu, rel=1e-12)
    assert sp.comm_bytes_per_gpu == pytest.approx(5 / 4 * plain.comm_bytes_per_gpu, rel=1e-12)
    assert sp.comm_time_s == pytest.approx(5 / 4 * plain.comm_time_s, rel=1e-12)


def test_full_recomputation_repeats_the_forward_all_reduces_and_fp8_keeps_the_message_bytes():
    base = tensor.tp_layer_cost("llama2-7b", 8, link="nvlink4")
    full = tensor.tp_layer_cost("llama2-7b", 8, link="nvlink4", recompute="full")
    assert full.all_reduces == 6 and full.comm_bytes_per_gpu == pytest.approx(1.5 * base.comm_bytes_per_gpu)
    assert sum(name.startswith("recomputed") for name, _ in full.collectives) == 2
    assert full.flops_per_gpu == pytest.approx(4 / 3 * base.flops_per_gpu)
    # FP8 GEMMs take fp8 inputs but write bf16 outputs: the row-parallel all-reduce sums bf16 and the
    # backward collectives carry bf16 gradients, so b s h x 2 B either way (4096 x 4096 x 2 for llama2-7b)
    fp8 = tensor.tp_layer_cost("llama2-7b", 8, link="nvlink4", precision="fp8")
    assert fp8.message_bytes == base.message_bytes == 4096 * 4096 * 2
    assert fp8.comm_bytes_per_gpu == pytest.approx(base.comm_bytes_per_gpu)
    assert fp8.compute_time_s == pytest.approx(base.compute_time_s * 989.4 / 1978.9)
    assert tensor.message_element_bytes("fp8") == 2 and tensor.element_bytes("fp8") == 1
    assert (fp8.peak_flops, base.peak_flops) == (1978.9e12, 989.4e12)  # H100 SXM dense fp8 and bf16 peaks


def test_tp_1_has_no_communication():
    c = tensor.tp_layer_cost("llama2-7b", 1, link="ib-ndr")
    assert c.comm_time_s == 0 and c.comm_bytes_per_gpu == 0 and c.ratio == 0
    assert "communication: none (tp=1" in str(c)


def test_explicit_bandwidth_and_bad_inputs():
    c = tensor.tp_layer_cost("llama2-7b", 2, seq_len=4096, link=None, bandwidth="100 GB/s", peak_flops="500 TFLOP/s")
    # 4 x 2 x 1/2 x M / 100e9, no latency
    assert c.comm_time_s == pytest.approx(4 * M / 100e9) and c.gpu is None and c.link is None
    with pytest.raises(ConfigurationError, match="efficiency=1.5 must be a fraction"):
        tensor.tp_layer_cost("llama2-7b", 2, efficiency=1.5)
    with pytest.raises(DistlabError, match="closest"):
        tensor.tp_layer_cost("llama2-7b", 2, link="nvlink9")
    with pytest.raises(ConfigurationError, match="micro_batch_size"):
        tensor.tp_layer_cost("llama2-7b", 2, micro_batch_size=0)


# --- compute -----------------------------------------------------------------------------------


def test_layer_flops_by_hand():
    # Llama-2-7B layer: 202,383,360 parameters. b=1, s=4096: forward = 2 x 202,383,360 x 4096 +
    # 4 x 4096 x 4096 x 4096 = 1,657,924,485,120 + 274,877,906,944; training x 3; tp=8 divides by 8.
    assert models.model("llama2-7b").params_per_layer() == 202_383_360
    want = 3 * (2 * 202_383_360 * 4096 + 4 * 4096**3) / 8
    assert tensor.layer_flops("llama2-7b", 1, 4096, tp=8) == pytest.approx(want, rel=1e-12)
    c = tensor.tp_layer_cost("llama2-7b", 8, seq_len=4096)
    assert c.compute_time_s == pytest.approx(want / 989.4e12, rel=1e-12)
    assert c.compute_time.to("ms").magnitude == pytest.approx(want / 989.4e12 * 1e3)
    # selective recomputation re-runs QK^T and AV only: one more 4 s h per token
    selective = (3 * 2 * 202_383_360 * 4096 + 4 * 4 * 4096**3) / 8
    assert tensor.layer_flops("llama2-7b", 1, 4096, tp=8, recompute="selective") == pytest.approx(selective, rel=1e-12)
    # full recomputation runs the whole forward again: 4 passes
    assert tensor.layer_flops("llama2-7b", 1, 4096, tp=8, recompute="full") == pytest.approx(want * 4 / 3, rel=1e-12)


def test_layer_flops_match_6pt_when_attention_is_negligible():
    # Short sequences: the 4 s h term vanishes against 2 x params, leaving 6 x params x tokens.
    m = models.model("gpt3-175b")
    per_layer = tensor.layer_flops(m, micro_batch_size=4, seq_len=1, tp=1)
    assert per_layer == pytest.approx(6 * m.params_per_layer() * 4, rel=1e-4)


@settings(max_examples=30, deadline=None)
@given(t=st.sampled_from([1, 2, 4, 8]), b=st.integers(1, 8), s=st.sampled_from([128, 1024, 4096]))
def test_tp_divides_compute_and_the_fast_path_agrees(t, b, s):
    one = tensor.layer_flops("llama2-7b", b, s, tp=1)
    assert tensor.layer_flops("llama2-7b", b, s, tp=t) * t == pytest.approx(one, rel=1e-12)
    m = models.model("llama2-7b")
    vec = tensor.layer_flops_array(m.params_per_layer(), m.hidden, np.array([b, b]), s, np.array([1, t]))
    assert vec[1] * t == pytest.approx(vec[0], rel=1e-12) and vec[0] == pytest.approx(one, rel=1e-12)


# --- sequence and context parallelism ------------------------------------------------------------


def test_sequence_parallel_saving_matches_korthikanti_table_2():
    # GPT-3 175B, t=8, s=2048, b=1, selective recomputation: s b h (10 + 24/t) = 2048 x 12288 x 13 B
    # without, s b h 34 / t with sequence parallelism.
    sp = tensor.sequence_parallel_saving("gpt3-175b", 8, seq_len=2048)
    sbh = 2048 * 12288
    assert sp.without_bytes == pytest.approx(sbh * 13)
    assert sp.with_bytes == pytest.approx(sbh * 34 / 8)
    assert sp.saved_bytes == pytest.approx(sbh * 10 * 7 / 8)
    assert sp.with_bytes == memory.activation_bytes_per_layer(models.model("gpt3-175b"), 1, 2048, 8, True, "selective")
    assert "saved" in str(sp)


def test_ring_attention_buffer_matches_the_modeler_examples():
    # parallelism-bandwidth-modeler: 2 x 128K/64 x 8192 x 1 (FP8) = 32 MiB; 2 x 1M/8 x 8192 x 1 = 2 GiB
    # (the modeler writes '32 MB' and '2 GB' for these binary sizes).
    small = tensor.ring_attention_buffer(131072, 64, 8192, precision="fp8")
    assert small.buffer_bytes == 32 * 2**20 and small.fits is None
    big = tensor.ring_attention_buffer(2**20, 8, 8192, precision="fp8", available="1 GB")
    assert big.buffer_bytes == 2 * 2**30 and big.fits is False and "does not fit" in str(big)
    # when it stops fitting: the longest sequence whose buffer fits 1e9 B is a multiple of cp=8,
    # 2 x S/8 x 8192 <= 1e9 -> S <= 488,281.25 -> 488,280
    assert big.max_seq_len == 488_280
    assert tensor.ring_attention_buffer(488_280, 8, 8192, precision="fp8", available=1e9).fits
    assert tensor.ring_attention_buffer(131072, 64, 8192).buffer_bytes == 64 * 2**20  # bf16: twice FP8


def test_ring_attention_needs_cp_to_divide_the_sequence():
    with pytest.raises(ConfigurationError, match="cp=3 does not divide seq_len=4096"):
        tensor.ring_attention_buffer(4096, 3, 8192)


# --- the numerical demonstration ---------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    t=st.integers(1, 8),
    per_gpu=st.integers(1, 6),
    tokens=st.integers(1, 6),
    hidden=st.integers(1, 9),
    seed=st.integers(0, 2**31 - 1),
    activation=st.sampled_from(["gelu", "relu", "identity"]),
)
def test_split_mlp_equals_the_unsplit_mlp(t, per_gpu, tokens, hidden, seed, activation):
    x, a, b = tensor.random_mlp(tokens, hidden, t * per_gpu, seed)
    result = tensor.simulate_tp_mlp(x, a, b, t, activation)
    assert result.allclose and len(result.outputs) == t
    assert all(shard.shape == (hidden, per_gpu) for shard in result.w_in_shards)
    assert all(shard.shape == (per_gpu, hidden) for shard in result.w_out_shards)
    # the all-reduce is distlab's real ring simulation: 2(t-1) steps, 2(t-1)/t of the buffer per GPU
    assert result.trace.steps == 2 * (t - 1)
    if tokens * hidden % t == 0:
        assert result.bytes_sent_per_gpu == pytest.approx(2 * (t - 1) / t * tokens * hidden * 8)


@settings(max_examples=30, deadline=None)
@given(
    t=st.integers(1, 6),
    k=st.integers(1, 4),
    n=st.integers(1, 5),
    seed=st.integers(0, 1000),
    split=st.sampled_from(["column", "row"]),
)
def test_split_matmul_equals_the_matmul(t, k, n, seed, split):
    rng = np.random.default_rng(seed)
    x, w = rng.standard_normal((n, t * k)), rng.standard_normal((t * k, t * k + 0))
    result = tensor.simulate_split_matmul(x, w, t, split)
    assert result.allclose and result.trace.op == ("all-gather" if split == "column" else "all-reduce")


def test_splitting_the_first_matrix_by_rows_would_be_wrong():
    # Why A is split by columns: GeLU(X A_1 + X A_2) != GeLU(X A_1) + GeLU(X A_2)
    x, a, _ = tensor.random_mlp(4, 8, 16, seed=3)
    halves = [tensor.simulate._gelu(x[:, :4] @ a[:4]), tensor.simulate._gelu(x[:, 4:] @ a[4:])]
    assert not np.allclose(halves[0] + halves[1], tensor.simulate._gelu(x @ a))


@pytest.mark.parametrize(
    "args, words",
    [
        (((4, 8), (8, 30), (30, 8), 4), "tp=4 does not divide the 30 MLP columns"),
        (((4, 8), (7, 32), (32, 8), 4), "x's columns must equal w_in's rows"),
        (((4, 8), (8, 32), (31, 8), 4), "w_in's columns must equal w_out's rows"),
    ],
)
def test_bad_matrices_raise_our_error(args, words):
    shapes, t = args[:3], args[3]
    x, a, b = (np.ones(s) for s in shapes)
    with pytest.raises(ConfigurationError, match=words):
        tensor.simulate_tp_mlp(x, a, b, t)


def test_bad_values_raise_our_error():
    x, a, b = tensor.random_mlp(2, 4, 8)
    with pytest.raises(ConfigurationError, match="NaN"):
        tensor.simulate_tp_mlp(np.full((2, 4), np.nan), a, b, 2)
    with pytest.raises(ConfigurationError, match="expected a 2-D matrix"):
        tensor.simulate_tp_mlp(x.ravel(), a, b, 2)
    with pytest.raises(ConfigurationError, match="valid: gelu, relu, identity"):
        tensor.simulate_tp_mlp(x, a, b, 2, activation="swish")
    with pytest.raises(ConfigurationError, match="split='diagonal'"):
        tensor.simulate_split_matmul(x, a, 2, "diagonal")


def test_tp_comm_time_takes_size_and_the_old_keyword_warns():
    with pytest.warns(DeprecationWarning, match="size="):
        old = tensor.tp_comm_time(message_bytes=32e6, tp=4, bandwidth=100e9)
    assert old == tensor.tp_comm_time(size=32e6, tp=4, bandwidth=100e9)
