"""Memory recipes named after the engines: what a training engine really keeps per parameter, and a reserve.

The lessons that teach the ZeRO paper count its 16 bytes per parameter (mixed-precision Adam: 2 + 2 + 12,
Rajbhandari et al. 2020, Sec. 3.1): the recipe 'zero-paper', which follows distlab.memory's precision recipes.
A real engine keeps more, and not all of it shards the same way (Lesson 7 §2, Lesson 8b §1):

* 'megatron' (Megatron-LM, no distributed optimizer): bf16 weights 2 + fp32 main gradients 4 + fp32 master
  weights and Adam 12 = 18 bytes per parameter, nothing sharded over data parallelism (ZeRO-0 only).
* 'megatron-distributed-optimizer': 6 + 12 / d, the 12 optimizer bytes sharded over the d data-parallel ranks
  (ZeRO-1 only). Both from Megatron-LM's megatron/training/theoretical_memory_usage.py,
  num_bytes_per_parameter: "18 if not args.use_distributed_optimizer else 6 + (12 / data_parallel_size)"
  (NVIDIA/Megatron-LM at d98e8a6, 2026-08-22).
* 'megatron-bf16-grads' and 'megatron-distributed-optimizer-bf16-grads': the same with gradients kept and
  reduced in bf16 (2 bytes, not 4): 16 and 4 + 12 / d bytes per parameter. Megatron-LM keeps fp32 main
  gradients with --bf16 unless --grad-reduce-in-bf16 is given (megatron/training/arguments.py at d98e8a6,
  "bfloat16 requires gradient accumulation and all-reduce to be done in fp32" otherwise); NVIDIA's own
  performance recipes set grad_reduce_in_fp32=False (Megatron-Bridge perf_recipes/_common.py,
  "_perf_precision ... Always sets grad_reduce_in_fp32=False"; NeMo 2 scripts/performance/helpers.py,
  set_precision_configs, for every compute dtype since 2025-04-15). The 4 + 12 / d is derived by the
  accounting of Megatron's distributed-optimizer table (docs/user-guide/features/dist_optimizer.md: bf16
  params with fp32 grads 6 + 12 / d), with the gradient's 4 bytes replaced by 2; the table itself has no row
  for bf16 gradients.
* 'megatron-fsdp' (Megatron-LM's Megatron-FSDP, --use-megatron-fsdp, ZeRO-2 = optim_grads, ZeRO-3 =
  optim_grads_params): Megatron's 18 bytes per parameter (bf16 weights 2, fp32 main gradients 4, fp32 main
  weights and Adam 12), sharded from the stage its strategy names, plus at ZeRO-3 the bf16 copies of the
  layer being computed and the one prefetched (2 x 2 bytes per parameter of a layer), counted as for FSDP2.
  Derived by Megatron's own accounting above: Megatron-LM publishes no byte table for Megatron-FSDP.
* 'deepspeed': fp16/bf16 weights 2 (sharded at ZeRO-3), 16-bit gradients 2 (sharded at ZeRO-2), and 16 bytes
  of fp32 weights, fp32 gradients and Adam moments (sharded from ZeRO-1): ZeRO-2 = 2 + 18 / d; ZeRO-3 = 18 / d in
  all (2 + 2 + 14) plus a gather buffer of 4 bytes per parameter of the largest layer, as DeepSpeed's own estimators count
  (deepspeed/runtime/zero/stage_1_and_2.py estimate_zero2_model_states_mem_needs: "2 * total_params +
  int(18 * total_params / total_gpus)"; stage3.py estimate_zero3_model_states_mem_needs: "largest_layer_memory
  + int(18 * total_params / total_gpus)", largest_layer_memory = 4 x largest_layer_params; deepspeedai/DeepSpeed
  at edaa722, 2026-08-22).
* 'fsdp2' (PyTorch FSDP2 with bf16 compute, fp32 master weights: torchtitan's default): fp32 weights 4,
  fp32 gradients 4 and Adam 8, all sharded (ZeRO-2 with reshard_after_forward=False, ZeRO-3 with True), plus
  the bf16 copies FSDP2 all-gathers: at ZeRO-3 the layer being computed and the one prefetched (2 x 2 bytes per
  parameter of a layer), at ZeRO-2 every layer's, kept from forward to backward (2 bytes per parameter). ZeRO-0
  is DDP (16 bytes replicated); there is no ZeRO-1 (PyTorch docs, torch.distributed.fsdp.fully_shard).
  Its selective recomputation is torchtitan's selective op checkpointing (the layer input, SDPA's output and
  every other matmul output kept: pytorch/torchtitan@3faaa1a0d parallelize_llama.py _save_list and
  _custom_policy; memory.op_sac_activation_bytes_per_layer_array), not Megatron's recompute of the attention core.
  Its sharded gradients are reduce-scattered in fp32 (torchtitan's default: pytorch/torchtitan@3faaa1a0d
  torchtitan/config_manager.py, '--training.mixed_precision_reduce' default="float32"), and per microbatch FSDP2's
  foreach_reduce only copies each bf16 gradient into the fp32 reduce-scatter buffer (read 2 + write 4 = 6 B per
  parameter; torch.distributed.fsdp._fully_shard._fsdp_collectives foreach_reduce_scatter_copy_in), dividing inside
  NCCL (ReduceOp.AVG). With sequence parallelism its tensor-parallel linears keep their all-gathered input for the
  weight gradient (no backward re-gather), 4 s b h (1 - 1/t) bytes per layer more than Korthikanti's 34/t
  (gathered_input_bytes_per_layer_array). benchmarks/RESULTS.md, 2026-11-29 issue 30 sections.
* 'fsdp2-sp-regather': 'fsdp2''s bytes and gradient path with Megatron-style sequence parallelism: the backward
  all-gathers the column-parallel inputs again (Korthikanti's 34/t) instead of keeping them gathered as torchtitan's
  DTensor linears do. How the validation set maps Meta's Llama 3 runs, whose report states FSDP with ZeRO-2-like
  sharding and Megatron-style 4D parallelism (Llama Team 2024, Sec. 3.3.2) but whose TP code is not public.
* 'fsdp1' (PyTorch FullyShardedDataParallel, what Composer and llm-foundry run): the same bytes as 'fsdp2'
  (FULL_SHARD = ZeRO-3, SHARD_GRAD_OP = ZeRO-2, NO_SHARD = ZeRO-0), the gradients reduce-scattered in fp32 (Composer's
  FSDP 'mixed_precision: DEFAULT': param_dtype bf16, reduce_dtype fp32; composer/trainer/mosaic_fsdp_utils.py, tags
  v0.16.4 and v0.17.2), and per microbatch FSDP1's _reduce_grad casts each unsharded bf16 gradient to fp32 and
  divides it in place by the pre-divide factor before the reduce-scatter (torch/distributed/fsdp/_runtime_utils.py,
  torch 2.x): read 2 + write 4 + read 4 + write 4 = 14 B per parameter.
* 'fsdp1-pure': 'fsdp1' under Composer's 'mixed_precision: PURE' (reduce_dtype bf16, the same file): the gradients
  reduce-scattered in bf16, no cast, only the in-place pre-divide (read 2 + write 2 = 4 B per parameter).

Every engine recipe also reserves RESERVE_BYTES of each GPU for what is not the model: the CUDA context with its
kernels and the cuBLAS/cuDNN workspaces, NCCL's communication buffers (NCCL_BUFFSIZE, 4 MiB per channel and
peer by default) and the caching allocator's fragmentation. 2 GB is an assumption stated here, not a measurement
of this kit; a configuration fits when model states + activations <= GPU memory - reserve.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ._arguments import broadcasting, finite_result, number_array
from .errors import ConfigurationError
from .precision import precision_recipe
from .units import BYTES, positive

__all__ = [
    "RESERVE_BYTES",
    "MemoryRecipe",
    "MEMORY_RECIPES",
    "memory_recipe",
    "largest_layer_params",
    "recipe_state_bytes_array",
    "gradient_reduce_bytes",
    "gradient_copy_bytes_per_param",
    "gathered_input_bytes_per_layer_array",
]

#: Bytes of each GPU an engine recipe keeps out of the model's reach (CUDA context, NCCL buffers,
#: fragmentation): an assumption, stated in the module docstring. Lesson 7 §2.
RESERVE_BYTES = 2e9


@dataclass(frozen=True)
class MemoryRecipe:
    """Bytes per parameter an engine keeps, and from which ZeRO stage each part is sharded over dp (None: the
    precision recipe's bytes, the ZeRO paper's stages 3/2/1). gather: bytes per parameter of the unsharded
    layers ZeRO-3 holds while computing (gather_layers of them; 'largest' for DeepSpeed's largest-layer
    buffer); zero2_unsharded: bytes per parameter kept unsharded at ZeRO-2 (FSDP2's bf16 copies);
    zero3_optimizer_bytes: the optimizer bytes at ZeRO-3 where the engine counts them apart (DeepSpeed's
    ZeRO-3 estimator: 18 B per parameter in all, 2 + 2 + 14). selective: what the engine's selective
    recomputation keeps: 'attention-core' (Megatron's, Korthikanti et al. 2022: all but the attention scores) or
    'op' (torchtitan's selective op checkpointing: memory.op_sac_activation_bytes_per_layer_array).
    reduce_bytes, gradient_copy_bytes: an FSDP engine's gradient path at ZeRO-3 (gradient_reduce_bytes,
    gradient_copy_bytes_per_param): the reduce-scatter's element size and the per-microbatch cast / divide bytes.
    saves_gathered_input: with sequence parallelism the engine's column-parallel linears keep their all-gathered
    input for the weight gradient (torchtitan's DTensor plan) instead of re-gathering it in the backward (Megatron,
    Transformer Engine): the step model re-gathers nothing there and the activations count the gathered input
    (StepConfig.keeps_gathered_input; memory_recipes.gathered_input_bytes_per_layer_array). activation_offload: the
    engine offloads a layer's saved activations to host memory on request (Megatron-Core's --cpu-offloading through
    Transformer Engine's cpu_offload: the 'megatron*' recipes; distlab.step.offload). Lesson 7 §2."""

    name: str
    zero_stages: tuple
    weight_bytes: float | None = None
    gradient_bytes: float | None = None
    optimizer_bytes: float | None = None
    weight_stage: int = 3
    gradient_stage: int = 2
    optimizer_stage: int = 1
    gather_bytes: float = 0.0
    gather_layers: object = 0.0  # a count of layers, or 'largest'
    zero2_unsharded: float = 0.0
    zero3_optimizer_bytes: float | None = None
    reserve_bytes: float = 0.0
    description: str = ""
    selective: str = "attention-core"  # what recompute='selective' keeps: Korthikanti's count, or "op" (torchtitan)
    reduce_bytes: float | None = None  # bytes per gradient element FSDP reduce-scatters (None: the precision recipe's)
    gradient_copy_bytes: float = 0.0  # HBM bytes per parameter and microbatch of FSDP's gradient cast / divide
    saves_gathered_input: bool = False  # its TP linears keep SP's all-gathered input for the weight gradient
    activation_offload: bool = False  # the engine can offload activations to host memory (Megatron --cpu-offloading)

    @property
    def engine(self) -> bool:
        """Whether the recipe states its own bytes (an engine) rather than the precision recipe's."""
        return self.weight_bytes is not None


#: PyTorch FSDP2 (torchtitan); the FSDP1 recipes below differ only in their gradient path.
_FSDP2 = MemoryRecipe(
    "fsdp2",
    (0, 2, 3),
    4.0,
    4.0,
    8.0,
    2,
    2,
    2,
    gather_bytes=2.0,
    gather_layers=2.0,
    zero2_unsharded=2.0,
    reserve_bytes=RESERVE_BYTES,
    description="PyTorch FSDP2, bf16 compute on fp32 master weights: 16 B per parameter, sharded",
    selective="op",
    reduce_bytes=4.0,
    gradient_copy_bytes=6.0,
    saves_gathered_input=True,
)

MEMORY_RECIPES = {
    r.name: r
    for r in (
        MemoryRecipe(
            "zero-paper",
            (0, 1, 2, 3),
            description="the ZeRO paper's count, 16 B per parameter for mixed-precision Adam (Lessons 1-3)",
        ),
        MemoryRecipe(
            "megatron",
            (0,),
            2.0,
            4.0,
            12.0,
            9,
            9,
            9,
            reserve_bytes=RESERVE_BYTES,
            activation_offload=True,
            description="Megatron-LM without the distributed optimizer: 18 B per parameter",
        ),
        MemoryRecipe(
            "megatron-distributed-optimizer",
            (1,),
            2.0,
            4.0,
            12.0,
            9,
            9,
            1,
            reserve_bytes=RESERVE_BYTES,
            activation_offload=True,
            description="Megatron-LM's distributed optimizer: 6 + 12/d B per parameter",
        ),
        MemoryRecipe(
            "megatron-bf16-grads",
            (0,),
            2.0,
            2.0,
            12.0,
            9,
            9,
            9,
            reserve_bytes=RESERVE_BYTES,
            activation_offload=True,
            description="Megatron-LM with --grad-reduce-in-bf16, no distributed optimizer: 16 B per parameter",
        ),
        MemoryRecipe(
            "megatron-distributed-optimizer-bf16-grads",
            (1,),
            2.0,
            2.0,
            12.0,
            9,
            9,
            1,
            reserve_bytes=RESERVE_BYTES,
            activation_offload=True,
            description="Megatron-LM's distributed optimizer with --grad-reduce-in-bf16 (NVIDIA's performance "
            "recipes): 4 + 12/d B per parameter",
        ),
        MemoryRecipe(
            "megatron-fsdp",
            (2, 3),
            2.0,
            4.0,
            12.0,
            3,
            2,
            1,
            gather_bytes=2.0,
            gather_layers=2.0,
            reserve_bytes=RESERVE_BYTES,
            activation_offload=True,
            description="Megatron-FSDP (ZeRO-2/3 on Megatron-LM): 18 B per parameter, sharded; derived",
        ),
        MemoryRecipe(
            "deepspeed",
            (0, 1, 2, 3),
            2.0,
            2.0,
            16.0,
            3,
            2,
            1,
            gather_bytes=4.0,
            gather_layers="largest",
            zero3_optimizer_bytes=14.0,
            reserve_bytes=RESERVE_BYTES,
            description="DeepSpeed ZeRO: 2 + 2 + 16 B per parameter; ZeRO-3 adds a largest-layer buffer",
        ),
        _FSDP2,
        replace(
            _FSDP2,
            name="fsdp2-sp-regather",
            description="PyTorch FSDP2's bytes with Megatron-style sequence parallelism (the backward re-gathers the "
            "TP inputs): Meta's Llama 3 stack as the validation set maps it",
            saves_gathered_input=False,
        ),
        replace(
            _FSDP2,
            name="fsdp1",
            description="PyTorch FSDP1 (Composer / llm-foundry), bf16 compute on fp32 master weights: 16 B per "
            "parameter, sharded",
            selective="attention-core",
            gradient_copy_bytes=14.0,
            saves_gathered_input=False,
        ),
        replace(
            _FSDP2,
            name="fsdp1-pure",
            description="PyTorch FSDP1 with Composer's mixed_precision PURE: gradients reduced in bf16",
            selective="attention-core",
            reduce_bytes=2.0,
            gradient_copy_bytes=4.0,
            saves_gathered_input=False,
        ),
    )
}


def memory_recipe(name) -> MemoryRecipe:
    """A MemoryRecipe by name (or one passed through). Lesson 7 §2.

    >>> memory_recipe('megatron-distributed-optimizer').zero_stages
    (1,)
    """
    if isinstance(name, MemoryRecipe):
        return name
    key = str(name).strip().lower()
    if key not in MEMORY_RECIPES:
        raise ConfigurationError(f"memory_recipe={name!r}; valid: {', '.join(MEMORY_RECIPES)}")
    return MEMORY_RECIPES[key]


def largest_layer_params(model, tp=1) -> float:
    """Parameters of the largest single weight a GPU holds (DeepSpeed's 'largest layer'): the larger of the
    embedding V x h and a layer's largest matrix (h x ffn, or the QKV projection h x (h + 2 kv)), over tp.
    Lesson 7 §2.

    >>> largest_layer_params(__import__('distlab').models.model('llama2-7b'))  # 32,000 x 4,096
    131072000.0
    """
    from . import models
    from .units import positive_int as _whole

    if isinstance(model, str):
        model = models.model(model)
    if not all(hasattr(model, k) for k in ("hidden", "ffn", "heads", "head_dim", "kv_heads", "vocab")):
        raise ConfigurationError(
            f"model={model!r} must be a catalog name or a model with hidden, ffn, heads, head_dim, kv_heads and vocab"
        )
    tp = _whole(tp, "tp")
    h, f = float(model.hidden), float(model.ffn)
    qkv = h * (model.heads * model.head_dim + 2 * model.kv_heads * model.head_dim)
    return max(float(model.vocab) * h, h * f, qkv) / float(tp)


def _sharded(bytes_per_param, from_stage, zero, dp):
    return bytes_per_param / np.where(np.asarray(zero) >= from_stage, np.asarray(dp, dtype=float), 1.0)


def recipe_state_bytes_array(recipe: MemoryRecipe, shard_params, layer_params, largest_params, zero, dp):
    """Per-GPU (weights, gradients, optimizer) bytes of an engine recipe on NumPy arrays, unvalidated.

    shard_params: parameters of the busiest stage on one GPU (P / (tp pp)); layer_params: one layer's on
    one GPU; largest_params: largest_layer_params. ZeRO-3's gathered layers and FSDP2's ZeRO-2 copies count
    as weights. Lesson 7 §2.

    Megatron's distributed optimizer on 8 ranks, 7e9 parameters: 2 + 4 + 12/8 = 7.5 B per parameter.

    >>> w, g, o = recipe_state_bytes_array(memory_recipe('megatron-distributed-optimizer'), 7e9, 0, 0, 1, 8)
    >>> float(w + g + o) / 7e9
    7.5
    """
    from ._arguments import number_array

    if not isinstance(recipe, MemoryRecipe) or not recipe.engine:
        raise ConfigurationError(f"recipe={recipe!r} must be an engine MemoryRecipe (memory_recipe('deepspeed'), ...)")
    zero = number_array(zero, "zero")
    if np.any(zero > 3) or np.any(zero != np.floor(zero)):
        raise ConfigurationError("zero must hold ZeRO stages 0, 1, 2 or 3")
    dp = number_array(dp, "dp", low=1.0)
    p = number_array(shard_params, "shard_params")
    layer_params = number_array(layer_params, "layer_params")
    largest_params = number_array(largest_params, "largest_params")
    if (
        max(
            float(np.max(p, initial=0)),
            float(np.max(layer_params, initial=0)),
            float(np.max(largest_params, initial=0)),
        )
        > 1e16
    ):
        raise ConfigurationError("shard_params, layer_params and largest_params must be at most 1e16 parameters")
    w = p * _sharded(recipe.weight_bytes, recipe.weight_stage, zero, dp)
    g = p * _sharded(recipe.gradient_bytes, recipe.gradient_stage, zero, dp)
    o = p * _sharded(recipe.optimizer_bytes, recipe.optimizer_stage, zero, dp)
    if recipe.zero3_optimizer_bytes is not None:
        o = np.where(zero >= 3, p * recipe.zero3_optimizer_bytes / np.asarray(dp, dtype=float), o)
    gathered = (
        np.asarray(largest_params, dtype=float)
        if recipe.gather_layers == "largest"
        else float(recipe.gather_layers) * np.asarray(layer_params, dtype=float)  # type: ignore[arg-type]
    )
    w = (
        w
        + np.where(zero >= 3, recipe.gather_bytes * gathered, 0.0)
        + np.where(zero == 2, recipe.zero2_unsharded * p, 0.0)
    )
    return w, g, o


def gradient_reduce_bytes(precision, recipe, zero):
    """Bytes per gradient element the data-parallel gradient reduction moves (NumPy broadcast over zero): an FSDP
    engine's reduce dtype at ZeRO-3 (MemoryRecipe.reduce_bytes: 4 for 'fsdp1' and 'fsdp2', which reduce-scatter
    in fp32), else the precision recipe's gradient bytes (2 for mixed precision). ZeRO-2 keeps the precision's
    bytes: the step model reduce-scatters it per microbatch, which the one ZeRO-2 'fsdp2' mapping (Meta's Llama 3
    stack, not torchtitan) accumulates over microbatches instead. The step model's DP term and
    production.sharding_plan both read it. Lesson 7 §3, Lesson 11 §2.

    >>> gradient_reduce_bytes('mixed', 'fsdp2', [0, 2, 3]).tolist()
    [2.0, 2.0, 4.0]
    """
    base = float(precision_recipe(precision).gradient_bytes)
    reduce = None if recipe is None else memory_recipe(recipe).reduce_bytes
    zero = _zero_stages(zero)
    return np.where(zero >= 3, base if reduce is None else float(reduce), base)


def gradient_copy_bytes_per_param(recipe, zero):
    """HBM bytes per parameter and microbatch of an FSDP engine's gradient processing before its reduce-scatter at
    ZeRO-3 (MemoryRecipe.gradient_copy_bytes: FSDP1 casts bf16 -> fp32 and pre-divides, 14 B; FSDP2 copies into
    the fp32 buffer, 6 B); 0 for other recipes and stages. The step model prices it with the element-wise
    traffic (step.compute.elementwise_seconds). Lesson 7 §8.

    >>> gradient_copy_bytes_per_param('fsdp1', [0, 3]).tolist()
    [0.0, 14.0]
    """
    copy = 0.0 if recipe is None else memory_recipe(recipe).gradient_copy_bytes
    return np.where(_zero_stages(zero) >= 3, float(copy), 0.0)


def _zero_stages(zero) -> np.ndarray:
    """zero as a float array of ZeRO stages 0-3 (our error otherwise)."""
    stages = np.asarray(number_array(zero, "zero"), dtype=float)
    if np.any(stages > 3) or np.any(stages != np.floor(stages)):
        raise ConfigurationError("zero must hold ZeRO stages 0, 1, 2 or 3")
    return stages


@broadcasting
def gathered_input_bytes_per_layer_array(model, micro_batch_size, seq_len, tp, sequence_parallel, element_bytes):
    """Activation bytes per layer, microbatch and GPU beyond Korthikanti's count (Sec. 4.2.2: with SP s b h (34/t +
    5 a s / (h t)), memory.activation_bytes_per_layer_array) where the engine keeps sequence parallelism's
    all-gathered inputs (MemoryRecipe.saves_gathered_input; NumPy broadcast). Megatron keeps QKV's and the MLP's
    inputs (the layernorms' outputs, 2 s b h bytes each in the 34) as s/t shards and gathers them again in the
    backward; torchtitan's DTensor linears (pytorch/torchtitan@3faaa1a0d parallelize_llama.py: Shard(1) ->
    Replicate, ColwiseParallel wq/wk/wv and w1/w3) keep them whole. Extra = 2 s b h e (1 - 1/t) with SP and t > 1
    (2 B: s b h (30/t + 4 + ...)). A student meets it in estimate(memory_recipe='fsdp2', sequence_parallel=True)'s
    activations (Lesson 7 §2, engine memory recipes; Lesson 5 §6 teaches the 34/t).

    GPT-3 175B, one 2,048-token sequence, t = 8, 2 B: 2 x 2048 x 12288 x 2 x 7/8 = 88,080,384 B per layer:

    >>> from distlab import models
    >>> float(gathered_input_bytes_per_layer_array(models.model('gpt3-175b'), 1, 2048, 8, True, 2.0))
    88080384.0
    """
    if not hasattr(model, "hidden"):
        raise ConfigurationError(f"model={model!r} must be a TransformerModel (see distlab.models.model)")
    b, s = number_array(micro_batch_size, "micro_batch_size"), number_array(seq_len, "seq_len")
    t = number_array(tp, "tp", 1.0)
    e = float(positive(element_bytes, BYTES, "element_bytes"))
    kept = (number_array(sequence_parallel, "sequence_parallel") > 0) & (t > 1)
    return finite_result("activation bytes", np.where(kept, 2.0 * s * b * model.hidden * e * (1.0 - 1.0 / t), 0.0))
