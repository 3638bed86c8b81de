"""Expert GEMMs: how an engine runs the routed experts an MoE layer places on one GPU, by how many of their GEMMs run
at once (CONCURRENT_GEMMS):

    sequential    one GEMM per expert, one after another: Megatron-Core's SequentialMLP (its default,
                  TransformerConfig.moe_grouped_gemm = False), DeepSpeed-MoE's Experts module (a loop over the local
                  experts, deepspeed/moe/experts.py at edaa7221). Each expert's GEMM has its own tile and wave
                  quantisation, so a few hundred tokens per expert leave most SMs idle.
    multi-stream  one cuBLAS GEMM per expert, round-robin over 4 CUDA streams, up to 4 at once: Megatron-Core's
                  --moe-grouped-gemm (TEGroupedMLP, Transformer Engine's GroupedLinear), whose default path is
                  multi_stream_cublas_gemm over num_compute_streams = 4 (TransformerEngine at d0067d0,
                  common/util/multi_stream.cpp and common/gemm/cublaslt_gemm.cu; one CUTLASS grouped kernel only with
                  NVTE_USE_CUTLASS_GROUPED_GEMM=1 on Hopper). Megatron-LM's MoE README lists the flag among those to
                  enable "on almost all workloads" (General Performance Tips), its Mixtral example sets it, NVIDIA's
                  Megatron Bridge Qwen3 and DeepSeek recipes set it (Megatron-Bridge at 067f987d), and distlab's
                  Megatron export writes it (distlab.moe.export).
    grouped       the GPU's E / ep experts in one grouped-GEMM launch: torchtitan's MoE (torch._grouped_mm,
                  torchtitan/models/common/moe.py at b5bcd76c), MegaBlocks' dMoE under llm-foundry (mlp_impl 'sparse',
                  block-sparse kernels over all local experts, megablocks v0.10.0 layers/arguments.py), Transformer
                  Engine's CUTLASS path and its fused CuTe-DSL grouped MLP (Megatron Bridge 26.06's Blackwell MoE
                  recipes set cutedsl_fused_grouped_mlp; the validation runs that do name 'grouped').

The step model prices each expert GEMM by its shape (efficiency.gemm_shape_factor_array); G GEMMs running at once
share the SMs' waves, waves = ceil(G x tiles per GEMM / SMs), and each keeps its own roofline (every expert reads its
own weights). Eight experts' 256 x 1024 x 4096 GEMMs on an H100 reach 0.121 of the best GEMM rate one at a time and
0.727 at once. Assumed: GEMMs on concurrent streams pack the SMs as one launch would (in practice their launches are
staggered, so 'multi-stream' is an upper bound on its gain). A dense model has no experts: the choice changes nothing
there.

Engines default to what they run as their MoE recipes configure them (ENGINE_EXPERT_GEMMS, by memory recipe; Megatron's
bare default, without --moe-grouped-gemm, is expert_gemm='sequential'); the ZeRO paper's count, which names no engine,
takes 'sequential', the model before the choice was named.
Lesson 10 §3, Lesson 7 §8.
"""

from __future__ import annotations

import numpy as np

from ._arguments import number_array
from .errors import ConfigurationError

__all__ = [
    "EXPERT_GEMM_NAMES",
    "CONCURRENT_GEMMS",
    "ENGINE_EXPERT_GEMMS",
    "expert_gemm",
    "default_expert_gemm",
    "concurrent_experts",
    "note",
]

#: The choices estimate(expert_gemm=...) takes (module docstring).
EXPERT_GEMM_NAMES = ("sequential", "multi-stream", "grouped")
#: How many of a GPU's expert GEMMs each choice runs at once (None: all of them, one launch).
CONCURRENT_GEMMS = {"sequential": 1, "multi-stream": 4, "grouped": None}
#: Each memory recipe's engine's default, as its MoE runs are configured (module docstring): Megatron-LM with
#: --moe-grouped-gemm (its TransformerConfig.moe_grouped_gemm defaults to False, megatron/core/transformer/
#: transformer_config.py at d98e8a64: expert_gemm='sequential' prices that); PyTorch FSDP2 as torchtitan runs it and
#: FSDP1 as llm-foundry runs MegaBlocks, one launch; DeepSpeed-MoE's loop.
ENGINE_EXPERT_GEMMS = {
    "megatron": "multi-stream",
    "megatron-distributed-optimizer": "multi-stream",
    "megatron-bf16-grads": "multi-stream",
    "megatron-distributed-optimizer-bf16-grads": "multi-stream",
    "megatron-fsdp": "multi-stream",
    "deepspeed": "sequential",
    "fsdp2": "grouped",
    "fsdp2-sp-regather": "grouped",
    "fsdp1": "grouped",
    "fsdp1-pure": "grouped",
}


def expert_gemm(name) -> str:
    """The expert-GEMM choice's name, checked against EXPERT_GEMM_NAMES (our error naming the valid ones). Lesson 10 §3.

    >>> expert_gemm(' Grouped ')
    'grouped'
    """
    key = name.strip().lower() if isinstance(name, str) else None
    if key not in EXPERT_GEMM_NAMES:
        raise ConfigurationError(f"expert_gemm={name!r}; valid: {', '.join(EXPERT_GEMM_NAMES)}")
    return key


def default_expert_gemm(memory_recipe) -> str:
    """How an engine runs a GPU's experts when none is given (ENGINE_EXPERT_GEMMS by memory-recipe name or
    MemoryRecipe; 'sequential' otherwise). Lesson 10 §3.

    >>> default_expert_gemm('megatron'), default_expert_gemm('fsdp2'), default_expert_gemm('zero-paper')
    ('multi-stream', 'grouped', 'sequential')
    """
    name = str(getattr(memory_recipe, "name", memory_recipe)).strip().lower()
    return ENGINE_EXPERT_GEMMS.get(name, "sequential")


def concurrent_experts(choice, local_experts):
    """How many expert GEMMs run at once on a GPU holding `local_experts` (E / ep, NumPy broadcast) under `choice`:
    min(local, CONCURRENT_GEMMS[choice]), at least 1. Lesson 10 §3.

    >>> [concurrent_experts(c, 16.0) for c in EXPERT_GEMM_NAMES]
    [1.0, 4.0, 16.0]
    """
    cap = CONCURRENT_GEMMS[expert_gemm(choice)]
    local = np.maximum(1.0, number_array(local_experts, "local_experts"))
    out = local if cap is None else np.minimum(local, float(cap))
    return float(out) if out.ndim == 0 else out


def note(choice) -> str:
    """One line for a student: how the step time ran an MoE layer's experts (StepEstimate.notes). Lesson 10 §3.

    >>> note('grouped')
    "experts: a GPU's expert GEMMs in one grouped launch, their tiles sharing the SMs (torch._grouped_mm, Transformer Engine's grouped kernels)"
    """
    key = expert_gemm(choice)
    if key == "grouped":
        return (
            "experts: a GPU's expert GEMMs in one grouped launch, their tiles sharing the SMs (torch._grouped_mm, "
            "Transformer Engine's grouped kernels)"
        )
    if key == "multi-stream":
        return (
            "experts: a GPU's expert GEMMs up to 4 at once on 4 CUDA streams (Transformer Engine's GroupedLinear, "
            "Megatron-Core's --moe-grouped-gemm), priced as if their tiles shared the SMs' waves as one launch would "
            "(an upper bound on the gain)"
        )
    return (
        "experts: one GEMM per expert, one after another (Megatron-Core's SequentialMLP, without "
        "--moe-grouped-gemm; DeepSpeed-MoE's loop)"
    )
