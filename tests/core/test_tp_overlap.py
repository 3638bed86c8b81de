"""TP overlap as a share by method (issue 30): 'none', 'userbuffers' (Megatron-Core --tp-comm-overlap), 'async-tp'
(PyTorch async TP) hide (tp - 1) / tp of the TP traffic that fits under the matmuls, not all of it; async TP only the
collectives its micro-pipeline pass fuses, each under its own GEMM; validated, never fitted, against torchtitan's
measured async-TP speed-ups."""

from __future__ import annotations

import pytest

import tomllib

from distlab import export, training, validation
from distlab.errors import ConfigurationError
from distlab.tp_overlap import TP_OVERLAP_NAMES, hidden_share_array, tp_overlap_method

LAYOUT = dict(nodes=4, fabric="ib-ndr", global_batch=64, seq_len=8192, pp=1, sequence_parallel=True)


def _tp_comm(tp, method, **kw):
    est = training.estimate("llama3.1-70b", "dgx-h100", tp=tp, tp_overlap=method, **LAYOUT, **kw)
    return est


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_userbuffers_exposes_one_of_tp_chunks(tp):
    # exposed = TP time - (tp - 1) / tp x min(TP time, matmul time); where the TP time is below the matmul time (the
    # guard: under a third of the compute, whose matmuls are most of it) what stays exposed is TP time / tp
    # (tp 2: 1/2, tp 4: 1/4, tp 8: 1/8); before the methods were named tp_overlap hid all of it (0 exposed)
    plain = _tp_comm(tp, "none")
    assert plain.tp_comm_s < plain.compute_s / 3
    overlapped = _tp_comm(tp, "userbuffers")
    assert overlapped.tp_comm_s == pytest.approx(plain.tp_comm_s / tp, rel=1e-9)
    assert overlapped.config["tp_overlap"] is True and overlapped.config["tp_overlap_method"] == "userbuffers"


@pytest.mark.parametrize("tp", [2, 4])
def test_async_tp_exposes_its_unfused_reduce_scatters_and_one_chunk_of_the_rest(tp):
    # 'none' here sends 5 all-reduce equivalents per layer (SP's backward re-gathers included); async TP is
    # torchtitan's, whose DTensor linears keep the gathered input: 4 of them (tests/core/test_sp_regather.py), T = 4/5
    # of plain. Of those 4, the backward's two input-gradient reduce-scatters (1 all-reduce equivalent) run unfused
    # (pytorch/pytorch PR #149946), so 3/4 of T can hide, (tp - 1) / tp of it: exposed = T (1 - 3/4 (tp - 1) / tp);
    # tp 2: 5/8 T, tp 4: 7/16 T. Each fused collective fits under its own GEMM here: per byte a rank receives, QKV's
    # GEMM does (q + 2 kv) / (tp - 1) = 10,240 / (tp - 1) FLOPs, the output's 8,192 / (tp - 1) (Llama 3.1 70B),
    # at tp 4 still 2,731, above the H100's 1,761 (its GEMMs' 0.659 x 989.4 TFLOP/s over NVLink's achieved 370 GB/s)
    plain = _tp_comm(tp, "none")
    overlapped = _tp_comm(tp, "async-tp")
    sent = 4 / 5 * plain.tp_comm_s
    assert overlapped.tp_comm_s == pytest.approx(sent * (1 - 0.75 * (tp - 1) / tp), rel=1e-9)
    assert overlapped.config["tp_overlap"] is True and overlapped.config["tp_overlap_method"] == "async-tp"


def test_async_tp_hides_a_collective_only_under_its_own_gemm():
    # at tp 8 the 70B's QKV GEMM does 10,240 / 7 = 1,463 FLOPs per byte received and its output 8,192 / 7 = 1,170,
    # below the H100's 1,761 (above): those two collectives cannot hide whole under their own GEMMs (the pooled reading
    # would hide them under the MLP's), so more than T (1 - 3/4 x 7/8) stays exposed; no more than T (1 - 3/4 x 7/8 x
    # 1/3) either: the MLP side's four fused collectives (of six) fit
    plain = _tp_comm(8, "none")
    sent = 4 / 5 * plain.tp_comm_s
    exposed = _tp_comm(8, "async-tp").tp_comm_s
    assert sent * (1 - 0.75 * 7 / 8) < exposed < sent * (1 - 0.75 * 7 / 8 / 3)


def test_true_is_the_engines_method_and_false_is_none():
    # Megatron's recipes run userbuffers, torchtitan's FSDP2 async TP; the ZeRO paper's count keeps what
    # tp_overlap=True always meant (Megatron-Core --tp-comm-overlap)
    assert tp_overlap_method(True, "megatron-distributed-optimizer") == "userbuffers"
    assert tp_overlap_method(True, "fsdp2") == "async-tp"
    assert tp_overlap_method(True, "zero-paper") == "userbuffers"
    assert tp_overlap_method(True, "deepspeed") == "none"  # DeepSpeed's AutoTP has no TP overlap
    assert tp_overlap_method(False, "fsdp2") == tp_overlap_method("NONE") == "none"
    fsdp2 = dict(memory_recipe="fsdp2", zero=3)
    assert _tp_comm(8, True, **fsdp2).config["tp_overlap_method"] == "async-tp"
    assert _tp_comm(8, True).step_time_s == _tp_comm(8, "userbuffers").step_time_s
    # without sequence parallelism there is nothing to overlap: the record says so
    est = training.estimate("llama3.1-70b", "dgx-h100", tp=8, tp_overlap=True, **{**LAYOUT, "sequence_parallel": False})
    assert est.config["tp_overlap"] is False and "tp_overlap_method" not in est.config


@pytest.mark.parametrize("bad", ["nvlink", "async_tp", 2, 0.5, "default"])
def test_a_bad_method_is_our_error_naming_the_valid_ones(bad):
    with pytest.raises(ConfigurationError) as info:
        _tp_comm(8, bad)
    text = str(info.value)
    assert "tp_overlap=" in text and all(repr(n) in text for n in TP_OVERLAP_NAMES)


def test_the_share_and_the_note_say_it_is_not_measured():
    # (tp - 1) / tp: tp 8 -> 0.875, tp 2 -> 0.5; 'none' hides nothing
    assert [float(x) for x in hidden_share_array([0, 1, 2, 1], [8, 8, 8, 2])] == [0.0, 0.875, 0.875, 0.5]
    notes = " ".join(_tp_comm(8, "async-tp").notes())
    assert "async-tp" in notes and "87.5%" in notes and "no published measurement" in notes
    assert not any("TP overlap" in n for n in _tp_comm(8, "none").notes())


#: torchtitan benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md (pytorch/torchtitan at 2887250), bfloat16 rows,
#: read from their validation runs in published_runs.json (one home; never fitted): the vanilla-TP run's id, its
#: async-TP twin is the id + "-asynctp". Llama 3 70B on 256 H100s, FSDP 32 x TP 8, full AC, local batch 16: 597.3 ->
#: 652.4 tokens/s/GPU (1.09x); Llama 3 8B on 64 H100s, FSDP 8 x TP 8, per-op SAC, local batch 12: 4378 -> 4809.4
#: (1.10x). Grand Teton H100s (96 GB HBM2e, 500 W), torch.compile; sequence length not stated: torchtitan's 8,192.
TORCHTITAN_ASYNC_TP = {
    "70b": "torchtitan-h100-256gpu-llama3-70b-2025-bf16-tp8",
    "8b": "torchtitan-h100-64gpu-llama3-8b-2025-bf16-tp8",
}


def _async_tp_pair(key):
    vanilla = validation.run(TORCHTITAN_ASYNC_TP[key])
    return vanilla, validation.run(TORCHTITAN_ASYNC_TP[key] + "-asynctp")


def _measured_speedup(key):
    vanilla, overlapped = _async_tp_pair(key)
    return validation.measured_step_time(vanilla) / validation.measured_step_time(overlapped)


def _async_tp_speedup(key):
    vanilla, overlapped = _async_tp_pair(key)
    assert vanilla["distlab"]["estimate"]["tp_overlap"] is False
    assert overlapped["distlab"]["estimate"]["tp_overlap"] == "async-tp"
    plain, hidden = validation.predict(vanilla), validation.predict(overlapped)
    band = validation.error_band(validation.run_cluster(vanilla).accelerator.name, "mixed").percent
    return plain.step_time_s / hidden.step_time_s, band


def test_the_async_tp_pairs_are_the_published_rows():
    # 652.4 / 597.3 and 4809.4 / 4378, as the page prints them (speed-ups 1.09 and 1.10 rounded)
    assert _measured_speedup("70b") == pytest.approx(652.4 / 597.3, rel=1e-12)
    assert _measured_speedup("8b") == pytest.approx(4809.4 / 4378, rel=1e-12)


def test_async_tp_speedup_on_torchtitans_70b_layout_is_within_the_h100_band():
    # predicted 1.165x against the measured 1.092x: +6.6% (all TP hidden: 1.19x); since session 21 (the 500 W part at
    # Meta's stated 800 TFLOP/s) 1.147x, +5.01%. Since session 22 (the backward's unfused reduce-scatters, each
    # collective under its own GEMM: tp_overlap.async_tp_hidden_array) 1.113x, +1.9%
    speedup, band = _async_tp_speedup("70b")
    measured = _measured_speedup("70b")
    assert abs(100 * (speedup / measured - 1)) <= band


def test_async_tp_speedup_on_torchtitans_8b_layout_is_within_the_h100_band():
    # a strict xfail until session 22: predicted 1.163x against the measured 1.099x (+5.8%), outside the ±5.0% band.
    # With the backward's input-gradient reduce-scatters unfused and each fused collective hidden only under its own
    # GEMM (the 8B's QKV and output GEMMs, 878 and 585 FLOPs per byte received at tp 8, cover under half of theirs)
    # 1.086x, -1.1%: not fitted, the pass's structure (pytorch/pytorch PR #149946; torch._symmetric_memory)
    speedup, band = _async_tp_speedup("8b")
    measured = _measured_speedup("8b")
    assert abs(100 * (speedup / measured - 1)) <= band


def test_overlapped_validation_runs_are_closer_than_with_everything_hidden():
    # the 17 validation mappings with tp_overlap True (userbuffers: Megatron-Core r0.8, dgxc 70B/405B/175B/15B): mean |error| 7.0%
    # with all TP traffic hidden (main at 233a402); the share must not make them worse on average. Since session 12
    # (branch b2) 21: + Megatron Bridge 25.11's B200 405B (FP8-CS, MXFP8) and H100 70B / 405B FP8-CS rows; since
    # session 18 (branch gb19) 23: + its GB200 and GB300 405B FP8-CS rows
    # (the 7 such rows of Megatron Bridge's 26.x releases, added in session 23, were never priced with everything
    # hidden: the comparison keeps to the 23 it was measured on; `distlab validate` scores them all)
    rows = [
        validation._row(r)
        for r in validation.load_runs("validation")
        if (r["distlab"].get("estimate") or {}).get("tp_overlap") is True and not r["id"].startswith("mbridge-26")
    ]
    scored = [abs(r.error_percent) for r in rows if r.status == "predicted"]
    assert len(scored) == 23
    assert sum(scored) / len(scored) < 7.0


def test_export_writes_the_method_its_engine_runs_and_refuses_the_others():
    # Megatron-LM: --tp-comm-overlap (userbuffers), read back by parse_megatron; torchtitan: [parallelism]
    # enable_async_tensor_parallel with [compile] enable (async TP is "only effective when compile is enabled",
    # job_config.py); each refuses the other's method, and DeepSpeed any
    kw = dict(nodes=2, global_batch=64, tp=4, pp=1, sequence_parallel=True)
    megatron = training.estimate("llama3.1-8b", "dgx-h100", zero=1, tp_overlap="userbuffers", **kw)
    line = export.megatron(megatron)
    assert "--tp-comm-overlap" in line.split() and export.parse_megatron(line)["tp_overlap"] is True
    plain = training.estimate("llama3.1-8b", "dgx-h100", zero=1, **kw)
    assert export.parse_megatron(export.megatron(plain))["tp_overlap"] is False
    titan = training.estimate("llama3.1-8b", "dgx-h100", zero=3, memory_recipe="fsdp2", tp_overlap=True, **kw)
    toml = tomllib.loads(export.torchtitan(titan))
    assert toml["parallelism"]["enable_async_tensor_parallel"] is True and toml["compile"] == {"enable": True}
    sharded = training.estimate("llama3.1-8b", "dgx-h100", zero=3, memory_recipe="fsdp2", **kw)
    assert "enable_async_tensor_parallel" not in tomllib.loads(export.torchtitan(sharded))["parallelism"]
    with pytest.raises(ConfigurationError, match="async TP runs in torchtitan"):
        export.megatron(titan)
    with pytest.raises(ConfigurationError, match="--tp-comm-overlap; torchtitan overlaps TP with async TP"):
        export.torchtitan(training.estimate("llama3.1-8b", "dgx-h100", zero=3, tp_overlap="userbuffers", **kw))
    deepspeed = training.estimate("llama3.1-8b", "dgx-h100", zero=1, tp_overlap="userbuffers", **kw)
    with pytest.raises(ConfigurationError, match="DeepSpeed's AutoTP runs its TP collectives on the critical path"):
        export.deepspeed(deepspeed)


def test_async_tp_leaves_an_moe_layers_mlp_collectives_uncapped_with_or_without_shared_experts():
    # an MoE layer's experts are not TP linears: its MLP-side collectives are capped by no GEMM of their own. Mixtral
    # 8x7B has no shared expert, so its layer has four GEMM parts like a dense one (the check once counted parts and
    # capped them by the routed experts' GEMMs). By hand, a 1 ms pass of the layer's GEMMs, 2 ms collectives, share
    # 7/8: QKV (4,096 + 2 x 1,024) x 4,096, output 4,096 x 4,096, experts 2 x (2 + 1) x 14,336 x 4,096 FLOPs/2 a token;
    # hidden = 7/8 [(qkv + out + 2 + 2) + out + 2] ms
    from distlab import moe
    from distlab.moe.step import MoEStepModel
    from distlab.tp_overlap import async_tp_hidden_array

    mixtral = moe.model("mixtral-8x7b")
    qkv, out, experts = (4096 + 2 * 1024) * 4096, 4096 * 4096, 2 * 3 * 14336 * 4096
    total = qkv + out + experts
    t_qkv, t_out = 1.0 * qkv / total, 1.0 * out / total
    want = 0.875 * ((t_qkv + t_out + 2 + 2) + t_out + 2)
    got = async_tp_hidden_array(MoEStepModel(mixtral, mixtral.seq_len, mixtral.head_dim), 2e-3, 1e-3, 0.875)
    assert float(got) * 1e3 == pytest.approx(want, rel=1e-12)
