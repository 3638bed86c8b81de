"""The step model as a list of named terms, and their composition, step_model_array.

TERMS is the one list of the step time's parts: each Term has its StepPart (distlab.step_parts: the key of its seconds
in step_model_array's result, the label students see in StepEstimate.parts(), the training lab's bars and the
planner's components, its colour), the modelling assumption that prices it (planner.Plan.deciding_assumption names it)
and the function computing it. Adding an effect means adding a part to step_parts.STEP_PARTS and its term here (its
function beside the physics it prices). Lesson 7 §1.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable

from .._arguments import broadcasting, finite_result
from ..errors import ConfigurationError
from ..efficiency import OVERLAP_SLOWDOWN
from ..step_parts import STEP_PARTS, StepPart, step_part
from .communication import bubble_term, cp_term, ep_term, p2p_term, tp_term
from .compute import compute_term, optimizer_term, overlap_term
from .config import step_config
from .data_parallel import dp_term
from .footprint import activations_term, model_states_term
from .offload import offload_term

__all__ = ["Term", "TERMS", "term", "step_model_array"]


@dataclass(frozen=True)
class Term:
    """One part of the step time: its StepPart (key of its seconds in step_model_array's result, label, colour;
    distlab.step_parts), the assumption that prices it, and the function (StepConfig, results so far) -> its arrays."""

    part: StepPart
    assumption: str
    function: Callable

    @property
    def key(self) -> str:
        return self.part.key

    @property
    def label(self) -> str:
        return self.part.label

    @property
    def colour(self) -> str:
        return self.part.colour

    @property
    def shown_when_zero(self) -> bool:
        return self.part.shown_when_zero


#: The step time's parts (distlab.step_parts.STEP_PARTS, in stacking order), each with its assumption and function.
TERMS = (
    Term(
        step_part("compute_s"),
        "the calibrated matmul efficiency and element-wise memory traffic (distlab.efficiency), "
        "what recomputation re-runs, and the logits charged to the busiest pipeline stage",
        compute_term,
    ),
    Term(
        step_part("overlap_s"),
        f"compute beside the communication it hides runs {100 * OVERLAP_SLOWDOWN[1]:.1f}% slower "
        "(efficiency.OVERLAP_SLOWDOWN, Lee et al. 2025)",
        overlap_term,
    ),
    Term(
        step_part("tp_comm_s"),
        "TP communication sits on the critical path (with a tp_overlap method, (tp - 1) / tp of what fits "
        "under the matmuls hides: a conservative reading of the method, no measured share; distlab.tp_overlap)",
        tp_term,
    ),
    Term(
        step_part("cp_comm_s"),
        "ring attention's K/V transfers hide under the attention core they overlap; only the excess is exposed",
        cp_term,
    ),
    Term(
        step_part("ep_comm_s"),
        "the MoE all-to-alls of uniformly routed tokens sit on the critical path (not "
        "overlapped with compute), at the achieved NVLink and cross-rail fabric rates",
        ep_term,
    ),
    Term(
        step_part("bubble_s"),
        "the pipeline schedule and microbatch count (bubble (p - 1) / (v m) of the busiest stage's time)",
        bubble_term,
    ),
    Term(
        step_part("p2p_s"),
        "only the fill and drain sends of the pipeline are exposed (steady-state sends hide behind compute)",
        p2p_term,
    ),
    Term(
        step_part("offload_s"),
        "activation offloading's copies to host memory and back run beside the layers' forward and backward "
        "(Transformer Engine's layer windows, at the host link's line rate); only the excess is exposed",
        offload_term,
    ),
    Term(
        step_part("dp_exposed_s"),
        "how much of the data-parallel traffic hides behind compute (the gradient reduction behind the backward, "
        "ZeRO's parameter gathers behind the forward; ZeRO-3 layer by layer with one layer of prefetch)",
        dp_term,
    ),
    Term(step_part("optimizer_s"), "the optimizer step is memory-bound at HBM bandwidth", optimizer_term),
)
assert tuple(t.part for t in TERMS) == STEP_PARTS  # every part has its term, in the table's order


def term(key: str) -> Term:
    """The Term of a key of step_model_array's result ('compute_s', ...). Lesson 7 §1.

    >>> term('bubble_s').label
    'pipeline bubble'
    """
    for t in TERMS:
        if t.key == key:
            return t
    raise ConfigurationError(f"key={key!r} is not a step-time part; valid: {', '.join(p.key for p in STEP_PARTS)}")


#: The order the terms are computed in: each reads what those before it return (the TP and CP terms the compute's
#: matmul and attention-core times, the bubble the stage time, DP the backward's share, the overlap slowdown the
#: hidden traffic, the optimizer step the model states, the offload term the layer times and the activations).
ORDER = (
    compute_term,
    tp_term,
    cp_term,
    ep_term,
    bubble_term,
    p2p_term,
    dp_term,
    overlap_term,
    model_states_term,
    optimizer_term,
    activations_term,
    offload_term,
)


#: The keys of step_model_array's result (the terms' intermediate values, per microbatch, stay inside).
RESULTS = (
    "microbatches",
    *(t.key for t in TERMS),
    "dp_comm_s",
    "step_time_s",
    "weights_bytes",
    "gradients_bytes",
    "optimizer_bytes",
    "activations_bytes",
    "memory_bytes",
    "layer_forward_s",
    "layer_backward_s",
)


@broadcasting
def step_model_array(model, **arguments) -> dict:
    """Per-step time components (s) and per-GPU memory (bytes) of the busiest (first) pipeline stage, for one
    configuration or arrays of them (the planner's columns): the terms of TERMS, computed in ORDER on one StepConfig
    (step_config's keywords: the hardware of training.hardware_arguments, the layout, the compute model of
    pricing.compute_arguments). step_time_s is the sum of the TERMS; dp_comm_s the whole DP traffic (exposed and
    hidden); memory_bytes weights + gradients + optimizer + activations. Lesson 7 §1.

    Llama 2 7B on one DGX H100 node, dp 8, one 4,096-token sequence per GPU: 32 layers x 3 x (2 x 202,383,360
    + 4 x 4096 x 4096) + 3 x 2 x 4096 x 32,000 = 46.09 GFLOP per token (6 x 6.738e9 = 40.43 leaves attention
    out); compute = 46.09e9 x 4096 / (989.4 TFLOP/s x 0.5) = 0.382 s.

    >>> from distlab import hardware, memory, models, training
    >>> hw = training.hardware_arguments(hardware.cluster('dgx-h100', nodes=1, fabric='ib-ndr'),
    ...                                  memory.precision_recipe('mixed'))
    >>> out = step_model_array(models.model('llama2-7b'), **hw, global_batch=8, seq_len=4096, dp=8, tp=1, pp=1,
    ...                        chunks=1, micro_batch_size=1, zero=0, recompute_code=0, sequence_parallel=False,
    ...                        schedule_code=1, efficiency=0.5)
    >>> round(float(out['compute_s']), 3), float(out['bubble_s'])
    (0.382, 0.0)
    """
    c = step_config(model, **arguments)
    r: dict = {"microbatches": c.m}
    for function in ORDER:
        r.update(function(c, r))
    step = 0.0
    for t in TERMS:
        step = step + r[t.key]
    r["step_time_s"] = finite_result("step time", step)
    r["memory_bytes"] = r["weights_bytes"] + r["gradients_bytes"] + r["optimizer_bytes"] + r["activations_bytes"]
    finite_result("memory per GPU", r["memory_bytes"])
    out = {key: r[key] for key in RESULTS}
    if "offload_bytes" in r:  # only where some configuration offloads activations (step.offload)
        out["offload_bytes"] = r["offload_bytes"]
    return out


# its keywords are step_config's: help(), inspect.signature and the API fuzz tests see them
step_model_array.__signature__ = inspect.signature(step_config).replace(return_annotation=dict)  # type: ignore[attr-defined]
