"""The step model's configuration record: one configuration (estimate) or many (the planner's columns) as NumPy
arrays, checked once, with the quantities every term reads (microbatches, the busiest stage's layers, FLOPs per
token). Every term of distlab.step takes a StepConfig. Lesson 7 §1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._arguments import RECOMPUTE_MODES, check_fraction, code_array, flag, number_array
from ..attention_kernels import attention_kernel as attention_kernel_name
from ..errors import ConfigurationError
from ..expert_gemms import expert_gemm as expert_gemm_name
from ..tp_overlap import ASYNC_TP, TP_OVERLAP_NAMES
from ..flops import (
    TRAINING_PASSES,
    layer_forward_flops_array,
    logit_forward_flops_array,
    op_sac_recomputed_forward_flops_array,
    recomputed_forward_flops_array,
)
from ..partial_recompute import chunk_recompute_layers_array, recompute_cap_array, recomputed_layers_array
from ..units import FLOP_PER_SECOND, SECONDS, non_negative, positive, positive_int

__all__ = [
    "SCHEDULES",
    "MAX_SEQ_LEN",
    "MAX_MICRO_BATCH",
    "MAX_GLOBAL_BATCH",
    "MAX_STAGES",
    "batch_and_sequence",
    "StepConfig",
    "step_config",
]

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


@dataclass(frozen=True)
class StepConfig:
    """One or many configurations as the step model's terms read them: NumPy arrays (broadcast together) in SI
    units, checked once by step_config. Hardware: g GPUs per node, links (B/s, s), peak FLOP/s, HBM B/s. Layout:
    dp, tp, pp, cp, v chunks, b micro-batch, m microbatches per pipeline, dpc = dp x cp (the ranks holding the same
    weights). Per token of a microbatch (tokens_mb = b s / cp): layer_fwd, layer_again (recomputed), logits_fwd
    FLOPs (distlab.flops). The busiest stage: layers_stage (pacing), first_layers (memory), logit_share (the logits
    charged to the pacing stage). Lesson 7 §1."""

    model: Any  # a TransformerModel, or distlab.moe.step.MoEStepModel
    recipe: Any  # memory.PrecisionRecipe
    memory_recipe: Any  # memory_recipes.MemoryRecipe or None (the ZeRO paper's count)
    g: int
    intra_bw: float
    intra_lat: float
    inter_bw: float
    inter_lat: float
    cross: float  # the fabric share between different local ranks (cross_rail_bw; inter_bw without rails)
    ring_step_floor: float  # least seconds a ring step inside a node costs when the ring spans nodes (host posts)
    nvls_bw: float | None
    peak: float  # the dense peak of the precision the weight GEMMs run in (recipe.compute_precision)
    core_peak: float  # the peak of the attention core (16-bit for an FP8 recipe; else peak)
    hbm: float
    efficiency: float
    attention_efficiency: float
    memory_traffic: float
    flash: Any
    kernels_code: Any
    causal_flash: Any
    gemm_sms: float | None
    best_gemm: float
    efficiency16: Any  # the 16-bit matmul share the output layer runs at (efficiency unless FP8)
    best16: float  # its best GEMM share (best_gemm unless FP8)
    overlap_slowdown: float
    attention_table: tuple | None  # a kernel's (seq lens, forward, backward shares of peak); None: attention_efficiency
    fp8_attention_tables: tuple  # FP8 attention: ((shape, (seq lens, forward, backward time ratios)), ...); (): none
    window_table: tuple | None  # windowed layers: (window, seq lens, forward, backward shares); None: causal rate
    attention_kernel: str | None  # the flash kernel's name (attention_kernels; its wrapper's copies); None: unnamed
    expert_gemm: str  # how many of a GPU's expert GEMMs run at once (distlab.expert_gemms)
    fp8: bool  # the GEMMs run in FP8 (recipe.compute_precision)
    cast_bytes: float  # FP8 cast bytes per element (elementwise.FP8_CAST_BYTES; 0 when not FP8)
    tp_overlap: Any  # the TP overlap method's code (distlab.tp_overlap.TP_OVERLAP_NAMES; bool True: userbuffers)
    zero3_tensors: float  # ZeRO-3 collectives per layer and gather: 1 (flat buffer), the layer's tensors (per tensor)
    param_gather_exposed: bool  # ZeRO-1/2's parameter all-gather runs before the first forward (not overlapped)
    bucket_bytes: float
    s: float
    dp: np.ndarray
    tp: np.ndarray
    pp: np.ndarray
    cp: np.ndarray
    v: np.ndarray
    b: np.ndarray
    code: np.ndarray  # recomputation: RECOMPUTE_MODES index
    full: np.ndarray  # recompute='full' (every layer, or recompute_layers of them: full_share)
    recompute_cap: np.ndarray  # the most layers of a stage fully recomputed (partial_recompute.recompute_cap_array)
    recomputed: np.ndarray  # the pacing stage's layers fully recomputed: min(cap, layers_stage); 0 unless 'full'
    full_share: np.ndarray  # recomputed / layers_stage: 1 for 'full' on every layer, 0 for 'none' and 'selective'
    partial: bool  # some configuration recomputes only some of its stage's layers (estimate's recompute_layers)
    sequence_parallel: Any
    schedule_code: Any
    zero: np.ndarray
    ep: Any
    etp: Any  # as given (None: etp = tp)
    etp_moe: Any  # etp, or tp where not given (an MoE model's expert tensor parallelism)
    balance_stages: bool
    moe: bool  # model is an MoEStepModel
    m: np.ndarray
    dpc: np.ndarray
    tokens_mb: np.ndarray
    width: float
    layer_fwd: np.ndarray
    layer_again: np.ndarray
    logits_fwd: np.ndarray
    layers_stage: np.ndarray
    first_layers: np.ndarray
    logit_share: Any
    stage_flops: np.ndarray  # the busiest stage's FLOPs per microbatch: layers x (3 forwards + recompute) + logits
    core_fwd: np.ndarray  # the attention core's counted forward FLOPs per microbatch and layer (4 b s^2 a d / cp)
    core_stage: np.ndarray  # the stage's counted attention-core FLOPs: 3 passes, + 1 forward when recomputed
    core_again: np.ndarray  # share of the layers whose attention core runs again in the backward (1: selective
    # recomputation, not op checkpointing; full_share under recompute='full')
    op_sac: np.ndarray  # torchtitan's selective op checkpointing: every second matmul and the element-wise again
    offload_layers: Any = 0  # the model's first N layers' activations offloaded to host memory (step.offload)
    host_bw: float = math.inf  # the GPU-to-host link per direction (hardware.Node.host_link_bandwidth), B/s

    @property
    def keeps_gathered_input(self):
        """Where the TP linears keep sequence parallelism's all-gathered input for the weight gradient: a memory
        recipe whose engine does (MemoryRecipe.saves_gathered_input: torchtitan's DTensor plan) or 'async-tp' (which
        only torchtitan runs), unless its selective op checkpointing drops the all-gather's output (its save list has
        no all-gather: recomputed in the backward). There the backward re-gathers nothing (communication.sp_regather)
        and the activations count the gathered input (footprint.activations_term). Lesson 5 §6, Lesson 7 §2."""
        saves = bool(getattr(self.memory_recipe, "saves_gathered_input", False)) | (
            np.asarray(self.tp_overlap) == ASYNC_TP
        )
        return saves & ~np.asarray(self.op_sac, dtype=bool)

    @property
    def e(self) -> float:
        """Bytes per stored activation element."""
        return self.recipe.activation_bytes

    @property
    def e_elementwise(self) -> float:
        """Bytes per element the element-wise kernels read and write (PrecisionRecipe.elementwise_bytes)."""
        return self.recipe.elementwise_bytes

    @property
    def e_msg(self) -> float:
        """Bytes per element of a message (PrecisionRecipe.message_bytes)."""
        return self.recipe.message_bytes


def _stages(model, pp, v, balance_stages, layer_fwd, layer_again, logits_fwd):
    """(layers_stage, first_layers, logit_share): the busiest stage holds ceil(L / pp) layers (interleaved: v chunks
    of ceil(L / (pp v)); the longest chunk paces its stage) and the logits. Balanced (Llama 3, Dubey et al. 2024,
    Sec. 3.3.2; pp > 2): the first and last stage hold one layer fewer; the middle ones mid = ceil((L + 2) / pp)
    (v x ceil((L + 2) / (pp v))); a middle stage paces unless the logits outweigh a layer."""
    layers_stage = np.where(v > 1, v * np.ceil(model.layers / (pp * v)), np.ceil(model.layers / pp))
    if not balance_stages:
        return layers_stage, layers_stage, 1.0
    mid = np.where(v > 1, v * np.ceil((model.layers + 2.0) / (pp * v)), np.ceil((model.layers + 2.0) / pp))
    last_paces = logits_fwd > TRAINING_PASSES * layer_fwd + layer_again
    balanced = pp > 2
    return (
        np.where(balanced, np.where(last_paces, mid - 1.0, mid), layers_stage),
        np.where(balanced, mid - 1.0, layers_stage),
        np.where(balanced, np.where(last_paces, 1.0, 0.0), 1.0),
    )


def step_config(
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
    core_peak_flops=None,
    attention_table=None,
    fp8_attention_tables=(),
    window_table=None,
    fp8_efficiency=None,
    fp8_best_gemm=None,
    fp8_cast_bytes=0.0,
    zero3_tensors=1.0,
    param_gather_exposed=False,
    attention_kernel=None,
    expert_gemm="sequential",
    ring_step_floor=0.0,
    recompute_layers=None,
    activation_offload_layers=0,
    host_link_bandwidth=None,
) -> StepConfig:
    """The StepConfig of step_model_array's keywords (see there), checked: numbers in range, codes known, the
    model a catalog TransformerModel (or name) or an MoEStepModel. recompute_layers: None, or N (a number or an
    array) of each model chunk's layers fully recomputed where recompute_code is 2, the rest keeping their
    activations (distlab.partial_recompute). activation_offload_layers: N (a number or an array) of the model's first
    layers whose activations go to host memory over host_link_bandwidth (B/s per direction; needed where N > 0;
    distlab.step.offload). Lesson 7 §1."""
    a = dict(locals())
    return StepConfig(**_hardware(a), **_compute(a), **_layout(a), **_offload(a))


def _offload(a: dict) -> dict:
    """The StepConfig's activation-offload fields: N whole and >= 0, and a positive host link (inf allowed) where
    N > 0 (training.estimate checks the range, the engine, pp and recomputation: step.offload.check_activation_offload)."""
    n = number_array(a["activation_offload_layers"], "activation_offload_layers", low=0.0)
    if np.any(n != np.floor(n)):
        raise ConfigurationError(f"activation_offload_layers={a['activation_offload_layers']!r} must be whole numbers")
    if not np.any(n > 0):
        return dict(offload_layers=n)
    bw = a["host_link_bandwidth"]
    ok = isinstance(bw, (int, float)) and not isinstance(bw, bool) and bw > 0  # NaN fails bw > 0
    if not ok:
        raise ConfigurationError(
            f"host_link_bandwidth={bw!r}: activation_offload_layers > 0 needs the GPU-to-host link, a positive "
            "number of B/s per direction (inf: copies take no time; hardware.Node.host_link_bandwidth)"
        )
    return dict(offload_layers=n, host_bw=float(bw))


def _hardware(a: dict) -> dict:
    """The StepConfig's hardware fields of step_config's arguments, checked."""
    from .. import memory
    from ..dataparallel import DDP_BUCKET_BYTES

    if not isinstance(a["recipe"], memory.PrecisionRecipe):
        raise ConfigurationError(f"recipe={a['recipe']!r} must be a PrecisionRecipe (distlab.memory.precision_recipe)")
    inter_bw = positive(a["inter_bw"], "B/s", "inter_bw")
    cross = a["cross_rail_bw"]
    return dict(
        recipe=a["recipe"],
        memory_recipe=a["memory_recipe"],
        g=positive_int(a["gpus_per_node"], "gpus_per_node", high=MAX_STAGES),
        intra_bw=positive(a["intra_bw"], "B/s", "intra_bw"),
        intra_lat=non_negative(a["intra_lat"], SECONDS, "intra_lat"),
        inter_bw=inter_bw,
        inter_lat=non_negative(a["inter_lat"], SECONDS, "inter_lat"),
        cross=inter_bw if cross is None else positive(cross, "B/s", "cross_rail_bw"),
        ring_step_floor=non_negative(a["ring_step_floor"], SECONDS, "ring_step_floor"),
        nvls_bw=a["nvls_bw"],
        peak=positive(a["peak_flops"], FLOP_PER_SECOND, "peak_flops"),
        core_peak=positive(
            a["peak_flops" if a["core_peak_flops"] is None else "core_peak_flops"], FLOP_PER_SECOND, "core_peak_flops"
        ),
        hbm=positive(a["hbm_bandwidth"], "B/s", "hbm_bandwidth"),
        bucket_bytes=DDP_BUCKET_BYTES
        if a["bucket_bytes"] is None
        else positive(a["bucket_bytes"], "B", "bucket_bytes"),
    )


def _compute(a: dict) -> dict:
    """The StepConfig's compute-model fields (pricing.compute_arguments' keywords)."""
    efficiency = _fractions(a["efficiency"], "efficiency")
    attention = a["attention_efficiency"]
    keys = ("memory_traffic", "kernels_code", "causal_flash", "attention_table", "fp8_attention_tables", "window_table")
    slowdown = non_negative(a["overlap_slowdown"], "", "overlap_slowdown")
    if slowdown > 10:
        raise ConfigurationError(
            f"overlap_slowdown={a['overlap_slowdown']!r}; valid: 0 to 10 (a share of the hidden time)"
        )
    a["zero3_tensors"] = positive(a["zero3_tensors"], "", "zero3_tensors")
    # an FP8 recipe: the weight GEMMs at the FP8 GEMM rate (efficiency.BEST_FP8_GEMM_EFFICIENCY), the rest at 16-bit
    fp8 = getattr(a["recipe"], "compute_precision", None) == "fp8"
    gemm, best = efficiency, a["best_gemm"]
    if fp8 and a["fp8_efficiency"] is not None:
        gemm = check_fraction(a["fp8_efficiency"], "fp8_efficiency")
        best = check_fraction(a["fp8_best_gemm"], "fp8_best_gemm")
    return dict(
        efficiency=gemm,
        efficiency16=efficiency,
        best16=a["best_gemm"],
        attention_efficiency=efficiency if attention is None else attention,
        flash=a["flash_attention"],
        gemm_sms=None if a["gemm_sms"] is None else positive(a["gemm_sms"], "", "gemm_sms"),
        attention_kernel=None if a["attention_kernel"] is None else attention_kernel_name(a["attention_kernel"]),
        expert_gemm=expert_gemm_name(a["expert_gemm"]),
        best_gemm=best,
        fp8=fp8,
        cast_bytes=non_negative(a["fp8_cast_bytes"], "B", "fp8_cast_bytes") if fp8 else 0.0,
        zero3_tensors=a["zero3_tensors"],
        param_gather_exposed=flag(a["param_gather_exposed"], "param_gather_exposed"),
        overlap_slowdown=slowdown,
        tp_overlap=code_array(a["tp_overlap"], "tp_overlap", TP_OVERLAP_NAMES),
        **{k: a[k] for k in keys},
    )


def _fractions(value, name: str):
    """check_fraction for a number, or for an array of them (calibration.fit_calibration prices one configuration
    at every grid point in one call): each entry in (0, 1]."""
    if np.ndim(value) == 0:
        return check_fraction(value, name)
    array = number_array(value, name)
    if not bool(np.logical_and(array > 0, array <= 1).all()):
        raise ConfigurationError(f"{name} must hold fractions in (0, 1] (e.g. 0.5 for 50% of peak)")
    return array


def _layout(a: dict) -> dict:
    """The StepConfig's model, layout and per-token FLOP fields of step_config's arguments, checked."""
    from ..models import model as catalog_model
    from ..moe.step import MoEStepModel

    moe = isinstance(a["model"], MoEStepModel)  # an MoE model comes as distlab.moe.step's view of it
    model: Any = a["model"] if moe else catalog_model(a["model"])
    global_batch, seq_len, _ = batch_and_sequence(a["global_batch"], a["seq_len"])
    dp, tp, pp, v, b = (number_array(a[k], k, low=1.0) for k in ("dp", "tp", "pp", "chunks", "micro_batch_size"))
    number_array(a["sequence_parallel"], "sequence_parallel")
    code_array(a["recompute_code"], "recompute_code", RECOMPUTE_MODES)
    cp = np.asarray(a["cp"], dtype=float)
    code = np.asarray(a["recompute_code"])
    s = float(seq_len)
    tokens_mb = b * s / cp
    width = float(model.heads * model.head_dim)
    ep, etp = a["ep"], a["etp"]
    # an MoE model: the busiest GPU's experts (imbalance or capacity factor) set the layer's time
    ppl = model.busiest_params_per_layer(ep) if moe else float(model.params_per_layer())
    layer_fwd = layer_forward_flops_array(ppl, width, tokens_mb, s)
    layer_again = recomputed_forward_flops_array(ppl, width, tokens_mb, s, code)
    n_chunk = chunk_recompute_layers_array(a["recompute_layers"], moe)
    partial = n_chunk is not None
    # torchtitan's selective op checkpointing (memory recipe 'fsdp2'): every second matmul again, not the core
    op_sac = (not moe) & (getattr(a["memory_recipe"], "selective", None) == "op") & (code == 1)
    if np.any(op_sac):
        kv = float(model.kv_heads * model.head_dim)
        again_op = op_sac_recomputed_forward_flops_array(float(model.hidden), kv, float(model.ffn), tokens_mb)
        layer_again = np.where(op_sac, again_op, layer_again)
    logits_fwd = logit_forward_flops_array(float(model.hidden), float(model.vocab), tokens_mb)
    core_fwd = tokens_mb * 4.0 * s * width  # QK^T and AV: 4 s a d_head per token
    balance = bool(a["balance_stages"])
    layers_stage, first_layers, logit_share = _stages(model, pp, v, balance, layer_fwd, layer_again, logits_fwd)
    cap = recompute_cap_array(code, n_chunk, v)
    recomputed = recomputed_layers_array(cap, layers_stage)
    full_share = recomputed / layers_stage  # exactly 1 where every layer is recomputed
    layer_again = np.where(code == 2, layer_again * full_share, layer_again)  # only the recomputed layers pay again
    core_again = np.where((code == 1) & ~op_sac, 1.0, full_share)
    return dict(
        model=model,
        s=s,
        dp=dp,
        tp=tp,
        pp=pp,
        cp=cp,
        v=v,
        b=b,
        code=code,
        full=code == 2,
        recompute_cap=cap,
        recomputed=recomputed,
        full_share=full_share,
        partial=partial,
        sequence_parallel=a["sequence_parallel"],
        schedule_code=a["schedule_code"],
        zero=np.asarray(a["zero"]),
        ep=ep,
        etp=None if etp is None else np.asarray(etp, dtype=float),
        etp_moe=tp if etp is None else np.asarray(etp, dtype=float),
        balance_stages=balance,
        moe=moe,
        m=np.asarray(global_batch, dtype=float) / (dp * b),
        dpc=dp * cp,
        tokens_mb=tokens_mb,
        width=width,
        layer_fwd=layer_fwd,
        layer_again=layer_again,
        logits_fwd=logits_fwd,
        layers_stage=layers_stage,
        first_layers=first_layers,
        logit_share=logit_share,
        stage_flops=layers_stage * (TRAINING_PASSES * layer_fwd + layer_again)
        + logit_share * TRAINING_PASSES * logits_fwd,
        core_fwd=core_fwd,
        core_stage=layers_stage * (TRAINING_PASSES * core_fwd + core_again * core_fwd),
        core_again=core_again,
        op_sac=op_sac,
    )
