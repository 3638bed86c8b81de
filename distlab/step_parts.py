"""The step time's parts as a table: key, label and colour of each, in stacking order, and the memory per GPU's parts
(the keys of MemoryBreakdown.parts() and their labels). Data only (no computation, no matplotlib), so that the plots
and the browser pictures' data (widgets/training_lab_data.py) name the parts without importing the step model or a
plotting library; distlab.step.TERMS pairs each part with the assumption that prices it and the function computing it.
Lessons 1 and 7 §1.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ConfigurationError

__all__ = ["MEMORY_COMPONENTS", "MEMORY_LABELS", "StepPart", "STEP_LABELS", "STEP_PARTS", "step_part"]


@dataclass(frozen=True)
class StepPart:
    """One part of the step time: key (of its seconds in training.step_model_array's result and a StepEstimate's
    attribute), label (what students see), colour (the plots' palette, distlab.plots._style), and whether a zero is
    still shown (False: a part that is zero for every configuration of its kind, such as a dense model's EP
    all-to-all, is left out of StepEstimate.parts())."""

    key: str
    label: str
    colour: str
    shown_when_zero: bool = True


#: The step time's parts, in stacking order.
STEP_PARTS = (
    StepPart("compute_s", "compute", "#4c72b0"),
    StepPart("overlap_s", "overlap slowdown", "#7fb2d5", False),  # a lighter blue: compute slowed by hidden traffic
    StepPart("tp_comm_s", "TP communication", "#dd8452"),
    StepPart("cp_comm_s", "CP communication (exposed)", "#cc79a7", False),
    StepPart("ep_comm_s", "EP all-to-all", "#6a3d9a", False),  # purple: sky blue was 12.5 CIELAB from the slowdown's
    StepPart("bubble_s", "pipeline bubble", "#c9c9c9"),
    StepPart("p2p_s", "pipeline p2p", "#937860"),
    StepPart("offload_s", "activation offload (exposed)", "#ccb974", False),  # olive: host-memory copies (step.offload)
    StepPart("dp_exposed_s", "DP communication (exposed)", "#c44e52"),
    StepPart("optimizer_s", "optimizer step", "#55a868"),
)
#: StepEstimate.parts() keys, in stacking order: the labels of STEP_PARTS.
STEP_LABELS = tuple(p.label for p in STEP_PARTS)

#: MemoryBreakdown.parts() keys, in stacking order, and the label students see for each (lessons 1, 7, 8).
MEMORY_COMPONENTS = ("weights", "gradients", "optimizer", "activations")
MEMORY_LABELS = {
    "weights": "weights",
    "gradients": "gradients",
    "optimizer": "optimizer states",
    "activations": "activations",
}


def step_part(key: str) -> StepPart:
    """The StepPart of a key ('compute_s', ...). Lesson 7 §1.

    >>> step_part('bubble_s').label
    'pipeline bubble'
    """
    for part in STEP_PARTS:
        if part.key == key:
            return part
    raise ConfigurationError(f"key={key!r} is not a step-time part; valid: {', '.join(p.key for p in STEP_PARTS)}")
