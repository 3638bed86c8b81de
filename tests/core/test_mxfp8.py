"""MXFP8 (Blackwell's block-scaled FP8, one E8M0 scale per 32 elements) as its own FP8 recipe (issue 30): its casts
priced from the bytes they move, its GEMMs at per-tensor FP8's rate x the ratio Transformer Engine's GEMM profiling
measured at the same shapes. Checked against the data file's microbenchmark, by hand, and in the compute model."""

from __future__ import annotations

import pytest

from distlab import efficiency, elementwise, validation


def test_the_mxfp8_gemm_rate_is_transformer_engines_measurement():
    """TE's pre-quantized per-layer GEMM times on a B300 (docs/examples/gemm_profiling): per-tensor current scaling
    2.158 + 2.329 + 2.325 = 6.812 ms, MXFP8 2.365 + 2.397 + 2.400 = 7.162 ms (printed 7.161); rate 6.812 / 7.161 =
    0.9513."""
    (bench,) = [m for m in validation.microbenchmarks("calibration") if m["kind"] == "fp8_gemm_rate"]
    fp8, mx = bench["measured"]["fp8_current_ms"], bench["measured"]["mxfp8_ms"]
    for times in (fp8, mx):
        assert times["fprop"] + times["dgrad"] + times["wgrad"] == pytest.approx(times["total"], abs=0.0015)
    assert elementwise.FP8_GEMM_RATE["mxfp8"] == fp8["total"] / mx["total"] == pytest.approx(0.9513, abs=5e-5)
    assert {k: v for k, v in elementwise.FP8_GEMM_RATE.items() if k != "mxfp8"} == dict.fromkeys(
        ("delayed", "current", "blockwise"), 1.0
    )


def test_the_mxfp8_cast_moves_its_two_copies_and_their_scales():
    # read the 16-bit element once (2 B), write a row-wise and a column-wise FP8 copy (1 B each), each with one 1 B
    # E8M0 scale per 32 elements (2 / 32 B): 4.0625 B, against per-tensor current scaling's 6 (an amax read first)
    assert elementwise.FP8_CAST_BYTES["mxfp8"] == 2 + 2 * (1 + 1 / 32) == 4.0625
    assert elementwise.FP8_CAST_BYTES["mxfp8"] < elementwise.FP8_CAST_BYTES["current"]


@pytest.mark.parametrize("gpu", ["b200", "gb200", "gb300"])
def test_mxfp8_slows_only_the_fp8_gemms(gpu):
    current = efficiency.compute_model(gpu, fp8_scaling="current")
    mx = efficiency.compute_model(gpu, fp8_scaling="mxfp8")
    rate = elementwise.FP8_GEMM_RATE["mxfp8"]
    assert mx.fp8_matmul_efficiency == pytest.approx(current.fp8_matmul_efficiency * rate, rel=1e-12)
    assert mx.fp8_best_gemm == pytest.approx(current.fp8_best_gemm * rate, rel=1e-12)
    assert (mx.matmul_efficiency, mx.attention_efficiency, mx.memory_traffic) == (
        current.matmul_efficiency,
        current.attention_efficiency,
        current.memory_traffic,
    )
    assert mx.fp8_cast_bytes == 4.0625 and current.fp8_cast_bytes == 6.0


def test_megatron_bridges_mxfp8_runs_map_the_mxfp8_recipe_and_their_twins_per_tensor():
    runs = {r["id"]: r for r in validation.load_runs("validation")}
    mx = [i for i in runs if i.startswith("mbridge-25.11-") and i.endswith("-mxfp8")]
    assert len(mx) == 4
    for run_id in mx:
        assert runs[run_id]["distlab"]["estimate"]["fp8_scaling"] == "mxfp8"
        twin = runs[run_id.replace("-mxfp8", "-fp8cs")]
        assert twin["distlab"]["estimate"]["fp8_scaling"] == "current"
