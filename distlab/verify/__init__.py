"""Check distlab's predictions against real PyTorch on this CPU (lesson 9; needs ``pip install torch==2.13.0``).

    model state   measure_model_state: parameters, gradients and Adam state after a real step
    activations   measure_activations: bytes autograd saves for backward in one transformer layer
    all-reduce    measure_all_reduce + fit_alpha_beta: gloo processes on 127.0.0.1, alpha-beta fit
    MoE activations  measure_moe_activations: bytes autograd saves in one MoE block, against distlab.moe (lesson 10)
    all-to-all    measure_all_to_all: an MoE dispatch as all_to_all_single, bytes against distlab.moe (lesson 10)
    pipelines     torch_pipeline_orders / compare_pipeline_orders: torch.distributed.pipelining's plans
    sharding      measure_sharding: DDP, FSDP2 (fully_shard) and HSDP on gloo, bytes held and collectives run

torch is imported inside the functions that need it; without it they raise
distlab.errors.MissingDependencyError with the install command. fit_alpha_beta needs only NumPy.
"""

from __future__ import annotations

from ._modules import build_gpt, build_layer
from ._torch import TORCH_MESSAGE, require_torch, torch_available
from .activations import ActivationMeasurement, SavedTensor, cpu_rng_state_layout, measure_activations
from .all_to_all import AllToAllMeasurement, measure_all_to_all
from .allreduce import AllReduceMeasurement, AlphaBetaFit, DEFAULT_SIZES, fit_alpha_beta, measure_all_reduce
from .moe_activations import MoEActivationMeasurement, build_moe_block, measure_moe_activations, tiny_moe_model
from .model_state import ModelStateMeasurement, lesson_model, measure_model_state
from .pipeline_orders import TORCH_SCHEDULES, OrderComparison, compare_pipeline_orders, torch_pipeline_orders
from .sharding import ShardingMeasurement, ShardingRun, measure_sharding

__all__ = [
    "TORCH_MESSAGE",
    "require_torch",
    "torch_available",
    "build_gpt",
    "build_layer",
    "lesson_model",
    "measure_model_state",
    "ModelStateMeasurement",
    "measure_activations",
    "ActivationMeasurement",
    "SavedTensor",
    "cpu_rng_state_layout",
    "measure_all_reduce",
    "fit_alpha_beta",
    "AllReduceMeasurement",
    "AlphaBetaFit",
    "DEFAULT_SIZES",
    "measure_moe_activations",
    "MoEActivationMeasurement",
    "build_moe_block",
    "tiny_moe_model",
    "measure_all_to_all",
    "AllToAllMeasurement",
    "torch_pipeline_orders",
    "compare_pipeline_orders",
    "OrderComparison",
    "TORCH_SCHEDULES",
    "measure_sharding",
    "ShardingMeasurement",
    "ShardingRun",
]
