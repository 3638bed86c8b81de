"""Activation bytes one transformer layer keeps for backward, measured in PyTorch, next to distlab.memory.

Every tensor autograd saves during the forward pass goes through
``torch.autograd.graph.saved_tensors_hooks``; the pack hook records its storage (by
``untyped_storage().data_ptr()``, so views of one buffer count once) and which operation of
the layer saved it. Parameters (weights a matmul saves) are not activations and are left out.
Recomputation uses ``torch.utils.checkpoint`` (non-reentrant): selective wraps the attention
core (Q K^T, softmax, dropout, attention x V), full wraps the whole layer; the checkpoint saves
its inputs through the same hooks, so they are counted.

Prediction: ``distlab.memory.activation_bytes_per_layer(..., precision="bf16")``, Korthikanti
et al. 2022 Table 2: s*b*h*(34 + 5*a*s/h) bytes, 34*s*b*h with selective and 2*s*b*h with full
recomputation.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import ConfigurationError
from ..memory import RECOMPUTE_MODES
from ._modules import build_layer, checkpoint_fn
from ._torch import require_torch
from .model_state import lesson_model


@dataclass(frozen=True)
class SavedTensor:
    """One distinct storage autograd keeps for backward: the operation that saved it first."""

    op: str
    shape: tuple
    dtype: str
    nbytes: int  # bytes of the whole storage
    view: bool  # the saved tensor is a view of a larger buffer (nbytes > its own size)


class SavedTensorRecorder:
    """The pack hook of torch.autograd.graph.saved_tensors_hooks that records each distinct storage autograd saves
    (by untyped_storage().data_ptr(), so views of one buffer count once), leaving out the storages in `params`,
    with the operation last named by mark(). Lesson 9 §2, Lesson 10 §4."""

    def __init__(self, params: set, op: str = "?"):
        self.params, self.op = params, op
        self.found: dict[int, SavedTensor] = {}

    def mark(self, name: str) -> None:
        self.op = name

    def pack(self, t):
        storage = t.untyped_storage()
        key = storage.data_ptr()
        if key not in self.params and key not in self.found:
            self.found[key] = SavedTensor(
                self.op,
                tuple(t.shape),
                str(t.dtype).replace("torch.", ""),
                storage.nbytes(),
                storage.nbytes() > t.numel() * t.element_size(),
            )
        return t

    @property
    def saved(self) -> tuple:
        """SavedTensor of each storage, in the order the forward pass saved them."""
        return tuple(self.found.values())


@dataclass(frozen=True)
class ActivationMeasurement:
    """Bytes saved for backward by one layer, itemised, with distlab's prediction."""

    model_name: str
    micro_batch_size: int
    seq_len: int
    hidden: int
    heads: int
    recompute: str
    dropout_impl: str
    attention: str
    saved: tuple  # SavedTensor, in the order the forward pass saved them
    predicted_bytes: float
    rng_state_bytes: int  # CPU RNG state each checkpoint keeps to replay dropout (not a saved tensor)
    attention_node: str = ""  # attention='sdpa': autograd node of its output, which names the kernel that ran

    @property
    def measured_bytes(self) -> int:
        return sum(t.nbytes for t in self.saved)

    @property
    def gap_bytes(self) -> float:
        """measured - predicted."""
        return self.measured_bytes - self.predicted_bytes

    @property
    def sbh(self) -> int:
        return self.seq_len * self.micro_batch_size * self.hidden

    def bytes_of(self, predicate) -> int:
        """Total bytes of the saved tensors for which predicate(SavedTensor) is true."""
        return sum(t.nbytes for t in self.saved if predicate(t))

    @property
    def layernorm_stats_bytes(self) -> int:
        """Per-token mean and 1/std each LayerNorm saves: shape (s, b, 1), not in Korthikanti's count."""
        return self.bytes_of(lambda t: t.op.startswith("LayerNorm") and len(t.shape) == 3 and t.shape[-1] == 1)

    def table(self) -> str:
        """One line per saved storage: operation, shape, dtype, bytes, and bytes / (s b h)."""
        lines = [f"{'saved by':<36}{'shape':>16} {'dtype':<9}{'bytes':>10}{'/ sbh':>9}"]
        for t in self.saved:
            shape = "x".join(map(str, t.shape)) + (" (view)" if t.view else "")
            lines.append(f"{t.op:<36}{shape:>16} {t.dtype:<9}{t.nbytes:>10,}{t.nbytes / self.sbh:>9.4g}")
        lines.append(f"{'total':<36}{'':>16} {'':<9}{self.measured_bytes:>10,}{self.measured_bytes / self.sbh:>9.4g}")
        return "\n".join(lines)


def cpu_rng_state_layout() -> tuple[int, int]:
    """Bytes of torch.get_rng_state() on a CPU, from the C struct it copies: (legacy part, whole state).

    torch copies at::detail::CPUGeneratorImplState (aten/src/ATen/CPUGeneratorImpl.cpp): a legacy struct
    {uint64 seed; int left, seeded; uint64 next; uint64 state[624] (the Mersenne Twister's 624 words, one per
    8-byte slot); double normal_x, normal_y, normal_rho; int normal_is_valid}, padded to 8 bytes, then a float
    and a bool (the cached normal sample), padded to 8 again. Lesson 9 §2 (what checkpointing keeps besides
    tensors). The measured size is ActivationMeasurement.rng_state_bytes.

    >>> cpu_rng_state_layout()
    (5048, 5056)
    """

    def round8(n):  # a struct holding 8-byte fields is padded to a multiple of 8 bytes
        return -(-n // 8) * 8

    legacy = round8(8 + 4 + 4 + 8 + 624 * 8 + 3 * 8 + 4)
    return legacy, round8(legacy + 4 + 1)


def _check_shape(model):
    if model.gated_mlp or model.kv_heads != model.heads or model.norm != "layernorm":
        raise ConfigurationError(
            f"model {model.name!r}: the activation measurement follows Korthikanti et al.'s GPT layer "
            f"(LayerNorm, multi-head attention, ungated 4h MLP); got norm={model.norm}, "
            f"kv_heads={model.kv_heads} of heads={model.heads}, gated_mlp={model.gated_mlp}"
        )


def measure_activations(
    model=None,
    micro_batch_size=2,
    seq_len=None,
    recompute="none",
    dropout=0.1,
    dropout_impl="native",
    attention="math",
    seed=0,
) -> ActivationMeasurement:
    """Run one bf16 layer of `model` (default: lesson_model()) forward on (s, b, h) and itemise what it saves.

    recompute: 'none', 'selective' (checkpoint the attention core) or 'full' (checkpoint the layer).
    dropout_impl: 'native' (torch.native_dropout, F.dropout's GPU kernel: 1-byte bool mask) or
    'functional' (F.dropout on CPU, which keeps a noise tensor in the activation dtype).
    attention: 'math' (explicit Q K^T, softmax, dropout, x V) or 'sdpa' (F.scaled_dot_product_attention
    on (b, a, s, d); on a CPU its flash kernel runs only without dropout, else the math fallback:
    see attention_node). The layer is in training mode, so dropout is active and its masks are saved.
    """
    torch = require_torch()
    from ..memory import activation_bytes_per_layer

    model = lesson_model() if model is None else model
    _check_shape(model)
    if not dropout or not model.dropout:  # no dropout layers: nothing to mask, and none predicted
        model, dropout = replace(model, dropout=False), 0.0
    if recompute not in RECOMPUTE_MODES:
        raise ConfigurationError(
            f"recompute={recompute!r} is not a recomputation mode; valid: {', '.join(RECOMPUTE_MODES)}"
        )
    s = model.seq_len if seq_len is None else int(seq_len)
    b, h = int(micro_batch_size), model.hidden
    layer = build_layer(model, dropout, dropout_impl, attention, seed).to(torch.bfloat16).train()
    params = {p.untyped_storage().data_ptr() for p in layer.parameters()}
    recorder = SavedTensorRecorder(params, "layer input (checkpoint)" if recompute == "full" else "?")
    x = torch.randn(s, b, h, dtype=torch.bfloat16, generator=torch.Generator().manual_seed(seed), requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(recorder.pack, lambda t: t):
        if recompute == "full":
            out = checkpoint_fn()(layer, x, use_reentrant=False)
        else:
            out = layer(x, recompute, recorder.mark)
    out.float().sum().backward()  # the saved tensors really are what backward needs
    checkpoints = 0 if recompute == "none" else 1
    return ActivationMeasurement(
        model_name=model.name,
        micro_batch_size=b,
        seq_len=s,
        hidden=h,
        heads=model.heads,
        recompute=recompute,
        dropout_impl=dropout_impl,
        attention=attention,
        saved=recorder.saved,
        predicted_bytes=activation_bytes_per_layer(model, b, s, recompute=recompute, precision="bf16"),
        rng_state_bytes=checkpoints * torch.get_rng_state().numel(),
        attention_node=layer.attention_node,
    )
