"""The pipeline timeline simulator: per-stage op orders -> start and end of every op (Lesson 4 §2, §6).

Durations are per microbatch for ALL of one stage's layers, in seconds (a plain number, a Quantity or
a string such as "2 ms"); each may also be a sequence of p values, one per stage (an uneven split):
``t_f`` forward, ``t_b`` the input-gradient part of the backward (the "B" of Qi et al. 2023), ``t_w``
the weight-gradient part ("W", may be 0). Schedules that do not split the backward (naive, gpipe,
1f1b, interleaved) run one B operation of length ``t_b + t_w``; only zb-h1 runs B and W separately.
Defaults F:B:W = 1:1:1, so a full backward is 2 x forward.

Interleaved: stage s holds model chunks c = 0..v-1, i.e. virtual stages c*p + s, so one chunk
operation takes t/v. ``p2p`` is a latency added to every dependency that crosses from one stage
(GPU) to another; a send does not occupy either stage. F of a microbatch (and chunk) on virtual
stage k starts after its F ends on virtual stage k-1 (+p2p); B after B on k+1 (+p2p), or after its
own F on the last virtual stage; W after its own B. A stage runs its ops one at a time in order.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from .._arguments import readonly, renamed_keyword
from ..errors import ConfigurationError
from ..units import SECONDS, Q_, format_seconds, non_negative, positive, positive_int, require_finite
from .schedules import (
    _B,
    _F,
    _KIND_LETTERS,
    _LETTER_CODES,
    _W,
    Op,
    _raw_orders,
)
from .layout import (
    MAX_SCHEDULE_OPS,
    PLACEMENTS,
    _check_layout,
    _chunks_of,
    _kind,
    _per_stage,
    check_microbatches,
    placement,
)
from .remembered import remembered

__all__ = ["MAX_TIME_RATIO", "Timeline", "simulate", "schedule"]


@dataclass(frozen=True, eq=False)
class Timeline:
    """A simulated pipeline step. Times in seconds (start of the step = 0); ops listed stage by
    stage in execution order.

    Lesson 4 §2 (the four schedules on one time axis) and §6 (the bubble grid).
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
    placement: str = "loop"
    fused: np.ndarray | None = None  # per op: a forward run as one overlapped pair with the op after it

    @property
    def duration(self) -> np.ndarray:
        return self.end - self.start

    @property
    def span_idle(self) -> np.ndarray:
        """Per stage, the idle time between its first op's start and its last op's end, in seconds.

        This is the bubble the zero-bubble and DualPipe papers count: when consecutive steps overlap
        (Qi et al. 2024 replace the optimizer's synchronisation by a post-step validation, Sec. 5),
        each stage's time per step is its own span, so the warm-up offset does not count. ZB-V with
        t_F = t_B = t_W has none. Lesson 11 §1.

        >>> schedule("zb-v", 4, 8).span_idle.tolist()
        [0.0, 0.0, 0.0, 0.0]
        """
        bounds = np.searchsorted(self.stage, np.arange(self.stages + 1))
        first = self.start[bounds[:-1]]
        last = np.maximum.reduceat(self.end, bounds[:-1])
        return np.maximum(last - first - self.busy, 0.0)

    def ops(self, stage: int) -> tuple[Op, ...]:
        """The ordered operations of one stage."""
        sel = self.stage == stage
        return tuple(
            Op(str(k), int(j), int(c)) for k, j, c in zip(self.kind[sel], self.microbatch[sel], self.chunk[sel])
        )

    def label(self, index: int) -> str:
        """Text of one op: kind + microbatch, and '.chunk' when chunks > 1 (e.g. 'F3', 'B3.1')."""
        text = f"{self.kind[index]}{self.microbatch[index]}"
        return text + f".{self.chunk[index]}" if self.chunks > 1 else text

    def ops_at(self, times) -> np.ndarray:
        """Per stage, the index (into the op arrays) of the op running at each time; -1 when idle.

        An op [start, end) runs at t when start <= t < end; zero-length ops never run. Returns an int
        array of shape (stages, len(times)). Lesson 4 §6 (the grid shows the op at each slot's middle).

        >>> schedule("gpipe", 2, 1, t_w=0.0).ops_at([0.5, 1.5, 2.5, 3.5]).tolist()
        [[0, -1, -1, 1], [-1, 2, 3, -1]]
        """
        times = np.asarray(times, dtype=float).reshape(-1)
        out = np.full((self.stages, times.size), -1, dtype=np.int64)
        bounds = np.searchsorted(self.stage, np.arange(self.stages + 1))
        for s in range(self.stages):
            index = np.arange(bounds[s], bounds[s + 1])
            index = index[self.end[index] > self.start[index]]
            k = np.searchsorted(self.start[index], times, side="right") - 1
            inside = k >= 0
            k = np.where(inside, k, 0)
            running = inside & (times < self.end[index][k]) if index.size else np.zeros(times.size, bool)
            out[s, running] = index[k[running]]
        return out

    def grid_rows(self, slot=None) -> list[list[str]]:
        """Per stage, one label per time slot ('' when idle); a slot shows the op running at its middle.

        ``slot`` defaults to the shortest nonzero op duration. Lesson 4 §6.

        >>> schedule("gpipe", 2, 1, t_w=0.0).grid_rows()
        [['F0', '', '', 'B0'], ['', 'F0', 'B0', '']]
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
        running = self.ops_at((np.arange(columns) + 0.5) * width)
        return [[self.label(int(k)) if k >= 0 else "" for k in row] for row in running]

    def grid(self, slot=None, max_width=None) -> str:
        """A text grid, one row per stage, one column per time slot ('.' = idle).

        max_width: the widest line (characters); a longer grid is cut into blocks of as many slots as fit, one under
        the other with a blank line between, each row of a later block starting at the slot the one above ended
        (a notebook's output breaks a longer line inside the labels). None: one block.

        >>> print(schedule("gpipe", 2, 2, t_w=0.0).grid(max_width=22))
        stage 0 | F0 F1 .  .
        stage 1 | .  F0 F1 B0
        <BLANKLINE>
        stage 0 | B0 B1
        stage 1 | B1 .
        """
        rows = self.grid_rows(slot)
        width = max([len(cell) for row in rows for cell in row] + [1])
        name_width = len(str(self.stages - 1))
        slots = max((len(row) for row in rows), default=0)
        head = len(f"stage {0:>{name_width}} | ")
        per_block = slots if max_width is None else max(1, (int(max_width) - head + 1) // (width + 1))
        blocks = []
        for start in range(0, max(slots, 1), max(per_block, 1)):
            lines = []
            for s, row in enumerate(rows):
                cells = " ".join((cell or ".").ljust(width) for cell in row[start : start + per_block])
                lines.append(f"stage {s:>{name_width}} | {cells}".rstrip())
            blocks.append("\n".join(lines))
        return "\n\n".join(blocks)

    @property
    def pp(self) -> int:
        """Pipeline depth p (the same as ``stages``)."""
        return self.stages

    def summary(self, time_unit: str | None = None) -> str:
        """The headline numbers as one line of text (``to_dict()`` gives them as plain numbers). Lesson 4 §3.
        The step is in seconds, or in `time_unit` when the op times were given in another unit (t_F = 1).

        >>> schedule("gpipe", 4, 8).summary()
        'gpipe, p = 4, m = 8: step 33 s, bubble 27.27%, overhead 37.50%, peak in flight 8'
        >>> schedule("gpipe", 4, 8).summary(time_unit="t_F")
        'gpipe, p = 4, m = 8: step 33 t_F, bubble 27.27%, overhead 37.50%, peak in flight 8'
        """
        step = format_seconds(self.step_time) if time_unit is None else f"{self.step_time:.4g} {time_unit}"
        return (
            f"{self.schedule}, p = {self.stages}, m = {self.microbatches}"
            + (f", v = {self.chunks}" if self.chunks > 1 else "")
            + f": step {step}, bubble {100.0 * self.bubble_fraction:.2f}%, "
            f"overhead {100.0 * self.overhead:.2f}%, peak in flight {float(self.peak_in_flight.max()):g}"
        )

    def summary_quantities(self) -> dict:
        """The headline numbers with units: what summary() returned before it became text like every
        other summary()."""
        return {
            "schedule": self.schedule,
            "step_time": Q_(self.step_time, "s"),
            "bubble": Q_(100.0 * self.bubble_fraction, "%"),
            "overhead": Q_(100.0 * self.overhead, "%"),
            "peak_in_flight": float(self.peak_in_flight.max()),
        }

    def to_dict(self, grid: bool = True, slot=None) -> dict:
        """Plain-data form (JSON-ready): numbers in seconds/fractions, the op list and the grid.

        >>> schedule("gpipe", 2, 1, t_w=0.0).to_dict()["step_time"]
        4.0
        """
        ops = [
            {
                "stage": int(s),
                "kind": str(k),
                "microbatch": int(j),
                "chunk": int(c),
                "start": float(a),
                "end": float(b),
            }
            for s, k, j, c, a, b in zip(self.stage, self.kind, self.microbatch, self.chunk, self.start, self.end)
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


def _positions(stage, chunk, mb, p: int, v: int, m: int, where: str):
    """Each op's place on its microbatch's route through the model (0 = first layers), and the
    route's length L. loop: c p + s (L = p v); v: s for chunk 0, 2p-1-s for chunk 1 (L = 2p);
    dual: s for the first m/2 microbatches (chunk 0), p-1-s for the others (chunk 1) (L = p)."""
    if where == "v":
        return np.where(chunk == 0, stage, 2 * p - 1 - stage), 2 * p
    if where == "dual":
        direction = (mb >= (m + 1) // 2).astype(np.int64)
        wrong = np.flatnonzero(chunk != direction)
        if wrong.size:
            i = int(wrong[0])
            raise ConfigurationError(
                f"dualpipe: microbatch {mb[i]} runs on chunk {chunk[i]} of stage {stage[i]}, but the "
                f"first half of the microbatches (0..{(m + 1) // 2 - 1}) go through chunk 0 and the "
                f"rest through chunk 1"
            )
        return np.where(direction == 0, stage, p - 1 - stage), p
    return chunk * p + stage, p * v


def _op_table(raw, p: int, v: int, m, where: str = "loop"):
    """Flatten per-stage (kinds, microbatches, chunks) lists into op arrays, and check every
    (microbatch, route position) has exactly one F and one B (and one W when W is split).

    Returns (lengths, offsets, stage, kind, mb, chunk, pos, length, m, split, table); table maps
    (kind m + microbatch) L + position to the op's index.
    """
    lengths = [len(r[0]) for r in raw]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    n_ops = int(offsets[-1])
    stage = np.repeat(np.arange(p), lengths)
    kind = np.fromiter((k for r in raw for k in r[0]), dtype=np.int64, count=n_ops)
    mb = np.fromiter((j for r in raw for j in r[1]), dtype=np.int64, count=n_ops)
    chunk = np.fromiter((c for r in raw for c in r[2]), dtype=np.int64, count=n_ops)
    if n_ops == 0:
        raise ConfigurationError("the schedule has no operations")
    if kind.min() < 0 or kind.max() > 2 or mb.min() < 0 or chunk.min() < 0 or chunk.max() >= v:
        raise ConfigurationError(f"ops must be F/B/W with microbatch >= 0 and chunk in 0..{v - 1}")
    if m is None:
        m = int(mb.max()) + 1
    pos, length = _positions(stage, chunk, mb, p, v, m, where)
    split = bool((kind == _W).any())
    key = (kind * m + mb) * length + pos
    counts = np.bincount(key, minlength=3 * m * length).reshape(3, m * length)
    needed = 3 if split else 2
    if counts[:needed].min() != 1 or counts[:needed].max() != 1 or counts[needed:].any():
        bad = np.argwhere(counts[:needed] != 1)[0]
        j, place = divmod(int(bad[1]), length)
        raise ConfigurationError(
            f"{'FBW'[bad[0]]} of microbatch {j} at place {place} of its route (placement {where!r}) "
            f"runs {counts[bad[0], bad[1]]} times; every op must appear exactly once"
        )
    table = np.empty(3 * m * length, dtype=np.int64)
    table[key] = np.arange(n_ops)
    return lengths, offsets, stage, kind, mb, chunk, pos, length, m, split, table


def _dependencies(table, stage, kind, mb, pos, length: int, m: int, p2p: float):
    """(dep, lat): the op each op waits for (-1: none) and the latency added (p2p across stages).

    F at route position k waits for F at k-1; B for B at k+1, or its own F at the last position;
    W for its own B.
    """

    def lookup(k, j, place):
        return table[(k * m + j) * length + place]

    last = length - 1
    dep = np.full(kind.size, -1, dtype=np.int64)
    is_f, is_b, is_w = kind == _F, kind == _B, kind == _W
    f_dep = is_f & (pos > 0)
    dep[f_dep] = lookup(_F, mb[f_dep], pos[f_dep] - 1)
    b_mid = is_b & (pos < last)
    dep[b_mid] = lookup(_B, mb[b_mid], pos[b_mid] + 1)
    b_last = is_b & (pos == last)
    dep[b_last] = lookup(_F, mb[b_last], pos[b_last])
    dep[is_w] = lookup(_B, mb[is_w], pos[is_w])
    lat = np.where((dep >= 0) & (stage[np.maximum(dep, 0)] != stage), p2p, 0.0)
    return dep, lat


def _fused(raw, offsets, dep, lat):
    """(mask, dep2, lat2) for the forwards a schedule fuses with the backward after them (raw's
    optional 4th list per stage: DualPipe's overlapped F&B pairs): the mask of those forwards, and
    a second dependency (-1: none), the backward's input, which such a forward waits for too."""
    mask = np.zeros(dep.size, dtype=bool)
    for s, r in enumerate(raw):
        if len(r) > 3 and r[3]:
            mask[np.asarray(r[3], dtype=np.int64) + offsets[s]] = True
    first = np.flatnonzero(mask)
    dep2 = np.full(dep.size, -1, dtype=np.int64)
    lat2 = np.zeros(dep.size)
    dep2[first] = dep[first + 1]
    lat2[first] = lat[first + 1]
    return mask, dep2, lat2


def _list_schedule(dep, lat, dur, offsets, p: int, describe, dep2=None, lat2=None):
    """Start and end of every op: list scheduling in dependency order. Each stage advances until
    its next op waits on an op not yet simulated, then parks on it; finishing that op wakes the
    stage. O(ops). describe(i) names op i for the deadlock message. dep2/lat2 (optional): a second
    dependency per op (-1: none)."""
    dep_l, lat_l, dur_l = dep.tolist(), lat.tolist(), dur.tolist()
    if dep2 is None:
        dep2_l, lat2_l = [-1] * len(dep_l), [0.0] * len(dep_l)
    else:
        dep2_l, lat2_l = dep2.tolist(), lat2.tolist()
    end_l = [-1.0] * len(dep_l)
    start_l = [0.0] * len(dep_l)
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
            d = dep2_l[i]
            if d >= 0:
                e = end_l[d]
                if e < 0.0:
                    waiting.setdefault(d, []).append(s)
                    break
                e += lat2_l[i]
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
        raise ConfigurationError(
            f"the schedule deadlocks: stage {s} waits to run {describe(i)} "
            f"on {describe(dep_l[i], where=True)}, which never runs before it"
        )
    return np.array(start_l), np.array(end_l)


def _peak_in_flight(kind, release: int, offsets, lengths, v: int) -> np.ndarray:
    """Per stage, the most microbatches whose F has started and whose `release` op (B or W) has not
    ended, in microbatch-equivalents (chunk activations / v; v = 1 for dual, whose chunks are whole stages)."""
    delta = np.where(kind == _F, 1, np.where(kind == release, -1, 0))
    running = np.cumsum(delta)
    base = np.concatenate([[0], running[offsets[1:-1] - 1]])
    per_stage = running - np.repeat(base, lengths)
    return np.maximum.reduceat(per_stage, offsets[:-1]) / v


#: The most the longest time of a step (an op, or the p2p latency) may exceed the shortest forward op: beyond it the
#: step's ratios (bubble, overhead = step / busiest stage - 1) leave float range or lose every digit.
MAX_TIME_RATIO = 1e12


def _simulate_raw(raw, p, v, t_f, t_b, t_w, p2p, schedule, m=None, where="loop") -> Timeline:
    """Simulate per-stage raw orders (see schedules._raw_orders) with per-stage durations."""
    shortest = float(np.min(t_f))
    longest = max(float(np.max(t_f)), float(np.max(t_b)), float(np.max(t_w)), float(p2p))
    if not shortest > 0 or longest > MAX_TIME_RATIO * shortest:
        raise ConfigurationError(
            f"t_f={shortest:g} against a longest time of {longest:g} (t_b, t_w or p2p): a step's times may differ "
            f"by at most {MAX_TIME_RATIO:g} x; use times in one realistic unit (t_f = 1, or seconds)"
        )
    lengths, offsets, stage, kind, mb, chunk, pos, length, m, split, table = _op_table(raw, p, v, m, where)
    dep, lat = _dependencies(table, stage, kind, mb, pos, length, m, p2p)
    t_b_op = t_b if split else t_b + t_w
    share = 1 if where == "dual" else v  # a dual chunk is a whole stage of its model copy
    per_kind = np.stack([t_f, t_b_op, t_w]) / share  # (3, p)
    dur = per_kind[kind, stage]

    def describe(i, where=False):
        text = f"{'FBW'[kind[i]]}{mb[i]}"
        return f"{text} of stage {stage[i]}" if where else f"{text} (chunk {chunk[i]})"

    fused, dep2, lat2 = _fused(raw, offsets, dep, lat)
    start, end = _list_schedule(dep, lat, dur, offsets, p, describe, dep2, lat2)
    require_finite("the simulated step's end", end)
    step_time = float(end.max())
    busy = np.bincount(stage, weights=dur, minlength=p)
    idle = p * step_time - busy.sum()
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
        stage_bubble=readonly(1.0 - busy / step_time),
        bubble_fraction=float(idle / (p * step_time)),
        overhead=float(step_time / busy.max() - 1.0),
        peak_in_flight=readonly(_peak_in_flight(kind, _B, offsets, lengths, share)),
        peak_in_flight_w=readonly(_peak_in_flight(kind, _W if split else _B, offsets, lengths, share)),
        p2p=p2p,
        placement=where,
        fused=readonly(fused),
    )


def simulate(orders, *, chunks=1, t_f=1.0, t_b=1.0, t_w=1.0, p2p=0.0, name="custom", placement="loop") -> Timeline:
    """Simulate a step from per-stage op orders (e.g. from ``stage_orders``): each op starts as
    early as its dependency (+p2p across stages) and the stage's previous op allow.

    ``placement`` (one of PLACEMENTS: 'loop', 'v', 'dual'; see distlab.pipeline.schedules) says
    which stage and chunk a microbatch visits next; orders of zb-v and dualpipe-v need 'v' and
    chunks=2, dualpipe 'dual' and chunks=2.

    Ops are ``Op``/tuples (kind, microbatch[, chunk]). If any op is 'W', B lasts t_b and W
    t_w; otherwise B lasts t_b + t_w. Raises ConfigurationError on a missing or repeated
    op or a deadlocking order. Lesson 4 §2.

    >>> simulate([[("F", 0), ("B", 0)], [("F", 0), ("B", 0)]]).step_time
    6.0
    """
    if not isinstance(name, str):
        raise ConfigurationError(f"name={name!r} must be a string (the schedule's name in plots)")
    shape = ConfigurationError(
        "orders must be one list per stage of ops (kind, microbatch[, chunk]), "
        "kind 'F', 'B' or 'W', microbatch and chunk whole numbers >= 0"
    )
    if isinstance(orders, (str, bytes)) or not hasattr(orders, "__len__"):
        raise shape
    p = len(orders)
    if p == 0:
        raise ConfigurationError("orders is empty; give one op list per stage")
    v = positive_int(chunks, "chunks")
    if placement not in PLACEMENTS:
        raise ConfigurationError(f"placement={placement!r}; valid: {', '.join(PLACEMENTS)}")
    if placement != "loop" and v != 2:
        raise ConfigurationError(f"placement={placement!r} puts 2 chunks on every stage; give chunks=2")
    raw, total = [], 0
    for s, ops in enumerate(orders):
        if isinstance(ops, (str, bytes)) or not hasattr(ops, "__len__"):
            raise shape
        total += len(ops)
        if total > MAX_SCHEDULE_OPS:
            raise ConfigurationError(f"orders hold more than {MAX_SCHEDULE_OPS:,} ops, more than a schedule may hold")
        kinds, mbs, cks = [], [], []
        for op in ops:
            if not isinstance(op, (tuple, list)) or len(op) not in (2, 3):
                raise shape
            letter, j = op[0], op[1]
            c = op[2] if len(op) > 2 else 0
            if not isinstance(letter, str) or letter not in _LETTER_CODES:
                raise ConfigurationError(f"stage {s}: op kind {letter!r} is not one of F, B, W")
            if any(isinstance(x, bool) or not isinstance(x, numbers.Integral) or x < 0 for x in (j, c)):
                raise shape
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
        where=placement,
    )


@renamed_keyword(kind="schedule", stages="pp")
def schedule(
    schedule,
    pp,
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
    """Build `schedule` (one of KINDS) over p = ``pp`` stages and simulate it. Lesson 4 §2-§3, Lesson 11 §1.

    Durations per microbatch per stage as in the module notes (default F:B:W = 1:1:1, so
    the full backward is 2 x forward). Optional ``batch`` (samples per pipeline per step)
    and ``layers`` are checked: m must divide batch; pp <= layers; chunks must divide
    layers per stage.

    >>> schedule("1f1b", 4, 8).bubble_fraction  # (p-1)/(m+p-1) = 3/11
    0.2727272727272727
    """
    name = _kind(schedule)
    p = positive_int(pp, "stages")
    m = check_microbatches(microbatches, batch)
    v = positive_int(chunks, "chunks")
    _check_layout(name, p, m, v, layers)
    v = _chunks_of(name, v)
    f, b, w = (_per_stage(t, p, f"t_{x}", x == "w") for t, x in ((t_f, "f"), (t_b, "b"), (t_w, "w")))
    return _simulate_schedule(name, p, m, v, f, b, w, non_negative(p2p, SECONDS, "p2p"), placement(name))


def _simulate_schedule(name, p, m, v, t_f, t_b, t_w, p2p, where="loop") -> Timeline:
    """_simulate_raw of schedule `name`'s own orders (checked settings), remembered (distlab.pipeline.remembered):
    a widget's neighbouring states and an analysis's alternatives simulate the same steps again."""
    key = (name, p, m, v, where, float(p2p), *(np.asarray(t, dtype=float).tobytes() for t in (t_f, t_b, t_w)))
    return remembered(key, lambda: _simulate_raw(_raw_orders(name, p, m, v), p, v, t_f, t_b, t_w, p2p, name, m, where))
