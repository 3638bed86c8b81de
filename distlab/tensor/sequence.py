"""Sequence parallelism's activation saving (Korthikanti et al. 2022, Sec. 4.2.2) and context parallelism's ring-attention K/V buffer. Lesson 5 §6-§7."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import memory
from .._arguments import broadcasting, divisors, finite_result, number_array, short_list
from ..errors import ConfigurationError
from ..units import (
    BYTES,
    Q_,
    format_bytes,
    positive,
    positive_int,
)
from .cost import element_bytes
from .layout import _model, check_tp

__all__ = [
    "SequenceParallelSaving",
    "sequence_parallel_saving",
    "ring_attention_buffer_bytes",
    "RingAttentionBuffer",
    "ring_attention_buffer",
]

# ----------------------------------------------------------------------------------------
# Sequence parallelism: activation memory


@dataclass(frozen=True)
class SequenceParallelSaving:
    """Activation bytes of one layer per GPU with tensor parallelism alone and with sequence parallelism."""

    tp: int
    without_bytes: float
    with_bytes: float

    @property
    def saved_bytes(self) -> float:
        return self.without_bytes - self.with_bytes

    @property
    def saved_fraction(self) -> float:
        return self.saved_bytes / self.without_bytes

    @property
    def saved(self):
        return Q_(self.saved_bytes, BYTES).to("MB")

    def __str__(self) -> str:
        return (
            f"tp={self.tp}: {format_bytes(self.without_bytes)} per layer without sequence parallelism, "
            f"{format_bytes(self.with_bytes)} with it ({format_bytes(self.saved_bytes)} saved, "
            f"{self.saved_fraction:.0%})"
        )


def sequence_parallel_saving(
    model, tp, micro_batch_size=1, seq_len=None, recompute="selective", precision="mixed"
) -> SequenceParallelSaving:
    """Activation memory of one layer with and without sequence parallelism (distlab.memory).

    Korthikanti et al. 2022, Table 2: with tensor parallelism alone s b h (10 + 24/t + 5 a s/(h t));
    sequence parallelism divides the 10 (norms and dropouts) by t too: s b h (34/t + 5 a s/(h t)).
    Lesson 5 §6.

    GPT-3, t = 8, selective recomputation: (10 + 24/8) against 34/8 s b h, 4.25 / 13 of it left:

    >>> round(sequence_parallel_saving('gpt3-175b', 8).saved_fraction, 3)
    0.673
    """
    m = _model(model)
    t = check_tp(m, tp)
    args = dict(micro_batch_size=micro_batch_size, seq_len=seq_len, tp=t, recompute=recompute, precision=precision)
    without = memory.activation_bytes_per_layer(m, sequence_parallel=False, **args)
    with_sp = memory.activation_bytes_per_layer(m, sequence_parallel=True, **args)
    return SequenceParallelSaving(t, without, with_sp)


# ----------------------------------------------------------------------------------------
# Context parallelism: the ring-attention KV buffer


@broadcasting
def ring_attention_buffer_bytes(seq_len, cp, hidden, element_bytes=2.0, micro_batch_size=1):
    """KV ring buffer per GPU, 2 x S/N x H x bytes (x b), NumPy broadcast, unvalidated (the fast path).

    Liu et al. 2023. Lesson 5 §7.

    >>> ring_attention_buffer_bytes(131072, 8, 1024, 2)  # 2 x 16,384 x 1,024 x 2 B = 64 MiB
    67108864.0
    """
    result = finite_result(
        "ring-attention buffer bytes",
        2.0
        * number_array(seq_len, "seq_len")
        / number_array(cp, "cp", low=1.0)
        * number_array(hidden, "hidden")
        * number_array(element_bytes, "element_bytes")
        * number_array(micro_batch_size, "micro_batch_size"),
    )
    return float(result) if np.ndim(result) == 0 else result


@dataclass(frozen=True)
class RingAttentionBuffer:
    """The ring-attention KV buffer of one GPU and whether it fits the memory left for it."""

    seq_len: int
    cp: int
    hidden: int
    element_bytes: float
    micro_batch_size: int
    buffer_bytes: float
    available_bytes: float | None = None

    @property
    def buffer(self):
        return Q_(self.buffer_bytes, BYTES).to("MB")

    @property
    def fits(self) -> bool | None:
        if self.available_bytes is None:
            return None
        return self.buffer_bytes <= self.available_bytes

    @property
    def max_seq_len(self) -> int | None:
        """The longest sequence (a multiple of cp) whose buffer fits the available bytes."""
        if self.available_bytes is None:
            return None
        per_token = self.buffer_bytes / self.seq_len
        return int(self.available_bytes // (per_token * self.cp)) * self.cp

    def verdict(self) -> str:
        if self.available_bytes is None:
            return ""
        if self.fits:
            return f"fits the {format_bytes(self.available_bytes)} available"
        return (
            f"does not fit: {format_bytes(self.buffer_bytes - self.available_bytes)} over the "
            f"{format_bytes(self.available_bytes)} available"
        )

    def __str__(self) -> str:
        text = (
            f"S={self.seq_len:,} over cp={self.cp}: KV ring buffer 2 x {self.seq_len // self.cp:,} x "
            f"{self.hidden:,} x {self.element_bytes:g} B = {format_bytes(self.buffer_bytes)} per GPU"
        )
        return text + (f"; {self.verdict()}" if self.available_bytes is not None else "")


def ring_attention_buffer(
    seq_len, cp, hidden, *, precision="mixed", micro_batch_size=1, available=None
) -> RingAttentionBuffer:
    """The KV ring buffer of context parallelism / ring attention (Liu et al. 2023, "Ring Attention
    with Blockwise Transformers"): each GPU holds S/N tokens and, while it computes attention against
    one key/value block, receives the next: 2 x S/N x H x bytes per sequence.

    hidden: the key/value width (H for multi-head attention; model.kv_dim with grouped-query
    attention). precision sets the bytes per element (PrecisionRecipe.activation_bytes, fp8: 1: FP8
    attention, e.g. Transformer Engine's FP8 DotProductAttention, can keep and exchange K/V in FP8).
    available: memory left for the buffer (e.g. '2 GB'); then `fits` and `max_seq_len` say when it
    stops fitting. cp must divide seq_len. Lesson 5 §7.

    64 MiB do not fit 32 MB; 512 B per token x 8 GPUs: 32e6 // 4096 = 7,812 tokens per GPU fit, x 8:

    >>> buf = ring_attention_buffer(131072, 8, 1024, available='32 MB')
    >>> buf.buffer_bytes, buf.fits, buf.max_seq_len
    (67108864.0, False, 62496)
    """
    s = positive_int(seq_len, "seq_len")
    n = positive_int(cp, "cp")
    h = positive_int(hidden, "hidden")
    b = positive_int(micro_batch_size, "micro_batch_size")
    if s % n:
        raise ConfigurationError(
            f"cp={n} does not divide seq_len={s}: every GPU of the ring holds an equal block of tokens; "
            f"valid cp: {short_list(divisors(s), 16)}"
        )
    e = element_bytes(precision)
    avail = None if available is None else positive(available, BYTES, "available")
    return RingAttentionBuffer(s, n, h, e, b, ring_attention_buffer_bytes(s, n, h, e, b), avail)
