"""A layout that cannot run draws no step-time bar (issue 31: "an infeasible layout still draws a step-time bar").

A step that is never taken has no time: every app whose result carries a feasibility verdict (a StepEstimate:
fits in memory, and no other problem such as a pipeline that never fills) is put in an infeasible state a student
reaches with its controls, and the bars it sends or draws are read. Memory bars stay: how far over the capacity a
layout is, is the answer there (lessons 1, 3, 7 and 8b draw it on purpose).
"""

from __future__ import annotations

import pytest

from distlab import training
from distlab.lessons import LESSONS
from distlab.widgets.production import NO_STEP, ProductionStepApp
from distlab.widgets.training_lab import TrainingLabApp

#: An infeasible state of each app that prices steps: Llama-3.1-70B with neither TP nor PP, so every GPU holds the
#: whole model. Its 16-bit weights and gradients alone are 70.55e9 parameters x (2 + 2) B = 282 GB per GPU, over
#: the H100's 80 GB before any optimizer state or activation (ZeRO-1, lesson 8's, shards only the optimizer state;
#: the lab's plain DP shards nothing).
INFEASIBLE = {
    "TrainingLabApp": [("zero", 0), ("tp", 1), ("pp", 1)],
    "ProductionStepApp": [("tp", 1), ("pp", 1)],
}
#: Apps that draw no step-time bar: the OOM ladder (TriageApp) draws memory bars, over the capacity on purpose.
NO_STEP_BARS = {"TriageApp"}


def test_every_app_that_prices_a_step_is_checked():
    # every app of the lesson manifest whose own code prices a step (training.estimate, remembered or through the
    # OOM triage) or reads a StepEstimate
    import inspect

    pricing = set()
    for lesson in LESSONS.values():
        for app in lesson.load_apps():
            source = inspect.getsource(app)
            if any(word in source for word in ("StepEstimate", "estimate(", "oom_triage", "triage(")):
                pricing.add(app.__name__)
    assert pricing == set(INFEASIBLE) | NO_STEP_BARS, pricing ^ (set(INFEASIBLE) | NO_STEP_BARS)


def _set(app, state):
    for attribute, value in state:
        getattr(app, attribute).value = value


def test_the_lab_sends_no_step_bar_for_a_layout_that_does_not_fit():
    app = TrainingLabApp()
    i = app.picture.index
    frames = app.picture.frames
    assert app.result.feasible and frames["runs"][i] and len(frames["step"][i]) == len(frames["step_parts"])
    _set(app, INFEASIBLE["TrainingLabApp"])
    assert app.error is None and isinstance(app.result, training.StepEstimate) and not app.result.feasible
    frames = app.picture.frames
    i = app.picture.index
    assert not frames["runs"][i] and not frames["fits"][i]
    assert frames["step"][i] == [] and frames["step_text"][i] == [] and frames["step_total"][i] == ""
    assert len(frames["memory"][i]) == len(frames["memory_parts"])  # the memory bar shows how far over it is
    # every node count: a bar exactly where the layout runs
    for runs, step in zip(frames["runs"], frames["step"]):
        assert bool(step) == bool(runs)


def test_the_production_step_draws_no_bar_for_a_layout_that_does_not_fit():
    app = ProductionStepApp()
    try:
        drawn = lambda row: [r for rects in app.bars.rects.values() if (r := rects[row]).get_visible()]  # noqa: E731
        assert app.result.healthy.feasible and all(drawn(row) for row in range(3))
        assert not any(note.get_visible() for note in app.notes)
        _set(app, INFEASIBLE["ProductionStepApp"])
        assert app.error is None and not app.result.healthy.feasible and not app.reference.feasible
        for row in range(3):
            assert not drawn(row), f"row {row} draws a step-time bar for a layout that does not fit"
            assert app.notes[row].get_visible() and app.notes[row].get_text() == NO_STEP
        _set(app, [("tp", 8), ("pp", 4)])  # lesson 8's layout again: the bars come back, the notes go
        assert all(drawn(row) for row in range(3)) and not any(note.get_visible() for note in app.notes)
    finally:
        import matplotlib.pyplot as plt

        plt.close(app.fig)


@pytest.mark.parametrize("name", sorted(INFEASIBLE))
def test_the_state_is_infeasible_for_memory(name):
    # the derivation above: the per-GPU memory at the state is over the 80 GB of an H100
    app = {"TrainingLabApp": TrainingLabApp, "ProductionStepApp": ProductionStepApp}[name]()
    _set(app, INFEASIBLE[name])
    estimate = app.result if name == "TrainingLabApp" else app.result.healthy
    memory = estimate.memory
    assert not estimate.fits and memory.weights_bytes + memory.gradients_bytes > 280e9
