"""Activation bytes an MoE layer keeps for backward, per microbatch and GPU (Lesson 10 §4).

Korthikanti et al. 2022 §4 count, tensor by tensor, what each operation of a transformer layer saves for its
backward pass; distlab.memory.activation_bytes_per_layer is that count. An MoE layer has the same attention
half; its MLP half is a router and k expert MLPs per token. Counting the same way, what the MoE block's
operations save (Megatron-Core MoE, alltoall token dispatcher, SwiGLU experts with the fused SwiGLU kernel,
which saves its input and recomputes SiLU in backward):

    norm input         h        the pre-MLP RMSNorm's input
    router input       h        the norm's output: the router's linear and the shared experts' first linear save it
    router scores      E        softmax (or sigmoid) output over the E routed experts, saved by its backward
    combine weights    k        the k gate values of a token, saved by the weighted sum of the expert outputs
    expert inputs      k x h    the dispatched token copies (the all-to-all's output), saved by each expert's W1
    expert FFN         k x 3F   W1's output (gate and up, 2F, saved by SwiGLU) and SwiGLU's output (F, saved by W2)
    expert outputs     k x h    W2's outputs, saved by the multiplication with the combine weights
    shared experts     S x 3F   as a dense SwiGLU MLP of width S x F

per token, in the activation element size e (router scores and weights in e too: moe_router_dtype unset). The
all-to-all and the permutation save no floating-point tensor (their backward is the reverse all-to-all and
permutation); their integer index tensors (top-k indices, the sort order; int64 in PyTorch) are left out, as
Korthikanti leaves out the LayerNorm statistics, and distlab.verify.measure_moe_activations itemises them.

Parallelism: tokens per GPU T = s b / (tp cp) (Megatron-Core requires sequence parallelism for MoE with TP).
Under uniform routing each GPU receives as many copies as it sends, T k; expert tensor parallelism (etp ranks)
all-gathers them, so the expert inputs and outputs are etp T k h and the FFN split over etp is T k 3F. The busiest
GPU of an imbalanced layer (or one padded to a capacity factor) holds load_factor x that. Full recomputation
keeps the layer input only (h per token, as for a dense layer).

Sources: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models" §4.1 (method);
Megatron-Core MoE documentation (megatron/core/transformer/moe/README.md: token dispatcher, grouped GEMM,
--moe-router-dtype, "MoE layer recompute"); Shazeer et al. 2020 (SwiGLU).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from .. import memory
from .._arguments import broadcasting, code_array, finite_result, number_array, recompute_mode, whole_number
from ..errors import ConfigurationError
from ..memory import RECOMPUTE_MODES
from ..units import format_bytes
from .catalog import model as moe_model
from .capacity import MAX_GPUS, MAX_SEQ_LEN, MAX_TOKENS

__all__ = ["MoEActivations", "moe_activation_bytes", "stage_activation_bytes", "routed_activation_extra_array"]

#: Largest micro-batch the formula accepts (micro_batch_size x seq_len stays <= capacity.MAX_TOKENS).
MAX_MICRO_BATCH = 2**20


@dataclass(frozen=True)
class MoEActivations:
    """Bytes one MoE layer keeps for backward, one microbatch, one GPU, by the tensor that keeps them."""

    attention: float  # the attention half: distlab.memory's dense count without the MLP
    norm_input: float
    router_input: float
    router_scores: float
    combine_weights: float
    expert_inputs: float
    expert_ffn: float
    expert_outputs: float
    shared_experts: float
    recompute: str
    dense_layer: float = 0.0  # one of the model's dense first layers (MLP of dense_ffn), not in total

    def parts(self) -> dict[str, float]:
        """The terms, in the order the forward pass saves them."""
        return {k: v for k, v in self.__dict__.items() if k not in ("recompute", "dense_layer")}

    @property
    def moe_block(self) -> float:
        """Everything but the attention half: what the MoE block (norm, router, experts, combine) keeps."""
        return self.total - self.attention

    @property
    def total(self) -> float:
        return float(sum(self.parts().values()))

    def summary(self) -> str:
        return f"{format_bytes(self.total)} per MoE layer ({format_bytes(self.moe_block)} in the MoE block)"


def _shared_view(m, seq_len: int):
    """The step model's shape with only the shared experts as its MLP: what distlab.memory counts for the attention
    half, the two norm inputs, the MLP input and the shared experts. Its hidden, heads and kv_heads are those of
    step.step_model(m, seq_len) (MLA attends with one key/value head per query head; a test keeps them equal); read
    here from the catalog, since step imports this module."""
    return SimpleNamespace(
        hidden=m.hidden,
        heads=m.heads,
        kv_heads=m.heads if m.attention == "mla" else int(m.kv_heads or m.heads),
        ffn=m.shared_experts * m.expert_ffn,
        dropout=False,
        gated_mlp=True,
    )


def _load_factor(value, ep: int, m) -> float:
    high = min(float(ep), m.experts / m.top_k)
    ok = (
        isinstance(value, (int, float, np.integer, np.floating))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 1.0 <= value <= high
    )
    if not ok:
        raise ConfigurationError(
            f"load_factor={value!r} must be a number from 1 (uniform routing) to {high:g} = min(ep, experts / top_k) "
            f"(every copy a GPU's experts can take)"
        )
    return float(value)


def moe_activation_bytes(
    model,
    micro_batch_size=1,
    seq_len=None,
    *,
    tp=1,
    cp=1,
    ep=1,
    etp=None,
    recompute="none",
    precision="mixed",
    load_factor=1.0,
) -> MoEActivations:
    """Activation bytes one MoE layer keeps for backward, for one microbatch on one GPU, by tensor.

    Per token (T = s b / (tp cp) tokens per GPU, element size e, E routed experts, top-k, expert width F,
    S shared experts, load factor L): router input and norm input 2h, router scores E, combine weights k,
    expert inputs and outputs 2 etp k L h, expert FFN 3 k L F, shared experts 3 S F; plus the attention half of
    distlab.memory.activation_bytes_per_layer. Full recomputation keeps the layer input (h per token) only.
    dense_layer: one of the model's dense first layers (the same attention half, norm and MLP input, and a SwiGLU
    MLP of dense_ffn: 3 dense_ffn per token), outside total.
    Korthikanti et al. 2022 §4.1's counting applied to Megatron-Core's MoE layer (see the module docstring).
    Lesson 10 §4.

    Mixtral-8x7B, one 4,096-token sequence, no parallelism, bf16: the two expert copies' inputs and outputs are
    4096 x 2 x 2 x 4096 x 2 B = 134.2 MB, their FFNs 4096 x 2 x 3 x 14336 x 2 B = 704.6 MB.

    >>> a = moe_activation_bytes('mixtral-8x7b', 1, 4096)
    >>> round((a.expert_inputs + a.expert_outputs) / 1e6, 1), round(a.expert_ffn / 1e6, 1), round(a.total / 1e9, 3)
    (134.2, 704.6, 2.131)
    """
    m = moe_model(model)
    b = whole_number(micro_batch_size, "micro_batch_size", 1, MAX_MICRO_BATCH)
    s = whole_number(m.seq_len if seq_len is None else seq_len, "seq_len", 1, MAX_SEQ_LEN)
    if b * s > MAX_TOKENS:
        raise ConfigurationError(
            f"micro_batch_size x seq_len = {b * s} tokens is more than the {MAX_TOKENS} the formula accepts"
        )
    tp, cp, ep = (whole_number(v, n, 1, MAX_GPUS) for v, n in ((tp, "tp"), (cp, "cp"), (ep, "ep")))
    etp = tp if etp is None else whole_number(etp, "etp", 1, MAX_GPUS)
    if m.experts % ep:
        raise ConfigurationError(f"ep={ep} does not divide the {m.experts} routed experts of {m.name}")
    if m.expert_ffn % etp:
        raise ConfigurationError(f"etp={etp} does not divide expert_ffn={m.expert_ffn} of {m.name}")
    mode = recompute_mode(recompute)
    e = memory.precision_recipe(precision).activation_bytes
    load = _load_factor(load_factor, ep, m)
    code = RECOMPUTE_MODES.index(mode)
    attention_and_mlp = float(
        memory.activation_bytes_per_layer_array(_shared_view(m, s), b, s, tp, tp > 1, code, e) / cp
    )
    tokens = b * s / (tp * cp)
    h, k, f = m.hidden, m.top_k, m.expert_ffn
    if mode == "full":  # the layer input only, which the dense count already is
        zero = 0.0
        return MoEActivations(
            attention_and_mlp, zero, zero, zero, zero, zero, zero, zero, zero, mode, dense_layer=attention_and_mlp
        )
    shared = tokens * 3 * m.shared_experts * f * e
    norm_input = router_input = tokens * h * e
    attention = attention_and_mlp - norm_input - router_input - shared
    return MoEActivations(
        dense_layer=attention + norm_input + router_input + tokens * 3 * m.dense_ffn * e,
        attention=attention,
        norm_input=norm_input,
        router_input=router_input,
        router_scores=tokens * m.experts * e,
        combine_weights=tokens * k * e,
        expert_inputs=etp * tokens * k * load * h * e,
        expert_ffn=tokens * k * load * 3 * f * e,
        expert_outputs=etp * tokens * k * load * h * e,
        shared_experts=shared,
        recompute=mode,
    )


def stage_activation_bytes(model, micro_batch_size=1, seq_len=None, *, pp=1, in_flight=None, **layer) -> float:
    """Activation bytes the first pipeline stage of an MoE model keeps: its ceil(layers / pp) layers (the model's
    dense first layers as dense_layer, the rest as MoE layers, moe_activation_bytes with **layer: tp, cp, ep, etp,
    recompute, precision, load_factor) x in-flight microbatches (default pp: 1F1B's first stage, Korthikanti et al.
    2022 §4.2.3). Embedding and logits buffers are not counted, as distlab.memory.training_memory. Lesson 10 §4.

    DeepSeek-V3 on 16 stages with full recomputation: 4 layers (3 dense, 1 MoE) x 16 microbatches of the layer
    input, 4096 x 7168 x 2 B = 58.7 MB each:

    >>> round(stage_activation_bytes('deepseek-v3', 1, 4096, pp=16, recompute='full') / 1e9, 3)
    3.758
    """
    from ..memory import layers_per_stage
    from ..units import positive

    m = moe_model(model)
    pp = whole_number(pp, "pp", 1, MAX_GPUS)
    stage = layers_per_stage(m.layers, pp)
    flight = float(pp) if in_flight is None else positive(in_flight, "", "in_flight")
    if flight > 2**20:
        raise ConfigurationError(f"in_flight={flight:g} must be at most {2**20:,} microbatches")
    a = moe_activation_bytes(m, micro_batch_size, seq_len, **layer)
    dense = min(m.dense_layers, stage)
    return float((dense * a.dense_layer + (stage - dense) * a.total) * flight)


@broadcasting
def routed_activation_extra_array(model, micro_batch_size, seq_len, tp, cp, etp, recompute_code, element_bytes, ep=1):
    """What an MoE layer keeps beyond the dense-shaped layer of the step model (distlab.moe.step: MLP width
    (top_k + shared) x F), per average layer: moe_layers / layers x T (E + k + 2 etp k L h + 3 k (L - 1) F) e,
    T = s b / (tp cp), L = model.expert_load(ep) (1 unless the view carries an imbalance or a capacity factor), and
    0 with full recomputation. NumPy broadcast, inputs checked: training.step_model_array's fast path. Lesson 10 §4.

    >>> from distlab.moe.step import step_model
    >>> v = step_model('mixtral-8x7b', 4096)
    >>> float(routed_activation_extra_array(v, 1, 4096, 1, 1, 1, 0, 2.0))  # 4096 x (8 + 2 + 2 x 2 x 4096) x 2 B
    134299648.0
    """
    if not (hasattr(model, "moe") and hasattr(model, "expert_load")):
        raise ConfigurationError(f"model={model!r} must be an MoEStepModel (distlab.moe.step.step_model)")
    m = model.moe
    b, s = number_array(micro_batch_size, "micro_batch_size", 1.0), number_array(seq_len, "seq_len", 1.0)
    tp, cp, etp, ep = (number_array(v, n, 1.0) for v, n in ((tp, "tp"), (cp, "cp"), (etp, "etp"), (ep, "ep")))
    code = code_array(recompute_code, "recompute_code", RECOMPUTE_MODES)
    element_bytes = number_array(element_bytes, "element_bytes")
    tokens = b * s / (tp * cp)
    load = model.expert_load(ep)
    copies = m.top_k * load
    per_token = (m.experts + m.top_k + 2.0 * etp * copies * m.hidden) * element_bytes
    per_token = per_token + 3.0 * m.top_k * (load - 1.0) * m.expert_ffn * element_bytes
    kept = m.moe_layers / m.layers * tokens * per_token
    return finite_result("activation bytes", np.where(code == 2, 0.0, kept))
