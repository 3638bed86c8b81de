"""Stage analysis: layers per stage, the message between stages, the bandwidth that hides it, the
simulated bubble, and warnings with computed alternatives (Lesson 4 §7). The layers per stage and the
message are distlab.pipeline.layers's, the warnings distlab.pipeline.advice's (all re-exported here).

Per microbatch each boundary carries b s h e bytes forward (the activation) and the same back (its
gradient), e = ``element_bytes``. Sources: Narayanan et al. 2021 (Sec. 2.2, 4.1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._arguments import link_parameters, renamed_keyword
from ..errors import ConfigurationError
from ..units import (
    BYTES,
    BYTES_PER_SECOND,
    SECONDS,
    Q_,
    positive,
    positive_int,
    to_base,
)
from .advice import MAX_SUGGESTION_OPS, PipelineWarning, _Setting, _stage_warnings
from .layers import boundary_message_bytes, split_layers
from .layout import _check_layout, _kind, check_microbatches
from .timeline import MAX_TIME_RATIO, Timeline, _simulate_schedule

__all__ = [
    "MAX_SUGGESTION_OPS",
    "PipelineWarning",
    "StageAnalysis",
    "split_layers",
    "boundary_message_bytes",
    "analyze_stages",
]


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
    name, p, m, v, n_layers, per_stage_layers = _layout(schedule, pp, microbatches, batch, chunks, layers, split)
    b = _micro_batch_size(batch, micro_batch_size, m)
    act = boundary_message_bytes(b, seq_len, hidden, element_bytes)
    factor = positive(backward_factor, "", "backward_factor")
    unit_time = 1.0 if layer_time is None else positive(layer_time, SECONDS, "layer_time")
    bw, lat = (None, 0.0) if link is None and bandwidth is None else link_parameters(link, bandwidth, latency)
    threshold = _max_bubble(max_bubble)

    t_f = np.array(per_stage_layers, dtype=float) * unit_time
    half = t_f * factor / 2.0
    transfer = None if bw is None else lat + act / bw
    p2p = transfer if transfer is not None and layer_time is not None else 0.0
    _check_simulable(p2p, t_f, unit_time)
    timeline = _simulate_schedule(name, p, m, v, t_f, half, half, p2p)
    op_time = float(t_f.min()) / v
    required = _required_bandwidth(act, op_time, unit_time, p, layer_time is not None)
    samples = None if batch is None else positive_int(batch, "batch")
    bubble = timeline.bubble_fraction
    st = _Setting(name, p, m, v, n_layers, per_stage_layers, unit_time, factor, p2p, samples, threshold, bubble)
    warnings = _stage_warnings(st, act, bw, required, transfer, op_time, timeline, t_f, half)
    return _analysis(st, b, act, timeline, op_time, required, transfer, warnings, layer_time is not None)


def _layout(schedule, pp, microbatches, batch, chunks, layers, split):
    """(schedule, p, m, v, layers, layers per stage), checked: the chunks must split every stage's layers."""
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
    return name, p, m, v, n_layers, per_stage_layers


def _max_bubble(max_bubble) -> float:
    threshold = to_base(max_bubble, "", "max_bubble")
    if not 0.0 < threshold < 1.0:
        raise ConfigurationError(f"max_bubble={max_bubble!r} must be a fraction between 0 and 1")
    return threshold


def _check_simulable(p2p: float, t_f, unit_time: float) -> None:
    """A transfer more than MAX_TIME_RATIO x a stage's forward is beyond what the simulator resolves."""
    if p2p > MAX_TIME_RATIO * float(t_f.min()):
        raise ConfigurationError(
            f"layer_time={unit_time:g} s is too small to simulate: a stage's forward ({float(t_f.min()):g} s) would "
            f"be more than {MAX_TIME_RATIO:g} x shorter than one transfer between stages ({p2p:g} s); use a "
            "realistic layer time"
        )


def _required_bandwidth(act: float, op_time: float, unit_time: float, p: int, have_time: bool):
    """Bandwidth that hides one activation under the shortest forward op: act / op_time (None without a time)."""
    required = act / op_time if have_time and p > 1 else None
    if required is not None and not np.isfinite(required):
        raise ConfigurationError(
            f"layer_time={unit_time:g} s is too small to price: one activation ({act:g} B) in one "
            f"forward op of {op_time:g} s needs more bandwidth than a float can hold; use a realistic layer time"
        )
    return required


def _analysis(st, b, act, timeline, op_time, required, transfer, warnings, have_time) -> StageAnalysis:
    """The StageAnalysis: bytes per link and per step, the simulated bubble and step time, the warnings."""
    p, m, v = st.p, st.m, st.v
    boundaries = p * v - 1 if p > 1 else 0  # chunk boundaries inside one GPU send nothing
    return StageAnalysis(
        schedule=st.schedule,
        stages=p,
        microbatches=m,
        chunks=v,
        micro_batch_size=b,
        layers_per_stage=st.per_stage_layers,
        activation_bytes=act,
        link_step_bytes=m * v * act if p > 1 else 0.0,
        step_bytes=2.0 * boundaries * m * act,
        bubble_fraction=timeline.bubble_fraction,
        step_time_s=timeline.step_time if have_time else None,
        forward_op_time_s=op_time if have_time else None,
        required_bandwidth_bytes_per_s=required,
        transfer_time_s=transfer,
        timeline=timeline,
        warnings=warnings,
    )
