"""distlab.efficiency's GEMM shape model: tile and wave quantisation over the SMs, and the roofline (NVIDIA, Matrix
Multiplication Background User's Guide), checked by hand, against XLA's published H100 GEMM measurements (an
independent source, not used to build the model), for its bounds, and in the step model."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distlab import efficiency, hardware, models, training
from distlab.efficiency import gemm_efficiency, gemm_shape_factor_array, layer_gemm_slowdown_array
from distlab.errors import ConfigurationError

H100_RIDGE = 794.5e12 / 3.35e12  # the best-shape GEMM rate (MAMF) over HBM bandwidth: 237.2 FLOP/B
A100_RIDGE = 271.2e12 / 2.039e12  # 133.0 FLOP/B (A100 80 GB)


def test_wave_quantisation_by_hand():
    # A100, 108 SMs (the guide's example GPU). 1728 x 1536 (k 4096): 256 x 128 tiles: 6.75 -> 7 x 12 = 84 tiles, one
    # wave, 1728 x 1536 / (108 x 32,768) = 0.750; turned (128 x 256): 13.5 -> 14 x 6 = 84, the same; 128 x 128:
    # 14 x 12 = 168 tiles = 2 waves, 2,654,208 / (2 x 108 x 16,384) = 0.75 x 0.75 reuse = 0.5625; 128 x 64:
    # 14 x 24 = 336 = 4 waves (432 slots), 2,654,208 / (4 x 108 x 8192) = 0.75, x 0.5 = 0.375. Best: 0.750
    assert gemm_shape_factor_array(1728, 1536, 4096, 108, A100_RIDGE) == pytest.approx(0.75, rel=1e-12)
    # one more tile than a wave: 256 x 128 tiles, 1 x 109 -> (256, 13,952): 109 tiles = 2 waves of 108, 109 / 216 =
    # 0.5046; 128 x 128: 2 x 109 = 218 = 3 waves, 218 / 324 x 0.75 = 0.5046; 128 x 64: 2 x 218 = 436 = 5 waves,
    # 436 / 540 x 0.5 = 0.4037; turned 256-column tiles: 2 x 54.5 -> 55 = 110 tiles = 2 waves, 256 x 13,952 / (2 x 108
    # x 32,768) = 0.5046. Best 109 / 216
    assert gemm_shape_factor_array(256, 109 * 128, 8192, 108, A100_RIDGE) == pytest.approx(109 / 216, rel=1e-12)
    # exactly one wave of full tiles: 108 tiles of 256 x 128 (3 x 36: 768 x 4608) -> 1
    assert gemm_shape_factor_array(768, 4608, 8192, 108, A100_RIDGE) == pytest.approx(1.0, rel=1e-12)
    # H100, 132 SMs: 4096^2 = 512 tiles of 256 x 128 = 4 waves (528 slots): 512 / 528 = 32 / 33
    assert gemm_shape_factor_array(4096, 4096, 4096, 132, H100_RIDGE) == pytest.approx(32 / 33, rel=1e-12)


def test_roofline_by_hand():
    # 8192 x 8192 x 64 on H100 (k 64: an outer product): intensity m n k / (m k + k n + m n) = 4.295e9 / (2 x 524,288
    # + 67,108,864) = 63.02 FLOP/B < the ridge 237.2: memory-bound, 63.02 / 237.2 = 0.2657 of the best rate (the wave
    # factor, 2048 tiles in 16 waves of 132 = 0.970, does not bind)
    intensity = 8192 * 8192 * 64 / (2 * 8192 * 64 + 8192 * 8192)
    assert gemm_shape_factor_array(8192, 8192, 64, 132, H100_RIDGE) == pytest.approx(intensity / H100_RIDGE)
    assert round(intensity / H100_RIDGE, 4) == 0.2657
    # a GEMV (n 1): intensity m k / (m k + k + m) ~ 1 FLOP/B: about 1 / 237 of the best rate
    assert gemm_shape_factor_array(8192, 1, 8192, 132, H100_RIDGE) < 1 / 200
    # no SM count (an accelerator the catalog has no figure for): the roofline alone, capped at 1
    assert gemm_shape_factor_array(8192, 8192, 8192, None, H100_RIDGE) == 1.0
    assert gemm_shape_factor_array(8192, 8192, 64, None, H100_RIDGE) == pytest.approx(intensity / H100_RIDGE)
    # a thin output, 100 x 13,200 (k 8192): its intensity is below m n / (m + n) = 99.2 FLOP/B whatever k, so it is
    # memory-bound (100 x 13,200 x 8192 / (819,200 + 108,134,400 + 1,320,000) = 98.07 / 237.2 = 0.4135) before its tile
    # quantisation would bind (128 x 128 tiles: 104 of them, one wave: 1,320,000 / (132 x 16,384) x 0.75 = 0.458)
    thin = 100 * 13_200 * 8192 / (100 * 8192 + 8192 * 13_200 + 100 * 13_200)
    assert gemm_shape_factor_array(100, 13_200, 8192, 132, H100_RIDGE) == pytest.approx(thin / H100_RIDGE)
    assert round(thin / H100_RIDGE, 4) == 0.4135


# XLA's published bf16 GEMM measurements on H100 (sm_90): tensorflow/tensorflow
# third_party/xla/xla/service/gpu/model/matmul_interpolator_data.h, kDefaultMatmulPTable, entries with b 1 (m, n, k,
# bf16xbf16->bf16 FLOP/s, rounded to 0.1 TFLOP/s). Read to check the model, not used to build it. The shapes span
# what a training step's GEMMs look like after tensor parallelism (every side >= 512, the reduction >= 1024).
XLA_H100_BF16 = [
    (4096, 4096, 4096, 783.3),
    (4096, 2048, 4096, 758.4),
    (4096, 4096, 2048, 738.7),
    (2048, 4096, 2048, 715.4),
    (1024, 4096, 4096, 738.5),
    (4096, 1024, 4096, 738.5),
    (4096, 4096, 1024, 677.4),
    (2048, 2048, 2048, 632.0),
    (2048, 1024, 4096, 653.1),
    (1024, 2048, 4096, 653.5),
    (4096, 512, 4096, 650.0),
    (512, 4096, 4096, 644.1),
    (2048, 1024, 2048, 523.3),
    (1024, 1024, 4096, 470.1),
    (1024, 1024, 2048, 350.0),
]


def test_the_shape_factor_against_xla_measurements():
    """The model's share of the best-shape rate against XLA's measured rate over the MAMF best shape (794.5 TFLOP/s):
    within 25% at every point and 10% on average. The model has no dependence on k beyond the roofline, while the
    measurements do (1024 x 1024 at k 4096 is 0.59, at k 2048 0.44: the tile's pipeline fill is amortised over a
    longer reduction), which is most of the spread."""
    errors = []
    for m, n, k, tflops in XLA_H100_BF16:
        measured = tflops / 794.5
        model = float(gemm_shape_factor_array(m, n, k, 132, H100_RIDGE))
        errors.append(model / measured - 1.0)
        assert abs(model / measured - 1.0) <= 0.25, (m, n, k, model, measured)
    assert np.mean(np.abs(errors)) <= 0.10
    # the ordering of the extremes: the largest shape is the fastest measured and modelled, 1024^2 x 2048 the slowest
    assert gemm_efficiency("h100-sxm", 4096, 4096, 4096) > gemm_efficiency("h100-sxm", 1024, 1024, 2048)


def test_short_reductions_are_optimistic():
    """Where k <= 512 the model is an upper bound (XLA, same file: 4096 x 4096 x 256 at 392.2 TFLOP/s, 0.49 of the
    best; 4096 x 1024 x 512 at 343.7, 0.43; 1024 x 2048 x 256 at 139.5, 0.18): a short reduction does not amortise the
    tile's prologue and epilogue, which the model leaves out. Training GEMMs reduce over the hidden size, the ffn / tp
    or the tokens, rarely below 1024."""
    for m, n, k, tflops in ((4096, 4096, 256, 392.2), (4096, 1024, 512, 343.7), (1024, 2048, 256, 139.5)):
        assert float(gemm_shape_factor_array(m, n, k, 132, H100_RIDGE)) > tflops / 794.5


def test_gemm_efficiency_is_the_best_rate_times_the_shape_factor():
    best = efficiency.best_gemm_efficiency("a100-80gb")
    ridge = best * 312e12 / 2.039e12
    want = best * float(gemm_shape_factor_array(2048, 2048, 4096, 108, ridge))
    assert gemm_efficiency("a100-80gb", 2048, 2048, 4096) == pytest.approx(want)
    assert round(want / best, 3) == 0.593  # the docstring's example
    # an Accelerator works as its name does; one without an SM count gets the roofline alone
    acc = hardware.accelerator("h100-sxm")
    assert gemm_efficiency(acc, 8192, 8192, 8192) == gemm_efficiency("h100-sxm", 8192, 8192, 8192)
    # no SM count for the MI300X in the catalog: its measured best share, the roofline alone binding nothing at 8192^3
    assert gemm_efficiency("mi300x", 8192, 8192, 8192) == efficiency.best_gemm_efficiency("mi300x")


@settings(max_examples=60, deadline=None)
@given(
    m=st.integers(1, 1 << 16),
    n=st.integers(1, 1 << 16),
    k=st.integers(1, 1 << 16),
    sms=st.sampled_from([None, 108, 132, 148]),
    grow=st.integers(1, 8),
)
def test_bounds_and_monotone_in_the_reduction(m, n, k, sms, grow):
    f = float(gemm_shape_factor_array(m, n, k, sms, H100_RIDGE))
    assert 0.0 < f <= 1.0
    # a longer reduction only raises the intensity; the tiles do not change
    assert float(gemm_shape_factor_array(m, n, k * grow, sms, H100_RIDGE)) >= f - 1e-12
    # whole waves: m x (a wave of full tiles) fills every SM once the tiles are 256 x 128
    if sms is not None:
        full = float(gemm_shape_factor_array(256 * grow, 128 * sms, 8192, sms, H100_RIDGE))
        assert full == pytest.approx(1.0)


@settings(max_examples=40, deadline=None)
@given(tp=st.sampled_from([1, 2, 4, 8]), tokens=st.sampled_from([1024, 2048, 4096, 8192, 16384]))
def test_splitting_never_helps_a_layer(tp, tokens):
    """Tensor parallelism splits n or k of every layer GEMM: the slowdown only grows (or stays) as tp does, and fewer
    tokens per microbatch never make a layer's GEMMs faster per FLOP (up to wave quantisation's steps, which are
    smaller than the tile count change here; checked over the doubling grid)."""
    model = models.model("llama3.1-70b")
    one, _ = layer_gemm_slowdown_array(model, tokens, tp, 132, H100_RIDGE)
    more, _ = layer_gemm_slowdown_array(model, tokens, 2 * tp, 132, H100_RIDGE)
    assert 1.0 <= float(one) <= float(more) + 1e-12


def test_layer_slowdown_by_hand():
    # Llama 2 7B (h 4096, q = kv 4096, f 11,008, gated), 4096 tokens, tp 1, H100 (132 SMs). Every side is a multiple
    # of 256 except 11,008 = 86 x 128 = 43 x 256; with 256 x 128 tiles (either way round) an m x n output is m n / 32,768
    # tiles: 4096 x 4096 -> 512 = 4 waves of 132: 512 / 528, 1 / f = 33 / 32; 4096 x 11,008 -> 1376 = 11 waves:
    # 1 / f = 1452 / 1376; 4096 x 22,016 -> 2752 = 21 waves: 2772 / 2752; 4096 x 12,288 -> 1536 = 12 waves: 1584 /
    # 1536 = 33 / 32 (smaller tiles do worse on these: 128 x 128 at most 0.75). The roofline does not bind (every
    # intensity > 1000 FLOP/B). Passes: forward m x n, input gradient m x k, weight gradient k x n:
    #   QKV (12,288 x 4096 weights): 33/32 in all three; attention output (4096 x 4096): 33/32
    #   MLP up (22,016 x 4096): fwd 2772/2752, dgrad 4096 x 4096 33/32, wgrad 4096 x 22,016 2772/2752
    #   MLP down (4096 x 11,008): fwd 4096 x 4096 33/32, dgrad 4096 x 11,008 1452/1376, wgrad 11,008 x 4096 1452/1376
    # weighted by FLOPs (in units of 4096^2: 3, 1, 5.375, 2.6875; 12.0625 in all)
    up = (2 * 2772 / 2752 + 33 / 32) / 3
    down = (33 / 32 + 2 * 1452 / 1376) / 3
    layer = (3 * 33 / 32 + 33 / 32 + 5.375 * up + 2.6875 * down) / 12.0625
    # logits 4096 x 32,000: 4000 tiles = 31 waves (4092 slots), dgrad 4096 x 4096, wgrad 4096 x 32,000
    logits = (2 * 4092 / 4000 + 33 / 32) / 3
    got = layer_gemm_slowdown_array(models.model("llama2-7b"), 4096, 1, 132, H100_RIDGE)
    assert float(got[0]) == pytest.approx(layer, rel=1e-12) and round(layer, 4) == 1.0277
    assert float(got[1]) == pytest.approx(logits, rel=1e-12) and logits == pytest.approx(1.02575)


def test_moe_experts_run_on_their_own_tokens():
    """Mixtral 8x7B (8 experts, top 2): with ep 1 each expert sees T x 2 / 8 of the microbatch's tokens, with ep 8 the
    8 GPUs' tokens, T x 2 x 8 / 8: the small per-expert GEMMs are slower per FLOP."""
    from distlab.moe import step as moe_step

    view = moe_step.step_model("mixtral-8x7b", 4096)
    alone, _ = layer_gemm_slowdown_array(view, 1024, 1, 132, H100_RIDGE, ep=1)
    spread, _ = layer_gemm_slowdown_array(view, 1024, 1, 132, H100_RIDGE, ep=8)
    assert float(alone) > float(spread) >= 1.0


def test_the_step_model_prices_gemms_by_shape():
    """The calibrated estimate slows its matmuls by their shapes; the fixed model of Lesson 7 §1 does not."""
    cl = hardware.cluster("dgx-h100", 1, "ib-ndr")
    kw = dict(global_batch=8, seq_len=4096, attention="unfused")
    est = training.estimate("llama2-7b", cl, **kw)
    assert est.compute_model.gemm_sms == 132
    fixed = training.estimate("llama2-7b", cl, efficiency=0.5, **kw)
    assert fixed.compute_model.gemm_sms is None
    assert fixed.compute_s == pytest.approx(fixed.hardware_flops / 8 / (0.5 * 989.4e12))
    # more tensor parallelism, smaller GEMMs: the compute per GPU x tp rises by more than the flops alone
    t1 = training.estimate("llama2-7b", cl, tp=1, **kw).compute_s
    t8 = training.estimate("llama2-7b", cl, tp=8, **kw).compute_s
    assert t8 * 8 > t1 * 1.0  # dp 8 x 1 sequence vs dp 1 x 8 sequences: same tokens per GPU-second, slower GEMMs


@pytest.mark.parametrize(
    "args, match",
    [
        (("h100-sxm", 0, 8, 8), "m=0"),
        (("h100-sxm", 8, float("nan"), 8), "n=nan"),
        (("h100-sxm", 8, 8, 1e12), "k=1000000000000.0; valid: 1 to 1e9"),
        (("h100-sxm", "8", 8, 8), "m='8'"),
        ((3, 8, 8, 8), "accelerator=3"),
        (("no-such-gpu", 8, 8, 8), "no-such-gpu"),
    ],
)
def test_bad_inputs_are_our_errors(args, match):
    with pytest.raises(ConfigurationError, match=match):
        gemm_efficiency(*args)


def test_bad_array_inputs_are_our_errors():
    with pytest.raises(ConfigurationError, match="m="):
        gemm_shape_factor_array(-1, 8, 8, 132, 237.0)
    with pytest.raises(ConfigurationError, match="sms="):
        gemm_shape_factor_array(8, 8, 8, -5, 237.0)
    with pytest.raises(ConfigurationError, match="ridge="):
        gemm_shape_factor_array(8, 8, 8, 132, float("inf"))
    with pytest.raises(ConfigurationError, match="model="):
        layer_gemm_slowdown_array("llama2-7b", 4096, 1, 132, 237.0)
    with pytest.raises(ConfigurationError, match="tokens="):
        layer_gemm_slowdown_array(models.model("llama2-7b"), 0, 1, 132, 237.0)
