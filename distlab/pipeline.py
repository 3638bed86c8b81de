"""Pipeline parallelism: schedules, a timeline simulator, closed forms and stage analysis.

Conventions
-----------
* p = ``stages`` (GPUs in one pipeline), m = ``microbatches`` per step, v = ``chunks``
  (model chunks per stage, interleaved schedule only). Stages, microbatches and chunks
  are numbered from 0.
* Durations are per microbatch for ALL of one stage's layers, in seconds (a plain
  number, a Quantity or a string such as "2 ms"); each may also be a sequence of p
  values, one per stage (an uneven split):

  - ``t_f``: forward,
  - ``t_b``: the input-gradient part of the backward (the "B" of Qi et al. 2023),
  - ``t_w``: the weight-gradient part ("W"), may be 0.

  Schedules that do not split the backward (naive, gpipe, 1f1b, interleaved) run one
  B operation of length ``t_b + t_w``; only zb-h1 runs B and W as separate
  operations. Defaults F:B:W = 1:1:1, so a full backward is 2 x forward.
* Interleaved: stage s holds model chunks c = 0..v-1, i.e. virtual stages c*p + s, so
  one chunk operation takes t/v. ``p2p`` is a latency added to every dependency that
  crosses from one stage (GPU) to another; a send does not occupy either stage.
* Ops: F of a microbatch (and chunk) on virtual stage k starts after its F ends on
  virtual stage k-1 (+p2p); B after B on k+1 (+p2p), or after its own F on the last
  virtual stage; W after its own B. A stage runs its ops one at a time in the given
  order.

* Memory: ``activation_memory`` turns a timeline's peak in-flight microbatches per stage
  into bytes with ``distlab.memory.activation_bytes_per_layer`` (Korthikanti et al. 2022):
  per layer x layers on the stage x peak in flight.

Sources: GPipe (Huang et al. 2019); 1F1B = PipeDream-Flush and interleaved 1F1B
(Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters
Using Megatron-LM", Sec. 2.2); ZB-H1 (Qi et al. 2023, "Zero Bubble Pipeline
Parallelism", Sec. 2.1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, NamedTuple, Sequence

import numpy as np

from ._arguments import divisors, readonly, short_list
from .errors import ConfigurationError
from .units import (
    BYTES,
    BYTES_PER_SECOND,
    SECONDS,
    Q_,
    format_bytes,
    format_rate,
    format_seconds,
    non_negative,
    positive,
    positive_int,
    to_base,
)

__all__ = [
    "KINDS",
    "Op",
    "Timeline",
    "ClosedForm",
    "PipelineWarning",
    "StageAnalysis",
    "stage_orders",
    "naive_order",
    "gpipe_order",
    "one_f_one_b_order",
    "interleaved_order",
    "zb_h1_order",
    "simulate",
    "schedule",
    "bubble_fraction",
    "bubble_overhead",
    "zb_h1_bubble_time",
    "closed_form",
    "check_microbatches",
    "split_layers",
    "activation_bytes",
    "analyze_stages",
    "StageActivations",
    "activation_memory",
    "pipeline_step_time",
]

#: The schedule kinds, in the order a student meets them.
KINDS = ("naive", "gpipe", "1f1b", "interleaved", "zb-h1")

_ALIASES = {
    "naive": "naive",
    "gpipe": "gpipe",
    "1f1b": "1f1b",
    "pipedream-flush": "1f1b",
    "interleaved": "interleaved",
    "interleaved-1f1b": "interleaved",
    "zb-h1": "zb-h1",
    "zbh1": "zb-h1",
}

_F, _B, _W = 0, 1, 2
_KIND_LETTERS = np.array(["F", "B", "W"])
_LETTER_CODES = {"F": _F, "B": _B, "W": _W}


class Op(NamedTuple):
    """One operation of a stage: kind 'F', 'B' or 'W', microbatch and model chunk (0-based)."""

    kind: str
    microbatch: int
    chunk: int = 0


# --------------------------------------------------------------------------- validation


def _kind(kind) -> str:
    if not isinstance(kind, str):
        raise ConfigurationError(f"kind={kind!r} is not a schedule name; valid: {', '.join(KINDS)}")
    key = kind.strip().lower().replace("_", "-").replace(" ", "-")
    if key not in _ALIASES:
        raise ConfigurationError(f"unknown schedule kind={kind!r}; valid: {', '.join(KINDS)}")
    return _ALIASES[key]


def check_microbatches(microbatches, batch=None) -> int:
    """Validate m against the samples one pipeline gets per step (``batch``, optional).

    m may not exceed the samples and must divide them (each microbatch has batch/m
    samples). Returns m as an int; raises ConfigurationError naming the valid values.
    """
    m = positive_int(microbatches, "microbatches")
    if batch is None:
        return m
    n = positive_int(batch, "batch")
    if m > n:
        raise ConfigurationError(
            f"microbatches={m} exceeds the {n} samples the pipeline gets per step (batch={n}); "
            f"a microbatch holds at least one sample. Valid: divisors of {n}: {short_list(divisors(n))}"
        )
    if n % m:
        raise ConfigurationError(
            f"microbatches={m} does not divide batch={n} samples per pipeline; "
            f"valid: {short_list(divisors(n))}"
        )
    return m


def _check_layout(kind: str, p: int, m: int, v: int, layers=None) -> None:
    if v != 1 and kind != "interleaved":
        raise ConfigurationError(
            f"chunks={v} applies only to the interleaved schedule (kind={kind!r} runs one chunk "
            f"per stage); use chunks=1 or kind='interleaved'"
        )
    if kind == "interleaved" and m % p:
        valid = [p * k for k in range(1, 4)]
        raise ConfigurationError(
            f"interleaved needs microbatches to be a multiple of stages (got microbatches={m}, "
            f"stages={p}): like Megatron-LM it runs microbatches in rounds of p per model chunk, "
            f"so chunk c+1 of a round starts on stage 0 exactly when chunk c of that round leaves "
            f"stage {p - 1}; valid: {', '.join(map(str, valid))}, ..."
        )
    if kind == "zb-h1" and m < p:
        raise ConfigurationError(
            f"zb-h1 needs microbatches >= stages (got microbatches={m}, stages={p}): stage s delays "
            f"its first W pass by s steady-state steps, which needs a full 1F1B steady state; "
            f"use microbatches >= {p}, or kind='1f1b'/'gpipe'"
        )
    if layers is not None:
        n_layers = positive_int(layers, "layers")
        if p > n_layers:
            raise ConfigurationError(
                f"stages={p} exceeds layers={n_layers}: every stage needs at least one layer; "
                f"valid: 1..{n_layers}"
            )
        if v > 1:
            if n_layers % p:
                raise ConfigurationError(
                    f"interleaved needs layers={n_layers} to split evenly over stages={p}; "
                    f"valid stages: {short_list(divisors(n_layers))}"
                )
            per_stage = n_layers // p
            if per_stage % v:
                raise ConfigurationError(
                    f"chunks={v} does not divide the {per_stage} layers per stage "
                    f"({n_layers} layers / {p} stages); valid: {short_list(divisors(per_stage))}"
                )


def _per_stage(value, p: int, name: str, allow_zero: bool) -> np.ndarray:
    check = non_negative if allow_zero else positive
    is_array = isinstance(value, np.ndarray) and value.ndim > 0
    if isinstance(value, (str, bytes)) or not (isinstance(value, Sequence) or is_array):
        if isinstance(value, np.ndarray):
            value = value.item()
        return np.full(p, check(value, SECONDS, name), dtype=float)
    values = list(value)
    if len(values) != p:
        raise ConfigurationError(
            f"{name} has {len(values)} values but there are stages={p}; give one number or {p}"
        )
    return np.array([check(x, SECONDS, f"{name}[{i}]") for i, x in enumerate(values)], dtype=float)


# --------------------------------------------------------------------------- schedules
# Internal generators return, per stage, three int lists (kind codes, microbatch, chunk).


def _naive(p: int, m: int):
    kinds = [_F, _B] * m
    mbs = [j for j in range(m) for _ in (0, 1)]
    return [(list(kinds), list(mbs), [0] * (2 * m)) for _ in range(p)]


def _gpipe(p: int, m: int):
    kinds = [_F] * m + [_B] * m
    mbs = list(range(m)) * 2
    return [(list(kinds), list(mbs), [0] * (2 * m)) for _ in range(p)]


def _one_f_one_b(p: int, m: int):
    out = []
    for s in range(p):
        warm = min(p - s - 1, m)
        kinds = [_F] * warm
        mbs = list(range(warm))
        for k in range(m - warm):
            kinds += (_F, _B)
            mbs += (warm + k, k)
        kinds += [_B] * warm
        mbs += range(m - warm, m)
        out.append((kinds, mbs, [0] * len(kinds)))
    return out


def _interleaved(p: int, m: int, v: int):
    if v == 1:
        return _one_f_one_b(p, m)
    total = m * v
    idx = np.arange(total)
    rnd, pos = np.divmod(idx, p * v)
    f_chunk = pos // p
    f_mb = (rnd * p + pos % p).tolist()
    b_chunk = (v - 1 - f_chunk).tolist()
    f_chunk = f_chunk.tolist()
    out = []
    for s in range(p):
        warm = min(2 * (p - s - 1) + (v - 1) * p, total)
        steady = total - warm
        kinds = [_F] * warm + [_F, _B] * steady + [_B] * warm
        mbs = f_mb[:warm]
        chunks = f_chunk[:warm]
        pair_mb = [0] * (2 * steady)
        pair_mb[0::2] = f_mb[warm:]
        pair_mb[1::2] = f_mb[:steady]
        pair_chunk = [0] * (2 * steady)
        pair_chunk[0::2] = f_chunk[warm:]
        pair_chunk[1::2] = b_chunk[:steady]
        mbs = mbs + pair_mb + f_mb[steady:]
        chunks = chunks + pair_chunk + b_chunk[steady:]
        out.append((kinds, mbs, chunks))
    return out


def _zb_h1(p: int, m: int):
    out = []
    for s in range(p):
        warm = min(p - s - 1, m)
        kinds = [_F] * warm
        mbs = list(range(warm))
        for k in range(m):
            if k < m - warm:
                kinds.append(_F)
                mbs.append(warm + k)
            kinds.append(_B)
            mbs.append(k)
            if k >= s:  # stage s holds back its first s W passes (Qi et al. 2023, Fig. 3)
                kinds.append(_W)
                mbs.append(k - s)
        first_late = max(m - s, 0)
        kinds += [_W] * (m - first_late)
        mbs += range(first_late, m)
        out.append((kinds, mbs, [0] * len(kinds)))
    return out


def _raw_orders(kind: str, p: int, m: int, v: int):
    if kind == "naive":
        return _naive(p, m)
    if kind == "gpipe":
        return _gpipe(p, m)
    if kind == "1f1b":
        return _one_f_one_b(p, m)
    if kind == "interleaved":
        return _interleaved(p, m, v)
    return _zb_h1(p, m)


def _as_ops(raw) -> tuple[tuple[Op, ...], ...]:
    letters = ("F", "B", "W")
    return tuple(
        tuple(Op(letters[k], j, c) for k, j, c in zip(kinds, mbs, chunks)) for kinds, mbs, chunks in raw
    )


def stage_orders(kind: str, stages, microbatches, chunks=1) -> tuple[tuple[Op, ...], ...]:
    """Per stage, the ordered operations of schedule `kind` (one of KINDS)."""
    name = _kind(kind)
    p = positive_int(stages, "stages")
    m = positive_int(microbatches, "microbatches")
    v = positive_int(chunks, "chunks")
    _check_layout(name, p, m, v)
    return _as_ops(_raw_orders(name, p, m, v))


def naive_order(stages, microbatches=1):
    """Naive model parallelism: each microbatch runs F then B through all stages before the next.

    With one microbatch this is plain model parallelism; only one stage is ever busy, so
    the idle share is (p-1)/p.
    """
    return stage_orders("naive", stages, microbatches)


def gpipe_order(stages, microbatches):
    """GPipe (Huang et al. 2019): all m forwards, then all m backwards (microbatch 0 first)."""
    return stage_orders("gpipe", stages, microbatches)


def one_f_one_b_order(stages, microbatches):
    """1F1B / PipeDream-Flush (Narayanan et al. 2021): stage s warms up with min(p-s-1, m)
    forwards, then alternates one F and one B, then drains the remaining Bs.

    With m < p the warm-up is cut to m (valid but degenerate: no steady state).
    """
    return stage_orders("1f1b", stages, microbatches)


def interleaved_order(stages, microbatches, chunks):
    """Interleaved 1F1B with v chunks per stage, Megatron-LM's ordering (Narayanan et al. 2021, 2.2.2).

    Forward slot i runs chunk (i // p) % v of microbatch (i // (p v)) p + i % p; backward
    slots run the chunks in reverse. Stage s warms up with 2(p-s-1) + (v-1)p forward slots
    (capped at m v), then alternates F and B. Needs m to be a multiple of p. With v = 1 it
    is 1F1B.
    """
    return stage_orders("interleaved", stages, microbatches, chunks)


def zb_h1_order(stages, microbatches):
    """ZB-H1 (Qi et al. 2023, Sec. 2.1): 1F1B's warm-up and F/B order with B split into B and W;
    stage s runs W of microbatch k - s right after B of microbatch k, and its last s Ws at
    the end, so every stage holds at most p microbatches (1F1B's peak) while the Ws fill the
    drain bubble. Needs m >= p.
    """
    return stage_orders("zb-h1", stages, microbatches)


# --------------------------------------------------------------------------- simulator


@dataclass(frozen=True, eq=False)
class Timeline:
    """A simulated pipeline step. Times in seconds (start of the step = 0); ops listed stage by
    stage in execution order.

    ``bubble_fraction`` = idle share of p x step_time; ``overhead`` = step_time / (busiest
    stage's compute) - 1 (the time added over ideal); ``peak_in_flight`` = most microbatches
    whose F has started and whose B has not ended, per stage (interleaved: chunk activations
    / v, i.e. microbatch-equivalents of the stage's layers); ``peak_in_flight_w`` counts until
    W ends instead (differs only for zb-h1, where W still needs stored tensors).
    """

    schedule: str
    stages: int
    microbatches: int
    chunks: int
    stage: np.ndarray
    kind: np.ndarray
    microbatch: np.ndarray
    chunk: np.ndarray
    start: np.ndarray
    end: np.ndarray
    step_time: float
    busy: np.ndarray
    stage_bubble: np.ndarray
    bubble_fraction: float
    overhead: float
    peak_in_flight: np.ndarray
    peak_in_flight_w: np.ndarray
    p2p: float = 0.0

    @property
    def duration(self) -> np.ndarray:
        return self.end - self.start

    def ops(self, stage: int) -> tuple[Op, ...]:
        """The ordered operations of one stage."""
        sel = self.stage == stage
        return tuple(
            Op(str(k), int(j), int(c))
            for k, j, c in zip(self.kind[sel], self.microbatch[sel], self.chunk[sel])
        )

    def label(self, index: int) -> str:
        """Text of one op: kind + microbatch, and '.chunk' when chunks > 1 (e.g. 'F3', 'B3.1')."""
        text = f"{self.kind[index]}{self.microbatch[index]}"
        return text + f".{self.chunk[index]}" if self.chunks > 1 else text

    def grid_rows(self, slot=None) -> list[list[str]]:
        """Per stage, one label per time slot ('' when idle); a slot shows the op running at its middle.

        ``slot`` defaults to the shortest nonzero op duration.
        """
        if slot is None:
            durations = self.duration[self.duration > 0]
            width = float(durations.min()) if durations.size else 1.0
        else:
            width = positive(slot, SECONDS, "slot")
        columns = max(1, int(math.ceil(self.step_time / width - 1e-9)))
        if columns > 100_000:
            raise ConfigurationError(
                f"slot={width:g} s gives {columns} columns for a step of {self.step_time:g} s; "
                f"use a slot of at least {self.step_time / 100_000:g} s"
            )
        middles = (np.arange(columns) + 0.5) * width
        rows = []
        for s in range(self.stages):
            index = np.flatnonzero((self.stage == s) & (self.end > self.start))
            starts, ends = self.start[index], self.end[index]
            pos = np.searchsorted(starts, middles, side="right") - 1
            row = []
            for col, k in enumerate(pos):
                running = k >= 0 and middles[col] < ends[k]
                row.append(self.label(int(index[k])) if running else "")
            rows.append(row)
        return rows

    def grid(self, slot=None) -> str:
        """A text grid, one row per stage, one column per time slot ('.' = idle)."""
        rows = self.grid_rows(slot)
        width = max([len(cell) for row in rows for cell in row] + [1])
        name_width = len(str(self.stages - 1))
        lines = []
        for s, row in enumerate(rows):
            cells = " ".join((cell or ".").ljust(width) for cell in row)
            lines.append(f"stage {s:>{name_width}} | {cells}".rstrip())
        return "\n".join(lines)

    def summary(self) -> dict:
        """The headline numbers with units, for display."""
        return {
            "schedule": self.schedule,
            "step_time": Q_(self.step_time, "s"),
            "bubble": Q_(100.0 * self.bubble_fraction, "%"),
            "overhead": Q_(100.0 * self.overhead, "%"),
            "peak_in_flight": float(self.peak_in_flight.max()),
        }

    def to_dict(self, grid: bool = True, slot=None) -> dict:
        """Plain-data form (JSON-ready): numbers in seconds/fractions, the op list and the grid."""
        ops = [
            {
                "stage": int(s),
                "kind": str(k),
                "microbatch": int(j),
                "chunk": int(c),
                "start": float(a),
                "end": float(b),
            }
            for s, k, j, c, a, b in zip(
                self.stage, self.kind, self.microbatch, self.chunk, self.start, self.end
            )
        ]
        data = {
            "schedule": self.schedule,
            "stages": self.stages,
            "microbatches": self.microbatches,
            "chunks": self.chunks,
            "p2p": self.p2p,
            "step_time": float(self.step_time),
            "bubble_fraction": float(self.bubble_fraction),
            "overhead": float(self.overhead),
            "busy": [float(x) for x in self.busy],
            "stage_bubble": [float(x) for x in self.stage_bubble],
            "peak_in_flight": [float(x) for x in self.peak_in_flight],
            "peak_in_flight_w": [float(x) for x in self.peak_in_flight_w],
            "ops": ops,
        }
        if grid:
            data["grid"] = self.grid(slot).splitlines()
        return data

    def __repr__(self) -> str:
        return (
            f"Timeline({self.schedule}, p={self.stages}, m={self.microbatches}, v={self.chunks}, "
            f"step_time={self.step_time:.6g} s, bubble={100 * self.bubble_fraction:.2f}%)"
        )


def _simulate_raw(raw, p, v, t_f, t_b, t_w, p2p, schedule, m=None) -> Timeline:
    lengths = [len(kinds) for kinds, _, _ in raw]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    n_ops = int(offsets[-1])
    stage = np.repeat(np.arange(p), lengths)
    kind = np.fromiter((k for r in raw for k in r[0]), dtype=np.int64, count=n_ops)
    mb = np.fromiter((j for r in raw for j in r[1]), dtype=np.int64, count=n_ops)
    chunk = np.fromiter((c for r in raw for c in r[2]), dtype=np.int64, count=n_ops)
    if n_ops == 0:
        raise ConfigurationError("the schedule has no operations")
    if kind.min() < 0 or kind.max() > 2 or mb.min() < 0 or chunk.min() < 0 or chunk.max() >= v:
        raise ConfigurationError(
            f"ops must be F/B/W with microbatch >= 0 and chunk in 0..{v - 1}"
        )
    if m is None:
        m = int(mb.max()) + 1
    split = bool((kind == _W).any())
    # Every (stage, chunk, microbatch) needs exactly one F, one B, and one W when W is split.
    key = ((kind * p + stage) * v + chunk) * m + mb
    counts = np.bincount(key, minlength=3 * p * v * m).reshape(3, p * v * m)
    needed = 3 if split else 2
    if counts[:needed].min() != 1 or counts[:needed].max() != 1 or counts[needed:].any():
        bad = np.argwhere(counts[:needed] != 1)[0]
        rest, j = divmod(int(bad[1]), m)
        s, c = divmod(rest, v)
        raise ConfigurationError(
            f"stage {s} runs {'FBW'[bad[0]]} of microbatch {j} chunk {c} "
            f"{counts[bad[0], bad[1]]} times; every op must appear exactly once"
        )
    table = np.empty(3 * p * v * m, dtype=np.int64)
    table[key] = np.arange(n_ops)

    def lookup(k, s, c, j):
        return table[((k * p + s) * v + c) * m + j]

    vstage = chunk * p + stage
    last = p * v - 1
    dep = np.full(n_ops, -1, dtype=np.int64)
    is_f, is_b, is_w = kind == _F, kind == _B, kind == _W
    f_dep = is_f & (vstage > 0)
    prev = vstage[f_dep] - 1
    dep[f_dep] = lookup(_F, prev % p, prev // p, mb[f_dep])
    b_mid = is_b & (vstage < last)
    nxt = vstage[b_mid] + 1
    dep[b_mid] = lookup(_B, nxt % p, nxt // p, mb[b_mid])
    b_last = is_b & (vstage == last)
    dep[b_last] = lookup(_F, stage[b_last], chunk[b_last], mb[b_last])
    dep[is_w] = lookup(_B, stage[is_w], chunk[is_w], mb[is_w])
    lat = np.where((dep >= 0) & (stage[np.maximum(dep, 0)] != stage), p2p, 0.0)

    t_b_op = t_b if split else t_b + t_w
    per_kind = np.stack([t_f, t_b_op, t_w]) / v  # (3, p)
    dur = per_kind[kind, stage]

    # List scheduling in dependency order: each stage advances until its next op waits on an
    # op not yet simulated, then parks on it; finishing that op wakes the stage. O(ops).
    dep_l, lat_l, dur_l = dep.tolist(), lat.tolist(), dur.tolist()
    end_l = [-1.0] * n_ops
    start_l = [0.0] * n_ops
    ptr = offsets[:-1].tolist()
    stop = offsets[1:].tolist()
    free = [0.0] * p
    waiting: dict[int, list[int]] = {}
    ready = list(range(p - 1, -1, -1))
    while ready:
        s = ready.pop()
        i, t, last_i = ptr[s], free[s], stop[s]
        while i < last_i:
            d = dep_l[i]
            if d >= 0:
                e = end_l[d]
                if e < 0.0:
                    waiting.setdefault(d, []).append(s)
                    break
                e += lat_l[i]
                if e > t:
                    t = e
            start_l[i] = t
            t += dur_l[i]
            end_l[i] = t
            if i in waiting:
                ready.extend(waiting.pop(i))
            i += 1
        ptr[s], free[s] = i, t
    stuck = [s for s in range(p) if ptr[s] < stop[s]]
    if stuck:
        s = stuck[0]
        i = ptr[s]
        d = dep_l[i]
        raise ConfigurationError(
            f"the schedule deadlocks: stage {s} waits to run {'FBW'[kind[i]]}{mb[i]} (chunk {chunk[i]}) "
            f"on {'FBW'[kind[d]]}{mb[d]} of stage {stage[d]}, which never runs before it"
        )

    start = np.array(start_l)
    end = np.array(end_l)
    step_time = float(end.max())
    busy = np.bincount(stage, weights=dur, minlength=p)
    idle = p * step_time - busy.sum()
    stage_bubble = 1.0 - busy / step_time
    bubble = idle / (p * step_time)
    overhead = step_time / busy.max() - 1.0

    def peak(release: int) -> np.ndarray:
        delta = np.where(kind == _F, 1, np.where(kind == release, -1, 0))
        running = np.cumsum(delta)
        base = np.concatenate([[0], running[offsets[1:-1] - 1]])
        per_stage = running - np.repeat(base, lengths)
        return np.maximum.reduceat(per_stage, offsets[:-1]) / v

    return Timeline(
        schedule=schedule,
        stages=p,
        microbatches=m,
        chunks=v,
        stage=readonly(stage),
        kind=readonly(_KIND_LETTERS[kind]),
        microbatch=readonly(mb),
        chunk=readonly(chunk),
        start=readonly(start),
        end=readonly(end),
        step_time=step_time,
        busy=readonly(busy),
        stage_bubble=readonly(stage_bubble),
        bubble_fraction=float(bubble),
        overhead=float(overhead),
        peak_in_flight=readonly(peak(_B)),
        peak_in_flight_w=readonly(peak(_W if split else _B)),
        p2p=p2p,
    )


def simulate(orders, *, chunks=1, t_f=1.0, t_b=1.0, t_w=1.0, p2p=0.0, name="custom") -> Timeline:
    """Simulate a step from per-stage op orders (e.g. from ``stage_orders``): each op starts as
    early as its dependency (+p2p across stages) and the stage's previous op allow.

    Ops are ``Op``/tuples (kind, microbatch[, chunk]). If any op is 'W', B lasts t_b and W
    t_w; otherwise B lasts t_b + t_w. Raises ConfigurationError on a missing or repeated
    op or a deadlocking order.
    """
    p = len(orders)
    if p == 0:
        raise ConfigurationError("orders is empty; give one op list per stage")
    v = positive_int(chunks, "chunks")
    raw = []
    for s, ops in enumerate(orders):
        kinds, mbs, cks = [], [], []
        for op in ops:
            letter, j = op[0], op[1]
            c = op[2] if len(op) > 2 else 0
            if letter not in _LETTER_CODES:
                raise ConfigurationError(f"stage {s}: op kind {letter!r} is not one of F, B, W")
            kinds.append(_LETTER_CODES[letter])
            mbs.append(int(j))
            cks.append(int(c))
        raw.append((kinds, mbs, cks))
    return _simulate_raw(
        raw,
        p,
        v,
        _per_stage(t_f, p, "t_f", False),
        _per_stage(t_b, p, "t_b", False),
        _per_stage(t_w, p, "t_w", True),
        non_negative(p2p, SECONDS, "p2p"),
        name,
    )


def schedule(
    kind,
    stages,
    microbatches,
    chunks=1,
    t_f=1.0,
    t_b=1.0,
    t_w=1.0,
    p2p=0.0,
    *,
    batch=None,
    layers=None,
) -> Timeline:
    """Build schedule `kind` (naive, gpipe, 1f1b, interleaved, zb-h1) and simulate it.

    Durations per microbatch per stage as in the module notes (default F:B:W = 1:1:1, so
    the full backward is 2 x forward). Optional ``batch`` (samples per pipeline per step)
    and ``layers`` are checked: m must divide batch; stages <= layers; chunks must divide
    layers per stage.
    """
    name = _kind(kind)
    p = positive_int(stages, "stages")
    m = check_microbatches(microbatches, batch)
    v = positive_int(chunks, "chunks")
    _check_layout(name, p, m, v, layers)
    return _simulate_raw(
        _raw_orders(name, p, m, v),
        p,
        v,
        _per_stage(t_f, p, "t_f", False),
        _per_stage(t_b, p, "t_b", False),
        _per_stage(t_w, p, "t_w", True),
        non_negative(p2p, SECONDS, "p2p"),
        name,
        m=m,
    )


# --------------------------------------------------------------------------- closed forms


def bubble_fraction(stages, microbatches, chunks=1) -> float:
    """Idle share of the step for GPipe/1F1B: (p-1)/(m+p-1); interleaved: (p-1)/(v m + p-1).

    (Huang et al. 2019; Narayanan et al. 2021, Sec. 2.2.) A fraction in [0, 1).
    """
    p = positive_int(stages, "stages")
    m = positive_int(microbatches, "microbatches")
    v = positive_int(chunks, "chunks")
    return (p - 1) / (v * m + p - 1)


def bubble_overhead(stages, microbatches, chunks=1) -> float:
    """Time added over ideal compute, as a fraction of it: (p-1)/m; interleaved (p-1)/(v m).

    (Narayanan et al. 2021, Sec. 2.2.1-2.2.2.)
    """
    p = positive_int(stages, "stages")
    m = positive_int(microbatches, "microbatches")
    v = positive_int(chunks, "chunks")
    return (p - 1) / (v * m)


def zb_h1_bubble_time(stages, t_f=1.0, t_b=1.0, t_w=1.0) -> float:
    """ZB-H1 bubble time in seconds, for m >= p: (p-1)(t_F + t_B - t_W) (Qi et al. 2023, Sec. 2.1).

    Qi et al. derive it for t_W <= t_F, t_B (they assume t_F = t_B = t_W): each W then fits
    into a gap of the drain. A W longer than t_F or t_B only fills the gap, so in general
    the handcrafted order gives (p-1)(t_F + t_B - min(t_F, t_B, t_W)); the simulator
    agrees with this for every m >= p.
    """
    p = positive_int(stages, "stages")
    f = positive(t_f, SECONDS, "t_f")
    b = positive(t_b, SECONDS, "t_b")
    w = non_negative(t_w, SECONDS, "t_w")
    return (p - 1) * (f + b - min(f, b, w))


@dataclass(frozen=True)
class ClosedForm:
    """Closed-form bubble numbers for uniform stages: fractions and times in seconds."""

    schedule: str
    bubble_fraction: float  # idle share of p x step_time
    overhead: float  # time added over ideal / ideal
    bubble_time: float  # step_time - ideal compute per stage, seconds
    ideal_time: float  # m (t_f + t_b + t_w), seconds
    step_time: float


def closed_form(kind, stages, microbatches, chunks=1, t_f=1.0, t_b=1.0, t_w=1.0) -> ClosedForm:
    """The closed form of `kind` for uniform stages and no p2p latency.

    naive (p-1)/p; gpipe, 1f1b (p-1)/(m+p-1); interleaved (p-1)/(v m+p-1); zb-h1 bubble
    time (p-1)(t_F + t_B - t_W) (see ``zb_h1_bubble_time``).
    """
    name = _kind(kind)
    p = positive_int(stages, "stages")
    m = positive_int(microbatches, "microbatches")
    v = positive_int(chunks, "chunks")
    _check_layout(name, p, m, v)
    f = positive(t_f, SECONDS, "t_f")
    b = positive(t_b, SECONDS, "t_b")
    w = non_negative(t_w, SECONDS, "t_w")
    full = f + b + w
    ideal = m * full
    if name == "naive":
        bubble_time = (p - 1) * m * full
    elif name == "zb-h1":
        bubble_time = zb_h1_bubble_time(p, f, b, w)
    else:
        bubble_time = (p - 1) * full / v
    step = ideal + bubble_time
    return ClosedForm(name, bubble_time / step, bubble_time / ideal, bubble_time, ideal, step)


# --------------------------------------------------------------------------- stage analysis


def split_layers(layers, stages, split=None) -> tuple[int, ...]:
    """Layers per stage: an explicit ``split`` (p positive ints summing to layers) or an even
    split where the remainder goes one layer each to the FIRST stages (the first stage's
    embedding lookup is cheap; the last stage also runs the output layer and the loss).
    """
    n = positive_int(layers, "layers")
    p = positive_int(stages, "stages")
    if p > n:
        raise ConfigurationError(
            f"stages={p} exceeds layers={n}: every stage needs at least one layer; valid: 1..{n}"
        )
    if split is None:
        base, extra = divmod(n, p)
        return tuple(base + 1 if s < extra else base for s in range(p))
    if isinstance(split, (str, bytes)) or not isinstance(split, (Sequence, np.ndarray)):
        raise ConfigurationError(f"split={split!r} must be a list of {p} layer counts")
    values = [positive_int(x, f"split[{i}]") for i, x in enumerate(split)]
    if len(values) != p:
        raise ConfigurationError(f"split has {len(values)} entries but stages={p}; give {p} layer counts")
    if sum(values) != n:
        raise ConfigurationError(
            f"split={values} adds up to {sum(values)} layers, not layers={n}"
        )
    return tuple(values)


def activation_bytes(micro_batch_size, seq_len, hidden, bytes_per_element=2) -> float:
    """Bytes one stage sends the next per microbatch: b x s x h x bytes_per_element (the forward
    activation; the backward sends a gradient of the same size the other way).
    """
    b = positive_int(micro_batch_size, "micro_batch_size")
    s = positive_int(seq_len, "seq_len")
    h = positive_int(hidden, "hidden")
    e = positive(bytes_per_element, BYTES, "bytes_per_element")
    return float(b * s * h * e)


@dataclass(frozen=True)
class PipelineWarning:
    """An efficiency warning: a code ('bubble', 'imbalance', 'bandwidth', 'degenerate'), the
    message with its computed suggestions, and the numbers in it (SI units, fractions)."""

    code: str
    message: str
    values: Mapping[str, float] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class StageAnalysis:
    """Inter-stage traffic and efficiency of one pipeline configuration.

    Byte counts are decimal-prefixed Quantities (GB = 1e9 B); bandwidths are per direction.
    ``required_bandwidth`` is what hides one activation send under one forward op of the
    fastest stage: activation / t_F(op). Times are None when ``layer_time`` was not given.
    """

    schedule: str
    stages: int
    microbatches: int
    chunks: int
    micro_batch_size: int
    layers_per_stage: tuple[int, ...]
    activation: object  # Quantity, bytes per microbatch per stage boundary, one direction
    link_bytes_per_step: object  # Quantity, one link, one direction, per step
    bytes_per_step: object  # Quantity, all boundaries, both directions, per step
    bubble_fraction: float
    step_time: object | None  # Quantity (s)
    forward_op_time: object | None  # Quantity (s), shortest forward op of any stage
    required_bandwidth: object | None  # Quantity (B/s), per direction
    transfer_time: object | None  # Quantity (s), one activation over link_bandwidth (+latency)
    timeline: Timeline
    warnings: tuple[PipelineWarning, ...]


def _pct(x: float) -> str:
    return f"{100.0 * x:.1f}%"


#: Alternatives with more operations than this are not simulated (their bubble is not offered).
MAX_SUGGESTION_OPS = 50_000


def _bubble_for(kind, p, m, v, layers, layer_time, backward_factor, p2p):
    """Bubble fraction of an alternative configuration (None if invalid or too large to simulate).

    Even stages without p2p latency use the closed form, which the simulator matches exactly
    there (tests/test_pipeline.py); otherwise the step is simulated, up to MAX_SUGGESTION_OPS ops.
    """
    try:
        per_stage = np.array(split_layers(layers, p), dtype=float)
        _check_layout(kind, p, m, v, layers)
    except ConfigurationError:
        return None
    t_f = per_stage * layer_time
    half = t_f * backward_factor / 2.0
    if p2p == 0.0 and np.all(per_stage == per_stage[0]):
        return closed_form(kind, p, m, v, t_f[0], half[0], half[0]).bubble_fraction
    if p * m * v * (3 if kind == "zb-h1" else 2) > MAX_SUGGESTION_OPS:
        return None
    timeline = _simulate_raw(_raw_orders(kind, p, m, v), p, v, t_f, half, half, p2p, kind, m=m)
    return timeline.bubble_fraction


def analyze_stages(
    layers,
    stages,
    microbatches,
    *,
    seq_len,
    hidden,
    micro_batch_size=None,
    batch=None,
    bytes_per_element=2,
    layer_time=None,
    backward_factor=2.0,
    kind="1f1b",
    chunks=1,
    split=None,
    link_bandwidth=None,
    link_latency=0.0,
    max_bubble=0.10,
) -> StageAnalysis:
    """Traffic between stages, the bandwidth that hides it, the simulated bubble, and warnings
    with computed alternatives.

    Per microbatch each boundary carries b s h bytes_per_element forward and the same back;
    per step a link carries m v of them each way (interleaved adds the wrap from stage p-1
    to stage 0), all boundaries together 2 (p v - 1) m activations. ``layer_time`` is one
    layer's forward for one microbatch (s); a stage's forward is its layers x layer_time,
    its backward ``backward_factor`` x that (split evenly into B and W). Give
    ``micro_batch_size`` or ``batch`` (samples per pipeline per step; then b = batch / m).
    With ``link_bandwidth`` (per direction) each activation transfer becomes the p2p
    latency of the simulation.
    """
    name = _kind(kind)
    p = positive_int(stages, "stages")
    m = check_microbatches(microbatches, batch)
    v = positive_int(chunks, "chunks")
    n_layers = positive_int(layers, "layers")
    per_stage_layers = split_layers(n_layers, p, split)
    _check_layout(name, p, m, v, n_layers if v > 1 else None)
    uneven_chunks = [n for n in per_stage_layers if n % v]
    if uneven_chunks:
        raise ConfigurationError(
            f"chunks={v} does not divide the layers per stage {list(per_stage_layers)}; "
            f"each stage's layers must split into {v} equal chunks"
        )
    if batch is not None:
        b = positive_int(batch, "batch") // m
        if micro_batch_size is not None and positive_int(micro_batch_size, "micro_batch_size") != b:
            raise ConfigurationError(
                f"micro_batch_size={micro_batch_size} disagrees with batch={batch} / microbatches={m} = {b}; "
                f"give one of them"
            )
    else:
        b = 1 if micro_batch_size is None else positive_int(micro_batch_size, "micro_batch_size")
    act = activation_bytes(b, seq_len, hidden, bytes_per_element)
    factor = positive(backward_factor, "", "backward_factor")
    unit_time = 1.0 if layer_time is None else positive(layer_time, SECONDS, "layer_time")
    latency = non_negative(link_latency, SECONDS, "link_latency")
    bandwidth = None if link_bandwidth is None else positive(link_bandwidth, BYTES_PER_SECOND, "link_bandwidth")
    threshold = to_base(max_bubble, "", "max_bubble")
    if not 0.0 < threshold < 1.0:
        raise ConfigurationError(f"max_bubble={max_bubble!r} must be a fraction between 0 and 1")

    t_f = np.array(per_stage_layers, dtype=float) * unit_time
    half = t_f * factor / 2.0
    transfer = None
    p2p = 0.0
    if bandwidth is not None:
        transfer = latency + act / bandwidth
        if layer_time is not None:
            p2p = transfer
    timeline = _simulate_raw(_raw_orders(name, p, m, v), p, v, t_f, half, half, p2p, name, m=m)

    boundaries = p * v - 1 if p > 1 else 0  # chunk boundaries inside one GPU send nothing
    link_bytes = m * v * act if p > 1 else 0.0
    total_bytes = 2.0 * boundaries * m * act
    op_time = float(t_f.min()) / v
    required = act / op_time if layer_time is not None and p > 1 else None
    if required is not None and not np.isfinite(required):
        raise ConfigurationError(
            f"layer_time={unit_time:g} s is too small to price: one activation ({act:g} B) in one "
            f"forward op of {op_time:g} s needs more bandwidth than a float can hold; use a realistic layer time"
        )

    warnings: list[PipelineWarning] = []
    if name in ("gpipe", "1f1b") and m < p:
        warnings.append(
            PipelineWarning(
                "degenerate",
                f"microbatches={m} < stages={p}: {name} never reaches its steady state and at most "
                f"{m} of {p} stages work at once; bubble {_pct(timeline.bubble_fraction)}; "
                f"with microbatches={p} it would be {_pct(bubble_fraction(p, p))}",
                {"microbatches": m, "stages": p, "bubble": timeline.bubble_fraction},
            )
        )

    bubble_now = timeline.bubble_fraction
    if bubble_now > threshold and p > 1:
        options = []
        values = {"bubble": bubble_now, "max_bubble": threshold}

        def pick(candidates, evaluate):
            """First candidate at or under the threshold, else the best one; None if none helps."""
            best = None
            for c in candidates:
                value = evaluate(c)
                if value is None:
                    continue
                if value <= threshold:
                    return c, value
                if best is None or value < best[1]:
                    best = (c, value)
            return best if best is not None and best[1] < bubble_now else None

        # (a) more microbatches: the closed-form estimate, then doublings (p2p and uneven
        # stages make the simulated bubble larger than the closed form). Naive model
        # parallelism idles (p-1)/p whatever m is: pipelining the microbatches is the fix.
        if name == "naive":
            value = _bubble_for("1f1b", p, m, 1, n_layers, unit_time, factor, p2p)
            if value is not None and value < bubble_now:
                options.append(f"overlap the microbatches with 1f1b (bubble {_pct(value)}); naive idles "
                               f"(p-1)/p = {_pct((p - 1) / p)} whatever the number of microbatches")
                values.update(alt_schedule="1f1b", alt_schedule_bubble=value)
            candidates = []
        elif batch is not None:
            candidates = [d for d in divisors(positive_int(batch, "batch")) if d > m]
        else:
            guess = max(m + 1, math.ceil((p - 1) * (1 - threshold) / (threshold * v) - 1e-9))
            candidates = [guess * 2**k for k in range(6)]
        if name == "interleaved":
            candidates = [c for c in candidates if c % p == 0] or (
                [] if batch is not None else [p * math.ceil(c / p) for c in candidates]
            )
        def bubble_at(c):
            return _bubble_for(name, p, c, v, n_layers, unit_time, factor, p2p)

        found = pick(candidates, bubble_at)
        if found and batch is None and found[1] <= threshold and found[0] != candidates[0]:
            # a doubling overshot: bisect between the last candidate above the threshold and it
            # for the fewest microbatches that meet it (the bubble falls as m grows)
            step = p if name == "interleaved" else 1
            lo = max(c for c in candidates if c < found[0]) // step  # fails
            hi = found[0] // step  # meets
            best = found
            for _ in range(6):  # within 1/64 of the interval (exact for small m), in bounded time
                if hi - lo <= 1:
                    break
                mid = (lo + hi) // 2
                value = bubble_at(mid * step)
                if value is not None and value <= threshold:
                    hi, best = mid, (mid * step, value)
                else:
                    lo = mid
            found = best
        if found:
            options.append(f"increase microbatches from {m} to {found[0]} (bubble {_pct(bubble_now)} -> {_pct(found[1])})")
            values.update(alt_microbatches=found[0], alt_microbatches_bubble=found[1])
        # (b) fewer stages: the most stages that meet the threshold, else one stage fewer.
        def fewer(q):
            if name == "interleaved" and m % q:
                return None
            return _bubble_for(name, q, m, v, n_layers, unit_time, factor, p2p)

        found = pick([q for q in range(p - 1, 1, -1)], fewer)
        if found is None or found[1] > threshold:
            found = (p - 1, fewer(p - 1)) if p > 2 else (1, fewer(1))
        if found[1] is not None and found[1] < bubble_now:
            q, per = found[0], -(-n_layers // found[0])
            options.append(
                f"use {q} stage{'s' if q > 1 else ''} instead of {p} (bubble {_pct(found[1])}; "
                f"up to {per} layers per GPU instead of {max(per_stage_layers)}, so more memory)"
            )
            values.update(alt_stages=q, alt_stages_bubble=found[1])
        # (c) interleaving (more chunks) and zero-bubble scheduling
        if name in ("gpipe", "1f1b", "interleaved") and m % p == 0 and n_layers % p == 0:
            found = pick(
                [w for w in divisors(n_layers // p) if w > v],
                lambda w: _bubble_for("interleaved", p, m, w, n_layers, unit_time, factor, p2p),
            )
            if found:
                options.append(f"interleave {found[0]} chunks per stage (bubble {_pct(found[1])}, more activation memory)")
                values.update(alt_chunks=found[0], alt_chunks_bubble=found[1])
        if name in ("gpipe", "1f1b") and m >= p:
            value = _bubble_for("zb-h1", p, m, 1, n_layers, unit_time, factor, p2p)
            if value is not None and value < bubble_now:
                options.append(f"use zb-h1, same peak memory as 1f1b (bubble {_pct(value)})")
                values.update(zb_h1_bubble=value)
        text = f"bubble {_pct(bubble_now)} with {p} stages and {m} microbatches ({name}) is above {_pct(threshold)}"
        if options:
            text += ": " + ", or ".join(options)
        warnings.append(PipelineWarning("bubble", text, values))

    if len(set(per_stage_layers)) > 1:
        slowest = max(per_stage_layers)
        mean = n_layers / p
        even = [q for q in range(1, n_layers + 1) if n_layers % q == 0]
        below = [q for q in even if q < p]
        above = [q for q in even if q > p]
        near = ([below[-1]] if below else []) + ([above[0]] if above else [])
        warnings.append(
            PipelineWarning(
                "imbalance",
                f"layers per stage {list(per_stage_layers)} are uneven: the stage with {slowest} layers "
                f"sets the pace, {100.0 * (slowest / mean - 1):.1f}% above the mean of {mean:.3g}, "
                f"so the others idle for it every microbatch; "
                + (
                    f"{n_layers} layers split evenly over {' or '.join(map(str, near))} stages"
                    if near
                    else f"{n_layers} layers cannot split evenly"
                ),
                {"slowest_layers": slowest, "mean_layers": mean, "slowdown": slowest / mean - 1},
            )
        )

    if required is not None and bandwidth is not None and bandwidth < required:
        ideal = _simulate_raw(_raw_orders(name, p, m, v), p, v, t_f, half, half, 0.0, name, m=m)
        chunk_div = v if name == "interleaved" else 1

        def need(q):  # bandwidth that hides one activation under the shortest forward op with q stages
            return act / (min(split_layers(n_layers, q)) * unit_time / chunk_div)

        alt = None
        for q in range(p - 1, 1, -1):
            if need(q) <= bandwidth and (name != "interleaved" or (m % q == 0 and n_layers % (q * v) == 0)):
                alt = q
                break
        if alt is not None:
            suggestion = f"; with {alt} stages each forward op is long enough to hide it"
        elif p > 2:
            suggestion = f"; even 2 stages would need {format_rate(need(2))}: use a faster link"
        else:
            suggestion = "; use a faster link, or no pipeline"
        warnings.append(
            PipelineWarning(
                "bandwidth",
                f"sending one activation ({format_bytes(act)}) over {format_rate(bandwidth)} takes "
                f"{format_seconds(transfer)}, longer than a forward op of {format_seconds(op_time)}: "
                f"needs at least {format_rate(required)} per direction; step time grows from "
                f"{format_seconds(ideal.step_time)} to {format_seconds(timeline.step_time)}" + suggestion,
                {
                    "activation_bytes": act,
                    "link_bandwidth": bandwidth,
                    "required_bandwidth": required,
                    "transfer_time": transfer,
                    "forward_op_time": op_time,
                    "step_time_no_comm": ideal.step_time,
                    "step_time": timeline.step_time,
                    **({"alt_stages": alt} if alt else {}),
                },
            )
        )

    have_time = layer_time is not None
    return StageAnalysis(
        schedule=name,
        stages=p,
        microbatches=m,
        chunks=v,
        micro_batch_size=b,
        layers_per_stage=per_stage_layers,
        activation=Q_(act, BYTES),
        link_bytes_per_step=Q_(link_bytes, BYTES),
        bytes_per_step=Q_(total_bytes, BYTES),
        bubble_fraction=timeline.bubble_fraction,
        step_time=Q_(timeline.step_time, SECONDS) if have_time else None,
        forward_op_time=Q_(op_time, SECONDS) if have_time else None,
        required_bandwidth=Q_(required, BYTES_PER_SECOND) if required is not None else None,
        transfer_time=Q_(transfer, SECONDS) if transfer is not None else None,
        timeline=timeline,
        warnings=tuple(warnings),
    )


# --------------------------------------------------------------------------- step time and memory


def pipeline_step_time(compute_time, stages, microbatches, chunks=1, kind="1f1b", batch=None) -> float:
    """Step time (s) of a pipeline whose every stage computes ``compute_time`` per step (all its
    microbatches, forward and backward, no idle): the closed form of ``kind`` with F:B:W = 1:1:1.

    For GPipe and 1F1B that is compute x (1 + (p-1)/m): the bubble ADDS (p-1)/m of the ideal
    compute time, while (p-1)/(m+p-1) is the idle share of the (longer) step. Interleaved
    divides the added part by v; naive runs p times the compute. ``batch`` (samples one
    pipeline gets per step) is checked: m may not exceed it and must divide it.
    """
    compute = positive(compute_time, SECONDS, "compute_time")
    m = check_microbatches(microbatches, batch)
    share = compute / (3.0 * m)  # one microbatch's F, B and W on one stage
    return closed_form(kind, stages, m, chunks, share, share, share).step_time


@dataclass(frozen=True)
class StageActivations:
    """Activation memory each pipeline stage holds at its peak, in bytes (GB = 1e9 B in text).

    ``per_stage_bytes[s]`` = ``per_layer_bytes`` x ``layers_per_stage[s]`` x ``in_flight[s]``,
    where ``in_flight`` is the stage's peak number of microbatches whose activations are
    stored (interleaved: chunk activations / v, i.e. microbatch-equivalents of the stage's
    layers). Embedding and logit buffers are not counted (as in ``distlab.memory``).
    """

    schedule: str | None
    per_layer_bytes: float
    layers_per_stage: tuple[int, ...]
    in_flight: np.ndarray
    per_stage_bytes: np.ndarray
    config: Mapping[str, object] = field(default_factory=dict)

    @property
    def stages(self) -> int:
        return len(self.layers_per_stage)

    @property
    def peak_stage(self) -> int:
        """The stage holding the most activation memory (the first one on a tie)."""
        return int(np.argmax(self.per_stage_bytes))

    @property
    def peak_bytes(self) -> float:
        """The largest per-stage activation memory: what the most loaded GPU must fit."""
        return float(self.per_stage_bytes.max())

    @property
    def peak(self):
        """peak_bytes as a Quantity in GB (10^9 bytes)."""
        return Q_(self.peak_bytes / 1e9, "GB")

    @property
    def per_stage(self):
        """per_stage_bytes as a Quantity array in GB (10^9 bytes)."""
        return Q_(self.per_stage_bytes / 1e9, "GB")

    def summary(self) -> str:
        """One line per stage: layers, peak in flight and bytes; the peak marked."""
        lines = []
        width = len(str(self.stages - 1))
        for s, (n, k, b) in enumerate(zip(self.layers_per_stage, self.in_flight, self.per_stage_bytes)):
            mark = "  <- peak" if s == self.peak_stage and self.stages > 1 else ""
            lines.append(f"stage {s:>{width}}: {n} layers x {k:g} in flight x "
                         f"{format_bytes(self.per_layer_bytes)} = {format_bytes(b)}{mark}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            "schedule": self.schedule,
            "per_layer_bytes": self.per_layer_bytes,
            "layers_per_stage": list(self.layers_per_stage),
            "in_flight": [float(x) for x in self.in_flight],
            "per_stage_bytes": [float(x) for x in self.per_stage_bytes],
            "peak_bytes": self.peak_bytes,
            "peak_stage": self.peak_stage,
            **self.config,
        }


def activation_memory(
    in_flight,
    model,
    *,
    stages=None,
    split=None,
    micro_batch_size=1,
    seq_len=None,
    tp=1,
    sequence_parallel=False,
    recompute="none",
    precision="mixed",
    hold_for_w=True,
) -> StageActivations:
    """Per-stage activation bytes implied by a pipeline schedule: distlab.memory's
    ``activation_bytes_per_layer`` x layers on the stage x peak microbatches in flight.

    ``in_flight`` is a ``Timeline`` (its measured peak per stage), a sequence of p peak
    counts, or one count for every stage (then give ``stages``). ``model`` is a
    TransformerModel or a catalog name; its layers are split over the stages by
    ``split_layers`` (an even split, or ``split``). A timeline with v > 1 chunks counts
    chunk activations / v, so each stage's layers must divide into v equal chunks.

    ``hold_for_w``: a microbatch stays stored until its W (weight-gradient) pass ends, which
    needs the saved layer inputs; this differs from counting until B only for zb-h1, where
    every stage then holds p microbatches at its peak, the same maximum as 1F1B's first stage
    (Qi et al. 2023). The default per-GPU figure of ``memory.training_memory`` (pp
    microbatches on ceil(layers / pp) layers) is this function's peak for 1F1B with m >= p.
    """
    from . import memory, models

    model = models.model(model)
    name = None
    chunks = 1
    if isinstance(in_flight, Timeline):
        timeline = in_flight
        name, chunks = timeline.schedule, timeline.chunks
        peaks = np.asarray(timeline.peak_in_flight_w if hold_for_w else timeline.peak_in_flight, dtype=float)
        if stages is not None and positive_int(stages, "stages") != timeline.stages:
            raise ConfigurationError(
                f"stages={stages} disagrees with the timeline's {timeline.stages} stages; leave stages out"
            )
    elif isinstance(in_flight, (Sequence, np.ndarray)) and not isinstance(in_flight, (str, bytes)) \
            and np.ndim(in_flight) > 0:
        values = list(in_flight)
        if not values:
            raise ConfigurationError("in_flight is empty; give one peak count per stage")
        if stages is not None and positive_int(stages, "stages") != len(values):
            raise ConfigurationError(
                f"in_flight has {len(values)} values but stages={stages}; give one per stage"
            )
        peaks = np.array([positive(x, "", f"in_flight[{i}]") for i, x in enumerate(values)], dtype=float)
    else:
        if stages is None:
            raise ConfigurationError(
                "give stages=p with a single in_flight count (or pass a Timeline or one count per stage)"
            )
        count = positive(in_flight, "", "in_flight")
        peaks = np.full(positive_int(stages, "stages"), count, dtype=float)
    p = len(peaks)
    per_stage_layers = split_layers(model.layers, p, split)
    if chunks > 1:
        uneven = [n for n in per_stage_layers if n % chunks]
        if uneven:
            raise ConfigurationError(
                f"chunks={chunks} does not divide the layers per stage {list(per_stage_layers)} "
                f"({model.name}: {model.layers} layers over {p} stages); each stage's layers must split "
                f"into {chunks} equal chunks"
            )
    per_layer = memory.activation_bytes_per_layer(
        model, micro_batch_size, seq_len, tp, sequence_parallel, recompute, precision
    )
    per_stage = per_layer * np.array(per_stage_layers, dtype=float) * peaks
    peaks.flags.writeable = False
    per_stage.flags.writeable = False
    config = dict(
        model=model.name,
        micro_batch_size=int(micro_batch_size),
        seq_len=int(seq_len) if seq_len is not None else model.seq_len,
        tp=int(tp),
        sequence_parallel=bool(sequence_parallel),
        recompute=str(recompute),
        precision=str(getattr(precision, "name", precision)),
        hold_for_w=bool(hold_for_w),
    )
    return StageActivations(name, float(per_layer), per_stage_layers, peaks, per_stage, config)
