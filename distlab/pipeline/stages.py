"""Stage analysis: layers per stage, the message between stages, the bandwidth that hides it, the
simulated bubble, and warnings with computed alternatives (Lesson 4 §7).

Per microbatch each boundary carries b s h e bytes forward (the activation) and the same back (its
gradient), e = ``element_bytes``. Sources: Narayanan et al. 2021 (Sec. 2.2, 4.1).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from .._arguments import deprecated_alias, divisors, link_parameters, renamed_keyword
from ..errors import ConfigurationError
from ..memory import message_bytes
from ..units import (
    BYTES,
    BYTES_PER_SECOND,
    SECONDS,
    Q_,
    format_bytes,
    format_percent,
    format_rate,
    format_seconds,
    positive,
    positive_int,
    to_base,
)
from .closed_form import bubble_fraction, closed_form
from .schedules import _check_layout, _kind, _raw_orders, check_microbatches
from .timeline import MAX_TIME_RATIO, Timeline, _simulate_raw

__all__ = [
    "MAX_SUGGESTION_OPS",
    "PipelineWarning",
    "StageAnalysis",
    "split_layers",
    "boundary_message_bytes",
    "analyze_stages",
]


@renamed_keyword(stages="pp")
def split_layers(layers, pp, split=None) -> tuple[int, ...]:
    """Layers per stage: an explicit ``split`` (p positive ints summing to layers) or an even
    split where the remainder goes one layer each to the FIRST stages (the first stage's
    embedding lookup is cheap; the last stage also runs the output layer and the loss). Lesson 4 §5.

    >>> split_layers(10, 4)
    (3, 3, 2, 2)
    """
    n = positive_int(layers, "layers")
    p = positive_int(pp, "stages")
    if p > n:
        raise ConfigurationError(f"stages={p} exceeds layers={n}: every stage needs at least one layer; valid: 1..{n}")
    if split is None:
        base, extra = divmod(n, p)
        return tuple(base + 1 if s < extra else base for s in range(p))
    if isinstance(split, (str, bytes)) or not isinstance(split, (Sequence, np.ndarray)):
        raise ConfigurationError(f"split={split!r} must be a list of {p} layer counts")
    values = [positive_int(x, f"split[{i}]") for i, x in enumerate(split)]
    if len(values) != p:
        raise ConfigurationError(f"split has {len(values)} entries but stages={p}; give {p} layer counts")
    if sum(values) != n:
        raise ConfigurationError(f"split={values} adds up to {sum(values)} layers, not layers={n}")
    return tuple(values)


def boundary_message_bytes(micro_batch_size, seq_len, hidden, element_bytes=2) -> float:
    """Bytes one stage sends the next per microbatch: b x s x h x element_bytes (the forward
    activation; the backward sends a gradient of the same size the other way), validated;
    distlab.memory.message_bytes computes it. Lesson 4 §7.

    >>> boundary_message_bytes(1, 4096, 8192)  # 64 MiB
    67108864.0
    """
    b = positive_int(micro_batch_size, "micro_batch_size")
    s = positive_int(seq_len, "seq_len")
    h = positive_int(hidden, "hidden")
    e = positive(element_bytes, BYTES, "element_bytes")
    return float(message_bytes(b, s, h, e))


#: Deprecated name of boundary_message_bytes (also accepts the old bytes_per_element=).
activation_bytes = deprecated_alias(
    renamed_keyword(bytes_per_element="element_bytes")(boundary_message_bytes),
    "pipeline.activation_bytes",
    "pipeline.boundary_message_bytes",
)


@dataclass(frozen=True)
class PipelineWarning:
    """An efficiency warning: a code ('bubble', 'imbalance', 'bandwidth', 'degenerate'), the
    message with its computed suggestions, and the numbers in it (SI units, fractions)."""

    code: str
    message: str
    values: Mapping[str, float] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.message


def _quantity(value, unit):
    return None if value is None else Q_(value, unit)


@dataclass(frozen=True)
class StageAnalysis:
    """Inter-stage traffic and efficiency of one pipeline configuration (Lesson 4 §7).

    Fields are floats in bytes, seconds and B/s (``_bytes``, ``_s``, ``_bytes_per_s``); the old
    names (``activation``, ``step_time``, ...) are properties giving decimal-prefixed Quantities.
    Bandwidths are per direction. ``required_bandwidth_bytes_per_s`` is what hides one activation
    send under one forward op of the fastest stage: activation / t_F(op). Times are None when
    ``layer_time`` was not given.
    """

    schedule: str
    stages: int
    microbatches: int
    chunks: int
    micro_batch_size: int
    layers_per_stage: tuple[int, ...]
    activation_bytes: float  # per microbatch per stage boundary, one direction
    link_step_bytes: float  # one link, one direction, per step
    step_bytes: float  # all boundaries, both directions, per step
    bubble_fraction: float
    step_time_s: float | None
    forward_op_time_s: float | None  # shortest forward op of any stage
    required_bandwidth_bytes_per_s: float | None  # per direction
    transfer_time_s: float | None  # one activation over the link (+latency)
    timeline: Timeline
    warnings: tuple[PipelineWarning, ...]

    @property
    def pp(self) -> int:
        return self.stages

    @property
    def activation(self):
        """activation_bytes as a Quantity (B)."""
        return Q_(self.activation_bytes, BYTES)

    @property
    def link_bytes_per_step(self):
        return Q_(self.link_step_bytes, BYTES)

    @property
    def bytes_per_step(self):
        return Q_(self.step_bytes, BYTES)

    @property
    def step_time(self):
        return _quantity(self.step_time_s, SECONDS)

    @property
    def forward_op_time(self):
        return _quantity(self.forward_op_time_s, SECONDS)

    @property
    def required_bandwidth(self):
        return _quantity(self.required_bandwidth_bytes_per_s, BYTES_PER_SECOND)

    @property
    def transfer_time(self):
        return _quantity(self.transfer_time_s, SECONDS)


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
    timeline = _simulate_raw(_raw_orders(kind, p, m, v), p, v, t_f, half, half, p2p, kind, m=m)
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
        text += ": " + ", or ".join(options)
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
        f"layers per stage {list(st.per_stage_layers)} are uneven: the stage with {slowest} layers "
        f"sets the pace, {100.0 * (slowest / mean - 1):.1f}% above the mean of {mean:.3g}, "
        f"so the others idle for it every microbatch; "
        + (
            f"{n} layers split evenly over {' or '.join(map(str, near))} stages"
            if near
            else f"{n} layers cannot split evenly"
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
    ideal = _simulate_raw(_raw_orders(name, p, m, v), p, v, t_f, half, half, 0.0, name, m=m)
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


def _micro_batch_size(batch, micro_batch_size, m: int) -> int:
    """b: batch / m when batch is given (micro_batch_size must agree), else micro_batch_size (default 1)."""
    if batch is None:
        return 1 if micro_batch_size is None else positive_int(micro_batch_size, "micro_batch_size")
    b = positive_int(batch, "batch") // m
    if micro_batch_size is not None and positive_int(micro_batch_size, "micro_batch_size") != b:
        raise ConfigurationError(
            f"micro_batch_size={micro_batch_size} disagrees with batch={batch} / microbatches={m} = {b}; "
            f"give one of them"
        )
    return b


def _model_shape(model, layers, seq_len, hidden):
    """(layers, seq_len, hidden): from the model (a TransformerModel or catalog name) where not given."""
    if model is None:
        if seq_len is None or hidden is None:
            raise ConfigurationError("give model= (a TransformerModel or catalog name), or seq_len= and hidden=")
        return layers, seq_len, hidden
    from .. import models

    m = models.model(model)
    return (
        m.layers if layers is None else layers,
        m.seq_len if seq_len is None else seq_len,
        m.hidden if hidden is None else hidden,
    )


@renamed_keyword(
    stages="pp", kind="schedule", bytes_per_element="element_bytes", link_bandwidth="bandwidth", link_latency="latency"
)
def analyze_stages(
    layers=None,
    pp=None,
    microbatches=None,
    *,
    model=None,
    seq_len=None,
    hidden=None,
    micro_batch_size=None,
    batch=None,
    element_bytes=2,
    layer_time=None,
    backward_factor=2.0,
    schedule="1f1b",
    chunks=1,
    split=None,
    link=None,
    bandwidth=None,
    latency=None,
    max_bubble=0.10,
) -> StageAnalysis:
    """Traffic between stages, the bandwidth that hides it, the simulated bubble, and warnings
    with computed alternatives. Lesson 4 §7.

    Per microbatch each boundary carries b s h element_bytes forward and the same back;
    per step a link carries m v of them each way (interleaved adds the wrap from stage p-1
    to stage 0), all boundaries together 2 (p v - 1) m activations. ``layer_time`` is one
    layer's forward for one microbatch (s); a stage's forward is its layers x layer_time,
    its backward ``backward_factor`` x that (split evenly into B and W). ``model`` (a
    TransformerModel or catalog name) gives layers, seq_len and hidden not given. Give
    ``micro_batch_size`` or ``batch`` (samples per pipeline per step; then b = batch / m).
    With a ``link`` (name or Link) or ``bandwidth`` (per direction, + ``latency``) each activation
    transfer becomes the p2p latency of the simulation.

    >>> a = analyze_stages(32, 4, 8, seq_len=4096, hidden=4096)
    >>> a.activation_bytes, round(a.bubble_fraction, 4), [w.code for w in a.warnings]
    (33554432.0, 0.2727, ['bubble'])
    """
    layers, seq_len, hidden = _model_shape(model, layers, seq_len, hidden)
    name = _kind(schedule)
    p = positive_int(pp, "stages")
    m = check_microbatches(microbatches, batch)
    v = positive_int(chunks, "chunks")
    n_layers = positive_int(layers, "layers")
    per_stage_layers = split_layers(n_layers, p, split)
    _check_layout(name, p, m, v, n_layers if v > 1 else None)
    if any(n % v for n in per_stage_layers):
        raise ConfigurationError(
            f"chunks={v} does not divide the layers per stage {list(per_stage_layers)}; "
            f"each stage's layers must split into {v} equal chunks"
        )
    b = _micro_batch_size(batch, micro_batch_size, m)
    act = boundary_message_bytes(b, seq_len, hidden, element_bytes)
    factor = positive(backward_factor, "", "backward_factor")
    unit_time = 1.0 if layer_time is None else positive(layer_time, SECONDS, "layer_time")
    bw, lat = (None, 0.0) if link is None and bandwidth is None else link_parameters(link, bandwidth, latency)
    threshold = to_base(max_bubble, "", "max_bubble")
    if not 0.0 < threshold < 1.0:
        raise ConfigurationError(f"max_bubble={max_bubble!r} must be a fraction between 0 and 1")

    t_f = np.array(per_stage_layers, dtype=float) * unit_time
    half = t_f * factor / 2.0
    transfer = None if bw is None else lat + act / bw
    p2p = transfer if transfer is not None and layer_time is not None else 0.0
    if p2p > MAX_TIME_RATIO * float(t_f.min()):
        raise ConfigurationError(
            f"layer_time={unit_time:g} s is too small to simulate: a stage's forward ({float(t_f.min()):g} s) would "
            f"be more than {MAX_TIME_RATIO:g} x shorter than one transfer between stages ({p2p:g} s); use a "
            "realistic layer time"
        )
    timeline = _simulate_raw(_raw_orders(name, p, m, v), p, v, t_f, half, half, p2p, name, m=m)

    boundaries = p * v - 1 if p > 1 else 0  # chunk boundaries inside one GPU send nothing
    op_time = float(t_f.min()) / v
    required = act / op_time if layer_time is not None and p > 1 else None
    if required is not None and not np.isfinite(required):
        raise ConfigurationError(
            f"layer_time={unit_time:g} s is too small to price: one activation ({act:g} B) in one "
            f"forward op of {op_time:g} s needs more bandwidth than a float can hold; use a realistic layer time"
        )
    st = _Setting(
        name,
        p,
        m,
        v,
        n_layers,
        per_stage_layers,
        unit_time,
        factor,
        p2p,
        None if batch is None else positive_int(batch, "batch"),
        threshold,
        timeline.bubble_fraction,
    )
    warnings = [
        w
        for w in (
            _degenerate_warning(st),
            _bubble_warning(st),
            _imbalance_warning(st),
            _bandwidth_warning(st, act, bw, required, transfer, op_time, timeline, t_f, half),
        )
        if w
    ]
    have_time = layer_time is not None
    return StageAnalysis(
        schedule=name,
        stages=p,
        microbatches=m,
        chunks=v,
        micro_batch_size=b,
        layers_per_stage=per_stage_layers,
        activation_bytes=act,
        link_step_bytes=m * v * act if p > 1 else 0.0,
        step_bytes=2.0 * boundaries * m * act,
        bubble_fraction=timeline.bubble_fraction,
        step_time_s=timeline.step_time if have_time else None,
        forward_op_time_s=op_time if have_time else None,
        required_bandwidth_bytes_per_s=required,
        transfer_time_s=transfer,
        timeline=timeline,
        warnings=tuple(warnings),
    )
