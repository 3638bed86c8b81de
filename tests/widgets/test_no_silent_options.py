"""A control's every option changes what the app shows, or the app says why it does not (review v16: lesson 7's lab
took the fabric ib-xdr on a DGX H100, whose 400 Gb/s NICs cap any faster fabric, and every number stayed as it was,
with nothing said; lesson 10's node limit did nothing at its default model). Every lesson app is built, each of its
selection controls moved through its options one at a time from the default, and each move must change what the
app shows (its HTML panels; a browser picture's texts or drawing data)."""

from __future__ import annotations

import ipywidgets as widgets
import pytest

from lesson_apps import lesson_apps as _apps
from lesson_apps import walk as _walk

KINDS = (widgets.Dropdown, widgets.ToggleButtons, widgets.SelectionSlider)


def shown(app) -> tuple:
    """What the app shows: its HTML panels, and its browser picture's texts, errors and drawing data."""
    texts = []
    for w in _walk(app):
        if isinstance(w, widgets.HTML):
            texts.append(w.value)
        for name in ("summaries", "errors", "frames"):  # a picture's texts and its drawing data
            if isinstance(getattr(w, name, None), (list, dict)) and hasattr(w, "frames"):
                texts.append(repr(getattr(w, name)))
    return tuple(texts)


def silent_options(app) -> list[str]:
    """'control: old -> new' for each move of a selection control (from the default, one option at a time) after
    which the app shows the same text as before it."""
    found = []
    controls = {name: w for name, w in vars(app).items() if isinstance(w, KINDS) and not name.startswith("_")}
    for name, control in controls.items():
        if control.disabled:
            continue
        start = control.value
        values = [o[1] if isinstance(o, tuple) else o for o in control.options]
        for value in values:
            if value == control.value or control.disabled:
                continue
            before, old = shown(app), control.value
            control.value = value
            if shown(app) == before:
                found.append(f"{name}: {old!r} -> {value!r}")
        if not control.disabled and start in values:
            control.value = start
    return found


@pytest.mark.slow  # every app's options walked: outside the fast tier (README)
@pytest.mark.parametrize("app_class", _apps(), ids=lambda a: f"{a.__module__.rsplit('.', 1)[1]}.{a.__name__}")
def test_every_option_changes_what_the_app_shows(app_class):
    app = app_class()
    try:
        assert not silent_options(app), f"{app_class.__name__}: " + "; ".join(silent_options(app))
    finally:
        app.close()


def test_the_check_finds_a_silent_option():
    class Silent(widgets.VBox):
        def __init__(self):
            self.fabric = widgets.Dropdown(options=["ib-ndr", "ib-xdr"])
            self.status = widgets.HTML("the same numbers")
            super().__init__([self.fabric, self.status])

    assert silent_options(Silent()) == ["fabric: 'ib-ndr' -> 'ib-xdr'"]
