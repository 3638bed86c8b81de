"""Graded questions of lesson 4, pipeline parallelism. Every expected value is computed by
distlab.pipeline (the timeline simulator) and distlab.memory, never typed in."""

from __future__ import annotations

import itertools

from .. import models, pipeline
from ..errors import ConfigurationError
from ..units import format_bytes
from ..grading.questions import NumericQuestion

_PERCENT_HINT = {0.01: "looks like a fraction; give it in percent (27.3 means 27.3 %)"}
_BYTES_HINT = {1e9: "looks like bytes, but plain numbers are read in GB (write '17e9 B' or 17)"}

# q1: GPipe, p = 4, m = 8 (the lecture's example)
Q1_P, Q1_M = 4, 8
# q2: the peer tutorial's exercise 3
Q2_P, Q2_LIMIT = 8, 0.10
# q3, q4: Llama-2-7B, one 4,096-token sequence per microbatch, selective recomputation
Q3_MODEL, Q3_P, Q3_M, Q3_RECOMPUTE = "llama2-7b", 4, 32, "selective"
# q5: interleaved 1F1B
Q5_P, Q5_M, Q5_V = 4, 8, 2
# q6: the peer tutorial's table: Llama-3.1-70B, 256 GPUs, global batch 256 sequences, TP = 1
Q6_GPUS, Q6_BATCH, Q6_PP = 256, 256, 8


def _q1():
    return 100.0 * pipeline.schedule("gpipe", Q1_P, Q1_M).bubble_fraction


def _explain_q1():
    tl = pipeline.schedule("gpipe", Q1_P, Q1_M)
    busy = float(tl.busy[0])
    return (
        f"With t_F = 1 and a backward of 2, stage 0 is busy {busy:g} of a {tl.step_time:g}-long step (the last "
        f"microbatch needs p - 1 = {Q1_P - 1} more stage-steps to fill and drain the pipe): idle share "
        f"(p-1)/(m+p-1) = {Q1_P - 1}/{Q1_M + Q1_P - 1} = {100 * tl.bubble_fraction:.2f}%"
    )


def _q2():
    return next(m for m in itertools.count(1) if pipeline.schedule("1f1b", Q2_P, m).bubble_fraction < Q2_LIMIT)


def _q2_bound():
    """(p-1)/(m+p-1) < L  <=>  m > (p-1)(1-L)/L."""
    return (Q2_P - 1) * (1 - Q2_LIMIT) / Q2_LIMIT


def _explain_q2():
    m = _q2()
    at_limit = pipeline.schedule("1f1b", Q2_P, m - 1).bubble_fraction
    return (
        f"(p-1)/(m+p-1) < {Q2_LIMIT:g} means m > (p-1)(1 - {Q2_LIMIT:g})/{Q2_LIMIT:g} = {_q2_bound():g}: m = {m} "
        f"({100 * pipeline.schedule('1f1b', Q2_P, m).bubble_fraction:.2f}%); at m = {m - 1} the simulated "
        f"bubble is exactly {100 * at_limit:.1f}%, not below"
    )


def _activations(kind):
    timeline = pipeline.schedule(kind, Q3_P, Q3_M)
    return pipeline.activation_memory(timeline, Q3_MODEL, recompute=Q3_RECOMPUTE)


def _q3():
    return _activations("1f1b").peak_bytes / 1e9


def _explain(kind):
    act = _activations(kind)
    s = act.peak_stage
    return (
        f"{kind}: stage {s} holds {act.in_flight[s]:g} microbatches at its peak, each with "
        f"{act.layers_per_stage[s]} layers x {format_bytes(act.per_layer_bytes)} "
        f"({Q3_MODEL}, one {models.model(Q3_MODEL).seq_len}-token sequence, recompute={Q3_RECOMPUTE}): "
        f"{format_bytes(act.peak_bytes)}"
    )


def _q4():
    return _activations("gpipe").peak_bytes / 1e9


def _q5():
    return 100.0 * pipeline.schedule("interleaved", Q5_P, Q5_M, Q5_V).overhead


def _explain_q5():
    tl = pipeline.schedule("interleaved", Q5_P, Q5_M, Q5_V)
    return (
        f"Each chunk op lasts 1/v of a stage's op, so the fill and drain shrink v-fold: time added over ideal "
        f"= (p-1)/(v m) = {Q5_P - 1}/({Q5_V} x {Q5_M}) = {100 * tl.overhead:.2f}% (step {tl.step_time:g} vs "
        f"{float(tl.busy.max()):g} of compute); the idle share of the step is {100 * tl.bubble_fraction:.2f}%"
    )


def _samples_per_pipeline():
    dp = Q6_GPUS // Q6_PP  # TP = 1: the data-parallel replicas are the pipelines
    return Q6_BATCH // dp


def _q6():
    samples = _samples_per_pipeline()
    valid = []
    for m in range(1, 4 * samples + 1):
        try:
            valid.append(pipeline.check_microbatches(m, batch=samples))
        except ConfigurationError:
            pass
    return max(valid)


def _explain_q6():
    samples = _samples_per_pipeline()
    return (
        f"PP = {Q6_PP} leaves DP = {Q6_GPUS} / {Q6_PP} = {Q6_GPUS // Q6_PP} pipelines; each gets "
        f"{Q6_BATCH} / {Q6_GPUS // Q6_PP} = {samples} sequences per step, and a microbatch holds at least one: "
        f"m <= {_q6()}. The tutorial's M = 16 row would need half-sequence microbatches."
    )


q1 = NumericQuestion(
    name="q1",
    prompt="GPipe with p = 4 stages and m = 8 microbatches: what share of the step (%) is idle, all stages together?",
    expected=_q1,
    explain=_explain_q1,
    hint_text="count the time slots: the step lasts m + p - 1 slots, of which each stage works m",
    unit="%",
    noun="a percentage",
    scale_hint={
        **_PERCENT_HINT,
        pipeline.bubble_overhead(Q1_P, Q1_M) / pipeline.bubble_fraction(Q1_P, Q1_M):
            "is the time added over ideal compute, (p-1)/m; the idle share of the step is (p-1)/(m+p-1)",
        (Q1_P - 1) / Q1_P / pipeline.bubble_fraction(Q1_P, Q1_M):
            "is the idle share of naive model parallelism (one microbatch); GPipe streams m of them",
    },
)

q2 = NumericQuestion(
    name="q2",
    prompt="With p = 8 stages (1F1B), what is the smallest number of microbatches m for which the bubble "
           "(idle share of the step) drops below 10%?",
    expected=_q2,
    explain=_explain_q2,
    hint_text="solve (p-1)/(m+p-1) < 0.1 for m, then check the boundary case",
    unit="",
    rel_tol=0.0,
    noun="a number of microbatches",
    scale_hint={round(_q2_bound()) / (round(_q2_bound()) + 1): "gives exactly 10%, not below it"},
)

q3 = NumericQuestion(
    name="q3",
    prompt="Llama-2-7B over p = 4 stages (8 layers each), m = 32 microbatches of one 4,096-token sequence, "
           "selective recomputation, 1F1B: how much activation memory (GB) does the busiest stage hold at its peak?",
    expected=_q3,
    explain=lambda: _explain("1f1b"),
    hint_text="per-layer activations (distlab.memory.activation_bytes_per_layer) x layers on the stage x "
              "microbatches in flight; how many does 1F1B's first stage hold at most?",
    unit="GB",
    noun="an amount of memory",
    scale_hint={
        Q3_M / Q3_P: "is GPipe's figure (all m microbatches in flight); 1F1B's first stage holds at most p",
        1 / Q3_P: "counts one microbatch; 1F1B's first stage holds p of them before its first backward",
        Q3_P: f"counts all {models.model(Q3_MODEL).layers} layers; a stage holds only its own "
              f"{pipeline.split_layers(models.model(Q3_MODEL).layers, Q3_P)[0]}",
        **_BYTES_HINT,
    },
)

q4 = NumericQuestion(
    name="q4",
    prompt="Same model and settings as q3, but with GPipe: activation memory (GB) of the busiest stage at its peak?",
    expected=_q4,
    explain=lambda: _explain("gpipe"),
    hint_text="GPipe runs all m forwards before the first backward: how many microbatches does each stage hold?",
    unit="GB",
    noun="an amount of memory",
    scale_hint={Q3_P / Q3_M: "is 1F1B's figure; GPipe keeps every microbatch's activations until the backwards start",
                **_BYTES_HINT},
)

q5 = NumericQuestion(
    name="q5",
    prompt="Interleaved 1F1B, p = 4, m = 8, v = 2 chunks per stage: by how much (%) does the step exceed the ideal "
           "compute time of a stage?",
    expected=_q5,
    explain=_explain_q5,
    hint_text="interleaving divides the time added over ideal, (p-1)/m, by v",
    unit="%",
    noun="a percentage",
    scale_hint={
        **_PERCENT_HINT,
        Q5_V: "is plain 1F1B's (p-1)/m; interleaving divides it by v",
        pipeline.bubble_fraction(Q5_P, Q5_M, Q5_V) / pipeline.bubble_overhead(Q5_P, Q5_M, Q5_V):
            "is the idle share of the step; the question asks for the time added over ideal compute",
    },
)

q6 = NumericQuestion(
    name="q6",
    prompt="The peer tutorial's table: Llama-3.1-70B on 256 GPUs, global batch 256 sequences, TP = 1, PP = 8. "
           "What is the largest number of microbatches a pipeline can run per step?",
    expected=_q6,
    explain=_explain_q6,
    hint_text="how many pipelines (data-parallel replicas) are there, and how many sequences does each get?",
    unit="",
    rel_tol=0.0,
    noun="a number of microbatches",
    scale_hint={2.0: "is the tutorial's M = 16; a microbatch cannot hold half a sequence"},
)

QUESTIONS = {q.name: q for q in (q1, q2, q3, q4, q5, q6)}
