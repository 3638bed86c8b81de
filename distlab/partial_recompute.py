"""Partial-layer activation recomputation: N of a pipeline stage's layers fully recomputed, the rest keeping every
activation (estimate(recompute='full', recompute_layers=N)). Lesson 7 §1, Lesson 1.

What the engines run:
- Megatron-LM `--recompute-granularity full --recompute-method block --recompute-num-layers N`: the first N layers
  of each model chunk (a TransformerBlock: the layers of one pipeline stage, or of one virtual chunk under
  interleaving, `num_layers_per_pipeline_rank = len(self.layers)`) are checkpointed whole (only their input kept,
  the layer's forward run again in the backward); the other layers run un-checkpointed and keep everything:
  NVIDIA/Megatron-LM@a7c9e8c (2026-05-14) megatron/core/transformer/transformer_block.py _checkpointed_forward
  ("elif self.config.recompute_method == 'block': ... use_checkpoint = layer_idx < recompute_num_layers"; moved
  unchanged to megatron/core/recompute.py checkpointed_forward by acc7e64, as at d98e8a6). TransformerConfig asks
  recompute_num_layers "between 1 and num_layers_per_pipeline_rank" (transformer_config.py __post_init__).
- torchtitan `[activation_checkpoint] mode = "selective"`, `selective_ac_option = "k"` (a number): a process-wide
  counter counts the transformer blocks apply_ac wraps, 1, 2, ...; block number c is checkpointed whole
  (ptd_checkpoint_wrapper) iff c % k == 0, the others keep everything; k = 0 checkpoints every block. So a rank
  holding L_r blocks checkpoints floor(L_r / k) of them: pytorch/torchtitan@3faaa1a0d (2024-08-23)
  torchtitan/parallelisms/parallelize_llama.py _apply_ac_to_transformer_block ("Checkpoint every `ac_freq` of the
  modules passed to this function"; config_manager.py default "2" = "checkpoint every other layer"); the same
  counter in torchtitan/distributed/activation_checkpoint.py _apply_layer_sac at e347b1e (2026-02-15).

The model here (one place for each quantity):
- which layers: only the count matters, not which ones: every layer of a stage has the same shape and the same
  microbatches in flight, so the stage's activation bytes and time are linear in the count;
- recomputed layers of a stage of n layers: min(cap, n), cap = chunks x N (N per model chunk; a chunk holds
  n / chunks layers in the step model's equal chunks); recompute='full' without N: cap = infinity (every layer);
- memory: the recomputed layers keep their input (the 'full' count), the others the 'none' count (with flash
  attention, no scores: the 'selective' count; an engine's extra kept tensors as for 'none'); the one layer whose
  forward is being recomputed in the backward holds its full activations for a moment: not counted, as for 'full';
- time: only the recomputed layers pay the extra forward (FLOPs, attention core, element-wise passes, FP8 casts,
  TP and CP collectives, DeepSpeed ZeRO-3's per-tensor re-gathers), each at its share recomputed / n;
- with balance_stages the choice of the pacing stage compares one whole layer's recompute (an approximation);
- dense models only (an MoE layer's all-to-alls and routed copies are not split by layer here);
- Megatron's 'uniform' method (groups of N layers, each group's input kept, every layer recomputed) is not
  modelled apart from N = 1 (= recompute='full'). The planner searches N with plan(partial_recompute=True): the
  fewest layers per chunk that fit (distlab.planner_recompute).
"""

from __future__ import annotations

import numpy as np

from ._arguments import (
    RECOMPUTE_MODES,
    broadcasting,
    code_array,
    flag,
    finite_result,
    number_array,
    recompute_mode,
    whole_number,
)
from .errors import ConfigurationError

#: Most layers (of a model, a rank or a stage) these helpers take: far beyond any model.
MAX_LAYERS = 2**20

__all__ = [
    "check_recompute_layers",
    "chunk_recompute_layers_array",
    "recompute_cap_array",
    "recomputed_layers_array",
    "mixed_layers_array",
    "model_recomputed_layers",
    "torchtitan_checkpointed_layers",
    "torchtitan_ac_frequency",
]


def check_recompute_layers(value, recompute: str, layers: int, moe: bool = False):
    """recompute_layers as estimate() takes it: None (every layer of 'full', or no layer) or a whole number 0 to the
    model's layers, with recompute='full' only, for a dense model; anything else is our error naming the range.

    >>> check_recompute_layers(4.0, "full", 32)
    4
    """
    layers = whole_number(layers, "layers", 1, MAX_LAYERS)
    if value is None:
        return None
    if recompute_mode(recompute) != "full":
        raise ConfigurationError(
            f"recompute_layers={value!r} applies to recompute='full' (N layers of each stage fully recomputed, the "
            f"rest keeping their activations), not recompute={recompute!r}; valid: None, or recompute='full'"
        )
    if moe:
        raise ConfigurationError(
            f"recompute_layers={value!r}: partial-layer recomputation is modelled for dense models only; valid: None"
        )
    return whole_number(value, "recompute_layers", 0, int(layers))


@broadcasting
def chunk_recompute_layers_array(value, moe: bool = False):
    """The step model's recompute_layers (each model chunk's layers fully recomputed): None, or a number or array of
    them >= 0 (our error otherwise, and for an MoE model).

    >>> chunk_recompute_layers_array([1, 4]).tolist()
    [1.0, 4.0]
    """
    if value is None:
        return None
    if flag(moe, "moe"):
        raise ConfigurationError("recompute_layers: partial-layer recomputation is modelled for dense models only")
    return number_array(value, "recompute_layers")


@broadcasting
def recompute_cap_array(code, recompute_layers, chunks):
    """The most layers of a stage fully recomputed (NumPy broadcast): chunks x N where recompute_code is 2 ('full')
    and N given, infinity where 'full' without N (every layer), 0 for 'none' and 'selective'.

    >>> recompute_cap_array(2, 3, 2).tolist(), recompute_cap_array(2, None, 1).tolist()
    (6.0, inf)
    """
    full = code_array(code, "recompute_code", RECOMPUTE_MODES) == 2
    chunks = number_array(chunks, "chunks", low=1.0)
    if recompute_layers is None:
        return np.where(full, np.inf, 0.0) + 0.0 * chunks
    return np.where(
        full, finite_result("recompute cap", chunks * number_array(recompute_layers, "recompute_layers")), 0.0
    )


@broadcasting
def recomputed_layers_array(cap, layers):
    """Layers of a stage of `layers` layers that are fully recomputed: min(cap, layers).

    >>> recomputed_layers_array(6.0, 4.0).tolist(), recomputed_layers_array(np.inf, 8.0).tolist()
    (4.0, 8.0)
    """
    array = None if isinstance(cap, (str, bytes)) or cap is None else np.asarray(cap)
    if array is None or array.dtype.kind not in "biuf" or np.isnan(array.astype(float)).any() or (array < 0).any():
        raise ConfigurationError(f"cap={cap!r} must be numbers >= 0 (infinity: every layer)")
    return np.minimum(array.astype(float), number_array(layers, "layers"))


@broadcasting
def mixed_layers_array(recomputed_each, kept_each, layers, recomputed):
    """A quantity of a stage summed over its layers: recomputed x recomputed_each + (layers - recomputed) x
    kept_each (bytes of activations, seconds, FLOPs). Exact at both ends: all recomputed gives layers x
    recomputed_each, none gives layers x kept_each.

    Llama 2 7B, 4,096 tokens, 2-byte activations: a recomputed layer keeps its input 4096 x 4096 x 2 = 32 MiB; two
    such layers and two keeping 1 GiB each: 2 x 32 MiB + 2 x 1024 MiB = 2112 MiB.

    >>> float(mixed_layers_array(32.0, 1024.0, 4.0, 2.0))
    2112.0
    """
    recomputed, layers = number_array(recomputed, "recomputed"), number_array(layers, "layers")
    each = number_array(recomputed_each, "recomputed_each"), number_array(kept_each, "kept_each")
    return finite_result("stage total", recomputed * each[0] + (layers - recomputed) * each[1])


def chunk_layers(layers: int, pp, chunks):
    """The layers of one model chunk, the most N can be: ceil(L / (pp x v)), the step model's equal chunks (NumPy
    broadcast over pp and chunks; whole numbers >= 1 are the caller's to check).

    >>> chunk_layers(80, np.array([1, 4, 4]), np.array([1, 1, 5])).tolist()
    [80, 20, 4]
    """
    return np.ceil(layers / (np.asarray(pp) * np.asarray(chunks))).astype(np.int64)


def model_recomputed_layers(layers: int, pp: int, chunks: int, recompute_layers) -> int:
    """Layers of the whole model fully recomputed, for the step's FLOP count (HFU): every stage's chunks each
    recompute min(N, chunk layers), pp x chunks x min(N, ceil(L / (pp chunks))), at most L (equal chunks; uneven
    ones put the remainder on no particular chunk).

    >>> model_recomputed_layers(32, 4, 2, 3)  # 8 chunks of 4 layers, 3 each
    24
    """
    layers = whole_number(layers, "layers", 1, MAX_LAYERS)
    pp, chunks = whole_number(pp, "pp", 1, MAX_LAYERS), whole_number(chunks, "chunks", 1, MAX_LAYERS)
    n = whole_number(recompute_layers, "recompute_layers", 0, layers)
    return min(layers, pp * chunks * min(n, int(chunk_layers(layers, pp, chunks))))


def torchtitan_checkpointed_layers(rank_layers: int, frequency: int) -> int:
    """Blocks torchtitan's layer-level SAC (selective_ac_option = "k") checkpoints on a rank of rank_layers blocks:
    those whose 1-based count is a multiple of k, floor(L_r / k); k = 0 checkpoints all (see the module docstring).

    >>> [torchtitan_checkpointed_layers(layers, k) for layers, k in ((32, 2), (40, 3), (8, 0))]
    [16, 13, 8]
    """
    rank_layers = whole_number(rank_layers, "rank_layers", 1, MAX_LAYERS)
    frequency = whole_number(frequency, "frequency", 0, MAX_LAYERS)
    return rank_layers if frequency == 0 else rank_layers // frequency


def torchtitan_ac_frequency(rank_layers: int, recomputed: int):
    """The selective_ac_option k >= 2 whose every-k-th checkpointing recomputes exactly `recomputed` of a rank's
    rank_layers blocks (torchtitan_checkpointed_layers), or None where no k does: floor(L / k) = n holds for k in
    (L / (n + 1), L / n], so the largest candidate L // n works or none does.

    >>> torchtitan_ac_frequency(32, 16), torchtitan_ac_frequency(32, 11)
    (2, None)
    """
    rank_layers = whole_number(rank_layers, "rank_layers", 1, MAX_LAYERS)
    recomputed = whole_number(recomputed, "recomputed", 0, rank_layers)
    if recomputed == 0 or 2 * recomputed > rank_layers:
        return None
    k = rank_layers // recomputed
    return k if torchtitan_checkpointed_layers(rank_layers, k) == recomputed else None
