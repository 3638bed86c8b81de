"""Pipeline schedule names and the layouts they run: the kinds and their aliases, where a schedule's
microbatches go (``PLACEMENTS``), and the checks of stages, microbatches, chunks and layers a schedule
needs (Lesson 4 §1-§4, Lesson 11 §1). distlab.pipeline.schedules builds the op orders on these checks.

p = ``pp`` (GPUs in one pipeline, "stages"), m = ``microbatches``, v = ``chunks``. Sources as in
distlab.pipeline.schedules (Megatron-LM's interleaving rounds; deepseek-ai/DualPipe's microbatch checks;
torch.distributed.pipelining.ScheduleDualPipeV).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .._arguments import divisors, short_list
from ..errors import ConfigurationError
from ..units import SECONDS, non_negative, positive, positive_int

__all__ = ["KINDS", "PLACEMENTS", "MAX_SCHEDULE_OPS", "check_microbatches", "samples_per_pipeline", "placement"]

#: The schedule kinds, in the order a student meets them.
KINDS = ("naive", "gpipe", "1f1b", "interleaved", "zb-h1", "zb-v", "dualpipe", "dualpipe-v")

#: Where a schedule's microbatches go (see the module notes): one of these per kind.
PLACEMENTS = ("loop", "v", "dual")
_PLACEMENT = {"zb-v": "v", "dualpipe-v": "v", "dualpipe": "dual"}
_TWO_CHUNKS = ("zb-v", "dualpipe", "dualpipe-v")

_ALIASES = {
    "naive": "naive",
    "gpipe": "gpipe",
    "1f1b": "1f1b",
    "pipedream-flush": "1f1b",
    "interleaved": "interleaved",
    "interleaved-1f1b": "interleaved",
    "zb-h1": "zb-h1",
    "zbh1": "zb-h1",
    "zb-v": "zb-v",
    "zbv": "zb-v",
    "dualpipe": "dualpipe",
    "dualpipe-v": "dualpipe-v",
    "dualpipev": "dualpipe-v",
}


def _kind(kind) -> str:
    """The canonical schedule name (one of KINDS) of a name or alias."""
    if not isinstance(kind, str):
        raise ConfigurationError(f"kind={kind!r} is not a schedule name; valid: {', '.join(KINDS)}")
    key = kind.strip().lower().replace("_", "-").replace(" ", "-")
    if key not in _ALIASES:
        raise ConfigurationError(f"unknown schedule kind={kind!r}; valid: {', '.join(KINDS)}")
    return _ALIASES[key]


def check_microbatches(microbatches, batch=None) -> int:
    """Validate m against the samples one pipeline gets per step (``batch``, optional). Lesson 4 §4.

    m may not exceed the samples and must divide them (each microbatch has batch/m
    samples). Returns m as an int; raises ConfigurationError naming the valid values.

    >>> check_microbatches(4, batch=8)
    4
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
            f"microbatches={m} does not divide batch={n} samples per pipeline; valid: {short_list(divisors(n))}"
        )
    return m


def samples_per_pipeline(global_batch, gpus, pp) -> int:
    """Samples one pipeline gets per step: global_batch / dp, with dp = gpus / pp pipelines side by side
    (data parallelism over the pipelines). Lesson 4 §4.

    >>> samples_per_pipeline(256, 256, 8)  # 32 pipelines of 8 stages, 8 samples each
    8
    """
    n = positive_int(gpus, "gpus")
    p = positive_int(pp, "pp")
    batch = positive_int(global_batch, "global_batch")
    if n % p:
        raise ConfigurationError(f"pp={p} does not divide gpus={n}; valid: {short_list(divisors(n))}")
    dp = n // p
    if batch % dp:
        raise ConfigurationError(
            f"global_batch={batch} does not split over the {dp} pipelines (gpus / pp = {n} / {p}); "
            f"give a multiple of {dp}"
        )
    return batch // dp


def placement(schedule) -> str:
    """Where `schedule`'s microbatches go: 'loop', 'v' or 'dual' (see the module notes). Lesson 11 §1.

    >>> placement("zb-v"), placement("1f1b"), placement("dualpipe")
    ('v', 'loop', 'dual')
    """
    return _PLACEMENT.get(_kind(schedule), "loop")


def _chunks_of(kind: str, v: int) -> int:
    """Model chunks per stage the schedule runs: v for interleaved, 2 for the V and dual schedules, else 1."""
    return 2 if kind in _TWO_CHUNKS else v


#: Most operations (F, B and W passes over all stages) a schedule may hold: p x m x v x (2, or 3 for zb-h1).
#: About a second to build and simulate; real schedules hold a few thousand.
MAX_SCHEDULE_OPS = 2**20


def _check_layout(kind: str, p: int, m: int, v: int, layers=None, built: bool = True) -> None:
    """Refuse a layout the schedule cannot run (and, when its passes are `built` one by one, a huge one)."""
    ops = p * m * v * (3 if kind == "zb-h1" else 2)
    if built and ops > MAX_SCHEDULE_OPS:
        raise ConfigurationError(
            f"stages={p:,} x microbatches={m:,} x chunks={v:,} make {ops:,} passes, more than the "
            f"{MAX_SCHEDULE_OPS:,} a schedule may hold; use fewer stages or microbatches"
        )
    if kind in _TWO_CHUNKS:
        _check_two_chunk_layout(kind, p, m, v, layers)
        return
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
                f"stages={p} exceeds layers={n_layers}: every stage needs at least one layer; valid: 1..{n_layers}"
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


def _check_two_chunk_layout(kind: str, p: int, m: int, v: int, layers) -> None:
    if v not in (1, 2):
        raise ConfigurationError(
            f"chunks={v}: {kind} runs exactly 2 model chunks per stage; give chunks=1 (the default) or 2"
        )
    if kind == "dualpipe-v" and m < 2 * p:
        raise ConfigurationError(
            f"dualpipe-v needs microbatches >= 2 x stages (got microbatches={m}, stages={p}): its "
            f"steady step pairs a forward of one chunk with a backward of the other, which needs "
            f"the 2p chunk-stages full (torch's ScheduleDualPipeV refuses fewer); use microbatches >= {2 * p}"
        )
    if kind == "dualpipe":
        if p % 2:
            raise ConfigurationError(
                f"dualpipe needs an even number of stages (got stages={p}): the two directions meet "
                f"in the middle; valid: 2, 4, 6, ... (or use dualpipe-v)"
            )
        if m % 2 or m < 2 * p:
            raise ConfigurationError(
                f"dualpipe needs an even number of microbatches, at least 2 x stages (got "
                f"microbatches={m}, stages={p}): half enter at each end "
                f"(deepseek-ai/DualPipe asserts the same); valid: {2 * p}, {2 * p + 2}, ..."
            )
    if layers is not None:
        n_layers = positive_int(layers, "layers")
        need = p if kind == "dualpipe" else 2 * p
        if n_layers < need:
            raise ConfigurationError(
                f"{kind} over stages={p} needs at least {need} layers (every chunk at least one); got layers={n_layers}"
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
        raise ConfigurationError(f"{name} has {len(values)} values but there are stages={p}; give one number or {p}")
    return np.array([check(x, SECONDS, f"{name}[{i}]") for i, x in enumerate(values)], dtype=float)
