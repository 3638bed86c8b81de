"""distlab.collectives: alpha-beta cost models, nccl-tests conventions, and the ring simulation.

Notation in the derivations: N GPUs, M bytes, alpha latency per step, B bandwidth per direction.
GB = 1e9 bytes.
"""

import math
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from distlab import collectives as C
from distlab.collectives import algorithms as collective_algorithms
from distlab.errors import ConfigurationError, DistlabError, UnitError, UnknownNameError
from distlab.units import Q_

NVLINK = dict(bandwidth="450 GB/s")  # per direction, alpha = 0
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass(frozen=True)
class StandInLink:
    """Anything with .bandwidth (B/s) and .latency (s) is a link."""

    bandwidth: float
    latency: float


# ----------------------------------------------------------------------------------------
# Hand-derived costs


def test_ring_all_reduce_8_gpus_4_gb():
    # 2(N-1)/N x M = 2*7/8 * 4 GB = 7 GB per GPU; alpha = 0: t = 7e9 / 450e9 s = 15.56 ms.
    cost = C.collective_cost("all-reduce", "4 GB", 8, **NVLINK)
    assert cost.bytes_sent_per_gpu == pytest.approx(7e9, rel=1e-12)
    assert cost.bytes_received_per_gpu == pytest.approx(7e9, rel=1e-12)
    assert cost.time_s == pytest.approx(7e9 / 450e9, rel=1e-12)
    assert cost.steps == 14  # 2(N-1)
    assert (cost.op, cost.algorithm, cost.gpus, cost.size_bytes) == ("all-reduce", "ring", 8, 4e9)


def test_ring_all_reduce_latency_term():
    # 2(N-1) alpha = 14 * 5 us = 70 us on top of the 15.56 ms bandwidth term.
    cost = C.collective_cost("all-reduce", 4e9, 8, bandwidth=450e9, latency="5 us")
    assert cost.latency_time_s == pytest.approx(70e-6, rel=1e-12)
    assert cost.time_s == pytest.approx(70e-6 + 7e9 / 450e9, rel=1e-12)
    assert cost.time_s == pytest.approx(C.ring_all_reduce_time(4e9, 8, 450e9, 5e-6), rel=1e-15)
    rs, ag = cost.phases  # reduce-scatter then all-gather: 3.5 GB and 7 steps each
    assert (rs.name, ag.name) == ("reduce-scatter", "all-gather")
    assert rs.bytes_sent_per_gpu == pytest.approx(3.5e9) and rs.steps == 7
    assert rs.time_s + ag.time_s == pytest.approx(cost.time_s, rel=1e-12)


@pytest.mark.parametrize("op", ["reduce-scatter", "all-gather", "all-to-all"])
def test_ring_reduce_scatter_all_gather_pairwise_all_to_all(op):
    # (N-1)/N x M = 7/8 * 4 GB = 3.5 GB in N-1 = 7 steps; t = 7 * 1 us + 3.5e9 / 450e9.
    cost = C.collective_cost(op, "4 GB", 8, bandwidth="450 GB/s", latency="1 us")
    assert cost.bytes_sent_per_gpu == pytest.approx(3.5e9, rel=1e-12)
    assert cost.steps == 7
    assert cost.time_s == pytest.approx(7e-6 + 3.5e9 / 450e9, rel=1e-12)


@pytest.mark.parametrize("op", ["broadcast", "reduce"])
def test_ring_broadcast_and_reduce_are_pipelined_chains(op):
    # Every link carries M once: t = (N-1) alpha + M/B = 7 us + 4e9/450e9; 4 GB per GPU.
    cost = C.collective_cost(op, "4 GB", 8, bandwidth="450 GB/s", latency="1 us")
    assert cost.bytes_sent_per_gpu == pytest.approx(4e9)
    assert cost.steps == 7
    assert cost.time_s == pytest.approx(7e-6 + 4e9 / 450e9, rel=1e-12)


def test_binomial_tree_broadcast_and_reduce():
    # Thakur et al. 2005: ceil(log2 N) (alpha + M/B). N = 8: 3 rounds; N = 5: also 3.
    for n, rounds in ((8, 3), (5, 3), (2, 1), (9, 4)):
        b = C.collective_cost("broadcast", "1 GB", n, algorithm="tree", bandwidth="50 GB/s", latency="10 us")
        assert b.steps == rounds
        assert b.time_s == pytest.approx(rounds * (10e-6 + 1e9 / 50e9), rel=1e-12)
        assert b.bytes_sent_per_gpu == pytest.approx(rounds * 1e9)  # the root sends to each child
        r = C.collective_cost("reduce", "1 GB", n, algorithm="tree", bandwidth="50 GB/s", latency="10 us")
        assert r.time_s == pytest.approx(b.time_s)
        assert r.bytes_received_per_gpu == pytest.approx(rounds * 1e9)  # the root receives from each
        assert r.bytes_sent_per_gpu == pytest.approx(1e9)


def test_binomial_tree_scatter_and_gather():
    # Thakur et al. 2005: ceil(log2 N) alpha + (N-1)/N M/B. N = 8, M = 4 GB: 3 alpha + 3.5 GB / B.
    s = C.collective_cost("scatter", "4 GB", 8, algorithm="tree", bandwidth="50 GB/s", latency="10 us")
    assert s.steps == 3
    assert s.time_s == pytest.approx(30e-6 + 3.5e9 / 50e9, rel=1e-12)
    assert s.bytes_sent_per_gpu == pytest.approx(3.5e9)  # root sends 7 of the 8 pieces
    assert s.bytes_received_per_gpu == pytest.approx(2e9)  # its first child gets half: 4 pieces
    g = C.collective_cost("gather", "4 GB", 8, algorithm="tree", bandwidth="50 GB/s", latency="10 us")
    assert (g.bytes_sent_per_gpu, g.bytes_received_per_gpu) == (s.bytes_received_per_gpu, s.bytes_sent_per_gpu)
    # N = 5: children of the root hold subtrees {1}, {2, 3}, {4}: the largest is 2 pieces of M/5.
    s5 = C.collective_cost("scatter", "5 GB", 5, algorithm="tree", bandwidth="50 GB/s")
    assert s5.bytes_received_per_gpu == pytest.approx(2e9)


def test_ring_chain_scatter_and_gather():
    # Chain: N-1 steps of one M/N piece per link; t = 3 alpha + 3/4 x 4 GB / B for N = 4.
    for op in ("scatter", "gather"):
        cost = C.collective_cost(op, "4 GB", 4, bandwidth="50 GB/s", latency="10 us")
        assert cost.steps == 3
        assert cost.bytes_sent_per_gpu == pytest.approx(3e9)
        assert cost.time_s == pytest.approx(30e-6 + 3e9 / 50e9, rel=1e-12)


def test_send_recv():
    # One message: alpha + M/B = 10 us + 1 GB / 50 GB/s = 20.01 ms.
    cost = C.collective_cost("send-recv", "1 GB", 2, bandwidth="50 GB/s", latency="10 us")
    assert cost.steps == 1 and cost.bytes_sent_per_gpu == 1e9
    assert cost.time_s == pytest.approx(10e-6 + 0.02, rel=1e-12)


def test_tree_all_reduce_double_binary_tree():
    # N = 2: the two trees exchange M/2 each way twice: M per GPU, 2 alpha + M/B (= the ring).
    two = C.collective_cost("all-reduce", "1 GB", 2, algorithm="tree", bandwidth="50 GB/s", latency="10 us")
    ring = C.collective_cost("all-reduce", "1 GB", 2, bandwidth="50 GB/s", latency="10 us")
    assert two.bytes_sent_per_gpu == pytest.approx(1e9)
    assert two.time_s == pytest.approx(ring.time_s)
    # N = 3: rank 1 is the root of tree 1 (sends M/2 to two children) and a leaf of tree 2
    # (sends M/2 up): 1.5 M. Depth 1: 2 alpha.
    three = C.collective_cost("all-reduce", "1 GB", 3, algorithm="tree", bandwidth="50 GB/s", latency="10 us")
    assert three.bytes_sent_per_gpu == pytest.approx(1.5e9)
    assert three.time_s == pytest.approx(20e-6 + 1.5e9 / 50e9)
    # N = 8: depth floor(log2 8) = 3 -> 6 alpha; busiest: M/2 up + 2 x M/2 down + M/2 up = 2M.
    eight = C.collective_cost("all-reduce", "1 GB", 8, algorithm="tree", bandwidth="50 GB/s", latency="10 us")
    assert eight.steps == 6
    assert eight.bytes_sent_per_gpu == pytest.approx(2e9)
    assert eight.time_s == pytest.approx(60e-6 + 2e9 / 50e9, rel=1e-12)


def test_tree_ring_crossover():
    # Equal times when 2(N-1) alpha + 2(N-1)/N M/B = 2 d alpha + 2 M/B, d = floor(log2 N):
    # M* = (N-1-d) alpha N B. N = 1024, d = 10, alpha = 10 us, B = 50 GB/s: M* = 518.66 GB.
    # Below it the tree's 20 alpha wins over the ring's 2046 alpha; above, the ring's bytes win.
    n, alpha, bw = 1024, 10e-6, 50e9
    crossover = (n - 1 - 10) * alpha * n * bw
    assert crossover == pytest.approx(518.656e9)
    times = {}
    for m in (1e6, 0.99 * crossover, crossover, 1.01 * crossover):
        times[m] = [
            C.collective_cost("all-reduce", m, n, algorithm=a, bandwidth=bw, latency=alpha).time_s
            for a in ("ring", "tree")
        ]
    assert times[1e6][1] < times[1e6][0] / 50
    assert times[0.99 * crossover][1] < times[0.99 * crossover][0]
    assert times[crossover][0] == pytest.approx(times[crossover][1], rel=1e-12)
    assert times[1.01 * crossover][0] < times[1.01 * crossover][1]


def test_double_binary_tree_structure():
    for n in list(range(1, 70)) + [1000, 4097]:
        trees = C.double_binary_tree(n)
        interior = []
        for parent in trees:
            roots = np.nonzero(parent < 0)[0]
            assert len(roots) == 1
            children = np.bincount(parent[parent >= 0], minlength=n)
            assert children.max() <= 2  # binary
            # every rank reaches the root in at most floor(log2 n) hops
            depth = np.zeros(n, dtype=int)
            node = np.arange(n)
            for _ in range(n.bit_length()):
                step = parent[node] >= 0
                depth += step
                node = np.where(step, parent[node], node)
            assert np.all(node == roots[0])
            assert depth.max() == n.bit_length() - 1
            interior.append(children > 0)
        # a rank is interior in at most one of the two trees (what makes it "full bandwidth")
        assert not np.any(interior[0] & interior[1])
        units, _ = collective_algorithms._double_tree_load(n)
        if n >= 4:
            assert units == 4  # 2M, the value used beyond 2^16 GPUs without building the trees
    assert (
        collective_algorithms._double_tree_load(2**16 + 1)[0] == collective_algorithms._double_tree_load(2**16)[0] == 4
    )


def test_hierarchical_two_nodes_of_eight():
    # N = 16, g = 8, M = 4 GB; intra 450 GB/s, 1 us; inter 50 GB/s, 10 us.
    # intra reduce-scatter: 7/8 x 4 GB = 3.5 GB, 7 steps -> 7 us + 3.5e9/450e9
    # inter all-reduce of M/g = 0.5 GB over 2 nodes: 2*1/2 * 0.5 GB = 0.5 GB, 2 steps -> 20 us + 0.5e9/50e9
    # intra all-gather = reduce-scatter.
    cost = C.collective_cost(
        "all-reduce",
        "4 GB",
        16,
        algorithm="hierarchical",
        bandwidth="450 GB/s",
        latency="1 us",
        gpus_per_node=8,
        inter_bandwidth="50 GB/s",
        inter_latency="10 us",
    )
    rs = 7e-6 + 3.5e9 / 450e9
    inter = 20e-6 + 0.5e9 / 50e9
    assert cost.time_s == pytest.approx(2 * rs + inter, rel=1e-12)
    assert cost.bytes_sent_per_gpu == pytest.approx(3.5e9 * 2 + 0.5e9)
    assert cost.steps == 7 + 2 + 7
    assert cost.latency_time_s == pytest.approx(14e-6 + 20e-6)
    names = [p.name for p in cost.phases]
    assert names == ["intra-node reduce-scatter", "inter-node all-reduce", "intra-node all-gather"]
    assert [p.link for p in cost.phases] == ["intra", "inter", "intra"]
    assert cost.phases[1].size_bytes == pytest.approx(0.5e9) and cost.phases[1].gpus == 2
    # The same bytes as a flat ring (2(N-1)/N M = 7.5 GB), but only 0.5 GB of it crosses nodes:
    flat = C.collective_cost("all-reduce", "4 GB", 16, bandwidth="50 GB/s", latency="10 us")
    assert flat.bytes_sent_per_gpu == pytest.approx(cost.bytes_sent_per_gpu)
    assert cost.time_s < flat.time_s / 5


@given(nodes=st.integers(1, 32), g=st.sampled_from([1, 2, 4, 8]), m=st.floats(1.0, 1e12))
@FAST
def test_hierarchical_moves_the_ring_bytes_and_degenerates_to_rings(nodes, g, m):
    # 2(g-1)/g M + 2(k-1)/k M/g = 2M (1 - 1/(gk)) = 2(N-1)/N M for every split N = g k.
    n = nodes * g
    hier = C.collective_cost(
        "all-reduce",
        m,
        n,
        algorithm="hierarchical",
        bandwidth=450e9,
        latency=1e-6,
        gpus_per_node=g,
        inter_bandwidth=50e9,
        inter_latency=1e-5,
    )
    ring = C.collective_cost("all-reduce", m, n, bandwidth=50e9, latency=1e-5)
    assert hier.bytes_sent_per_gpu == pytest.approx(ring.bytes_sent_per_gpu, rel=1e-9, abs=1e-9)
    if g == 1:  # no intra phases: exactly a ring over the inter-node link
        assert hier.time_s == pytest.approx(ring.time_s, rel=1e-9, abs=1e-15)
    if nodes == 1:  # one node: a ring over the intra-node link, no inter link needed
        one = C.collective_cost(
            "all-reduce", m, n, algorithm="hierarchical", bandwidth=450e9, latency=1e-6, gpus_per_node=g
        )
        intra = C.collective_cost("all-reduce", m, n, bandwidth=450e9, latency=1e-6)
        assert one.time_s == pytest.approx(intra.time_s, rel=1e-9, abs=1e-15)


def test_parameter_server():
    # Server = one of N = 4 GPUs; M = 1 GB, 50 GB/s, alpha = 10 us.
    # It receives 3 x 1 GB and sends 3 x 1 GB, one message per step: 6 (alpha + M/B) = 120.06 ms.
    cost = C.collective_cost(
        "all-reduce", "1 GB", 4, algorithm="parameter-server", bandwidth="50 GB/s", latency="10 us"
    )
    assert cost.bytes_sent_per_gpu == pytest.approx(3e9)
    assert cost.bytes_received_per_gpu == pytest.approx(3e9)
    assert cost.steps == 6
    assert cost.time_s == pytest.approx(6 * (10e-6 + 0.02), rel=1e-12)
    push, pull = cost.phases
    assert push.bytes_sent_per_gpu == pytest.approx(1e9)  # a worker pushes M once
    assert pull.bytes_sent_per_gpu == pytest.approx(3e9)  # the server sends M to each of 3 workers


def test_parameter_server_load_grows_linearly_ring_stays_below_2m():
    m = 1e9
    ps = [
        C.collective_cost("all-reduce", m, n, algorithm="ps", bandwidth=50e9).bytes_sent_per_gpu for n in range(1, 65)
    ]
    assert np.allclose(np.diff(ps), m)  # + M per extra GPU: (N-1) M
    ring = [C.collective_cost("all-reduce", m, n, bandwidth=50e9).bytes_sent_per_gpu for n in range(1, 200)]
    assert all(r < 2 * m for r in ring)
    assert all(b > a for a, b in zip(ring[:-1], ring[1:]))  # increases toward 2M ...
    assert ring[-1] == pytest.approx(2 * m * 198 / 199)  # ... as 2(N-1)/N M


@pytest.mark.parametrize("op", C.OPS)
def test_one_gpu_costs_nothing(op):
    for algorithm in C.ALGORITHMS[op]:
        extra = dict(gpus_per_node=1) if algorithm == "hierarchical" else {}
        cost = C.collective_cost(op, "4 GB", 1, algorithm=algorithm, bandwidth="50 GB/s", latency="10 us", **extra)
        assert (cost.bytes_sent_per_gpu, cost.time_s, cost.steps) == (0.0, 0.0, 0)


# ----------------------------------------------------------------------------------------
# nccl-tests conventions


def test_bus_factors_from_nccl_tests():
    # NVIDIA nccl-tests doc/PERFORMANCE.md (and src/scatter.cu, gather.cu, sendrecv.cu).
    assert C.bus_factor("all-reduce", 8) == pytest.approx(2 * 7 / 8)
    for op in ("reduce-scatter", "all-gather", "all-to-all", "scatter", "gather"):
        assert C.bus_factor(op, 8) == pytest.approx(7 / 8)
    for op in ("broadcast", "reduce", "send-recv"):
        assert C.bus_factor(op, 8) == 1.0
    assert C.bus_factor("allreduce", 1) == 0.0
    assert C.bus_factor("AllGather", 2) == 0.5


def test_algorithm_and_bus_bandwidth():
    # 4 GB in 10 ms: algbw = 400 GB/s; all-reduce over 8: busbw = 400 x 14/8 = 700 GB/s.
    assert C.algorithm_bandwidth("4 GB", "10 ms").to("GB/s").magnitude == pytest.approx(400)
    assert C.bus_bandwidth("all-reduce", "4 GB", "10 ms", 8).to("GB/s").magnitude == pytest.approx(700)
    assert C.bus_bandwidth("broadcast", 4e9, 0.01, 8).to("GB/s").magnitude == pytest.approx(400)


@given(n=st.integers(2, 512), m=st.floats(1e3, 1e12), bw=st.floats(1e9, 1e12))
@FAST
def test_bus_bandwidth_of_every_default_model_is_the_link_bandwidth(n, m, bw):
    # The point of busbw: for a bandwidth-optimal algorithm with alpha = 0 it equals B, for any N.
    for op in C.OPS:
        cost = C.collective_cost(op, m, n, bandwidth=bw)
        busbw = C.bus_bandwidth(op, m, cost.time_s, n).to("B/s").magnitude
        assert busbw == pytest.approx(bw, rel=1e-9), op


def test_latency_bandwidth_crossover_of_the_ring():
    # 2(N-1) alpha = 2(N-1)/N x M / B  ->  M* = N alpha B. N = 8, alpha = 9.6 us, B = 50 GB/s: 3.84 MB.
    m = C.latency_bandwidth_crossover("all-reduce", 8, bandwidth="50 GB/s", latency="9.6 us")
    assert m == pytest.approx(3.84e6, rel=1e-9)
    at = C.collective_cost("all-reduce", m, 8, bandwidth="50 GB/s", latency="9.6 us")
    assert at.latency_time_s == pytest.approx(at.bandwidth_time_s, rel=1e-9)
    # reduce-scatter: (N-1) alpha = (N-1)/N M/B -> the same N alpha B; binomial-tree broadcast:
    # ceil(log2 N) alpha = ceil(log2 N) M/B -> M* = alpha B = 480 kB
    assert C.latency_bandwidth_crossover("reduce-scatter", 8, bandwidth=50e9, latency=9.6e-6) == pytest.approx(3.84e6)
    assert C.latency_bandwidth_crossover(
        "broadcast", 8, algorithm="tree", bandwidth=50e9, latency=9.6e-6
    ) == pytest.approx(4.8e5)


@given(n=st.integers(2, 4096), alpha=st.floats(1e-7, 1e-3), bw=st.floats(1e8, 1e12))
@FAST
def test_crossover_splits_latency_bound_from_bandwidth_bound(n, alpha, bw):
    m = C.latency_bandwidth_crossover("all-reduce", n, bandwidth=bw, latency=alpha)
    assert m == pytest.approx(n * alpha * bw, rel=1e-9)
    below = C.collective_cost("all-reduce", m / 2, n, bandwidth=bw, latency=alpha)
    above = C.collective_cost("all-reduce", m * 2, n, bandwidth=bw, latency=alpha)
    assert below.latency_time_s > below.bandwidth_time_s and above.latency_time_s < above.bandwidth_time_s


def test_no_crossover_without_latency_or_with_one_gpu():
    with pytest.raises(ConfigurationError, match="no latency/bandwidth crossover"):
        C.latency_bandwidth_crossover("all-reduce", 8, bandwidth=50e9)
    with pytest.raises(ConfigurationError, match="at least 2 GPUs"):
        C.latency_bandwidth_crossover("all-reduce", 1, bandwidth=50e9, latency=1e-6)


# ----------------------------------------------------------------------------------------
# Inputs, links, results


def test_links_as_objects_names_and_explicit_values():
    link = StandInLink(bandwidth=450e9, latency=5e-6)
    a = C.collective_cost("all-reduce", "4 GB", 8, link=link)
    b = C.collective_cost("all-reduce", Q_(4, "GB"), 8, bandwidth="450 GB/s", latency="5 us")
    c = C.collective_cost("all-reduce", 4e9, 8, bandwidth=Q_(3600, "Gb/s"), latency=Q_(5000, "ns"))
    assert a.time_s == pytest.approx(b.time_s) == pytest.approx(c.time_s)
    # explicit values override the link's
    d = C.collective_cost("all-reduce", "4 GB", 8, link=link, latency=0)
    assert d.time_s == pytest.approx(7e9 / 450e9)
    assert C.collective_cost("all-reduce", "4 GiB", 8, **NVLINK).size_bytes == 4 * 2**30


def test_hardware_link_by_name():
    from distlab import hardware

    nvlink = hardware.link("nvlink4")
    by_name = C.collective_cost("all-reduce", "4 GB", 8, link="nvlink4")
    assert by_name.time_s == pytest.approx(14 * nvlink.latency + 7e9 / nvlink.bandwidth)


def test_result_units_dict_and_text():
    cost = C.collective_cost("all-reduce", "4 GB", 8, bandwidth="450 GB/s", latency="5 us")
    assert cost.bytes_sent.to("GB").magnitude == pytest.approx(7)
    assert cost.time.to("ms").magnitude == pytest.approx(15.6256, rel=1e-4)
    assert cost.size.to("GB").magnitude == pytest.approx(4)
    d = cost.to_dict()
    assert d["bytes_sent_per_gpu"] == pytest.approx(7e9) and d["time_s"] == pytest.approx(cost.time_s)
    for key in ("bytes_sent_per_gpu", "time_s", "steps", "gpus", "size_bytes"):
        assert type(d[key]) in (int, float)
    assert all(type(v) in (int, float, str) for p in d["phases"] for v in p.values())
    assert "7 GB" in str(cost) and "ring all-reduce" in str(cost)
    with pytest.raises(AttributeError):
        cost.time_s = 0  # frozen


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        (dict(op="allreduc"), UnknownNameError, "valid: all-reduce"),
        (dict(algorithm="tree", op="all-gather"), UnknownNameError, "valid: ring"),
        (dict(algorithm="butterfly"), UnknownNameError, "parameter-server"),
        (dict(gpus=0), ConfigurationError, "gpus"),
        (dict(gpus=2.5), ConfigurationError, "gpus"),
        (dict(size=-1), ConfigurationError, "size"),
        (dict(size=float("nan")), ConfigurationError, "size"),
        (dict(size=float("inf")), ConfigurationError, "size"),
        (dict(size="4 GB/s"), UnitError, "size"),
        (dict(bandwidth=0), ConfigurationError, "bandwidth must be positive"),
        (dict(bandwidth="-5 GB/s"), ConfigurationError, "bandwidth"),
        (dict(latency="-1 us"), ConfigurationError, "latency"),
        (dict(bandwidth=None), ConfigurationError, "no link"),
        (dict(bandwidth=None, link=42), ConfigurationError, ".bandwidth"),
        (dict(algorithm="hierarchical"), ConfigurationError, "gpus_per_node"),
        (dict(algorithm="hierarchical", gpus_per_node=3, inter_bandwidth=1e9), ConfigurationError, "valid: 1, 2, 4, 8"),
        (dict(algorithm="hierarchical", gpus_per_node=4), ConfigurationError, "inter_link"),
    ],
)
def test_invalid_inputs_raise_our_errors(kwargs, error, words):
    args = dict(op="all-reduce", size="1 GB", gpus=8, bandwidth="50 GB/s")
    args.update(kwargs)
    with pytest.raises(error, match=words.replace(".", r"\.")) as info:
        C.collective_cost(args.pop("op"), args.pop("size"), args.pop("gpus"), **args)
    assert isinstance(info.value, DistlabError)


def test_invalid_bandwidth_queries():
    with pytest.raises(ConfigurationError, match="time"):
        C.algorithm_bandwidth("1 GB", 0)
    with pytest.raises(UnknownNameError, match="valid"):
        C.bus_factor("allsum", 8)
    with pytest.raises(ConfigurationError, match="gpus="):
        C.bus_factor("all-reduce", 0)


# ----------------------------------------------------------------------------------------
# Simulation


def _data(draw_seed, n, length, dtype=np.int64):
    rng = np.random.default_rng(draw_seed)
    if np.issubdtype(dtype, np.integer):
        return [rng.integers(-1000, 1000, size=length).astype(dtype) for _ in range(n)]
    return [rng.standard_normal(length).astype(dtype) for _ in range(n)]


@given(n=st.integers(1, 64), length=st.integers(0, 200), seed=st.integers(0, 2**32 - 1))
@FAST
def test_ring_all_reduce_gives_every_gpu_the_exact_sum(n, length, seed):
    arrays = _data(seed, n, length)
    trace = C.simulate_ring_all_reduce(arrays)
    expected = np.sum(arrays, axis=0)
    for g in range(n):
        assert np.array_equal(trace.final[g], expected)  # integers: exact
        assert np.array_equal(trace.outputs[g], expected)
    assert trace.steps == 2 * (n - 1)
    # every step sends each chunk exactly once, so all GPUs together send 2(N-1) x M
    assert trace.bytes_sent.sum() == 2 * (n - 1) * length * 8
    # chunks follow np.array_split
    assert [len(c) for c in np.array_split(np.arange(length), n)] == list(np.diff(trace.chunk_bounds))


@given(n=st.integers(2, 32), length=st.integers(1, 100), seed=st.integers(0, 2**32 - 1))
@FAST
def test_ring_all_reduce_floats_allclose(n, length, seed):
    arrays = _data(seed, n, length, np.float64)
    trace = C.simulate_ring_all_reduce(arrays)
    assert np.allclose(trace.final, np.sum(arrays, axis=0)[None, :], rtol=1e-12, atol=1e-12)


@given(n=st.integers(2, 64), seed=st.integers(0, 2**32 - 1))
@FAST
def test_ring_sends_follow_the_ring(n, seed):
    trace = C.simulate_ring_all_reduce(_data(seed, n, n + 3))
    g = np.arange(n)
    assert np.all(trace.send_to == (g + 1) % n)  # GPU i sends only to i+1
    assert np.all(trace.recv_from == (g - 1) % n)  # and receives only from i-1
    # what GPU g receives in step k is the chunk GPU g-1 sent
    assert np.all(trace.recv_chunk == np.roll(trace.send_chunk, 1, axis=1))
    # reduce-scatter: step k sends chunk (i-k-1) mod N; all-gather: (i-k) mod N
    k = np.arange(n - 1)[:, None]
    assert np.all(trace.send_chunk[: n - 1] == (g - k - 1) % n)
    assert np.all(trace.send_chunk[n - 1 :] == (g - k) % n)
    assert trace.phase(0) == "reduce-scatter" and trace.phase(trace.steps - 1) == "all-gather"


@given(n=st.integers(1, 64), chunk=st.integers(1, 5), itemsize=st.sampled_from([1, 2, 4, 8]))
@FAST
def test_ring_bytes_equal_the_closed_form(n, chunk, itemsize):
    # N divides the length: each GPU sends 2(N-1) chunks of M/N = 2(N-1)/N x M bytes.
    length = n * chunk
    dtype = np.dtype(f"int{8 * itemsize}")
    trace = C.simulate_ring_all_reduce([np.ones(length, dtype=dtype)] * n)
    m = length * itemsize
    assert trace.size_bytes == m
    assert np.all(trace.bytes_sent_by_gpu == 2 * (n - 1) * m // n)
    assert np.all(trace.bytes_received_by_gpu == 2 * (n - 1) * m // n)
    cost = C.collective_cost("all-reduce", m, n, bandwidth=1e9)
    assert trace.bytes_sent_per_gpu == pytest.approx(cost.bytes_sent_per_gpu, rel=1e-12)


@given(n=st.integers(1, 64), chunk=st.integers(1, 4), alpha=st.floats(0, 1e-3), bw=st.floats(1e6, 1e12))
@FAST
def test_cost_model_agrees_with_the_simulation(n, chunk, alpha, bw):
    # time = simulated bytes per GPU / B + steps x alpha, for all-reduce, reduce-scatter,
    # all-gather (ring) and the parameter server.
    arrays = [np.ones(n * chunk, dtype=np.int32)] * n
    m = n * chunk * 4
    cases = [
        (C.simulate_ring_all_reduce(arrays), "all-reduce", "ring"),
        (C.simulate_reduce_scatter(arrays), "reduce-scatter", "ring"),
        (C.simulate_all_gather([np.ones(chunk, dtype=np.int32)] * n), "all-gather", "ring"),
        (C.simulate_parameter_server(arrays), "all-reduce", "parameter-server"),
    ]
    for trace, op, algorithm in cases:
        cost = C.collective_cost(op, m, n, algorithm=algorithm, bandwidth=bw, latency=alpha)
        assert trace.steps == cost.steps
        assert trace.bytes_sent_per_gpu == pytest.approx(cost.bytes_sent_per_gpu, rel=1e-12)
        busiest = trace.bytes_sent_per_gpu
        if algorithm == "parameter-server":
            # the server receives (push) and then sends (pull): its link never does both at once
            busiest = trace.bytes_sent_by_gpu[0] + trace.bytes_received_by_gpu[0]
        by_hand = busiest / bw + trace.steps * alpha
        assert cost.time_s == pytest.approx(by_hand, rel=1e-9, abs=1e-15)
        assert trace.time_s(bandwidth=bw, latency=alpha) == pytest.approx(cost.time_s, rel=1e-9, abs=1e-15)
        assert trace.time_s(StandInLink(bw, alpha)) == pytest.approx(cost.time_s, rel=1e-9, abs=1e-15)


def _explicit_contributors(trace, initial_sets):
    """Set-based bookkeeping, replayed from the recorded sends: one list of states."""
    sets = [list(map(set, row)) for row in initial_sets]
    states = [[list(map(frozenset, row)) for row in sets]]
    for k in range(trace.steps):
        before = [[set(s) for s in row] for row in sets]
        for g in range(trace.gpus):
            src, c = trace.recv_from[k, g], trace.recv_chunk[k, g]
            if src < 0:
                continue
            if trace.reduce_steps[k]:
                assert not before[src][c] & before[g][c]  # never count a GPU's data twice
                sets[g][c] = before[g][c] | before[src][c]
            else:
                sets[g][c] = set(before[src][c])
        states.append([list(map(frozenset, row)) for row in sets])
    return states


@given(n=st.integers(1, 9), extra=st.integers(0, 12), op=st.sampled_from(["all-reduce", "rs", "ag", "ps"]))
@FAST
def test_compact_contributors_equal_explicit_sets(n, extra, op):
    length = n + extra
    # GPU g holds 2**g everywhere, so a summed element *is* the bitmask of its contributors.
    arrays = [np.full(length, 1 << g, dtype=np.uint64) for g in range(n)]
    if op == "all-reduce":
        trace = C.simulate_ring_all_reduce(arrays)
    elif op == "rs":
        trace = C.simulate_reduce_scatter(arrays)
    elif op == "ps":
        trace = C.simulate_parameter_server(arrays, server=extra % n)
    else:
        trace = C.simulate_all_gather([np.full(1 + (g + extra) % 3, 1 << g, dtype=np.uint64) for g in range(n)])
    if op == "ag":
        initial = [[{c} if c == g else set() for c in range(n)] for g in range(n)]
    else:
        initial = [[{g} for _ in range(trace.n_chunks)] for g in range(n)]
    states = _explicit_contributors(trace, initial)
    for t, state in enumerate(states):
        counts = trace.contributor_counts(t)
        data = trace.buffers(t)
        for g in range(n):
            for c in range(trace.n_chunks):
                assert trace.contributors(t, g, c) == state[g][c]
                assert counts[g, c] == len(state[g][c])
                held = trace.holds_matrix(t, c)[g]
                assert set(np.nonzero(held)[0]) == state[g][c]
                lo, hi = trace.chunk_bounds[c], trace.chunk_bounds[c + 1]
                if hi > lo and state[g][c]:
                    mask = sum(1 << j for j in state[g][c])
                    assert np.all(data[g, lo:hi] == mask)
        assert np.array_equal(trace.holds_matrix(t).sum(axis=2), counts)
    assert np.array_equal(trace.buffers(trace.steps), trace.final)


def test_ring_all_reduce_contributor_story_for_four_gpus():
    # After reduce-scatter (state 3) GPU i holds the full sum of chunk i; at the end all do.
    trace = C.simulate_ring_all_reduce([np.arange(8)] * 4)
    counts = trace.contributor_counts(3)
    assert np.all(np.diag(counts) == 4)
    assert trace.contributors(0, 2, 1) == {2}
    assert trace.contributors(1, 2, 0) == {1, 2}  # step 0: GPU 1 sends chunk 0 to GPU 2
    assert np.all(trace.contributor_counts(trace.steps) == 4)
    assert trace.holds_matrix(trace.steps).all()
    with pytest.raises(ConfigurationError, match="valid: 0"):
        trace.contributors(7, 0, 0)
    with pytest.raises(ConfigurationError, match="gpu"):
        trace.contributors(0, 4, 0)


def test_reduce_scatter_and_all_gather_results():
    arrays = [np.arange(10) * (g + 1) for g in range(4)]
    rs = C.simulate_reduce_scatter(arrays)
    expected = np.array_split(np.sum(arrays, axis=0), 4)
    assert all(np.array_equal(a, b) for a, b in zip(rs.outputs, expected))  # GPU g holds chunk g
    # chunks of 3, 3, 2, 2 elements x 8 B: each GPU sends 3 of them
    assert rs.steps == 3 and rs.bytes_sent.sum() == 3 * 10 * 8
    shards = [np.array([g] * (g + 1)) for g in range(4)]
    ag = C.simulate_all_gather(shards)
    assert all(np.array_equal(out, np.concatenate(shards)) for out in ag.outputs)
    assert ag.contributors(ag.steps, 0, 3) == {3}  # all-gather copies: chunk c is GPU c's data


def test_parameter_server_simulation_records_server_load():
    for n in (2, 4, 8, 16):
        arrays = [np.full(6, g, dtype=np.int64) for g in range(n)]
        trace = C.simulate_parameter_server(arrays, server=1)
        assert all(np.array_equal(out, np.full(6, n * (n - 1) // 2)) for out in trace.outputs)
        sent = trace.bytes_sent_by_gpu
        assert sent[1] == (n - 1) * 48  # the server: (N-1) x M
        assert np.all(np.delete(sent, 1) == 48)  # each worker: M
        assert trace.bytes_received_by_gpu[1] == (n - 1) * 48
        assert trace.server == 1 and trace.phase(0) == "push" and trace.phase(n - 1) == "pull"
        # one message per step: only the server's link is busy
        assert np.all((trace.send_to >= 0).sum(axis=1) == 1)


def test_one_gpu_simulations_move_nothing():
    for simulate in (
        C.simulate_ring_all_reduce,
        C.simulate_reduce_scatter,
        C.simulate_all_gather,
        C.simulate_parameter_server,
    ):
        trace = simulate([np.arange(5)])
        assert trace.steps == 0 and trace.bytes_sent_per_gpu == 0
        assert np.array_equal(trace.final[0], np.arange(5))
        assert trace.time_s(bandwidth=1e9, latency=1e-5) == 0


def test_1024_gpus_is_exact():
    # its speed is measured in benchmarks/bench_collectives.py (no test asserts wall-clock time)
    n = 1024
    arrays = [np.full(n, g, dtype=np.int64) for g in range(n)]  # one element per chunk
    trace = C.simulate_ring_all_reduce(arrays)
    assert np.all(trace.final == n * (n - 1) // 2)
    assert np.all(trace.bytes_sent_by_gpu == 2 * (n - 1) * 8)
    assert trace.contributor_counts(n - 1).diagonal().min() == n  # reduce-scatter done
    with pytest.raises(ConfigurationError, match="holds_matrix"):
        trace.holds_matrix(5)  # 1024^3 booleans: refused, with a hint
    assert trace.holds_matrix(5, chunk=0).shape == (n, n)


@pytest.mark.parametrize(
    "arrays, words",
    [
        ([], "empty"),
        (np.arange(4), "list of N arrays"),
        ([np.arange(4), np.arange(5)], "same length"),
        ([np.zeros((2, 2))], "1-D"),
        ([np.array(["a", "b"])], "dtype"),
        ([np.array([True, False])], "dtype"),
        ([np.array([1.0, np.nan])], "NaN"),
        ([np.array([1.0, np.inf])], "NaN or infinity"),
    ],
)
def test_invalid_simulation_inputs(arrays, words):
    with pytest.raises(ConfigurationError, match=words):
        C.simulate_ring_all_reduce(arrays)


def test_invalid_server_and_huge_traces():
    with pytest.raises(ConfigurationError, match="server"):
        C.simulate_parameter_server([np.arange(3)] * 2, server=2)
    with pytest.raises(ConfigurationError, match="too large"):
        C.simulate_ring_all_reduce(np.zeros((4096, 1)))


def test_2d_array_input_and_readonly_record():
    trace = C.simulate_ring_all_reduce(np.arange(12).reshape(3, 4))
    assert np.array_equal(trace.final[0], np.arange(12).reshape(3, 4).sum(axis=0))
    with pytest.raises(ValueError):
        trace.final[0, 0] = 1
    assert "1024" not in repr(trace) and "ring all-reduce" in repr(trace)
    assert math.isclose(trace.size_bytes, 4 * 8)


# ----------------------------------------------------------------------------------------
# Renamed keywords (issue 13): gpus= for the GPU count, size= for the message size


@pytest.mark.parametrize(
    "call, old, new",
    [
        (C.ring_all_reduce_time, dict(size_bytes=4e9, n=8, bandwidth=50e9), dict(size=4e9, gpus=8, bandwidth=50e9)),
        (C.bus_factor, dict(op="all-reduce", n=8), dict(op="all-reduce", gpus=8)),
        (
            C.bus_bandwidth,
            dict(op="all-reduce", size="4 GB", time="10 ms", n=8),
            dict(op="all-reduce", size="4 GB", time="10 ms", gpus=8),
        ),
        (C.double_binary_tree, dict(n=6), dict(gpus=6)),
    ],
)
def test_old_keyword_names_warn_and_give_the_same_answer(call, old, new):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new names raise no warning at all
        want = call(**new)
    with pytest.warns(DeprecationWarning, match=r"is deprecated; use (gpus|size)="):
        got = call(**old)
    np.testing.assert_equal(got, want)


def test_old_and_new_keyword_together_is_refused():
    with pytest.raises(ConfigurationError, match="give gpus= only"):
        C.bus_factor("all-reduce", gpus=8, n=8)


def test_every_op_and_algorithm_has_exactly_one_formula():
    listed = {(op, algorithm) for op in C.OPS for algorithm in C.ALGORITHMS[op]}
    assert set(C.FORMULAS) == listed
    for (op, algorithm), formula in C.FORMULAS.items():
        assert formula.__doc__, f"{op} {algorithm}: the formula function states its formula and source"


@pytest.mark.parametrize("n", [2, 3, 8])
def test_bytes_so_far_grow_by_one_chunk_per_ring_step(n):
    # ring all-reduce of n equal chunks of 8 bytes (one int64 each): every GPU sends and receives one chunk in each
    # of the 2(n-1) steps, so after step k it has sent and received 8k bytes, 2(n-1) x 8 in all = 2(n-1)/n x M
    arrays = [np.full(n, g, dtype=np.int64) for g in range(n)]
    trace = C.simulate_ring_all_reduce(arrays)
    sent, received = trace.bytes_so_far(n - 1)
    assert sent.tolist() == received.tolist() == [8 * k for k in range(2 * (n - 1) + 1)]
    with pytest.raises(ConfigurationError, match="gpu="):
        trace.bytes_so_far(n)


def test_the_gpu_count_is_gpus_and_n_still_works_with_a_warning():
    cost = C.collective_cost("all-reduce", "1 GB", 8, link="nvlink4")
    trace = C.simulate_ring_all_reduce([np.arange(4) for _ in range(4)])
    assert cost.gpus == 8 and trace.gpus == 4 and cost.to_dict()["gpus"] == 8
    with pytest.warns(DeprecationWarning, match="CollectiveCost.gpus"):
        assert cost.n == 8
    with pytest.warns(DeprecationWarning, match="CollectiveTrace.gpus"):
        assert trace.n == 4
