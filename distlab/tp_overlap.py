"""TP communication overlap by method: how much of sequence parallelism's TP traffic hides under the matmuls.

With sequence parallelism each layer's TP collectives are all-gathers before and reduce-scatters after the
column- and row-parallel matmuls (Korthikanti et al. 2022). An overlap method splits a collective and its matmul
into chunks and runs them as a pipeline, so a chunk's transfer runs beside another chunk's matmul. The methods
distlab knows (TP_OVERLAP_NAMES):

    none         every collective on the critical path (Megatron-Core and torchtitan without overlap)
    userbuffers  Megatron-Core / NeMo --tp-comm-overlap: Transformer Engine's userbuffers, ring-exchange and
                 chunked pipelines on the GPU's SMs (NVIDIA Megatron-Bridge docs/performance-guide.md: "In
                 GEMM-then-ReduceScatter pipeline overlap, a 1x ReduceScatter chunk remains exposed"; "The default SM
                 allocation for communication is 16"; NeMo docs/source/features/optimizations/communication_overlap.rst)
    async-tp     PyTorch async TP (torchtitan --parallelism.enable_async_tensor_parallel, torch.compile's
                 micro-pipeline pass): the all-gather matmul consumes the local shard first and copies each of the
                 other tp - 1 shards from the peers' symmetric memory while the previous one multiplies
                 (torch.distributed._symmetric_memory._pipelined_all_gather_and_consume, Tensor.copy_ on a side
                 stream: copy engines); the matmul reduce-scatter produces one chunk per rank and reduces them on
                 the SMs (_pipelined_produce_and_all2all)

The share hidden: no published measurement of the share of TP traffic either method hides was found (the torchtitan
async-TP benchmark and NVIDIA's recipes report end-to-end speed-ups only, which are validation, never fitted). distlab
takes the conservative reading of the methods' structure: every overlapped collective exposes one of its tp chunks
(the pipeline's fill or drain, as NVIDIA's guide says of the reduce-scatter), so (tp - 1) / tp of the TP traffic that
fits under the stage's matmuls hides, not all of it (hidden_share_array); the rest stays on the critical path.
The SMs: the compute beside the hidden share runs slower by the measured average of Lee et al. 2025
(efficiency.OVERLAP_SLOWDOWN, 18.9%) for both: userbuffers' kernels hold SMs (16 of an H100's 132 by default, 12%,
plus their HBM traffic); async TP's all-gather copies run on copy engines, but its reduce-scatter reduces on the SMs
and the copies contend for HBM, and no published figure separates the two, so the measured average is kept (the
conservative choice). Each engine defaults to its own method (ENGINE_METHODS). Lesson 7 §2, §8.
"""

from __future__ import annotations

import numpy as np

from .efficiency import OVERLAP_SLOWDOWN
from .errors import ConfigurationError

__all__ = [
    "TP_OVERLAP_NAMES",
    "ENGINE_METHODS",
    "SOURCES",
    "tp_overlap_method",
    "hidden_share_array",
    "note",
]

#: The methods estimate(tp_overlap=...) takes; their index is the step model's code (StepConfig.tp_overlap).
TP_OVERLAP_NAMES = ("none", "userbuffers", "async-tp")
#: The method each engine (memory_recipes name) runs with tp_overlap=True: Megatron-Core and NeMo's
#: --tp-comm-overlap (Transformer Engine userbuffers), torchtitan's FSDP2 async TP; DeepSpeed's AutoTP and
#: Composer / llm-foundry's FSDP1 have no TP overlap ('none'). The ZeRO paper's count, which names no engine, takes
#: Megatron's: what tp_overlap=True meant before the methods were named.
ENGINE_METHODS = {"fsdp2": "async-tp", "deepspeed": "none", "fsdp1": "none", "fsdp1-pure": "none"}
#: Where each method's structure is documented (the module docstring quotes them).
SOURCES = {
    "userbuffers": "NVIDIA Megatron-Bridge docs/performance-guide.md (TP communication overlap) at 067f987; "
    "NeMo communication_overlap.rst",
    "async-tp": "PyTorch torch/distributed/_symmetric_memory/__init__.py (_pipelined_all_gather_and_consume, "
    "_pipelined_produce_and_all2all); PyTorch dev-discuss 'Introducing Async Tensor Parallelism in PyTorch' (2024)",
}


def tp_overlap_method(value, memory_recipe=None) -> str:
    """The method name of estimate()'s tp_overlap: False or 'none' -> 'none'; True -> the memory recipe's engine's
    (ENGINE_METHODS, else 'userbuffers'); a name of TP_OVERLAP_NAMES as given. Lesson 7 §2.

    >>> tp_overlap_method(True, 'fsdp2'), tp_overlap_method(True, 'megatron'), tp_overlap_method(False)
    ('async-tp', 'userbuffers', 'none')
    """
    if value is True or value is False or isinstance(value, np.bool_):
        if not value:
            return "none"
        name = str(getattr(memory_recipe, "name", memory_recipe)).strip().lower()
        return ENGINE_METHODS.get(name, "userbuffers")
    key = value.strip().lower() if isinstance(value, str) else None
    if key not in TP_OVERLAP_NAMES:
        raise ConfigurationError(
            f"tp_overlap={value!r}; valid: False, True (the engine's method), {', '.join(map(repr, TP_OVERLAP_NAMES))}"
        )
    return key


def hidden_share_array(code, tp):
    """The share of the TP traffic under the matmuls that a method hides: 0 for 'none' (code 0), (tp - 1) / tp for
    'userbuffers' and 'async-tp' (one of the tp chunks of each collective exposed; module docstring). Lesson 7 §2.

    >>> [float(x) for x in hidden_share_array([0, 1, 2], 8)]
    [0.0, 0.875, 0.875]
    """
    tp = np.asarray(tp, dtype=float)
    return np.where(np.asarray(code) > 0, (tp - 1.0) / np.maximum(tp, 1.0), 0.0)


def note(method: str, tp: int) -> str:
    """One line for a student: what the step time assumes of a TP overlap method (empty for 'none')."""
    if method == "none":
        return ""
    share = float(hidden_share_array(1, tp))
    return (
        f"TP overlap {method}: {100 * share:.1f}% ((tp - 1) / tp) of the TP traffic under the matmuls hidden, one "
        "chunk of each collective exposed: no published measurement of the share hidden was found, so this "
        "conservative reading of the method's structure is used (distlab.tp_overlap); the compute beside it runs "
        f"{100 * OVERLAP_SLOWDOWN[1]:.1f}% slower (efficiency.OVERLAP_SLOWDOWN)"
    )
