"""Attention that the kernel tables of distlab.attention_kernels do not cover: FP8 attention, and the layers that
attend to a sliding window only. Both are priced from one measurement, NVIDIA's cuDNN SDPA training harness
(NVIDIA/cudnn-frontend benchmark/sdpa_benchmark_training, cuDNN's fused attention, the kernel Transformer Engine
runs for Megatron-Core and Megatron Bridge), which times the same shape in BF16, FP8 (per-tensor scales) and MXFP8
back to back on one GPU. Lesson 7 §8.

FP8 attention (Megatron's --fp8-dot-product-attention, Megatron Bridge's fp8_dot_product_attention): the core's
forward and backward take FP8 Q, K, V. It is not "twice the FLOP/s": the softmax, the scaling and the amax stay in
higher precision, and the measured time over the BF16 time (FP8_ATTENTION_RATIOS) is 0.6-0.9 forward but about 1.0,
sometimes above, backward at head dim 128 (MXFP8's backward is slower than BF16's on Blackwell at 2k-8k tokens; on
Hopper the FP8 backward is 1.0-1.6 x BF16's). The step model multiplies the 16-bit kernel time of the full
(causal) layers by these ratios, by direction and sequence length: the ratio of the harness's shape (GQA at head dim
128, Llama 3.1's; MLA at head dim 192, DeepSeek-V3's) that is nearest the model's attention.

Sliding-window layers (gpt-oss: every other layer attends to the last 128 tokens): a window this narrow keeps
cuDNN's kernel far from its causal rate, 160-190 TFLOP/s of GB200's 2,500 in BF16, and with FP8 or MXFP8 the
backward does not skip the blocks outside the window, so it costs about what a full causal backward costs (3.7-4.5 x
the BF16 window's time at 4k tokens, 25-30 x at 32k). The step model prices a windowed layer's core, 4 b s W a d
forward (W keys per query, the model's count) and 2.5 x that backward, at the measured rates (WINDOW_RATES, shares of
the dense 16-bit peak), where the model's window is the measured one (128 tokens) and the kernel is cuDNN's;
elsewhere (no measurement) it keeps the causal kernel rate. Hopper: cuDNN's FP8 attention does not take
a window with attention sinks (the harness's H200 FP8 rows are infinite; Transformer Engine keeps such layers in
16-bit below sm100), so there the window stays 16-bit under FP8 attention.

GPUs: GB200 and GB300 were measured (cuDNN 9.22, April 2026); B200 takes GB200's ratios and shares of its own peak
(the same Blackwell dies, an assumption, as attention_kernels does); the H100 family (H100, H200, the 96 GB H100)
the H200's (cuDNN 9.19.1, GQA only, no window at 128). Other GPUs have no figure: FP8 attention is priced at 16-bit
(the compute model's note says so) and the window at the causal rate.
"""

from __future__ import annotations

import numpy as np

from .attention_kernels import FLASH_FORWARD_BACKWARD_WORK
from .errors import ConfigurationError

__all__ = [
    "HARNESS_SEQ_LENS",
    "HARNESS_TIMES_MS",
    "HARNESS_SHAPES",
    "MEASURED_WINDOW",
    "FP8_ATTENTION_RATIOS",
    "WINDOW_RATES",
    "attention_shape",
    "fp8_attention_column",
    "fp8_attention_table",
    "window_table",
    "window_share",
    "measured_attention",
]

#: The harness's sequence lengths (q_seqlen = kv_seqlen).
HARNESS_SEQ_LENS = (2048, 4096, 8192, 16384, 32768)
#: The window of the harness's gpt-oss rows (sliding_window_size), the one distlab has rates for.
MEASURED_WINDOW = 128
#: (batch, query heads, kv heads, head dim q/k, head dim v, window or 0) of each shape the harness ran. The window shape's 128 query heads of head dim 64 over 128 keys.
HARNESS_SHAPES = {
    "gqa": (2, 64, 8, 128, 128, 0),
    "mla": (2, 128, 128, 192, 128, 0),
    "window": (2, 128, 128, 64, 64, MEASURED_WINDOW),
    "h200-gqa": (1, 64, 8, 128, 128, 0),
}
#: Milliseconds (forward, backward) at HARNESS_SEQ_LENS, per GPU, shape and data type: the harness's rows with
#: backend cudnn, attn_mask top_left (causal), deterministic_bwd False. NVIDIA/cudnn-frontend at
#: 3929da2ef4c1dba1bb8acb68727b9134f26f40c0, benchmark/sdpa_benchmark_training/results/: llama3.1/gb200/
#: llama3.1_20260424_100750.csv, llama3.1/gb300/llama3.1_20260424_100757.csv, dsv3/gb200/dsv3_20260424_101009.csv,
#: dsv3/gb300/dsv3_20260424_101002.csv, gpt_oss/gb200/gpt_oss_20260424_100011.csv, gpt_oss/gb300/
#: gpt_oss_20260424_100022.csv (cudnn_backend_version 92200) and h200_919_only_cudnn/llama3.1_20260227_034703.csv
#: (91901). published_runs.json microbenchmarks "nvidia-cudnn-frontend-sdpa-fp8-window-cudnn922" and
#: "nvidia-cudnn-frontend-sdpa-fp8-h200-cudnn919".
HARNESS_TIMES_MS = {
    ("gb200", "gqa"): {
        "bf16": ((0.125, 0.391, 1.397, 5.150, 21.692), (0.389, 1.198, 4.127, 16.554, 71.756)),
        "fp8": ((0.097, 0.305, 1.074, 4.084, 16.012), (0.414, 1.167, 3.781, 13.476, 52.155)),
        "mxfp8": ((0.103, 0.326, 1.156, 4.400, 17.201), (0.461, 1.305, 4.272, 15.315, 61.716)),
    },
    ("gb300", "gqa"): {
        "bf16": ((0.100, 0.323, 1.185, 4.593, 18.014), (0.356, 1.101, 3.832, 14.593, 59.024)),
        "fp8": ((0.070, 0.217, 0.759, 2.880, 11.319), (0.364, 0.985, 3.087, 10.805, 41.328)),
        "mxfp8": ((0.079, 0.242, 0.856, 3.225, 12.632), (0.424, 1.203, 3.917, 14.072, 55.340)),
    },
    ("gb200", "mla"): {
        "bf16": ((0.321, 0.977, 3.470, 13.103, 50.456), (1.056, 3.383, 11.984, 50.424, 212.546)),
        "fp8": ((0.207, 0.656, 2.294, 8.845, 35.942), (0.681, 2.112, 7.296, 29.050, 123.181)),
        "mxfp8": ((0.224, 0.714, 2.478, 9.337, 37.773), (0.854, 2.620, 9.567, 36.835, 149.238)),
    },
    ("gb300", "mla"): {
        "bf16": ((0.268, 0.864, 3.013, 11.178, 44.189), (0.977, 3.127, 11.074, 43.911, 177.494)),
        "fp8": ((0.150, 0.493, 1.758, 6.653, 26.146), (0.591, 1.803, 6.188, 23.257, 95.057)),
        "mxfp8": ((0.166, 0.546, 1.944, 7.336, 29.731), (0.772, 2.348, 8.030, 31.002, 122.768)),
    },
    ("gb200", "window"): {
        "bf16": ((0.109, 0.210, 0.414, 0.822, 2.634), (0.237, 0.465, 0.911, 1.818, 3.692)),
        "fp8": ((0.101, 0.195, 0.385, 0.766, 1.529), (0.536, 1.731, 6.176, 23.231, 90.348)),
        "mxfp8": ((0.109, 0.210, 0.417, 0.826, 1.637), (0.642, 2.080, 7.427, 27.940, 108.370)),
    },
    ("gb300", "window"): {
        "bf16": ((0.104, 0.202, 0.397, 0.790, 2.530), (0.227, 0.442, 0.862, 1.712, 3.450)),
        "fp8": ((0.086, 0.167, 0.327, 0.650, 1.296), (0.467, 1.480, 5.189, 19.354, 74.763)),
        "mxfp8": ((0.092, 0.175, 0.342, 0.676, 1.345), (0.581, 1.871, 6.648, 24.996, 96.913)),
    },
    ("h200", "h200-gqa"): {
        "bf16": ((0.142, 0.465, 1.708, 6.531, 25.566), (0.464, 1.450, 5.083, 19.002, 75.688)),
        "fp8": ((0.098, 0.322, 1.141, 4.357, 16.884), (0.437, 1.459, 6.392, 29.422, 118.729)),
    },
}
#: The GPU whose measurement each catalog accelerator takes (module docstring).
_MEASURED_ON = {
    "gb200": "gb200",
    "gb300": "gb300",
    "b200": "gb200",
    "h100-sxm": "h200",
    "h200": "h200",
    "h100-sxm-96gb-hbm2e-500w": "h200",
}
#: The dense BF16 peak (TFLOP/s) of each measured GPU: rates are used as its share (hardware catalog).
_MEASURED_PEAK_TFLOPS = {"gb200": 2500.0, "gb300": 2500.0}


def _ratio(gpu: str, shape: str, column: str) -> tuple:
    """(sequence lengths, forward, backward) FP8 time over BF16 time of one measured shape."""
    times = HARNESS_TIMES_MS[(gpu, shape)]
    return HARNESS_SEQ_LENS, *(tuple(f / b for f, b in zip(times[column][i], times["bf16"][i])) for i in (0, 1))


#: FP8 attention's time over BF16's, (sequence lengths, forward, backward), per measured GPU, attention shape
#: ('gqa', 'mla') and FP8 column ('fp8' per-tensor scales, 'mxfp8'). Hopper has no MXFP8 and no MLA figure.
FP8_ATTENTION_RATIOS = {
    **{
        (gpu, shape, column): _ratio(gpu, shape, column)
        for gpu in ("gb200", "gb300")
        for shape in ("gqa", "mla")
        for column in ("fp8", "mxfp8")
    },
    ("h200", "gqa", "fp8"): _ratio("h200", "h200-gqa", "fp8"),
}


def _window_rates(gpu: str, column: str) -> tuple:
    """(sequence lengths, forward, backward) shares of the GPU's dense 16-bit peak of the windowed layers' core on the
    model's count: forward 4 b s W a d, backward FLASH_FORWARD_BACKWARD_WORK - 1 = 2.5 x that (what
    step.compute.attention_core_seconds divides by these rates), over the measured time."""
    b, heads, _, d, _, w = HARNESS_SHAPES["window"]
    peak = _MEASURED_PEAK_TFLOPS[gpu] * 1e12
    forward_ms, backward_ms = HARNESS_TIMES_MS[(gpu, "window")][column]
    flops = [4.0 * b * s * w * heads * d for s in HARNESS_SEQ_LENS]
    return (
        HARNESS_SEQ_LENS,
        tuple(f / (t * 1e-3) / peak for f, t in zip(flops, forward_ms)),
        tuple((FLASH_FORWARD_BACKWARD_WORK - 1.0) * f / (t * 1e-3) / peak for f, t in zip(flops, backward_ms)),
    )


#: The windowed layers' core rates (WINDOW_RATES[(gpu, column)]: sequence lengths, forward and backward shares of the
#: dense 16-bit peak, _window_rates) per measured Blackwell GPU and data type ('bf16', 'fp8', 'mxfp8').
WINDOW_RATES = {
    (gpu, column): _window_rates(gpu, column) for gpu in ("gb200", "gb300") for column in ("bf16", "fp8", "mxfp8")
}


def _gpu(accelerator) -> str:
    name = getattr(accelerator, "name", accelerator)
    if not isinstance(name, str):
        raise ConfigurationError(f"accelerator={accelerator!r} must be a catalog accelerator name or an Accelerator")
    return _MEASURED_ON.get(name.strip().lower(), "")  # "": no measurement


def fp8_attention_column(fp8_scaling) -> str:
    """The harness's column an FP8 recipe's attention runs in: 'mxfp8' for MXFP8, else 'fp8' (per-tensor scales:
    Transformer Engine's FP8 attention with delayed, current or blockwise GEMM recipes).

    >>> fp8_attention_column('mxfp8'), fp8_attention_column('current')
    ('mxfp8', 'fp8')
    """
    from .elementwise import fp8_scaling as fp8_scaling_name

    return "mxfp8" if fp8_scaling_name(fp8_scaling) == "mxfp8" else "fp8"


def attention_shape(model) -> str:
    """The harness shape nearest a model's attention: 'mla' for multi-head latent attention (DeepSeek), else 'gqa'."""
    moe = getattr(model, "moe", model)
    return "mla" if getattr(moe, "attention", "gqa") == "mla" else "gqa"


def fp8_attention_table(accelerator, fp8_scaling) -> tuple:
    """(tables, note) of FP8 attention on a catalog accelerator: tables = ((shape, (seq lens, forward ratio, backward
    ratio)), ...) for the shapes measured there in fp8_scaling's column (FP8_ATTENTION_RATIOS), () where none is;
    note says what is assumed or missing. Lesson 7 §8.

    GB200, MXFP8, GQA at 4k tokens: forward 0.326 / 0.391 ms, backward 1.305 / 1.198 ms.

    >>> tables, note = fp8_attention_table('gb200', 'mxfp8')
    >>> seqs, forward, backward = dict(tables)['gqa']
    >>> round(forward[1], 3), round(backward[1], 3), note
    (0.834, 1.089, '')
    >>> fp8_attention_table('a100-80gb', 'current')[1]
    'no published FP8 attention figure for a100-80gb: its attention core is priced at 16-bit'
    """
    gpu, column = _gpu(accelerator), fp8_attention_column(fp8_scaling)
    name = str(getattr(accelerator, "name", accelerator)).strip().lower()
    tables = tuple(
        (shape, FP8_ATTENTION_RATIOS[(gpu, shape, column)])
        for shape in ("gqa", "mla")
        if (gpu, shape, column) in FP8_ATTENTION_RATIOS
    )
    if not tables:
        return (), f"no published {column.upper()} attention figure for {name}: its attention core is priced at 16-bit"
    missing = [shape.upper() for shape in ("gqa", "mla") if shape not in dict(tables)]
    assumed = f"{name} takes {gpu}'s measured FP8 attention ratios" if gpu != name else ""
    gap = f"no {', '.join(missing)} figure: priced with GQA's" if missing else ""
    return tables, "; ".join(x for x in (assumed, gap) if x)


def window_table(accelerator, column) -> tuple | None:
    """The windowed layers' core on a catalog accelerator in column ('bf16', 'fp8', 'mxfp8'): (MEASURED_WINDOW, seq
    lens, forward shares, backward shares of the accelerator's dense 16-bit peak; B200 takes GB200's), or None where
    nothing was measured. Lesson 7 §8.

    GB200 in BF16 at 4k tokens: 4 x 2 x 4096 x 128 x 128 x 64 = 3.436e10 FLOPs in 0.210 ms, 163.6 TFLOP/s, 0.0654 of 2,500.

    >>> t = window_table('gb200', 'bf16')
    >>> t[0], round(t[2][1], 4)
    (128, 0.0654)
    """
    if column not in ("bf16", "fp8", "mxfp8"):
        raise ConfigurationError(f"column={column!r}; valid: bf16, fp8, mxfp8")
    key = (_gpu(accelerator), column)
    return (MEASURED_WINDOW, *WINDOW_RATES[key]) if key in WINDOW_RATES else None


def window_share(model, seq_len):
    """The share of a model's attention-core FLOPs in its layers that attend to a window of MEASURED_WINDOW tokens:
    Lw min(s, W) / ((L - Lw) s + Lw min(s, W)) for Lw windowed of L layers; 0 for a model without such layers (or with
    another window). model: a TransformerModel, an MoEModel or the step model's view of one (moe.step.MoEStepModel).
    gpt-oss-120b at 4,096 tokens: 18 x 128 / (18 x 4096 + 18 x 128) = 0.0303.

    >>> from distlab import models, moe
    >>> round(float(window_share(moe.model('gpt-oss-120b'), 4096)), 4), float(window_share(models.model('llama3.1-8b'), 4096))
    (0.0303, 0.0)
    """
    moe = getattr(model, "moe", model)
    windowed, window = getattr(moe, "window_layers", 0), getattr(moe, "sliding_window", 0)
    s = np.asarray(seq_len, dtype=float)
    if not windowed or window != MEASURED_WINDOW:
        return np.zeros_like(s)
    keys = windowed * np.minimum(s, float(window))
    return keys / ((moe.layers - windowed) * s + keys)


def measured_attention(accelerator, kernel, fp8_scaling, fp8_attention) -> tuple:
    """(FP8 attention tables, window table, note) of efficiency.compute_model for a flash kernel (None: unfused): FP8
    attention needs cuDNN's kernel (Transformer Engine's FP8 attention; our error otherwise); the window rates are
    cuDNN's, in the precision the core runs (16-bit where no FP8 window was measured). Lesson 7 §8."""
    from ._arguments import flag

    if flag(fp8_attention, "fp8_attention") and kernel != "cudnn":
        raise ConfigurationError(
            f"fp8_attention=True runs cuDNN's FP8 attention (Transformer Engine); attention_kernel={kernel!r} has "
            "none (valid: attention='flash' with attention_kernel='cudnn', or fp8_attention=False)"
        )
    if kernel != "cudnn":
        return (), None, ""
    tables: tuple = ()
    note, column = "", "bf16"
    if fp8_attention:
        tables, note = fp8_attention_table(accelerator, fp8_scaling)
        column = fp8_attention_column(fp8_scaling) if tables else "bf16"
    window = window_table(accelerator, column)
    if window is None and column != "bf16":  # Hopper: no FP8 window with sinks; the window stays 16-bit
        window = window_table(accelerator, "bf16")
    return tables, window, note
