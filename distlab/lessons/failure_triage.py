"""Graded questions of lesson 8b, when the job fails: out of memory and stragglers (the second half of the old
lesson 8). Every expected value is computed by distlab.triage / distlab.production / distlab.training; the
prompts give the numbers a by-hand estimate needs, and the hints name no function.

The scenario is lesson 7's: Llama-3.1-70B on 32 DGX H100 nodes (256 GPUs), global batch 256 x 8,192 tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .. import hardware, production, training, triage
from ..units import format_bytes, format_seconds
from .questions import (
    ChoiceQuestion,
    NumericQuestion,
    Question,
    bind_params,
)

__all__ = [
    "MODEL",
    "SCENARIO",
    "CONFIG",
    "OOM_CONFIG",
    "FIX_OPTIONS",
    "SMALL_BATCH",
    "JITTER_GPUS",
    "JITTER_SIGMA",
    "JITTER_VARIANTS",
    "SLOW_VARIANTS",
    "ORDER_FIXES",
    "OrderQuestion",
    "QUESTIONS",
]

MODEL = "llama3.1-70b"
SCENARIO = dict(global_batch=256, seq_len=8192)
#: lesson 7's feasible configuration (tp 8 x pp 4, ZeRO-1, selective recomputation)
CONFIG = dict(tp=8, pp=4, zero=1, recompute="selective", sequence_parallel=True)
#: Q1, Q6, Q7: an out-of-memory configuration (attention scores stored, as Megatron-LM did before flash attention and
#: as Korthikanti et al. 2022 measured). Not the lesson's own (its section 1 prices tp 8 x pp 4 with micro-batch 4,
#: where only full recomputation fits): twice the stages and half the micro-batch, so a student prices it (issue 31)
OOM_CONFIG = dict(tp=8, pp=8, micro_batch_size=2, zero=0, recompute="none", sequence_parallel=True, attention="unfused")
#: Q1's options: one change each, from the OOM configuration
FIX_OPTIONS = ("smaller micro-batch", "selective recomputation", "full recomputation", "zero", "pp")
_KIND = {"micro-batch": "smaller micro-batch", "ZeRO": "zero", "PP": "pp", "TP": "tp"}
#: Q2: a small global batch, so that halving the micro-batch leaves m <= p
SMALL_BATCH = 32
#: Q3: jitter; whole percents, so the prompt's {sigma:.0%} is exact; powers of two, the lesson's table
JITTER_GPUS, JITTER_SIGMA = 256, 0.05
JITTER_VARIANTS = dict(gpus=(16, 64, 256, 1024, 4096), sigma=(0.02, 0.05, 0.1))
#: Q4: one slow GPU
SLOW_FACTOR = 1.2
#: q3 and q4 ask about other numbers than the ones the lesson works (256 GPUs; a GPU 1.2x slow)
Q3_GPUS, Q4_SLOW = 1024, 1.5
SLOW_VARIANTS = dict(slow=(1.1, 1.2, 1.5))
#: Q5: a long sequence
LONG_SEQ = 32768
#: Q7: the single fixes of Q1's configuration to order by the step time they cost, numbered as the prompt lists them
ORDER_FIXES = {1: "micro_batch_size=1", 2: "selective recomputation", 3: "full recomputation", 4: "ZeRO-3"}


def _cluster():
    return hardware.cluster("dgx-h100", 32, "ib-ndr")


def _oom():
    return triage.oom_triage(MODEL, _cluster(), **OOM_CONFIG, **SCENARIO)


def _option(step) -> str:
    return step.change if step.kind == "recomputation" else _KIND.get(step.kind, step.kind)


def _q1() -> str:
    fitting = [s for s in _oom().fixes if s.fits and not s.skipped and _option(s) in FIX_OPTIONS]
    return _option(min(fitting, key=lambda s: s.step_time_s)) if fitting else "none"


def _explain_q1() -> str:
    t = _oom()
    fixes = "; ".join(
        f"{s.change}: {format_bytes(s.memory_per_gpu_bytes)}" + (" (fits)" if s.fits else "")
        for s in t.fixes
        if not s.skipped
    )
    return (
        f"given: {format_bytes(t.base.memory.total_bytes)} per GPU, of which activations "
        f"{format_bytes(t.base.memory.activations_bytes)}: the stored attention scores (5 a s / h of each token's "
        f"34 + 5 a s / h bytes per hidden unit: 320 of 354 at s = 8,192) dominate. Single fixes: {fixes}. The "
        f"cheapest that brings it under the {_H100_GB} of an H100: {_q1()}; the ladder (each rung on the previous) gets there more "
        "cheaply still"
    )


def _oom_breakdown() -> str:
    bd = _oom().base.memory
    return (
        f"weights {format_bytes(bd.weights_bytes)}, gradients {format_bytes(bd.gradients_bytes)}, optimizer "
        f"{format_bytes(bd.optimizer_bytes)}, activations {format_bytes(bd.activations_bytes)}"
    )


def _small(b):
    return training.estimate(
        MODEL, _cluster(), **{**CONFIG, "micro_batch_size": b}, global_batch=SMALL_BATCH, seq_len=SCENARIO["seq_len"]
    )


def _q2() -> str:
    return "yes" if _small(2).memory.activations_bytes < _small(4).memory.activations_bytes else "no"


def _explain_q2() -> str:
    four, two = _small(4), _small(2)
    dp = four.config["dp"]
    return (
        f"dp = 256 / (8 x 4) = {dp}, so each pipeline gets {SMALL_BATCH} / {dp} = {SMALL_BATCH // dp} sequences: "
        f"micro-batch 4 gives m = {four.microbatches}, micro-batch 2 gives m = {two.microbatches}, both <= p = 4, so "
        f"all m microbatches are in flight and b x m = {SMALL_BATCH // dp} sequences' activations stay: "
        f"{format_bytes(four.memory.activations_bytes)} either way. Halving helps only while m > p after halving"
    )


def _q3(gpus=JITTER_GPUS, sigma=JITTER_SIGMA) -> float:
    return 100 * (production.expected_slowest(gpus, sigma) - 1)


def _explain_q3(gpus=JITTER_GPUS, sigma=JITTER_SIGMA) -> str:
    mu = production.expected_max_normal(gpus)
    return (
        f"the slowest of {gpus} GPUs is on average E[max of {gpus} normals] = {mu:.4f} standard "
        f"deviations above the mean: {100 * sigma:g}% x {mu:.4f} = {100 * sigma * mu:.2f}% slower "
        f"(the leading term sqrt(2 ln N) = {production.leading_term_max_normal(gpus):.3f} overestimates it)"
    )


def _q3_hints(gpus, sigma):
    lead = production.leading_term_max_normal(gpus) / production.expected_max_normal(gpus)
    return {lead: "uses the leading term sqrt(2 ln N), which overestimates the expected maximum"}


def _healthy():
    return training.estimate(MODEL, _cluster(), **CONFIG, **SCENARIO)


def _q4(slow=SLOW_FACTOR) -> float:
    return production.straggler_step(MODEL, _cluster(), slow_factor=slow, **CONFIG, **SCENARIO).step_time_s


def _explain_q4(slow=SLOW_FACTOR) -> str:
    h = _healthy()
    return (
        f"the slow GPU stretches its TP group and so its pipeline stage: with m = {h.microbatches} microbatches the "
        f"step adds (k - 1) x m x t_stage = ({slow:g} - 1) x {format_seconds(h.compute_s)} of compute; the bubble, the "
        f"overlap slowdown, communication and optimizer step do not stretch: {format_seconds(h.step_time_s)} + "
        f"{format_seconds((slow - 1) * h.compute_s)} = {format_seconds(_q4(slow))}"
    )


def _q4_hints(slow):
    h, want = _healthy(), _q4(slow)
    return {
        slow * h.step_time_s / want: "stretches the whole step; the bubble, the communication and the optimizer "
        "step run at their own pace, only the compute waits for the slow GPU",
        (h.step_time_s + (slow - 1) * h.compute_s / 256) / want: "charges the slow GPU only its own 1/256 share; "
        "a synchronous step waits for it at every collective",
    }


def _long(pp):
    return training.estimate(MODEL, _cluster(), **{**CONFIG, "pp": pp}, global_batch=256, seq_len=LONG_SEQ)


def _q5() -> str:
    four, eight = _long(4), _long(8)
    ratio = eight.memory.total_bytes / four.memory.total_bytes
    return "halves" if ratio < 0.6 else ("barely" if ratio < 1 else "worse")


def _explain_q5() -> str:
    four, eight = _long(4), _long(8)
    return (
        f"pp 4: {format_bytes(four.memory.total_bytes)} per GPU (activations "
        f"{format_bytes(four.memory.activations_bytes)}); pp 8: {format_bytes(eight.memory.total_bytes)} "
        f"(activations {format_bytes(eight.memory.activations_bytes)}). With 1F1B the first stage keeps p "
        "microbatches of L/p layers in flight: p x L/p, the same activations whatever p; only the model states "
        "shrink. Context parallelism or full recomputation divides the activations"
    )


def _ways():
    """(selective recomputation alone, the ladder's micro-batch 1 + selective recomputation) on Q1's configuration."""
    selective = training.estimate(MODEL, _cluster(), **{**OOM_CONFIG, "recompute": "selective"}, **SCENARIO)
    ladder = training.estimate(
        MODEL, _cluster(), **{**OOM_CONFIG, "micro_batch_size": 1, "recompute": "selective"}, **SCENARIO
    )
    return selective, ladder


def _q6() -> str:
    selective, ladder = _ways()
    if abs(selective.step_time_s / ladder.step_time_s - 1) < 0.05:
        return "the same"
    return "micro-batch 1 + selective" if ladder.step_time_s < selective.step_time_s else "selective alone"


def _explain_q6() -> str:
    selective, ladder = _ways()
    return (
        f"selective recomputation alone: {format_bytes(selective.memory.total_bytes)}, "
        f"{format_seconds(selective.step_time_s)} per step with m = {selective.microbatches} microbatches; with "
        f"micro-batch 1 as well: {format_bytes(ladder.memory.total_bytes)}, {format_seconds(ladder.step_time_s)}. Both "
        f"fit; halving the micro-batch doubles m, so the bubble (p - 1)/m of the compute halves: the second is "
        f"{100 * (selective.step_time_s / ladder.step_time_s - 1):.0f}% faster"
    )


def _order_costs() -> dict:
    """{number: step time the fix adds (s)} for ORDER_FIXES, each applied alone to the OOM configuration."""
    by_change = {s.change: s.time_cost_s for s in _oom().fixes if not s.skipped}
    return {n: by_change[change] for n, change in ORDER_FIXES.items()}


def _q7() -> list:
    costs = _order_costs()
    return sorted(costs, key=lambda n: costs[n])


def _explain_q7() -> str:
    costs = _order_costs()
    rows = ", ".join(f"{n} {ORDER_FIXES[n]} {1e3 * costs[n]:+,.0f} ms" for n in _q7())
    m = training.estimate(MODEL, _cluster(), **OOM_CONFIG, **SCENARIO).microbatches
    return (
        f"cheapest first: {rows}. Halving the micro-batch doubles m (from {m}), which shrinks the bubble's share "
        "(p - 1)/m: the step gets faster; ZeRO-3 gathers every layer's weights again for each of the "
        f"{m} microbatches' forward and backward, and even hidden behind the compute that traffic slows it; selective "
        "recomputation reruns the attention core, and with the scores stored that is the softmax, mask and dropout "
        "over every s x s score again, memory traffic that grows with s^2 (with flash attention the rerun is only "
        "the core's matmuls, and it costs less than ZeRO-3); full recomputation reruns every layer's forward, about "
        "a third more compute"
    )


#: misconception of a fix put after its place -> why it belongs earlier
_ORDER_LATE = {
    1: "a smaller micro-batch is not a cost here: it doubles the microbatches, which shrinks the bubble's share, "
    "so it comes first",
}

#: misconception of a fix put before its place -> why it belongs later
_ORDER_FEEDBACK = {
    3: "full recomputation reruns every layer's whole forward, about a third more compute: the most expensive",
    2: "selective recomputation is cheap only without stored scores: here it reruns the softmax, mask and dropout "
    "over every s x s score of the attention core, memory traffic that grows with s^2, and at 8,192 tokens that "
    "costs more than ZeRO-3's gathers",
}


@dataclass(frozen=True)
class OrderQuestion(Question):
    """A question answered by an ordering of numbered items (a list such as [2, 1, 3] or the text '2 1 3').

    A wrong order is answered with the misconception behind the first place that differs: the item that belongs
    there comes later (late_feedback: why it belongs earlier), or the item put there comes too early (feedback: why
    it belongs later).
    """

    name: str
    prompt: str
    expected: Callable[..., list]
    explain: Callable[..., str]
    hint_text: str
    items: tuple = ()
    feedback: dict = field(default_factory=dict)
    late_feedback: dict = field(default_factory=dict)
    points: float = 1.0
    params: dict = field(default_factory=dict)
    variants: dict = field(default_factory=dict)

    def __post_init__(self):
        bind_params(self)

    def _read(self, answer) -> list:
        if isinstance(answer, str):
            tokens = answer.strip().strip("[](){}").replace(",", " ").split() if len(answer) <= 40 else []
            if not tokens or not all(t.isdigit() and t.isascii() for t in tokens):
                shown = answer if len(answer) <= 40 else answer[:37] + "..."
                raise ValueError(f"{shown!r} could not be read as an order (write e.g. [2, 1, 3, 4])")
            values = [int(t) for t in tokens]
        elif isinstance(answer, (list, tuple)):
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in answer):
                raise ValueError("an order is a list of the items' numbers, e.g. [2, 1, 3, 4]")
            values = list(answer)
        else:
            raise ValueError(f"an answer of type {type(answer).__name__} is not an order (write e.g. [2, 1, 3, 4])")
        if sorted(values) != sorted(self.items):
            raise ValueError(f"an order names each of {list(self.items)} once")
        return values

    def _judge(self, values: list) -> str | None:
        want = list(self.expected())
        if values == want:
            return None
        first, belongs = next((v, w) for v, w in zip(values, want) if v != w)
        wrong = self.late_feedback.get(belongs) or self.feedback.get(first)
        return f"{values} puts {first} at place {values.index(first) + 1}" + (f": {wrong}" if wrong else "")


#: What an H100's memory is, as the questions state it: '84.9 GB (sold as 80 GB HBM3; CUDA sees 79.11 GiB)'.
_H100 = hardware.accelerator("h100-sxm")
_H100_GB = format_bytes(_H100.memory_bytes)
_SETUP = "Llama-3.1-70B on 32 DGX H100 nodes (256 GPUs), global batch 256 x 8,192 tokens"

q1 = ChoiceQuestion(
    name="q1",
    prompt=f"Diagnosis: {_SETUP}, tp 8, pp 8, micro-batch 2, no ZeRO, no recomputation, sequence parallel, attention "
    f"scores stored (no flash attention). The job dies with CUDA out of memory; per GPU it needs {_oom_breakdown()}. "
    f"Which ONE change, applied alone, brings it under an H100's {_H100_GB} ({_H100.memory_text()}) at the smallest "
    "cost in step time? "
    f"({', '.join(FIX_OPTIONS)})",
    options=FIX_OPTIONS,
    expected=_q1,
    explain=_explain_q1,
    hint_text="find the part that dominates, then ask what each change divides: which term of the activations "
    "grows with the sequence, is removing it enough here, and what does each change compute again?",
    feedback={
        "smaller micro-batch": "halves the activations in flight (the pipeline holds p = 8 microbatches either way): "
        f"the stored attention scores of the rest still exceed {_H100_GB}",
        "full recomputation": "fits, but reruns every layer's whole forward, about a third more compute; removing the "
        "stored attention scores alone, most of the activations, is enough here and reruns only the attention core",
        "zero": "shards only the model states, which tp x pp already split 64 ways: even ZeRO-3 saves little; the "
        "activations are the problem",
        "pp": "cuts the layers per GPU, but with 1F1B the first stage keeps p microbatches in flight: the "
        "activations stay",
    },
)

q2 = ChoiceQuestion(
    name="q2",
    prompt=f"Lesson 7's layout (tp 8, pp 4, ZeRO-1, selective recomputation) but a global batch of {SMALL_BATCH} "
    "sequences, micro-batch 4. Does halving the micro-batch to 2 lower the activation memory per GPU? (yes/no)",
    options=("yes", "no"),
    expected=_q2,
    explain=_explain_q2,
    hint_text="count the microbatches per pipeline before and after (m = B / (dp x b)), and how many of them the "
    "first stage holds at once",
    feedback={
        "yes": "counts one microbatch's activations; when m <= p every microbatch is in flight at once, and b x m "
        "(the pipeline's share of the batch) does not change",
    },
)

q3 = NumericQuestion(
    name="q3",
    params=dict(gpus=Q3_GPUS, sigma=JITTER_SIGMA),
    variants=JITTER_VARIANTS,
    prompt="{gpus} GPUs in one synchronous step, each GPU's step time jittering independently with a "
    "{sigma:.0%} standard deviation: how much slower (in %) than the mean is the slowest GPU, on average?",
    expected=_q3,
    explain=_explain_q3,
    unit="",
    noun="a percentage",
    hint_text="the slowest of N is sigma times the expected maximum of N standard normals; the lesson's table gives "
    "that maximum for powers of two, and sqrt(2 ln N) is only its leading term",
    scale_hint=_q3_hints,
)

_HEALTHY = _healthy()

q4 = NumericQuestion(
    name="q4",
    params=dict(slow=Q4_SLOW),
    variants=SLOW_VARIANTS,
    prompt=f"Lesson 7's layout: the healthy step takes {_HEALTHY.step_time_s:.3f} s, of which "
    f"{_HEALTHY.compute_s:.3f} s is compute (the rest: overlap slowdown, TP communication, bubble, p2p, exposed DP, optimizer). One "
    "GPU runs {slow}x slow. Estimate by hand: the step time, in s?",
    expected=_q4,
    explain=_explain_q4,
    unit="s",
    noun="a time",
    hint_text="the slow GPU slows its stage on every microbatch; which parts of the step wait for it, and which run "
    "at their own pace?",
    scale_hint=_q4_hints,
)

q5 = ChoiceQuestion(
    name="q5",
    prompt=f"Lesson 7's layout at {LONG_SEQ:,}-token sequences does not fit. A colleague proposes doubling the "
    "pipeline to pp 8. What happens to the memory per GPU? halves: it about halves; barely: it drops a little; "
    "worse: it grows.",
    options=("halves", "barely", "worse"),
    expected=_q5,
    explain=_explain_q5,
    hint_text="with 1F1B, how many microbatches does the first stage hold, and how many layers each?",
    feedback={
        "halves": "assumes the activations split with the layers; with 1F1B the first stage keeps p microbatches of "
        "L/p layers: p x L/p, the same activations whatever p",
        "worse": "the model states do shrink with deeper pipelines; the activations stay the same",
    },
)

q6 = ChoiceQuestion(
    name="q6",
    prompt="Back to q1's configuration: selective recomputation alone fits, and so does the ladder's micro-batch 1 "
    "with selective recomputation. Which has the shorter step? (selective alone, micro-batch 1 + selective, the same)",
    options=("selective alone", "micro-batch 1 + selective", "the same"),
    expected=_q6,
    explain=_explain_q6,
    hint_text="both rerun the same attention core; what does a smaller micro-batch do to the number of "
    "microbatches, and so to the bubble?",
    feedback={
        "selective alone": "one change looks simpler, but halving the micro-batch doubles the microbatches m, and the "
        "bubble is (p - 1)/m of the compute: with p = 8 it is a large share",
        "the same": "both fit and both rerun the attention core, but their bubbles differ: price them",
    },
)

q7 = OrderQuestion(
    name="q7",
    prompt="Back to q1's configuration. Order these single fixes by the step time each one adds, cheapest first: "
    "1 micro-batch 1 (more accumulation), 2 selective recomputation, 3 full recomputation, 4 ZeRO-3. "
    "Answer a list such as [2, 1, 3, 4].",
    items=tuple(ORDER_FIXES),
    expected=_q7,
    explain=_explain_q7,
    hint_text="for each fix, ask what it computes again, what it sends for every microbatch, or what it does to the "
    "bubble, (p - 1)/m of the compute; and what a rerun of the attention core touches when its s x s scores are "
    "stored",
    feedback=_ORDER_FEEDBACK,
    late_feedback=_ORDER_LATE,
)

QUESTIONS = {q.name: q for q in (q1, q2, q3, q4, q5, q6, q7)}
