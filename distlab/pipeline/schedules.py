"""Pipeline schedules: the op orders of naive, GPipe, 1F1B, interleaved 1F1B, ZB-H1, ZB-V, DualPipe and
DualPipe-V (Lesson 4 §1-§4, Lesson 11 §1).

p = ``pp`` (GPUs in one pipeline, "stages"), m = ``microbatches``, v = ``chunks``; all numbered from 0.
Each generator returns, per stage, the ordered operations F (forward), B (backward, or its
input-gradient part when the schedule splits the backward) and W (weight gradient). A schedule that
splits the backward writes an unsplit ("full") backward as B immediately followed by its own W.

Where a microbatch goes (``PLACEMENTS``): "loop" (chunk c of stage s is virtual stage c p + s: 1F1B,
interleaved), "v" (two chunks per stage; chunk 0 of stage s is virtual stage s, chunk 1 is 2p-1-s, so
the first and last layers sit on stage 0: ZB-V, DualPipe-V) and "dual" (two model copies per stage;
the first m/2 microbatches run chunk 0 from stage 0 to p-1, the others chunk 1 from stage p-1 to 0:
DualPipe).

The schedule names, placements and layout checks are distlab.pipeline.layout's (re-exported here).

Sources: GPipe (Huang et al. 2019); 1F1B = PipeDream-Flush and interleaved 1F1B (Narayanan et al. 2021,
Sec. 2.2); ZB-H1 (Qi et al. 2023, Sec. 2.1); ZB-V (Qi et al. 2024, "Zero Bubble (Almost) Pipeline
Parallelism", ICLR, Sec. 6); DualPipe (DeepSeek-AI 2024, "DeepSeek-V3 Technical Report", Sec. 3.2.1 and
Fig. 5) with the per-rank steps of deepseek-ai/DualPipe (dualpipe.py, ``step``); DualPipe-V as
torch.distributed.pipelining.ScheduleDualPipeV (torch 2.13).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._arguments import renamed_keyword
from ..units import positive_int
from .layout import (
    KINDS,
    MAX_SCHEDULE_OPS,
    PLACEMENTS,
    _check_layout,
    _chunks_of,
    _kind,
    check_microbatches,
    placement,
    samples_per_pipeline,
)

__all__ = [
    "KINDS",
    "MAX_SCHEDULE_OPS",
    "Op",
    "check_microbatches",
    "samples_per_pipeline",
    "stage_orders",
    "naive_order",
    "gpipe_order",
    "one_f_one_b_order",
    "interleaved_order",
    "zb_h1_order",
    "zb_v_order",
    "dualpipe_order",
    "dualpipe_v_order",
    "PLACEMENTS",
    "placement",
]


_F, _B, _W = 0, 1, 2
_KIND_LETTERS = np.array(["F", "B", "W"])
_LETTER_CODES = {"F": _F, "B": _B, "W": _W}


class Op(NamedTuple):
    """One operation of a stage: kind 'F', 'B' or 'W', microbatch and model chunk (0-based)."""

    kind: str
    microbatch: int
    chunk: int = 0


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


def _zb_v(p: int, m: int):
    """ZB-V (Qi et al. 2024, Sec. 6, Fig. 8): two chunks per stage in a V. Per stage s, over
    n = max(m, 2p-1) microbatches (the ops of microbatches >= m are then dropped, as torch does):
    2(p-s)-1 forwards of chunk 0; s pairs F1 F0; p-s triples F1 B1 W1; a steady state of
    F0 B0 W0 F1 B1 W1 until every forward has run; s pairs B0 B1; p-s pairs B0 W0; then the
    Ws left, chunk 1's first."""
    n = max(m, 2 * p - 1)
    out = []
    for s in range(p):
        ops: list[tuple[int, int, int]] = []  # (kind, chunk, microbatch)
        f, b, w = [0, 0], [0, 0], [0, 0]

        def run(code, c, counter, ops=ops):
            ops.append((code, c, counter[c]))
            counter[c] += 1

        for _ in range(2 * (p - s) - 1):
            run(_F, 0, f)
        for _ in range(s):
            run(_F, 1, f)
            run(_F, 0, f)
        for _ in range(p - s):
            run(_F, 1, f)
            run(_B, 1, b)
            run(_W, 1, w)
        while f[1] < f[0] or f[0] < n:
            if f[0] < n:
                run(_F, 0, f)
            run(_B, 0, b)
            run(_W, 0, w)
            run(_F, 1, f)
            run(_B, 1, b)
            run(_W, 1, w)
        for _ in range(s):
            run(_B, 0, b)
            run(_B, 1, b)
        for _ in range(p - s):
            run(_B, 0, b)
            run(_W, 0, w)
        while w[1] < b[1]:
            run(_W, 1, w)
        while w[0] < b[0]:
            run(_W, 0, w)
        kept = [op for op in ops if op[2] < m]
        out.append(([k for k, _, _ in kept], [j for _, _, j in kept], [c for _, c, _ in kept]))
    return out


def _dual_steps(half: int, r: int, n: int):
    """The eight steps DualPipe runs on a rank (deepseek-ai/DualPipe, dualpipe.py ``step``), for
    ``half`` ranks per direction, the rank's distance r from its end, and n microbatches per
    phase. Returns the (kind, phase, index) ops (phase 0 is the direction that enters at this
    rank's end) and the indices of the forwards fused with the backward that follows them (DualPipe
    overlaps the pair: the fused pair starts when both inputs are there). An unsplit backward is B
    then W; a split one queues its W, and each "W" step runs the oldest queued W."""
    ops: list[tuple[int, int, int]] = []
    paired: list[int] = []  # indices (into ops) of the forwards fused with the backward after them
    f, b = [0, 0], [0, 0]
    queue: list[tuple[int, int]] = []

    def forward(ph, pair=False):
        if pair:
            paired.append(len(ops))
        ops.append((_F, ph, f[ph]))
        f[ph] += 1

    def backward(ph, split):
        ops.append((_B, ph, b[ph]))
        if split:
            queue.append((ph, b[ph]))
        else:
            ops.append((_W, ph, b[ph]))
        b[ph] += 1

    def weight():
        if queue:
            ph, j = queue.pop(0)
            ops.append((_W, ph, j))

    for _ in range(2 * (half - r - 1)):  # 1: forwards of phase 0
        forward(0)
    for _ in range(r + 1):  # 2: F0 F1
        forward(0)
        forward(1)
    for _ in range(half - r - 1):  # 3: B1 (split) W F1
        backward(1, True)
        weight()
        forward(1)
    for i in range(n - 2 * half + r + 1):  # 4: F0 B1 F1 B0, each F paired with a B
        forward(0, pair=not (i == 0 and r == half - 1))  # the middle ranks' first pair is not fused
        backward(1, False)
        forward(1, pair=True)
        backward(0, False)
    for _ in range(half - r - 1):  # 5: B1 F1 B0
        backward(1, False)
        forward(1, pair=True)
        backward(0, False)
    split = False
    middle = (r + 1) // 2
    for i in range(r + 1):  # 6: B1 B0, split from the middle on
        if i == middle and r % 2 == 1:
            split = True
        backward(1, split)
        if i == middle and r % 2 == 0:
            split = True
        backward(0, split)
    for _ in range(half - r - 1):  # 7: W B0 (split)
        weight()
        backward(0, True)
    for _ in range(r + 1):  # 8: the queued Ws
        weight()
    return ops, paired


def _dualpipe_v(p: int, m: int):
    out = []
    for s in range(p):
        ops, paired = _dual_steps(p, s, m)
        out.append(([k for k, _, _ in ops], [j for _, _, j in ops], [ph for _, ph, _ in ops], paired))
    return out


def _dualpipe(p: int, m: int):
    half, n = p // 2, m // 2
    out = []
    for s in range(p):
        ops, paired = _dual_steps(half, min(s, p - 1 - s), n)
        flip = s >= half  # ranks of the second half see the reverse direction as their phase 0
        kinds, mbs, chunks = [], [], []
        for k, ph, j in ops:
            direction = ph ^ flip
            kinds.append(k)
            mbs.append(j + n * direction)
            chunks.append(direction)
        out.append((kinds, mbs, chunks, paired))
    return out


def _raw_orders(kind: str, p: int, m: int, v: int):
    if kind == "zb-v":
        return _zb_v(p, m)
    if kind == "dualpipe-v":
        return _dualpipe_v(p, m)
    if kind == "dualpipe":
        return _dualpipe(p, m)
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
    return tuple(tuple(Op(letters[k], j, c) for k, j, c in zip(r[0], r[1], r[2])) for r in raw)


@renamed_keyword(kind="schedule", stages="pp")
def stage_orders(schedule: str, pp, microbatches, chunks=1) -> tuple[tuple[Op, ...], ...]:
    """Per stage, the ordered operations of `schedule` (one of KINDS). Lesson 4 §2.

    >>> [f"{op.kind}{op.microbatch}" for op in stage_orders("gpipe", 2, 2)[0]]
    ['F0', 'F1', 'B0', 'B1']
    """
    name = _kind(schedule)
    p = positive_int(pp, "stages")
    m = positive_int(microbatches, "microbatches")
    v = positive_int(chunks, "chunks")
    _check_layout(name, p, m, v)
    return _as_ops(_raw_orders(name, p, m, _chunks_of(name, v)))


@renamed_keyword(stages="pp")
def naive_order(pp, microbatches=1):
    """Naive model parallelism: each microbatch runs F then B through all stages before the next. Lesson 4 §1.

    With one microbatch this is plain model parallelism; only one stage is ever busy, so
    the idle share is (p-1)/p.

    >>> naive_order(2, 2)[1]
    (Op(kind='F', microbatch=0, chunk=0), Op(kind='B', microbatch=0, chunk=0), Op(kind='F', microbatch=1, chunk=0), Op(kind='B', microbatch=1, chunk=0))
    """
    return stage_orders("naive", pp, microbatches)


@renamed_keyword(stages="pp")
def gpipe_order(pp, microbatches):
    """GPipe (Huang et al. 2019): all m forwards, then all m backwards (microbatch 0 first). Lesson 4 §2.

    >>> " ".join(f"{op.kind}{op.microbatch}" for op in gpipe_order(4, 3)[0])
    'F0 F1 F2 B0 B1 B2'
    """
    return stage_orders("gpipe", pp, microbatches)


@renamed_keyword(stages="pp")
def one_f_one_b_order(pp, microbatches):
    """1F1B / PipeDream-Flush (Narayanan et al. 2021): stage s warms up with min(p-s-1, m)
    forwards, then alternates one F and one B, then drains the remaining Bs. Lesson 4 §2.

    With m < p the warm-up is cut to m (valid but degenerate: no steady state).

    >>> " ".join(f"{op.kind}{op.microbatch}" for op in one_f_one_b_order(4, 6)[0])
    'F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5'
    """
    return stage_orders("1f1b", pp, microbatches)


@renamed_keyword(stages="pp")
def interleaved_order(pp, microbatches, chunks):
    """Interleaved 1F1B with v chunks per stage, Megatron-LM's ordering (Narayanan et al. 2021, 2.2.2).
    Lesson 4 §2.

    Forward slot i runs chunk (i // p) % v of microbatch (i // (p v)) p + i % p; backward
    slots run the chunks in reverse. Stage s warms up with 2(p-s-1) + (v-1)p forward slots
    (capped at m v), then alternates F and B. Needs m to be a multiple of p. With v = 1 it
    is 1F1B.

    >>> " ".join(f"{op.kind}{op.microbatch}.{op.chunk}" for op in interleaved_order(2, 2, 2)[1])
    'F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 B0.0 B1.0'
    """
    return stage_orders("interleaved", pp, microbatches, chunks)


@renamed_keyword(stages="pp")
def zb_h1_order(pp, microbatches):
    """ZB-H1 (Qi et al. 2023, Sec. 2.1): 1F1B's warm-up and F/B order with B split into B and W;
    stage s runs W of microbatch k - s right after B of microbatch k, and its last s Ws at
    the end, so every stage holds at most p microbatches (1F1B's peak) while the Ws fill the
    drain bubble. Needs m >= p. Lesson 4 §2.

    >>> " ".join(f"{op.kind}{op.microbatch}" for op in zb_h1_order(2, 2)[0])
    'F0 F1 B0 W0 B1 W1'
    """
    return stage_orders("zb-h1", pp, microbatches)


@renamed_keyword(stages="pp")
def zb_v_order(pp, microbatches):
    """ZB-V (Qi et al. 2024, Sec. 6): two chunks per stage placed in a V (stage 0 holds the first and
    the last chunk), the backward split into B and W; with t_F = t_B = t_W the bubble vanishes at the
    activation memory of 1F1B. Op for op torch's ScheduleZBVZeroBubble. Lesson 11 §1.

    >>> " ".join(f"{op.kind}{op.microbatch}.{op.chunk}" for op in zb_v_order(2, 1)[1])
    'F0.0 F0.1 B0.1 W0.1 B0.0 W0.0'
    """
    return stage_orders("zb-v", pp, microbatches)


@renamed_keyword(stages="pp")
def dualpipe_order(pp, microbatches):
    """DualPipe (DeepSeek-V3 report, Sec. 3.2.1): two copies of the model, one per direction; the
    first m/2 microbatches enter at stage 0 (chunk 0), the rest at stage p-1 (chunk 1, numbered
    from m/2). In the steady state each forward is paired with a backward of the other direction
    (DualPipe overlaps one's compute with the other's communication). Needs p even, m even, m >= 2p.
    Lesson 11 §1.

    >>> " ".join(f"{op.kind}{op.microbatch}" for op in dualpipe_order(2, 4)[0])
    'F0 F2 F1 B2 W2 F3 B0 W0 B3 W3 B1 W1'
    """
    return stage_orders("dualpipe", pp, microbatches)


@renamed_keyword(stages="pp")
def dualpipe_v_order(pp, microbatches):
    """DualPipe-V: DualPipe's steps folded into a V (two chunks per stage, one model copy), as
    torch.distributed.pipelining.ScheduleDualPipeV builds it. Needs m >= 2p. Lesson 11 §1.

    >>> " ".join(f"{op.kind}{op.microbatch}.{op.chunk}" for op in dualpipe_v_order(1, 2)[0])
    'F0.0 F0.1 F1.0 B0.1 W0.1 F1.1 B0.0 W0.0 B1.1 W1.1 B1.0 W1.0'
    """
    return stage_orders("dualpipe-v", pp, microbatches)
