"""The step model's compute terms: the busiest stage's compute per microbatch by part (the weight matmuls, the
attention core, the element-wise traffic), the overlap slowdown, and the optimizer step. Each takes the StepConfig
(and the results of the terms before it) and returns NumPy arrays. The constants and formulas they use are
distlab.efficiency's and distlab.flops'. Lesson 7 §1, §8.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..attention_kernels import (
    FLASH_FORWARD_BACKWARD_WORK,
    UNPAD_KERNELS,
    flash_attention_work_array,
    kernel_rates,
    unpad_copy_bytes_per_token,
)
from ..attention_variants import attention_shape, window_share
from ..efficiency import layer_gemm_slowdown_array
from ..elementwise import (
    core_attention_bytes_array,
    elementwise_bytes_array,
    fp8_cast_bytes_array,
    loss_bytes_per_token,
)
from ..flops import TRAINING_PASSES
from ..memory_recipes import gradient_copy_bytes_per_param
from ..moe import step as moe_step
from .config import StepConfig

__all__ = [
    "matmul_seconds",
    "attention_core_seconds",
    "elementwise_seconds",
    "compute_term",
    "overlap_term",
    "optimizer_term",
]


# An FP8 recipe leaves the output layer (the logits GEMMs) in 16-bit: Megatron-Core's GPTModel builds it as
# tensor_parallel.ColumnParallelLinear (megatron/core/models/gpt/gpt_model.py), outside Transformer Engine's
# fp8_autocast, which converts only TE modules (NeMo and Megatron Bridge run the same model); torchtitan's Float8
# converts every nn.Linear but the one of fqn 'output' (torchtitan 9dec370, components/float8.py). Lesson 8.


def matmul_seconds(c: StepConfig):
    """Seconds per microbatch of the busiest stage's weight GEMMs and logits: their FLOPs (the stage's FLOPs less the
    attention core) / (tp x peak x matmul efficiency); with gemm_sms (the calibrated model) each GEMM at its shape
    factor (efficiency.layer_gemm_slowdown_array: tile and wave quantisation, roofline; an MoE layer's expert GEMMs as
    many at once as expert_gemm runs, distlab.expert_gemms), the logits at theirs. With
    FP8 the weight GEMMs at the FP8 peak and share, the logits at the 16-bit ones (the output layer stays 16-bit). Lesson 7 §1,
    §8."""
    gemm = c.stage_flops - c.core_stage
    logit_gemm = c.logit_share * TRAINING_PASSES * c.logits_fwd
    slow_layer = slow_logits = 1.0
    if c.gemm_sms is not None:
        # the roofline's ridge at 2-byte operands (gemm_shape_factor_array); FP8 operands are 1 byte: half the ridge
        ridge = c.peak * c.best_gemm / c.hbm * (0.5 if c.fp8 else 1.0)
        slow_layer, slow_logits = layer_gemm_slowdown_array(
            c.model, c.tokens_mb, c.tp, c.gemm_sms, ridge, c.ep, c.etp, c.expert_gemm
        )
    if not c.fp8:
        return ((gemm - logit_gemm) * slow_layer + logit_gemm * slow_logits) / (c.tp * c.peak * c.efficiency)
    # FP8: the output layer stays 16-bit (see above), at the 16-bit share, peak and ridge
    if c.gemm_sms is not None:
        ridge = c.core_peak * c.best16 / c.hbm
        slow_logits = layer_gemm_slowdown_array(c.model, c.tokens_mb, c.tp, c.gemm_sms, ridge, c.ep, c.etp)[1]
    layers = (gemm - logit_gemm) * slow_layer / (c.tp * c.peak * c.efficiency)
    return layers + logit_gemm * slow_logits / (c.tp * c.core_peak * c.efficiency16)


def attention_core_seconds(c: StepConfig):
    """Seconds per microbatch of the stage's attention core: the counted core (3 x 4 b s^2 a d per layer, + 1
    recomputed) at attention_efficiency x core peak / tp (the 16-bit peak for an FP8 recipe); the calibrated model's
    causal flash attention executes attention_kernels.flash_attention_work_array's FLOPs instead (masked half skipped,
    scores recomputed in the backward). With a named kernel's rates (attention_table: attention_kernels.kernel_rates at
    the sequence length) the forward (1, + 1 recomputed, x half the counted forward) runs at the forward rate and the
    backward (2.5 x half) at the backward rate; FP8 attention (fp8_attention_tables) multiplies each by its measured
    FP8 / BF16 time, and the layers of a measured window (window_table; attention_variants.window_share of the core)
    run their counted core (forward 1, + 1 recomputed; backward 2.5) at the window's rates. Lesson 7 §8."""
    causal = np.asarray(c.causal_flash, dtype=bool)
    executed = np.where(causal, c.layers_stage * flash_attention_work_array(c.core_fwd, c.core_again), c.core_stage)
    rate = c.tp * c.core_peak * c.attention_efficiency
    if c.attention_table is None:
        return executed / rate
    forward, backward = kernel_rates(c.attention_table, c.s)
    half = 0.5 * c.layers_stage * c.core_fwd
    again = c.core_again  # the share of the layers recomputing the core (1 or 0 unless partial)
    fwd, bwd = half * (1.0 + again) / forward, half * (FLASH_FORWARD_BACKWARD_WORK - 1.0) / backward
    if c.fp8 and c.fp8_attention_tables:
        tables = dict(c.fp8_attention_tables)
        slower_fwd, slower_bwd = kernel_rates(tables.get(attention_shape(c.model), tables["gqa"]), c.s)
        fwd, bwd = fwd * slower_fwd, bwd * slower_bwd
    kernel = (fwd + bwd) / (c.tp * c.core_peak)
    if c.window_table is not None:
        share = window_share(c.model, c.s)
        if np.any(share > 0):
            window_fwd, window_bwd = kernel_rates(c.window_table[1:], c.s)
            counted = c.layers_stage * c.core_fwd * share  # the windowed layers' counted forward, 4 b s W a d each
            window = counted * ((1.0 + again) / window_fwd + (FLASH_FORWARD_BACKWARD_WORK - 1.0) / window_bwd)
            kernel = (1.0 - share) * kernel + window / (c.tp * c.core_peak)
    return np.where(causal, kernel, executed / rate)


def elementwise_seconds(c: StepConfig):
    """Seconds per microbatch of the memory-bound element-wise kernels: memory_traffic x their HBM bytes counted
    kernel by kernel (elementwise.elementwise_bytes_array, at the recipe's elementwise_bytes: 2 for FP8) x passes (3,
    4 with full recomputation or torchtitan's selective op checkpointing, 3 + the share of the stage's layers
    recomputed with partial-layer recomputation, StepConfig.full_share; the unfused attention core's softmax, dropout
    and permute, elementwise.core_attention_bytes_array, also 4 with selective recomputation, which re-runs the
    core) / HBM bandwidth, plus an FP8 recipe's casts (elementwise.fp8_cast_bytes_array: the
    forward's once, twice with full recomputation, the backward's once) and the cross-entropy loss on the stage
    holding the logits (elementwise.loss_bytes_per_token, split over tp); an engine's attention wrapper's unpad / pad
    copies (attention_kernels.unpad_copy_bytes_per_token: the forward's again where the core is recomputed) and an
    FSDP engine's gradient cast / divide before each reduce-scatter (memory_recipes.gradient_copy_bytes_per_param x
    the GPU's parameters, where gradients are reduced over replicas). Lesson 7 §8."""
    b, s, e = c.b, c.s, c.e_elementwise
    per_layer = b * s * elementwise_bytes_array(c.model, s, c.tp, c.sequence_parallel, c.flash, c.kernels_code, e)
    # op checkpointing recomputes them all; full recomputation the recomputed layers' (full_share of the stage)
    passes = TRAINING_PASSES + np.where(c.op_sac, 1.0, c.full_share)
    selective = (c.code == 1) & ~c.op_sac  # Megatron's attention-core recompute re-runs the core's kernels
    again = np.where(selective, b * s * core_attention_bytes_array(c.model, s, c.tp, c.flash, e), 0.0)
    traffic = c.layers_stage * c.memory_traffic * (passes * per_layer + again) / c.cp
    if c.fp8:  # FP8 casts: the forward's (again with full recomputation) and the backward's, per token
        forward, backward = fp8_cast_bytes_array(c.model, c.tp, c.sequence_parallel, c.cast_bytes)
        casts = (1.0 + c.full_share) * forward + backward
        traffic = traffic + c.layers_stage * c.memory_traffic * b * s * casts / c.cp
    loss = c.logit_share * c.memory_traffic * b * s / c.cp * loss_bytes_per_token(c.model.vocab, e) / c.tp
    return (traffic + loss + _engine_copy_bytes(c)) / c.hbm


def _engine_copy_bytes(c: StepConfig):
    """HBM bytes per microbatch (x memory_traffic) of the engine's copies around its kernels: the attention wrapper's
    unpad / pad (a kernel of UNPAD_KERNELS) and FSDP's gradient cast / divide before each reduce-scatter."""
    out: Any = 0.0
    if c.attention_kernel in UNPAD_KERNELS:
        kv = float(c.model.kv_heads * c.model.head_dim)
        forward, backward = unpad_copy_bytes_per_token(c.attention_kernel, c.width / c.tp, kv / c.tp, c.e)
        again = c.core_again
        out = out + c.layers_stage * c.memory_traffic * c.tokens_mb * ((1.0 + again) * forward + backward)
    per_param = gradient_copy_bytes_per_param(c.memory_recipe, c.zero)
    if np.any(per_param > 0.0):
        if c.moe:
            dense, expert = moe_step.expert_gradient_bytes(c.model, c.recipe, c.tp, c.pp, c.ep, c.etp_moe)
            params = (dense + expert) / float(c.recipe.gradient_bytes)
        else:
            params = float(c.model.parameter_count()) / (c.tp * c.pp)
        out = out + np.where(c.dpc > 1, c.memory_traffic * per_param * params, 0.0)
    return out


def compute_term(c: StepConfig, r: dict) -> dict:
    """compute = m x t_mb, the busiest stage's compute per microbatch by part: matmuls + attention core + element-wise
    traffic (above). Also returns for the terms after it: compute_mb (t_mb), matmul_mb, backward_share (the backward's share of t_mb: 2 forwards + recompute of 3 + recompute, what the
    gradient reduction hides behind). Lesson 7 §1, §8."""
    matmul = matmul_seconds(c)
    core = attention_core_seconds(c)
    t_mb = matmul + core + elementwise_seconds(c)
    stage_flops = c.stage_flops
    backward = (stage_flops - c.layers_stage * c.layer_fwd - c.logit_share * c.logits_fwd) / stage_flops
    return dict(compute_s=c.m * t_mb, compute_mb=t_mb, matmul_mb=matmul, backward_share=backward)


def overlapped_per_microbatch(c: StepConfig, r: dict):
    """The seconds of a microbatch's compute that run beside hidden TP and CP traffic (at most t_mb): the bubble term
    returns it as overlapped_mb (its stage time holds the slowdown of it) and the overlap term reads it there."""
    return np.minimum(r["tp_hidden_mb"] + r["cp_hidden_mb"], r["compute_mb"])


def overlap_term(c: StepConfig, r: dict) -> dict:
    """overlap slowdown = overlap_slowdown x the communication priced as hidden: compute beside the collectives it
    hides runs slower (efficiency.OVERLAP_SLOWDOWN, Lee et al. 2025: 18.9% on average; 0 for the fixed model).
    Hidden: the TP traffic under its matmuls (tp_overlap), ring attention's transfers under the attention core (per
    microbatch, also in the bubble's stage time) and the DP traffic not exposed; never more than overlap_slowdown x
    the compute. Steady-state pipeline sends are left out (small). Lesson 7 §8."""
    overlapped = r["overlapped_mb"]
    rest = np.maximum(0.0, r["compute_s"] - c.m * overlapped)
    return dict(
        overlap_s=c.m * (c.overlap_slowdown * overlapped) + c.overlap_slowdown * np.minimum(r["dp_hidden_s"], rest)
    )


def optimizer_term(c: StepConfig, r: dict) -> dict:
    """optimizer step = (2 x optimizer + gradient + weight bytes of the GPU's shard) / HBM bandwidth (a memory-bound
    Adam: read and write the states, read the gradients and weights). Lesson 7 §1."""
    return dict(optimizer_s=(2.0 * r["optimizer_bytes"] + r["gradients_bytes"] + r["weights_bytes"]) / c.hbm)
