"""Context parallelism: does ring attention's K/V transfer hide under attention compute (Liu et al. 2023)? Lesson 8 §4."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import collectives, hardware, memory, tensor, training
from ..errors import ConfigurationError
from ..units import (
    format_bytes,
    format_seconds,
    positive_int,
    require_finite,
)
from .buckets import MAX_MICRO_BATCH, MAX_SEQ_LEN

__all__ = ["RingAttentionStep", "ring_attention_step"]

# ----------------------------------------------------------------------------------------
# 4. Context parallelism: does the K/V transfer hide under attention compute?


@dataclass(frozen=True)
class RingAttentionStep:
    """One ring-attention step of one layer's forward pass on one GPU (bytes, FLOPs, seconds).

    chunk = s / cp tokens per GPU; kv_block_bytes = 2 b chunk kv_width e (K and V of the block
    passed on); comm_s its send-recv time; attention_flops = 4 b chunk^2 h / tp (x 1/2 causal,
    load-balanced); compute_s = FLOPs / (peak x efficiency); exposed_s = max(0, comm - compute);
    crossover_seq_len: the shortest sequence (a multiple of cp) at which the transfer hides.
    """

    seq_len: int
    cp: int
    micro_batch_size: int
    tp: int
    causal: bool
    kv_width: float
    element_bytes: float
    kv_block_bytes: float
    comm_s: float
    attention_flops: float
    compute_s: float
    crossover_seq_len: int

    @property
    def chunk(self) -> int:
        return self.seq_len // self.cp

    @property
    def hidden(self) -> bool:
        return self.comm_s <= self.compute_s

    @property
    def exposed_s(self) -> float:
        return max(0.0, self.comm_s - self.compute_s)

    @property
    def ratio(self) -> float:
        """comm / compute: <= 1 hides."""
        return self.comm_s / self.compute_s

    def __str__(self) -> str:
        verdict = "hidden" if self.hidden else f"{format_seconds(self.exposed_s)} exposed"
        return (f"S={self.seq_len:,} over cp={self.cp} ({self.chunk:,} tokens per GPU): K/V block "
                f"{format_bytes(self.kv_block_bytes)} takes {format_seconds(self.comm_s)}, attention on it "
                f"{format_seconds(self.compute_s)}: {verdict}; hides from S = {self.crossover_seq_len:,}")


def ring_attention_step(model, seq_len, cp, *, micro_batch_size=1, tp=1, precision="mixed", link="nvlink4",
                        bandwidth=None, latency=None, gpu="h100-sxm", efficiency=0.5, causal=True) -> RingAttentionStep:
    """Per ring step: K/V block transfer vs the attention compute it overlaps (Liu et al. 2023, Ring Attention).

    Block: 2 x b x (s/cp) x kv_width x e bytes, kv_width = kv_heads/tp x head_dim (grouped-query
    attention sends only the K/V heads; at least one head per GPU), sent over `link` (send-recv:
    alpha + bytes / B). Compute: a query chunk against one K/V chunk, QK^T and AV, 2 + 2 FLOPs per
    (query, key, feature): 4 b (s/cp)^2 h / tp; causal with load-balanced chunks (Megatron-Core's
    context parallelism) does half per step on average. Hidden when comm <= compute. The
    crossover solves alpha + lam c = kap c^2 for the chunk c (lam the seconds per token of the
    transfer, kap the seconds per token^2 of compute): c* = (lam + sqrt(lam^2 + 4 kap alpha)) /
    (2 kap), S* = cp c* rounded up to a multiple of cp. The backward pass sends K, V and their
    gradients (2x the bytes) against 2x the FLOPs: the same ratio. cp = 1 is refused (nothing is
    passed around a ring of one GPU). Lesson 8 §4.

    Llama 2 7B, 128K tokens over cp = 8: chunks of 16,384 tokens; K and V of 32 x 128 in bf16:
    2 x 16384 x 4096 x 2 B = 256 MiB per step; causal compute 0.5 x 4 x 16384^2 x 4096 = 2.2 TFLOP.

    >>> r = ring_attention_step('llama2-7b', 131072, 8)
    >>> r.kv_block_bytes, r.attention_flops
    (268435456.0, 2199023255552.0)
    """
    from .. import models

    mdl = models.model(model)
    s = positive_int(seq_len, "seq_len")
    n = positive_int(cp, "cp")
    b = positive_int(micro_batch_size, "micro_batch_size")
    if s > MAX_SEQ_LEN:
        raise ConfigurationError(f"seq_len={seq_len!r} is more than {MAX_SEQ_LEN:,} tokens")
    if b > MAX_MICRO_BATCH:
        raise ConfigurationError(f"micro_batch_size={micro_batch_size!r} is more than {MAX_MICRO_BATCH:,} sequences")
    if n < 2:
        raise ConfigurationError(f"cp={n}: with one GPU per sequence there is no ring and no K/V block to pass; "
                                 f"context parallelism needs cp >= 2")
    t = tensor.check_tp(mdl, tp)
    if s % n:
        raise ConfigurationError(f"cp={n} does not divide seq_len={s}: each GPU holds s / cp tokens; pick seq_len a "
                                 f"multiple of {n}")
    eff = training.check_fraction(efficiency, "efficiency")
    recipe = memory.precision_recipe(precision)
    e = float(recipe.activation_bytes)
    acc = hardware.accelerator(gpu)
    peak = acc.peak(recipe.compute_precision)
    kv_width = max(mdl.kv_heads / t, 1.0) * mdl.head_dim
    c = s // n
    block = 2.0 * b * c * kv_width * e
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # overflow is refused below
        cost = collectives.collective_cost("send-recv", block, 2, link=link, bandwidth=bandwidth, latency=latency)
    alpha = cost.latency_time_s
    lam = cost.bandwidth_time_s / c  # transfer seconds per token of the chunk
    share = 0.5 if causal else 1.0
    flops = share * 4.0 * b * c * c * mdl.hidden / t
    compute = flops / (peak * eff)
    kap = share * 4.0 * b * mdl.hidden / t / (peak * eff)
    chunk_star = (lam + math.sqrt(lam * lam + 4.0 * kap * alpha)) / (2.0 * kap)
    require_finite("ring_attention_step's transfer time", cost.time_s, compute, chunk_star * n)
    cross = int(math.ceil(chunk_star)) * n
    return RingAttentionStep(s, n, b, t, bool(causal), kv_width, e, block, cost.time_s, flops, compute, cross)


