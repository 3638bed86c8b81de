"""Gradient bucketing: the best bucket count, by computing every one (Li et al. 2020, Sec. 3.2.2-3.2.3). Lesson 8 §1."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import collectives, dataparallel, hardware, memory, training
from .._arguments import whole_number
from ..step import pricing
from ..errors import ConfigurationError
from ..units import (
    BYTES,
    SECONDS,
    format_bytes,
    format_seconds,
    non_negative,
    positive,
    positive_int,
    require_finite,
)

__all__ = [
    "MAX_SEQ_LEN",
    "MAX_MICRO_BATCH",
    "MAX_TOKENS_PER_GPU",
    "BucketSweep",
    "MAX_SWEEP_BUCKETS",
    "bucket_sweep",
    "backward_time",
]

#: Longest sequence and largest micro-batch: the step model's bounds (distlab.training).
MAX_SEQ_LEN = training.MAX_SEQ_LEN
MAX_MICRO_BATCH = training.MAX_MICRO_BATCH
#: Most tokens one GPU processes per step in backward_time.
MAX_TOKENS_PER_GPU = 1e15


# ----------------------------------------------------------------------------------------
# 1. Gradient bucketing: the best bucket count


@dataclass(frozen=True)
class BucketSweep:
    """Exposed gradient communication for every bucket count 1..max (NumPy arrays, seconds and bytes).

    buckets[i] = i + 1 equal buckets of bucket_bytes[i] = M / B; per_bucket_s the collective time
    of one bucket (latency_s + bucket bytes x seconds_per_byte); comm_total_s = B x per_bucket_s;
    exposed_s what is left after backward (dataparallel.exposed_communication_time);
    bandwidth_share the share of a bucket's time spent moving bytes (1 = the link's full rate,
    small buckets are latency-bound).
    """

    grad_bytes: float
    backward_s: float
    dp: int
    op: str
    latency_s: float
    seconds_per_byte: float
    buckets: np.ndarray
    bucket_bytes: np.ndarray
    per_bucket_s: np.ndarray
    comm_total_s: np.ndarray
    exposed_s: np.ndarray
    bandwidth_share: np.ndarray

    @property
    def best_index(self) -> int:
        return int(np.argmin(self.exposed_s))

    @property
    def best_buckets(self) -> int:
        """The bucket count with the least exposed communication (the smallest such count on a tie)."""
        return int(self.buckets[self.best_index])

    @property
    def best_exposed_s(self) -> float:
        return float(self.exposed_s[self.best_index])

    @property
    def best_bucket_bytes(self) -> float:
        return float(self.bucket_bytes[self.best_index])

    @property
    def best_at_end(self) -> bool:
        """Whether the best count is the last one priced while the exposed time still falls there: more buckets than
        the sweep prices would leave less exposed, so `best_buckets` is the best of 1..max only."""
        return (
            len(self.buckets) > 1
            and self.best_index == len(self.buckets) - 1
            and (self.exposed_s[-1] < self.exposed_s[-2])
        )

    def best_words(self) -> str:
        """The best count and its bucket size, and, when it is the last count priced (best_at_end), that it is: the
        bucket app said "best: 2000 buckets" at 65,536 tokens per GPU, the slider's end, where B* is about 19,000
        (a student's review)."""
        words = f"{self.best_buckets} buckets of {format_bytes(self.best_bucket_bytes)}"
        return words + " (the most priced; more would leave less exposed)" if self.best_at_end else words

    @property
    def closed_form_buckets(self) -> float:
        """B* = (T - M s) / L: the count at which all buckets' communication just fills backward.

        It is the optimum only when B* >= sqrt(T / L), i.e. (T - M s)^2 >= T L (see
        closed_form_applies); otherwise (M s close to or above T) the best count balances the first
        bucket's wait T / B against the latency B L it adds, near sqrt(T / L), and only the sweep
        (best_buckets) says where. Negative when M s > T."""
        return (self.backward_s - self.grad_bytes * self.seconds_per_byte) / self.latency_s

    @property
    def closed_form_applies(self) -> bool:
        """Whether B* = closed_form_buckets is the optimum: (T - M s)^2 >= T L with T > M s."""
        slack = self.backward_s - self.grad_bytes * self.seconds_per_byte
        return slack > 0 and slack * slack >= self.backward_s * self.latency_s

    def at(self, buckets) -> dict:
        """The sweep's numbers at one bucket count (plain floats)."""
        b = whole_number(buckets, "buckets", 1, int(self.buckets[-1]))
        i = b - 1
        return dict(
            buckets=b,
            bucket_bytes=float(self.bucket_bytes[i]),
            per_bucket_s=float(self.per_bucket_s[i]),
            comm_total_s=float(self.comm_total_s[i]),
            exposed_s=float(self.exposed_s[i]),
            bandwidth_share=float(self.bandwidth_share[i]),
        )

    def timeline(self, buckets) -> dataparallel.OverlapTimeline:
        """The per-bucket timeline of one count (dataparallel.overlap_timeline): bucket i ready at
        (i+1)/B of backward, each taking per_bucket_s on one stream."""
        b = whole_number(buckets, "buckets", 1, int(self.buckets[-1]))
        sizes = np.full(b, self.grad_bytes / b)
        ready = self.backward_s * np.arange(1, b + 1) / b
        comm = np.full(b, float(self.per_bucket_s[b - 1]))
        start, end = dataparallel.overlap_timeline(ready, comm)
        return dataparallel.OverlapTimeline(sizes, ready, start, end, comm, self.backward_s, self.op, self.dp)

    def ddp_default_buckets(self) -> int:
        """Buckets of PyTorch DDP's default 25 MiB (dataparallel.DDP_BUCKET_BYTES): ceil(M / 25 MiB)."""
        return max(1, math.ceil(self.grad_bytes / dataparallel.DDP_BUCKET_BYTES))

    def __str__(self) -> str:
        one, best = self.at(1), self.at(self.best_buckets)
        return (
            f"{format_bytes(self.grad_bytes)} of gradients, {self.op} over {self.dp} GPUs, "
            f"{format_seconds(self.backward_s)} of backward:\n"
            f"    1 bucket leaves {format_seconds(one['exposed_s'])} exposed;\n"
            f"    the best, {self.best_words()}, leaves "
            f"{format_seconds(best['exposed_s'])} (each bucket at {100 * best['bandwidth_share']:.0f}% of the "
            f"link's bandwidth)"
        )


#: Largest bucket count a sweep prices (every count from 1 to it).
MAX_SWEEP_BUCKETS = 100_000


def bucket_sweep(
    grad_bytes,
    backward_time,
    dp,
    *,
    max_buckets=1024,
    link=None,
    bandwidth=None,
    latency=None,
    op="all-reduce",
    **cost_kwargs,
) -> BucketSweep:
    """Exposed communication for every bucket count B = 1..max_buckets, and the best B.

    A bucket of m bytes costs t(m) = L + m x s, read off distlab.collectives.collective_cost
    (ring all-reduce: L = 2(N-1) alpha, s = 2(N-1)/(N beta)), so B buckets take
    comm(B) = B L + M s in all and exposed(B) = max(comm/B, comm - (B-1)/B x backward)
    (distlab.dataparallel.exposed_communication_time; bucketed_overlap's timeline gives the
    same). Few buckets: little overlaps (B = 1 hides nothing). Many: the latency B L grows and
    each bucket moves m / t(m) = beta_eff, far below the link's rate once m s << L. The best B
    is the argmin over every count, computed, not assumed. Li et al. 2020: bucketing Sec. 3.2.2,
    overlap with backward Sec. 3.2.3.

    Where it lands (T = backward): the two branches of exposed meet where comm(B) = T, i.e. at
    B* = (T - M s) / L (BucketSweep.closed_form_buckets): the buckets' communication just fills
    the backward pass and only the last bucket shows (exposed = L + M s / B*). Fewer buckets leave
    a bigger last bucket; more make the stream outlast backward. That is the optimum only when
    B* >= sqrt(T / L), i.e. (T - M s)^2 >= T L: beyond B*, exposed = B L + M s - T + T / B still
    falls while T / B^2 > L. Otherwise (M s close to T, or above it) the best count balances the
    wait for the FIRST bucket, T / B, against the latency B L, near sqrt(T / L). Example, T / L =
    1000: M s = 0.97 T gives B* = 30 but the best is 32; M s = 0.99 T gives B* = 10, best 32.
    cost_kwargs go to collective_cost (e.g. algorithm='hierarchical', gpus_per_node=8,
    inter_link='ib-ndr': L = 2(g-1) alpha_intra + 2(n/g-1) alpha_inter). Lesson 8 §1.

    1 GB over 8 GPUs at 100 GB/s, alpha 10 us, 100 ms of backward: L = 14 x 10 us = 0.14 ms, M s = 14 x 1 GB /
    (8 x 100 GB/s) = 17.5 ms, B* = (100 - 17.5) / 0.14 = 589.3; B = 589 leaves L + M s / 589 = 0.17 ms exposed.

    >>> sweep = bucket_sweep(1e9, 0.1, 8, bandwidth=100e9, latency=1e-5)
    >>> sweep.best_buckets, round(sweep.closed_form_buckets, 1), round(sweep.best_exposed_s * 1e3, 2)
    (589, 589.3, 0.17)
    """
    m = positive(grad_bytes, BYTES, "grad_bytes")
    backward = non_negative(backward_time, SECONDS, "backward_time")
    n = positive_int(dp, "dp")
    top = whole_number(max_buckets, "max_buckets", 1, MAX_SWEEP_BUCKETS)
    if not isinstance(op, str) or op not in ("all-reduce", "reduce-scatter"):
        raise ConfigurationError(f"op={op!r}: the gradient step is an 'all-reduce' (DP) or a 'reduce-scatter' (ZeRO-2)")
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # overflow is refused below
        probe = collectives.collective_cost(op, m, n, link=link, bandwidth=bandwidth, latency=latency, **cost_kwargs)
    latency_s = probe.latency_time_s
    per_byte = probe.bandwidth_time_s / m
    buckets = np.arange(1, top + 1, dtype=float)
    size = m / buckets
    with np.errstate(over="ignore", invalid="ignore"):  # overflow is refused below
        per_bucket = latency_s + size * per_byte
        comm = buckets * per_bucket
        exposed = np.asarray(dataparallel.exposed_communication_time(comm, backward, buckets), dtype=float)
    require_finite("bucket_sweep's communication time", latency_s, per_byte, per_bucket, comm, exposed)
    share = np.where(per_bucket > 0, size * per_byte / np.where(per_bucket > 0, per_bucket, 1.0), 1.0)
    return BucketSweep(
        m, backward, n, op, latency_s, per_byte, buckets.astype(int), size, per_bucket, comm, exposed, share
    )


def backward_time(
    model, tokens_per_gpu, gpu="h100-sxm", *, precision="mixed", efficiency=None, seq_len=None, attention="flash"
) -> float:
    """Backward compute of one step on one data-parallel GPU (s), priced as the step model prices compute.

    efficiency None (default): the calibrated compute model of training.estimate (distlab.efficiency:
    matmuls at the fitted share of the GPU's measured GEMM rate, the attention core at its kernel's
    efficiency, the element-wise HBM traffic), on one GPU without model parallelism or recomputation,
    for tokens_per_gpu tokens in sequences of seq_len (default: the model's). Every part of that time is
    3 passes (forward, and backward's input and weight gradients: flops.TRAINING_PASSES), so backward
    is 2/3 of it: backward = 2/3 x tokens x training.step_model_array's compute per token. A number:
    Lesson 7 §1's fixed share of peak on the 6PT count, backward = 4 x params x tokens / (peak x
    efficiency), the 4 of the 6 FLOPs per parameter per token (Kaplan et al. 2020). Lesson 8 §1.

    Llama-2-7B, 4,096 tokens (one sequence) on an H100 SXM (989.4 TFLOP/s bf16, 3.35 TB/s), calibrated:
    matmuls (weights and logits) 32 x 3 x 2 x 202,383,360 + 3 x 2 x 4096 x 32000 = 39,644,037,120 FLOP per
    token at 0.82 x 794.5 / 989 = 65.87% of peak, slowed by their shapes (efficiency.layer_gemm_slowdown_array: 4096-row
    GEMMs on 132 SMs lose 1.03-5.5% to wave quantisation; x 1.0277 for the layers, 1.0258 for the logits): 0.2560 s;
    the causal flash-attention core executes 32 x 3.5 x
    (4 x 4096 x 4096) / 2 = 3,758,096,384 FLOP per token (efficiency.flash_attention_work_array) at
    FlashAttention-2's 335 TFLOP/s on H100: 0.0459 s; element-wise traffic (fused kernels,
    efficiency.elementwise_bytes_per_token) 32 layers x 3 passes x 1.4 x 180,736 B x 4096 / 3.35 TB/s = 0.0297 s
    plus the loss, 1.4 x 52 x 32,000 B x 4096 / 3.35 TB/s = 0.0028 s; backward = 2/3 x 0.3345 s = 0.2230 s (the
    flash core's own backward is 2.5 of its 3.5, so 2/3 undercounts it by 2 ms here). The fixed 50%: 4 x 6.738e9 x
    4096 / (989.4 TFLOP/s x 0.5) = 0.2232 s.

    >>> round(backward_time('llama2-7b', 4096), 4), round(backward_time('llama2-7b', 4096, efficiency=0.5), 4)
    (0.223, 0.2232)
    """
    from .. import efficiency as compute_models, flops, models

    model = models.model(model)
    tokens = positive(tokens_per_gpu, "", "tokens_per_gpu")
    if tokens > MAX_TOKENS_PER_GPU:
        raise ConfigurationError(
            f"tokens_per_gpu={tokens:g} is more than {MAX_TOKENS_PER_GPU:g} tokens per GPU per step"
        )
    acc = hardware.accelerator(gpu)
    recipe = memory.precision_recipe(precision)
    peak = acc.peak(recipe.compute_precision)
    if efficiency is not None:
        eff = training.check_fraction(efficiency, "efficiency")
        params = float(model.parameter_count())
        result = 4.0 / training.FLOPS_PER_PARAM_TOKEN * training.model_flops(params, tokens) / (peak * eff)
    else:
        s = model.seq_len if seq_len is None else whole_number(seq_len, "seq_len", 1, MAX_SEQ_LEN)
        compute = compute_models.compute_model(acc, attention)
        # one sequence on one GPU (no TP, PP or DP: the links are not used); compute is linear in the tokens
        out = training.step_model_array(
            model,
            gpus_per_node=1,
            intra_bw=1.0,
            intra_lat=0.0,
            inter_bw=1.0,
            inter_lat=0.0,
            peak_flops=peak,
            hbm_bandwidth=acc.memory_bandwidth,
            recipe=recipe,
            global_batch=1,
            seq_len=s,
            dp=1,
            tp=1,
            pp=1,
            chunks=1,
            micro_batch_size=1,
            zero=0,
            recompute_code=0,
            sequence_parallel=False,
            schedule_code=1,
            **pricing.compute_arguments(compute),
        )
        passes = flops.TRAINING_PASSES
        result = (passes - 1) / passes * float(out["compute_s"]) / s * tokens
    require_finite("backward_time", result)
    return result
