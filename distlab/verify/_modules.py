"""A GPT-style PyTorch model whose every weight follows from a distlab.models.TransformerModel.

Layout as in Megatron-LM (Shoeybi et al. 2019; Korthikanti et al. 2022, Sec. 4): activations
are (s, b, h); each block is pre-LayerNorm attention then a pre-LayerNorm MLP, each closed by
dropout and a residual add. The attention core is written out (Q K^T, softmax, dropout,
attention x V) so that the scores matrix is stored as Korthikanti et al. count it.

torch.nn is only imported inside `build_*` (classes are defined on first use).
"""

from __future__ import annotations

import functools
import math

from ..errors import ConfigurationError
from ._torch import require_torch

DROPOUT_IMPLS = ("native", "functional")
ATTENTION_IMPLS = ("math", "sdpa")


def _noop(_name):
    return None


@functools.lru_cache(maxsize=None)
def _classes():
    """(Block, GPT, checkpoint): the torch modules, defined on first use (torch is imported then)."""
    torch = require_torch()
    from torch import nn
    from torch.nn import functional as F
    from torch.utils.checkpoint import checkpoint

    def norm(model):
        if model.norm == "layernorm":
            return nn.LayerNorm(model.hidden)
        if not hasattr(nn, "RMSNorm"):  # torch < 2.4
            raise ConfigurationError("norm='rmsnorm' needs torch >= 2.4 (nn.RMSNorm); valid here: layernorm")
        return nn.RMSNorm(model.hidden)

    Block = _block_class(torch, nn, F, checkpoint, norm)
    return Block, _gpt_class(torch, nn, Block, norm), checkpoint


def _attention_core_class(torch, F):
    """Block's attention core: the fused QKV output split into heads, then Q K^T, softmax, dropout, x V (or SDPA)."""

    class AttentionCore:
        def _split(self, qkv):
            s, b = qkv.shape[0], qkv.shape[1]
            a, g, d = self.heads, self.kv_heads, self.head_dim
            r = a // g
            groups = qkv.view(s, b, g, (r + 2) * d)
            q = groups[..., : r * d].reshape(s, b * a, d)  # a view when r = 1 (multi-head attention)
            k = groups[..., r * d : (r + 1) * d]
            v = groups[..., (r + 1) * d :]
            if r > 1:  # grouped-query attention: each key/value head serves r query heads
                k = k.unsqueeze(3).expand(s, b, g, r, d)
                v = v.unsqueeze(3).expand(s, b, g, r, d)
            k, v = k.reshape(s, b * a, d), v.reshape(s, b * a, d)
            return q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)  # (b*a, s, d)

        def _core(self, q, k, v, mark=_noop):
            if self.attention == "sdpa":
                mark("scaled_dot_product_attention")
                # (b, a, s, d), as torch's fused kernels want: with 3-D inputs (or dropout > 0) a CPU
                # always takes the math path. The unflatten is a view: q, k, v stay views of the QKV output.
                q, k, v = (t.unflatten(0, (t.shape[0] // self.heads, self.heads)) for t in (q, k, v))
                out = F.scaled_dot_product_attention(
                    q, k, v, dropout_p=self.p_drop if self.training else 0.0, is_causal=True
                )
                # which kernel ran: its autograd node, e.g. ScaledDotProductFlashAttentionForCpuBackward0
                self.attention_node = out.grad_fn.name() if out.grad_fn is not None else ""
                return out.flatten(0, 1)
            s = q.shape[1]
            mark("Q K^T")
            # Causal mask as an added constant (-inf above the diagonal): an add keeps nothing for
            # backward, as Megatron-LM's fused scale-mask-softmax (masked_fill would keep a bool mask).
            causal = torch.full((s, s), float("-inf"), dtype=q.dtype, device=q.device).triu(1)
            scores = torch.bmm(q, k.transpose(1, 2)) * (1.0 / math.sqrt(self.head_dim)) + causal
            mark("softmax")
            probs = torch.softmax(scores, dim=-1)
            mark("attention dropout")
            probs = self._drop(probs)
            mark("attention x V")
            return torch.bmm(probs, v)

    return AttentionCore


def _block_class(torch, nn, F, checkpoint, norm):
    """The Block class: one transformer layer (its attention core from _attention_core_class)."""

    class Block(nn.Module, _attention_core_class(torch, F)):
        """One transformer layer: LN, QKV, attention core, out-proj, dropout, add; LN, MLP, dropout, add."""

        def __init__(self, model, p_drop, dropout_impl="native", attention="math"):
            super().__init__()
            h, f = model.hidden, model.ffn
            self.heads, self.kv_heads, self.head_dim = model.heads, model.kv_heads, model.head_dim
            self.gated = model.gated_mlp
            self.p_drop = p_drop if model.dropout else 0.0
            self.dropout_impl, self.attention = dropout_impl, attention
            self.attention_node = ""  # autograd node of the last F.scaled_dot_product_attention output
            self.ln1 = norm(model)
            # One fused projection, laid out per key/value group as [q_1 .. q_r, k, v] (Megatron-LM),
            # so that q, k and v are views of its output: h*h + 2*h*kv weights (+ h + 2kv biases).
            self.qkv = nn.Linear(h, h + 2 * model.kv_dim, bias=model.biases)
            self.proj = nn.Linear(h, h, bias=model.biases)
            self.ln2 = norm(model)
            if self.gated:
                self.gate = nn.Linear(h, f, bias=model.biases)
                self.up = nn.Linear(h, f, bias=model.biases)
            else:
                self.fc1 = nn.Linear(h, f, bias=model.biases)
            self.fc2 = nn.Linear(f, h, bias=model.biases)

        def _drop(self, x):
            if not (self.training and self.p_drop > 0):
                return x
            if self.dropout_impl == "native":
                # What F.dropout runs on a GPU: a fused kernel whose backward keeps a bool mask (1 byte).
                return torch.native_dropout(x, self.p_drop, True)[0]
            return F.dropout(x, self.p_drop, True)

        def forward(self, x, recompute="none", mark=_noop):
            s, b, h = x.shape
            mark("LayerNorm 1")
            y = self.ln1(x)
            mark("QKV projection")
            q, k, v = self._split(self.qkv(y))
            if recompute == "selective":
                mark("attention core (checkpoint inputs)")
                ctx = checkpoint(self._core, q, k, v, use_reentrant=False)
            else:
                ctx = self._core(q, k, v, mark)
            ctx = ctx.transpose(0, 1).reshape(s, b, h)
            mark("output projection")
            out = self.proj(ctx)
            mark("dropout after attention")
            x = x + self._drop(out)
            mark("LayerNorm 2")
            y = self.ln2(x)
            if self.gated:
                mark("MLP gate and up")
                y = F.silu(self.gate(y)) * self.up(y)
            else:
                mark("MLP h -> 4h")
                y = self.fc1(y)
                mark("GeLU")
                y = F.gelu(y)
            mark("MLP 4h -> h")
            y = self.fc2(y)
            mark("dropout after MLP")
            return x + self._drop(y)

    return Block


def _gpt_class(torch, nn, Block, norm):
    """The GPT class: embeddings, `model.layers` Blocks, final norm, output layer."""

    class GPT(nn.Module):
        """Token (and learned position) embeddings, blocks, final norm, output layer (tied or not)."""

        def __init__(self, model, p_drop):
            super().__init__()
            self.tok = nn.Embedding(model.vocab, model.hidden)
            self.pos = nn.Embedding(model.position_embeddings, model.hidden) if model.position_embeddings else None
            self.blocks = nn.ModuleList(Block(model, p_drop) for _ in range(model.layers))
            self.ln_f = norm(model)
            self.head = None if model.tied_embeddings else nn.Linear(model.hidden, model.vocab, bias=False)

        def forward(self, tokens):  # tokens (b, s) -> logits (s, b, V)
            x = self.tok(tokens.t())
            if self.pos is not None:
                x = x + self.pos(torch.arange(tokens.shape[1], device=tokens.device))[:, None, :]
            for block in self.blocks:
                x = block(x)
            x = self.ln_f(x)
            weight = self.tok.weight if self.head is None else self.head.weight
            return x @ weight.t()

    return GPT


def build_gpt(model, dropout=0.1, seed=0):
    """A torch.nn.Module with exactly the weights `model` (a TransformerModel) counts, in fp32."""
    torch = require_torch()
    _, GPT, _ = _classes()
    torch.manual_seed(seed)
    return GPT(model, dropout)


def build_layer(model, dropout=0.1, dropout_impl="native", attention="math", seed=0):
    """One transformer layer (Block) of `model`, in fp32."""
    torch = require_torch()
    if dropout_impl not in DROPOUT_IMPLS:
        raise ConfigurationError(
            f"dropout_impl={dropout_impl!r} is not a dropout implementation; valid: {', '.join(DROPOUT_IMPLS)}"
        )
    if attention not in ATTENTION_IMPLS:
        raise ConfigurationError(
            f"attention={attention!r} is not an attention implementation; valid: {', '.join(ATTENTION_IMPLS)}"
        )
    Block, _, _ = _classes()
    torch.manual_seed(seed)
    return Block(model, dropout, dropout_impl, attention)


def checkpoint_fn():
    """torch.utils.checkpoint.checkpoint."""
    return _classes()[2]
