"""The step model's data-parallel term: the gradient reduction and ZeRO's/FSDP's parameter gathers of a step, in
total and what of it is exposed. The collectives are priced on the DP group's placement (placement.
group_all_reduce_time_array), the overlap by distlab.dataparallel's bucketed schedule and distlab.fsdp's
layer-by-layer one. Lesson 3, Lesson 7 §3, Lesson 11 §2.
"""

from __future__ import annotations

import numpy as np

from ..collectives.placed import ring_latency_array
from ..dataparallel import exposed_communication_time
from ..errors import ConfigurationError
from ..fsdp import layer_by_layer_exposed
from ..memory_recipes import gradient_reduce_bytes
from ..units import positive_int
from .config import StepConfig
from .placement import equal_local_ranks_array, group_all_reduce_time_array

__all__ = [
    "ZERO3_COLLECTIVES",
    "DEEPSPEED_2021_PERSISTENCE_THRESHOLD",
    "DEEPSPEED_2021_PYTHON_PER_RANK_S",
    "SMALL_GPU_OPERATION_S",
    "DEEPSPEED_2021_HOST_PER_RANK_S",
    "EXPOSED_GATHER_NOTE",
    "DEEPSPEED_REDUCE_BUCKET_ELEMENTS",
    "deepspeed_note",
    "zero3_collectives_per_layer",
    "zero3_gathered_per_layer",
    "dp_term",
]

#: What an estimate with overlap_param_gather=False assumes, in its notes (training.StepEstimate.notes).
EXPOSED_GATHER_NOTE = (
    "ZeRO-1/2: the parameter all-gather runs before the first forward, all of it exposed (overlap_param_gather=False:"
    " Megatron-LM without --overlap-param-gather)"
)

#: DeepSpeed's ZeRO-1/2 gradient bucket, in elements: reduce_bucket_size's default, pp_int(5e8)
#: (deepspeed/runtime/zero/config.py, DeepSpeedZeroConfig; microsoft/DeepSpeed 38327e0, 2025-02-21). With
#: overlap_comm the backward hooks reduce a bucket on the reduction stream each time one fills (stage_1_and_2.py
#: reduce_independent_p_g_buckets_and_remove_grads); the step model's bucketed overlap counts these buckets.
DEEPSPEED_REDUCE_BUCKET_ELEMENTS = 5e8


def _deepspeed_exposure(zero, pp):
    """(gradient reduction exposed, parameter all-gather exposed) of DeepSpeed's engine as distlab exports it
    (export.deepspeed_json: "overlap_comm": true at ZeRO-1/2 without a pipeline), microsoft/DeepSpeed 38327e0:
    without ZeRO the engine all-reduces after the backward (engine.py allreduce_gradients at the accumulation
    boundary: buffered_allreduce_fallback); with a pipeline the engine turns overlap_comm off ("Pipeline parallelism
    does not support overlapped communication, will be disabled") and reduces after the last backward
    (pipe/engine.py _exec_reduce_grads); ZeRO-1/2 gather the updated parameters at the end of the optimizer step
    (stage_1_and_2.py step: all_gather_dp_groups), before the next forward. ZeRO-2/3 with a pipeline, which DeepSpeed
    refuses ("ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism"), keep the pricing without one.

    >>> [x.tolist() for x in _deepspeed_exposure(np.array([0, 1, 1, 2, 2, 3]), np.array([1, 1, 4, 1, 4, 1]))]
    [[True, False, True, False, False, False], [False, True, True, True, True, False]]
    """
    zero, pp = np.asarray(zero), np.asarray(pp)
    return (zero == 0) | ((zero == 1) & (pp > 1)), (zero == 1) | (zero == 2)


def deepspeed_note(zero: int, pp: int) -> str:
    """What an estimate with memory_recipe='deepspeed' assumes of DeepSpeed's data-parallel communication
    (_deepspeed_exposure), for training.StepEstimate.notes; '' at ZeRO-3 without a pipeline. Lesson 7 §7.

    >>> deepspeed_note(1, 4)[:72]
    'DeepSpeed: the gradient reduction runs after the last backward, exposed '
    """
    if isinstance(zero, bool) or not isinstance(zero, (int, np.integer)) or not 0 <= zero <= 3:
        raise ConfigurationError(f"zero={zero!r}; valid: 0, 1, 2 or 3")
    zero, pp = int(zero), positive_int(pp, "pp")
    if zero >= 2 and pp > 1:
        return (
            f"DeepSpeed refuses ZeRO-{zero} with a pipeline ('incompatible with pipeline parallelism'): priced as its"
            " ZeRO without one"
        )
    reduce, gather = (bool(x) for x in _deepspeed_exposure(zero, pp))
    parts = []
    if reduce:
        why = "its pipeline engine turns overlap_comm off" if pp > 1 else "no ZeRO: the engine all-reduces after it"
        parts.append(f"the gradient reduction runs after the last backward, exposed ({why})")
    elif zero in (1, 2):
        parts.append("the gradient reduction overlaps the backward (overlap_comm) in buckets of 5e8 elements")
    if gather:
        parts.append("the parameter all-gather runs after the optimizer step, exposed")
    return f"DeepSpeed: {'; '.join(parts)}" if parts else ""


#: How ZeRO-3/FSDP issues a layer's parameter gathers and gradient reductions. 'layer': one collective on a flat
#: buffer of the layer's parameters (FSDP2's foreach all-gather per FSDP unit, Megatron's distributed-optimizer
#: buckets, DeepSpeed's coalesced gathers of later versions). 'tensor': one collective per parameter tensor, each
#: over all the DP ranks and none hidden (DeepSpeed ZeRO-3 v0.3.13-v0.4.0, as Narayanan et al. 2021 Table 2 ran it:
#: _zero3_per_tensor), so every tensor pays the ring's latency (collectives.placed.ring_latency_array).
ZERO3_COLLECTIVES = ("layer", "tensor")

#: DeepSpeed ZeRO-3's default stage3_param_persistence_threshold (elements) in v0.3.13-v0.4.0
#: (deepspeed/runtime/zero/constants.py, ZERO_OPTIMIZATION_PARAM_PERSISTENCE_THRESHOLD_DEFAULT = 100000; tag v0.3.13,
#: commit 12a53b43): stage3.py's persistent_parameters() marks every tensor of fewer elements ds_persist, gathered
#: once and never released, so only larger tensors are gathered layer by layer (their gradients are all reduced).
DEEPSPEED_2021_PERSISTENCE_THRESHOLD = 100_000

#: Seconds of the Python that DeepSpeed's 2021 ZeRO-3 runs per rank of a per-tensor collective: one iteration of
#: the loop over the world's ranks that _allgather_param (narrow, append, torch.distributed.get_rank) and
#: _reduce_scatter_gradient (arithmetic, grad.view(-1).narrow, append) run before every call (partition_parameters.py, tag v0.3.13, commit
#: 12a53b43). MEASURED here, not fitted: benchmarks/bench_zero3_host.py, torch 2.13 on CPU tensors, thread CPU
#: time over 1,536 ranks, medians 2.16 us (gather) and 2.15 us (reduce-scatter) per rank (benchmarks/RESULTS.md,
#: 2026-11-29, branch zero3host). ASSUMED the same for torch 1.8 on Selene's AMD EPYC 7742 hosts.
DEEPSPEED_2021_PYTHON_PER_RANK_S = 2.2e-6

#: Seconds per small GPU operation issued back to back from the host: 3.8 us per 2.9 us kernel launched in a loop
#: without synchronizing (NVIDIA Technical Blog, A. Gray, "Getting Started with CUDA Graphs", 2019, V100, CUDA 10;
#: https://developer.nvidia.com/blog/cuda-graphs/). PUBLISHED, not fitted. PyTorch 1.8's ProcessGroupNCCL copies a
#: list all_gather's output and a list reduce_scatter's input rank by rank, one copy_ (a cudaMemcpyAsync) per rank,
#: whose host dispatch is 0.3 us (measured by the same script). ASSUMED: each such copy (0.2-5 MB in Narayanan
#: 2021 Table 2's layers) costs what that operation costs, on Selene's A100s with CUDA 11.
SMALL_GPU_OPERATION_S = 3.8e-6

#: Seconds per rank of each per-tensor collective of DeepSpeed ZeRO-3 v0.3.13-v0.4.0, none of it hidden (a
#: device-wide torch.cuda.synchronize() precedes every gather): its Python loop over the ranks and one
#: per-rank copy (DEEPSPEED_2021_PYTHON_PER_RANK_S + SMALL_GPU_OPERATION_S = 6.0 us). Priced only for
#: zero3_collectives='tensor' (_zero3_per_tensor). Lesson 7 §3.
DEEPSPEED_2021_HOST_PER_RANK_S = DEEPSPEED_2021_PYTHON_PER_RANK_S + SMALL_GPU_OPERATION_S


def zero3_collectives_per_layer(model, granularity="layer") -> float:
    """Collectives per layer and gather (or reduction) of ZeRO-3: 1 for 'layer' (a flat buffer); for 'tensor' the
    layer's parameter tensors, counted as Megatron's GPT block holds them: a fused QKV and an output projection,
    2 MLP matrices (3 gated), each with a bias where the model has biases, and 2 norms (weight, + bias for
    LayerNorm). GPT-3 175B: (2 + 2) x 2 + 2 x 2 = 12; Llama: 2 + 3 + 2 = 7. Lesson 7 §3.

    >>> from distlab import models
    >>> zero3_collectives_per_layer(models.model('llama2-7b'), 'tensor'), zero3_collectives_per_layer('x', 'layer')
    (7.0, 1.0)
    """
    if granularity not in ZERO3_COLLECTIVES:
        raise ConfigurationError(f"zero3_collectives={granularity!r}; valid: {', '.join(ZERO3_COLLECTIVES)}")
    if granularity == "layer":
        return 1.0
    linear = 2 + (3 if getattr(model, "gated_mlp", False) else 2)
    norms = 2 * (2 if getattr(model, "norm", "layernorm") == "layernorm" else 1)
    return float(linear * (2 if getattr(model, "biases", False) else 1) + norms)


def zero3_gathered_per_layer(model, threshold=DEEPSPEED_2021_PERSISTENCE_THRESHOLD) -> float:
    """All-gathers per layer and pass of DeepSpeed's 2021 per-tensor ZeRO-3: the layer's tensors of at least
    `threshold` elements (DEEPSPEED_2021_PERSISTENCE_THRESHOLD: smaller ones persist gathered). Megatron's GPT block
    as zero3_collectives_per_layer counts it: weights QKV (h + 2 kv d) x h, projection h x h and 2 (3 gated) MLP
    matrices h x f; biases of h + 2 kv d, h, f (each up matrix) and h elements; 2 norms of h (under any threshold
    of today's widths). GPT-3 175B (h = 12,288, f = 49,152): the 4 weights, every bias and norm under 100,000: 4;
    Llama 2 7B: its 5 weights. Lesson 7 §3.

    >>> from distlab import models
    >>> zero3_gathered_per_layer(models.model('llama2-7b')), zero3_gathered_per_layer(models.model('llama2-7b'), 2e7)
    (5.0, 4.0)
    """
    h, f = float(model.hidden), float(model.ffn)
    qkv = h + 2.0 * float(model.kv_heads) * h / float(model.heads)
    mlp = 3 if getattr(model, "gated_mlp", False) else 2
    weights = [qkv * h, h * h] + [f * h] * mlp
    biases = [qkv, h] + [f] * (mlp - 1) + [h] if getattr(model, "biases", False) else []
    return float(sum(1 for n in weights + biases if n >= threshold))


def _gradient_groups(c: StepConfig):
    """(gradient bytes a GPU reduces over its DP group, the expert gradient bytes over the expert DP group, the
    replicas, a function pricing an all-reduce of (dense bytes, expert bytes) on those groups). The dense group: the
    dp x cp ranks holding the same weights, stride tp; an MoE model's expert gradients after them over the expert DP
    group of mesh.expert_layout (edp = dp cp tp / (etp ep) members, stride etp ep). The inter-node phase runs at
    inter_bw when the groups join equal local ranks (equal_local_ranks_array), else cross-rail."""
    g = c.g
    grad = float(c.model.parameter_count()) / (c.tp * c.pp) * c.recipe.gradient_bytes
    dp_bw = np.where(equal_local_ranks_array(c.dpc, c.tp, g), c.inter_bw, c.cross)

    def dense(size):
        return group_all_reduce_time_array(size, c.dpc, c.tp, g, c.intra_bw, c.intra_lat, dp_bw, c.inter_lat)

    if not c.moe:
        return grad, 0.0, c.dpc, lambda size, expert_size: dense(size)
    from ..moe import step as moe_step

    grad, expert = moe_step.expert_gradient_bytes(c.model, c.recipe, c.tp, c.pp, c.ep, c.etp_moe)
    edp, e_stride = c.dpc * c.tp / (c.etp_moe * c.ep), c.etp_moe * c.ep
    e_bw = np.where(equal_local_ranks_array(edp, e_stride, g), c.inter_bw, c.cross)

    def both(size, expert_size):
        return dense(size) + group_all_reduce_time_array(
            expert_size, edp, e_stride, g, c.intra_bw, c.intra_lat, e_bw, c.inter_lat
        )

    return grad, expert, np.maximum(c.dpc, edp), both


def _zero3_per_tensor(c: StepConfig, layer_half, layer_reduce):
    """Seconds of DeepSpeed ZeRO-3's per-tensor collectives in a step, all exposed (v0.3.13-v0.4.0, microsoft/
    DeepSpeed tag v0.3.13, commit 12a53b43; unchanged through v0.4.0): partition_parameters.py _allgather_param
    gathers each parameter on its own torch.distributed.all_gather over the whole DP group after a device-wide
    torch.cuda.synchronize(), and stage3.py fetch_sub_module ends with comm_stream.synchronize() and
    torch.cuda.synchronize(), so no gather overlaps compute, and each waits for the reduce-scatters in flight;
    _reduce_scatter_gradients runs one reduce_scatter per parameter. The gathers are forward and pre-backward module
    hooks (stage3.py _register_hooks_recursively), so the recomputed forward of full recomputation fires them again.
    Per microbatch: g = L + (L - 1) + min(R, L - 1) gathers (R the layers recomputed: L with full recomputation) of the layer (the last layer stays gathered, as in the
    flat count) of k_g tensors (zero3_gathered_per_layer) and L reduce-scatters of k tensors (zero3_tensors), each
    tensor a ring latency over all n = dp x cp ranks (ring_latency_array; each step inside a node at least
    c.ring_step_floor when the ring spans nodes: the hosts' network posts) and n x h of host work (h =
    DEEPSPEED_2021_HOST_PER_RANK_S: DeepSpeed's Python loop over the ranks and ProcessGroupNCCL's per-rank copy_ of
    the list, v1.8 torch/lib/c10d/ProcessGroupNCCL.cpp allgather and reduce_scatter), the layer's bytes at the placed
    rate: m (g (t + (k_g - 1) a + k_g n h) + L (t_r + (k - 1) a + k n h)), t = layer_half (one latency in it),
    t_r = layer_reduce (the reduce-scatter at the engine's reduce dtype). Lesson 7 §3."""
    layers, k = c.layers_stage, np.asarray(c.zero3_tensors)
    latency = ring_latency_array(c.dpc, c.tp, c.g, c.intra_lat, c.inter_lat, c.ring_step_floor)
    k_gather = np.where(k > 1.0, zero3_gathered_per_layer(c.model), 1.0)
    host = np.where(k > 1.0, DEEPSPEED_2021_HOST_PER_RANK_S * c.dpc, 0.0)  # per tensor: n ranks of host work
    gathers = 2.0 * layers - 1.0 + np.minimum(c.recomputed, layers - 1.0)  # the recomputed layers' forwards again
    gather = layer_half + np.maximum(k_gather - 1.0, 0.0) * latency + k_gather * host
    reduce = layer_reduce + (k - 1.0) * latency + k * host
    return c.m * (gathers * gather + layers * reduce)


def dp_term(c: StepConfig, r: dict) -> dict:
    """DP communication: dp_comm_s, the step's data-parallel traffic (a reduce-scatter or all-gather is half an
    all-reduce), and dp_exposed_s, what of it is exposed (DDP's 25 MiB buckets, dataparallel.
    exposed_communication_time); dp_hidden_s the rest. ZeRO-0: gradients accumulate locally, one all-reduce per step
    under the LAST microbatch's backward. ZeRO-1 (Megatron's distributed optimizer): one reduce-scatter under the
    backward, one all-gather under the next step's first forward (Megatron's --overlap-param-gather), or before it,
    all of it exposed, with param_gather_exposed (Megatron without that flag). ZeRO-2: a reduce-scatter every
    microbatch under its backward, one all-gather (the same). ZeRO-3 (FSDP): per microbatch and layer an all-gather for the forward, one for the
    backward (not for the last layer, kept unsharded) and a reduce-scatter, (3 L - 1) halves of the layer's shard
    (Rajbhandari et al. 2020, Sec. 7.2.2), exposed as distlab.fsdp.layer_by_layer_exposed (one layer of prefetch).
    At ZeRO-3 the reduce-scatters move the engine's reduce dtype (memory_recipes.gradient_reduce_bytes: fp32 for
    FSDP1 and FSDP2, twice the bf16 gathers' bytes).
    Per parameter tensor (zero3_tensors = k > 1: DeepSpeed ZeRO-3 as Narayanan et al. 2021 Table 2 ran it,
    v0.3.13-v0.4.0) _zero3_per_tensor prices it: every collective exposed, the recomputed forward gathering again,
    each collective a ring latency over all ranks and DEEPSPEED_2021_HOST_PER_RANK_S of host work per rank.
    memory_recipe 'deepspeed' runs DeepSpeed's engine (_deepspeed_exposure): ZeRO-0's all-reduce, and any reduction
    under a pipeline, after the last backward, exposed; ZeRO-1/2's gather after the optimizer step, exposed; the
    overlapped reductions in buckets of DEEPSPEED_REDUCE_BUCKET_ELEMENTS. No replicas: nothing. Lesson 3, Lesson 7 §3."""
    grad, expert, replicas, all_reduce_of = _gradient_groups(c)
    m, layers, zero = c.m, c.layers_stage, c.zero
    all_reduce = all_reduce_of(grad, expert)
    buckets = np.maximum(1.0, np.ceil((grad + expert) / c.bucket_bytes))
    forward = (1.0 - r["backward_share"]) * r["compute_mb"]
    backward = r["backward_share"] * r["compute_mb"]
    half = 0.5 * all_reduce
    layer_half = 0.5 * all_reduce_of(grad / layers, expert / layers)
    # the reduce-scatters at the engine's reduce dtype (FSDP's fp32): their own bytes where they differ
    scale = gradient_reduce_bytes(c.recipe, c.memory_recipe, zero) / float(c.recipe.gradient_bytes)
    reduce_half, layer_reduce = half, layer_half
    if np.any(scale != 1.0):
        reduce_half = 0.5 * all_reduce_of(scale * grad, scale * expert)
        layer_reduce = 0.5 * all_reduce_of(scale * grad / layers, scale * expert / layers)
    reduce_exposed, gather_exposed = False, c.param_gather_exposed
    if getattr(c.memory_recipe, "name", None) == "deepspeed":  # DeepSpeed's engine: its buckets, its exposed parts
        engine_reduce, engine_gather = _deepspeed_exposure(zero, c.pp)
        reduce_exposed, gather_exposed = engine_reduce, engine_gather | gather_exposed
        elements = (grad + expert) / float(c.recipe.gradient_bytes)
        buckets = np.where(zero == 0, buckets, np.maximum(1.0, np.ceil(elements / DEEPSPEED_REDUCE_BUCKET_ELEMENTS)))
    ddp = np.where(reduce_exposed, all_reduce, exposed_communication_time(all_reduce, backward, buckets))
    # the distributed optimizer's parameter all-gather: under the first forward, or before it (param_gather_exposed)
    gather_once = np.where(gather_exposed, half, exposed_communication_time(half, forward, buckets))
    zero1 = np.where(reduce_exposed, half, exposed_communication_time(half, backward, buckets)) + gather_once
    zero2 = m * exposed_communication_time(reduce_half, backward, buckets) + gather_once
    zero3_mb = layer_by_layer_exposed(
        forward / layers, backward / layers, layer_half, layer_reduce, layers, prefetch=1, reshard_after_forward=True
    )
    zero3_total = m * (3.0 * layers - 1.0) * layer_half + m * layers * (layer_reduce - layer_half)
    zero3_exposed = m * zero3_mb
    if np.any(np.asarray(c.zero3_tensors) > 1.0):
        zero3_total = _zero3_per_tensor(c, layer_half, layer_reduce)
        zero3_exposed = zero3_total
    zero2_total = (m + 1.0) * half + m * (reduce_half - half)
    total = np.select([zero >= 3, zero == 2, zero == 1], [zero3_total, zero2_total, all_reduce], all_reduce)
    exposed = np.select([zero >= 3, zero == 2, zero == 1], [zero3_exposed, zero2, zero1], ddp)
    return dict(
        dp_comm_s=total,
        dp_exposed_s=np.where(replicas > 1, exposed, 0.0),
        dp_hidden_s=np.where(replicas > 1, np.maximum(0.0, total - exposed), 0.0),
        layer_forward_s=forward / layers,  # one layer's forward and backward per microbatch (the stage's share,
        layer_backward_s=backward / layers,  # averaged): what ZeRO-3's per-layer collectives hide under (Lesson 11 §2)
    )
