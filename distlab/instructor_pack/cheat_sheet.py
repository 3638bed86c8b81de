"""The instructor pack's cheat sheet: one formula per row (CHEAT_SHEET), each with its units, the distlab
function that computes it (called for the worked example when the page is built), its paper and its lesson.
"""

from __future__ import annotations

import importlib


from dataclasses import dataclass
from typing import Callable

from ..errors import ConfigurationError

__all__ = ["Formula", "CHEAT_SHEET"]


@dataclass(frozen=True)
class Formula:
    """One cheat-sheet row: the formula with its units, the distlab function that computes it, a worked example
    (a call of that function and a sentence around its result), the bibliography key and the lesson."""

    name: str
    formula: str
    units: str
    function: str  # dotted name under distlab
    example: Callable[[], str]
    source: str  # a bibliography key (instructor/bibliography.toml)
    lesson: str


def _fn(dotted: str):
    module, _, name = dotted.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        raise ConfigurationError(f"cheat sheet: {dotted} is not a distlab function") from None


def _gb(x: float) -> str:
    return f"{x / 1e9:,.3g} GB"


def _ex_states():
    w, g, o = _fn("distlab.memory.model_state_bytes")(7e9)
    return f"7B params: {_gb(w)} + {_gb(g)} + {_gb(o)} = {_gb(w + g + o)}"


def _ex_zero():
    total = sum(_fn("distlab.memory.model_state_bytes")(7.5e9, zero=2, dp=64))
    return f"7.5B params, ZeRO-2, dp 64: {_gb(total)} per GPU (the ZeRO paper's Table 1)"


def _ex_activations():
    b = _fn("distlab.memory.activation_bytes_per_layer")("llama2-7b", seq_len=4096, recompute="selective")
    return f"llama2-7b, one 4,096-token sequence, selective: {_gb(b)} per layer"


def _ex_ring():
    t = _fn("distlab.collectives.ring_all_reduce_time")(14e9, 8, 450e9)
    return f"14 GB over 8 GPUs at 450 GB/s, alpha 0: {t * 1e3:,.1f} ms"


def _ex_busbw():
    return f"all-reduce over 8 GPUs: busbw = {_fn('distlab.collectives.bus_factor')('all-reduce', 8):.3f} x algbw"


def _ex_bubble():
    f = _fn("distlab.pipeline.bubble_fraction")(4, 8)
    o = _fn("distlab.pipeline.bubble_overhead")(4, 8)
    return f"p 4, m 8: idle share {f:.1%}, time added {o:.1%}"


def _ex_interleaved():
    return f"p 4, m 8, v 2: time added {_fn('distlab.pipeline.bubble_overhead')(4, 8, chunks=2):.1%}"


def _ex_zb():
    t = _fn("distlab.pipeline.zb_h1_bubble_time")(4, t_f=1.0, t_b=1.0, t_w=1.0)
    return f"p 4, t_F = t_B = t_W = 1 ms: {t:g} ms of bubble (1F1B: (p-1)(t_F+t_B+t_W) = 9 ms)"


def _ex_tp():
    size = _fn("distlab.tensor.tp_message_bytes")(1, 4096, 4096)
    t = _fn("distlab.tensor.tp_comm_time")(size, 8, 450e9)
    return f"llama2-7b layer (b 1, s 4,096, h 4,096, bf16), t 8, 450 GB/s: {size / 1e6:,.1f} MB per all-reduce, {t * 1e3:.3f} ms for 4"


def _ex_ring_attention():
    b = _fn("distlab.tensor.ring_attention_buffer_bytes")(131072, 64, 8192, element_bytes=1.0)
    return f"131,072 tokens over cp 64, width 8,192, FP8: {b / 1e6:,.1f} MB (K+V of one block; no GQA, single buffer)"


def _ex_model_flops():
    f = _fn("distlab.training.model_flops")(70e9, 256 * 8192)
    return f"70B params, 256 x 8,192 tokens: {f / 1e18:,.2f} EFLOP per step"


def _ex_megatron_flops():
    f = _fn("distlab.training.megatron_flops_per_iteration")(1536, 2048, 96, 12288, 51200)
    return f"GPT-3 175B, batch 1,536 x 2,048: {f / 1e18:,.0f} EFLOP per iteration (full recomputation)"


def _ex_mfu():
    m = _fn("distlab.training.mfu")(1e18, 10.0, 256, 989e12)
    return f"1 EFLOP in a 10 s step on 256 GPUs of 989 TFLOP/s: MFU {m:.1%}"


def _ex_days():
    d = _fn("distlab.training.training_days")(70e9, 15e12, 1024, 400e12)
    return f"70B params, 15T tokens, 1,024 GPUs at 400 TFLOP/s achieved, full recomputation: {d:,.0f} days"


def _ex_dp_volume():
    vf = _fn("distlab.dataparallel.volume_factor")
    return f"plain DP, ZeRO-1, ZeRO-2: {vf(0)}M, {vf(1)}M, {vf(2)}M; ZeRO-3: {vf(3)}M per GPU per step"


def _ex_exposed():
    t = _fn("distlab.dataparallel.exposed_communication_time")(0.250, 0.200, buckets=4)
    return f"backward 200 ms, all-reduce 250 ms in 4 equal buckets: {t * 1e3:,.1f} ms exposed"


def _ex_straggler():
    e = _fn("distlab.production.stragglers.expected_max_normal")(256)
    return f"256 GPUs: E[max] = {e:.3f} sigma; with 5 % jitter the step is {e * 5:.1f} % slower than the mean"


def _ex_capacity():
    c = _fn("distlab.moe.capacity.expert_capacity")(4096, 8, 2, 1.25)
    return f"4,096 tokens, 8 experts, top-2, capacity factor 1.25: {c:,} token copies per expert"


def _ex_remote_nodes():
    free = _fn("distlab.moe.all_to_all.expected_remote_nodes")(256, 8, 8)
    limited = _fn("distlab.moe.all_to_all.expected_remote_nodes")(256, 8, 8, max_nodes=4)
    return (
        f"DeepSeek-V3, 256 experts, top-8 on 8 nodes: {free:.2f} remote nodes per token; at most 4 nodes: {limited:.2f}"
    )


def _ex_young():
    mtbf = _fn("distlab.failures.job_mtbf")(131072, _fn("distlab.failures.failure_rate_per_gpu_hour")())
    t = _fn("distlab.failures.young_interval")(60.0, mtbf)
    return f"131,072 GPUs at Llama 3's failure rate: MTBF {mtbf / 60:.1f} min; 60 s checkpoints every {t / 60:.1f} min"


def _ex_fsdp_collectives():
    n = _fn("distlab.fsdp.collectives_per_microbatch")(32)
    return (
        f"Llama-2-7B (32 layers), FSDP2 resharding after forward: {n['all-gather']} all-gathers, "
        f"{n['reduce-scatter']} reduce-scatters"
    )


def _ex_critical_batch():
    b = _fn("distlab.batch.critical_batch_tokens")(2.0)
    return f"at a loss of 2 nats: {b / 1e6:.2f} M tokens"


CHEAT_SHEET: tuple[Formula, ...] = (
    Formula(
        "Model states, mixed precision with Adam",
        "2 + 2 + 12 = 16 bytes x parameters (bf16 weights, bf16 gradients, fp32 master + 2 moments)",
        "bytes",
        "distlab.memory.model_state_bytes",
        _ex_states,
        "rajbhandari2020",
        "Lesson 1 §1",
    ),
    Formula(
        "ZeRO model states per GPU",
        "ZeRO-1: 4P + 12P/N; ZeRO-2: 2P + 14P/N; ZeRO-3: 16P/N",
        "bytes per GPU",
        "distlab.memory.model_state_bytes",
        _ex_zero,
        "rajbhandari2020",
        "Lesson 3 §2",
    ),
    Formula(
        "Activations per layer",
        "none: sbh(34 + 5as/h); selective: 34sbh; full: 2sbh (x b micro-batch)",
        "bytes per layer per micro-batch",
        "distlab.memory.activation_bytes_per_layer",
        _ex_activations,
        "korthikanti2022",
        "Lesson 1 §4",
    ),
    Formula(
        "Ring all-reduce time",
        "2(N-1) alpha + 2 (N-1)/N x M / B",
        "s (M bytes, B bytes/s per direction, alpha s)",
        "distlab.collectives.ring_all_reduce_time",
        _ex_ring,
        "patarasuk2009",
        "Lesson 2 §3",
    ),
    Formula(
        "Bus bandwidth",
        "busbw = algbw x 2(N-1)/N (all-reduce); algbw = M / t",
        "GB/s",
        "distlab.collectives.bus_factor",
        _ex_busbw,
        "thakur2005",
        "Lesson 2 §6",
    ),
    Formula(
        "Data-parallel traffic per step",
        "2M (DP, ZeRO-1, ZeRO-2), 3M (ZeRO-3), M = gradient bytes",
        "bytes per GPU",
        "distlab.dataparallel.volume_factor",
        _ex_dp_volume,
        "rajbhandari2020",
        "Lesson 3 §4",
    ),
    Formula(
        "Exposed communication with buckets",
        "max(c/B, c - (B-1)/B x t_backward) for B equal buckets, c the whole all-reduce",
        "s",
        "distlab.dataparallel.exposed_communication_time",
        _ex_exposed,
        "li2020",
        "Lesson 3 §5",
    ),
    Formula(
        "Pipeline bubble (GPipe, 1F1B)",
        "idle share (p-1)/(m+p-1); time added (p-1)/m",
        "fraction",
        "distlab.pipeline.bubble_fraction",
        _ex_bubble,
        "huang2019",
        "Lesson 4 §3",
    ),
    Formula(
        "Interleaved 1F1B bubble",
        "time added (p-1)/(v m)",
        "fraction",
        "distlab.pipeline.bubble_overhead",
        _ex_interleaved,
        "narayanan2021",
        "Lesson 4 §2",
    ),
    Formula(
        "ZB-H1 bubble",
        "(p-1)(t_F + t_B - t_W)",
        "s",
        "distlab.pipeline.zb_h1_bubble_time",
        _ex_zb,
        "qi2023",
        "Lesson 4 §2",
    ),
    Formula(
        "Tensor-parallel traffic per layer",
        "4 all-reduces of b s h x 2 bytes (2 forward, 2 backward)",
        "s",
        "distlab.tensor.tp_comm_time",
        _ex_tp,
        "shoeybi2019",
        "Lesson 5 §4",
    ),
    Formula(
        "Ring-attention K/V buffer",
        "2 x S/N x H x bytes (as lesson 5 states it)",
        "bytes per GPU",
        "distlab.tensor.ring_attention_buffer_bytes",
        _ex_ring_attention,
        "liu2023",
        "Lesson 5 §7",
    ),
    Formula(
        "Model FLOPs per step, the 6PT rule of thumb (no attention; the step model counts it: flops.step_flops)",
        "6 x parameters x tokens",
        "FLOP",
        "distlab.training.model_flops",
        _ex_model_flops,
        "kaplan2020",
        "Lesson 7 §1",
    ),
    Formula(
        "Megatron FLOPs per iteration",
        "96 B s l h^2 (1 + s/(6h) + V/(16 l h))",
        "FLOP",
        "distlab.training.megatron_flops_per_iteration",
        _ex_megatron_flops,
        "narayanan2021",
        "Lesson 7 §1",
    ),
    Formula(
        "MFU",
        "model FLOPs per step / (step time x GPUs x peak FLOP/s)",
        "fraction",
        "distlab.training.mfu",
        _ex_mfu,
        "chowdhery2022",
        "Lesson 7 §1",
    ),
    Formula(
        "Time to train",
        "8 T P / (n X) with full recomputation (6 without)",
        "days",
        "distlab.training.training_days",
        _ex_days,
        "narayanan2021",
        "Lesson 12 §2",
    ),
    Formula(
        "Slowest of n GPUs",
        "E[max of n standard normals] x sigma",
        "sigma",
        "distlab.production.stragglers.expected_max_normal",
        _ex_straggler,
        "tippett1925",
        "Lesson 8b §2",
    ),
    Formula(
        "Expert capacity",
        "ceil(capacity factor x tokens x top_k / experts)",
        "token copies per expert",
        "distlab.moe.capacity.expert_capacity",
        _ex_capacity,
        "lepikhin2021",
        "Lesson 10 §3",
    ),
    Formula(
        "Remote nodes a token's experts reach",
        "n (1 - C(E - E/n, k) / C(E, k)) (n-1)/n without a limit; M (n-1)/n with node-limited routing to M nodes",
        "nodes per token",
        "distlab.moe.all_to_all.expected_remote_nodes",
        _ex_remote_nodes,
        "deepseek2024",
        "Lesson 10 §5",
    ),
    Formula(
        "FSDP collectives per microbatch",
        "all-gathers: L forward + (L - 1) backward with reshard after forward; reduce-scatters: L",
        "collectives",
        "distlab.fsdp.collectives_per_microbatch",
        _ex_fsdp_collectives,
        "zhao2023",
        "Lesson 11 §2",
    ),
    Formula(
        "Job MTBF and Young's checkpoint interval",
        "MTBF = 1 / (N lambda); interval = sqrt(2 x checkpoint time x MTBF)",
        "s",
        "distlab.failures.young_interval",
        _ex_young,
        "young1974",
        "Lesson 11b §2",
    ),
    Formula(
        "Critical batch",
        "B_crit = B_* / L^(1/alpha_B), B_* = 2e8 tokens, alpha_B = 0.21",
        "tokens",
        "distlab.batch.critical_batch_tokens",
        _ex_critical_batch,
        "kaplan2020",
        "Lesson 11b §3",
    ),
)
