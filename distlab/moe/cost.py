"""Compute, memory and communication of mixture-of-experts layers under expert parallelism.

FLOPs: a token runs only its active parameters, so the weight FLOPs are 6 x active x tokens (forward
2, backward 4), plus the attention core over the context and the logits, counted as distlab.flops
counts a dense model (Narayanan et al. 2021, Eq. 3; PaLM App. B).

Memory (Megatron-Core MoE docs, "Expert Parallelism" and "Expert Tensor Parallelism"; Megatron-LM
parallel_state.py): the non-expert weights (attention, norms, router, shared experts, embeddings) are
sharded over tp x pp and replicated over the data-parallel group dp = N / (tp cp pp); the routed experts
are split over the expert-parallel group (E / ep experts per GPU), each expert's matrices over expert
tensor parallelism etp, and replicated over the expert data-parallel group edp = N / (etp ep pp). The
distributed optimizer (ZeRO-1) shards each part's optimizer state over its own data-parallel group.

Routing capacity, drops and imbalance are distlab.moe.capacity's; the all-to-all's bytes and time are
distlab.moe.all_to_all's (GShard Sec. 3; Megatron-Core "alltoall" token dispatcher): each MoE layer runs
2 all-to-alls in the forward (dispatch, combine), 2 in the backward (their gradients), 2 more when full
recomputation reruns the forward. Lesson 10 §2-§5.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import flops, memory
from .._arguments import (
    as_cluster,
    divisors,
    recompute_mode,
    short_list,
    whole_number,
    zero_stage,
)
from ..errors import ConfigurationError
from ..units import format_bytes, format_seconds
from .all_to_all import all_to_all_bytes, all_to_all_time, ep_members_per_node
from .capacity import (
    MAX_GPUS,
    MAX_SEQ_LEN,
    MAX_TOKENS,
    _ep_divides,
    _fraction,
    busiest_expert_load,
)
from .catalog import model as moe_model

__all__ = [
    "ALL_TO_ALLS_PER_LAYER",
    "moe_step_flops",
    "expert_groups",
    "ExpertMemory",
    "expert_parallel_memory",
    "MoELayerCost",
    "moe_layer_cost",
    "MoEStepCost",
    "moe_step_cost",
]


#: All-to-alls per MoE layer and microbatch by recomputation mode: dispatch + combine in the forward,
#: their gradients in the backward, and with full recomputation the forward pair again.
ALL_TO_ALLS_PER_LAYER = {"none": 4, "selective": 4, "full": 6}


# --- compute --------------------------------------------------------------------------------


def _attention_core_per_token(m, s: int) -> float:
    """Forward FLOPs of the attention core of all layers, per token: 2 x keys x (q/k width + v width)."""
    full, windowed = m.layers - m.window_layers, m.window_layers
    keys = full * s + windowed * min(s, m.sliding_window or s)
    return 2.0 * keys * (m.attention_width + m.value_width)


def moe_step_flops(model, global_batch, seq_len=None, recompute="none") -> flops.StepFlops:
    """FLOPs of one training step of an MoE model (all GPUs together), by part, as distlab.flops counts them.

    weights = 3 x 2 x tokens x (active parameters of the blocks, router included); attention = 3 x tokens x
    2 x keys x (heads x q/k head width + heads x v head width) per layer (full context; a banded layer sees
    min(s, window) keys); logits = 3 x 2 h V x tokens. Recomputation: full repeats each block's forward,
    selective its attention core. Lesson 10 §1.

    >>> f = moe_step_flops('mixtral-8x7b', global_batch=1, seq_len=4096)
    >>> round(f.weights / (6 * 4096 * 12.62e9), 3)  # 6 x active (blocks) x tokens
    1.0
    """
    m = moe_model(model)
    batch = whole_number(global_batch, "global_batch", 1, MAX_TOKENS)
    s = whole_number(seq_len if seq_len is not None else m.seq_len, "seq_len", 1, MAX_SEQ_LEN)
    mode = recompute_mode(recompute)
    tokens = float(batch) * s
    blocks = m.dense_layers * m.dense_layer_params() + m.moe_layers * m.moe_layer_active_params()
    weights_forward = 2.0 * blocks * tokens
    core_forward = _attention_core_per_token(m, s) * tokens
    logits = flops.TRAINING_PASSES * float(flops.logit_forward_flops_array(m.hidden, m.vocab, tokens))
    again = {"none": 0.0, "selective": core_forward, "full": weights_forward + core_forward}[mode]
    return flops.StepFlops(
        flops.TRAINING_PASSES * weights_forward, flops.TRAINING_PASSES * core_forward, logits, again, tokens, mode
    )


# --- routing ---------------------------------------------------------------------------------


# --- memory ----------------------------------------------------------------------------------


def expert_groups(gpus, *, tp=1, cp=1, pp=1, ep=1, etp=1) -> dict:
    """Data-parallel degrees of the two weight kinds: dp = N/(tp cp pp) for dense, edp = N/(etp ep pp) for experts.

    Megatron-LM parallel_state.initialize_model_parallel: the expert layers use a second rank grid
    (order tp-ep-dp-pp with tp = expert_tensor_parallel_size), which must cover the same N GPUs and
    pipeline stages. Lesson 10 §4.

    >>> expert_groups(64, tp=2, ep=8)
    {'dp': 32, 'edp': 8}
    """
    n = whole_number(gpus, "gpus", 1, MAX_GPUS)
    tp, cp, pp = (
        whole_number(tp, "tp", 1, MAX_GPUS),
        whole_number(cp, "cp", 1, MAX_GPUS),
        whole_number(pp, "pp", 1, MAX_GPUS),
    )
    ep, etp = whole_number(ep, "ep", 1, MAX_GPUS), whole_number(etp, "etp", 1, MAX_GPUS)
    for name, size in (("tp x cp x pp", tp * cp * pp), ("etp x ep x pp", etp * ep * pp)):
        if n % size:
            raise ConfigurationError(
                f"{name} = {size} does not divide gpus={n}; the data-parallel degree "
                f"gpus / ({name}) must be a whole number"
            )
    return {"dp": n // (tp * cp * pp), "edp": n // (etp * ep * pp)}


@dataclass(frozen=True)
class ExpertMemory:
    """Model-state bytes per GPU of an MoE model, split into the non-expert part and the routed experts."""

    dense_weights: float
    dense_gradients: float
    dense_optimizer: float
    expert_weights: float
    expert_gradients: float
    expert_optimizer: float
    dp: int
    edp: int
    experts_per_gpu: int

    @property
    def dense_bytes(self) -> float:
        return self.dense_weights + self.dense_gradients + self.dense_optimizer

    @property
    def expert_bytes(self) -> float:
        return self.expert_weights + self.expert_gradients + self.expert_optimizer

    @property
    def total_bytes(self) -> float:
        return self.dense_bytes + self.expert_bytes

    def to_dict(self) -> dict:
        return dict(
            self.__dict__, dense_bytes=self.dense_bytes, expert_bytes=self.expert_bytes, total_bytes=self.total_bytes
        )

    def summary(self) -> str:
        return (
            f"{format_bytes(self.total_bytes)} per GPU: non-expert {format_bytes(self.dense_bytes)} "
            f"(dp {self.dp}), experts {format_bytes(self.expert_bytes)} ({self.experts_per_gpu} experts "
            f"per MoE layer, edp {self.edp})"
        )


def expert_parallel_memory(model, gpus, *, tp=1, cp=1, pp=1, ep=1, etp=1, precision="mixed", zero=1) -> ExpertMemory:
    """Model-state bytes per GPU with experts sharded over ep x etp and replicated over edp.

    non-expert: distlab.memory.model_state_bytes_array(P_dense, recipe, zero, dp, tp, pp);
    experts:    the same with P_experts, sharded over etp x ep (for tp) and edp (for dp).
    zero: 0 plain, 1 Megatron's distributed optimizer (the default), 2, 3. Layers are spread evenly over
    pp (the embedding and output layer are not placed on their stages). Lesson 10 §4.

    >>> mem = expert_parallel_memory('deepseek-v3', 2048, pp=16, ep=64)
    >>> mem.experts_per_gpu, round(mem.total_bytes / 1e9, 1)
    (4, 10.8)
    """
    m = moe_model(model)
    groups = expert_groups(gpus, tp=tp, cp=cp, pp=pp, ep=ep, etp=etp)
    ep, etp, tp, pp = _ep_divides(ep, m.experts), int(etp), int(tp), int(pp)
    if m.expert_ffn % etp:
        raise ConfigurationError(
            f"etp={etp} does not divide expert_ffn={m.expert_ffn} (each expert's matrices "
            f"are split over etp); valid: {short_list(divisors(m.expert_ffn), 12)}"
        )
    if pp > m.layers:
        raise ConfigurationError(f"pp={pp} is more than the {m.layers} layers; valid: 1 to {m.layers}")
    recipe = memory.precision_recipe(precision)
    stage = zero_stage(zero)
    dense = memory.model_state_bytes_array(m.non_expert_parameter_count(), recipe, stage, groups["dp"], tp, pp)
    expert = memory.model_state_bytes_array(
        m.routed_expert_parameter_count(), recipe, stage, groups["edp"], etp * ep, pp
    )
    (dense_w, dense_g, dense_o), (expert_w, expert_g, expert_o) = dense, expert
    return ExpertMemory(
        float(dense_w),
        float(dense_g),
        float(dense_o),
        float(expert_w),
        float(expert_g),
        float(expert_o),
        groups["dp"],
        groups["edp"],
        m.experts // ep,
    )


# --- all-to-all ------------------------------------------------------------------------------


@dataclass(frozen=True)
class MoELayerCost:
    """What one MoE layer adds per GPU and microbatch (forward + backward): plain floats in bytes, s, FLOPs.

    expert_flops: FLOPs of the routed experts on the busiest GPU (balanced share x imbalance);
    all_to_all_*: bytes and time of all its all-to-alls; dropped: share of token copies dropped.
    """

    tokens_per_gpu: int
    expert_flops: float
    balanced_expert_flops: float
    imbalance: float
    all_to_alls: int
    all_to_all_intra_bytes: float
    all_to_all_inter_bytes: float
    all_to_all_time_s: float
    ep_per_node: int
    link: str

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    def summary(self) -> str:
        return (
            f"per MoE layer and microbatch: {self.all_to_alls} all-to-alls,\n"
            f"    {format_bytes(self.all_to_all_intra_bytes)} over NVLink + "
            f"{format_bytes(self.all_to_all_inter_bytes)} across nodes per GPU, "
            f"{format_seconds(self.all_to_all_time_s)} ({self.link});\n    expert FLOPs x{self.imbalance:.3g} "
            f"for imbalance"
        )


def moe_layer_cost(
    model,
    cluster,
    *,
    micro_batch=1,
    seq_len=None,
    tp=1,
    cp=1,
    ep=1,
    etp=1,
    recompute="none",
    element_bytes=2.0,
    capacity_factor=None,
    max_nodes=None,
    imbalance=1.0,
) -> MoELayerCost:
    """Per-GPU cost of ONE MoE layer for one microbatch, forward + backward: the hook for the step model.

    Tokens per GPU T = micro_batch x seq_len / (tp x cp) (sequence parallelism, which Megatron requires with
    MoE and TP). Routed-expert FLOPs, balanced: each GPU sends T k token copies and, on average, receives and
    processes as many: 3 x 2 x 3 h f_e x T x k (with expert TP, etp GPUs share a copy's f_e columns and
    gather etp times the copies: the same). The busiest GPU does busiest_expert_load times that: with a
    capacity_factor exactly that factor (buffers padded to capacity), else `imbalance` (distlab.moe.imbalance_factor,
    or the routing simulation); full recomputation adds a forward. Attention,
    router and shared experts are the dense part of the layer (distlab.flops counts them).
    All-to-alls: ALL_TO_ALLS_PER_LAYER[recompute] of all_to_all_bytes each, timed by all_to_all_time. EP
    members per node p come from Megatron's expert rank layout (distlab.mesh.expert_layout: EP neighbours are
    etp ranks apart, whatever the attention's tp). Not counted: with etp > 1 Megatron all-gathers the dispatched
    tokens over the expert-TP group and reduce-scatters the outputs (ring collectives of distlab.collectives over
    etp GPUs, inside a node when etp <= 8), and the router's auxiliary loss or bias update.
    Lesson 10 §5.

    >>> c = moe_layer_cost('mixtral-8x7b', 'dgx-h100', seq_len=4096, ep=8)
    >>> c.all_to_alls, round(c.all_to_all_intra_bytes / 1e6, 1), c.link
    (4, 234.9, 'intra-node')
    """
    m = moe_model(model)
    c = as_cluster(cluster)
    b = whole_number(micro_batch, "micro_batch", 1, MAX_TOKENS)
    s = whole_number(seq_len if seq_len is not None else m.seq_len, "seq_len", 1, MAX_SEQ_LEN)
    tp, cp, ep, etp = (whole_number(v, n, 1, MAX_GPUS) for v, n in ((tp, "tp"), (cp, "cp"), (ep, "ep"), (etp, "etp")))
    ep = _ep_divides(ep, m.experts)
    if (b * s) % (tp * cp):
        raise ConfigurationError(f"tp x cp = {tp * cp} does not divide the {b * s} tokens of a microbatch")
    mode = recompute_mode(recompute)
    skew = busiest_expert_load(
        _fraction(imbalance, "imbalance", 1.0, float(ep)), capacity_factor, ep, m.experts, m.top_k
    )
    p = ep_members_per_node(etp=etp, ep=ep, gpus_per_node=c.gpus_per_node)
    t = b * s // (tp * cp)
    one = all_to_all_bytes(
        t,
        m.hidden,
        m.top_k,
        ep,
        ep_per_node=p,
        element_bytes=element_bytes,
        experts=m.experts,
        capacity_factor=capacity_factor,
        max_nodes=max_nodes,
    )
    count = ALL_TO_ALLS_PER_LAYER[mode]
    time = count * all_to_all_time(one["intra"], one["inter"], ep, c, ep_per_node=p)
    passes = flops.TRAINING_PASSES + (1.0 if mode == "full" else 0.0)
    balanced = passes * 2.0 * 3 * m.hidden * m.expert_ffn * t * m.top_k
    link = "intra-node" if p == ep else "inter-node"
    return MoELayerCost(
        t, balanced * skew, balanced, skew, count, count * one["intra"], count * one["inter"], time, p, link
    )


@dataclass(frozen=True)
class MoEStepCost:
    """What the MoE layers add to one training step on the busiest pipeline stage's GPU (plain floats).

    moe_layers: MoE layers on that stage; all_to_all_time_s: their all-to-alls over all microbatches
    (exposed unless overlapped: DeepSeek's DualPipe hides them behind compute); expert_flops: routed-expert
    FLOPs on the busiest GPU (x imbalance); memory: model states per GPU (ExpertMemory); layer: one layer's cost.
    """

    moe_layers: int
    microbatches: int
    all_to_all_time_s: float
    all_to_all_intra_bytes: float
    all_to_all_inter_bytes: float
    expert_flops: float
    memory: ExpertMemory
    layer: MoELayerCost

    def to_dict(self) -> dict:
        return dict(
            moe_layers=self.moe_layers,
            microbatches=self.microbatches,
            all_to_all_time_s=self.all_to_all_time_s,
            all_to_all_intra_bytes=self.all_to_all_intra_bytes,
            all_to_all_inter_bytes=self.all_to_all_inter_bytes,
            expert_flops=self.expert_flops,
            memory=self.memory.to_dict(),
            layer=self.layer.to_dict(),
        )


def moe_step_cost(
    model,
    cluster,
    gpus,
    *,
    micro_batch=1,
    microbatches=1,
    seq_len=None,
    tp=1,
    cp=1,
    pp=1,
    ep=1,
    etp=None,
    recompute="none",
    precision="mixed",
    zero=1,
    element_bytes=2.0,
    capacity_factor=None,
    max_nodes=None,
    imbalance=1.0,
) -> MoEStepCost:
    """The MoE part of a training step for the step model: moe_layer_cost x MoE layers on the busiest stage x
    microbatches, and expert_parallel_memory. The stage holding the most MoE layers is the busiest:
    min(moe_layers, ceil(layers / pp)) (dense first layers sit on the first stage).
    Lesson 10 §5.

    >>> s = moe_step_cost('deepseek-v3', 'dgx-h100', 2048, microbatches=120, pp=16, ep=64, max_nodes=4)
    >>> s.moe_layers, round(s.all_to_all_time_s, 1)
    (4, 8.9)
    """
    m = moe_model(model)
    c = as_cluster(cluster)
    etp = whole_number(tp, "tp", 1, MAX_GPUS) if etp is None else etp
    mb = whole_number(microbatches, "microbatches", 1, MAX_TOKENS)
    mem = expert_parallel_memory(m, gpus, tp=tp, cp=cp, pp=pp, ep=ep, etp=etp, precision=precision, zero=zero)
    layer = moe_layer_cost(
        m,
        c,
        micro_batch=micro_batch,
        seq_len=seq_len,
        tp=tp,
        cp=cp,
        ep=ep,
        etp=etp,
        recompute=recompute,
        element_bytes=element_bytes,
        capacity_factor=capacity_factor,
        max_nodes=max_nodes,
        imbalance=imbalance,
    )
    layers = min(m.moe_layers, math.ceil(m.layers / int(pp)))
    count = layers * mb
    return MoEStepCost(
        layers,
        mb,
        count * layer.all_to_all_time_s,
        count * layer.all_to_all_intra_bytes,
        count * layer.all_to_all_inter_bytes,
        count * layer.expert_flops,
        mem,
        layer,
    )
