"""FP8 as a compute dimension (only the weight GEMMs at the FP8 GEMM rate; casts priced per scaling recipe) and
attention kernels as a named choice (rates by sequence length and direction): distlab.efficiency,
distlab.elementwise, distlab.attention_kernels, the step model's compute terms. Issue 30."""

from __future__ import annotations

import dataclasses

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distlab import attention_kernels, efficiency, elementwise, hardware, models, training, validation
from distlab.errors import ConfigurationError
from distlab.step import pricing

H100 = dict(nodes=1, fabric="ib-ndr")


def _llama8b(precision, **kw):
    """Llama 3.1 8B on one DGX H100, dp 8, one 2,048-token sequence per GPU, no recompute, zero-paper recipe."""
    args = dict(global_batch=8, seq_len=2048, zero=1, precision=precision, **H100)
    return training.estimate("llama3.1-8b", "dgx-h100", **{**args, **kw})


def test_fp8_step_decomposition_by_hand():
    """Llama 3.1 8B (h 4096, q 4096, kv 1024, f 14,336, gated, 32 layers, V 128,256), b 1, s 2048, tp 1.
    FP8 changes three things against bf16, each derived here:
    1. GEMMs: the layers' weight-GEMM time scales by (bf16 peak x bf16 best share) / (fp8 peak x fp8 best share) =
       (989.4 x 794.5/989) / (1978.9 x 1402.6/1979) = 794.8 / 1402.5 = 0.5667 -- before the shape factor, whose
       roofline ridge halves with 1-byte operands (a GEMM this large, 2048 tokens, stays compute-bound: the factor is
       the same within 1e-9 as the wave quantisation does not depend on the precision). The output layer stays
       16-bit (Megatron-Core's output_layer is a plain ColumnParallelLinear; torchtitan's Float8 skips 'output'):
       its time, the logits' 3 passes x 2 V h FLOPs per token at the bf16 rate and its own shape factor, is the
       same in both, so matmul(fp8) = 0.5667 (matmul(bf16) - logits) + logits.
    2. attention core: at the bf16 peak in both, so its time is the same.
    3. element-wise: the same bytes at 2 B per element (fp8's elementwise_bytes = 2), plus the casts: per token and
       layer forward (2 x 4096 + 4096 + 14,336) x 4 B = 106,496, backward (6144 + 4096 + 28,672 + 4096) x 4 =
       172,032 (delayed, 4 B per element), 278,528 B; x 32 layers x 2048 tokens x MEMORY_TRAFFIC 1.4 / 3.35 TB/s
       = 7.628 ms."""
    bf16, fp8 = _llama8b("mixed"), _llama8b("fp8")
    matmul = lambda e: e.compute_s - _core(e) - _elementwise(e)  # noqa: E731
    ratio = (989.4e12 * 794.5 / 989) / (1978.9e12 * 1402.6 / 1979)
    assert ratio == pytest.approx(0.5667, abs=1e-4)
    cm = bf16.compute_model
    ridge = 989.4e12 * cm.best_gemm / 3.35e12
    slow_logits = efficiency.layer_gemm_slowdown_array(models.model("llama3.1-8b"), 2048, 1, cm.gemm_sms, ridge)[1]
    logits = 3 * 2 * 128_256 * 4096 * 2048 * float(slow_logits) / (989.4e12 * cm.matmul_efficiency)
    assert 0.05 < logits / matmul(bf16) < 0.10  # the output layer: about 7% of an 8B model's GEMM time
    assert matmul(fp8) == pytest.approx(ratio * (matmul(bf16) - logits) + logits, rel=1e-6)
    assert _core(fp8) == pytest.approx(_core(bf16), rel=1e-12)
    casts = 278_528 * 32 * 2048 * 1.4 / 3.35e12
    assert casts == pytest.approx(7.628e-3, rel=1e-3)
    assert _elementwise(fp8) - _elementwise(bf16) == pytest.approx(casts, rel=1e-9)


def test_fp8_output_layer_runs_at_the_16_bit_rate_by_hand():
    """The simple model (every GEMM at 50% of its peak, no shape factor): matmul(bf16) = G / (989.4e12 x 0.5);
    matmul(fp8) = (G - Lg) / (1978.9e12 x 0.5) + Lg / (989.4e12 x 0.5), Lg the output layer's 3 passes x 2 V h
    FLOPs per token over 2048 tokens = 6 x 128,256 x 4096 x 2048 = 6.4559e12 FLOP per microbatch. So
    matmul(fp8) - matmul(bf16) x 989.4 / 1978.9 = Lg (1 / 989.4e12 - 1 / 1978.9e12) / 0.5 = 6.5270 ms."""
    bf16, fp8 = _llama8b("mixed", efficiency=0.5), _llama8b("fp8", efficiency=0.5)
    matmul = lambda e: e.compute_s - _core(e) - _elementwise(e)  # noqa: E731
    lg = 6 * 128_256 * 4096 * 2048
    assert lg == pytest.approx(6.4559e12, rel=1e-4)
    by_hand = lg * (1 / 989.4e12 - 1 / 1978.9e12) / 0.5
    assert by_hand == pytest.approx(6.527e-3, rel=1e-3)
    assert matmul(fp8) - matmul(bf16) * 989.4 / 1978.9 == pytest.approx(by_hand, rel=1e-6)


def _stage(e):
    """The StepConfig of an estimate's configuration (the same keywords estimate passes)."""
    from distlab import hardware, memory
    from distlab.step.config import step_config

    cl = hardware.cluster("dgx-h100", 1, "ib-ndr")
    c = e.config
    recipe = memory.precision_recipe(c["precision"])
    hw = training.hardware_arguments(cl, recipe, achieved=True)
    return step_config(
        c["model"],
        **hw,
        global_batch=c["global_batch"],
        seq_len=c["seq_len"],
        dp=c["dp"],
        tp=c["tp"],
        pp=c["pp"],
        chunks=c["chunks"],
        micro_batch_size=c["micro_batch_size"],
        zero=c["zero"],
        recompute_code=0,
        sequence_parallel=False,
        schedule_code=1,
        **pricing.compute_arguments(e.compute_model),
    )


def _core(e):
    from distlab.step import compute

    return float(e.config["microbatches"] * compute.attention_core_seconds(_stage(e)))


def _elementwise(e):
    from distlab.step import compute

    return float(e.config["microbatches"] * compute.elementwise_seconds(_stage(e)))


@pytest.mark.parametrize("scaling, bytes_", [("delayed", 4.0), ("current", 6.0), ("blockwise", 4.0 + 8 / 128)])
def test_fp8_scaling_recipes_price_their_cast_bytes(scaling, bytes_):
    """Current scaling reads each tensor once more than delayed (6 vs 4 B per element); blockwise writes a scale per
    128 elements per copy; the difference in step time is the cast bytes' difference x the cast elements."""
    base = _llama8b("fp8")
    other = _llama8b("fp8", fp8_scaling=scaling)
    elements = 278_528 / 4.0 * 32 * 2048  # cast elements per microbatch (test above)
    assert other.compute_s - base.compute_s == pytest.approx((bytes_ - 4.0) * elements * 1.4 / 3.35e12, abs=1e-12)
    assert other.config["fp8_scaling"] == scaling


def test_bf16_ignores_the_fp8_scaling():
    assert _llama8b("mixed", fp8_scaling="current").step_time_s == _llama8b("mixed").step_time_s


def _dgxc_pairs():
    runs = {r["id"]: r for r in validation.load_runs("validation") if r["id"].startswith("dgxc-h100-")}
    pairs = []
    for rid, r in runs.items():
        if rid.endswith("-bf16"):
            pairs.append((r, runs[rid.removesuffix("-bf16") + "-fp8"]))
    return pairs


def test_fp8_speedup_band_against_the_published_pairs():
    """NVIDIA's DGX Cloud recipes (dgxc-benchmarking, H100, NeMo 24.12) publish bf16 and FP8 step times on the same
    layouts: measured speed-ups 1.35x (Llama 3.1 8B) to 1.59x (405B). Before FP8 was a compute dimension distlab
    divided all compute by the FP8 peak (1.8-1.9x); now each predicted speed-up is within 0.12 of the measured one and
    all stay below 1.65x."""
    pairs = _dgxc_pairs()
    assert len(pairs) == 5
    for bf16, fp8 in pairs:
        measured = bf16["distlab"]["measured_step_time"]["seconds"] / fp8["distlab"]["measured_step_time"]["seconds"]
        predicted = validation.predict(bf16).step_time_s / validation.predict(fp8).step_time_s
        assert 1.3 < measured < 1.65
        assert abs(predicted - measured) < 0.13, (bf16["id"], predicted, measured)
        assert predicted < 1.65


def test_kernel_rates_read_back_by_sequence_length():
    """Shah et al. 2024 Figs. 5-6 (H100 SXM5, head dim 128) as stored in the data file, read back at the measured
    lengths exactly and between them linearly in log2 s, the backward scaled to the causal mask by distlab's H200
    measurement: cuDNN at 2k forward 484, backward 465 x 415.5 / 522.6 = 369.7 TFLOP/s; halfway (in log2) between 4k and 8k FA2 forward (319 + 333) / 2 = 326."""
    bench = {m["id"]: m for m in validation.microbenchmarks("calibration")}
    for kernel in ("fa2", "cudnn", "fa3"):
        m = bench[f"shah2024-fa3-fig5-6-h100-hd128-{kernel}"]["measured"]
        table, note = attention_kernels.kernel_rate_table("h100-sxm", kernel)
        assert note == "" and list(table[0]) == m["seq_len"]
        base = "cudnn" if kernel == "fa3" else kernel  # fa3 takes cuDNN's measured causal ratio
        mine = bench[f"distlab-h200-sdpa-causal-backward-{base}"]["measured"]
        assert mine["seq_len"] == m["seq_len"]
        rows = zip(
            m["seq_len"],
            m["forward_causal_tflops"],
            m["backward_tflops"],
            mine["backward_causal_tflops"],
            mine["backward_noncausal_tflops"],
        )
        for s, fw, bw, causal, plain in rows:
            forward, backward = attention_kernels.kernel_rates(table, s)
            # the paper's (non-causal) backward x distlab's measured causal / non-causal ratio
            assert (float(forward) * 989.4, float(backward) * 989.4) == pytest.approx(
                (fw, bw * causal / plain), rel=1e-12
            )
    fa2, _ = attention_kernels.kernel_rate_table("h100-sxm", "fa2")
    assert float(attention_kernels.kernel_rates(fa2, 4096 * 2**0.5)[0]) * 989.4 == pytest.approx(326.0)
    assert attention_kernels.kernel_rate_table("h100-sxm", "sdpa")[0] == fa2
    cudnn, _ = attention_kernels.kernel_rate_table("h100-sxm", "cudnn")
    assert float(attention_kernels.kernel_rates(cudnn, 2048)[1]) * 989.4 == pytest.approx(369.7, abs=0.05)


def test_causal_backward_ratio_is_the_raw_measurement():
    """The causal / non-causal backward rates stored in published_runs.json are the raw file's timings on the paper's
    FLOP count: backward FLOPs 2.5 x the forward's 4 b s^2 a d (halved with the causal mask) over (forward + backward
    time - forward time). E.g. cuDNN at 2,048 tokens, causal: b = 8, a = 16, d = 128: 2.5 x 4 x 8 x 2048^2 x 16 x 128 / 2
    = 4.295e12 FLOPs over the measured backward seconds."""
    raw = json.loads((Path(__file__).parents[2] / "benchmarks/results/h200-2026-11-29-sweep.json").read_text())
    bench = {m["id"]: m for m in validation.microbenchmarks("calibration")}
    for kernel, backend in (("fa2", "FLASH_ATTENTION"), ("cudnn", "CUDNN_ATTENTION")):
        stored = bench[f"distlab-h200-sdpa-causal-backward-{kernel}"]["measured"]
        for i, s in enumerate(stored["seq_len"]):
            for causal, key in ((True, "backward_causal_tflops"), (False, "backward_noncausal_tflops")):
                (row,) = [r for r in raw["attention"] if (r["backend"], r["seq"], r["causal"]) == (backend, s, causal)]
                flops = 2.5 * 4.0 * row["batch"] * s * s * row["heads"] * row["d"] / (2.0 if causal else 1.0)
                assert flops / (row["fwd_bwd_s"] - row["fwd_s"]) / 1e12 == pytest.approx(stored[key][i], abs=0.051)
        ratio = attention_kernels.CAUSAL_BACKWARD_RATIO[kernel]
        assert ratio == tuple(
            c / n for c, n in zip(stored["backward_causal_tflops"], stored["backward_noncausal_tflops"])
        )
    # the causal kernel loses most at short sequences: a third of the non-causal rate at 512 tokens, none at 16k
    assert (
        attention_kernels.CAUSAL_BACKWARD_RATIO["cudnn"][0]
        < 0.65
        < 0.9
        < attention_kernels.CAUSAL_BACKWARD_RATIO["cudnn"][-1]
    )


def test_kernel_choice_moves_only_the_attention_core():
    """cuDNN is faster than FA2 at every measured length: the compute term falls, nothing else moves; the fallback
    on a GPU without a published figure says so."""
    fa2, cudnn = (_llama8b("mixed", attention_kernel=k) for k in ("fa2", "cudnn"))
    assert cudnn.compute_s < fa2.compute_s
    assert cudnn.dp_comm_s == fa2.dp_comm_s and cudnn.optimizer_s == fa2.optimizer_s
    a100 = training.estimate(
        "llama3.1-8b",
        "dgx-a100",
        nodes=1,
        fabric="ib-hdr",
        global_batch=8,
        seq_len=2048,
        zero=1,
        attention_kernel="fa3",
    )
    assert "no published fa3 rate on a100-80gb" in a100.compute_model.describe()
    assert "kernel fa3" in a100.compute_model.describe()


def test_engines_default_to_their_kernel():
    megatron = _llama8b("mixed", memory_recipe="megatron-distributed-optimizer")
    fsdp = _llama8b("mixed", memory_recipe="fsdp2", zero=3)
    assert megatron.config["attention_kernel"] == "cudnn" and fsdp.config["attention_kernel"] == "sdpa"
    assert _llama8b("mixed").config["attention_kernel"] == "flash"


@settings(max_examples=25, deadline=None)
@given(st.one_of(st.text(max_size=8), st.integers(), st.none().map(lambda _: 3.5)))
def test_bad_kernel_and_scaling_get_our_error(bad):
    if (
        isinstance(bad, str)
        and bad.strip().lower() in attention_kernels.ATTENTION_KERNEL_NAMES + elementwise.FP8_SCALING
    ):
        return
    with pytest.raises(ConfigurationError, match="attention_kernel=.*valid: flash, fa2, fa3, fa4, cudnn, sdpa"):
        _llama8b("mixed", attention_kernel=bad)
    with pytest.raises(ConfigurationError, match="fp8_scaling=.*valid: delayed, current, blockwise"):
        _llama8b("fp8", fp8_scaling=bad)


def test_unfused_attention_refuses_a_flash_kernel():
    with pytest.raises(ConfigurationError, match="attention_kernel='fa3'.*unfused"):
        _llama8b("mixed", attention="unfused", attention_kernel="fa3")


def test_fp8_gemm_figure_is_the_microbenchmark():
    bench = {m["id"]: m for m in validation.microbenchmarks("calibration")}
    for bench_id, share in efficiency.BEST_FP8_GEMM_EFFICIENCY.values():
        measured = bench[bench_id]["measured"]
        assert share == pytest.approx(measured["mamf_tflops"] / measured["peak_tflops"])
        assert bench[bench_id]["kind"] == "gemm_efficiency"


def test_gb300s_fp8_gemm_share_is_gb200s_mamf_times_the_paired_harness_ratio():
    """GB300 has no MAMF row; Azure's harness timed the FP8 GEMM on a GB200 and a GB300 alike. By hand from the data
    file's rows: GB200 MAMF 3,615.6 TFLOP/s x (3,308.5 / 2,819.5) = 4,242.7 of GB300's 5,000 dense FP8 = 0.8485."""
    bench = {m["id"]: m for m in validation.microbenchmarks("calibration")}
    sibling, low_id, high_id, ratio = efficiency.FP8_GEMM_SIBLING_RATIO["gb300"]
    assert sibling == "gb200" and bench[low_id]["kind"] == bench[high_id]["kind"] == "gemm_rate_ratio"
    assert ratio == pytest.approx(bench[high_id]["measured"]["best_tflops"] / bench[low_id]["measured"]["best_tflops"])
    assert efficiency.best_fp8_gemm_efficiency("gb300") == pytest.approx(3615.6 * 3308.5 / 2819.5 / 5000, rel=1e-9)
    assert efficiency.best_fp8_gemm_efficiency("gb300") == pytest.approx(0.8485, abs=1e-4)
    # BF16 has no paired figure: GB300's 16-bit GEMMs keep the fallback
    assert efficiency.best_gemm_efficiency("gb300") == efficiency.FALLBACK_GEMM_EFFICIENCY


def test_gb300s_fp8_gemms_run_faster_than_gb200s_by_the_ratio():
    """The compute model a GB300 gets runs best-shape FP8 GEMMs at GB200's rate x 3,308.5 / 2,819.5 (the two parts
    have the same 5,000 TFLOP/s FP8 peak, so the shares keep the ratio), for every FP8 scaling recipe alike."""
    for scaling in elementwise.FP8_SCALING:
        gb200 = efficiency.compute_model("gb200", fp8_scaling=scaling)
        gb300 = efficiency.compute_model("gb300", fp8_scaling=scaling)
        assert gb300.fp8_best_gemm / gb200.fp8_best_gemm == pytest.approx(3308.5 / 2819.5)


@settings(max_examples=25, deadline=None)
@given(st.one_of(st.floats(allow_nan=True), st.integers(-10, 10**6), st.text(max_size=4), st.booleans()))
def test_bad_power_figures_get_our_error(bad):
    """tdp_w and power_limit_w are watts, 1 to 100,000 (the limit at most the TDP); anything else is our error
    naming the field."""
    from distlab import hardware

    base = hardware.accelerator("h100-sxm")
    ok = isinstance(bad, (int, float)) and not isinstance(bad, bool) and 1 <= bad <= 700
    for field in ("tdp_w", "power_limit_w"):
        kw = dict(tdp_w=700.0, power_limit_w=None) | {field: bad}
        if ok or (
            field == "tdp_w" and isinstance(bad, (int, float)) and not isinstance(bad, bool) and 1 <= bad <= 100_000
        ):
            continue
        with pytest.raises(ConfigurationError, match="power_limit_w|tdp_w"):
            hardware.Accelerator("x", dict(base.peak_flops), base.memory_bytes, base.memory_bandwidth, **kw)


def test_power_cap_is_priced_where_the_parts_peak_at_the_cap_is_stated():
    """torchtitan's H100s ran at 500 W of 700 W, and Meta states the part's bf16 peak at that cap: 800 TFLOP/s
    (Yang et al. 2025, arXiv 2411.01783, Sec. 4), so validate prices them at it and says so; a capped part without
    such a figure is priced at its TDP's peaks and its estimate says the cap is not modelled."""
    capped = validation.power_capped_runs()
    assert capped and all(r.startswith("torchtitan-h100") for r in capped)
    assert validation.power_capped_runs(priced=True) == capped and validation.power_capped_runs(priced=False) == []
    gpu = validation.run_cluster(validation.run(capped[0])).accelerator
    assert gpu.peak("bf16") == 800e12 and gpu.peak("fp8") == 1600e12 and gpu.memory_bandwidth == 2.4e12
    est = validation.predict(validation.run(capped[0]))
    words = " ".join(est.summary().split())  # the summary wraps its long lines
    assert "its peaks are those stated at that cap" in words and "does not model the cap" not in words
    assert "power-capped" not in _llama8b("mixed").summary()
    unsourced = dataclasses.replace(gpu, capped_peak_source="")
    assert "does not model the cap" in unsourced.power_note()
    with pytest.raises(ConfigurationError, match="capped_peak_source"):
        dataclasses.replace(gpu, capped_peak_source=3)


def test_every_engine_recipe_defaults_to_its_engines_kernel():
    """Each memory recipe export writes for an engine (export.ENGINE_RECIPES) runs that engine's attention kernel by
    default: every Megatron recipe (bf16 gradient buffers and Megatron-FSDP included) Transformer Engine's cuDNN
    attention, torchtitan's FSDP2 sdpa. A Megatron recipe missing from the table would silently price FA2's rate."""
    from distlab import export
    from distlab.attention_kernels import default_attention_kernel

    want = {"megatron": "cudnn", "torchtitan": "sdpa", "deepspeed": "flash"}
    for engine, tables in export.ENGINE_RECIPES.items():
        for table in tables:
            for recipe in table.values():
                assert default_attention_kernel(recipe) == want[engine], (engine, recipe)


def test_a_gpu_without_a_flash_attention_figure_says_it_borrows_the_h100s():
    # issue 31: the training lab on hgx-b200 printed "attention core at 33.9%" as if measured on the B200; 33.9% is
    # 335 / 989.4, FlashAttention-2 on the H100 (Dao 2023, Sec. 4.1). The B200 has its own figure since (Zadouri et al.
    # 2026: 398.1 of 2,250 = 17.7%); the H100 PCIe still has none and must say it borrows the H100 SXM's
    from distlab import efficiency

    pcie = efficiency.compute_model("h100-pcie", attention="flash").describe()
    assert "33.9%" in pcie and "the H100's FlashAttention-2" in pcie and "borrowed" in pcie
    assert "no published flash-attention figure on h100-pcie" in pcie
    # a measured GPU says nothing of the kind, the B200 included
    for measured in ("h100-sxm", "b200"):
        assert "borrowed" not in efficiency.compute_model(measured, attention="flash").describe()
    assert "17.7%" in efficiency.compute_model("b200", attention="flash").describe()


def test_fp8_cast_price_against_a_fused_cast_measured_on_h200():
    """The step model prices an FP8 cast as MEMORY_TRAFFIC x FP8_CAST_BYTES[recipe] / HBM bandwidth per element (an
    assumption from the bytes each kernel must move). A fused cast-transpose measured on one H200
    (benchmarks/gpu_microbench.py --parts=casts; raw file below) checks it: the stored microbenchmark is re-derived
    from the raw file, then at the 33-117 M elements a layer's activation holds the measured time is within 0.9-1.15 x
    the model's price for both delayed (amax fused: 4 B) and current scaling (a separate amax read, then the cast:
    6 B). Worked: 8192 x 14336 elements, current: 1.4 x 6 x 117.44e6 / 4.8e12 = 205.5 us priced; measured
    77.80 + 130.30 = 208.1 us (1.013 x). Below ~10 M elements the kernel is launch-bound, which the model does not
    price (1024 x 8192: 2.5-3.0 x)."""
    raw = json.loads((Path(__file__).parents[2] / "benchmarks/results/h200-2026-11-30-casts.json").read_text())
    (bench,) = [m for m in validation.microbenchmarks("calibration") if m["kind"] == "fp8_cast"]
    stored = bench["measured"]
    hbm = 4.8e12  # the H200 datasheet's HBM3e 4.8 TB/s, as the catalog holds it
    assert hardware.accelerator("h200").memory_bandwidth == hbm
    for i, row in enumerate(raw["casts"]):
        assert (stored["m"][i], stored["n"][i]) == (row["m"], row["n"])
        for key in ("amax", "cast_transpose", "cast_transpose_amax"):
            assert stored[key + "_us"][i] == pytest.approx(1e6 * row[key + "_s"], abs=0.006)
        elements = row["m"] * row["n"]
        current = (row["amax_s"] + row["cast_transpose_s"]) * hbm / (1.4 * 6.0 * elements)
        delayed = row["cast_transpose_amax_s"] * hbm / (1.4 * 4.0 * elements)
        if elements >= 30e6:
            assert 0.9 < current < 1.15 and 0.9 < delayed < 1.15, (row["m"], row["n"], current, delayed)
        else:
            assert current > 2.0  # launch-bound: the model's price is a lower bound there
    assert (
        efficiency.MEMORY_TRAFFIC,
        elementwise.FP8_CAST_BYTES["current"],
        elementwise.FP8_CAST_BYTES["delayed"],
    ) == (
        1.4,
        6.0,
        4.0,
    )
