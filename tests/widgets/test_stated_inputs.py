"""An activation amount an app prints says which sequence it holds, and one it leaves out says so. Lesson 1's
memory-wall app printed "activations 36.5 GB" with no sequence length (the lesson asks what one 8,192-token
sequence adds: the student had to know the app uses the model's context) and "activations 0 B" with the box
unticked, which reads as "this setup needs none" (review v18). Every lesson app's text, as built and after one
step of each control that offers another value: wherever it prints a non-zero activation amount it also names a
token count, and it never prints a zero one."""

from __future__ import annotations

import re

import ipywidgets as widgets
import pytest

from distlab.widgets.controls import neighbour_values
from lesson_apps import lesson_apps as _apps
from lesson_apps import walk as _walk

#: "activations 36.5 GB", "activations: 1.2 GB" (an amount, not "activations of 2 sequences")
AMOUNT = re.compile(r"\bactivations:? (\d[\d.,]*) ?([kMGTP]?B)\b")
#: "one 8,192-token sequence", "4096 tokens"
TOKENS = re.compile(r"\d[\d,]*[- ]tokens?\b")


def unstated(text: str) -> list[str]:
    """The activation amounts in `text` that say nothing about their sequence, and the zero ones."""
    found = []
    for m in AMOUNT.finditer(text):
        if float(m.group(1).replace(",", "")) == 0:
            found.append(f"{m.group()} (left out: say 'not counted')")
        elif not TOKENS.search(text):
            found.append(f"{m.group()} (which sequence?)")
    return found


def shown_text(app) -> str:
    texts = [w.value for w in _walk(app) if isinstance(w, widgets.HTML)]
    summary = getattr(app, "summary", None)
    if callable(summary):
        texts.append(summary())
    return "\n".join(texts)


def test_the_check_finds_the_defect_and_nothing_else():
    assert unstated("(weights 16.1 GB, activations 36.5 GB)") == ["activations 36.5 GB (which sequence?)"]
    assert unstated("activations 0 B") == ["activations 0 B (left out: say 'not counted')"]
    assert not unstated("activations 36.5 GB\nactivations: one 8,192-token sequence per GPU")
    assert not unstated("activations not counted; activations of 2 microbatches")


@pytest.mark.parametrize("app_class", _apps(), ids=lambda a: f"{a.__module__.rsplit('.', 1)[1]}.{a.__name__}")
def test_an_activation_amount_names_its_sequence(app_class):
    app = app_class()
    try:
        found = unstated(shown_text(app))
        for w in _walk(app):
            if isinstance(w, widgets.ValueWidget) and not getattr(w, "disabled", False) and neighbour_values(w):
                w.value = neighbour_values(w)[0]  # one step, as an arrow key makes it
                found += unstated(shown_text(app))
        assert not found, f"{app_class.__name__}: {sorted(set(found))}"
    finally:
        app.close()
