"""Training step time, FLOPs, MFU/HFU, throughput and scaling efficiency.

The step model and StepEstimate count FLOPs with distlab.flops (layer weights, attention and the
logits; recomputation by mode). MFU is PaLM's definition (Chowdhery et al. 2022, App. B): model
FLOPs, attention and logits included, no recomputation, against peak; HFU adds the forward work
that recomputation repeats. model_flops / hardware_flops below are the 6PT rule of thumb,
6 x params x tokens (8 with full recomputation; Kaplan et al. 2020), which leaves attention out.
Throughput = global batch / step time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._arguments import as_cluster, check_fraction, flag
from .collectives.placed import ring_step_floor
from .errors import ConfigurationError
from .gemm_shares import fp8_gemm_source
from .expert_gemms import note as expert_gemm_note
from . import _words, memory, models
from .memory import capacity_detail
from .moe import step as moe_step
from .partial_recompute import check_recompute_layers, model_recomputed_layers
from .flops import (
    FLOPS_PER_PARAM_TOKEN,
    FLOPS_PER_PARAM_TOKEN_FULL_RECOMPUTE,
    forward_time,
    hardware_flops,
    megatron_flops_per_iteration,
    mfu,
    model_flops,
    step_flops,
    training_days,
)
from .step.config import (
    MAX_GLOBAL_BATCH,
    MAX_MICRO_BATCH,
    MAX_SEQ_LEN,
    MAX_STAGES,
    SCHEDULES,
    batch_and_sequence,
)
from .step.placement import (
    equal_local_ranks_array,
    group_all_reduce_time_array,
    p2p_message_bytes,
    pipeline_crossings_array,
)
from .step.checks import check_batch, check_fp8_attention, check_layout, check_memory_recipe
from .step.data_parallel import EXPOSED_GATHER_NOTE, deepspeed_note, zero3_collectives_per_layer
from .step.experts import expert_view
from .step.offload import offload_note_of, offload_record
from .step.pricing import compute_arguments, compute_model_for
from .step.terms import TERMS, step_model_array
from .tp_overlap import TP_OVERLAP_NAMES, layout_method
from .tp_overlap import note as tp_overlap_note
from .units import format_bytes, format_seconds, wrap_text

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
    "TERMS",
    "MAX_STAGES",
]


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
    power_note: str = ""  # a power cap distlab does not model (hardware.Accelerator.power_note)
    offload_s: float = 0.0  # activation offloading's copies to host memory, the part not hidden (step.offload)
    offload_note: str = ""  # what the offload assumed (step.offload.offload_note); empty without offloading
    # (the model as step_model_array reads it, the keywords it priced this configuration with): calibration.py
    # re-prices the same configuration with other fitted constants in one vectorised call
    step_inputs: Any = field(default=None, repr=False, compare=False)

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
        """Step-time components in seconds, in stacking order: the labels of step.TERMS (a part that is zero for
        every configuration of its kind, such as the EP all-to-all of a dense model, is left out). Lesson 7 §1."""
        parts = {}
        for t in TERMS:
            value = getattr(self, t.key)
            if t.shown_when_zero or value:
                parts[t.label] = value
        return parts

    def explain(self) -> str:
        """Why this configuration cannot run (empty when it can)."""
        reasons = list(self.problems)
        if not self.fits:
            if self.memory.headroom_bytes is None or self.memory.capacity_bytes is None:
                raise ConfigurationError(
                    "memory: this estimate's breakdown has no GPU capacity, so no overflow to explain"
                )
            reserve = self.memory.reserved_bytes
            # the headroom counts the recipe's reserve (199 GB needs 121 GB more than 80 GB less 2 GB reserved)
            reasons.append(
                f"memory: needs {format_bytes(self.memory.total_bytes)} per GPU, "
                f"{format_bytes(-self.memory.headroom_bytes)} over the {format_bytes(self.memory.capacity_bytes)}"
                + (f" less {format_bytes(reserve)} reserved" if reserve else "")
                # what the capacity is on a line of its own, so that a printed line fits a notebook's output
                + capacity_detail(self.memory.capacity_text, reserve, "CUDA context and communication buffers")
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
        lines.extend(self.notes())
        if not self.feasible:
            lines.append("NOT FEASIBLE: " + self.explain())
        # each line broken at spaces where it is wider than a notebook's output (the compute model's description)
        return wrap_text("\n".join(lines))

    def notes(self) -> list:
        """What the step time assumes beyond the compute line: FP8's rate, the expert GEMMs, TP overlap, exposed DP
        traffic, a power cap."""
        out = []
        cm = self.compute_model
        if self.config.get("fp8_scaling") and cm is not None and cm.fp8_matmul_efficiency is not None:
            out.append(
                f"FP8: only the layers' weight GEMMs at {100 * cm.fp8_matmul_efficiency:.1f}% of the FP8 peak (x their "
                f"shape factor; {fp8_gemm_source(self.memory.gpu_name)} x the training share), {cm.fp8_scaling} "
                "scaling's casts in the element-wise traffic; the rest, the output layer too, at 16-bit rates"
            )
        if "expert_gemm" in self.config:
            out.append(expert_gemm_note(self.config["expert_gemm"]))
        if self.config.get("tp_overlap_method"):
            out.append(tp_overlap_note(self.config["tp_overlap_method"], self.config["tp"]))
        if self.config.get("overlap_param_gather") is False:
            out.append(EXPOSED_GATHER_NOTE)
        if self.config.get("memory_recipe") == "deepspeed" and self.config["dp"] * self.config["cp"] > 1:
            out.append(deepspeed_note(self.config["zero"], self.config["pp"]))
        if self.power_note:
            out.append(self.power_note)
        out.append(self.offload_note)
        return [line for line in out if line]

    def breakdown(self) -> dict:
        """Every step-time term in seconds under its short name (the key without '_s'; the DP traffic in total,
        dp_comm_total, beside the exposed part, dp_comm_exposed), as to_dict() reports them."""
        names = {"overlap_s": "overlap_slowdown"}
        out = {}
        for t in TERMS:
            if t.key == "dp_exposed_s":
                out["dp_comm_total"] = self.dp_comm_s
                out["dp_comm_exposed"] = self.dp_exposed_s
            elif t.key == "offload_s" and "activation_offload_layers" not in self.config:
                continue  # estimates without offloading report what they always did
            else:
                out[names.get(t.key, t.key.removesuffix("_s"))] = getattr(self, t.key)
        return out

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
            "breakdown_s": self.breakdown(),
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
    both are inter_node_bandwidth_per_gpu. The peak is recipe.compute_precision's (the weight GEMMs'), core_peak_flops
    recipe.core_precision's (the attention core's: bf16 for FP8). ring_step_floor: the least a ring step inside a
    node costs when the ring spans nodes, set by the node's host CPU (collectives.placed.ring_step_floor; priced
    only where a collective's latency over every rank is, ZeRO-3 per tensor). achieved=True (the
    calibrated model, Lesson 7 §8): every link at its measured share of line rate (efficiency.achieved_link_share) and
    nvls_bw, NCCL's NVLS all-reduce rate where the node has it (efficiency.nvls_bandwidth); False: line rates, no NVLS.
    gpus_per_node: the NVLink domain (hardware.Cluster.nvlink_domain); the fabric share is a node's (tray's). Lesson 7 §3.

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
        gpus_per_node=cl.nvlink_domain,
        intra_bw=intra * cl.node.intra_link.bandwidth,
        intra_lat=cl.node.intra_link.latency,
        inter_bw=fabric * cl.fabric_bandwidth_per_gpu(same_local_rank=True),
        cross_rail_bw=fabric * cl.fabric_bandwidth_per_gpu(same_local_rank=False),
        inter_lat=cl.fabric.latency,
        ring_step_floor=ring_step_floor(cl.node.host_cpu),
        peak_flops=cl.accelerator.peak(compute),
        core_peak_flops=cl.accelerator.peak(recipe.core_precision),
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
    tp_overlap=None,
    memory_recipe="zero-paper",
    cp=1,
    balance_stages=False,
    ep=1,
    etp=None,
    kernels="fused",
    moe_imbalance=1.0,
    capacity_factor=None,
    max_nodes_per_token=None,
    attention_kernel=None,
    fp8_scaling="delayed",
    expert_gemm=None,
    zero3_collectives="layer",
    recompute_layers=None,
    overlap_param_gather=True,
    activation_offload_layers=0,
    fp8_attention=False,
) -> StepEstimate:
    """Step time by term (distlab.step.TERMS), throughput, MFU/HFU, scaling efficiency and memory of one configuration.

    model: a TransformerModel or catalog name (an MoE one: distlab.moe); cluster: a hardware.Cluster, or a node name
    with nodes= and fabric=. dp defaults to GPUs / (tp x cp x pp); cp: context parallelism by ring attention (the
    sequence splits into 2 cp load-balanced chunks). efficiency: None (default) prices compute with the calibrated model
    of distlab.efficiency; a number in (0, 1] is the simple model of Lesson 7 §1, every FLOP at that share of the dense
    peak. attention: 'flash' or 'unfused'; attention_kernel: the flash kernel
    (distlab.attention_kernels.ATTENTION_KERNEL_NAMES; None: the memory recipe's engine's). precision 'fp8': the weight GEMMs
    at the FP8 GEMM rate, the rest at 16-bit, the casts by fp8_scaling ('delayed', 'current', 'blockwise';
    distlab.elementwise). calibration: (share, traffic) replacing the two fitted constants. tp_overlap: a method of
    distlab.tp_overlap ('none', 'userbuffers', 'async-tp', 'megatron-async-backward'); None: the memory recipe's
    engine's default; True: its opt-in; False. memory_recipe: 'zero-paper' (16 B per parameter) or an engine's
    (distlab.memory_recipes.MEMORY_RECIPES). balance_stages: the first and last stage hold one layer fewer (pp > 2). ep,
    etp: expert and expert tensor parallelism (etp 1 or tp) of an MoE model (Lesson 10 §5); moe_imbalance,
    capacity_factor and max_nodes_per_token its routing (Lesson 10 §3); expert_gemm 'sequential', 'multi-stream' or
    'grouped': a GPU's expert GEMMs one at a time, up to 4 at once, or all in one launch (distlab.expert_gemms; None:
    the engine's). kernels: 'fused', 'compiled' or 'eager' element-wise kernels. An infeasible configuration is priced
    but flagged (explain() says why); invalid ones raise ConfigurationError. zero3_collectives: 'layer' (a flat buffer per layer: FSDP2, Megatron) or 'tensor' (one per
    parameter tensor, DeepSpeed ZeRO-3 of 2021; data_parallel.ZERO3_COLLECTIVES). recompute_layers: with
    recompute='full', N of each stage's (chunk's) layers recomputed, the rest keeping their activations (Megatron
    --recompute-method block; torchtitan's every-k-th; None: all; 0 to L; distlab.partial_recompute).
    overlap_param_gather False: ZeRO-1/2's parameter all-gather exposed (Megatron without --overlap-param-gather).
    activation_offload_layers: the model's first N layers' activations to host memory (--cpu-offloading-num-layers;
    step.offload). fp8_attention: with precision 'fp8', the attention core in FP8 too (distlab.attention_variants).
    Lesson 7 §1-§8.

    Llama 2 7B, one DGX H100, dp 8, 50% of peak: 46.09 GFLOP/token x 4096 / 494.7 TFLOP/s = 0.382 s; 108 GB > 80 GB.
    >>> est = estimate('llama2-7b', 'dgx-h100', nodes=1, fabric='ib-ndr', global_batch=8, seq_len=4096, efficiency=0.5)
    >>> est.config['dp'], round(est.compute_s, 3), est.fits
    (8, 0.382, False)
    """
    knobs = dict(locals())  # the keywords as given: _configured reads those the checks below do not
    model = moe_step.moe_model(model) if moe_step.is_moe(model) else models.model(model)
    cl = as_cluster(cluster, nodes, fabric)
    dp, tp, pp, cp = check_layout(model, cl, dp, tp, pp, cp)
    shape = check_batch(model, global_batch, seq_len, micro_batch_size, chunks, schedule, dp, pp, cp, balance_stages)
    mem_recipe, zero = check_memory_recipe(memory_recipe, zero)
    layout = dict(dp=dp, tp=tp, cp=cp, pp=pp, zero=zero)
    core_model, config, compute, flags = _configured(model, cl, shape, mem_recipe, layout, knobs)
    return _priced(model, core_model, cl, config, compute, mem_recipe, flags)


def _configured(model, cl, shape, mem_recipe, layout: dict, k: dict) -> tuple:
    """(the model as the step model reads it, the configuration record, the compute model, step_model_array's
    switches) of estimate's checked layout and its keywords as given (k)."""
    named = {key: k[key] for key in ("attention_kernel", "fp8_scaling", "expert_gemm", "fp8_attention")}
    recipe = check_fp8_attention(k["fp8_attention"], memory.precision_recipe(k["precision"]))
    compute = compute_model_for(
        cl, k["efficiency"], k["attention"], k["calibration"], k["kernels"], memory_recipe=mem_recipe, **named
    )
    tp, balance = layout["tp"], k["balance_stages"]
    sp = bool(k["sequence_parallel"]) and tp > 1
    asked = {name: k[name] for name in ("moe_imbalance", "capacity_factor", "max_nodes_per_token")}
    s, cp, pp = shape["s"], layout["cp"], layout["pp"]
    core_model, experts, routing = expert_view(model, cl, s, tp, cp, pp, k["ep"], k["etp"], sp, asked)
    layout.update(recompute=memory.recompute_mode(k["recompute"]), sp=sp)
    method = layout_method(k["tp_overlap"], mem_recipe, tp, sp)
    config = _record(model, cl, shape, layout, recipe, compute, k["efficiency"], mem_recipe, method, balance)
    config.update(**experts, **routing, **_partial_record(model, layout["recompute"], k["recompute_layers"]))
    config.update(offload_record(k["activation_offload_layers"], model.layers, cl.node, config, mem_recipe))
    if "ep" in config:  # an MoE model's experts: how the engine runs them (distlab.expert_gemms)
        config["expert_gemm"] = compute.expert_gemm
    flags = _flags(model, config, method, balance, k["zero3_collectives"], k["overlap_param_gather"])
    return core_model, config, compute, flags


def _flags(model, config: dict, method: str, balance_stages, zero3_collectives, overlap_param_gather) -> dict:
    """step_model_array's switches of an estimate (TP overlap method, balanced stages, ZeRO-3 collectives per layer,
    an exposed parameter gather); one other than the default is added to the configuration record too."""
    flags: dict[str, Any] = dict(tp_overlap=TP_OVERLAP_NAMES.index(method), balance_stages=bool(balance_stages))
    if zero3_collectives != "layer":  # the default adds nothing to the record: estimates without it stay as they were
        config["zero3_collectives"] = zero3_collectives
        flags["zero3_tensors"] = zero3_collectives_per_layer(model, zero3_collectives)
    if not flag(overlap_param_gather, "overlap_param_gather") and config["zero"] in (1, 2):  # its gather only
        config["overlap_param_gather"], flags["param_gather_exposed"] = False, True
    return flags


def _record(model, cl, shape, layout, recipe, compute, efficiency, mem_recipe, tp_overlap, balance_stages) -> dict:
    """The configuration as estimate() prices it, in the order to_dict() reports it."""
    sp, pp = layout["sp"], layout["pp"]
    config = dict(model=model.name, gpus=cl.gpus, global_batch=shape["batch"], seq_len=shape["s"])
    config.update(dp=layout["dp"], tp=layout["tp"], cp=layout["cp"], pp=pp, chunks=shape["v"])
    config.update(micro_batch_size=shape["b"], microbatches=shape["m"], zero=layout["zero"])
    config.update(
        recompute=layout["recompute"], sequence_parallel=sp, schedule=shape["schedule"], precision=recipe.name
    )
    config.update(efficiency=efficiency if compute.calibrated is False else None, attention=compute.attention)
    config.update(attention_kernel=compute.attention_kernel)
    if recipe.compute_precision == "fp8":
        config.update(fp8_scaling=compute.fp8_scaling)
    if compute.fp8_attention:  # named only where it runs: estimates without it stay as they were
        config.update(fp8_attention=True)
    config.update(kernels=compute.kernels, matmul_efficiency=compute.matmul_efficiency, tp_overlap=tp_overlap != "none")
    if tp_overlap != "none":  # the method is named only where one runs: estimates without it stay as they were
        config.update(tp_overlap_method=tp_overlap)
    config.update(memory_recipe=mem_recipe.name, balance_stages=bool(balance_stages) and pp > 2)
    return config


def _priced(model, core_model, cl, config, compute, mem_recipe, flags) -> StepEstimate:
    """The StepEstimate of a checked configuration record: step_model_array's terms, memory and FLOPs."""
    from . import memory
    from .moe import moe_step_flops, step as moe_step

    recipe = memory.precision_recipe(config["precision"])
    hw = hardware_arguments(cl, recipe, achieved=compute.calibrated)
    layout = {
        k: config[k] for k in ("dp", "tp", "cp", "pp", "chunks", "micro_batch_size", "zero", "ep", "etp") if k in config
    }
    keywords = dict(
        **hw,
        **layout,
        global_batch=config["global_batch"],
        seq_len=config["seq_len"],
        recompute_code=memory.RECOMPUTE_MODES.index(config["recompute"]),
        sequence_parallel=config["sequence_parallel"],
        schedule_code=SCHEDULES.index(config["schedule"]),
        **compute_arguments(compute),
        memory_recipe=mem_recipe,
        **flags,
    )
    if "recompute_layers" in config:
        keywords["recompute_layers"] = config["recompute_layers"]
    if "activation_offload_layers" in config:  # the default adds no keyword: estimates without it stay as they were
        keywords.update(activation_offload_layers=config["activation_offload_layers"])
        keywords.update(host_link_bandwidth=cl.node.host_link_bandwidth)
    out = step_model_array(core_model, **keywords)
    bd = memory.MemoryBreakdown(
        float(out["weights_bytes"]),
        float(out["gradients_bytes"]),
        float(out["optimizer_bytes"]),
        float(out["activations_bytes"]),
        float(cl.accelerator.memory_bytes),
        cl.accelerator.name,
        reserved_bytes=mem_recipe.reserve_bytes,
        capacity_text=cl.accelerator.memory_text(),
    )
    batch, s, m, pp = config["global_batch"], config["seq_len"], config["microbatches"], config["pp"]
    problems = []
    if pp > 1 and m < pp:
        problems.append(
            f"pipeline: only {_words.counted(m, 'microbatch')} per step for {pp} stages; the pipeline never fills"
        )
    mode = config["recompute"]
    counted = (
        moe_step_flops(model, batch, s, mode)
        if moe_step.is_moe(model)
        else step_flops(model, batch, s, mode, _model_recomputed(model, config))
    )
    peak = hw["peak_flops"]
    return StepEstimate(
        config=config,
        **{t.key: float(out[t.key]) for t in TERMS},
        dp_comm_s=float(out["dp_comm_s"]),
        step_time_s=float(out["step_time_s"]),
        microbatches=m,
        tokens_per_step=float(batch * s),
        model_flops=counted.model_flops,
        hardware_flops=counted.hardware_flops,
        gpus=cl.gpus,
        peak_flops=peak,
        ideal_single_gpu_s=counted.model_flops / (peak * compute.matmul_efficiency),
        memory=bd,
        problems=tuple(problems),
        compute_model=compute,
        power_note=cl.accelerator.power_note(),
        offload_note=offload_note_of(config, cl.node, out),
        step_inputs=(core_model, keywords),
    )


def _partial_record(model, mode: str, recompute_layers) -> dict:
    """{'recompute_layers': N} checked (partial_recompute.check_recompute_layers), or {} when not given: the default
    adds nothing to the record, so estimates without it stay as they were."""
    n = check_recompute_layers(recompute_layers, mode, model.layers, moe_step.is_moe(model))
    return {} if n is None else {"recompute_layers": n}


def _model_recomputed(model, config: dict):
    """The model's layers fully recomputed under estimate's recompute_layers (None: every layer, or no partial)."""
    if "recompute_layers" not in config:
        return None
    return model_recomputed_layers(model.layers, config["pp"], config["chunks"], config["recompute_layers"])
