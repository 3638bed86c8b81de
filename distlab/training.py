"""Training step time, FLOPs, MFU/HFU, throughput and scaling efficiency.

The step model and StepEstimate count FLOPs with distlab.flops (layer weights, attention and the
logits; recomputation by mode). MFU is PaLM's definition (Chowdhery et al. 2022, App. B): model
FLOPs, attention and logits included, no recomputation, against peak; HFU adds the forward work
that recomputation repeats. model_flops / hardware_flops below are the 6PT rule of thumb,
6 x params x tokens (8 with full recomputation; Kaplan et al. 2020), which leaves attention out.
Throughput = global batch / step time.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from ._arguments import (
    broadcasting,
    RECOMPUTE_MODES,
    as_cluster,
    code_array,
    finite_result,
    number_array,
    recompute_mode,
    renamed_keyword,
    zero_stage,
)
from .errors import ConfigurationError
from .flops import (
    TRAINING_PASSES,
    layer_forward_flops_array,
    logit_forward_flops_array,
    recomputed_forward_flops_array,
    step_flops,
)
from .units import FLOP_PER_SECOND, SECONDS, format_bytes, format_seconds, non_negative, positive, positive_int

if TYPE_CHECKING:
    from .memory import MemoryBreakdown

__all__ = [
    "FLOPS_PER_PARAM_TOKEN",
    "FLOPS_PER_PARAM_TOKEN_FULL_RECOMPUTE",
    "model_flops",
    "forward_time",
    "hardware_flops",
    "megatron_flops_per_iteration",
    "training_days",
    "mfu",
    "check_fraction",
    "SCHEDULES",
    "MAX_SEQ_LEN",
    "MAX_MICRO_BATCH",
    "MAX_GLOBAL_BATCH",
    "batch_and_sequence",
    "group_all_reduce_time_array",
    "p2p_message_bytes",
    "equal_local_ranks_array",
    "pipeline_crossings_array",
    "step_model_array",
    "StepEstimate",
    "hardware_arguments",
    "estimate",
    "compute_model_for",
    "compute_arguments",
    # the OOM triage, moved to distlab.triage; still importable from here (see __getattr__ below)
    "TRIAGE_ORDER",
    "TriageStep",
    "OOMTriage",
    "MAX_LADDER_RUNGS",
    "oom_triage",
    "explain_infeasible",
    "memory_modes_index",
    "format_fixes",
]

#: Training FLOPs per parameter per token: forward 2, backward 4 (weight and input gradients).
FLOPS_PER_PARAM_TOKEN = 6.0
#: With full recomputation the forward runs again during backward: 2 + 2 + 4.
FLOPS_PER_PARAM_TOKEN_FULL_RECOMPUTE = 8.0


def model_flops(params, tokens) -> float:
    """Model FLOPs of one training step: 6 x params x tokens (tokens = global batch x sequence length).

    The 6PT rule of thumb (Kaplan et al. 2020, Sec. 2.1): it leaves attention out. estimate() and
    MFU count with distlab.flops.step_flops. Lesson 7 §1 (and Lesson 4 §4).

    >>> model_flops(1e9, 1000)  # 6 x 1e9 x 1e3
    6000000000000.0
    """
    return finite_result(
        "model FLOPs", FLOPS_PER_PARAM_TOKEN * positive(params, "", "params") * positive(tokens, "", "tokens")
    )


def forward_time(params, tokens, peak_flops) -> float:
    """Seconds of one forward pass at peak: 2 x params x tokens / peak FLOP/s, the forward third of
    6PT (Kaplan et al. 2020). With one layer's parameters and one microbatch's tokens it is the
    layer_time of pipeline.analyze_stages. Lesson 4 §7.

    >>> forward_time(1e9, 1000, 1e15)  # 2e12 FLOPs at 1 PFLOP/s
    0.002
    """
    return finite_result(
        "forward time", model_flops(params, tokens) / 3 / positive(peak_flops, FLOP_PER_SECOND, "peak_flops")
    )


def hardware_flops(params, tokens, recompute="none") -> float:
    """FLOPs the GPUs execute: 6PT, or 8PT with full recomputation (selective recomputation of
    attention scores adds no parameter FLOPs in this model). Narayanan et al. 2021, Sec. 5.1. The rule
    of thumb; estimate() and HFU count with distlab.flops.step_flops (attention, logits, recompute by mode).
    Lesson 7 §1.

    >>> hardware_flops(1e9, 1000, recompute='full')  # 8 x 1e9 x 1e3
    8000000000000.0
    """
    factor = FLOPS_PER_PARAM_TOKEN_FULL_RECOMPUTE if recompute_mode(recompute) == "full" else FLOPS_PER_PARAM_TOKEN
    return finite_result("hardware FLOPs", factor * positive(params, "", "params") * positive(tokens, "", "tokens"))


@renamed_keyword(batch="global_batch")
def megatron_flops_per_iteration(global_batch, seq_len, layers, hidden, vocab) -> float:
    """Narayanan et al. 2021, Eq. 3 (full recomputation, attention and logits included):
    F = 96 B s l h^2 (1 + s / (6 h) + V / (16 l h)), B the global batch. Lesson 7 §1.

    >>> round(megatron_flops_per_iteration(1536, 2048, 96, 12288, 51200) / 1e18, 2)  # GPT-3 175B, batch 1536
    4.51
    """
    b = positive_int(global_batch, "global_batch")
    s = positive_int(seq_len, "seq_len")
    l = positive_int(layers, "layers")
    h = positive_int(hidden, "hidden")
    v = positive_int(vocab, "vocab")
    return finite_result("FLOPs per iteration", 96.0 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h)))


def training_days(params, tokens, gpus, flops_per_gpu, recompute="full") -> float:
    """End-to-end training time in days: factor x T x P / (n X), factor 8 with full
    recomputation (Narayanan et al. 2021, Eq. 4), 6 without. Lesson 7 §1.

    >>> round(training_days(175e9, 300e9, 1024, 140e12))  # GPT-3 on 1,024 A100s at 140 TFLOP/s: Sec. 5.1's 34 days
    34
    """
    seconds = hardware_flops(params, tokens, recompute) / (
        positive_int(gpus, "gpus") * positive(flops_per_gpu, FLOP_PER_SECOND, "flops_per_gpu")
    )
    return finite_result("training days", seconds / 86400.0)


def mfu(model_flops_per_step, step_time, gpus, peak_flops) -> float:
    """Model FLOPs utilisation = model FLOPs / (step time x GPUs x peak FLOP/s per GPU).

    Chowdhery et al. 2022 (PaLM), App. B. Lesson 7 §1.

    >>> mfu(6e12, 2.0, 4, 1e12)  # 6e12 / (2 s x 4 GPUs x 1e12 FLOP/s)
    0.75
    """
    value = positive(model_flops_per_step, "FLOP", "model_flops") / (
        positive(step_time, SECONDS, "step_time")
        * positive_int(gpus, "gpus")
        * positive(peak_flops, FLOP_PER_SECOND, "peak_flops")
    )
    return finite_result("MFU", value)


def check_fraction(value, name: str) -> float:
    """A fraction in (0, 1], such as an achievable share of peak; ConfigurationError otherwise. Lesson 7 §6.

    >>> check_fraction(0.5, 'efficiency')
    0.5
    """
    number = positive(value, "", name)
    if number > 1:
        raise ConfigurationError(f"{name}={number:g} must be a fraction in (0, 1] (e.g. 0.5 for 50% of peak)")
    return number


# ----------------------------------------------------------------------------------------
# The step-time model: one NumPy core shared by estimate() (scalars) and the planner (arrays).

SCHEDULES = ("gpipe", "1f1b", "interleaved")

#: Longest sequence (tokens), largest micro-batch and global batch (sequences) the step model accepts: far
#: beyond any real run, small enough that every product of them (b x s x h, 6 x P x B x s FLOPs) stays a
#: finite float.
MAX_SEQ_LEN = 2**30
MAX_MICRO_BATCH = 2**20
MAX_GLOBAL_BATCH = 2**40
#: Most pipeline stages the array helpers accept (every stage holds at least one layer; no model has this many).
MAX_STAGES = 2**16


def batch_and_sequence(global_batch, seq_len, micro_batch_size=1) -> tuple[int, int, int]:
    """(global_batch, seq_len, micro_batch_size) as whole numbers within the step model's bounds. Lesson 7 §1.

    >>> batch_and_sequence(512, 4096.0)
    (512, 4096, 1)
    """
    values = []
    for value, name, top, what in (
        (global_batch, "global_batch", MAX_GLOBAL_BATCH, "sequences"),
        (seq_len, "seq_len", MAX_SEQ_LEN, "tokens"),
        (micro_batch_size, "micro_batch_size", MAX_MICRO_BATCH, "sequences"),
    ):
        n = positive_int(value, name)
        if n > top:
            raise ConfigurationError(f"{name}={value!r} is more than {top:,} {what}")
        values.append(n)
    batch, seq, micro = values
    return batch, seq, micro


def group_all_reduce_time_array(size_bytes, n, stride, gpus_per_node, intra_bw, intra_lat, inter_bw, inter_lat):
    """All-reduce time of the rank groups of n members spaced `stride` apart (the DP group: stride tp) on nodes of
    g GPUs: distlab.collectives.placed_time_array('all-reduce', ...), the one home of a collective on a placed
    group (a ring inside a node, hierarchical across nodes, a fabric ring for an uneven split). Arrays,
    unvalidated. Lesson 7 §3 (and Lesson 8 §2).

    >>> t = group_all_reduce_time_array(1.6e9, [8, 16], 1, 8, 100e9, 0.0, 50e9, 0.0)
    >>> [round(float(x), 6) for x in t]
    [0.028, 0.032]
    """
    from .collectives.placed import placed_time_array

    return placed_time_array(
        "all-reduce", size_bytes, n, stride, gpus_per_node, intra_bw, intra_lat, inter_bw, inter_lat
    )


@broadcasting
def p2p_message_bytes(micro_batch_size, seq_len, hidden, tp, element_bytes):
    """Bytes of one pipeline send per microbatch: b x s x h x e / tp (Megatron's scatter-gather
    optimisation splits the activation over the tp GPUs of a stage, Narayanan et al. 2021 Sec. 4.1;
    e = PrecisionRecipe.message_bytes; b x s x h x e is distlab.memory.message_bytes, the message
    pipeline.boundary_message_bytes prices). NumPy broadcast, unvalidated. Lesson 7 §4.

    >>> float(p2p_message_bytes(1, 4096, 8192, 4, 2))  # 4096 x 8192 x 2 B / 4 = 16 MiB
    16777216.0
    """
    from .memory import message_bytes

    return finite_result(
        "p2p message bytes",
        message_bytes(micro_batch_size, seq_len, hidden, element_bytes) / number_array(tp, "tp", low=1.0),
    )


def equal_local_ranks_array(n, stride, gpus_per_node):
    """Whether the inter-node traffic of every group of n ranks spaced `stride` apart joins GPUs of EQUAL local
    rank: distlab.collectives.placed.equal_local_ranks_array (the placed collective's rule). Lesson 8 §2.

    >>> equal_local_ranks_array([12, 16], 1, 8).tolist()  # dp 12 straddles nodes of 8; dp 16 fills two
    [False, True]
    """
    from .collectives.placed import equal_local_ranks_array as placed_rule

    return placed_rule(n, stride, gpus_per_node)


@broadcasting
def pipeline_crossings_array(pp, stride, gpus_per_node):
    """How many of the pp - 1 stage boundaries of a pipeline whose neighbours sit `stride` ranks apart
    (stride tp x dp in the order tp-cp-ep-dp-pp) send across a node boundary.

    Boundary b joins stage b - 1 (ranks [(b-1) W, b W)) to stage b (W = stride): some rank r of it
    sends to r + W on another node unless both stages lie inside one node, i.e. unless
    floor((b-1) W / g) = floor(((b+1) W - 1) / g). W >= g: every boundary crosses. Example: tp 2 x
    dp 2 on nodes of 8: stages 0-1 share node 0, 2-3 node 1, ...: of 7 boundaries, 3 cross and 4
    stay on NVLink. NumPy broadcast, unvalidated. Lesson 7 §4.

    >>> pipeline_crossings_array(8, 4, 8)  # boundaries 2, 4 and 6 leave a node
    3.0
    """
    pp = number_array(pp, "pp", low=1.0)
    w = number_array(stride, "stride", low=1.0)
    g = float(positive_int(gpus_per_node, "gpus_per_node"))
    top = int(np.max(pp)) if pp.size else 1
    if top > MAX_STAGES:
        raise ConfigurationError(f"pp={top:,} stages is more than {MAX_STAGES:,}")
    if top <= 1:
        return np.zeros(np.broadcast(pp, w).shape) if np.ndim(pp) or np.ndim(w) else 0.0
    shape = np.broadcast(pp, w).shape
    if 0 in shape:
        return np.zeros(shape)
    # the planner's columns repeat a few (pp, stride) pairs many times: count each distinct pair once
    flat_pp, flat_w = np.broadcast_to(pp, shape).ravel(), np.broadcast_to(w, shape).ravel()
    span = float(np.max(flat_w)) + 1.0
    keys, first, inverse = np.unique(flat_pp * span + flat_w, return_index=True, return_inverse=True)
    upp, uw = flat_pp[first], flat_w[first]
    b = np.arange(1, top, dtype=float)[:, None]
    cross = (uw >= g) | (np.floor((b - 1) * uw / g) != np.floor(((b + 1) * uw - 1) / g))
    count = np.sum(cross & (b < upp), axis=0).astype(float)[np.ravel(inverse)].reshape(shape)
    return float(count) if np.ndim(count) == 0 else count


@broadcasting
def step_model_array(
    model,
    *,
    gpus_per_node,
    intra_bw,
    intra_lat,
    inter_bw,
    inter_lat,
    peak_flops,
    hbm_bandwidth,
    recipe,
    global_batch,
    seq_len,
    dp,
    tp,
    pp,
    chunks,
    micro_batch_size,
    zero,
    recompute_code,
    sequence_parallel,
    schedule_code,
    efficiency,
    bucket_bytes=None,
    cross_rail_bw=None,
    attention_efficiency=None,
    flash_attention=False,
    memory_traffic=0.0,
    nvls_bw=None,
    tp_overlap=False,
    memory_recipe=None,
    cp=1,
    balance_stages=False,
    ep=1,
    etp=None,
    kernels_code=0,
    causal_flash=False,
    gemm_sms=None,
    best_gemm=1.0,
    overlap_slowdown=0.0,
) -> dict:
    """Per-step time components (s) and per-GPU memory (bytes) on the busiest (first) pipeline stage.

    compute    = m x t_mb, the busiest stage's compute per microbatch (distlab.flops, per token b s):
                 t_mb = [ceil(layers / pp) x (3 x layer forward + recomputed forward) + 3 x logits] / tp
                        / (peak x efficiency)
                 layer forward = 2 x params_per_layer + 4 s a d_head; recomputed forward: none 0,
                 selective the attention core 4 s a d_head, full the layer forward; logits 2 h V
                 (vocabulary-parallel over tp); with gemm_sms (the calibrated model), each weight GEMM and the
                 logits at efficiency x its shape factor (efficiency.layer_gemm_slowdown_array: tile and wave
                 quantisation over gemm_sms SMs, roofline at best_gemm x peak / hbm_bandwidth). The logits run on the last stage; the model charges them
                 to the busiest stage's per-microbatch time (with pp = 1 it is the one stage; with pp > 1
                 the last stage, whose ceil(layers/pp) layers plus logits make it the slowest), and the
                 bubble below is priced with that same stage time
    tp_comm    = m x layers/stage x all-reduces x ring time of b s h e_msg over tp GPUs (4, or 6 with full
                 recompute; distlab.tensor.tp_comm_time), on the critical path; with tp_overlap and sequence
                 parallelism (Transformer Engine's userbuffer overlap, Megatron-Core --tp-comm-overlap) only what
                 exceeds the stage's matmul time, max(0, tp_comm - matmul time)
    bubble     = (pp - 1) / v x (per-microbatch stage time): the (p-1)/(v m) overhead on m microbatches
                 (distlab.pipeline.bubble_overhead_array; the simulator's bubble for uniform stages)
    p2p        = the 2 (pp v - 1) hops on the fill and drain path (a microbatch crosses every chunk
                 boundary forward and back; interleaving multiplies them by v, Narayanan et al. 2021
                 Sec. 2.2.2), b s h e_msg / tp bytes each (scatter-gather, Sec. 4.1; e_msg =
                 recipe.message_bytes: fp8 stages still send the bf16 residual stream and gradient).
                 Each of the pp - 1 stage boundaries is priced where it lies (pipeline_crossings_array):
                 on NVLink when both stages share a node, else on the fabric at inter_bw when the stride
                 tp x dp is a multiple of the node size (sender and receiver share a local rank) and at
                 cross_rail_bw (default inter_bw) otherwise; the v - 1 wrap-around hops of the interleaved
                 schedule (last stage to first) likewise. Steady-state transfers overlap with compute
    dp_comm    = the data-parallel traffic of the step on the DP group's link (group_all_reduce_time_array; a
                 reduce-scatter or all-gather is half a ring all-reduce). ZeRO-0: gradients accumulate locally
                 (DDP's no_sync, Megatron-LM's gradient accumulation), one all-reduce per step. ZeRO-1 (Megatron's
                 distributed optimizer): one reduce-scatter + one all-gather per step. ZeRO-2: a reduce-scatter
                 every microbatch (sharded gradients cannot accumulate unsharded), one all-gather per step. ZeRO-3
                 (FSDP): per microbatch and layer, an all-gather for the forward, another for the backward (and the
                 recomputation in it; not for the last layer, kept unsharded), a reduce-scatter: (3 x layers - 1)
                 x half an all-reduce of the layer's shard (Rajbhandari et al. 2020, Sec. 7.2.2: about 1.5
                 all-reduces' worth), each paying its latency
    dp_exposed = what of it is left exposed, in DDP's 25 MiB buckets (distlab.dataparallel.
                 exposed_communication_time): ZeRO-0 overlaps its all-reduce with the LAST microbatch's backward;
                 ZeRO-1/2 their reduce-scatters with the backward of their microbatch and the all-gather with the
                 next step's first forward (--overlap-grad-reduce / --overlap-param-gather); ZeRO-3 per
                 microbatch, distlab.fsdp.layer_by_layer_exposed (one layer of prefetch on one communication
                 stream, the first gather and the last reduce-scatter always exposed; the last layer is not
                 gathered again for its backward, so 3 L - 1 collectives). The
                 inter-node phase runs at inter_bw when the groups' inter-node traffic joins equal local
                 ranks (equal_local_ranks_array), else at cross_rail_bw (every GPU of a node sends at
                 once: the full taper either way; for the flat ring of a group that splits unevenly over
                 nodes this is an upper bound on the time, since fewer of its hops leave a node at once)
    overlap    = overlap_slowdown x the communication priced as hidden: compute runs slower beside the collectives
                 it hides (efficiency.OVERLAP_SLOWDOWN, Lee et al. 2025: 18.9% on average; 0 for the fixed model).
                 Hidden = dp_comm - dp_exposed (with DP replicas), the TP traffic under its matmuls with tp_overlap,
                 ring attention's transfers under the attention core; the TP and CP share per microbatch is in the
                 stage time the bubble is priced with. At most overlap_slowdown x compute (a slowdown of compute
                 time: no more compute is slowed than the step runs). Steady-state pipeline sends, hidden too, are
                 left out (one activation per microbatch and stage boundary, small beside the rest)
    optimizer  = (2 x optimizer + gradient + weight bytes of the shard) / HBM bandwidth (memory-bound Adam)
    Memory: distlab.memory's array cores; in-flight microbatches on the first stage
    (distlab.pipeline.in_flight_array, the simulator's peak_in_flight): GPipe m, 1F1B min(p, m),
    interleaved min(p (1 + (p-1)/(p v)), m) (Korthikanti et al. 2022, Sec. 4.2.3). Rank order tp-cp-ep-dp-pp: the groups that
    reduce gradients (the dp x cp ranks holding the same weights) have stride tp, pipeline neighbours stride
    tp x cp x dp. Context parallelism (cp): every per-GPU count above is of s / cp tokens (attending to all s
    keys) and the activations divide by cp; cp_comm = m x layers x max(0, ring attention's K/V traffic -
    the attention core it overlaps), the ring's 3 (cp - 1) block transfers per layer (4 (cp - 1) with full
    recomputation) of b (s/cp) 2 kv_dim e / tp bytes on NVLink when tp x cp fits a node, else the fabric
    (Liu et al. 2023, Ring Attention; Megatron-Core context parallelism). Inputs are NumPy arrays, not
    validated. Lesson 7 §1.
    Mixture of experts (model a distlab.moe.step.MoEStepModel; ep, etp: expert parallelism, etp None = tp): compute
    from the active parameters through the same path; model states and the gradient reduction split into the
    non-expert and the expert part (distlab.moe.step); ep_comm = m x MoE layers on the stage x the all-to-alls of
    one layer (moe.step.all_to_all_layer_time_array, fabric at cross_rail_bw), on the critical path of every
    microbatch, so also in the bubble's stage time. Lesson 10 §5.

    Llama 2 7B on one DGX H100 node, dp 8, one 4,096-token sequence per GPU: 32 layers x 3 x (2 x 202,383,360
    + 4 x 4096 x 4096) + 3 x 2 x 4096 x 32,000 = 46.09 GFLOP per token (6 x 6.738e9 = 40.43 leaves attention
    out); compute = 46.09e9 x 4096 / (989.4 TFLOP/s x 0.5) = 0.382 s.

    >>> from distlab import hardware, memory, models
    >>> hw = hardware_arguments(hardware.cluster('dgx-h100', nodes=1, fabric='ib-ndr'), memory.precision_recipe('mixed'))
    >>> out = step_model_array(models.model('llama2-7b'), **hw, global_batch=8, seq_len=4096, dp=8, tp=1, pp=1,
    ...                        chunks=1, micro_batch_size=1, zero=0, recompute_code=0, sequence_parallel=False,
    ...                        schedule_code=1, efficiency=0.5)
    >>> round(float(out['compute_s']), 3), float(out['bubble_s'])
    (0.382, 0.0)
    """
    from . import memory, tensor
    from .dataparallel import DDP_BUCKET_BYTES, exposed_communication_time
    from .pipeline.closed_form import bubble_overhead_array, in_flight_array

    from .models import model as catalog_model
    from .moe.step import MoEStepModel

    if not isinstance(model, MoEStepModel):  # an MoE model comes as distlab.moe.step's view of it
        model = catalog_model(model)
    if not isinstance(recipe, memory.PrecisionRecipe):
        raise ConfigurationError(f"recipe={recipe!r} must be a PrecisionRecipe (distlab.memory.precision_recipe)")
    gpus_per_node = positive_int(gpus_per_node, "gpus_per_node", high=MAX_STAGES)
    intra_bw, inter_bw = positive(intra_bw, "B/s", "intra_bw"), positive(inter_bw, "B/s", "inter_bw")
    intra_lat, inter_lat = non_negative(intra_lat, SECONDS, "intra_lat"), non_negative(inter_lat, SECONDS, "inter_lat")
    peak_flops = positive(peak_flops, FLOP_PER_SECOND, "peak_flops")
    hbm_bandwidth = positive(hbm_bandwidth, "B/s", "hbm_bandwidth")
    cross_rail_bw = None if cross_rail_bw is None else positive(cross_rail_bw, "B/s", "cross_rail_bw")
    efficiency = check_fraction(efficiency, "efficiency")
    global_batch, seq_len, _ = batch_and_sequence(global_batch, seq_len)
    for value, name in ((dp, "dp"), (tp, "tp"), (pp, "pp"), (chunks, "chunks"), (micro_batch_size, "micro_batch_size")):
        number_array(value, name, low=1.0)
    number_array(sequence_parallel, "sequence_parallel")
    code_array(recompute_code, "recompute_code", RECOMPUTE_MODES)
    bucket_bytes = DDP_BUCKET_BYTES if bucket_bytes is None else positive(bucket_bytes, "B", "bucket_bytes")
    P = float(model.parameter_count())
    h = float(model.hidden)
    dp, tp, pp = (np.asarray(x, dtype=float) for x in (dp, tp, pp))
    v = np.asarray(chunks, dtype=float)
    b = np.asarray(micro_batch_size, dtype=float)
    code = np.asarray(recompute_code)
    s = float(seq_len)
    e = recipe.activation_bytes
    e_msg = recipe.message_bytes
    m = np.asarray(global_batch, dtype=float) / (dp * b)
    full = code == 2
    # context parallelism: each of the cp GPUs of a group holds s / cp of every sequence (its queries, attending
    # to all s keys); the gradients are reduced, and ZeRO shards, over the dp x cp ranks holding the same weights
    cp = np.asarray(cp, dtype=float)
    dpc = dp * cp

    # the busiest stage: ceil(layers / pp); interleaved, v chunks of ceil(layers / (pp v)) layers each
    # (uneven chunks allowed: the longest chunk paces its stage)
    layers_stage = np.where(v > 1, v * np.ceil(model.layers / (pp * v)), np.ceil(model.layers / pp))
    first_layers = layers_stage  # the first stage's layers (its activations and, for engines, its weights)
    logit_share: float | np.ndarray = 1.0  # the logits charged to the pacing stage's microbatch
    tokens_mb = b * s / cp
    width = float(model.heads * model.head_dim)
    # an MoE model: the busiest GPU's experts (imbalance or capacity factor) set the layer's time
    ppl = model.busiest_params_per_layer(ep) if isinstance(model, MoEStepModel) else float(model.params_per_layer())
    layer_fwd = layer_forward_flops_array(ppl, width, tokens_mb, s)
    layer_again = recomputed_forward_flops_array(ppl, width, tokens_mb, s, code)
    logits_fwd = logit_forward_flops_array(h, float(model.vocab), tokens_mb)
    if balance_stages:
        # Llama 3's balancing (Dubey et al. 2024, Sec. 3.3.2): the first and last stage hold one layer fewer (for the
        # embedding and the logits); the middle stages mid = ceil((L + 2) / pp) (v x ceil((L + 2) / (pp v)))
        # layers. The pacing stage is a middle one unless the logits outweigh a layer
        mid = np.where(v > 1, v * np.ceil((model.layers + 2.0) / (pp * v)), np.ceil((model.layers + 2.0) / pp))
        last_paces = logits_fwd > TRAINING_PASSES * layer_fwd + layer_again
        balanced = pp > 2
        layers_stage = np.where(balanced, np.where(last_paces, mid - 1.0, mid), layers_stage)
        logit_share = np.where(balanced, np.where(last_paces, 1.0, 0.0), 1.0)
        first_layers = np.where(balanced, mid - 1.0, first_layers)
    stage_flops = (
        layers_stage * (TRAINING_PASSES * layer_fwd + layer_again) + logit_share * TRAINING_PASSES * logits_fwd
    )
    # matmuls with the weights (and the logits) at matmul_efficiency; the attention core (QK^T, AV)
    # at attention_efficiency; the memory-bound element-wise work priced by its HBM traffic
    core_fwd = tokens_mb * 4.0 * s * width
    core_again = np.where(code == 0, 0.0, core_fwd)
    core_stage = layers_stage * (TRAINING_PASSES * core_fwd + core_again)
    gemm_stage = stage_flops - core_stage
    att_eff = efficiency if attention_efficiency is None else attention_efficiency
    # the element-wise kernels' HBM bytes, counted kernel by kernel (distlab.efficiency; kernels_code indexes
    # efficiency.ELEMENTWISE_KERNELS: fused, compiled, eager)
    from .efficiency import elementwise_bytes_array

    traffic_layer = b * s * elementwise_bytes_array(model, s, tp, sequence_parallel, flash_attention, kernels_code, e)
    passes = TRAINING_PASSES + np.where(full, 1.0, 0.0)
    traffic_stage = layers_stage * passes * memory_traffic * traffic_layer / cp
    # the loss over the vocabulary (fp32 cross-entropy on the logits; efficiency.loss_bytes_per_token), on the stage
    # holding the logits, forward and backward counted together
    from .efficiency import loss_bytes_per_token

    traffic_stage = (
        traffic_stage + logit_share * memory_traffic * b * s / cp * loss_bytes_per_token(model.vocab, e) / tp
    )
    # the calibrated model's flash attention (causal_flash): a causal flash kernel skips the masked half of the
    # score blocks, and its backward recomputes the scores (QK^T) from the saved log-sum-exp, 2.5 x the forward's
    # work: it EXECUTES 3.5 x (counted forward / 2) per layer, + 1 x (forward / 2) when recomputed, at the rate
    # flash-attention's own benchmark quotes on that count (efficiency.flash_attention_work_array)
    from .efficiency import flash_attention_work_array

    core_time_flops = np.where(
        np.asarray(causal_flash, dtype=bool),
        layers_stage * flash_attention_work_array(core_fwd, code != 0),
        core_stage,
    )
    # each weight GEMM at its shape's share of the best-shape rate (efficiency.layer_gemm_slowdown_array): the layers'
    # GEMMs and the logits weighted by their own slowdowns
    gemm_time_flops = gemm_stage
    if gemm_sms is not None:
        from .efficiency import layer_gemm_slowdown_array

        gemm_etp = None if etp is None else np.asarray(etp, dtype=float)
        slow_layer, slow_logits = layer_gemm_slowdown_array(
            model, tokens_mb, tp, float(gemm_sms), peak_flops * best_gemm / hbm_bandwidth, ep, gemm_etp
        )
        logit_gemm = logit_share * TRAINING_PASSES * logits_fwd
        gemm_time_flops = (gemm_stage - logit_gemm) * slow_layer + logit_gemm * slow_logits
    t_mb = (
        gemm_time_flops / (tp * peak_flops * efficiency)
        + core_time_flops / (tp * peak_flops * att_eff)
        + traffic_stage / hbm_bandwidth
    )
    # the backward's share of t_mb (what the gradient all-reduce can hide behind): 2 forward passes + recompute
    backward_share = (stage_flops - layers_stage * layer_fwd - logit_share * logits_fwd) / stage_flops
    tp_msg = tensor.tp_message_bytes(b, s, h, e_msg) / cp
    # NCCL runs a TP all-reduce (no sequence parallelism) of >= NVLS_MIN_GPUS GPUs on NVLS where the node has it;
    # sequence parallelism's reduce-scatter + all-gather stay on the ring
    tp_bw = intra_bw
    if nvls_bw is not None:
        from .efficiency import NVLS_MIN_GPUS

        tp_bw = np.where((tp >= NVLS_MIN_GPUS) & ~np.asarray(sequence_parallel, dtype=bool), nvls_bw, intra_bw)
    tp_mb = layers_stage * tensor.tp_comm_time(tp_msg, tp, tp_bw, intra_lat, np.where(full, 6, 4))
    # TP communication overlap (Transformer Engine's userbuffers, Megatron-Core --tp-comm-overlap, with sequence
    # parallelism): each reduce-scatter / all-gather runs in chunks under the matmul beside it; what exceeds the
    # stage's matmul time stays exposed
    matmul_mb = gemm_time_flops / (tp * peak_flops * efficiency)
    tp_overlapped = np.asarray(tp_overlap, dtype=bool) & np.asarray(sequence_parallel, dtype=bool)
    tp_hidden_mb = np.where(tp_overlapped, np.minimum(tp_mb, matmul_mb), 0.0)
    tp_mb = np.where(tp_overlapped, np.maximum(0.0, tp_mb - matmul_mb), tp_mb)
    # ring attention (Liu et al. 2023; Megatron-Core's context parallelism): per layer and microbatch, cp - 1 K/V
    # blocks of b (s / cp) x 2 kv_dim x e / tp bytes pass around the ring in the forward, K/V and their gradients in
    # the backward (2 (cp - 1) more; one more pass with full recomputation), each step overlapped with the
    # attention on the block in hand: only what outlasts the attention core is exposed
    kv_block = b * s / cp * 2.0 * float(model.kv_heads * model.head_dim) * e_msg / tp
    ring_inside = tp * cp <= gpus_per_node
    ring_hop = np.where(ring_inside, kv_block / intra_bw + intra_lat, kv_block / inter_bw + inter_lat)
    ring_layer = (cp - 1.0) * np.where(full, 4.0, 3.0) * ring_hop
    core_layer = core_stage / layers_stage / (tp * peak_flops * att_eff)
    cp_mb = np.where(cp > 1, layers_stage * np.maximum(0.0, ring_layer - core_layer), 0.0)
    cp_hidden_mb = np.where(cp > 1, layers_stage * np.minimum(ring_layer, core_layer), 0.0)
    # compute beside the communication it hides runs overlap_slowdown slower (efficiency.OVERLAP_SLOWDOWN); a slowdown
    # of compute time, so of no more compute than the microbatch has
    overlapped_mb = np.minimum(tp_hidden_mb + cp_hidden_mb, t_mb)
    overlap_mb = overlap_slowdown * overlapped_mb
    moe: ModuleType | None = None  # distlab.moe.step for an MoE model
    if isinstance(model, MoEStepModel):  # an MoE model: its all-to-alls
        from .moe import step as moe_step

        moe = moe_step
        etp = tp if etp is None else np.asarray(etp, dtype=float)
        ep_mb = np.minimum(float(model.moe.moe_layers), layers_stage) * moe_step.all_to_all_layer_time_array(
            model,
            b * s / (tp * cp),
            ep,
            etp,
            code,
            e_msg,
            gpus_per_node,
            intra_bw,
            intra_lat,
            inter_bw if cross_rail_bw is None else cross_rail_bw,
            inter_lat,
        )
    else:
        ep_mb = 0.0
    stage_mb = t_mb + tp_mb + cp_mb + ep_mb + overlap_mb
    compute = m * t_mb
    tp_comm = m * tp_mb
    cp_comm = m * cp_mb
    ep_comm = m * ep_mb + 0.0 * compute
    bubble = bubble_overhead_array(pp, m, v) * m * stage_mb

    cross = inter_bw if cross_rail_bw is None else cross_rail_bw
    stride = tp * cp * dp
    p2p_msg = p2p_message_bytes(b, s, h, tp, e_msg) / cp
    crossing = pipeline_crossings_array(pp, stride, gpus_per_node)
    fabric_hop = p2p_msg / np.where(np.mod(stride, gpus_per_node) == 0, inter_bw, cross) + inter_lat
    nvlink_hop = p2p_msg / intra_bw + intra_lat
    wrap_inside = stride * pp <= gpus_per_node  # last and first stage on one node
    wrap_bw = np.where(np.mod(stride * (pp - 1.0), gpus_per_node) == 0, inter_bw, cross)
    wrap_hop = np.where(wrap_inside, nvlink_hop, p2p_msg / wrap_bw + inter_lat)
    one_way = v * ((pp - 1.0 - crossing) * nvlink_hop + crossing * fabric_hop) + (v - 1.0) * wrap_hop
    p2p = np.where(pp > 1, 2.0 * one_way, 0.0)

    if moe is not None:
        w, g, o = moe.expert_state_bytes_array(model, recipe, memory_recipe, zero, dpc, tp, pp, ep, etp, first_layers)
    elif memory_recipe is None or not memory_recipe.engine:
        w, g, o = memory.model_state_bytes_array(P, recipe, zero, dpc, tp, pp)
    else:
        # engine recipes count the busiest (first) stage as Megatron's theoretical_memory_usage does: its layers
        # plus the embedding (and, with pp = 1, the untied output layer too)
        from .memory_recipes import largest_layer_params, recipe_state_bytes_array

        ppl = float(model.params_per_layer())
        first = (
            first_layers * ppl
            + model.embedding_params()
            + np.where(pp == 1, model.output_params() + model.final_norm_params(), 0.0)
        )
        w, g, o = recipe_state_bytes_array(
            memory_recipe, first / tp, ppl / tp, largest_layer_params(model) / tp, zero, dpc
        )
    grad_shard = P / (tp * pp) * recipe.gradient_bytes
    expert_shard, replicas = 0.0, dpc
    if moe is not None:
        # non-expert gradients over the DP group (stride tp), expert ones after them over the expert DP group of
        # mesh.expert_layout (edp = dp cp tp / (etp ep) members, stride etp ep)
        grad_shard, expert_shard = moe.expert_gradient_bytes(model, recipe, tp, pp, ep, etp)
        edp, e_stride = dpc * tp / (etp * ep), etp * ep
        e_bw = np.where(equal_local_ranks_array(edp, e_stride, gpus_per_node), inter_bw, cross)
        replicas = np.maximum(dpc, edp)

        def expert_all_reduce(size):
            return group_all_reduce_time_array(size, edp, e_stride, gpus_per_node, intra_bw, intra_lat, e_bw, inter_lat)

    dp_bw = np.where(equal_local_ranks_array(dpc, tp, gpus_per_node), inter_bw, cross)
    all_reduce = group_all_reduce_time_array(grad_shard, dpc, tp, gpus_per_node, intra_bw, intra_lat, dp_bw, inter_lat)
    if moe is not None:
        all_reduce = all_reduce + expert_all_reduce(expert_shard)
    buckets = np.maximum(1.0, np.ceil((grad_shard + expert_shard) / bucket_bytes))
    zero = np.asarray(zero)
    forward_mb = (1.0 - backward_share) * t_mb
    backward_mb = backward_share * t_mb
    half = 0.5 * all_reduce  # one reduce-scatter or all-gather of the shard: half a ring all-reduce
    # ZeRO-0 (DDP): gradients accumulate locally (DDP no_sync, Megatron's grad accumulation); one all-reduce per
    # step, in buckets, overlapped with the LAST microbatch's backward.
    ddp = exposed_communication_time(all_reduce, backward_mb, buckets)
    # ZeRO-1 (Megatron's distributed optimizer, --overlap-grad-reduce --overlap-param-gather): the gradient
    # reduce-scatter under the last microbatch's backward, the parameter all-gather under the next step's first
    # forward.
    gather_once = exposed_communication_time(half, forward_mb, buckets)
    zero1 = exposed_communication_time(half, backward_mb, buckets) + gather_once
    # ZeRO-2: sharded gradients cannot accumulate unsharded, so every microbatch reduce-scatters its gradients
    # under its own backward (DeepSpeed ZeRO-2, FSDP without no_sync); one all-gather per step.
    zero2 = m * exposed_communication_time(half, backward_mb, buckets) + gather_once
    # ZeRO-3 / FSDP, layer by layer with one layer of prefetch: each layer's parameters are all-gathered for its
    # forward and again for its backward (and the recomputation inside it), its gradients reduce-scattered; a
    # layer's forward gather hides under the previous layer's forward, its backward gather + reduce-scatter under
    # a layer's backward; the first layer's gather has nothing to hide under. Per-layer collectives pay their
    # latency each time.
    layer_half = 0.5 * group_all_reduce_time_array(
        grad_shard / layers_stage, dpc, tp, gpus_per_node, intra_bw, intra_lat, dp_bw, inter_lat
    )
    if moe is not None:
        layer_half = layer_half + 0.5 * expert_all_reduce(expert_shard / layers_stage)
    f_layer, b_layer = forward_mb / layers_stage, backward_mb / layers_stage
    # distlab.fsdp's layer-by-layer schedule (one communication stream, prefetch 1, resharding after forward but
    # keeping the last layer, as torchtitan does): the exposed time of one microbatch (Lesson 11 §2)
    from .fsdp import layer_by_layer_exposed

    zero3_mb = layer_by_layer_exposed(
        f_layer, b_layer, layer_half, layer_half, layers_stage, prefetch=1, reshard_after_forward=True
    )
    dp_time = np.select(
        [zero >= 3, zero == 2, zero == 1],
        [m * (3.0 * layers_stage - 1.0) * layer_half, (m + 1.0) * half, all_reduce],
        all_reduce,
    )
    exposed = np.select([zero >= 3, zero == 2, zero == 1], [m * zero3_mb, zero2, zero1], ddp)
    dp_exposed = np.where(replicas > 1, exposed, 0.0)
    dp_hidden = np.where(replicas > 1, np.maximum(0.0, dp_time - exposed), 0.0)
    overlap = m * overlap_mb + overlap_slowdown * np.minimum(dp_hidden, np.maximum(0.0, compute - m * overlapped_mb))
    optimizer = (2.0 * o + g + w) / hbm_bandwidth

    # flash attention never stores the scores: memory as with selective recomputation's attention core
    stored_code = np.where(np.asarray(flash_attention) & (code == 0), 1, code)
    per_layer = memory.activation_bytes_per_layer_array(model, b, s, tp, sequence_parallel, stored_code, e) / cp
    if moe is not None:  # the router's and the dispatched copies' tensors (distlab.moe.activations)
        per_layer = per_layer + moe.routed_activation_extra_array(model, b, s, tp, cp, etp, stored_code, e, ep)
    sched = np.asarray(schedule_code)
    in_flight = in_flight_array(sched, pp, m, v)
    activations = per_layer * layers_stage * in_flight
    if balance_stages:
        # the first stage (one layer fewer, in_flight microbatches) or the second (mid layers, one fewer in flight)
        activations = np.where(
            pp > 2,
            per_layer * np.maximum(first_layers * in_flight, (first_layers + 1.0) * np.maximum(in_flight - 1.0, 0.0)),
            activations,
        )

    step = finite_result(
        "step time", compute + overlap + tp_comm + cp_comm + ep_comm + bubble + p2p + dp_exposed + optimizer
    )
    finite_result("memory per GPU", w + g + o + activations)
    return dict(
        microbatches=m,
        compute_s=compute,
        tp_comm_s=tp_comm,
        cp_comm_s=cp_comm,
        ep_comm_s=ep_comm,
        bubble_s=bubble,
        p2p_s=p2p,
        dp_comm_s=dp_time,
        dp_exposed_s=dp_exposed,
        overlap_s=overlap,
        optimizer_s=optimizer,
        step_time_s=step,
        weights_bytes=w,
        gradients_bytes=g,
        optimizer_bytes=o,
        activations_bytes=activations,
        memory_bytes=w + g + o + activations,
        layer_forward_s=f_layer,  # one layer's forward and backward per microbatch (the stage's share, averaged)
        layer_backward_s=b_layer,  # over its layers: what ZeRO-3's per-layer collectives hide under (Lesson 11 §2)
    )


@dataclass(frozen=True)
class StepEstimate:
    """One configuration's step time breakdown, throughput, utilisation and memory (plain floats)."""

    config: dict
    compute_s: float
    tp_comm_s: float
    bubble_s: float
    p2p_s: float
    dp_comm_s: float
    dp_exposed_s: float
    optimizer_s: float
    step_time_s: float
    microbatches: int
    tokens_per_step: float
    model_flops: float
    hardware_flops: float
    gpus: int
    peak_flops: float
    ideal_single_gpu_s: float
    memory: MemoryBreakdown
    problems: tuple = ()
    compute_model: Any = None  # distlab.efficiency.ComputeModel
    cp_comm_s: float = 0.0  # context parallelism's exposed ring-attention traffic
    ep_comm_s: float = 0.0  # expert parallelism's all-to-alls (MoE models)
    overlap_s: float = 0.0  # compute slowed by the communication it hides (efficiency.OVERLAP_SLOWDOWN)

    @property
    def fits(self) -> bool:
        return bool(self.memory.fits)

    @property
    def feasible(self) -> bool:
        return self.fits and not self.problems

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_step / self.step_time_s

    @property
    def samples_per_s(self) -> float:
        return self.config["global_batch"] / self.step_time_s

    @property
    def mfu(self) -> float:
        """MFU (PaLM's definition): model FLOPs (weights, attention, logits; no recomputation) / (step time x
        GPUs x peak). Lesson 7 §1."""
        return self.model_flops / (self.step_time_s * self.gpus * self.peak_flops)

    @property
    def hfu(self) -> float:
        """HFU: hardware FLOPs (model FLOPs + the forward work recomputation repeats) / (step time x GPUs x
        peak). Equals MFU without recomputation. Lesson 7 §1."""
        return self.hardware_flops / (self.step_time_s * self.gpus * self.peak_flops)

    @property
    def scaling_efficiency(self) -> float:
        """(one ideal GPU's time for the step / N) / step time. Report beside step time; never rank by it."""
        return self.ideal_single_gpu_s / self.gpus / self.step_time_s

    def parts(self) -> dict:
        """Step-time components in seconds, in stacking order."""
        parts = {"compute": self.compute_s}
        if self.overlap_s:
            parts["overlap slowdown"] = self.overlap_s
        parts["TP communication"] = self.tp_comm_s
        if self.cp_comm_s:
            parts["CP communication (exposed)"] = self.cp_comm_s
        if self.ep_comm_s:
            parts["EP all-to-all"] = self.ep_comm_s
        return {
            **parts,
            "pipeline bubble": self.bubble_s,
            "pipeline p2p": self.p2p_s,
            "DP communication (exposed)": self.dp_exposed_s,
            "optimizer step": self.optimizer_s,
        }

    def explain(self) -> str:
        """Why this configuration cannot run (empty when it can)."""
        reasons = list(self.problems)
        if not self.fits:
            if self.memory.headroom_bytes is None or self.memory.capacity_bytes is None:
                raise ConfigurationError(
                    "memory: this estimate's breakdown has no GPU capacity, so no overflow to explain"
                )
            reserve = self.memory.reserved_bytes
            reasons.append(
                f"memory: needs {format_bytes(self.memory.total_bytes)} per GPU, "
                f"{format_bytes(-self.memory.headroom_bytes)} over the {format_bytes(self.memory.capacity_bytes)}"
                # the headroom counts the recipe's reserve (199 GB needs 121 GB more than 80 GB less 2 GB reserved)
                + (
                    f" less {format_bytes(reserve)} reserved (CUDA context and communication buffers)"
                    if reserve
                    else ""
                )
            )
        return "; ".join(reasons)

    def summary(self) -> str:
        lines = [f"{name:<28}{format_seconds(value):>10}" for name, value in self.parts().items()]
        lines.append(f"{'step time':<28}{format_seconds(self.step_time_s):>10}")
        lines.append(
            f"throughput {self.tokens_per_s:,.0f} tokens/s ({self.samples_per_s:.3g} samples/s); "
            f"MFU {100 * self.mfu:.1f}%, HFU {100 * self.hfu:.1f}%; "
            f"scaling efficiency {100 * self.scaling_efficiency:.1f}%"
        )
        lines.append(f"memory per GPU {format_bytes(self.memory.total_bytes)}: {self.memory.verdict()}")
        if self.compute_model is not None:
            lines.append("compute " + self.compute_model.describe())
        if not self.feasible:
            lines.append("NOT FEASIBLE: " + self.explain())
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {
            **self.config,
            "step_time_s": self.step_time_s,
            "mfu": self.mfu,
            "hfu": self.hfu,
            "tokens_per_s": self.tokens_per_s,
            "samples_per_s": self.samples_per_s,
            "scaling_efficiency": self.scaling_efficiency,
            "memory_per_gpu_bytes": self.memory.total_bytes,
            "fits": self.fits,
            "feasible": self.feasible,
            "problems": list(self.problems),
            "explanation": self.explain(),
            "microbatches": self.microbatches,
            "breakdown_s": {
                "compute": self.compute_s,
                "overlap_slowdown": self.overlap_s,
                "tp_comm": self.tp_comm_s,
                "cp_comm": self.cp_comm_s,
                "ep_comm": self.ep_comm_s,
                "bubble": self.bubble_s,
                "p2p": self.p2p_s,
                "dp_comm_total": self.dp_comm_s,
                "dp_comm_exposed": self.dp_exposed_s,
                "optimizer": self.optimizer_s,
            },
            "memory": self.memory.to_dict(),
        }


def hardware_arguments(cl, recipe, achieved=False) -> dict:
    """The cluster's figures step_model_array needs: links, per-GPU fabric share, HBM, and the
    dense peak of the precision the recipe computes in (bf16 for mixed, fp8, fp32).

    inter_bw is the fabric share between GPUs of the SAME local rank: in the rank order
    tp-cp-ep-dp-pp the hierarchical DP all-reduce's inter-node ring connects the members at the
    same position on their nodes when every node holds the same local ranks of each DP group
    (equal_local_ranks_array: tp x dp a multiple of the node size, or dividing it), as do pipeline
    sends whose stride tp x dp is a multiple of the node size; on a rail-optimized fabric that
    traffic stays on one rail and escapes the spine's oversubscription. cross_rail_bw is the share
    of traffic between different local ranks, which crosses the spine. Both with every GPU of a
    node sending at once (hardware.Cluster.fabric_bandwidth_per_gpu with f = g): without rails
    both are inter_node_bandwidth_per_gpu. The peak is recipe.compute_precision's. achieved=True (the
    calibrated model, Lesson 7 §8): every link at its measured share of line rate
    (efficiency.achieved_link_share) and nvls_bw, NCCL's NVLS all-reduce rate where the node has it
    (efficiency.nvls_bandwidth); False: line rates, no NVLS. Lesson 7 §3.

    >>> from distlab import hardware, memory
    >>> hw = hardware_arguments(hardware.cluster('dgx-h100', nodes=2, fabric='ib-ndr'), memory.precision_recipe('mixed'))
    >>> hw['gpus_per_node'], hw['peak_flops']  # H100 SXM dense bf16
    (8, 989400000000000.0)
    """
    from .memory import PrecisionRecipe

    if not isinstance(recipe, PrecisionRecipe):
        raise ConfigurationError(f"recipe={recipe!r} must be a PrecisionRecipe (distlab.memory.precision_recipe)")
    cl = as_cluster(cl)
    compute = recipe.compute_precision
    intra, fabric, nvls = 1.0, 1.0, None
    if achieved:
        from .efficiency import achieved_link_share, nvls_bandwidth

        intra, fabric = achieved_link_share(cl.node.intra_link), achieved_link_share(cl.fabric)
        nvls = nvls_bandwidth(cl.node.intra_link)
    return dict(
        gpus_per_node=cl.node.gpus_per_node,
        intra_bw=intra * cl.node.intra_link.bandwidth,
        intra_lat=cl.node.intra_link.latency,
        inter_bw=fabric * cl.fabric_bandwidth_per_gpu(same_local_rank=True),
        cross_rail_bw=fabric * cl.fabric_bandwidth_per_gpu(same_local_rank=False),
        inter_lat=cl.fabric.latency,
        peak_flops=cl.accelerator.peak(compute),
        hbm_bandwidth=cl.accelerator.memory_bandwidth,
        recipe=recipe,
        nvls_bw=nvls,
    )


def estimate(
    model,
    cluster,
    *,
    global_batch,
    seq_len=None,
    dp=None,
    tp=1,
    pp=1,
    chunks=1,
    micro_batch_size=1,
    zero=0,
    recompute="none",
    sequence_parallel=False,
    schedule="1f1b",
    precision="mixed",
    efficiency=None,
    attention="flash",
    fabric=None,
    nodes=None,
    calibration=None,
    tp_overlap=False,
    memory_recipe="zero-paper",
    cp=1,
    balance_stages=False,
    ep=1,
    etp=None,
    kernels="fused",
    moe_imbalance=1.0,
    capacity_factor=None,
    max_nodes_per_token=None,
) -> StepEstimate:
    """Step time breakdown, throughput, MFU/HFU, scaling efficiency and memory of one configuration.

    model: a TransformerModel or catalog name; cluster: a hardware.Cluster, or a node name with
    nodes= and fabric=. dp defaults to GPUs / (tp x cp x pp); cp: context parallelism by ring attention
    (each GPU holds s / cp of every sequence; the sequence must split into 2 cp load-balanced chunks). efficiency: None (default) prices compute with
    the calibrated model of distlab.efficiency (matmuls, attention core and memory-bound element-wise
    work, constants fitted on Narayanan et al. 2021 Table 1 only; Lesson 7 §8); a number in (0, 1] is the
    simple model of Lesson 7 §1, every FLOP at that share of the dense peak. attention: 'flash' (scores
    never stored) or 'unfused' (Megatron-LM 2021-2022). calibration: (share, traffic) replacing the two
    fitted constants (efficiency.fit_calibration uses it). tp_overlap: the TP collectives of sequence
    parallelism overlap the matmuls beside them (Megatron-Core --tp-comm-overlap). memory_recipe: 'zero-paper'
    (16 B per parameter, the lessons' count) or an engine's ('megatron', 'megatron-distributed-optimizer',
    'deepspeed', 'fsdp2'; distlab.memory_recipes), which also keeps a reserve of each GPU out of reach.
    balance_stages: the first and last pipeline stage hold one layer fewer, for the embedding and the logits
    (Llama 3's layout; with pp > 2). ep, etp: expert parallelism and expert tensor parallelism (1 or tp; None = tp)
    of a mixture-of-experts model (distlab.moe catalog names such as 'mixtral-8x7b'): compute from the active
    parameters, experts sharded over etp x ep, the all-to-alls as the step-time part 'EP all-to-all'
    (distlab.moe.step; Lesson 10 §5). kernels: how the element-wise work runs, 'fused' (Megatron-LM),
    'compiled' (torch.compile) or 'eager' (PyTorch eager: more HBM bytes; efficiency.elementwise_bytes_per_token).
    moe_imbalance (busiest EP rank's copies / mean, 1 to min(ep, E / k)),
    capacity_factor (None: dropless; else padded expert buffers) and max_nodes_per_token (DeepSeek-V3's node limit)
    set the busiest GPU's expert work, activations and all-to-all bytes (distlab.moe.step.MoEStepModel; Lesson 10 §3).
    An infeasible configuration is priced but
    flagged (feasible False, explain() says which limit and by how much); invalid ones raise
    ConfigurationError. Lesson 7 §1-§6, §8.

    model_flops and hardware_flops are distlab.flops.step_flops' (MFU, HFU). Llama 2 7B on one DGX H100 node,
    pure data parallelism, at a fixed 50% of peak: compute 46.09 GFLOP per token x 4096 / (989.4 TFLOP/s x 0.5)
    = 0.382 s per GPU (step_model_array); 16 bytes per parameter of model states alone (108 GB) do not fit
    80 GB (Lesson 7 §2).

    >>> est = estimate('llama2-7b', 'dgx-h100', nodes=1, fabric='ib-ndr', global_batch=8, seq_len=4096, efficiency=0.5)
    >>> est.config['dp'], round(est.compute_s, 3), est.fits
    (8, 0.382, False)
    """
    from . import memory, memory_recipes, models
    from .moe import moe_step_flops, step as moe_step

    is_moe = moe_step.is_moe(model)
    model = moe_step.moe_model(model) if is_moe else models.model(model)
    cl = as_cluster(cluster, nodes, fabric)
    g = cl.node.gpus_per_node
    tp, pp, cp = positive_int(tp, "tp"), positive_int(pp, "pp"), positive_int(cp, "cp")
    names, sizes = ("tp x pp", f"{tp} x {pp}") if cp == 1 else ("tp x cp x pp", f"{tp} x {cp} x {pp}")
    mp = tp * cp * pp
    if mp > cl.gpus or cl.gpus % mp:
        valid = ", ".join(str(d) for d in range(1, cl.gpus + 1) if cl.gpus % d == 0)
        what = "is more than" if mp > cl.gpus else "does not divide"
        raise ConfigurationError(
            f"{names} = {sizes} = {mp} {what} the cluster's {cl.gpus} GPUs; {names} must divide them (valid: {valid})"
        )
    dp = cl.gpus // mp if dp is None else positive_int(dp, "dp")
    if dp * mp != cl.gpus:
        raise ConfigurationError(f"dp x {names} = {dp} x {sizes} = {dp * mp} must equal the cluster's {cl.gpus} GPUs")
    if tp > g or g % tp:
        valid = ", ".join(str(d) for d in range(1, g + 1) if g % d == 0)
        raise ConfigurationError(
            f"tp={tp} must divide the {g} GPUs of a node (tensor parallelism stays inside a node); valid: {valid}"
        )
    memory.check_tp_divides_heads(model, tp)
    memory.layers_per_stage(model.layers, pp)
    batch, s, b = batch_and_sequence(global_batch, seq_len if seq_len is not None else model.seq_len, micro_batch_size)
    v = positive_int(chunks, "chunks")
    if cp > 1 and s % (2 * cp):
        raise ConfigurationError(
            f"cp={cp}: the sequence of {s} tokens must split into 2 x cp = {2 * cp} equal chunks "
            f"(load-balanced causal ring attention); valid cp: "
            f"{', '.join(str(c) for c in range(1, 65) if s % (2 * c) == 0)}"
        )
    if batch % (dp * b):
        raise ConfigurationError(
            f"global_batch={batch} is not a multiple of dp x micro_batch_size = {dp} x {b}; "
            f"each replica must get whole microbatches"
        )
    m = batch // (dp * b)
    sched = str(schedule).strip().lower()
    if not isinstance(sched, str) or sched not in SCHEDULES:
        raise ConfigurationError(f"schedule={schedule!r}; valid: {', '.join(SCHEDULES)}")
    if v > 1 and sched != "interleaved":
        raise ConfigurationError(f"chunks={v} needs schedule='interleaved'")
    if sched == "interleaved":
        # balanced stages (Llama 3): the first chunk may hold only the embedding, the last only the logits and loss
        ends = 2 if balance_stages and pp > 2 else 0
        if model.layers + ends < pp * v:
            raise ConfigurationError(
                f"interleaved: {model.layers} layers"
                + (" plus the embedding and the logits" if ends else "")
                + f" cannot fill pp x chunks = {pp * v} chunks (at least one layer each)"
            )
        if m % pp:
            raise ConfigurationError(f"interleaved: microbatches per pipeline m={m} must be a multiple of pp={pp}")
    mode = memory.recompute_mode(recompute)
    zero = zero_stage(zero)
    mem_recipe = memory_recipes.memory_recipe(memory_recipe)
    if zero not in mem_recipe.zero_stages:
        raise ConfigurationError(
            f"zero={zero} is not a ZeRO stage of memory_recipe={mem_recipe.name!r}; valid: "
            f"{', '.join(str(z) for z in mem_recipe.zero_stages)}"
        )
    compute = compute_model_for(cl, efficiency, attention, calibration, kernels)
    eff = compute.matmul_efficiency
    recipe = memory.precision_recipe(precision)
    hw = hardware_arguments(cl, recipe, achieved=compute.calibrated)
    peak = hw["peak_flops"]
    sp = bool(sequence_parallel) and tp > 1
    core_model, moe_config, routing = model, {}, {}
    if is_moe:
        ep, etp = moe_step.check_expert_parallel(
            model, cl.gpus, tp=tp, cp=cp, pp=pp, ep=ep, etp=etp, sequence_parallel=sp, gpus_per_node=g
        )
        core_model = moe_step.step_model(
            model, s, imbalance=moe_imbalance, capacity_factor=capacity_factor, max_nodes=max_nodes_per_token
        ).checked(ep, etp, g)
        moe_config = dict(ep=ep, etp=etp)
        routing = dict(
            moe_imbalance=core_model.imbalance,
            capacity_factor=core_model.capacity_factor,
            max_nodes_per_token=core_model.max_nodes,
        )
    elif not (ep == 1 and etp is None):
        raise ConfigurationError(
            f"ep={ep!r}, etp={etp!r}: expert parallelism applies to mixture-of-experts models "
            f"(distlab.moe.MOE_MODELS); {model.name} is dense (valid: ep=1, etp=None)"
        )
    else:
        moe_step.refuse_routing_for_dense(model.name, moe_imbalance, capacity_factor, max_nodes_per_token)
    out = step_model_array(
        core_model,
        **hw,
        global_batch=batch,
        seq_len=s,
        dp=dp,
        tp=tp,
        pp=pp,
        chunks=v,
        micro_batch_size=b,
        zero=zero,
        recompute_code=memory.RECOMPUTE_MODES.index(mode),
        sequence_parallel=sp,
        schedule_code=SCHEDULES.index(sched),
        **compute_arguments(compute),
        tp_overlap=bool(tp_overlap),
        memory_recipe=mem_recipe,
        cp=cp,
        balance_stages=bool(balance_stages),
        **moe_config,
    )
    bd = memory.MemoryBreakdown(
        float(out["weights_bytes"]),
        float(out["gradients_bytes"]),
        float(out["optimizer_bytes"]),
        float(out["activations_bytes"]),
        float(cl.accelerator.memory_bytes),
        cl.accelerator.name,
        reserved_bytes=mem_recipe.reserve_bytes,
    )
    problems = []
    if pp > 1 and m < pp:
        problems.append(f"pipeline: only {m} microbatches per step for {pp} stages; the pipeline never fills")
    tokens = float(batch * s)
    counted = moe_step_flops(model, batch, s, mode) if is_moe else step_flops(model, batch, s, mode)
    config = dict(
        model=model.name,
        gpus=cl.gpus,
        global_batch=batch,
        seq_len=s,
        dp=dp,
        tp=tp,
        cp=cp,
        pp=pp,
        chunks=v,
        micro_batch_size=b,
        microbatches=m,
        zero=zero,
        recompute=mode,
        sequence_parallel=sp,
        schedule=sched,
        precision=recipe.name,
        efficiency=efficiency if compute.calibrated is False else None,
        attention=compute.attention,
        kernels=compute.kernels,
        matmul_efficiency=eff,
        tp_overlap=bool(tp_overlap) and sp,
        memory_recipe=mem_recipe.name,
        balance_stages=bool(balance_stages) and pp > 2,
        **moe_config,
        **routing,
    )
    return StepEstimate(
        config=config,
        compute_s=float(out["compute_s"]),
        tp_comm_s=float(out["tp_comm_s"]),
        cp_comm_s=float(out["cp_comm_s"]),
        ep_comm_s=float(out["ep_comm_s"]),
        bubble_s=float(out["bubble_s"]),
        p2p_s=float(out["p2p_s"]),
        dp_comm_s=float(out["dp_comm_s"]),
        dp_exposed_s=float(out["dp_exposed_s"]),
        overlap_s=float(out["overlap_s"]),
        optimizer_s=float(out["optimizer_s"]),
        step_time_s=float(out["step_time_s"]),
        microbatches=m,
        tokens_per_step=tokens,
        model_flops=counted.model_flops,
        hardware_flops=counted.hardware_flops,
        gpus=cl.gpus,
        peak_flops=peak,
        ideal_single_gpu_s=counted.model_flops / (peak * eff),
        memory=bd,
        problems=tuple(problems),
        compute_model=compute,
    )


def compute_model_for(cl, efficiency=None, attention="flash", calibration=None, kernels="fused"):
    """The efficiency.ComputeModel estimate() and plan() price compute with: the calibrated model for the
    cluster's accelerator (efficiency None), or the fixed share of Lesson 7 §1 (a number). Lesson 7 §8.

    >>> from distlab import hardware
    >>> compute_model_for(hardware.cluster('dgx-a100', 1, 'ib-hdr'), 0.5).matmul_efficiency
    0.5
    """
    from .efficiency import compute_model, fixed_compute_model

    cl = as_cluster(cl)  # a Cluster, or a node name (one node); anything else is our error
    if efficiency is not None:
        return fixed_compute_model(efficiency, attention, kernels)
    if calibration is None:
        return compute_model(cl.accelerator, attention, kernels=kernels)
    if not isinstance(calibration, (tuple, list)) or len(calibration) != 2:
        raise ConfigurationError(
            f"calibration={calibration!r} must be a pair (share, traffic), as efficiency.fit_calibration gives"
        )
    share, traffic = calibration
    return compute_model(
        cl.accelerator,
        attention,
        share=check_fraction(share, "calibration share"),
        traffic=non_negative(traffic, "", "calibration traffic"),
        kernels=kernels,
    )


def compute_arguments(compute) -> dict:
    """The step_model_array keywords of an efficiency.ComputeModel. Lesson 7 §8.

    >>> from distlab.efficiency import fixed_compute_model
    >>> sorted(compute_arguments(fixed_compute_model(0.5)))
    ['attention_efficiency', 'best_gemm', 'causal_flash', 'efficiency', 'flash_attention', 'gemm_sms', 'kernels_code', 'memory_traffic', 'overlap_slowdown']
    """
    from .efficiency import ELEMENTWISE_KERNELS, ComputeModel

    if not isinstance(compute, ComputeModel):
        raise ConfigurationError(f"compute={compute!r} must be an efficiency.ComputeModel (see compute_model_for)")
    return dict(
        efficiency=compute.matmul_efficiency,
        attention_efficiency=compute.attention_efficiency,
        memory_traffic=compute.memory_traffic,
        flash_attention=compute.attention == "flash",
        kernels_code=ELEMENTWISE_KERNELS.index(compute.kernels),
        causal_flash=compute.calibrated and compute.attention == "flash",
        gemm_sms=compute.gemm_sms,
        best_gemm=compute.best_gemm,
        overlap_slowdown=compute.overlap_slowdown,
    )


#: The OOM triage moved to distlab.triage (lesson 8); these names still resolve here, without a warning
#: (training.explain_infeasible is lesson 7's, and the widgets and CLI call it).
_MOVED_TO_TRIAGE = (
    "TRIAGE_ORDER",
    "TriageStep",
    "OOMTriage",
    "MAX_LADDER_RUNGS",
    "oom_triage",
    "explain_infeasible",
    "memory_modes_index",
    "format_fixes",
)


def __getattr__(name):
    if name in _MOVED_TO_TRIAGE:
        from . import triage

        return getattr(triage, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
