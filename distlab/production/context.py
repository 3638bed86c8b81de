"""Context parallelism: does ring attention's K/V transfer hide under attention compute (Liu et al. 2023)? Lesson 8 §4."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import collectives, hardware, memory, tensor, training
from ..efficiency import flash_attention_rate
from ..errors import ConfigurationError
from ..step.communication import ring_attention_exposure
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


def _attention_rate(accelerator, efficiency) -> float:
    """The attention core's share of peak: `efficiency` when given (a fraction in (0, 1]), else flash attention's
    measured rate on that GPU (distlab.efficiency.flash_attention_rate: FlashAttention-2, A100 0.50, H100 0.339 of
    peak), the rate the step model prices the same kernel at. Lessons 8 §4 and 11 §3."""
    if efficiency is None:
        return flash_attention_rate(accelerator)
    return training.check_fraction(efficiency, "efficiency")


@dataclass(frozen=True)
class RingAttentionStep:
    """One ring-attention step of one layer's forward pass on one GPU (bytes, FLOPs, seconds).

    chunk = s / cp tokens per GPU; kv_block_bytes = 2 b chunk kv_width e (K and V of the block
    passed on); comm_s its send-recv time; attention_flops = 4 b chunk^2 h / tp (x 1/2 causal,
    load-balanced); compute_s = FLOPs / (peak x efficiency), efficiency flash attention's measured rate on the
    GPU unless given (_attention_rate); exposed_s = max(0, comm - compute);
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
        return (
            f"S={self.seq_len:,} over cp={self.cp} ({self.chunk:,} tokens per GPU):\n    K/V block "
            f"{format_bytes(self.kv_block_bytes)} takes {format_seconds(self.comm_s)}, attention on it "
            f"{format_seconds(self.compute_s)}: {verdict}; hides from S = {self.crossover_seq_len:,}"
        )


def ring_attention_step(
    model,
    seq_len,
    cp,
    *,
    micro_batch_size=1,
    tp=1,
    precision="mixed",
    link="nvlink4",
    bandwidth=None,
    latency=None,
    gpu="h100-sxm",
    efficiency=None,
    causal=True,
) -> RingAttentionStep:
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
        raise ConfigurationError(
            f"cp={n}: with one GPU per sequence there is no ring and no K/V block to pass; "
            f"context parallelism needs cp >= 2"
        )
    t = tensor.check_tp(mdl, tp)
    if s % n:
        raise ConfigurationError(
            f"cp={n} does not divide seq_len={s}: each GPU holds s / cp tokens; pick seq_len a multiple of {n}"
        )
    recipe = memory.precision_recipe(precision)
    e = float(recipe.activation_bytes)
    acc = hardware.accelerator(gpu)
    eff = _attention_rate(acc, efficiency)
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


# ----------------------------------------------------------------------------------------
# Lesson 11b §1: long context. Ring attention with causal load balancing, DeepSpeed-Ulysses, and what fits.

#: Context-parallel methods: 'ring' (K/V blocks passed around a ring, Liu et al. 2023) and 'ulysses'
#: (all-to-all from sequence shards to head shards and back, Jacobs et al. 2023).
CP_METHODS = ("ring", "ulysses")


def _yes_no(value, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ConfigurationError(f"{name}={value!r} must be True or False")
    return bool(value)


def causal_work_per_rank(cp, load_balanced=True) -> np.ndarray:
    """Each rank's share of one layer's causal attention work under ring attention (sums to 1). Lesson 11b §1.

    The sequence is cut into 2 cp equal chunks. Contiguous layout: rank r holds chunks 2r and 2r+1.
    Load-balanced ("zig-zag", Megatron-Core's context parallelism, Brandon et al. 2023 "Striped
    Attention" for the idea): rank r holds chunks r and 2cp-1-r, an early and a late one. Work is
    counted per (query chunk, key chunk) block: a whole block where the keys come first, half a block
    on the diagonal, none where they come later (causal mask). The contiguous last rank does
    (2cp - 1)/cp^2 of the work, (2 - 1/cp) x its fair share; the zig-zag layout gives every rank 1/cp.

    >>> causal_work_per_rank(2, load_balanced=False).tolist()  # rank 0: chunks 0, 1; rank 1: chunks 2, 3
    [0.25, 0.75]
    >>> causal_work_per_rank(2).tolist()  # rank 0: chunks 0 and 3; rank 1: chunks 1 and 2
    [0.5, 0.5]
    """
    n = positive_int(cp, "cp")
    if n > 1_000_000:
        raise ConfigurationError(f"cp={n} is more than 1,000,000 ranks")
    load_balanced = _yes_no(load_balanced, "load_balanced")
    chunks = np.arange(2 * n)
    owner = np.where(chunks < n, chunks, 2 * n - 1 - chunks) if load_balanced else chunks // 2
    work = chunks + 0.5  # query chunk q sees q whole earlier key chunks and half of its own
    out = np.bincount(owner, weights=work, minlength=n)
    return out / out.sum()


@dataclass(frozen=True)
class ContextParallelLayer:
    """One transformer layer's attention under context parallelism on one GPU, forward + backward.

    Bytes per GPU; ``sent_bytes`` is what one GPU sends per layer (forward and backward);
    ``comm_s`` its time, ``compute_s`` the attention core's time on the busiest rank, ``exposed_s`` the
    communication left on the critical path (ring: per step max(0, transfer - compute); Ulysses: all
    of its all-to-alls, which the attention waits for); ``buffer_bytes`` the extra memory the method
    holds (ring: the double-buffered K/V block, 4 b (s/cp) w_kv e; Ulysses: the head-sharded Q, K, V of
    the whole sequence); ``activation_bytes`` the activations of all the GPU's layers (distlab.memory
    at the local sequence s/cp); ``imbalance`` = busiest rank's causal work / the fair share. Lesson 11b §1.
    """

    method: str
    model: str
    seq_len: int
    cp: int
    micro_batch_size: int
    tp: int
    kv_width: float
    sent_bytes: float
    comm_s: float
    compute_s: float
    exposed_s: float
    buffer_bytes: float
    activation_bytes: float
    imbalance: float

    def summary(self) -> str:
        """Three lines, the second and third indented. Lesson 11b §1."""
        return (
            f"{self.method} over cp={self.cp}, S={self.seq_len:,} ({self.seq_len // self.cp:,} tokens per GPU):\n"
            f"    {format_bytes(self.sent_bytes)} sent per layer, {format_seconds(self.comm_s)} against "
            f"{format_seconds(self.compute_s)} of attention, {format_seconds(self.exposed_s)} exposed;\n"
            f"    buffers {format_bytes(self.buffer_bytes)}, activations {format_bytes(self.activation_bytes)} per GPU"
        )


def ulysses_limit(model, cp, tp=1) -> str:
    """Why Ulysses cannot run at this degree ('' when it can). Lesson 11b §1.

    DeepSpeed-Ulysses (Jacobs et al. 2023, Sec. 3) gives each of the cp GPUs whole attention heads:
    cp must divide the query heads left after tensor parallelism, heads / tp. With grouped-query
    attention and cp > kv_heads / tp each K/V head is sent to cp / (kv_heads / tp) GPUs, which needs
    cp to be a multiple of kv_heads / tp.

    >>> ulysses_limit("llama3.1-70b", 16)  # 64 heads, 8 K/V heads
    ''
    >>> ulysses_limit("llama3.1-70b", 128)
    'cp=128 does not divide the 64 query heads per TP rank (heads / tp = 64 / 1); Ulysses gives each GPU whole heads: cp <= 64'
    """
    from .. import models

    mdl = models.model(model)
    n = positive_int(cp, "cp")
    t = tensor.check_tp(mdl, tp)
    heads, kv = mdl.heads // t, max(mdl.kv_heads // t, 1)
    if heads % n:
        return (
            f"cp={n} does not divide the {heads} query heads per TP rank (heads / tp = {mdl.heads} / {t}); "
            f"Ulysses gives each GPU whole heads: cp <= {heads}"
        )
    if n > kv and n % kv:
        return f"cp={n} is not a multiple of the {kv} K/V heads per TP rank, so K/V heads cannot be replicated evenly"
    return ""


def context_parallel_layer(
    model,
    seq_len,
    cp,
    *,
    method="ring",
    load_balanced=True,
    micro_batch_size=1,
    tp=1,
    pp=1,
    recompute="selective",
    precision="mixed",
    link="nvlink4",
    bandwidth=None,
    latency=None,
    gpu="h100-sxm",
    efficiency=None,
) -> ContextParallelLayer:
    """Price one layer's attention under context parallelism: ring (load-balanced or not) or Ulysses. Lesson 11b §1.

    Ring (Liu et al. 2023; Megatron-Core CP): cp - 1 steps forward, each sending the K/V block
    2 b (s/cp) w_kv e to the next GPU while computing against the block held (``ring_attention_step``);
    the backward sends K, V and their gradients, twice the bytes against twice the FLOPs, so its exposure
    is twice the forward's; full recomputation runs the forward's ring again. Each transfer hides only under its
    own step's compute (distlab.step.communication.ring_attention_exposure, which the step model's CP term calls).
    w_kv = kv_heads/tp x head_dim: grouped-query attention shrinks the ring.
    Without load balancing the ring waits for the busiest rank (``causal_work_per_rank``).
    Ulysses (Jacobs et al. 2023, "DeepSpeed Ulysses", Sec. 3): four all-to-alls per layer forward
    (Q, K, V from sequence to head shards, the output back), of b (s/cp) x width x e each, width h/tp for
    Q and the output and w_kv' = max(kv_heads/tp, cp) x head_dim for K and V (replicated K/V heads when
    cp > kv_heads/tp); as many in the backward. Each all-to-all sends (cp-1)/cp of its buffer
    (distlab.collectives) and nothing overlaps it. Attention FLOPs per layer: 4 b s^2 h / tp forward, x1/2
    causal, x2 backward, spread over cp GPUs.

    Llama 3.1 70B at 128K tokens over cp = 16 (8,192 tokens per GPU), ring on NVLink: each step sends
    2 x 8192 x 1024 x 2 B = 32 MiB and hides under the attention it overlaps.

    >>> r = context_parallel_layer("llama3.1-70b", 131072, 16)
    >>> r.kv_width, r.sent_bytes == 3 * 15 * 2 * 8192 * 1024 * 2, r.exposed_s
    (1024.0, True, 0.0)
    """
    from .. import models

    mdl = models.model(model)
    load_balanced = _yes_no(load_balanced, "load_balanced")
    if not isinstance(method, str) or method not in CP_METHODS:
        raise ConfigurationError(f"method={method!r}; valid: {', '.join(CP_METHODS)}")
    n = positive_int(cp, "cp")
    s = positive_int(seq_len, "seq_len")
    p = positive_int(pp, "pp")
    if p > mdl.layers:
        raise ConfigurationError(f"pp={p} exceeds the {mdl.layers} layers of {mdl.name}")
    t = tensor.check_tp(mdl, tp)
    chunks = 2 * n if (method == "ring" and load_balanced) else n
    if s % chunks:
        raise ConfigurationError(
            f"seq_len={s} does not split into {chunks} equal chunks "
            f"({'2 cp for the load-balanced ring' if chunks == 2 * n else 'cp'}); "
            f"pick a multiple of {chunks}"
        )
    if method == "ulysses":
        reason = ulysses_limit(mdl, n, t)
        if reason:
            raise ConfigurationError(reason)
    local = s // n
    b = positive_int(micro_batch_size, "micro_batch_size")
    activation = memory.activation_bytes_per_layer(
        mdl, b, local, t, t > 1, recompute, precision
    ) * memory.layers_per_stage(mdl.layers, p)
    recipe = memory.precision_recipe(precision)
    e = float(recipe.activation_bytes)
    acc = hardware.accelerator(gpu)
    eff = _attention_rate(acc, efficiency)
    peak = acc.peak(recipe.compute_precision)
    total_flops = 3.0 * 0.5 * 4.0 * b * float(s) * s * mdl.hidden / t  # forward + backward (2x), causal
    links = dict(link=link, bandwidth=bandwidth, latency=latency)
    if method == "ring":
        ring = dict(precision=precision, gpu=gpu, efficiency=eff, load_balanced=load_balanced, recompute=recompute)
        return _ring_layer(mdl, s, n, b, t, total_flops, peak * eff, activation, links, **ring)
    return _ulysses_layer(mdl, s, n, b, t, e, total_flops, peak * eff, activation, links)


def _ring_layer(
    mdl, s, n, b, t, flops, rate, activation, links, *, precision, gpu, efficiency, load_balanced, recompute
):
    """context_parallel_layer's ring: the busiest rank's share of `flops` (the layer's causal attention, forward
    and backward) at `rate` FLOP/s, (cp - 1) transfers per pass priced by ring_attention_exposure."""
    if n < 2:
        raise ConfigurationError("cp=1: one GPU per sequence has no ring; context parallelism needs cp >= 2")
    step = ring_attention_step(
        mdl, s, n, micro_batch_size=b, tp=t, precision=precision, gpu=gpu, efficiency=efficiency, causal=True, **links
    )
    shares = causal_work_per_rank(n, load_balanced)
    imbalance = float(shares.max() * n)
    compute = flops * float(shares.max()) / rate
    per_step_compute = compute / 3.0 / n  # the forward's share, one of the cp blocks
    transfers = 4.0 if recompute == "full" else 3.0  # full recomputation runs the forward's ring again
    comm, exposed, _ = (float(x) for x in ring_attention_exposure(step.comm_s, per_step_compute, n, transfers))
    sent = transfers * (n - 1) * step.kv_block_bytes
    buffer = 2.0 * step.kv_block_bytes
    return ContextParallelLayer(
        "ring", mdl.name, s, n, b, t, step.kv_width, sent, comm, compute, exposed, buffer, activation, imbalance
    )


def _ulysses_layer(mdl, s, n, b, t, e, flops, rate, activation, links):
    """context_parallel_layer's Ulysses: 4 all-to-alls forward and 4 backward, all exposed; compute `flops` / cp at
    `rate` FLOP/s (every GPU has whole heads)."""
    local = s // n
    kv_width = max(max(mdl.kv_heads // t, 1), n) * mdl.head_dim
    q_width = mdl.hidden / t
    sizes = [b * local * w * e for w in (q_width, kv_width, kv_width, q_width)]
    costs = [collectives.collective_cost("all-to-all", size, n, **links) if n > 1 else None for size in sizes]
    sent = 2.0 * sum(c.bytes_sent_per_gpu for c in costs if c is not None)
    comm = 2.0 * sum(c.time_s for c in costs if c is not None)
    compute = flops / n / rate
    buffer = b * float(s) * (q_width + 2 * kv_width) / n * e
    require_finite("context_parallel_layer", sent, comm, compute)
    return ContextParallelLayer(
        "ulysses", mdl.name, s, n, b, t, float(kv_width), sent, comm, compute, comm, buffer, activation, 1.0
    )


def compare_context_parallel(model, seq_len, cp, **kwargs) -> dict:
    """Ring (load-balanced), ring (contiguous) and Ulysses at the same degree: {name: layer or the reason it
    cannot run}. Lesson 11b §1.

    >>> out = compare_context_parallel("llama3.1-70b", 131072, 128)
    >>> sorted(out), isinstance(out["ulysses"], str)
    (['ring', 'ring (contiguous)', 'ulysses'], True)
    """
    from .. import models

    mdl = models.model(model)
    s = positive_int(seq_len, "seq_len")
    n = positive_int(cp, "cp")
    reasons = {
        "ring": "" if s % (2 * n) == 0 else f"seq_len={s} does not split into 2 cp = {2 * n} equal chunks",
        "ring (contiguous)": "" if s % n == 0 else f"seq_len={s} does not split into cp = {n} equal chunks",
        "ulysses": (
            ulysses_limit(mdl, n, kwargs.get("tp", 1))
            or ("" if s % n == 0 else f"seq_len={s} does not split into cp = {n} equal chunks")
        ),
    }
    out = {}
    for name, method, balanced in (
        ("ring", "ring", True),
        ("ring (contiguous)", "ring", False),
        ("ulysses", "ulysses", True),
    ):
        out[name] = reasons[name] or context_parallel_layer(mdl, s, n, method=method, load_balanced=balanced, **kwargs)
    return out
