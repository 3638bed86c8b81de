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
from .units import (
    BYTES,
    BYTES_PER_SECOND,
    FLOP_PER_SECOND,
    SECONDS,
    Q_,
    format_bytes,
    format_rate,
    format_seconds,
    non_negative,
    positive,
    positive_int,
)

#: Precision keys a peak FLOP/s figure may carry, widest first.
PRECISIONS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp4")
#: Kinds of link.
LINK_KINDS = ("intra-node", "inter-node")


class _FrozenDict(dict):
    """A dict that refuses to change, so a frozen dataclass stays frozen (hashable, picklable)."""

    def _refuse(self, *args, **kwargs):
        raise TypeError("peak_flops is read-only; build a new Accelerator (dataclasses.replace) instead")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _refuse
    __ior__ = _refuse

    def __hash__(self):
        return hash(frozenset(self.items()))

    def __reduce__(self):
        return (type(self), (dict(self),))


def _text(value, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"{name}={value!r} must be a non-empty string")
    return value.strip()


# ---------------------------------------------------------------------------------------
# Accelerator


@dataclass(frozen=True)
class Accelerator:
    """One GPU or accelerator: dense peak FLOP/s per precision, memory (B) and memory bandwidth (B/s).

    Figures may be given as plain numbers in base units, pint Quantities or strings such
    as "80 GB" and "3.35 TB/s"; they are stored as floats in B, B/s and FLOP/s.
    """

    name: str
    peak_flops: Mapping[str, float]
    memory_bytes: float
    memory_bandwidth: float
    source: str = "user-defined"

    def __post_init__(self):
        object.__setattr__(self, "name", _text(self.name, "accelerator name"))
        if not isinstance(self.peak_flops, Mapping) or not self.peak_flops:
            raise ConfigurationError(
                f"peak_flops of {self.name} must be a non-empty mapping such as "
                f"{{'bf16': 989.4e12}}; keys among {', '.join(PRECISIONS)}"
            )
        flops = {}
        for key, value in self.peak_flops.items():
            precision = key.strip().lower() if isinstance(key, str) else key
            if precision not in PRECISIONS:
                raise ConfigurationError(
                    f"peak_flops of {self.name} has unknown precision {key!r}; valid: {', '.join(PRECISIONS)}"
                )
            flops[precision] = positive(value, FLOP_PER_SECOND, f"{self.name} peak_flops[{precision!r}]")
        ordered = _FrozenDict((p, flops[p]) for p in PRECISIONS if p in flops)
        object.__setattr__(self, "peak_flops", ordered)
        object.__setattr__(self, "memory_bytes", positive(self.memory_bytes, BYTES, f"{self.name} memory_bytes"))
        object.__setattr__(
            self,
            "memory_bandwidth",
            positive(self.memory_bandwidth, BYTES_PER_SECOND, f"{self.name} memory_bandwidth"),
        )
        object.__setattr__(self, "source", _text(self.source, f"{self.name} source"))

    @property
    def precisions(self) -> tuple:
        """The precisions this accelerator has a peak for, widest first."""
        return tuple(self.peak_flops)

    def peak(self, precision: str) -> float:
        """Dense peak FLOP/s in `precision` ('fp64', 'fp32', 'tf32', 'bf16', 'fp16', 'fp8', 'fp4')."""
        available = ", ".join(self.peak_flops)
        if not isinstance(precision, str):
            raise ConfigurationError(
                f"precision={precision!r} for {self.name} must be a name; available precisions: {available}"
            )
        key = precision.strip().lower()
        if key in self.peak_flops:
            return self.peak_flops[key]
        if key in PRECISIONS:
            raise ConfigurationError(f"{self.name} has no {key} peak; available precisions: {available}")
        raise ConfigurationError(f"unknown precision {precision!r} for {self.name}; available precisions: {available}")

    def peak_quantity(self, precision: str):
        """peak(precision) as a Quantity in TFLOP/s, for display."""
        return Q_(self.peak(precision), FLOP_PER_SECOND).to("TFLOP/s")

    @property
    def memory(self):
        """Memory capacity as a Quantity in GB (10^9 bytes)."""
        return Q_(self.memory_bytes, BYTES).to("GB")

    @property
    def memory_bandwidth_quantity(self):
        """Memory bandwidth as a Quantity in TB/s."""
        return Q_(self.memory_bandwidth, BYTES_PER_SECOND).to("TB/s")

    def describe(self) -> str:
        """One line for a student: memory, memory bandwidth and the 16-bit dense peak."""
        key = "bf16" if "bf16" in self.peak_flops else list(self.peak_flops)[-1]
        return (
            f"{self.name}: {format_bytes(self.memory_bytes)}, {format_rate(self.memory_bandwidth)}, "
            f"{key} {format_rate(self.peak_flops[key], FLOP_PER_SECOND)} dense"
        )


# ---------------------------------------------------------------------------------------
# Link


@dataclass(frozen=True)
class Link:
    """A link: bandwidth per direction (B/s) and a typical per-message latency alpha (s).

    Intra-node links are per GPU (what one GPU can send into the NVLink/PCIe fabric);
    network links are per NIC port. Alpha is an estimate of software + hardware latency
    per message (per ring step), for alpha-beta models: time = alpha + bytes / bandwidth.
    """

    name: str
    bandwidth: float
    latency: float
    kind: str
    source: str = "user-defined"
    note: str = ""

    def __post_init__(self):
        object.__setattr__(self, "name", _text(self.name, "link name"))
        object.__setattr__(self, "bandwidth", positive(self.bandwidth, BYTES_PER_SECOND, f"{self.name} bandwidth"))
        object.__setattr__(self, "latency", non_negative(self.latency, SECONDS, f"{self.name} latency"))
        kind = self.kind.strip().lower() if isinstance(self.kind, str) else self.kind
        if kind not in LINK_KINDS:
            raise ConfigurationError(f"{self.name} kind={self.kind!r} is not valid; valid: {', '.join(LINK_KINDS)}")
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "source", _text(self.source, f"{self.name} source"))
        if not isinstance(self.note, str):
            raise ConfigurationError(f"{self.name} note={self.note!r} must be a string")

    @property
    def bidirectional_bandwidth(self) -> float:
        """Both directions added (B/s): the figure NVLink datasheets print."""
        return 2.0 * self.bandwidth

    @property
    def bandwidth_quantity(self):
        """Per-direction bandwidth as a Quantity in GB/s."""
        return Q_(self.bandwidth, BYTES_PER_SECOND).to("GB/s")

    @property
    def latency_quantity(self):
        """Latency alpha as a Quantity in microseconds."""
        return Q_(self.latency, SECONDS).to("us")

    def describe(self) -> str:
        return (
            f"{self.name} ({self.kind}): {format_rate(self.bandwidth)} per direction, "
            f"alpha ~{format_seconds(self.latency)}"
        )


# ---------------------------------------------------------------------------------------
# Node and cluster


@dataclass(frozen=True)
class Node:
    """A server: gpus_per_node accelerators joined by intra_link, and nics_per_node NICs of type nic."""

    name: str
    accelerator: Accelerator
    gpus_per_node: int
    intra_link: Link
    nic: Link
    nics_per_node: int
    source: str = "user-defined"

    def __post_init__(self):
        object.__setattr__(self, "name", _text(self.name, "node name"))
        object.__setattr__(self, "accelerator", accelerator(self.accelerator))
        object.__setattr__(self, "gpus_per_node", positive_int(self.gpus_per_node, "gpus_per_node"))
        object.__setattr__(self, "intra_link", _link_of_kind(self.intra_link, "intra-node", "intra_link"))
        object.__setattr__(self, "nic", _link_of_kind(self.nic, "inter-node", "nic"))
        object.__setattr__(self, "nics_per_node", positive_int(self.nics_per_node, "nics_per_node"))
        object.__setattr__(self, "source", _text(self.source, f"{self.name} source"))

    @property
    def memory_bytes(self) -> float:
        """Accelerator memory of the whole node (B)."""
        return self.gpus_per_node * self.accelerator.memory_bytes

    @property
    def network_bandwidth(self) -> float:
        """All NICs of the node together, per direction (B/s)."""
        return self.nics_per_node * self.nic.bandwidth

    def describe(self) -> str:
        return (
            f"{self.name}: {self.gpus_per_node}x {self.accelerator.name}, {self.intra_link.name} "
            f"({format_rate(self.intra_link.bandwidth)}/GPU/direction), "
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
        return (
            f"{self.name} = {self.gpus} x {self.accelerator.name}; fabric {self._fabric.name} ({taper}), "
            f"{format_rate(self.inter_node_bandwidth_per_gpu)} per GPU across nodes"
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


# ---------------------------------------------------------------------------------------
# Catalogs. Figures: T = 1e12, P = 1e15 FLOP/s; GB = 1e9 bytes.

_SPARSE = "NVIDIA prints tensor-core figures with 2:4 sparsity; the dense figure stored here is half of that"

_A100_FLOPS = {
    "fp64": 19.5e12,  # FP64 tensor core (vector FP64: 9.7)
    "fp32": 19.5e12,
    "tf32": 156e12,  # 312 with sparsity
    "bf16": 312e12,  # 624 with sparsity
    "fp16": 312e12,  # 624 with sparsity
}
_A100_SOURCE = (
    "NVIDIA A100 Tensor Core GPU datasheet and NVIDIA A100 Tensor Core GPU Architecture whitepaper "
    "(2020), spec table, SXM: FP64 Tensor Core 19.5 TFLOPS (FP64 vector 9.7), FP32 19.5, "
    "TF32 156 | 312*, BF16/FP16 312 | 624* TFLOPS (* with sparsity); no FP8. "
)

_H100_SXM_FLOPS = {
    "fp64": 66.9e12,  # FP64 tensor core; datasheet rounds to 67 (vector FP64: 33.5)
    "fp32": 66.9e12,
    "tf32": 494.7e12,  # datasheet: 989* with sparsity
    "bf16": 989.4e12,  # datasheet: 1,979* with sparsity
    "fp16": 989.4e12,
    "fp8": 1978.9e12,  # datasheet: 3,958* with sparsity
}
_H100_SXM_FLOPS_TEXT = (
    "dense FP64 Tensor 66.9, FP32 66.9, TF32 494.7, BF16/FP16 989.4, FP8 1978.9 TFLOPS from the "
    "NVIDIA H100 Tensor Core GPU Architecture whitepaper, Table 3 (H100 SXM5, dense/sparse columns); "
    "the H100/H200 datasheets print the sparse figures 989*, 1,979*, 3,958* (* with sparsity) and "
    "round FP64/FP32 to 67"
)

ACCELERATORS: dict[str, Accelerator] = {
    "a100-40gb": Accelerator(
        "a100-40gb",
        _A100_FLOPS,
        memory_bytes=40e9,
        memory_bandwidth=1555e9,
        source=_A100_SOURCE + "A100 40GB SXM: 40 GB HBM2, 1,555 GB/s. " + _SPARSE + ".",
    ),
    "a100-80gb": Accelerator(
        "a100-80gb",
        _A100_FLOPS,
        memory_bytes=80e9,
        memory_bandwidth=2039e9,
        source=_A100_SOURCE + "A100 80GB SXM: 80 GB HBM2e, 2,039 GB/s (the PCIe card: 1,935 GB/s). " + _SPARSE + ".",
    ),
    "h100-pcie": Accelerator(
        "h100-pcie",
        {
            "fp64": 51e12,  # FP64 tensor core (vector FP64: 26)
            "fp32": 51e12,
            "tf32": 378e12,  # 756* with sparsity
            "bf16": 756.5e12,  # 1,513* with sparsity
            "fp16": 756.5e12,
            "fp8": 1513e12,  # 3,026* with sparsity
        },
        memory_bytes=80e9,
        memory_bandwidth=2.0e12,
        source="NVIDIA H100 Tensor Core GPU datasheet, H100 PCIe column: FP64 Tensor Core 51 TFLOPS "
        "(FP64 26), FP32 51, TF32 756*, BF16/FP16 1,513*, FP8 3,026* TFLOPS (* with sparsity; dense "
        "stored = half), 80 GB HBM2e, 2 TB/s. " + _SPARSE + ".",
    ),
    "h100-sxm": Accelerator(
        "h100-sxm",
        _H100_SXM_FLOPS,
        memory_bytes=80e9,
        memory_bandwidth=3.35e12,
        source="NVIDIA H100 Tensor Core GPU datasheet, H100 SXM column: 80 GB HBM3, 3.35 TB/s; "
        + _H100_SXM_FLOPS_TEXT
        + ".",
    ),
    "h200": Accelerator(
        "h200",
        _H100_SXM_FLOPS,
        memory_bytes=141e9,
        memory_bandwidth=4.8e12,
        source="NVIDIA H200 Tensor Core GPU datasheet, H200 SXM column: 141 GB HBM3e, 4.8 TB/s; same "
        "tensor-core figures as H100 SXM (TF32 989*, BF16/FP16 1,979*, FP8 3,958* with sparsity), so "
        + _H100_SXM_FLOPS_TEXT
        + ".",
    ),
    "b200": Accelerator(
        "b200",
        {
            "fp64": 37e12,  # FP64 and FP64 tensor core
            "fp32": 75e12,
            "tf32": 1.1e15,  # 2.2* with sparsity
            "bf16": 2.25e15,  # 4.5* with sparsity
            "fp16": 2.25e15,
            "fp8": 4.5e15,  # 9* with sparsity
            "fp4": 9e15,  # 18* with sparsity
        },
        memory_bytes=180e9,
        memory_bandwidth=8e12,
        source="NVIDIA DGX B200 datasheet: 8 GPUs, 72 PFLOPS FP8 training and 144 PFLOPS FP4 inference "
        "(sparse), 1,440 GB HBM3e, 64 TB/s, i.e. per GPU 180 GB and 8 TB/s; per-GPU compute from NVIDIA's "
        "HGX B200 / GB200 NVL72 specification table (HGX B200 column): FP4 18*, FP8/FP6 9*, FP16/BF16 4.5*, "
        "TF32 2.2* PFLOPS (* with sparsity; dense stored = half), FP32 75 TFLOPS, FP64/FP64 Tensor 37 "
        "TFLOPS. Documents differ on memory: that table lists 180 GB at 7.7 TB/s, launch material "
        "quotes 192 GB and 8 TB/s; we use the DGX B200 datasheet (180 GB, 8 TB/s). " + _SPARSE + ".",
    ),
    "mi300x": Accelerator(
        "mi300x",
        {
            "fp64": 163.4e12,  # FP64 matrix (vector FP64: 81.7)
            "fp32": 163.4e12,
            "tf32": 653.7e12,
            "bf16": 1307.4e12,
            "fp16": 1307.4e12,
            "fp8": 2614.9e12,
        },
        memory_bytes=192e9,
        memory_bandwidth=5.3e12,
        source="AMD Instinct MI300X accelerator data sheet: peak FP64 matrix 163.4 TFLOPS (vector 81.7), "
        "FP32 163.4, TF32 653.7, FP16/BF16 1,307.4, FP8 2,614.9 TFLOPS dense (AMD prints dense; with "
        "sparsity 2x), 192 GB HBM3, 5.3 TB/s.",
    ),
}

# Latency alpha: per-step hardware latencies of NCCL's own tuning model (NCCL
# src/graph/tuning.cc, table hwLat, Ring algorithm with the Simple protocol used for large
# messages): NVLink 3.4 us, PCIe 5.7 us, network 9.6 us.
_ALPHA_NOTE = (
    "alpha is a typical software + hardware per-message latency (one ring step) for alpha-beta "
    "models, an estimate: NCCL's tuning model (src/graph/tuning.cc, hwLat, Ring/Simple) uses "
    "{value} us per step for {medium}; small messages with NCCL's LL protocol see less ({ll} us)."
)
_NET_NOTE = (
    _ALPHA_NOTE.format(value=9.6, medium="any network", ll=2.7)
    + " Hardware alone is ~1-2 us port to port (NIC + a switch hop); the rest is protocol and software."
)


def _nvlink(generation: int, bidirectional: float, source: str) -> Link:
    return Link(
        f"nvlink{generation}",
        bandwidth=bidirectional / 2,  # datasheets add both directions
        latency=3.4e-6,
        kind="intra-node",
        source=source,
        note="Per GPU, per direction = half the datasheet's bidirectional total. "
        + _ALPHA_NOTE.format(value=3.4, medium="NVLink", ll=0.47),
    )


def _pcie(generation: int, gigatransfers: float) -> Link:
    # x16 link, 128b/130b encoding, 8 bits per byte, per direction
    return Link(
        f"pcie{generation}",
        bandwidth=gigatransfers * 1e9 * 16 * (128 / 130) / 8,
        latency=5.7e-6,
        kind="intra-node",
        source=f"PCI Express Base Specification {generation}.0: {gigatransfers:g} GT/s per lane, 128b/130b "
        f"encoding; x16 = {gigatransfers:g} x 16 x 128/130 / 8 = "
        f"{gigatransfers * 16 * 128 / 130 / 8:.1f} GB/s per direction",
        note="x16 link, per direction, before packet overhead (achieved ~80-90%). "
        + _ALPHA_NOTE.format(value=5.7, medium="PCIe", ll=1.0),
    )


def _network(name: str, gbit: float, source: str) -> Link:
    return Link(
        name,
        bandwidth=gbit * 1e9 / 8,  # line rate in bits per second -> bytes per second
        latency=9.6e-6,
        kind="inter-node",
        source=source,
        note=f"Per NIC port, per direction: {gbit:g} Gb/s / 8 = {gbit / 8:g} GB/s. " + _NET_NOTE,
    )


LINKS: dict[str, Link] = {
    "nvlink3": _nvlink(
        3,
        600e9,
        "NVIDIA A100 datasheet: third-generation NVLink 600 GB/s per GPU (12 links, 25 GB/s per direction "
        "each); bidirectional total, so 300 GB/s per direction",
    ),
    "nvlink4": _nvlink(
        4,
        900e9,
        "NVIDIA H100 datasheet (SXM): fourth-generation NVLink 900 GB/s per GPU (18 links, 25 GB/s per "
        "direction each); bidirectional total, so 450 GB/s per direction",
    ),
    "nvlink5": _nvlink(
        5,
        1800e9,
        "NVIDIA DGX B200 / HGX B200 datasheets: fifth-generation NVLink 1.8 TB/s per GPU (18 links, 50 GB/s "
        "per direction each); bidirectional total, so 900 GB/s per direction",
    ),
    "pcie4": _pcie(4, 16),
    "pcie5": _pcie(5, 32),
    "ib-hdr": _network(
        "ib-hdr", 200, "InfiniBand HDR (NVIDIA ConnectX-6 / Quantum HDR): 200 Gb/s per port (4 lanes x 50 Gb/s)"
    ),
    "ib-ndr": _network(
        "ib-ndr", 400, "InfiniBand NDR (NVIDIA ConnectX-7 / Quantum-2 NDR): 400 Gb/s per port (4 lanes x 100 Gb/s)"
    ),
    "ib-xdr": _network(
        "ib-xdr", 800, "InfiniBand XDR (NVIDIA ConnectX-8 / Quantum-X800): 800 Gb/s per port (4 lanes x 200 Gb/s)"
    ),
    "ethernet-100g": _network("ethernet-100g", 100, "IEEE 802.3 100 Gigabit Ethernet (RoCE v2): 100 Gb/s per port"),
    "ethernet-200g": _network("ethernet-200g", 200, "IEEE 802.3 200 Gigabit Ethernet (RoCE v2): 200 Gb/s per port"),
    "ethernet-400g": _network("ethernet-400g", 400, "IEEE 802.3 400 Gigabit Ethernet (RoCE v2): 400 Gb/s per port"),
}

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
        "InfiniBand for compute (the storage/in-band ConnectX-6 ports are not counted)",
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
}


__all__ = [
    "PRECISIONS",
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
