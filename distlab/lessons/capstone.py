"""Graded questions of lesson 12, the capstone. The lesson plans Llama-3.1-70B on 256 H100s (SCENARIO, worked in the
notebook); the questions hand the student an unseen brief (ASSIGNMENT): a mixture-of-experts model, Mixtral-8x7B, on
16 DGX A100 nodes over InfiniBand HDR, to plan with the same tools. Every expected value is computed by distlab
(training.estimate, the step model of Lesson 7; distlab.budget for days and dollars; validation.error_band for the
model's validated error); nothing is typed in, and none is printed in the lesson.

A plan must finish within the budget by more than the model's error band (ErrorBand, Lesson 7 §8): a predicted time
inside the band of the deadline is a coin toss the model cannot call, so no answer turns on such a difference. Two
answers are layouts, checked by LayoutQuestion (defined here: a layout answer is particular to this lesson): any
layout that is valid, fits memory with the brief's recipe and finishes with that margin is correct; a wrong one is
told which it misses, and by how much.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Callable

from .. import budget, hardware, moe, training, validation
from ..errors import DistlabError
from ..units import format_bytes
from .questions import ChoicesQuestion, NumericQuestion, Question, bind_params

__all__ = [
    "SCENARIO",
    "BUDGET_DAYS",
    "TOKENS",
    "LAYOUT_A",
    "CHANGES",
    "ASSIGNMENT",
    "ASSIGNMENT_TOKENS",
    "ASSIGNMENT_DAYS",
    "DENSE_HABIT",
    "LAYOUT_B",
    "MOE_CHANGES",
    "LAYOUT_KEYS",
    "error_band",
    "scenario_estimate",
    "assignment_estimate",
    "read_layout",
    "LayoutQuestion",
    "QUESTIONS",
]

#: The lesson's cluster and run: Llama-3.1-70B, 32 DGX H100 nodes on InfiniBand NDR, a global batch of 512 sequences of
#: 8,192 tokens (4.2 M tokens, about Llama 3's 4 M early in pre-training: Llama Team 2024, Sec. 3.4.1), Megatron-LM's
#: distributed optimizer (ZeRO-1, 2 GB per GPU reserved; distlab.memory_recipes) and its default TP overlap without
#: --tp-comm-overlap (the backward's column-parallel collectives beside their GEMMs: 'megatron-async-backward').
SCENARIO: dict[str, Any] = dict(
    model="llama3.1-70b",
    cluster="dgx-h100",
    nodes=32,
    fabric="ib-ndr",
    global_batch=512,
    seq_len=8192,
    memory_recipe="megatron-distributed-optimizer",
    zero=1,
    tp_overlap="megatron-async-backward",
)
#: The lesson's budget: one trillion tokens in at most 50 days of the whole cluster.
TOKENS = 1e12
BUDGET_DAYS = 50.0
#: Layout A: Megatron-LM's usual start for a 70B model (TP across the node's NVLink, a 4-stage 1F1B pipeline,
#: selective recomputation, sequence parallelism, one sequence per microbatch).
LAYOUT_A = dict(tp=8, pp=4, recompute="selective", sequence_parallel=True)
#: The lesson's §4: four single changes to layout A.
CHANGES: dict[str, dict[str, Any]] = {
    "interleave": dict(schedule="interleaved", chunks=5),
    "deeper-pipeline": dict(pp=8),
    "full-recompute": dict(recompute="full"),
    "tp4-pp8-interleaved": dict(tp=4, pp=8, schedule="interleaved", chunks=5),
}

# --- the assignment: what the questions ask about (the lesson never prices it) ------------------------------------

#: The brief the questions hand out: Mixtral-8x7B (Jiang et al. 2024, arXiv 2401.04088: 8 experts, top-2, 46.7 B
#: parameters, 12.9 B active) on 16 DGX A100 nodes (128 A100-80GB) over InfiniBand HDR, a global batch of 1,024
#: sequences of 4,096 tokens, Megatron-LM's distributed optimizer and its default TP overlap (as SCENARIO).
ASSIGNMENT: dict[str, Any] = dict(
    SCENARIO,  # its engine: memory recipe, ZeRO-1, TP overlap
    model="mixtral-8x7b",
    cluster="dgx-a100",
    nodes=16,
    fabric="ib-hdr",
    global_batch=1024,
    seq_len=4096,
)
ASSIGNMENT_TOKENS = 1e12
ASSIGNMENT_TOKENS_TEXT = "10^12"
ASSIGNMENT_DAYS = 49.0
#: The dense habit: layout A's recipe carried over (TP across the node's NVLink, no expert parallelism).
DENSE_HABIT = dict(tp=8, recompute="selective", sequence_parallel=True)
#: Layout B, which q4-q6 price: tp = 4 with the 8 experts spread over 8 GPUs (expert parallelism, Lesson 10).
LAYOUT_B = dict(tp=4, ep=8, recompute="selective", sequence_parallel=True)
#: q7: single changes to the dense habit.
MOE_CHANGES: dict[str, dict[str, Any]] = {
    "ep8": dict(ep=8),
    "tp4-pp2": dict(tp=4, pp=2),
    "tp4-ep8": dict(tp=4, ep=8),
    "tp2-ep8": dict(tp=2, ep=8),
    "full-recompute": dict(recompute="full"),
}
#: the settings a layout answer may give (the cluster, batch and memory recipe are the brief's)
LAYOUT_KEYS = (
    "tp",
    "pp",
    "cp",
    "ep",
    "etp",
    "chunks",
    "micro_batch_size",
    "schedule",
    "recompute",
    "sequence_parallel",
)


def error_band(scenario: dict) -> validation.ErrorBand:
    """The step model's validated error for runs like `scenario`'s (its GPU in mixed precision, dense or MoE as its
    model): validation.error_band, what `distlab estimate` prints beside a step time. Lesson 7 §8."""
    gpu, is_moe = hardware.node(scenario["cluster"]).accelerator.name, moe.step.is_moe(scenario["model"])
    return validation.error_band(gpu, "mixed", moe=is_moe)


def scenario_estimate(layout: dict) -> training.StepEstimate:
    """The step model's estimate of `layout` in the lesson's scenario: training.estimate(**SCENARIO, **layout)."""
    return training.estimate(**SCENARIO, **layout)


def assignment_estimate(layout: dict) -> training.StepEstimate:
    """The step model's estimate of `layout` (a dict of LAYOUT_KEYS settings) in the assignment:
    training.estimate(**ASSIGNMENT, **layout), which is what a notebook writes (the grading sandbox removes this
    module's functions)."""
    return training.estimate(**ASSIGNMENT, **layout)


def _budget(layout: dict) -> budget.TrainingBudget:
    return budget.training_budget(assignment_estimate(layout), ASSIGNMENT_TOKENS)


def _band() -> float:
    """The assignment's error band, a fraction."""
    return error_band(ASSIGNMENT).percent / 100


def _gpus() -> int:
    return ASSIGNMENT["nodes"] * hardware.node(ASSIGNMENT["cluster"]).gpus_per_node


def _peak() -> float:
    return hardware.node(ASSIGNMENT["cluster"]).accelerator.peak("bf16")


def _active() -> int:
    return moe.model(ASSIGNMENT["model"]).active_parameter_count()


def _total() -> int:
    return moe.model(ASSIGNMENT["model"]).parameter_count()


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

    >>> read_layout({"tp": 2, "ep": 8.0, "recompute": "selective"})
    {'tp': 2, 'ep': 8, 'recompute': 'selective'}
    """
    if not isinstance(answer, dict):
        raise ValueError(
            f"an answer of type {type(answer).__name__} is not a layout; write a dict such as "
            "{'tp': 2, 'ep': 8, 'recompute': 'selective', 'sequence_parallel': True}"
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
    """'' when the layout is valid, fits memory and finishes within the budget by more than the error band;
    otherwise the reason in words."""
    try:
        step = assignment_estimate(layout)
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
    days = budget.days_to_train(ASSIGNMENT_TOKENS, step.tokens_per_s)
    if days * (1 + _band()) <= ASSIGNMENT_DAYS:
        return ""
    if days <= ASSIGNMENT_DAYS:
        return (
            f"the layout fits and the model predicts {days:.1f} days, but that is only "
            f"{100 * (1 - days / ASSIGNMENT_DAYS):.1f}% under the {ASSIGNMENT_DAYS:g}-day budget, inside the model's "
            f"±{100 * _band():.1f}% error band: a coin toss the model cannot call"
        )
    parts = step.parts()
    biggest = max((k for k in parts if k != "compute"), key=parts.__getitem__)
    return (
        f"the layout fits but takes {days:.1f} days, over the {ASSIGNMENT_DAYS:g}-day budget; after compute its "
        f"largest part is {biggest} ({100 * parts[biggest] / step.step_time_s:.0f}% of the step)"
    )


#: the numbers a defended plan states, and their tolerance (relative: a recomputation, not a prediction)
DEFENCE_KEYS = {"days": "days to train", "cost_usd": "cost in dollars", "memory_gb": "memory per GPU in GB"}
#: how feedback and solutions write them (never "2.617e+05": review v20)
DEFENCE_FORMS = {"days": "{:,.1f} days", "cost_usd": "${:,.0f}", "memory_gb": "{:,.1f} GB"}
DEFENCE_TOLERANCE = 0.03


def _stated(have: dict) -> list:
    """'key = number unit' for each number of a defended plan, as DEFENCE_FORMS writes it."""
    return [f"{k} = {DEFENCE_FORMS[k].format(v)}" for k, v in have.items()]


def _defence_numbers(layout: dict) -> dict:
    step = assignment_estimate(layout)
    b = budget.training_budget(step, ASSIGNMENT_TOKENS)
    return {"days": b.days, "cost_usd": b.cost_usd, "memory_gb": step.memory.total_bytes / 1e9}


@dataclass(frozen=True)
class LayoutQuestion(Question):
    """A design question answered by a layout (a dict of LAYOUT_KEYS settings): correct when it is valid, fits memory
    with the assignment's recipe and trains ASSIGNMENT_TOKENS within ASSIGNMENT_DAYS by more than the error band.
    defend=True: {'layout': ..., 'days', 'cost_usd', 'memory_gb'}, each number the kit's within DEFENCE_TOLERANCE."""

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
                    f"the layout meets the budget, but the {words} stated ({DEFENCE_FORMS[key].format(float(value))}) "
                    f"is too {side} for it (the kit's, within {100 * DEFENCE_TOLERANCE:g}%)"
                )
        return ""

    def _judge(self, reason: str) -> str | None:
        return reason


#: q1 and q2: a run of the assignment's cluster, in billions of tokens and days (the brief's by default; a
#: per-student variant draws others)
RUN = dict(tokens_b=1000, days=49)
RUN_VARIANTS = dict(tokens_b=(800, 1000, 1500), days=(40, 49, 60))


def _q1(tokens_b, days):
    return budget.required_tokens_per_s(tokens_b * 1e9, days)


def _explain_q1(tokens_b, days):
    need = _q1(tokens_b, days)
    return (
        f"{tokens_b:,} x 10^9 tokens / ({days:g} days x 86,400 s) = {need:,.0f} tokens/s for the whole cluster, "
        f"{need / _gpus():,.0f} per GPU, {need / ASSIGNMENT['seq_len']:.1f} sequences/s"
    )


def _q2(tokens_b, days):
    return 100 * budget.required_share_of_peak(_active(), tokens_b * 1e9, _gpus(), days, _peak())


def _explain_q2(tokens_b, days):
    flops = training.model_flops(_active(), tokens_b * 1e9)
    return (
        f"a token passes through 2 of the 8 experts of each layer: N = {_active() / 1e9:.2f} B active parameters "
        f"(of {_total() / 1e9:.1f} B); 6 N D = {flops / 1e21:,.1f} x 10^21 FLOPs; {_gpus()} GPUs x "
        f"{_peak() / 1e12:.0f} TFLOP/s (A100 dense bf16) x {days:g} x 86,400 s: {_q2(tokens_b, days):.1f}% of peak"
    )


def _q2_hints():
    return {
        _total() / _active(): "counts every expert: a token runs through only top-2 of the 8 experts of a layer, so "
        "6ND takes the active parameters",
        8 / 6: "counts 8 N D: recomputation is hardware work, not the model FLOPs a budget is made of",
        0.5: "uses the datasheet's 624 TFLOP/s, which assumes 2:4 sparsity; the dense bf16 peak is half of it",
    }


def _q3():
    return dict(DENSE_HABIT, **MOE_CHANGES["tp2-ep8"])


def _explain_q3():
    layout, band = _q3(), _band()
    days = _budget(layout).days
    return (
        f"one answer: {layout}: {days:.1f} days, x (1 + {100 * band:.1f}%) = {days * (1 + band):.1f} <= "
        f"{ASSIGNMENT_DAYS:g}. Any layout that fits and finishes with that margin is right: expert parallelism "
        "keeps the experts whole on their GPUs, so tp can shrink and its all-reduces with it"
    )


def _q4():
    return _budget(LAYOUT_B).days


def _explain_q4():
    step = assignment_estimate(LAYOUT_B)
    return (
        f"a step of {ASSIGNMENT['global_batch']:,} x {ASSIGNMENT['seq_len']:,} = {step.tokens_per_step:,.0f} tokens "
        f"takes {error_band(ASSIGNMENT).around(step.step_time_s)}: {step.tokens_per_s:,.0f} tokens/s; "
        f"{ASSIGNMENT_TOKENS_TEXT} / that / 86,400 = {_q4():.1f} days"
    )


def _q4_hints():
    step = assignment_estimate(LAYOUT_B)
    six_n = training.FLOPS_PER_PARAM_TOKEN * _active() * step.tokens_per_step / step.model_flops
    return {
        six_n: "prices 6ND at the layout's MFU; MFU counts attention and the logits too, which 6ND leaves out "
        "(divide the tokens by the tokens per second instead)",
        1 / ASSIGNMENT["seq_len"]: "counts sequences as tokens: a step holds global batch x sequence length tokens",
        24.0: "is in hours, not days",
    }


def _q5():
    return _budget(LAYOUT_B).cost_usd / 1e3


def _explain_q5():
    b = _budget(LAYOUT_B)
    return (
        f"{b.gpus} GPUs x {b.days:.2f} days x 24 h = {b.gpu_hours:,.0f} GPU-hours; x ${b.price_per_gpu_hour:g} "
        f"(the assumed price, distlab.budget) = ${b.cost_usd / 1e3:,.1f} thousand"
    )


def _q5_hints():
    gpus_per_node = hardware.node(ASSIGNMENT["cluster"]).gpus_per_node
    return {
        1 / gpus_per_node: "prices node-hours: every one of the 8 GPUs of a node is paid for",
        1 / _gpus(): "prices one GPU; the job holds all of them for the whole run",
        1 / 24: "multiplies days, not hours, by the price per GPU-hour",
    }


def _q6():
    step = assignment_estimate(LAYOUT_B)
    return 100 * step.ep_comm_s / step.step_time_s


def _explain_q6():
    step = assignment_estimate(LAYOUT_B)
    return (
        f"the expert all-to-alls (dispatch and combine, forward and backward) take {step.ep_comm_s:.2f} s of a "
        f"{step.step_time_s:.2f} s step = {_q6():.1f}%, more than the TP all-reduces "
        f"({100 * step.tp_comm_s / step.step_time_s:.1f}%): the part of the step that expert parallelism adds "
        "(Lesson 10), and the largest after compute"
    )


def _q6_hints():
    step = assignment_estimate(LAYOUT_B)
    return {step.step_time_s / step.compute_s: "divides by the compute time; the share is of the whole step"}


def _change_days(name: str) -> float:
    return _budget(dict(DENSE_HABIT, **MOE_CHANGES[name])).days


def _band_top(days: float) -> float:
    """Days at the top of the assignment's error band."""
    return days * (1 + _band())


def _q7():
    # the changes the model can vouch for: their runs, even at the top of the error band, meet the budget
    return [name for name in MOE_CHANGES if _band_top(_change_days(name)) <= ASSIGNMENT_DAYS]


def _explain_q7():
    took = {n: _change_days(n) for n in MOE_CHANGES}  # each change priced once
    days = ", ".join(f"{n}: {d:.1f} days ({_band_top(d):.1f})" for n, d in took.items())
    clear = [n for n, d in took.items() if _band_top(d) <= ASSIGNMENT_DAYS]
    toss = [n for n, d in took.items() if d <= ASSIGNMENT_DAYS < _band_top(d)]
    return (
        f"the dense habit takes {_budget(DENSE_HABIT).days:.1f} days; with each change (at the band's top): {days}. "
        f"{' and '.join(clear) or 'None'} {'meets' if len(clear) == 1 else 'meet'} the {ASSIGNMENT_DAYS:g} days with "
        f"a margin larger than the model's ±{100 * _band():.1f}% band; {' and '.join(toss) or 'none'} "
        f"{'lands' if len(toss) == 1 else 'land'} inside the band of the deadline, a coin toss the model cannot call"
    )


def _feedback(name: str, words: str) -> Callable[[], str]:
    def words_with_days() -> str:
        days = _change_days(name)
        return f"takes {days:.1f} days, {_band_top(days):.1f} at the top of the model's ±{100 * _band():.1f}% error band: {words}"

    return words_with_days


q1 = NumericQuestion(
    name="q1",
    prompt="The assignment's cluster (16 DGX A100 nodes) is to train Mixtral-8x7B on {tokens_b:,} billion tokens in "
    "{days:g} days. What throughput, in tokens per second for the whole cluster, must the plan reach? (a plain "
    "number)",
    expected=_q1,
    explain=_explain_q1,
    unit="",
    noun="a number of tokens per second",
    rel_tol=0.005,
    hint_text="a day has 86,400 seconds; the budget is for the cluster, not one GPU",
    scale_hint={
        1 / _gpus(): "is per GPU; the question asks for the whole cluster",
        1 / ASSIGNMENT["seq_len"]: "counts sequences, not tokens",
        24.0: "divides by days x 3,600 s; a day has 24 hours of 3,600 s",
        3600.0: "is per hour; the question asks per second",
    },
    params=RUN,
    variants=RUN_VARIANTS,
)

q2 = NumericQuestion(
    name="q2",
    prompt=f"Estimate by hand with the 6ND rule: what share of an A100's dense bf16 peak (%) must each of the "
    f"{_gpus()} GPUs sustain to train Mixtral-8x7B ({_total() / 1e9:.1f} B parameters in all) on "
    "{tokens_b:,} billion tokens in {days:g} days (q1's run)?",
    expected=_q2,
    explain=_explain_q2,
    unit="%",
    noun="a share of peak",
    rel_tol=0.01,
    hint_text="count the FLOPs of a forward and a backward pass per parameter a token actually uses, then divide "
    "by what the cluster can do in the budget at its dense peak",
    scale_hint=_q2_hints(),
    params=RUN,
    variants=RUN_VARIANTS,
)

q3 = LayoutQuestion(
    name="q3",
    prompt=f"Design: choose a layout for the assignment (Mixtral-8x7B, 16 DGX A100 nodes on InfiniBand HDR, batch "
    f"1,024 x 4,096, Megatron's distributed optimizer) that fits memory and trains {ASSIGNMENT_TOKENS_TEXT} tokens "
    f"within {ASSIGNMENT_DAYS:g} days even at the top of the step model's error band for mixture-of-experts runs (predicted days "
    "x (1 + band) within the budget). Answer a dict of tp, pp, cp, ep, etp, chunks, micro_batch_size, schedule, "
    "recompute, sequence_parallel.",
    expected=_q3,
    explain=_explain_q3,
    hint_text="find the largest non-compute part of a first layout's step and cut what it depends on; an MoE "
    "model's experts can be spread over GPUs whole, which lets the tensor-parallel degree shrink",
)

q4 = NumericQuestion(
    name="q4",
    prompt="Layout B for the assignment (tp = 4, ep = 8: the 8 experts on 8 GPUs, 1F1B without a pipeline, "
    f"selective recomputation, sequence parallelism): how many days does it take to train on {ASSIGNMENT_TOKENS_TEXT} "
    "tokens?",
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
    prompt="What share of layout B's step time (%) is the expert-parallel all-to-all?",
    expected=_q6,
    explain=_explain_q6,
    unit="%",
    noun="a share",
    rel_tol=0.01,
    hint_text="the step model breaks a step into its parts; the share is one part over the whole step",
    scale_hint=_q6_hints(),
)

q7 = ChoicesQuestion(
    name="q7",
    prompt="The dense habit (layout A's recipe carried over: tp = 8 across each node, no expert parallelism, "
    f"selective recomputation, sequence parallelism) misses the {ASSIGNMENT_DAYS:g}-day budget. Which single changes "
    "make it finish within the budget even at the top of the step model's error band for mixture-of-experts runs? Answer a list "
    f"of every one that does ({', '.join(MOE_CHANGES)}).",
    options=tuple(MOE_CHANGES),
    expected=_q7,
    explain=_explain_q7,
    hint_text="price each change and compare its days, stretched by the error band, with the budget; a run just "
    "under the deadline is not a plan",
    feedback={
        "ep8": _feedback("ep8", "spreading the experts alone leaves the tp = 8 all-reduces and adds the all-to-all"),
        "tp4-ep8": _feedback(
            "tp4-ep8", "under the budget by less than the model's error band: a coin toss the model cannot call"
        ),
        "full-recompute": _feedback(
            "full-recompute",
            "recomputation saves memory by spending time: it runs the forward again and adds TP all-reduces",
        ),
    },
)

q8 = LayoutQuestion(
    name="q8",
    prompt="Defend a plan for the assignment: a dict {'layout': {...}, 'days': ..., 'cost_usd': ..., 'memory_gb': "
    "...} whose layout meets q3's brief and whose numbers are the kit's for it (within "
    f"{100 * DEFENCE_TOLERANCE:g}%).",
    expected=lambda: {"layout": _q3(), **_defence_numbers(_q3())},
    explain=lambda: "the layout of Q3 with its numbers: " + ", ".join(_stated(_defence_numbers(_q3()))),
    hint_text="compute each number from the step model's answer for your layout: days from its throughput, dollars "
    "from the GPU-hours at the stated price, memory from its breakdown",
    defend=True,
)

QUESTIONS = {q.name: q for q in (q1, q2, q3, q4, q5, q6, q7, q8)}
