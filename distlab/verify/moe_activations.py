"""Activation bytes one MoE block keeps for backward, measured in PyTorch, next to distlab.moe's formula (lesson 10).

The block is Megatron-Core's MoE MLP written out on one CPU process (no expert parallelism, so every dispatched
copy stays on this GPU): a fused RMSNorm (saves its input and one fp32 1/rms per token, as apex's and
Transformer Engine's kernels), a router (linear, softmax over the E experts, top-k), a dispatch that gathers the
k copies of each token sorted by expert, E SwiGLU expert MLPs (W1 to gate and up, the fused SwiGLU that saves its
input and recomputes SiLU in backward, W2), the combine that weights each copy's output by its gate value and
adds it to its token, the shared experts as a dense SwiGLU MLP, and the residual add.

Every tensor autograd saves goes through ``torch.autograd.graph.saved_tensors_hooks``, counted once per storage;
parameters are not activations. Prediction: ``distlab.moe.moe_activation_bytes(...).moe_block`` in bf16. The
formula leaves out the integer routing indices (three int64 tensors of T k entries here: top-k's indices, the
sort order, the token of each copy) and the norm's fp32 statistics; ``index_bytes`` and ``norm_stats_bytes``
itemise them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ._torch import require_torch
from .activations import SavedTensorRecorder


def tiny_moe_model():
    """The measurement's small MoE model: hidden 64, 8 experts of width 96, top-2, one shared expert, 32 tokens."""
    from ..moe.catalog import MoEModel

    return MoEModel(
        name="tiny-moe",
        layers=1,
        hidden=64,
        heads=4,
        vocab=256,
        experts=8,
        expert_ffn=96,
        shared_experts=1,
        top_k=2,
        seq_len=32,
        source="distlab lesson 10: an MoE block small enough to measure on a laptop CPU",
    )


@dataclass(frozen=True)
class MoEActivationMeasurement:
    """Bytes saved for backward by one MoE block, itemised, with distlab.moe's prediction."""

    model_name: str
    micro_batch_size: int
    seq_len: int
    top_k: int
    saved: tuple  # SavedTensor, in the order the forward pass saved them
    predicted_bytes: float  # moe_activation_bytes(...).moe_block
    predicted_parts: dict  # moe_activation_bytes(...).parts(), without the attention half

    @property
    def measured_bytes(self) -> int:
        return sum(t.nbytes for t in self.saved)

    @property
    def index_bytes(self) -> int:
        """Integer tensors (routing indices), which the formula leaves out."""
        return sum(t.nbytes for t in self.saved if t.dtype.startswith(("int", "uint")))

    @property
    def norm_stats_bytes(self) -> int:
        """The RMSNorm's fp32 1/rms per token, which the formula leaves out (as Korthikanti the LayerNorm's)."""
        return sum(t.nbytes for t in self.saved if t.op == "RMSNorm" and t.dtype == "float32")

    @property
    def gap_bytes(self) -> float:
        """measured - predicted - the itemised index and norm-statistics bytes (0 when the formula is exact)."""
        return self.measured_bytes - self.index_bytes - self.norm_stats_bytes - self.predicted_bytes

    def table(self) -> str:
        """One line per saved storage: operation, shape, dtype, bytes."""
        lines = [f"{'saved by':<28}{'shape':>12} {'dtype':<9}{'bytes':>9}"]
        for t in self.saved:
            lines.append(f"{t.op:<28}{'x'.join(map(str, t.shape)):>12} {t.dtype:<9}{t.nbytes:>9,}")
        lines.append(f"{'total':<28}{'':>12} {'':<9}{self.measured_bytes:>9,}")
        return "\n".join(lines)


@functools.lru_cache(maxsize=None)
def _classes():
    """The MoEBlock class, defined on first use (torch is imported then)."""
    torch = require_torch()
    from torch import nn

    return _moe_block_class(torch, nn, *_fused_functions(torch))


def _fused_functions(torch):
    """(FusedRMSNorm, FusedSwiGLU): autograd functions that save what Megatron's fused kernels save."""

    def wide(t):  # fp32, or float64 when checking gradients
        return t.to(torch.promote_types(t.dtype, torch.float32))

    class FusedRMSNorm(torch.autograd.Function):
        """y = x / rms(x) * w; saves x and 1/rms (fp32), as the fused kernels Megatron uses."""

        @staticmethod
        def forward(ctx, x, weight, eps):
            xf = wide(x)
            rstd = torch.rsqrt(xf.pow(2).mean(-1) + eps)
            ctx.save_for_backward(x, weight, rstd)
            return (xf * rstd[..., None] * wide(weight)).to(x.dtype)

        @staticmethod
        def backward(ctx, grad):
            x, weight, rstd = ctx.saved_tensors
            xf, g, r = wide(x), wide(grad), rstd[..., None]
            gw = g * wide(weight)
            dx = r * gw - xf * r**3 * (gw * xf).mean(-1, keepdim=True)
            dw = (g * xf * r).reshape(-1, x.shape[-1]).sum(0)
            return dx.to(x.dtype), dw.to(weight.dtype), None

    class FusedSwiGLU(torch.autograd.Function):
        """silu(gate) * up of the concatenated [gate, up]; saves its input only (Megatron's fused SwiGLU)."""

        @staticmethod
        def forward(ctx, gate_up):
            ctx.save_for_backward(gate_up)
            gate, up = gate_up.chunk(2, dim=-1)
            return torch.nn.functional.silu(gate) * up

        @staticmethod
        def backward(ctx, grad):
            (gate_up,) = ctx.saved_tensors
            gate, up = wide(gate_up).chunk(2, dim=-1)
            sig, g = torch.sigmoid(gate), wide(grad)
            dgate = g * up * sig * (1 + gate * (1 - sig))
            return torch.cat([dgate, g * gate * sig], dim=-1).to(gate_up.dtype)

    return FusedRMSNorm, FusedSwiGLU


def _moe_block_class(torch, nn, FusedRMSNorm, FusedSwiGLU):
    """The MoEBlock class: Megatron-Core's MoE MLP on one process, each saved tensor's op marked."""

    class MoEBlock(nn.Module):
        """RMSNorm, router, top-k, dispatch, SwiGLU experts, weighted combine, shared experts, residual."""

        def __init__(self, m):
            super().__init__()
            h, f, n = m.hidden, m.expert_ffn, m.experts
            self.top_k, self.experts = m.top_k, n
            self.norm_weight = nn.Parameter(torch.ones(h))
            self.router = nn.Linear(h, n, bias=False)
            self.w1 = nn.Parameter(torch.randn(n, 2 * f, h) / h**0.5)  # gate and up of each expert
            self.w2 = nn.Parameter(torch.randn(n, h, f) / f**0.5)
            s = m.shared_experts * f
            self.shared_w1 = nn.Linear(h, 2 * s, bias=False) if s else None
            self.shared_w2 = nn.Linear(s, h, bias=False) if s else None

        def forward(self, x, mark):
            s, b, h = x.shape
            k = self.top_k
            mark("RMSNorm")
            tokens = FusedRMSNorm.apply(x, self.norm_weight, 1e-6).reshape(s * b, h)
            mark("router")
            scores = torch.softmax(self.router(tokens), dim=-1)
            mark("top-k")
            weights, chosen = scores.topk(k, dim=-1)
            order = chosen.flatten().argsort(stable=True)  # the copies sorted by expert
            counts = torch.bincount(chosen.flatten(), minlength=self.experts).tolist()
            token_of = order // k
            mark("dispatch")
            copies = tokens.index_select(0, token_of)
            outputs = []
            for e, chunk in enumerate(copies.split(counts)):
                mark("expert W1")
                gate_up = chunk @ self.w1[e].t()
                mark("expert SwiGLU")
                act = FusedSwiGLU.apply(gate_up)
                mark("expert W2")
                outputs.append(act @ self.w2[e].t())
            expert_out = torch.cat(outputs)
            mark("combine")
            gate_values = weights.flatten().index_select(0, order)
            # scatter_add, as Megatron-Core's unpermute: its backward gathers, keeping only the index
            where_to = token_of[:, None].expand(-1, h)
            combined = torch.zeros_like(tokens).scatter_add(0, where_to, expert_out * gate_values[:, None])
            if self.shared_w1 is not None:
                mark("shared W1")
                gate_up = self.shared_w1(tokens)
                mark("shared SwiGLU")
                act = FusedSwiGLU.apply(gate_up)
                mark("shared W2")
                combined = combined + self.shared_w2(act)
            return x + combined.reshape(s, b, h)

    return MoEBlock


def build_moe_block(model=None, seed=0):
    """The MoE block (torch.nn.Module, fp32) of `model` (an MoEModel; default tiny_moe_model())."""
    torch = require_torch()
    model = tiny_moe_model() if model is None else model
    torch.manual_seed(seed)
    return _classes()(model)


def measure_moe_activations(model=None, micro_batch_size=2, seq_len=None, seed=0) -> MoEActivationMeasurement:
    """Run one bf16 MoE block of `model` (default: tiny_moe_model()) forward on (s, b, h), itemise what autograd
    saves, and run backward. Prediction: distlab.moe.moe_activation_bytes(model, b, s, precision='bf16').moe_block.
    Lesson 10 §4."""
    torch = require_torch()
    from .._arguments import whole_number
    from ..moe import moe_activation_bytes
    from ..moe.catalog import model as moe_model

    model = tiny_moe_model() if model is None else moe_model(model)
    b = whole_number(micro_batch_size, "micro_batch_size", 1, 64)
    s = whole_number(model.seq_len if seq_len is None else seq_len, "seq_len", 1, 4096)
    if model.hidden * model.expert_ffn * model.experts > 2**24:
        _raise_too_big(model)
    predicted = moe_activation_bytes(model, b, s, precision="bf16")
    block = build_moe_block(model, seed).to(torch.bfloat16).train()
    params = {p.untyped_storage().data_ptr() for p in block.parameters()}
    recorder = SavedTensorRecorder(params)
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(s, b, model.hidden, dtype=torch.bfloat16, generator=gen, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(recorder.pack, lambda t: t):
        out = block(x, recorder.mark)
    out.float().sum().backward()  # the saved tensors really are what backward needs
    parts = {k: v for k, v in predicted.parts().items() if k != "attention"}
    return MoEActivationMeasurement(
        model_name=model.name,
        micro_batch_size=b,
        seq_len=s,
        top_k=model.top_k,
        saved=recorder.saved,
        predicted_bytes=predicted.moe_block,
        predicted_parts=parts,
    )


def _raise_too_big(model):
    from ..errors import ConfigurationError

    raise ConfigurationError(
        f"model {model.name!r}: hidden x expert_ffn x experts = "
        f"{model.hidden * model.expert_ffn * model.experts:,} expert weights is more than the 16,777,216 a CPU "
        f"measurement builds; use a small model such as tiny_moe_model()"
    )
