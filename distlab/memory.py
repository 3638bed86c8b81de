"""Per-GPU training memory: model states (weights, gradients, optimizer) and activations.

Model states follow Rajbhandari et al. 2020 (ZeRO, Sec. 3.1 and 5): mixed-precision Adam
keeps 2 (weights) + 2 (gradients) + 12 (fp32 master weights, momentum, variance) bytes
per parameter; ZeRO-1 shards the optimizer states, ZeRO-2 also the gradients, ZeRO-3 also
the weights, each over the data-parallel degree. Tensor and pipeline parallelism shard
all three over tp x pp.

Activations follow Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
Transformer Models", Sec. 4, Table 2), generalised term by term to grouped-query
attention, gated MLPs and other element sizes.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from ._arguments import (
    broadcasting,
    RECOMPUTE_MODES,
    ZERO_STAGES,
    broadcastable,
    code_array,
    flag,
    finite_result,
    number_array,
    recompute_mode,
    renamed_attribute,
    zero_stage,
)
from .errors import ConfigurationError, OutOfMemoryError
from .hardware import PRECISIONS as PEAK_PRECISIONS
from .models import param_count
from .precision import PRECISION_RECIPES, PrecisionRecipe, precision_recipe
from .units import BYTES, Q_, format_bytes, gigabytes_property, positive, positive_int


#: Free memory below which a configuration that fits on paper is flagged as tight: the reserve an engine keeps
#: (distlab.memory_recipes.RESERVE_BYTES, kept equal by a test). Lesson 1 §5, Lesson 3 §6.
TIGHT_BYTES = 2e9

#: How far the second line of MemoryBreakdown.verdict (what the capacity is) is indented under the first.
VERDICT_INDENT = "    "


def capacity_detail(capacity_text: str, reserved_bytes: float, reserved_for: str) -> str:
    """The indented line under a memory verdict that says what the capacity is ('sold as 80 GB HBM3; CUDA sees 79.11
    GiB') and, where some is reserved, what for; '' when there is neither (MemoryBreakdown.verdict,
    training.StepEstimate.explain)."""
    notes = [capacity_text] if capacity_text else []
    if reserved_bytes:
        notes.append(f"reserved, assumed: {reserved_for}")
    return f"\n{VERDICT_INDENT}({'; '.join(notes)})" if notes else ""


#: The most in-flight microbatches training_memory accepts (bounds its arithmetic; far beyond any schedule).
MAX_IN_FLIGHT = 1_000_000

__all__ = [
    "TIGHT_BYTES",
    "MAX_IN_FLIGHT",
    "ZERO_STAGES",
    "RECOMPUTE_MODES",
    "PEAK_PRECISIONS",
    "PrecisionRecipe",
    "PRECISION_RECIPES",
    "precision_recipe",
    "model_state_bytes",
    "model_state_bytes_array",
    "max_trainable_params",
    "min_gpus_to_fit",
    "activation_bytes_per_layer",
    "activation_bytes_per_layer_array",
    "op_sac_activation_bytes_per_layer_array",
    "check_tp_divides_heads",
    "layers_per_stage",
    "MemoryBreakdown",
    "gpu_capacity",
    "gpu_capacity_text",
    "training_memory",
]

#: Old names that still work, with a DeprecationWarning.
_RENAMED = {"PRECISIONS": "PRECISION_RECIPES"}


def __getattr__(name):
    return renamed_attribute(__name__, name, _RENAMED, globals())


def model_state_bytes(params, precision="mixed", zero=0, dp=1, tp=1, pp=1) -> tuple[float, float, float]:
    """Per-GPU (weights, gradients, optimizer) bytes.

    P' = params / (tp x pp); weights = w P' / (dp if ZeRO-3), gradients = g P' / (dp if
    ZeRO >= 2), optimizer = o P' / (dp if ZeRO >= 1). Source: ZeRO paper, Sec. 5.1, Fig. 1.

    Lesson 1 §1 (replicated), Lesson 3 §2 (ZeRO stages).

    >>> model_state_bytes(7e9)  # 7B, mixed-precision Adam: 14 + 14 + 84 GB
    (14000000000.0, 14000000000.0, 84000000000.0)
    >>> model_state_bytes(7e9, zero=3, dp=8)  # ZeRO-3 shards all three over 8 GPUs
    (1750000000.0, 1750000000.0, 10500000000.0)
    """
    n = param_count(params)
    recipe = precision_recipe(precision)
    stage = zero_stage(zero)
    dp = positive_int(dp, "dp")
    tp, pp = positive_int(tp, "tp"), positive_int(pp, "pp")
    w, g, o = model_state_bytes_array(n, recipe, stage, dp, tp, pp)
    return float(w), float(g), float(o)


@broadcasting
def model_state_bytes_array(params, recipe: PrecisionRecipe, zero, dp, tp, pp):
    """model_state_bytes on NumPy arrays (broadcast), unvalidated: the planner's fast path.

    Lesson 7 §5 (the planner evaluates every configuration at once).

    >>> w, g, o = model_state_bytes_array(7e9, precision_recipe('mixed'), zero=1, dp=8, tp=1, pp=1)
    >>> float(o)  # ZeRO-1: 84 GB of optimizer state / 8
    10500000000.0
    """
    if not isinstance(recipe, PrecisionRecipe):
        raise ConfigurationError(f"recipe={recipe!r} must be a PrecisionRecipe (see precision_recipe)")
    params, tp, pp = number_array(params, "params"), number_array(tp, "tp", 1.0), number_array(pp, "pp", 1.0)
    zero, dp = code_array(zero, "zero", [f"ZeRO-{z}" for z in ZERO_STAGES]), number_array(dp, "dp", 1.0)
    broadcastable(params=params, zero=zero, dp=dp, tp=tp, pp=pp)
    shard = finite_result("parameters per GPU", params / (tp * pp))
    weights = recipe.weight_bytes * shard / np.where(zero >= 3, dp, 1.0)
    gradients = recipe.gradient_bytes * shard / np.where(zero >= 2, dp, 1.0)
    optimizer = recipe.optimizer_bytes * shard / np.where(zero >= 1, dp, 1.0)
    return (
        finite_result("weight bytes per GPU", weights),
        finite_result("gradient bytes per GPU", gradients),
        finite_result("optimizer bytes per GPU", optimizer),
    )


def max_trainable_params(capacity, precision="mixed", zero=0, dp=1) -> float:
    """Largest parameter count whose model states fit `capacity` per GPU (activations ignored).

    capacity / bytes-per-parameter-per-GPU; e.g. 80 GB / 16 B = 5e9 with plain data parallelism.

    Lesson 1 §4.

    >>> max_trainable_params('80 GB') / 1e9
    5.0
    """
    cap = positive(capacity, BYTES, "capacity")
    per_param = sum(model_state_bytes(1.0, precision, zero, dp))
    return cap / per_param


def min_gpus_to_fit(params, capacity, precision="mixed") -> int:
    """Fewest GPUs whose `capacity` each holds the model states once ZeRO-3 shards all of them (activations ignored).

    params: a parameter count or a model. ceil(params x bytes per parameter / capacity): ZeRO-3 divides
    weights, gradients and optimizer states by the GPU count (Rajbhandari et al. 2020, Sec. 5).

    Lesson 1 §5 (and its question q6).

    >>> min_gpus_to_fit(70e9, "80 GB")  # 70e9 x 16 B = 1,120 GB; 1,120 GB / 80 GB
    14
    """
    cap = positive(capacity, BYTES, "capacity")
    return math.ceil(finite_result("GPUs needed", sum(model_state_bytes(params, precision)) / cap))


def activation_bytes_per_layer(
    model,
    micro_batch_size=1,
    seq_len=None,
    tp=1,
    sequence_parallel=False,
    recompute="none",
    precision="mixed",
) -> float:
    """Activation bytes one transformer layer keeps for backward, for one microbatch, on one GPU.

    Korthikanti et al. 2022, Sec. 4.1-4.2 and Table 2: per layer s*b*h*(34 + 5*a*s/h) bytes
    for GPT with 16-bit activations and 1-byte dropout masks; with tensor parallelism t,
    s*b*h*(10 + 24/t + 5*a*s/(h*t)); adding sequence parallelism divides the remaining 10
    by t too; selective recomputation drops the a*s^2 terms; full recomputation keeps only
    the layer input (2*s*b*h, divided by t with sequence parallelism). Here each term is
    written per tensor so grouped-query attention, gated MLPs, models without dropout and
    other element sizes follow from the same count.

    Lesson 1 §4 and Lesson 5 §6 (sequence parallelism); measured in Lesson 9 §2.

    >>> activation_bytes_per_layer('llama2-7b', seq_len=4096, recompute='full')  # the layer input: 4096 x 4096 x 2 B
    33554432.0
    """
    if not hasattr(model, "layers"):
        from . import models

        model = models.model(model)
    b = positive_int(micro_batch_size, "micro_batch_size")
    s = positive_int(seq_len if seq_len is not None else model.seq_len, "seq_len")
    t = positive_int(tp, "tp")
    mode = recompute_mode(recompute)
    recipe = precision_recipe(precision)
    check_tp_divides_heads(model, t)
    return float(
        activation_bytes_per_layer_array(
            model,
            b,
            s,
            t,
            flag(sequence_parallel, "sequence_parallel"),
            RECOMPUTE_MODES.index(mode),
            recipe.activation_bytes,
        )
    )


def check_tp_divides_heads(model, tp: int) -> None:
    """Tensor parallelism splits attention by heads: tp must divide the head count.

    Lesson 5 §3.

    >>> from distlab import models
    >>> check_tp_divides_heads(models.model('llama2-7b'), 3)
    Traceback (most recent call last):
        ...
    distlab.errors.ConfigurationError: tp=3 does not divide the 32 attention heads; valid: 1, 2, 4, 8, 16, 32
    """
    if isinstance(model, str):
        from . import models

        model = models.model(model)
    if not isinstance(getattr(model, "heads", None), int):
        raise ConfigurationError(f"model={model!r} must be a model name or a TransformerModel")
    tp = positive_int(tp, "tp")
    a = model.heads
    if a % tp:
        valid = ", ".join(str(d) for d in range(1, a + 1) if a % d == 0)
        raise ConfigurationError(f"tp={tp} does not divide the {a} attention heads; valid: {valid}")


@broadcasting
def activation_bytes_per_layer_array(
    model, micro_batch_size, seq_len, tp, sequence_parallel, recompute_code, element_bytes
):
    """activation_bytes_per_layer on NumPy arrays (broadcast), unvalidated: the planner's fast path.

    recompute_code indexes RECOMPUTE_MODES (0 none, 1 selective, 2 full).

    Lesson 7 §5 (the planner).

    >>> from distlab import models
    >>> activation_bytes_per_layer_array(models.model('llama2-7b'), 1, 4096, 1, False, 2, 2.0)  # full recompute
    array(33554432.)
    """
    if not all(hasattr(model, a) for a in ("hidden", "heads", "ffn", "kv_heads", "dropout", "gated_mlp")):
        raise ConfigurationError(f"model={model!r} must be a TransformerModel (see distlab.models.model)")
    b = number_array(micro_batch_size, "micro_batch_size")
    s = number_array(seq_len, "seq_len")
    t = number_array(tp, "tp", 1.0)
    code = code_array(recompute_code, "recompute_code", RECOMPUTE_MODES)
    e = float(positive(element_bytes, BYTES, "element_bytes"))
    h, a, f = model.hidden, model.heads, model.ffn
    kv = model.kv_heads * (h // a)
    mask = 1.0 if model.dropout else 0.0
    tokens = s * b
    sp_div = np.where(np.asarray(sequence_parallel, dtype=bool), t, 1.0)

    # Per token, not split by tensor parallelism: two layernorm inputs, the attention
    # block input and the MLP input, and the two dropout masks after attention and MLP.
    replicated = (2 * h + h + h) * e + 2 * h * mask
    # Per token, split over t: Q, K, V, the output-projection input, and the MLP inner
    # activations (ungated: activation-function input and down-projection input; gated:
    # gate output, up output and their product).
    mlp_inner = (3 if model.gated_mlp else 2) * f * e
    split = (h + 2 * kv + h) * e + mlp_inner
    # Per microbatch, split over t: softmax output (e), dropout mask (1) and dropout output (e).
    scores = a * s * s * b * (e + (1 + e) * mask)

    kept = tokens * replicated / sp_div + tokens * split / t + np.where(code == 0, scores / t, 0.0)
    # Full recomputation keeps only each layer's input.
    return finite_result("activation bytes", np.where(code == 2, tokens * h * e / sp_div, kept))


@broadcasting
def op_sac_activation_bytes_per_layer_array(model, micro_batch_size, seq_len, tp, sequence_parallel, element_bytes):
    """Activation bytes one layer keeps under torchtitan's selective op checkpointing, per microbatch and GPU
    (NumPy broadcast, unvalidated): the layer's input, which the checkpoint keeps, plus the outputs its policy
    saves: attention's (SDPA) output, every other matmul output (the 1st, 3rd, 5th, 7th of a Llama block: q, v,
    the gate projection and the down projection; the k, output and up projections are recomputed) and, with
    sequence parallelism, the two reduce-scatter outputs. Per token, e bytes per element, t = tp:
    e (h / sp + (h + kv + f) / t + h / t + [gated] h_down + [sp, t > 1] 2 h / t), where the row-parallel down
    projection's saved output is its full b s h partial sum before the reduce-scatter (h, not h / t).
    Source: pytorch/torchtitan@3faaa1a0d torchtitan/parallelisms/parallelize_llama.py (_save_list: aten.mm,
    the flash and efficient SDPA ops, _c10d_functional.reduce_scatter_tensor; _custom_policy: "Saves output of
    all compute ops, except every second mm", its count restarting for each layer) and models/llama/model.py
    (the matmul order: wq, wk, wv, wo; w1, w3, w2). SDPA's log-sum-exp (4 bytes per head and token, 0.2% of a
    Llama 2 70B layer) is not counted. Lesson 7 §2.

    >>> from distlab import models
    >>> float(op_sac_activation_bytes_per_layer_array(models.model('llama2-70b'), 1, 4096, 1, False, 2.0))
    511705088.0
    """
    if not all(hasattr(model, a) for a in ("hidden", "heads", "ffn", "kv_heads", "gated_mlp")):
        raise ConfigurationError(f"model={model!r} must be a TransformerModel (see distlab.models.model)")
    b, s = number_array(micro_batch_size, "micro_batch_size"), number_array(seq_len, "seq_len")
    t = number_array(tp, "tp", 1.0)
    e = float(positive(element_bytes, BYTES, "element_bytes"))
    h, f = model.hidden, model.ffn
    kv = model.kv_heads * (h // model.heads)
    sp = np.asarray(sequence_parallel, dtype=bool)
    sp_div = np.where(sp, t, 1.0)
    # q, v and the first MLP matmul (split over t), SDPA's output (split), and the gated block's 7th matmul
    # (the down projection: row-parallel, its whole output); with SP the two reduce-scatter outputs
    per_token = h / sp_div + (h + kv + f) / t + h / t + (h if model.gated_mlp else 0.0)
    per_token = per_token + np.where(sp & (t > 1), 2.0 * h / t, 0.0)
    return finite_result("activation bytes", s * b * per_token * e)


def layers_per_stage(layers: int, pp: int) -> int:
    """Layers on the busiest pipeline stage: ceil(layers / pp).

    Lesson 4 §5 and Lesson 6 §3.

    >>> layers_per_stage(80, 3)
    27
    """
    pp, layers = positive_int(pp, "pp"), positive_int(layers, "layers")
    if pp > layers:
        raise ConfigurationError(
            f"pp={pp} is more pipeline stages than the model's {layers} layers; valid: 1 to {layers}"
        )
    return math.ceil(layers / pp)


@dataclass(frozen=True)
class MemoryBreakdown:
    """Per-GPU training memory in bytes, and whether it fits the GPU's capacity."""

    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    capacity_bytes: float | None = None
    gpu_name: str | None = None
    activations_counted: bool = True
    config: dict = field(default_factory=dict)
    reserved_bytes: float = 0.0  # of the capacity, out of the model's reach (distlab.memory_recipes.RESERVE_BYTES)
    capacity_text: str = ""  # what the capacity is (Accelerator.memory_text: 'sold as 80 GB HBM3; CUDA sees 79.11 GiB')

    @property
    def model_states_bytes(self) -> float:
        return self.weights_bytes + self.gradients_bytes + self.optimizer_bytes

    @property
    def total_bytes(self) -> float:
        return self.model_states_bytes + self.activations_bytes

    @property
    def fits(self) -> bool | None:
        """True if total <= capacity; None when no GPU was given."""
        if self.capacity_bytes is None:
            return None
        return self.total_bytes <= self.capacity_bytes - self.reserved_bytes

    @property
    def headroom_bytes(self) -> float | None:
        """capacity - total: positive is free memory, negative is the overflow."""
        if self.capacity_bytes is None:
            return None
        return self.capacity_bytes - self.reserved_bytes - self.total_bytes

    # Quantities for display
    weights = gigabytes_property("weights_bytes")
    gradients = gigabytes_property("gradients_bytes")
    optimizer = gigabytes_property("optimizer_bytes")
    activations = gigabytes_property("activations_bytes")
    total = gigabytes_property("total_bytes")

    def parts(self) -> dict[str, float]:
        """Component name -> bytes, in stacking order."""
        return {
            "weights": self.weights_bytes,
            "gradients": self.gradients_bytes,
            "optimizer": self.optimizer_bytes,
            "activations": self.activations_bytes,
        }

    def verdict(self) -> str:
        """'fits the 84.9 GB of h100-sxm, 12.3 GB free' or 'does not fit: 40 GB over the 84.9 GB of h100-sxm' ('' without
        a GPU); what the capacity is ('sold as 80 GB HBM3; CUDA sees 79.11 GiB') and what is reserved follow on an
        indented line of their own, so that no printed line is wider than a notebook's output (VERDICT_INDENT)."""
        capacity, headroom = self.capacity_bytes, self.headroom_bytes
        if capacity is None or headroom is None:
            return ""
        gpu = f" of {self.gpu_name}" if self.gpu_name else ""
        if self.reserved_bytes:
            gpu += f" less {format_bytes(self.reserved_bytes)} reserved"
        detail = capacity_detail(self.capacity_text, self.reserved_bytes, "CUDA context, NCCL buffers")
        if self.fits:
            text = f"fits the {format_bytes(capacity)}{gpu}, {format_bytes(headroom)} free{detail}"
            if not self.reserved_bytes and headroom < TIGHT_BYTES:
                # the ZeRO paper's count reserves nothing; a real engine keeps about this much for itself
                text += (
                    f"\n{VERDICT_INDENT}(on paper: a real engine keeps about {format_bytes(TIGHT_BYTES)} for the CUDA "
                    f"context and NCCL buffers, distlab.memory_recipes)"
                )
            return text
        return f"does not fit: {format_bytes(-headroom)} over the {format_bytes(capacity)}{gpu}{detail}"

    def summary(self) -> str:
        """A few lines of text: each component, the total, and the verdict."""
        lines = [f"{name:<12}{format_bytes(value):>10}" for name, value in self.parts().items()]
        if not self.activations_counted:
            lines[-1] += "  (not counted)"
        lines.append(f"{'total':<12}{format_bytes(self.total_bytes):>10}")
        if self.capacity_bytes is not None:
            lines.append(self.verdict())
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def to_dict(self) -> dict:
        """Plain numbers (bytes) for JSON."""
        return {
            "weights_bytes": self.weights_bytes,
            "gradients_bytes": self.gradients_bytes,
            "optimizer_bytes": self.optimizer_bytes,
            "activations_bytes": self.activations_bytes,
            "total_bytes": self.total_bytes,
            "capacity_bytes": self.capacity_bytes,
            "headroom_bytes": self.headroom_bytes,
            "fits": self.fits,
            "gpu": self.gpu_name,
            "activations_counted": self.activations_counted,
            "reserved_bytes": self.reserved_bytes,
            "capacity_text": self.capacity_text,
            **self.config,
        }

    def check(self) -> "MemoryBreakdown":
        """Return self if it fits (or no GPU was given); raise OutOfMemoryError otherwise."""
        if self.capacity_bytes is not None and self.fits is False:
            raise OutOfMemoryError(self.verdict(), needed_bytes=self.total_bytes, capacity_bytes=self.capacity_bytes)
        return self


@functools.lru_cache(maxsize=256)
def _is_quantity_text(text: str) -> bool:
    """'80 GB' True, 'h100-sxm' False; remembered (pint's units are fixed; its parse was a third of lesson 3's fill)"""
    try:
        return hasattr(Q_(text), "units")
    except Exception:  # pint raises several types for text it cannot read: then it is a name
        return False


def gpu_capacity(gpu) -> tuple[float, str | None]:
    """(capacity in bytes, name) from an Accelerator, a catalog name, or a quantity such as '80 GB'.

    Lesson 1 §2 (the capacity line every memory chart draws).

    A catalog part's capacity is the total CUDA reports (distlab.hardware_catalog cites each): 79.11 GiB for an H100
    sold as "80 GB".

    >>> gpu_capacity('h100-sxm')[1]
    'h100-sxm'
    """
    acc = _accelerator_of(gpu)
    if acc is not None:
        return float(acc.memory_bytes), getattr(acc, "name", None)
    return positive(gpu, BYTES, "gpu memory"), None


def _accelerator_of(gpu):
    """The Accelerator that `gpu` names (an Accelerator or a catalog name), or None for a quantity."""
    if hasattr(gpu, "memory_bytes"):
        return gpu
    if isinstance(gpu, str) and not _is_quantity_text(gpu):
        from . import hardware

        return hardware.accelerator(gpu)
    return None


def gpu_capacity_text(gpu) -> str:
    """What `gpu`'s capacity is, for a student (Accelerator.memory_text); '' for a bare quantity. Lesson 1 §2.

    >>> gpu_capacity_text('h100-sxm')
    'sold as 80 GB HBM3; CUDA sees 79.11 GiB'
    """
    acc = _accelerator_of(gpu)
    return acc.memory_text() if acc is not None and hasattr(acc, "memory_text") else ""


def training_memory(
    model,
    *,
    precision="mixed",
    zero=0,
    dp=1,
    tp=1,
    pp=1,
    micro_batch_size=1,
    seq_len=None,
    recompute="none",
    sequence_parallel=False,
    in_flight_microbatches=None,
    gpu=None,
    count_activations=True,
) -> MemoryBreakdown:
    """Per-GPU training memory for a model (a TransformerModel, a catalog name, or a bare parameter count).

    Model states from model_state_bytes; activations = activation_bytes_per_layer x
    ceil(layers / pp) x in-flight microbatches (default pp: the first stage of a 1F1B
    pipeline holds pp microbatches, Korthikanti et al. 2022 Sec. 4.2.3; a fraction is allowed, e.g. the
    interleaved schedule's p (1 + (p - 1) / (p v)), pipeline.in_flight_array). A bare parameter
    count has no layer shapes, so its activations are not counted (and flagged), as with
    count_activations=False.
    Embedding and output-layer (logit) buffers are not counted.

    Lesson 1 §2-§5; Lesson 3 §6, Lesson 4 §5, Lesson 6 §5.

    >>> bd = training_memory('llama2-7b', zero=1, dp=8, recompute='selective', gpu='h100-sxm')
    >>> print(bd.summary())
    weights        13.5 GB
    gradients      13.5 GB
    optimizer      10.1 GB
    activations    17.2 GB
    total          54.3 GB
    fits the 84.9 GB of h100-sxm, 30.6 GB free
        (sold as 80 GB HBM3; CUDA sees 79.11 GiB)
    >>> bd = training_memory('llama2-7b', tp=8, pp=4, recompute='selective', in_flight_microbatches=4.75)
    >>> bd.activations_bytes  # 4096 tokens x (4h x 2 B + ((4h) x 2 B + 3 x 11008 x 2 B) / 8) x 8 layers x 4.75
    7022837760.0
    """
    if isinstance(model, str):
        from . import models

        model = models.model(model)
    recipe = precision_recipe(precision)
    stage = zero_stage(zero)
    dp, tp, pp = positive_int(dp, "dp"), positive_int(tp, "tp"), positive_int(pp, "pp")
    mode = recompute_mode(recompute)
    w, g, o = model_state_bytes(model, recipe, stage, dp, tp, pp)
    has_shape = hasattr(model, "layers") and flag(count_activations, "count_activations")
    if has_shape:
        stage_layers = layers_per_stage(model.layers, pp)
        # a fraction is allowed: the interleaved schedule's first stage holds p (1 + (p - 1) / (p v)) on average
        in_flight = (
            pp if in_flight_microbatches is None else positive(in_flight_microbatches, "", "in_flight_microbatches")
        )
        if in_flight > MAX_IN_FLIGHT:
            raise ConfigurationError(f"in_flight_microbatches={in_flight:g} must be at most {MAX_IN_FLIGHT:,}")
        per_layer = activation_bytes_per_layer(model, micro_batch_size, seq_len, tp, sequence_parallel, mode, recipe)
        activations = per_layer * stage_layers * in_flight
    else:
        positive_int(micro_batch_size, "micro_batch_size")
        activations = 0.0
    capacity, gpu_name = (None, None) if gpu is None else gpu_capacity(gpu)
    config = dict(
        model=getattr(model, "name", None),
        params=param_count(model),
        precision=recipe.name,
        zero=stage,
        dp=dp,
        tp=tp,
        pp=pp,
        micro_batch_size=int(micro_batch_size),
        seq_len=(seq_len if seq_len is not None else getattr(model, "seq_len", None)),
        recompute=mode,
        sequence_parallel=flag(sequence_parallel, "sequence_parallel"),
    )
    text = "" if gpu is None else gpu_capacity_text(gpu)
    return MemoryBreakdown(w, g, o, activations, capacity, gpu_name, has_shape, config, capacity_text=text)


@broadcasting
def message_bytes(micro_batch_size, seq_len, hidden, element_bytes=2.0):
    """Bytes of one b x s x h activation tensor, b x s x h x element_bytes: the message a pipeline stage
    sends its neighbour and a TP all-reduce moves (NumPy broadcast, unvalidated; a float for scalars).
    The one copy behind pipeline.boundary_message_bytes, tensor.tp_message_bytes and
    training.p2p_message_bytes. Lesson 4 §7, Lesson 5.

    >>> message_bytes(1, 4096, 8192, 2)
    67108864.0
    """
    arrays = dict(
        micro_batch_size=number_array(micro_batch_size, "micro_batch_size"),
        seq_len=number_array(seq_len, "seq_len"),
        hidden=number_array(hidden, "hidden"),
        element_bytes=number_array(element_bytes, "element_bytes"),
    )
    broadcastable(**arrays)
    result = finite_result(
        "message bytes", arrays["micro_batch_size"] * arrays["seq_len"] * arrays["hidden"] * arrays["element_bytes"]
    )
    return float(result) if np.ndim(result) == 0 else result
