"""An NVLink domain larger than the server (hardware.Node.nvlink_domain, hardware.Cluster.nvlink_domain): a GB200 /
GB300 NVL72 compute tray holds 4 GPUs and 4 NICs, and the rack's NVLink switches join 18 trays, 72 GPUs. The step
model reads the domain as its `gpus_per_node` (training.hardware_arguments), the fabric share stays the tray's.
Values derived by hand below; invariants: a domain equal to the node prices exactly as before, and growing the domain
along nested sizes never makes a step slower."""

import dataclasses

import pytest

from distlab import hardware as hw
from distlab import memory, planner, training
from distlab.collectives.placed import placed_collective
from distlab.errors import ConfigurationError

NVLINK5_BW, NVLINK_LAT = 900e9, 3.4e-6  # nvlink5: 1.8 TB/s bidirectional per GPU -> 900 GB/s per direction
NDR_BW, NET_LAT = 50e9, 9.6e-6  # ConnectX-7 400 Gb/s -> 50 GB/s per direction, one NIC per GPU
M = 1.6e9  # bytes all-reduced


def _tray_only(name="gb200-nvl72"):
    """The same tray with no NVLink beyond it (the NVL4-like case): nvlink_domain = gpus_per_node."""
    return dataclasses.replace(hw.node(name), name=f"{name}-tray-only", nvlink_domain=4)


@pytest.mark.parametrize("bad", [0, -4, 10, 2.5, "72", True])
def test_nvlink_domain_is_validated(bad):
    with pytest.raises(ConfigurationError, match="nvlink_domain"):
        dataclasses.replace(hw.node("gb200-nvl72"), nvlink_domain=bad)


def test_existing_nodes_are_their_own_domain():
    for name in ("dgx-a100", "dgx-h100", "dgx-h200", "hgx-b200"):
        node = hw.node(name)
        assert node.nvlink_domain == node.gpus_per_node == 8
        assert hw.cluster(name, 4).nvlink_domain == 8
    assert hw.node("gb200-nvl72").nvlink_domain == hw.node("gb300-nvl72").nvlink_domain == 72


def test_the_domain_a_job_gets():
    """Equal shares of racks, a whole number of trays each, at most 18 trays (72 GPUs)."""
    domain = {n: hw.cluster("gb200-nvl72", n).nvlink_domain for n in (1, 2, 16, 18, 36, 64, 19)}
    # 1 tray: 4; 2 trays (8 GPUs, smaller than a rack): one domain of 8; 16 trays: 64; 18: a full rack of 72;
    # 36 trays: 2 racks of 72; 64 trays (256 GPUs = 3.6 racks): 4 shares of 16 trays = 64 GPUs each;
    # 19 trays (a prime above 18): no equal shares of more than one tray, so each tray is its own domain (a limit of
    # the equal-share rule, stated in hardware.Cluster.nvlink_domain)
    assert domain == {1: 4, 2: 8, 16: 64, 18: 72, 36: 72, 64: 64, 19: 4}


def test_the_fabric_share_stays_the_trays():
    """Inter-node bandwidth per GPU = port x nics_per_node / gpus_per_node: 50 GB/s x 4 / 4 (GB200, ConnectX-7
    400 Gb/s), 100 GB/s x 4 / 4 (GB300, ConnectX-8 800 Gb/s), whatever the domain."""
    assert hw.cluster("gb200-nvl72", 64).inter_node_bandwidth_per_gpu == 50e9
    assert hw.cluster("gb300-nvl72", 64).inter_node_bandwidth_per_gpu == 100e9
    hw_args = training.hardware_arguments(hw.cluster("gb200-nvl72", 64), memory.precision_recipe("mixed"))
    assert hw_args["gpus_per_node"] == 64 and hw_args["inter_bw"] == 50e9 and hw_args["intra_bw"] == NVLINK5_BW
    dgx = training.hardware_arguments(hw.cluster("dgx-h100", 4), memory.precision_recipe("mixed"))
    assert dgx["gpus_per_node"] == 8


def test_eight_gpus_of_a_rack_all_reduce_on_nvlink():
    """8 GPUs on 2 trays of one rack: one ring over NVLink, 2 (n - 1) (alpha + M / (n B)) = 14 x (3.4 us + 1.6 GB /
    (8 x 900 GB/s)) = 14 x 225.62 us = 3.1587 ms. On trays without the rack's NVLink (domain 4) it is hierarchical:
    a ring over the tray's 4, 6 x (3.4 us + 1.6 GB / (4 x 900 GB/s)) = 2.6871 ms, and a ring of M / 4 over the 2
    trays at 50 GB/s, 2 x (9.6 us + 0.4 GB / (2 x 50 GB/s)) = 8.0192 ms: 10.706 ms."""
    rack = placed_collective("all-reduce", M, 8, hw.cluster("gb200-nvl72", 2))
    assert rack.algorithm == "ring" and rack.time_s == pytest.approx(14 * (NVLINK_LAT + M / (8 * NVLINK5_BW)))
    assert rack.time_s == pytest.approx(3.1587e-3, rel=1e-4)
    trays = placed_collective("all-reduce", M, 8, hw.cluster(_tray_only(), 2))
    by_hand = 6 * (NVLINK_LAT + M / (4 * NVLINK5_BW)) + 2 * (NET_LAT + M / 4 / (2 * NDR_BW))
    assert trays.algorithm == "hierarchical" and trays.time_s == pytest.approx(by_hand)
    assert trays.time_s == pytest.approx(10.706e-3, rel=1e-4)


def test_256_gpus_are_four_shares_of_64():
    """All 256 GPUs of 64 trays (3.6 racks) in one group: hierarchical over 4 domains of 64. Inside a domain a ring
    over 64 on NVLink, 126 x (3.4 us + 1.6 GB / (64 x 900 GB/s)) = 3.9284 ms; across, a ring of M / 64 over 4
    domains through the NICs, 6 x (9.6 us + 25 MB / (4 x 50 GB/s)) = 0.8076 ms. Trays alone: 6 x (3.4 us + 1.6 GB /
    (4 x 900 GB/s)) = 2.6871 ms plus 126 x (9.6 us + 0.4 GB / (64 x 50 GB/s)) = 16.9596 ms."""
    big = placed_collective("all-reduce", M, 256, hw.cluster("gb200-nvl72", 64))
    assert (big.algorithm, big.local, big.nodes) == ("hierarchical", 64, 4.0)
    assert big.intra_s == pytest.approx(126 * (NVLINK_LAT + M / (64 * NVLINK5_BW)))
    assert big.inter_s == pytest.approx(6 * (NET_LAT + M / 64 / (4 * NDR_BW)))
    assert big.time_s == pytest.approx(4.7360e-3, rel=1e-4)
    trays = placed_collective("all-reduce", M, 256, hw.cluster(_tray_only(), 64))
    assert trays.time_s == pytest.approx(2.6871e-3 + 16.9596e-3, rel=1e-4)
    # a group straddling the domains crosses the NICs: 4 ranks 64 apart, one per domain, a ring through the fabric,
    # 6 x (9.6 us + 1.6 GB / (4 x 50 GB/s)) = 48.058 ms
    spread = placed_collective("all-reduce", M, 4, hw.cluster("gb200-nvl72", 64), stride=64)
    assert spread.algorithm == "fabric ring" and spread.intra_s == 0.0
    assert spread.time_s == pytest.approx(6 * (NET_LAT + M / (4 * NDR_BW)))


LAYOUTS = [
    dict(tp=1, pp=1, zero=1),
    dict(tp=1, pp=1, zero=3),
    dict(tp=2, pp=1, zero=1),
    dict(tp=4, pp=2, zero=1, chunks=1),
    dict(tp=1, pp=4, zero=1),
]


def _step(node, nodes, layout):
    est = training.estimate(
        "llama2-7b", hw.cluster(node, nodes), global_batch=64, seq_len=4096, micro_batch_size=1, **layout
    )
    return est.step_time_s


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_domain_equal_to_the_node_prices_exactly_as_before(layout):
    """Stating nvlink_domain = gpus_per_node changes nothing, on a DGX H100 and on a B200 node."""
    for name in ("dgx-h100", "hgx-b200"):
        same = dataclasses.replace(hw.node(name), name=f"{name}-stated", nvlink_domain=8)
        assert _step(same, 4, layout) == _step(name, 4, layout)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_growing_the_domain_never_slows_a_step(layout):
    """On 16 trays (64 GPUs), domains 4 -> 8 -> 16 -> 32 -> 64 (each a multiple of the last, so a group split evenly
    by one is split evenly by the next): the step time never rises. Between sizes that are not multiples of each
    other the placement rules (a group split unevenly runs a flat ring over the NICs) can price the larger domain
    slower; the NVL72 racks avoid that by taking equal shares (Cluster.nvlink_domain)."""
    times = [
        _step(dataclasses.replace(hw.node("gb200-nvl72"), nvlink_domain=d), 16, layout) for d in (4, 8, 16, 32, 64)
    ]
    assert all(b <= a * (1 + 1e-12) for a, b in zip(times, times[1:])), times
    assert times[-1] < times[0] or layout["tp"] * layout["pp"] == 4  # NVLink replaces the NICs somewhere
    # 8 GPUs: a 72-GPU domain prices as a domain of 8
    assert _step("gb200-nvl72", 2, {**layout, "tp": min(layout["tp"], 2)}) == _step(
        dataclasses.replace(hw.node("gb200-nvl72"), nvlink_domain=8), 2, {**layout, "tp": min(layout["tp"], 2)}
    )


def test_tensor_parallelism_spans_trays_inside_the_domain():
    """tp 8 and 16 are refused on trays of 4 and accepted in a 64-GPU domain; the planner enumerates them."""
    assert training.estimate("llama2-7b", hw.cluster("gb200-nvl72", 16), global_batch=64, tp=16).config["tp"] == 16
    with pytest.raises(ConfigurationError, match="4 GPUs of a node"):
        training.estimate("llama2-7b", hw.cluster(_tray_only(), 16), global_batch=64, tp=8)
    with pytest.raises(ConfigurationError, match="64 GPUs of an NVLink domain"):
        training.estimate("llama2-7b", hw.cluster("gb200-nvl72", 64), global_batch=256, tp=128)
    plan = planner.plan("llama2-7b", "gb200-nvl72", nodes=4, global_batch=64)
    assert 8 in set(plan.columns["tp"].tolist())
