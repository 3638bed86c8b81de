"""Collective communication costs: the alpha-beta closed forms and the nccl-tests bandwidth conventions.

Cost model (Hockney's alpha-beta): one message of m bytes over a link costs
alpha + m / B, with alpha the per-message latency (s) and B the bandwidth PER DIRECTION
(B/s). Every GPU has one such link out and one in, usable at the same time (full duplex).
N (argument `gpus`) is the number of GPUs and M (argument `size`, in bytes) the message
size, with the nccl-tests size conventions (NVIDIA nccl-tests, doc/PERFORMANCE.md):

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
Each (op, algorithm) has its own formula function in FORMULAS (distlab.collectives.algorithms, with
CollectiveCost; re-exported here). Taught in Lesson 2 (notebooks/02_collectives.ipynb).
"""

from __future__ import annotations

from .._arguments import (
    divisors,
    finite_result,
    link_parameters,
    renamed_keyword,
    short_list,
)
from ..errors import ConfigurationError, UnknownNameError
from ..units import BYTES, BYTES_PER_SECOND, Q_, SECONDS, format_seconds, non_negative, positive, positive_int
from .algorithms import FORMULAS, CollectiveCost, CollectivePhase, double_binary_tree, ring_all_reduce_time

__all__ = [
    "OPS",
    "ALGORITHMS",
    "FORMULAS",
    "CollectiveCost",
    "CollectivePhase",
    "collective_cost",
    "ring_all_reduce_time",
    "algorithm_bandwidth",
    "bus_bandwidth",
    "bus_factor",
    "latency_bandwidth_crossover",
    "double_binary_tree",
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


def _cost(op, algorithm, n, m, bw, alpha, *, inter=None, gpus_per_node=None) -> CollectiveCost:
    """The cost from FORMULAS[(op, algorithm)]; one GPU moves nothing."""
    if n == 1:
        return CollectiveCost(op, algorithm, 1, m, 0.0, 0.0, 0.0, 0.0, 0.0, 0, ())
    extra = dict(inter=inter, gpus_per_node=gpus_per_node) if algorithm == "hierarchical" else {}
    return FORMULAS[(op, algorithm)](op, n, m, bw, alpha, **extra)


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
    """Alpha-beta cost of a collective of `size` (nccl-tests convention, see module doc) over `gpus`. Lesson 2 §1.

    op: one of OPS; algorithm: one of ALGORITHMS[op] (None: the first). Per GPU, busiest
    (each formula, with its source, is a function in FORMULAS):

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
    the hierarchical algorithm only (Lesson 2 §6).

    >>> cost = collective_cost("all-reduce", "4 GB", 8, bandwidth="50 GB/s")
    >>> cost.bytes_sent_per_gpu, cost.time_s, cost.steps
    (7000000000.0, 0.14, 14)
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
            raise ConfigurationError(
                f"gpus_per_node={g} does not divide gpus={n}; valid: {short_list(divisors(n), 24)}"
            )
        if n // g > 1:
            inter = link_parameters(inter_link, inter_bandwidth, inter_latency, prefix="inter_")
    return _cost(op, algorithm, n, m, intra[0], intra[1], inter=inter, gpus_per_node=g)


def latency_bandwidth_crossover(
    op, gpus, *, algorithm=None, link=None, bandwidth=None, latency=None, **kwargs
) -> float:
    """The message size (bytes) at which a collective's latency term equals its bandwidth term. Lesson 2 §5.

    Every cost model here is alpha-beta, linear in the size M: time = steps x alpha + k M / B.
    Below M* = steps x alpha x B / k a collective is latency-bound, above it bandwidth-bound;
    for the ring all-reduce M* = 2(N-1) alpha / (2(N-1)/(N B)) = N alpha B. Read off
    collective_cost (so it follows whatever formula collective_cost uses).
    Other keyword arguments (gpus_per_node, inter_link, ...) go to collective_cost. Raises
    ConfigurationError when there is no crossover (one GPU, or zero latency).

    >>> latency_bandwidth_crossover("all-reduce", 8, bandwidth=50e9, latency=5e-6)  # N alpha B
    2000000.0
    """
    # A huge size makes the bandwidth term dominate, so reading it back (some formulas give it as
    # total - latency) loses no precision; the latency term does not depend on the size.
    probe = 1e18
    cost = collective_cost(
        op, probe, gpus, algorithm=algorithm, link=link, bandwidth=bandwidth, latency=latency, **kwargs
    )
    if cost.bandwidth_time_s <= 0 or cost.latency_time_s <= 0:
        raise ConfigurationError(
            f"{cost.algorithm} {cost.op} over gpus={cost.gpus} with latency {format_seconds(cost.latency_time_s)}: "
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


@renamed_keyword(n="gpus")
def bus_factor(op, gpus) -> float:
    """nccl-tests bus-bandwidth factor over N = `gpus`: all-reduce 2(N-1)/N; reduce-scatter, all-gather,
    all-to-all, scatter, gather (N-1)/N; broadcast, reduce, send-recv 1. Lesson 2 §6.

    Source: NVIDIA nccl-tests, doc/PERFORMANCE.md (scatter/gather: src/scatter.cu, gather.cu).

    >>> bus_factor("all-reduce", 8)
    1.75
    """
    return float(_BUS_FACTORS[_normalise_op(op)](positive_int(gpus, "gpus")))


def algorithm_bandwidth(size, time):
    """nccl-tests algorithm bandwidth algbw = S / t, in GB/s (10^9 B/s). Lesson 2 §6.

    S follows nccl-tests: for all-gather and reduce-scatter it is the TOTAL buffer
    (N x the per-rank count), for all-reduce the buffer on each rank.

    >>> algorithm_bandwidth("4 GB", "10 ms")
    <Quantity(400.0, 'gigabyte / second')>
    """
    s = non_negative(size, BYTES, "size")
    t = positive(time, SECONDS, "time")
    return Q_(finite_result("algorithm bandwidth", s / t), BYTES_PER_SECOND).to("GB/s")


@renamed_keyword(n="gpus")
def bus_bandwidth(op, size, time, gpus):
    """nccl-tests bus bandwidth busbw = algbw x bus_factor(op, gpus), in GB/s. Lesson 2 §6.

    Comparable with the per-direction link bandwidth whatever N is: for an ideal ring
    all-reduce, t = 2(N-1)/N x S/B, so busbw = B. Source: nccl-tests doc/PERFORMANCE.md.

    >>> bus_bandwidth("all-reduce", "4 GB", "10 ms", 8)
    <Quantity(700.0, 'gigabyte / second')>
    """
    factor = bus_factor(op, gpus)
    return algorithm_bandwidth(size, time) * factor
