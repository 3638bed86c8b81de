"""An app that prints an error band with a step time says where the band comes from, and claims it only for a step
priced by the model the band was measured for (review v19: the training lab's compute set to "fixed 30%", Lesson 7
§1's simple model, still printed "the model's error band ±5.6%: mean |error| on 29 published H100 runs", the
calibrated model's validated error, beside a step time 80% longer than the calibrated one).

Checked for every lesson app, as built and after one step of each control (lesson_apps.texts_through_steps), and for
every app with a compute-model control at each of its uncalibrated options."""

from __future__ import annotations

import re

import ipywidgets as widgets
import pytest

from lesson_apps import lesson_apps as _apps
from lesson_apps import shown_texts, texts_through_steps, walk

#: a band claimed for the step shown: "error band ±5.6%" (not "no error band")
CLAIMED = re.compile(r"(?<!no )error band\s*[:=]?\s*±\s*\d")
#: where a band comes from, in the words validation.ErrorBand.short() writes
SOURCE = re.compile(r"mean \|error\| on \d[\d,]* published")


def _band_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if CLAIMED.search(line)]


def _uncalibrated_options(app) -> list[tuple[widgets.Dropdown, object]]:
    """(control, value) for each option of a compute-model control that is not the calibrated model: the lab's
    "compute" dropdown offers ("calibrated", None) and ("fixed 30%", 0.3), ..."""
    found = []
    for w in walk(app):
        if isinstance(w, widgets.Dropdown) and any(str(label).startswith("calibrated") for label in w._options_labels):
            found += [(w, value) for label, value in zip(w._options_labels, w._options_values) if label != "calibrated"]
    return found


def test_the_patterns_tell_a_claim_from_a_refusal():
    assert CLAIMED.search("the model's error band ±5.6%: mean |error| on 29 published H100 runs")
    assert not CLAIMED.search("no error band: fixed 30% of peak (the calibrated model's band: ±5.6%: ...)")
    assert SOURCE.search("±4.5%: mean |error| on 20 published A100 runs in mixed precision")
    assert not SOURCE.search("±5.6% error band")


@pytest.mark.parametrize("app_class", _apps(), ids=lambda a: f"{a.__module__.rsplit('.', 1)[1]}.{a.__name__}")
def test_every_band_an_app_prints_says_where_it_comes_from(app_class):
    app = app_class()
    try:
        unsourced = [line for text in texts_through_steps(app) for line in _band_lines(text) if not SOURCE.search(line)]
        assert not unsourced, f"{app_class.__name__}: a band with no source: {unsourced[:2]}"
    finally:
        app.close()


def test_no_band_is_claimed_for_a_compute_model_it_was_not_measured_for():
    # every lesson app with a compute-model control (at least one has: the training lab), at each uncalibrated option
    checked = []
    for app_class in _apps():
        app = app_class()
        try:
            options = _uncalibrated_options(app)
            if not options:
                continue
            checked.append(app_class.__name__)
            assert _band_lines("\n".join(shown_texts(app))), "the calibrated model's step carries its band"
            for control, value in options:
                control.value = value
                claimed = _band_lines("\n".join(shown_texts(app)))
                assert not claimed, f"{app_class.__name__} at compute={value}: {claimed[0]}"
        finally:
            app.close()
    assert "TrainingLabApp" in checked, checked


def test_a_mixture_of_experts_step_carries_the_mixture_of_experts_runs_band():
    """A band printed beside a mixture-of-experts step is the MoE validation runs' (Megatron Bridge 26.06, session
    24), never the dense runs' (review v19: Mixtral in the training lab carried the H100 band with no word that no MoE
    run was validated). Mixtral on the lab's H100s in mixed precision: no MoE run of that kind, so every MoE run's band,
    saying none of its kind is validated."""
    from distlab import validation
    from distlab.widgets.training_lab import TrainingLabApp

    moe = validation.error_band("h100-sxm", "mixed", moe=True)
    assert not moe.dense_for_moe and "mixture-of-experts" in moe.scope
    app = TrainingLabApp(model="mixtral-8x7b")
    try:
        claimed = _band_lines("\n".join(shown_texts(app)))
        assert claimed and all(moe.short() in " ".join(line.split()) for line in claimed), (claimed, moe.short())
    finally:
        app.close()


def test_without_mixture_of_experts_runs_the_lab_says_its_band_is_borrowed(monkeypatch):
    """Were no MoE run validated, the lab's Mixtral step would carry the dense runs' band and say so."""
    from distlab import validation
    from distlab.widgets.training_lab import TrainingLabApp

    dense_only = tuple(r for r in validation._scored_validation_runs() if not r[2])
    monkeypatch.setattr(validation, "_scored_validation_runs", lambda: dense_only)
    app = TrainingLabApp(model="mixtral-8x7b")
    try:
        claimed = _band_lines("\n".join(shown_texts(app)))
        assert claimed and all("no mixture-of-experts run validated" in line for line in claimed), claimed
    finally:
        app.close()
