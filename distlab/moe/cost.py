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

Routing (Shazeer et al. 2017; GShard, Lepikhin et al. 2021, Sec. 2.2; Switch Transformer, Fedus et al.
2022, Sec. 2.2): each token goes to its top_k experts; an expert accepts at most its capacity

    C = ceil(capacity_factor x T x k / E)     T tokens routed together, E experts

and tokens over capacity are dropped (they skip the expert through the residual). Dropless training
(capacity_factor None) keeps every token, and then the busiest expert sets the layer's time.

All-to-all (GShard Sec. 3; Megatron-Core "alltoall" token dispatcher): each MoE layer dispatches the
T x k token copies of a GPU to the GPUs of its EP group that hold the chosen experts and combines the
outputs back: 2 all-to-alls in the forward, 2 in the backward (their gradients), 2 more when full
recomputation reruns the forward. A GPU's send buffer per all-to-all is M = T k h bytes-per-element
(E C h with capacity padding); with uniform routing (ep-1)/ep of it leaves the GPU: (p-1)/ep to the p-1
other EP members on its node over NVLink, (ep-p)/ep to other nodes over the network. DeepSeek-V3's
node-limited routing (report Sec. 2.1.2 and 3.2.2) sends each token to at most M nodes and crosses the
network once per target node (then NVLink forwards it to the experts there): its inter-node bytes per
token are h x (expected remote nodes), at most M h instead of k h.

Every link number comes from distlab.hardware (the cluster's intra-node link and its fabric share per
GPU); the intra-node part is distlab.collectives' pairwise all-to-all. Lesson 10 §2-§5.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import collectives, flops, memory, mesh
from .._arguments import (
    as_cluster,
    divisors,
    number_array,
    recompute_mode,
    short_list,
    whole_number,
    zero_stage,
)
from ..errors import ConfigurationError
from ..units import format_bytes, format_seconds, positive
from .catalog import model as moe_model

__all__ = [
    "ALL_TO_ALLS_PER_LAYER",
    "moe_step_flops",
    "expert_capacity",
    "dropped_tokens",
    "imbalance_factor",
    "busiest_expert_load",
    "expert_groups",
    "ExpertMemory",
    "expert_parallel_memory",
    "expected_remote_nodes",
    "all_to_all_bytes",
    "all_to_all_time",
    "ep_members_per_node",
    "MoELayerCost",
    "moe_layer_cost",
    "MoEStepCost",
    "moe_step_cost",
]

#: Largest sequence length and token count the formulas accept (results stay finite floats).
MAX_SEQ_LEN = 2**24
MAX_TOKENS = 2**40
#: Most experts per layer, and most GPUs in a group, the formulas accept.
MAX_EXPERTS = 2**16
MAX_GPUS = 2**22

#: All-to-alls per MoE layer and microbatch by recomputation mode: dispatch + combine in the forward,
#: their gradients in the backward, and with full recomputation the forward pair again.
ALL_TO_ALLS_PER_LAYER = {"none": 4, "selective": 4, "full": 6}


def _fraction(value, name: str, low: float = 0.0, high: float = math.inf, low_open=False) -> float:
    ok = (
        isinstance(value, (int, float, np.integer, np.floating))
        and not isinstance(value, bool)
        and math.isfinite(float(value) if abs(value) < 2**1000 else math.inf)
        and (value > low if low_open else value >= low)
        and value <= high
    )
    if not ok:
        bound = f"{'>' if low_open else '>='} {low:g}" + (f" and <= {high:g}" if math.isfinite(high) else "")
        raise ConfigurationError(f"{name}={value!r} must be a number {bound}")
    return float(value)


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


def expert_capacity(tokens, experts, top_k, capacity_factor) -> int:
    """Tokens one expert accepts: ceil(capacity_factor x tokens x top_k / experts).

    GShard (Lepikhin et al. 2021) Sec. 2.2 and Switch Transformer (Fedus et al. 2022) Sec. 2.2, with the
    top-k copies counted as Megatron-Core's capacity does. Lesson 10 §3.

    >>> expert_capacity(4096, 8, 2, 1.25)  # Mixtral-like: 1024 copies per expert on average, 25 % slack
    1280
    """
    t = whole_number(tokens, "tokens", 1, MAX_TOKENS)
    e = whole_number(experts, "experts", 1, MAX_EXPERTS)
    k = whole_number(top_k, "top_k", 1, MAX_EXPERTS)
    if k > e:
        raise ConfigurationError(f"top_k={k} is more than the {e} experts; valid: 1 to {e}")
    cf = _fraction(capacity_factor, "capacity_factor", 0.0, 1e6, low_open=True)
    return max(1, math.ceil(cf * t * k / e - 1e-9))


def _loads(loads, name: str = "loads") -> np.ndarray:
    array = None
    if not isinstance(loads, (str, bytes, dict)) and (not hasattr(loads, "__len__") or len(loads) <= 2**20):
        try:
            array = np.asarray(loads, dtype=float)
        except (ValueError, TypeError):
            array = None
    if (
        array is None
        or array.ndim != 1
        or array.size == 0
        or not np.all(np.isfinite(array))
        or np.any(array < 0)
        or array.size > 2**20
    ):
        raise ConfigurationError(f"{name} must be a 1-D sequence of 1 to {2**20:,} token counts >= 0 per expert")
    return array


def dropped_tokens(loads, capacity) -> float:
    """Token copies dropped when each expert accepts at most `capacity`: sum of max(0, load - capacity).

    Switch Transformer Sec. 2.2 ("overflowed tokens ... passed to the next layer through the residual").
    Lesson 10 §3.

    >>> dropped_tokens([1500, 900, 700, 1000], capacity=1280)
    220.0
    """
    array = _loads(loads)
    c = _fraction(capacity, "capacity", 0.0)
    return float(np.maximum(array - c, 0.0).sum())


def imbalance_factor(loads, ep=1) -> float:
    """Busiest GPU's token copies over the mean: max_g(sum of its experts' loads) / mean.

    Experts are laid out contiguously (GPU g of the EP group holds experts g E/ep .. (g+1) E/ep - 1, as
    Megatron-Core does); the expert GEMMs take as long as the busiest GPU's, so the MoE MLP's time is
    this factor times the balanced time. ep = number of experts gives the busiest expert. Lesson 10 §3.

    >>> imbalance_factor([1500, 900, 700, 1000], ep=4)  # 1500 / 1025
    1.4634146341463414
    >>> imbalance_factor([1500, 900, 700, 1000], ep=2)  # GPU 0: 2400 of 4100
    1.170731707317073
    """
    array = _loads(loads)
    ep = _ep_divides(ep, array.size)
    per_gpu = array.reshape(ep, -1).sum(axis=1)
    mean = per_gpu.mean()
    return float(per_gpu.max() / mean) if mean > 0 else 1.0


def busiest_expert_load(imbalance, capacity_factor, ep, experts, top_k):
    """Token copies the busiest GPU's experts process, over the balanced T k: what sets an MoE layer's expert time.

    With a capacity factor c (GShard's fixed-size expert buffers, Lepikhin et al. 2021, Sec. 2.2) every expert's
    buffer is padded to its capacity and the overflow dropped, so every GPU, the busiest too, computes exactly c
    times the balanced work, whatever the router's skew: c (not the busiest GPU's kept copies over the mean of the
    kept copies, which counts the padding as free). Dropless: the imbalance (busiest GPU's copies over the mean,
    imbalance_factor or the routing simulation), at most min(ep, E / k) (with ep = 1 one GPU takes every copy).
    NumPy broadcast over ep. The step model (moe.step.MoEStepModel.expert_load) and the capacity app call it. Lesson 10 §3.

    >>> busiest_expert_load(1.66, 1.25, 8, 8, 2), busiest_expert_load(1.66, None, [1, 8], 8, 2).tolist()
    (1.25, [1.0, 1.66])
    """
    ep = number_array(ep, "ep", low=1.0)
    if capacity_factor is not None:
        factor = _fraction(capacity_factor, "capacity_factor", 0.0, low_open=True)
        return np.full(ep.shape, factor) if ep.shape else factor
    ratio = whole_number(experts, "experts", 1, MAX_EXPERTS) / whole_number(top_k, "top_k", 1, MAX_EXPERTS)
    load = np.minimum(_fraction(imbalance, "imbalance", 1.0), np.minimum(ep, ratio))
    return load if np.ndim(load) else float(load)


def _ep_divides(ep, experts: int) -> int:
    ep = whole_number(ep, "ep", 1, MAX_GPUS)
    if experts % ep:
        raise ConfigurationError(
            f"ep={ep} does not divide the {experts} experts (each GPU holds experts/ep of "
            f"them); valid ep: {short_list(divisors(experts), 12)}"
        )
    return ep


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


def expected_remote_nodes(experts, top_k, nodes, max_nodes=None) -> float:
    """Expected number of OTHER nodes a token's top_k experts sit on (each is crossed once, then NVLink).

    E experts spread evenly over n nodes (E/n each). Uniform routing without a node limit: a given node
    holds none of the k distinct experts with probability C(E - E/n, k) / C(E, k), so
    n (1 - C(E - E/n, k) / C(E, k)) nodes are hit, (n - 1)/n of them remote (by symmetry). DeepSeek-V3's
    node-limited routing (report Sec. 2.1.2) picks the max_nodes = M nodes whose best ceil(k/M) experts
    score highest, then the k experts among them, so nearly every chosen node receives one: we take all M,
    M (n - 1)/n remote, the report's bound ("at most M nodes"; the routing simulation gets 3.47 of 3.5 for
    V3's M = 4 of 8 nodes). Lesson 10 §5.

    >>> round(expected_remote_nodes(256, 8, 8), 3)  # DeepSeek-V3 experts on 8 nodes, no limit
    4.633
    >>> expected_remote_nodes(256, 8, 8, max_nodes=4)  # at most 4 nodes: 4 x 7/8
    3.5
    """
    e, k, n = (
        whole_number(experts, "experts", 1, MAX_EXPERTS),
        whole_number(top_k, "top_k", 1, MAX_EXPERTS),
        whole_number(nodes, "nodes", 1, MAX_GPUS),
    )
    if e % n:
        raise ConfigurationError(f"nodes={n} does not divide the {e} experts; valid: {short_list(divisors(e), 12)}")
    if k > e:
        raise ConfigurationError(f"top_k={k} is more than the {e} experts; valid: 1 to {e}")
    per_node = e // n
    if max_nodes is None:
        miss = math.comb(e - per_node, k) / math.comb(e, k)
        return n * (1.0 - miss) * (n - 1) / n
    chosen = whole_number(max_nodes, "max_nodes", 1, MAX_GPUS)
    if chosen > n:
        raise ConfigurationError(f"max_nodes={chosen} is more than the {n} nodes; valid: 1 to {n}")
    if k > chosen * per_node:
        raise ConfigurationError(
            f"top_k={k} experts do not fit on max_nodes={chosen} nodes of {per_node} "
            f"experts; valid max_nodes: {math.ceil(k / per_node)} to {n}"
        )
    return min(chosen, k) * (n - 1) / n


def all_to_all_bytes(
    tokens,
    hidden,
    top_k,
    ep,
    *,
    ep_per_node=None,
    element_bytes=2.0,
    experts=None,
    capacity_factor=None,
    max_nodes=None,
) -> dict:
    """Bytes one GPU sends in ONE all-to-all (dispatch or combine) of an MoE layer, intra- and inter-node.

    Send buffer M = tokens x top_k x hidden x element_bytes (dropless), or experts x C x hidden x
    element_bytes with capacity padding (C = expert_capacity(tokens, experts, top_k, capacity_factor)).
    Uniform routing: intra = M (p-1)/ep, inter = M (ep-p)/ep, with p = ep_per_node (EP members per node;
    default: all of them). With max_nodes (DeepSeek-V3 node-limited routing, dropless) a token crosses the
    network once per remote target node: inter = tokens x hidden x element_bytes x expected_remote_nodes,
    and each target node's copies reach their GPUs over NVLink. GShard Sec. 3; DeepSeek-V3 Sec. 3.2.2.
    Lesson 10 §5.

    >>> b = all_to_all_bytes(4096, 4096, 2, 8, ep_per_node=8)  # Mixtral layer, one 4K sequence, EP 8 in a node
    >>> b['intra'] / 1e6, b['inter']
    (58.720256, 0.0)
    """
    t = whole_number(tokens, "tokens", 1, MAX_TOKENS)
    h = whole_number(hidden, "hidden", 1, 2**20)
    k, ep = whole_number(top_k, "top_k", 1, MAX_EXPERTS), whole_number(ep, "ep", 1, MAX_GPUS)
    p = ep if ep_per_node is None else whole_number(ep_per_node, "ep_per_node", 1, MAX_GPUS)
    if p > ep or ep % p:
        raise ConfigurationError(
            f"ep_per_node={p} must divide ep={ep} (EP members on each node); valid: {short_list(divisors(ep), 12)}"
        )
    b = positive(element_bytes, "B", "element_bytes")
    if experts is None:
        if capacity_factor is not None or max_nodes is not None:
            raise ConfigurationError("capacity_factor= and max_nodes= need experts= (routed experts per layer)")
        e = None
    else:
        e = whole_number(experts, "experts", 1, MAX_EXPERTS)
        _ep_divides(ep, e)
        if k > e:
            raise ConfigurationError(f"top_k={k} is more than the {e} experts; valid: 1 to {e}")
    if capacity_factor is not None:
        if max_nodes is not None:
            raise ConfigurationError(
                "give capacity_factor= or max_nodes=, not both (node-limited routing is "
                "modelled dropless, as DeepSeek-V3 trains)"
            )
        if e is None:  # checked above; this narrows e for the type checker
            raise ConfigurationError("capacity_factor= needs experts= (routed experts per layer)")
        send = e * expert_capacity(t, e, k, capacity_factor) * h * b
    else:
        send = t * k * h * b
    intra = send * (p - 1) / ep
    inter = send * (ep - p) / ep
    if max_nodes is not None and ep > p:
        nodes = ep // p
        inter = t * h * b * expected_remote_nodes(e, k, nodes, max_nodes)
        intra = send * (p - 1) / ep  # copies for experts on the own node; forwarding inside target nodes
        # runs on those nodes' NVLink in parallel and is counted there (same amount by symmetry)
    return {"send_buffer": float(send), "intra": float(intra), "inter": float(inter)}


def all_to_all_time(intra_bytes, inter_bytes, ep, cluster, *, ep_per_node=None) -> float:
    """Seconds of one all-to-all: the NVLink part and the network part run at once; the slower sets the time.

    distlab.collectives.placed_all_to_all_time_array: intra, the pairwise all-to-all over the p GPUs of a node
    ((p-1) steps of alpha plus bytes / the node's link bandwidth); inter: (ep - p) alpha_fabric + bytes / the fabric
    bandwidth per GPU when every GPU sends (Cluster.inter_node_bandwidth_per_gpu). Lesson 10 §5.

    >>> from distlab import hardware
    >>> c = hardware.cluster('dgx-h100', 8)
    >>> round(all_to_all_time(58.72e6, 0, 8, c) * 1e3, 3)  # 58.7 MB over NVLink 4 at 450 GB/s
    0.154
    """
    c = as_cluster(cluster)
    ep = whole_number(ep, "ep", 1, MAX_GPUS)
    p = ep if ep_per_node is None else whole_number(ep_per_node, "ep_per_node", 1, MAX_GPUS)
    if p > ep or ep % p:
        raise ConfigurationError(f"ep_per_node={p} must divide ep={ep}; valid: {short_list(divisors(ep), 12)}")
    if p > c.gpus_per_node:
        raise ConfigurationError(f"ep_per_node={p} is more than the {c.gpus_per_node} GPUs of a {c.node.name} node")
    intra = positive(intra_bytes, "B", "intra_bytes") if intra_bytes else 0.0
    inter = positive(inter_bytes, "B", "inter_bytes") if inter_bytes else 0.0
    # the placed all-to-all (collectives.placed_all_to_all_time_array); a part with nothing to send sends no message
    time = collectives.placed_all_to_all_time_array(
        intra,
        inter,
        ep,
        p,
        c.intra_link.bandwidth,
        c.intra_link.latency if intra > 0 else 0.0,
        c.inter_node_bandwidth_per_gpu,
        c.fabric.latency if inter > 0 else 0.0,
    )
    return float(time)


def ep_members_per_node(*, etp=1, ep=1, gpus_per_node=8) -> int:
    """EP-group members sharing a node in Megatron's expert rank layout (EP neighbours etp ranks apart).

    From distlab.mesh.expert_layout (Megatron-LM's expert rank generator, order tp-ep-dp-pp with tp = etp):
    ep / (nodes an EP group spans, the most of any group). Lesson 10 §6.

    >>> ep_members_per_node(etp=2, ep=8), ep_members_per_node(etp=1, ep=8), ep_members_per_node(etp=8, ep=8)
    (4, 8, 1)
    """
    g = whole_number(gpus_per_node, "gpus_per_node", 1, 1024)
    etp, ep = whole_number(etp, "etp", 1, MAX_GPUS), whole_number(ep, "ep", 1, MAX_GPUS)
    grid = mesh.expert_layout(etp * ep, tp=etp, ep=ep, etp=etp, gpus_per_node=g)
    spanned = int(grid.nodes_spanned("ep").max())
    return max(1, grid.ep // spanned)


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
            f"per MoE layer and microbatch: {self.all_to_alls} all-to-alls, "
            f"{format_bytes(self.all_to_all_intra_bytes)} over NVLink + "
            f"{format_bytes(self.all_to_all_inter_bytes)} across nodes per GPU, "
            f"{format_seconds(self.all_to_all_time_s)} ({self.link}); expert FLOPs x{self.imbalance:.3g} "
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
