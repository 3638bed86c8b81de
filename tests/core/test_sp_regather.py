"""Sequence parallelism's backward re-gather (issue 30): Megatron-LM's column-parallel linear keeps only its s/t
share of the input and all-gathers it again in the backward for the weight gradient (NVIDIA/Megatron-LM@877f6a1bd5
megatron/mpu/layers.py, LinearWithGradAccumulationAndAsyncCommunication), beside the input-gradient GEMM. The count
(distlab.tensor) by hand, its price in the step model by hand, the invariants, and torchtitan's DTensor plan, which
keeps the gathered input."""

from __future__ import annotations

import itertools

import pytest

from distlab import models, tensor, training
from distlab.step import communication
from test_tp_overlap_async_backward import _22b as _22b_any  # the same run, recompute none, efficiency 0.5

METHOD = "megatron-async-backward"


def test_the_count_by_hand_gpt3_layer_with_and_without_sp():
    # gpt3-175b, t = 8, b = 1, s = 2048, bf16: M = b s h x 2 B = 2048 x 12288 x 2 = 50,331,648 B.
    # Without SP: 4 ring all-reduces, each 2 x 7/8 M per GPU: 7 M = 352,321,536 B.
    # With SP: 4 reduce-scatter + all-gather pairs (7/8 M each half: 7 M again) and the backward's 2 re-gathers of
    # the QKV and MLP-up inputs (7/8 M each: 1.75 M): 8.75 M = 440,401,920 B, 5 all-reduce equivalents.
    # Full recomputation: the forward's 2 pairs again, 6 + 1 = 7 equivalents, 12.25 M = 616,562,688 B.
    m = 2048 * 12288 * 2
    plain = tensor.tp_layer_cost("gpt3-175b", 8, seq_len=2048)
    sp = tensor.tp_layer_cost("gpt3-175b", 8, seq_len=2048, sequence_parallel=True)
    full = tensor.tp_layer_cost("gpt3-175b", 8, seq_len=2048, sequence_parallel=True, recompute="full")
    assert plain.comm_bytes_per_gpu == pytest.approx(7 * m, rel=1e-12) == 352_321_536
    assert sp.comm_bytes_per_gpu == pytest.approx(8.75 * m, rel=1e-12) == 440_401_920
    assert full.comm_bytes_per_gpu == pytest.approx(12.25 * m, rel=1e-12)
    assert (plain.all_reduces, sp.all_reduces, full.all_reduces) == (4, 5, 7)
    assert sorted(cost.op for _, cost in sp.collectives) == ["all-gather"] * 6 + ["reduce-scatter"] * 4
    assert sp.regathers == tensor.SP_REGATHERS == 2 and "2 backward re-gathers" in sp.summary()
    # the same call counts them for the step model
    assert [float(n) for n in tensor.tp_all_reduce_equivalents([False, True, True], [False, False, True])] == [4, 5, 7]


@pytest.mark.parametrize("name", ["llama3.1-8b", "llama2-70b", "gpt3-175b"])
def test_gated_mlps_and_gqa_gather_each_input_once(name):
    # a gated MLP's gate and up projections read one input, as grouped-query attention's Q, K and V do: one re-gather
    # per block, so SP sends 5/4 of plain TP's bytes for every model
    plain = tensor.tp_layer_cost(name, 8, seq_len=4096)
    sp = tensor.tp_layer_cost(name, 8, seq_len=4096, sequence_parallel=True)
    assert sp.comm_bytes_per_gpu / plain.comm_bytes_per_gpu == pytest.approx(5 / 4, rel=1e-12)


@pytest.mark.parametrize(
    "name, tp, seq, recompute, link",
    list(
        itertools.product(
            ["llama3.1-8b", "gpt3-175b"], [2, 4, 8], [1024, 8192], ["none", "full"], ["nvlink4", "ib-ndr"]
        )
    ),
)
def test_sp_never_sends_fewer_tp_bytes_or_takes_less_time_than_tp_alone(name, tp, seq, recompute, link):
    kw = dict(seq_len=seq, recompute=recompute, link=link)
    plain, sp = (tensor.tp_layer_cost(name, tp, sequence_parallel=v, **kw) for v in (False, True))
    assert sp.comm_bytes_per_gpu > plain.comm_bytes_per_gpu
    assert sp.comm_time_s > plain.comm_time_s


# Korthikanti 2022's 22B layer (Table 3: h 6144, 48 layers, TP 8, micro-batch 4, s 2048) on a DGX A100
def _22b(method, **kw):
    """Korthikanti's 22B run as test_tp_overlap_async_backward prices it, with sequence parallelism."""
    return _22b_any(method, **{"sequence_parallel": True, **kw})


def test_the_22b_layer_hides_the_re_gathers_beside_the_input_gradient_gemms_by_hand():
    # one all-reduce of b s h x 2 B = 4 x 2048 x 6144 x 2 = 100,663,296 B over 8 GPUs on NVLink3 (300 GB/s, 3.4 us a
    # step): 2 x 7/8 x 100,663,296 / 300e9 + 14 x 3.4e-6 = 634.802 us; a re-gather or a reduce-scatter is half of it.
    # 'none': 5 equivalents per layer exposed, 48 layers: 48 x 5 x 634.802 us.
    # 'megatron-async-backward': QKV's input-gradient GEMM 2 x 8192 x 3 x 6144^2 / 8 = 231.9 GFLOP / (312e12 x 0.5)
    # = 1.487 ms, MLP up's 1.982 ms (the same FLOPs as their weight gradients): each outlasts a 317.4 us re-gather,
    # so both re-gathers hide whole, as do both reduce-scatters beside the weight-gradient GEMMs: 2 of the 5
    # equivalents hide, 3 stay (the forward's two pairs and the row-parallel linears' backward all-gathers).
    t_ar = 2 * 7 / 8 * 100_663_296 / 300e9 + 2 * 7 * 3.4e-6
    plain, overlapped = _22b("none"), _22b(METHOD)
    assert plain.tp_comm_s == pytest.approx(48 * 5 * t_ar, rel=1e-9)
    assert overlapped.tp_comm_s == pytest.approx(48 * 3 * t_ar, rel=1e-9)
    # the fixed model charges no overlap slowdown, so the step drops by the hidden time
    assert plain.step_time_s - overlapped.step_time_s == pytest.approx(48 * 2 * t_ar, rel=1e-9)
    # full recomputation: the recomputed forward's two pairs exposed too: 7 - 2 = 5 stay
    assert _22b(METHOD, recompute="full").tp_comm_s == pytest.approx(48 * 5 * t_ar, rel=1e-9)


def test_a_re_gather_longer_than_its_gemm_hides_only_the_gemms_time():
    # h 2048, 16 heads, ffn 8192, TP 8, b 4, s 2048 (8192 tokens), efficiency 1.0, DGX A100: a re-gather is half the
    # all-reduce of 2 x 7/8 x 8192 x 2048 x 2 / 300e9 + 47.6 us = 243.30 us: 121.65 us. One GEMM pass of the layer
    # 8192 x 2 x (12 h^2 + 4h) / (8 x 312e12) = 330.5 us; QKV's input-gradient GEMM 3/12 of it = 82.6 us, MLP up's
    # 4/12 = 110.2 us, both shorter than 121.65 us: the re-gathers hide 7/12 of the pass per layer, and so do the
    # reduce-scatters beside the weight-gradient GEMMs: 2 x 7/12 of the pass per layer against 'none'.
    model = models.TransformerModel(name="h2048", layers=4, hidden=2048, heads=16, ffn=8192, vocab=51200)
    kw = dict(nodes=1, tp=8, pp=1, global_batch=4, micro_batch_size=4, seq_len=2048, efficiency=1.0)
    plain, overlapped = (
        training.estimate(model, "dgx-a100", tp_overlap=m, sequence_parallel=True, **kw) for m in ("none", METHOD)
    )
    h = 2048
    gemm_pass = 8192 * 2 * (12 * h * h + 4 * h) / (8 * 312e12)
    t_ar = 2 * 7 / 8 * 8192 * 2048 * 2 / 300e9 + 2 * 7 * 3.4e-6
    assert gemm_pass * 4 / 12 < t_ar / 2  # the guard: both GEMMs shorter than a re-gather
    assert plain.tp_comm_s - overlapped.tp_comm_s == pytest.approx(4 * 2 * gemm_pass * 7 / 12, rel=1e-9)


@pytest.mark.parametrize(
    "name, tp, recompute, pp",
    list(
        itertools.product(["llama3.1-8b", "gpt3-175b", "mixtral-8x7b"], [2, 8], ["none", "selective", "full"], [1, 4])
    ),
)
def test_hiding_the_re_gather_never_makes_the_step_slower(name, tp, recompute, pp, monkeypatch):
    # the calibrated model, its overlap slowdown on: the same run with the re-gathers exposed (regather_hidden 0)
    kw = dict(nodes=pp, tp=tp, pp=pp, global_batch=64, seq_len=4096, sequence_parallel=True, recompute=recompute)
    if name == "mixtral-8x7b":
        kw.update(ep=1)
    hidden = training.estimate(name, "dgx-h100", tp_overlap=METHOD, **kw)
    monkeypatch.setattr(communication, "regather_hidden", lambda c, gather, gemm: 0.0 * gather)
    exposed = training.estimate(name, "dgx-h100", tp_overlap=METHOD, **kw)
    assert exposed.tp_comm_s > hidden.tp_comm_s
    assert hidden.step_time_s <= exposed.step_time_s


def test_torchtitan_keeps_the_gathered_input_unless_op_checkpointing_drops_it():
    # torchtitan's DTensor plan gathers before attention and the MLP and autograd keeps the gathered input: no
    # re-gather, 4 all-reduce equivalents per layer (llama3.1-8b, 32 layers, tp 8, b 1, s 4096, H100 NVLink 4:
    # M = 4096 x 4096 x 2 B, ring 2 x 7/8 x M / 450e9 + 14 x 3.4e-6 per equivalent). Its selective op checkpointing
    # saves no all-gather output, so the backward gathers again: 5.
    kw = dict(
        nodes=1, tp=8, global_batch=1, seq_len=4096, sequence_parallel=True, memory_recipe="fsdp2", efficiency=0.5
    )
    t_ar = 2 * 7 / 8 * 4096 * 4096 * 2 / 450e9 + 14 * 3.4e-6
    kept = training.estimate("llama3.1-8b", "dgx-h100", recompute="none", tp_overlap=False, **kw)
    again = training.estimate("llama3.1-8b", "dgx-h100", recompute="selective", tp_overlap=False, **kw)
    assert kept.tp_comm_s == pytest.approx(32 * 4 * t_ar, rel=1e-9)
    assert again.tp_comm_s == pytest.approx(32 * 5 * t_ar, rel=1e-9)
