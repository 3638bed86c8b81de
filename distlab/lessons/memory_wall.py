"""Graded questions of lesson 1, the memory wall. Every expected value is computed by distlab.memory."""

from __future__ import annotations

from .. import memory
from ..units import format_bytes
from .questions import ChoiceQuestion, NumericQuestion

__all__ = ["QUESTIONS"]

_BYTES_HINT = {1e9: "looks like bytes, but plain numbers are read in GB (write '112e9 B' or 112)"}


def _per_param():
    return memory.precision_recipe("mixed").bytes_per_param


def _explain_q1():
    r = memory.precision_recipe("mixed")
    return (
        f"{r.weight_bytes:g} (bf16 weights) + {r.gradient_bytes:g} (bf16 gradients) + {r.optimizer_bytes:g} "
        f"(fp32 master copy, Adam momentum and variance, 4 each) = {r.bytes_per_param:g} bytes per parameter"
    )


def _states(billions, zero=0, dp=1):
    return memory.training_memory(billions * 1e9, zero=zero, dp=dp)


def _state_gb(billions, zero=0, dp=1):
    return _states(billions, zero, dp).total_bytes / 1e9


def _explain_q2(billions):
    bd = _states(billions)
    return (
        f"{billions:g}e9 x {_per_param():g} B = {format_bytes(bd.total_bytes)}: weights {format_bytes(bd.weights_bytes)}, "
        f"gradients {format_bytes(bd.gradients_bytes)}, Adam states {format_bytes(bd.optimizer_bytes)}"
    )


def _explain_q3(billions, dp):
    bd = _states(billions, dp=dp)
    return (
        f"Plain data parallelism replicates everything: each of the {dp} GPUs still holds {billions:g}e9 x "
        f"{_per_param():g} B = {format_bytes(bd.total_bytes)}. More GPUs add throughput, not memory per GPU."
    )


def _q4(gpu_gb):
    return memory.max_trainable_params(gpu_gb * 1e9) / 1e9


def _explain_q4(gpu_gb):
    return f"{gpu_gb:g} GB / {_per_param():g} B per parameter = {_q4(gpu_gb):g} billion parameters"


def _explain_q5(billions, zero, dp):
    bd = _states(billions, zero, dp)
    return (
        f"ZeRO-2 keeps full bf16 weights (2 x {billions:g}e9 = {format_bytes(bd.weights_bytes)}) and shards gradients "
        f"and optimizer states over {dp} GPUs ((2 + 12) x {billions:g}e9 / {dp} = "
        f"{format_bytes(bd.gradients_bytes + bd.optimizer_bytes)}): "
        f"{format_bytes(bd.total_bytes)} (ZeRO paper, Fig. 1: 16.6 GB)"
    )


def _q6(billions, gpu_gb):
    return memory.min_gpus_to_fit(billions * 1e9, gpu_gb * 1e9)


def _explain_q6(billions, gpu_gb):
    n = _q6(billions, gpu_gb)
    states = _states(billions).total_bytes
    per_gpu = _states(billions, zero=3, dp=n).total_bytes
    return (
        f"ZeRO-3 divides all {_per_param():g} bytes per parameter: {states / 1e9:,.0f} GB / N <= "
        f"{gpu_gb:g} GB needs N >= {n}; "
        f"at N = {n} each GPU holds {format_bytes(per_gpu)} of model states (activations not counted)"
    )


q1 = NumericQuestion(
    name="q1",
    prompt="How many bytes per parameter does mixed-precision training with Adam keep (weights, gradients, optimizer)?",
    expected=_per_param,
    explain=_explain_q1,
    hint_text="count bf16 weights, bf16 gradients, and the optimizer's fp32 master copy plus two moments",
    unit="",
    rel_tol=0.0,
    noun="a number of bytes per parameter",
)

q2 = NumericQuestion(
    name="q2",
    params=dict(billions=7),
    variants=dict(billions=(1.3, 3, 7, 13, 30, 34, 70)),
    prompt="How much memory (GB) do the model states of a {billions:g}B model need on one GPU?",
    expected=_state_gb,
    explain=_explain_q2,
    hint_text="multiply the parameter count by the bytes per parameter from q1",
    unit="GB",
    noun="an amount of memory",
    scale_hint=_BYTES_HINT,
)

q3 = NumericQuestion(
    name="q3",
    params=dict(billions=70, dp=64),
    variants=dict(billions=(13, 30, 70, 175), dp=(8, 16, 32, 64, 128)),
    prompt="Plain data parallelism over {dp} GPUs, {billions:g}B model: how much model-state memory (GB) does EACH "
    "GPU need?",
    expected=_state_gb,
    explain=_explain_q3,
    hint_text="what does each data-parallel replica hold?",
    unit="GB",
    noun="an amount of memory",
    scale_hint=lambda billions, dp: {
        1 / dp: f"is the total divided by {dp}, but plain data parallelism replicates the whole model on every GPU",
        **_BYTES_HINT,
    },
)

q4 = NumericQuestion(
    name="q4",
    params=dict(gpu_gb=80),
    variants=dict(gpu_gb=(16, 24, 40, 48, 80, 141)),
    prompt="What is the largest model (in billions of parameters) whose model states fit one {gpu_gb:g} GB GPU?",
    expected=_q4,
    explain=_explain_q4,
    hint_text="divide the capacity by the bytes each parameter needs",
    unit="",
    noun="a number of billions of parameters",
    scale_hint={1e9: "looks like the count of parameters; give it in billions (5 means 5e9)"},
)

q5 = NumericQuestion(
    name="q5",
    params=dict(billions=7.5, zero=2, dp=64),
    prompt="ZeRO paper check: {billions:g}B parameters, ZeRO-{zero}, {dp}-way data parallelism. Model-state memory "
    "per GPU (GB)?",
    expected=_state_gb,
    explain=_explain_q5,
    hint_text="ZeRO-2 shards gradients and optimizer states over the {dp} GPUs but keeps full weights",
    unit="GB",
    noun="an amount of memory",
    scale_hint=_BYTES_HINT,
)

q6 = NumericQuestion(
    name="q6",
    params=dict(billions=70, gpu_gb=80),
    variants=dict(billions=(13, 30, 70, 175), gpu_gb=(24, 40, 80, 141)),
    prompt="With ZeRO-3, how many {gpu_gb:g} GB GPUs are needed at least for the model states of a {billions:g}B model?",
    expected=_q6,
    explain=_explain_q6,
    hint_text="ZeRO-3 divides all model states by the number of GPUs; round up",
    unit="",
    rel_tol=0.0,
    noun="a number of GPUs",
)

q7 = ChoiceQuestion(
    name="q7",
    prompt="Does adding GPUs under plain data parallelism reduce the memory each GPU needs? (yes/no)",
    options=("yes", "no"),
    expected=lambda: (
        "no"
        if memory.training_memory(7e9, dp=2).total_bytes == memory.training_memory(7e9, dp=1).total_bytes
        else "yes"
    ),
    explain=lambda: "No: every replica keeps the full 16 bytes per parameter; only sharding (ZeRO, TP, PP) divides it.",
    hint_text="compare training_memory(7e9, dp=1) with dp=8",
)

QUESTIONS = {q.name: q for q in (q1, q2, q3, q4, q5, q6, q7)}
