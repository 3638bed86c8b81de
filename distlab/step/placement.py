"""Where a step's traffic runs, from the rank layout (rank order tp-cp-ep-dp-pp, distlab.mesh): the all-reduce of
a placed group of ranks, whether a group's inter-node traffic joins equal local ranks, how many pipeline stage
boundaries leave a node, and the bytes of one pipeline send. NumPy broadcast; the step model's terms call them.
Lesson 7 §3-§4 (and Lesson 8 §2).
"""

from __future__ import annotations

import numpy as np

from .._arguments import broadcasting, finite_result, number_array
from ..errors import ConfigurationError
from ..units import positive_int
from .config import MAX_STAGES

__all__ = [
    "group_all_reduce_time_array",
    "p2p_message_bytes",
    "equal_local_ranks_array",
    "pipeline_crossings_array",
]


@broadcasting
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
    assumption. Arrays, unvalidated. Lesson 7 §3 (and Lesson 8 §2).

    One node of 8 at 100 GB/s: 2 x 7 x 1.6 GB / (8 x 100 GB/s) = 28 ms; two nodes (hierarchical): the same
    28 ms inside each node, plus a 2-node ring of 1.6 GB / 8 at 50 GB/s: 2 x 1 x 0.2 GB / (2 x 50 GB/s) = 4 ms.

    >>> t = group_all_reduce_time_array(1.6e9, [8, 16], 1, 8, 100e9, 0.0, 50e9, 0.0)
    >>> [round(float(x), 6) for x in t]
    [0.028, 0.032]
    """
    from ..collectives import ring_all_reduce_time

    n = number_array(n, "n", low=1.0)
    stride = number_array(stride, "stride", low=1.0)
    g = float(positive_int(gpus_per_node, "gpus_per_node"))
    local = np.where(stride >= g, 1.0, np.clip(np.floor(g / stride), 1.0, None))
    local = np.minimum(local, n)
    span = n * stride
    inside = span <= g
    even = (stride >= g) | (np.mod(span, g) == 0)
    flat = ring_all_reduce_time(size_bytes, n, intra_bw, intra_lat)
    hierarchical = ring_all_reduce_time(size_bytes, local, intra_bw, intra_lat) + ring_all_reduce_time(
        np.asarray(size_bytes, dtype=float) / local, n / local, inter_bw, inter_lat
    )
    fabric_ring = ring_all_reduce_time(size_bytes, n, inter_bw, inter_lat)
    return finite_result("all-reduce time", np.where(inside, flat, np.where(even, hierarchical, fabric_ring)))


@broadcasting
def p2p_message_bytes(micro_batch_size, seq_len, hidden, tp, element_bytes):
    """Bytes of one pipeline send per microbatch: b x s x h x e / tp (Megatron's scatter-gather
    optimisation splits the activation over the tp GPUs of a stage, Narayanan et al. 2021 Sec. 4.1;
    e = PrecisionRecipe.message_bytes; b x s x h x e is distlab.memory.message_bytes, the message
    pipeline.boundary_message_bytes prices). NumPy broadcast, unvalidated. Lesson 7 §4.

    >>> float(p2p_message_bytes(1, 4096, 8192, 4, 2))  # 4096 x 8192 x 2 B / 4 = 16 MiB
    16777216.0
    """
    from ..memory import message_bytes

    return finite_result(
        "p2p message bytes",
        message_bytes(micro_batch_size, seq_len, hidden, element_bytes) / number_array(tp, "tp", low=1.0),
    )


@broadcasting
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
    Lesson 8 §2.

    >>> equal_local_ranks_array([12, 16], 1, 8).tolist()  # dp 12 straddles nodes of 8; dp 16 fills two
    [False, True]
    """
    n = number_array(n, "n", low=1.0)
    stride = number_array(stride, "stride", low=1.0)
    g = float(positive_int(gpus_per_node, "gpus_per_node"))
    span = finite_result("group span", n * stride)
    return (np.mod(stride, g) == 0) | (np.mod(span, g) == 0) | (np.mod(g, span) == 0)


@broadcasting
def pipeline_crossings_array(pp, stride, gpus_per_node):
    """How many of the pp - 1 stage boundaries of a pipeline whose neighbours sit `stride` ranks apart
    (stride tp x dp in the order tp-cp-ep-dp-pp) send across a node boundary.

    Boundary b joins stage b - 1 (ranks [(b-1) W, b W)) to stage b (W = stride): some rank r of it
    sends to r + W on another node unless both stages lie inside one node, i.e. unless
    floor((b-1) W / g) = floor(((b+1) W - 1) / g). W >= g: every boundary crosses. Example: tp 2 x
    dp 2 on nodes of 8: stages 0-1 share node 0, 2-3 node 1, ...: of 7 boundaries, 3 cross and 4
    stay on NVLink. NumPy broadcast, unvalidated. Lesson 7 §4.

    >>> pipeline_crossings_array(8, 4, 8)  # boundaries 2, 4 and 6 leave a node
    3.0
    """
    pp = number_array(pp, "pp", low=1.0)
    w = number_array(stride, "stride", low=1.0)
    g = float(positive_int(gpus_per_node, "gpus_per_node"))
    top = int(np.max(pp)) if pp.size else 1
    if top > MAX_STAGES:
        raise ConfigurationError(f"pp={top:,} stages is more than {MAX_STAGES:,}")
    if top <= 1:
        return np.zeros(np.broadcast(pp, w).shape) if np.ndim(pp) or np.ndim(w) else 0.0
    shape = np.broadcast(pp, w).shape
    if 0 in shape:
        return np.zeros(shape)
    # the planner's columns repeat a few (pp, stride) pairs many times: count each distinct pair once
    flat_pp, flat_w = np.broadcast_to(pp, shape).ravel(), np.broadcast_to(w, shape).ravel()
    span = float(np.max(flat_w)) + 1.0
    keys, first, inverse = np.unique(flat_pp * span + flat_w, return_index=True, return_inverse=True)
    upp, uw = flat_pp[first], flat_w[first]
    b = np.arange(1, top, dtype=float)[:, None]
    cross = (uw >= g) | (np.floor((b - 1) * uw / g) != np.floor(((b + 1) * uw - 1) / g))
    count = np.sum(cross & (b < upp), axis=0).astype(float)[np.ravel(inverse)].reshape(shape)
    return float(count) if np.ndim(count) == 0 else count
