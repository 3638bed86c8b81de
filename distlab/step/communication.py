"""The step model's model-parallel communication terms: TP collectives, ring attention's K/V transfers (CP), the
MoE all-to-alls (EP), and the pipeline's bubble and p2p sends. Each takes the StepConfig and the results of the terms
before it; the formulas are distlab.tensor's, distlab.pipeline's and distlab.moe.step's. Lesson 7 §1-§4, Lesson 10 §5.
"""

from __future__ import annotations

import numpy as np

from .. import tensor
from ..efficiency import NVLS_MIN_GPUS
from ..pipeline.closed_form import bubble_overhead_array
from ..tp_overlap import (
    ASYNC_BACKWARD,
    ASYNC_TP,
    USERBUFFERS,
    async_backward_hidden_array,
    async_tp_hidden_array,
    hidden_share_array,
    overlappable_share_array,
)
from .compute import overlapped_per_microbatch
from .config import StepConfig
from .placement import p2p_message_bytes, pipeline_crossings_array

__all__ = [
    "sp_regather",
    "regather_hidden",
    "tp_term",
    "ring_attention_exposure",
    "cp_term",
    "ep_term",
    "bubble_term",
    "p2p_term",
]


def sp_regather(c: StepConfig):
    """Where sequence parallelism re-gathers the column-parallel inputs in the backward (distlab.tensor.SP_COLLECTIVES):
    with SP, unless the engine's linears keep the gathered input (StepConfig.keeps_gathered_input: torchtitan's DTensor
    plan, pytorch/torchtitan@3faaa1a0d torchtitan/parallelisms/parallelize_llama.py, PrepareModuleInput Shard(1) ->
    Replicate before attention and the MLP; autograd saves the replicated input of wq/wk/wv and w1/w3)."""
    return np.asarray(c.sequence_parallel, dtype=bool) & ~c.keeps_gathered_input


def regather_hidden(c: StepConfig, gather_s, gemm_pass_s):
    """Seconds per microbatch of SP's backward re-gathers that 'megatron-async-backward' hides: each (gather_s, one
    all-gather of b s h) beside its column-parallel linear's input-gradient GEMM, whose FLOPs equal the weight
    gradient's, up to that GEMM's time (tp_overlap.async_backward_hidden_array), on every layer of the stage."""
    return c.layers_stage * async_backward_hidden_array(c.model, gather_s, gemm_pass_s)


def tp_term(c: StepConfig, r: dict) -> dict:
    """TP communication = m x layers/stage x the ring time of distlab.tensor.tp_all_reduce_equivalents collectives of
    b s h e_msg / cp bytes over tp GPUs: 4 (6 with full recomputation; 4 + 2 x the share of the stage's layers
    recomputed with partial-layer recomputation, StepConfig.full_share), + 1 for sequence parallelism's two backward
    re-gathers (sp_regather), on the critical path. NCCL runs a TP all-reduce of >= NVLS_MIN_GPUS GPUs on NVLS where
    the node has it (sequence parallelism's reduce-scatter/all-gather stay on the ring). With a chunked TP overlap
    method (c.tp_overlap: distlab.tp_overlap) and sequence parallelism, the method's share of the traffic that fits
    under the stage's matmul time hides: hidden = share x min(TP time, matmul time), share (tp - 1) / tp
    (tp_overlap.hidden_share_array); 'userbuffers' counts the re-gathers in that traffic (Transformer Engine gathers
    them beside the input-gradient GEMM, ub_bulk_dgrad), 'async-tp' and 'none' leave them exposed, and 'async-tp'
    leaves the backward's two input-gradient reduce-scatters of each layer unfused, exposed too
    (tp_overlap.overlappable_share_array: (collectives - 1) / collectives of the traffic can hide), and each of its
    fused collectives hides only under its own linear's GEMM (tp_overlap.async_tp_hidden_array). 'megatron-async-
    backward' (with or without SP) hides each column-parallel linear's backward collective (one all-reduce, or its
    reduce-scatter: half of one) under that linear's weight-gradient GEMM and its re-gather under its input-gradient
    GEMM (the same FLOPs), each up to the GEMM's share of matmul_mb (tp_overlap.async_backward_hidden_array). The
    rest is exposed; tp_hidden_mb is the hidden part (the overlap term charges the compute beside it). Lesson 7 §2,
    Lesson 5 §6."""
    sp = np.asarray(c.sequence_parallel, dtype=bool)
    msg = tensor.tp_message_bytes(c.b, c.s, float(c.model.hidden), c.e_msg) / c.cp
    bw = c.intra_bw if c.nvls_bw is None else np.where((c.tp >= NVLS_MIN_GPUS) & ~sp, c.nvls_bw, c.intra_bw)
    collectives = 4.0 + 2.0 * c.full_share  # the recomputed layers' forward runs its 2 again (full_share: 1 or 0)
    regathers = tensor.tp_all_reduce_equivalents(sp, False, sp_regather(c)) - 4.0
    tp_mb = c.layers_stage * tensor.tp_comm_time(msg, c.tp, bw, c.intra_lat, collectives)
    regather_mb = c.layers_stage * tensor.tp_comm_time(msg, c.tp, bw, c.intra_lat, regathers)
    method = np.asarray(c.tp_overlap)
    share = np.where(sp, hidden_share_array(c.tp_overlap, c.tp), 0.0)
    overlappable = tp_mb * overlappable_share_array(c.tp_overlap, collectives)  # async-tp: not the backward's RS
    hidden = share * np.minimum(overlappable + np.where(method == USERBUFFERS, regather_mb, 0.0), r["matmul_mb"])
    gemm_pass = r["matmul_mb"] * (c.layer_fwd - c.core_fwd) / (c.stage_flops - c.core_stage)  # a layer's, one pass
    if np.any(method == ASYNC_TP):  # each fused collective under its own matmuls only
        one = tp_mb / (c.layers_stage * 2.0 * collectives)  # one all-gather or reduce-scatter of a layer
        own = c.layers_stage * async_tp_hidden_array(c.model, one, gemm_pass, share, c.full_share)
        hidden = np.where(method == ASYNC_TP, np.minimum(own, hidden), hidden)
    if np.any(method == ASYNC_BACKWARD):
        backward = np.where(sp, 0.5, 1.0) * tp_mb / (c.layers_stage * collectives)  # one all-reduce, or its RS
        gather = regather_mb / (c.layers_stage * tensor.SP_REGATHERS)  # one re-gather (0 without)
        hide = c.layers_stage * async_backward_hidden_array(c.model, backward, gemm_pass)
        hide = hide + regather_hidden(c, gather, gemm_pass)
        hidden = np.where(method == ASYNC_BACKWARD, hide, hidden)
    tp_mb = tp_mb + regather_mb - hidden
    return dict(tp_comm_s=c.m * tp_mb, tp_mb=tp_mb, tp_hidden_mb=hidden)


def ring_attention_exposure(block_comm_s, block_compute_s, cp, transfers_per_step):
    """One layer's ring attention on one GPU per microbatch: (comm, exposed, hidden) seconds. Each of the cp - 1
    ring steps passes a K/V block on (block_comm_s) while the GPU computes attention on the block it holds
    (block_compute_s, the forward's per block); the next step needs the block received, so a transfer hides only
    under its own step's compute, never under another's (Liu et al. 2023, Ring Attention, Sec. 3: the overlap holds
    while a block's compute outlasts its transfer). transfers_per_step: 3 (the forward's K/V; the backward's K/V and
    their gradients, twice the bytes against twice the FLOPs), 4 with full recomputation (the forward runs again).
    comm = t (cp - 1) block_comm; exposed = t (cp - 1) max(0, block_comm - block_compute); hidden = comm - exposed.
    production.context_parallel_layer (lessons 8 §4, 11 §3) and the step model's cp_term both call it.

    cp = 4, 3 transfers per step: 9 transfers of 22 us, each against a 13 us block, expose 9 x 9 = 81 us.

    >>> [round(float(t) * 1e6, 6) for t in ring_attention_exposure(22e-6, 13e-6, 4, 3)]  # comm, exposed, hidden (us)
    [198.0, 81.0, 117.0]
    """
    steps = np.asarray(transfers_per_step, dtype=float) * (np.asarray(cp, dtype=float) - 1.0)
    comm = steps * block_comm_s
    exposed = steps * np.maximum(0.0, np.asarray(block_comm_s, dtype=float) - block_compute_s)
    return comm, exposed, comm - exposed


def cp_term(c: StepConfig, r: dict) -> dict:
    """CP communication (exposed) = m x layers x ring_attention_exposure: per layer and microbatch 3 (cp - 1) block
    transfers (4 (cp - 1) with full recomputation) of b (s / cp) 2 kv_dim e_msg / tp bytes, on NVLink when tp x cp
    fits a node, else the fabric, each against the attention core of one block: the forward's core on the GPU's
    tokens / cp (load-balanced causal chunks, Megatron-Core context parallelism: every rank and step does the same
    work), half of it where the calibrated model's causal flash attention skips the masked half. cp_hidden_mb: what
    hides. Lesson 8 §4."""
    kv_block = c.b * c.s / c.cp * 2.0 * float(c.model.kv_heads * c.model.head_dim) * c.e_msg / c.tp
    hop = np.where(c.tp * c.cp <= c.g, kv_block / c.intra_bw + c.intra_lat, kv_block / c.inter_bw + c.inter_lat)
    executed = np.where(np.asarray(c.causal_flash, dtype=bool), 0.5, 1.0) * c.core_fwd / c.cp
    block = executed / (c.tp * c.peak * c.attention_efficiency)
    _, exposed, hidden = ring_attention_exposure(hop, block, c.cp, 3.0 + c.full_share)
    cp_mb = np.where(c.cp > 1, c.layers_stage * exposed, 0.0)
    hidden = np.where(c.cp > 1, c.layers_stage * hidden, 0.0)
    return dict(cp_comm_s=c.m * cp_mb, cp_mb=cp_mb, cp_hidden_mb=hidden)


def ep_term(c: StepConfig, r: dict) -> dict:
    """EP all-to-all = m x the MoE layers on the stage x one layer's all-to-alls (distlab.moe.step.
    all_to_all_layer_time_array, the fabric at the cross-rail rate), on the critical path of every microbatch (so
    also in the bubble's stage time); 0 for a dense model. Lesson 10 §5."""
    if not c.moe:
        return dict(ep_comm_s=0.0 * r["compute_s"], ep_mb=0.0)
    from ..moe import step as moe_step

    layer = moe_step.all_to_all_layer_time_array(
        c.model,
        c.b * c.s / (c.tp * c.cp),
        c.ep,
        c.etp_moe,
        c.code,
        c.e_msg,
        c.g,
        c.intra_bw,
        c.intra_lat,
        c.cross,
        c.inter_lat,
    )
    ep_mb = np.minimum(float(c.model.moe.moe_layers), c.layers_stage) * layer
    return dict(ep_comm_s=c.m * ep_mb + 0.0 * r["compute_s"], ep_mb=ep_mb)


def bubble_term(c: StepConfig, r: dict) -> dict:
    """pipeline bubble = (p - 1) / (v m) x m x the stage time per microbatch (compute, TP, CP, EP and their overlap
    slowdown): distlab.pipeline.bubble_overhead_array, the simulator's bubble for uniform stages. Also returns
    overlapped_mb, the compute per microbatch beside hidden TP and CP traffic (the overlap term reads it). Lesson 4 §3."""
    overlapped = overlapped_per_microbatch(c, r)
    stage_mb = r["compute_mb"] + r["tp_mb"] + r["cp_mb"] + r["ep_mb"] + c.overlap_slowdown * overlapped
    return dict(bubble_s=bubble_overhead_array(c.pp, c.m, c.v) * c.m * stage_mb, overlapped_mb=overlapped)


def p2p_term(c: StepConfig, r: dict) -> dict:
    """pipeline p2p = the 2 (pp v - 1) sends on the fill and drain path (interleaving multiplies the hops by v,
    Narayanan et al. 2021 Sec. 2.2.2) of b s h e_msg / (tp cp) bytes (scatter-gather, Sec. 4.1). Each of the pp - 1
    stage boundaries is priced where it lies (pipeline_crossings_array): NVLink inside a node, else the fabric at
    inter_bw when the stride tp cp dp is a multiple of the node size (equal local ranks), cross-rail otherwise; the
    v - 1 wrap-around hops (last stage to first) likewise. Steady-state sends overlap with compute. Lesson 7 §4."""
    g, pp = c.g, c.pp
    stride = c.tp * c.cp * c.dp
    msg = p2p_message_bytes(c.b, c.s, float(c.model.hidden), c.tp, c.e_msg) / c.cp
    crossing = pipeline_crossings_array(pp, stride, g)
    # np.fmod: np.mod's value for these operands (>= 0) at a third of its cost
    fabric_hop = msg / np.where(np.fmod(stride, g) == 0, c.inter_bw, c.cross) + c.inter_lat
    nvlink_hop = msg / c.intra_bw + c.intra_lat
    wrap_bw = np.where(np.fmod(stride * (pp - 1.0), g) == 0, c.inter_bw, c.cross)
    wrap_hop = np.where(stride * pp <= g, nvlink_hop, msg / wrap_bw + c.inter_lat)
    one_way = c.v * ((pp - 1.0 - crossing) * nvlink_hop + crossing * fabric_hop) + (c.v - 1.0) * wrap_hop
    return dict(p2p_s=np.where(pp > 1, 2.0 * one_way, 0.0))
