"""Graded questions of lesson 7, the training lab. Every expected value is computed by distlab.training / planner.

The scenario: Llama-3.1-70B on 32 DGX H100 nodes (256 GPUs), global batch 256 sequences of 8,192 tokens.
"""

from __future__ import annotations

from .. import flops, models, planner, training
from ..units import format_bytes, format_seconds
from .questions import ChoiceQuestion, NumericQuestion

__all__ = ["CONFIG", "QUESTIONS"]

MODEL, NODE, NODES, BATCH, SEQ = "llama3.1-70b", "dgx-h100", 32, 256, 8192
#: the feasible reference configuration of questions 3 and 4
CONFIG = dict(tp=8, pp=8, micro_batch_size=1, zero=1, recompute="selective", sequence_parallel=True)
#: per-student variants (distlab.lessons.variants): questions declaring the same choices draw the same numbers;
#: every batch divides over every dp the pipeline depths leave (256 / (8 x pp)), and 80 layers over every pp
BATCH_VARIANTS, SEQ_VARIANTS, PP_VARIANTS = (128, 256, 512), (2048, 4096, 8192), (2, 4, 8, 16)


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


def _q2(seq=SEQ):
    return _estimate(seq=seq, dp=256).memory.total_bytes / 1e9


def _explain_q2(seq=SEQ):
    bd = _estimate(seq=seq, dp=256).memory
    return (
        f"pure DP replicates everything: weights {format_bytes(bd.weights_bytes)} + gradients "
        f"{format_bytes(bd.gradients_bytes)} + Adam states {format_bytes(bd.optimizer_bytes)} + activations of one "
        f"{seq}-token sequence without recomputation {format_bytes(bd.activations_bytes)} = "
        f"{format_bytes(bd.total_bytes)} per GPU, {bd.total_bytes / bd.capacity_bytes:.0f} x the 80 GB"
    )


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


def _q4(pp=CONFIG["pp"]):
    return 100 * _q3_estimate(pp).mfu


def _explain_q4(pp=CONFIG["pp"]):
    e = _q3_estimate(pp)
    return (
        f"MFU = model FLOPs / (t N peak) = {e.model_flops:.4g} / ({format_seconds(e.step_time_s)} x {e.gpus} x "
        f"{e.peak_flops / 1e12:.1f} TFLOP/s) = {100 * e.mfu:.1f}%"
    )


def _best(fabric):
    r = planner.plan(MODEL, NODE, nodes=NODES, fabric=fabric, global_batch=BATCH, seq_len=SEQ).row(0)
    return r["dp"], r["tp"], r["pp"], r["cp"]


def _q5():
    return "yes" if _best("ethernet-100g") == _best("ib-ndr") else "no"


def _explain_q5():
    eth, ndr = _best("ethernet-100g"), _best("ib-ndr")
    return (
        f"100GbE: dp x tp x pp = {eth[0]} x {eth[1]} x {eth[2]} (cp {eth[3]}); InfiniBand NDR: "
        f"{ndr[0]} x {ndr[1]} x {ndr[2]} (cp {ndr[3]}). "
        f"On the slow fabric the planner buys less data-parallel traffic with deeper pipelines "
        f"(p2p messages are small); on NDR the gradient all-reduce hides behind the backward pass."
    )


def _q6(pp=CONFIG["pp"]):
    e = _q3_estimate(pp)
    return e.tokens_per_s / 1e3


def _explain_q6(pp=CONFIG["pp"]):
    e = _q3_estimate(pp)
    return (
        f"throughput = global batch x sequence / step time = {BATCH} x {SEQ} / {format_seconds(e.step_time_s)} "
        f"= {e.tokens_per_s:,.0f} tokens/s"
    )


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
    params=dict(batch=BATCH, seq=SEQ),
    variants=dict(batch=BATCH_VARIANTS, seq=SEQ_VARIANTS),
    prompt=_SETUP_FIELDS + ": model FLOPs of one training step, in EFLOP (10^18 FLOP)?",
    expected=_q1,
    explain=_explain_q1,
    unit="EFLOP",
    noun="an amount of FLOPs",
    hint_text="flops.step_flops('llama3.1-70b', {batch}, {seq}).model_flops: weights, attention and logits (PaLM)",
    scale_hint=lambda batch, seq: {
        _six_pt_ratio(batch, seq): "counts 6 x parameters x tokens: that rule of thumb "
        "leaves attention out; model FLOPs (PaLM's definition) count the weights, "
        "attention and logits"
    },
)

q2 = NumericQuestion(
    name="q2",
    params=dict(seq=SEQ),
    variants=dict(seq=SEQ_VARIANTS),
    prompt=_SETUP_FIELDS.replace("{batch}", str(BATCH))
    + ": memory per GPU (GB) of pure data parallelism, dp = 256, no ZeRO, no recomputation?",
    expected=_q2,
    explain=_explain_q2,
    unit="GB",
    noun="an amount of memory",
    hint_text="training.estimate(..., dp=256).memory: 16 bytes per parameter plus one sequence's activations",
    scale_hint={1 / 256: "divides by the 256 GPUs, but plain data parallelism replicates the model on every GPU"},
)

q3 = NumericQuestion(
    name="q3",
    params=dict(pp=CONFIG["pp"]),
    variants=dict(pp=PP_VARIANTS),
    prompt=_SETUP + ", tp = 8, pp = {pp}, micro-batch 1: the time the pipeline bubble adds to the ideal compute, in %?",
    expected=_q3,
    explain=_explain_q3,
    unit="",
    noun="a percentage",
    hint_text="count the microbatches a pipeline gets per step first: m = B / (dp x micro-batch)",
    scale_hint=_q3_hints,
)

q4 = NumericQuestion(
    name="q4",
    params=dict(pp=CONFIG["pp"]),
    variants=dict(pp=PP_VARIANTS),  # the same choices as q3: the same draw, so q3, q4 and q6 share one configuration
    prompt=_SETUP + ", tp = 8, pp = {pp}, micro-batch 1, ZeRO-1, selective recomputation, sequence parallel, "
    "InfiniBand NDR: MFU in %?",
    expected=_q4,
    explain=_explain_q4,
    unit="",
    noun="a percentage",
    hint_text="training.estimate(...).mfu, or model FLOPs / (step time x GPUs x dense bf16 peak)",
)

q5 = ChoiceQuestion(
    name="q5",
    prompt="Is the planner's fastest feasible (dp, tp, pp) on 100 Gb Ethernet the same as on InfiniBand NDR? (yes/no)",
    options=("yes", "no"),
    expected=_q5,
    explain=_explain_q5,
    hint_text="planner.plan(..., fabric=...).row(0) for both fabrics",
)

q6 = NumericQuestion(
    name="q6",
    params=dict(pp=CONFIG["pp"]),
    variants=dict(pp=PP_VARIANTS),
    prompt="The configuration of q4: throughput in thousands of tokens per second?",
    expected=_q6,
    explain=_explain_q6,
    unit="",
    noun="a number of thousands of tokens per second",
    hint_text="global batch x sequence length / step time",
    scale_hint={
        1e3: "looks like tokens per second; give it in thousands (200 means 200,000 tokens/s)",
        1 / SEQ: "is samples per second; multiply by the sequence length",
    },
)

QUESTIONS = {q.name: q for q in (q1, q2, q3, q4, q5, q6)}
