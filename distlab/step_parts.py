"""The step time's parts as a table: key, label and colour of each, in stacking order, and the memory per GPU's parts
(the keys of MemoryBreakdown.parts() and their labels). Data only (no computation, no matplotlib), so that the plots
and the browser pictures' data (widgets/training_lab_data.py) name the parts without importing the step model or a
plotting library; distlab.step.TERMS pairs each part with the assumption that prices it and the function computing it.
Lessons 1 and 7 §1.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ConfigurationError

__all__ = ["MEMORY_COLOURS", "MEMORY_COMPONENTS", "MEMORY_LABELS", "StepPart", "STEP_LABELS", "STEP_PARTS", "step_part"]


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


#: The step time's parts, in stacking order. Their colours are the ones every picture draws them in, the matplotlib
#: bars and the browser's training lab and triage ladder alike (lab.js's STEP_COLOURS equals them; tests/widgets/
#: test_series_colours.py): Okabe & Ito's colour-blind-safe palette (2008), the bubble grey as idle time is grey in
#: the bubble grid, the EP all-to-all purple and the offload dark olive where the palette has no eighth colour.
STEP_PARTS = (
    StepPart("compute_s", "compute", "#0072b2"),
    StepPart("overlap_s", "overlap slowdown", "#56b4e9", False),  # sky blue: compute slowed by hidden traffic
    StepPart("tp_comm_s", "TP communication", "#e69f00"),
    StepPart("cp_comm_s", "CP communication (exposed)", "#cc79a7", False),
    StepPart("ep_comm_s", "EP all-to-all", "#6a3d9a", False),  # purple: sky blue is the slowdown's (review v19)
    StepPart("bubble_s", "pipeline bubble", "#bbbbbb"),
    StepPart("p2p_s", "pipeline p2p", "#f0e442"),
    StepPart("offload_s", "activation offload (exposed)", "#8c6d1f", False),  # olive: host-memory copies (step.offload)
    StepPart("dp_exposed_s", "DP communication (exposed)", "#d55e00"),
    StepPart("optimizer_s", "optimizer step", "#009e73"),
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
#: The colour of each memory part in every picture (the matplotlib bars, the browser's bars of lessons 1 and 3, the
#: training lab and the triage ladder: bars.js's PART_COLOURS and lab.js's MEMORY_COLOURS begin with these; tests/
#: widgets/test_series_colours.py): Okabe & Ito's blue, orange, bluish green and reddish purple.
MEMORY_COLOURS = {"weights": "#0072b2", "gradients": "#e69f00", "optimizer": "#009e73", "activations": "#cc79a7"}


def step_part(key: str) -> StepPart:
    """The StepPart of a key ('compute_s', ...). Lesson 7 §1.

    >>> step_part('bubble_s').label
    'pipeline bubble'
    """
    for part in STEP_PARTS:
        if part.key == key:
            return part
    raise ConfigurationError(f"key={key!r} is not a step-time part; valid: {', '.join(p.key for p in STEP_PARTS)}")
