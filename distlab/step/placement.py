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


def group_all_reduce_time_array(size_bytes, n, stride, gpus_per_node, intra_bw, intra_lat, inter_bw, inter_lat):
    """All-reduce time of the rank groups of n members spaced `stride` apart (the DP group: stride tp) on nodes of
    g GPUs: distlab.collectives.placed_time_array('all-reduce', ...), the one home of a collective on a placed
    group (a ring inside a node, hierarchical across nodes, a fabric ring for an uneven split). Arrays,
    unvalidated. Lesson 7 §3 (and Lesson 8 §2).

    >>> t = group_all_reduce_time_array(1.6e9, [8, 16], 1, 8, 100e9, 0.0, 50e9, 0.0)
    >>> [round(float(x), 6) for x in t]
    [0.028, 0.032]
    """
    from ..collectives.placed import placed_time_array

    return placed_time_array(
        "all-reduce", size_bytes, n, stride, gpus_per_node, intra_bw, intra_lat, inter_bw, inter_lat
    )


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


def equal_local_ranks_array(n, stride, gpus_per_node):
    """Whether the inter-node traffic of every group of n ranks spaced `stride` apart joins GPUs of EQUAL local
    rank: distlab.collectives.placed.equal_local_ranks_array (the placed collective's rule). Lesson 8 §2.

    >>> equal_local_ranks_array([12, 16], 1, 8).tolist()  # dp 12 straddles nodes of 8; dp 16 fills two
    [False, True]
    """
    from ..collectives.placed import equal_local_ranks_array as placed_rule

    return placed_rule(n, stride, gpus_per_node)


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
