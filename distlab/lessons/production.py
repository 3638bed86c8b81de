"""Graded questions of lesson 8, where the step time goes in production. Every expected value is computed
by distlab.production / distlab.training."""

from __future__ import annotations

from .. import dataparallel, hardware, production, triage
from ..units import format_bytes, format_seconds
from .questions import ChoiceQuestion, NumericQuestion

__all__ = ["BUCKET_LINKS", "TAPER", "TAPER_VARIANTS", "TRIAGE_CONFIG", "JITTER_VARIANTS", "TRIAGE_OPTIONS", "QUESTIONS"]

#: Q1: plain data parallelism of Llama-2-7B on 8 DGX H100 nodes, 4,096 tokens per GPU per step.
BUCKET_MODEL, BUCKET_DP, BUCKET_TOKENS = "llama2-7b", 64, 4096
BUCKET_LINKS = dict(link="nvlink4", algorithm="hierarchical", gpus_per_node=8, inter_link="ib-ndr")
#: Q2, Q3: the same gradients over 4 DGX H100 nodes on a 3:1 tapered NDR fabric.
TAPER = 3
#: per-student variants of Q2 and Q3 (the same choices, so "same cluster" is one draw); the flat ring is slower on
#: rails at every one of them (tests/lessons/test_lesson_production.py)
TAPER_VARIANTS = dict(taper=(2, 3, 4))
_SHARE = {2: "a half", 3: "a third", 4: "a quarter"}
#: Q5: context parallelism.
CP_MODEL, CP, CP_FABRIC = "llama3.1-70b", 16, "ib-ndr"
#: Q6: the triage scenario of the lesson's §5 (stored attention scores: selective recomputation matters).
TRIAGE_CONFIG = dict(
    attention="unfused",
    global_batch=256,
    seq_len=8192,
    tp=8,
    pp=4,
    micro_batch_size=4,
    zero=0,
    recompute="none",
    sequence_parallel=True,
)
#: Q7: jitter.
JITTER_GPUS, JITTER_SIGMA = 256, 0.05
#: per-student variants of Q7 (distlab.lessons.variants); whole percents, so the prompt's {sigma:.0%} is exact
JITTER_VARIANTS = dict(gpus=(16, 64, 256, 1024, 4096), sigma=(0.02, 0.05, 0.1))


def _sweep():
    grad = dataparallel.gradient_bytes(BUCKET_MODEL)
    backward = production.backward_time(BUCKET_MODEL, BUCKET_TOKENS)
    return production.bucket_sweep(grad, backward, BUCKET_DP, max_buckets=2000, **BUCKET_LINKS)


def _q1():
    return _sweep().best_buckets


def _explain_q1():
    s = _sweep()
    regime = (
        "B* >= sqrt(T / L), so B* is the optimum"
        if s.closed_form_applies
        else "B* < sqrt(T / L): the optimum is not B* but where T / B balances B L"
    )
    return (
        f"M = {format_bytes(s.grad_bytes)}, backward T = {format_seconds(s.backward_s)}, one bucket costs "
        f"L = {format_seconds(s.latency_s)} of latency and M s = {format_seconds(s.grad_bytes * s.seconds_per_byte)} "
        f"of bytes in all; the communication just fills backward at B* = (T - M s) / L = "
        f"{s.closed_form_buckets:.1f} ({regime}); the sweep's minimum: {s.best_buckets} buckets of "
        f"{format_bytes(s.best_bucket_bytes)}, {format_seconds(s.best_exposed_s)} exposed"
    )


def _taper(rails: bool, algorithm: str, taper=TAPER):
    cl = hardware.cluster("dgx-h100", 4, "ib-ndr", taper, rails)
    return production.dp_all_reduce(cl, dataparallel.gradient_bytes(BUCKET_MODEL), algorithm=algorithm)


def _q2(taper=TAPER):
    return 1e3 * _taper(False, "hierarchical", taper).time_s


def _explain_q2(taper=TAPER):
    r = _taper(False, "hierarchical", taper)
    return (
        f"32 GPUs, 8 per node: intra-node ring over 8 on NVLink {format_seconds(r.intra_s)} + inter-node ring of "
        f"M/8 over 4 nodes at 50 GB/s / {taper} = {r.fabric_bw / 1e9:.2f} GB/s per GPU {format_seconds(r.inter_s)} "
        f"= {format_seconds(r.time_s)}"
    )


def _q2_hints(taper):
    nonblocking = production.dp_all_reduce(
        hardware.cluster("dgx-h100", 4, "ib-ndr"), dataparallel.gradient_bytes(BUCKET_MODEL)
    ).time_s
    return {
        nonblocking / (_q2(taper) / 1e3): f"is the non-blocking time: the {taper}:1 taper leaves {_SHARE[taper]} "
        "of the fabric's bandwidth per GPU"
    }


def _q3(taper=TAPER):
    return "yes" if _taper(True, "ring", taper).time_s < _taper(False, "ring", taper).time_s else "no"


def _explain_q3(taper=TAPER):
    r = _taper(True, "ring", taper)
    flat = _taper(False, "ring", taper)
    h = _taper(True, "hierarchical", taper)
    return (
        f"the flat ring runs 0 -> 1 -> ... -> 31: each node-crossing hop joins local rank 7 to local rank 0, "
        f"different rails, so it crosses the spine. Without rails only {flat.flows_per_node} transfer leaves each "
        f"node, within the 8/{taper} ports' worth of uplink a node has: full port rate, "
        f"{format_seconds(flat.time_s)}. On rails every node's crossing transfer leaves rank 7's leaf, so that "
        f"leaf's uplinks carry one transfer per port (assuming that leaf serves only this job's 4 nodes, all sending at "
        f"once): the full 1/{taper} taper, {format_seconds(r.time_s)}. "
        f"The hierarchical all-reduce's inter-node ring joins equal local ranks and drops to "
        f"{format_seconds(h.time_s)} on rails"
    )


def _q4():
    from .. import memory

    return memory.precision_recipe("fp8").bytes_per_param


def _explain_q4():
    from .. import memory

    r = memory.precision_recipe("fp8")
    return (
        f"fp8 weights {r.weight_bytes:g} B + bf16 gradients {r.gradient_bytes:g} B + fp32 master weights and Adam "
        f"moments {r.optimizer_bytes:g} B = {r.bytes_per_param:g} B per parameter (bf16: 16)"
    )


def _ring(cp=CP):
    return production.ring_attention_step(CP_MODEL, 8192 * cp, cp, link=CP_FABRIC)


def _q5(cp=CP):
    return _ring(cp).crossover_seq_len


def _explain_q5(cp=CP):
    r = _ring(cp)
    return (
        f"per step the K/V block of a chunk c costs alpha + 2 c x {r.kv_width:g} x 2 B / 50 GB/s; causal attention "
        f"on it 1/2 x 4 c^2 h / (peak x 0.5); they are equal at c* ~ {r.crossover_seq_len // cp:,} tokens per GPU, "
        f"i.e. S = {cp} x c* = {r.crossover_seq_len:,}"
    )


TRIAGE_OPTIONS = ("smaller micro-batch", "selective recomputation", "full recomputation", "zero", "tp", "pp")


def _triage():
    return triage.oom_triage("llama3.1-70b", hardware.cluster("dgx-h100", 32, "ib-ndr"), **TRIAGE_CONFIG)


def _q6():
    first = _triage().first_fit
    if first.kind == "recomputation":
        return first.change
    return {"micro-batch": "smaller micro-batch", "ZeRO": "zero", "TP": "tp", "PP": "pp"}[first.kind]


def _explain_q6():
    t = _triage()
    rungs = "; ".join(f"{s.change}: {format_bytes(s.memory_per_gpu_bytes)}" for s in t.ladder)
    return f"given: {format_bytes(t.base.memory.total_bytes)} per GPU; the ladder: {rungs} (first fit: {t.first_fit.change})"


def _q7(gpus=JITTER_GPUS, sigma=JITTER_SIGMA):
    return 100 * (production.expected_slowest(gpus, sigma) - 1)


def _explain_q7(gpus=JITTER_GPUS, sigma=JITTER_SIGMA):
    mu = production.expected_max_normal(gpus)
    return (
        f"the slowest of {gpus} GPUs is on average E[max of {gpus} normals] = {mu:.4f} standard "
        f"deviations above the mean: {100 * sigma:g}% x {mu:.4f} = {100 * sigma * mu:.2f}% slower "
        f"(the leading term sqrt(2 ln N) = {production.leading_term_max_normal(gpus):.3f} overestimates it)"
    )


def _q7_hints(gpus, sigma):
    return {
        production.leading_term_max_normal(gpus)
        / production.expected_max_normal(
            gpus
        ): "uses the leading term sqrt(2 ln N), which overestimates the expected maximum"
    }


q1 = NumericQuestion(
    name="q1",
    prompt=f"Llama-2-7B, plain data parallelism over {BUCKET_DP} GPUs (8 DGX H100, hierarchical all-reduce on NDR), "
    f"{BUCKET_TOKENS:,} tokens per GPU per step: which bucket count leaves the least exposed communication?",
    # abs_tol=1: the exposed time is flat within a bucket of the optimum (a fraction of a percent), and a
    # student's sweep with another max_buckets or rounding of B* may land one count either side
    expected=_q1,
    explain=_explain_q1,
    unit="",
    noun="a number of buckets",
    rel_tol=0.0,
    abs_tol=1.0,
    hint_text="production.bucket_sweep(gradient bytes, backward time, 64, algorithm='hierarchical', ...).best_buckets",
)

q2 = NumericQuestion(
    name="q2",
    params=dict(taper=TAPER),
    variants=TAPER_VARIANTS,
    prompt="Llama-2-7B's gradients (bf16), hierarchical all-reduce over the 32 GPUs of 4 DGX H100 nodes on a {taper}:1 "
    "oversubscribed NDR fabric without rails: how long, in ms?",
    expected=_q2,
    explain=_explain_q2,
    unit="ms",
    noun="a time",
    hint_text="production.dp_all_reduce(hardware.cluster('dgx-h100', 4, 'ib-ndr', {taper}), M).time_s",
    scale_hint=_q2_hints,
)

q3 = ChoiceQuestion(
    name="q3",
    params=dict(taper=TAPER),
    variants=TAPER_VARIANTS,
    prompt="Same cluster: does making the fabric rail-optimized speed up ONE FLAT RING through the 32 GPUs in rank "
    "order? (yes/no)",
    options=("yes", "no"),
    expected=_q3,
    explain=_explain_q3,
    hint_text="which local ranks does a ring hop from node 0 to node 1 join?",
)

q4 = NumericQuestion(
    name="q4",
    prompt="distlab's FP8 recipe: model-state bytes per parameter (weights + gradients + optimizer), before sharding?",
    expected=_q4,
    explain=_explain_q4,
    unit="",
    noun="a number of bytes",
    rel_tol=0.0,
    hint_text="memory.precision_recipe('fp8'): which of the three parts really drop to 8 bits?",
    scale_hint={8 / 15: "assumes every byte halves; gradients stay bf16 and the master weights and Adam moments fp32"},
)

q5 = NumericQuestion(
    name="q5",
    params=dict(cp=CP),
    variants=dict(cp=(4, 8, 16, 32, 64)),
    prompt="Llama-3.1-70B with context parallelism cp = {cp} across nodes (InfiniBand NDR), causal ring attention: the "
    "shortest sequence (tokens) at which each K/V transfer hides under its attention compute?",
    expected=_q5,
    explain=_explain_q5,
    unit="",
    noun="a number of tokens",
    hint_text="production.ring_attention_step('llama3.1-70b', seq, {cp}, link='ib-ndr').crossover_seq_len",
)

q6 = ChoiceQuestion(
    name="q6",
    prompt="Llama-3.1-70B on 32 DGX H100, tp 8, pp 4, micro-batch 4, no ZeRO, no recomputation, sequence parallel, "
    "attention scores stored (no flash attention): "
    f"which rung of the OOM ladder first fits? ({', '.join(TRIAGE_OPTIONS)})",
    options=TRIAGE_OPTIONS,
    expected=_q6,
    explain=_explain_q6,
    hint_text="triage.oom_triage(...).first_fit",
)

q7 = NumericQuestion(
    name="q7",
    params=dict(gpus=JITTER_GPUS, sigma=JITTER_SIGMA),
    variants=JITTER_VARIANTS,
    prompt="{gpus} GPUs in one synchronous step, each GPU's step time jittering independently with a "
    "{sigma:.0%} standard deviation: how much slower (in %) than the mean is the slowest GPU, on average?",
    expected=_q7,
    explain=_explain_q7,
    unit="",
    noun="a percentage",
    hint_text="sigma x E[max of N standard normals]: production.expected_max_normal(N)",
    scale_hint=_q7_hints,
)

QUESTIONS = {q.name: q for q in (q1, q2, q3, q4, q5, q6, q7)}
