"""Where the step time goes in production: overlap, the network, FP8, context parallelism, OOM, stragglers.

Lesson 8's formulas, built on the physics below them (imports point downward only):

- Gradient bucketing (Li et al. 2020, "PyTorch Distributed", VLDB 13(12): bucketing Sec. 3.2.2,
  overlapping communication with backward Sec. 3.2.3): B equal buckets of M/B bytes, each an
  all-reduce priced by distlab.collectives (alpha-beta ring, 2(N-1) alpha per bucket), overlapped
  with backward as in distlab.dataparallel. Few buckets
  leave little to overlap; many pay the per-message latency B times and run at a small share
  of the link's bandwidth. bucket_sweep finds the best count by computing every one.
- The network: a DP all-reduce's time from the real rank layout (distlab.mesh) on a tapered
  (k:1 oversubscribed) and optionally rail-optimized fabric (distlab.hardware.Cluster), for the
  hierarchical algorithm and for one flat ring through the group; the taper a transfer pays
  depends on how many transfers leave a node across the spine at once.
- FP8 (Micikevicius et al. 2022; Transformer Engine): which bytes halve and which do not, read off
  two runs of distlab.training.estimate and distlab.memory's precision recipes.
- Context parallelism (ring attention, Liu et al. 2023; Megatron-Core context parallelism):
  per ring step a GPU sends a K/V block to its neighbour while it computes attention of its
  query chunk against the block it holds; the transfer hides when it is shorter.
- OOM triage: distlab.triage.oom_triage.
- Stragglers: synchronous data parallelism waits for the slowest GPU every step; the expected
  maximum of N GPUs' times, exactly (numerical integration) and by simulation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._arguments import as_cluster, deprecated_alias, whole_number
from . import collectives, dataparallel, hardware, memory, tensor, training
from .errors import ConfigurationError
from .triage import OOMTriage, TriageStep, oom_triage
from .units import (
    BYTES,
    FLOP_PER_SECOND,
    SECONDS,
    format_bytes,
    format_rate,
    format_seconds,
    non_negative,
    positive,
    positive_int,
    require_finite,
)

__all__ = [
    "BucketSweep",
    "bucket_sweep",
    "backward_time",
    "DPAllReduce",
    "dp_all_reduce",
    "network_step",
    "FP8Comparison",
    "fp8_comparison",
    "RingAttentionStep",
    "ring_attention_step",
    "OOMTriage",
    "TriageStep",
    "expected_max_normal",
    "gumbel_expected_max",
    "leading_term_max_normal",
    "expected_slowest",
    "simulate_slowest",
    "StragglerStep",
    "straggler_step",
]

#: Deprecated name of distlab.triage.oom_triage (not in __all__: an alias, not a formula).
triage_oom = deprecated_alias(oom_triage, "production.triage_oom", "triage.oom_triage")


#: Longest sequence and largest micro-batch: the step model's bounds (distlab.training).
MAX_SEQ_LEN = training.MAX_SEQ_LEN
MAX_MICRO_BATCH = training.MAX_MICRO_BATCH
#: Most tokens one GPU processes per step in backward_time.
MAX_TOKENS_PER_GPU = 1e15


# ----------------------------------------------------------------------------------------
# 1. Gradient bucketing: the best bucket count


@dataclass(frozen=True)
class BucketSweep:
    """Exposed gradient communication for every bucket count 1..max (NumPy arrays, seconds and bytes).

    buckets[i] = i + 1 equal buckets of bucket_bytes[i] = M / B; per_bucket_s the collective time
    of one bucket (latency_s + bucket bytes x seconds_per_byte); comm_total_s = B x per_bucket_s;
    exposed_s what is left after backward (dataparallel.exposed_communication_time);
    bandwidth_share the share of a bucket's time spent moving bytes (1 = the link's full rate,
    small buckets are latency-bound).
    """

    grad_bytes: float
    backward_s: float
    dp: int
    op: str
    latency_s: float
    seconds_per_byte: float
    buckets: np.ndarray
    bucket_bytes: np.ndarray
    per_bucket_s: np.ndarray
    comm_total_s: np.ndarray
    exposed_s: np.ndarray
    bandwidth_share: np.ndarray

    @property
    def best_index(self) -> int:
        return int(np.argmin(self.exposed_s))

    @property
    def best_buckets(self) -> int:
        """The bucket count with the least exposed communication (the smallest such count on a tie)."""
        return int(self.buckets[self.best_index])

    @property
    def best_exposed_s(self) -> float:
        return float(self.exposed_s[self.best_index])

    @property
    def best_bucket_bytes(self) -> float:
        return float(self.bucket_bytes[self.best_index])

    @property
    def closed_form_buckets(self) -> float:
        """B* = (T - M s) / L: the count at which all buckets' communication just fills backward.

        It is the optimum only when B* >= sqrt(T / L), i.e. (T - M s)^2 >= T L (see
        closed_form_applies); otherwise (M s close to or above T) the best count balances the first
        bucket's wait T / B against the latency B L it adds, near sqrt(T / L), and only the sweep
        (best_buckets) says where. Negative when M s > T."""
        return (self.backward_s - self.grad_bytes * self.seconds_per_byte) / self.latency_s

    @property
    def closed_form_applies(self) -> bool:
        """Whether B* = closed_form_buckets is the optimum: (T - M s)^2 >= T L with T > M s."""
        slack = self.backward_s - self.grad_bytes * self.seconds_per_byte
        return slack > 0 and slack * slack >= self.backward_s * self.latency_s

    def at(self, buckets) -> dict:
        """The sweep's numbers at one bucket count (plain floats)."""
        b = whole_number(buckets, "buckets", 1, int(self.buckets[-1]))
        i = b - 1
        return dict(buckets=b, bucket_bytes=float(self.bucket_bytes[i]), per_bucket_s=float(self.per_bucket_s[i]),
                    comm_total_s=float(self.comm_total_s[i]), exposed_s=float(self.exposed_s[i]),
                    bandwidth_share=float(self.bandwidth_share[i]))

    def timeline(self, buckets) -> dataparallel.OverlapTimeline:
        """The per-bucket timeline of one count (dataparallel.overlap_timeline): bucket i ready at
        (i+1)/B of backward, each taking per_bucket_s on one stream."""
        b = whole_number(buckets, "buckets", 1, int(self.buckets[-1]))
        sizes = np.full(b, self.grad_bytes / b)
        ready = self.backward_s * np.arange(1, b + 1) / b
        comm = np.full(b, float(self.per_bucket_s[b - 1]))
        start, end = dataparallel.overlap_timeline(ready, comm)
        return dataparallel.OverlapTimeline(sizes, ready, start, end, comm, self.backward_s, self.op, self.dp)

    def ddp_default_buckets(self) -> int:
        """Buckets of PyTorch DDP's default 25 MiB (dataparallel.DDP_BUCKET_BYTES): ceil(M / 25 MiB)."""
        return max(1, math.ceil(self.grad_bytes / dataparallel.DDP_BUCKET_BYTES))

    def __str__(self) -> str:
        one, best = self.at(1), self.at(self.best_buckets)
        return (f"{format_bytes(self.grad_bytes)} of gradients, {self.op} over {self.dp} GPUs, "
                f"{format_seconds(self.backward_s)} of backward: 1 bucket leaves {format_seconds(one['exposed_s'])} "
                f"exposed; the best, {self.best_buckets} buckets of {format_bytes(best['bucket_bytes'])}, leaves "
                f"{format_seconds(best['exposed_s'])} (each bucket at {100 * best['bandwidth_share']:.0f}% of the "
                f"link's bandwidth)")


#: Largest bucket count a sweep prices (every count from 1 to it).
MAX_SWEEP_BUCKETS = 100_000


def bucket_sweep(grad_bytes, backward_time, dp, *, max_buckets=1024, link=None, bandwidth=None, latency=None,
                 op="all-reduce", **cost_kwargs) -> BucketSweep:
    """Exposed communication for every bucket count B = 1..max_buckets, and the best B.

    A bucket of m bytes costs t(m) = L + m x s, read off distlab.collectives.collective_cost
    (ring all-reduce: L = 2(N-1) alpha, s = 2(N-1)/(N beta)), so B buckets take
    comm(B) = B L + M s in all and exposed(B) = max(comm/B, comm - (B-1)/B x backward)
    (distlab.dataparallel.exposed_communication_time; bucketed_overlap's timeline gives the
    same). Few buckets: little overlaps (B = 1 hides nothing). Many: the latency B L grows and
    each bucket moves m / t(m) = beta_eff, far below the link's rate once m s << L. The best B
    is the argmin over every count, computed, not assumed. Li et al. 2020: bucketing Sec. 3.2.2,
    overlap with backward Sec. 3.2.3.

    Where it lands (T = backward): the two branches of exposed meet where comm(B) = T, i.e. at
    B* = (T - M s) / L (BucketSweep.closed_form_buckets): the buckets' communication just fills
    the backward pass and only the last bucket shows (exposed = L + M s / B*). Fewer buckets leave
    a bigger last bucket; more make the stream outlast backward. That is the optimum only when
    B* >= sqrt(T / L), i.e. (T - M s)^2 >= T L: beyond B*, exposed = B L + M s - T + T / B still
    falls while T / B^2 > L. Otherwise (M s close to T, or above it) the best count balances the
    wait for the FIRST bucket, T / B, against the latency B L, near sqrt(T / L). Example, T / L =
    1000: M s = 0.97 T gives B* = 30 but the best is 32; M s = 0.99 T gives B* = 10, best 32.
    cost_kwargs go to collective_cost (e.g. algorithm='hierarchical', gpus_per_node=8,
    inter_link='ib-ndr': L = 2(g-1) alpha_intra + 2(n/g-1) alpha_inter). Lesson 8 §1.

    1 GB over 8 GPUs at 100 GB/s, alpha 10 us, 100 ms of backward: L = 14 x 10 us = 0.14 ms, M s = 14 x 1 GB /
    (8 x 100 GB/s) = 17.5 ms, B* = (100 - 17.5) / 0.14 = 589.3; B = 589 leaves L + M s / 589 = 0.17 ms exposed.

    >>> sweep = bucket_sweep(1e9, 0.1, 8, bandwidth=100e9, latency=1e-5)
    >>> sweep.best_buckets, round(sweep.closed_form_buckets, 1), round(sweep.best_exposed_s * 1e3, 2)
    (589, 589.3, 0.17)
    """
    m = positive(grad_bytes, BYTES, "grad_bytes")
    backward = non_negative(backward_time, SECONDS, "backward_time")
    n = positive_int(dp, "dp")
    top = whole_number(max_buckets, "max_buckets", 1, MAX_SWEEP_BUCKETS)
    if op not in ("all-reduce", "reduce-scatter"):
        raise ConfigurationError(f"op={op!r}: the gradient step is an 'all-reduce' (DP) or a 'reduce-scatter' (ZeRO-2)")
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # overflow is refused below
        probe = collectives.collective_cost(op, m, n, link=link, bandwidth=bandwidth, latency=latency, **cost_kwargs)
    latency_s = probe.latency_time_s
    per_byte = probe.bandwidth_time_s / m
    buckets = np.arange(1, top + 1, dtype=float)
    size = m / buckets
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is refused below
        per_bucket = latency_s + size * per_byte
        comm = buckets * per_bucket
        exposed = np.asarray(dataparallel.exposed_communication_time(comm, backward, buckets), dtype=float)
    require_finite("bucket_sweep's communication time", latency_s, per_byte, per_bucket, comm, exposed)
    share = np.where(per_bucket > 0, size * per_byte / np.where(per_bucket > 0, per_bucket, 1.0), 1.0)
    return BucketSweep(m, backward, n, op, latency_s, per_byte, buckets.astype(int), size, per_bucket, comm, exposed,
                       share)


def backward_time(model, tokens_per_gpu, gpu="h100-sxm", *, precision="mixed", efficiency=0.5) -> float:
    """Backward compute of one step on one data-parallel GPU (s): 4 x params x tokens / (peak x efficiency).

    The backward pass is 4 of the 6 FLOPs per parameter per token (weight and input gradients;
    Kaplan et al. 2020, as distlab.training counts them). Lesson 8 §1.

    >>> round(backward_time('llama2-7b', 4096), 4)  # 4 x 6.738e9 x 4096 / (989.4 TFLOP/s x 0.5)
    0.2232
    """
    from . import models

    params = float(models.model(model).parameter_count()) if not hasattr(model, "parameter_count") \
        else float(model.parameter_count())
    tokens = positive(tokens_per_gpu, "", "tokens_per_gpu")
    if tokens > MAX_TOKENS_PER_GPU:
        raise ConfigurationError(f"tokens_per_gpu={tokens:g} is more than {MAX_TOKENS_PER_GPU:g} tokens per GPU per step")
    acc = hardware.accelerator(gpu)
    peak = acc.peak(memory.precision_recipe(precision).compute_precision)
    eff = training.check_fraction(efficiency, "efficiency")
    result = 4.0 / training.FLOPS_PER_PARAM_TOKEN * training.model_flops(params, tokens) / (peak * eff)
    require_finite("backward_time", result)
    return result


# ----------------------------------------------------------------------------------------
# 2. The network: oversubscription, rails, and the DP all-reduce from the rank layout


ALGORITHMS = ("hierarchical", "ring")


@dataclass(frozen=True)
class DPAllReduce:
    """One data-parallel group's all-reduce on a cluster, priced from where its ranks sit.

    members: the group's ranks; local_members: members per node (l); nodes: nodes spanned;
    same_local_rank: whether every inter-node transfer connects GPUs of the same local rank
    (so rides one rail); flows_per_node: how many transfers leave the busiest node across the
    fabric at once, counting every DP group of the layout (they all all-reduce together);
    fabric_bw: the bandwidth each of those transfers gets (B/s,
    hardware.Cluster.fabric_bandwidth_per_gpu); time_s the total, intra_s and inter_s its parts
    (the ring's are not separable: intra_s is 0).
    """

    algorithm: str
    size_bytes: float
    members: tuple
    local_members: int
    nodes: int
    same_local_rank: bool
    flows_per_node: int
    fabric_bw: float
    intra_s: float
    inter_s: float
    time_s: float

    @property
    def dp(self) -> int:
        return len(self.members)

    def __str__(self) -> str:
        where = (f"{self.nodes} nodes x {self.local_members} per node, inter-node traffic "
                 f"{'between equal local ranks' if self.same_local_rank else 'between different local ranks'}, "
                 f"{self.flows_per_node} transfer{'s' if self.flows_per_node != 1 else ''} leaving each node at "
                 f"{format_rate(self.fabric_bw)} each") if self.nodes > 1 else "inside one node"
        return (f"{self.algorithm} all-reduce of {format_bytes(self.size_bytes)} over {self.dp} GPUs ({where}): "
                f"{format_seconds(self.time_s)}")


def _flows_per_node(groups: np.ndarray, g: int, algorithm: str) -> int:
    """Transfers leaving the busiest node across the fabric when every group all-reduces at once.

    hierarchical: every member of a group that spans nodes sends its M / l share to the next node
    (one transfer per member); ring: one transfer per ring hop whose two ends sit on different nodes."""
    node = groups // g
    if algorithm == "hierarchical":
        spans = np.any(node != node[:, :1], axis=1)
        senders = node[spans].ravel()
    else:
        nxt = np.roll(node, -1, axis=1)
        senders = node[nxt != node]
    return int(np.bincount(senders).max()) if senders.size else 0


def dp_all_reduce(cluster, size_bytes, *, tp=1, pp=1, order="tp-cp-ep-dp-pp", group=0,
                  algorithm="hierarchical") -> DPAllReduce:
    """Time of one DP group's all-reduce of size_bytes, its members taken from the rank layout.

    The layout is distlab.mesh.layout(tp, pp, dp = GPUs / (tp pp), order) on the cluster's nodes.
    'hierarchical' (as in distlab.collectives.collective_cost): ring all-reduce over the l members a node holds on the intra-node
    link, plus a ring all-reduce of M / l over the n / l nodes, in which member j of every node
    talks to member j of the others; whether those share a local rank follows from the layout
    (in the default order: training.equal_local_ranks_array, the rule the step model uses).
    'ring': one ring through the members in rank order; every ring step moves M / N on every hop
    at once and lasts as long as its slowest hop, so T = 2(N-1)(alpha + M / (N B_slowest)); a hop
    from the last member of one node to the first of the next joins DIFFERENT local ranks when
    l > 1. Fabric bandwidth per transfer: Cluster.fabric_bandwidth_per_gpu(same_local_rank, f)
    with f the transfers that leave a node across the fabric at once, counted over every DP group
    of the layout: the hierarchical algorithm sends from every member (f = g when tp = 1: the full
    k:1 taper); a flat ring crosses each node boundary once per group (tp = 1: f = 1, so on a 3:1
    fabric without rails the ring's hops keep the full port rate, while on rails all of a rail's
    crossing transfers share that rail's uplinks: the full taper, assuming the rail's leaf switch
    serves only this cluster's nodes, all sending at once). Lesson 8 §2.

    1 GB over the 16 GPUs of two DGX H100 nodes: a ring of 8 on NVLink (450 GB/s, 3.4 us):
    14 x (3.4 us + 1 GB / (8 x 450 GB/s)) = 3.94 ms; then 125 MB between the 2 nodes at 50 GB/s per GPU
    (9.6 us): 2 x (9.6 us + 125 MB / (2 x 50 GB/s)) = 2.52 ms.

    >>> from distlab import hardware
    >>> r = dp_all_reduce(hardware.cluster('dgx-h100', 2, 'ib-ndr'), 1e9)
    >>> r.local_members, r.nodes, round(r.intra_s * 1e3, 2), round(r.inter_s * 1e3, 2)
    (8, 2, 3.94, 2.52)
    """
    from . import mesh

    cl = as_cluster(cluster)
    if algorithm not in ALGORITHMS:
        raise ConfigurationError(f"algorithm={algorithm!r}; valid: {', '.join(ALGORITHMS)}")
    size = non_negative(size_bytes, BYTES, "size_bytes")
    tp, pp = positive_int(tp, "tp"), positive_int(pp, "pp")
    if cl.gpus % (tp * pp):
        raise ConfigurationError(f"tp x pp = {tp} x {pp} = {tp * pp} must divide the cluster's {cl.gpus} GPUs")
    dp = cl.gpus // (tp * pp)
    g = cl.gpus_per_node
    lay = mesh.layout(cl.gpus, tp=tp, pp=pp, dp=dp, order=order, gpus_per_node=g)
    groups = np.asarray(lay.groups("dp"), dtype=int)
    index = whole_number(group, "group", 0, len(groups) - 1)
    members = groups[index]
    node = members // g
    local = members % g
    intra, inter = cl.intra_link, cl.fabric
    nodes_used = np.unique(node)
    per_node = [local[node == k] for k in nodes_used]
    n = members.size
    flows = _flows_per_node(groups, g, algorithm)
    if algorithm == "hierarchical":
        counts = {len(p) for p in per_node}
        if len(counts) != 1:
            raise ConfigurationError(
                f"the DP group {members.tolist()[:8]}... holds {sorted(counts)} members on different nodes; the "
                f"hierarchical all-reduce needs the same number on each: use algorithm='ring'")
        l = counts.pop()
        if order == mesh.DEFAULT_ORDER:
            aligned = bool(training.equal_local_ranks_array(dp, tp, g))
        else:
            aligned = all(np.array_equal(p, per_node[0]) for p in per_node)
        k = len(nodes_used)
        bw = cl.fabric_bandwidth_per_gpu(same_local_rank=aligned, flows_per_node=max(flows, 1))
        intra_s = collectives.ring_all_reduce_time(size, l, intra.bandwidth, intra.latency)
        inter_s = collectives.ring_all_reduce_time(size / l, k, bw, inter.latency) if k > 1 else 0.0
        require_finite("dp_all_reduce's time", intra_s, inter_s, intra_s + inter_s)
        return DPAllReduce(algorithm, size, tuple(members.tolist()), l, k, aligned, flows if k > 1 else 0,
                           bw if k > 1 else 0.0, float(intra_s), float(inter_s), float(intra_s + inter_s))
    nxt = np.roll(members, -1)
    crossing = (nxt // g) != node
    if n == 1 or not crossing.any():
        t = collectives.ring_all_reduce_time(size, n, intra.bandwidth, intra.latency)
        require_finite("dp_all_reduce's time", t)
        return DPAllReduce(algorithm, size, tuple(members.tolist()), n, 1, True, 0, 0.0, float(t), 0.0, float(t))
    aligned = bool(np.all((nxt % g)[crossing] == local[crossing]))
    bw = cl.fabric_bandwidth_per_gpu(same_local_rank=aligned, flows_per_node=flows)
    t = collectives.ring_all_reduce_time(size, n, bw, inter.latency)
    require_finite("dp_all_reduce's time", t)
    l = max(len(p) for p in per_node)
    return DPAllReduce(algorithm, size, tuple(members.tolist()), l, len(nodes_used), aligned, flows, bw, 0.0,
                       float(t), float(t))


def network_step(model, node="dgx-h100", nodes=4, fabric="ib-ndr", *, oversubscription=1.0, rail_optimized=False,
                 **config) -> training.StepEstimate:
    """estimate() on a cluster with the given taper and rail design. The step model's DP all-reduce is
    hierarchical: rails spare its inter-node ring the taper when that ring joins equal local ranks
    (training.equal_local_ranks_array), as they spare pipeline sends whose stride is a multiple of the node.
    Lesson 8 §2.

    dp = 32 over 4 nodes of 8 joins equal local ranks: rails give a 3:1 tapered fabric the full port rate
    back, without them the taper triples the inter-node ring's bandwidth time.

    >>> config = dict(nodes=4, global_batch=32, seq_len=4096, zero=1)
    >>> flat = network_step('llama2-7b', oversubscription=1.0, **config).dp_comm_s
    >>> network_step('llama2-7b', oversubscription=3.0, rail_optimized=True, **config).dp_comm_s == flat
    True
    >>> network_step('llama2-7b', oversubscription=3.0, **config).dp_comm_s > flat
    True
    """
    cl = hardware.cluster(node, nodes, fabric, oversubscription, rail_optimized)
    return training.estimate(model, cl, **config)


# ----------------------------------------------------------------------------------------
# 3. FP8: which bytes halve


@dataclass(frozen=True)
class FP8Comparison:
    """The same configuration in bf16 mixed precision and in the fp8 recipe (distlab.memory.PRECISION_RECIPES['fp8']).

    rows: (quantity, bf16 value, fp8 value, unit) with values in bytes, seconds or FLOP/s;
    bf16 and fp8: the two StepEstimates.
    """

    bf16: training.StepEstimate
    fp8: training.StepEstimate
    rows: tuple

    def ratios(self) -> dict:
        """{quantity: fp8 / bf16}."""
        return {name: (b8 / b16 if b16 else 1.0) for name, b16, b8, _ in self.rows}

    def table(self) -> str:
        out = [f"{'':<44}{'bf16':>13}{'fp8':>13}{'fp8/bf16':>10}"]
        for name, b16, b8, unit in self.rows:
            fmt = {"B": format_bytes, "s": format_seconds, "FLOP/s": lambda v: format_rate(v, FLOP_PER_SECOND),
                   "B/param": lambda v: f"{v:g} B"}[unit]
            out.append(f"{name:<44}{fmt(b16):>13}{fmt(b8):>13}{(b8 / b16 if b16 else 1.0):>10.3f}")
        return "\n".join(out)


def fp8_comparison(model, cluster, **config) -> FP8Comparison:
    """Run estimate() in 'mixed' (bf16) and 'fp8' precision and list what changes, by how much.

    Halves: weight bytes (2 -> 1 B/param) and, in distlab's simplified recipe, every stored
    2-byte activation (dropout masks stay 1 byte, so exactly half only for models without
    dropout). That is an upper bound on the saving: Transformer Engine keeps FP8 copies only of
    GEMM inputs; LayerNorm inputs, the softmax output and other saved tensors stay bf16. Compute
    time halves in the model (the fp8 dense peak is twice bf16's on H100) because its 6PT counts
    only the GEMM FLOPs, all run at the fp8 peak; attention's softmax and the element-wise work
    stay bf16 in practice. Does not halve: TP all-reduce and pipeline messages (FP8 is the GEMMs'
    input format; their outputs and the gradients are bf16: PrecisionRecipe.message_bytes = 2),
    gradients (bf16, so the DP all-reduce moves the same bytes), fp32 master weights and Adam
    moments (12 B/param): model states go from 16 to 15 B/param, not 8. The 1-byte weights assume
    FP8 primary weights (Transformer Engine's fp8_model_init, Megatron-LM's --fp8-param-gather);
    with them a ZeRO-1 parameter all-gather would move 1-byte weights, so pricing the DP traffic
    as a bf16 all-reduce of the gradients (distlab's) is an upper bound there.
    Micikevicius et al. 2022, "FP8 Formats for Deep Learning"; NVIDIA Transformer Engine. Lesson 8 §3.

    >>> r = fp8_comparison('llama2-7b', 'dgx-h100', nodes=1, fabric='ib-ndr', global_batch=8, seq_len=4096, zero=3)
    >>> r.ratios()['model-state bytes per parameter'], r.ratios()['weights per GPU']  # 15 / 16 and 1 / 2
    (0.9375, 0.5)
    """
    config = {k: v for k, v in config.items() if k != "precision"}
    m = training.estimate(model, cluster, precision="mixed", **config)
    f = training.estimate(model, cluster, precision="fp8", **config)
    from . import models

    mdl = models.model(model)
    c = m.config
    b, s, t, p = c["micro_batch_size"], c["seq_len"], c["tp"], c["pp"]
    r16, r8 = memory.precision_recipe("mixed"), memory.precision_recipe("fp8")
    peak16, peak8 = m.peak_flops, f.peak_flops
    rows = (
        ("model-state bytes per parameter", r16.bytes_per_param, r8.bytes_per_param, "B/param"),
        ("weights per GPU", m.memory.weights_bytes, f.memory.weights_bytes, "B"),
        ("gradients per GPU", m.memory.gradients_bytes, f.memory.gradients_bytes, "B"),
        ("optimizer state per GPU", m.memory.optimizer_bytes, f.memory.optimizer_bytes, "B"),
        ("activations per GPU (fp8 saving: upper bound)", m.memory.activations_bytes, f.memory.activations_bytes, "B"),
        ("memory per GPU", m.memory.total_bytes, f.memory.total_bytes, "B"),
        ("TP all-reduce message (b s h e_msg)", tensor.tp_message_bytes(b, s, mdl.hidden, r16.message_bytes),
         tensor.tp_message_bytes(b, s, mdl.hidden, r8.message_bytes), "B"),
        ("pipeline send (b s h e_msg / tp)", training.p2p_message_bytes(b, s, mdl.hidden, t, r16.message_bytes),
         training.p2p_message_bytes(b, s, mdl.hidden, t, r8.message_bytes), "B"),
        ("DP gradient all-reduce (M per GPU)", dataparallel.gradient_bytes(mdl, "mixed", t, p),
         dataparallel.gradient_bytes(mdl, "fp8", t, p), "B"),
        ("dense peak per GPU", peak16, peak8, "FLOP/s"),
        ("compute time per step", m.compute_s, f.compute_s, "s"),
        ("step time", m.step_time_s, f.step_time_s, "s"),
    )
    return FP8Comparison(m, f, rows)


# ----------------------------------------------------------------------------------------
# 4. Context parallelism: does the K/V transfer hide under attention compute?


@dataclass(frozen=True)
class RingAttentionStep:
    """One ring-attention step of one layer's forward pass on one GPU (bytes, FLOPs, seconds).

    chunk = s / cp tokens per GPU; kv_block_bytes = 2 b chunk kv_width e (K and V of the block
    passed on); comm_s its send-recv time; attention_flops = 4 b chunk^2 h / tp (x 1/2 causal,
    load-balanced); compute_s = FLOPs / (peak x efficiency); exposed_s = max(0, comm - compute);
    crossover_seq_len: the shortest sequence (a multiple of cp) at which the transfer hides.
    """

    seq_len: int
    cp: int
    micro_batch_size: int
    tp: int
    causal: bool
    kv_width: float
    element_bytes: float
    kv_block_bytes: float
    comm_s: float
    attention_flops: float
    compute_s: float
    crossover_seq_len: int

    @property
    def chunk(self) -> int:
        return self.seq_len // self.cp

    @property
    def hidden(self) -> bool:
        return self.comm_s <= self.compute_s

    @property
    def exposed_s(self) -> float:
        return max(0.0, self.comm_s - self.compute_s)

    @property
    def ratio(self) -> float:
        """comm / compute: <= 1 hides."""
        return self.comm_s / self.compute_s

    def __str__(self) -> str:
        verdict = "hidden" if self.hidden else f"{format_seconds(self.exposed_s)} exposed"
        return (f"S={self.seq_len:,} over cp={self.cp} ({self.chunk:,} tokens per GPU): K/V block "
                f"{format_bytes(self.kv_block_bytes)} takes {format_seconds(self.comm_s)}, attention on it "
                f"{format_seconds(self.compute_s)}: {verdict}; hides from S = {self.crossover_seq_len:,}")


def ring_attention_step(model, seq_len, cp, *, micro_batch_size=1, tp=1, precision="mixed", link="nvlink4",
                        bandwidth=None, latency=None, gpu="h100-sxm", efficiency=0.5, causal=True) -> RingAttentionStep:
    """Per ring step: K/V block transfer vs the attention compute it overlaps (Liu et al. 2023, Ring Attention).

    Block: 2 x b x (s/cp) x kv_width x e bytes, kv_width = kv_heads/tp x head_dim (grouped-query
    attention sends only the K/V heads; at least one head per GPU), sent over `link` (send-recv:
    alpha + bytes / B). Compute: a query chunk against one K/V chunk, QK^T and AV, 2 + 2 FLOPs per
    (query, key, feature): 4 b (s/cp)^2 h / tp; causal with load-balanced chunks (Megatron-Core's
    context parallelism) does half per step on average. Hidden when comm <= compute. The
    crossover solves alpha + lam c = kap c^2 for the chunk c (lam the seconds per token of the
    transfer, kap the seconds per token^2 of compute): c* = (lam + sqrt(lam^2 + 4 kap alpha)) /
    (2 kap), S* = cp c* rounded up to a multiple of cp. The backward pass sends K, V and their
    gradients (2x the bytes) against 2x the FLOPs: the same ratio. cp = 1 is refused (nothing is
    passed around a ring of one GPU). Lesson 8 §4.

    Llama 2 7B, 128K tokens over cp = 8: chunks of 16,384 tokens; K and V of 32 x 128 in bf16:
    2 x 16384 x 4096 x 2 B = 256 MiB per step; causal compute 0.5 x 4 x 16384^2 x 4096 = 2.2 TFLOP.

    >>> r = ring_attention_step('llama2-7b', 131072, 8)
    >>> r.kv_block_bytes, r.attention_flops
    (268435456.0, 2199023255552.0)
    """
    from . import models

    mdl = models.model(model)
    s = positive_int(seq_len, "seq_len")
    n = positive_int(cp, "cp")
    b = positive_int(micro_batch_size, "micro_batch_size")
    if s > MAX_SEQ_LEN:
        raise ConfigurationError(f"seq_len={seq_len!r} is more than {MAX_SEQ_LEN:,} tokens")
    if b > MAX_MICRO_BATCH:
        raise ConfigurationError(f"micro_batch_size={micro_batch_size!r} is more than {MAX_MICRO_BATCH:,} sequences")
    if n < 2:
        raise ConfigurationError(f"cp={n}: with one GPU per sequence there is no ring and no K/V block to pass; "
                                 f"context parallelism needs cp >= 2")
    t = tensor.check_tp(mdl, tp)
    if s % n:
        raise ConfigurationError(f"cp={n} does not divide seq_len={s}: each GPU holds s / cp tokens; pick seq_len a "
                                 f"multiple of {n}")
    eff = training.check_fraction(efficiency, "efficiency")
    recipe = memory.precision_recipe(precision)
    e = float(recipe.activation_bytes)
    acc = hardware.accelerator(gpu)
    peak = acc.peak(recipe.compute_precision)
    kv_width = max(mdl.kv_heads / t, 1.0) * mdl.head_dim
    c = s // n
    block = 2.0 * b * c * kv_width * e
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # overflow is refused below
        cost = collectives.collective_cost("send-recv", block, 2, link=link, bandwidth=bandwidth, latency=latency)
    alpha = cost.latency_time_s
    lam = cost.bandwidth_time_s / c  # transfer seconds per token of the chunk
    share = 0.5 if causal else 1.0
    flops = share * 4.0 * b * c * c * mdl.hidden / t
    compute = flops / (peak * eff)
    kap = share * 4.0 * b * mdl.hidden / t / (peak * eff)
    chunk_star = (lam + math.sqrt(lam * lam + 4.0 * kap * alpha)) / (2.0 * kap)
    require_finite("ring_attention_step's transfer time", cost.time_s, compute, chunk_star * n)
    cross = int(math.ceil(chunk_star)) * n
    return RingAttentionStep(s, n, b, t, bool(causal), kv_width, e, block, cost.time_s, flops, compute, cross)


# ----------------------------------------------------------------------------------------
# 5. Stragglers: synchronous steps wait for the slowest GPU


#: Euler-Mascheroni constant (the mean of the standard Gumbel distribution).
EULER_GAMMA = 0.5772156649015329

_GRID = np.linspace(-12.0, 12.0, 24001)
_erf = np.frompyfunc(math.erf, 1, 1)
_PHI = 0.5 * (1.0 + _erf(_GRID / math.sqrt(2.0)).astype(float))
#: log Phi(x) on the grid, accurate in both tails: log(erfc(-x/sqrt 2)/2) below 0, log1p(-Q(x)) with
#: Q(x) = erfc(x/sqrt 2)/2 above (Phi itself rounds to 1 once Q < 1e-16, x > 8.2).
_LOG_PHI = np.array([math.log(0.5 * math.erfc(-x / math.sqrt(2.0))) if x < 0
                     else math.log1p(-0.5 * math.erfc(x / math.sqrt(2.0))) for x in _GRID])
#: Largest n expected_max_normal integrates: n Q(12) = n x 1.8e-33 must stay negligible on the grid.
MAX_NORMALS = 10**15


def expected_max_normal(n) -> float:
    """E[max of n independent standard normals], exactly up to quadrature error (< 1e-6).

    E[M] = a + int_a^inf (1 - Phi(x)^n) dx for any a with Phi(a)^n = 0, here a = -12 (trapezoid
    rule on [-12, 12], step 0.001), with 1 - Phi^n computed as -expm1(n log Phi(x)) and
    log Phi(x) = log1p(-Q(x)), Q = erfc(x / sqrt 2) / 2, in the upper tail, so the integrand keeps
    its accuracy where Phi rounds to 1 (what matters once n passes ~1e10). n = 1: 0; n = 2:
    1/sqrt(pi) = 0.5642; n = 1000: 3.2414 (Tippett 1925's tables). n up to MAX_NORMALS (1e15). Lesson 8 §6.

    >>> round(float(expected_max_normal(2)), 4), round(float(expected_max_normal(1000)), 4)
    (0.5642, 3.2414)
    """
    k = positive_int(n, "n")
    if k > MAX_NORMALS:
        raise ConfigurationError(f"n={n!r} is more than {MAX_NORMALS:,}: the integration grid ends at 12 "
                                 f"standard deviations")
    return _GRID[0] + _trapezoid(-np.expm1(k * _LOG_PHI), _GRID)


def _trapezoid(y, x) -> float:
    return float(np.sum((y[1:] + y[:-1]) * np.diff(x)) / 2.0)


def leading_term_max_normal(n):
    """sqrt(2 ln n): the leading term of E[max of n standard normals] (extreme-value theory), the
    well-known growth law; it overestimates the expected maximum (n = 1000: 3.72 vs the exact 3.24).
    NumPy broadcast over whole n >= 1 (anything else raises ConfigurationError). Lesson 8 §6.

    >>> round(leading_term_max_normal(1000), 2)  # sqrt(2 x 6.9078)
    3.72
    """
    bad = ConfigurationError(f"n={n!r} must be whole numbers >= 1 (GPUs)")
    if isinstance(n, (bool, str, bytes)):
        raise bad
    try:
        arr = np.asarray(n, dtype=float)
    except (TypeError, ValueError):
        raise bad from None
    if arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr < 1) or np.any(arr != np.round(arr)):
        raise bad
    value = np.sqrt(2.0 * np.log(arr))
    return float(value) if np.ndim(value) == 0 else value


def gumbel_expected_max(n) -> float:
    """Extreme-value approximation of E[max of n standard normals] (n >= 2):
    b_n + gamma a_n with a_n = 1/sqrt(2 ln n), b_n = sqrt(2 ln n) - (ln ln n + ln 4 pi) / (2 sqrt(2 ln n)).
    Its leading term sqrt(2 ln n) is the well-known growth law; the correction matters (n = 1000:
    sqrt(2 ln n) = 3.72 vs the exact 3.24). Source: Cramer 1946, Sec. 28.6; Embrechts et al. 1997. Lesson 8 §6.

    n = 1000: 3.7169 - (1.9326 + 2.5310) / (2 x 3.7169) + 0.5772 / 3.7169 = 3.2718.

    >>> round(gumbel_expected_max(1000), 4)
    3.2718
    """
    k = positive_int(n, "n")
    if k < 2:
        raise ConfigurationError(f"n={n!r}: the extreme-value approximation needs n >= 2 GPUs")
    if k > MAX_NORMALS:
        raise ConfigurationError(f"n={n!r} is more than {MAX_NORMALS:,}")
    r = math.sqrt(2.0 * math.log(k))
    return r - (math.log(math.log(k)) + math.log(4.0 * math.pi)) / (2.0 * r) + EULER_GAMMA / r


def _check_sigma(sigma) -> float:
    value = non_negative(sigma, "", "sigma")
    if value > 0.25:
        raise ConfigurationError(f"sigma={value:g} must be at most 0.25 (a 25% standard deviation of a GPU's "
                                 f"step time); the normal model of jitter needs step times to stay positive")
    return value


def _check_slow(slow_factor) -> float:
    value = positive(slow_factor, "", "slow_factor")
    if value < 1:
        raise ConfigurationError(f"slow_factor={value:g} must be >= 1 (1 = healthy, 1.5 = one GPU 50% slower)")
    if value > 100:
        raise ConfigurationError(f"slow_factor={value:g} must be at most 100")
    return value


def expected_slowest(gpus, sigma=0.0, slow_factor=1.0) -> float:
    """E[max over GPUs of time / healthy mean]: one GPU slowed by k, every GPU jittered by sigma.

    GPU i takes (1 + sigma Z_i) of the healthy time (Z_i independent standard normals), GPU 0 k
    times that. P(max <= x) = Phi((x/k - 1)/sigma) Phi((x - 1)/sigma)^(N-1); E = integral of
    (1 - F) over x > 0 (the mass below 0 is negligible for sigma <= 0.25). sigma = 0: k;
    k = 1: 1 + sigma E[max of N normals]. Lesson 8 §6.

    >>> round(float(expected_slowest(1000, sigma=0.1)), 4), expected_slowest(8, slow_factor=1.5)  # 1 + 0.1 x 3.2414
    (1.3241, 1.5)
    """
    n = positive_int(gpus, "gpus")
    if n > MAX_NORMALS:
        raise ConfigurationError(f"gpus={gpus!r} is more than {MAX_NORMALS:,}")
    sig = _check_sigma(sigma)
    k = _check_slow(slow_factor)
    if k == 1:
        return 1.0 + sig * expected_max_normal(n)
    if sig * k < 1e-9:  # narrower than the grid resolves: max = k to within 1e-8
        return k
    # E = x0 + integral from x0 of (1 - F), x0 = 1 - 12 sigma (F = 0 below); a grid fine near 1 and near k
    x = np.unique(np.concatenate([1.0 + sig * _GRID, k * (1.0 + sig * _GRID),
                                  np.linspace(1.0 - 12 * sig, k * (1.0 + 12 * sig), 4001)]))
    x = x[x >= 1.0 - 12 * sig]
    cdf_slow = np.interp((x / k - 1.0) / sig, _GRID, _PHI)
    cdf_rest = np.interp((x - 1.0) / sig, _GRID, _PHI) ** (n - 1)
    return float(x[0]) + _trapezoid(1.0 - cdf_slow * cdf_rest, x)


#: Most GPU-steps (gpus x steps) one simulation draws.
MAX_SIMULATION_DRAWS = 50_000_000


def simulate_slowest(gpus, sigma, *, slow_factor=1.0, steps=1000, seed=0) -> np.ndarray:
    """Simulated per-step max over GPUs of time / healthy mean (seeded NumPy generator, chunked).

    Each step draws 1 + sigma Z for every GPU (GPU 0 times slow_factor) and keeps the maximum;
    returns one value per step. Compare its mean with expected_slowest. Lesson 8 §6.

    8 GPUs, 5% jitter: expected 1 + 0.05 x 1.4236 = 1.0712 (standard error of 2,000 steps about 0.0007).

    >>> round(float(simulate_slowest(8, 0.05, steps=2000, seed=0).mean()), 2)
    1.07
    """
    n = positive_int(gpus, "gpus")
    sig = _check_sigma(sigma)
    k = _check_slow(slow_factor)
    steps = positive_int(steps, "steps")
    if n * steps > MAX_SIMULATION_DRAWS:
        raise ConfigurationError(f"gpus x steps = {n:,} x {steps:,} draws is over {MAX_SIMULATION_DRAWS:,}; "
                                 f"simulate fewer steps")
    rng = np.random.default_rng(whole_number(seed, "seed", 0, 2**63 - 1))
    out = np.empty(steps)
    chunk = max(1, 4_000_000 // n)
    for start in range(0, steps, chunk):
        stop = min(steps, start + chunk)
        times = 1.0 + sig * rng.standard_normal((stop - start, n))
        times[:, 0] *= k
        out[start:stop] = times.max(axis=1)
    return out


@dataclass(frozen=True)
class StragglerStep:
    """A step whose synchronous GPUs wait for the slowest: healthy estimate plus the wait (seconds)."""

    healthy: training.StepEstimate
    gpus: int
    sigma: float
    slow_factor: float
    slowest: float  # E[max time / healthy] over the GPUs
    scaled_s: float  # the compute-bound part that stretches: the compute of the m microbatches

    @property
    def wait_s(self) -> float:
        """Time every GPU spends waiting for the slowest one: (slowest - 1) x compute (the bubble does not stretch)."""
        return (self.slowest - 1.0) * self.scaled_s

    @property
    def step_time_s(self) -> float:
        return self.healthy.step_time_s + self.wait_s

    @property
    def slowdown(self) -> float:
        return self.step_time_s / self.healthy.step_time_s

    @property
    def mfu(self) -> float:
        """Model FLOPs utilisation of the step with the wait: the healthy step's MFU x healthy / actual time."""
        return self.healthy.model_flops / (self.step_time_s * self.healthy.gpus * self.healthy.peak_flops)

    def parts(self) -> dict:
        return {**self.healthy.parts(), "waiting for the slowest GPU": self.wait_s}

    def __str__(self) -> str:
        what = ", ".join(([f"one GPU {self.slow_factor:g}x slow"] if self.slow_factor > 1 else [])
                         + ([f"jitter {100 * self.sigma:g}%"] if self.sigma > 0 else [])) or "healthy"
        return (f"{self.gpus} GPUs, {what}: the slowest GPU takes "
                f"{self.slowest:.4f} x the healthy compute; step {format_seconds(self.healthy.step_time_s)} -> "
                f"{format_seconds(self.step_time_s)} (+{100 * (self.slowdown - 1):.1f}%)")


def straggler_step(model, cluster, *, slow_factor=1.0, sigma=0.0, **config) -> StragglerStep:
    """estimate() of a healthy step, then the wait for the slowest of its GPUs.

    Synchronous training waits at every collective, so every step runs at its slowest GPU's
    pace: a slow GPU stretches its TP group's compute and so its pipeline stage, and the DP
    all-reduce waits for that replica. With GPipe or 1F1B and m microbatches of stage time t the
    step is (m - 1) x the slowest stage time + the sum of the p stage times (the critical path
    runs the slowest stage's m microbatches plus one microbatch on each other stage), so one
    stage slowed by k adds (k - 1) x m x t = (k - 1) x compute: the pipeline bubble does not
    stretch (the other stages' fill and drain stay as fast). That is exact for GPipe wherever the
    slow stage sits, and for 1F1B when it is the last stage (distlab.pipeline's simulator; a slow
    earlier 1F1B stage costs a little less, its first microbatches hiding in the warm-up): the
    worst placement. Here the compute stretches by E[max over the N GPUs] (expected_slowest);
    communication, the bubble and the optimizer step do not. sigma: each GPU's relative standard
    deviation per step (independent jitter of m microbatches averages to sigma_mb / sqrt(m)). Lesson 8 §6.

    One GPU 1.5x slow, no jitter: the wait is 0.5 x the 0.335 s of compute (training.estimate's example).

    >>> st = straggler_step('llama2-7b', 'dgx-h100', nodes=1, fabric='ib-ndr', slow_factor=1.5, global_batch=8,
    ...                     seq_len=4096)
    >>> st.slowest, round(st.wait_s, 3)
    (1.5, 0.167)
    """
    est = training.estimate(model, cluster, **config)
    sig = _check_sigma(sigma)
    k = _check_slow(slow_factor)
    slowest = expected_slowest(est.gpus, sig, k)
    return StragglerStep(est, est.gpus, sig, k, slowest, est.compute_s)
