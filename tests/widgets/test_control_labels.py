"""Every lesson app's control labels are whole and its dropdowns show their widest option: ipywidgets gives a label
80 px and cuts a longer text ("tokens/G..."), and a dropdown narrower than its label and widest option cuts the
option or squeezes the label over it. The bucket app's controls stand in one column of labels (review v14: its
dropdown row was cramped, "tokens/GPU" out of line with the labels around it). Widths are measured as
widgets.controls measures them (DejaVu Sans at JupyterLab's 13 px widget font)."""

from __future__ import annotations


import ipywidgets as widgets
import pytest

from distlab.widgets.controls import LABEL_PX, dropdown_width_px, text_width_px
from lesson_apps import lesson_apps as _apps
from lesson_apps import walk as _walk

#: room a label needs around its text (px): ipywidgets' label padding
LABEL_PADDING_PX = 8


def label_px(control) -> float | None:
    """The label's width (px); None for 'initial' (as wide as its text, never cut)."""
    given = str(getattr(control.style, "description_width", "") or "")
    if not given:
        return LABEL_PX
    return float(given[:-2]) if given.endswith("px") else None


def label_problems(app) -> list[str]:
    found = []
    for w in _walk(app):
        description = getattr(w, "description", "")
        if (
            not isinstance(description, str)
            or not description
            or not hasattr(getattr(w, "style", None), "description_width")
        ):
            continue
        room = label_px(w)
        if room is not None and text_width_px(description) + LABEL_PADDING_PX > room:
            found.append(f"label {description!r} cut: {text_width_px(description):.0f} px of text in {room:g} px")
        if isinstance(w, widgets.Dropdown) and w.options:
            width = str(w.layout.width or "300px")
            if width.endswith("px") and float(width[:-2]) < dropdown_width_px(w):
                found.append(f"dropdown {description!r} {width} < the {dropdown_width_px(w)} px it needs")
    return found


@pytest.mark.parametrize("app_class", _apps(), ids=lambda a: f"{a.__module__.rsplit('.', 1)[1]}.{a.__name__}")
def test_labels_are_whole_and_dropdowns_show_their_options(app_class):
    app = app_class()
    try:
        assert not label_problems(app), f"{app_class.__name__}: " + "; ".join(label_problems(app))
    finally:
        app.close()


def test_the_bucket_apps_labels_stand_in_one_column():
    from distlab.widgets.production import BucketApp

    app = BucketApp()
    try:
        described = [w for w in _walk(app) if getattr(w, "description", "") and hasattr(w.style, "description_width")]
        assert len(described) == 6
        assert {label_px(w) for w in described} == {label_px(app.model)}, [
            (w.description, label_px(w)) for w in described
        ]
    finally:
        app.close()


def test_the_check_finds_a_cut_label_and_a_narrow_dropdown():
    box = widgets.VBox(
        [
            widgets.Dropdown(options=["megatron-gpt-7.5b"], description="model", layout=widgets.Layout(width="150px")),
            widgets.IntSlider(description="tokens per GPU", style={"description_width": "80px"}),
        ]
    )
    assert len(label_problems(box)) == 2


#: the output of an 800 px JupyterLab window with its file browser open (measured: 368 px)
NARROW_OUTPUT_PX = 368  # (controls.FITS_NARROW_OUTPUT_PX: 364, less the 2 px margins)


def wider_than_a_narrow_output(app) -> list[str]:
    """'description: width' for each control of `app` set wider (label included) than NARROW_OUTPUT_PX that may not
    shrink to its box (no max_width): JupyterLab cuts it at the output's right edge (review v20: at an 800 px window the training lab's
    memory dropdown ran 32 px and lesson 8's bucket slider 92 px past it, the slider's readout unseen)."""
    found = []
    for w in _walk(app):
        layout = getattr(w, "layout", None)
        width = str(getattr(layout, "width", "") or "")
        if isinstance(w, widgets.Box) or not width.endswith("px"):
            continue
        if float(width[:-2]) + 4 > NARROW_OUTPUT_PX and not layout.max_width:  # with its 2 px margins
            found.append(f"{getattr(w, 'description', '') or type(w).__name__}: {width}")
    return found


@pytest.mark.parametrize("app_class", _apps(), ids=lambda a: f"{a.__module__.rsplit('.', 1)[1]}.{a.__name__}")
def test_no_control_is_wider_than_a_narrow_output_can_show(app_class):
    app = app_class()
    try:
        assert wider_than_a_narrow_output(app) == []
    finally:
        app.close()


def test_the_check_finds_a_control_wider_than_the_output():
    wide = widgets.Dropdown(options=["deepspeed"], description="memory", layout=widgets.Layout(width="408px"))
    assert wider_than_a_narrow_output(widgets.VBox([wide])) == ["memory: 408px"]
    wide.layout.max_width = "calc(100% - 4px)"
    assert wider_than_a_narrow_output(widgets.VBox([wide])) == []
