"""The step model's memory term: per-GPU weights, gradients, optimizer states and activations of the busiest
(first) pipeline stage, from distlab.memory's array cores (and distlab.memory_recipes', distlab.moe.step's).
Lesson 1, Lesson 7 §2.
"""

from __future__ import annotations

import numpy as np

from .. import memory
from ..memory_recipes import gathered_input_bytes_per_layer_array
from ..partial_recompute import mixed_layers_array, recomputed_layers_array
from ..pipeline.closed_form import in_flight_array, stage_in_flight_array
from .config import StepConfig

__all__ = ["model_states_term", "activations_term", "per_layer_bytes"]


def model_states_term(c: StepConfig, r: dict) -> dict:
    """weights_bytes, gradients_bytes, optimizer_bytes per GPU: the ZeRO paper's count (memory.
    model_state_bytes_array) sharded over tp x pp and ZeRO's dp x cp; an engine's recipe counts the first stage as
    Megatron's theoretical_memory_usage does (its layers plus the embedding, and with pp = 1 the untied output layer;
    memory_recipes.recipe_state_bytes_array); an MoE model's expert states over etp x ep (moe.step). Lesson 1."""
    model, recipe, mem = c.model, c.recipe, c.memory_recipe
    if c.moe:
        from ..moe import step as moe_step

        w, g, o = moe_step.expert_state_bytes_array(
            model, recipe, mem, c.zero, c.dpc, c.tp, c.pp, c.ep, c.etp_moe, c.first_layers
        )
    elif mem is None or not mem.engine:
        w, g, o = memory.model_state_bytes_array(float(model.parameter_count()), recipe, c.zero, c.dpc, c.tp, c.pp)
    else:
        from ..memory_recipes import largest_layer_params, recipe_state_bytes_array

        ppl = float(model.params_per_layer())
        first = (
            c.first_layers * ppl
            + model.embedding_params()
            + np.where(c.pp == 1, model.output_params() + model.final_norm_params(), 0.0)
        )
        w, g, o = recipe_state_bytes_array(
            mem, first / c.tp, ppl / c.tp, largest_layer_params(model) / c.tp, c.zero, c.dpc
        )
    return dict(weights_bytes=w, gradients_bytes=g, optimizer_bytes=o)


def activations_term(c: StepConfig, r: dict) -> dict:
    """activations_bytes: one layer's stored activations (memory.activation_bytes_per_layer_array; flash attention
    never stores the scores, as selective recomputation; divided by cp; an MoE model adds the router's and the
    dispatched copies' tensors) x the stage's layers x the microbatches in flight on the first stage (pipeline.
    in_flight_array: GPipe m, 1F1B min(p, m), interleaved min(p (1 + (p-1)/(p v)), m); Korthikanti et al. 2022,
    Sec. 4.2.3); an engine whose TP linears keep sequence parallelism's gathered inputs (StepConfig.
    keeps_gathered_input: torchtitan) adds memory_recipes.gathered_input_bytes_per_layer_array, except under full
    recomputation; an engine whose selective recomputation is torchtitan's op checkpointing (memory_recipes
    'fsdp2') keeps memory.op_sac_activation_bytes_per_layer_array's count instead. Balanced stages: the first stage
    (one layer fewer) or the second, whichever holds more: one more layer, and pipeline.stage_in_flight_array of
    stage 1 in flight (Megatron-LM's warm-up: 1F1B one microbatch fewer, interleaved 2 / v fewer). Partial-layer
    recomputation (StepConfig.partial, distlab.partial_recompute): of a stage's n layers min(cap, n) keep only their
    input (the 'full' count), the rest the count without recomputation (partial_recompute.mixed_layers_array).
    Lesson 1, Lesson 4 §5."""
    per_layer = per_layer_bytes(c, c.code)
    in_flight = in_flight_array(np.asarray(c.schedule_code), c.pp, c.m, c.v)
    if c.partial:  # recompute_layers: the recomputed layers keep their input, the others the 'none' count
        kept = np.where(c.full, per_layer_bytes(c, np.zeros_like(c.code)), per_layer)  # 'none'/'selective': as is

        def stage(layers):
            return mixed_layers_array(per_layer, kept, layers, recomputed_layers_array(c.recompute_cap, layers))
    else:

        def stage(layers):
            return per_layer * layers

    activations = stage(c.layers_stage) * in_flight
    if c.balance_stages:
        first = c.first_layers
        second = stage_in_flight_array(np.asarray(c.schedule_code), c.pp, c.m, c.v, 1)
        if c.partial:
            both = np.maximum(stage(first) * in_flight, stage(first + 1.0) * second)
        else:  # as it always was: one product per layer count (the snapshot of issue 29 stays bit for bit)
            both = per_layer * np.maximum(first * in_flight, (first + 1.0) * second)
        activations = np.where(c.pp > 2, both, activations)
    return dict(activations_bytes=activations)


def per_layer_bytes(c: StepConfig, code):
    """One layer's stored activation bytes per microbatch under recomputation `code` (activations_term's count)."""
    stored = np.where(np.asarray(c.flash) & (code == 0), 1, code)
    per_layer = memory.activation_bytes_per_layer_array(c.model, c.b, c.s, c.tp, c.sequence_parallel, stored, c.e)
    keeps = c.keeps_gathered_input & (code != 2)  # torchtitan's linears keep SP's gathered inputs (full: the input)
    if np.any(keeps):
        gathered = gathered_input_bytes_per_layer_array(c.model, c.b, c.s, c.tp, c.sequence_parallel, c.e)
        per_layer = per_layer + np.where(keeps, gathered, 0.0)
    per_layer = per_layer / c.cp
    if getattr(c.memory_recipe, "selective", None) == "op":  # torchtitan's selective op checkpointing
        op_sac = memory.op_sac_activation_bytes_per_layer_array(c.model, c.b, c.s, c.tp, c.sequence_parallel, c.e)
        per_layer = np.where(code == 1, op_sac / c.cp, per_layer)
    if c.moe:
        from ..moe import step as moe_step

        per_layer = per_layer + moe_step.routed_activation_extra_array(
            c.model, c.b, c.s, c.tp, c.cp, c.etp_moe, stored, c.e, c.ep
        )
    return per_layer
