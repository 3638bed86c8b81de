"""distlab.collectives.placed: one collective on a placed group (ranks on nodes, the node's links, the fabric)."""

import numpy as np
import pytest

from distlab import collectives, hardware, production
from distlab.collectives import placed
from distlab.errors import ConfigurationError, DistlabError

GB = 1e9


def test_placement_of_each_kind_by_hand():
    # nodes of 8: 1 member (nothing to do); 8 x stride 1 = one node (ring); 32 x stride 1 = 4 nodes of 8
    # (hierarchical); stride 8 = one member per node (fabric ring); 12 x stride 1 = 8 on node 0, 4 on node 1
    local, nodes, code = placed.placement_array([1, 8, 32, 4, 12], [1, 1, 1, 8, 1], 8)
    assert local.tolist() == [1, 8, 8, 1, 8]
    assert nodes.tolist() == [1, 1, 4, 4, 1.5]
    assert [placed.PLACEMENTS[c] for c in code] == ["none", "ring", "hierarchical", "fabric ring", "uneven ring"]


def test_times_of_each_kind_by_hand():
    M, B, b, a, x = 1.6 * GB, 100 * GB, 50 * GB, 2e-6, 10e-6
    t = placed.placed_time_array("all-reduce", M, [8, 16, 4, 12], [1, 1, 8, 1], 8, B, a, b, x)
    # ring of 8 in a node: 14 alpha + 2 x 7/8 x 1.6 GB / 100 GB/s = 28 ms + 28 us
    assert t[0] == pytest.approx(14 * a + 2 * 7 / 8 * M / B, rel=1e-12)
    # hierarchical over 2 nodes: the same ring of 8, plus a 2-node ring of M / 8 at 50 GB/s: 2 x 1/2 x 0.2 GB / b
    assert t[1] == pytest.approx(14 * a + 2 * 7 / 8 * M / B + 2 * x + 2 * 1 / 2 * (M / 8) / b, rel=1e-12)
    # one member on each of 4 nodes: a ring of 4 on the fabric
    assert t[2] == pytest.approx(6 * x + 2 * 3 / 4 * M / b, rel=1e-12)
    # 12 members split 8 + 4: one flat ring, each of its 22 steps as slow as a fabric hop
    assert t[3] == pytest.approx(22 * x + 2 * 11 / 12 * M / b, rel=1e-12)
    # a reduce-scatter or all-gather is half of each (its reduce-scatter or all-gather phases)
    for op in ("reduce-scatter", "all-gather"):
        half = placed.placed_time_array(op, M, [8, 16, 4, 12], [1, 1, 8, 1], 8, B, a, b, x)
        assert np.allclose(half, t / 2, rtol=1e-14)


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
@pytest.mark.parametrize("nodes", [2, 4, 16])
def test_placed_collective_equals_the_layout_built_from_mesh(tp, nodes):
    # production.dp_all_reduce builds the DP group from distlab.mesh's real rank layout and prices the hierarchical
    # algorithm from the members it finds on each node: an independent path to the same physics. On a non-blocking
    # fabric every transfer gets the full port share, so the two must agree exactly
    cl = hardware.cluster("dgx-h100", nodes, "ib-ndr")
    M = 2.5 * GB
    layout = production.dp_all_reduce(cl, M, tp=tp)
    ours = placed.placed_collective("all-reduce", M, cl.gpus // tp, cl, stride=tp)
    assert ours.time_s == pytest.approx(layout.time_s, rel=1e-12)
    assert ours.intra_s == pytest.approx(layout.intra_s, rel=1e-12)
    assert ours.local == layout.local_members
    assert ours.nodes == layout.nodes
    assert ours.algorithm == ("fabric ring" if tp == 8 else "hierarchical")


def test_the_step_model_calls_the_placed_collective():
    from distlab import training

    rng = np.random.default_rng(1)
    n = rng.choice([1, 2, 3, 8, 12, 32, 512], 500).astype(float)
    stride = rng.choice([1, 2, 4, 8, 16], 500).astype(float)
    size = rng.uniform(1e3, 1e10, 500)
    args = (8, 450 * GB, 3e-6, 50 * GB, 9.6e-6)
    assert np.array_equal(
        training.group_all_reduce_time_array(size, n, stride, *args),
        placed.placed_time_array("all-reduce", size, n, stride, *args),
    )


def test_the_nodes_nics_work_together_dgx_a100():
    # DGX A100: 8 x HDR (25 GB/s each per direction). In the hierarchical all-reduce each of a node's 8 GPUs sends
    # its M / 8 through its own NIC, so the inter-node phase moves M per node at 8 x 25 = 200 GB/s: over k nodes its
    # time is 2 (k-1)/k x (M / 8) / 25 GB/s, a bus bandwidth (nccl-tests: 2 (N-1)/N M / t over N = 8 k GPUs) that
    # tends to 200 GB/s. NCCL's maintainers measure about 192 GB/s all-reduce bus bandwidth on this node
    # (NVIDIA/nccl issue 812): the NICs are used together; one NIC alone could give at most 25 GB/s.
    k, M = 64, 8 * GB
    c = placed.placed_collective("all-reduce", M, 8 * k, "dgx-a100", nodes=k)
    assert c.algorithm == "hierarchical"
    inter_only = 2 * (k - 1) / k * (M / 8) / (25 * GB)
    assert c.inter_s == pytest.approx(inter_only + 2 * (k - 1) * 9.6e-6, rel=1e-12)
    n = 8 * k
    inter_bus = 2 * (n - 1) / n * M / c.inter_s
    assert 192 * GB < inter_bus <= 200 * GB
    # the strawman (every GPU's ring through its own NIC, nothing on NVLink) reaches only one NIC's 25 GB/s
    straw = placed.flat_ring_strawman_time("all-reduce", M, n, 25 * GB, 9.6e-6)
    assert 2 * (n - 1) / n * M / straw < 25 * GB


def test_sent_bytes_by_link():
    # all-gather of M over 32 GPUs on 4 nodes: 7/8 M on NVLink, 3/4 x M / 8 on the fabric per GPU
    M = 400e6
    c = placed.placed_collective("all-gather", M, 32, "dgx-h100", nodes=4)
    assert c.intra_sent_bytes == pytest.approx(7 / 8 * M)
    assert c.inter_sent_bytes == pytest.approx(3 / 4 * M / 8)


def test_all_to_all_runs_both_exchanges_at_once():
    # 16 ranks, 8 per node: 7 intra steps of alpha plus 58.7 MB at 450 GB/s; 8 inter steps plus 67.1 MB at 50 GB/s
    t = placed.placed_all_to_all_time_array(58.7e6, 67.1e6, 16, 8, 450 * GB, 1e-6, 50 * GB, 5e-6)
    assert float(t) == pytest.approx(max(7e-6 + 58.7e6 / 450e9, 8 * 5e-6 + 67.1e6 / 50e9), rel=1e-12)
    inside = placed.placed_all_to_all_time_array(58.7e6, 0.0, 8, 8, 450 * GB, 1e-6, 50 * GB, 5e-6)
    assert float(inside) == pytest.approx(7e-6 + 58.7e6 / 450e9, rel=1e-12)


@pytest.mark.parametrize(
    "call",
    [
        lambda: placed.placed_collective("broadcast", 1e9, 8, "dgx-h100"),
        lambda: placed.placed_collective("all-reduce", -1, 8, "dgx-h100"),
        lambda: placed.placed_collective("all-reduce", 1e9, 64, "dgx-h100", nodes=2),
        lambda: placed.placed_collective("all-reduce", 1e9, 0, "dgx-h100"),
        lambda: placed.placed_time_array("all-to-all", 1e9, 8, 1, 8, 1e11, 0, 1e10, 0),
        lambda: placed.placed_time_array("all-reduce", [1e9, 2e9], [8, 8, 8], 1, 8, 1e11, 0, 1e10, 0),
    ],
)
def test_bad_input_gets_our_error(call):
    with pytest.raises(DistlabError):
        call()


def test_a_link_no_group_uses_is_checked_but_not_priced():
    # 8 ranks, stride 1, on nodes of 8: one node, the fabric never crossed, so a fabric of 0 B/s leaves the ring of 8
    # at 2 x 7/8 x 1.6 GB / 100 GB/s = 28 ms (the all-reduce used to refuse the unused fabric ring's infinite time)
    t = placed.placed_time_array("all-reduce", 1.6 * GB, 8, 1, 8, 100 * GB, 0.0, 0.0, 0.0)
    assert float(t) == pytest.approx(2 * 7 / 8 * 1.6 * GB / (100 * GB), rel=1e-12)
    # a negative or NaN fabric bandwidth is still refused, used or not
    for bad in (-1.0, float("nan")):
        with pytest.raises(ConfigurationError, match="bandwidth"):
            placed.placed_time_array("all-reduce", 1.6 * GB, 8, 1, 8, 100 * GB, 0.0, bad, 0.0)


def test_exported_from_collectives():
    assert collectives.placed_collective is placed.placed_collective
    assert issubclass(ConfigurationError, DistlabError)


@pytest.mark.parametrize("nodes", [2, 4, 16])
def test_lesson_2_hierarchical_closed_form_is_the_placed_collective(nodes):
    # lesson 2 §6 prices the hierarchical all-reduce with collective_cost's closed form (NVLink 4 inside, NDR across);
    # the placed collective on the same DGX H100 nodes must give the same time and bytes
    M = 14 * GB
    closed = collectives.collective_cost(
        "all-reduce", M, 8 * nodes, algorithm="hierarchical", link="nvlink4", gpus_per_node=8, inter_link="ib-ndr"
    )
    ours = placed.placed_collective("all-reduce", M, 8 * nodes, hardware.cluster("dgx-h100", nodes, "ib-ndr"))
    assert ours.algorithm == "hierarchical"
    assert ours.time_s == pytest.approx(closed.time_s, rel=1e-12)
    assert ours.intra_sent_bytes + ours.inter_sent_bytes == pytest.approx(closed.bytes_sent_per_gpu, rel=1e-12)
