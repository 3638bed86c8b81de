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
from .config import StepConfig
from .placement import equal_local_ranks_array, group_all_reduce_time_array

__all__ = ["ZERO3_COLLECTIVES", "zero3_collectives_per_layer", "dp_term"]

#: How ZeRO-3/FSDP issues a layer's parameter gathers and gradient reductions. 'layer': one collective on a flat
#: buffer of the layer's parameters (FSDP2's foreach all-gather per FSDP unit, Megatron's distributed-optimizer
#: buckets, DeepSpeed's coalesced gathers of later versions). 'tensor': one collective per parameter tensor, each
#: over all the DP ranks (DeepSpeed ZeRO-3 as Narayanan et al. 2021 Table 2 ran it, ZeRO-Infinity era), so every
#: tensor pays the ring's latency (collectives.placed.ring_latency_array).
ZERO3_COLLECTIVES = ("layer", "tensor")


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


def dp_term(c: StepConfig, r: dict) -> dict:
    """DP communication: dp_comm_s, the step's data-parallel traffic (a reduce-scatter or all-gather is half an
    all-reduce), and dp_exposed_s, what of it is exposed (DDP's 25 MiB buckets, dataparallel.
    exposed_communication_time); dp_hidden_s the rest. ZeRO-0: gradients accumulate locally, one all-reduce per step
    under the LAST microbatch's backward. ZeRO-1 (Megatron's distributed optimizer): one reduce-scatter under the
    backward, one all-gather under the next step's first forward. ZeRO-2: a reduce-scatter every microbatch under
    its backward, one all-gather. ZeRO-3 (FSDP): per microbatch and layer an all-gather for the forward, one for the
    backward (not for the last layer, kept unsharded) and a reduce-scatter, (3 L - 1) halves of the layer's shard
    (Rajbhandari et al. 2020, Sec. 7.2.2), exposed as distlab.fsdp.layer_by_layer_exposed (one layer of prefetch).
    Per parameter tensor (zero3_tensors = k > 1 collectives per layer: DeepSpeed ZeRO-3 as Narayanan et al. 2021 Table 2 ran it) each layer's gather and
    reduction also pays k - 1 more ring latencies over all dp x cp ranks (ring_latency_array): the flat buffer's
    one is in the placed time already. No replicas: nothing. Lesson 3, Lesson 7 §3."""
    grad, expert, replicas, all_reduce_of = _gradient_groups(c)
    m, layers, zero = c.m, c.layers_stage, c.zero
    all_reduce = all_reduce_of(grad, expert)
    buckets = np.maximum(1.0, np.ceil((grad + expert) / c.bucket_bytes))
    forward = (1.0 - r["backward_share"]) * r["compute_mb"]
    backward = r["backward_share"] * r["compute_mb"]
    half = 0.5 * all_reduce
    ddp = exposed_communication_time(all_reduce, backward, buckets)
    gather_once = exposed_communication_time(half, forward, buckets)
    zero1 = exposed_communication_time(half, backward, buckets) + gather_once
    zero2 = m * exposed_communication_time(half, backward, buckets) + gather_once
    layer_half = 0.5 * all_reduce_of(grad / layers, expert / layers)
    if np.any(np.asarray(c.zero3_tensors) > 1.0):  # per-tensor collectives: k - 1 more latencies over all ranks
        latency = ring_latency_array(c.dpc, c.tp, c.g, c.intra_lat, c.inter_lat)
        layer_half = layer_half + (np.asarray(c.zero3_tensors) - 1.0) * latency
    zero3_mb = layer_by_layer_exposed(
        forward / layers, backward / layers, layer_half, layer_half, layers, prefetch=1, reshard_after_forward=True
    )
    total = np.select(
        [zero >= 3, zero == 2, zero == 1],
        [m * (3.0 * layers - 1.0) * layer_half, (m + 1.0) * half, all_reduce],
        all_reduce,
    )
    exposed = np.select([zero >= 3, zero == 2, zero == 1], [m * zero3_mb, zero2, zero1], ddp)
    return dict(
        dp_comm_s=total,
        dp_exposed_s=np.where(replicas > 1, exposed, 0.0),
        dp_hidden_s=np.where(replicas > 1, np.maximum(0.0, total - exposed), 0.0),
        layer_forward_s=forward / layers,  # one layer's forward and backward per microbatch (the stage's share,
        layer_backward_s=backward / layers,  # averaged): what ZeRO-3's per-layer collectives hide under (Lesson 11 §2)
    )
