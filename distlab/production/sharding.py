"""FSDP and HSDP of a model on a cluster: the step model's layer on FSDP2's layer-by-layer timeline. Lesson 11 §2.

A layer's compute comes from the step model itself (training.step_model_array with ZeRO-3 over the shard group,
one microbatch: its per-layer forward and backward, the embedding and the logits spread over the layers as the
step model spreads them), its all-gathers, reduce-scatters and (HSDP) replica all-reduces from the placed
collective (distlab.collectives.placed: a ring inside a node, hierarchical across nodes, where the node's NICs
work together), on the links the step model uses (the calibrated model's achieved link shares, or line rates with
a fixed efficiency). The schedule is distlab.fsdp.fsdp_timeline. So FSDP over every GPU here exposes exactly what
the step model's ZeRO-3 term exposes for the same layout (tests/core/test_consistency.py).

HSDP (hybrid sharding, Zhao et al. 2023, "PyTorch FSDP", Sec. 3.2): shard within a node of g GPUs over NVLink,
replicate across the R = N / g nodes: per layer AG and RS over NVLink, then the reduce-scattered 1/g shard is
all-reduced across the R replicas over the network (member j of every node, one rail).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import memory, models, training
from ..memory_recipes import gradient_reduce_bytes, memory_recipe as _memory_recipe
from .._arguments import as_cluster, recompute_mode
from .._words import counted
from ..collectives import placed_collective
from ..errors import ConfigurationError
from ..fsdp import SHARDINGS, FsdpTimeline, fsdp_timeline
from ..step import pricing
from ..units import format_bytes, format_seconds, positive, positive_int

__all__ = ["ShardingPlan", "sharding_plan", "compare_sharding"]


@dataclass(frozen=True)
class ShardingPlan:
    """FSDP (``sharding='full'``) or HSDP (``'hybrid'``) of a model on a cluster: per GPU, per microbatch.

    Bytes are per GPU (GB = 1e9 B in text); ``*_sent_bytes`` count what one GPU sends per microbatch
    over NVLink and over the network; times in seconds. ``shard`` is the shard group's size (N or g),
    ``replicas`` the copies (1 or N / g); ``algorithm`` the placed algorithm of the shard group's gathers
    (distlab.collectives.PLACEMENTS). ``layer_bytes`` is what one layer's gather moves: the step model's
    layer, the model's parameters / L in 16 bits. Lesson 11 §2.
    """

    model: str
    sharding: str
    gpus: int
    shard: int
    replicas: int
    layers: int
    params_per_layer: float
    state_bytes: float  # sharded weights + gradients + optimizer state (ZeRO-3 over the shard group)
    gathered_bytes: float  # peak 16-bit copies of gathered layers (and one layer's unsharded gradients)
    nvlink_sent_bytes: float
    network_sent_bytes: float
    gather_s: float
    reduce_s: float
    timeline: FsdpTimeline
    algorithm: str = "ring"
    layer_bytes: float = 0.0
    reduce_bytes: float = 0.0  # what one layer's gradient reduce-scatter moves (the engine's reduce dtype)
    gradient_copy_bytes: float = 0.0  # one layer's unsharded gradients, the last part of gathered_bytes

    @property
    def memory_bytes(self) -> float:
        """Model state + gathered copies per GPU (activations not counted)."""
        return self.state_bytes + self.gathered_bytes

    @property
    def exposed_s(self) -> float:
        return self.timeline.exposed_s

    def _reduced(self) -> str:
        """', gradients reduced as N B' where the reduce-scatter moves other bytes than the gather (fp32)."""
        if not self.reduce_bytes or self.reduce_bytes == self.layer_bytes:
            return ""
        return f"; gradients reduced as {format_bytes(self.reduce_bytes)}"

    def _gathered(self) -> str:
        """What the gathered bytes are: the peak of gathered layers' weights and one layer's unsharded gradients, each
        a layer's own parameters (params_per_layer, without the embedding share the gathers carry)."""
        layers = self.timeline.peak_gathered
        weights = (self.gathered_bytes - self.gradient_copy_bytes) / layers
        own = f"a layer: {self.params_per_layer / 1e6:.0f}M parameters"  # its own, without the embedding share
        whose = f"{counted(layers, 'layer')}'" + ("s" if layers == 1 else "")
        if format_bytes(weights) == format_bytes(self.gradient_copy_bytes):
            return (
                f"    gathered = {whose} weights + one layer's unsharded gradients, "
                f"{format_bytes(weights)} each ({own})"
            )
        return (
            f"    gathered = {whose} weights, {format_bytes(weights)} each, + one layer's gradients, "
            f"{format_bytes(self.gradient_copy_bytes)} ({own})"
        )

    def summary(self) -> str:
        """A few lines: memory, traffic, timeline. Lesson 11 §2."""
        kind = (
            f"FSDP over all {self.gpus} GPUs ({self.algorithm} gathers)"
            if self.sharding == "full"
            else f"HSDP: shard over {self.shard} GPUs of a node, {self.replicas} replicas"
        )
        return "\n".join(
            [
                f"{self.model}, {kind}",
                f"memory per GPU: {format_bytes(self.state_bytes)} sharded state + {format_bytes(self.gathered_bytes)} "
                f"gathered = {format_bytes(self.memory_bytes)} (activations not counted)",
                self._gathered(),
                f"sent per GPU per microbatch: {format_bytes(self.nvlink_sent_bytes)} over NVLink, "
                f"{format_bytes(self.network_sent_bytes)} over the network",
                f"per layer ({format_bytes(self.layer_bytes)}{self._reduced()}): gather {format_seconds(self.gather_s)}, "
                f"gradient reduction {format_seconds(self.reduce_s)}, forward {format_seconds(self.timeline.forward_s)}, "
                f"backward {format_seconds(self.timeline.backward_s)}",
                self.timeline.summary(),
            ]
        )


def _step_model_layer(mdl, cl, recipe, n, b, s, mode, efficiency, engine=None):
    """(forward, backward, hardware arguments) of one layer per microbatch, as the step model prices ZeRO-3 over n
    GPUs with one microbatch of b sequences of s tokens (training.step_model_array's layer_forward_s and
    layer_backward_s); efficiency None: the calibrated compute model and its achieved link shares."""
    compute = pricing.compute_model_for(cl, efficiency, memory_recipe=engine)
    hw = training.hardware_arguments(cl, recipe, achieved=compute.calibrated)
    out = training.step_model_array(
        mdl,
        **hw,
        global_batch=n * b,
        seq_len=s,
        dp=n,
        tp=1,
        pp=1,
        chunks=1,
        micro_batch_size=b,
        zero=3,
        recompute_code=memory.RECOMPUTE_MODES.index(mode),
        sequence_parallel=False,
        schedule_code=training.SCHEDULES.index("1f1b"),
        memory_recipe=engine,
        **pricing.compute_arguments(compute),
    )
    return float(out["layer_forward_s"]), float(out["layer_backward_s"]), compute.calibrated


def sharding_plan(
    model,
    cluster,
    *,
    sharding="full",
    nodes=None,
    fabric=None,
    micro_batch_size=1,
    seq_len=None,
    precision="mixed",
    efficiency=None,
    prefetch=1,
    reshard_after_forward=True,
    recompute="none",
    memory_recipe=None,
) -> ShardingPlan:
    """Price FSDP or HSDP of `model` on `cluster` (a hardware.Cluster or a node name with ``nodes``).
    Lesson 11 §2.

    Per layer, M = P / L parameters in 16 bits (the step model's layer: the embedding and output spread over the
    L layers; mixed precision 2 B). full: AG and RS of M over all N GPUs, the placed collective
    (collectives.placed_collective: hierarchical across nodes, NVLink inside one); hybrid: AG and RS over the g
    GPUs of a node, then an all-reduce of M / g across the R nodes (stride g: one member per node). Compute per
    layer: the step model's (training.step_model_array, ZeRO-3 over N, one microbatch): efficiency None (default)
    the calibrated model with the links at their achieved shares, a number Lesson 7 §1's fixed share of peak at
    line rate; recompute as the step model counts it. Traffic per microbatch per GPU: 2L - 1 gathers (L with
    reshard_after_forward False) and L reduce-scatters, each sending its placed bytes on NVLink and the fabric.
    memory_recipe: None (the ZeRO paper's count: gradients reduced in 16 bits) or an engine's (distlab.memory_recipes,
    e.g. 'fsdp2'): its reduce-scatters move memory_recipes.gradient_reduce_bytes per parameter (fp32: 4 B, twice the
    gathers), and the layer's compute is the step model's for that engine.

    Llama 2 7B on 4 DGX H100 nodes, FSDP over 32 GPUs: state 16 B x 6.74e9 / 32 = 3.37 GB per GPU.

    >>> plan = sharding_plan("llama2-7b", "dgx-h100", nodes=4)
    >>> round(plan.state_bytes / 1e9, 2), plan.shard, plan.replicas, plan.algorithm
    (3.37, 32, 1, 'hierarchical')
    """
    mdl, cl, shard, recipe, mode, b, s = _checked(
        model, cluster, nodes, fabric, sharding, precision, recompute, micro_batch_size, seq_len, efficiency
    )
    n, replicas = cl.gpus, cl.gpus // shard
    engine = None if memory_recipe is None else _memory_recipe(memory_recipe)
    t_f, t_b, achieved = _step_model_layer(mdl, cl, recipe, n, b, s, mode, efficiency, engine)
    layer_bytes = float(mdl.parameter_count()) / mdl.layers * recipe.gradient_bytes
    reduce_bytes = layer_bytes * float(gradient_reduce_bytes(recipe, engine, 3)) / float(recipe.gradient_bytes)
    ag, rs, reduce_s, ar_sent = _layer_collectives(layer_bytes, reduce_bytes, shard, replicas, cl, achieved)
    tl = fsdp_timeline(
        t_f, t_b, ag.time_s, reduce_s, mdl.layers, prefetch=prefetch, reshard_after_forward=reshard_after_forward
    )
    gathers = mdl.layers + int(np.isfinite(tl.bg_start).sum())
    nvlink_sent = gathers * ag.intra_sent_bytes + mdl.layers * rs.intra_sent_bytes
    network_sent = gathers * ag.inter_sent_bytes + mdl.layers * (rs.inter_sent_bytes + ar_sent)

    P = float(mdl.params_per_layer())
    w_bytes, g_bytes = float(recipe.weight_bytes), float(recipe.gradient_bytes)
    total = float(mdl.parameter_count())
    state = sum(memory.model_state_bytes(total, recipe, zero=3, dp=shard))
    gathered = w_bytes * P * tl.peak_gathered + g_bytes * P  # gathered layers + one layer's unsharded gradients
    return ShardingPlan(
        mdl.name,
        sharding,
        n,
        shard,
        replicas,
        mdl.layers,
        P,
        state,
        gathered,
        nvlink_sent,
        network_sent,
        ag.time_s,
        reduce_s,
        tl,
        ag.algorithm,
        layer_bytes,
        reduce_bytes,
        g_bytes * P,
    )


def _checked(model, cluster, nodes, fabric, sharding, precision, recompute, micro_batch_size, seq_len, efficiency):
    """(model, cluster, shard size, precision recipe, recompute mode, b, s), checked in sharding_plan's order."""
    mdl = models.model(model)
    cl = as_cluster(cluster, nodes, fabric)
    if not isinstance(sharding, str) or sharding not in SHARDINGS:
        raise ConfigurationError(f"sharding={sharding!r}; valid: {', '.join(SHARDINGS)}")
    n, per_node = cl.gpus, cl.gpus_per_node
    if sharding == "hybrid" and cl.nodes < 2:
        raise ConfigurationError(
            f"sharding='hybrid' replicates across nodes, but the cluster has {cl.nodes} node; "
            f"use nodes >= 2 or sharding='full'"
        )
    shard = n if sharding == "full" else per_node
    recipe = memory.precision_recipe(precision)
    mode = recompute_mode(recompute)
    b = positive_int(micro_batch_size, "micro_batch_size")
    s = mdl.seq_len if seq_len is None else positive_int(seq_len, "seq_len")
    if s > 10_000_000 or b > 4096:
        raise ConfigurationError(
            f"seq_len={s} or micro_batch_size={b} too large (at most 10,000,000 tokens, 4096 sequences)"
        )
    if efficiency is not None:
        eff = positive(efficiency, "", "efficiency")
        if eff > 1:
            raise ConfigurationError(f"efficiency={efficiency!r} is a fraction of peak; valid: 0 < efficiency <= 1")
    return mdl, cl, shard, recipe, mode, b, s


def _layer_collectives(layer_bytes: float, reduce_bytes: float, shard: int, replicas: int, cl, achieved):
    """One layer's placed all-gather (layer_bytes) and reduce-scatter (reduce_bytes: the engine's reduce dtype) over
    the shard group, the reduce time (with HSDP's all-reduce of the reduced shard across the replicas, stride shard),
    and that all-reduce's network bytes."""
    ag = placed_collective("all-gather", layer_bytes, shard, cl, achieved=achieved)
    rs = placed_collective("reduce-scatter", reduce_bytes, shard, cl, achieved=achieved)
    reduce_s = rs.time_s
    ar_sent = 0.0
    if replicas > 1:
        ar = placed_collective("all-reduce", reduce_bytes / shard, replicas, cl, stride=shard, achieved=achieved)
        reduce_s += ar.time_s
        ar_sent = ar.inter_sent_bytes
    return ag, rs, reduce_s, ar_sent


def compare_sharding(model, cluster, **kwargs) -> tuple[ShardingPlan, ShardingPlan]:
    """(FSDP over all GPUs, HSDP within nodes) of the same model on the same cluster. Lesson 11 §2.

    HSDP keeps N/g times FSDP's sharded state per GPU (sharded over the g GPUs of a node, not all N). Both gather
    on NVLink; FSDP's hierarchical gathers and reduce-scatters send the network (R-1)/R x M / g per collective and
    GPU, 3L - 1 of them; HSDP only its replica all-reduce, 2 (R-1)/R x M / g, L of them.

    >>> full, hybrid = compare_sharding("llama2-7b", "dgx-h100", nodes=4)
    >>> hybrid.network_sent_bytes < full.network_sent_bytes and hybrid.state_bytes > full.state_bytes
    True
    """
    return (
        sharding_plan(model, cluster, sharding="full", **kwargs),
        sharding_plan(model, cluster, sharding="hybrid", **kwargs),
    )
