"""Graded questions of lesson 3, data parallelism and ZeRO. Expected values come from distlab.dataparallel and memory."""

from __future__ import annotations

from .. import collectives, dataparallel, memory
from ..units import format_bytes, format_seconds
from .questions import ChoiceQuestion, NumericQuestion

__all__ = ["Q4", "Q5", "Q4_VARIANTS", "Q5_VARIANTS", "QUESTIONS"]

_BYTES_HINT = {1e9: "looks like bytes, but plain numbers are read in GB"}
_MS_HINT = {1e-3: "looks like seconds; plain numbers are read in ms"}
_STAGE_OPTIONS = ("plain dp", "zero-1", "zero-2", "zero-3", "none")


def _states(billions, zero, dp):
    return memory.training_memory(billions * 1e9, zero=zero, dp=dp)


def _q1(billions, dp):
    return _states(billions, 1, dp).total_bytes / 1e9


def _explain_q1(billions, dp):
    bd = _states(billions, 1, dp)
    return (
        f"ZeRO-1 keeps full bf16 weights and gradients (2 + 2 bytes x {billions:g}e9 = "
        f"{format_bytes(bd.weights_bytes + bd.gradients_bytes)}) and 1/{dp} of the 12-byte optimizer states "
        f"(12 x {billions:g}e9 / {dp} = {format_bytes(bd.optimizer_bytes)}): {format_bytes(bd.total_bytes)} "
        f"(the ZeRO paper's Table 1 lists the 7.5B, 128B and 1T models at 1 to 1,024 GPUs)"
    )


def _q1_hints(billions, dp):
    zero1 = _states(billions, 1, dp).total_bytes
    return {
        **_BYTES_HINT,
        _states(billions, 0, dp).total_bytes / zero1: "is plain DP: ZeRO-1 shards the optimizer states",
        _states(billions, 3, dp).total_bytes / zero1: "is ZeRO-3: ZeRO-1 shards only the optimizer states",
    }


def _comm(billions, dp, zero=3):
    return dataparallel.step_communication(billions * 1e9, zero=zero, dp=dp)


def _q2(billions, dp):
    return _comm(billions, dp).bytes_sent_per_gpu / 1e9


def _explain_q2(billions, dp):
    c = _comm(billions, dp)
    return (
        f"M = {billions:g}e9 x 2 B = {format_bytes(c.gradient_bytes)}. ZeRO-3 all-gathers the parameters in "
        f"forward and again in backward and reduce-scatters the gradients: 3 collectives of (N-1)/N x M each, "
        f"3 x {dp - 1}/{dp} x {2 * billions:g} GB = {format_bytes(c.bytes_sent_per_gpu)} (the paper's 3 x M = "
        f"{format_bytes(c.volume_bytes)} is the large-N limit)"
    )


def _q2_hints(billions, dp):
    return {
        **_BYTES_HINT,
        dp / (dp - 1): f"is 3 x M, the large-N volume; with N = {dp} each collective moves (N-1)/N of M",
        2 / 3: "is plain DP's all-reduce; ZeRO-3 gathers the parameters twice",
    }


def _q3():
    """(a) when ZeRO-2 sends what plain DP sends per step, (b) when 1.5x, (c) when less."""
    dp = dataparallel.step_communication(7e9, zero=0, dp=64).bytes_sent_per_gpu
    z2 = dataparallel.step_communication(7e9, zero=2, dp=64).bytes_sent_per_gpu
    ratio = z2 / dp
    return "a" if abs(ratio - 1) < 1e-12 else ("b" if abs(ratio - 1.5) < 1e-12 else ("c" if ratio < 1 else "d"))


def _explain_q3():
    dp = dataparallel.step_communication(7e9, zero=0, dp=64)
    z2 = dataparallel.step_communication(7e9, zero=2, dp=64)
    return (
        f"(a). An all-reduce is a reduce-scatter plus an all-gather. ZeRO-2 reduce-scatters the gradients and "
        f"all-gathers the updated parameters: the same two halves, {format_bytes(z2.bytes_sent_per_gpu)} per GPU "
        f"against {format_bytes(dp.bytes_sent_per_gpu)} for plain DP. Only ZeRO-3 moves more (1.5x), because it "
        f"gathers the parameters again in backward"
    )


#: the two overlap questions: backward and all-reduce times (ms), equal buckets
Q4 = dict(backward_ms=200, comm_ms=250, buckets=4)
Q5 = dict(backward_ms=300, comm_ms=120, buckets=8)
#: per-student variants: q4's all-reduce is always longer than backward (the buckets queue up),
#: q5's always shorter (each bucket's all-reduce ends before the next bucket is ready), as their explanations say
Q4_VARIANTS = dict(backward_ms=(160, 200, 240), comm_ms=(250, 300, 360), buckets=(2, 4, 5, 8))
Q5_VARIANTS = dict(backward_ms=(240, 300, 400), comm_ms=(80, 120, 160, 200), buckets=(4, 5, 8, 10))
_COUNT = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def _exposed_ms(backward_ms, comm_ms, buckets):
    return dataparallel.exposed_communication_time(comm_ms / 1e3, backward_ms / 1e3, buckets) * 1e3


def _timeline(comm_s, backward_s, buckets):
    """Ready, start and end (ms) of equal buckets, from dataparallel.overlap_timeline."""
    ready = [backward_s * (i + 1) / buckets for i in range(buckets)]
    start, end = dataparallel.overlap_timeline(ready, [comm_s / buckets] * buckets)
    return [r * 1e3 for r in ready], start * 1e3, end * 1e3


def _ms(values) -> str:
    return ", ".join(f"{v:g}" for v in values) + " ms"


def _explain_q4(backward_ms, comm_ms, buckets):
    ready, start, end = _timeline(comm_ms / 1e3, backward_ms / 1e3, buckets)
    exposed = dataparallel.exposed_communication_time(comm_ms / 1e3, backward_ms / 1e3, buckets)
    return (
        f"{_COUNT[buckets].capitalize()} buckets of {comm_ms / buckets:g} ms each, ready at {_ms(ready)}. Each "
        f"all-reduce starts when its bucket is ready and the previous one is done: they start at {_ms(start)} "
        f"and end at {_ms(end)}. {format_seconds(exposed)} is left after backward ends = {comm_ms:g} ms - "
        f"({buckets - 1}/{buckets}) x {backward_ms:g} ms: the first {ready[0]:g} ms of backward has nothing to "
        f"overlap with"
    )


def _q4_hints(backward_ms, comm_ms, buckets):
    exposed = _exposed_ms(backward_ms, comm_ms, buckets)
    return {
        (comm_ms - backward_ms) / exposed: f"is comm - backward: the first bucket is only ready after "
        f"{backward_ms / buckets:g} ms, so that much backward has nothing to "
        "overlap with",
        comm_ms / buckets / exposed: "is the last bucket alone; here the all-reduces queue up behind each other",
        **_MS_HINT,
    }


def _explain_q5(backward_ms, comm_ms, buckets):
    ready, start, end = _timeline(comm_ms / 1e3, backward_ms / 1e3, buckets)
    exposed = dataparallel.exposed_communication_time(comm_ms / 1e3, backward_ms / 1e3, buckets)
    return (
        f"{_COUNT[buckets].capitalize()} buckets of {comm_ms / buckets:g} ms, ready at {_ms(ready)}: each "
        f"all-reduce ends ({_ms(end)}) before the next bucket is ready, so only the last bucket, ready when "
        f"backward ends, is exposed: {format_seconds(exposed)}"
    )


#: MIT 6.5940's quiz 9 (a 7B model on 8 x A100 80 GB), with the activations a chosen micro-batch keeps
Q6 = dict(billions=7, dp=8, gpu_gb=80, act_gb=45)


def _q6_per_gpu_gb(billions, dp, stage):
    return memory.training_memory(billions * 1e9, zero=stage, dp=dp).total_bytes / 1e9


def _q6(billions, dp, gpu_gb, act_gb):
    """The lowest stage whose model states plus the activations fit the GPU (a search over the stages)."""
    for stage in (0, 1, 2, 3):
        if _q6_per_gpu_gb(billions, dp, stage) + act_gb <= gpu_gb:
            return _STAGE_OPTIONS[stage]
    return "none"


def _explain_q6(billions, dp, gpu_gb, act_gb):
    parts = [
        f"{_STAGE_OPTIONS[stage]} {_q6_per_gpu_gb(billions, dp, stage):.4g} + {act_gb:g} GB" for stage in (0, 1, 2, 3)
    ]
    return (
        "Per GPU, model states (plain DP 16 P, ZeRO-1 (4 + 12/N) P, ZeRO-2 (2 + 14/N) P, ZeRO-3 16 P/N) plus "
        "activations: " + "; ".join(parts) + f". The lowest at or under {gpu_gb:g} GB is "
        f"{_q6(billions, dp, gpu_gb, act_gb)}; a higher stage also fits but communicates more (ZeRO-3: 1.5x)"
    )


def _grad_gb(billions):
    return 2 * billions  # bf16 gradients: 2 bytes per parameter


def _accumulated_zero2(billions, dp, micro):
    """ZeRO-2 with gradient accumulation: one gradient reduce-scatter per micro-batch, one parameter all-gather."""
    size = _grad_gb(billions) * 1e9
    rs = collectives.collective_cost("reduce-scatter", size, dp, bandwidth=1.0).bytes_sent_per_gpu
    ag = collectives.collective_cost("all-gather", size, dp, bandwidth=1.0).bytes_sent_per_gpu
    return (micro * rs + ag) / 1e9


def _ddp_no_sync(billions, dp):
    """DDP with no_sync: the accumulated gradients are all-reduced once per step."""
    size = _grad_gb(billions) * 1e9
    return collectives.collective_cost("all-reduce", size, dp, bandwidth=1.0).bytes_sent_per_gpu / 1e9


def _explain_q7(billions, dp, micro):
    m = _grad_gb(billions)
    return (
        f"M = {billions:g}e9 x 2 B = {m:g} GB. ZeRO-2 keeps only its 1/{dp} shard of the gradients, so it cannot "
        f"sum micro-batches locally: it reduce-scatters after every micro-batch, {micro} x {dp - 1}/{dp} x {m:g} GB, "
        f"then all-gathers the updated parameters once, {dp - 1}/{dp} x {m:g} GB: "
        f"{_accumulated_zero2(billions, dp, micro):.4g} GB, (m + 1)/2 = {(micro + 1) / 2:g} times DDP with no_sync "
        f"({_ddp_no_sync(billions, dp):.4g} GB, one all-reduce of the accumulated gradients). DeepSpeed overlaps each "
        f"reduce with that micro-batch's backward, but the bytes still multiply"
    )


def _q7_hints(billions, dp, micro):
    want = _accumulated_zero2(billions, dp, micro)
    return {
        **_BYTES_HINT,
        _ddp_no_sync(billions, dp) / want: "is one all-reduce per step, as DDP with no_sync: ZeRO-2 keeps only a "
        "gradient shard, so it must reduce every micro-batch",
        micro * _ddp_no_sync(billions, dp) / want: "all-reduces every micro-batch; ZeRO-2 reduce-scatters each one "
        "and all-gathers the parameters only once, after the optimizer step",
    }


def _q8(billions, dp):
    return memory.training_memory(billions * 1e9, zero=3, dp=dp).total_bytes / 1e9


def _explain_q8(billions, dp):
    return (
        f"ZeRO-3 shards all 16 bytes per parameter: {billions:g}e9 x 16 B / {dp} = {_q8(billions, dp):.4g} GB "
        f"(activations not counted)"
    )


q1 = NumericQuestion(
    name="q1",
    params=dict(billions=128, dp=16),
    prompt="ZeRO paper check: {billions:g}B parameters, ZeRO-1 (optimizer states sharded), {dp} GPUs. "
    "Model states per GPU (GB)?",
    expected=_q1,
    explain=_explain_q1,
    hint_text="ZeRO-1 divides only the 12 optimizer bytes per parameter by the number of GPUs",
    unit="GB",
    noun="an amount of memory",
    scale_hint=_q1_hints,
)

q2 = NumericQuestion(
    name="q2",
    params=dict(billions=13, dp=16),
    variants=dict(billions=(1.3, 3, 7, 13, 30), dp=(4, 8, 16, 64)),
    prompt="{billions:g}B parameters, bf16 gradients, ZeRO-3 over {dp} GPUs: how many GB does each GPU send per "
    "training step?",
    expected=_q2,
    explain=_explain_q2,
    hint_text="ZeRO-3 runs two parameter all-gathers and one gradient reduce-scatter, each (N-1)/N x M with "
    "M = {billions:g}e9 x 2 B",
    unit="GB",
    noun="an amount of data",
    scale_hint=_q2_hints,
)

q3 = ChoiceQuestion(
    name="q3",
    prompt="Per step, how many bytes does each GPU send under ZeRO-2, compared with plain data parallelism's "
    "gradient all-reduce? (a) the same; (b) 1.5x as many; (c) 1/N as many, since each GPU reduces only its shard; "
    "(d) twice as many: a reduce-scatter and an all-gather on top of the all-reduce. Answer a, b, c or d.",
    options=("a", "b", "c", "d"),
    expected=_q3,
    explain=_explain_q3,
    hint_text="an all-reduce is a reduce-scatter followed by an all-gather; which of the two does ZeRO-2 run, and "
    "on what?",
    feedback={
        "b": "is ZeRO-3, which all-gathers the parameters a second time in backward; ZeRO-2 keeps full weights",
        "c": "takes the shard for the message: every GPU still takes part in reducing all M bytes of gradients",
        "d": "counts the same bytes twice: ZeRO-2's reduce-scatter and all-gather replace the all-reduce",
    },
)

_OVERLAP_PROMPT = (
    "Backward takes {backward_ms:g} ms; the gradient all-reduce {comm_ms:g} ms in all, in {buckets} "
    "equal buckets. Exposed communication (ms)?"
)

q4 = NumericQuestion(
    name="q4",
    params=Q4,
    variants=Q4_VARIANTS,
    prompt=_OVERLAP_PROMPT,
    expected=_exposed_ms,
    explain=_explain_q4,
    hint_text="bucket i is ready at (i+1)/{buckets} of backward; an all-reduce starts when its bucket is ready and the "
    "previous all-reduce is done",
    unit="ms",
    noun="a time",
    scale_hint=_q4_hints,
)

q5 = NumericQuestion(
    name="q5",
    params=Q5,
    variants=Q5_VARIANTS,
    prompt=_OVERLAP_PROMPT,
    expected=_exposed_ms,
    explain=_explain_q5,
    hint_text="can any all-reduce but the last one finish before backward ends?",
    unit="ms",
    noun="a time",
    scale_hint=_MS_HINT,
)

q6 = ChoiceQuestion(
    name="q6",
    params=Q6,
    variants=dict(act_gb=(10, 45, 60)),
    prompt="Design (MIT 6.5940's quiz 9, ch. 9, with activations): a {billions:g}B model on {dp} x A100 "
    "{gpu_gb:g} GB, Adam in mixed precision. The micro-batch you need keeps {act_gb:g} GB of activations per GPU. What is the least "
    "sharding that fits? (plain dp, zero-1, zero-2, zero-3, none)",
    options=_STAGE_OPTIONS,
    expected=_q6,
    explain=_explain_q6,
    hint_text="per GPU: plain DP 16 P, ZeRO-1 (4 + 12/N) P, ZeRO-2 (2 + 14/N) P, ZeRO-3 16 P / N bytes; then add "
    "the activations",
    feedback={
        "plain dp": "replicates all 16 bytes per parameter on every GPU: {billions:g}e9 x 16 B is over {gpu_gb:g} GB",
        "zero-1": "is not the lowest that fits with {act_gb:g} GB of activations: check it and the stage next to it",
        "zero-2": "is not the lowest that fits with {act_gb:g} GB of activations: check it and the stage next to it",
        "zero-3": "fits, but so does a lower stage that communicates less (ZeRO-3 sends 1.5x the bytes)",
        "none": "gives up too early: sharding over {dp} GPUs divides most of the model states",
    },
)

q7 = NumericQuestion(
    name="q7",
    params=dict(billions=7, dp=8, micro=8),
    variants=dict(dp=(4, 8, 16), micro=(4, 8, 16)),
    prompt="Gradient accumulation with sharding: a {billions:g}B model (bf16 gradients), ZeRO-2 over {dp} GPUs, "
    "{micro} micro-batches accumulated per optimizer step. ZeRO-2 keeps only its shard of the gradients. How many "
    "GB does each GPU send per optimizer step?",
    expected=_accumulated_zero2,
    explain=_explain_q7,
    hint_text="where can a GPU that holds 1/{dp} of the gradients add up the micro-batches? Count the collectives "
    "per micro-batch and per step, (N-1)/N x M each",
    unit="GB",
    noun="an amount of data",
    scale_hint=_q7_hints,
)

q8 = NumericQuestion(
    name="q8",
    params=dict(billions=70, dp=128),
    variants=dict(billions=(13, 70, 175), dp=(64, 128, 256)),
    prompt="A {billions:g}B model with ZeRO-3 on N = {dp} GPUs. How much memory (GB) do the model "
    "states (weights, gradients, Adam; 16 bytes per parameter) take on each GPU?",
    expected=_q8,
    explain=_explain_q8,
    hint_text="which of the 16 bytes per parameter does ZeRO-3 divide by N?",
    unit="GB",
    noun="an amount of memory",
    scale_hint=lambda billions, dp: {
        **_BYTES_HINT,
        float(dp): "is the unsharded total: ZeRO-3 divides it by the number of GPUs",
        (2 + 14 / dp) * dp / 16: "is ZeRO-2: ZeRO-3 shards the weights too",
    },
)

QUESTIONS = {q.name: q for q in (q1, q2, q3, q4, q5, q6, q7, q8)}
