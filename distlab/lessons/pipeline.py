"""Graded questions of lesson 4, pipeline parallelism. Every expected value is computed by
distlab.pipeline (the timeline simulator) and distlab.memory, never typed in."""

from __future__ import annotations

import itertools

from .. import models, pipeline
from ..errors import ConfigurationError
from ..units import format_bytes
from .._words import counted
from .questions import ChoiceQuestion, NumericQuestion, SequenceQuestion

__all__ = ["Q1", "Q2", "Q3", "Q5", "Q6", "QUESTIONS"]

_PERCENT_HINT = {0.01: "looks like a fraction; give it in percent (27.3 means 27.3 %)"}
_BYTES_HINT = {1e9: "looks like bytes, but plain numbers are read in GB (write '17e9 B' or 17)"}

# q1: GPipe (a 32-layer model, P = 8, m = 12; the lesson works P = 4)
Q1 = dict(p=8, m=12)
# q2: the smallest m for a bubble under a limit (the lesson's §4 works p = 8 under 10%, and its §3 figure draws p = 4
# and 16 against a 10% line: no variant asks what the lesson shows)
Q2 = dict(p=6, limit=0.20)
# q3, q4: Llama-2-13B (the lesson works Llama-2-7B), one 4,096-token sequence per microbatch, selective recomputation
Q3 = dict(model="llama2-13b", p=4, m=32, recompute="selective")
# q5: interleaved 1F1B
Q5 = dict(p=4, m=16, v=2)
# q6: Llama-3.1-70B, 256 GPUs, global batch 256 sequences, TP = 1
Q6 = dict(gpus=256, batch=256, pp=8)


def _q1(p, m):
    return 100.0 * pipeline.schedule("gpipe", p, m).bubble_fraction


def _explain_q1(p, m):
    tl = pipeline.schedule("gpipe", p, m)
    busy = float(tl.busy[0])
    return (
        f"With t_F = 1 and a backward of 2, stage 0 is busy {busy:g} of a {tl.step_time:g}-long step (the last "
        f"microbatch needs p - 1 = {p - 1} more stage-steps to fill and drain the pipe): idle share "
        f"(p-1)/(m+p-1) = {p - 1}/{m + p - 1} = {100 * tl.bubble_fraction:.2f}%"
    )


def _q1_hints(p, m):
    return {
        **_PERCENT_HINT,
        pipeline.bubble_overhead(p, m)
        / pipeline.bubble_fraction(
            p, m
        ): "is the time added over ideal compute, (p-1)/m; the idle share of the step is (p-1)/(m+p-1)",
        (p - 1)
        / p
        / pipeline.bubble_fraction(
            p, m
        ): "is the idle share of naive model parallelism (one microbatch); GPipe streams m of them",
    }


def _q2(p, limit):
    """The smallest m whose simulated 1F1B bubble is below `limit`, by bisection: the bubble falls as m grows."""

    def below(m: int) -> bool:
        return pipeline.schedule("1f1b", p, m).bubble_fraction < limit

    high = next(2**k for k in itertools.count() if below(2**k))
    low = high // 2  # not below (or 0)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if below(mid) else (mid, high)
    return high


def _q2_bound(p, limit):
    """(p-1)/(m+p-1) < L  <=>  m > (p-1)(1-L)/L."""
    return (p - 1) * (1 - limit) / limit


def _explain_q2(p, limit):
    m = _q2(p, limit)
    at_limit = pipeline.schedule("1f1b", p, m - 1).bubble_fraction
    return (
        f"(p-1)/(m+p-1) < {limit:g} means m > (p-1)(1 - {limit:g})/{limit:g} = {_q2_bound(p, limit):g}: m = {m} "
        f"({100 * pipeline.schedule('1f1b', p, m).bubble_fraction:.2f}%); at m = {m - 1} the simulated "
        f"bubble is exactly {100 * at_limit:.1f}%, not below"
    )


def _q2_hints(p, limit):
    bound = round(_q2_bound(p, limit))
    return {bound / (bound + 1): f"gives exactly {limit:.0%}, not below it"}


def _activations(kind, model, p, m, recompute):
    timeline = pipeline.schedule(kind, p, m)
    return pipeline.activation_memory(timeline, model, recompute=recompute)


def _peak_gb(kind):
    return lambda **setup: _activations(kind, **setup).peak_bytes / 1e9


def _explain(kind):
    def explain(model, p, m, recompute):
        act = _activations(kind, model, p, m, recompute)
        s = act.peak_stage
        return (
            f"{kind}: stage {s} holds {counted(act.in_flight[s], 'microbatch', fmt='g')} at its peak, each with "
            f"{act.layers_per_stage[s]} layers x {format_bytes(act.per_layer_bytes)} "
            f"({model}, one {models.model(model).seq_len}-token sequence, recompute={recompute}): "
            f"{format_bytes(act.peak_bytes)}"
        )

    return explain


def _q3_hints(model, p, m, recompute):
    layers = models.model(model).layers
    return {
        m / p: "is GPipe's figure (all m microbatches in flight); 1F1B's first stage holds at most p",
        1 / p: "counts one microbatch; 1F1B's first stage holds p of them before its first backward",
        p: f"counts all {layers} layers; a stage holds only its own {pipeline.split_layers(layers, p)[0]}",
        **_BYTES_HINT,
    }


def _q4_hints(model, p, m, recompute):
    return {
        p / m: "is 1F1B's figure; GPipe keeps every microbatch's activations until the backwards start",
        **_BYTES_HINT,
    }


def _q5(p, m, v):
    return 100.0 * pipeline.schedule("interleaved", p, m, v).overhead


def _explain_q5(p, m, v):
    tl = pipeline.schedule("interleaved", p, m, v)
    return (
        f"Each chunk op lasts 1/v of a stage's op, so the fill and drain shrink v-fold: time added over ideal "
        f"= (p-1)/(v m) = {p - 1}/({v} x {m}) = {100 * tl.overhead:.2f}% (step {tl.step_time:g} vs "
        f"{float(tl.busy.max()):g} of compute); the idle share of the step is {100 * tl.bubble_fraction:.2f}%"
    )


def _q5_hints(p, m, v):
    return {
        **_PERCENT_HINT,
        v: "is plain 1F1B's (p-1)/m; interleaving divides it by v",
        pipeline.bubble_fraction(p, m, v)
        / pipeline.bubble_overhead(
            p, m, v
        ): "is the idle share of the step; the question asks for the time added over ideal compute",
    }


def _samples_per_pipeline(gpus, batch, pp):
    dp = gpus // pp  # TP = 1: the data-parallel replicas are the pipelines
    return batch // dp


def _q6(gpus, batch, pp):
    samples = _samples_per_pipeline(gpus, batch, pp)
    valid = []
    for m in range(1, 4 * samples + 1):
        try:
            valid.append(pipeline.check_microbatches(m, batch=samples))
        except ConfigurationError:
            pass
    return max(valid)


def _explain_q6(gpus, batch, pp):
    samples = _samples_per_pipeline(gpus, batch, pp)
    return (
        f"PP = {pp} leaves DP = {gpus} / {pp} = {gpus // pp} pipelines; each gets "
        f"{batch} / {gpus // pp} = {samples} sequences per step, and a microbatch holds at least one: "
        f"m <= {_q6(gpus, batch, pp)}. The tutorial's M = 16 row would need half-sequence microbatches."
    )


def _tokens(ops):
    return [f"{op.kind}{op.microbatch}" for op in ops]


def _q7(p, m, stage):
    return _tokens(pipeline.one_f_one_b_order(p, m)[stage])


def _explain_q7(p, m, stage):
    warm = min(p - stage - 1, m)
    return (
        f"Stage {stage} of {p} warms up with p - s - 1 = {counted(warm, 'forward')} (enough to keep the later stages "
        f"fed), then alternates one forward and one backward, then drains the last {counted(warm, 'backward')}: "
        + " ".join(_q7(p, m, stage))
        + f". At most {counted(warm + 1, 'microbatch')} {'is' if warm == 0 else 'are'} in flight on this stage "
        f"(GPipe: all {m})"
    )


def _q7_mistakes(p, m, stage):
    gpipe = [f"F{i}" for i in range(m)] + [f"B{i}" for i in range(m)]
    mistakes = {tuple(gpipe): "is GPipe's order: all forwards first, so the stage holds all m microbatches"}
    for warm, why in (
        (p - 1, "warms up with p - 1 forwards, like stage 0; later stages need fewer, p - s - 1"),
        (p - stage, "warms up with one forward too many: p - s - 1, not p - s"),
    ):
        warm = min(warm, m)
        order = [f"F{i}" for i in range(warm)]
        for k in range(m - warm):
            order += [f"F{warm + k}", f"B{k}"]
        order += [f"B{i}" for i in range(m - warm, m)]
        if order != _q7(p, m, stage):
            mistakes.setdefault(tuple(order), why)
    return mistakes


def _q8(p, m):
    """(b) when 1F1B keeps GPipe's bubble but holds fewer microbatches in flight (the simulator decides)."""
    g, f = pipeline.schedule("gpipe", p, m), pipeline.schedule("1f1b", p, m)
    same_bubble = abs(g.bubble_fraction - f.bubble_fraction) < 1e-9
    less_memory = f.peak_in_flight.max() < g.peak_in_flight.max()
    return {(True, True): "b", (False, True): "c", (False, False): "a", (True, False): "d"}[(same_bubble, less_memory)]


def _explain_q8(p, m):
    g, f = pipeline.schedule("gpipe", p, m), pipeline.schedule("1f1b", p, m)
    return (
        f"(b). Simulated with p = {p}, m = {m}: the idle share is {100 * g.bubble_fraction:.1f}% for GPipe and "
        f"{100 * f.bubble_fraction:.1f}% for 1F1B, the same (p-1)/(m+p-1); the first stage holds at most "
        f"{float(g.peak_in_flight.max()):g} microbatches with GPipe and {float(f.peak_in_flight.max()):g} with 1F1B. "
        f"1F1B buys memory, not time; interleaving (v chunks) or zero-bubble schedules shrink the bubble"
    )


q1 = NumericQuestion(
    name="q1",
    params=Q1,
    variants=dict(p=(2, 4, 8, 16), m=(4, 8, 12, 16, 32)),
    prompt="A 32-layer model is split over P = {p} pipeline stages (GPipe) with m = {m} "
    "microbatches. What share of the step (%) is idle, all stages together (the bubble fraction)?",
    expected=_q1,
    explain=_explain_q1,
    hint_text="count the time slots: the step lasts m + p - 1 slots, of which each stage works m",
    unit="%",
    noun="a percentage",
    scale_hint=_q1_hints,
)

q2 = NumericQuestion(
    name="q2",
    params=Q2,
    variants=dict(p=(5, 6, 7), limit=(0.05, 0.2, 0.25)),
    prompt="With p = {p} stages (1F1B), what is the smallest number of microbatches m for which the bubble "
    "(idle share of the step) drops below {limit:.0%}?",
    expected=_q2,
    explain=_explain_q2,
    hint_text="solve (p-1)/(m+p-1) < {limit:g} for m, then check the boundary case",
    unit="",
    rel_tol=0.0,
    noun="a number of microbatches",
    scale_hint=_q2_hints,
)

q3 = NumericQuestion(
    name="q3",
    params=Q3,
    prompt="Llama-2-13B (40 layers) over p = {p} stages (10 layers each), m = {m} microbatches of one 4,096-token sequence, "
    "{recompute} recomputation, 1F1B: how much activation memory (GB) does the busiest stage hold at its peak?",
    expected=_peak_gb("1f1b"),
    explain=_explain("1f1b"),
    hint_text="per-layer activations (the bytes each norm and matmul saves for backward, s x b x h per "
    "saved tensor) x layers on the stage x microbatches in flight; how many does 1F1B's first stage hold at most?",
    unit="GB",
    noun="an amount of memory",
    scale_hint=_q3_hints,
)

q4 = NumericQuestion(
    name="q4",
    params=Q3,
    prompt="Same model and settings as q3, but with GPipe: activation memory (GB) of the busiest stage at its peak?",
    expected=_peak_gb("gpipe"),
    explain=_explain("gpipe"),
    hint_text="GPipe runs all m forwards before the first backward: how many microbatches does each stage hold?",
    unit="GB",
    noun="an amount of memory",
    scale_hint=_q4_hints,
)

q5 = NumericQuestion(
    name="q5",
    params=Q5,
    prompt="Interleaved 1F1B, p = {p}, m = {m}, v = {v} chunks per stage: by how much (%) does the step exceed the "
    "ideal compute time of a stage?",
    expected=_q5,
    explain=_explain_q5,
    hint_text="interleaving divides the time added over ideal, (p-1)/m, by v",
    unit="%",
    noun="a percentage",
    scale_hint=_q5_hints,
)

q6 = NumericQuestion(
    name="q6",
    params=Q6,
    prompt="Llama-3.1-70B on {gpus} GPUs, global batch {batch} sequences, TP = 1, "
    "PP = {pp}. What is the largest number of microbatches a pipeline can run per step?",
    expected=_q6,
    explain=_explain_q6,
    hint_text="how many pipelines (data-parallel replicas) are there, and how many sequences does each get?",
    unit="",
    rel_tol=0.0,
    noun="a number of microbatches",
    scale_hint={2.0: "is the tutorial's M = 16; a microbatch cannot hold half a sequence"},
)

q7 = SequenceQuestion(
    name="q7",
    params=dict(p=4, m=6, stage=1),
    variants=dict(p=(4, 8), m=(12, 16), stage=(0, 1, 2)),  # m > p: a steady state on every stage
    prompt="Write the 1F1B (PipeDream-Flush) order for stage {stage} (counting from 0) of a p = {p} pipeline with "
    "m = {m} microbatches: a list such as ['F0', 'F1', 'B0', ...], F for a forward, B for a backward, microbatches "
    "counted from 0.",
    expected=_q7,
    explain=_explain_q7,
    hint_text="a stage must start as many forwards as the stages after it need before its first backward comes "
    "back; after that, one forward per backward; the last backwards drain",
    noun="a list of operations",
    feedback=_q7_mistakes,
)

q8 = ChoiceQuestion(
    name="q8",
    params=dict(p=4, m=8),
    prompt="You switch a p = {p}, m = {m} pipeline from GPipe to 1F1B (same stages, same microbatches). What "
    "changes? (a) the bubble shrinks, memory stays; (b) the bubble stays, the first stage holds fewer microbatches "
    "in flight; (c) both shrink; (d) nothing. Answer a, b, c or d.",
    options=("a", "b", "c", "d"),
    expected=_q8,
    explain=_explain_q8,
    hint_text="count the idle slots of each schedule on a grid, and how many forwards stage 0 has done before its "
    "first backward",
    feedback={
        "a": "is the common belief, but 1F1B fills and drains the pipe exactly as GPipe does: (p-1)/(m+p-1) idle",
        "c": "credits 1F1B with a smaller bubble: its idle share is GPipe's; only the memory falls",
        "d": "misses the memory: GPipe holds all m microbatches' activations, 1F1B at most p on stage 0",
    },
)

QUESTIONS = {q.name: q for q in (q1, q2, q3, q4, q5, q6, q7, q8)}
