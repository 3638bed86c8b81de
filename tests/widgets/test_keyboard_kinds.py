"""Every control of every lesson app works from the keyboard (issue 32): each is of a kind that a browser test in
tests/test_browser.py drives with the keyboard in JupyterLab. A new kind of control (or an app using one) fails here
until a browser test presses it."""

from __future__ import annotations

import importlib
from pathlib import Path

import ipywidgets as widgets

from distlab.lessons import LESSONS
from distlab.widgets.browser import BrowserPicture

BROWSER_TESTS = Path(__file__).resolve().parents[1] / "test_browser.py"

#: the kind of control, as the browser draws it (its view: a subclass such as OptionalDropdown is a Dropdown there) ->
#: the browser test that drives it from the keyboard
DRIVEN = {
    "DropdownView": "test_keyboard_steps_a_lesson_apps_dropdown_and_toggle_in_jupyterlab",  # ArrowDown / ArrowUp
    "ToggleButtonsView": "test_keyboard_steps_a_lesson_apps_dropdown_and_toggle_in_jupyterlab",  # Space
    "IntSliderView": "test_keyboard_moves_an_ipywidgets_slider_of_a_lesson_app_in_jupyterlab",  # arrows
    "SelectionSliderView": "test_keyboard_drives_every_other_kind_of_control_in_jupyterlab",  # ArrowRight
    "CheckboxView": "test_keyboard_drives_every_other_kind_of_control_in_jupyterlab",  # Space
    "FloatSliderView": "test_keyboard_drives_every_other_kind_of_control_in_jupyterlab",  # ArrowRight
    "FloatLogSliderView": "test_keyboard_drives_every_other_kind_of_control_in_jupyterlab",  # ArrowRight
    # typed, Enter (BoundedFloatText is pressed: FloatText's view); Text is the same <input> box in ipywidgets
    "FloatTextView": "test_keyboard_drives_every_other_kind_of_control_in_jupyterlab",
    "TextView": "test_keyboard_drives_every_other_kind_of_control_in_jupyterlab",
}
#: a picture's own slider and play button (browser_js/common.js: a native range input and button)
PICTURES = "test_browser_pictures_answer_a_key_press_with_distlabs_numbers"


def _controls(widget):
    """The value-carrying widgets under `widget` (its controls and pictures), depth first."""
    if isinstance(widget, (widgets.ValueWidget, BrowserPicture)) and not isinstance(
        widget, (widgets.HTML, widgets.Label, widgets.HTMLMath)
    ):
        yield widget
    for child in getattr(widget, "children", ()):
        yield from _controls(child)


def _apps():
    for lesson in LESSONS.values():
        for dotted in lesson.apps:
            module, _, name = dotted.rpartition(".")
            yield dotted, getattr(importlib.import_module(module), name)


def test_every_control_of_every_lesson_app_is_a_kind_a_browser_test_drives_from_the_keyboard():
    source = BROWSER_TESTS.read_text(encoding="utf-8")
    for test in {*DRIVEN.values(), PICTURES}:
        assert f"def {test}(" in source, f"{test} is not in tests/test_browser.py"
    seen, undriven = set(), []
    for dotted, app_class in _apps():
        app = app_class()
        try:
            for control in _controls(app):
                if isinstance(control, BrowserPicture):
                    continue
                kind = control._view_name
                seen.add(kind)
                if kind not in DRIVEN:
                    undriven.append(f"{dotted}: {type(control).__name__} ({kind}) {control.description!r}")
        finally:
            app.close()
    assert not undriven, "controls no browser test drives from the keyboard:\n" + "\n".join(undriven)
    # the survey found the lessons' controls (a _controls that found nothing would pass above)
    assert {"DropdownView", "ToggleButtonsView", "IntSliderView", "CheckboxView", "FloatTextView"} <= seen
