"""TP communication overlap by method: how much of sequence parallelism's TP traffic hides under the matmuls.

With sequence parallelism each layer's TP collectives are all-gathers before and reduce-scatters after the
column- and row-parallel matmuls (Korthikanti et al. 2022). An overlap method splits a collective and its matmul
into chunks and runs them as a pipeline, so a chunk's transfer runs beside another chunk's matmul. The methods
distlab knows (TP_OVERLAP_NAMES):

    none         every collective on the critical path (torchtitan without async TP; DeepSpeed's AutoTP;
                 Megatron-LM before 2021-09 or with --no-async-tensor-model-parallel-allreduce)
    userbuffers  Megatron-Core / NeMo --tp-comm-overlap: Transformer Engine's userbuffers, ring-exchange and
                 chunked pipelines on the GPU's SMs (NVIDIA Megatron-Bridge docs/performance-guide.md: "In
                 GEMM-then-ReduceScatter pipeline overlap, a 1x ReduceScatter chunk remains exposed"; "The default SM
                 allocation for communication is 16"; NeMo docs/source/features/optimizations/communication_overlap.rst);
                 sequence parallelism's backward re-gather of the column-parallel input runs as a bulk overlap
                 beside the input-gradient GEMM (NVIDIA/TransformerEngine@d0067d0 transformer_engine/pytorch/
                 module/layernorm_linear.py, ub_bulk_dgrad: "Overlap inputmat all-gather with dgrad compute"; without
                 userbuffers an async all-gather there); no measured share, so the method's chunked share prices it
    async-tp     PyTorch async TP (torchtitan --parallelism.enable_async_tensor_parallel, torch.compile's
                 micro-pipeline pass): the all-gather matmul consumes the local shard first and copies each of the
                 other tp - 1 shards from the peers' symmetric memory while the previous one multiplies
                 (torch.distributed._symmetric_memory._pipelined_all_gather_and_consume, Tensor.copy_ on a side
                 stream: copy engines); the matmul reduce-scatter produces one chunk per rank and reduces them on
                 the SMs (_pipelined_produce_and_all2all). The pass fuses a reduce-scatter only where one matmul
                 produces its input (torch/_inductor/fx_passes/micro_pipeline_tp.py, fuse_matmul_reduce_scatter).
                 The backward's reduce-scatters of the column-parallel linears' input gradient reduce a sum of
                 matmuls (Q, K and V; the MLP's gate and up: separate linears in torchtitan's Llama), so they run
                 unfused: pytorch/pytorch PR #149946 (2025-03-28), its author: "there were only valid
                 scaled_mm-reduce-scatter patterns in the forward graph, but not in the backward graph ... the
                 reduce-scatters are receiving as input the addition of various scaled_mms, so it's not what we
                 are looking to fuse". Those two reduce-scatters a layer (one all-reduce's worth of the layer's
                 traffic: UNFUSED_ASYNC_TP) stay on the critical path (overlappable_share_array)
    megatron-async-backward
                 Megatron-LM's default since 2021-09 (NVIDIA/Megatron-LM b462d2545d, 'allreduce overlap with wgrad
                 gemm'; --no-async-tensor-model-parallel-allreduce turns it off), at the commit of Korthikanti et al.
                 2022 (877f6a1bd5, megatron/mpu/layers.py LinearWithGradAccumulationAndAsyncCommunication.backward)
                 and in Megatron-Core's local linears today: the backward of each column-parallel linear (QKV, MLP
                 up) launches its input-gradient all-reduce (with sequence parallelism its reduce-scatter) with
                 async_op=True and computes the weight-gradient GEMM beside it. Nothing else overlaps: the forward's
                 and a recomputed forward's collectives and the row-parallel linears' backward all-gathers (sequence
                 parallelism) stay on the critical path. Korthikanti et al. 2022 Sec. 6.2 names it ("we overlap
                 all-reduce communication with the linear weight's gradient computation"). With sequence
                 parallelism the same backward re-gathers the linear's input (distlab.tensor.SP_COLLECTIVES) with
                 async_op=True beside the input-gradient GEMM. Hidden: each collective entirely, up to its GEMM's
                 time (async_backward_hidden_array); no chunks.

The share hidden (userbuffers, async-tp): no published measurement of the share of TP traffic either method hides was found (the torchtitan
async-TP benchmark and NVIDIA's recipes report end-to-end speed-ups only, which are validation, never fitted). distlab
takes the conservative reading of the methods' structure: every overlapped collective exposes one of its tp chunks
(the pipeline's fill or drain, as NVIDIA's guide says of the reduce-scatter), so (tp - 1) / tp of the TP traffic that
fits under the stage's matmuls hides, not all of it (hidden_share_array), of the traffic the method overlaps at all
(overlappable_share_array: async TP's unfused backward reduce-scatters never hide); the rest stays on the critical
path.
The SMs: the compute beside the hidden share runs slower by the measured average of Lee et al. 2025
(efficiency.OVERLAP_SLOWDOWN, 18.9%) for both: userbuffers' kernels hold SMs (16 of an H100's 132 by default, 12%,
plus their HBM traffic); async TP's all-gather copies run on copy engines, but its reduce-scatter reduces on the SMs
and the copies contend for HBM, and no published figure separates the two, so the measured average is kept (the
conservative choice). Lesson 7 §2, §8.

Each engine has two methods: the one it runs when nothing is asked (ENGINE_DEFAULTS, estimate()'s tp_overlap=None) and
the one its switch turns on (ENGINE_METHODS, tp_overlap=True); False is 'none' whatever the engine. The defaults, read
in each engine's code: Megatron-LM / Megatron-Core (every 'megatron' recipe, NeMo and Megatron-Bridge on top of it) run
'megatron-async-backward' with their local linears (megatron/core/tensor_parallel/layers.py at d98e8a6:
allreduce_dgrad, the all-gather and reduce-scatter with async_op=True) and with Transformer Engine's, their default
(transformer_config.py: transformer_impl = "transformer_engine"): TE's Linear and LayerNormLinear backward launch the
input-gradient reduce-scatter (all-reduce without SP) with async_op=True, compute the weight-gradient GEMM, then wait,
and gather SP's input asynchronously beside the input-gradient GEMM (NVIDIA/TransformerEngine module/linear.py and
layernorm_linear.py at v1.7, v1.9 and d0067d0). torchtitan ('fsdp2') runs 'none': async TP is opt-in
(enable_async_tensor_parallel: bool = False, pytorch/torchtitan@b5bcd76 torchtitan/config/configs.py; default=False at
3faaa1a0d) and DTensor's ColwiseParallel/RowParallel backward runs its collectives in line. DeepSpeed (AutoTP),
Composer / llm-foundry (FSDP1, no TP) and 'fsdp2-sp-regather' (Meta's Llama 3 stack: no source for an overlap) run 'none'; so does the teaching recipe 'zero-paper', which names no engine. A
chunked method runs only with sequence parallelism (Megatron-LM asserts it for --tp-comm-overlap: arguments.py at
d98e8a6); elsewhere the engine's default runs (layout_method).
"""

from __future__ import annotations

import numpy as np

from ._arguments import code_array, finite_result, number_array
from .efficiency import OVERLAP_SLOWDOWN, layer_gemm_parts
from .errors import ConfigurationError

__all__ = [
    "TP_OVERLAP_NAMES",
    "ASYNC_BACKWARD",
    "USERBUFFERS",
    "ASYNC_TP",
    "ENGINE_METHODS",
    "ENGINE_DEFAULTS",
    "SOURCES",
    "tp_overlap_method",
    "layout_method",
    "planner_codes",
    "hidden_share_array",
    "UNFUSED_ASYNC_TP",
    "overlappable_share_array",
    "async_tp_hidden_array",
    "async_backward_hidden_array",
    "note",
]

#: The methods estimate(tp_overlap=...) takes; their index is the step model's code (StepConfig.tp_overlap).
TP_OVERLAP_NAMES = ("none", "userbuffers", "async-tp", "megatron-async-backward")
#: The code of 'megatron-async-backward', the one method that also runs without sequence parallelism.
ASYNC_BACKWARD = TP_OVERLAP_NAMES.index("megatron-async-backward")
#: The code of 'userbuffers' (Transformer Engine), whose chunked share also covers SP's backward re-gathers.
USERBUFFERS = TP_OVERLAP_NAMES.index("userbuffers")
#: The code of 'async-tp' (torchtitan's, whose DTensor linears keep the gathered input: no SP re-gather).
ASYNC_TP = TP_OVERLAP_NAMES.index("async-tp")
#: The method each engine (memory_recipes name) runs with tp_overlap=True: Megatron-Core and NeMo's
#: --tp-comm-overlap (Transformer Engine userbuffers), torchtitan's FSDP2 async TP; DeepSpeed's AutoTP and
#: Composer / llm-foundry's FSDP1 have no TP overlap ('none'). The ZeRO paper's count, which names no engine, takes
#: Megatron's: what tp_overlap=True meant before the methods were named.
ENGINE_METHODS = {
    "fsdp2": "async-tp",
    "fsdp2-sp-regather": "none",
    "deepspeed": "none",
    "fsdp1": "none",
    "fsdp1-pure": "none",
}
#: The method each engine (memory_recipes name) runs when none is asked (tp_overlap=None; module docstring): every
#: Megatron-LM recipe its backward overlap (default since 2021-09, local and Transformer Engine linears alike); the
#: others, and the teaching recipe 'zero-paper' (no engine), 'none'.
ENGINE_DEFAULTS = {
    "zero-paper": "none",
    "megatron": "megatron-async-backward",
    "megatron-distributed-optimizer": "megatron-async-backward",
    "megatron-bf16-grads": "megatron-async-backward",
    "megatron-distributed-optimizer-bf16-grads": "megatron-async-backward",
    "megatron-fsdp": "megatron-async-backward",
    "deepspeed": "none",
    "fsdp2": "none",
    "fsdp2-sp-regather": "none",
    "fsdp1": "none",
    "fsdp1-pure": "none",
}
#: Where each method's structure is documented (the module docstring quotes them).
SOURCES = {
    "userbuffers": "NVIDIA Megatron-Bridge docs/performance-guide.md (TP communication overlap) at 067f987; "
    "NeMo communication_overlap.rst",
    "async-tp": "PyTorch torch/distributed/_symmetric_memory/__init__.py (_pipelined_all_gather_and_consume, "
    "_pipelined_produce_and_all2all); PyTorch dev-discuss 'Introducing Async Tensor Parallelism in PyTorch' (2024)",
    "megatron-async-backward": "NVIDIA/Megatron-LM megatron/mpu/layers.py at 877f6a1bd5 "
    "(LinearWithGradAccumulationAndAsyncCommunication.backward), default since b462d2545d (2021-09-07); "
    "Korthikanti et al. 2022 (arXiv 2205.05198) Sec. 6.2",
}


def _engine(memory_recipe) -> str:
    """The memory recipe's name, lower-cased (a MemoryRecipe or a name)."""
    return str(getattr(memory_recipe, "name", memory_recipe)).strip().lower()


def tp_overlap_method(value, memory_recipe=None) -> str:
    """The method name of estimate()'s tp_overlap: None -> the memory recipe's engine's default (ENGINE_DEFAULTS, else
    'none'); False or 'none' -> 'none'; True -> the engine's opt-in method (ENGINE_METHODS, else 'userbuffers'); a name
    of TP_OVERLAP_NAMES as given. Lesson 7 §2.

    >>> tp_overlap_method(True, 'fsdp2'), tp_overlap_method(True, 'megatron'), tp_overlap_method(False, 'megatron')
    ('async-tp', 'userbuffers', 'none')
    >>> tp_overlap_method(None, 'megatron'), tp_overlap_method(None, 'fsdp2'), tp_overlap_method(None, 'zero-paper')
    ('megatron-async-backward', 'none', 'none')
    """
    if value is None:
        return ENGINE_DEFAULTS.get(_engine(memory_recipe), "none")
    if value is True or value is False or isinstance(value, np.bool_):
        if not value:
            return "none"
        return ENGINE_METHODS.get(_engine(memory_recipe), "userbuffers")
    key = value.strip().lower() if isinstance(value, str) else None
    if key not in TP_OVERLAP_NAMES:
        raise ConfigurationError(
            f"tp_overlap={value!r}; valid: None (the engine's default), False, True (the engine's method), "
            f"{', '.join(map(repr, TP_OVERLAP_NAMES))}"
        )
    return key


def layout_method(value, memory_recipe, tp, sequence_parallel) -> str:
    """The method estimate() runs at a layout: tp_overlap_method's, but 'none' at TP 1 (no TP collective); a chunked
    method ('userbuffers', 'async-tp') needs sequence parallelism (it pipelines SP's all-gathers and reduce-scatters),
    so without it the engine's default runs (module docstring); 'megatron-async-backward' also runs without it (the
    all-reduces). Lesson 7 §2.

    >>> layout_method(True, 'megatron', 8, False), layout_method(True, 'megatron', 8, True)
    ('megatron-async-backward', 'userbuffers')
    >>> layout_method(True, 'zero-paper', 8, False), layout_method(None, 'megatron', 1, True)
    ('none', 'none')
    """
    method = tp_overlap_method(value, memory_recipe)
    if method in ("userbuffers", "async-tp") and not sequence_parallel:
        method = tp_overlap_method(None, memory_recipe)
    if tp == 1 or not (sequence_parallel or method == "megatron-async-backward"):
        return "none"
    return method


def planner_codes(value, memory_recipe, sequence_parallel):
    """The step model's method code for each of the planner's candidates (sequence_parallel: their SP column):
    layout_method's rule on arrays (TP 1 prices no TP collective whatever the code). Lesson 7 §5.

    >>> planner_codes(True, 'megatron', np.array([True, False])).tolist()
    [1, 3]
    """
    sp = number_array(sequence_parallel, "sequence_parallel") > 0
    method = tp_overlap_method(value, memory_recipe)
    code = TP_OVERLAP_NAMES.index(method)
    if method not in ("userbuffers", "async-tp"):
        return np.full(sp.shape, code)
    return np.where(sp, code, TP_OVERLAP_NAMES.index(tp_overlap_method(None, memory_recipe)))


def hidden_share_array(code, tp):
    """The share of the TP traffic under the matmuls that a chunked method hides: 0 for 'none' (code 0), (tp - 1) /
    tp for 'userbuffers' and 'async-tp' (one of the tp chunks of each collective exposed; module docstring); 0 for
    'megatron-async-backward', which hides by GEMM instead (async_backward_hidden_array). Lesson 7 §2.

    >>> [float(x) for x in hidden_share_array([0, 1, 2, 3], 8)]
    [0.0, 0.875, 0.875, 0.0]
    """
    tp = number_array(tp, "tp", 1.0)
    chunked = np.isin(code_array(code, "tp_overlap", TP_OVERLAP_NAMES), (USERBUFFERS, ASYNC_TP))
    return np.where(chunked, (tp - 1.0) / np.maximum(tp, 1.0), 0.0)


#: All-reduce equivalents of a layer's TP traffic per microbatch that 'async-tp' leaves unfused: the backward's two
#: reduce-scatters of the column-parallel linears' input gradient (QKV's and the MLP's up), each half an all-reduce
#: (module docstring: pytorch/pytorch PR #149946). Lesson 7 §2.
UNFUSED_ASYNC_TP = 1.0


def overlappable_share_array(code, collectives):
    """The share of a layer's TP traffic (collectives: its all-reduce equivalents per microbatch, 4 in training, 6
    with full recomputation) that a method can overlap at all: for 'async-tp' (code 2) all but UNFUSED_ASYNC_TP of
    them, (collectives - 1) / collectives (3/4; 5/6 when the recomputed forward's collectives, fused like the
    forward's, run again); 1 for every other method. Lesson 7 §2.

    >>> [float(x) for x in overlappable_share_array([0, 1, 2, 3], 4.0)]
    [1.0, 1.0, 0.75, 1.0]
    >>> round(float(overlappable_share_array(2, 6.0)), 6)
    0.833333
    """
    code = code_array(code, "tp_overlap", TP_OVERLAP_NAMES)
    collectives = number_array(collectives, "collectives", 1.0)
    return np.where(code == ASYNC_TP, (collectives - UNFUSED_ASYNC_TP) / collectives, 1.0)


def async_tp_hidden_array(model, collective_s, layer_gemm_pass_s, share, recomputed_share=0.0):
    """Seconds per layer and microbatch that 'async-tp' hides, each fused collective under its own matmuls only: the
    micro-pipeline pass pipelines a collective's chunks with the matmul it is fused with, never with another
    (torch.distributed._symmetric_memory: _pipelined_all_gather_and_consume feeds one fused_all_gather_matmul, whose
    Bs are the linears reading the gathered input; _pipelined_produce_and_all2all one matmul's chunks). collective_s:
    one all-gather or reduce-scatter of b s h (half an all-reduce). Fused: the forward's all-gathers before QKV and
    the MLP's up (with all their linears) and reduce-scatters after the attention output and the MLP's down, again
    in a recomputed forward (recomputed_share of the layers), and the backward's all-gathers of the row-parallel
    linears' output gradient, each before that linear's input-gradient GEMM (the gathered gradient is its left
    operand; the same FLOPs as its forward). The backward's input-gradient reduce-scatters run unfused
    (UNFUSED_ASYNC_TP). hidden = share x [(1 + recomputed_share) x sum over the four linears of min(collective_s,
    GEMM) + min(collective_s, attention output's GEMM) + min(collective_s, MLP down's GEMM)], each GEMM's time
    layer_gemm_pass_s x its share of the layer's GEMM FLOPs (efficiency.layer_gemm_parts). An MoE layer's experts
    are not TP linears: its MLP collectives are capped by no GEMM of their own (collective_s each). Lesson 7 §2.

    Llama 3 8B (QKV 1.5, output 1, up 7, down 3.5 of 13 h^2): a 13 ms pass gives GEMMs of 1.5, 1, 7 and 3.5 ms;
    collectives of 2 ms, share 7/8, no recomputation: 7/8 x (1.5 + 1 + 2 + 2 + 1 + 2) = 8.3125 ms, against 7/8 x
    6 x 2 = 10.5 ms were each hidden whole:

    >>> from distlab import models
    >>> round(float(async_tp_hidden_array(models.model('llama3.1-8b'), 2e-3, 13e-3, 0.875)) * 1e3, 6)
    8.3125
    """
    parts = layer_gemm_parts(model)
    total = sum(w for w, _ in parts)
    collective = number_array(collective_s, "collective_s")
    gemm = number_array(layer_gemm_pass_s, "layer_gemm_pass_s")
    dense = parts[2][1]  # a dense MLP's up projection is column-parallel; an MoE layer's experts are no TP linears

    def hides(index):
        if index >= 2 and not dense:  # an MoE layer's MLP collectives: no TP linear of their own
            return collective
        return np.minimum(collective, gemm * (parts[index][0] / total))

    forward = hides(0) + hides(1) + hides(2) + hides(3)
    backward = hides(1) + hides(3)
    recomputed = number_array(recomputed_share, "recomputed_share")
    hidden = number_array(share, "share") * ((1.0 + recomputed) * forward + backward)
    return finite_result("hidden seconds", hidden)


def async_backward_hidden_array(model, collective_s, layer_gemm_pass_s):
    """Seconds per layer and microbatch that 'megatron-async-backward' hides: each column-parallel linear's backward
    collective (collective_s: an all-reduce of b s h, or with sequence parallelism its reduce-scatter) runs beside
    that linear's weight-gradient GEMM (and SP's re-gather of its input beside the input-gradient GEMM, the same
    FLOPs: the step model calls this once for each), so hidden = sum over the column-parallel linears of min(collective_s, the
    GEMM's time). The GEMM's time: layer_gemm_pass_s (one pass of the layer's weight GEMMs, the step model's matmul
    split) x its share of the layer's GEMM FLOPs (efficiency.layer_gemm_parts). Lesson 7 §2.

    GPT layer (4h MLP): QKV 3h^2 and up 4h^2 of 12h^2; a 12 ms pass gives GEMMs of 3 and 4 ms; a 3.5 ms all-reduce
    hides 3 ms under QKV's and 3.5 ms under up's:

    >>> from distlab import models
    >>> round(float(async_backward_hidden_array(models.model('gpt3-175b'), 3.5e-3, 12e-3)) * 1e3, 6)
    6.5
    """
    parts = layer_gemm_parts(model)
    total = sum(w for w, _ in parts)
    collective = number_array(collective_s, "collective_s")
    gemm = number_array(layer_gemm_pass_s, "layer_gemm_pass_s")
    hidden = sum(np.minimum(collective, gemm * (w / total)) for w, column in parts if column)
    return finite_result("hidden seconds", hidden)


def note(method: str, tp: int) -> str:
    """One line for a student: what the step time assumes of a TP overlap method (empty for 'none')."""
    method = tp_overlap_method(method if isinstance(method, str) else repr(method))
    degree = float(number_array(tp, "tp", 1.0))
    if method == "none":
        return ""
    if method == "megatron-async-backward":
        return (
            "TP overlap megatron-async-backward: each column-parallel linear's backward all-reduce (with sequence "
            "parallelism its reduce-scatter) runs beside its weight-gradient GEMM and, with sequence parallelism, the "
            "re-gather of its input beside its input-gradient GEMM, each hidden up to that GEMM's time, as "
            "Megatron-LM does by default since 2021-09 (NVIDIA/Megatron-LM b462d2545d; Korthikanti et al. 2022 Sec. "
            "6.2); the forward's and a recomputed forward's collectives stay exposed (distlab.tp_overlap); the compute "
            f"beside it runs {100 * OVERLAP_SLOWDOWN[1]:.1f}% slower (efficiency.OVERLAP_SLOWDOWN)"
        )
    share = float(hidden_share_array(USERBUFFERS, degree))  # the chunked methods' share
    hidden = (
        f"{100 * share:.1f}% ((tp - 1) / tp) of the TP traffic under the matmuls hidden, one chunk of each collective "
        "exposed"
    )
    if method == "async-tp":
        hidden = (
            f"of the TP traffic PyTorch's micro-pipeline pass fuses with a matmul, {100 * share:.1f}% ((tp - 1) / tp) "
            "hidden, each collective only up to its own matmul's time, one chunk exposed; the backward's "
            "reduce-scatters of the QKV and MLP-up input gradients (a quarter of a layer's TP traffic, a sixth with "
            "full recomputation) run unfused and exposed (the pass fuses a reduce-scatter only of one matmul's output; "
            "pytorch/pytorch PR #149946)"
        )
    return (
        f"TP overlap {method}: {hidden}: no published measurement of the share hidden was found, so "
        "this conservative reading of the method's structure is used (distlab.tp_overlap); the compute beside it "
        f"runs {100 * OVERLAP_SLOWDOWN[1]:.1f}% slower (efficiency.OVERLAP_SLOWDOWN)"
    )
