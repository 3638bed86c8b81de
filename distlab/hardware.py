"""Hardware catalogs: accelerators, links, nodes and clusters, every figure with its source.

Every figure is a plain float in an SI base unit: bytes, bytes per second, FLOP per
second, seconds. Memory sizes are the datasheet figure read as decimal GB (80 GB =
80e9 bytes, the number a student sees on the datasheet; the physical HBM is often
binary GiB, and the memory a program can use is a little less).

Conventions that datasheets do not share, fixed here once:

- Peak FLOP/s are DENSE. NVIDIA prints tensor-core figures "with sparsity" (2:4
  structured sparsity, twice the dense rate); we store half of those and say so in
  `source`. AMD prints the dense figure directly.
- `fp64` is the FP64 matrix (tensor-core) peak, `fp32` the non-tensor FP32 peak,
  `tf32` the TF32 tensor-core peak.
- Link bandwidths are PER DIRECTION: NVLink "900 GB/s" on a datasheet is both
  directions added, so a GPU sends 450 GB/s. Intra-node figures are per GPU; network
  figures are per NIC port.
- Link latencies are alpha in an alpha-beta model: a typical per-message (per ring
  step) software + hardware latency. They are estimates, not measurements.
"""

from __future__ import annotations

import numbers
import re
from dataclasses import dataclass
from typing import Mapping

from ._catalog import lookup
from .errors import ConfigurationError, UnknownNameError
from .hardware_catalog import ACCELERATORS, LINKS
from .hardware_parts import LINK_KINDS, PRECISIONS, Accelerator, Link, text_field
from .units import (
    format_rate,
    positive,
    positive_int,
)

# ---------------------------------------------------------------------------------------
# Node and cluster


#: Host CPU vendors a Node may name (Node.host_cpu): NCCL's tuning model tells x86 Intel and x86 AMD apart and
#: treats every other CPU as one (collectives.placed.NCCL_NET_OVERHEAD_S, keyed by these names). Lesson 7 §8.
HOST_CPUS = ("intel", "amd", "other")


@dataclass(frozen=True)
class Node:
    """A server: gpus_per_node accelerators joined by intra_link, and nics_per_node NICs of type nic; host_cpu the
    vendor of its host CPUs (HOST_CPUS; 'other' when not stated), which sets how fast NCCL's proxy posts network
    operations (collectives.placed.ring_latency_array's step floor). nvlink_domain: the GPUs the intra link reaches,
    a whole number of servers (default gpus_per_node: the server is the domain); a GB200 NVL72 compute tray holds 4
    GPUs and 4 NICs, and NVLink switches join 18 trays, 72 GPUs (Cluster.nvlink_domain, Lesson 7 §3).
    host_link_bandwidth: B/s per direction each GPU reaches host (CPU) memory at while every GPU of the node copies at
    once (activation offloading, distlab.step.offload), host_link_name the link, host_link_source its citation; None
    where no figure is sourced (an offload request there is refused, never guessed). Lesson 7 §2."""

    name: str
    accelerator: Accelerator
    gpus_per_node: int
    intra_link: Link
    nic: Link
    nics_per_node: int
    source: str = "user-defined"
    host_cpu: str = "other"
    nvlink_domain: int | None = None
    host_link_bandwidth: float | None = None
    host_link_name: str = ""
    host_link_source: str = ""

    def __post_init__(self):
        object.__setattr__(self, "name", text_field(self.name, "node name"))
        object.__setattr__(self, "accelerator", accelerator(self.accelerator))
        object.__setattr__(self, "gpus_per_node", positive_int(self.gpus_per_node, "gpus_per_node"))
        object.__setattr__(self, "intra_link", _link_of_kind(self.intra_link, "intra-node", "intra_link"))
        object.__setattr__(self, "nic", _link_of_kind(self.nic, "inter-node", "nic"))
        object.__setattr__(self, "nics_per_node", positive_int(self.nics_per_node, "nics_per_node"))
        object.__setattr__(self, "source", text_field(self.source, f"{self.name} source"))
        if not isinstance(self.host_cpu, str) or self.host_cpu not in HOST_CPUS:
            raise ConfigurationError(f"host_cpu={self.host_cpu!r}; valid: {', '.join(HOST_CPUS)}")
        g = self.gpus_per_node
        domain = g if self.nvlink_domain is None else positive_int(self.nvlink_domain, "nvlink_domain")
        if domain % g:
            raise ConfigurationError(
                f"nvlink_domain={domain} must be a whole number of nodes of {g} GPUs (gpus_per_node); "
                f"e.g. {g} (the node alone) or {18 * g}"
            )
        object.__setattr__(self, "nvlink_domain", domain)
        bw = self.host_link_bandwidth
        if bw is not None and (not isinstance(bw, numbers.Real) or isinstance(bw, bool) or not bw > 0):
            raise ConfigurationError(
                f"host_link_bandwidth={bw!r} must be None (not sourced) or a positive number of B/s per direction"
            )
        if bw is not None and not (self.host_link_name and self.host_link_source):
            raise ConfigurationError("host_link_bandwidth needs host_link_name and host_link_source (its citation)")

    @property
    def memory_bytes(self) -> float:
        """Accelerator memory of the whole node (B)."""
        return self.gpus_per_node * self.accelerator.memory_bytes

    @property
    def network_bandwidth(self) -> float:
        """All NICs of the node together, per direction (B/s)."""
        return self.nics_per_node * self.nic.bandwidth

    def describe(self) -> str:
        domain = "" if self.nvlink_domain == self.gpus_per_node else f" reaching {self.nvlink_domain} GPUs"
        return (
            f"{self.name}: {self.gpus_per_node}x {self.accelerator.name}, {self.intra_link.name} "
            f"({format_rate(self.intra_link.bandwidth)}/GPU/direction{domain}), "
            f"{self.nics_per_node}x {self.nic.name} ({format_rate(self.nic.bandwidth)} each)"
        )


def _link_of_kind(value, kind: str, role: str) -> Link:
    found = link(value)
    if found.kind != kind:
        valid = ", ".join(name for name, item in LINKS.items() if item.kind == kind)
        raise ConfigurationError(f"{role}={found.name!r} is an {found.kind} link; {role} needs an {kind} link: {valid}")
    return found


def _bool_types() -> tuple:
    """NumPy's bool type (a widget or an array may hand one over); no NumPy import at module load."""
    import numpy

    return (numpy.bool_,)


def _below_2_to_1023(value: numbers.Real) -> bool:
    """|value| < 2**1023: a finite number, not near a float's overflow (an int past a float, 10**400, is not)."""
    try:
        return abs(float(value)) < 2**1023
    except OverflowError:
        return False


def _oversubscription(value) -> float:
    """A ratio >= 1: a number, or a string such as '2:1'."""
    text = value
    if isinstance(value, str):
        match = re.fullmatch(r"\s*([0-9.eE+-]+)\s*(?::\s*([0-9.eE+-]+)\s*)?", value)
        try:
            if match is None:
                raise ValueError(value)
            value = float(match.group(1)) / (float(match.group(2)) if match.group(2) else 1.0)
        except (ValueError, ZeroDivisionError):
            raise ConfigurationError(
                f"oversubscription={text!r} is not a ratio; give a number >= 1 such as 2 or '2:1'"
            ) from None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not _below_2_to_1023(value):
        raise ConfigurationError(f"oversubscription={text!r} must be a finite number >= 1 (1 = non-blocking)")
    if value < 1:
        raise ConfigurationError(
            f"oversubscription={text!r} must be >= 1: 1 is a non-blocking fabric, 2 means 2:1 "
            f"(half the bandwidth per port when every node sends across the fabric at once)"
        )
    return float(value)


@dataclass(frozen=True)
class Cluster:
    """`nodes` identical nodes joined by a network `fabric` (default: the node's NIC link).

    `oversubscription` k >= 1 is the taper (k:1) between the leaf switches and the spine: when
    every node sends across the spine at once, each port gets on average 1/k of its line rate.

    `rail_optimized`: the NIC of GPU i of every node is cabled to leaf switch i ("rail" i), as in
    NVIDIA's DGX SuperPOD reference architecture (DGX H100: eight rails, one leaf per rail in each
    scalable unit). Traffic between GPUs of the same local rank then crosses one leaf and never
    the tapered spine; traffic between different local ranks does. Without rails (a leaf per
    rack of nodes, a job's nodes spread over leaves) all inter-node traffic is taken to cross the
    spine; `inter_node_bandwidth_per_gpu` prices the worst case, every GPU sending at once, and
    `fabric_bandwidth_per_gpu(same_local_rank, flows_per_node)` the share of one transfer when
    fewer leave each node.
    """

    node: Node
    nodes: int
    fabric: Link | None = None
    oversubscription: float = 1.0
    rail_optimized: bool = False

    def __post_init__(self):
        the_node = node(self.node)
        object.__setattr__(self, "node", the_node)
        object.__setattr__(self, "nodes", positive_int(self.nodes, "nodes"))
        fabric = the_node.nic if self.fabric is None else _link_of_kind(self.fabric, "inter-node", "fabric")
        object.__setattr__(self, "fabric", fabric)
        object.__setattr__(self, "oversubscription", _oversubscription(self.oversubscription))
        if not isinstance(self.rail_optimized, (bool, *_bool_types())):
            raise ConfigurationError(f"rail_optimized={self.rail_optimized!r} must be True or False")
        object.__setattr__(self, "rail_optimized", bool(self.rail_optimized))

    @property
    def name(self) -> str:
        return f"{self.nodes}x {self.node.name}"

    @property
    def gpus(self) -> int:
        """All GPUs: nodes x gpus_per_node."""
        return self.nodes * self.node.gpus_per_node

    @property
    def gpus_per_node(self) -> int:
        return self.node.gpus_per_node

    @property
    def nvlink_domain(self) -> int:
        """GPUs of one NVLink domain as the step model places ranks (its `gpus_per_node`, the g of
        collectives.placed): the job's nodes split into equal shares of at most node.nvlink_domain GPUs, the largest
        whole number of nodes that divides them, as a scheduler hands a job equal shares of racks (an assumption: the
        placement rules price equal shares; ranks fill one share, then the next). A group inside a share runs on the
        intra link; one spanning shares crosses the NICs between them. A server-sized domain is the node itself.
        Lesson 7 §3.

        GB200 NVL72 trays (4 GPUs, 18 per domain): 2 trays -> 8; 16 -> 64; 64 trays (256 GPUs, 3.6 racks of 72)
        -> 4 shares of 16 trays, 64; a DGX H100 cluster -> 8.

        >>> [cluster('gb200-nvl72', n).nvlink_domain for n in (2, 16, 64)], cluster('dgx-h100', 4).nvlink_domain
        ([8, 64, 64], 8)
        """
        g = self.node.gpus_per_node
        per = int(self.node.nvlink_domain or g) // g
        return g * max(t for t in range(1, min(per, self.nodes) + 1) if self.nodes % t == 0)

    @property
    def accelerator(self) -> Accelerator:
        return self.node.accelerator

    @property
    def intra_link(self) -> Link:
        return self.node.intra_link

    @property
    def _fabric(self) -> Link:
        """The fabric, never None once built (__post_init__ puts the node's NIC in place of None)."""
        assert self.fabric is not None
        return self.fabric

    @property
    def port_bandwidth(self) -> float:
        """Per-direction rate of one NIC port on this fabric: min(NIC, fabric) (B/s)."""
        return min(self.node.nic.bandwidth, self._fabric.bandwidth)

    @property
    def inter_node_bandwidth_per_gpu(self) -> float:
        """Average per-direction bandwidth one GPU gets across the fabric when all GPUs send (B/s).

        = port bandwidth x nics_per_node / gpus_per_node / oversubscription, where the port
        bandwidth is the fabric's per-port rate (capped by the NIC's own rate when the NIC
        is slower). A node's NICs are shared by its GPUs; a k:1 oversubscribed fabric
        delivers on average 1/k of that when every node sends across it at once. DGX H100 on
        a non-blocking NDR fabric: 50 GB/s x 8 / 8 / 1 = 50 GB/s per GPU. PCIe limits
        between GPU and NIC are ignored.
        """
        return self.port_bandwidth * self.node.nics_per_node / self.node.gpus_per_node / self.oversubscription

    def fabric_bandwidth_per_gpu(self, same_local_rank: bool = False, flows_per_node=None) -> float:
        """Per-direction bandwidth of one transfer from a GPU to a GPU on another node (B/s).

        Port share P = port bandwidth x nics_per_node / gpus_per_node (a node's NICs shared by its
        GPUs). Between GPUs of the same local rank on a rail-optimized fabric the traffic stays on
        that rail's leaf switch: P, no taper. Any other inter-node transfer crosses the spine. A
        k:1 leaf has uplinks for 1/k of its ports, i.e. g/k of a node's g ports; with f transfers
        leaving each node across the spine at once, each gets

            P x min(1, g / (k f)).

        flows_per_node: f; None means every GPU of every node sends (f = g, the full taper P/k =
        inter_node_bandwidth_per_gpu). Example: one flat ring through 4 DGX H100 nodes (tp = 1)
        crosses each node boundary once, f = 1 <= 8/3, so its hops run at the full 50 GB/s even on
        a 3:1 fabric. On a rail-optimized fabric the ports of rail r all hang off one leaf: a
        transfer leaving local rank r across the spine shares rail r's uplinks with local rank r of
        every other node, and when each node sends one such transfer that leaf's ports all send:
        the full taper, P / k, whatever f is. Source: NVIDIA DGX SuperPOD reference architecture
        (DGX H100), compute fabric: rail-optimized, one leaf switch per rail in each scalable unit.
        """
        share = self.inter_node_bandwidth_per_gpu * self.oversubscription
        if self.rail_optimized:
            return share if same_local_rank else share / self.oversubscription
        g = self.node.gpus_per_node
        f = g if flows_per_node is None else positive(flows_per_node, "", "flows_per_node")
        return share * min(1.0, g / (self.oversubscription * f))

    def peak(self, precision: str) -> float:
        """Dense peak FLOP/s of all GPUs together in `precision`."""
        return self.gpus * self.accelerator.peak(precision)

    def describe(self) -> str:
        taper = "non-blocking" if self.oversubscription == 1 else f"{self.oversubscription:g}:1 oversubscribed"
        if self.rail_optimized:
            taper += ", rail-optimized"
            if self.oversubscription != 1:
                return (
                    f"{self.name} = {self.gpus} x {self.accelerator.name}; fabric {self._fabric.name} ({taper}), "
                    f"{format_rate(self.fabric_bandwidth_per_gpu(True))} per GPU along a rail, "
                    f"{format_rate(self.inter_node_bandwidth_per_gpu)} across rails"
                )
        domain = "" if self.nvlink_domain == self.gpus_per_node else f"; NVLink domains of {self.nvlink_domain} GPUs"
        return (
            f"{self.name} = {self.gpus} x {self.accelerator.name}; fabric {self._fabric.name} ({taper}), "
            f"{format_rate(self.inter_node_bandwidth_per_gpu)} per GPU across nodes{domain}"
        )


# ---------------------------------------------------------------------------------------
# Lookups


def _find(catalog: Mapping, name, kind: str):
    """lookup() that also reads spaces and underscores as hyphens ('H100 SXM' -> 'h100-sxm')."""
    try:
        return lookup(catalog, name, kind)
    except UnknownNameError:
        if isinstance(name, str):
            hyphenated = re.sub(r"[\s_]+", "-", name.strip().lower())
            if hyphenated in catalog:
                return catalog[hyphenated]
        raise


def accelerator(name) -> Accelerator:
    """The catalog Accelerator called `name` (case-insensitive); an Accelerator is returned as is.

    Lesson 1 §2 (capacity), Lesson 5 §4 and Lesson 7 §1 (peak FLOP/s).

    >>> accelerator('H100-SXM').peak('bf16')  # dense, no sparsity
    989400000000000.0
    """
    if isinstance(name, Accelerator):
        return name
    return _find(ACCELERATORS, name, "accelerator")


def link(name) -> Link:
    """The catalog Link called `name` (case-insensitive); a Link is returned as is.

    Lesson 2 §6 (NVLink against InfiniBand).

    >>> link('nvlink4').bandwidth, link('ib-ndr').bandwidth  # bytes/s per direction, per GPU
    (450000000000.0, 50000000000.0)
    """
    if isinstance(name, Link):
        return name
    return _find(LINKS, name, "link")


def node(name) -> Node:
    """The catalog Node called `name` (case-insensitive); a Node is returned as is.

    Lesson 6 §2 (placement on nodes).

    >>> node('dgx-h100').gpus_per_node
    8
    """
    if isinstance(name, Node):
        return name
    return _find(NODES, name, "node")


def cluster(node, nodes, fabric=None, oversubscription=1.0, rail_optimized=False) -> Cluster:
    """A Cluster of `nodes` nodes; node and fabric may be names or objects (fabric default: the node's NIC).

    Lesson 7 §3 (the fabric), Lesson 8 §2 (oversubscription and rails).

    >>> cluster('dgx-h100', 4).gpus
    32
    """
    return Cluster(node, nodes, fabric, oversubscription, rail_optimized)


#: Each GPU's copy rate to and from its Grace CPU's memory over NVLink-C2C while every GPU of a tray copies at once
#: (Node.host_link_bandwidth), one figure for both directions: the lower, measured. NVIDIA/Megatron-LM issue 6491
#: (comment of 2026-08-15), nvbandwidth's copy-engine tests on a 4-GPU GB300 tray: all_to_host 181.94-183.85 GB/s per
#: GPU, host_to_all 168.60-175.41 GB/s per GPU (one GPU alone: 211.5 to the GPU, 193.5 from it; Azure's
#: AI-benchmarking-guide measured a single GB300 at 211 / 193 and a single GB200 at 201 / 193 GB/s). The GB200 takes
#: the GB300's figure: the same Grace CPU and the same 900 GB/s NVLink-C2C per superchip (an assumption; no
#: all-GPU measurement of a GB200 was found). Before: 450 GB/s per direction read as shared by 2 GPUs, 225 GB/s.
#: Lesson 7 §8.
C2C_PER_GPU = 168.6e9
C2C_SOURCE = (
    "measured while every GPU of the tray copies at once: NVIDIA/Megatron-LM issue 6491 (comment of 2026-08-15), "
    "nvbandwidth on a 4-GPU GB300 tray: host_to_all 168.60-175.41 GB/s per GPU, all_to_host 181.94-183.85 GB/s per "
    "GPU; the lower, 168.6 GB/s, for both directions (one GPU alone reaches 211.5 and 193.5). NVIDIA's 900 GB/s "
    "NVLink-C2C per superchip (450 GB/s per direction) is shared by the superchip's two GPUs. A GB200 tray is taken "
    "at the GB300's figure (the same Grace and NVLink-C2C; no all-GPU measurement of a GB200 found)"
)

NODES: dict[str, Node] = {
    "dgx-a100": Node(
        "dgx-a100",
        ACCELERATORS["a100-80gb"],
        gpus_per_node=8,
        intra_link=LINKS["nvlink3"],
        nic=LINKS["ib-hdr"],
        nics_per_node=8,
        source="NVIDIA DGX A100 datasheet: the 640 GB system, 8x A100 80GB (a 320 GB system with 8x A100 40GB "
        "also exists), 6 NVSwitches, 600 GB/s NVLink per GPU; 8 single-port ConnectX-6 VPI 200 Gb/s HDR "
        "InfiniBand for compute (the storage/in-band ConnectX-6 ports are not counted); host: 2x AMD EPYC 7742 "
        "(datasheet: 'Dual AMD Rome 7742, 128 cores total'; NVIDIA's MLPerf Training v1.0 system description "
        "dgxa100_n256_ngc21.05_pytorch: 'host_processor_model_name': 'AMD EPYC 7742')",
        host_cpu="amd",
    ),
    "dgx-h100": Node(
        "dgx-h100",
        ACCELERATORS["h100-sxm"],
        gpus_per_node=8,
        intra_link=LINKS["nvlink4"],
        nic=LINKS["ib-ndr"],
        nics_per_node=8,
        source="NVIDIA DGX H100 datasheet: 8x H100 SXM 80GB, 4 NVSwitches, 900 GB/s NVLink per GPU; "
        "4 OSFP ports serving 8 single-port ConnectX-7 VPI, 400 Gb/s InfiniBand/Ethernet, for compute "
        "(the storage/in-band ports are not counted)",
    ),
    "dgx-h200": Node(
        "dgx-h200",
        ACCELERATORS["h200"],
        gpus_per_node=8,
        intra_link=LINKS["nvlink4"],
        nic=LINKS["ib-ndr"],
        nics_per_node=8,
        source="NVIDIA DGX H200 datasheet: 8x H200 SXM 141GB (1,128 GB in all), 4 NVSwitches, 900 GB/s NVLink per "
        "GPU; 4 OSFP ports serving 8 single-port ConnectX-7 VPI, 400 Gb/s InfiniBand/Ethernet, for compute (the "
        "storage/in-band ports are not counted): the DGX H100's board and network with H200 GPUs",
    ),
    "hgx-b200": Node(
        "hgx-b200",
        ACCELERATORS["b200"],
        gpus_per_node=8,
        intra_link=LINKS["nvlink5"],
        nic=LINKS["ib-ndr"],
        nics_per_node=8,
        source="NVIDIA HGX B200 / DGX B200 datasheets: 8x B200, 2 NVSwitches, 1.8 TB/s NVLink per GPU; the "
        "DGX B200 has 4 OSFP ports serving 8 single-port ConnectX-7 VPI, 400 Gb/s InfiniBand/Ethernet, one "
        "per GPU for compute (HGX systems from other vendors may differ)",
    ),
    "gb200-nvl72": Node(
        "gb200-nvl72",
        ACCELERATORS["gb200"],
        gpus_per_node=4,
        intra_link=LINKS["nvlink5"],
        nic=LINKS["ib-ndr"],
        nics_per_node=4,
        source="A compute tray of a GB200 NVL72 rack: 2 GB200 superchips (2 Grace CPUs, 4 Blackwell GPUs), 18 trays "
        "joined by 9 NVLink switch trays into one 72-GPU NVLink domain, 1.8 TB/s NVLink per GPU (NVIDIA GB200 NVL72 "
        "specifications: 72 GPUs, 36 Grace CPUs, 130 TB/s NVLink; S. Bekman, ML Engineering, compute/accelerator "
        "README note 23: 'with GB200 you will get a 4-GPU node'); 4 ConnectX-7 400 Gb/s NICs per tray, one per GPU "
        "(MLPerf Inference v6.1, Crusoe GB200-NVL72_GB200-186GB_aarch64x16 system description: "
        "'accelerators_per_node': 4, 'for each 4-GPU node: 4x ... [ConnectX-7 ...]'); Grace is Arm (host_cpu "
        "'other')",
        nvlink_domain=72,
        host_link_bandwidth=C2C_PER_GPU,
        host_link_name="NVLink-C2C",
        host_link_source=C2C_SOURCE,
    ),
    "gb300-nvl72": Node(
        "gb300-nvl72",
        ACCELERATORS["gb300"],
        gpus_per_node=4,
        intra_link=LINKS["nvlink5"],
        nic=LINKS["ib-xdr"],
        nics_per_node=4,
        source="A compute tray of a GB300 NVL72 rack: 2 Grace CPUs and 4 Blackwell Ultra GPUs on one board, 18 trays "
        "in one 72-GPU NVLink domain, 1.8 TB/s NVLink 5 per GPU (NVIDIA GB300 NVL72 specifications: 72 GPUs, 36 "
        "Grace CPUs, 130 TB/s NVLink); one ConnectX-8 SuperNIC per GPU, 800 Gb/s (NVIDIA GB300 NVL72 page: 72 "
        "ConnectX-8 SuperNICs per rack, 800 Gb/s each), so 4 per tray; Grace is Arm (host_cpu 'other')",
        nvlink_domain=72,
        host_link_bandwidth=C2C_PER_GPU,
        host_link_name="NVLink-C2C",
        host_link_source=C2C_SOURCE,
    ),
}


__all__ = [
    "PRECISIONS",
    "C2C_PER_GPU",
    "C2C_SOURCE",
    "HOST_CPUS",
    "LINK_KINDS",
    "Accelerator",
    "Link",
    "Node",
    "Cluster",
    "ACCELERATORS",
    "LINKS",
    "NODES",
    "accelerator",
    "link",
    "node",
    "cluster",
]
