"""The best-shape GEMM rate each GPU reaches, as a share of its dense peak: bf16 and FP8, from the maximum achievable
matmul FLOPS microbenchmark (Bekman's MAMF table) or, for a GPU without a row, a sibling's row times their ratio on one
harness, else a stated fallback. The step model multiplies these by the fitted training share (distlab.efficiency,
which re-exports every name here). Lesson 7 §8."""

from __future__ import annotations

from .errors import ConfigurationError
from .hardware_catalog import ACCELERATORS

__all__ = [
    "BEST_GEMM_EFFICIENCY",
    "FALLBACK_GEMM_EFFICIENCY",
    "BEST_FP8_GEMM_EFFICIENCY",
    "FP8_GEMM_SIBLING_RATIO",
    "FALLBACK_FP8_GEMM_EFFICIENCY",
    "best_gemm_efficiency",
    "best_fp8_gemm_efficiency",
    "fp8_gemm_source",
]

#: Best-shape bf16 GEMM rate as a share of the dense peak, per catalog accelerator: Bekman's MAMF
#: (maximum achievable matmul FLOPS) microbenchmark, the ids in distlab/data/published_runs.json "microbenchmarks" (A100
#: SXM 271.2 of 312 TFLOP/s; H100 SXM 794.5 of 989; B200 1745 of 2250; GB200 1822.0 of 2500, 72.9%). A100 40 GB and 80
#: GB share the die and clocks; H200 is the H100 die with more memory: both are given their sibling's figure (an
#: assumption, stated here). GB300 has no BF16 row: it takes the fallback below. Lesson 7 §8.
BEST_GEMM_EFFICIENCY = {
    "a100-40gb": ("mamf-bf16-a100-sxm", 271.2 / 312),
    "a100-80gb": ("mamf-bf16-a100-sxm", 271.2 / 312),
    "h100-sxm": ("mamf-bf16-h100-sxm", 794.5 / 989),
    "h200": ("mamf-bf16-h100-sxm", 794.5 / 989),
    # torchtitan's 96 GB HBM2e 500 W H100 (a run's stated part, validation.run_cluster): the H100 SXM's die and share
    "h100-sxm-96gb-hbm2e-500w": ("mamf-bf16-h100-sxm", 794.5 / 989),
    "b200": ("mamf-bf16-b200-sxm", 1745.0 / 2250),
    "gb200": ("mamf-bf16-gb200-sxm", 1822.0 / 2500),
    "mi300x": ("mamf-bf16-mi300x", 668.4 / 1300),  # ROCm, PyTorch TunableOp on (the table's note): 51.4%
}
#: For an accelerator without a published best-shape GEMM figure (h100-pcie, gb300, a custom one): the lowest of the
#: NVIDIA parts measured above (GB200's 0.729 since session 18; B200's 0.776 before), so that an unmeasured NVIDIA part
#: is not assumed better than every measured one. Another vendor's part needs its own figure: its software, not the
#: silicon alone, sets the share (MI300X measured 51.4%). Lesson 7 §8.
FALLBACK_GEMM_EFFICIENCY = 1822.0 / 2500

#: Best-shape FP8 GEMM rate as a share of the dense FP8 peak: Bekman's MAMF table, FP8 (`float8_e4m3fn`) rows (the
#: data file's "mamf-fp8-*"): H100 SXM 1,402.6 of 1,979 TFLOP/s, 70.9%, against BF16's 80.3% (FP8 GEMMs run further
#: from their peak); H200 SXM 1,453.4 of 1,979, 73.4%; B200 SXM 3,432.5 of 4,500, 76.3%; GB200 3,615.6 of 5,000, 72.3%
#: (GB300: no row; FP8_GEMM_SIBLING_RATIO below). Each part is given its own
#: row (the H200 measured apart from the H100 here, unlike bf16, whose table says "H200 is the same"); torchtitan's
#: 96 GB H100 the H100's. Only the GEMMs of an FP8 recipe run at it; the attention core, the element-wise work and
#: the optimizer stay at 16-bit rates (the step model, distlab.step.compute). Lesson 7 §8.
BEST_FP8_GEMM_EFFICIENCY = {
    "h100-sxm": ("mamf-fp8-h100-sxm", 1402.6 / 1979),
    "h200": ("mamf-fp8-h200-sxm", 1453.4 / 1979),
    "h100-sxm-96gb-hbm2e-500w": ("mamf-fp8-h100-sxm", 1402.6 / 1979),
    "b200": ("mamf-fp8-b200-sxm", 3432.5 / 4500),
    "gb200": ("mamf-fp8-gb200-sxm", 3615.6 / 5000),
}
#: A part without a MAMF FP8 row but timed beside a sibling that has one, on one harness: its share is the sibling's
#: MAMF rate x (its rate / the sibling's rate on that harness) / its own FP8 peak. GB300: Azure's AI-benchmarking-guide
#: times the cuBLASLt FP8 GEMM (random data, 10,000 warmups) on ND GB200 v6 and ND GB300 v6, best rows 2,819.5 and
#: 3,308.5 TFLOP/s at 16384^3 (the data file's "azure-cublaslt-fp8-gb200" / "-gb300"), 1.173x: GB300 reaches
#: 3,615.6 x 1.173 = 4,243 of its 5,000, 84.9%. An assumption, stated: the harness's ratio holds for MAMF's best
#: shape, and it carries the two runs' software (CUDA 12.8 against 13.0). BF16 has no such pair: GB300's BF16 GEMMs
#: keep the fallback. Lesson 7 §8.
FP8_GEMM_SIBLING_RATIO = {"gb300": ("gb200", "azure-cublaslt-fp8-gb200", "azure-cublaslt-fp8-gb300", 3308.5 / 2819.5)}
#: For an accelerator without a published FP8 figure: the lowest measured (the H100's), so that no GPU is assumed to
#: reach more of its FP8 peak than every one measured. Lesson 7 §8.
FALLBACK_FP8_GEMM_EFFICIENCY = 1402.6 / 1979


def best_gemm_efficiency(accelerator) -> float:
    """Best-shape bf16 GEMM rate / dense peak of a catalog accelerator (name or Accelerator), from the
    MAMF microbenchmark (BEST_GEMM_EFFICIENCY); FALLBACK_GEMM_EFFICIENCY for one without. Lesson 7 §8.

    >>> round(best_gemm_efficiency('a100-80gb'), 3), round(best_gemm_efficiency('h100-sxm'), 3)
    (0.869, 0.803)
    """
    if not isinstance(getattr(accelerator, "name", accelerator), str):
        raise ConfigurationError(f"accelerator={accelerator!r} must be a catalog accelerator name or an Accelerator")
    entry = BEST_GEMM_EFFICIENCY.get(str(getattr(accelerator, "name", accelerator)).strip().lower())
    return FALLBACK_GEMM_EFFICIENCY if entry is None else entry[1]


def best_fp8_gemm_efficiency(accelerator) -> float:
    """Best-shape FP8 GEMM rate / dense FP8 peak of a catalog accelerator (name or Accelerator): BEST_FP8_GEMM_EFFICIENCY;
    without a figure, FALLBACK_FP8_GEMM_EFFICIENCY or the part's own bf16 share (best_gemm_efficiency) where that is
    lower: every NVIDIA part of the MAMF table reaches no more of its FP8 peak than of its bf16 one (H100 70.9 / 80.3%,
    H200 73.4 / 80.3%, GH200 77.6 / 83.8%, B200 76.3 / 77.6%, GB200 72.3 / 72.9%). Lesson 7 §8.

    H100 SXM 1,402.6 / 1,979 = 0.709; B200 SXM 3,432.5 / 4,500 = 0.763; MI300X (no FP8 row): its bf16 share, 668.4 /
    1,300 = 0.514, under the H100's 0.709.

    GB300 (FP8_GEMM_SIBLING_RATIO): GB200's 3,615.6 x 3,308.5 / 2,819.5 = 4,242.7 of 5,000 = 0.849.

    >>> [round(best_fp8_gemm_efficiency(a), 3) for a in ('h100-sxm', 'b200', 'mi300x', 'h100-pcie', 'gb300')]
    [0.709, 0.763, 0.514, 0.709, 0.849]
    """
    if not isinstance(getattr(accelerator, "name", accelerator), str):
        raise ConfigurationError(f"accelerator={accelerator!r} must be a catalog accelerator name or an Accelerator")
    name = str(getattr(accelerator, "name", accelerator)).strip().lower()
    entry = BEST_FP8_GEMM_EFFICIENCY.get(name)
    if entry is not None:
        return entry[1]
    if name in FP8_GEMM_SIBLING_RATIO:
        sibling, _, _, ratio = FP8_GEMM_SIBLING_RATIO[name]
        own = getattr(accelerator, "peak_flops", None) or ACCELERATORS[name].peak_flops
        if own.get("fp8"):
            return min(
                1.0, BEST_FP8_GEMM_EFFICIENCY[sibling][1] * ratio * ACCELERATORS[sibling].peak_flops["fp8"] / own["fp8"]
            )
    return min(FALLBACK_FP8_GEMM_EFFICIENCY, best_gemm_efficiency(accelerator))


def fp8_gemm_source(accelerator) -> str:
    """Where best_fp8_gemm_efficiency's figure for this catalog accelerator (name) comes from, in words. Lesson 7 §8.

    >>> fp8_gemm_source('gb300')
    "GB200's measured share x 1.173, GB300 / GB200 on one cuBLASLt harness (FP8_GEMM_SIBLING_RATIO)"
    """
    name = str(getattr(accelerator, "name", accelerator)).strip().lower()
    if name in BEST_FP8_GEMM_EFFICIENCY:
        return f"{name.upper()}'s measured best-shape share (Bekman's MAMF)"
    if name in FP8_GEMM_SIBLING_RATIO:
        sibling, _, _, ratio = FP8_GEMM_SIBLING_RATIO[name]
        return (
            f"{sibling.upper()}'s measured share x {ratio:.3f}, {name.upper()} / {sibling.upper()} on one cuBLASLt "
            "harness (FP8_GEMM_SIBLING_RATIO)"
        )
    return "no FP8 GEMM figure for this GPU: the H100's share or the GPU's own bf16 share, whichever is lower"
