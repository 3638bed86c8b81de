"""Pipeline parallelism (Lesson 4): schedules, a timeline simulator, closed forms, stage analysis, memory.

Conventions: p = ``pp`` (GPUs in one pipeline; "stages" in the lesson's words), m = ``microbatches`` per
step, v = ``chunks`` (model chunks per stage, interleaved schedule only); stages, microbatches and chunks
are numbered from 0. The schedule kind is ``schedule`` (one of KINDS).

- ``layout``: KINDS, PLACEMENTS (where a microbatch goes next: loop, v, dual), check_microbatches,
  samples_per_pipeline, the layout checks;
- ``schedules``: Op, the op orders (naive, gpipe, 1f1b, interleaved, zb-h1, and Lesson 11's zb-v,
  dualpipe, dualpipe-v);
- ``timeline``: Timeline, simulate, schedule (the simulator: the ground truth of the bubble);
- ``closed_form``: the bubble formulas, and their array versions the step model (distlab.training) uses;
- ``layers``: split_layers, boundary_message_bytes;
- ``stages``: analyze_stages; ``advice``: its warnings with computed alternatives;
- ``memory``: StageActivations, activation_memory.

Sources: GPipe (Huang et al. 2019); 1F1B = PipeDream-Flush and interleaved 1F1B (Narayanan et al. 2021,
"Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", Sec. 2.2); ZB-H1
(Qi et al. 2023, "Zero Bubble Pipeline Parallelism", Sec. 2.1).
"""

from __future__ import annotations

from .closed_form import (
    ARRAY_SCHEDULES,
    NO_CLOSED_FORM,
    ClosedForm,
    bubble_fraction,
    bubble_overhead,
    bubble_overhead_array,
    closed_form,
    in_flight_array,
    stage_in_flight_array,
    pipeline_step_time,
    zb_h1_bubble_time,
    dualpipe_bubble_time,
)
from .memory import StageActivations, activation_memory
from .layout import KINDS, PLACEMENTS, check_microbatches, placement, samples_per_pipeline
from .schedules import (
    Op,
    gpipe_order,
    interleaved_order,
    naive_order,
    one_f_one_b_order,
    stage_orders,
    zb_h1_order,
    zb_v_order,
    dualpipe_order,
    dualpipe_v_order,
)
from .advice import MAX_SUGGESTION_OPS, PipelineWarning
from .layers import activation_bytes, boundary_message_bytes, split_layers
from .stages import StageAnalysis, analyze_stages
from .timeline import Timeline, schedule, simulate

__all__ = [
    "KINDS",
    "Op",
    "Timeline",
    "ClosedForm",
    "PipelineWarning",
    "StageAnalysis",
    "stage_orders",
    "naive_order",
    "gpipe_order",
    "one_f_one_b_order",
    "interleaved_order",
    "zb_h1_order",
    "zb_v_order",
    "dualpipe_order",
    "dualpipe_v_order",
    "placement",
    "PLACEMENTS",
    "simulate",
    "schedule",
    "bubble_fraction",
    "bubble_overhead",
    "bubble_overhead_array",
    "in_flight_array",
    "stage_in_flight_array",
    "zb_h1_bubble_time",
    "dualpipe_bubble_time",
    "NO_CLOSED_FORM",
    "closed_form",
    "check_microbatches",
    "samples_per_pipeline",
    "split_layers",
    "boundary_message_bytes",
    "activation_bytes",
    "analyze_stages",
    "StageActivations",
    "activation_memory",
    "pipeline_step_time",
]
