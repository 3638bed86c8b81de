"""Data parallelism and ZeRO: the communication of one training step, and hiding it behind backward.

Communication per step (Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training
Trillion Parameter Models", Sec. 7). M is the gradient bytes of the shard a GPU owns,
params / (tp x pp) x gradient bytes per parameter (the DP all-reduce moves the shard a GPU
owns, not the whole model: with tp and pp each GPU holds 1 / (tp x pp) of the gradients, see
distlab.memory.model_state_bytes). With N data-parallel GPUs and ring collectives:

    plain DP      all-reduce of the gradients                     2 x M   (Sec. 7.1)
    ZeRO-1, -2    reduce-scatter of the gradients (M) and an
                  all-gather of the updated parameters (M)        2 x M   (Sec. 7.2.1)
    ZeRO-3        parameter all-gather in forward (M), again in
                  backward (M), reduce-scatter of gradients (M)   3 x M   (Sec. 7.2.2: 1.5x DP)

These are the paper's volumes, the large-N limit; a ring moves (N-1)/N of M per
reduce-scatter or all-gather and 2(N-1)/N of M per all-reduce, so each GPU sends exactly
factor x (N-1)/N x M bytes. The paper counts parameters and gradients in the same 16-bit
format; so does this module (parameters move at the gradient's element size).

Overlap (Li et al. 2020, "PyTorch Distributed: Experiences on Accelerating Data Parallel
Training", VLDB 13(12): bucketing Sec. 3.2.2, overlapping computation with communication
Sec. 3.2.3, implementation Sec. 4): DDP groups gradients into buckets (25 MiB by
default) and launches a bucket's all-reduce as soon as backward has produced all its
gradients, while backward goes on. Collectives run one after another on one stream:
bucket i starts at max(ready_i, end_{i-1}) and ends comm_i later. What is left after
backward ends is exposed: exposed = max(0, end_last - backward). The last bucket is ready
only when backward ends, so its all-reduce can never overlap; with B equal buckets and
gradients produced at a steady rate this gives

    exposed = max(comm / B, comm - (B - 1) / B x backward)

i.e. exposed = max(0, comm - the backward compute it can overlap with), and never less than
the last bucket.

Names: `dp` is the number of data-parallel GPUs and `size` a message size in bytes (M, the
nccl-tests convention of distlab.collectives), as in distlab.collectives.collective_cost.
Taught in Lesson 3 (notebooks/03_data_parallel_zero.ipynb): ZeRO's memory in §2, its
communication in §4, the overlap with backward in §5.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from ._arguments import (
    broadcasting,
    whole_number,
    finite_result,
    number_array,
    renamed_keyword,
    zero_stage,
)
from . import collectives, memory
from .models import param_count
from .errors import ConfigurationError
from .units import (
    BYTES,
    MAX_COUNT,
    SECONDS,
    format_bytes,
    format_seconds,
    non_negative,
    positive,
    positive_int,
    require_finite,
)

__all__ = [
    "STEP_COLLECTIVES",
    "DDP_BUCKET_BYTES",
    "StepCommunication",
    "OverlapTimeline",
    "gradient_bytes",
    "volume_factor",
    "stage_name",
    "step_communication",
    "overlap_timeline",
    "exposed_communication_time",
    "bucketed_overlap",
    "memory_per_gpu_curves",
    "smallest_fitting_stage",
]

#: The collectives one training step runs per ZeRO stage, in order: (what moves, op). Each is
#: over the whole M in the nccl-tests size convention (distlab.collectives).
STEP_COLLECTIVES = {
    0: (("gradient all-reduce", "all-reduce"),),
    1: (("gradient reduce-scatter", "reduce-scatter"), ("parameter all-gather", "all-gather")),
    2: (("gradient reduce-scatter", "reduce-scatter"), ("parameter all-gather", "all-gather")),
    3: (
        ("parameter all-gather (forward)", "all-gather"),
        ("parameter all-gather (backward)", "all-gather"),
        ("gradient reduce-scatter", "reduce-scatter"),
    ),
}

#: An all-reduce is a reduce-scatter plus an all-gather: 2 units of M; the others 1.
_UNITS = {"all-reduce": 2, "reduce-scatter": 1, "all-gather": 1}

#: PyTorch DDP's default bucket size, bucket_cap_mb=25, in bytes (MiB): Li et al. 2020, Sec. 5.2.
DDP_BUCKET_BYTES = 25 * 2**20

_STAGE_NAMES = {0: "plain DP", 1: "ZeRO-1", 2: "ZeRO-2", 3: "ZeRO-3"}


def stage_name(zero) -> str:
    """'plain DP', 'ZeRO-1', 'ZeRO-2' or 'ZeRO-3' (Rajbhandari et al. 2020). Lesson 3 §2.

    >>> stage_name(3)
    'ZeRO-3'
    """
    return _STAGE_NAMES[zero_stage(zero)]


def volume_factor(zero) -> int:
    """The paper's per-step volume in units of M: 2 for plain DP, ZeRO-1 and ZeRO-2; 3 for ZeRO-3.

    Counted from STEP_COLLECTIVES (an all-reduce is 2, a reduce-scatter or all-gather 1).
    Source: Rajbhandari et al. 2020, Sec. 7.2. Lesson 3 §4.

    >>> volume_factor(0), volume_factor(3)
    (2, 3)
    """
    return sum(_UNITS[op] for _, op in STEP_COLLECTIVES[zero_stage(zero)])


def gradient_bytes(model, precision="mixed", tp=1, pp=1) -> float:
    """M: the gradient bytes of the shard one GPU owns, params / (tp x pp) x gradient bytes per parameter.

    model: a TransformerModel, a catalog name or a parameter count. 7e9 parameters in mixed
    precision (2-byte gradients): M = 14 GB. The per-GPU gradients of distlab.memory before any
    ZeRO sharding. Lesson 3 §4.

    >>> gradient_bytes(7e9), gradient_bytes(7e9, tp=2)
    (14000000000.0, 7000000000.0)
    """
    params = param_count(model)
    return finite_result("gradient bytes", memory.model_state_bytes(params, precision, 0, 1, tp, pp)[1])


@dataclass(frozen=True)
class StepCommunication:
    """The data-parallel communication of one training step, per GPU: plain floats in bytes and seconds.

    gradient_bytes is M; volume_bytes the paper's volume (2 M or 3 M); bytes_sent_per_gpu what a
    GPU really sends over the ring (volume x (N-1)/N); time_s the alpha-beta time of the
    phases one after another (None when no link was given); phases the CollectiveCost of each
    collective, named as in STEP_COLLECTIVES. ZeRO-3 priced layer by layer (layers given): each phase is one
    layer's collective and phase_counts says how many run (L, L - 1, L). Lesson 3 §4.
    """

    zero: int
    dp: int
    gradient_bytes: float
    volume_bytes: float
    bytes_sent_per_gpu: float
    time_s: float | None
    phases: tuple
    phase_names: tuple
    link: str | None = None
    layers: int | None = None
    phase_counts: tuple = ()

    @property
    def volume_factor(self) -> int:
        return volume_factor(self.zero)

    @property
    def stage(self) -> str:
        return stage_name(self.zero)

    def to_dict(self) -> dict:
        """Plain numbers and strings (JSON-ready): the fields plus stage and volume_factor; each phase's
        dict carries its name (from phase_names) and how many times it runs."""
        data = dataclasses.asdict(self)
        del data["phase_names"]
        counts = self.phase_counts or (1,) * len(self.phases)
        phases = [
            dict(cost.to_dict(), name=name, count=k) for name, cost, k in zip(self.phase_names, self.phases, counts)
        ]
        return dict(data, stage=self.stage, volume_factor=self.volume_factor, phases=phases)

    def __str__(self) -> str:
        text = (
            f"{self.stage} over {self.dp} GPUs, M = {format_bytes(self.gradient_bytes)}: volume "
            f"{self.volume_factor} x M = {format_bytes(self.volume_bytes)}; each GPU sends "
            f"{format_bytes(self.bytes_sent_per_gpu)} per step"
        )
        if self.time_s is not None:
            text += f", {format_seconds(self.time_s)}" + (f" on {self.link}" if self.link else "")
        if self.layers is not None:
            text += f" ({3 * self.layers - 1} collectives of one layer's M / {self.layers})"
        return text


def step_communication(
    model,
    *,
    zero=0,
    dp,
    precision="mixed",
    tp=1,
    pp=1,
    link=None,
    bandwidth=None,
    latency=None,
    algorithm=None,
    layers=None,
) -> StepCommunication:
    """The communication of one data-parallel training step with ZeRO stage `zero` over `dp` GPUs.

    Volume = volume_factor x M with M = gradient_bytes(model, precision, tp, pp) (Rajbhandari et
    al. 2020, Sec. 7.2: 2 M for plain DP, ZeRO-1 and ZeRO-2, 3 M for ZeRO-3); each collective's
    bytes and alpha-beta time come from distlab.collectives.collective_cost (ring), so a GPU
    sends volume x (dp-1)/dp. With a link (a name such as 'ib-ndr', or bandwidth= and latency=)
    the phases' times are added; the whole step's worth of each collective is counted as one
    message (engines split it per bucket or layer, which adds latency terms). `algorithm`
    applies to plain DP's all-reduce only (None: ring). Without a link, time_s is None and the
    phases are priced on a 1 B/s link with no latency: read only their bytes. With `layers` (L), ZeRO-3 runs as
    FSDP and the step model run it (distlab.step.data_parallel.dp_term): per layer an all-gather for the forward,
    one for the backward (not for the last layer, still gathered) and a reduce-scatter, 3L - 1 collectives of M / L,
    each paying its own ring latency: (3L - 1) ((N-1) alpha + (N-1)/N M / (L B)) instead of 3 ((N-1) alpha +
    (N-1)/N M / B). Lesson 3 §4.

    >>> comm = step_communication(7e9, zero=3, dp=8)
    >>> comm.volume_bytes, comm.bytes_sent_per_gpu  # 3 M, and 3 x 7/8 x M over the ring
    (42000000000.0, 36750000000.0)
    """
    stage = zero_stage(zero)
    n = positive_int(dp, "dp")
    m = gradient_bytes(model, precision, positive_int(tp, "tp"), positive_int(pp, "pp"))
    timed = link is not None or bandwidth is not None
    kwargs = dict(link=link, bandwidth=bandwidth, latency=latency) if timed else dict(bandwidth=1.0, latency=0.0)
    per_layer = stage == 3 and layers is not None
    count = positive_int(layers, "layers") if per_layer else 1
    counts = (count, count - 1, count) if per_layer else (1,) * len(STEP_COLLECTIVES[stage])
    names, costs = [], []
    for name, op in STEP_COLLECTIVES[stage]:
        algo = algorithm if op == "all-reduce" else None
        costs.append(collectives.collective_cost(op, m / count, n, algorithm=algo, **kwargs))
        names.append(name)
    link_name = getattr(link, "name", None)
    if isinstance(link, str):
        from . import hardware

        link_name = hardware.link(link).name
    return StepCommunication(
        zero=stage,
        dp=n,
        gradient_bytes=m,
        volume_bytes=volume_factor(stage) * m,
        bytes_sent_per_gpu=float(sum(k * c.bytes_sent_per_gpu for k, c in zip(counts, costs))),
        time_s=float(sum(k * c.time_s for k, c in zip(counts, costs))) if timed else None,
        phases=tuple(costs),
        phase_names=tuple(names),
        link=link_name,
        layers=count if per_layer else None,
        phase_counts=counts,
    )


# ----------------------------------------------------------------------------------------
# Overlap with backward


@broadcasting
def overlap_timeline(ready_s, comm_s) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) of each bucket's communication, buckets in launch order, on one stream.

    start_i = max(ready_i, end_{i-1}), end_i = start_i + comm_i (Li et al. 2020: DDP launches a
    bucket's all-reduce when all its gradients are ready; NCCL runs them in order). Written
    without a loop: end_i = C_i + max_{j<=i}(ready_j - C_{j-1}), C the running sum of comm.
    Plain NumPy arrays in seconds, not validated; bucketed_overlap validates. Lesson 3 §5.

    >>> [t.tolist() for t in overlap_timeline([1.0, 2.0], [1.5, 1.5])]  # the second bucket waits
    [[1.0, 2.5], [2.5, 4.0]]
    """
    ready = number_array(ready_s, "ready_s")
    comm = number_array(comm_s, "comm_s")
    if ready.ndim > 1 or comm.ndim > 1 or (ready.ndim == comm.ndim == 1 and ready.size != comm.size):
        raise ConfigurationError(
            f"ready_s and comm_s must be equal-length lists of seconds (got shapes {ready.shape} and {comm.shape})"
        )
    total = finite_result("bucket end times", np.cumsum(comm))
    end = total + np.maximum.accumulate(ready - (total - comm))
    return end - comm, end


@broadcasting
def exposed_communication_time(comm_s, backward_s, buckets=1):
    """Exposed communication (s) with `buckets` equal buckets: max(comm/B, comm - (B-1)/B x backward).

    comm_s is all buckets' communication together, backward_s the backward compute; gradients
    are produced at a steady rate, bucket i ready at (i+1)/B of backward. From the per-bucket
    timeline (overlap_timeline): the last bucket ends at max over i of (i+1) b + (B-i) c, with
    b = backward/B and c = comm/B, which is B b + c when c <= b (only the last bucket shows)
    and b + B c otherwise (communication-bound). B = 1: nothing overlaps, exposed = comm.
    Plain floats or NumPy arrays, not validated: the training lab's fast path. Lesson 3 §5.

    >>> exposed_communication_time(1.0, 2.0, buckets=4)  # only the last bucket shows
    0.25
    """
    b = number_array(buckets, "buckets", low=1.0)
    comm = number_array(comm_s, "comm_s")
    result = finite_result(
        "exposed communication", np.maximum(comm / b, comm - (b - 1.0) / b * number_array(backward_s, "backward_s"))
    )
    return float(result) if np.ndim(result) == 0 else result


@dataclass(frozen=True)
class OverlapTimeline:
    """Per-bucket timing of gradient communication overlapped with backward (seconds from backward's start).

    Arrays have one entry per bucket in launch order (the first bucket holds the gradients
    backward produces first, i.e. of the last layers). Lesson 3 §5.
    """

    bucket_bytes: np.ndarray
    ready_s: np.ndarray
    start_s: np.ndarray
    end_s: np.ndarray
    comm_s: np.ndarray
    backward_s: float
    op: str
    dp: int

    @property
    def buckets(self) -> int:
        return int(self.bucket_bytes.size)

    @property
    def comm_total_s(self) -> float:
        """All buckets' communication together."""
        return float(self.comm_s.sum())

    @property
    def exposed_s(self) -> float:
        """Communication left after backward ends: max(0, end of the last bucket - backward)."""
        if self.buckets == 0:
            return 0.0
        return max(0.0, float(self.end_s[-1]) - self.backward_s)

    @property
    def hidden_s(self) -> float:
        """Communication that ran under backward: the parts of the buckets' spans before backward ends.

        Equal to comm_total - exposed: once backward has ended every bucket is ready, so the
        stream never idles again.
        """
        overlap = np.minimum(self.end_s, self.backward_s) - self.start_s
        return float(np.maximum(overlap, 0.0).sum())

    @property
    def no_overlap_s(self) -> float:
        """Backward followed by all the communication: the step without overlap."""
        return self.backward_s + self.comm_total_s

    @property
    def exposure(self) -> str:
        """Why what is exposed is exposed: 'nothing to send', 'one bucket' (ready only when backward ends),
        'last bucket' (every other bucket finished under backward) or 'communication-bound' (the buckets
        queue up behind each other)."""
        if self.buckets == 0 or self.comm_total_s == 0:
            return "nothing to send"
        if self.buckets == 1:
            return "one bucket"
        last = float(self.comm_s[-1])
        return "last bucket" if abs(self.exposed_s - last) <= 1e-12 + 1e-9 * last else "communication-bound"

    @property
    def step_s(self) -> float:
        """Backward plus the exposed communication."""
        return self.backward_s + self.exposed_s

    def to_dict(self) -> dict:
        """Plain numbers and lists (JSON-ready): the fields but comm_s, plus buckets and the totals."""
        data = {
            name: value.tolist() if isinstance(value, np.ndarray) else value
            for name, value in dataclasses.asdict(self).items()
            if name != "comm_s"
        }
        return dict(
            data, buckets=self.buckets, comm_total_s=self.comm_total_s, exposed_s=self.exposed_s, hidden_s=self.hidden_s
        )

    def __str__(self) -> str:
        return (
            f"{self.buckets} bucket{'s' if self.buckets != 1 else ''}: {format_seconds(self.comm_total_s)} of "
            f"{self.op} over {self.dp} GPUs, {format_seconds(self.hidden_s)} hidden under "
            f"{format_seconds(self.backward_s)} of backward, {format_seconds(self.exposed_s)} exposed"
        )


#: Most buckets a timeline is built for (a guard against bucket_size='1 B' on a 1 TB model).
MAX_BUCKETS = 1_000_000


@renamed_keyword(grad_bytes="size")
def bucketed_overlap(
    size, backward_time, dp, *, buckets=None, bucket_size=None, link=None, bandwidth=None, latency=None, op="all-reduce"
) -> OverlapTimeline:
    """The gradient communication of a step split into buckets and overlapped with backward.

    size: M, the step's gradient bytes (e.g. gradient_bytes(model); formerly grad_bytes=);
    backward_time: the backward compute of the step;
    dp: GPUs in the all-reduce. Buckets: `buckets` equal ones, or `bucket_size` bytes each (the
    last one smaller; PyTorch DDP's default is DDP_BUCKET_BYTES = 25 MiB), default 1. Backward
    produces gradients at a steady rate, so bucket i is ready at backward x (bytes up to and
    including i) / M. Each bucket's time is collective_cost(op, bucket bytes, dp, link...), so
    smaller buckets pay the latency 2(N-1) alpha more often. The timeline follows
    overlap_timeline; exposed = max(0, end of the last bucket - backward). op: 'all-reduce'
    (plain DP) or 'reduce-scatter' (ZeRO-2's gradient step). Li et al. 2020: bucketing Sec. 3.2.2,
    overlap Sec. 3.2.3. Lesson 3 §5.

    >>> t = bucketed_overlap("14 GB", 0.8, 8, buckets=4, bandwidth="50 GB/s")
    >>> round(t.comm_total_s, 3), round(t.exposed_s, 3)
    (0.49, 0.123)
    """
    m = non_negative(size, BYTES, "size")
    backward = non_negative(backward_time, SECONDS, "backward_time")
    n = positive_int(dp, "dp")
    if not isinstance(op, str) or op not in ("all-reduce", "reduce-scatter"):
        raise ConfigurationError(f"op={op!r}: the gradient step is an 'all-reduce' (DP) or a 'reduce-scatter' (ZeRO-2)")
    if buckets is not None and bucket_size is not None:
        raise ConfigurationError("give buckets= (a count) or bucket_size= (bytes per bucket), not both")
    if bucket_size is not None:
        each = positive(bucket_size, BYTES, "bucket_size")
        ratio = m / each
        if ratio > MAX_BUCKETS:  # before ceil: a tiny bucket makes m / each overflow to inf
            raise ConfigurationError(
                f"bucket_size={format_bytes(each)} makes {ratio:,.4g} buckets of {format_bytes(m)}; "
                f"at most {MAX_BUCKETS:,}: use a bigger bucket"
            )
        count = math.ceil(ratio) if m else 0
        sizes = np.full(count, each)
        if count:
            sizes[-1] = m - each * (count - 1)
    else:
        count = 1 if buckets is None else whole_number(buckets, "buckets", 1, MAX_COUNT)
        if count > MAX_BUCKETS:
            raise ConfigurationError(f"buckets={count:,} is more than {MAX_BUCKETS:,}")
        sizes = np.full(count, m / count) if m else np.zeros(0)
    times = {}
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # overflow is refused below
        for bucket in np.unique(sizes):
            times[float(bucket)] = collectives.collective_cost(
                op, float(bucket), n, link=link, bandwidth=bandwidth, latency=latency
            ).time_s
    comm = np.array([times[float(s)] for s in sizes], dtype=float)
    with np.errstate(over="ignore", invalid="ignore"):
        ready = backward * np.cumsum(sizes) / m if m else np.zeros(0)
        start, end = overlap_timeline(ready, comm)
    require_finite("the buckets' communication time", end, ready)
    return OverlapTimeline(sizes, ready, start, end, comm, backward, op, n)


# ----------------------------------------------------------------------------------------
# Memory per GPU for each stage


def memory_per_gpu_curves(model, dps, precision="mixed", tp=1, pp=1) -> dict:
    """{stage: model-state bytes per GPU at each data-parallel degree in `dps`} for stages 0-3.

    The NumPy path of distlab.memory.model_state_bytes (ZeRO paper, Sec. 5.1 and Table 1);
    activations not counted. Lesson 3 §2 and §3.

    >>> [float(b) / 1e9 for b in memory_per_gpu_curves(7.5e9, [1, 64])[3]]  # ZeRO-3: 16 x 7.5 GB / N
    [120.0, 1.875]
    """
    params = param_count(model)
    recipe = memory.precision_recipe(precision)
    dps = number_array(dps, "dps", low=1.0)
    if dps.size == 0 or np.any(dps != np.round(dps)):
        raise ConfigurationError("dps must be whole numbers >= 1 (data-parallel degrees)")
    tp, pp = positive_int(tp, "tp"), positive_int(pp, "pp")
    return {
        stage: finite_result(
            "model-state bytes", sum(memory.model_state_bytes_array(params, recipe, stage, dps, tp, pp))
        )
        for stage in sorted(STEP_COLLECTIVES)
    }


def smallest_fitting_stage(model, dp, gpu, *, count_activations=False, **memory_kwargs) -> int | None:
    """The lowest ZeRO stage (0-3) at which `model` fits `gpu` with `dp` data-parallel GPUs, or None.

    Memory from distlab.memory.training_memory (model states only unless count_activations).
    Lesson 3 §6.

    >>> smallest_fitting_stage("llama2-7b", 8, "80 GB")  # 112 GB of model states on 8 x 80 GB
    1
    """
    for stage in sorted(STEP_COLLECTIVES):
        bd = memory.training_memory(
            model, zero=stage, dp=dp, gpu=gpu, count_activations=count_activations, **memory_kwargs
        )
        if bd.fits:
            return stage
    return None
