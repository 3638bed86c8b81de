"""Attention kernels: the rate the attention core runs at, by kernel, GPU, sequence length and direction.

The step model prices the attention core (QK^T and AV) with flash attention as the kernel executes it
(flash_attention_work_array: a causal kernel skips the masked half; its backward, 2.5 x the forward, recomputes the
scores) at the kernel's measured rate on the GPU, a share of the dense 16-bit peak. The kernels distlab knows
(ATTENTION_KERNEL_NAMES):

    flash   FlashAttention-2's best forward + backward figure on each GPU (Dao 2023; FLASH_ATTENTION_RATE), one rate for
            every sequence length: distlab's model before the kernels were named, kept as the default of an engine
            without a stated kernel
    fa2     FlashAttention-2, by sequence length and direction
    sdpa    PyTorch's scaled_dot_product_attention: its flash backend (FlashAttention-2's kernels, fa2's rates) on
            Ampere and Hopper; on Blackwell (sm100, sm103) PyTorch and torchtitan put its cuDNN backend first (cudnn's)
    cudnn   cuDNN's fused attention (what Transformer Engine runs for Megatron-Core and NeMo)
    fa3     FlashAttention-3 (Hopper only)
    fa4     FlashAttention-4 (Blackwell; CuTe-DSL)
    fa2-unpad  llm-foundry's flash_attn_fn (attn_impl 'flash'): FlashAttention-2's varlen kernel at fa2's rates, behind
            an unpad of q, k, v and a pad of the output on every call (UNPAD_KERNELS: the copies are priced as
            element-wise traffic, unpad_copy_bytes_per_token)

fa2, cudnn and fa3 rates are Shah et al. 2024 (FlashAttention-3, arXiv 2407.08608) Fig. 5 (forward, causal, head dim
128) and Fig. 6 (backward, head dim 128) on an H100 80GB SXM5, BF16, at 512-16k tokens (KERNEL_RATES; the figures'
bar labels, published_runs.json microbenchmarks "shah2024-fa3-*"), read by sequence length (kernel_rates: linear in
log2 s between the measured lengths, the end values beyond them). On Blackwell they are Zadouri et al. 2026
(FlashAttention-4, arXiv 2603.05451) Figs. 4 and 6, causal panels, head dim 128, on a B200 at 1k-32k tokens (FA2,
cuDNN 9.13.0, FA4; BLACKWELL_KERNELS): forward and backward both with the causal mask. GB200 takes the B200's shares
of its peak; GB300 those x its measured speed-up over GB200 (GB300_ATTENTION_SPEEDUP). The H100 paper's backward
figure is not causal: the causal backward distlab prices there is that figure x CAUSAL_BACKWARD_RATIO, the causal over the non-causal backward rate that distlab
measured on an H200 (the H100's die) for FA2 and cuDNN (0.63-0.67 at 512 tokens, 0.80-0.84 at 2k, about 1 at 16k:
a causal kernel's diagonal blocks and uneven work cost more at short sequences). A GPU without a published figure for a kernel (the
A100 has no FA3 or cuDNN Hopper kernels; FA3 does not run on Blackwell; MI300X) falls back to its 'flash' rate, and
kernel_rate_table says so.
Engines default to the kernel they run (ENGINE_KERNELS). Lesson 7 §8.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .elementwise import attention_name
from .errors import ConfigurationError

__all__ = [
    "ATTENTION_KERNEL_NAMES",
    "ENGINE_KERNELS",
    "KERNEL_RATES",
    "KernelFigure",
    "BLACKWELL_KERNELS",
    "GB300_ATTENTION_SPEEDUP",
    "CAUSAL_BACKWARD_RATIO",
    "KERNEL_SEQ_LENS",
    "FLASH_ATTENTION_RATE",
    "FALLBACK_FLASH_ATTENTION_RATE",
    "FLASH_FORWARD_BACKWARD_WORK",
    "UNPAD_KERNELS",
    "attention_kernel",
    "attention_kernel_for",
    "default_attention_kernel",
    "unpad_copy_bytes_per_token",
    "kernel_rates",
    "kernel_rate_table",
    "flash_attention_rate",
    "flash_attention_work_array",
]

#: The attention kernels estimate(attention_kernel=...) takes (module docstring).
ATTENTION_KERNEL_NAMES = ("flash", "fa2", "fa3", "fa4", "cudnn", "sdpa", "fa2-unpad")
#: The kernels whose engine wrapper copies q, k, v and the output around the kernel on every call: llm-foundry's
#: flash_attn_fn (llmfoundry/models/layers/attention.py at 5e85bd62d) unpads them with flash_attn.bert_padding's
#: unpad_input (over a mask of ones) and pads the output with pad_input around flash_attn_varlen_func.
UNPAD_KERNELS = ("fa2-unpad",)
#: The kernel each engine (memory_recipes name) runs when none is given: Megatron-Core and NeMo use Transformer
#: Engine's cuDNN fused attention on H100 (NVTE_FUSED_ATTN=1 in NVIDIA's DGX Cloud recipes, dgxc-benchmarking
#: nemotron/configure.sh at 1b9bb6b3); torchtitan's FSDP2 calls torch.nn.functional.scaled_dot_product_attention
#: (sdpa: the flash backend); Composer / llm-foundry's FSDP1 runs MPT with attn_impl 'flash' (llm-foundry's
#: attn_config_defaults, 'attn_impl': 'flash': fa2-unpad; a run on attn_impl 'triton' names its kernel); DeepSpeed and
#: the ZeRO paper's count state no kernel: 'flash'.
ENGINE_KERNELS = {
    "megatron": "cudnn",
    "megatron-distributed-optimizer": "cudnn",
    "megatron-bf16-grads": "cudnn",
    "megatron-distributed-optimizer-bf16-grads": "cudnn",
    "megatron-fsdp": "cudnn",
    "fsdp2": "sdpa",
    "fsdp2-sp-regather": "sdpa",
    "fsdp1": "fa2-unpad",
    "fsdp1-pure": "fa2-unpad",
}
#: The sequence lengths of Shah et al. 2024 Figs. 5-6 (batch x seqlen = 16k tokens, hidden 2048, head dim 128).
KERNEL_SEQ_LENS = (512, 1024, 2048, 4096, 8192, 16384)


@dataclass(frozen=True)
class KernelFigure:
    """A kernel's published rates on one GPU: TFLOP/s of the causal forward and of the backward at `seq_lens` (on the
    papers' FLOP count), `peak_tflops` the figure's GPU's dense 16-bit peak (rates are used as its share); the backward
    is causal where `causal_backward`, else scaled to the mask by CAUSAL_BACKWARD_RATIO; `forward_scale` and
    `backward_scale`, per length, carry the figure to a faster GPU of the same family (GB300_ATTENTION_SPEEDUP)."""

    source: str
    seq_lens: tuple
    forward: tuple
    backward: tuple
    peak_tflops: float
    causal_backward: bool = False
    forward_scale: tuple = ()
    backward_scale: tuple = ()

    def shares(self, kernel: str) -> tuple:
        """(sequence lengths, causal forward shares, causal backward shares) of the peak."""
        n = len(self.seq_lens)
        ratio = (1.0,) * n if self.causal_backward else CAUSAL_BACKWARD_RATIO[kernel]
        up, back = self.forward_scale or (1.0,) * n, self.backward_scale or (1.0,) * n
        forward = tuple(f / self.peak_tflops * u for f, u in zip(self.forward, up))
        backward = tuple(b * r / self.peak_tflops * u for b, r, u in zip(self.backward, ratio, back))
        return self.seq_lens, forward, backward


#: The figures' peak, the H100 SXM5's dense BF16 989.4 TFLOP/s (hardware catalog): rates are used as its share.
_FIGURE_PEAK_TFLOPS = 989.4
#: TFLOP/s (forward with a causal mask, backward) per kernel on the H100 80GB SXM5, head dim 128, BF16, at
#: KERNEL_SEQ_LENS: Shah et al. 2024 Fig. 5 (causal panel, head dim 128) and Fig. 6 (head dim 128; the paper's
#: backward figure has no causal panel: its rates are applied to the causal backward, an assumption). On the papers'
#: FLOP count (causal forward 2 s^2 a d, backward 2.5 x that). sdpa runs FlashAttention-2's kernels. The H100's die
#: (h200, torchtitan's 96 GB part) takes the same share of its own peak (an assumption, as for the GEMMs).
_H100_KERNELS = {
    name: KernelFigure(source, KERNEL_SEQ_LENS, forward, backward, _FIGURE_PEAK_TFLOPS)
    for name, (source, forward, backward) in {
        "fa2": ("shah2024-fa3-fig5-6-h100-hd128-fa2", (191, 260, 298, 319, 333, 335), (214, 260, 291, 310, 318, 322)),
        "cudnn": (
            "shah2024-fa3-fig5-6-h100-hd128-cudnn",
            (315, 410, 484, 518, 529, 539),
            (305, 408, 465, 499, 518, 516),
        ),
        "fa3": ("shah2024-fa3-fig5-6-h100-hd128-fa3", (292, 423, 521, 579, 602, 616), (316, 424, 501, 542, 559, 561)),
    }.items()
}
_H100_KERNELS["sdpa"] = _H100_KERNELS["fa2-unpad"] = _H100_KERNELS["fa2"]
#: TFLOP/s of the backward with and without a causal mask, (causal, non-causal) at KERNEL_SEQ_LENS, measured by distlab
#: on one NVIDIA H200 SXM (the H100's die and tensor-core peak), PyTorch 2.11.0+cu130's scaled_dot_product_attention on
#: its flash backend (FlashAttention-2's kernels: fa2, sdpa, fa2-unpad) and its cuDNN backend, head dim 128, 16,384 tokens
#: per batch, hidden 2048 (Shah et al.'s setting), the two masks back to back, on the paper's FLOP count (backward 2.5 x
#: the forward, halved for causal): benchmarks/gpu_microbench.py measure, raw benchmarks/results/h200-2026-11-29-sweep.json,
#: published_runs.json microbenchmarks "distlab-h200-sdpa-causal-backward-*". fa3 takes cuDNN's ratio (FlashAttention-3
#: was not installed there; both are Hopper warp-specialised kernels: an assumption). Lesson 7 §8.
_CAUSAL_BACKWARD = {
    "fa2": (
        "distlab-h200-sdpa-causal-backward-fa2",
        (117.3, 167.9, 217.5, 253.6, 280.9, 310.9),
        (175.6, 223.6, 258.7, 285.5, 299.5, 307.0),
    ),
    "cudnn": (
        "distlab-h200-sdpa-causal-backward-cudnn",
        (210.2, 312.9, 415.5, 486.7, 535.9, 590.0),
        (333.1, 443.9, 522.6, 568.3, 566.9, 546.0),
    ),
}
#: The causal backward's rate over the non-causal one, per kernel, at KERNEL_SEQ_LENS (_CAUSAL_BACKWARD's measurement).
CAUSAL_BACKWARD_RATIO = {
    kernel: tuple(c / n for c, n in zip(_CAUSAL_BACKWARD[base][1], _CAUSAL_BACKWARD[base][2]))
    for kernel, base in (("fa2", "fa2"), ("sdpa", "fa2"), ("fa2-unpad", "fa2"), ("cudnn", "cudnn"), ("fa3", "cudnn"))
}
#: The sequence lengths of Zadouri et al. 2026 Figs. 4 and 6 (B200, 32k tokens per batch, hidden 2048, head dim 128).
BLACKWELL_SEQ_LENS = (1024, 2048, 4096, 8192, 16384, 32768)
#: Their GPU's peak, the B200's dense BF16 2,250 TFLOP/s (hardware catalog): rates are used as its share.
_B200_PEAK_TFLOPS = 2250.0
#: TFLOP/s (causal forward, causal backward) per kernel on a B200, head dim 128, BF16, at BLACKWELL_SEQ_LENS: Zadouri
#: et al. 2026 (FlashAttention-4, arXiv 2603.05451) Fig. 4 and Fig. 6, causal panels, the bars' printed labels
#: (published_runs.json "zadouri2026-fa4-fig4-6-b200-hd128-*"): FlashAttention-2 2.8.3, cuDNN 9.13.0 (the release before
#: the Megatron Bridge 25.11 containers of the validation runs; 9.19.1 in the same figures is 10-20% faster at 1k-8k),
#: FlashAttention-4. sdpa takes cuDNN's: on sm100 torchtitan puts PyTorch's cuDNN backend first (pytorch/torchtitan
#: PR #1196, "Use cudnn backend on B200", merged 2025-05-14) and PyTorch prefers it on sm100 and sm103 (pytorch/pytorch
#: PR #170800). GB200 (the B200's dies at a higher power limit) takes the B200's shares of its own peak (checked with
#: NVIDIA's cuDNN 9.19 harness: within 3% at 8k-32k, "nvidia-cudnn-frontend-sdpa-gb200-gb300-cudnn919"). Lesson 7 §8.
BLACKWELL_KERNELS = {
    name: KernelFigure(
        f"zadouri2026-fa4-fig4-6-b200-hd128-{name}", BLACKWELL_SEQ_LENS, forward, backward, _B200_PEAK_TFLOPS, True
    )
    for name, (forward, backward) in {
        "fa2": ((292, 343, 375, 395, 404, 408), (208, 252, 295, 323, 341, 355)),
        "cudnn": ((717, 929, 1076, 1168, 1285, 1266), (543, 732, 893, 1008, 1085, 1142)),
        "fa4": ((744, 1053, 1279, 1426, 1526, 1576), (614, 887, 1102, 1284, 1402, 1446)),
    }.items()
}
BLACKWELL_KERNELS["fa2-unpad"] = BLACKWELL_KERNELS["fa2"]
BLACKWELL_KERNELS["sdpa"] = BLACKWELL_KERNELS["cudnn"]
#: GB300 (Blackwell Ultra: 32 exponentials per clock per SM against 16, Zadouri et al. 2026 §2.2; the same 2,500 dense
#: BF16 TFLOP/s as GB200) over GB200, cuDNN 9.19.1 on both in NVIDIA's own harness (NVIDIA/cudnn-frontend
#: benchmark/sdpa_benchmark_training, gb200_919_only_cudnn and gb300_919_only_cudnn llama3.1 CSVs, causal bf16 rows;
#: "nvidia-cudnn-frontend-sdpa-gb200-gb300-cudnn919"): (forward, backward) at 2k, 4k, 8k, 16k, 32k tokens, 1k taken as
#: 2k. GB300's cuDNN and FA4 rates are GB200's x these (FA4's own GB300 runs gain about as much, an assumption);
#: FlashAttention-2's tensor-core-bound kernels are taken at GB200's. 1.17-1.25x forward, 1.05-1.08x backward, not the
#: 2x NVIDIA's blog claims for the attention layer. Lesson 7 §8.
_GB200_GB300_CUDNN = {
    "gb200": ((1042, 1335, 1598, 1687, 1720), (836, 1132, 1311, 1402, 1473)),
    "gb300": ((1266, 1672, 1887, 1968, 2014), (906, 1195, 1385, 1490, 1549)),
}


def _gb300_speedup(direction: int) -> tuple:
    """GB300 / GB200 rates of one direction (0 forward, 1 backward) at BLACKWELL_SEQ_LENS (1k taken as 2k)."""
    ratios = tuple(
        u / g for u, g in zip(_GB200_GB300_CUDNN["gb300"][direction], _GB200_GB300_CUDNN["gb200"][direction])
    )
    return (ratios[0], *ratios)


GB300_ATTENTION_SPEEDUP = (_gb300_speedup(0), _gb300_speedup(1))
_GB300_KERNELS = {
    name: (
        KernelFigure(f.source, f.seq_lens, f.forward, f.backward, f.peak_tflops, True, *GB300_ATTENTION_SPEEDUP)
        if name in ("cudnn", "sdpa", "fa4")
        else f
    )
    for name, f in BLACKWELL_KERNELS.items()
}
KERNEL_RATES = {
    **{name: _H100_KERNELS for name in ("h100-sxm", "h200", "h100-sxm-96gb-hbm2e-500w")},
    "b200": BLACKWELL_KERNELS,
    "gb200": BLACKWELL_KERNELS,
    "gb300": _GB300_KERNELS,
}
#: Attention-core rate with flash attention, per catalog accelerator, as a share of the dense peak: published
#: microbenchmarks of FlashAttention-2 (what torchtitan's SDPA flash backend and MPT's flash attention run; an engine on
#: FlashAttention-3 or cuDNN's Hopper kernels is faster on H100), not fitted. The rate is on the paper's own FLOP count
#: (flash_attention_work_array: with a causal mask the scores are halved, the backward is 2.5 x the forward).
#: A100: FlashAttention-2 reaches 50-73% of peak (Dao 2023, arXiv 2307.08691, abstract and Sec. 4.1, Figs. 4-6); the
#: low end is taken (forward + backward, its backward the slower pass, up to 63%; causal and short sequences lowest).
#: H100: "we obtain up to 335 TFLOPs/s" forward + backward (same paper, Sec. 4.1, Fig. 7), 335 / 989.4 = 0.339, its
#: best setting (so, if anything, optimistic; Shah et al. 2024, FlashAttention-3, arXiv 2407.08608, abstract: "only 35%
#: utilization on the H100"). H200 and torchtitan's 96 GB H100 share the H100's die. B200: FlashAttention-2 2.8.3's best,
#: non-causal at 32k tokens, forward 432 and backward 386 TFLOP/s (Zadouri et al. 2026, Figs. 4 and 6), forward +
#: backward 3.5 / (1 / 432 + 2.5 / 386) = 398.1 of 2,250, 0.177: FA2's Ampere-style kernels reach half their Hopper share
#: on Blackwell; GB200 and GB300 take the B200's share. Lesson 7 §8.
_B200_FA2_BEST = 3.5 / (1 / 432 + 2.5 / 386) / _B200_PEAK_TFLOPS
FLASH_ATTENTION_RATE = {
    "a100-40gb": ("dao2023-flashattention2-a100", 0.50),
    "a100-80gb": ("dao2023-flashattention2-a100", 0.50),
    "h100-sxm": ("dao2023-flashattention2-h100", 335.0 / 989.4),
    "h200": ("dao2023-flashattention2-h100", 335.0 / 989.4),
    "h100-sxm-96gb-hbm2e-500w": ("dao2023-flashattention2-h100", 335.0 / 989.4),
    **{name: ("zadouri2026-fa4-b200-fa2-best", _B200_FA2_BEST) for name in ("b200", "gb200", "gb300")},
}
#: For an accelerator without a published flash-attention figure (mi300x, h100-pcie, a custom one): the H100's 0.339,
#: so that an unmeasured GPU is not assumed better than the H100's measured one. Lesson 7 §8.
FALLBACK_FLASH_ATTENTION_RATE = 335.0 / 989.4
#: The work a flash-attention kernel executes, per unit of its causal forward FLOPs (Dao 2023, Sec. 4.1: forward
#: f = 4 s^2 d a, "with causal mask, we divide this number by 2", backward 2.5 f "since there are 2 matmuls in the
#: forward pass and 5 matmuls in the backward pass, due to recomputation"; flash-attention's
#: benchmarks/benchmark_flash_attention.py counts the same): forward + backward 3.5 f. Lesson 7 §8.
FLASH_FORWARD_BACKWARD_WORK = 3.5


def flash_attention_rate(accelerator) -> float:
    """Flash attention's forward + backward rate / dense peak on a catalog accelerator (name or Accelerator), on
    flash-attention's own FLOP count (FLASH_ATTENTION_RATE; FALLBACK_FLASH_ATTENTION_RATE without a figure).
    Lesson 7 §8.

    >>> flash_attention_rate('a100-80gb'), round(flash_attention_rate('h100-sxm'), 3), round(flash_attention_rate('b200'), 3)
    (0.5, 0.339, 0.177)
    """
    if not isinstance(getattr(accelerator, "name", accelerator), str):
        raise ConfigurationError(f"accelerator={accelerator!r} must be a catalog accelerator name or an Accelerator")
    entry = FLASH_ATTENTION_RATE.get(str(getattr(accelerator, "name", accelerator)).strip().lower())
    return FALLBACK_FLASH_ATTENTION_RATE if entry is None else entry[1]


def flash_attention_work_array(core_forward_flops, recomputed):
    """The FLOPs a causal flash-attention kernel executes for one layer's training step, given the attention core's
    counted (full, unmasked) forward FLOPs 4 b s^2 a d: it skips the masked half, 2 b s^2 a d, and its backward
    recomputes the scores, so forward + backward execute FLASH_FORWARD_BACKWARD_WORK = 3.5 x that half, and a
    recomputed forward (recomputed true) one half more; recomputed a share in [0, 1] (partial-layer recomputation,
    distlab.partial_recompute: the share of the layers recomputed) adds that share of a half, on average per layer. The step model divides this by flash_attention_rate x peak.
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
    again = np.minimum(number_array(recomputed, "recomputed"), 1.0)  # True: 1; a share of the layers: itself
    return finite_result("flash-attention work", (FLASH_FORWARD_BACKWARD_WORK + again) * half)


def attention_kernel(name) -> str:
    """The attention kernel's name, checked against ATTENTION_KERNEL_NAMES (our error naming the valid ones)."""
    key = name.strip().lower() if isinstance(name, str) else None
    if key not in ATTENTION_KERNEL_NAMES:
        raise ConfigurationError(f"attention_kernel={name!r}; valid: {', '.join(ATTENTION_KERNEL_NAMES)}")
    return key


def attention_kernel_for(attention, kernel):
    """The attention kernel of an attention kind: kernel checked (distlab.attention_kernels) with flash attention;
    None with unfused attention, which runs no flash kernel (a kernel other than None or 'flash' is refused)."""
    if attention_name(attention) == "unfused":
        if kernel not in (None, "flash"):
            raise ConfigurationError(
                f"attention_kernel={kernel!r} names a flash-attention kernel; attention='unfused' runs none "
                "(valid: attention_kernel=None)"
            )
        return None
    return attention_kernel("flash" if kernel is None else kernel)


def default_attention_kernel(memory_recipe) -> str:
    """The kernel an engine runs when none is given (ENGINE_KERNELS by memory-recipe name; 'flash' otherwise).

    >>> default_attention_kernel('megatron'), default_attention_kernel('fsdp2'), default_attention_kernel('zero-paper')
    ('cudnn', 'sdpa', 'flash')
    """
    name = str(getattr(memory_recipe, "name", memory_recipe)).strip().lower()
    return ENGINE_KERNELS.get(name, "flash")


def kernel_rate_table(accelerator, kernel):
    """(table, note) for a kernel on a catalog accelerator (name or Accelerator): table = (sequence lengths, causal
    forward shares, causal backward shares of the dense 16-bit peak) from KERNEL_RATES, the backward's x
    CAUSAL_BACKWARD_RATIO, or None where the kernel is 'flash' or the GPU has no published figure for it; note says
    which figure is used (empty for a measured one). Lesson 7 §8.

    >>> table, note = kernel_rate_table('h100-sxm', 'cudnn')
    >>> round(table[1][2], 3), round(table[2][2], 3), note  # 484 and 465 x 415.5 / 522.6 = 369.7 of 989.4 at 2k tokens
    (0.489, 0.374, '')
    >>> kernel_rate_table('a100-80gb', 'fa3')[1]
    "no published fa3 rate on a100-80gb: FlashAttention-2's measured 50.0% of peak used (distlab.attention_kernels)"
    """
    if not isinstance(getattr(accelerator, "name", accelerator), str):
        raise ConfigurationError(f"accelerator={accelerator!r} must be a catalog accelerator name or an Accelerator")
    name = str(getattr(accelerator, "name", accelerator)).strip().lower()
    kernel = attention_kernel(kernel)
    entry = KERNEL_RATES.get(name, {}).get(kernel)
    if entry is not None:
        return entry.shares(kernel), ""
    if kernel == "flash":
        return None, "" if name in FLASH_ATTENTION_RATE else f"{_flash_rate_words(name)} (distlab.attention_kernels)"
    return None, f"no published {kernel} rate on {name}: {_flash_rate_words(name)} (distlab.attention_kernels)"


def _flash_rate_words(name: str) -> str:
    """Which FlashAttention-2 figure a GPU's attention runs at: its own measured one, or the H100's, borrowed."""
    rate = 100 * flash_attention_rate(name)
    if name in FLASH_ATTENTION_RATE:
        return f"FlashAttention-2's measured {rate:.1f}% of peak used"
    return f"the H100's FlashAttention-2 {rate:.1f}% of peak borrowed (no published flash-attention figure on {name})"


def kernel_rates(table, seq_len):
    """(forward, backward) shares of peak of a kernel_rate_table at seq_len tokens (NumPy broadcast): linear in log2
    of the sequence length between the measured lengths, the end values beyond them. Lesson 7 §8.

    >>> t, _ = kernel_rate_table('h100-sxm', 'fa3')
    >>> [round(float(x) * 989.4) for x in kernel_rates(t, 8192)], [round(float(x) * 989.4) for x in kernel_rates(t, 3000)]
    ([602, 528], [553, 435])
    """
    from ._arguments import number_array

    seqs, forward, backward = table
    x = np.log2(np.asarray(number_array(seq_len, "seq_len", 1.0), dtype=float))
    grid = np.log2(np.asarray(seqs, dtype=float))
    return np.interp(x, grid, forward), np.interp(x, grid, backward)


def unpad_copy_bytes_per_token(kernel, q_width, kv_width, element_bytes=2.0):
    """(forward, backward) HBM bytes per token and layer of an engine's unpad / pad copies around its attention kernel
    (UNPAD_KERNELS; 0 for the others). llm-foundry's flash_attn_fn: the forward gathers q, k, v (read + write each,
    2 (w_q + 2 w_kv) elements) and pads the output (zero fill, read, write: 3 w_q); the backward scatters the three
    gradients into zeros (3 (w_q + 2 w_kv)) and gathers the output's gradient (2 w_q). w_q = heads x head dim on the
    GPU, w_kv = kv heads x head dim. MHA (w_kv = w_q = h) at 2 B: 18 h + 22 h = 40 h bytes (benchmarks/RESULTS.md,
    2026-11-29 issue 30). Lesson 7 §8.

    >>> unpad_copy_bytes_per_token('fa2-unpad', 4096, 4096), unpad_copy_bytes_per_token('fa2', 4096, 4096)
    ((73728.0, 90112.0), (0.0, 0.0))
    """
    if attention_kernel(kernel) not in UNPAD_KERNELS:
        return 0.0, 0.0
    q = np.asarray(q_width, dtype=float)
    qkv = q + 2.0 * np.asarray(kv_width, dtype=float)
    e = float(element_bytes)
    forward, backward = e * (2.0 * qkv + 3.0 * q), e * (3.0 * qkv + 2.0 * q)
    return (float(forward), float(backward)) if forward.ndim == 0 else (forward, backward)
