"""Tensor parallelism (Megatron-LM), sequence parallelism and context parallelism: shapes, bytes, time.

Megatron-LM (Shoeybi et al. 2019, "Megatron-LM: Training Multi-Billion Parameter Language
Models Using Model Parallelism", Sec. 3) splits each transformer layer over t GPUs so that
every layer needs only two all-reduces in the forward pass:

- MLP: the first matrix A (h x f; and the gate of a gated MLP) is split by COLUMNS, so each
  GPU computes f/t of the inner activations and applies the nonlinearity locally (GeLU of a
  column block needs no other block); the second matrix B (f x h) is split by ROWS, so each
  GPU produces a partial sum of the output, and one all-reduce adds the t partial sums.
- Attention: Q, K and V are split by columns, i.e. by HEADS (a/t query heads and kv_heads/t
  key/value heads per GPU; each head's attention is local); the output projection is split
  by rows; one all-reduce adds the partial outputs.

Shapes are written (in_features, out_features), as in Y = X W. In training each layer runs
four all-reduces of the layer's activation, b x s x h elements, per microbatch: two in the
forward pass (after attention and after the MLP, Megatron's g operator) and two in the
backward pass (the input gradients of the two column-parallel blocks, Megatron's f operator).
Full activation recomputation runs the forward again: six.

Sequence parallelism (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
Transformer Models", Sec. 4.2.2) also splits the layer norms and dropouts along the sequence;
each all-reduce becomes a reduce-scatter plus an all-gather of the same buffer, which move
exactly what a ring all-reduce moves (a ring all-reduce IS a reduce-scatter then an all-gather),
while the replicated activations shrink t-fold. Keeping only 1/t of the column-parallel linears'
inputs has a price: the backward all-gathers each again for the weight gradient (Megatron-LM,
Transformer Engine), 2 all-gathers per layer, 5 all-reduce equivalents instead of 4 (SP_COLLECTIVES,
tp_all_reduce_equivalents).

Collectives are priced by distlab.collectives (ring over the t GPUs of the group on the chosen
link, alpha-beta); activation memory comes from distlab.memory. Compute per layer per GPU:
a forward pass costs 2 x (parameters of the layer) FLOPs per token for the matmuls plus
4 x s x h per token for the attention scores and the weighted sum of values (QK^T and AV,
2 s h each, full non-causal attention: causal kernels that skip the masked half do about half
of it); training runs forward + backward = 3 forward passes (the 6 x params x tokens rule),
4 with full recomputation (selective recomputation repeats only the attention scores); tensor
parallelism divides it by t.
"""

from .layout import (  # noqa: F401 (re-exported)
    TPLayerShards,
    WeightShard,
    check_tp,
    layer_shards,
    valid_tp_degrees,
)
from .cost import (  # noqa: F401 (re-exported)
    SP_COLLECTIVES,
    SP_REGATHERS,
    TPLayerCost,
    TP_COLLECTIVES,
    element_bytes,
    forward_passes,
    layer_flops,
    layer_flops_array,
    message_element_bytes,
    tp_all_reduce_equivalents,
    tp_comm_time,
    tp_layer_cost,
    tp_message_bytes,
)
from .sequence import (  # noqa: F401 (re-exported)
    RingAttentionBuffer,
    SequenceParallelSaving,
    ring_attention_buffer,
    ring_attention_buffer_bytes,
    sequence_parallel_saving,
)
from .simulate import (  # noqa: F401 (re-exported)
    ACTIVATIONS,
    SplitMatmulResult,
    TPMLPResult,
    random_mlp,
    simulate_split_matmul,
    simulate_tp_mlp,
)

__all__ = [
    "TP_COLLECTIVES",
    "SP_COLLECTIVES",
    "SP_REGATHERS",
    "WeightShard",
    "TPLayerShards",
    "TPLayerCost",
    "SequenceParallelSaving",
    "RingAttentionBuffer",
    "SplitMatmulResult",
    "TPMLPResult",
    "check_tp",
    "valid_tp_degrees",
    "layer_shards",
    "element_bytes",
    "message_element_bytes",
    "forward_passes",
    "layer_flops",
    "layer_flops_array",
    "tp_message_bytes",
    "tp_all_reduce_equivalents",
    "tp_comm_time",
    "tp_layer_cost",
    "sequence_parallel_saving",
    "ring_attention_buffer_bytes",
    "ring_attention_buffer",
    "random_mlp",
    "simulate_split_matmul",
    "simulate_tp_mlp",
]
