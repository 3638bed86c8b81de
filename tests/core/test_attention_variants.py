"""FP8 attention and sliding-window layers priced from cuDNN's measured times (distlab.attention_variants), through
estimate(), plan() and the CLI. Issue 30."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distlab import attention_variants as av
from distlab import moe, models, planner, training, validation
from distlab.attention_kernels import kernel_rates
from distlab.errors import ConfigurationError

#: gpt-oss-120b's run on 64 GB200s (Megatron Bridge 26.06, published_runs.json): EP 64, 4 sequences of 4,096 tokens
#: per microbatch, 5 microbatches, MXFP8.
GPT_OSS = dict(
    global_batch=1280,
    seq_len=4096,
    micro_batch_size=4,
    zero=1,
    ep=64,
    precision="fp8",
    fp8_scaling="mxfp8",
    memory_recipe="megatron-distributed-optimizer-bf16-grads",
    expert_gemm="grouped",
)


def _bench(name):
    (bench,) = [m for m in validation.microbenchmarks("calibration") if m["id"] == name]
    return bench["measured"]


def test_the_harness_times_are_the_microbenchmarks_as_published():
    """The module's times are the published_runs.json entries (transcribed from the harness's CSVs), and the quoted
    rows in each entry's quote are among them."""
    blackwell = _bench("nvidia-cudnn-frontend-sdpa-fp8-window-cudnn922")
    assert tuple(blackwell["seq_len"]) == av.HARNESS_SEQ_LENS
    for (gpu, shape), columns in av.HARNESS_TIMES_MS.items():
        if gpu == "h200":
            continue
        for column, (forward, backward) in columns.items():
            assert tuple(blackwell[f"{gpu}_{shape}"][f"{column}_forward_ms"]) == forward
            assert tuple(blackwell[f"{gpu}_{shape}"][f"{column}_backward_ms"]) == backward
    hopper = _bench("nvidia-cudnn-frontend-sdpa-fp8-h200-cudnn919")
    for column in ("bf16", "fp8"):
        forward, backward = av.HARNESS_TIMES_MS[("h200", "h200-gqa")][column]
        assert (tuple(hopper[f"{column}_forward_ms"]), tuple(hopper[f"{column}_backward_ms"])) == (forward, backward)
    # the entry's quote: GB200 gpt_oss at 4096, backward 0.465 / 1.731 / 2.080 ms
    window = av.HARNESS_TIMES_MS[("gb200", "window")]
    assert [window[c][1][1] for c in ("bf16", "fp8", "mxfp8")] == [0.465, 1.731, 2.080]


def test_fp8_ratios_by_hand():
    """Time ratios at 4k tokens, from the CSV rows: GB200 GQA MXFP8 forward 0.326 / 0.391 = 0.8338, backward 1.305 /
    1.198 = 1.0893; GB300 MLA FP8 forward 0.493 / 0.864 = 0.5706, backward 1.803 / 3.127 = 0.5766; H200 GQA FP8 at
    16k backward 29.422 / 19.002 = 1.5484 (Hopper's FP8 backward is slower than its BF16 one)."""
    _, forward, backward = av.FP8_ATTENTION_RATIOS[("gb200", "gqa", "mxfp8")]
    assert forward[1] == pytest.approx(0.8338, abs=1e-4) and backward[1] == pytest.approx(1.0893, abs=1e-4)
    _, forward, backward = av.FP8_ATTENTION_RATIOS[("gb300", "mla", "fp8")]
    assert forward[1] == pytest.approx(0.5706, abs=1e-4) and backward[1] == pytest.approx(0.5766, abs=1e-4)
    assert av.FP8_ATTENTION_RATIOS[("h200", "gqa", "fp8")][2][3] == pytest.approx(1.5484, abs=1e-4)


def test_window_rates_by_hand():
    """GB300, MXFP8, 8k tokens: forward 4 x 2 x 8192 x 128 x 128 x 64 = 6.872e10 FLOPs in 0.342 ms = 200.9 TFLOP/s,
    0.08037 of 2,500; backward 2.5 x that in 6.648 ms = 25.84 TFLOP/s, 0.010337."""
    seqs, forward, backward = av.WINDOW_RATES[("gb300", "mxfp8")]
    assert seqs[2] == 8192
    assert forward[2] == pytest.approx(6.8719e10 / 0.342e-3 / 2.5e15, rel=1e-4)
    assert forward[2] == pytest.approx(0.08037, abs=1e-5) and backward[2] == pytest.approx(0.010337, abs=1e-6)


def test_window_share_by_hand():
    """gpt-oss-120b: 36 layers, every other one (18) over a 128-token window. At 4,096 tokens 18 x 128 / (18 x 4096 +
    18 x 128) = 128 / 4224 = 0.030303; at 128 tokens or fewer the window is the whole sequence: 18 x 64 / (36 x 64)
    = 0.5 at 64. A dense model has none."""
    gpt_oss = moe.model("gpt-oss-120b")
    assert float(av.window_share(gpt_oss, 4096)) == pytest.approx(128 / 4224)
    assert float(av.window_share(gpt_oss, 64)) == pytest.approx(0.5)
    assert float(av.window_share(models.model("llama3.1-70b"), 4096)) == 0.0


def _compute(fp8_attention, gpu="gb200", **kw):
    cluster = dict(nodes=16, fabric="ib-xdr") if gpu in ("gb200", "gb300") else dict(nodes=8, fabric="ib-ndr")
    node = {"gb200": "gb200-nvl72", "gb300": "gb300-nvl72", "h100": "dgx-h100"}[gpu]
    args = {**GPT_OSS, **kw}
    return training.estimate("gpt-oss-120b", node, **cluster, **args, fp8_attention=fp8_attention)


def test_fp8_attention_moves_gpt_oss_on_gb200_by_the_hand_derived_time():
    """The step's compute with FP8 attention less without it, gpt-oss-120b on GB200, MXFP8, per microbatch (b 4,
    s 4096, 64 query heads of 64, no recompute; everything else is the same in both):
    - 18 full causal layers: counted forward 4 b s^2 a d = 1.0995e12, half executed 5.4976e11 at cuDNN's GB200 forward
      share at 4k (1076 / 2250 of 2,500 TFLOP/s = 1195.6): 0.45983 ms, backward 2.5 x half at 893 / 2250 (992.2):
      1.38519 ms; FP8 multiplies them by 0.326 / 0.391 and 1.305 / 1.198
    - 18 layers of the 128-token window: counted forward 4 b s W a d = 3.436e10 (the harness's shape: b a = 4 x 64 =
      2 x 128), so the model's time is the harness's: 0.210 + 0.465 ms in BF16, 0.210 + 2.080 ms in MXFP8: +1.615 ms.
    5 microbatches."""
    full_fwd = 0.5 * 4 * 4 * 4096**2 * 64 * 64 / (1076 / 2250 * 2.5e15)
    full_bwd = 2.5 * 0.5 * 4 * 4 * 4096**2 * 64 * 64 / (893 / 2250 * 2.5e15)
    full = full_fwd * (0.326 / 0.391 - 1) + full_bwd * (1.305 / 1.198 - 1)
    window = (0.210 + 2.080 - 0.210 - 0.465) * 1e-3
    expected = 5 * 18 * (full + window)
    assert full_fwd == pytest.approx(0.45983e-3, rel=1e-4) and full_bwd == pytest.approx(1.38519e-3, rel=1e-4)
    with_fp8, without = _compute(True), _compute(False)
    assert with_fp8.compute_s - without.compute_s == pytest.approx(expected, rel=1e-6)
    assert with_fp8.config["fp8_attention"] is True and "fp8_attention" not in without.config


def test_the_window_in_bf16_is_priced_at_its_measured_rate():
    """gpt-oss-120b on GB200 without FP8 attention: the 18 windowed layers cost 0.210 + 0.465 ms each per microbatch
    (the harness's BF16 times at the same b a and s), the 18 full ones 0.45983 + 1.38519 ms (above). With the
    'fa4' kernel, which has no window figure, the windowed layers instead run at fa4's causal rate on half their
    counted core. The difference of the two estimates' compute is then the sum of these by hand."""
    b, s, a, d, w = 4, 4096, 64, 64, 128
    full_cudnn = 0.5 * 4 * b * s**2 * a * d * (1 / (1076 / 2250 * 2.5e15) + 2.5 / (893 / 2250 * 2.5e15))
    window_cudnn = (0.210 + 0.465) * 1e-3
    # fa4 at 4k on B200 shares: forward 1279 / 2250, backward 1102 / 2250 (Zadouri et al. 2026), on GB200's peak
    fa4 = 1 / (1279 / 2250 * 2.5e15) + 2.5 / (1102 / 2250 * 2.5e15)
    full_fa4, window_fa4 = 0.5 * 4 * b * s**2 * a * d * fa4, 0.5 * 4 * b * s * w * a * d * fa4
    expected = 5 * 18 * ((full_cudnn + window_cudnn) - (full_fa4 + window_fa4))
    cudnn = _compute(False, precision="mixed", fp8_scaling="delayed")
    fa4_estimate = _compute(False, precision="mixed", fp8_scaling="delayed", attention_kernel="fa4")
    assert cudnn.compute_s - fa4_estimate.compute_s == pytest.approx(expected, rel=1e-6)


def test_hopper_keeps_the_window_in_16_bit_and_fp8_attention_applies_to_full_layers_only():
    """On H100 no window was measured (the harness's FP8 window rows are infinite there): the windowed layers keep
    the causal rate, as before, and FP8 attention multiplies the whole core (every layer priced as causal, at the
    model's mean keys per query) by the H200's FP8 / BF16 time at 4k: forward 0.322 / 0.465, backward 1.459 / 1.450."""
    with_fp8 = _compute(True, gpu="h100", fp8_scaling="current")
    without = _compute(False, gpu="h100", fp8_scaling="current")
    keys = (18 * 4096 + 18 * 128) / 36  # the model's mean keys per query (moe.step.step_model)
    half = 0.5 * 4 * 4 * 4096 * keys * 64 * 64
    # cuDNN on H100 at 4k (Shah et al. 2024): forward 518 TFLOP/s causal; backward 499 x the causal / non-causal
    # ratio distlab measured on an H200, 486.7 / 568.3
    fwd, bwd = half / 518e12, 2.5 * half / (499e12 * 486.7 / 568.3)
    ratio_fwd, ratio_bwd = 0.322 / 0.465, 1.459 / 1.450
    assert ratio_bwd > 1  # Hopper's FP8 backward is no faster
    expected = 5 * 36 * (fwd * (ratio_fwd - 1) + bwd * (ratio_bwd - 1))
    assert with_fp8.compute_s - without.compute_s == pytest.approx(expected, rel=2e-3)


def test_fp8_attention_is_refused_outside_an_fp8_recipe_and_without_cudnn():
    with pytest.raises(ConfigurationError, match="fp8_attention=True needs precision='fp8'"):
        _compute(True, precision="mixed", fp8_scaling="delayed")
    with pytest.raises(ConfigurationError, match="attention_kernel='fa4' has none"):
        _compute(True, attention_kernel="fa4")
    with pytest.raises(ConfigurationError, match="fp8_attention"):
        _compute("yes")
    with pytest.raises(ConfigurationError, match="fp8_attention=True needs precision='fp8'"):
        planner.plan("llama3.1-8b", "dgx-h100", nodes=1, global_batch=8, fabric="ib-ndr", fp8_attention=True)


def test_a_gpu_without_a_figure_says_so():
    tables, note = av.fp8_attention_table("mi300x", "current")
    assert (
        tables == () and note == "no published FP8 attention figure for mi300x: its attention core is priced at 16-bit"
    )
    tables, note = av.fp8_attention_table("b200", "mxfp8")
    assert dict(tables)["gqa"] == av.FP8_ATTENTION_RATIOS[("gb200", "gqa", "mxfp8")] and "gb200" in note
    assert av.window_table("h100-sxm", "bf16") is None


@settings(max_examples=60, deadline=None)
@given(st.floats(min_value=1.0, max_value=2.0**20, allow_nan=False))
def test_ratios_read_at_any_length_stay_within_the_measured_ones(seq_len):
    """Linear in log2 s between the measured lengths, the end values beyond them: never outside the table."""
    for table in av.FP8_ATTENTION_RATIOS.values():
        forward, backward = kernel_rates(table, seq_len)
        assert min(table[1]) <= float(forward) <= max(table[1]) and min(table[2]) <= float(backward) <= max(table[2])


def test_the_plan_prices_fp8_attention_as_estimate_does():
    """plan() and estimate() share the step model: the row of the plan with estimate's layout has its step time."""
    kw = dict(nodes=1, fabric="ib-ndr", global_batch=16, seq_len=8192, precision="fp8", memory_recipe="megatron")
    p = planner.plan("llama3.1-8b", "dgx-h100", **kw, fp8_attention=True, fp8_scaling="current")
    assert p.extra["fp8_attention"] is True
    row = p.row(0)  # the fastest that fits
    layout = {k: row[k] for k in ("dp", "tp", "pp", "cp", "chunks", "zero", "micro_batch_size", "recompute")}
    layout.update(schedule=row["schedule"], sequence_parallel=row["sequence_parallel"])
    est = training.estimate("llama3.1-8b", "dgx-h100", **kw, **layout, fp8_attention=True, fp8_scaling="current")
    assert row["fits"] and est.step_time_s == pytest.approx(row["step_time_s"], rel=1e-9)


def test_the_cli_prices_fp8_attention():
    argv = ["estimate", "--model", "llama3.1-8b", "--node", "dgx-h100", "--gpus", "8", "--global-batch", "8"]
    argv += ["--precision", "fp8", "--memory-recipe", "megatron", "--seq-len", "8192", "--json"]
    run = [sys.executable, "-m", "distlab"]
    on = subprocess.run(run + argv + ["--fp8-attention"], capture_output=True, text=True, timeout=120)
    off = subprocess.run(run + argv, capture_output=True, text=True, timeout=120)
    assert on.returncode == 0 and off.returncode == 0, on.stderr + off.stderr
    on_json, off_json = json.loads(on.stdout), json.loads(off.stdout)
    assert on_json["fp8_attention"] is True and "fp8_attention" not in off_json
    assert on_json["step_time_s"] != off_json["step_time_s"]
    bf16 = [a if a != "fp8" else "bf16" for a in argv]
    bad = subprocess.run(run + bf16 + ["--fp8-attention"], capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "precision='fp8'" in bad.stderr and "Traceback" not in bad.stderr
