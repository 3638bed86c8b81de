"""Collective communication: alpha-beta cost models and a step-by-step ring simulation.

Cost model (Hockney's alpha-beta): one message of m bytes over a link costs
alpha + m / B, with alpha the per-message latency (s) and B the bandwidth PER DIRECTION
(B/s). Every GPU has one such link out and one in, usable at the same time (full duplex).
N is the number of GPUs and M the message size in bytes, with the nccl-tests size
conventions (NVIDIA nccl-tests, doc/PERFORMANCE.md):

    all-reduce, broadcast, reduce, send-recv   M = the buffer on each GPU (or at the root)
    reduce-scatter                             M = the whole INPUT buffer of a GPU (N x its output)
    all-gather                                 M = the whole OUTPUT buffer of a GPU (N x its input)
    scatter, gather                            M = the whole buffer at the root (N pieces of M/N)
    all-to-all                                 M = a GPU's whole send buffer (M/N to each GPU)

Sources: Thakur, Rabenseifner & Gropp 2005, "Optimization of Collective Communication
Operations in MPICH" (IJHPCA 19(1)) for the classic ring, binomial-tree and pairwise
costs; Patarasuk & Yuan 2009, "Bandwidth optimal all-reduce algorithms for clusters of
workstations" (JPDC 69(2)) for the ring all-reduce and its 2(N-1)/N x M lower bound;
Sanders, Speck & Traeff 2009, "Two-tree algorithms for full bandwidth broadcast, reduction
and scan" (Parallel Computing 35(12)) for the double binary tree NCCL uses for all-reduce.

The simulation (`simulate_ring_all_reduce` and friends) moves real NumPy data between
simulated GPUs and records every send, so pictures and tests are computed, not drawn.
With N = 1 nothing moves: zero bytes, zero steps, zero time.
"""

from __future__ import annotations

import functools
import numbers
from dataclasses import dataclass

import numpy as np

from ._arguments import divisors, link_parameters, readonly
from .errors import ConfigurationError, UnknownNameError
from .units import (
    BYTES,
    BYTES_PER_SECOND,
    Q_,
    SECONDS,
    format_bytes,
    format_seconds,
    non_negative,
    positive,
    positive_int,
)

__all__ = [
    "OPS",
    "ALGORITHMS",
    "CollectiveCost",
    "CollectivePhase",
    "CollectiveTrace",
    "collective_cost",
    "ring_all_reduce_time",
    "algorithm_bandwidth",
    "bus_bandwidth",
    "bus_factor",
    "latency_bandwidth_crossover",
    "double_binary_tree",
    "simulate_ring_all_reduce",
    "simulate_reduce_scatter",
    "simulate_all_gather",
    "simulate_parameter_server",
    "MAX_TRACE_ENTRIES",
]

#: The collective operations, canonical names.
OPS = (
    "all-reduce",
    "reduce-scatter",
    "all-gather",
    "broadcast",
    "reduce",
    "scatter",
    "gather",
    "all-to-all",
    "send-recv",
)

#: Algorithms each op supports; the first is the default.
ALGORITHMS = {
    "all-reduce": ("ring", "tree", "hierarchical", "parameter-server"),
    "reduce-scatter": ("ring",),
    "all-gather": ("ring",),
    "broadcast": ("ring", "tree"),
    "reduce": ("ring", "tree"),
    "scatter": ("ring", "tree"),
    "gather": ("ring", "tree"),
    "all-to-all": ("pairwise",),
    "send-recv": ("direct",),
}

_OP_ALIASES = {name.replace("-", ""): name for name in OPS}
_OP_ALIASES.update({"alltoall": "all-to-all", "a2a": "all-to-all", "p2p": "send-recv", "sendreceive": "send-recv"})
_ALGORITHM_ALIASES = {"ps": "parameter-server", "parameterserver": "parameter-server"}


def _normalise_op(op) -> str:
    if not isinstance(op, str):
        raise UnknownNameError(f"op={op!r} must be a name; valid: {', '.join(OPS)}")
    key = "".join(ch for ch in op.strip().lower() if ch not in "-_ /")
    if key in _OP_ALIASES:
        return _OP_ALIASES[key]
    raise UnknownNameError(f"unknown collective op {op!r}; valid: {', '.join(OPS)}")


def _normalise_algorithm(op: str, algorithm) -> str:
    valid = ALGORITHMS[op]
    if algorithm is None:
        return valid[0]
    if not isinstance(algorithm, str):
        raise UnknownNameError(f"algorithm={algorithm!r} must be a name; valid for {op}: {', '.join(valid)}")
    key = algorithm.strip().lower().replace("_", "-").replace(" ", "-")
    key = _ALGORITHM_ALIASES.get(key.replace("-", ""), key)
    if key not in valid:
        raise UnknownNameError(f"algorithm={algorithm!r} is not available for {op}; valid: {', '.join(valid)}")
    return key


# ----------------------------------------------------------------------------------------
# Links


# ----------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class CollectivePhase:
    """One sequential phase of a collective (e.g. the inter-node all-reduce of hierarchical)."""

    name: str
    link: str  # "link" (the only one), "intra" or "inter"
    gpus: int
    size_bytes: float
    bytes_sent_per_gpu: float
    time_s: float
    steps: int

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "link": self.link,
            "gpus": self.gpus,
            "size_bytes": self.size_bytes,
            "bytes_sent_per_gpu": self.bytes_sent_per_gpu,
            "time_s": self.time_s,
            "steps": self.steps,
        }


@dataclass(frozen=True)
class CollectiveCost:
    """Alpha-beta cost of one collective: plain floats in bytes and seconds.

    bytes_sent_per_gpu / bytes_received_per_gpu are those of the busiest GPU (every GPU
    alike for ring all-reduce, reduce-scatter, all-gather, all-to-all and hierarchical; the
    root or the server for rooted ops and the parameter server). time_s = latency_time_s
    (steps x alpha) + bandwidth_time_s.
    """

    op: str
    algorithm: str
    n: int
    size_bytes: float
    bytes_sent_per_gpu: float
    bytes_received_per_gpu: float
    time_s: float
    latency_time_s: float
    bandwidth_time_s: float
    steps: int
    phases: tuple = ()

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
        """Plain numbers and strings (JSON-ready)."""
        return {
            "op": self.op,
            "algorithm": self.algorithm,
            "n": self.n,
            "size_bytes": self.size_bytes,
            "bytes_sent_per_gpu": self.bytes_sent_per_gpu,
            "bytes_received_per_gpu": self.bytes_received_per_gpu,
            "time_s": self.time_s,
            "latency_time_s": self.latency_time_s,
            "bandwidth_time_s": self.bandwidth_time_s,
            "steps": self.steps,
            "phases": [phase.to_dict() for phase in self.phases],
        }

    def __str__(self) -> str:
        return (
            f"{self.algorithm} {self.op} of {format_bytes(self.size_bytes)} over {self.n} GPUs: "
            f"{format_bytes(self.bytes_sent_per_gpu)} sent per GPU (busiest), "
            f"{self.steps} step{'' if self.steps == 1 else 's'}, "
            f"{format_seconds(self.time_s)} = {format_seconds(self.latency_time_s)} latency + "
            f"{format_seconds(self.bandwidth_time_s)} bandwidth"
        )


# ----------------------------------------------------------------------------------------
# Closed forms


def ring_all_reduce_time(size_bytes, n, bandwidth, latency=0.0):
    """Ring all-reduce time in s: 2(N-1) alpha + 2(N-1)/N x M / B (plain floats or NumPy arrays).

    The hot-path form of the formula (Patarasuk & Yuan 2009; Thakur et al. 2005): a
    reduce-scatter and an all-gather of N-1 steps each, every step moving M/N bytes.
    Inputs are in base units and are not validated; collective_cost validates.
    """
    n = np.asarray(n, dtype=float)
    result = 2.0 * (n - 1.0) * latency + 2.0 * (n - 1.0) / n * np.asarray(size_bytes, dtype=float) / bandwidth
    return float(result) if np.ndim(result) == 0 else result


def _ceil_log2(n: int) -> int:
    return (n - 1).bit_length()


def double_binary_tree(n):
    """Parents of the two binary trees of a double binary tree over ranks 0..N-1 (-1: root).

    Tree 1 is the in-order binary tree on positions p = rank + 1 (Sanders, Speck & Traeff
    2009): the node at p = 2^h x odd has height h, its children are p - 2^(h-1) and
    p + 2^j for the largest j < h that stays <= N; leaves are the even ranks and the depth
    is floor(log2 N). Tree 2 is the same tree shifted by one rank (position p is rank
    p mod N), so a rank that is a leaf in one tree is interior in the other, as in NCCL.
    Returns two int arrays of length N.
    """
    n = positive_int(n, "gpus")
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


def _cost(op, algorithm, n, m, bw, alpha, *, inter=None, gpus_per_node=None) -> CollectiveCost:
    """Dispatch to the formula for (op, algorithm). Returns a CollectiveCost."""
    if n == 1:
        return CollectiveCost(op, algorithm, 1, m, 0.0, 0.0, 0.0, 0.0, 0.0, 0, ())

    def make(steps, sent, received, bandwidth_time, phases=()):
        latency_time = steps * alpha
        return CollectiveCost(
            op, algorithm, n, m, float(sent), float(received), float(latency_time + bandwidth_time),
            float(latency_time), float(bandwidth_time), int(steps), tuple(phases),
        )

    if algorithm == "hierarchical":
        return _hierarchical(n, m, gpus_per_node, (bw, alpha), inter)

    if op == "all-reduce":
        if algorithm == "ring":
            # Reduce-scatter then all-gather, N-1 steps each of M/N bytes per GPU.
            half_bytes = (n - 1) / n * m
            half_time = (n - 1) * alpha + half_bytes / bw
            phases = (
                CollectivePhase("reduce-scatter", "link", n, m, half_bytes, half_time, n - 1),
                CollectivePhase("all-gather", "link", n, m, half_bytes, half_time, n - 1),
            )
            time = ring_all_reduce_time(m, n, bw, alpha)
            return CollectiveCost(
                op, algorithm, n, m, 2 * half_bytes, 2 * half_bytes, time, 2 * (n - 1) * alpha,
                time - 2 * (n - 1) * alpha, 2 * (n - 1), phases,
            )
        if algorithm == "tree":
            # Double binary tree, each tree reducing then broadcasting M/2, pipelined in small
            # chunks: latency = up and down the depth; bandwidth = the busiest rank's bytes.
            units, depth = _double_tree_load(n)
            busiest = units * m / 2
            return make(2 * depth, busiest, busiest, busiest / bw)
        if algorithm == "parameter-server":
            # Server = one of the N GPUs. Push: N-1 workers send M each, one after another on
            # the server's link; pull: the server sends M back to each. 2(N-1) steps of alpha + M/B.
            serial = (n - 1) * (alpha + m / bw)
            phases = (
                CollectivePhase("push (workers -> server)", "link", n, m, m, serial, n - 1),
                CollectivePhase("pull (server -> workers)", "link", n, m, (n - 1) * m, serial, n - 1),
            )
            return make(2 * (n - 1), (n - 1) * m, (n - 1) * m, 2 * (n - 1) * m / bw, phases)

    if op in ("reduce-scatter", "all-gather"):
        # Ring: N-1 steps, each GPU sends one piece of M/N per step.
        sent = (n - 1) / n * m
        return make(n - 1, sent, sent, sent / bw)

    if op in ("broadcast", "reduce"):
        if algorithm == "ring":
            # Pipelined chain (NCCL's ring broadcast/reduce), chunks small enough that filling
            # the pipeline costs only the N-1 hop latencies: every link carries M once.
            return make(n - 1, m, m, m / bw)
        # Binomial tree, not pipelined (Thakur et al. 2005): ceil(log2 N) x (alpha + M/B).
        rounds = _ceil_log2(n)
        root = rounds * m
        sent, received = (root, m) if op == "broadcast" else (m, root)
        return make(rounds, sent, received, rounds * m / bw)

    if op in ("scatter", "gather"):
        root = (n - 1) / n * m
        if algorithm == "ring":
            # Chain: N-1 steps; each step every busy link carries one piece of M/N; the
            # root's neighbour relays all N-1 pieces.
            return make(n - 1, root, root, root / bw)
        # Binomial tree (Thakur et al. 2005): ceil(log2 N) alpha + (N-1)/N x M / B.
        other = _binomial_largest_subtree(n) * m / n
        sent, received = (root, other) if op == "scatter" else (other, root)
        return make(_ceil_log2(n), sent, received, root / bw)

    if op == "all-to-all":
        # Pairwise exchange (Thakur et al. 2005): in step k GPU i sends its piece for
        # (i+k) mod N and receives from (i-k) mod N; N-1 steps of M/N.
        sent = (n - 1) / n * m
        return make(n - 1, sent, sent, sent / bw)

    if op == "send-recv":
        # Every GPU sends M to its ring neighbour at once (the nccl-tests sendrecv pattern).
        return make(1, m, m, m / bw)

    raise AssertionError(f"no formula for {algorithm} {op}")  # pragma: no cover


def _hierarchical(n, m, gpus_per_node, intra, inter) -> CollectiveCost:
    """Intra-node ring reduce-scatter, inter-node ring all-reduce of M/g, intra-node all-gather.

    Each of the g GPUs of a node runs its own inter-node ring over its own NIC (one NIC per
    GPU, as in rail-optimised clusters such as DGX H100), all g rings at once.
    """
    g = gpus_per_node
    nodes = n // g
    bw_i, alpha_i = intra
    rs_bytes = (g - 1) / g * m
    rs_time = (g - 1) * alpha_i + rs_bytes / bw_i
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
    latency = 2 * (g - 1) * alpha_i + ar_latency
    time = 2 * rs_time + ar_time
    sent = 2 * rs_bytes + ar_bytes
    steps = 2 * (g - 1) + 2 * (nodes - 1)
    return CollectiveCost("all-reduce", "hierarchical", n, m, sent, sent, time, latency, time - latency, steps, phases)


def collective_cost(
    op,
    size,
    gpus,
    *,
    algorithm=None,
    link=None,
    bandwidth=None,
    latency=None,
    gpus_per_node=None,
    inter_link=None,
    inter_bandwidth=None,
    inter_latency=None,
) -> CollectiveCost:
    """Alpha-beta cost of a collective of `size` (nccl-tests convention, see module doc) over `gpus`.

    op: one of OPS; algorithm: one of ALGORITHMS[op] (None: the first). Per GPU, busiest:

    - ring all-reduce: 2(N-1) alpha + 2(N-1)/N M/B, 2(N-1)/N M bytes (Patarasuk & Yuan 2009)
    - ring reduce-scatter / all-gather, pairwise all-to-all: (N-1) alpha + (N-1)/N M/B
    - ring (pipelined chain) broadcast / reduce: (N-1) alpha + M/B (the nccl-tests "t = S/B")
    - ring (chain) scatter / gather: (N-1) alpha + (N-1)/N M/B
    - tree broadcast / reduce (binomial): ceil(log2 N)(alpha + M/B) (Thakur et al. 2005)
    - tree scatter / gather (binomial): ceil(log2 N) alpha + (N-1)/N M/B (Thakur et al. 2005)
    - tree all-reduce (double binary tree, pipelined, as NCCL): 2 floor(log2 N) alpha +
      busiest/B, busiest = 2M for N >= 4 (M for N = 2) (Sanders, Speck & Traeff 2009)
    - hierarchical all-reduce (gpus_per_node = g, intra link, inter_link between nodes):
      ring reduce-scatter over g + ring all-reduce of M/g over N/g nodes + ring all-gather
    - parameter-server all-reduce (server is one of the N GPUs): 2(N-1)(alpha + M/B); the
      server sends and receives (N-1) M, a worker M each way
    - send-recv: alpha + M/B

    The link: `link` (a name such as 'nvlink4', or any object with .bandwidth in B/s per
    direction and .latency in s) and/or `bandwidth=` / `latency=` (quantities, strings like
    '450 GB/s' and '5 us', or numbers in B/s and s), which override the link's. Latency
    defaults to 0 when only a bandwidth is given. gpus_per_node and inter_* are used by
    the hierarchical algorithm only.
    """
    op = _normalise_op(op)
    algorithm = _normalise_algorithm(op, algorithm)
    m = non_negative(size, BYTES, "size")
    n = positive_int(gpus, "gpus")
    intra = link_parameters(link, bandwidth, latency)
    g = None
    inter = None
    if algorithm == "hierarchical":
        if gpus_per_node is None:
            raise ConfigurationError(
                "the hierarchical algorithm needs gpus_per_node= (GPUs per node sharing the intra-node link)"
            )
        g = positive_int(gpus_per_node, "gpus_per_node")
        if n % g:
            valid = divisors(n)
            shown = ", ".join(str(d) for d in valid[:24]) + (", ..." if len(valid) > 24 else "")
            raise ConfigurationError(f"gpus_per_node={g} does not divide gpus={n}; valid: {shown}")
        if n // g > 1:
            inter = link_parameters(inter_link, inter_bandwidth, inter_latency, prefix="inter_")
    return _cost(op, algorithm, n, m, intra[0], intra[1], inter=inter, gpus_per_node=g)


def latency_bandwidth_crossover(op, gpus, *, algorithm=None, link=None, bandwidth=None, latency=None,
                                **kwargs) -> float:
    """The message size (bytes) at which a collective's latency term equals its bandwidth term.

    Every cost model here is alpha-beta, linear in the size M: time = steps x alpha + k M / B.
    Below M* = steps x alpha x B / k a collective is latency-bound, above it bandwidth-bound;
    for the ring all-reduce M* = 2(N-1) alpha / (2(N-1)/(N B)) = N alpha B. Read off
    collective_cost (so it follows whatever formula collective_cost uses).
    Other keyword arguments (gpus_per_node, inter_link, ...) go to collective_cost. Raises
    ConfigurationError when there is no crossover (one GPU, or zero latency).
    """
    # A huge size makes the bandwidth term dominate, so reading it back (some formulas give it as
    # total - latency) loses no precision; the latency term does not depend on the size.
    probe = 1e18
    cost = collective_cost(op, probe, gpus, algorithm=algorithm, link=link, bandwidth=bandwidth, latency=latency,
                           **kwargs)
    if cost.bandwidth_time_s <= 0 or cost.latency_time_s <= 0:
        raise ConfigurationError(
            f"{cost.algorithm} {cost.op} over gpus={cost.n} with latency {format_seconds(cost.latency_time_s)}: "
            f"no latency/bandwidth crossover (it needs at least 2 GPUs and a latency > 0)"
        )
    return cost.latency_time_s / (cost.bandwidth_time_s / probe)


# ----------------------------------------------------------------------------------------
# nccl-tests bandwidth conventions

_BUS_FACTORS = {
    "all-reduce": lambda n: 2.0 * (n - 1) / n,
    "reduce-scatter": lambda n: (n - 1) / n,
    "all-gather": lambda n: (n - 1) / n,
    "all-to-all": lambda n: (n - 1) / n,
    "scatter": lambda n: (n - 1) / n,
    "gather": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "send-recv": lambda n: 1.0,
}


def bus_factor(op, n) -> float:
    """nccl-tests bus-bandwidth factor: all-reduce 2(n-1)/n; reduce-scatter, all-gather,
    all-to-all, scatter, gather (n-1)/n; broadcast, reduce, send-recv 1.

    Source: NVIDIA nccl-tests, doc/PERFORMANCE.md (scatter/gather: src/scatter.cu, gather.cu).
    """
    return float(_BUS_FACTORS[_normalise_op(op)](positive_int(n, "n")))


def algorithm_bandwidth(size, time):
    """nccl-tests algorithm bandwidth algbw = S / t, in GB/s (10^9 B/s).

    S follows nccl-tests: for all-gather and reduce-scatter it is the TOTAL buffer
    (N x the per-rank count), for all-reduce the buffer on each rank.
    """
    s = non_negative(size, BYTES, "size")
    t = positive(time, SECONDS, "time")
    return Q_(s / t, BYTES_PER_SECOND).to("GB/s")


def bus_bandwidth(op, size, time, n):
    """nccl-tests bus bandwidth busbw = algbw x bus_factor(op, n), in GB/s.

    Comparable with the per-direction link bandwidth whatever n is: for an ideal ring
    all-reduce, t = 2(n-1)/n x S/B, so busbw = B. Source: nccl-tests doc/PERFORMANCE.md.
    """
    factor = bus_factor(op, n)
    return algorithm_bandwidth(size, time) * factor


# ----------------------------------------------------------------------------------------
# Simulation

#: Largest steps x GPUs a trace records (memory guard: about 8 M entries per array).
MAX_TRACE_ENTRIES = 2**23


def _index_dtype(n: int):
    return np.int16 if n < 2**15 - 1 else np.int32


class CollectiveTrace:
    """The record of a simulated collective: data, every send, and whose data each chunk sums.

    Steps are numbered 0..steps-1. A *state* t in 0..steps is the situation before step t
    (t = 0: the start, t = steps: the end). Arrays with one row per step and one column
    per GPU use -1 for "nothing":

    - send_to[k, g], send_chunk[k, g]: where GPU g sends in step k, and which chunk
    - recv_from[k, g], recv_chunk[k, g]: from whom GPU g receives in step k, and which chunk
    - bytes_sent[k, g]: bytes GPU g sends in step k

    Contributors (the GPUs whose input a held chunk already sums) are stored compactly: in
    these algorithms they always form an arc of the ring of GPUs, {start, start+1, ...,
    start+length-1} mod N, and each step changes only the chunks received, so the trace
    keeps the initial arcs and, per step, the new arc of each received chunk. contributors(),
    contributor_arcs(), contributor_counts() and holds_matrix() expand a state on demand.
    """

    def __init__(self, *, op, algorithm, initial, chunk_bounds, start0, length0, send_to, send_chunk,
                 reduce_steps, phases, n_contributors, outputs_fn, server=None):
        self.op = op
        self.algorithm = algorithm
        self.n = int(initial.shape[0])
        self.n_contributors = int(n_contributors)
        self.server = server
        self.chunk_bounds = readonly(np.asarray(chunk_bounds, dtype=np.int64))
        self.n_chunks = len(self.chunk_bounds) - 1
        self.itemsize = int(initial.dtype.itemsize)
        self.chunk_nbytes = readonly(np.diff(self.chunk_bounds) * self.itemsize)
        self.size_bytes = float(initial.shape[1] * self.itemsize)
        self.steps = int(send_to.shape[0])
        self.phases = tuple(phases)  # (name, first step, number of steps)
        self.initial = readonly(initial.copy())
        self._start0 = start0
        self._length0 = length0
        self.reduce_steps = readonly(np.asarray(reduce_steps, dtype=bool))
        self.send_to = readonly(send_to)
        self.send_chunk = readonly(send_chunk)
        self.recv_from, self.recv_chunk, self._messages = _invert_sends(send_to, send_chunk, self.n)
        self._outputs_fn = outputs_fn
        self._run()

    # -- the simulation proper ---------------------------------------------------------
    def _run(self):
        dtype = _index_dtype(self.n_contributors)
        steps, gpus = self.recv_from.shape
        self.update_start = np.full((steps, gpus), -1, dtype=dtype)
        self.update_length = np.full((steps, gpus), -1, dtype=dtype)
        buffers = self.initial.copy()
        start = self._start0.astype(np.int64)
        length = self._length0.astype(np.int64)
        for k in range(steps):
            self._move_data(buffers, k)
            rows, chunks, new_start, new_length = self._merge_arcs(start, length, k)
            start[rows, chunks] = new_start
            length[rows, chunks] = new_length
            self.update_start[k, rows] = new_start
            self.update_length[k, rows] = new_length
        readonly(self.update_start)
        readonly(self.update_length)
        self.final = readonly(buffers)
        self._cache_arcs = (steps, start, length)
        self._cache_buffers = (steps, buffers)

    def _step_messages(self, k):
        """(senders, receivers, chunks) of step k as int64 arrays."""
        pointers, senders, receivers, chunks = self._messages
        part = slice(pointers[k], pointers[k + 1])
        return senders[part].astype(np.int64), receivers[part].astype(np.int64), chunks[part].astype(np.int64)

    def _move_data(self, buffers, k):
        """Every sender's chunk lands on its receiver at once (reads happen before writes)."""
        senders, receivers, chunks = self._step_messages(k)
        if senders.size == 0:
            return
        lo = self.chunk_bounds[chunks]
        lengths = self.chunk_bounds[chunks + 1] - lo
        total = int(lengths.sum())
        if total == 0:
            return
        first = np.cumsum(lengths) - lengths
        elements = np.repeat(lo - first, lengths) + np.arange(total)
        src = np.repeat(senders, lengths)
        dst = np.repeat(receivers, lengths)
        values = buffers[src, elements]
        if self.reduce_steps[k]:
            buffers[dst, elements] += values  # (dst, element) pairs are unique: one receive per GPU
        else:
            buffers[dst, elements] = values

    def _merge_arcs(self, start, length, k):
        """New contributor arcs of the chunks received in step k (union on reduce, copy otherwise)."""
        n = self.n_contributors
        src, rows, chunks = self._step_messages(k)
        a_s, l_s = start[src, chunks], length[src, chunks]
        if not self.reduce_steps[k]:
            return rows, chunks, a_s, l_s
        a_r, l_r = start[rows, chunks], length[rows, chunks]
        total = l_s + l_r
        receiver_follows = (a_s + l_s) % n == a_r
        sender_follows = (a_r + l_r) % n == a_s
        ok = (total <= n) & ((l_s == 0) | (l_r == 0) | receiver_follows | sender_follows)
        if not ok.all():  # a schedule bug: data summed twice or arcs that do not touch
            bad = int(np.nonzero(~ok)[0][0])
            raise RuntimeError(
                f"step {k}: GPU {rows[bad]} chunk {chunks[bad]} would sum {{{a_r[bad]}+{l_r[bad]}}} "
                f"with {{{a_s[bad]}+{l_s[bad]}}}: double counting or a non-ring schedule"
            )
        new_start = np.where(l_r == 0, a_s, np.where(l_s == 0, a_r, np.where(receiver_follows, a_s, a_r)))
        new_start = np.where((total == n) | (total == 0), 0, new_start)
        return rows, chunks, new_start, total

    # -- bytes and time ------------------------------------------------------------------
    @property
    def bytes_sent(self) -> np.ndarray:
        """(steps, GPUs) bytes each GPU sends in each step."""
        chunk = np.maximum(self.send_chunk, 0)
        return np.where(self.send_chunk >= 0, self.chunk_nbytes[chunk], 0)

    @property
    def bytes_sent_by_gpu(self) -> np.ndarray:
        """Total bytes each GPU sends over the whole collective."""
        return self.bytes_sent.sum(axis=0)

    @property
    def bytes_received_by_gpu(self) -> np.ndarray:
        chunk = np.maximum(self.recv_chunk, 0)
        return np.where(self.recv_chunk >= 0, self.chunk_nbytes[chunk], 0).sum(axis=0)

    @property
    def bytes_sent_per_gpu(self) -> float:
        """Bytes sent by the busiest GPU (all GPUs alike in the ring; the server in a parameter server)."""
        return float(self.bytes_sent_by_gpu.max()) if self.steps else 0.0

    def time_s(self, link=None, *, bandwidth=None, latency=None) -> float:
        """Alpha-beta time of the recorded schedule: sum over steps of alpha + largest message / B."""
        bw, alpha = link_parameters(link, bandwidth, latency)
        if self.steps == 0:
            return 0.0
        return float(self.steps * alpha + self.bytes_sent.max(axis=1).sum() / bw)

    def phase(self, step: int) -> str:
        """Name of the phase a step belongs to ('reduce-scatter', 'all-gather', 'push', 'pull')."""
        step = self._check_step(step)
        for name, first, count in self.phases:
            if first <= step < first + count:
                return name
        raise AssertionError("unreachable")  # pragma: no cover

    # -- states ------------------------------------------------------------------------
    def _check_state(self, t) -> int:
        if isinstance(t, bool) or not isinstance(t, numbers.Integral) or not 0 <= t <= self.steps:
            raise ConfigurationError(f"state t={t!r} is out of range; valid: 0 (start) to {self.steps} (end)")
        return int(t)

    def _check_step(self, k) -> int:
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not 0 <= k < self.steps:
            raise ConfigurationError(f"step={k!r} is out of range; valid: 0 to {self.steps - 1}")
        return int(k)

    def _check_gpu_chunk(self, gpu, chunk):
        if isinstance(gpu, bool) or not isinstance(gpu, numbers.Integral) or not 0 <= gpu < self.n:
            raise ConfigurationError(f"gpu={gpu!r} is out of range; valid: 0 to {self.n - 1}")
        if isinstance(chunk, bool) or not isinstance(chunk, numbers.Integral) or not 0 <= chunk < self.n_chunks:
            raise ConfigurationError(f"chunk={chunk!r} is out of range; valid: 0 to {self.n_chunks - 1}")

    def contributor_arcs(self, t) -> tuple[np.ndarray, np.ndarray]:
        """(start, length), each (GPUs, chunks), of the contributor arcs in state t."""
        t = self._check_state(t)
        cached_t, start, length = self._cache_arcs
        if t < cached_t:
            cached_t, start, length = 0, self._start0.astype(np.int64), self._length0.astype(np.int64)
        else:
            start, length = start.copy(), length.copy()
        for k in range(cached_t, t):
            _, rows, chunks = self._step_messages(k)
            start[rows, chunks] = self.update_start[k, rows]
            length[rows, chunks] = self.update_length[k, rows]
        self._cache_arcs = (t, start, length)
        return start.copy(), length.copy()

    def contributor_counts(self, t) -> np.ndarray:
        """(GPUs, chunks): how many GPUs' inputs each held chunk sums in state t."""
        return self.contributor_arcs(t)[1]

    def contributors(self, t, gpu, chunk) -> frozenset:
        """The GPUs whose input GPU `gpu`'s copy of `chunk` sums in state t."""
        self._check_gpu_chunk(gpu, chunk)
        start, length = self.contributor_arcs(t)
        a, count = int(start[gpu, chunk]), int(length[gpu, chunk])
        return frozenset((a + i) % self.n_contributors for i in range(count))

    def holds_matrix(self, t, chunk=None) -> np.ndarray:
        """Booleans [gpu, contributor] for one chunk, or [gpu, chunk, contributor] for all, in state t."""
        start, length = self.contributor_arcs(t)
        n = self.n_contributors
        if chunk is not None:
            self._check_gpu_chunk(0, chunk)
            start, length = start[:, chunk], length[:, chunk]
        elif start.size * n > 2**24:
            raise ConfigurationError(
                f"holds_matrix for all {self.n_chunks} chunks of {self.n} GPUs would hold "
                f"{start.size * n:,} booleans; pass chunk= or use contributor_counts()"
            )
        offset = (np.arange(n) - start[..., None]) % n
        return offset < length[..., None]

    def buffers(self, t) -> np.ndarray:
        """(GPUs, elements): every GPU's buffer in state t (recomputed by replaying the steps)."""
        t = self._check_state(t)
        cached_t, data = self._cache_buffers
        if t < cached_t:
            cached_t, data = 0, self.initial.copy()
        else:
            data = data.copy()
        for k in range(cached_t, t):
            self._move_data(data, k)
        self._cache_buffers = (t, data)
        return data.copy()

    @property
    def outputs(self) -> list:
        """Each GPU's result: the whole buffer, or for reduce-scatter the GPU's own reduced chunk."""
        return self._outputs_fn(self)

    def __repr__(self) -> str:
        return (
            f"CollectiveTrace({self.algorithm} {self.op}, {self.n} GPUs, {self.n_chunks} chunks, "
            f"{self.steps} steps, {format_bytes(self.bytes_sent_per_gpu)} sent by the busiest GPU)"
        )


def _invert_sends(send_to, send_chunk, gpus):
    """recv_from / recv_chunk and the flat message list (step, sender, receiver, chunk).

    Checks that no GPU sends to itself and none receives two chunks in one step.
    """
    ks, senders = np.nonzero(send_to >= 0)  # row-major: sorted by step
    receivers = send_to[ks, senders]
    chunks = send_chunk[ks, senders]
    if np.any(receivers == senders):
        raise RuntimeError("a GPU sends to itself")  # pragma: no cover - schedule bug
    recv_from = np.full(send_to.shape, -1, dtype=send_to.dtype)
    recv_chunk = np.full(send_to.shape, -1, dtype=send_to.dtype)
    recv_from[ks, receivers] = senders
    recv_chunk[ks, receivers] = chunks
    if np.count_nonzero(recv_from >= 0) != ks.size:
        raise RuntimeError("a GPU receives two chunks in one step")  # pragma: no cover - schedule bug
    pointers = np.searchsorted(ks, np.arange(send_to.shape[0] + 1))
    dtype = send_to.dtype
    messages = (pointers, senders.astype(dtype), receivers.astype(dtype), chunks.astype(dtype))
    return readonly(recv_from), readonly(recv_chunk), messages


def _as_buffers(arrays, name: str, equal_length: bool = True):
    """Validate a list of per-GPU 1-D numeric arrays; returns the list as NumPy arrays and a dtype."""
    if (isinstance(arrays, np.ndarray) and arrays.ndim < 2) or not hasattr(arrays, "__len__"):
        raise ConfigurationError(
            f"{name} must be a list of N arrays, one per simulated GPU (or a 2-D array, one row per GPU)"
        )
    items = [np.asarray(a) for a in arrays]
    if not items:
        raise ConfigurationError(f"{name} is empty; give one array per GPU (at least 1 GPU)")
    for i, a in enumerate(items):
        if a.ndim != 1:
            raise ConfigurationError(f"{name}[{i}] has shape {a.shape}; each GPU's data must be a 1-D array")
        if a.dtype == bool or not np.issubdtype(a.dtype, np.number):
            raise ConfigurationError(f"{name}[{i}] has dtype {a.dtype}; expected integers or floats")
        if np.issubdtype(a.dtype, np.inexact) and not np.all(np.isfinite(a)):
            raise ConfigurationError(f"{name}[{i}] contains NaN or infinity")
    if equal_length:
        for i, a in enumerate(items):
            if a.shape[0] != items[0].shape[0]:
                raise ConfigurationError(
                    f"{name}[{i}] has {a.shape[0]} elements but {name}[0] has {items[0].shape[0]}; "
                    f"every GPU must hold an array of the same length"
                )
    dtype = np.result_type(*[a.dtype for a in items])
    return items, dtype


def _check_trace_size(steps: int, gpus: int):
    if steps * gpus > MAX_TRACE_ENTRIES:
        raise ConfigurationError(
            f"a trace of {steps} steps x {gpus} GPUs is too large to record "
            f"(limit {MAX_TRACE_ENTRIES:,} entries); use collective_cost() for the numbers"
        )


def _ring_schedule(n, steps, chunk_of):
    """send_to / send_chunk for `steps` ring steps: GPU g sends chunk_of(k, g) to (g+1) mod N."""
    dtype = _index_dtype(n)
    k = np.arange(steps)[:, None]
    g = np.arange(n)[None, :]
    send_to = np.broadcast_to((g + 1) % n, (steps, n)).astype(dtype)
    send_chunk = (chunk_of(k, g) % n).astype(dtype)
    return send_to, send_chunk


def _split_bounds(length: int, n: int) -> np.ndarray:
    """Chunk boundaries with np.array_split semantics (the first length % n chunks one longer)."""
    base, extra = divmod(length, n)
    sizes = np.full(n, base, dtype=np.int64)
    sizes[:extra] += 1
    return np.concatenate(([0], np.cumsum(sizes)))


def _own_arcs(n, chunks):
    """Every GPU's every chunk holds just its own input: arc {g}."""
    start = np.broadcast_to(np.arange(n)[:, None], (n, chunks)).copy()
    return start, np.ones((n, chunks), dtype=np.int64)


def simulate_ring_all_reduce(arrays) -> CollectiveTrace:
    """Ring all-reduce of N equal-length arrays (one per simulated GPU), step by step.

    Each array is split into N chunks (np.array_split). Reduce-scatter, steps k = 0..N-2:
    GPU i sends chunk (i-k-1) mod N to (i+1) mod N, which adds it to its own; afterwards
    GPU i holds the full sum of chunk i. All-gather, steps N-1..2N-3: GPU i sends chunk
    (i-k) mod N (k counted within the phase), which the receiver overwrites. Each GPU sends
    2(N-1) chunks: 2(N-1)/N x M bytes when N divides the length (Patarasuk & Yuan 2009).
    """
    items, dtype = _as_buffers(arrays, "arrays")
    n = len(items)
    _check_trace_size(2 * (n - 1), n)
    data = np.stack([a.astype(dtype, copy=False) for a in items])
    bounds = _split_bounds(data.shape[1], n)
    rs_to, rs_chunk = _ring_schedule(n, n - 1, lambda k, g: g - k - 1)
    ag_to, ag_chunk = _ring_schedule(n, n - 1, lambda k, g: g - k)
    start, length = _own_arcs(n, n)
    return CollectiveTrace(
        op="all-reduce",
        algorithm="ring",
        initial=data,
        chunk_bounds=bounds,
        start0=start,
        length0=length,
        send_to=np.concatenate([rs_to, ag_to]),
        send_chunk=np.concatenate([rs_chunk, ag_chunk]),
        reduce_steps=[True] * (n - 1) + [False] * (n - 1),
        phases=(("reduce-scatter", 0, n - 1), ("all-gather", n - 1, n - 1)),
        n_contributors=n,
        outputs_fn=lambda trace: [row.copy() for row in trace.final],
    )


def simulate_reduce_scatter(arrays) -> CollectiveTrace:
    """Ring reduce-scatter: the reduce-scatter half of simulate_ring_all_reduce.

    N-1 steps; GPU i ends with the sum of chunk i (its `outputs[i]`); each GPU sends
    (N-1)/N x M bytes, M being the whole input array (the nccl-tests size convention).
    """
    items, dtype = _as_buffers(arrays, "arrays")
    n = len(items)
    _check_trace_size(n - 1, n)
    data = np.stack([a.astype(dtype, copy=False) for a in items])
    bounds = _split_bounds(data.shape[1], n)
    send_to, send_chunk = _ring_schedule(n, n - 1, lambda k, g: g - k - 1)
    start, length = _own_arcs(n, n)
    return CollectiveTrace(
        op="reduce-scatter",
        algorithm="ring",
        initial=data,
        chunk_bounds=bounds,
        start0=start,
        length0=length,
        send_to=send_to,
        send_chunk=send_chunk,
        reduce_steps=[True] * (n - 1),
        phases=(("reduce-scatter", 0, n - 1),),
        n_contributors=n,
        outputs_fn=lambda trace: [
            trace.final[g, trace.chunk_bounds[g]: trace.chunk_bounds[g + 1]].copy() for g in range(trace.n)
        ],
    )


def simulate_all_gather(shards) -> CollectiveTrace:
    """Ring all-gather: GPU g starts with shard g, everyone ends with all shards concatenated.

    Step k = 0..N-2: GPU i sends chunk (i-k) mod N to (i+1) mod N. Shards may differ in
    length (as np.array_split chunks do). Each GPU sends (N-1)/N x M bytes for equal shards,
    M being the whole gathered buffer (the nccl-tests size convention).
    """
    items, dtype = _as_buffers(shards, "shards", equal_length=False)
    n = len(items)
    _check_trace_size(n - 1, n)
    bounds = np.concatenate(([0], np.cumsum([a.shape[0] for a in items]))).astype(np.int64)
    data = np.zeros((n, int(bounds[-1])), dtype=dtype)
    for g, a in enumerate(items):
        data[g, bounds[g]: bounds[g + 1]] = a
    send_to, send_chunk = _ring_schedule(n, n - 1, lambda k, g: g - k)
    start = np.broadcast_to(np.arange(n)[None, :], (n, n)).copy()
    start = np.where(np.eye(n, dtype=bool), start, 0)
    length = np.eye(n, dtype=np.int64)  # GPU g holds only chunk g, which is its own data
    return CollectiveTrace(
        op="all-gather",
        algorithm="ring",
        initial=data,
        chunk_bounds=bounds,
        start0=start,
        length0=length,
        send_to=send_to,
        send_chunk=send_chunk,
        reduce_steps=[False] * (n - 1),
        phases=(("all-gather", 0, n - 1),),
        n_contributors=n,
        outputs_fn=lambda trace: [row.copy() for row in trace.final],
    )


def simulate_parameter_server(arrays, server=0) -> CollectiveTrace:
    """Parameter-server all-reduce: workers push to the server, it sums and sends back.

    The server is GPU `server`, one of the N. Push, steps 0..N-2: worker (server+k+1) mod N
    sends its whole array (one chunk) to the server, which adds it; pull, steps N-1..2N-3:
    the server sends the sum to worker (server+k+1) mod N. One message per step: the
    server's link carries them one at a time. The server sends and receives (N-1) x M
    (`bytes_sent_by_gpu[server]`), each worker M: the busiest load grows linearly with N.
    """
    items, dtype = _as_buffers(arrays, "arrays")
    n = len(items)
    if isinstance(server, bool) or not isinstance(server, numbers.Integral) or not 0 <= server < n:
        raise ConfigurationError(f"server={server!r} is not a GPU index; valid: 0 to {n - 1}")
    server = int(server)
    _check_trace_size(2 * (n - 1), n)
    data = np.stack([a.astype(dtype, copy=False) for a in items])
    steps = 2 * (n - 1)
    dtype_i = _index_dtype(n)
    send_to = np.full((steps, n), -1, dtype=dtype_i)
    send_chunk = np.full((steps, n), -1, dtype=dtype_i)
    workers = (server + 1 + np.arange(n - 1)) % n
    push = np.arange(n - 1)
    send_to[push, workers] = server
    send_chunk[push, workers] = 0
    send_to[n - 1 + push, server] = workers
    send_chunk[n - 1 + push, server] = 0
    start = np.arange(n)[:, None].copy()
    length = np.ones((n, 1), dtype=np.int64)
    return CollectiveTrace(
        op="all-reduce",
        algorithm="parameter-server",
        initial=data,
        chunk_bounds=np.array([0, data.shape[1]]),
        start0=start,
        length0=length,
        send_to=send_to,
        send_chunk=send_chunk,
        reduce_steps=[True] * (n - 1) + [False] * (n - 1),
        phases=(("push", 0, n - 1), ("pull", n - 1, n - 1)),
        n_contributors=n,
        outputs_fn=lambda trace: [row.copy() for row in trace.final],
        server=server,
    )

