"""Graded questions of lesson 12, the capstone: plan the training of Llama-3.1-70B on 256 H100s within a budget of
time, GPU-hours and memory, and defend the plan with the kit's numbers. Every expected value is computed by
distlab (training.estimate, the step model of Lesson 7; distlab.budget for days and dollars); nothing is typed in.

Two answers are layouts, checked by LayoutQuestion (defined here: a layout answer is particular to this lesson):
a dict of the settings a Megatron-LM run chooses. Any layout that is valid, fits memory with the kit's recipe and
finishes within the budget is correct; a wrong one is told which of the three it misses, and by how much.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Callable

from .. import budget, hardware, models, training
from ..errors import DistlabError
from ..units import format_bytes
from .questions import (
    Question,
    INCORRECT,
    ChoiceQuestion,
    CheckResult,
    NumericQuestion,
    bind_params,
)

__all__ = [
    "SCENARIO",
    "BUDGET_DAYS",
    "TOKENS",
    "LAYOUT_A",
    "LAYOUT_B",
    "CHANGES",
    "LAYOUT_KEYS",
    "scenario_estimate",
    "read_layout",
    "LayoutQuestion",
    "QUESTIONS",
]

#: The cluster and the run: Llama-3.1-70B, 32 DGX H100 nodes on InfiniBand NDR, a global batch of 512 sequences of
#: 8,192 tokens (4.2 M tokens, about Llama 3's 4 M early in pre-training: Llama Team 2024, Sec. 3.4.1), memory
#: counted with Megatron-LM's distributed optimizer (ZeRO-1, 2 GB per GPU kept in reserve; distlab.memory_recipes).
SCENARIO: dict[str, Any] = dict(
    model="llama3.1-70b",
    cluster="dgx-h100",
    nodes=32,
    fabric="ib-ndr",
    global_batch=512,
    seq_len=8192,
    memory_recipe="megatron-distributed-optimizer",
    zero=1,
)
#: The budget: one trillion tokens in at most 50 days of the whole cluster.
TOKENS = 1e12
TOKENS_TEXT = "10^12"
BUDGET_DAYS = 50.0
#: Layout A: Megatron-LM's usual start for a 70B model (TP across the node's NVLink, a 4-stage 1F1B pipeline,
#: selective recomputation, sequence parallelism, one sequence per microbatch).
LAYOUT_A = dict(tp=8, pp=4, recompute="selective", sequence_parallel=True)
#: Layout B, which q4-q6 ask about (the lesson works layout A): the same with two sequences per microbatch.
LAYOUT_B = dict(LAYOUT_A, micro_batch_size=2)
#: q1 and q2 ask about a follow-up run (the lesson works the scenario's 10^12 tokens in 50 days): twice the tokens
#: in 60 days.
FOLLOW_UP_TOKENS, FOLLOW_UP_TOKENS_TEXT, FOLLOW_UP_DAYS = 2e12, "2 x 10^12", 60.0
#: Q7: four single changes to layout A.
CHANGES: dict[str, dict[str, Any]] = {
    "interleave": dict(schedule="interleaved", chunks=5),
    "deeper-pipeline": dict(pp=8),
    "full-recompute": dict(recompute="full"),
    "tp4-pp8-interleaved": dict(tp=4, pp=8, schedule="interleaved", chunks=5),
}
#: the settings a layout answer may give (the cluster, batch and memory recipe are the scenario's)
LAYOUT_KEYS = ("tp", "pp", "cp", "chunks", "micro_batch_size", "schedule", "recompute", "sequence_parallel")


def scenario_estimate(layout: dict) -> training.StepEstimate:
    """The step model's estimate of `layout` (a dict of LAYOUT_KEYS settings) in the capstone's scenario:
    training.estimate(**SCENARIO, **layout), which is what a notebook writes (the grading sandbox removes this
    module's functions)."""
    return training.estimate(**SCENARIO, **layout)


def _budget(layout: dict) -> budget.TrainingBudget:
    return budget.training_budget(scenario_estimate(layout), TOKENS)


def _gpus() -> int:
    return SCENARIO["nodes"] * hardware.node(SCENARIO["cluster"]).gpus_per_node


def _peak() -> float:
    return hardware.node(SCENARIO["cluster"]).accelerator.peak("bf16")


def _params() -> float:
    return models.model(SCENARIO["model"]).parameter_count()


# --- layout answers -----------------------------------------------------------------------------------------------


def _setting(key, value):
    """One layout setting as the step model takes it; ValueError in words when it cannot be one."""
    if key in ("schedule", "recompute"):
        if not isinstance(value, str):
            raise ValueError(f"{key}={value!r} must be a word such as 'interleaved' or 'selective'")
        return str.__str__(value)[:40]
    if key == "sequence_parallel":
        if not isinstance(value, bool):
            raise ValueError(f"sequence_parallel={value!r} must be True or False")
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{key}={value!r} must be a whole number")
    if not (math.isfinite(float(value)) and float(value).is_integer()) or not 1 <= value <= 2**20:
        raise ValueError(f"{key}={value!r} must be a whole number from 1 to {2**20:,}")
    return int(value)


def read_layout(answer) -> dict:
    """The layout a student wrote: a dict of LAYOUT_KEYS settings (others take the step model's defaults); a
    ValueError in words for anything else.

    >>> read_layout({"tp": 8, "pp": 4.0, "recompute": "selective"})
    {'tp': 8, 'pp': 4, 'recompute': 'selective'}
    """
    if not isinstance(answer, dict):
        raise ValueError(
            f"an answer of type {type(answer).__name__} is not a layout; write a dict such as "
            "{'tp': 8, 'pp': 4, 'recompute': 'selective', 'sequence_parallel': True}"
        )
    if "zero" in answer and answer["zero"] != 1:
        raise ValueError("Megatron's distributed optimizer is ZeRO-1: leave 'zero' out (or write 1)")
    layout = {}
    for key, value in answer.items():
        if key == "zero":
            continue
        if key not in LAYOUT_KEYS:
            shown = repr(key) if len(repr(key)) <= 30 else repr(key)[:27] + "..."
            raise ValueError(f"{shown} is not a layout setting; the settings: {', '.join(LAYOUT_KEYS)}")
        layout[key] = _setting(key, value)
    return layout


def _verdict(layout: dict) -> str:
    """'' when the layout is valid, fits memory and meets the time budget; otherwise the reason in words."""
    try:
        step = scenario_estimate(layout)
    except DistlabError as invalid:
        return f"the layout is not valid: {invalid}"
    if not step.fits:
        capacity = float(step.memory.capacity_bytes or 0.0)
        over = float(-(step.memory.headroom_bytes or 0.0))
        return (
            f"the layout does not fit: it needs {format_bytes(step.memory.total_bytes)} per GPU, "
            f"{format_bytes(over)} more than it may use (the GPU's {format_bytes(capacity)} less the recipe's "
            f"reserve of {format_bytes(step.memory.reserved_bytes)})"
        )
    if step.problems:
        return "the layout cannot run: " + "; ".join(step.problems)
    days = budget.days_to_train(TOKENS, step.tokens_per_s)
    if days > BUDGET_DAYS:
        parts = step.parts()
        biggest = max((k for k in parts if k != "compute"), key=parts.__getitem__)
        return (
            f"the layout fits but takes {days:.1f} days, over the {BUDGET_DAYS:g}-day budget; after compute its "
            f"largest part is {biggest} ({100 * parts[biggest] / step.step_time_s:.0f}% of the step)"
        )
    return ""


#: the numbers a defended plan states, and their tolerance (relative)
DEFENCE_KEYS = {"days": "days to train", "cost_usd": "cost in dollars", "memory_gb": "memory per GPU in GB"}
DEFENCE_TOLERANCE = 0.03


def _defence_numbers(layout: dict) -> dict:
    step = scenario_estimate(layout)
    b = budget.training_budget(step, TOKENS)
    return {"days": b.days, "cost_usd": b.cost_usd, "memory_gb": step.memory.total_bytes / 1e9}


@dataclass(frozen=True)
class LayoutQuestion(Question):
    """A design question answered by a layout (a dict of LAYOUT_KEYS settings). Correct when the layout is valid,
    fits memory with the scenario's recipe, and trains TOKENS tokens within BUDGET_DAYS days. defend=True: the
    answer is {'layout': {...}, 'days': ..., 'cost_usd': ..., 'memory_gb': ...} and each number must also be
    the kit's for that layout (within DEFENCE_TOLERANCE)."""

    name: str
    prompt: str
    expected: Callable[..., dict]
    explain: Callable[..., str]
    hint_text: str
    defend: bool = False
    points: float = 1.0
    params: dict = field(default_factory=dict)
    variants: dict = field(default_factory=dict)

    def __post_init__(self):
        bind_params(self)

    def _read(self, answer) -> str:
        """The verdict on the layout ("" when it meets the brief): reading a plan means pricing it."""
        if not self.defend:
            return _verdict(read_layout(answer))
        if not isinstance(answer, dict) or "layout" not in answer:
            raise ValueError(
                f"an answer of type {type(answer).__name__} is not a defended plan; write a dict "
                "{'layout': {...}, 'days': ..., 'cost_usd': ..., 'memory_gb': ...}"
            )
        missing = [k for k in DEFENCE_KEYS if k not in answer]
        if missing:
            raise ValueError(f"the plan states no {', '.join(missing)}")
        layout = read_layout(answer["layout"])
        reason = _verdict(layout)
        if reason:
            return reason
        have = _defence_numbers(layout)
        for key, words in DEFENCE_KEYS.items():
            value = answer[key]
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
                raise ValueError(f"{key}={value!r} is not a number")
            if not math.isclose(float(value), have[key], rel_tol=DEFENCE_TOLERANCE):
                side = "high" if float(value) > have[key] else "low"
                return (
                    f"the layout meets the budget, but the {words} stated ({float(value):,.4g}) is too {side} for "
                    f"it (the kit's, within {100 * DEFENCE_TOLERANCE:g}%)"
                )
        return ""

    def _judge(self, reason: str) -> str | None:
        return reason


@dataclass(frozen=True)
class ReasonedChoice(ChoiceQuestion):
    """A ChoiceQuestion whose wrong options each have their own feedback (the misconception behind them)."""

    feedback: dict = field(default_factory=dict)

    def check(self, answer=None) -> CheckResult:
        result = ChoiceQuestion.check(self, answer)
        if result.status != INCORRECT or not isinstance(answer, str):
            return result
        chosen = str.__str__(answer)[:200].strip().lower()
        if chosen in self.feedback:
            message = f"not yet, because {self.feedback[chosen]()}. Hint: {self.hint_text}"
            return CheckResult(self.name, INCORRECT, message, 0.0, self.points)
        return result


# --- the questions ------------------------------------------------------------------------------------------------


def _q1():
    return budget.required_tokens_per_s(FOLLOW_UP_TOKENS, FOLLOW_UP_DAYS)


def _explain_q1():
    return (
        f"{FOLLOW_UP_TOKENS_TEXT} tokens / ({FOLLOW_UP_DAYS:g} days x 86,400 s) = {_q1():,.0f} tokens/s for the whole "
        "cluster, "
        f"{_q1() / _gpus():,.0f} per GPU, {_q1() / SCENARIO['seq_len']:.1f} sequences/s"
    )


def _q2():
    return 100 * budget.required_share_of_peak(_params(), FOLLOW_UP_TOKENS, _gpus(), FOLLOW_UP_DAYS, _peak())


def _explain_q2():
    flops = training.model_flops(_params(), FOLLOW_UP_TOKENS)
    return (
        f"6 N D = 6 x {_params() / 1e9:.2f}e9 x {FOLLOW_UP_TOKENS_TEXT} = {flops:.3e} FLOPs; {_gpus()} GPUs x "
        f"{_peak() / 1e12:.1f} TFLOP/s (dense bf16) x {FOLLOW_UP_DAYS:g} x 86,400 s = "
        f"{_gpus() * _peak() * FOLLOW_UP_DAYS * 86400:.4e} FLOPs available: {_q2():.1f}% of peak. 6ND counts no "
        f"attention, so the step model's MFU (which does) must be higher than this"
    )


def _q3():
    return dict(LAYOUT_A, **CHANGES["tp4-pp8-interleaved"])


def _explain_q3():
    layout = _q3()
    b = _budget(layout)
    return (
        f"one answer: {layout}: {b.days:.1f} days. Any layout that fits and finishes in {BUDGET_DAYS:g} days is "
        f"right; the planner's fastest is about 10% under the budget (Lesson 7's planner over the same scenario)"
    )


def _q4():
    return _budget(LAYOUT_B).days


def _explain_q4():
    step = scenario_estimate(LAYOUT_B)
    return (
        f"a step of {SCENARIO['global_batch']} x {SCENARIO['seq_len']:,} = {step.tokens_per_step:,.0f} tokens takes "
        f"{step.step_time_s:.2f} s: {step.tokens_per_s:,.0f} tokens/s; {TOKENS_TEXT} / that / 86,400 = {_q4():.1f} "
        f"days, {_q4() - BUDGET_DAYS:.1f} over the budget"
    )


def _q4_hints():
    step = scenario_estimate(LAYOUT_B)
    six_n = training.FLOPS_PER_PARAM_TOKEN * _params() * step.tokens_per_step / step.model_flops
    return {
        six_n: "prices 6ND at the layout's MFU; MFU counts attention and the logits too, which 6ND leaves out "
        "(divide the tokens by the tokens per second instead)",
        1 / SCENARIO["seq_len"]: "counts sequences as tokens: a step holds global batch x sequence length tokens",
        24.0: "is in hours, not days",
    }


def _q5():
    return _budget(LAYOUT_B).cost_usd / 1e3


def _explain_q5():
    b = _budget(LAYOUT_B)
    return (
        f"{b.gpus} GPUs x {b.days:.2f} days x 24 h = {b.gpu_hours:,.0f} GPU-hours; x ${b.price_per_gpu_hour:g} "
        f"(the assumed price, distlab.budget) = ${b.cost_usd:,.0f}"
    )


def _q5_hints():
    gpus_per_node = hardware.node(SCENARIO["cluster"]).gpus_per_node
    return {
        1 / gpus_per_node: "prices node-hours: every one of the 8 GPUs of a node is paid for",
        1 / _gpus(): "prices one GPU; the job holds all of them for the whole run",
        1 / 24: "multiplies days, not hours, by the price per GPU-hour",
    }


def _q6():
    step = scenario_estimate(LAYOUT_B)
    return 100 * step.tp_comm_s / step.step_time_s


def _explain_q6():
    step = scenario_estimate(LAYOUT_B)
    return (
        f"TP communication {step.tp_comm_s:.2f} s of a {step.step_time_s:.2f} s step = {_q6():.1f}% (the pipeline "
        f"bubble is {100 * step.bubble_s / step.step_time_s:.1f}%, exposed DP traffic "
        f"{100 * step.dp_exposed_s / step.step_time_s:.2f}%): the all-reduces of tp = 8, 4 per layer per microbatch "
        f"on the critical path, are what the layout must cut"
    )


def _q6_hints():
    step = scenario_estimate(LAYOUT_B)
    return {step.step_time_s / step.compute_s: "divides by the compute time; the share is of the whole step"}


def _change_days(name: str) -> float:
    return _budget(dict(LAYOUT_A, **CHANGES[name])).days


def _band() -> float:
    """The step model's validated error band, a fraction (planner.error_band_percent; lesson 7 section 8)."""
    from .. import planner

    return planner.error_band_percent() / 100


def _q7():
    # a gain the model can vouch for: the change's run is shorter than layout A's by more than the error band
    beyond = [name for name in CHANGES if _change_days(name) < (1 - _band()) * _q7_days_a()]
    return beyond[0] if len(beyond) == 1 else "(no single answer)"


def _q7_days_a() -> float:
    return _budget(LAYOUT_A).days


def _explain_q7():
    a = _q7_days_a()
    days = ", ".join(
        f"{name}: {_change_days(name):.1f} ({100 * (1 - _change_days(name) / a):+.1f}%)" for name in CHANGES
    )
    step_a = scenario_estimate(LAYOUT_A)
    step_b = scenario_estimate(dict(LAYOUT_A, **CHANGES["tp4-pp8-interleaved"]))
    return (
        f"layout A takes {a:.1f} days; days to train and the gain on A: {days}. Only halving tp (the TP all-reduces "
        f"drop from {step_a.tp_comm_s:.2f} s to {step_b.tp_comm_s:.2f} s a step) while deepening the interleaved "
        f"pipeline to keep memory in bounds gains more than the model's {100 * _band():.1f}% error band; "
        "interleaving alone gains less than the band, a coin toss the model cannot call"
    )


def _feedback(name: str, words: str) -> Callable[[], str]:
    return lambda: f"{name} takes {_change_days(name):.1f} days: {words}"


q1 = NumericQuestion(
    name="q1",
    prompt=f"A follow-up run on the same cluster: {FOLLOW_UP_TOKENS_TEXT} tokens in {FOLLOW_UP_DAYS:g} days. What throughput, in tokens per second for the whole "
    "cluster, must the plan reach? (a plain number)",
    expected=_q1,
    explain=_explain_q1,
    unit="",
    noun="a number of tokens per second",
    rel_tol=0.005,
    hint_text="a day has 86,400 seconds; the budget is for the cluster, not one GPU",
    scale_hint={
        1 / _gpus(): "is per GPU; the question asks for the whole cluster",
        1 / SCENARIO["seq_len"]: "counts sequences, not tokens",
        24.0: f"divides by {FOLLOW_UP_DAYS:g} x 3,600 s; a day has 24 hours of 3,600 s",
        3600.0: "is per hour; the question asks per second",
    },
)

q2 = NumericQuestion(
    name="q2",
    prompt=f"Estimate by hand with the 6ND rule: what share of an H100's dense bf16 peak (%) must each of the "
    f"{_gpus()} GPUs sustain to train Llama-3.1-70B ({_params() / 1e9:.2f} B parameters) on "
    f"{FOLLOW_UP_TOKENS_TEXT} tokens in {FOLLOW_UP_DAYS:g} days (q1's follow-up run)?",
    expected=_q2,
    explain=_explain_q2,
    unit="%",
    noun="a share of peak",
    rel_tol=0.01,
    hint_text="count the FLOPs of a forward and a backward pass per parameter per token, then divide by what the "
    "cluster can do in the budget at its dense peak",
    scale_hint={
        8 / 6: "counts 8 N D: recomputation is hardware work, not the model FLOPs a budget is made of",
        0.5: "uses the datasheet's 1,979 TFLOP/s, which assumes 2:4 sparsity; the dense bf16 peak is half of it",
    },
)

q3 = LayoutQuestion(
    name="q3",
    prompt=f"Design: choose a layout for the scenario (Llama-3.1-70B, 32 DGX H100 nodes, batch 512 x 8,192, "
    f"Megatron's distributed optimizer) that fits memory and trains {TOKENS_TEXT} tokens within {BUDGET_DAYS:g} "
    "days. Answer a dict of tp, pp, cp, chunks, micro_batch_size, schedule, recompute, sequence_parallel.",
    expected=_q3,
    explain=_explain_q3,
    hint_text="start from the layout whose largest non-compute part is smallest: that part decides; keep memory "
    "in bounds by sharding the model deeper when you shard it narrower",
)

q4 = NumericQuestion(
    name="q4",
    prompt="Layout B (tp = 8, pp = 4, 1F1B, selective recomputation, sequence parallelism, two sequences per "
    f"microbatch; the lesson works layout A, with one): how many days does it take to train on {TOKENS_TEXT} tokens?",
    expected=_q4,
    explain=_explain_q4,
    unit="day",
    noun="a time",
    rel_tol=0.01,
    hint_text="the step model's step time and the tokens one step holds give the throughput; the budget's tokens "
    "over that throughput is the time",
    scale_hint=_q4_hints(),
)

q5 = NumericQuestion(
    name="q5",
    prompt="Layout B's whole run: what does it cost, in thousands of US dollars, at the kit's stated price per "
    f"GPU-hour (${budget.PRICE_PER_GPU_HOUR_USD:g})?",
    expected=_q5,
    explain=_explain_q5,
    unit="",
    noun="a number of thousand dollars",
    rel_tol=0.01,
    hint_text="every GPU the job holds is paid for every hour of the run",
    scale_hint=_q5_hints(),
)

q6 = NumericQuestion(
    name="q6",
    prompt="What share of layout B's step time (%) is tensor-parallel communication?",
    expected=_q6,
    explain=_explain_q6,
    unit="%",
    noun="a share",
    rel_tol=0.01,
    hint_text="the step model breaks a step into its parts; the share is one part over the whole step",
    scale_hint=_q6_hints(),
)

q7 = ReasonedChoice(
    name="q7",
    prompt=f"Layout A misses the {BUDGET_DAYS:g}-day budget. Which single change shortens its run by more than the "
    f"step model's validated error band ({100 * _band():.1f}%, lesson 7 section 8), a gain the model can vouch for? "
    f"({', '.join(CHANGES)})",
    options=tuple(CHANGES),
    expected=_q7,
    explain=_explain_q7,
    hint_text="find the part of A's step that grows with tp and is not compute, and change what it depends on",
    feedback={
        "interleave": _feedback(
            "interleave",
            "a gain smaller than the model's error band (the bubble was under 5% of the step); the TP all-reduces stay",
        ),
        "deeper-pipeline": _feedback(
            "deeper-pipeline", "more stages add bubble and leave the TP all-reduces where they were"
        ),
        "full-recompute": _feedback(
            "full-recompute",
            "recomputation saves memory by spending time: it runs the forward again and adds TP all-reduces",
        ),
    },
)

q8 = LayoutQuestion(
    name="q8",
    prompt="Defend a plan: a dict {'layout': {...}, 'days': ..., 'cost_usd': ..., 'memory_gb': ...} whose layout "
    f"meets the budget and whose numbers are the kit's for it (within {100 * DEFENCE_TOLERANCE:g}%).",
    expected=lambda: {"layout": _q3(), **_defence_numbers(_q3())},
    explain=lambda: (
        "the layout of Q3 with its numbers: " + ", ".join(f"{k} {v:,.4g}" for k, v in _defence_numbers(_q3()).items())
    ),
    hint_text="compute each number from the step model's answer for your layout: days from its throughput, dollars from the "
    "GPU-hours at the stated price, memory from its breakdown",
    defend=True,
)

QUESTIONS = {q.name: q for q in (q1, q2, q3, q4, q5, q6, q7, q8)}
