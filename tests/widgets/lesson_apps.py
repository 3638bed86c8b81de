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


def texts_through_steps(app, kinds=(widgets.ValueWidget,)):
    """The app's shown text (shown_texts, joined) as built, then after each step of each enabled control of `kinds`
    that offers another value: to each of its neighbours in turn, as the arrow keys either way make it
    (controls.neighbour_values), the control left at the last. Both sides, not the first only: lesson 11's FSDP app
    printed "1 layers gathered at most" at prefetch 0, one step down from its start, which an upward step never
    reached (review v19)."""
    from distlab.widgets.controls import neighbour_values

    yield "\n".join(shown_texts(app))
    for w in walk(app):
        if isinstance(w, kinds) and not getattr(w, "disabled", False):
            for value in neighbour_values(w):
                w.value = value
                yield "\n".join(shown_texts(app))
