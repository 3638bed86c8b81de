"""The stage analysis's warnings, each with computed alternatives and their simulated bubbles (Lesson 4 §7).

A warning names what costs time (a bubble above the limit, uneven stages, a link too slow to hide a send, too
few microbatches) and the settings that fix it: more microbatches, fewer stages, interleaving, zero bubble, a
stage count that splits the layers evenly. distlab.pipeline.stages.analyze_stages collects them.
Sources: Narayanan et al. 2021 (Sec. 2.2, 4.1); Qi et al. 2023 (zero bubble).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from .._arguments import divisors
from ..errors import ConfigurationError
from ..units import format_bytes, format_percent, format_rate, format_seconds, WARNING_WIDTH, wrap_text
from .closed_form import bubble_fraction, closed_form
from .layers import split_layers
from .layout import _check_layout
from .timeline import _simulate_schedule

__all__ = ["MAX_SUGGESTION_OPS", "PipelineWarning"]


@dataclass(frozen=True)
class PipelineWarning:
    """An efficiency warning: a code ('bubble', 'imbalance', 'bandwidth', 'degenerate'), the
    message with its computed suggestions, and the numbers in it (SI units, fractions)."""

    code: str
    message: str
    values: Mapping[str, float] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.message


#: Alternatives with more operations than this are not simulated (their bubble is not offered).
MAX_SUGGESTION_OPS = 50_000


@functools.lru_cache(maxsize=4096)
def _bubble_for(kind, p, m, v, layers, layer_time, backward_factor, p2p):
    """Bubble fraction of an alternative configuration (None if invalid or too large to simulate).

    Remembered per configuration (a pure function of its scalar arguments; 4,096 floats at most): an analysis
    simulates a dozen alternatives, and the stage-analysis panel's neighbouring settings share most of them.

    Even stages without p2p latency use the closed form, which the simulator matches exactly
    there (tests/core/test_pipeline.py); otherwise the step is simulated, up to MAX_SUGGESTION_OPS ops.
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
    timeline = _simulate_schedule(kind, p, m, v, t_f, half, half, p2p)
    return timeline.bubble_fraction


@dataclass(frozen=True)
class _Setting:
    """The analysed configuration, as the warning helpers need it."""

    schedule: str
    p: int
    m: int
    v: int
    layers: int
    per_stage_layers: tuple[int, ...]
    layer_time: float
    backward_factor: float
    p2p: float
    batch: int | None
    max_bubble: float
    bubble: float

    def bubble_of(self, schedule=None, p=None, m=None, v=None):
        """Bubble fraction of this configuration with some of schedule, p, m, v changed."""
        return _bubble_for(
            schedule or self.schedule,
            p or self.p,
            m or self.m,
            v or self.v,
            self.layers,
            self.layer_time,
            self.backward_factor,
            self.p2p,
        )


def _pick(candidates, evaluate, setting: _Setting):
    """(candidate, bubble): the first candidate at or under max_bubble, else the best one; None if none
    improves on the current bubble."""
    best = None
    for c in candidates:
        value = evaluate(c)
        if value is None:
            continue
        if value <= setting.max_bubble:
            return c, value
        if best is None or value < best[1]:
            best = (c, value)
    return best if best is not None and best[1] < setting.bubble else None


def _suggest_pipelining(st: _Setting):
    """Naive model parallelism idles (p-1)/p whatever m is: overlap the microbatches with 1f1b."""
    value = st.bubble_of("1f1b", v=1)
    if value is None or value >= st.bubble:
        return None
    return (
        f"overlap the microbatches with 1f1b (bubble {format_percent(value)}); naive idles "
        f"(p-1)/p = {format_percent((st.p - 1) / st.p)} whatever the number of microbatches",
        dict(alt_schedule="1f1b", alt_schedule_bubble=value),
    )


#: Up to this many steps between a failing and a meeting microbatch count, the fewest that meets is found exactly.
_EXACT_MICROBATCH_STEPS = 64


def _fewest_microbatches(st: _Setting, fails: int, meets: tuple[int, float], step: int):
    """Between a microbatch count that fails the threshold and one that meets it, the fewest that meets
    it (the bubble falls as m grows). Up to _EXACT_MICROBATCH_STEPS steps apart: exactly. The first count tried is
    where bubble = A + c / (m + (p - 1) / v) through the two known counts reaches max_bubble (the closed form,
    (p - 1) / (v m + p - 1), plus a floor A for what p2p latency adds per microbatch), then one count at a time
    towards the limit (two tries when the guess is within one), then halvings until the two are neighbours.
    Farther apart: six halvings, within 1/64 of the interval."""
    lo, hi, best = fails // step, meets[0] // step, meets
    if hi - lo > _EXACT_MICROBATCH_STEPS:
        for _ in range(6):
            if hi - lo <= 1:
                break
            mid = (lo + hi) // 2
            value = st.bubble_of(m=mid * step)
            if value is not None and value <= st.max_bubble:
                hi, best = mid, (mid * step, value)
            else:
                lo = mid
        return best
    probe = _modelled_microbatches(st, lo * step, st.bubble_of(m=lo * step), meets)
    probe = None if probe is None else round(probe / step)
    tries = 0
    while hi - lo > 1:
        if probe is None or not lo < probe < hi:
            probe = (lo + hi) // 2
        value = st.bubble_of(m=probe * step)
        met = value is not None and value <= st.max_bubble
        if met:
            hi, best = probe, (probe * step, value)
        else:
            lo = probe
        tries += 1
        probe = (probe - 1 if met else probe + 1) if tries < 3 else None
    return best


def _modelled_microbatches(st: _Setting, low: int, low_bubble, meets: tuple[int, float]):
    """The m where bubble = A + c / (m + (p - 1) / v), fitted through (low, low_bubble) and meets, reaches
    max_bubble (None when the fit does not cross it): a first guess for _fewest_microbatches."""
    high, high_bubble = meets
    if low_bubble is None or not high_bubble <= st.max_bubble < low_bubble:
        return None
    d = (st.p - 1) / st.v
    x_low, x_high = 1 / (low + d), 1 / (high + d)
    c = (low_bubble - high_bubble) / (x_low - x_high)
    floor = low_bubble - c * x_low
    if c <= 0 or st.max_bubble <= floor:
        return None
    return c / (st.max_bubble - floor) - d


def _suggest_microbatches(st: _Setting):
    """More microbatches: the divisors of batch, or the closed-form estimate and its doublings (p2p and
    uneven stages make the simulated bubble larger than the closed form)."""
    if st.schedule == "naive":
        return None
    if st.batch is not None:
        candidates = [d for d in divisors(st.batch) if d > st.m]
    else:
        guess = max(st.m + 1, math.ceil((st.p - 1) * (1 - st.max_bubble) / (st.max_bubble * st.v) - 1e-9))
        candidates = [guess * 2**k for k in range(6)]
    if st.schedule == "interleaved":  # whole multiples of p: the batch's divisors that are, or each rounded up
        if st.batch is not None:
            candidates = [c for c in candidates if c % st.p == 0]
        else:
            candidates = sorted({st.p * math.ceil(c / st.p) for c in candidates})
    found = _pick(candidates, lambda c: st.bubble_of(m=c), st)
    if found and st.batch is None and found[1] <= st.max_bubble and found[0] != candidates[0]:
        fails = max(c for c in candidates if c < found[0])
        found = _fewest_microbatches(st, fails, found, st.p if st.schedule == "interleaved" else 1)
    if not found:
        return None
    return (
        f"increase microbatches from {st.m} to {found[0]} (bubble {format_percent(st.bubble)} -> {format_percent(found[1])})",
        dict(alt_microbatches=found[0], alt_microbatches_bubble=found[1]),
    )


def _fewer_stages_bubble(st: _Setting, q: int):
    if st.schedule == "interleaved" and st.m % q:
        return None
    return st.bubble_of(p=q)


def _suggest_fewer_stages(st: _Setting):
    """Fewer stages: the most that meet the threshold, else one stage fewer."""
    found = _pick(range(st.p - 1, 1, -1), lambda q: _fewer_stages_bubble(st, q), st)
    if found is None or found[1] > st.max_bubble:
        q = st.p - 1 if st.p > 2 else 1
        found = (q, _fewer_stages_bubble(st, q))
    if found[1] is None or found[1] >= st.bubble:
        return None
    q, per = found[0], -(-st.layers // found[0])
    return (
        f"use {q} stage{'s' if q > 1 else ''} instead of {st.p} (bubble {format_percent(found[1])}; "
        f"up to {per} layers per GPU instead of {max(st.per_stage_layers)}, so more memory)",
        dict(alt_stages=q, alt_stages_bubble=found[1]),
    )


def _suggest_interleaving(st: _Setting):
    """More model chunks per stage (interleaved 1F1B)."""
    if st.schedule not in ("gpipe", "1f1b", "interleaved") or st.m % st.p or st.layers % st.p:
        return None
    found = _pick([w for w in divisors(st.layers // st.p) if w > st.v], lambda w: st.bubble_of("interleaved", v=w), st)
    if not found:
        return None
    return (
        f"interleave {found[0]} chunks per stage (bubble {format_percent(found[1])}, more activation memory)",
        dict(alt_chunks=found[0], alt_chunks_bubble=found[1]),
    )


def _suggest_zero_bubble(st: _Setting):
    """ZB-H1: the same peak memory as 1F1B, W passes filling the drain."""
    if st.schedule not in ("gpipe", "1f1b") or st.m < st.p:
        return None
    value = st.bubble_of("zb-h1", v=1)
    if value is None or value >= st.bubble:
        return None
    return f"use zb-h1, same peak memory as 1f1b (bubble {format_percent(value)})", dict(zb_h1_bubble=value)


def _degenerate_warning(st: _Setting) -> PipelineWarning | None:
    if st.schedule not in ("gpipe", "1f1b") or st.m >= st.p:
        return None
    return PipelineWarning(
        "degenerate",
        f"microbatches={st.m} < stages={st.p}: {st.schedule} never reaches its steady state and at most "
        f"{st.m} of {st.p} stages work at once; bubble {format_percent(st.bubble)}; "
        f"with microbatches={st.p} it would be {format_percent(bubble_fraction(st.p, st.p))}",
        {"microbatches": st.m, "stages": st.p, "bubble": st.bubble},
    )


def _bubble_warning(st: _Setting) -> PipelineWarning | None:
    """Above max_bubble: the alternatives that lower it, each with its simulated bubble."""
    if st.bubble <= st.max_bubble or st.p <= 1:
        return None
    options, values = [], {"bubble": st.bubble, "max_bubble": st.max_bubble}
    for suggest in (
        _suggest_pipelining if st.schedule == "naive" else None,
        _suggest_microbatches,
        _suggest_fewer_stages,
        _suggest_interleaving,
        _suggest_zero_bubble,
    ):
        found = suggest(st) if suggest else None
        if found:
            options.append(found[0])
            values.update(found[1])
    text = (
        f"bubble {format_percent(st.bubble)} with {st.p} stages and {st.m} microbatches ({st.schedule}) "
        f"is above {format_percent(st.max_bubble)}"
    )
    if options:
        # one option a line, so that no printed line is wider than a notebook's output
        text += ":\n    " + ",\n    or ".join(options)
    return PipelineWarning("bubble", text, values)


def _imbalance_warning(st: _Setting) -> PipelineWarning | None:
    """Uneven layers per stage: the slowest stage sets the pace; the stage counts that split evenly."""
    if len(set(st.per_stage_layers)) <= 1:
        return None
    n, p = st.layers, st.p
    slowest = max(st.per_stage_layers)
    mean = n / p
    even = divisors(n)
    below = [q for q in even if q < p]
    above = [q for q in even if q > p]
    near = ([below[-1]] if below else []) + ([above[0]] if above else [])
    return PipelineWarning(
        "imbalance",
        wrap_text(
            f"layers per stage {list(st.per_stage_layers)} are uneven: the stage with {slowest} layers "
            f"sets the pace, {100.0 * (slowest / mean - 1):.1f}% above the mean of {mean:.3g}, "
            f"so the others idle for it every microbatch; "
            + (
                f"{n} layers split evenly over {' or '.join(map(str, near))} stages"
                if near
                else f"{n} layers cannot split evenly"
            ),
            WARNING_WIDTH,
        ),
        {"slowest_layers": slowest, "mean_layers": mean, "slowdown": slowest / mean - 1},
    )


def _bandwidth_warning(
    st: _Setting, act, bandwidth, required, transfer, op_time, timeline, t_f, half
) -> PipelineWarning | None:
    """The link is slower than what hides one send under a forward op: the step it costs, and the most
    stages whose forward op is long enough to hide it."""
    if required is None or bandwidth is None or bandwidth >= required:
        return None
    name, p, m, v, n = st.schedule, st.p, st.m, st.v, st.layers
    ideal = _simulate_schedule(name, p, m, v, t_f, half, half, 0.0)
    chunk_div = v if name == "interleaved" else 1

    def need(q):  # bandwidth that hides one activation under the shortest forward op with q stages
        return act / (min(split_layers(n, q)) * st.layer_time / chunk_div)

    alt = next(
        (
            q
            for q in range(p - 1, 1, -1)
            if need(q) <= bandwidth and (name != "interleaved" or (m % q == 0 and n % (q * v) == 0))
        ),
        None,
    )
    if alt is not None:
        suggestion = f"; with {alt} stages each forward op is long enough to hide it"
    elif p > 2:
        suggestion = f"; even 2 stages would need {format_rate(need(2))}: use a faster link"
    else:
        suggestion = "; use a faster link, or no pipeline"
    return PipelineWarning(
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


def _stage_warnings(st: _Setting, act, bandwidth, required, transfer, op_time, timeline, t_f, half) -> tuple:
    """The warnings of an analysed setting, in order: degenerate, bubble, imbalance, bandwidth (those that apply)."""
    found = (
        _degenerate_warning(st),
        _bubble_warning(st),
        _imbalance_warning(st),
        _bandwidth_warning(st, act, bandwidth, required, transfer, op_time, timeline, t_f, half),
    )
    return tuple(w for w in found if w)
