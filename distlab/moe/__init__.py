"""Mixture-of-experts models and expert parallelism (Lesson 10).

catalog   MoEModel, MOE_MODELS, model(): shapes, total and active parameter counts, sources
capacity  expert capacity, dropped tokens, load imbalance (and the bounds every MoE formula accepts)
all_to_all  the all-to-all's bytes per GPU (intra- and inter-node) and time, EP members per node
cost      FLOPs, memory over EP / expert-DP, moe_layer_cost (what the step model adds per MoE layer)
export    moe_config, megatron_moe / torchtitan_moe / deepspeed_moe: engine input for an MoE configuration
activations  moe_activation_bytes: what an MoE layer keeps for backward, by tensor
routing   simulate_routing: a seeded router -> top-k -> loads -> capacity -> the all-to-all byte matrix
step      an MoE model inside training.estimate / planner.plan: the active-parameter view, expert-parallel
          model states and gradients, the all-to-all per layer on arrays (import distlab.moe.step)
"""

from __future__ import annotations

from .activations import MoEActivations, moe_activation_bytes, stage_activation_bytes
from .catalog import ATTENTION_KINDS, MOE_MODELS, MoEModel, model
from .all_to_all import all_to_all_bytes, all_to_all_time, ep_members_per_node, expected_remote_nodes
from .capacity import busiest_expert_load, dropped_tokens, expert_capacity, imbalance_factor
from .cost import (
    ALL_TO_ALLS_PER_LAYER,
    ExpertMemory,
    MoELayerCost,
    MoEStepCost,
    expert_groups,
    expert_parallel_memory,
    moe_layer_cost,
    moe_step_cost,
    moe_step_flops,
)
from .export import (
    FORMATS,
    MoEConfig,
    deepspeed_moe,
    export_moe,
    megatron_moe,
    megatron_moe_flags,
    moe_config,
    torchtitan_moe,
)
from .routing import MAX_SCORES, RoutingTrace, simulate_routing

__all__ = [
    "ATTENTION_KINDS",
    "MOE_MODELS",
    "MoEModel",
    "model",
    "ALL_TO_ALLS_PER_LAYER",
    "ExpertMemory",
    "MoELayerCost",
    "all_to_all_bytes",
    "all_to_all_time",
    "dropped_tokens",
    "ep_members_per_node",
    "expected_remote_nodes",
    "expert_capacity",
    "expert_groups",
    "expert_parallel_memory",
    "imbalance_factor",
    "busiest_expert_load",
    "moe_layer_cost",
    "moe_step_flops",
    "MoEStepCost",
    "moe_step_cost",
    "MoEActivations",
    "moe_activation_bytes",
    "stage_activation_bytes",
    "MAX_SCORES",
    "RoutingTrace",
    "simulate_routing",
    "FORMATS",
    "MoEConfig",
    "deepspeed_moe",
    "export_moe",
    "megatron_moe",
    "megatron_moe_flags",
    "moe_config",
    "torchtitan_moe",
]
