"""The lessons' app classes and a walk over a widget tree, shared by the widget checks (test_figures,
test_control_labels, test_disabled_controls_truthful, test_widget_frames, the text checks)."""

from __future__ import annotations

import importlib
import re

import ipywidgets as widgets

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


def shown_texts(app) -> list[str]:
    """What the app shows as text: its HTML panels (tags removed) and its browser picture's texts and frame labels."""
    texts = []
    for w in walk(app):
        if isinstance(w, widgets.HTML):
            texts.append(re.sub(r"<[^>]+>", "", w.value))
        if hasattr(w, "frames"):
            texts += [str(t) for t in getattr(w, "summaries", [])]
            texts += [str(v) for k, v in (w.frames or {}).items() if "label" in k and isinstance(v, str)]
    return texts
