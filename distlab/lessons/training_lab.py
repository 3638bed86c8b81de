"""Graded questions of lesson 7, the training lab. Every expected value is computed by distlab.training / planner.

The scenario: Llama-3.1-70B on 32 DGX H100 nodes (256 GPUs), global batch 256 sequences of 8,192 tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .. import flops, hardware, models, training, validation
from ..units import format_bytes, format_count, format_seconds
from .questions import (
    ChoiceQuestion,
    NumericQuestion,
    Question,
    bind_params,
)

__all__ = ["CONFIG", "DESIGN", "EX1_AS_WRITTEN", "EX1_FITTED", "DesignQuestion", "QUESTIONS"]

MODEL, NODE, NODES, BATCH, SEQ = "llama3.1-70b", "dgx-h100", 32, 256, 8192
#: the feasible reference configuration of questions 3 and 4
CONFIG = dict(tp=8, pp=8, micro_batch_size=1, zero=1, recompute="selective", sequence_parallel=True)
#: per-student variants (distlab.lessons.variants): questions declaring the same choices draw the same numbers;
#: every batch divides over every dp the pipeline depths leave (256 / (8 x pp)), and 80 layers over every pp
BATCH_VARIANTS, SEQ_VARIANTS, PP_VARIANTS = (128, 256, 512), (2048, 4096, 8192), (2, 4, 8, 16)
#: q1 and q4 ask about other numbers than the ones the lesson works (batch 256; pp = 8)
Q1_BATCH, Q4_PP = 512, 4


def _estimate(fabric="ib-ndr", batch=BATCH, seq=SEQ, **config):
    return training.estimate(MODEL, NODE, nodes=NODES, fabric=fabric, global_batch=batch, seq_len=seq, **config)


def _q1(batch=BATCH, seq=SEQ):
    e = _estimate(batch=batch, seq=seq, **CONFIG)
    return e.model_flops / 1e18


def _explain_q1(batch=BATCH, seq=SEQ):
    e = _estimate(batch=batch, seq=seq, **CONFIG)
    f = flops.step_flops(MODEL, batch, seq)
    return (
        f"model FLOPs (PaLM: weights, attention and logits, no recomputation) of {batch} x {seq} = "
        f"{e.tokens_per_step:,.0f} tokens: weights {f.weights:.4g} + attention {f.attention:.4g} + logits "
        f"{f.logits:.4g} = {e.model_flops:.4g} FLOP = {e.model_flops / 1e18:.3f} EFLOP per step "
        f"(flops.step_flops; the 6 x parameters x tokens rule of thumb leaves attention out)"
    )


def _six_pt_ratio(batch=BATCH, seq=SEQ):
    """6 x all parameters x tokens (the 6PT rule of thumb) over the model FLOPs that q1 expects."""
    six_pt = 6.0 * models.model(MODEL).parameter_count() * batch * seq
    return six_pt / flops.step_flops(MODEL, batch, seq).model_flops


def _q3_estimate(pp):
    return _estimate(**{**CONFIG, "pp": pp})


def _q3(pp=CONFIG["pp"]):
    e = _q3_estimate(pp)
    return 100 * e.bubble_s / (e.compute_s + e.tp_comm_s)


def _explain_q3(pp=CONFIG["pp"]):
    e = _q3_estimate(pp)
    p, m = pp, e.microbatches
    return (
        f"dp = 256 / ({CONFIG['tp']} x {pp}) = {e.config['dp']}, m = {BATCH} / ({e.config['dp']} x 1) = {m} "
        f"microbatches; "
        f"the bubble adds (p - 1) / m = {p - 1}/{m} = {100 * (p - 1) / m:.2f}% to the ideal compute "
        f"({format_seconds(e.bubble_s)} on {format_seconds(e.compute_s + e.tp_comm_s)})"
    )


#: two layouts of 256 GPUs as they are often first written (no ZeRO, no recomputation), then each with the memory savings that make it fit
EX1_AS_WRITTEN = {"dp256": dict(dp=256), "dp32-tp4-pp2": dict(dp=32, tp=4, pp=2)}
EX1_FITTED = {
    "dp256": dict(dp=256, zero=3, recompute="full"),
    "dp32-tp4-pp2": dict(dp=32, tp=4, pp=2, zero=1, recompute="full", sequence_parallel=True),
}
#: the design task: fixed knobs (the student picks tp and pp), the headroom asked for, and the tie band
DESIGN = dict(zero=1, recompute="selective", sequence_parallel=True, micro_batch_size=1)
#: the band is the step model's validated error on H100 runs in mixed precision, the band lesson 7 prints and its
#: planner ties with (validation.error_band, section 8): layouts closer than that to the fastest are ties the model
#: cannot rank, so any of them is accepted
DESIGN_TP, DESIGN_PP, DESIGN_FREE_GB = (1, 2, 4, 8), (1, 2, 4, 8, 16), 10.0
#: What an H100's memory is, as the questions state it: '84.9 GB (sold as 80 GB HBM3; CUDA sees 79.11 GiB)'.
_H100 = hardware.accelerator("h100-sxm")
H100_MEMORY = f"{format_bytes(_H100.memory_bytes)} ({_H100.memory_text()})"
DESIGN_BAND = validation.error_band("h100-sxm", "mixed").percent / 100
#: tokens of the time-to-train question (Llama 2 was trained on 2 T tokens: Touvron et al. 2023, Sec. 2.2)
TRAIN_TOKENS = 2e12


def _ex1_as_written():
    fits = {name: _estimate(**cfg).fits for name, cfg in EX1_AS_WRITTEN.items()}
    if all(fits.values()):
        return "both"
    return next((name for name, ok in fits.items() if ok), "neither")


def _explain_ex1_as_written():
    parts = []
    for name, cfg in EX1_AS_WRITTEN.items():
        bd = _estimate(**cfg).memory
        parts.append(
            f"{name}: weights + gradients + optimizer {format_bytes(bd.model_states_bytes)} + activations "
            f"{format_bytes(bd.activations_bytes)} = {format_bytes(bd.total_bytes)} per GPU"
        )
    return (
        "; ".join(parts)
        + f". Neither fits the {format_bytes(_H100.memory_bytes)} an H100 has as written: a step time for either prices a layout that cannot "
        "run. dp = 256 replicates 16 B x 70.6e9 = 1.13 TB of model states; tp 4 x pp 2 divides them by 8 only"
    )


def _ex1_fitted():
    times = {name: _estimate(**cfg).step_time_s for name, cfg in EX1_FITTED.items()}
    return min(times, key=times.get)


def _explain_ex1_fitted():
    out = []
    for name, cfg in EX1_FITTED.items():
        e = _estimate(**cfg)
        parts = ", ".join(f"{k} {format_seconds(v)}" for k, v in e.parts().items() if v > 1e-3)
        out.append(f"{name} ({format_bytes(e.memory.total_bytes)} per GPU): {format_seconds(e.step_time_s)} = {parts}")
    per_tensor = _estimate(**EX1_FITTED["dp256"], zero3_collectives="tensor").step_time_s
    three_d = _estimate(**EX1_FITTED["dp32-tp4-pp2"]).step_time_s
    verdict = "still the faster" if per_tensor < three_d else f"slower than the 3D layout's {format_seconds(three_d)}"
    return (
        "; ".join(out) + ". ZeRO-3's per-layer gathers and reduce-scatters hide under compute on NDR, while the "
        "3D layout pays its bubble (p - 1)/m = 1/8 of the compute and four TP all-reduces per layer in full. "
        "Gathered tensor by tensor over all 256 GPUs as DeepSpeed's ZeRO-3 of 2021 ran it (zero3_collectives="
        "'tensor'), each collective pays a ring's latency and 6 us per rank of host work (DeepSpeed's Python loop "
        "over the ranks, measured on a CPU, and one copy per rank at NVIDIA's published 3.8 us per small GPU "
        "operation, assumed for 2021's hosts), and none hides (it synchronized the GPU before each): "
        f"{format_seconds(per_tensor)}, {verdict} (section 8: the 2021 runs measured slower still)"
    )


def _mfu_estimate(pp=CONFIG["pp"]):
    return _q3_estimate(pp)


def _q5(pp=CONFIG["pp"]):
    return 100 * _mfu_estimate(pp).mfu


def _explain_q5(pp=CONFIG["pp"]):
    e = _mfu_estimate(pp)
    return (
        f"MFU = model FLOPs / (t N peak) = {e.model_flops:.4g} / ({format_seconds(e.step_time_s)} x {e.gpus} x "
        f"{e.peak_flops / 1e12:.1f} TFLOP/s) = {100 * e.mfu:.1f}% (model FLOPs: q1's, no recomputation)"
    )


def _q5_hints(pp):
    e = _mfu_estimate(pp)
    return {
        _six_pt_ratio(): "uses 6 x parameters x tokens, which leaves attention and the logits' share out",
        e.hardware_flops / e.model_flops: "counts the recomputed attention too: that is the HFU; MFU counts the "
        "model's FLOPs only",
        0.5: "divides by the FP8 peak; this run computes in bf16, whose dense peak is half FP8's",
    }


def _design_estimate(tp, pp):
    return _estimate(tp=tp, pp=pp, **DESIGN)


def _design_free_bytes(e):
    return e.memory.capacity_bytes - e.memory.total_bytes


def _design_table():
    """{(tp, pp): estimate} of every layout of the design task that the step model accepts."""
    from ..errors import ConfigurationError

    table = {}
    for tp in DESIGN_TP:
        for pp in DESIGN_PP:
            try:
                table[tp, pp] = _design_estimate(tp, pp)
            except ConfigurationError:
                continue
    return table


def _design_best():
    ok = {k: e for k, e in _design_table().items() if _design_free_bytes(e) >= DESIGN_FREE_GB * 1e9}
    return min(ok, key=lambda k: ok[k].step_time_s), ok


def _q6():
    return list(_design_best()[0])


def _explain_q6():
    best, ok = _design_best()
    rows = "; ".join(
        f"tp {tp} pp {pp}: {format_bytes(e.memory.total_bytes)}, {format_seconds(e.step_time_s)}"
        for (tp, pp), e in sorted(ok.items(), key=lambda kv: kv[1].step_time_s)
    )
    return (
        f"the layouts that leave {DESIGN_FREE_GB:g} GB free, fastest first: {rows}. The fastest is tp {best[0]} "
        f"pp {best[1]}: TP inside the node costs less than the bubble a pipeline adds at this batch; any layout "
        f"within {100 * DESIGN_BAND:.1f}% of it, the model's validated error band, is accepted (the model cannot rank "
        "closer ones, section 8)"
    )


def _q7(pp=CONFIG["pp"]):
    e = _q3_estimate(pp)
    return TRAIN_TOKENS / e.tokens_per_step * e.step_time_s / 86400


def _explain_q7(pp=CONFIG["pp"]):
    e = _q3_estimate(pp)
    steps = TRAIN_TOKENS / e.tokens_per_step
    return (
        f"{format_count(TRAIN_TOKENS)} tokens / ({BATCH} x {SEQ} = {e.tokens_per_step:,.0f} tokens per step) = {steps:,.0f} "
        f"steps; x {format_seconds(e.step_time_s)} = {steps * e.step_time_s:,.0f} s = {_q7(pp):.1f} days on 256 "
        f"GPUs ({256 * _q7(pp) * 24:,.0f} GPU-hours)"
    )


def _tp_overlap_helps():
    plain = _estimate(tp=8, pp=1, **DESIGN)
    overlapped = _estimate(tp=8, pp=1, tp_overlap=True, **DESIGN)
    return plain, overlapped


def _q8():
    plain, overlapped = _tp_overlap_helps()
    return "overlap" if overlapped.tp_comm_s < 0.5 * plain.tp_comm_s else "never"


def _explain_q8():
    plain, overlapped = _tp_overlap_helps()
    return (
        f"tp 8, pp 1 (ZeRO-1, selective, SP): the TP collectives take {format_seconds(plain.tp_comm_s)} of a "
        f"{format_seconds(plain.step_time_s)} step on the critical path ({100 * plain.tp_comm_s / plain.step_time_s:.0f}"
        f"%, far from negligible); with the collectives split into chunks and overlapped with the neighbouring "
        f"matmuls (Megatron-Core --tp-comm-overlap, PyTorch async TP), "
        f"{format_seconds(overlapped.tp_comm_s)} stays exposed: the step model's default for this recipe (the ZeRO "
        f"paper's count, no engine) is the un-overlapped baseline"
    )


@dataclass(frozen=True)
class DesignQuestion(Question):
    """A design task answered by a layout [tp, pp]: any layout that meets the constraints is correct.

    The check prices the student's own layout with the step model and says which constraint it misses
    (the memory left free, or the step time against the fastest layout that fits), with its numbers.
    expected() is the fastest such layout (the worked answer).
    """

    name: str
    prompt: str
    expected: Callable[..., list]
    explain: Callable[..., str]
    hint_text: str
    points: float = 1.0
    params: dict = field(default_factory=dict)
    variants: dict = field(default_factory=dict)

    def __post_init__(self):
        bind_params(self)

    def _read(self, answer) -> tuple[int, int]:
        return _read_layout(answer)

    def _judge(self, values: tuple[int, int]) -> str | None:
        return _design_feedback(values)


def _read_layout(answer) -> tuple[int, int]:
    """(tp, pp) from a list or tuple of two whole numbers or a text such as '8, 1'; ValueError in words otherwise."""
    import numbers

    if isinstance(answer, str):
        # its own reader, not parallelism_3d's: the grading sandbox strips each question module's functions, so
        # one lesson's module must not import another's
        tokens = answer.strip().strip("[](){}").replace(",", " ").split() if len(answer) <= 40 else []
        values = [int(t) for t in tokens] if tokens and all(t.isdigit() and t.isascii() for t in tokens) else None
        if values is None:
            shown = answer if len(answer) <= 40 else answer[:37] + "..."
            raise ValueError(f"{shown!r} could not be read as a layout [tp, pp] (write e.g. [4, 2])")
    elif isinstance(answer, (list, tuple)):
        if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in answer):
            raise ValueError("a layout is two whole numbers [tp, pp]")
        values = [int(v) for v in answer]
    else:
        raise ValueError(f"an answer of type {type(answer).__name__} is not a layout [tp, pp] (write e.g. [4, 2])")
    if len(values) != 2:
        raise ValueError(f"a layout is two numbers [tp, pp], not {len(values)}")
    tp, pp = values
    if tp not in DESIGN_TP or pp not in DESIGN_PP:
        raise ValueError(f"[{tp}, {pp}] is not a layout of this task: tp in {list(DESIGN_TP)}, pp in {list(DESIGN_PP)}")
    return tp, pp


def _design_feedback(values) -> str | None:
    """None when the layout meets both constraints, else why not, with its numbers."""
    tp, pp = values
    table = _design_table()
    if (tp, pp) not in table:
        return f"tp {tp} x pp {pp} does not divide the 256 GPUs, the batch or the 80 layers into a valid layout"
    e = table[tp, pp]
    best, ok = _design_best()
    free = _design_free_bytes(e)
    if free < DESIGN_FREE_GB * 1e9:
        short = "does not fit at all" if free < 0 else f"leaves only {format_bytes(max(free, 0))} free"
        return (
            f"tp {tp} x pp {pp} needs {format_bytes(e.memory.total_bytes)} per GPU and {short}: model states "
            f"{format_bytes(e.memory.model_states_bytes)}, activations {format_bytes(e.memory.activations_bytes)}"
        )
    fastest = ok[best].step_time_s
    if e.step_time_s > (1 + DESIGN_BAND) * fastest:
        parts = {k: v for k, v in e.parts().items() if k != "compute"}
        worst = max(parts, key=lambda k: parts[k])
        return (
            f"tp {tp} x pp {pp} fits ({format_bytes(free)} free) but its step, {format_seconds(e.step_time_s)}, is "
            f"{100 * (e.step_time_s / fastest - 1):.0f}% slower than the fastest layout that fits; its largest cost "
            f"besides compute is {worst} ({format_seconds(parts[worst])})"
        )
    return None


_SETUP = f"Llama-3.1-70B on {NODES} DGX H100 nodes (256 GPUs), global batch {BATCH} x {SEQ} tokens"
#: _SETUP with the batch and sequence length as params (str.format fields)
_SETUP_FIELDS = f"Llama-3.1-70B on {NODES} DGX H100 nodes (256 GPUs), global batch {{batch}} x {{seq}} tokens"


def _q3_hints(pp):
    m = _q3_estimate(pp).microbatches  # the mistake: the idle share 100 (p-1)/(m+p-1), against the answer
    return {
        100
        * (pp - 1)
        / (m + pp - 1)
        / _q3(pp): "is the idle share (p-1)/(m+p-1) of the step; the time ADDED over ideal compute is (p-1)/m"
    }


q1 = NumericQuestion(
    name="q1",
    params=dict(batch=Q1_BATCH, seq=SEQ),
    variants=dict(batch=BATCH_VARIANTS, seq=SEQ_VARIANTS),
    prompt=_SETUP_FIELDS + ": model FLOPs of one training step, in EFLOP (10^18 FLOP)?",
    expected=_q1,
    explain=_explain_q1,
    unit="EFLOP",
    noun="an amount of FLOPs",
    hint_text="by hand: one layer's forward is b s (2 P_layer + 4 s a d_head), the logits 2 b s h V, and training runs "
    "three forwards' worth; check it with the kit after",
    rel_tol=0.02,
    scale_hint=lambda batch, seq: {
        _six_pt_ratio(batch, seq): "counts 6 x parameters x tokens: that rule of thumb "
        "leaves attention out; model FLOPs (PaLM's definition) count the weights, "
        "attention and logits"
    },
)

q2 = ChoiceQuestion(
    name="q2",
    prompt="Two layouts as they are often first written: " + _SETUP + ". Without ZeRO or "
    f"recomputation, which layout fits the {H100_MEMORY} of an H100: dp256 (tp = pp = 1), dp32-tp4-pp2, both, or neither?",
    options=("dp256", "dp32-tp4-pp2", "both", "neither"),
    expected=_ex1_as_written,
    explain=_explain_ex1_as_written,
    hint_text="count the model-state bytes per GPU first: 16 bytes per parameter, divided by what each layout splits",
    feedback={
        "dp256": "replicates the whole model on every GPU: 16 bytes x 70.6e9 parameters is 1.13 TB before any "
        "activation (adding GPUs to plain data parallelism never lowers the memory per GPU)",
        "dp32-tp4-pp2": "divides the model states by tp x pp = 8 only: 1.13 TB / 8 = 141 GB, still more than an H100's "
        f"{format_bytes(_H100.memory_bytes)} "
        "(data parallelism without ZeRO shards nothing)",
        "both": "would need 1.13 TB per GPU for dp256; neither layout shards the optimizer state",
    },
)

q3 = ChoiceQuestion(
    name="q3",
    prompt="q2's layouts, made to fit: dp256 with ZeRO-3 (one flat-buffer gather per layer, as FSDP2 runs it) and "
    "full recomputation; dp32-tp4-pp2 with ZeRO-1, "
    "full recomputation and sequence parallelism (both fit). On InfiniBand NDR, which has the shorter step: dp256, "
    "dp32-tp4-pp2, or a tie (closer than the model's error)? Predict, then check.",
    options=("dp256", "dp32-tp4-pp2", "tie"),
    expected=_ex1_fitted,
    explain=_explain_ex1_fitted,
    hint_text="list what each layout pays that the other does not, then price each term: which of them can hide "
    "under compute?",
    feedback={
        "dp32-tp4-pp2": "counts ZeRO-3's traffic (3M per step, 1.5x plain DP) as exposed; on NDR its per-layer "
        "gathers hide under the layers' compute, while the 3D layout pays a bubble of (p - 1)/m = 1/8 of its "
        "compute and four TP all-reduces per layer on the critical path",
        "tie": f"is not what the parts say: the two steps differ by about a quarter, three times the model's "
        f"{100 * DESIGN_BAND:.1f}% validated error band on H100 runs (section 8)",
    },
)

q4 = NumericQuestion(
    name="q4",
    params=dict(pp=Q4_PP),
    variants=dict(pp=PP_VARIANTS),
    prompt=_SETUP + ", tp = 8, pp = {pp}, micro-batch 1: the time the pipeline bubble adds to the ideal compute, in %?",
    expected=_q3,
    explain=_explain_q3,
    unit="",
    noun="a percentage",
    hint_text="count the microbatches a pipeline gets per step first: m = B / (dp x micro-batch)",
    scale_hint=_q3_hints,
)

_REFERENCE_STEP = _q3_estimate(CONFIG["pp"]).step_time_s

q5 = NumericQuestion(
    name="q5",
    params=dict(pp=CONFIG["pp"]),
    prompt=_SETUP + ", tp = 8, pp = {pp}, micro-batch 1, ZeRO-1, selective recomputation, sequence parallel, "
    f"InfiniBand NDR: the step model gives {_REFERENCE_STEP:.3f} s per step. By hand, from this step's model FLOPs (q1's "
    f"count, at {BATCH} x {SEQ} tokens) and this step time: the MFU, in %? (An H100 SXM's dense bf16 peak: 989.4 TFLOP/s.)",
    expected=_q5,
    explain=_explain_q5,
    unit="",
    noun="a percentage",
    hint_text="MFU compares the model's work with what all the GPUs could do in that time at their dense bf16 peak "
    "(an H100 SXM: 989.4 TFLOP/s)",
    scale_hint=_q5_hints,
)

q6 = DesignQuestion(
    name="q6",
    prompt=_SETUP + f", ZeRO-1, selective recomputation, sequence parallelism, micro-batch 1, InfiniBand NDR. Design: "
    f"choose [tp, pp] (tp in {list(DESIGN_TP)}, pp in {list(DESIGN_PP)}) that leaves at least {DESIGN_FREE_GB:g} GB "
    f"of each GPU's {H100_MEMORY} free and whose step is within {100 * DESIGN_BAND:.1f}% (the model's validated error band) of the "
    "fastest layout that does. "
    "Justify it with the memory and the step parts.",
    expected=_q6,
    explain=_explain_q6,
    hint_text="rule out the layouts that cannot fit by counting model-state bytes first; among the rest, weigh what a "
    "deeper pipeline adds against what a wider TP group adds",
)

q7 = NumericQuestion(
    name="q7",
    params=dict(pp=CONFIG["pp"]),
    prompt=f"Time to train: at q5's {_REFERENCE_STEP:.3f} s per step (global batch {BATCH} x {SEQ} tokens), how many "
    f"days does it take to train on {TRAIN_TOKENS / 1e12:g} trillion tokens (Llama 2's budget)?",
    expected=_q7,
    explain=_explain_q7,
    unit="",
    noun="a number of days",
    hint_text="tokens per step first, then steps, then seconds; a day is 86,400 s",
    scale_hint={
        256.0: "is in GPU-days: the 256 GPUs work at the same time",
        24.0: "is in hours; give days",
        1 / SEQ: "counts a sequence as one token: each step trains batch x sequence length tokens",
    },
)

q8 = ChoiceQuestion(
    name="q8",
    prompt="The step model charges tensor-parallel communication on the critical path. For tp = 8 on NVLink "
    "(ZeRO-1, selective recomputation, sequence parallelism), which is right? never: TP communication can never "
    "overlap, since the next matmul needs its result; negligible: inside a node it costs next to nothing; overlap: "
    "split into chunks, most of it can hide under the neighbouring matmuls, and the model's default for this "
    "lesson's recipe (the ZeRO paper's count, which names no engine) is the un-overlapped baseline.",
    options=("never", "negligible", "overlap"),
    expected=_q8,
    explain=_explain_q8,
    hint_text="compare the TP part of the step with the step itself, then ask whether ALL of a matmul's input is "
    "needed before ANY of it can start",
    feedback={
        "never": "takes the dependency as all-or-nothing: a chunk of the all-gather (or reduce-scatter) can move while "
        "the matmul works on the chunk before it (Megatron-Core's --tp-comm-overlap, PyTorch's async TP, "
        "the collective matmul)",
        "negligible": "is the intra-node myth: at tp = 8 the TP collectives are more than a sixth of this step even on "
        "NVLink (print the step's parts)",
    },
)

QUESTIONS = {q.name: q for q in (q1, q2, q3, q4, q5, q6, q7, q8)}
