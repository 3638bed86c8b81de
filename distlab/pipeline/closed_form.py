"""Closed forms of the pipeline bubble, and their NumPy array versions for the step model (Lesson 4 §3-§4).

p = ``pp`` stages, m = ``microbatches``, v = ``chunks``. The simulator (distlab.pipeline.timeline)
matches every formula here exactly for uniform stages and no p2p latency (tests/core/test_pipeline.py,
tests/core/test_cross_module.py). Sources: GPipe (Huang et al. 2019); Narayanan et al. 2021, Sec. 2.2;
ZB-H1 (Qi et al. 2023, Sec. 2.1); in-flight microbatches: Korthikanti et al. 2022, Sec. 4.2.3.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._arguments import broadcasting, code_array, finite_result, number_array, renamed_keyword
from ..errors import ConfigurationError
from ..units import SECONDS, non_negative, positive, positive_int
from .layout import _check_layout, _kind, check_microbatches

__all__ = [
    "ARRAY_SCHEDULES",
    "NO_CLOSED_FORM",
    "ClosedForm",
    "bubble_fraction",
    "bubble_overhead",
    "bubble_overhead_array",
    "in_flight_array",
    "stage_in_flight_array",
    "zb_h1_bubble_time",
    "dualpipe_bubble_time",
    "closed_form",
    "pipeline_step_time",
]

#: Schedules whose bubble the papers give only for special cases: simulate them.
NO_CLOSED_FORM = ("zb-v", "dualpipe", "dualpipe-v")

#: Schedule codes of the array functions (distlab.training.SCHEDULES): 0 gpipe, 1 1f1b, 2 interleaved.
ARRAY_SCHEDULES = ("gpipe", "1f1b", "interleaved")


@renamed_keyword(stages="pp")
def bubble_fraction(pp, microbatches, chunks=1) -> float:
    """Idle share of the step for GPipe/1F1B: (p-1)/(m+p-1); interleaved: (p-1)/(v m + p-1). Lesson 4 §3.

    (Huang et al. 2019; Narayanan et al. 2021, Sec. 2.2.) A fraction in [0, 1).

    >>> bubble_fraction(4, 8)  # 3 / 11
    0.2727272727272727
    """
    p = positive_int(pp, "stages")
    m = positive_int(microbatches, "microbatches")
    v = positive_int(chunks, "chunks")
    return (p - 1) / (v * m + p - 1)


@renamed_keyword(stages="pp")
def bubble_overhead(pp, microbatches, chunks=1) -> float:
    """Time added over ideal compute, as a fraction of it: (p-1)/m; interleaved (p-1)/(v m). Lesson 4 §3.

    (Narayanan et al. 2021, Sec. 2.2.1-2.2.2.)

    >>> bubble_overhead(4, 8)  # 3 / 8
    0.375
    """
    p = positive_int(pp, "stages")
    m = positive_int(microbatches, "microbatches")
    v = positive_int(chunks, "chunks")
    return (p - 1) / (v * m)


@broadcasting
def bubble_overhead_array(pp, microbatches, chunks=1):
    """bubble_overhead on NumPy arrays (broadcast, unvalidated): (p-1)/(v m). Lesson 4 §3.

    Times one microbatch's time on a stage (m of them are the ideal compute) it is the bubble
    time (p-1)/v x t_mb of GPipe, 1F1B and interleaved 1F1B (the step model's bubble).

    >>> bubble_overhead_array(np.array([1, 4, 8]), 8).tolist()
    [0.0, 0.375, 0.875]
    """
    pp = number_array(pp, "pp", low=1.0)
    return finite_result(
        "bubble overhead",
        (pp - 1.0) / (number_array(chunks, "chunks", 1.0) * number_array(microbatches, "microbatches", 1.0)),
    )


@broadcasting
def in_flight_array(schedule_code, pp, microbatches, chunks=1):
    """Peak microbatches whose activations the first stage holds (broadcast, unvalidated). Lesson 4 §5.

    stage_in_flight_array of stage 0, the largest: gpipe m; 1f1b min(p, m); interleaved min(p (1 + (p-1)/(p v)), m)
    microbatch-equivalents (Korthikanti et al. 2022, Sec. 4.2.3).

    >>> in_flight_array(np.array([0, 1, 2, 2]), 4, np.array([8, 8, 8, 4]), np.array([1, 1, 2, 2])).tolist()
    [8.0, 4.0, 5.5, 4.0]
    """
    return stage_in_flight_array(schedule_code, pp, microbatches, chunks, 0)


@broadcasting
def stage_in_flight_array(schedule_code, pp, microbatches, chunks=1, rank=0):
    """Peak microbatches whose activations stage `rank` (0 = first) holds (broadcast, unvalidated). Lesson 4 §5.

    schedule_code indexes ARRAY_SCHEDULES. gpipe: m (every forward before the first backward). 1f1b: min(p - r, m),
    Megatron-LM's non-interleaved warm-up of min(p - r - 1, m) forwards and one more in the steady state.
    Interleaved: Megatron-LM's warm-up of 2 (p - r - 1) + (v - 1) p chunk forwards and one more in the steady state,
    capped at all m v, in microbatch-equivalents: min((2 (p - r - 1) + (v - 1) p + 1) / v, m); stage 0 holds
    p + (p - 1) / v, each later stage 2 / v fewer (NVIDIA/Megatron-LM@d98e8a6 megatron/core/pipeline_parallel/
    schedules.py, get_pp_rank_microbatches, num_warmup_microbatches, with microbatch_group_size_per_vp_stage = p,
    its default). With v = 1 it is 1F1B. The simulator's peak_in_flight of each stage agrees.

    >>> stage_in_flight_array(2, 4, 8, 2, np.arange(4)).tolist()  # the simulator's [5.5, 4.5, 3.5, 2.5]
    [5.5, 4.5, 3.5, 2.5]
    """
    pp = number_array(pp, "pp", low=1.0)
    m = number_array(microbatches, "microbatches", low=1.0)
    v = number_array(chunks, "chunks", low=1.0)
    r = number_array(rank, "rank", low=0.0)
    code = code_array(schedule_code, "schedule_code", ARRAY_SCHEDULES)
    one_chunk = (code == 1) | (v == 1)  # interleaved with one chunk per stage is 1F1B
    interleaved = (2.0 * (pp - r - 1.0) + (v - 1.0) * pp + 1.0) / v
    return np.where(code == 0, m, np.minimum(np.where(one_chunk, pp - r, interleaved), m))


@renamed_keyword(stages="pp")
def zb_h1_bubble_time(pp, t_f=1.0, t_b=1.0, t_w=1.0) -> float:
    """ZB-H1 bubble time in seconds, for m >= p: (p-1)(t_F + t_B - t_W) (Qi et al. 2023, Sec. 2.1).
    Lesson 4 §2.

    Qi et al. derive it for t_W <= t_F, t_B (they assume t_F = t_B = t_W): each W then fits
    into a gap of the drain. A W longer than t_F or t_B only fills the gap, so in general
    the handcrafted order gives (p-1)(t_F + t_B - min(t_F, t_B, t_W)); the simulator
    agrees with this for every m >= p.

    >>> zb_h1_bubble_time(4)  # 3 x (1 + 1 - 1)
    3.0
    """
    p = positive_int(pp, "stages")
    f = positive(t_f, SECONDS, "t_f")
    b = positive(t_b, SECONDS, "t_b")
    w = non_negative(t_w, SECONDS, "t_w")
    return (p - 1) * (f + b - min(f, b, w))


def dualpipe_bubble_time(pp, t_f=1.0, t_b=1.0, t_w=1.0, t_fb=None, v_shape=False) -> float:
    """DualPipe's published bubble, in seconds: (PP/2 - 1)(F&B + B - 3W) (DeepSeek-V3 report, Table 2;
    deepseek-ai/DualPipe README). Lesson 11 §1.

    F, B, W are one chunk's forward, FULL backward (input + weight gradient) and weight-gradient times:
    B = t_b + t_w here, where t_b is the input-gradient part as everywhere in distlab.pipeline. F&B is a
    forward and a backward run as one overlapped pair; ``t_fb`` defaults to F + B (no overlap gain, what
    the simulator runs). PP is the number of chunk-stages: p for DualPipe (each chunk a whole stage),
    2p with ``v_shape`` (DualPipe-V, each chunk half a stage, so F, B, W are halved). The simulated
    order's bubble (``Timeline.span_idle``) stays at or below this for m >= 2p when t_F <= t_B and
    t_W <= t_F (the regime the paper draws); a forward longer than the backward idles longer. So it is
    the table's bound, not the simulated order's exact value.

    >>> dualpipe_bubble_time(8)  # (8/2 - 1) x ((1 + 2) + 2 - 3 x 1) = 3 x 2
    6.0
    """
    p = positive_int(pp, "pp")
    f = positive(t_f, SECONDS, "t_f")
    b = positive(t_b, SECONDS, "t_b")
    w = non_negative(t_w, SECONDS, "t_w")
    share = 0.5 if v_shape else 1.0
    chunk_stages = 2 * p if v_shape else p
    f, full, w = f * share, (b + w) * share, w * share
    fb = f + full if t_fb is None else positive(t_fb, SECONDS, "t_fb")
    return (chunk_stages / 2 - 1) * (fb + full - 3 * w)


@dataclass(frozen=True)
class ClosedForm:
    """Closed-form bubble numbers for uniform stages: fractions and times in seconds."""

    schedule: str
    bubble_fraction: float  # idle share of p x step_time
    overhead: float  # time added over ideal / ideal
    bubble_time: float  # step_time - ideal compute per stage, seconds
    ideal_time: float  # m (t_f + t_b + t_w), seconds
    step_time: float


@renamed_keyword(kind="schedule", stages="pp")
def closed_form(schedule, pp, microbatches, chunks=1, t_f=1.0, t_b=1.0, t_w=1.0) -> ClosedForm:
    """The closed form of `schedule` for uniform stages and no p2p latency. Lesson 4 §3.

    naive (p-1)/p; gpipe, 1f1b (p-1)/(m+p-1); interleaved (p-1)/(v m+p-1); zb-h1 bubble
    time (p-1)(t_F + t_B - t_W) (see ``zb_h1_bubble_time``).

    >>> closed_form("1f1b", 4, 8).bubble_time  # (p-1)(t_F + t_B + t_W) = 3 x 3
    9.0
    """
    name = _kind(schedule)
    p = positive_int(pp, "stages")
    m = positive_int(microbatches, "microbatches")
    v = positive_int(chunks, "chunks")
    if name in NO_CLOSED_FORM:
        raise ConfigurationError(
            f"{name} has no closed form for general t_F, t_B, t_W; simulate it with "
            f"distlab.pipeline.schedule (dualpipe_bubble_time gives DeepSeek's published bound)"
        )
    _check_layout(name, p, m, v, built=False)
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


@renamed_keyword(kind="schedule", stages="pp")
def pipeline_step_time(compute_time, pp, microbatches, chunks=1, schedule="1f1b", batch=None) -> float:
    """Step time (s) of a pipeline whose every stage computes ``compute_time`` per step (all its
    microbatches, forward and backward, no idle): the closed form of ``schedule`` with F:B:W = 1:1:1.
    Lesson 4 §4.

    For GPipe and 1F1B that is compute x (1 + (p-1)/m): the bubble ADDS (p-1)/m of the ideal
    compute time, while (p-1)/(m+p-1) is the idle share of the (longer) step. Interleaved
    divides the added part by v; naive runs p times the compute. ``batch`` (samples one
    pipeline gets per step) is checked: m may not exceed it and must divide it.

    >>> pipeline_step_time(8.0, 4, 8)  # 8 s x (1 + 3/8)
    11.0
    """
    compute = positive(compute_time, SECONDS, "compute_time")
    m = check_microbatches(microbatches, batch)
    share = compute / (3.0 * m)  # one microbatch's F, B and W on one stage
    return closed_form(schedule, pp, m, chunks, share, share, share).step_time
