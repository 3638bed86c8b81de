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

from .errors import ConfigurationError

__all__ = [
    "ATTENTION_KERNELS",
    "ELEMENTWISE_KERNELS",
    "BEST_GEMM_EFFICIENCY",
    "FALLBACK_GEMM_EFFICIENCY",
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

#: The attention implementations estimate() knows: 'flash' (FlashAttention, cuDNN/TE fused attention,
#: PyTorch SDPA: scores never stored) and 'unfused' (Megatron-LM 2021-2022: scores stored, softmax in HBM).
ATTENTION_KERNELS = ("flash", "unfused")
#: How the element-wise work between the matmuls runs (elementwise_bytes_per_token counts each one's HBM bytes):
#: 'fused' (Megatron-LM's fused kernels: LayerNorm/RMSNorm, bias-GeLU, SwiGLU, bias-dropout-add, scale-mask-softmax,
#: RoPE), 'compiled' (torch.compile's Inductor: one generated kernel per element-wise chain, counted as fused) and
#: 'eager' (PyTorch eager mode: one kernel per operator, so composite operators such as an RMSNorm computed in fp32,
#: a complex-number RoPE and SwiGLU's separate SiLU and product each read and write their tensors).
ELEMENTWISE_KERNELS = ("fused", "compiled", "eager")

#: Best-shape bf16 GEMM rate as a share of the dense peak, per catalog accelerator: Bekman's MAMF
#: (maximum achievable matmul FLOPS) microbenchmark, the ids in distlab/data/published_runs.json
#: "microbenchmarks" (A100 SXM 271.2 of 312 TFLOP/s; H100 SXM 794.5 of 989; B200 1745 of 2250).
#: A100 40 GB and 80 GB share the die and clocks; H200 is the H100 die with more memory: both are
#: given their sibling's figure (an assumption, stated here). Lesson 7 §8.
BEST_GEMM_EFFICIENCY = {
    "a100-40gb": ("mamf-bf16-a100-sxm", 271.2 / 312),
    "a100-80gb": ("mamf-bf16-a100-sxm", 271.2 / 312),
    "h100-sxm": ("mamf-bf16-h100-sxm", 794.5 / 989),
    "h200": ("mamf-bf16-h100-sxm", 794.5 / 989),
    # torchtitan's 96 GB HBM2e, 500 W H100 (a validation run's stated part, distlab.validation.run_cluster): the die
    # of the H100 SXM, so its share of (this part's own) peak
    "h100-sxm-96gb-hbm2e-500w": ("mamf-bf16-h100-sxm", 794.5 / 989),
    "b200": ("mamf-bf16-b200-sxm", 1745.0 / 2250),
}
#: For an accelerator without a published best-shape GEMM figure (h100-pcie, mi300x, a custom one):
#: the lowest measured above (B200's 0.776), so that an unmeasured GPU is not assumed better than
#: every measured one. Lesson 7 §8.
FALLBACK_GEMM_EFFICIENCY = 1745.0 / 2250

#: Streaming multiprocessors per catalog accelerator, the SMs a GEMM's output tiles are spread over (one wave = one
#: tile per SM): A100 108 (NVIDIA A100 Tensor Core GPU Architecture whitepaper, 2020, "108 SMs"; the Matrix
#: Multiplication Background User's Guide's wave-quantisation example uses the same 108), H100 SXM5 132 (NVIDIA H100
#: Tensor Core GPU Architecture whitepaper, 2022, "132 SMs" for the SXM5 part; the H200 and torchtitan's 96 GB H100
#: share the die), B200 148 (NVIDIA Blackwell datasheets: 148 SMs over two dies, an assumption for the B200's GEMMs as
#: one device). An accelerator without a count (h100-pcie, mi300x, a custom one) gets no wave quantisation, only the
#: roofline. Lesson 7 §8.
GEMM_SMS = {
    "a100-40gb": 108,
    "a100-80gb": 108,
    "h100-sxm": 132,
    "h200": 132,
    "h100-sxm-96gb-hbm2e-500w": 132,
    "b200": 148,
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
#: Attention-core rate with flash attention, per catalog accelerator, as a share of the dense peak: published
#: microbenchmarks of FlashAttention-2 (what torchtitan's SDPA flash backend and MPT's flash attention run; an engine on
#: FlashAttention-3 or cuDNN's Hopper kernels is faster on H100), not fitted. The rate is on the paper's own FLOP count
#: (flash_attention_work_array: with a causal mask the scores are halved, the backward is 2.5 x the forward).
#: A100: FlashAttention-2 reaches 50-73% of peak (Dao 2023, arXiv 2307.08691, abstract and Sec. 4.1, Figs. 4-6); the
#: low end is taken (forward + backward, its backward the slower pass, up to 63%; causal and short sequences lowest).
#: H100: "we obtain up to 335 TFLOPs/s" forward + backward (same paper, Sec. 4.1, Fig. 7), 335 / 989.4 = 0.339, its
#: best setting (so, if anything, optimistic; Shah et al. 2024, FlashAttention-3, arXiv 2407.08608, abstract: "only 35%
#: utilization on the H100"). H200 and torchtitan's 96 GB H100 share the H100's die. Lesson 7 §8.
FLASH_ATTENTION_RATE = {
    "a100-40gb": ("dao2023-flashattention2-a100", 0.50),
    "a100-80gb": ("dao2023-flashattention2-a100", 0.50),
    "h100-sxm": ("dao2023-flashattention2-h100", 335.0 / 989.4),
    "h200": ("dao2023-flashattention2-h100", 335.0 / 989.4),
    "h100-sxm-96gb-hbm2e-500w": ("dao2023-flashattention2-h100", 335.0 / 989.4),
}
#: For an accelerator without a published flash-attention figure (b200, mi300x, a custom one): the lowest measured
#: share above (H100's 0.339), so that an unmeasured GPU is not assumed better than every measured one. Lesson 7 §8.
FALLBACK_FLASH_ATTENTION_RATE = 335.0 / 989.4
#: The work a flash-attention kernel executes, per unit of its causal forward FLOPs (Dao 2023, Sec. 4.1: forward
#: f = 4 s^2 d a, "with causal mask, we divide this number by 2", backward 2.5 f "since there are 2 matmuls in the
#: forward pass and 5 matmuls in the backward pass, due to recomputation"; flash-attention's
#: benchmarks/benchmark_flash_attention.py counts the same): forward + backward 3.5 f. Lesson 7 §8.
FLASH_FORWARD_BACKWARD_WORK = 3.5

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

#: Achieved large-message all-reduce bus bandwidth per catalog link (nccl-tests busbw, ring algorithm), from the
#: hardware microbenchmarks in distlab/data/published_runs.json (NVIDIA GTC24 S62129, "NCCL Tests Allreduce Bus
#: Bandwidth"): NVLink3 (A100) 232 of 300 GB/s, NVLink4 (H100) 370 of 450, PCIe Gen4 24, Gen5 48, 200 Gb RDMA
#: (IB/RoCE) 24 of 25, 400 Gb RDMA 48 of 50, 100 GbE TCP/IP sockets 10 of 12.5. NVLink5 (B200): the one-node
#: all-reduce of AWS P6-B200 at 16 GiB, 845.67 of 900 (algorithm not stated). XDR (800 Gb) has no figure: the
#: HDR/NDR share (0.96) is assumed. Line rate x this share is what the calibrated step model moves bytes at.
#: Lesson 7 §8.
LINK_BUS_BANDWIDTH = {
    "nvlink3": ("nvidia-gtc24-allreduce-busbw-nvlink3-a100", 232e9),
    "nvlink4": ("nvidia-gtc24-allreduce-busbw-nvlink4-h100", 370e9),
    "nvlink5": ("mlengineering-torch-allreduce-p6-b200-1vs4-nodes", 845.67e9),
    "pcie4": ("nvidia-gtc24-allreduce-busbw-pci-gen4", 24e9),
    "pcie5": ("nvidia-gtc24-allreduce-busbw-pci-gen5", 48e9),
    "ib-hdr": ("nvidia-gtc24-allreduce-busbw-200gb-rdma-ib-roce", 24e9),
    "ib-ndr": ("nvidia-gtc24-allreduce-busbw-400gb-rdma-ib-roce", 48e9),
    "ethernet-100g": ("nvidia-gtc24-allreduce-busbw-100gbe-tcp-ip-sockets", 10e9),
    "ethernet-200g": ("nvidia-gtc24-allreduce-busbw-200gb-rdma-ib-roce", 24e9),
    "ethernet-400g": ("nvidia-gtc24-allreduce-busbw-400gb-rdma-ib-roce", 48e9),
}
#: For a link without a figure (ib-xdr, a custom link): the RDMA share 48 / 50. Lesson 7 §8.
FALLBACK_LINK_SHARE = 48 / 50
#: NVLink SHARP (NVLS): on NVSwitch systems of the H100 generation on, NCCL runs an all-reduce inside a node on the
#: switch, 480 GB/s busbw on H100 (GTC24 S62129, "NVLink4 SHARP (H100)"), and picks it from 5 GPUs up (Bekman's
#: nccl-tests on 8x H200: Ring at 4 GPUs, NVLS at 5-8). Reduce-scatter and all-gather stay on the ring (361-363 GB/s
#: on the same machine). Lesson 7 §8.
NVLS_BUS_BANDWIDTH = {"nvlink4": ("nvidia-gtc24-allreduce-busbw-nvlink4-sharp-h100", 480e9)}
NVLS_MIN_GPUS = 5


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

    def describe(self) -> str:
        """One line for a student: what the compute time assumes."""
        if not self.calibrated:
            return (
                f"fixed efficiency: every FLOP at {100 * self.matmul_efficiency:.0f}% of peak, "
                f"element-wise work not priced ({self.attention} attention for memory)"
            )
        return (
            f"calibrated: matmuls at {100 * self.matmul_efficiency:.1f}% of peak"
            f"{' x their shape factor (gemm_efficiency)' if self.gemm_sms is not None else ''}, attention core at "
            f"{100 * self.attention_efficiency:.1f}% ({self.attention}"
            f"{', causal: masked blocks skipped' if self.attention == 'flash' else ''}), element-wise traffic "
            f"{self.memory_traffic:g} x the {self.kernels} kernels' bytes per pass"
            + (
                f", compute beside hidden communication {100 * self.overlap_slowdown:.1f}% slower"
                if self.overlap_slowdown
                else ""
            )
            + " (distlab.efficiency, Lesson 7 §8)"
        )


def _attention(attention) -> str:
    key = str(attention).strip().lower()
    if key not in ATTENTION_KERNELS:
        raise ConfigurationError(f"attention={attention!r}; valid: {', '.join(ATTENTION_KERNELS)}")
    return key


def best_gemm_efficiency(accelerator) -> float:
    """Best-shape bf16 GEMM rate / dense peak of a catalog accelerator (name or Accelerator), from the
    MAMF microbenchmark (BEST_GEMM_EFFICIENCY); FALLBACK_GEMM_EFFICIENCY for one without. Lesson 7 §8.

    >>> round(best_gemm_efficiency('a100-80gb'), 3), round(best_gemm_efficiency('h100-sxm'), 3)
    (0.869, 0.803)
    """
    if not isinstance(getattr(accelerator, "name", accelerator), str):
        raise ConfigurationError(f"accelerator={accelerator!r} must be a catalog accelerator name or an Accelerator")
    name = str(getattr(accelerator, "name", accelerator)).strip().lower()
    entry = BEST_GEMM_EFFICIENCY.get(name)
    return FALLBACK_GEMM_EFFICIENCY if entry is None else entry[1]


def flash_attention_rate(accelerator) -> float:
    """Flash attention's forward + backward rate / dense peak on a catalog accelerator (name or Accelerator), on
    flash-attention's own FLOP count (FLASH_ATTENTION_RATE; FALLBACK_FLASH_ATTENTION_RATE without a figure).
    Lesson 7 §8.

    >>> flash_attention_rate('a100-80gb'), round(flash_attention_rate('h100-sxm'), 3), round(flash_attention_rate('b200'), 3)
    (0.5, 0.339, 0.339)
    """
    if not isinstance(getattr(accelerator, "name", accelerator), str):
        raise ConfigurationError(f"accelerator={accelerator!r} must be a catalog accelerator name or an Accelerator")
    entry = FLASH_ATTENTION_RATE.get(str(getattr(accelerator, "name", accelerator)).strip().lower())
    return FALLBACK_FLASH_ATTENTION_RATE if entry is None else entry[1]


def flash_attention_work_array(core_forward_flops, recomputed):
    """The FLOPs a causal flash-attention kernel executes for one layer's training step, given the attention core's
    counted (full, unmasked) forward FLOPs 4 b s^2 a d: it skips the masked half, 2 b s^2 a d, and its backward
    recomputes the scores, so forward + backward execute FLASH_FORWARD_BACKWARD_WORK = 3.5 x that half, and a
    recomputed forward (recomputed true) one half more. The step model divides this by flash_attention_rate x peak.
    Unfused attention (Megatron-LM 2021-2022's scale-mask-softmax) computes every score, masked or not: the counted
    3 x 4 b s^2 a d. Lesson 7 §8.

    One 8,192-token sequence of Llama 3 8B (32 heads x 128): forward 4 x 8192^2 x 4096 = 1.0995e12 counted; executed
    3.5 x 0.5498e12 = 1.924e12 (0.58 of the counted 3 x forward), 2.474e12 with a recomputed forward.

    >>> float(flash_attention_work_array(4 * 8192**2 * 4096, False)) / 1e12
    1.924145348608
    >>> float(flash_attention_work_array(4 * 8192**2 * 4096, True)) / 1e12
    2.473901162496
    """
    from ._arguments import finite_result, number_array

    half = 0.5 * np.asarray(number_array(core_forward_flops, "core_forward_flops"), dtype=float)
    again = np.where(np.asarray(number_array(recomputed, "recomputed"), dtype=bool), 1.0, 0.0)
    return finite_result("flash-attention work", (FLASH_FORWARD_BACKWARD_WORK + again) * half)


def achieved_link_share(link) -> float:
    """Achieved all-reduce bus bandwidth / line rate of a catalog link (name or Link): LINK_BUS_BANDWIDTH's
    nccl-tests figure over the catalog's per-direction rate, at most 1; FALLBACK_LINK_SHARE without a figure.
    Lesson 7 §8.

    >>> round(achieved_link_share('nvlink3'), 3), round(achieved_link_share('ib-ndr'), 2)  # 232/300, 48/50
    (0.773, 0.96)
    """
    from .hardware import link as catalog_link

    name = str(getattr(link, "name", link)).strip().lower()
    entry = LINK_BUS_BANDWIDTH.get(name)
    if entry is None:
        return FALLBACK_LINK_SHARE
    return min(1.0, entry[1] / catalog_link(name).bandwidth)


def nvls_bandwidth(link):
    """The NVLS all-reduce bus bandwidth of an intra-node link (B/s), None where NCCL has no NVLS. Lesson 7 §8.

    >>> nvls_bandwidth('nvlink4'), nvls_bandwidth('nvlink3')
    (480000000000.0, None)
    """
    entry = NVLS_BUS_BANDWIDTH.get(str(getattr(link, "name", link)).strip().lower())
    return None if entry is None else entry[1]


def _kernels(kernels) -> str:
    key = str(kernels).strip().lower()
    if key not in ELEMENTWISE_KERNELS:
        raise ConfigurationError(f"kernels={kernels!r}; valid: {', '.join(ELEMENTWISE_KERNELS)}")
    return key


def compute_model(accelerator, attention="flash", *, share=None, traffic=None, kernels="fused") -> ComputeModel:
    """The calibrated compute model for an accelerator: matmuls at TRAINING_MATMUL_SHARE x its best GEMM
    rate; the attention core at that rate when unfused, at flash_attention_rate(accelerator) with flash attention;
    MEMORY_TRAFFIC. share= and traffic= replace the fitted constants (fit_calibration uses them). The step model
    slows each weight GEMM further by its shape (gemm_sms: the SMs of GEMM_SMS; best_gemm: the roofline's compute roof).
    Lesson 7 §8.

    A100: 0.82 x 271.2 / 312 = 0.713 of peak for matmuls of the best shape.

    >>> m = compute_model('a100-80gb', 'unfused')
    >>> round(m.matmul_efficiency, 3), round(m.attention_efficiency, 3), m.memory_traffic, m.gemm_sms
    (0.713, 0.713, 1.4, 108)
    """
    from ._arguments import check_fraction
    from .units import non_negative

    kind = _attention(attention)
    share = TRAINING_MATMUL_SHARE if share is None else check_fraction(share, "share")
    traffic = MEMORY_TRAFFIC if traffic is None else non_negative(traffic, "", "traffic")
    if traffic > 1000:
        raise ConfigurationError(f"traffic={traffic:g} bytes per stored byte and pass; valid: 0 to 1000")
    matmul = min(1.0, share * best_gemm_efficiency(accelerator))
    core = matmul if kind == "unfused" else flash_attention_rate(accelerator)
    sms = GEMM_SMS.get(str(getattr(accelerator, "name", accelerator)).strip().lower())
    return ComputeModel(
        matmul,
        core,
        traffic,
        kind,
        True,
        _kernels(kernels),
        sms,
        best_gemm_efficiency(accelerator),
        OVERLAP_SLOWDOWN[1],
    )


def gemm_shape_factor_array(m, n, k, sms, ridge):
    """The share of its best-shape rate a GEMM of shape (m x k) @ (k x n) reaches on a GPU of `sms` SMs whose
    best-shape rate over HBM bandwidth is `ridge` FLOP/B (NumPy broadcast; bf16 operands). Lesson 7 §8.

    Two first-principles losses (NVIDIA, Matrix Multiplication Background User's Guide, "Dimension Quantization
    Effects": tile and wave quantisation; and its "Math and Memory Bounds" roofline):

        wave(T)  = m n / (waves x sms x tm tn),  waves = ceil(ceil(m / tm) ceil(n / tn) / sms)
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
    """
    from ._arguments import finite_result, number_array, real_number

    m, n, k = (number_array(x, name, 1.0) for x, name in ((m, "m"), (n, "n"), (k, "k")))
    ridge = number_array(ridge, "ridge", 1e-9)
    sms = None if sms is None or sms == 0 else real_number(sms, "sms", 1.0, 100_000.0)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is refused below, not printed as a warning
        factor = _shape_factor(m, n, k, sms, ridge)
    return finite_result("GEMM shape factor", factor)


def _shape_factor(m, n, k, sms, ridge):
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
            waves = np.ceil(np.ceil(m / rows) * np.ceil(n / cols) / sms)
            wave = np.maximum(wave, reuse * m * n / (waves * sms * rows * cols))
    return np.minimum(wave, roof)


def gemm_efficiency(accelerator, m, n, k) -> float:
    """The share of the dense bf16 peak one GEMM, (m x k) @ (k x n), reaches on a catalog accelerator (name or
    Accelerator): best_gemm_efficiency x gemm_shape_factor_array (tile and wave quantisation over GEMM_SMS SMs, and the
    roofline at the accelerator's HBM bandwidth). The step model prices every weight GEMM with this factor, times the
    fitted TRAINING_MATMUL_SHARE. Lesson 7 §8.

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
    for value, name in ((m, "m"), (n, "n"), (k, "k")):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise ConfigurationError(f"{name}={value!r} must be a number of rows or columns, 1 to 1e9")
        if not 1 <= value <= 1e9:
            raise ConfigurationError(f"{name}={value!r}; valid: 1 to 1e9")
    best = best_gemm_efficiency(acc)
    ridge = best * acc.peak("bf16") / acc.memory_bandwidth
    factor = gemm_shape_factor_array(m, n, k, GEMM_SMS.get(acc.name.strip().lower()), ridge)
    return float(best * factor)


def layer_gemm_slowdown_array(model, tokens, tp, sms, ridge, ep=1, etp=None):
    """1 / the FLOP-weighted shape factor of one layer's weight GEMMs (forward, and the backward's input- and
    weight-gradient GEMMs, each as often), and of the logits, on one GPU: (layer, logits). NumPy broadcast over
    tokens (b s / cp per microbatch), tp, ep, etp. Lesson 7 §8.

    Shapes (forward m x n x k; q = heads x d_head, kv = kv_heads x d_head, f = ffn, g = 2 for a gated MLP):
        QKV T x (q + 2 kv) / tp x h; attention output T x h x q / tp; MLP up T x g f / tp x h; down T x h x f / tp;
        logits T x V / tp x h. Sequence parallelism gathers the full T before each. The backward's input gradient
        is T x k x n, its weight gradient k x n x T (the tokens are the reduction). An MoE layer's routed experts
        (distlab.moe.step.MoEStepModel) run per expert on ep x T x top_k x load / E tokens (load:
        expert_load(ep)), split over etp; shared experts on all T. The weights are each GEMM's FLOPs.

    >>> from distlab import models
    >>> layer, logits = layer_gemm_slowdown_array(models.model('llama3.1-8b'), 8192, 1, 132, 237.0)
    >>> round(float(layer), 3), round(float(logits), 3)
    (1.028, 1.012)
    """
    from ._arguments import finite_result, number_array, real_number

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
        layer, logits = _layer_slowdown(
            model,
            pick[0],
            pick[1],
            sms,
            ridge,
            pick[2],
            None if etp is None else np.broadcast_to(etp, shape).ravel()[first],
        )
        inverse = np.ravel(inverse)
        return layer[inverse].reshape(shape), logits[inverse].reshape(shape)
    layer, logits = _layer_slowdown(model, tokens, tp, sms, ridge, ep, etp)
    return finite_result("GEMM slowdown", layer), finite_result("GEMM slowdown", logits)


def _layer_slowdown(model, tokens, tp, sms, ridge, ep, etp):
    """layer_gemm_slowdown_array on checked arrays (its shapes as the docstring there lists them)."""
    h = float(model.hidden)
    d = float(getattr(model, "head_dim", model.hidden // model.heads))
    q, kv = float(model.heads) * d, float(model.kv_heads) * d
    g = 2.0 if model.gated_mlp else 1.0

    def slow(m, n, k):  # mean over the three passes of 1 / factor
        f = _shape_factor
        return (1.0 / f(m, n, k, sms, ridge) + 1.0 / f(m, k, n, sms, ridge) + 1.0 / f(k, n, m, sms, ridge)) / 3.0

    parts = [(q + 2.0 * kv) * h, q * h]
    slows = [slow(tokens, (q + 2.0 * kv) / tp, h), slow(tokens, h, q / tp)]
    moe = getattr(model, "moe", None)
    if moe is None:
        f = float(model.ffn)
        parts += [g * f * h, f * h]
        slows += [slow(tokens, g * f / tp, h), slow(tokens, h, f / tp)]
    else:
        ef = float(moe.expert_ffn)
        split = tp if etp is None else etp
        routed = np.maximum(1.0, np.asarray(ep, dtype=float) * tokens * moe.top_k * model.expert_load(ep) / moe.experts)
        parts += [moe.top_k * g * ef * h, moe.top_k * ef * h]
        slows += [slow(routed, g * ef / split, h), slow(routed, h, ef / split)]
        if moe.shared_experts:
            parts += [moe.shared_experts * g * ef * h, moe.shared_experts * ef * h]
            slows += [slow(tokens, moe.shared_experts * g * ef / tp, h), slow(tokens, h, moe.shared_experts * ef / tp)]
    layer = sum(w * x for w, x in zip(parts, slows)) / sum(parts)
    return layer, slow(tokens, float(model.vocab) / tp, h)


def fixed_compute_model(efficiency, attention="flash", kernels="fused") -> ComputeModel:
    """The simple model of Lesson 7 §1: every FLOP at one share of peak, no element-wise traffic.

    >>> fixed_compute_model(0.5).describe()
    'fixed efficiency: every FLOP at 50% of peak, element-wise work not priced (flash attention for memory)'
    """
    from ._arguments import check_fraction

    eff = check_fraction(efficiency, "efficiency")
    return ComputeModel(eff, eff, 0.0, _attention(attention), False, _kernels(kernels))


def _rotary(model) -> bool:
    """Whether the model's positions are rotary (RoPE): a recorded rotary base, or no position table with
    RMSNorm (the Llama family; the catalog's ALiBi models, BLOOM and MPT, use LayerNorm)."""
    if getattr(model, "rope_theta", None) is not None:
        return True
    return int(getattr(model, "position_embeddings", 0)) == 0 and getattr(model, "norm", "") == "rmsnorm"


def elementwise_bytes_per_token(
    model, seq_len, tp=1, sequence_parallel=False, attention="flash", kernels="fused", element_bytes=2.0
):
    """HBM bytes the memory-bound element-wise kernels of ONE layer's forward pass move per token, on one GPU,
    counted kernel by kernel (what each reads and writes; e = element_bytes, fp32 = 4 B). Lesson 7 §8.

    Per token; h-wide tensors divide by tp under sequence parallelism, the others (q = heads x d_head,
    kv = kv_heads x d_head, f = ffn, the a x s scores) always by tp:

        kernel                       fused / compiled            eager (one kernel per PyTorch operator)
        norm, x2                     read e h, write e h         LayerNorm the same (one native kernel);
                                                                 RMSNorm in fp32 (Meta's reference, torchtitan,
                                                                 torch.rms_norm): to-fp32 e+4, x^2 8, mean 4,
                                                                 x*rsqrt 8, to-bf16 4+e, *weight 2e: (28 + 4e) h
        residual add, x2             read 2e h, write e h; dropout's 1-byte mask h more (fused bias-dropout-add;
                                     eager's separate dropout kernel: 2e h + h)
        MLP activation               GeLU 2e f; SwiGLU 3e f      SwiGLU: SiLU 2e f + product 3e f = 5e f
        RoPE (rotary models)         2e (q + kv)                 complex fp32 product: (16 + 2e)(q + kv)
        GQA K/V repeat (kv < q)      none (read in place)        repeat_kv materialises K and V: 2e (kv + q)
        unfused attention            softmax 2e a s, dropout (2e + 1) a s, context permute 2e q; flash: none

    The backward moves about twice the forward's bytes (each kernel reads its output gradient and saved input,
    writes its input gradient): the step model prices 3 passes, 4 with full recomputation, at MEMORY_TRAFFIC x
    these bytes / HBM bandwidth. 'compiled' (torch.compile) is counted as 'fused'.

    Llama 3.1 8B (h 4096, q 4096, kv 1024, f 14,336), bf16, flash, tp 1: fused 2 x 4e h + 2 x 3e h + 3e f +
    2e (q + kv) = 81,920 + 86,016 + 20,480 = 188,416 B; eager 2 x 36 h + 2 x 3e h + 5e f + 20 (q + kv) +
    2e (kv + q) = 344,064 + 143,360 + 102,400 + 20,480 = 610,304 B, 3.2x the fused count.

    >>> int(elementwise_bytes_per_token('llama3.1-8b', 8192)), int(elementwise_bytes_per_token('llama3.1-8b', 8192,
    ...     kernels='eager'))
    (188416, 610304)
    """
    from .models import model as catalog_model

    if isinstance(model, str):
        model = catalog_model(model)
    kind = _kernels(kernels)
    flash = _attention(attention) == "flash" if isinstance(attention, str) else attention
    return elementwise_bytes_array(
        model, seq_len, tp, sequence_parallel, flash, ELEMENTWISE_KERNELS.index(kind), element_bytes
    )


def elementwise_bytes_array(model, seq_len, tp, sequence_parallel, flash, kernels_code, element_bytes):
    """elementwise_bytes_per_token on NumPy arrays (broadcast; sequence_parallel and flash as 0/1 or booleans): the
    step model's and the planner's path. kernels_code indexes ELEMENTWISE_KERNELS. Lesson 7 §8.

    >>> from distlab import models
    >>> float(elementwise_bytes_array(models.model('llama3.1-8b'), 8192, 1, False, True, 2, 2.0))
    610304.0
    """
    from ._arguments import code_array, finite_result, number_array
    from .units import positive

    if not all(hasattr(model, a) for a in ("hidden", "heads", "ffn", "kv_heads", "dropout", "gated_mlp")):
        raise ConfigurationError(f"model={model!r} must be a TransformerModel (see distlab.models.model)")
    seq_len = number_array(seq_len, "seq_len", 1.0)
    tp = number_array(tp, "tp", 1.0)
    sequence_parallel = number_array(sequence_parallel, "sequence_parallel")
    flash = number_array(flash, "flash")
    kernels_code = code_array(kernels_code, "kernels_code", ELEMENTWISE_KERNELS)
    e = float(positive(element_bytes, "B", "element_bytes"))
    h, a, f = float(model.hidden), float(model.heads), float(model.ffn)
    d = float(getattr(model, "head_dim", model.hidden // model.heads))
    q, kv = a * d, float(model.kv_heads) * d
    mask = 1.0 if model.dropout else 0.0
    eager = np.asarray(kernels_code) == 2
    tp = np.asarray(tp, dtype=float)
    sp_div = np.where(np.asarray(sequence_parallel, dtype=bool), tp, 1.0)
    rms = getattr(model, "norm", "layernorm") == "rmsnorm"
    norm = np.where(eager & rms, (28.0 + 4.0 * e) * h, 2.0 * e * h)
    residual = 3.0 * e * h + mask * h + np.where(eager, mask * 2.0 * e * h, 0.0)
    replicated = 2.0 * norm + 2.0 * residual
    if model.gated_mlp:
        activation = np.where(eager, 5.0 * e * f, 3.0 * e * f)
    else:
        activation = np.full(np.shape(eager), 2.0 * e * f)
    rope = np.where(eager, 16.0 + 2.0 * e, 2.0 * e) * (q + kv) if _rotary(model) else 0.0
    repeat = np.where(eager, 2.0 * e * (kv + q), 0.0) if kv < q else 0.0
    scores = a * np.asarray(seq_len, dtype=float) * (2.0 * e + (2.0 * e + 1.0) * mask) + 2.0 * e * q
    split = activation + rope + repeat + np.where(np.asarray(flash, dtype=bool), 0.0, scores)
    return finite_result("element-wise bytes", replicated / sp_div + split / tp)


def loss_bytes_per_token(vocab, element_bytes=2.0) -> float:
    """HBM bytes the cross-entropy loss moves per token over a vocabulary of V logits (of element_bytes each), forward
    and backward together, counted kernel by kernel as Megatron-LM's vocab-parallel cross-entropy runs it on fp32
    logits (PyTorch's F.cross_entropy on upcast logits moves about as much). Lesson 7 §8.

        forward:  upcast (e + 4) V, max 4V, subtract 8V, exp 8V, sum 4V, normalise 8V      = (36 + e) V
        backward: scale the saved softmax by the loss gradient 8V, cast back (4 + e) V      = (12 + e) V

    Divided by tp (the vocabulary is split over the tensor-parallel GPUs); the step model charges it to the stage
    holding the logits, at MEMORY_TRAFFIC x these bytes / HBM bandwidth. Llama 3 8B, bf16: 52 x 128,256.

    >>> loss_bytes_per_token(128256)
    6669312.0
    """
    from ._arguments import finite_result
    from .units import positive

    e, v = positive(element_bytes, "B", "element_bytes"), positive(vocab, "", "vocab")
    return float(finite_result("loss bytes", (48.0 + 2.0 * e) * v))
