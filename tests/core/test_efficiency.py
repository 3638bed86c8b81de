"""distlab.efficiency: the calibrated compute model, its fit (calibration set only) and its accuracy on runs
it never saw (validation set), held at the level reached so far."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from distlab import attention_kernels, calibration, efficiency, hardware, planner, training, validation
from distlab.errors import ConfigurationError
from distlab.step import pricing


@pytest.fixture(scope="module")
def fit():
    return calibration.fit_calibration()


def test_the_stored_constants_are_the_calibration_fit(fit):
    assert (efficiency.TRAINING_MATMUL_SHARE, efficiency.MEMORY_TRAFFIC) == (fit["share"], fit["traffic"])


def test_the_fit_sees_only_the_calibration_set(fit):
    calibration = {r["id"] for r in validation.load_runs("calibration")}
    validation_ids = {r["id"] for r in validation.load_runs("validation")}
    assert set(fit["runs"]) == calibration and not set(fit["runs"]) & validation_ids
    assert all(run_id.startswith("narayanan2021-t1-") for run_id in fit["runs"]) and len(fit["runs"]) == 10


def test_best_gemm_figures_are_the_microbenchmarks():
    """Each catalog figure is the MAMF microbenchmark's TFLOP/s over its peak, as the data file records them."""
    bench = {m["id"]: m for m in validation.microbenchmarks("calibration")}
    for bench_id, share in efficiency.BEST_GEMM_EFFICIENCY.values():
        measured = bench[bench_id]["measured"]
        assert share == pytest.approx(measured["mamf_tflops"] / measured["peak_tflops"])
        assert bench[bench_id]["kind"] == "gemm_efficiency"
    # MI300X has its own row (668.4 of 1,300 TFLOP/s = 0.514), far under the NVIDIA fallback; the H100 PCIe has none
    assert efficiency.best_gemm_efficiency("mi300x") == pytest.approx(0.5142, abs=1e-4)
    assert efficiency.best_gemm_efficiency("h100-pcie") == efficiency.FALLBACK_GEMM_EFFICIENCY


def test_overlap_slowdown_is_the_microbenchmark():
    """OVERLAP_SLOWDOWN is Lee et al. 2025's average compute slowdown beside communication, as the data file records
    it; the calibrated model carries it, the fixed model of Lesson 7 §1 does not."""
    bench = {m["id"]: m for m in validation.microbenchmarks("calibration")}
    bench_id, share = efficiency.OVERLAP_SLOWDOWN
    assert bench[bench_id]["kind"] == "overlap_slowdown"
    assert share == bench[bench_id]["measured"]["average_compute_slowdown"] == 0.189
    assert efficiency.compute_model("h100-sxm").overlap_slowdown == share
    assert efficiency.fixed_compute_model(0.5).overlap_slowdown == 0.0


def test_flash_attention_figures_are_the_microbenchmarks():
    """Each flash-attention rate is the data file's FlashAttention-2 figure: A100 the low end of 50-73% of 312,
    H100 335 of 989.4 TFLOP/s (Dao 2023, Sec. 4.1), B200 398.1 of 2,250; a GPU without a figure gets the H100's."""
    bench = {m["id"]: m for m in validation.microbenchmarks("calibration")}
    a100 = bench["dao2023-flashattention2-a100"]["measured"]
    h100 = bench["dao2023-flashattention2-h100"]["measured"]
    assert efficiency.flash_attention_rate("a100-80gb") == a100["efficiency_percent_low"] / 100
    assert efficiency.flash_attention_rate("h100-sxm") == h100["tflops_forward_backward_best"] / h100["peak_tflops"]
    for bench_id, _ in efficiency.FLASH_ATTENTION_RATE.values():
        assert bench[bench_id]["kind"] == "attention_efficiency"
        assert bench[bench_id]["measured"]["forward_backward_work_per_causal_forward"] == 3.5
    # B200 (GB200, GB300 alike): FA2's best forward and backward (Zadouri et al. 2026 Figs. 4 and 6, non-causal, 32k)
    # on the paper's count, 3.5 / (1 / 432 + 2.5 / 386) = 398.1 TFLOP/s of 2,250
    b200 = bench["zadouri2026-fa4-b200-fa2-best"]["measured"]
    best = 3.5 / (1 / b200["tflops_forward"] + 2.5 / b200["tflops_backward"])
    assert best == pytest.approx(b200["tflops_forward_backward_best"], abs=0.05) == pytest.approx(398.1, abs=0.05)
    for gpu in ("b200", "gb200", "gb300"):
        assert efficiency.flash_attention_rate(gpu) == pytest.approx(best / b200["peak_tflops"], rel=1e-12)
    assert efficiency.flash_attention_rate("h100-pcie") == efficiency.FALLBACK_FLASH_ATTENTION_RATE == 335 / 989.4
    with pytest.raises(ConfigurationError, match="accelerator=3"):
        efficiency.flash_attention_rate(3)


def test_flash_attention_time_by_hand(monkeypatch):
    """Llama 2 7B on one DGX H100 (dp 8, zero 3, one 4,096-token sequence per GPU, no recompute): the flash core
    of one layer's microbatch counts 4 b s^2 a d = 4 x 4096^2 x 4096 = 2.749e11 FLOPs forward; a causal flash kernel
    executes 3.5 x half of it = 4.810e11 per layer, 1.539e13 for 32 layers, at 0.339 x 989.4 = 335 TFLOP/s:
    0.04594 s. Doubling the rate must save exactly half of that, 0.02297 s, and leave unfused attention alone."""
    kw = dict(nodes=1, fabric="ib-ndr", global_batch=8, seq_len=4096, zero=3)
    core = 32 * 3.5 * (4 * 4096**2 * 4096) / 2 / (335e12)
    assert core == pytest.approx(0.04594, rel=1e-3)
    base = training.estimate("llama2-7b", "dgx-h100", **kw)
    unfused = training.estimate("llama2-7b", "dgx-h100", attention="unfused", **kw)
    fast = dict(efficiency.FLASH_ATTENTION_RATE, **{"h100-sxm": ("test", 2 * 335 / 989.4)})
    monkeypatch.setattr(attention_kernels, "FLASH_ATTENTION_RATE", fast)  # its home since the kernels were named
    faster = training.estimate("llama2-7b", "dgx-h100", **kw)
    assert base.compute_s - faster.compute_s == pytest.approx(core / 2, rel=1e-9)
    assert training.estimate("llama2-7b", "dgx-h100", attention="unfused", **kw).compute_s == unfused.compute_s


def test_causal_flash_work_by_hand():
    """3.5 x half the counted forward; one half more when the forward is recomputed; arrays broadcast."""
    out = efficiency.flash_attention_work_array([2.0, 2.0], [False, True])
    assert out.tolist() == [3.5, 4.5]
    with pytest.raises(ConfigurationError, match="core_forward_flops"):
        efficiency.flash_attention_work_array(-1.0, False)


def test_flash_prices_the_core_apart_and_stores_no_scores():
    """Unfused: the scores a s^2 b (e + (1 + e)) bytes are stored and moved; flash: neither. Llama 2 7B at 4K
    tokens, one GPU-sized slice: flash must need less memory and, its element-wise traffic being smaller, no
    more time at the same matmul rate than unfused (the causal flash core executes 3.5 / 6 of the counted work at
    0.339 of peak, vs all of it at the matmul share of the GEMM rate, 0.63)."""
    kw = dict(nodes=1, fabric="ib-ndr", global_batch=8, seq_len=4096, zero=3)
    flash = training.estimate("llama2-7b", "dgx-h100", attention="flash", **kw)
    unfused = training.estimate("llama2-7b", "dgx-h100", attention="unfused", **kw)
    assert flash.memory.activations_bytes < unfused.memory.activations_bytes
    assert flash.compute_s < unfused.compute_s
    # 32 layers x a s^2 b x (e + (1 + e) x mask): llama has no dropout (mask 0) -> 32 x 32 x 4096^2 x 2 B
    assert unfused.memory.activations_bytes - flash.memory.activations_bytes == pytest.approx(32 * 32 * 4096**2 * 2)


def test_fixed_efficiency_is_lesson_7s_simple_model():
    """efficiency=0.5: every FLOP at half the peak, nothing else: compute = step FLOPs per GPU / (0.5 x peak)."""
    est = training.estimate(
        "llama2-7b", "dgx-h100", nodes=1, fabric="ib-ndr", global_batch=8, seq_len=4096, efficiency=0.5
    )
    assert est.compute_s == pytest.approx(est.hardware_flops / 8 / (0.5 * 989.4e12))
    assert est.compute_model.calibrated is False


def test_the_calibrated_model_is_slower_than_its_matmul_rate_alone():
    """The calibrated compute time is at least the FLOPs at the matmul rate (the traffic and a slower core only
    add), and the fixed model at that same rate is exactly that lower bound for unfused attention."""
    kw = dict(nodes=2, fabric="ib-ndr", global_batch=64, seq_len=4096, tp=8, attention="unfused")
    est = training.estimate("llama2-13b", "dgx-h100", **kw)
    floor = training.estimate("llama2-13b", "dgx-h100", efficiency=est.compute_model.matmul_efficiency, **kw)
    assert est.compute_s > floor.compute_s


@given(share=st.one_of(st.floats(min_value=-1, max_value=2), st.just(float("nan"))), traffic=st.floats(allow_nan=True))
def test_calibration_overrides_are_checked(share, traffic):
    cl = hardware.cluster("dgx-a100", 1, "ib-hdr")
    try:
        model = pricing.compute_model_for(cl, None, "flash", (share, traffic))
    except ConfigurationError:
        return
    assert 0 < share <= 1 and traffic >= 0 and model.memory_traffic == traffic


def test_element_wise_bytes_by_hand():
    """GPT 1.7B of Narayanan Table 1 (h 2304, a 24, f 9216, LayerNorm, dropout, learned positions), bf16, s 2048,
    unfused, fused kernels, tp 1: norms 2 x 2e h = 18,432; residual bias-dropout-add 2 x (3e h + h) = 32,256;
    GeLU 2e f = 36,864; softmax + dropout a s (2e + (2e + 1)) = 24 x 2048 x 9 = 442,368; context permute 2e q =
    9,216: 539,136 B per token. Eager: dropout apart, 2 x 2e h = 18,432 more (LayerNorm and GeLU are one native
    kernel each)."""
    gpt = validation.run_model(validation.run("narayanan2021-t1-1.7b"))
    fused = efficiency.elementwise_bytes_per_token(gpt, 2048, attention="unfused")
    eager = efficiency.elementwise_bytes_per_token(gpt, 2048, attention="unfused", kernels="eager")
    assert float(fused) == 539_136 and float(eager) == 539_136 + 18_432
    # tp 2 with sequence parallelism halves every term; flash drops the scores and the permute
    assert float(efficiency.elementwise_bytes_per_token(gpt, 2048, 2, True, "unfused")) == 539_136 / 2
    assert float(efficiency.elementwise_bytes_per_token(gpt, 2048, attention="flash")) == 539_136 - 442_368 - 9_216
    # compiled is counted as fused
    assert float(efficiency.elementwise_bytes_per_token("llama3.1-8b", 8192, kernels="compiled")) == 188_416


@pytest.mark.xfail(
    strict=True,
    reason="issue 30, open: since torchtitan's selective op checkpointing is priced as its policy runs it (the "
    "element-wise kernels recomputed: a 4th pass at eager's bytes), the predicted eager-minus-compiled gap is 0.52 s "
    "against 0.39 s measured (+34%); before, without the recompute, it was 0.387 s. Which part of the eager recompute "
    "the GPU really pays is not sourced yet.",
)
def test_eager_minus_compiled_matches_torchtitan():
    """torchtitan's own H100 tables (Tables 1 and 3) measure eager and torch.compile on the same run; the eager
    kernels' extra bytes are counted, not fitted, so the predicted gap is a check: within 15% of the measured one."""
    for gpus in (8, 128):
        eager = validation.run(f"torchtitan-h100-{gpus}gpu-llama31-8b-eager")
        compiled = validation.run(f"torchtitan-h100-{gpus}gpu-llama31-8b-compile")
        measured = validation.measured_step_time(eager) - validation.measured_step_time(compiled)
        predicted = validation.predict(eager).step_time_s - validation.predict(compiled).step_time_s
        assert predicted == pytest.approx(measured, rel=0.15)


@given(
    kernels=st.sampled_from(["fused", "eager", "compiled", "Eager", "jit", "", 3]),
    tp=st.one_of(st.integers(-2, 16), st.just(float("nan"))),
    seq=st.one_of(st.integers(-1, 10**6), st.just(float("inf"))),
)
def test_element_wise_bytes_checks_its_inputs(kernels, tp, seq):
    try:
        out = efficiency.elementwise_bytes_per_token("llama2-7b", seq, tp, False, "flash", kernels)
    except ConfigurationError:
        return
    assert str(kernels).lower() in efficiency.ELEMENTWISE_KERNELS and tp >= 1 and seq >= 1 and float(out) > 0


def test_eager_kernels_cost_time_and_are_checked():
    kw = dict(nodes=1, fabric="ib-ndr", global_batch=8, seq_len=4096, zero=3)
    fused = training.estimate("llama2-7b", "dgx-h100", **kw)
    eager = training.estimate("llama2-7b", "dgx-h100", kernels="eager", **kw)
    assert eager.step_time_s > fused.step_time_s and eager.config["kernels"] == "eager"
    with pytest.raises(ConfigurationError, match="kernels='jit'; valid: fused, compiled, eager"):
        training.estimate("llama2-7b", "dgx-h100", kernels="jit", **kw)


def test_an_unknown_attention_kernel_is_our_error():
    with pytest.raises(ConfigurationError, match="attention='paged'; valid: flash, unfused"):
        training.estimate("llama2-7b", "dgx-h100", nodes=1, global_batch=8, attention="paged")


# Accuracy, held where it stands (benchmarks/RESULTS.md records it). These are regression guards at the level
# reached, NOT the goal (validation mean <= 5%, max <= 15%), which test_the_goal below records as unmet.
def _stats(role, tier=None):
    comparison = validation.compare(role)
    return comparison.summary[role] if tier is None else comparison.tiers[tier]


def test_calibration_accuracy():
    stats = _stats("calibration")
    assert stats["scored"] == 10
    # measured 2.0% / 6.3% (76B) since each GEMM is priced by its shape (2026-11-24); 1.8% / 5.4% before. The refit
    # share (0.78 -> 0.82) cannot absorb that the shape slowdowns differ run to run (tp 1-8, 3.1-7.0% here)
    # 2026-11-24, compute beside hidden communication 18.9% slower (efficiency.OVERLAP_SLOWDOWN, not fitted; the DDP
    # all-reduce these runs overlap with the last backward): 2.1% / 5.9% (76B), the refit constants unchanged
    assert stats["mean_abs_error_percent"] <= 2.2 and stats["max_abs_error_percent"] <= 6.0


def test_validation_accuracy_held_at_the_level_reached():
    stats = _stats("validation")
    assert stats["scored"] >= 50
    # measured 8.8% over 42 runs, max 25.1% (2026-11-24: flash attention priced as the causal kernel runs it, at
    # FlashAttention-2's measured rate per GPU). Before it: 8.7% / 24.2%. The A100 runs with flash attention moved
    # toward the measurements (the 9 on A100: mean |error| 10.2% -> 6.4%, max 20.1% -> 10.7%); every H100 run was and is
    # predicted too fast, and a faster attention core moved the 23 from 9.5% to 11.1% (MPT 7B at 512 GPUs: -24.2%
    # -> -25.1%, the max). The H100 bias has no published microbenchmark behind a fix (benchmarks/RESULTS.md)
    # 2026-11-24, GEMMs priced by their shapes (efficiency.gemm_shape_factor_array): 8.9% / 26.7%. The refit share rose
    # 0.78 -> 0.82 to match the calibration runs' 3-7% shape slowdown (Megatron-LM, tp 2-8 on 108-SM A100s); the
    # FSDP runs at tp 1 (MPT, torchtitan) slow by only 0.2-2.5%, so they moved 2-4 points faster, and the H100 ones were
    # already too fast: MPT 7B at 512 GPUs -25.1% -> -26.7%, the max (benchmarks/RESULTS.md)
    # 2026-11-24, compute beside the communication it hides 18.9% slower (efficiency.OVERLAP_SLOWDOWN, Lee et al. 2025,
    # a published average, not fitted): 7.7% / 23.0%. Every run whose communication the model hides moved slower: the
    # FSDP runs by their gathers' share (MPT 7B at 512 GPUs -26.7% -> -23.0%, still the max), Megatron-Core on H100 with
    # --tp-comm-overlap by its TP traffic (462B -> +4.4%)
    # 2026-11-28, attention kernels named (distlab.attention_kernels; each engine's own: Megatron-Core cuDNN, FSDP2
    # sdpa = FlashAttention-2 by sequence length): 7.8% / 22.3%. Megatron-Core on H100 moved faster (1.7B -13.4% ->
    # -18.5%), the FSDP runs slower (MPT 7B at 512 GPUs -23.0% -> -22.3%)
    # 2026-11-28, NVIDIA's DGX Cloud recipes added (dgxc-benchmarking, 5 bf16 + 5 FP8 on the same layouts, H100):
    # 7.7% / 22.3% over 50 scored runs (the FP8 ones -1.6% to -13.2%; two bf16 ones over memory, not scored)
    # then mapped with their bf16 gradient buffers (grad_sync_dtype: bf16) and every Megatron recipe on cuDNN
    # attention: 7.4% / 22.3% over 52; TP overlap hiding (tp - 1) / tp of what fits (tp_overlap.py): 7.0% / 22.3%
    # 2026-11-29 (54 runs: 6.4% / 22.3%), FSDP's gradient path and llm-foundry's unpadding priced as the engines run
    # them (memory recipes fsdp1 / fsdp1-pure / fsdp2: fp32 reduce-scatter at ZeRO-3, the per-microbatch gradient cast /
    # divide; attention_kernel fa2-unpad): 5.8% / 18.5% (MPT 7B at 512 GPUs -22.3% -> -16.0%; the max is now
    # Megatron-Core 1.7B, -18.5%, unchanged)
    # 2026-11-29 (60 runs: 5.5% / 18.5%), the causal attention backward at distlab's measured causal / non-causal ratio
    # (attention_kernels.CAUSAL_BACKWARD_RATIO, one H200): 5.3% / 17.3% (Megatron-Core 1.7B -18.5% -> -17.3%)
    # 2026-11-30 (session 18), no model change: 16 torchtitan H100 rows added (Float8, FSDP + TP with and without async
    # TP, PP 1F1B / interleaved; every one at 500 W, all predicted too fast, -5.0% to -28.8%): 76 runs, 7.3% / 28.8%
    # (the async-TP page's Llama 3 8B Float8 row with async TP, benchmarks/RESULTS.md)
    # 2026-11-30 (session 18, branch gb19), no model constant changed: 7 Megatron Bridge 25.11 rows on GB200 / GB300
    # NVL72 added (the NVLink domain of a rack, hardware.Cluster.nvlink_domain): 83 scored, 7.45% / 27.5% (GB300 predicted
    # too slow: 8B FP8-CS +22.4%, 405B +20.8%; GB200 within 6%)
    # 2026-11-30 (session 19, branch off20), activation offloading priced (step.offload): the GB200 Llama 3 70B row,
    # 40 layers offloaded to Grace, scored at -3.7%: 84 of 84, 7.41% / 27.5%
    # 2026-11-30 (session 21), Blackwell attention at its measured rates (attention_kernels.BLACKWELL_KERNELS, Zadouri
    # et al. 2026; GB300 x its measured speed-up over GB200) instead of the H100's borrowed FA2 share: 7.43% / 27.5%
    # (B200 6.8% -> 10.0%, all four now too fast; GB200 4.3% -> 7.6%; GB300 15.1% -> 9.0%)
    # 2026-11-30 (session 21), torchtitan's 500 W H100 at Meta's stated bf16 peak for it at that cap, 800 TFLOP/s (Yang
    # et al. 2025, arXiv 2411.01783), instead of the midpoint of torchtitan's SXM-NVL bounds (912.45): 5.56% / 21.3%
    # (the 21 rows' mean -12.9% -> within -21.3% to +4.5%; the max is the async-TP page's 8B Float8 TP 8 row)
    # 2026-11-30 (session 21), MXFP8 its own recipe (elementwise.FP8_GEMM_RATE: its GEMMs at 0.951 of per-tensor FP8's,
    # Transformer Engine's GEMM profiling on a B300; its casts at 4 + 2/32 B): 5.5% / 21.3% (the four MXFP8 rows 2-5
    # points slower: B200 405B -16.0% -> -13.1%)
    # 2026-12-01 (session 23), no model constant changed: Megatron-Core r0.8's models untied (their size labels), Megatron
    # Bridge 25.11's 405B rows with the recipe's balanced pipeline split (B200 MXFP8 -13.1% -> -18.2%, the max), and
    # the newest 26.x release's dense rows of each system and precision added (26.06 405B, 26.04.01 70B: GB300 all
    # too slow, +6% to +17%, GB200 all too fast, -7% to -12%): 94 of 94, 5.87% / 18.2%
    # 2026-12-01 (session 24), an MoE layer's expert GEMMs as the engine runs them (distlab.expert_gemms) and the first
    # mixture-of-experts runs added (Megatron Bridge 26.06: Qwen3-30B-A3B, Qwen3-235B-A22B, DeepSeek-V3, gpt-oss-120b
    # on GB200, GB300 and H100): the 94 dense ones unchanged, the 9 MoE ones -23.2% to +20.2% (gpt-oss on GB200 the
    # max, predicted too fast; DeepSeek-V3 on GB300 +20.2% with its all-to-all overlapped in the run, not in the model):
    # 103 of 103, 6.23% / 23.2%
    # 2026-12-02 (session 29), FP8 attention and 128-token windows at cuDNN's measured times (attention_variants): 6.04%
    # / 18.2% (gpt-oss GB200 -23.2% -> -16.0%; the max is B200 405B MXFP8 again)
    # 2026-12-02 (session 30), GB300's FP8 GEMMs at GB200's MAMF rate x 1.173, Azure's paired cuBLASLt harness
    # (efficiency.FP8_GEMM_SIBLING_RATIO) instead of the H100's fallback share: 5.52% / 18.2% (the 12 GB300 rows' mean
    # |error| 9.9% -> 5.4%; 25.11's GB300 70B row -4.4% -> -15.0%, gpt-oss GB300 -10.1% -> -15.8%)
    assert stats["mean_abs_error_percent"] <= 5.6 and stats["max_abs_error_percent"] <= 18.3


@pytest.mark.xfail(
    strict=True,
    reason="issue 14's goal (validation mean |error| <= 5%, max <= 15%) is not met yet; "
    "see benchmarks/RESULTS.md for where the model is off and why",
)
def test_the_goal():
    stats = _stats("validation")
    assert stats["mean_abs_error_percent"] <= 5.0 and stats["max_abs_error_percent"] <= 15.0


def test_the_planner_prices_eager_kernels_as_estimate_does():
    """plan(kernels='eager') ranks with the same step model as estimate(kernels='eager'): its best row's time is the
    estimate of that row's configuration, and no faster than the best with fused kernels."""
    kw = dict(nodes=2, global_batch=64)
    eager = planner.plan("llama2-7b", "dgx-h100", kernels="eager", **kw)
    fused = planner.plan("llama2-7b", "dgx-h100", **kw)
    best = eager.row(0)
    names = ("dp", "tp", "pp", "cp", "chunks", "micro_batch_size", "zero", "recompute", "sequence_parallel", "schedule")
    est = training.estimate("llama2-7b", "dgx-h100", kernels="eager", **kw, **{k: best[k] for k in names if k in best})
    assert est.step_time_s == pytest.approx(best["step_time_s"], rel=1e-9)
    assert best["step_time_s"] >= fused.row(0)["step_time_s"]
