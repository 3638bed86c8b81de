"""What the step model assumes a GPU achieves: the calibrated compute model of training.estimate().

A layer's time on one GPU is priced as three parts (Lesson 7 §8):

    t = matmul FLOPs / (peak x matmul_efficiency)              the weight matmuls and the logits
      + attention-core FLOPs / (peak x attention_efficiency)   QK^T and AV (4 s a d_head per token forward)
      + memory_traffic x element-wise bytes x passes / HBM bandwidth  the element-wise work (norms,
                                                                 activations, dropout, RoPE, softmax without
                                                                 flash attention, the loss), memory-bound

and the compute that runs beside communication it hides is OVERLAP_SLOWDOWN (18.9%, Lee et al. 2025) slower: the
step model adds that share of the hidden communication as "overlap slowdown" (training.step_model_array).

matmul_efficiency = TRAINING_MATMUL_SHARE x the best-shape GEMM rate measured on that GPU (Bekman's MAMF
microbenchmark, hardware microbenchmarks in distlab/data/published_runs.json), and each weight GEMM (QKV, attention
output, the MLP's, the logits; MoE experts on their own tokens) runs at that x its shape factor
(gemm_shape_factor_array: tile and wave quantisation of its output over the GPU's SMs, and the roofline of its
arithmetic intensity; NVIDIA's Matrix Multiplication Background User's Guide), on the shapes after tensor and
sequence parallelism (layer_gemm_slowdown_array). gemm_efficiency(accelerator, m, n, k) is one GEMM's share of peak. The attention core runs
at the same matmul efficiency when it is unfused (Megatron-LM 2021-2022: batched GEMMs, the softmax's
traffic counted in the bytes: every score is computed, masked or not). With flash attention (whose scores
never reach HBM) the core is priced as the kernel runs it: a causal kernel skips the masked half of the
score blocks and its backward recomputes the scores, 3.5 x half the counted forward (flash_attention_work_array),
at flash_attention_rate(accelerator), FlashAttention-2's measured rate on that GPU (A100 0.50, H100 0.339 of
peak: the H100 reaches a smaller share of its peak than the A100). "element-wise bytes" are counted kernel by kernel (elementwise_bytes_per_token: what each norm,
activation, residual add, RoPE and softmax kernel reads and writes, for fused, compiled or eager kernels;
loss_bytes_per_token for the cross-entropy); passes = 3 (forward, backward x 2), 4 with full recomputation.

Calibration is not validation. Two constants are FITTED, on the calibration set only (Narayanan et al.
2021 Table 1, the ten Megatron-LM runs from 1.7B to 1T parameters on A100s): TRAINING_MATMUL_SHARE and
MEMORY_TRAFFIC. distlab.calibration.fit_calibration() recomputes them from that set (a grid search for the least mean |error|;
tests/core/test_efficiency.py checks that the stored values are its result). The best-shape GEMM rates,
the flash-attention rates and the overlap slowdown are published microbenchmarks, not fitted (the calibration runs use unfused
attention, so the flash figures do not enter the fit). The accuracy on published runs the
fit never saw is `distlab validate` (Lesson 7 §8; recorded in benchmarks/RESULTS.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .attention_variants import measured_attention
from .link_rates import (  # re-exported: distlab.efficiency is where callers have found them
    FALLBACK_LINK_SHARE,
    LINK_BUS_BANDWIDTH,
    NVLS_BUS_BANDWIDTH,
    NVLS_MIN_GPUS,
    achieved_link_share,
    nvls_bandwidth,
)
from .attention_kernels import (
    FALLBACK_FLASH_ATTENTION_RATE,
    FLASH_ATTENTION_RATE,
    FLASH_FORWARD_BACKWARD_WORK,
    attention_kernel_for,
    flash_attention_rate,
    flash_attention_work_array,
    kernel_rate_table,
)
from .elementwise import (
    ATTENTION_KERNELS,
    ELEMENTWISE_KERNELS,
    FP8_CAST_BYTES,
    attention_name,
    kernels_name,
    elementwise_bytes_array,
    elementwise_bytes_per_token,
    loss_bytes_per_token,
)
from .elementwise import FP8_GEMM_RATE, fp8_scaling as fp8_scaling_name
from .errors import ConfigurationError
from .gemm_shares import (  # re-exported: distlab.efficiency is where callers have found them
    BEST_FP8_GEMM_EFFICIENCY,
    BEST_GEMM_EFFICIENCY,
    FALLBACK_FP8_GEMM_EFFICIENCY,
    FALLBACK_GEMM_EFFICIENCY,
    FP8_GEMM_SIBLING_RATIO,
    best_fp8_gemm_efficiency,
    best_gemm_efficiency,
    fp8_gemm_source,
)
from .expert_gemms import concurrent_experts, expert_gemm as expert_gemm_name
from .models import model as catalog_model

__all__ = [
    "ATTENTION_KERNELS",
    "ELEMENTWISE_KERNELS",
    "BEST_GEMM_EFFICIENCY",
    "FALLBACK_GEMM_EFFICIENCY",
    "BEST_FP8_GEMM_EFFICIENCY",
    "FALLBACK_FP8_GEMM_EFFICIENCY",
    "FP8_GEMM_SIBLING_RATIO",
    "fp8_gemm_source",
    "best_fp8_gemm_efficiency",
    "TRAINING_MATMUL_SHARE",
    "MEMORY_TRAFFIC",
    "FLASH_ATTENTION_RATE",
    "FALLBACK_FLASH_ATTENTION_RATE",
    "FLASH_FORWARD_BACKWARD_WORK",
    "OVERLAP_SLOWDOWN",
    "flash_attention_rate",
    "flash_attention_work_array",
    "ComputeModel",
    "GEMM_SMS",
    "GEMM_TILES",
    "best_gemm_efficiency",
    "gemm_efficiency",
    "gemm_shape_factor_array",
    "layer_gemm_slowdown_array",
    "layer_gemm_parts",
    "compute_model",
    "fixed_compute_model",
    "elementwise_bytes_per_token",
    "elementwise_bytes_array",
    "loss_bytes_per_token",
    "LINK_BUS_BANDWIDTH",
    "FALLBACK_LINK_SHARE",
    "NVLS_BUS_BANDWIDTH",
    "NVLS_MIN_GPUS",
    "achieved_link_share",
    "nvls_bandwidth",
]


#: Streaming multiprocessors per catalog accelerator, the SMs a GEMM's output tiles are spread over (one wave = one
#: tile per SM): A100 108 (NVIDIA A100 Tensor Core GPU Architecture whitepaper, 2020, "108 SMs"; the Matrix
#: Multiplication Background User's Guide's wave-quantisation example uses the same 108), H100 SXM5 132 (NVIDIA H100
#: Tensor Core GPU Architecture whitepaper, 2022, "132 SMs" for the SXM5 part; the H200 and torchtitan's 96 GB H100
#: share the die), B200 148 (NVIDIA Blackwell datasheets: 148 SMs over two dies, an assumption for the B200's GEMMs as
#: one device; GB200's GPUs taken as the same B200, an assumption), GB300 160 (NVIDIA Technical Blog, "Inside NVIDIA
#: Blackwell Ultra", 2025: "160 Streaming Multiprocessors (SMs) across two dies"). Without a count (h100-pcie, mi300x,
#: a custom one): no wave quantisation, only the roofline. Lesson 7 §8.
GEMM_SMS = {
    "a100-40gb": 108,
    "a100-80gb": 108,
    "h100-sxm": 132,
    "h200": 132,
    "h100-sxm-96gb-hbm2e-500w": 132,
    "b200": 148,
    "gb200": 148,
    "gb300": 160,
}
#: The output tiles (rows x columns of C per thread block) the model lets cuBLAS choose from, largest first: 256 x 128
#: is the tile of the Matrix Multiplication Background User's Guide's quantisation examples on A100 (cuBLAS's and
#: CUTLASS's largest bf16 tiles on Ampere and Hopper are this size, 128 x 256 in their names), and cuBLAS's heuristics
#: pick smaller tiles for small outputs (the guide, "Tile Quantization"). A smaller tile reuses each operand element
#: over fewer outputs, tm tn / (tm + tn) FLOPs per element loaded, so it is assumed to run at that reuse relative to
#: the largest tile (128 x 128: 0.75; 128 x 64: 0.5); an assumption from first principles, not a measurement.
GEMM_TILES = ((256, 128), (128, 128), (128, 64))

#: FITTED on the calibration set (fit_calibration): the share of the best-shape GEMM rate that a
#: training step's matmuls reach beyond their shape (gemm_efficiency prices the shape: tile and wave quantisation
#: and the roofline; this share is kernel launches, framework overhead, clocks). Lesson 7 §8.
TRAINING_MATMUL_SHARE = 0.82
#: FITTED on the calibration set (fit_calibration): the element-wise kernels' HBM time per pass, as a multiple
#: of their counted forward bytes (elementwise_bytes_per_token) at the datasheet HBM bandwidth; above 1 where
#: kernels reach less than the datasheet bandwidth or move bytes the count leaves out. Lesson 7 §8.
MEMORY_TRAFFIC = 1.4
#: Compute slowed by the communication it hides: while a collective runs beside compute, NCCL's kernels hold SMs (one
#: thread block per channel) and share HBM bandwidth, so the overlapped compute kernels run slower than alone. Lee et
#: al. 2025 (arXiv 2507.03114, abstract) measured "an average computational slowdown of 18.9%, with a maximum of
#: 40.0%" for compute overlapped with communication, against the same compute with no communication beside it, over
#: GPT and Llama training on 4 A100s, H100s, MI250s and MI210s. One mechanism in numbers: an H100 all-gather kernel of
#: 24 thread blocks beside a GEMM sized for 132 SMs (NVIDIA developer forum, "Compute-Communication Overlap Causes
#: Severe GEMM Performance Degradation because of Tail Effect", an nsys profile) takes 24 / 132 = 18% of the SMs.
#: The calibrated step model charges this share of the communication it prices as hidden (DP/FSDP traffic under
#: the backward and forward, TP traffic under its matmuls with tp_overlap, ring attention's transfers under the
#: attention core) as extra compute time, "overlap slowdown" (training.step_model_array); not fitted: a published
#: average, the same on every GPU (an assumption: the paper's per-GPU figures are not in its abstract). Lesson 7 §8.
OVERLAP_SLOWDOWN = ("lee2025-overlap-compute-slowdown", 0.189)


@dataclass(frozen=True)
class ComputeModel:
    """How one GPU's compute time is priced: matmul and attention-core efficiencies (shares of the dense
    peak), the element-wise HBM traffic per stored activation byte and pass, and the attention kernel.
    The step model (training.step_model_array) takes these fields. Lesson 7 §8."""

    matmul_efficiency: float
    attention_efficiency: float
    memory_traffic: float
    attention: str
    calibrated: bool
    kernels: str = "fused"
    gemm_sms: int | None = None  # SMs for the GEMM shape factor (gemm_shape_factor_array); None: no shape factor
    best_gemm: float = 1.0  # the best-shape GEMM rate / peak, the roofline's compute roof
    overlap_slowdown: float = 0.0  # compute time added per second of hidden communication (OVERLAP_SLOWDOWN)
    attention_kernel: str | None = None  # distlab.attention_kernels name (flash attention; None: unfused)
    attention_table: tuple | None = None  # (seq lens, forward, backward shares of peak); None: attention_efficiency
    kernel_note: str = ""  # why a kernel's rate is a fallback (kernel_rate_table), shown by describe()
    fp8_matmul_efficiency: float | None = None  # an FP8 recipe's GEMMs: share of the FP8 peak (None: matmul_efficiency)
    fp8_best_gemm: float | None = None  # the best-shape FP8 GEMM rate / FP8 peak (None: best_gemm)
    fp8_scaling: str = "delayed"  # elementwise.FP8_SCALING: the cast overhead of an FP8 recipe
    fp8_cast_bytes: float = 0.0  # HBM bytes per cast element (elementwise.FP8_CAST_BYTES; 0: casts not priced)
    expert_gemm: str = "sequential"  # distlab.expert_gemms: how many of a GPU's expert GEMMs run at once
    fp8_attention: bool = False  # an FP8 recipe's attention core in FP8 (distlab.attention_variants)
    fp8_attention_tables: tuple = ()  # ((shape, (seq lens, forward, backward FP8 / BF16 time)), ...); (): not priced
    window_table: tuple | None = None  # (window, seq lens, forward, backward shares): windowed layers' core rates

    def describe(self) -> str:
        """One line for a student: what the compute time assumes."""
        if not self.calibrated:
            return (
                f"fixed efficiency: every FLOP at {100 * self.matmul_efficiency:.0f}% of peak, "
                f"element-wise work not priced ({self.attention} attention for memory)"
            )
        return (
            f"calibrated: matmuls at {100 * self.matmul_efficiency:.1f}% of peak"
            f"{' x their shape factor (gemm_efficiency)' if self.gemm_sms is not None else ''}"
            + ", attention core at "
            + (
                f"the {self.attention_kernel} kernel's measured rate by sequence length and direction"
                if self.attention_table is not None
                else f"{100 * self.attention_efficiency:.1f}%"
            )
            + f" ({self.attention}"
            + (f", kernel {self.attention_kernel}" if self.attention_kernel else "")
            + (", FP8 attention at its measured time over BF16's" if self.fp8_attention_tables else "")
            + (
                f", {self.window_table[0]}-token sliding windows (where a model has them) at their rate"
                if self.window_table
                else ""
            )
            + (f"; {self.kernel_note}" if self.kernel_note else "")
            + f"{', causal: masked blocks skipped' if self.attention == 'flash' else ''}), element-wise traffic "
            f"{self.memory_traffic:g} x the {self.kernels} kernels' bytes per pass"
            + (
                f", compute beside hidden communication {100 * self.overlap_slowdown:.1f}% slower"
                if self.overlap_slowdown
                else ""
            )
            + " (distlab.efficiency, Lesson 7 §8)"
        )


def compute_model(
    accelerator,
    attention="flash",
    *,
    share=None,
    traffic=None,
    kernels="fused",
    attention_kernel="flash",
    fp8_scaling="delayed",
    expert_gemm="sequential",
    fp8_attention=False,
) -> ComputeModel:
    """The calibrated compute model for an accelerator: matmuls at TRAINING_MATMUL_SHARE x its best GEMM
    rate; the attention core at that rate when unfused, at flash_attention_rate(accelerator) with flash attention;
    MEMORY_TRAFFIC. share= and traffic= replace the fitted constants (fit_calibration uses them). The step model
    slows each weight GEMM further by its shape (gemm_sms: the SMs of GEMM_SMS; best_gemm: the roofline's compute roof).
    With flash attention the core runs at attention_kernel's measured rates (distlab.attention_kernels; 'flash':
    flash_attention_rate). expert_gemm: how an MoE layer's expert GEMMs run (distlab.expert_gemms). fp8_attention: an FP8
    recipe's attention core in FP8 (cuDNN's kernel only), and with the cuDNN kernel the layers of a 128-token window at
    their measured rate (distlab.attention_variants). An FP8 recipe's layer GEMMs run at share x best_fp8_gemm_efficiency of the FP8 peak (its
    output layer at the 16-bit share: step.compute.matmul_seconds), its casts move FP8_CAST_BYTES[fp8_scaling] per element (distlab.elementwise.fp8_cast_bytes_array). Lesson 7 §8.

    A100: 0.82 x 271.2 / 312 = 0.713 of peak for matmuls of the best shape.

    >>> m = compute_model('a100-80gb', 'unfused')
    >>> round(m.matmul_efficiency, 3), round(m.attention_efficiency, 3), m.memory_traffic, m.gemm_sms
    (0.713, 0.713, 1.4, 108)
    """
    from ._arguments import check_fraction
    from .units import non_negative

    kind = attention_name(attention)
    share = TRAINING_MATMUL_SHARE if share is None else check_fraction(share, "share")
    traffic = MEMORY_TRAFFIC if traffic is None else non_negative(traffic, "", "traffic")
    if traffic > 1000:
        raise ConfigurationError(f"traffic={traffic:g} bytes per stored byte and pass; valid: 0 to 1000")
    matmul = min(1.0, share * best_gemm_efficiency(accelerator))
    core = matmul if kind == "unfused" else flash_attention_rate(accelerator)
    sms = GEMM_SMS.get(str(getattr(accelerator, "name", accelerator)).strip().lower())
    kernel = attention_kernel_for(kind, attention_kernel)
    table, note = (None, "") if kernel is None else kernel_rate_table(accelerator, kernel)
    scaling = fp8_scaling_name(fp8_scaling)
    fp8_best = best_fp8_gemm_efficiency(accelerator) * FP8_GEMM_RATE[scaling]  # MXFP8's block-scaled GEMMs slower
    fp8_tables, window, measured_note = measured_attention(accelerator, kernel, scaling, fp8_attention)
    note = "; ".join(x for x in (note, measured_note) if x)
    return ComputeModel(
        matmul,
        core,
        traffic,
        kind,
        True,
        kernels_name(kernels),
        sms,
        best_gemm_efficiency(accelerator),
        OVERLAP_SLOWDOWN[1],
        kernel,
        table,
        note,
        min(1.0, share * fp8_best),
        fp8_best,
        scaling,
        FP8_CAST_BYTES[scaling],
        expert_gemm_name(expert_gemm),
        bool(fp8_attention),
        fp8_tables,
        window,
    )


def gemm_shape_factor_array(m, n, k, sms, ridge, groups=1):
    """The share of its best-shape rate a GEMM of shape (m x k) @ (k x n) reaches on a GPU of `sms` SMs whose
    best-shape rate over HBM bandwidth is `ridge` FLOP/B (NumPy broadcast; bf16 operands); `groups` G such GEMMs in one
    grouped launch (an MoE layer's experts: distlab.expert_gemms) share the waves. Lesson 7 §8.

    Two first-principles losses (NVIDIA, Matrix Multiplication Background User's Guide, "Dimension Quantization
    Effects": tile and wave quantisation; and its "Math and Memory Bounds" roofline):

        wave(T)  = G m n / (waves x sms x tm tn),  waves = ceil(G ceil(m / tm) ceil(n / tn) / sms)
                   (the useful share of the tiles the SMs compute: partial tiles and the last, partial wave idle),
                   for each tile T = tm x tn of GEMM_TILES in both orientations, times its operand reuse relative
                   to the largest tile; the best tile is taken, as cuBLAS's heuristic picks one
        roofline = (2 m n k / (2 (m k + k n + m n)) bytes) / ridge   (arithmetic intensity over the ridge point)
        factor   = min(max over tiles of wave, roofline)              time = max(compute, memory)

    sms None or 0: no wave quantisation (an accelerator without an SM count). 0 < factor <= 1.

    A100 (108 SMs), 2048 x 2048 (k 4096): 256 x 128 tiles, 8 x 16 = 128 tiles = 2 waves of 108 (the second 20 of
    108 full), 2048^2 / (2 x 108 x 256 x 128) = 0.593; 128 x 128 tiles: 16 x 16 = 256 = 3 waves, 4,194,304 /
    (3 x 108 x 16,384) = 0.790, x 0.75 = 0.593; 128 x 64: 512 tiles = 5 waves, 4,194,304 / (5 x 108 x 8192) = 0.948 x
    0.5 = 0.474. Best 0.593; the roofline (intensity 2048 x 2048 x 4096 / (2 x 2048 x 4096 + 2048^2) = 819 FLOP/B
    against a ridge of 271.2e12 / 2.039e12 = 133) does not bind.

    >>> round(float(gemm_shape_factor_array(2048, 2048, 4096, 108, 271.2e12 / 2.039e12)), 3)
    0.593

    Eight experts' 256 x 1024 GEMMs (k 4096) on an H100 (132 SMs): alone, 128 x 64 tiles fill 2 x 16 = 32 SMs, 0.242 x
    0.5 = 0.121; grouped, 128 x 128 tiles fill 8 x 2 x 8 = 128 of 132 in one wave, 0.970 x 0.75 = 0.727 (the roofline,
    195 FLOP/B against a ridge of 237, 0.823, does not bind).

    >>> [round(float(gemm_shape_factor_array(256, 1024, 4096, 132, 237.0, g)), 3) for g in (1, 8)]
    [0.121, 0.727]
    """
    from ._arguments import finite_result, number_array, real_number

    m, n, k = (number_array(x, name, 1.0) for x, name in ((m, "m"), (n, "n"), (k, "k")))
    ridge = number_array(ridge, "ridge", 1e-9)
    sms = None if sms is None or sms == 0 else real_number(sms, "sms", 1.0, 100_000.0)
    groups = number_array(groups, "groups", 1.0)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused below, not printed as a warning
        factor = _shape_factor(m, n, k, sms, ridge, groups)
    return finite_result("GEMM shape factor", factor)


def _shape_factor(m, n, k, sms, ridge, groups=1.0):
    """gemm_shape_factor_array on checked arrays (the step model's path)."""
    roof = m * n * k / (m * k + k * n + m * n) / ridge
    if sms is None:
        return np.minimum(1.0, roof)
    top_m, top_n = GEMM_TILES[0]
    top_reuse = top_m * top_n / (top_m + top_n)
    wave = 0.0
    for tm, tn in GEMM_TILES:
        reuse = tm * tn / (tm + tn) / top_reuse
        for rows, cols in ((tm, tn), (tn, tm)):
            waves = np.ceil(groups * np.ceil(m / rows) * np.ceil(n / cols) / sms)
            wave = np.maximum(wave, reuse * groups * m * n / (waves * sms * rows * cols))
    return np.minimum(wave, roof)


def gemm_efficiency(accelerator, m, n, k, groups=1) -> float:
    """The share of the dense bf16 peak one GEMM, (m x k) @ (k x n), reaches on a catalog accelerator (name or
    Accelerator): best_gemm_efficiency x gemm_shape_factor_array (tile and wave quantisation over GEMM_SMS SMs, and the
    roofline at the accelerator's HBM bandwidth); `groups` such GEMMs at once share the waves (an MoE layer's experts,
    distlab.expert_gemms, Lesson 10 §3). The step model prices every weight GEMM with this factor, times the fitted
    TRAINING_MATMUL_SHARE. Lesson 7 §8.

    H100 SXM (132 SMs, 794.5 of 989.4 TFLOP/s best): 8192^3 fills 32 x 64 = 2048 tiles of 256 x 128 in 16 waves
    (2112 slots): 2048 / 2112 = 0.970, x 0.803 = 0.779. A Llama-3-70B MLP down projection split over tp 8 is as large;
    a 1,024-token microbatch's 1024 x 1024 x 1024 GEMM: 4 x 8 = 32 tiles (of 132 SMs), 128 x 64 tiles 8 x 16 = 128 at 0.5
    reuse: 128 / 132 x 0.5 = 0.485, x 0.803 = 0.389.

    >>> round(gemm_efficiency('h100-sxm', 8192, 8192, 8192), 3), round(gemm_efficiency('h100-sxm', 1024, 1024, 1024), 3)
    (0.779, 0.389)
    """
    from .hardware import accelerator as catalog_accelerator

    if not isinstance(getattr(accelerator, "name", accelerator), str):
        raise ConfigurationError(f"accelerator={accelerator!r} must be a catalog accelerator name or an Accelerator")
    acc = catalog_accelerator(accelerator) if isinstance(accelerator, str) else accelerator
    for value, name in ((m, "m"), (n, "n"), (k, "k"), (groups, "groups")):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise ConfigurationError(f"{name}={value!r} must be a number of rows, columns or GEMMs, 1 to 1e9")
        if not 1 <= value <= 1e9:
            raise ConfigurationError(f"{name}={value!r}; valid: 1 to 1e9")
    best = best_gemm_efficiency(acc)
    ridge = best * acc.peak("bf16") / acc.memory_bandwidth
    factor = gemm_shape_factor_array(m, n, k, GEMM_SMS.get(acc.name.strip().lower()), ridge, groups)
    return float(best * factor)


def layer_gemm_slowdown_array(model, tokens, tp, sms, ridge, ep=1, etp=None, expert_gemm="sequential"):
    """1 / the FLOP-weighted shape factor of one layer's weight GEMMs (forward, and the backward's input- and
    weight-gradient GEMMs, each as often), and of the logits, on one GPU: (layer, logits). NumPy broadcast over
    tokens (b s / cp per microbatch), tp, ep, etp. Lesson 7 §8.

    Shapes (forward m x n x k; q = heads x d_head, kv = kv_heads x d_head, f = ffn, g = 2 for a gated MLP):
        QKV T x (q + 2 kv) / tp x h; attention output T x h x q / tp; MLP up T x g f / tp x h; down T x h x f / tp;
        logits T x V / tp x h. Sequence parallelism gathers the full T before each. The backward's input gradient
        is T x k x n, its weight gradient k x n x T (the tokens are the reduction). An MoE layer's routed experts
        (distlab.moe.step.MoEStepModel) run per expert on ep x T x top_k x load / E tokens (load:
        expert_load(ep)), split over etp, as many of the GPU's E / ep expert GEMMs at once as expert_gemm runs
        (distlab.expert_gemms.concurrent_experts; their tiles share the waves); shared experts on all T. The weights
        are each GEMM's FLOPs.

    >>> from distlab import models
    >>> layer, logits = layer_gemm_slowdown_array(models.model('llama3.1-8b'), 8192, 1, 132, 237.0)
    >>> round(float(layer), 3), round(float(logits), 3)
    (1.028, 1.012)
    """
    from ._arguments import finite_result, number_array, real_number

    expert_gemm = expert_gemm_name(expert_gemm)
    if not all(hasattr(model, a) for a in ("hidden", "heads", "ffn", "kv_heads", "vocab", "gated_mlp")):
        raise ConfigurationError(f"model={model!r} must be a TransformerModel (see distlab.models.model)")
    tokens, tp = number_array(tokens, "tokens", 1.0), number_array(tp, "tp", 1.0)
    ep = number_array(ep, "ep", 1.0)
    etp = None if etp is None else number_array(etp, "etp", 1.0)
    ridge = number_array(ridge, "ridge", 1e-9)
    sms = None if sms is None or sms == 0 else real_number(sms, "sms", 1.0, 100_000.0)
    shape = np.broadcast_shapes(np.shape(tokens), np.shape(tp), np.shape(ep), np.shape(etp))
    if int(np.prod(shape)) > 64 and np.ndim(ridge) == 0 and max(np.max(tp), np.max(ep)) < 65536:
        # the planner's arrays: a few distinct GEMM shapes among many configurations, priced once each (one complex key
        # per configuration: tokens, and tp, ep, etp packed exactly below 2^48)
        split = np.zeros(shape) if etp is None else np.minimum(etp, 65535.0)
        key = np.broadcast_to(tokens, shape) + 1j * ((np.asarray(tp) * 65536.0 + ep) * 65536.0 + split)
        _, first, inverse = np.unique(key.ravel(), return_index=True, return_inverse=True)
        pick = [np.broadcast_to(x, shape).ravel()[first] for x in (tokens, tp, ep)]
        etps = None if etp is None else np.broadcast_to(etp, shape).ravel()[first]
        layer, logits = _layer_slowdown(model, pick[0], pick[1], sms, ridge, pick[2], etps, expert_gemm)
        inverse = np.ravel(inverse)
        return layer[inverse].reshape(shape), logits[inverse].reshape(shape)
    layer, logits = _layer_slowdown(model, tokens, tp, sms, ridge, ep, etp, expert_gemm)
    return finite_result("GEMM slowdown", layer), finite_result("GEMM slowdown", logits)


def layer_gemm_parts(model) -> list[tuple[float, bool]]:
    """One layer's weight GEMMs as (FLOPs per token / 2, column-parallel), in the order QKV, attention output, MLP
    up, MLP down; an MoE layer's routed experts (top_k) and shared experts in place of the MLP. Column-parallel: QKV
    and a dense MLP's up projection (Megatron-LM's ColumnParallelLinear; Shoeybi et al. 2019 Sec. 3); the experts'
    linears send no TP collective of their own (their tokens travel by the dispatcher's all-to-alls). The weights
    layer_gemm_slowdown_array averages with, and the GEMMs tp_overlap's 'megatron-async-backward' hides under.
    A catalog name is looked up (distlab.models.model). Lesson 7 §2.

    >>> from distlab import models
    >>> [(w / 4096**2, col) for w, col in layer_gemm_parts(models.model('llama3.1-8b'))]
    [(1.5, True), (1.0, False), (7.0, True), (3.5, False)]
    """
    if isinstance(model, str):
        model = catalog_model(model)
    if not all(hasattr(model, a) for a in ("hidden", "heads", "ffn", "kv_heads", "gated_mlp")):
        raise ConfigurationError(f"model={model!r} must be a TransformerModel (see distlab.models.model)")
    h = float(model.hidden)
    d = float(getattr(model, "head_dim", model.hidden // model.heads))
    q, kv = float(model.heads) * d, float(model.kv_heads) * d
    g = 2.0 if model.gated_mlp else 1.0
    parts = [((q + 2.0 * kv) * h, True), (q * h, False)]
    moe = getattr(model, "moe", None)
    if moe is None:
        f = float(model.ffn)
        return parts + [(g * f * h, True), (f * h, False)]
    ef = float(moe.expert_ffn)
    parts += [(moe.top_k * g * ef * h, False), (moe.top_k * ef * h, False)]
    if moe.shared_experts:
        parts += [(moe.shared_experts * g * ef * h, False), (moe.shared_experts * ef * h, False)]
    return parts


def _layer_slowdown(model, tokens, tp, sms, ridge, ep, etp, expert_gemm="sequential"):
    """layer_gemm_slowdown_array on checked arrays (its shapes as the docstring there lists them)."""
    h = float(model.hidden)
    d = float(getattr(model, "head_dim", model.hidden // model.heads))
    q, kv = float(model.heads) * d, float(model.kv_heads) * d
    g = 2.0 if model.gated_mlp else 1.0

    def slow(m, n, k, g=1.0):  # mean over the three passes of 1 / factor (g GEMMs at once)
        f = _shape_factor
        return (1.0 / f(m, n, k, sms, ridge, g) + 1.0 / f(m, k, n, sms, ridge, g) + 1.0 / f(k, n, m, sms, ridge, g)) / 3

    slows = [slow(tokens, (q + 2.0 * kv) / tp, h), slow(tokens, h, q / tp)]
    moe = getattr(model, "moe", None)
    if moe is None:
        f = float(model.ffn)
        slows += [slow(tokens, g * f / tp, h), slow(tokens, h, f / tp)]
    else:
        ef = float(moe.expert_ffn)
        split = tp if etp is None else etp
        routed = np.maximum(1.0, np.asarray(ep, dtype=float) * tokens * moe.top_k * model.expert_load(ep) / moe.experts)
        local = concurrent_experts(expert_gemm, moe.experts / np.asarray(ep, dtype=float))
        slows += [slow(routed, g * ef / split, h, local), slow(routed, h, ef / split, local)]
        if moe.shared_experts:
            slows += [slow(tokens, moe.shared_experts * g * ef / tp, h), slow(tokens, h, moe.shared_experts * ef / tp)]
    parts = [w for w, _ in layer_gemm_parts(model)]
    layer = sum(w * x for w, x in zip(parts, slows)) / sum(parts)
    return layer, slow(tokens, float(model.vocab) / tp, h)


def fixed_compute_model(efficiency, attention="flash", kernels="fused") -> ComputeModel:
    """The simple model of Lesson 7 §1: every FLOP at one share of peak, no element-wise traffic.

    >>> fixed_compute_model(0.5).describe()
    'fixed efficiency: every FLOP at 50% of peak, element-wise work not priced (flash attention for memory)'
    """
    from ._arguments import check_fraction

    eff = check_fraction(efficiency, "efficiency")
    return ComputeModel(eff, eff, 0.0, attention_name(attention), False, kernels_name(kernels))
