"""Training step time, FLOPs, MFU/HFU, throughput and scaling efficiency.

FLOPs follow Kaplan et al. 2020 / Narayanan et al. 2021: a training step costs 6 x params x
tokens (2 forward + 4 backward per parameter per token); full activation recomputation runs
the forward twice, 8 x params x tokens. MFU counts the model's FLOPs (6PT) against peak;
HFU counts what the hardware executes (8PT with full recomputation). Throughput = global
batch / step time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._arguments import as_cluster, recompute_mode, zero_stage
from .errors import ConfigurationError
from .units import FLOP_PER_SECOND, SECONDS, format_bytes, format_seconds, positive, positive_int

#: Training FLOPs per parameter per token: forward 2, backward 4 (weight and input gradients).
FLOPS_PER_PARAM_TOKEN = 6.0
#: With full recomputation the forward runs again during backward: 2 + 2 + 4.
FLOPS_PER_PARAM_TOKEN_FULL_RECOMPUTE = 8.0


def model_flops(params, tokens) -> float:
    """Model FLOPs of one training step: 6 x params x tokens (tokens = global batch x sequence length)."""
    return FLOPS_PER_PARAM_TOKEN * positive(params, "", "params") * positive(tokens, "", "tokens")


def hardware_flops(params, tokens, recompute="none") -> float:
    """FLOPs the GPUs execute: 6PT, or 8PT with full recomputation (selective recomputation of
    attention scores adds no parameter FLOPs in this model)."""
    factor = FLOPS_PER_PARAM_TOKEN_FULL_RECOMPUTE if recompute_mode(recompute) == "full" else FLOPS_PER_PARAM_TOKEN
    return factor * positive(params, "", "params") * positive(tokens, "", "tokens")


def megatron_flops_per_iteration(batch, seq_len, layers, hidden, vocab) -> float:
    """Narayanan et al. 2021, Eq. 3 (full recomputation, attention and logits included):
    F = 96 B s l h^2 (1 + s / (6 h) + V / (16 l h))."""
    b = positive_int(batch, "batch")
    s = positive_int(seq_len, "seq_len")
    l = positive_int(layers, "layers")
    h = positive_int(hidden, "hidden")
    v = positive_int(vocab, "vocab")
    return 96.0 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))


def training_days(params, tokens, gpus, flops_per_gpu, recompute="full") -> float:
    """End-to-end training time in days: factor x T x P / (n X), factor 8 with full
    recomputation (Narayanan et al. 2021, Eq. 4), 6 without."""
    seconds = hardware_flops(params, tokens, recompute) / (
        positive_int(gpus, "gpus") * positive(flops_per_gpu, FLOP_PER_SECOND, "flops_per_gpu")
    )
    return seconds / 86400.0


def mfu(model_flops_per_step, step_time, gpus, peak_flops) -> float:
    """Model FLOPs utilisation = model FLOPs / (step time x GPUs x peak FLOP/s per GPU)."""
    value = positive(model_flops_per_step, "FLOP", "model_flops") / (
        positive(step_time, SECONDS, "step_time") * positive_int(gpus, "gpus")
        * positive(peak_flops, FLOP_PER_SECOND, "peak_flops")
    )
    return value


def mfu_array(model_flops_per_step, step_time, gpus, peak_flops):
    """mfu on NumPy arrays, unvalidated (planner fast path)."""
    return np.asarray(model_flops_per_step) / (np.asarray(step_time) * np.asarray(gpus) * peak_flops)


def check_fraction(value, name: str) -> float:
    """A fraction in (0, 1], such as an achievable share of peak."""
    number = positive(value, "", name)
    if number > 1:
        raise ConfigurationError(f"{name}={number:g} must be a fraction in (0, 1] (e.g. 0.5 for 50% of peak)")
    return number


# ----------------------------------------------------------------------------------------
# The step-time model: one NumPy core shared by estimate() (scalars) and the planner (arrays).

SCHEDULES = ("gpipe", "1f1b", "interleaved")

#: Longest sequence (tokens), largest micro-batch and global batch (sequences) the step model accepts: far
#: beyond any real run, small enough that every product of them (b x s x h, 6 x P x B x s FLOPs) stays a
#: finite float.
MAX_SEQ_LEN = 2**30
MAX_MICRO_BATCH = 2**20
MAX_GLOBAL_BATCH = 2**40


def batch_and_sequence(global_batch, seq_len, micro_batch_size=1) -> tuple[int, int, int]:
    """(global_batch, seq_len, micro_batch_size) as whole numbers within the step model's bounds."""
    values = []
    for value, name, top, what in ((global_batch, "global_batch", MAX_GLOBAL_BATCH, "sequences"),
                                   (seq_len, "seq_len", MAX_SEQ_LEN, "tokens"),
                                   (micro_batch_size, "micro_batch_size", MAX_MICRO_BATCH, "sequences")):
        n = positive_int(value, name)
        if n > top:
            raise ConfigurationError(f"{name}={value!r} is more than {top:,} {what}")
        values.append(n)
    return tuple(values)


def group_all_reduce_time_array(size_bytes, n, stride, gpus_per_node, intra_bw, intra_lat, inter_bw, inter_lat):
    """All-reduce time of the first rank group of n members spaced `stride` apart (ranks 0, stride, ...,
    (n-1) stride: the DP group of the first pipeline stage), placed on nodes of g GPUs (stride divides g
    or is a multiple of it, as tp does).

    A group that fits in one node (n x stride <= g) runs a ring on the intra-node link. When every node
    it touches holds the same number of its members (span n x stride a multiple of g, or stride >= g)
    the hierarchical algorithm (DESIGN.md): intra-node reduce-scatter and all-gather over the
    l = g / stride members a node holds (together one ring all-reduce over l GPUs) plus an inter-node
    ring all-reduce of M / l over the n / l nodes; with stride >= g every member sits on its own node
    (l = 1): a flat ring on the fabric. Otherwise (e.g. 3 nodes of 8, stride 1, n = 12: 8 members on
    node 0, 4 on node 1) there is no whole number of nodes to run the inter-node ring over:
    production.dp_all_reduce refuses the hierarchical algorithm there, and this prices what remains,
    one flat ring through the members in rank order, every step as slow as its slowest (fabric) hop:
    2(n-1)(inter_lat + M / (n inter_bw)) (distlab.collectives.ring_all_reduce_time, the same formula
    as dp_all_reduce(algorithm='ring')). Placement follows the rank layout (distlab.mesh), not an
    assumption. Arrays, unvalidated.
    """
    from .collectives import ring_all_reduce_time

    n = np.asarray(n, dtype=float)
    stride = np.asarray(stride, dtype=float)
    g = float(gpus_per_node)
    local = np.where(stride >= g, 1.0, np.clip(np.floor(g / stride), 1.0, None))
    local = np.minimum(local, n)
    span = n * stride
    inside = span <= g
    even = (stride >= g) | (np.mod(span, g) == 0)
    flat = ring_all_reduce_time(size_bytes, n, intra_bw, intra_lat)
    hierarchical = (ring_all_reduce_time(size_bytes, local, intra_bw, intra_lat)
                    + ring_all_reduce_time(np.asarray(size_bytes, dtype=float) / local, n / local, inter_bw, inter_lat))
    fabric_ring = ring_all_reduce_time(size_bytes, n, inter_bw, inter_lat)
    return np.where(inside, flat, np.where(even, hierarchical, fabric_ring))


def p2p_message_bytes(micro_batch_size, seq_len, hidden, tp, element_bytes):
    """Bytes of one pipeline send per microbatch: b x s x h x e / tp (Megatron's scatter-gather
    optimisation splits the activation over the tp GPUs of a stage, Narayanan et al. 2021 Sec. 4.1;
    e = PrecisionRecipe.message_bytes). NumPy broadcast, unvalidated."""
    from .tensor import tp_message_bytes

    return tp_message_bytes(micro_batch_size, seq_len, hidden, element_bytes) / np.asarray(tp, dtype=float)


def equal_local_ranks_array(n, stride, gpus_per_node):
    """Whether the inter-node traffic of every group of n ranks spaced `stride` apart joins GPUs of EQUAL
    local rank, in the hierarchical all-reduce (member j of a node talks to member j of the others).

    The groups of one dimension of the rank order tp-cp-ep-dp-pp (DP: stride tp, n = dp) start at
    j + s x n x stride (j < stride). Every node then holds the same local ranks of every group when
    the stride is a multiple of the node size g (one member per node, all at local rank j), or the
    span n x stride is a multiple of g (each node holds g / stride members at local ranks j, j +
    stride, ...), or the span divides g (every group inside one node: no inter-node traffic at all).
    Otherwise some group straddles node boundaries at different local ranks (e.g. 3 nodes of 8,
    tp = 1, dp = 12: the first group holds all of node 0 and local ranks 0-3 of node 1), so its
    inter-node traffic crosses the spine even on a rail-optimized fabric. NumPy broadcast, unvalidated.
    """
    n = np.asarray(n, dtype=float)
    stride = np.asarray(stride, dtype=float)
    g = float(gpus_per_node)
    span = n * stride
    return (np.mod(stride, g) == 0) | (np.mod(span, g) == 0) | (np.mod(g, span) == 0)


def pipeline_crossings_array(pp, stride, gpus_per_node):
    """How many of the pp - 1 stage boundaries of a pipeline whose neighbours sit `stride` ranks apart
    (stride tp x dp in the order tp-cp-ep-dp-pp) send across a node boundary.

    Boundary b joins stage b - 1 (ranks [(b-1) W, b W)) to stage b (W = stride): some rank r of it
    sends to r + W on another node unless both stages lie inside one node, i.e. unless
    floor((b-1) W / g) = floor(((b+1) W - 1) / g). W >= g: every boundary crosses. Example: tp 2 x
    dp 2 on nodes of 8: stages 0-1 share node 0, 2-3 node 1, ...: of 7 boundaries, 3 cross and 4
    stay on NVLink. NumPy broadcast, unvalidated.
    """
    pp = np.asarray(pp, dtype=float)
    w = np.asarray(stride, dtype=float)
    g = float(gpus_per_node)
    top = int(np.max(pp)) if pp.size else 1
    if top <= 1:
        return np.zeros(np.broadcast(pp, w).shape) if np.ndim(pp) or np.ndim(w) else 0.0
    b = np.arange(1, top, dtype=float).reshape((-1,) + (1,) * np.broadcast(pp, w).ndim)
    cross = (w >= g) | (np.floor((b - 1) * w / g) != np.floor(((b + 1) * w - 1) / g))
    count = np.sum(cross & (b < pp), axis=0).astype(float)
    return float(count) if np.ndim(count) == 0 else count


def step_model_array(model, *, gpus_per_node, intra_bw, intra_lat, inter_bw, inter_lat, peak_flops, hbm_bandwidth,
                     recipe, global_batch, seq_len, dp, tp, pp, chunks, micro_batch_size, zero, recompute_code,
                     sequence_parallel, schedule_code, efficiency, bucket_bytes=None, cross_rail_bw=None) -> dict:
    """Per-step time components (s) and per-GPU memory (bytes) on the busiest (first) pipeline stage.

    compute    = m x factor x P x b s / (tp pp) / (peak x efficiency), factor 6 (8 with full recompute)
    tp_comm    = m x layers/stage x all-reduces x ring time of b s h e_msg over tp GPUs (4, or 6 with full
                 recompute; distlab.tensor.tp_comm_time), on the critical path, never overlapped
    bubble     = (pp - 1) / v x (per-microbatch stage time): the (p-1)/(v m) overhead on m microbatches
    p2p        = the 2 (pp v - 1) hops on the fill and drain path (a microbatch crosses every chunk
                 boundary forward and back; interleaving multiplies them by v, Narayanan et al. 2021
                 Sec. 2.2.2), b s h e_msg / tp bytes each (scatter-gather, Sec. 4.1; e_msg =
                 recipe.message_bytes: fp8 stages still send the bf16 residual stream and gradient).
                 Each of the pp - 1 stage boundaries is priced where it lies (pipeline_crossings_array):
                 on NVLink when both stages share a node, else on the fabric at inter_bw when the stride
                 tp x dp is a multiple of the node size (sender and receiver share a local rank) and at
                 cross_rail_bw (default inter_bw) otherwise; the v - 1 wrap-around hops of the interleaved
                 schedule (last stage to first) likewise. Steady-state transfers overlap with compute
    dp_comm    = the data-parallel traffic of the step on the DP group's link (group_all_reduce_time_array).
                 ZeRO-0/1/2: gradients accumulate locally over the m microbatches (DDP's no_sync, Megatron-LM's
                 gradient accumulation) and one 2M gradient all-reduce (ZeRO-1/2: reduce-scatter + parameter
                 all-gather, the same 2M) runs per step. ZeRO-3 (and FSDP) all-gathers the parameters in every
                 microbatch's forward and again in its backward and reduce-scatters its gradients: 3M, 1.5
                 all-reduces' worth, per MICROBATCH, m x 1.5 x all-reduce per step (Rajbhandari et al. 2020,
                 Sec. 7.2.2)
    dp_exposed = what of it is left exposed, in DDP's 25 MiB buckets (distlab.dataparallel.
                 exposed_communication_time): ZeRO-0/1/2 overlap their one all-reduce with the LAST
                 microbatch's backward; ZeRO-3 overlaps each microbatch's 1.5 all-reduces with that
                 microbatch's forward + backward compute (t_mb) and pays m x that exposed time. The
                 inter-node phase runs at inter_bw when the groups' inter-node traffic joins equal local
                 ranks (equal_local_ranks_array), else at cross_rail_bw (every GPU of a node sends at
                 once: the full taper either way; for the flat ring of a group that splits unevenly over
                 nodes this is an upper bound on the time, since fewer of its hops leave a node at once)
    optimizer  = (2 x optimizer + gradient + weight bytes of the shard) / HBM bandwidth (memory-bound Adam)
    Memory: distlab.memory's array cores; in-flight microbatches GPipe m, 1F1B min(p, m), interleaved
    p (1 + (p-1)/(p v)) (Korthikanti et al. 2022, Sec. 4.2.3). Rank order tp-cp-ep-dp-pp: DP groups
    have stride tp, pipeline neighbours stride tp x dp. Inputs are NumPy arrays, not validated.
    """
    from . import memory, tensor
    from .dataparallel import DDP_BUCKET_BYTES, exposed_communication_time

    bucket_bytes = DDP_BUCKET_BYTES if bucket_bytes is None else bucket_bytes
    P = float(model.parameter_count())
    h = float(model.hidden)
    dp, tp, pp = (np.asarray(x, dtype=float) for x in (dp, tp, pp))
    v = np.asarray(chunks, dtype=float)
    b = np.asarray(micro_batch_size, dtype=float)
    code = np.asarray(recompute_code)
    s = float(seq_len)
    e = recipe.activation_bytes
    e_msg = recipe.message_bytes
    m = np.asarray(global_batch, dtype=float) / (dp * b)
    full = code == 2

    factor = np.where(full, FLOPS_PER_PARAM_TOKEN_FULL_RECOMPUTE, FLOPS_PER_PARAM_TOKEN)
    t_mb = factor * P * b * s / (tp * pp) / (peak_flops * efficiency)
    layers_stage = np.ceil(model.layers / pp)
    tp_msg = tensor.tp_message_bytes(b, s, h, e_msg)
    tp_mb = layers_stage * tensor.tp_comm_time(tp_msg, tp, intra_bw, intra_lat, np.where(full, 6, 4))
    stage_mb = t_mb + tp_mb
    compute = m * t_mb
    tp_comm = m * tp_mb
    bubble = (pp - 1.0) / v * stage_mb

    cross = inter_bw if cross_rail_bw is None else cross_rail_bw
    stride = tp * dp
    p2p_msg = p2p_message_bytes(b, s, h, tp, e_msg)
    crossing = pipeline_crossings_array(pp, stride, gpus_per_node)
    fabric_hop = p2p_msg / np.where(np.mod(stride, gpus_per_node) == 0, inter_bw, cross) + inter_lat
    nvlink_hop = p2p_msg / intra_bw + intra_lat
    wrap_inside = stride * pp <= gpus_per_node  # last and first stage on one node
    wrap_bw = np.where(np.mod(stride * (pp - 1.0), gpus_per_node) == 0, inter_bw, cross)
    wrap_hop = np.where(wrap_inside, nvlink_hop, p2p_msg / wrap_bw + inter_lat)
    one_way = v * ((pp - 1.0 - crossing) * nvlink_hop + crossing * fabric_hop) + (v - 1.0) * wrap_hop
    p2p = np.where(pp > 1, 2.0 * one_way, 0.0)

    w, g, o = memory.model_state_bytes_array(P, recipe, zero, dp, tp, pp)
    grad_shard = P / (tp * pp) * recipe.gradient_bytes
    dp_bw = np.where(equal_local_ranks_array(dp, tp, gpus_per_node), inter_bw, cross)
    all_reduce = group_all_reduce_time_array(grad_shard, dp, tp, gpus_per_node, intra_bw, intra_lat, dp_bw, inter_lat)
    backward_share = np.where(full, 6.0 / 8.0, 4.0 / 6.0)
    buckets = np.maximum(1.0, np.ceil(grad_shard / bucket_bytes))
    # ZeRO-0/1/2: gradients accumulate locally (DDP no_sync, Megatron's grad accumulation); one all-reduce
    # (or reduce-scatter + all-gather, the same 2M) per step, overlapped with the LAST microbatch's backward.
    per_step = exposed_communication_time(all_reduce, backward_share * t_mb, buckets)
    # ZeRO-3: parameters all-gathered in every microbatch's forward and backward and gradients
    # reduce-scattered every microbatch, 3M = 1.5 all-reduces (ZeRO paper, Sec. 7.2.2) per microbatch,
    # each microbatch's traffic overlapped with that microbatch's forward + backward compute.
    zero3 = np.asarray(zero) >= 3
    per_mb = 1.5 * all_reduce
    dp_time = np.where(zero3, m * per_mb, all_reduce)
    dp_exposed = np.where(dp > 1, np.where(zero3, m * exposed_communication_time(per_mb, t_mb, buckets), per_step),
                          0.0)
    optimizer = (2.0 * o + g + w) / hbm_bandwidth

    per_layer = memory.activation_bytes_per_layer_array(model, b, s, tp, sequence_parallel, code, e)
    sched = np.asarray(schedule_code)
    in_flight = np.where(sched == 0, m, np.where(sched == 1, np.minimum(pp, m), pp * (1.0 + (pp - 1.0) / (pp * v))))
    activations = per_layer * layers_stage * in_flight

    step = compute + tp_comm + bubble + p2p + dp_exposed + optimizer
    return dict(microbatches=m, compute_s=compute, tp_comm_s=tp_comm, bubble_s=bubble, p2p_s=p2p,
                dp_comm_s=dp_time, dp_exposed_s=dp_exposed, optimizer_s=optimizer, step_time_s=step,
                weights_bytes=w, gradients_bytes=g, optimizer_bytes=o, activations_bytes=activations,
                memory_bytes=w + g + o + activations)


@dataclass(frozen=True)
class StepEstimate:
    """One configuration's step time breakdown, throughput, utilisation and memory (plain floats)."""

    config: dict
    compute_s: float
    tp_comm_s: float
    bubble_s: float
    p2p_s: float
    dp_comm_s: float
    dp_exposed_s: float
    optimizer_s: float
    step_time_s: float
    microbatches: int
    tokens_per_step: float
    model_flops: float
    hardware_flops: float
    gpus: int
    peak_flops: float
    ideal_single_gpu_s: float
    memory: object  # distlab.memory.MemoryBreakdown
    problems: tuple = ()

    @property
    def fits(self) -> bool:
        return bool(self.memory.fits)

    @property
    def feasible(self) -> bool:
        return self.fits and not self.problems

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_step / self.step_time_s

    @property
    def samples_per_s(self) -> float:
        return self.config["global_batch"] / self.step_time_s

    @property
    def mfu(self) -> float:
        """Model FLOPs (6PT) / (step time x GPUs x peak)."""
        return self.model_flops / (self.step_time_s * self.gpus * self.peak_flops)

    @property
    def hfu(self) -> float:
        """Hardware FLOPs (8PT with full recomputation) / (step time x GPUs x peak)."""
        return self.hardware_flops / (self.step_time_s * self.gpus * self.peak_flops)

    @property
    def scaling_efficiency(self) -> float:
        """(one ideal GPU's time for the step / N) / step time. Report beside step time; never rank by it."""
        return self.ideal_single_gpu_s / self.gpus / self.step_time_s

    def parts(self) -> dict:
        """Step-time components in seconds, in stacking order."""
        return {"compute": self.compute_s, "TP communication": self.tp_comm_s, "pipeline bubble": self.bubble_s,
                "pipeline p2p": self.p2p_s, "DP communication (exposed)": self.dp_exposed_s,
                "optimizer step": self.optimizer_s}

    def explain(self) -> str:
        """Why this configuration cannot run (empty when it can)."""
        reasons = list(self.problems)
        if not self.fits:
            reasons.append(f"memory: needs {format_bytes(self.memory.total_bytes)} per GPU, "
                           f"{format_bytes(-self.memory.headroom_bytes)} over the {format_bytes(self.memory.capacity_bytes)}")
        return "; ".join(reasons)

    def summary(self) -> str:
        lines = [f"{name:<28}{format_seconds(value):>10}" for name, value in self.parts().items()]
        lines.append(f"{'step time':<28}{format_seconds(self.step_time_s):>10}")
        lines.append(f"throughput {self.tokens_per_s:,.0f} tokens/s ({self.samples_per_s:.3g} samples/s); "
                     f"MFU {100 * self.mfu:.1f}%, HFU {100 * self.hfu:.1f}%; "
                     f"scaling efficiency {100 * self.scaling_efficiency:.1f}%")
        lines.append(f"memory per GPU {format_bytes(self.memory.total_bytes)}: {self.memory.verdict()}")
        if not self.feasible:
            lines.append("NOT FEASIBLE: " + self.explain())
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {**self.config, "step_time_s": self.step_time_s, "mfu": self.mfu, "hfu": self.hfu,
                "tokens_per_s": self.tokens_per_s, "samples_per_s": self.samples_per_s,
                "scaling_efficiency": self.scaling_efficiency, "memory_per_gpu_bytes": self.memory.total_bytes,
                "fits": self.fits, "feasible": self.feasible, "problems": list(self.problems),
                "explanation": self.explain(), "microbatches": self.microbatches,
                "breakdown_s": {"compute": self.compute_s, "tp_comm": self.tp_comm_s, "bubble": self.bubble_s,
                                "p2p": self.p2p_s, "dp_comm_total": self.dp_comm_s,
                                "dp_comm_exposed": self.dp_exposed_s, "optimizer": self.optimizer_s},
                "memory": self.memory.to_dict()}


def hardware_arguments(cl, recipe) -> dict:
    """The cluster's figures step_model_array needs: links, per-GPU fabric share, HBM, and the
    dense peak of the precision the recipe computes in (bf16 for mixed, fp8, fp32).

    inter_bw is the fabric share between GPUs of the SAME local rank: in the rank order
    tp-cp-ep-dp-pp the hierarchical DP all-reduce's inter-node ring connects the members at the
    same position on their nodes when every node holds the same local ranks of each DP group
    (equal_local_ranks_array: tp x dp a multiple of the node size, or dividing it), as do pipeline
    sends whose stride tp x dp is a multiple of the node size; on a rail-optimized fabric that
    traffic stays on one rail and escapes the spine's oversubscription. cross_rail_bw is the share
    of traffic between different local ranks, which crosses the spine. Both with every GPU of a
    node sending at once (hardware.Cluster.fabric_bandwidth_per_gpu with f = g): without rails
    both are inter_node_bandwidth_per_gpu. The peak is recipe.compute_precision's."""
    compute = recipe.compute_precision
    return dict(gpus_per_node=cl.node.gpus_per_node, intra_bw=cl.node.intra_link.bandwidth,
                intra_lat=cl.node.intra_link.latency, inter_bw=cl.fabric_bandwidth_per_gpu(same_local_rank=True),
                cross_rail_bw=cl.fabric_bandwidth_per_gpu(same_local_rank=False),
                inter_lat=cl.fabric.latency, peak_flops=cl.accelerator.peak(compute),
                hbm_bandwidth=cl.accelerator.memory_bandwidth, recipe=recipe)


def estimate(model, cluster, *, global_batch, seq_len=None, dp=None, tp=1, pp=1, chunks=1, micro_batch_size=1,
             zero=0, recompute="none", sequence_parallel=False, schedule="1f1b", precision="mixed",
             efficiency=0.5, fabric=None, nodes=None) -> StepEstimate:
    """Step time breakdown, throughput, MFU/HFU, scaling efficiency and memory of one configuration.

    model: a TransformerModel or catalog name; cluster: a hardware.Cluster, or a node name with
    nodes= and fabric=. dp defaults to GPUs / (tp x pp). efficiency: the achievable share of the
    dense peak for matmuls. An infeasible configuration is priced but flagged (feasible False,
    explain() says which limit and by how much); invalid ones raise ConfigurationError.
    """
    from . import memory, models

    model = models.model(model)
    cl = as_cluster(cluster, nodes, fabric)
    g = cl.node.gpus_per_node
    tp, pp = positive_int(tp, "tp"), positive_int(pp, "pp")
    if tp * pp > cl.gpus or cl.gpus % (tp * pp):
        valid = ", ".join(str(d) for d in range(1, cl.gpus + 1) if cl.gpus % d == 0)
        what = "is more than" if tp * pp > cl.gpus else "does not divide"
        raise ConfigurationError(f"tp x pp = {tp} x {pp} = {tp * pp} {what} the cluster's {cl.gpus} GPUs; "
                                 f"tp x pp must divide them (valid: {valid})")
    dp = cl.gpus // (tp * pp) if dp is None else positive_int(dp, "dp")
    if dp * tp * pp != cl.gpus:
        raise ConfigurationError(f"dp x tp x pp = {dp} x {tp} x {pp} = {dp * tp * pp} must equal the cluster's {cl.gpus} GPUs")
    if tp > g or g % tp:
        valid = ", ".join(str(d) for d in range(1, g + 1) if g % d == 0)
        raise ConfigurationError(f"tp={tp} must divide the {g} GPUs of a node (tensor parallelism stays inside a node); valid: {valid}")
    memory.check_tp_divides_heads(model, tp)
    memory.layers_per_stage(model.layers, pp)
    batch, s, b = batch_and_sequence(global_batch, seq_len if seq_len is not None else model.seq_len,
                                     micro_batch_size)
    v = positive_int(chunks, "chunks")
    if batch % (dp * b):
        raise ConfigurationError(f"global_batch={batch} is not a multiple of dp x micro_batch_size = {dp} x {b}; "
                                 f"each replica must get whole microbatches")
    m = batch // (dp * b)
    sched = str(schedule).strip().lower()
    if sched not in SCHEDULES:
        raise ConfigurationError(f"schedule={schedule!r}; valid: {', '.join(SCHEDULES)}")
    if v > 1 and sched != "interleaved":
        raise ConfigurationError(f"chunks={v} needs schedule='interleaved'")
    if sched == "interleaved":
        if model.layers % (pp * v):
            raise ConfigurationError(f"interleaved: {model.layers} layers do not split into pp x chunks = {pp * v} equal chunks")
        if m % pp:
            raise ConfigurationError(f"interleaved: microbatches per pipeline m={m} must be a multiple of pp={pp}")
    mode = memory.recompute_mode(recompute)
    zero = zero_stage(zero)
    eff = check_fraction(efficiency, "efficiency")
    recipe = memory.precision_recipe(precision)
    hw = hardware_arguments(cl, recipe)
    peak = hw["peak_flops"]
    sp = bool(sequence_parallel) and tp > 1
    out = step_model_array(
        model, **hw, global_batch=batch, seq_len=s, dp=dp, tp=tp,
        pp=pp, chunks=v, micro_batch_size=b, zero=zero, recompute_code=memory.RECOMPUTE_MODES.index(mode),
        sequence_parallel=sp, schedule_code=SCHEDULES.index(sched), efficiency=eff)
    bd = memory.MemoryBreakdown(float(out["weights_bytes"]), float(out["gradients_bytes"]), float(out["optimizer_bytes"]),
                                float(out["activations_bytes"]), float(cl.accelerator.memory_bytes), cl.accelerator.name)
    problems = []
    if pp > 1 and m < pp:
        problems.append(f"pipeline: only {m} microbatches per step for {pp} stages; the pipeline never fills")
    tokens = float(batch * s)
    P = float(model.parameter_count())
    config = dict(model=model.name, gpus=cl.gpus, global_batch=batch, seq_len=s, dp=dp, tp=tp, pp=pp, chunks=v,
                  micro_batch_size=b, microbatches=m, zero=zero, recompute=mode, sequence_parallel=sp,
                  schedule=sched, precision=recipe.name, efficiency=eff)
    return StepEstimate(
        config=config, compute_s=float(out["compute_s"]), tp_comm_s=float(out["tp_comm_s"]),
        bubble_s=float(out["bubble_s"]), p2p_s=float(out["p2p_s"]), dp_comm_s=float(out["dp_comm_s"]),
        dp_exposed_s=float(out["dp_exposed_s"]), optimizer_s=float(out["optimizer_s"]),
        step_time_s=float(out["step_time_s"]), microbatches=m, tokens_per_step=tokens,
        model_flops=FLOPS_PER_PARAM_TOKEN * P * tokens, hardware_flops=hardware_flops(P, tokens, mode),
        gpus=cl.gpus, peak_flops=peak, ideal_single_gpu_s=FLOPS_PER_PARAM_TOKEN * P * tokens / (peak * eff),
        memory=bd, problems=tuple(problems))


# ----------------------------------------------------------------------------------------
# Out-of-memory triage: the production ladder of fixes, each priced by re-running estimate().

#: The kinds of fix in the order production practice tries them (cheapest to change first).
TRIAGE_ORDER = ("micro-batch", "recomputation", "ZeRO", "TP", "PP")


@dataclass(frozen=True)
class TriageStep:
    """One fix of an out-of-memory triage, priced by estimate().

    change: the words ('micro_batch_size=2', 'selective recomputation', 'ZeRO-1', 'tp=4', ...);
    config: estimate()'s keywords after the fix (the whole configuration for a ladder rung,
    the changed keywords only for a single fix); memory_per_gpu_bytes and step_time_s of the
    result; saves_bytes against the configuration the fix was applied to (for a single fix,
    the given one; on the ladder, the previous rung); saves_total_bytes and time_cost_s
    against the given configuration. skipped: why the fix could not be applied (then the
    numbers are those of the configuration it was tried on, and it saves nothing). note: why an
    applied fix saves nothing (a smaller micro-batch while every microbatch is in flight).
    """

    kind: str
    change: str
    config: dict
    memory_per_gpu_bytes: float
    saves_bytes: float
    saves_total_bytes: float
    step_time_s: float
    time_cost_s: float
    fits: bool
    feasible: bool
    skipped: str | None = None
    estimate: "StepEstimate | None" = None
    note: str | None = None

    def to_dict(self) -> dict:
        return {"kind": self.kind, "change": self.change, "config": dict(self.config),
                "memory_per_gpu_bytes": self.memory_per_gpu_bytes, "saves_bytes": self.saves_bytes,
                "saves_total_bytes": self.saves_total_bytes, "step_time_s": self.step_time_s,
                "time_cost_s": self.time_cost_s, "fits": self.fits, "feasible": self.feasible,
                "skipped": self.skipped, "note": self.note}


@dataclass(frozen=True)
class OOMTriage:
    """What to do about a configuration that does not fit: single fixes and the cumulative ladder.

    base: the given configuration's StepEstimate. fixes: one change each from the given
    configuration, in TRIAGE_ORDER (every higher recomputation mode and ZeRO stage; the next
    smaller micro-batch, twice the TP and twice the PP degree). ladder: the fixes applied one
    after another in TRIAGE_ORDER (micro-batch halvings down to 1, selective then full
    recomputation, each higher ZeRO stage, TP doublings, PP doublings) until the configuration
    fits; empty when it already fits.
    """

    base: StepEstimate
    fixes: tuple
    ladder: tuple

    @property
    def already_fits(self) -> bool:
        return self.base.fits

    @property
    def first_fit(self) -> TriageStep | None:
        """The ladder rung at which the configuration first fits (None: already fits, or nothing does)."""
        for step in self.ladder:
            if step.fits and step.skipped is None:
                return step
        return None

    def summary(self) -> str:
        """The verdict, the single fixes and the ladder as lines of text."""
        b = self.base
        cap = b.memory.capacity_bytes
        if self.already_fits:
            return (f"already fits: {format_bytes(b.memory.total_bytes)} of the {format_bytes(cap)} per GPU "
                    f"({format_bytes(b.memory.headroom_bytes)} free); nothing to fix")
        lines = [f"needs {format_bytes(b.memory.total_bytes)} per GPU, {format_bytes(-b.memory.headroom_bytes)} over "
                 f"the {format_bytes(cap)}; step {format_seconds(b.step_time_s)}",
                 "single fixes (each from the given configuration):"]
        lines += [_triage_line(f, total=False) for f in self.fixes]
        lines.append("ladder (each rung on top of the previous, until it fits):")
        lines += [_triage_line(f, total=True) for f in self.ladder]
        first = self.first_fit
        lines.append(f"first fit: {first.change} at rung {self.ladder.index(first) + 1}" if first
                     else "the ladder ends without a configuration that fits")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        first = self.first_fit
        return {"already_fits": self.already_fits, "base": self.base.to_dict(),
                "fixes": [f.to_dict() for f in self.fixes], "ladder": [f.to_dict() for f in self.ladder],
                "first_fit": None if first is None else first.to_dict()}


def _triage_line(step: TriageStep, total: bool) -> str:
    if step.skipped:
        return f"  {step.change:<28} skipped: {step.skipped}"
    saved = step.saves_total_bytes if total else step.saves_bytes
    cost = abs(step.time_cost_s)
    delta = "same" if cost < 1e-9 else f"{'+' if step.time_cost_s > 0 else '-'}{format_seconds(cost)}"
    return (f"  {step.change:<28} saves {format_bytes(saved):>9} -> {format_bytes(step.memory_per_gpu_bytes):>9} "
            f"per GPU, step {format_seconds(step.step_time_s):>8} ({delta}), {'fits' if step.fits else 'still too big'}"
            + (f"\n  {'':<28} ({step.note})" if step.note else ""))


def _micro_batch_note(est: StepEstimate) -> str:
    """Why a smaller micro-batch saved nothing: the in-flight sequences b x min(p, m) did not change."""
    c = est.config
    b, m, p = c["micro_batch_size"], est.microbatches, c["pp"]
    if c["schedule"] == "gpipe":
        return f"saves nothing: GPipe keeps all m microbatches in flight, b x m = {b * m} sequences either way"
    return f"saves nothing while m <= p: all m = {m} microbatches in flight (p = {p}), b x m = {b * m} either way"


def _next_fixes(c: dict, every: bool) -> list[tuple[str, str, dict]]:
    """(kind, words, keyword changes) of the next fix of each kind from configuration c (estimate's config).

    every: all higher recomputation modes and ZeRO stages (single fixes); else only the next one.
    """
    out = []
    b = c["micro_batch_size"]
    if b > 1:
        smaller = max(d for d in range(1, b) if b % d == 0)  # keeps B / (dp b) whole
        out.append(("micro-batch", f"micro_batch_size={smaller}", dict(micro_batch_size=smaller)))
    modes = [mode for mode in ("selective", "full") if memory_modes_index(mode) > memory_modes_index(c["recompute"])]
    out += [("recomputation", f"{mode} recomputation", dict(recompute=mode)) for mode in modes[: None if every else 1]]
    stages = list(range(c["zero"] + 1, 4))
    out += [("ZeRO", f"ZeRO-{z}", dict(zero=z)) for z in stages[: None if every else 1]]
    for dim in ("tp", "pp"):
        out.append((dim.upper(), f"{dim}={2 * c[dim]}", dict({dim: 2 * c[dim]}, dp=c["dp"] // 2) if c["dp"] % 2 == 0
                    else None))
    return out


def _try_fix(model, cluster, config, kind, words, change, before, base):
    """Apply one fix to `config` (keywords), re-run estimate; a TriageStep (skipped when invalid)."""
    if change is None:
        return None, TriageStep(kind, words, dict(config), before.memory.total_bytes, 0.0,
                                base.memory.total_bytes - before.memory.total_bytes, before.step_time_s,
                                before.step_time_s - base.step_time_s, before.fits, before.feasible,
                                skipped=f"dp={before.config['dp']} is odd: doubling {kind} needs dp to halve",
                                estimate=before)
    new = {**config, **change}
    try:
        est = estimate(model, cluster, **new)
    except ConfigurationError as exc:
        return None, TriageStep(kind, words, new, before.memory.total_bytes, 0.0,
                                base.memory.total_bytes - before.memory.total_bytes, before.step_time_s,
                                before.step_time_s - base.step_time_s, before.fits, before.feasible,
                                skipped=str(exc), estimate=before)
    mem = est.memory.total_bytes
    saved = before.memory.total_bytes - mem
    note = _micro_batch_note(est) if kind == "micro-batch" and abs(saved) <= 1e-9 * before.memory.total_bytes else None
    return new, TriageStep(kind, words, new, mem, saved, base.memory.total_bytes - mem,
                           est.step_time_s, est.step_time_s - base.step_time_s, est.fits, est.feasible, estimate=est,
                           note=note)


#: Most rungs a ladder climbs (micro-batch halvings + 2 + 3 + TP and PP doublings stay far below it).
MAX_LADDER_RUNGS = 64


def oom_triage(model, cluster, **config) -> OOMTriage:
    """Out-of-memory triage: the fixes production tries, in order, each priced by re-running estimate().

    config: estimate()'s keyword arguments. The order (TRIAGE_ORDER): a smaller micro-batch with
    more gradient accumulation (m = B / (dp b) grows, the global batch stays), selective then
    full activation recomputation (Korthikanti et al. 2022), the next ZeRO stage (Rajbhandari et
    al. 2020), twice the tensor-parallel degree, twice the pipeline depth (dp halves to keep the
    GPUs). Returns an OOMTriage with the single fixes from the given configuration and the
    cumulative ladder (each rung re-validated; a rung estimate() refuses is recorded as skipped
    with its reason, and its kind is left). Invalid input raises ConfigurationError (from
    estimate); a configuration that fits gives an empty ladder (already_fits).
    """
    base = estimate(model, cluster, **config)
    config = dict(config)
    fixes = []
    for kind, words, change in _next_fixes(base.config, every=True):
        fixes.append(_try_fix(model, cluster, config, kind, words, change, base, base)[1])
    ladder = []
    if not base.fits:
        current, est = config, base
        for kind in TRIAGE_ORDER:
            while len(ladder) < MAX_LADDER_RUNGS:
                options = [f for f in _next_fixes(est.config, every=False) if f[0] == kind]
                if not options:
                    break
                _, words, change = options[0]
                new, step = _try_fix(model, cluster, current, kind, words, change, est, base)
                ladder.append(step)
                if new is None:
                    break
                current, est = new, step.estimate
                if est.fits:
                    return OOMTriage(base, tuple(fixes), tuple(ladder))
    return OOMTriage(base, tuple(fixes), tuple(ladder))


def explain_infeasible(model, cluster, **config) -> list[dict]:
    """Single-change fixes for a configuration that does not fit (oom_triage's fixes), as dicts.

    Each: change (words), config (the changed keywords), memory_per_gpu_bytes, saves_bytes
    (memory per GPU saved against the given configuration), fits, feasible, step_time_s; the
    ones that fit first (fastest first), then the rest by memory per GPU (smallest first).
    Invalid variants are left out. Empty when the configuration already fits.
    """
    triage = oom_triage(model, cluster, **config)
    if triage.already_fits:
        return []
    base_keys = set(config)
    fixes = []
    for f in triage.fixes:
        if f.skipped:
            continue
        change = {k: v for k, v in f.config.items() if k not in base_keys or config[k] != v}
        fixes.append(dict(change=f.change, config=change, memory_per_gpu_bytes=f.memory_per_gpu_bytes,
                          saves_bytes=f.saves_bytes, fits=f.fits, feasible=f.feasible, step_time_s=f.step_time_s))
    fixes.sort(key=lambda f: (not f["fits"], f["step_time_s"] if f["fits"] else f["memory_per_gpu_bytes"]))
    return fixes


def memory_modes_index(mode) -> int:
    """Position of a recomputation mode in memory.RECOMPUTE_MODES (none 0, selective 1, full 2)."""
    from . import memory

    return memory.RECOMPUTE_MODES.index(recompute_mode(mode))


def format_fixes(fixes: list[dict]) -> str:
    """explain_infeasible's fixes as lines of text."""
    if not fixes:
        return "no single change tried makes it fit"
    return "\n".join(f"{f['change']:<26} saves {format_bytes(f['saves_bytes']):>9} -> {format_bytes(f['memory_per_gpu_bytes']):>9} "
                     f"per GPU, {'fits' if f['fits'] else 'still too big'}"
                     + (f", step {format_seconds(f['step_time_s'])}" if f["fits"] else "") for f in fixes)
