"""The hardware catalog's part types: Accelerator (dense peak FLOP/s per precision, memory, HBM bandwidth, board
power) and Link (bandwidth per direction, latency), every figure in an SI base unit. distlab.hardware holds the
catalogs, nodes and clusters and re-exports these; its docstring states the conventions. Lesson 7 §3.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from .errors import ConfigurationError
from .units import (
    BYTES,
    BYTES_PER_SECOND,
    FLOP_PER_SECOND,
    SECONDS,
    Q_,
    format_bytes,
    format_gibibytes,
    format_rate,
    format_seconds,
    non_negative,
    positive,
)

#: Precision keys a peak FLOP/s figure may carry, widest first.
__all__ = ["PRECISIONS", "LINK_KINDS", "Accelerator", "Link", "text_field"]

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


def _power(acc) -> None:
    """Check an Accelerator's tdp_w and power_limit_w (watts, 1 to 100,000; the limit at most the TDP), defaulting
    the limit to the TDP."""
    for field in ("tdp_w", "power_limit_w"):
        value = getattr(acc, field)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 1 <= value <= 100_000:
            raise ConfigurationError(f"{field}={value!r} for {acc.name}: watts, 1 to 100,000")
        object.__setattr__(acc, field, float(value))
    if acc.power_limit_w is None:
        object.__setattr__(acc, "power_limit_w", acc.tdp_w)
    elif acc.tdp_w is not None and acc.power_limit_w > acc.tdp_w:
        raise ConfigurationError(
            f"power_limit_w={acc.power_limit_w:g} for {acc.name}: above its TDP; valid: 1 to {acc.tdp_w:g} W"
        )


def text_field(value, name: str) -> str:
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
    tdp_w: float | None = None  # the part's rated board power (datasheet TDP), W; None: not recorded
    power_limit_w: float | None = None  # the power limit the GPU runs at, W (default: tdp_w)
    capped_peak_source: str = ""  # where peak_flops were stated or measured at power_limit_w (empty: at the TDP)
    memory_label: str = ""  # the memory as marketed ("80 GB HBM3"); empty for a user-defined part
    memory_cuda_visible: bool = False  # True: memory_bytes is the sourced total CUDA reports, not the marketed figure

    def __post_init__(self):
        object.__setattr__(self, "name", text_field(self.name, "accelerator name"))
        _power(self)
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
        object.__setattr__(self, "source", text_field(self.source, f"{self.name} source"))
        if not isinstance(self.memory_label, str):
            raise ConfigurationError(
                f"memory_label={self.memory_label!r} of {self.name} must be text such as '80 GB HBM3'"
            )
        object.__setattr__(self, "memory_label", self.memory_label.strip())
        object.__setattr__(self, "memory_cuda_visible", bool(self.memory_cuda_visible))
        if not isinstance(self.capped_peak_source, str):
            raise ConfigurationError(f"capped_peak_source={self.capped_peak_source!r} of {self.name} must be text")

    @property
    def power_capped(self) -> bool:
        """Whether the GPU runs below its rated board power (power_limit_w < tdp_w). A cap is priced only through a
        part's peaks stated or measured at that cap (capped_peak_source: torchtitan's 500 W H100, whose bf16 peak Meta
        states as 800 TFLOP/s, Yang et al. 2025); a part without one is priced at its TDP's peaks, and estimate and
        validate say so. Lesson 7 §8.

        Published sweeps exist but none is recorded in distlab yet (issue 30, searched 2026-11-29 and -30): Mayr et al.
        2026, arXiv:2603.16164, Llama 3 8B continued pre-training at power limits of 200-700 W on H100 (HBM2e, NHR@FAU's
        Helma; their code, github.com/RRZE-HPC/hpc-ai-perf-bench, sweeps 200, 300, ..., 700 W); Ujeniya et al. 2026,
        arXiv:2604.11391, DGEMM on the same H100 (HBM2e, 94 GiB) and H200 at 200-700 W. Their figures were not
        readable from here; the Zeus traces (You et al. 2023, Zeus, NSDI) are of other dies (V100, A40, RTX 6000, P100) and
        are not transferred to an H100."""
        return self.tdp_w is not None and self.power_limit_w is not None and self.power_limit_w < self.tdp_w

    def power_note(self) -> str:
        """One line for a power-capped GPU (empty otherwise): whether its cap is priced (peaks stated at the cap)."""
        if not self.power_capped:
            return ""
        if self.capped_peak_source:
            return (
                f"power-capped: {self.name} runs at {self.power_limit_w:g} W of its {self.tdp_w:g} W TDP; its peaks are "
                f"those stated at that cap ({self.capped_peak_source})"
            )
        return (
            f"power-capped: {self.name} runs at {self.power_limit_w:g} W of its {self.tdp_w:g} W TDP; distlab does not "
            "model the cap (it holds no sourced measurement of a cap's effect on this part), so this step time is "
            "likely too fast"
        )

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
        """Memory capacity as a Quantity in GB (10^9 bytes): for catalog parts with a source, the total CUDA reports
        (memory_text says which)."""
        return Q_(self.memory_bytes, BYTES).to("GB")

    def memory_text(self) -> str:
        """What the capacity is: 'sold as 80 GB HBM3; CUDA sees 79.11 GiB'; a part sold as "80 GB" shows CUDA
        80 GiB less what the driver keeps (hardware_catalog cites each total). Lesson 1 §2."""
        if not self.memory_label:
            return format_bytes(self.memory_bytes)
        if self.memory_cuda_visible:
            return f"sold as {self.memory_label}; CUDA sees {format_gibibytes(self.memory_bytes, 4)}"
        return f"{self.memory_label} as marketed; no CUDA-visible total sourced"

    @property
    def memory_bandwidth_quantity(self):
        """Memory bandwidth as a Quantity in TB/s."""
        return Q_(self.memory_bandwidth, BYTES_PER_SECOND).to("TB/s")

    def describe(self) -> str:
        """One line for a student: memory, memory bandwidth and the 16-bit dense peak."""
        key = "bf16" if "bf16" in self.peak_flops else list(self.peak_flops)[-1]
        return (
            f"{self.name}: {format_bytes(self.memory_bytes)} ({self.memory_text()}), {format_rate(self.memory_bandwidth)}, "
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
        object.__setattr__(self, "name", text_field(self.name, "link name"))
        object.__setattr__(self, "bandwidth", positive(self.bandwidth, BYTES_PER_SECOND, f"{self.name} bandwidth"))
        object.__setattr__(self, "latency", non_negative(self.latency, SECONDS, f"{self.name} latency"))
        kind = self.kind.strip().lower() if isinstance(self.kind, str) else self.kind
        if kind not in LINK_KINDS:
            raise ConfigurationError(f"{self.name} kind={self.kind!r} is not valid; valid: {', '.join(LINK_KINDS)}")
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "source", text_field(self.source, f"{self.name} source"))
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
