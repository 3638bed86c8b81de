"""A collective on a placed group: the time NCCL's algorithm takes for ranks as they sit on nodes.

One home for every multi-node collective the kit prices (the step model's DP/ZeRO/FSDP traffic, lesson 8's
network, lesson 10's all-to-all, lesson 11's FSDP and HSDP, lesson 2's multi-node all-reduce). A group of n
ranks spaced `stride` apart in the rank order (distlab.mesh: the DP group of tp-cp-ep-dp-pp has stride tp) on
nodes of g GPUs holds l = g / stride members per node (1 when stride >= g) on n / l nodes. The algorithm:

    ring           the group fits in one node (n x stride <= g): a ring on the node's link (NVLink)
    hierarchical   every node it touches holds the same l > 1 members: a ring reduce-scatter over the l
                   members of a node, a ring all-reduce of M / l over the n / l nodes in which member j of a
                   node talks to member j of the others, a ring all-gather. Each member sends its M / l over
                   its own NIC share, so the node's NICs work together: l x M / l = M crosses the fabric per
                   node and step phase. (NCCL's own multi-node ring runs one channel per NIC; its maintainers
                   measure about 192 GB/s all-reduce bus bandwidth on DGX A100 with 8 x 200 Gb/s NICs,
                   NVIDIA/nccl issue 812.)
    fabric ring    one member per node (stride >= g): the hierarchical algorithm with l = 1, a ring on the fabric
    uneven ring    the members split unevenly over nodes (e.g. 12 of them on nodes of 8): no whole number of
                   nodes to run the inter-node ring over; one ring through the members in rank order, every
                   step as slow as its slowest (fabric) hop: 2(n-1)(alpha_x + M / (n B_x))

A reduce-scatter or all-gather is half an all-reduce in each algorithm: its reduce-scatter (or all-gather)
phases alone (ring halves: (n-1) alpha + (n-1)/n M / B; M the whole buffer, the nccl-tests convention). The
all-to-all of an EP group with p members per node: the intra-node and inter-node exchanges run at once,
max((p-1) alpha + intra / B, (n-p) alpha_x + inter / B_x) (pairwise exchange, Thakur et al. 2005).

The naive flat ring through every GPU at the fabric's per-GPU rate (`flat_ring_strawman_time`) is kept only as
the strawman lessons 8 and 11 show NCCL does not run. Array functions take plain numbers in bytes, B/s and s
(NumPy broadcast, unvalidated beyond our error for a bad value); `placed_collective` validates and says which
algorithm ran. Lesson 2 §6, Lesson 8 §2, Lesson 11 §2.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from .._arguments import broadcasting, finite_result, number_array
from ..errors import ConfigurationError
from ..units import BYTES, format_bytes, format_seconds, non_negative, positive_int
from .algorithms import ring_all_reduce_time
from .cost import _normalise_op

__all__ = [
    "PLACED_OPS",
    "PLACEMENTS",
    "PlacedCollective",
    "placement_array",
    "equal_local_ranks_array",
    "placed_time_array",
    "placed_all_to_all_time_array",
    "ring_latency_array",
    "NCCL_NET_OVERHEAD_S",
    "NCCL_SIMPLE_NET_POSTS",
    "ring_step_floor",
    "hierarchical_parts",
    "flat_ring_strawman_time",
    "placed_collective",
]

#: The collectives priced on a placed group.
PLACED_OPS = ("all-reduce", "reduce-scatter", "all-gather", "all-to-all")
#: The algorithm codes of placement_array: what NCCL runs for the group.
PLACEMENTS = ("none", "ring", "hierarchical", "fabric ring", "uneven ring")

_HALF = {"all-reduce": 1.0, "reduce-scatter": 0.5, "all-gather": 0.5}


@broadcasting
def placement_array(n, stride, gpus_per_node):
    """(members per node l, nodes n / l, algorithm code into PLACEMENTS) of groups of n ranks `stride` apart.

    l = g / stride (stride dividing g), 1 when stride >= g, at most n. Code: 0 one member; 1 inside one node
    (n x stride <= g); 2 hierarchical (span n x stride a multiple of g, l > 1); 3 one member per node
    (stride >= g); 4 uneven (e.g. 3 nodes of 8, stride 1, n = 12: 8 members on node 0, 4 on node 1).

    >>> [a.tolist() for a in placement_array([1, 8, 32, 4, 12], [1, 1, 1, 8, 1], 8)]
    [[1.0, 8.0, 8.0, 1.0, 8.0], [1.0, 1.0, 4.0, 4.0, 1.5], [0, 1, 2, 3, 4]]
    """
    n = number_array(n, "n", low=1.0)
    stride = number_array(stride, "stride", low=1.0)
    g = float(positive_int(gpus_per_node, "gpus_per_node"))
    local = np.minimum(np.where(stride >= g, 1.0, np.clip(np.floor(g / stride), 1.0, None)), n)
    span = n * stride
    inside = span <= g
    even = (stride >= g) | (np.fmod(span, g) == 0)  # np.fmod: np.mod's value for operands >= 0, a third the cost
    code = np.select([n <= 1, inside, even & (local > 1), even], [0, 1, 2, 3], 4)
    return local, n / local, code


@broadcasting
def equal_local_ranks_array(n, stride, gpus_per_node):
    """Whether the inter-node traffic of every group of n ranks `stride` apart joins GPUs of EQUAL local rank in
    the hierarchical all-reduce (member j of a node talks to member j of the others), so that on a
    rail-optimized fabric it stays on one rail.

    The groups of one dimension of the rank order tp-cp-ep-dp-pp (DP: stride tp, n = dp) start at j + s x n x
    stride (j < stride). Every node then holds the same local ranks of every group when the stride is a
    multiple of the node size g (one member per node, all at local rank j), or the span n x stride is a multiple
    of g (each node holds g / stride members at local ranks j, j + stride, ...), or the span divides g (every
    group inside one node: no inter-node traffic). Otherwise some group straddles node boundaries at different
    local ranks (3 nodes of 8, tp = 1, dp = 12: the first group holds all of node 0 and local ranks 0-3 of
    node 1), so its traffic crosses the spine even on a rail-optimized fabric. NumPy broadcast. Lesson 8 §2.

    >>> equal_local_ranks_array([12, 16], 1, 8).tolist()  # dp 12 straddles nodes of 8; dp 16 fills two
    [False, True]
    """
    n = number_array(n, "n", low=1.0)
    stride = number_array(stride, "stride", low=1.0)
    g = float(positive_int(gpus_per_node, "gpus_per_node"))
    span = finite_result("group span", n * stride)
    return (np.fmod(stride, g) == 0) | (np.fmod(span, g) == 0) | (np.fmod(g, span) == 0)  # np.mod's, as above


@broadcasting
def _all_reduce_time(size, n, stride, gpus_per_node, intra_bw, intra_lat, inter_bw, inter_lat):
    """All-reduce time of the placed group (module doc), each algorithm computed only when some group runs it and
    the right one picked per group (the rules of placement_array, inlined: the planner's hot path, where nearly
    every group is hierarchical)."""
    n = number_array(n, "n", low=1.0)
    stride = number_array(stride, "stride", low=1.0)
    g = float(positive_int(gpus_per_node, "gpus_per_node"))
    local = np.minimum(np.where(stride >= g, 1.0, np.clip(np.floor(g / stride), 1.0, None)), n)
    span = n * stride
    within = span <= g
    even = (stride >= g) | (np.fmod(span, g) == 0)  # np.mod's value for these operands >= 0 (placement_array)
    for value, name in (
        (size, "size"),
        (intra_bw, "bandwidth"),
        (intra_lat, "latency"),
        (inter_bw, "bandwidth"),
        (inter_lat, "latency"),
    ):  # refused as ring_all_reduce_time refuses them, whichever runs
        number_array(value, name)
    shape = np.broadcast_shapes(
        np.shape(size), span.shape, *(np.shape(x) for x in (intra_bw, intra_lat, inter_bw, inter_lat))
    )
    inside = hierarchical = uneven = np.zeros(shape)  # an algorithm no group runs: never selected below
    if within.any():
        inside = ring_all_reduce_time(size, n, intra_bw, intra_lat)
    if (even & ~within).any():
        hierarchical = ring_all_reduce_time(size, local, intra_bw, intra_lat) + ring_all_reduce_time(
            np.asarray(size, dtype=float) / local, n / local, inter_bw, inter_lat
        )
    if not (even | within).all():
        uneven = ring_all_reduce_time(size, n, inter_bw, inter_lat)
    return np.where(within, inside, np.where(even, hierarchical, uneven))


#: Seconds the host spends posting one network operation of NCCL's proxy, by the host CPU's vendor: NCCL's tuning
#: model, src/graph/tuning.cc getNetOverhead ("Network post overhead in ns"; x86 Intel 1.0 us, x86 AMD 2.0 us,
#: else 1.0 us), NVIDIA/nccl v2.18.1-1 (d97a32fa, 2023-04-03), unchanged through v2.30.7-1. NCCL's tuning constants
#: are fitted on NVIDIA's own systems ("All tuning is done on real systems, to correct for the difference between the
#: model and reality", S. Jeaugey, NVIDIA/nccl issue 535, 2021-07-20): hardware measurements, not training runs.
NCCL_NET_OVERHEAD_S = {"intel": 1.0e-6, "amd": 2.0e-6, "other": 1.0e-6}

#: Network posts per ring step of NCCL's Simple protocol (the one its large all-gathers and reduce-scatters run),
#: the same source: "if (p == NCCL_PROTO_SIMPLE) netOverhead *= 3".
NCCL_SIMPLE_NET_POSTS = 3


def ring_step_floor(host_cpu: str) -> float:
    """The least (s) a step inside a node of a Simple-protocol ring over several nodes costs on hosts of `host_cpu`
    (hardware.HOST_CPUS): NCCL_SIMPLE_NET_POSTS x NCCL_NET_OVERHEAD_S, NCCL's tuning model since v2.18 (the
    step_floor of ring_latency_array). Lesson 7 §8.

    >>> round(ring_step_floor('amd') * 1e6, 1), round(ring_step_floor('intel') * 1e6, 1)  # 3 x 2.0 us, 3 x 1.0 us
    (6.0, 3.0)
    """
    if not isinstance(host_cpu, str) or host_cpu not in NCCL_NET_OVERHEAD_S:
        raise ConfigurationError(f"host_cpu={host_cpu!r}; valid: {', '.join(NCCL_NET_OVERHEAD_S)}")
    return NCCL_SIMPLE_NET_POSTS * NCCL_NET_OVERHEAD_S[host_cpu]


@broadcasting
def ring_latency_array(n, stride, gpus_per_node, intra_lat, inter_lat, step_floor=0.0):
    """Latency (s) of one all-gather or reduce-scatter over n ranks `stride` apart when the message is too small for
    its bytes to matter: NCCL runs these on a ring through every rank (its only algorithm for them before PAT,
    NCCL 2.23, 2024), so a block passes n - 1 hops, nodes - 1 of them between nodes (alpha_x) and the rest inside a
    node (alpha): (n - nodes) alpha + (nodes - 1) alpha_x, nodes = n / l (placement_array). This is NCCL's own
    ring latency model (src/graph/tuning.cc: intra-node steps at the NVLink latency, nNodes - 1 network steps).
    The hierarchical time of placed_time_array counts only the l - 1 steps inside a node, the right count for a
    large message whose node-local phase runs once. DeepSpeed ZeRO-3 as Narayanan et al. 2021 ran it (Table 2) gathered every parameter tensor on
    its own collective over all ranks, so each paid this (step.data_parallel). NumPy broadcast. Lesson 7 §3.

    `step_floor` (s): the least a step inside a node costs when the ring spans nodes. NCCL's tuning model since
    v2.18 ("Inter-node rings still have to launch nsteps * net overhead": intraLat = max(intraLat, netOverhead),
    netOverhead = NCCL_SIMPLE_NET_POSTS x NCCL_NET_OVERHEAD_S of the host's CPU for the Simple protocol): the ring
    moves in steps, and the rank whose neighbour is on the next node posts a network operation at every one of them,
    so no step is quicker than its host posts them. 0 (the default) leaves NCCL 2.8-2.17's model; one node: no floor.

    384 ranks on 48 nodes of 8, 3.4 us on NVLink and 9.6 us across: 336 x 3.4 + 47 x 9.6 = 1,593.6 us; on AMD hosts
    (floor 3 x 2.0 = 6.0 us): 336 x 6.0 + 47 x 9.6 = 2,467.2 us.

    >>> round(float(ring_latency_array(384, 1, 8, 3.4e-6, 9.6e-6)) * 1e6, 1)
    1593.6
    >>> round(float(ring_latency_array(384, 1, 8, 3.4e-6, 9.6e-6, step_floor=6.0e-6)) * 1e6, 1)
    2467.2
    """
    n = number_array(n, "n", low=1.0)
    stride = number_array(stride, "stride", low=1.0)
    g = float(positive_int(gpus_per_node, "gpus_per_node"))
    local = np.minimum(np.where(stride >= g, 1.0, np.clip(np.floor(g / stride), 1.0, None)), n)
    nodes = np.where(n * stride <= g, 1.0, np.ceil(n / local))
    intra_lat, inter_lat = number_array(intra_lat, "intra_lat"), number_array(inter_lat, "inter_lat")
    floor = number_array(step_floor, "step_floor")
    intra_step = np.where(nodes > 1.0, np.maximum(intra_lat, floor), intra_lat)
    return finite_result("ring latency", (n - nodes) * intra_step + (nodes - 1.0) * inter_lat)


def placed_time_array(op, size, n, stride, gpus_per_node, intra_bw, intra_lat, inter_bw, inter_lat):
    """Seconds of an all-reduce, reduce-scatter or all-gather of `size` bytes (nccl-tests convention) over
    groups of n ranks `stride` apart on nodes of g GPUs, with the algorithm of placement_array (module doc).

    intra_bw / intra_lat: the node's link per direction; inter_bw: what each member's inter-node transfer gets
    (its NIC share, after any taper: hardware.Cluster.fabric_bandwidth_per_gpu); inter_lat the fabric's.
    NumPy broadcast. Lesson 2 §6.

    One node of 8 at 100 GB/s: 2 x 7 x 1.6 GB / (8 x 100 GB/s) = 28 ms; two nodes (hierarchical): the same 28 ms
    inside each node, plus a 2-node ring of 1.6 GB / 8 at 50 GB/s: 2 x 1 x 0.2 GB / (2 x 50 GB/s) = 4 ms; a
    reduce-scatter is half: 16 ms.

    >>> [round(float(x), 6) for x in placed_time_array('all-reduce', 1.6e9, [8, 16], 1, 8, 100e9, 0, 50e9, 0)]
    [0.028, 0.032]
    >>> round(float(placed_time_array('reduce-scatter', 1.6e9, 16, 1, 8, 100e9, 0, 50e9, 0)), 6)
    0.016
    """
    op = _normalise_op(op)
    if op not in _HALF:
        raise ConfigurationError(
            f"op={op!r}: placed_time_array prices all-reduce, reduce-scatter and all-gather "
            f"(all-to-all: placed_all_to_all_time_array)"
        )
    time = _all_reduce_time(size, n, stride, gpus_per_node, intra_bw, intra_lat, inter_bw, inter_lat)
    return finite_result(f"{op} time", _HALF[op] * time)


@broadcasting
def placed_all_to_all_time_array(intra_bytes, inter_bytes, n, local, intra_bw, intra_lat, inter_bw, inter_lat):
    """Seconds of one all-to-all over n ranks with `local` of them per node, when a GPU sends intra_bytes to the
    members of its node and inter_bytes to the others: both exchanges at once (pairwise, Thakur et al. 2005),
    max((p-1) alpha + intra / B, (n-p) alpha_x + inter / B_x), p = local. NumPy broadcast. Lesson 10 §5.

    ep 16 on two nodes of 8: 58.7 MB inside at 450 GB/s (130.5 us) and 67.1 MB across at 50 GB/s (1.34 ms).

    >>> round(float(placed_all_to_all_time_array(58.7e6, 67.1e6, 16, 8, 450e9, 0, 50e9, 0)) * 1e3, 3)
    1.342
    """
    n, p = number_array(n, "n", low=1.0), number_array(local, "local", low=1.0)
    intra_bytes, inter_bytes = number_array(intra_bytes, "intra_bytes"), number_array(inter_bytes, "inter_bytes")
    intra_lat, inter_lat = number_array(intra_lat, "intra_lat"), number_array(inter_lat, "inter_lat")
    intra_bw = number_array(intra_bw, "intra_bw", 1e-300)
    inter_bw = number_array(inter_bw, "inter_bw", 1e-300)
    t_intra = np.where(p > 1, (p - 1.0) * intra_lat + intra_bytes / intra_bw, 0.0)
    t_inter = np.where(n > p, (n - p) * inter_lat + inter_bytes / inter_bw, 0.0)
    return finite_result("all-to-all time", np.maximum(t_intra, t_inter))


def hierarchical_parts(op, size, local, nodes, intra_bw, intra_lat, inter_bw, inter_lat) -> tuple[float, float]:
    """(seconds on the node's link, seconds on the fabric) of the hierarchical algorithm over `nodes` nodes holding
    `local` members each: a ring all-reduce over the l members of a node (its reduce-scatter and all-gather halves)
    and a ring all-reduce of M / l over the nodes; a reduce-scatter or all-gather runs half of each. Plain numbers,
    unvalidated; placed_collective and production.dp_all_reduce call it. Lesson 2 §6.

    >>> [round(t * 1e3, 3) for t in hierarchical_parts('all-reduce', 1e9, 8, 2, 450e9, 3.4e-6, 50e9, 9.6e-6)]
    [3.936, 2.519]
    """
    half = _HALF[_normalise_op(op)]
    intra = half * float(ring_all_reduce_time(size, local, intra_bw, intra_lat))
    inter = half * float(ring_all_reduce_time(size / local, nodes, inter_bw, inter_lat)) if nodes > 1 else 0.0
    return intra, inter


def flat_ring_strawman_time(op, size, n, bandwidth, latency):
    """The strawman NCCL does not run on several nodes: one flat ring through all n GPUs, every hop at the
    fabric's per-GPU share (every GPU's ring traffic through its own NIC, none of it on NVLink). Ring formulas
    of distlab.collectives.cost (all-reduce 2(n-1)(alpha + M / (n B)); reduce-scatter, all-gather half).
    Kept so lessons 8 and 11 can show what the placed algorithm saves. Lesson 11 §2.

    >>> round(flat_ring_strawman_time('all-gather', 400e6, 32, 50e9, 0.0) * 1e3, 2)  # 31/32 x 400 MB / 50 GB/s
    7.75
    """
    op = _normalise_op(op)
    if op not in _HALF:
        raise ConfigurationError(f"op={op!r}: the flat-ring strawman prices all-reduce, reduce-scatter, all-gather")
    return float(finite_result("flat ring time", _HALF[op] * ring_all_reduce_time(size, n, bandwidth, latency)))


@dataclass(frozen=True)
class PlacedCollective:
    """One collective on a placed group: plain floats in bytes and seconds. Lesson 2 §6.

    algorithm: one of PLACEMENTS; local, nodes: members per node and nodes spanned; intra_s / inter_s: the time
    on the node's link and on the fabric (the uneven ring's are not separable: all of it is inter_s);
    intra_sent_bytes / inter_sent_bytes: what one GPU sends over each.
    """

    op: str
    algorithm: str
    size_bytes: float
    gpus: int
    local: int
    nodes: float
    intra_s: float
    inter_s: float
    intra_sent_bytes: float
    inter_sent_bytes: float

    @property
    def time_s(self) -> float:
        return self.intra_s + self.inter_s

    def to_dict(self) -> dict:
        """Plain numbers and strings (JSON-ready): the fields and the time."""
        return dict(dataclasses.asdict(self), time_s=self.time_s)

    def __str__(self) -> str:
        return (
            f"{self.algorithm} {self.op} of {format_bytes(self.size_bytes)} over {self.gpus} GPUs "
            f"({self.local} per node): {format_seconds(self.time_s)},\n    per GPU "
            f"{format_bytes(self.intra_sent_bytes)} on the node's link, {format_bytes(self.inter_sent_bytes)} "
            f"on the fabric"
        )


def placed_collective(op, size, n, cluster, *, stride=1, nodes=None, achieved=False) -> PlacedCollective:
    """An all-reduce, reduce-scatter or all-gather of `size` over a group of n ranks `stride` apart in the rank
    order (distlab.mesh) on `cluster` (a hardware.Cluster, or a node name with nodes=; default: the nodes the
    group needs): which algorithm, how long, what each GPU sends on which link (placement_array,
    placed_time_array). The inter-node transfers get Cluster.fabric_bandwidth_per_gpu, same_local_rank as
    equal_local_ranks_array decides (every GPU of a node sending at once: the full taper for cross-rail
    traffic). achieved=True: every link at its measured share of line rate (efficiency.achieved_link_share, the
    calibrated step model's links). "Node" here is the NVLink domain (hardware.Cluster.nvlink_domain). Lesson 2 §6.

    Llama 2 7B's layer (404.8 MB in bf16) gathered over 32 GPUs on 4 DGX H100 nodes: 7 x (3.4 us + 404.8 MB /
    (8 x 450 GB/s)) = 811 us on NVLink, then its 1/8 across the nodes: 3 x (9.6 us + 50.6 MB / (4 x 50 GB/s)) =
    788 us; not 31/32 of the layer through each GPU's own NIC (flat_ring_strawman_time: 8.14 ms).

    >>> c = placed_collective('all-gather', 404.8e6, 32, 'dgx-h100')
    >>> c.algorithm, c.local, c.nodes, round(c.intra_s * 1e3, 3), round(c.inter_s * 1e3, 3)
    ('hierarchical', 8, 4.0, 0.811, 0.788)
    """
    from .._arguments import as_cluster

    op = _normalise_op(op)
    if op not in _HALF:
        raise ConfigurationError(f"op={op!r}; valid: {', '.join(o for o in PLACED_OPS if o in _HALF)}")
    m = non_negative(size, BYTES, "size")
    n, stride = positive_int(n, "n"), positive_int(stride, "stride")
    cl = as_cluster(cluster, nodes)
    if nodes is None and not hasattr(cluster, "nodes"):
        cl = as_cluster(cluster, max(1, -(-n * stride // cl.gpus_per_node)))
    g = cl.nvlink_domain  # the GPUs the intra link joins (a node, or a share of an NVL72 rack)
    if n * stride > cl.gpus:
        raise ConfigurationError(
            f"n x stride = {n} x {stride} = {n * stride} ranks is more than the cluster's {cl.gpus} GPUs"
        )
    intra_share, fabric_share = 1.0, 1.0
    if achieved:
        from ..efficiency import achieved_link_share

        intra_share, fabric_share = achieved_link_share(cl.intra_link), achieved_link_share(cl.fabric)
    intra_bw, intra_lat = intra_share * cl.intra_link.bandwidth, cl.intra_link.latency
    aligned = bool(equal_local_ranks_array(n, stride, g))
    inter_bw = fabric_share * cl.fabric_bandwidth_per_gpu(same_local_rank=aligned)
    inter_lat = cl.fabric.latency
    local_f, nodes_f, code_f = (float(x) for x in placement_array(n, stride, g))
    local, code, half = int(local_f), int(code_f), _HALF[op]
    if code <= 1:
        intra_s = float(half * ring_all_reduce_time(m, n, intra_bw, intra_lat))
        inter_s, intra_sent, inter_sent = 0.0, half * 2.0 * (n - 1) / n * m, 0.0
    elif code == 4:
        intra_s, inter_s = 0.0, float(half * ring_all_reduce_time(m, n, inter_bw, inter_lat))
        intra_sent, inter_sent = 0.0, half * 2.0 * (n - 1) / n * m
    else:
        intra_s, inter_s = hierarchical_parts(op, m, local, nodes_f, intra_bw, intra_lat, inter_bw, inter_lat)
        intra_sent = half * 2.0 * (local - 1) / local * m
        inter_sent = half * 2.0 * (nodes_f - 1) / nodes_f * m / local
    finite_result(f"{op} time", intra_s + inter_s)
    return PlacedCollective(
        op, PLACEMENTS[code], m, n, local, nodes_f, intra_s, inter_s, float(intra_sent), float(inter_sent)
    )
