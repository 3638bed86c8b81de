"""One alpha-beta formula per (collective, algorithm), and the CollectiveCost they return.

Cost model (Hockney's alpha-beta): one message of m bytes over a link costs alpha + m / B, alpha the
per-message latency (s), B the bandwidth per direction (B/s); sizes follow the nccl-tests conventions
(see distlab.collectives.cost, which validates the arguments and picks the formula from FORMULAS).

Sources: Thakur, Rabenseifner & Gropp 2005 (IJHPCA 19(1)) for the classic ring, binomial-tree and
pairwise costs; Patarasuk & Yuan 2009 (JPDC 69(2)) for the ring all-reduce; Sanders, Speck & Traeff 2009
(Parallel Computing 35(12)) for the double binary tree NCCL uses for all-reduce. Lesson 2 §1-§7.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .._words import counted
from .._arguments import broadcasting, finite_result, number_array, renamed_keyword, warn_renamed
from ..mesh import MAX_WORLD_SIZE
from ..units import BYTES, Q_, SECONDS, format_bytes, format_seconds, positive_int

__all__ = ["CollectivePhase", "CollectiveCost", "ring_all_reduce_time", "double_binary_tree", "FORMULAS"]


# ----------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class CollectivePhase:
    """One sequential phase of a collective (e.g. the inter-node all-reduce of hierarchical). Lesson 2 §6."""

    name: str
    link: str  # "link" (the only one), "intra" or "inter"
    gpus: int
    size_bytes: float
    bytes_sent_per_gpu: float
    time_s: float
    steps: int

    def to_dict(self) -> dict:
        """Plain numbers and strings (JSON-ready): the fields."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class CollectiveCost:
    """Alpha-beta cost of one collective: plain floats in bytes and seconds. Lesson 2 §1.

    gpus is the GPU count (the `gpus` argument of collective_cost; `n`, its old name, still works and
    warns). bytes_sent_per_gpu / bytes_received_per_gpu are those of
    the busiest GPU (every GPU alike for ring all-reduce, reduce-scatter, all-gather, all-to-all
    and hierarchical; the root or the server for rooted ops and the parameter server).
    time_s = latency_time_s (steps x alpha) + bandwidth_time_s.
    """

    op: str
    algorithm: str
    gpus: int
    size_bytes: float
    bytes_sent_per_gpu: float
    bytes_received_per_gpu: float
    time_s: float
    latency_time_s: float
    bandwidth_time_s: float
    steps: int
    phases: tuple = ()

    @property
    def n(self) -> int:
        """Deprecated: the GPU count is `gpus`."""
        warn_renamed("CollectiveCost.n", "CollectiveCost.gpus")
        return self.gpus

    @property
    def size(self):
        return Q_(self.size_bytes, BYTES)

    @property
    def bytes_sent(self):
        return Q_(self.bytes_sent_per_gpu, BYTES)

    @property
    def bytes_received(self):
        return Q_(self.bytes_received_per_gpu, BYTES)

    @property
    def time(self):
        return Q_(self.time_s, SECONDS)

    def to_dict(self) -> dict:
        """Plain numbers and strings (JSON-ready): the fields, with the phases as a list of dicts."""
        return dict(dataclasses.asdict(self), phases=[phase.to_dict() for phase in self.phases])

    def __str__(self) -> str:
        return (
            f"{self.algorithm} {self.op} of {format_bytes(self.size_bytes)} over {self.gpus} GPUs: "
            f"{format_bytes(self.bytes_sent_per_gpu)} sent per GPU (busiest), "
            f"{counted(self.steps, 'step')},\n"
            # the time on an indented line of its own, so that a printed line fits a notebook's output
            f"    {format_seconds(self.time_s)} = {format_seconds(self.latency_time_s)} latency + "
            f"{format_seconds(self.bandwidth_time_s)} bandwidth"
        )


# ----------------------------------------------------------------------------------------
# Closed forms


@renamed_keyword(size_bytes="size", n="gpus")
@broadcasting
def ring_all_reduce_time(size, gpus, bandwidth, latency=0.0):
    """Ring all-reduce time in s: 2(N-1) alpha + 2(N-1)/N x M / B (plain floats or NumPy arrays). Lesson 2 §3.

    The hot-path form of the formula (Patarasuk & Yuan 2009; Thakur et al. 2005): a
    reduce-scatter and an all-gather of N-1 steps each, every step moving M/N bytes.
    size M in bytes, gpus N, bandwidth B in B/s, latency alpha in s: base units, not
    validated; collective_cost validates.

    >>> ring_all_reduce_time(4e9, 8, 50e9)  # 2 x 7/8 x 4 GB at 50 GB/s
    0.14
    """
    n = number_array(gpus, "gpus", low=1.0)
    result = finite_result(
        "all-reduce time",
        2.0 * (n - 1.0) * number_array(latency, "latency")
        + 2.0 * (n - 1.0) / n * number_array(size, "size") / number_array(bandwidth, "bandwidth"),
    )
    return float(result) if np.ndim(result) == 0 else result


def _ceil_log2(n: int) -> int:
    return (n - 1).bit_length()


@renamed_keyword(n="gpus")
def double_binary_tree(gpus):
    """Parents of the two binary trees of a double binary tree over ranks 0..N-1 (-1: root). Lesson 2 §7.

    Tree 1 is the in-order binary tree on positions p = rank + 1 (Sanders, Speck & Traeff
    2009): the node at p = 2^h x odd has height h, its children are p - 2^(h-1) and
    p + 2^j for the largest j < h that stays <= N; leaves are the even ranks and the depth
    is floor(log2 N). Tree 2 is the same tree shifted by one rank (position p is rank
    p mod N), so a rank that is a leaf in one tree is interior in the other, as in NCCL.
    Returns two int arrays of length N.

    >>> [tree.tolist() for tree in double_binary_tree(4)]
    [[1, 3, 1, -1], [-1, 2, 0, 2]]
    """
    n = positive_int(gpus, "gpus", high=MAX_WORLD_SIZE)
    trees = []
    for rank_of_position in (np.arange(1, n + 1) - 1, np.arange(1, n + 1) % n):
        parent_pos = np.full(n + 1, -1, dtype=np.int64)  # indexed by position 1..n
        p = np.arange(1, n + 1, dtype=np.int64)
        low = p & -p  # 2^h
        interior = low > 1
        left = p - low // 2
        parent_pos[left[interior]] = p[interior]
        has_right = interior & (p < n)
        room = np.where(has_right, n - p, 1)
        j = np.minimum(np.frexp(room.astype(float))[1] - 1, np.log2(low).astype(np.int64) - 1)
        right = p + (1 << np.maximum(j, 0))
        parent_pos[right[has_right]] = p[has_right]
        parent = np.full(n, -1, dtype=np.int64)
        has_parent = parent_pos[1:] > 0
        parent[rank_of_position[has_parent]] = rank_of_position[parent_pos[1:][has_parent] - 1]
        trees.append(parent)
    return trees[0], trees[1]


@functools.lru_cache(maxsize=256)
def _double_tree_load(n: int) -> tuple[float, int]:
    """(busiest rank's messages in units of M/2, tree depth) of a double binary tree all-reduce.

    Counted on the trees for n <= 2^16. Beyond, the count is 4: rank r >= 1 sits at position
    r+1 in tree 1 and r in tree 2, so it is interior (two children and a parent: 3) in one
    tree and a leaf (a parent: 1) in the other; rank 1 reaches 4 for every n >= 4.
    """
    depth = n.bit_length() - 1
    if n > 2**16:
        return 4.0, depth
    load = np.zeros(n, dtype=np.int64)
    for parent in double_binary_tree(n):
        children = np.bincount(parent[parent >= 0], minlength=n)
        load += children + (parent >= 0)  # down to each child, and up to the parent
    return float(load.max()), depth


def _binomial_largest_subtree(n: int) -> int:
    """Size of the largest subtree hanging off the root of a binomial tree on n ranks."""
    return max(min(2 ** (j + 1), n) - 2**j for j in range(_ceil_log2(n)))


# One function per (op, algorithm): f(op, n, m, bw, alpha) -> CollectiveCost for n >= 2 GPUs,
# m bytes, bandwidth bw (B/s per direction) and latency alpha (s). Sent / received: busiest GPU.


def _result(op, algorithm, n, m, alpha, steps, sent, received, bandwidth_time, phases=()) -> CollectiveCost:
    """A CollectiveCost whose time is steps x alpha + bandwidth_time."""
    latency_time = steps * alpha
    return CollectiveCost(
        op,
        algorithm,
        n,
        m,
        float(sent),
        float(received),
        float(latency_time + bandwidth_time),
        float(latency_time),
        float(bandwidth_time),
        int(steps),
        tuple(phases),
    )


def _ring_all_reduce(op, n, m, bw, alpha) -> CollectiveCost:
    """Ring all-reduce: reduce-scatter then all-gather, N-1 steps each of M/N bytes per GPU.

    2(N-1) alpha + 2(N-1)/N x M/B; every GPU sends 2(N-1)/N x M (Patarasuk & Yuan 2009).
    """
    half_bytes = (n - 1) / n * m
    half_time = (n - 1) * alpha + half_bytes / bw
    phases = (
        CollectivePhase("reduce-scatter", "link", n, m, half_bytes, half_time, n - 1),
        CollectivePhase("all-gather", "link", n, m, half_bytes, half_time, n - 1),
    )
    time = ring_all_reduce_time(m, n, bw, alpha)
    latency = 2 * (n - 1) * alpha
    return CollectiveCost(
        op, "ring", n, m, 2 * half_bytes, 2 * half_bytes, time, latency, time - latency, 2 * (n - 1), phases
    )


def _tree_all_reduce(op, n, m, bw, alpha) -> CollectiveCost:
    """Double binary tree all-reduce, each tree reducing then broadcasting M/2 in small chunks (as NCCL).

    2 floor(log2 N) alpha (up and down the depth) + busiest / B, busiest = 2 M for N >= 4 (M for
    N = 2): the busiest rank's messages (Sanders, Speck & Traeff 2009).
    """
    units, depth = _double_tree_load(n)
    busiest = units * m / 2
    return _result(op, "tree", n, m, alpha, 2 * depth, busiest, busiest, busiest / bw)


def _parameter_server_all_reduce(op, n, m, bw, alpha) -> CollectiveCost:
    """Parameter server, one of the N GPUs: 2(N-1)(alpha + M/B).

    Push: N-1 workers send M each, one after another on the server's link; pull: the server
    sends M back to each. The server sends and receives (N-1) M, a worker M each way.
    """
    serial = (n - 1) * (alpha + m / bw)
    phases = (
        CollectivePhase("push (workers -> server)", "link", n, m, m, serial, n - 1),
        CollectivePhase("pull (server -> workers)", "link", n, m, (n - 1) * m, serial, n - 1),
    )
    return _result(
        op, "parameter-server", n, m, alpha, 2 * (n - 1), (n - 1) * m, (n - 1) * m, 2 * (n - 1) * m / bw, phases
    )


def _ring_reduce_scatter_or_all_gather(op, n, m, bw, alpha) -> CollectiveCost:
    """Ring reduce-scatter or all-gather: (N-1) alpha + (N-1)/N x M/B, one piece of M/N per step.

    Thakur et al. 2005; M is the whole buffer (nccl-tests convention).
    """
    sent = (n - 1) / n * m
    return _result(op, "ring", n, m, alpha, n - 1, sent, sent, sent / bw)


def _ring_broadcast_or_reduce(op, n, m, bw, alpha) -> CollectiveCost:
    """Pipelined chain (NCCL's ring broadcast / reduce): (N-1) alpha + M/B (the nccl-tests "t = S/B").

    Chunks small enough that filling the pipeline costs only the N-1 hop latencies: every link
    carries M once.
    """
    return _result(op, "ring", n, m, alpha, n - 1, m, m, m / bw)


def _tree_broadcast_or_reduce(op, n, m, bw, alpha) -> CollectiveCost:
    """Binomial tree, not pipelined: ceil(log2 N) x (alpha + M/B) (Thakur et al. 2005).

    The root sends (broadcast) or receives (reduce) M in each of the ceil(log2 N) rounds.
    """
    rounds = _ceil_log2(n)
    root = rounds * m
    sent, received = (root, m) if op == "broadcast" else (m, root)
    return _result(op, "tree", n, m, alpha, rounds, sent, received, rounds * m / bw)


def _ring_scatter_or_gather(op, n, m, bw, alpha) -> CollectiveCost:
    """Chain scatter / gather: (N-1) alpha + (N-1)/N x M/B.

    N-1 steps; each step every busy link carries one piece of M/N; the root's neighbour relays
    all N-1 pieces.
    """
    root = (n - 1) / n * m
    return _result(op, "ring", n, m, alpha, n - 1, root, root, root / bw)


def _tree_scatter_or_gather(op, n, m, bw, alpha) -> CollectiveCost:
    """Binomial tree scatter / gather: ceil(log2 N) alpha + (N-1)/N x M/B (Thakur et al. 2005).

    The root sends (scatter) or receives (gather) N-1 pieces of M/N; the other busiest GPU
    handles its largest subtree's pieces.
    """
    root = (n - 1) / n * m
    other = _binomial_largest_subtree(n) * m / n
    sent, received = (root, other) if op == "scatter" else (other, root)
    return _result(op, "tree", n, m, alpha, _ceil_log2(n), sent, received, root / bw)


def _pairwise_all_to_all(op, n, m, bw, alpha) -> CollectiveCost:
    """Pairwise exchange: (N-1) alpha + (N-1)/N x M/B (Thakur et al. 2005).

    In step k GPU i sends its piece for (i+k) mod N and receives from (i-k) mod N; N-1 steps of M/N.
    """
    sent = (n - 1) / n * m
    return _result(op, "pairwise", n, m, alpha, n - 1, sent, sent, sent / bw)


def _direct_send_recv(op, n, m, bw, alpha) -> CollectiveCost:
    """Every GPU sends M to its ring neighbour at once (the nccl-tests sendrecv pattern): alpha + M/B."""
    return _result(op, "direct", n, m, alpha, 1, m, m, m / bw)


def _hierarchical_all_reduce(op, n, m, bw, alpha, *, inter, gpus_per_node) -> CollectiveCost:
    """Intra-node ring reduce-scatter, inter-node ring all-reduce of M/g, intra-node all-gather.

    g = gpus_per_node GPUs share the intra-node link (bw, alpha); each of them runs its own
    inter-node ring over its own NIC (`inter` = (bandwidth, latency); one NIC per GPU, as in
    rail-optimised clusters such as DGX H100), all g rings at once:
    2 [(g-1) alpha_i + (g-1)/g M/B_i] + ring_all_reduce_time(M/g, N/g, B_x, alpha_x).
    """
    g = gpus_per_node
    nodes = n // g
    rs_bytes = (g - 1) / g * m
    rs_time = (g - 1) * alpha + rs_bytes / bw
    shard = m / g
    if nodes > 1:
        bw_x, alpha_x = inter
        ar_time = ring_all_reduce_time(shard, nodes, bw_x, alpha_x)
        ar_latency = 2 * (nodes - 1) * alpha_x
    else:
        ar_time = ar_latency = 0.0
    ar_bytes = 2 * (nodes - 1) / nodes * shard
    phases = (
        CollectivePhase("intra-node reduce-scatter", "intra", g, m, rs_bytes, rs_time, g - 1),
        CollectivePhase("inter-node all-reduce", "inter", nodes, shard, ar_bytes, ar_time, 2 * (nodes - 1)),
        CollectivePhase("intra-node all-gather", "intra", g, m, rs_bytes, rs_time, g - 1),
    )
    latency = 2 * (g - 1) * alpha + ar_latency
    time = 2 * rs_time + ar_time
    sent = 2 * rs_bytes + ar_bytes
    steps = 2 * (g - 1) + 2 * (nodes - 1)
    return CollectiveCost(op, "hierarchical", n, m, sent, sent, time, latency, time - latency, steps, phases)


#: The formula of each (op, algorithm): f(op, n, m, bandwidth, latency) -> CollectiveCost for n >= 2
#: (hierarchical also takes inter= and gpus_per_node=). collective_cost validates, then calls one.
FORMULAS: dict[tuple[str, str], Callable[..., CollectiveCost]] = {
    ("all-reduce", "ring"): _ring_all_reduce,
    ("all-reduce", "tree"): _tree_all_reduce,
    ("all-reduce", "hierarchical"): _hierarchical_all_reduce,
    ("all-reduce", "parameter-server"): _parameter_server_all_reduce,
    ("reduce-scatter", "ring"): _ring_reduce_scatter_or_all_gather,
    ("all-gather", "ring"): _ring_reduce_scatter_or_all_gather,
    ("broadcast", "ring"): _ring_broadcast_or_reduce,
    ("reduce", "ring"): _ring_broadcast_or_reduce,
    ("broadcast", "tree"): _tree_broadcast_or_reduce,
    ("reduce", "tree"): _tree_broadcast_or_reduce,
    ("scatter", "ring"): _ring_scatter_or_gather,
    ("gather", "ring"): _ring_scatter_or_gather,
    ("scatter", "tree"): _tree_scatter_or_gather,
    ("gather", "tree"): _tree_scatter_or_gather,
    ("all-to-all", "pairwise"): _pairwise_all_to_all,
    ("send-recv", "direct"): _direct_send_recv,
}
