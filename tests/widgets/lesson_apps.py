"""The lessons' app classes and a walk over a widget tree, shared by the widget checks (test_figures,
test_control_labels, test_disabled_controls_truthful, test_widget_frames)."""

from __future__ import annotations

import importlib

from distlab.lessons import LESSONS


def lesson_apps() -> list:
    """Every app class the lessons list (distlab.lessons.LESSONS[...].apps), each once, in lesson order."""
    seen = []
    for lesson in LESSONS.values():
        for dotted in lesson.apps:
            module, _, name = dotted.rpartition(".")
            app = getattr(importlib.import_module(module), name)
            if app not in seen:
                seen.append(app)
    return seen


def walk(widget):
    """The widget and every widget under it (depth first)."""
    yield widget
    for child in getattr(widget, "children", ()) or ():
        yield from walk(child)
