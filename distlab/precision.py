"""Precision recipes: bytes per parameter for weights, gradients and optimizer state, and per activation element.

Mixed-precision Adam keeps 2 (weights) + 2 (gradients) + 12 (fp32 master weights, momentum, variance) bytes per
parameter (Rajbhandari et al. 2020, ZeRO, Sec. 3.1). distlab.memory prices model states and activations with
these recipes (and re-exports them). Lesson 1 §1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._catalog import lookup
from .hardware import PRECISIONS as PEAK_PRECISIONS

__all__ = ["PrecisionRecipe", "PRECISION_RECIPES", "precision_recipe"]


@dataclass(frozen=True)
class PrecisionRecipe:
    """Bytes per parameter for weights, gradients and optimizer state, and per activation element.

    activation_bytes: bytes per element of the activations saved for the backward pass (and of the
    K/V blocks context parallelism passes around its ring). message_bytes: bytes per element of the
    activations and activation gradients that tensor-parallel collectives and pipeline sends carry
    (default: activation_bytes). compute_precision: the distlab.hardware peak the matmuls run at
    (default: the recipe's name when it is a hardware precision, else 'bf16'). elementwise_bytes: bytes per
    element the element-wise kernels (norms, activations, residual adds, the loss) read and write (default:
    activation_bytes). core_precision: the peak the attention core runs at (default: compute_precision; 'bf16'
    for an FP8 one: FP8 recipes cast only the weight GEMMs' inputs, Lesson 7 §8). The defaults keep recipes built
    with the original six fields working unchanged.
    """

    name: str
    weight_bytes: float
    gradient_bytes: float
    optimizer_bytes: float
    activation_bytes: float
    description: str
    source: str
    # None (the default) is replaced in __post_init__: the attributes are always set, hence their types
    message_bytes: float = None  # type: ignore[assignment]
    compute_precision: str = None  # type: ignore[assignment]
    elementwise_bytes: float = None  # type: ignore[assignment]
    core_precision: str = None  # type: ignore[assignment]

    def __post_init__(self):
        if self.message_bytes is None:
            object.__setattr__(self, "message_bytes", self.activation_bytes)
        if self.compute_precision is None:
            name = str(self.name).strip().lower()
            object.__setattr__(self, "compute_precision", name if name in PEAK_PRECISIONS else "bf16")
        if self.elementwise_bytes is None:
            object.__setattr__(self, "elementwise_bytes", self.activation_bytes)
        if self.core_precision is None:
            fp8 = self.compute_precision == "fp8"
            object.__setattr__(self, "core_precision", "bf16" if fp8 else self.compute_precision)

    @property
    def bytes_per_param(self) -> float:
        """Model-state bytes per parameter without sharding (16 for mixed-precision Adam)."""
        return self.weight_bytes + self.gradient_bytes + self.optimizer_bytes


_MIXED: dict[str, Any] = dict(
    weight_bytes=2,
    gradient_bytes=2,
    optimizer_bytes=12,
    activation_bytes=2,
    description="16-bit weights and gradients; fp32 master weights, Adam momentum and variance (4+4+4)",
    source="Rajbhandari et al. 2020 (ZeRO), Sec. 3.1: 2 + 2 + K bytes with K = 12",
)

PRECISION_RECIPES = {
    "mixed": PrecisionRecipe("mixed", **_MIXED, compute_precision="bf16"),
    "bf16": PrecisionRecipe("bf16", **_MIXED, compute_precision="bf16"),
    "fp16": PrecisionRecipe("fp16", **_MIXED, compute_precision="fp16"),
    "fp32": PrecisionRecipe(
        "fp32",
        weight_bytes=4,
        gradient_bytes=4,
        optimizer_bytes=8,
        activation_bytes=4,
        description="fp32 weights and gradients; Adam momentum and variance in fp32 (4+4); no extra master copy",
        source="Adam keeps two fp32 moments per parameter (Kingma & Ba 2015); ZeRO Sec. 3.1 with K = 8",
        compute_precision="fp32",
    ),
    "fp8": PrecisionRecipe(
        "fp8",
        weight_bytes=1,
        gradient_bytes=2,
        optimizer_bytes=12,
        activation_bytes=1,
        message_bytes=2,
        compute_precision="fp8",
        elementwise_bytes=2,
        core_precision="bf16",
        # Only the layers' weight GEMMs run in FP8 (not the output layer: step.compute): TE's norms, activations,
        # residual adds, attention core and loss read and write bf16 (elementwise_bytes = 2; the casts into FP8 are
        # priced apart, distlab.elementwise.fp8_cast_bytes_array), and the attention core runs at the bf16 peak
        # (core_precision).
        # FP8 is the input format of the GEMMs: their outputs are bf16, so the row-parallel all-reduce /
        # reduce-scatter sums bf16, backward TP collectives carry bf16 gradients and pipeline stages send the
        # bf16 residual stream and its gradient (message_bytes = 2). Saved activations at 1 byte is distlab's
        # simplification and an upper bound on the saving: Transformer Engine keeps FP8 copies only of GEMM
        # inputs; LayerNorm inputs, the softmax output and other saved tensors stay bf16. Context-parallel K/V
        # blocks are exchanged in 1 byte (FP8 attention can pass FP8 K/V). Engines may keep a bf16 weight copy.
        description="fp8 weights for the matmuls, bf16 gradients, fp32 master weights and Adam moments; saved "
        "activations in 8 bits (an upper bound on the saving), bf16 messages between GPUs",
        source="Micikevicius et al. 2022, 'FP8 Formats for Deep Learning'; NVIDIA Transformer Engine docs "
        "(FP8 GEMM inputs with higher-precision outputs; FP8 DotProductAttention); Megatron-LM FP8 training; "
        "accounting as in ZeRO Sec. 3.1",
    ),
}


def precision_recipe(name) -> PrecisionRecipe:
    """Look up a precision recipe by name ('mixed', 'bf16', 'fp16', 'fp32', 'fp8'), or pass one through.

    Lesson 1 §1.

    >>> precision_recipe('mixed').bytes_per_param  # 2 + 2 + 12 (ZeRO Sec. 3.1)
    16
    """
    if isinstance(name, PrecisionRecipe):
        return name
    return lookup(PRECISION_RECIPES, name, "precision")
