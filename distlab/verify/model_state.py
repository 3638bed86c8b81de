"""Model-state bytes of a real PyTorch model after a real Adam step, next to distlab.memory's count.

Measured: the distinct storages (``untyped_storage().nbytes()``) of the parameters, their
gradients and every tensor in the optimizer's state after ``optimizer.step()``. Predicted:
``distlab.memory.model_state_bytes`` (fp32: 4 + 4 + 8 bytes per parameter; mixed precision:
2 + 2 + 12). The one gap is Adam's ``step`` counter: torch keeps it as a 0-d float32 tensor
per parameter tensor, 4 bytes each, which a bytes-per-parameter count leaves out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ConfigurationError
from ..units import format_bytes
from ._modules import build_gpt
from ._torch import require_torch, unique_storage_bytes

MEASURED_PRECISIONS = ("fp32", "mixed")


def lesson_model():
    """The lesson's small GPT-2-style model: 4 layers, hidden 256, 4 heads, vocab 1000, 128 tokens."""
    from ..models import TransformerModel

    return TransformerModel(
        name="tiny-gpt",
        layers=4,
        hidden=256,
        heads=4,
        ffn=1024,
        vocab=1000,
        seq_len=128,
        biases=True,
        tied_embeddings=True,
        position_embeddings=128,
        dropout=True,
        source="distlab lesson 9: a GPT-2-shaped model small enough to train on a laptop CPU",
    )


@dataclass(frozen=True)
class ModelStateMeasurement:
    """Measured and predicted model-state bytes (weights, gradients, optimizer) of one model."""

    model_name: str
    precision: str
    params_counted: int  # model.parameter_count() (distlab)
    params_in_module: int  # sum(p.numel() for p in module.parameters()) (PyTorch)
    param_tensors: int
    weights_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    optimizer_parts: dict = field(default_factory=dict)  # name -> bytes (master weights, exp_avg, ...)
    predicted: tuple = (0.0, 0.0, 0.0)  # distlab: (weights, gradients, optimizer)

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.gradients_bytes + self.optimizer_bytes

    @property
    def predicted_bytes(self) -> float:
        return float(sum(self.predicted))

    @property
    def gap_bytes(self) -> float:
        """measured - predicted."""
        return self.total_bytes - self.predicted_bytes

    def table(self) -> str:
        """Measured next to predicted, per component, in bytes."""
        rows = [
            ("weights", self.weights_bytes, self.predicted[0]),
            ("gradients", self.gradients_bytes, self.predicted[1]),
            ("optimizer", self.optimizer_bytes, self.predicted[2]),
            ("total", self.total_bytes, self.predicted_bytes),
        ]
        lines = [f"{'':<11}{'measured (B)':>14}{'distlab (B)':>14}{'gap (B)':>9}"]
        for name, measured, predicted in rows:
            lines.append(
                f"{name:<11}{measured:>14,}{int(predicted):>14,}{int(measured - predicted):>9,}"
                f"   ({format_bytes(measured)})"
            )
        for name, value in self.optimizer_parts.items():
            lines.append(f"  optimizer: {name:<16}{value:>12,} B")
        return "\n".join(lines)


def _batch(torch, model, micro_batch_size, seq_len, seed):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(model.vocab, (micro_batch_size, seq_len + 1), generator=g)
    return tokens[:, :-1], tokens[:, 1:]


def _loss(torch, module, inputs, targets):
    logits = module(inputs)  # (s, b, V)
    return torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.t().reshape(-1))


def measure_model_state(
    model=None, precision="fp32", micro_batch_size=2, seq_len=None, seed=0, lr=1e-3
) -> ModelStateMeasurement:
    """Train `model` (default: lesson_model()) one step with torch.optim.Adam and measure its model states.

    precision="fp32": an fp32 module and Adam on it (4 + 4 + 8 bytes per parameter predicted).
    precision="mixed": a bf16 module (weights and gradients 2 + 2 bytes) and Adam on fp32 master
    copies (4 + 4 + 4); the fp32 copy of the gradients is made for the step and freed after it,
    as in the ZeRO paper's accounting (Megatron-LM keeps fp32 gradient buffers: + 4 bytes).
    """
    torch = require_torch()
    from ..memory import model_state_bytes

    if precision not in MEASURED_PRECISIONS:
        raise ConfigurationError(
            f"precision={precision!r} is not measured here; valid: {', '.join(MEASURED_PRECISIONS)}"
        )
    model = lesson_model() if model is None else model
    seq_len = model.seq_len if seq_len is None else seq_len
    module = build_gpt(model, seed=seed).train()
    inputs, targets = _batch(torch, model, micro_batch_size, seq_len, seed)
    params = list(module.parameters())  # shared (tied) parameters appear once
    parts = {}
    if precision == "fp32":
        optimizer = torch.optim.Adam(params, lr=lr)
        _loss(torch, module, inputs, targets).backward()
        optimizer.step()
        state_tensors: dict[str, list] = {}
        for p in params:
            for name, value in optimizer.state[p].items():
                state_tensors.setdefault(name, []).append(value)
    else:
        module = module.to(torch.bfloat16)
        params = list(module.parameters())
        masters = [p.detach().float().requires_grad_(True) for p in params]
        optimizer = torch.optim.Adam(masters, lr=lr)
        _loss(torch, module, inputs, targets).backward()
        for master, p in zip(masters, params):
            master.grad = p.grad.float()
        optimizer.step()
        with torch.no_grad():
            for master, p in zip(masters, params):
                master.grad = None  # the fp32 gradient copy lives only for the step
                p.copy_(master)
        state_tensors = {"master weights": masters}
        for m in masters:
            for name, value in optimizer.state[m].items():
                state_tensors.setdefault(name, []).append(value)

    seen: set = set()
    weights = unique_storage_bytes(params, seen)
    gradients = unique_storage_bytes([p.grad for p in params], seen)
    order = ("master weights", "exp_avg", "exp_avg_sq", "step")
    for name in sorted(state_tensors, key=lambda n: order.index(n) if n in order else len(order)):
        parts[name] = unique_storage_bytes([t for t in state_tensors[name] if torch.is_tensor(t)], seen)
    return ModelStateMeasurement(
        model_name=model.name,
        precision=precision,
        params_counted=model.parameter_count(),
        params_in_module=sum(p.numel() for p in params),
        param_tensors=len(params),
        weights_bytes=weights,
        gradients_bytes=gradients,
        optimizer_bytes=sum(parts.values()),
        optimizer_parts=parts,
        predicted=model_state_bytes(model, precision),
    )
