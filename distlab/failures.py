"""Failures and checkpoints at scale: interruptions, checkpoint size and time, the optimal interval, goodput
(Lesson 11b §2).

A synchronous job stops when any of its N GPUs (or their hosts, links, switches) fails. With failures
independent at a rate lambda per GPU, the job's failures arrive at N lambda: mean time between failures
M = 1 / (N lambda). After a failure the job restarts (R: find and replace the host, restart the processes,
load the last checkpoint) and redoes the work since that checkpoint.

- Checkpoint size: what a restart needs, weights and optimizer state (distlab.memory's recipe; gradients
  are recomputed): (w + o) x params, 2 + 12 = 14 B per parameter for mixed-precision Adam.
- Checkpoint time delta: size / storage bandwidth when training stops to write (synchronous); with an
  asynchronous checkpoint training stops only to copy each GPU's shard to host memory (PCIe, distlab.hardware)
  and the write to storage proceeds in the background (it must finish within the interval); an in-memory
  checkpoint (Wang et al. 2023, "Gemini", SOSP) also sends the shard to a peer's host memory, and a restart
  reads it back from there instead of from storage.
- Optimal interval tau between checkpoints: Young 1974, tau = sqrt(2 delta M); Daly 2006's higher-order
  estimate tau = sqrt(2 delta M)(1 + sqrt(delta/(2M))/3 + delta/(18 M)) - delta for delta < 2M, else M.
- Goodput (useful time / wall time), exponential failures (Daly 2006, the complete model): a segment of
  tau useful seconds plus delta of checkpoint takes M e^{R/M} (e^{(tau+delta)/M} - 1) in expectation, so
  goodput = tau / (M e^{R/M} (e^{(tau + delta)/M} - 1)); to first order 1 - delta/tau - (tau/2 + R)/M.

Published figures (LLAMA3): Dubey et al. 2024, "The Llama 3 Herd of Models", Sec. 3.3.4 and Table 5: 466 job
interruptions in a 54-day snapshot of pre-training on 16,384 H100 GPUs, 47 planned and 419 unexpected,
effective training time above 90%; Sec. 3.3.1: checkpoints on Tectonic, 2 TB/s sustained and 7 TB/s peak.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import hardware, memory
from ._arguments import broadcasting, finite_result, number_array
from .models import param_count
from .errors import ConfigurationError
from .units import (
    BYTES_PER_SECOND,
    SECONDS,
    format_bytes,
    format_percent,
    format_seconds,
    non_negative,
    positive,
    positive_int,
    require_finite,
)

__all__ = [
    "LLAMA3",
    "rate_text",
    "CHECKPOINT_MODES",
    "failure_rate_per_gpu_hour",
    "expected_interruptions",
    "job_mtbf",
    "checkpoint_bytes",
    "checkpoint_seconds",
    "young_interval",
    "daly_interval",
    "goodput",
    "goodput_array",
    "CheckpointPlan",
    "checkpoint_plan",
]

HOUR = 3600.0
DAY = 24 * HOUR
#: Llama 3 405B pre-training (Dubey et al. 2024): Sec. 3.3.4, Table 5 (interruptions); Sec. 3.3.1 (storage).
LLAMA3 = {
    "gpus": 16384,
    "days": 54,
    "interruptions": 466,
    "unexpected": 419,
    "planned": 47,
    "effective_training_time": 0.90,  # "higher than 90%"
    "storage_sustained_bytes_per_s": 2e12,
    "storage_peak_bytes_per_s": 7e12,
}
#: How a checkpoint is taken: training stops for the whole write, only for a copy to host memory, or for a
#: copy to host memory and to a peer's (restarts then read from memory).
CHECKPOINT_MODES = ("sync", "async", "in-memory")


def failure_rate_per_gpu_hour(interruptions=LLAMA3["unexpected"], gpus=LLAMA3["gpus"], days=LLAMA3["days"]) -> float:
    """Failures per GPU per hour observed: interruptions / (gpus x hours). Lesson 11b §2.

    Llama 3's 419 unexpected interruptions in 54 days on 16,384 GPUs: 419 / (16384 x 1296 h) = 1.97e-5 per
    GPU-hour, one failure per GPU in about 50,700 hours (5.8 years).

    >>> round(failure_rate_per_gpu_hour() * 1e5, 3)
    1.973
    """
    n = non_negative(interruptions, "", "interruptions")
    g = positive_int(gpus, "gpus")
    d = positive(days, "", "days")
    return n / (g * d * 24.0)


def expected_interruptions(gpus, days, rate_per_gpu_hour) -> float:
    """Expected failures of a job: gpus x hours x rate (independent failures). Lesson 11b §2.

    >>> round(expected_interruptions(16384, 54, failure_rate_per_gpu_hour()))  # back to Llama 3's 419
    419
    """
    n, d = _gpus(gpus), positive(days, "", "days")
    if d > 1e6:
        raise ConfigurationError(f"days={d:g} is more than 1,000,000")
    return n * d * 24.0 * _rate(rate_per_gpu_hour)


def job_mtbf(gpus, rate_per_gpu_hour) -> float:
    """Mean time between failures of a job on `gpus` GPUs, seconds: 1 / (N lambda). Lesson 11b §2.

    >>> round(job_mtbf(16384, failure_rate_per_gpu_hour()) / 3600, 2)  # Llama 3: one every 3.09 hours
    3.09
    """
    return finite_result("job_mtbf", HOUR / (_gpus(gpus) * _rate(rate_per_gpu_hour, allow_zero=False)))


def _gpus(value) -> int:
    n = positive_int(value, "gpus")
    if n > 10_000_000:
        raise ConfigurationError(f"gpus={n} is more than 10,000,000")
    return n


def _rate(value, allow_zero=True) -> float:
    rate = (non_negative if allow_zero else positive)(value, "", "rate_per_gpu_hour")
    if rate > 1.0:
        raise ConfigurationError(
            f"rate_per_gpu_hour={rate!r}: more than one failure per GPU per hour; "
            f"valid: 0 < rate <= 1 (Llama 3: {failure_rate_per_gpu_hour():.2e})"
        )
    return rate


def checkpoint_bytes(model, precision="mixed") -> float:
    """Bytes of a full checkpoint: (weight + optimizer bytes) x params (distlab.memory's recipe; gradients
    are not saved). Lesson 11b §2.

    >>> checkpoint_bytes(405e9) / 1e12  # 405B, mixed-precision Adam: 14 B per parameter
    5.67
    """
    p = param_count(model)
    recipe = memory.precision_recipe(precision)
    return finite_result("checkpoint_bytes", p * (recipe.weight_bytes + recipe.optimizer_bytes))


def checkpoint_seconds(size, storage_bandwidth, *, mode="sync", gpus=1, host_link="pcie5") -> float:
    """Seconds training stops to take a checkpoint of `size` bytes. Lesson 11b §2.

    sync: size / storage_bandwidth (all GPUs write their shards at once; the storage is the limit).
    async and in-memory: each GPU copies its shard size / gpus to host memory over ``host_link``
    (distlab.hardware, PCIe per direction); in-memory sends it on to a peer host too, which a GPU's share
    of the network does in parallel with the next training steps (not counted here).

    >>> checkpoint_seconds(5.67e12, 2e12)  # Llama 3 405B to Tectonic's 2 TB/s
    2.835
    """
    m = positive(size, "B", "size")
    bw = positive(storage_bandwidth, BYTES_PER_SECOND, "storage_bandwidth")
    if not isinstance(mode, str) or mode not in CHECKPOINT_MODES:
        raise ConfigurationError(f"mode={mode!r}; valid: {', '.join(CHECKPOINT_MODES)}")
    if mode == "sync":
        out = m / bw
    else:
        out = m / _gpus(gpus) / hardware.link(host_link).bandwidth
    require_finite("checkpoint_seconds", out)
    if out > MAX_SECONDS:
        raise ConfigurationError(f"a checkpoint of {m:g} B would take {out:g} s, more than {MAX_SECONDS:g} s")
    return out


#: Longest time the interval formulas take (s): about 31,700 years; longer inputs are refused, not overflowed.
MAX_SECONDS = 1e12


def _seconds(value, name: str, allow_zero: bool = False) -> float:
    out = (non_negative if allow_zero else positive)(value, SECONDS, name)
    if out > MAX_SECONDS:
        raise ConfigurationError(f"{name}={out:g} s is more than {MAX_SECONDS:g} s (about 31,700 years)")
    return out


def young_interval(checkpoint_s, mtbf_s) -> float:
    """Young's optimal checkpoint interval, seconds: sqrt(2 delta M) (Young 1974, CACM 17(9)). Lesson 11b §2.

    >>> round(young_interval(60, 3 * 3600), 1)  # 1-minute checkpoints, a failure every 3 hours: 19 minutes
    1138.4
    """
    d = _seconds(checkpoint_s, "checkpoint_s")
    m = _seconds(mtbf_s, "mtbf_s")
    return math.sqrt(2.0 * d * m)


def daly_interval(checkpoint_s, mtbf_s) -> float:
    """Daly's optimal checkpoint interval, seconds (Daly 2006, FGCS 22(3), Eq. 37): for delta < 2M,
    sqrt(2 delta M) (1 + sqrt(delta / (2M)) / 3 + delta / (18 M)) - delta; else M. Lesson 11b §2.

    >>> round(daly_interval(60, 3 * 3600))  # 1138.4 x (1 + 0.0176 + 0.0003) - 60
    1099
    """
    d = _seconds(checkpoint_s, "checkpoint_s")
    m = _seconds(mtbf_s, "mtbf_s")
    if d >= 2.0 * m:
        return m
    x = d / (2.0 * m)
    return math.sqrt(2.0 * d * m) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - d


def goodput(interval_s, checkpoint_s, mtbf_s, restart_s=0.0) -> float:
    """Useful share of wall time with checkpoints every ``interval_s`` (Daly 2006's complete model,
    exponential failures): tau / (M e^{R/M} (e^{(tau + delta)/M} - 1)). Lesson 11b §2.

    No failures (M -> infinity) gives tau / (tau + delta); to first order in 1/M it is
    1 - delta/tau - (tau/2 + R)/M.

    >>> round(goodput(1200, 60, 3 * 3600, restart_s=600), 3)
    0.849
    """
    t = _seconds(interval_s, "interval_s")
    d = _seconds(checkpoint_s, "checkpoint_s", allow_zero=True)
    m = _seconds(mtbf_s, "mtbf_s")
    r = _seconds(restart_s, "restart_s", allow_zero=True)
    exponent = (t + d) / m + r / m
    if exponent > 700:  # e^700 ~ 1e304: the job essentially never finishes a segment
        return 0.0
    return t / (m * math.exp(r / m) * math.expm1((t + d) / m))


@broadcasting
def goodput_array(interval_s, checkpoint_s, mtbf_s, restart_s=0.0):
    """``goodput`` over NumPy arrays (broadcast): the widget's curve. Times in seconds, finite and >= 0 (intervals
    and MTBFs > 0); a segment too long to finish before a failure (an overflowing exponential) gives 0. Lesson 11b §2.

    >>> goodput_array([600.0, 1200.0], 60, 3 * 3600, 600).round(3).tolist()
    [0.834, 0.849]
    """
    t = number_array(interval_s, "interval_s")
    d = number_array(checkpoint_s, "checkpoint_s")
    m = number_array(mtbf_s, "mtbf_s")
    r = number_array(restart_s, "restart_s")
    for value, name in ((t, "interval_s"), (m, "mtbf_s")):
        if np.any(value <= 0):
            raise ConfigurationError(f"{name} must hold times > 0 s")
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        out = t / (m * np.exp(r / m) * np.expm1((t + d) / m))
    return np.where(np.isfinite(out), out, 0.0)


@dataclass(frozen=True)
class CheckpointPlan:
    """Checkpointing a job: sizes in bytes, times in seconds. ``interval_s`` is Daly's optimum (and at least
    the background write for async / in-memory). Lesson 11b §2."""

    gpus: int
    mode: str
    rate_per_gpu_hour: float
    mtbf_s: float
    checkpoint_bytes: float
    checkpoint_s: float  # training stopped per checkpoint
    write_s: float  # the write to storage (in the background for async / in-memory)
    restart_s: float  # fixed restart + loading the checkpoint
    interval_s: float
    goodput: float
    failures_per_day: float

    def summary(self) -> str:
        """A few lines. Lesson 11b §2."""
        return "\n".join(
            [
                f"{self.gpus:,} GPUs at {rate_text(self.rate_per_gpu_hour)} failures per GPU-hour: a failure every "
                f"{_hours(self.mtbf_s)} ({self.failures_per_day:.3g} a day)",
                f"checkpoint {format_bytes(self.checkpoint_bytes)}, {self.mode}: training stops "
                f"{format_seconds(self.checkpoint_s)} (write to storage {format_seconds(self.write_s)}); "
                f"restart {format_seconds(self.restart_s)}",
                f"checkpoint every {_hours(self.interval_s)} (Daly): goodput {format_percent(self.goodput)}",
            ]
        )


def rate_text(rate) -> str:
    """A failure rate (per GPU-hour, >= 0 and finite) in the notation lesson 11b's slider reads it (d3-format's
    '.2e', as JavaScript writes an exponent): 1.97e-5, 2.00e-5, not Python's 2e-05 beside a slider that reads
    2.00e-5. Lesson 11b §2.

    >>> rate_text(1.97e-5), rate_text(2e-5), rate_text(250.0)
    ('1.97e-5', '2.00e-5', '2.50e+2')
    """
    rate = non_negative(rate, "", "rate")
    digits, exponent = f"{rate:.2e}".split("e")
    return f"{digits}e{int(exponent):+d}"


def _hours(seconds: float) -> str:
    """Seconds as text in the unit a person plans in: s below 2 minutes, min below 2 hours, else h."""
    if seconds < 120:
        return format_seconds(seconds)
    if seconds < 7200:
        return f"{seconds / 60:.3g} min"
    return f"{seconds / 3600:.3g} h"


def checkpoint_plan(
    model,
    gpus,
    *,
    rate_per_gpu_hour=None,
    storage_bandwidth=LLAMA3["storage_sustained_bytes_per_s"],
    mode="sync",
    restart_s=600.0,
    precision="mixed",
    host_link="pcie5",
    network_bandwidth=None,
) -> CheckpointPlan:
    """Interval and goodput of checkpointing `model` on `gpus` GPUs. Lesson 11b §2.

    rate_per_gpu_hour defaults to Llama 3's (failure_rate_per_gpu_hour()); storage_bandwidth to Tectonic's
    2 TB/s sustained. restart_s: the fixed part of a restart (detection, rescheduling, process start),
    plus loading the checkpoint: size / storage bandwidth, or for in-memory the shard from a peer over
    ``network_bandwidth`` per GPU (default: an NDR port, distlab.hardware 'ib-ndr').

    >>> plan = checkpoint_plan("llama3.1-405b", 16384)
    >>> round(plan.mtbf_s / 3600, 2), round(plan.checkpoint_s, 2)
    (3.09, 2.84)
    """
    n = _gpus(gpus)
    rate = failure_rate_per_gpu_hour() if rate_per_gpu_hour is None else _rate(rate_per_gpu_hour, allow_zero=False)
    mtbf = job_mtbf(n, rate)
    size = checkpoint_bytes(model, precision)
    bw = positive(storage_bandwidth, BYTES_PER_SECOND, "storage_bandwidth")
    write = size / bw
    if not write <= MAX_SECONDS:
        raise ConfigurationError(
            f"writing a checkpoint of {size:g} B at {bw:g} B/s would take {write:g} s, more than {MAX_SECONDS:g} s"
        )
    stop = checkpoint_seconds(size, bw, mode=mode, gpus=n, host_link=host_link)
    fixed = _seconds(restart_s, "restart_s", allow_zero=True)
    if mode == "in-memory":
        net = (
            hardware.link("ib-ndr").bandwidth
            if network_bandwidth is None
            else positive(network_bandwidth, BYTES_PER_SECOND, "network_bandwidth")
        )
        load = size / n / net
        if not load <= MAX_SECONDS:
            raise ConfigurationError(
                f"loading a checkpoint shard of {size / n:g} B at {net:g} B/s would take {load:g} s, "
                f"more than {MAX_SECONDS:g} s"
            )
    else:
        load = write
    restart = fixed + load
    interval = daly_interval(stop, mtbf)
    if mode != "sync":
        interval = max(interval, write)  # the background write must finish before the next checkpoint
    return CheckpointPlan(
        n, mode, rate, mtbf, size, stop, write, restart, interval, goodput(interval, stop, mtbf, restart), DAY / mtbf
    )
