"""The compute model estimate() and plan() price a step with, from their named choices, and the step model's keywords
of it: the calibrated model of distlab.efficiency for the cluster's GPU or the fixed share of Lesson 7 §1, with the
attention kernel (distlab.attention_kernels) and the expert GEMMs (distlab.expert_gemms) of the memory recipe's engine
unless named. Lesson 7 §8, Lesson 10 §3.
"""

from __future__ import annotations

from dataclasses import replace

from .._arguments import as_cluster, check_fraction, flag
from ..attention_kernels import attention_kernel_for, default_attention_kernel
from ..efficiency import ComputeModel, compute_model, fixed_compute_model
from ..elementwise import ELEMENTWISE_KERNELS, fp8_scaling as fp8_scaling_name
from ..errors import ConfigurationError
from ..expert_gemms import default_expert_gemm, expert_gemm as expert_gemm_name
from ..units import non_negative

__all__ = ["compute_model_for", "compute_arguments"]


def compute_model_for(
    cl,
    efficiency=None,
    attention="flash",
    calibration=None,
    kernels="fused",
    *,
    attention_kernel=None,
    fp8_scaling="delayed",
    memory_recipe=None,
    expert_gemm=None,
    fp8_attention=False,
):
    """The efficiency.ComputeModel estimate() and plan() price compute with: the calibrated model for the
    cluster's accelerator (efficiency None), or the fixed share of Lesson 7 §1 (a number). attention_kernel None:
    the kernel the memory recipe's engine runs (attention_kernels.default_attention_kernel); expert_gemm None: how
    it runs an MoE layer's experts (expert_gemms.default_expert_gemm); fp8_attention: the attention core in FP8
    (efficiency.compute_model; the fixed share prices every FLOP alike, so there it is checked, not priced). Lesson 7
    §8, Lesson 10 §3.

    >>> from distlab import hardware
    >>> compute_model_for(hardware.cluster('dgx-a100', 1, 'ib-hdr'), 0.5).matmul_efficiency
    0.5
    """
    cl = as_cluster(cl)  # a Cluster, or a node name (one node); anything else is our error
    engine = "zero-paper" if memory_recipe is None else memory_recipe
    if attention_kernel is None and attention == "flash":
        attention_kernel = default_attention_kernel(engine)
    expert_gemm = default_expert_gemm(engine) if expert_gemm is None else expert_gemm_name(expert_gemm)
    named = dict(kernels=kernels, attention_kernel=attention_kernel, fp8_scaling=fp8_scaling, expert_gemm=expert_gemm)
    named["fp8_attention"] = fp8_attention
    if efficiency is not None:
        attention_kernel_for(attention, attention_kernel), fp8_scaling_name(fp8_scaling)  # checked, not priced
        flag(fp8_attention, "fp8_attention")
        return replace(fixed_compute_model(efficiency, attention, kernels), expert_gemm=expert_gemm)
    if calibration is None:
        return compute_model(cl.accelerator, attention, **named)
    if not isinstance(calibration, (tuple, list)) or len(calibration) != 2:
        raise ConfigurationError(
            f"calibration={calibration!r} must be a pair (share, traffic), as calibration.fit_calibration gives"
        )
    share, traffic = calibration
    return compute_model(
        cl.accelerator,
        attention,
        share=check_fraction(share, "calibration share"),
        traffic=non_negative(traffic, "", "calibration traffic"),
        **named,
    )


def compute_arguments(compute) -> dict:
    """The step_model_array keywords of an efficiency.ComputeModel. Lesson 7 §8.

    >>> from distlab.efficiency import fixed_compute_model
    >>> sorted(compute_arguments(fixed_compute_model(0.5)))
    ['attention_efficiency', 'attention_kernel', 'attention_table', 'best_gemm', 'causal_flash', 'efficiency', 'expert_gemm', 'flash_attention', 'fp8_attention_tables', 'fp8_best_gemm', 'fp8_cast_bytes', 'fp8_efficiency', 'gemm_sms', 'kernels_code', 'memory_traffic', 'overlap_slowdown', 'window_table']
    """
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
        attention_table=compute.attention_table,
        attention_kernel=compute.attention_kernel,
        fp8_efficiency=compute.fp8_matmul_efficiency,
        fp8_best_gemm=compute.fp8_best_gemm,
        fp8_cast_bytes=compute.fp8_cast_bytes,
        expert_gemm=compute.expert_gemm,
        fp8_attention_tables=compute.fp8_attention_tables,
        window_table=compute.window_table,
    )
