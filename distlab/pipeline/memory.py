"""Activation memory of a pipeline schedule: peak microbatches in flight per stage, in bytes (Lesson 4 §5).

``activation_memory`` turns a timeline's peak in-flight microbatches per stage into bytes with
``distlab.memory.activation_bytes_per_layer`` (Korthikanti et al. 2022): per layer x layers on the
stage x peak in flight.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from .._arguments import renamed_keyword
from ..errors import ConfigurationError
from ..units import Q_, format_bytes, positive, positive_int
from .layers import split_layers
from .layout import MAX_SCHEDULE_OPS
from .timeline import Timeline

__all__ = ["StageActivations", "activation_memory"]


@dataclass(frozen=True)
class StageActivations:
    """Activation memory each pipeline stage holds at its peak, in bytes (GB = 1e9 B in text).

    ``per_stage_bytes[s]`` = ``per_layer_bytes`` x ``layers_per_stage[s]`` x ``in_flight[s]``,
    where ``in_flight`` is the stage's peak number of microbatches whose activations are
    stored (interleaved: chunk activations / v, i.e. microbatch-equivalents of the stage's
    layers). Embedding and logit buffers are not counted (as in ``distlab.memory``). Lesson 4 §5.
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
            lines.append(
                f"stage {s:>{width}}: {n} layers x {k:g} in flight x "
                f"{format_bytes(self.per_layer_bytes)} = {format_bytes(b)}{mark}"
            )
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


def _peaks(in_flight, stages, hold_for_w: bool):
    """(schedule name or None, chunks, peak in-flight count per stage) from activation_memory's in_flight."""
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
    elif (
        isinstance(in_flight, (Sequence, np.ndarray))
        and not isinstance(in_flight, (str, bytes))
        and np.ndim(in_flight) > 0
    ):
        values = list(in_flight)
        if not values:
            raise ConfigurationError("in_flight is empty; give one peak count per stage")
        if stages is not None and positive_int(stages, "stages") != len(values):
            raise ConfigurationError(f"in_flight has {len(values)} values but stages={stages}; give one per stage")
        peaks = np.array([positive(x, "", f"in_flight[{i}]") for i, x in enumerate(values)], dtype=float)
    else:
        if stages is None:
            raise ConfigurationError(
                "give pp=p with a single in_flight count (or pass a Timeline or one count per stage)"
            )
        count = positive(in_flight, "", "in_flight")
        peaks = np.full(positive_int(stages, "stages", high=MAX_SCHEDULE_OPS), count, dtype=float)
    return name, chunks, peaks


@renamed_keyword(stages="pp")
def activation_memory(
    in_flight,
    model,
    *,
    pp=None,
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
    counts, or one count for every stage (then give ``pp``). ``model`` is a
    TransformerModel or a catalog name; its layers are split over the stages by
    ``split_layers`` (an even split, or ``split``). A timeline with v > 1 chunks counts
    chunk activations / v, so each stage's layers must divide into v equal chunks.

    ``hold_for_w``: a microbatch stays stored until its W (weight-gradient) pass ends, which
    needs the saved layer inputs; this differs from counting until B only for zb-h1, where
    every stage then holds p microbatches at its peak, the same maximum as 1F1B's first stage
    (Qi et al. 2023). The default per-GPU figure of ``memory.training_memory`` (pp
    microbatches on ceil(layers / pp) layers) is this function's peak for 1F1B with m >= p.
    Lesson 4 §5.

    >>> act = activation_memory(4, "llama2-7b", pp=4, seq_len=4096, recompute="selective")
    >>> act.layers_per_stage[0], float(act.in_flight[0]), round(act.peak_bytes / 1e9, 2)  # 8 layers x 4 in flight
    (8, 4.0, 17.25)
    """
    from .. import memory, models

    model = models.model(model)
    name, chunks, peaks = _peaks(in_flight, pp, hold_for_w)
    p = len(peaks)
    per_stage_layers = split_layers(model.layers, p, split)
    if chunks > 1 and any(n % chunks for n in per_stage_layers):
        raise ConfigurationError(_uneven_chunks(name, chunks, per_stage_layers, model, split is None))
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


def _uneven_chunks(name, chunks: int, per_stage_layers, model, even_split: bool) -> str:
    """Why `chunks` model chunks do not fit these stages, naming what the caller can change: the chunks only where
    the schedule lets them be chosen (interleaved); zb-v and the DualPipes place 2 chunks on every stage themselves,
    so a student whose chunks control is greyed out is told the stage counts that work instead (review v18)."""
    p, layers = len(per_stage_layers), model.layers
    if name is not None and name != "interleaved":
        head = (
            f"{name} places {chunks} model chunks on every stage (the schedule fixes it), so each stage's layers "
            f"must split into {chunks} equal chunks: {model.name}'s {layers} layers over {p} stages give "
            f"{list(per_stage_layers)}"
        )
    else:
        head = (
            f"chunks={chunks} does not divide the layers per stage {list(per_stage_layers)} "
            f"({model.name}: {layers} layers over {p} stages); each stage's layers must split into {chunks} equal chunks"
        )
    if not even_split:
        return head
    fitting = [q for q in range(1, layers + 1) if layers % q == 0 and (layers // q) % chunks == 0]
    return head + f"; stage counts that split so: {', '.join(map(str, fitting)) or 'none'}"
