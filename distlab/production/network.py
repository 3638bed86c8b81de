"""The network: a DP all-reduce from the real rank layout on a tapered, optionally rail-optimized fabric. Lesson 8 §2."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import collectives, hardware, training
from .._arguments import as_cluster, estimate_config, renamed_keyword, whole_number
from ..errors import ConfigurationError
from ..units import (
    BYTES,
    format_bytes,
    format_rate,
    format_seconds,
    non_negative,
    positive_int,
    require_finite,
)

__all__ = ["ALGORITHMS", "DPAllReduce", "dp_all_reduce", "network_step"]

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
        where = (
            (
                f"{self.nodes} nodes x {self.local_members} per node, inter-node traffic "
                f"{'between equal local ranks' if self.same_local_rank else 'between different local ranks'},\n"
                f"    {self.flows_per_node} transfer{'s' if self.flows_per_node != 1 else ''} leaving each node at "
                f"{format_rate(self.fabric_bw)} each"
            )
            if self.nodes > 1
            else "inside one node"
        )
        # the time first, where the nodes are on indented lines: no printed line wider than a notebook's output
        return (
            f"{self.algorithm} all-reduce of {format_bytes(self.size_bytes)} over {self.dp} GPUs: "
            f"{format_seconds(self.time_s)}" + (f"\n    ({where})" if self.nodes > 1 else f" ({where})")
        )


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


@renamed_keyword(size_bytes="size")
def dp_all_reduce(
    cluster, size, *, tp=1, pp=1, order="tp-cp-ep-dp-pp", group=0, algorithm="hierarchical"
) -> DPAllReduce:
    """Time of one DP group's all-reduce of `size` bytes, its members taken from the rank layout.

    The layout is distlab.mesh.layout(tp, pp, dp = GPUs / (tp pp), order) on the cluster's nodes.
    'hierarchical' (collectives.hierarchical_parts, the placed collective's algorithm): ring all-reduce over the
    l members a node holds on the intra-node link, plus a ring all-reduce of M / l over the n / l nodes, in which member j of every node
    talks to member j of the others; whether those share a local rank follows from the layout
    (in the default order: training.equal_local_ranks_array, the rule the step model uses).
    'ring' (collectives.flat_ring_strawman_time, the strawman NCCL does not run): one ring through the members in
    rank order; every ring step moves M / N on every hop
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
    from .. import mesh

    cl = as_cluster(cluster)
    if not isinstance(algorithm, str) or algorithm not in ALGORITHMS:
        raise ConfigurationError(f"algorithm={algorithm!r}; valid: {', '.join(ALGORITHMS)}")
    size = non_negative(size, BYTES, "size")
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
    per_node = [local[node == k] for k in np.unique(node)]  # each used node's local ranks, in node order
    flows = _flows_per_node(groups, g, algorithm)
    if algorithm == "hierarchical":
        return _hierarchical(cl, size, members, per_node, flows, order == mesh.DEFAULT_ORDER, dp, tp)
    return _flat_ring(cl, size, members, per_node, flows)


def _hierarchical(cl, size: float, members, per_node: list, flows: int, default_order: bool, dp: int, tp: int):
    """dp_all_reduce's 'hierarchical' algorithm: a ring over each node's l members, then a ring of M / l across
    the k nodes at the fabric bandwidth of (aligned local ranks?, flows per node)."""
    algorithm, intra, inter = "hierarchical", cl.intra_link, cl.fabric
    counts = {len(p) for p in per_node}
    if len(counts) != 1:
        raise ConfigurationError(
            f"the DP group {members.tolist()[:8]}... holds {sorted(counts)} members on different nodes; the "
            f"hierarchical all-reduce needs the same number on each: use algorithm='ring'"
        )
    l = counts.pop()
    if default_order:
        aligned = bool(training.equal_local_ranks_array(dp, tp, cl.gpus_per_node))
    else:
        aligned = all(np.array_equal(p, per_node[0]) for p in per_node)
    k = len(per_node)
    bw = cl.fabric_bandwidth_per_gpu(same_local_rank=aligned, flows_per_node=max(flows, 1))
    intra_s, inter_s = collectives.hierarchical_parts(
        "all-reduce", size, l, k, intra.bandwidth, intra.latency, bw, inter.latency
    )
    require_finite("dp_all_reduce's time", intra_s, inter_s, intra_s + inter_s)
    return DPAllReduce(
        algorithm,
        size,
        tuple(members.tolist()),
        l,
        k,
        aligned,
        flows if k > 1 else 0,
        bw if k > 1 else 0.0,
        float(intra_s),
        float(inter_s),
        float(intra_s + inter_s),
    )


def _flat_ring(cl, size: float, members, per_node: list, flows: int):
    """dp_all_reduce's 'ring' strawman: one ring through the members in rank order, as slow as its slowest hop."""
    algorithm, intra, inter, g = "ring", cl.intra_link, cl.fabric, cl.gpus_per_node
    node, local, n = members // g, members % g, members.size
    nxt = np.roll(members, -1)
    crossing = (nxt // g) != node
    if n == 1 or not crossing.any():
        t = collectives.ring_all_reduce_time(size, n, intra.bandwidth, intra.latency)
        require_finite("dp_all_reduce's time", t)
        return DPAllReduce(algorithm, size, tuple(members.tolist()), n, 1, True, 0, 0.0, float(t), 0.0, float(t))
    aligned = bool(np.all((nxt % g)[crossing] == local[crossing]))
    bw = cl.fabric_bandwidth_per_gpu(same_local_rank=aligned, flows_per_node=flows)
    t = collectives.flat_ring_strawman_time("all-reduce", size, n, bw, inter.latency)
    require_finite("dp_all_reduce's time", t)
    l = max(len(p) for p in per_node)
    return DPAllReduce(
        algorithm, size, tuple(members.tolist()), l, len(per_node), aligned, flows, bw, 0.0, float(t), float(t)
    )


def network_step(
    model, node="dgx-h100", nodes=4, fabric="ib-ndr", *, oversubscription=1.0, rail_optimized=False, **config
) -> training.StepEstimate:
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
    estimate_config(config)
    cl = hardware.cluster(node, nodes, fabric, oversubscription, rail_optimized)
    return training.estimate(model, cl, **config)
