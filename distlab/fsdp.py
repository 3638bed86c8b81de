"""FSDP2 and HSDP: per-layer all-gathers and reduce-scatters on a computed timeline (Lesson 11 §2).

One microbatch on one GPU, layer by layer. Two streams: compute runs F_0 .. F_{L-1}, then B_{L-1} .. B_0;
one communication stream runs the collectives in the order they are issued (FSDP2 gives all-gathers and
reduce-scatters their own CUDA streams, but they share the GPU's links, so their times add; one stream
in issue order is that sum):

- forward: the all-gather AG_l of layer l's parameters is issued when F_{l-d} starts (d = ``prefetch``
  layers ahead; d = 0: when F_{l-1} ends, i.e. no overlap); F_l starts after F_{l-1} and AG_l;
- ``reshard_after_forward`` (FSDP2's default, ZeRO-3): each layer frees its gathered parameters after
  its forward and gathers them again for the backward, except the last layer, whose backward follows
  at once (torchtitan leaves it unsharded); without it the gathered parameters stay from forward to
  backward (ZeRO-2-like: no backward gathers, more memory);
- backward: AG_l is issued when B_{l+d} starts (the layers at the top: when the backward starts);
  B_l starts after B_{l+1} and AG_l; RS_l (the reduce-scatter of its gradients, and for HSDP then the
  all-reduce of the shard across replicas) is issued when B_l ends;
- with activation recomputation the block's forward runs again inside its backward (FSDP2 gathers once
  for both: the gather is issued before the block's recompute), so it lengthens B_l, not the traffic.

Exposed communication = step end - compute (Lesson 3's max(0, comm - overlapping compute), per layer).
The first gather is never hidden; a gather longer than the compute it overlaps shows the difference.
The timeline draws hidden traffic as free, to show the schedule; the step model (training.estimate) adds on top
its overlap slowdown, the compute beside the hidden traffic running efficiency.OVERLAP_SLOWDOWN (18.9%) slower.

The timeline takes the layer's compute and collective times as numbers; FSDP and HSDP of a model on a cluster
(the step model's layer, the placed collectives of distlab.collectives) are priced by
distlab.production.sharding_plan. Sources: Zhao et al. 2023, "PyTorch FSDP" (VLDB), Sec. 3-4 (hybrid sharding, prefetching, rate
limiting); the FSDP2 docs (torch.distributed.fsdp.fully_shard: reshard_after_forward, HSDP with a 2-D
DeviceMesh); Rajbhandari et al. 2020 (ZeRO), Sec. 7.2.2 (ZeRO-3 moves 3M per step); torchtitan
(fsdp_reshard_after_forward, the last block left unsharded).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._words import counted
from ._arguments import broadcasting, finite_result, number_array, readonly
from .errors import ConfigurationError
from .units import SECONDS, format_seconds, non_negative, positive, positive_int

__all__ = [
    "MAX_LAYERS",
    "MAX_PREFETCH",
    "SHARDINGS",
    "layer_by_layer_exposed",
    "collectives_per_microbatch",
    "FsdpTimeline",
    "fsdp_timeline",
]

#: Most layers a timeline simulates (the largest catalog models have 126).
MAX_LAYERS = 1024
#: Most layers prefetched ahead.
MAX_PREFETCH = 16
#: 'full': FSDP / ZeRO-3 over every GPU; 'hybrid': HSDP, shard within a node, replicate across nodes.
SHARDINGS = ("full", "hybrid")


# ----------------------------------------------------------------------------------------- the fast path


@broadcasting
def layer_by_layer_exposed(
    forward_s, backward_s, gather_s, reduce_scatter_s, layers, prefetch=1, reshard_after_forward=True
):
    """Exposed communication (s) of one microbatch under FSDP / ZeRO-3, layer by layer (NumPy broadcast).

    Uniform layers: ``layers`` of them (an int, or an array of counts broadcast with the times: a sweep over
    pipeline depths), each with forward ``forward_s``, backward ``backward_s`` (with any recomputation),
    all-gather ``gather_s`` and gradient reduction ``reduce_scatter_s`` (for HSDP: the reduce-scatter
    plus the all-reduce across replicas). The schedule is the module's (prefetch d, one communication
    stream in issue order); the result is step end - L (forward + backward). Plain floats or arrays of
    finite times >= 0 and whole layer counts >= 1 (the step model's fast path; ``fsdp_timeline`` also
    keeps every event).

    For distlab.training: per microbatch, with t_f / t_b the per-layer forward / backward time on a
    stage and ag / rs the per-layer collective times, ``m * layer_by_layer_exposed(t_f, t_b, ag, rs,
    layers_per_stage)`` replaces the ``m * exposed_communication_time(1.5 all-reduces, t_mb, buckets)``
    estimate of ZeRO-3. Lesson 11 §2.

    With d = 1 and every collective shorter than the layer's compute, only the first gather and the
    last reduce-scatter show:

    >>> float(layer_by_layer_exposed(1.0, 2.0, 0.5, 0.5, layers=4))
    1.0
    """
    f, b, g, r, n = np.broadcast_arrays(
        *(
            _numbers(value, name)
            for value, name in zip((forward_s, backward_s, gather_s, reduce_scatter_s, layers), _INPUTS)
        )
    )
    d, reshard = _prefetch(prefetch), _flag(reshard_after_forward, "reshard_after_forward")
    with np.errstate(over="ignore", invalid="ignore"):  # a sum past 1e308 is refused below, not warned about
        valid = not f.size or bool(
            min(f.min(), b.min(), g.min(), r.min()) >= 0
            and n.min() >= 1
            and np.isfinite(f + b + g + r + n).all()
            and (n == np.floor(n)).all()
        )
        out = _closed_form_step(f, b, g, r, n, d, reshard) - n * (f + b)
    if not valid:
        _refuse_inputs(forward_s, backward_s, gather_s, reduce_scatter_s, layers)
    # the one case without a closed form: prefetch >= 2, resharding, a backward the communication outlasts
    slow = (d >= 2) & reshard & (g + r > b) & (n > 1)
    if np.any(slow):
        if np.max(n[slow]) > MAX_LAYERS:
            raise ConfigurationError(
                f"layers={int(np.max(n[slow]))} is more than {MAX_LAYERS} with prefetch={d} (that schedule is "
                f"simulated layer by layer); valid: 1..{MAX_LAYERS}"
            )
        out = np.array(out, dtype=float)
        for count in np.unique(n[slow]):
            pick = slow & (n == count)
            ends = _simulate(f[pick], b[pick], g[pick], r[pick], int(count), d, reshard)["end"]
            out[pick] = ends - count * (f[pick] + b[pick])
    if not np.isfinite(out).all():
        finite_result("layer_by_layer_exposed", out)  # raises: the inputs are too far out of range
    return float(out) if np.ndim(out) == 0 else out


#: layer_by_layer_exposed's array inputs, in order.
_INPUTS = ("forward_s", "backward_s", "gather_s", "reduce_scatter_s", "layers")


def _numbers(value, name: str) -> np.ndarray:
    """A float array of `value` when it holds real numbers (checked in one pass afterwards), else our error."""
    if isinstance(value, (str, bytes)) or value is None:
        return number_array(value, name)  # raises, naming the parameter
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        return number_array(value, name)  # raises
    return array.astype(float, copy=False)


def _refuse_inputs(*values) -> None:
    """Name the first of layer_by_layer_exposed's inputs that is not finite, negative or not a whole layer count
    (the one-pass check above found one, or only a sum past 1e308, which the result's check refuses)."""
    for value, name in zip(values[:4], _INPUTS):
        number_array(value, name)
    counts = number_array(values[4], "layers", low=1.0)
    if np.any(counts != np.floor(counts)):
        raise ConfigurationError(f"layers={values[4]!r} must hold whole numbers of layers (>= 1)")


def _closed_form_step(f, b, g, r, n, d: int, reshard: bool):
    """The step end of the module's schedule for uniform layers, in closed form (exact except for prefetch
    >= 2 with resharding when g + r > b; tests/core/test_fsdp.py ties it to the simulation).

    Forward: the gathers run back to back from 0 and each layer waits for its own, so with prefetch >= 1
    T_F = max(g + L f, L g + f); without prefetch every gather waits for the previous layer: L (g + f).
    Backward (top layer first, it is not resharded): prefetch 1 starts B_{L-2} after max(b, g), then each
    layer after max(b, g + r) (its gather queues behind the reduction of the layer above), the last after
    max(b, r), and its reduction adds r; prefetch 0 adds g + r after every layer but the top; without
    resharding only the reductions, max(b, r) per layer."""
    if d == 0:
        forward = n * (g + f)
    else:
        forward = np.maximum(g + n * f, n * g + f)
    if not reshard:
        return forward + b + (n - 1) * np.maximum(b, r) + r
    if d == 0:
        back = b + (n - 1) * (b + r + g) + r
    else:
        back = np.maximum(b, g) + (n - 2) * np.maximum(b, g + r) + np.maximum(b, r) + r
    one_layer = b + r
    return forward + np.where(n > 1, back, one_layer)


def _simulate(f, b, g, r, layers: int, d: int, reshard: bool) -> dict:
    """The module's schedule, for arrays of per-layer times (all of one shape): per layer the start and
    end of F, B, the forward and backward gathers and the reductions, and the step end."""
    L = layers
    shape = np.shape(f)
    zero = np.zeros(shape)
    nan = np.full((L,) + shape, np.nan)
    f_start, f_end, b_start, b_end = nan.copy(), nan.copy(), nan.copy(), nan.copy()
    ag_start, ag_end, bg_start, bg_end, rs_start, rs_end = (nan.copy() for _ in range(6))
    comm = zero.copy()
    sequence = []

    def run_comm(issue, length, what):
        nonlocal comm
        sequence.append(what)
        start = np.maximum(issue, comm)
        comm = start + length
        return start, comm

    # forward: AG_l issued when F_{l-d} starts (d = 0: when F_{l-1} ends)
    for l in range(L):
        if d == 0:
            issue = f_end[l - 1] if l else zero
        else:
            issue = f_start[l - d] if l - d >= 0 else zero
        ag_start[l], ag_end[l] = run_comm(issue, g, ("all-gather", l))
        ready = f_end[l - 1] if l else zero
        f_start[l] = np.maximum(ready, ag_end[l])
        f_end[l] = f_start[l] + f
    backward_start = f_end[L - 1]
    needs = [reshard and l < L - 1 for l in range(L)]  # the last layer is never resharded

    # backward gathers issued at the backward's start: the top d layers (d = 0: the top one)
    first = L - 1 - max(d, 1)
    for l in range(L - 1, first, -1):
        if l >= 0 and needs[l]:
            bg_start[l], bg_end[l] = run_comm(backward_start, g, ("all-gather", l))
    for l in range(L - 1, -1, -1):
        ready = b_end[l + 1] if l < L - 1 else backward_start
        if needs[l]:
            ready = np.maximum(ready, bg_end[l])
        b_start[l] = ready
        if d >= 1 and l - d >= 0 and needs[l - d]:  # prefetch the gather d layers down
            bg_start[l - d], bg_end[l - d] = run_comm(b_start[l], g, ("all-gather", l - d))
        b_end[l] = b_start[l] + b
        rs_start[l], rs_end[l] = run_comm(b_end[l], r, ("reduce", l))
        if d == 0 and l - 1 >= 0 and needs[l - 1]:  # no prefetch: gather the next layer when this one ends
            bg_start[l - 1], bg_end[l - 1] = run_comm(b_end[l], g, ("all-gather", l - 1))
    end = np.maximum(b_end[0], comm)
    return dict(
        f_start=f_start,
        f_end=f_end,
        b_start=b_start,
        b_end=b_end,
        ag_start=ag_start,
        ag_end=ag_end,
        bg_start=bg_start,
        bg_end=bg_end,
        rs_start=rs_start,
        rs_end=rs_end,
        end=end,
        sequence=tuple(sequence),
    )


def collectives_per_microbatch(layers, reshard_after_forward=True, replicas=1) -> dict:
    """How many collectives one microbatch runs, one per layer each time (the module's schedule).

    all-gather: L in the forward, plus L - 1 in the backward with resharding (the last layer is kept);
    reduce-scatter: L; all-reduce (HSDP, across ``replicas`` > 1): L. Each all-gather's buffer is a
    layer's parameters, each reduce-scatter's and all-reduce's its gradients (the all-reduce's the
    1/g shard). distlab.verify.measure_sharding counts these in torch's FSDP2. Lesson 11 §2.

    >>> collectives_per_microbatch(32)
    {'all-gather': 63, 'reduce-scatter': 32, 'all-reduce': 0}
    """
    n = positive_int(layers, "layers")
    if n > MAX_LAYERS:
        raise ConfigurationError(f"layers={n} is more than {MAX_LAYERS}; valid: 1..{MAX_LAYERS}")
    reshard = _flag(reshard_after_forward, "reshard_after_forward")
    r = positive_int(replicas, "replicas")
    return {"all-gather": n + (n - 1 if reshard else 0), "reduce-scatter": n, "all-reduce": n if r > 1 else 0}


# ----------------------------------------------------------------------------------------- the timeline


@dataclass(frozen=True, eq=False)
class FsdpTimeline:
    """One microbatch under FSDP on one GPU: every compute and communication event, in seconds.

    Per layer l (arrays of length L): ``f_start``/``f_end`` (forward), ``b_start``/``b_end`` (backward),
    ``ag_*`` (forward all-gather), ``bg_*`` (backward all-gather; NaN where the layer is not resharded),
    ``rs_*`` (gradient reduction). ``exposed_s`` = ``step_s`` - ``compute_s``; ``peak_gathered`` = the
    most layers whose gathered parameters are held at once (memory: the forward's prefetch window, or
    every layer between forward and backward without resharding). Lesson 11 §2.
    """

    layers: int
    prefetch: int
    reshard_after_forward: bool
    forward_s: float
    backward_s: float
    gather_s: float
    reduce_s: float
    f_start: np.ndarray
    f_end: np.ndarray
    b_start: np.ndarray
    b_end: np.ndarray
    ag_start: np.ndarray
    ag_end: np.ndarray
    bg_start: np.ndarray
    bg_end: np.ndarray
    rs_start: np.ndarray
    rs_end: np.ndarray
    step_s: float
    peak_gathered: int
    sequence: tuple = ()  # the collectives in issue order (see comm_order)

    @property
    def compute_s(self) -> float:
        return self.layers * (self.forward_s + self.backward_s)

    @property
    def exposed_s(self) -> float:
        return max(self.step_s - self.compute_s, 0.0)

    @property
    def communication_s(self) -> float:
        """Time the communication stream is busy."""
        gathers = self.layers + int(np.isfinite(self.bg_start).sum())
        return gathers * self.gather_s + self.layers * self.reduce_s

    def comm_order(self) -> list[tuple[str, int]]:
        """The communication stream's collectives in the order they are issued: ('all-gather' or 'reduce',
        layer). distlab.verify.measure_sharding compares it with the order torch's FSDP2 issues them.

        >>> fsdp_timeline(1.0, 2.0, 0.5, 0.5, layers=2).comm_order()
        [('all-gather', 0), ('all-gather', 1), ('all-gather', 0), ('reduce', 1), ('reduce', 0)]
        """
        return list(self.sequence)

    @property
    def gather_exposed_per_layer_s(self) -> float:
        """How much one forward gather outlasts the forward of the layer it overlaps (0 when it hides)."""
        return max(self.gather_s - self.forward_s, 0.0) if self.prefetch else self.gather_s

    def summary(self) -> str:
        """Two lines: step, compute, exposed; the layers gathered at once. Lesson 11 §2.

        >>> print(fsdp_timeline(1.0, 2.0, 0.5, 0.5, layers=4).summary())
        4 layers, prefetch 1, reshard after forward: step 13 s = compute 12 s + exposed 1 s;
            2 layers gathered at most
        """
        mode = "reshard after forward" if self.reshard_after_forward else "no reshard"
        layers = counted(self.layers, "layer")
        gathered = counted(self.peak_gathered, "layer")  # prefetch 0: "1 layer"
        return (
            f"{layers}, prefetch {self.prefetch}, {mode}: step {format_seconds(self.step_s)} = "
            f"compute {format_seconds(self.compute_s)} + exposed {format_seconds(self.exposed_s)};\n"
            f"    {gathered} gathered at most"
        )


def fsdp_timeline(
    forward_s, backward_s, gather_s, reduce_s, layers, *, prefetch=1, reshard_after_forward=True
) -> FsdpTimeline:
    """Simulate one microbatch of FSDP layer by layer (the module's schedule); times per layer, seconds.

    ``reduce_s``: the gradient reduction of one layer (reduce-scatter; for HSDP plus the all-reduce of
    the shard across replicas). Lesson 11 §2.

    >>> tl = fsdp_timeline("1 ms", "2 ms", "1.5 ms", "0.5 ms", layers=2)
    >>> round(tl.exposed_s * 1e3, 6)  # first gather 1.5 + second gather's 0.5 over F_0 + last reduction 0.5
    2.5
    """
    f = positive(forward_s, SECONDS, "forward_s")
    b = positive(backward_s, SECONDS, "backward_s")
    g = non_negative(gather_s, SECONDS, "gather_s")
    r = non_negative(reduce_s, SECONDS, "reduce_s")
    n = positive_int(layers, "layers")
    if n > MAX_LAYERS:
        raise ConfigurationError(f"layers={n} is more than {MAX_LAYERS}; valid: 1..{MAX_LAYERS}")
    d = _prefetch(prefetch)
    reshard = _flag(reshard_after_forward, "reshard_after_forward")
    with np.errstate(over="ignore", invalid="ignore"):
        ev = _simulate(np.float64(f), np.float64(b), np.float64(g), np.float64(r), n, d, reshard)
    finite_result("fsdp_timeline's step time", ev["end"])
    peak = min(n, d + 1) if reshard else n  # the layer computing + d prefetched; or every layer kept

    def events(key: str) -> np.ndarray:
        return readonly(np.asarray(ev[key], dtype=float))

    return FsdpTimeline(
        n,
        d,
        reshard,
        f,
        b,
        g,
        r,
        f_start=events("f_start"),
        f_end=events("f_end"),
        b_start=events("b_start"),
        b_end=events("b_end"),
        ag_start=events("ag_start"),
        ag_end=events("ag_end"),
        bg_start=events("bg_start"),
        bg_end=events("bg_end"),
        rs_start=events("rs_start"),
        rs_end=events("rs_end"),
        step_s=float(ev["end"]),
        peak_gathered=int(peak),
        sequence=ev["sequence"],
    )


def _prefetch(value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value <= MAX_PREFETCH:
        raise ConfigurationError(f"prefetch={value!r}: layers gathered ahead, a whole number in 0..{MAX_PREFETCH}")
    return int(value)


def _flag(value, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ConfigurationError(f"{name}={value!r} must be True or False")
    return bool(value)
