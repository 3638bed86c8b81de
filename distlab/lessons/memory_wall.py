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


def _q5(billions, dp, gpu_gb):
    """The one fix among q5's options whose model states fit the GPU (the others are checked not to)."""
    fits = {
        "a": _state_gb(billions, zero=0, dp=8 * dp) <= gpu_gb,  # more replicas
        "b": _state_gb(billions, zero=1, dp=dp) <= gpu_gb,  # shard the optimizer states
        "c": _state_gb(billions, zero=0, dp=dp) <= gpu_gb,  # a smaller micro-batch leaves model states as they are
        "d": _state_gb(billions, zero=0, dp=dp) <= gpu_gb,  # gradients are already 16-bit: nothing changes
    }
    (answer,) = [option for option, ok in fits.items() if ok]
    return answer


def _explain_q5(billions, dp, gpu_gb):
    plain, zero1 = _states(billions, dp=dp), _states(billions, zero=1, dp=dp)
    return (
        f"(b). The {format_bytes(plain.total_bytes)} per GPU are model states, identical on every replica: more "
        f"replicas (a) leave them as they are, a smaller micro-batch (c) only shrinks activations, and the gradients "
        f"(d) are already bf16. Sharding the 12 optimizer bytes over the {dp} GPUs (ZeRO-1) gives "
        f"(4 + 12/{dp}) x {billions:g}e9 = {format_bytes(zero1.total_bytes)}, under {gpu_gb:g} GB"
    )


def _q6(billions, gpu_gb, headroom_gb):
    """Fewest GPUs for which ZeRO-3's model states leave `headroom_gb` free: searched, not the closed form."""
    n = 1
    while _state_gb(billions, zero=3, dp=n) > gpu_gb - headroom_gb:
        n += 1
    return n


def _explain_q6(billions, gpu_gb, headroom_gb):
    n = _q6(billions, gpu_gb, headroom_gb)
    total = _states(billions).total_bytes / 1e9
    return (
        f"ZeRO-3 divides all {_per_param():g} bytes per parameter: {total:,.0f} GB / N <= {gpu_gb:g} - "
        f"{headroom_gb:g} = {gpu_gb - headroom_gb:g} GB needs N >= {total / (gpu_gb - headroom_gb):.3g}, so N = {n} "
        f"({format_bytes(_states(billions, zero=3, dp=n).total_bytes)} each). Filling the GPU to the brim "
        f"(N = {_q6(billions, gpu_gb, 0)}) leaves nothing for activations"
    )


def _te_default_bytes():
    """Transformer Engine's default FP8: bf16 primary weights (the mixed recipe) plus a cached FP8 copy of each
    weight and its transpose (1 + 1 B): at least the mixed recipe's bytes."""
    return _per_param() + 2


def _q7():
    return "c" if _te_default_bytes() >= _per_param() else "b"


def _explain_q7():
    fp8 = memory.precision_recipe("fp8")
    return (
        f"(c). With Transformer Engine's default (no fp8_model_init) the weights stay bf16 and FP8 copies (with "
        f"transposes) are cached for the matmuls: {_per_param():g} + 2 = {_te_default_bytes():g} bytes per "
        f"parameter. distlab's 'fp8' recipe ({fp8.bytes_per_param:g} B) is FP8 *primary* weights: 1 + 2 + 12. FP8 "
        f"shrinks GEMM inputs and saved activations, not Adam's 12 fp32 bytes"
    )


def _checkpoint_peak(layers):
    """Chen et al. 2016 (sublinear memory), units of one layer's saved activations, with a segment input as large
    as one layer's activations: checkpoint every k layers (k divides L), keep L/k inputs, recompute one segment
    of k layers at a time. Peak = L/k + k, minimised over k by search."""
    return min(layers // k + k for k in range(1, layers + 1) if layers % k == 0)


def _explain_q8(layers):
    best = min((layers // k + k, k) for k in range(1, layers + 1) if layers % k == 0)
    return (
        f"Peak(k) = L/k checkpoints + k layers being recomputed; the sum is smallest at k = sqrt(L) = {best[1]}: "
        f"{layers // best[1]} + {best[1]} = {best[0]} layer-activations, against {layers} with everything kept "
        f"(Chen et al. 2016, 'Training Deep Nets with Sublinear Memory Cost': O(sqrt L) memory for one extra "
        f"forward)"
    )


q1 = NumericQuestion(
    name="q1",
    prompt="Estimate by hand: how many bytes per parameter does mixed-precision training with Adam keep (weights, "
    "gradients, optimizer)?",
    expected=_per_param,
    explain=_explain_q1,
    hint_text="count bf16 weights, bf16 gradients, and the optimizer's fp32 master copy plus two moments",
    unit="",
    rel_tol=0.0,
    noun="a number of bytes per parameter",
    scale_hint={
        0.125: "counts only the bf16 weights: training also keeps gradients and Adam's states",
        0.25: "counts weights and gradients but not the optimizer, which is most of it",
        0.75: "leaves out the fp32 master copy of the weights that Adam updates",
    },
)

q2 = NumericQuestion(
    name="q2",
    params=dict(billions=13),
    variants=dict(billions=(1.3, 3, 7, 13, 30, 34, 70)),
    prompt="A {billions:g}B model is trained with Adam in mixed precision under naive data "
    "parallelism (each GPU holds the full model). How much model-state memory (GB) does each GPU need?",
    expected=_state_gb,
    explain=_explain_q2,
    hint_text="multiply the parameter count by the bytes per parameter from q1",
    unit="GB",
    noun="an amount of memory",
    scale_hint={**_BYTES_HINT, 0.125: "counts only the bf16 weights, 2 of the 16 bytes per parameter"},
)

q3 = NumericQuestion(
    name="q3",
    params=dict(billions=30, dp=64),
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
    params=dict(gpu_gb=48),
    variants=dict(gpu_gb=(16, 24, 40, 48, 80, 141)),
    prompt="Estimate: what is the largest model (in billions of parameters) whose model states fit one {gpu_gb:g} "
    "GB GPU (take it as {gpu_gb:g} x 10⁹ bytes, all usable)?",
    expected=_q4,
    explain=_explain_q4,
    hint_text="divide the capacity by the bytes each parameter needs",
    unit="",
    noun="a number of billions of parameters",
    scale_hint={
        1e9: "looks like the count of parameters; give it in billions (5 means 5e9)",
        8.0: "divides by 2 bytes (the bf16 weights) only: training keeps 16 bytes per parameter",
    },
)

q5 = ChoiceQuestion(
    name="q5",
    params=dict(billions=7, dp=8, gpu_gb=80),
    prompt="Diagnosis: DDP on {dp} x {gpu_gb:g} GB GPUs, a {billions:g}B model, Adam in mixed "
    "precision; every GPU runs out of memory before the first step. A colleague says 'just add more GPUs'. Which "
    "change makes the model states fit? (a) 8x more GPUs, same DDP; (b) shard the optimizer states over the {dp} "
    "GPUs (ZeRO-1); (c) halve the micro-batch; (d) keep the gradients in bf16. Answer a, b, c or d.",
    options=("a", "b", "c", "d"),
    expected=_q5,
    explain=_explain_q5,
    hint_text="work out what one replica holds per parameter, and which of those bytes each change divides",
    feedback={
        "a": "adds replicas: each one still holds every byte of the model states (DP does not reduce memory)",
        "c": "shrinks only the activations; the model states alone are over the GPU's memory",
        "d": "is what mixed precision already does: the gradients are bf16, 2 of the 16 bytes",
    },
)

q6 = NumericQuestion(
    name="q6",
    params=dict(billions=70, gpu_gb=80, headroom_gb=10),
    variants=dict(billions=(30, 70, 175)),
    prompt="Design: a {billions:g}B model under ZeRO-3 on {gpu_gb:g} GB GPUs (take each as {gpu_gb:g} x 10⁹ bytes, "
    "all usable). Activations need {headroom_gb:g} GB per GPU. What is the fewest GPUs that leaves room for them?",
    expected=_q6,
    explain=_explain_q6,
    hint_text="ZeRO-3 divides all model states by the number of GPUs; what is left for them is the capacity minus "
    "the activations; round up",
    unit="",
    rel_tol=0.0,
    noun="a number of GPUs",
    scale_hint=lambda billions, gpu_gb, headroom_gb: {
        _q6(billions, gpu_gb, 0) / _q6(billions, gpu_gb, headroom_gb): "fills the GPUs with model states and leaves "
        "no room for the activations",
    },
)

q7 = ChoiceQuestion(
    name="q7",
    prompt="FP8 training with Transformer Engine's default settings (the weights stay bf16; FP8 copies are cast for "
    "the matmuls). How many bytes per parameter of model state? (a) 8: everything in one byte; (b) 15: fp8 "
    "weights + bf16 gradients + fp32 Adam; (c) 16 or more; (d) 4: fp8 weights and fp8 Adam moments. Answer a-d.",
    options=("a", "b", "c", "d"),
    expected=_q7,
    explain=_explain_q7,
    hint_text="which tensors are stored in FP8, and which only pass through it on the way into a matmul?",
    feedback={
        "a": "assumes FP8 shrinks every tensor: the optimizer's master weights and moments stay fp32",
        "b": "is the FP8-primary-weights recipe (fp8_model_init): with the default the weights stay bf16",
        "d": "assumes an FP8 optimizer: Adam's master copy and moments stay fp32 (12 bytes)",
    },
)

q8 = NumericQuestion(
    name="q8",
    params=dict(layers=64),
    variants=dict(layers=(16, 36, 64, 100)),
    prompt="Activation checkpointing by hand (Chen et al. 2016): {layers} layers, checkpoint the input of every "
    "k-th layer and recompute one segment of k layers at a time in backward. Count a checkpoint and one layer's "
    "saved activations as one unit each. With the best k, what is the peak, in units?",
    expected=_checkpoint_peak,
    explain=_explain_q8,
    hint_text="the peak is the checkpoints kept plus the segment being recomputed; write it as a function of k and "
    "minimise",
    unit="",
    rel_tol=0.0,
    noun="a number of units",
    scale_hint=lambda layers: {
        layers / _checkpoint_peak(layers): "keeps every layer's activations: that is no checkpointing",
        0.5: "counts only the checkpoints (or only the segment): backward needs both at once",
    },
)

QUESTIONS = {q.name: q for q in (q1, q2, q3, q4, q5, q6, q7, q8)}
