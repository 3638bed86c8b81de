"""'megatron-async-backward' (issue 30): Megatron-LM's backward launches each column-parallel linear's input-gradient
all-reduce (with sequence parallelism its reduce-scatter) beside that linear's weight-gradient GEMM
(NVIDIA/Megatron-LM@877f6a1bd5 megatron/mpu/layers.py; Korthikanti et al. 2022 Sec. 6.2). Hand derivations, the
invariants, the error for a bad name, the note, and which published runs take it."""

from __future__ import annotations

import itertools

import pytest

from distlab import cli, models, training, validation
from distlab.errors import ConfigurationError
from distlab.pipeline.closed_form import bubble_overhead_array
from distlab.tp_overlap import TP_OVERLAP_NAMES

METHOD = "megatron-async-backward"
#: Korthikanti 2022's 22B layer (Table 3: h 6144, 48 layers, TP 8, micro-batch 4, s 2048) on a DGX A100, no recompute
RUN = "korthikanti2022-t5-22b-full-recompute"


def _22b(method, **kw):
    r = validation.run(RUN)
    args = dict(r["distlab"]["estimate"], recompute="none", efficiency=0.5, tp_overlap=method)
    args.update(kw)
    return training.estimate(validation.run_model(r), validation.run_cluster(r), **args)


def test_the_22b_layer_hides_both_backward_all_reduces_by_hand():
    # one all-reduce of b s h x 2 bytes = 4 x 2048 x 6144 x 2 = 100,663,296 B over 8 GPUs of NVLink3 (300 GB/s, 3.4 us
    # per ring step): 2 x 7/8 x 100,663,296 / 300e9 + 2 x 7 x 3.4e-6 = 587.202 + 47.6 = 634.802 us.
    # Without overlap 4 per layer (2 forward, 2 backward) x 48 layers x 1 microbatch = 121.882 ms exposed.
    # The GEMMs beside the backward two, at the fixed efficiency 0.5: QKV's weight gradient 2 x 8192 x 3 x 6144^2 / 8
    # = 231.9 GFLOP / (312e12 x 0.5) = 1.487 ms; MLP up's 4/3 of it, 1.982 ms: both outlast 634.8 us, so both
    # all-reduces hide whole: 48 x 2 x 634.802 us = 60.941 ms hidden, 60.941 ms left (the forward's two).
    # The fixed model charges no overlap slowdown (efficiency.OVERLAP_SLOWDOWN: 0 for it), so the step drops by it.
    t_ar = 2 * 7 / 8 * 100_663_296 / 300e9 + 2 * 7 * 3.4e-6
    plain, overlapped = _22b("none"), _22b(METHOD)
    assert plain.tp_comm_s == pytest.approx(48 * 4 * t_ar, rel=1e-9)
    assert overlapped.tp_comm_s == pytest.approx(48 * 2 * t_ar, rel=1e-9)
    assert plain.step_time_s - overlapped.step_time_s == pytest.approx(48 * 2 * t_ar, rel=1e-9)
    # with sequence parallelism the backward's column-parallel collective is a reduce-scatter, half an all-reduce,
    # and the re-gather of the linear's input beside its input-gradient GEMM another half: 48 x 2 x 634.802 us hide
    # (tests/core/test_sp_regather.py); the row-parallel linears' backward all-gathers stay exposed
    sp_plain, sp_overlapped = _22b("none", sequence_parallel=True), _22b(METHOD, sequence_parallel=True)
    assert sp_plain.tp_comm_s - sp_overlapped.tp_comm_s == pytest.approx(48 * 2 * t_ar, rel=1e-9)
    # full recomputation adds the recomputed forward's two all-reduces, exposed: 6 - 2 = 4 per layer stay
    full = _22b(METHOD, recompute="full")
    assert full.tp_comm_s == pytest.approx(48 * 4 * t_ar, rel=1e-9)


def test_a_collective_longer_than_its_gemm_hides_only_the_gemms_time():
    # h 2048, 16 heads, ffn 8192, no biases, LayerNorm: 12 h^2 + 4h parameters per layer; TP 8, b 4, s 2048 (8192
    # tokens), the fixed efficiency 1.0 on a DGX A100. The all-reduce: 2 x 7/8 x 8192 x 2048 x 2 / 300e9 + 47.6 us
    # = 243.30 us. One pass of the layer's GEMMs: 8192 x 2 x (12 h^2 + 4h) / (8 x 312e12); QKV's weight gradient is
    # 3/12 of it (3 h^2 of the 12 h^2 of GEMM weights) = 82.6 us, MLP up's 4/12 = 110.1 us, both shorter than the
    # all-reduce: each hides only its GEMM's time, 7/12 of the pass per layer.
    model = models.TransformerModel(name="h2048", layers=4, hidden=2048, heads=16, ffn=8192, vocab=51200)
    kw = dict(nodes=1, tp=8, pp=1, global_batch=4, micro_batch_size=4, seq_len=2048, efficiency=1.0)
    plain, overlapped = (training.estimate(model, "dgx-a100", tp_overlap=m, **kw) for m in ("none", METHOD))
    h = 2048
    gemm_pass = 8192 * 2 * (12 * h * h + 4 * h) / (8 * 312e12)
    t_ar = 2 * 7 / 8 * 8192 * 2048 * 2 / 300e9 + 2 * 7 * 3.4e-6
    assert gemm_pass * 4 / 12 < t_ar  # the guard: both GEMMs shorter than the all-reduce
    assert plain.tp_comm_s - overlapped.tp_comm_s == pytest.approx(4 * gemm_pass * 7 / 12, rel=1e-9)


LAYOUTS = [  # an MoE model with TP runs with sequence parallelism only (Megatron-Core; distlab.moe.step)
    c
    for c in itertools.product(
        ["llama3.1-8b", "gpt3-175b", "mixtral-8x7b"], [2, 4, 8], [False, True], ["none", "selective", "full"], [1, 4]
    )
    if c[2] or c[0] != "mixtral-8x7b"
]


@pytest.mark.parametrize("name, tp, sp, recompute, pp", LAYOUTS)
def test_never_slower_than_none_never_faster_than_all_backward_traffic_hidden(name, tp, sp, recompute, pp):
    # the calibrated model (its overlap slowdown on): hiding can only save, and at most the backward's collectives
    # (2 of the 4 or 6 all-reduce equivalents per layer; with SP 2 of 5 or 7: the two reduce-scatters and the two
    # re-gathers) in every microbatch and in the bubble's stage time, each free
    kw = dict(nodes=pp, tp=tp, pp=pp, global_batch=64, seq_len=4096, sequence_parallel=sp, recompute=recompute)
    if name == "mixtral-8x7b":
        kw.update(ep=1)
    plain, overlapped = (training.estimate(name, "dgx-h100", tp_overlap=m, **kw) for m in ("none", METHOD))
    assert overlapped.step_time_s <= plain.step_time_s
    collectives = (6 if recompute == "full" else 4) + (1 if sp else 0)
    backward = plain.tp_comm_s * 2 / collectives
    bubble = float(bubble_overhead_array(pp, plain.config["microbatches"], plain.config["chunks"]))
    assert overlapped.step_time_s >= plain.step_time_s - backward * (1 + bubble) * (1 + 1e-12)
    assert overlapped.tp_comm_s >= plain.tp_comm_s - backward * (1 + 1e-12)


@pytest.mark.parametrize("bad", ["megatron-async", "async_backward", 3])
def test_a_bad_method_names_the_parameter_and_the_valid_names(bad, capsys):
    with pytest.raises(ConfigurationError) as info:
        _22b(bad)
    assert "tp_overlap=" in str(info.value) and all(repr(n) in str(info.value) for n in TP_OVERLAP_NAMES)
    args = ["--model", "llama3.1-8b", "--gpus", "8", "--global-batch", "8", "--tp", "8"]
    code = cli.main(["estimate", *args, "--tp-overlap", "megatron-async"])
    err = capsys.readouterr().err
    assert code != 0 and "--tp-overlap" in err and all(n in err for n in TP_OVERLAP_NAMES)
    assert "Traceback" not in err


def test_the_summary_states_the_assumption_and_the_record_names_the_method():
    est = _22b(METHOD)
    assert est.config["tp_overlap_method"] == METHOD and est.config["tp_overlap"] is True
    text = est.summary()
    assert "megatron-async-backward" in text and "weight-gradient GEMM" in text and "Korthikanti" in text
    assert "TP overlap" not in _22b("none").summary()
    # TP 1 has no TP collective: nothing is named
    one = training.estimate("llama3.1-8b", "dgx-h100", tp=1, global_batch=8, tp_overlap=METHOD)
    assert one.config["tp_overlap"] is False and "tp_overlap_method" not in one.config


def test_the_2022_megatron_runs_take_it_and_the_2021_calibration_runs_do_not():
    # Korthikanti 2022 ran Megatron-LM at 877f6a1bd5 (default since b462d2545d, 2021-09-07); Narayanan 2021 (arXiv
    # April 2021) predates it; BLOOM's bigscience Megatron-DeepSpeed (mpu/layers.py at 0d0d84c8, 2022-07) and MT-NLG's
    # microsoft/Megatron-DeepSpeed (no async_op in mpu/layers.py before 2023-07) ran the backward all-reduce in line
    method = {r["id"]: (r["distlab"].get("estimate") or {}).get("tp_overlap") for r in validation.load_runs()}
    korthikanti = [k for k in method if k.startswith("korthikanti2022-")]
    assert len(korthikanti) == 9 and all(method[k] == METHOD for k in korthikanti)
    assert [k for k, v in method.items() if v == METHOD] == korthikanti
    assert not any(method[k] for k in method if k.startswith(("narayanan2021-", "bloom-", "mtnlg-")))
