"""The controls of a lesson app: labels and dropdowns wide enough for their text, a dropdown with a None option,
options replaced without a spurious update, the GPU-count slider, and the values next to a control's own."""

from __future__ import annotations

import functools
import math
from typing import Any

import ipywidgets as widgets
import traitlets

from ..errors import ConfigurationError

__all__ = [
    "show_what_applies",
    "SHORT_LABEL",
    "text_width_px",
    "dropdown_width_px",
    "fit_labels",
    "OptionalDropdown",
    "replace_options",
    "offer_what_runs",
    "offered",
    "GPU_COUNTS",
    "nearest_gpu_count",
    "gpu_slider",
    "neighbour_values",
    "neighbour_steps",
    "ON_STEP",
    "log_step",
    "CUSTOM_SIZE",
    "custom_size_params",
]


#: The longest description ipywidgets' default label width (about 80 px) shows whole.
SHORT_LABEL = 9
#: A toggle button's room around its text (px): ipywidgets' button padding and border. Measured in Chromium with
#: JupyterLab's 13 px UI font: "plain DP" (54 px of text in DejaVu Sans) is cut to "plain ..." at 70 px, whole at 80.
BUTTON_PADDING_PX = 26
#: A dropdown's room around its option's text (px): the select's padding, border and arrow in JupyterLab's theme.
DROPDOWN_PADDING_PX = 48
#: ipywidgets' label width (--jp-widgets-inline-label-width) and a control's default width (--jp-widgets-inline-width)
LABEL_PX, CONTROL_PX = 80, 300
#: The font a button's text is measured in: DejaVu Sans (matplotlib's own, wider than the usual system UI fonts) at
#: JupyterLab's widget font size.
BUTTON_FONT_PX = 13


@functools.lru_cache(maxsize=512)
def text_width_px(text: str, size_px: float = BUTTON_FONT_PX) -> float:
    """The width (px) of `text` in DejaVu Sans at size_px (matplotlib's font metrics at 72 dpi: 1 pt = 1 px)."""
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.font_manager import FontProperties

    width, _, _ = RendererAgg(1, 1, 72).get_text_width_height_descent(
        text, FontProperties(family="DejaVu Sans", size=size_px), ismath=False
    )
    return float(width)


def dropdown_width_px(control: widgets.Dropdown) -> int:
    """The width (px) a dropdown needs to show its label and its widest option whole."""
    style: Any = control.style
    given = str(style.description_width or "")
    if not given:
        label = LABEL_PX
    elif given.endswith("px"):  # a label width the app set
        label = math.ceil(float(given[:-2]))
    else:  # "initial": as wide as the text
        label = math.ceil(text_width_px(control.description)) + 12
    widest = max(text_width_px(str(option)) for option in control._options_labels)
    return label + math.ceil(widest) + DROPDOWN_PADDING_PX


def fit_labels(widget) -> None:
    """Give every control under `widget` whose description is longer than SHORT_LABEL characters a label as wide
    as its text (ipywidgets cuts longer ones: "max bubb…", "interle…"), every toggle button room for its
    widest option's text (ipywidgets cuts it too: "plain …", "pipeline s…"), and every dropdown room for its
    widest option ("ethernet-1…", "megatron-dist…": issue 31); and every row of widgets (an HBox) a wrap, so that in a
    narrow output (a 900 px window) its last controls move to a line of their own instead of running past the edge
    and being cut ("calibra…": review v17); and every control of a fixed width at most the output's (max_width), so
    that one wider than a narrow output alone (an 800 px window: the training lab's memory dropdown, lesson 8's
    bucket slider, review v20) shrinks to it instead of being cut."""
    for child in [widget, *getattr(widget, "children", ())]:
        if child is not widget:
            fit_labels(child)
        if isinstance(child, widgets.HBox) and not child.layout.flex_flow:
            child.layout.flex_flow = "row wrap"
        _at_most_the_output(child)
        description = getattr(child, "description", "")
        style: Any = getattr(child, "style", None)
        if (
            isinstance(description, str)
            and len(description) > SHORT_LABEL
            and hasattr(style, "description_width")
            and not style.description_width
        ):
            style.description_width = "initial"
        if isinstance(child, widgets.ToggleButtons) and child.options:
            labels = [option[0] if isinstance(option, tuple) else str(option) for option in child.options]
            need = math.ceil(max(text_width_px(str(label)) for label in labels)) + BUTTON_PADDING_PX
            given = str(style.button_width or "")
            if not given.endswith("px") or float(given[:-2]) < need:
                style.button_width = f"{need}px"
        if isinstance(child, widgets.Dropdown) and child.options:
            need = dropdown_width_px(child)
            given = str(child.layout.width or f"{CONTROL_PX}px")
            if given.endswith("px") and float(given[:-2]) < need:
                # a copy: apps share one Layout between controls ("narrow"), which keep their own widths
                state = {k: v for k, v in child.layout.get_state().items() if not k.startswith("_") and v is not None}
                child.layout = widgets.Layout(**{**state, "width": f"{need}px"})


#: The ipywidgets controls fit_labels keeps within the output (the pictures scale or lay themselves out again).
SHRINKING_CONTROLS = (
    widgets.Dropdown,
    widgets.ToggleButtons,
    widgets.SelectionSlider,
    widgets.IntSlider,
    widgets.FloatSlider,
    widgets.FloatLogSlider,
    widgets.Text,
    widgets.FloatText,
    widgets.BoundedFloatText,
    widgets.IntText,
    widgets.Checkbox,
    widgets.Button,
)


#: The widest control that fits whole in the output of an 800 px JupyterLab window with its file browser open (368
#: px, less the control's 2 px margins); a wider one may shrink to its output (fit_labels).
FITS_NARROW_OUTPUT_PX = 364


def _at_most_the_output(child) -> None:
    """A control set wider (in px) than FITS_NARROW_OUTPUT_PX is never wider than the box it sits in (the output, in
    a narrow window)."""
    width = str(child.layout.width or "") if isinstance(child, SHRINKING_CONTROLS) else ""
    if width.endswith("px") and float(width[:-2]) > FITS_NARROW_OUTPUT_PX:
        if not child.layout.max_width:
            child.layout.max_width = "calc(100% - 4px)"  # less its 2 px margins (--jp-widgets-margin)


class OptionalDropdown(widgets.Dropdown):
    """A Dropdown one of whose options stands for None ("dropless", "no limit", "calibrated", "= TP").

    ipywidgets reads a None value as "nothing selected": the box shows blank, and picking that option in the browser
    blanks it again. Here None selects its own option, so the student sees its label."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.index = self._index_of(self.value)  # a None value given: no change event has selected its option

    def _index_of(self, value):
        choices = list(self._options_values)
        if value is None:
            return choices.index(None) if None in choices else None
        if self.index is not None and self.equals(choices[self.index], value):
            return self.index
        return choices.index(value)

    @traitlets.observe("value")
    def _propagate_value(self, change):
        # as ipywidgets' _Selection, except that None is an option's value, not "no selection"
        index = self._index_of(change.new)
        if self.index != index:
            self.index = index


def replace_options(app, control, options, value) -> None:
    """Give a selection control of `app` new options and a value, without app.update() running in between
    (the app's observer returns while app._syncing is set: ipywidgets picks a value of its own first)."""
    app._syncing = True
    try:
        control.options = options
        control.value = value
    finally:
        app._syncing = False


def offer_what_runs(app, names, refusal) -> None:
    """Have each selection control of `app` named in `names` offer only the values under which `refusal` (a function
    of {name: value} for every name: why that state cannot run, None where it can) finds nothing, the others at their
    values, its own value always (so no control ever moves: each offers what runs beside the others' values), and
    say on it (its tooltip, and each button's) which values are not offered here and why. A state the model would
    only refuse is never one key press away (lesson 8's step app offered pp = 8 at 4 nodes, which tp x pp = 64 does
    not fit). Each control's first options are its full list. Under app._syncing (replace_options)."""
    values = {name: getattr(app, name).value for name in names}
    for name in names:
        control = getattr(app, name)
        full = control.__dict__.setdefault("_distlab_all_options", tuple(control.options))
        kept, why = [], []
        for option in full:
            value = option[1] if isinstance(option, tuple) else option
            refused = None if value == values[name] else refusal({**values, name: value})
            if refused is None:
                kept.append(option)
            else:
                why.append(f"{control.description or name} = {value} ({refused})")
        if tuple(control.options) != tuple(kept):
            replace_options(app, control, kept, values[name])
        tip = "not offered here: " + "; ".join(why) if why else None
        control.tooltip = tip
        if isinstance(control, widgets.ToggleButtons):
            control.tooltips = [tip] * len(kept) if tip else []


def show_what_applies(app, control, applies: bool, unused, why: str, note: str = "") -> None:
    """Disable a control of `app` that does nothing in the current state and show the value the model then uses,
    `unused`, with a tooltip saying `why` and `note` after its description ("sequence parallel (off: tp = 1)":
    ipywidgets shows no tooltip on a checkbox with a description); when it applies again it shows the student's choice
    and its own description again. A disabled control shows what the numbers beside it used (lesson 4's lab showed
    sequence parallelism ticked, greyed, at tp = 1, where the step model ignores it). Under app._syncing."""
    if not control.disabled:
        control._distlab_chosen = control.value  # the student's choice, while the control applies
    chosen = getattr(control, "_distlab_chosen", control.value)
    own = control.__dict__.setdefault("_distlab_description", control.description)
    description = own if applies or not note else f"{own} ({note})"
    app._syncing, syncing = True, app._syncing
    try:
        control.value = chosen if applies else unused
        control.disabled = not applies
        control.tooltip = None if applies else why
        if control.description != description:
            control.description = description
            _room_for_description(control)
    finally:
        app._syncing = syncing


def _room_for_description(control) -> None:
    """Widen a checkbox (never narrow it) to show its description whole: the box and its margins take 36 px."""
    if not isinstance(control, widgets.Checkbox):
        return
    need = math.ceil(text_width_px(control.description)) + 36
    given = str(control.layout.width or "")
    if given.endswith("px") and float(given[:-2]) < need:
        # a copy: apps share one Layout between controls ("narrow"), which keep their own widths
        state = {k: v for k, v in control.layout.get_state().items() if not k.startswith("_") and v is not None}
        control.layout = widgets.Layout(**{**state, "width": f"{need}px"})


def offered(value, name: str, options) -> None:
    """Raise our error naming `name` and the values a control offers when an app is built with `value` not among
    `options` (a list of values, or of (label, value) pairs), instead of a traitlets error or a silent snap."""
    values = [o[1] if isinstance(o, tuple) else o for o in options]
    if not any(value is v or (type(value) is type(v) and value == v) or _same_number(value, v) for v in values):
        shown = ", ".join(repr(v) for v in values)
        raise ConfigurationError(f"{name}={value!r} is not offered by this app; valid: {shown}")


def _same_number(a, b) -> bool:
    """Equal numbers of either int or float type (8 and 8.0), never a bool (True is not 1 here)."""
    numbers = (int, float)
    return (
        isinstance(a, numbers)
        and isinstance(b, numbers)
        and not isinstance(a, bool)
        and not isinstance(b, bool)
        and a == b
    )


#: The GPU counts a GPU slider offers, 1 to 1,024, about evenly on a log scale: every count up to 16, whole
#: 8-GPU nodes to 64, then four per doubling (every power of two among them), so small counts get as much of the
#: slider as large ones.
GPU_COUNTS = (*range(1, 17), *range(24, 65, 8), *(n * k // 4 for n in (64, 128, 256, 512) for k in (5, 6, 7, 8)))


def nearest_on_log_scale(value: int, offered) -> int:
    """`value` if `offered` (positive counts) holds it, else the nearest count it holds on the log scale."""
    if value in offered:
        return value
    return min(offered, key=lambda n: abs(math.log(n) - math.log(max(1, value))))


def nearest_gpu_count(value: int) -> int:
    """`value` if GPU_COUNTS offers it, else the nearest count it offers on the log scale."""
    return nearest_on_log_scale(value, GPU_COUNTS)


def log_count_slider(counts, value: int, description: str, **options) -> widgets.SelectionSlider:
    """A slider over `counts`, spaced about evenly on a log scale, for a picture whose axis is logarithmic: each
    arrow key or drag step moves the handle about as far along the axis (a linear IntSlider spent nearly all its
    width on the last decade); a value it does not offer starts at the nearest count it does."""
    return widgets.SelectionSlider(
        options=tuple(counts),
        value=nearest_on_log_scale(value, counts),
        description=description,
        continuous_update=True,
        **options,
    )


def gpu_slider(value: int, description: str = "GPUs") -> widgets.SelectionSlider:
    """A slider over GPU_COUNTS (before: a linear 1-1,024 slider, where 1-16 took 1.5% of its width); a value it
    does not offer starts at the nearest count it does, on the log scale."""
    return widgets.SelectionSlider(
        options=GPU_COUNTS,
        value=nearest_gpu_count(value),
        description=description,
        continuous_update=True,
    )


#: A log slider's value within this fraction of a step of a step position is at that position (browser_js/prefetch.js
#: uses the same): values the browser's slider sets are within a few units in the last place of one.
ON_STEP = 1e-6


def log_step(value: float, low: float, step: float, base: float) -> float:
    """The step position of a FloatLogSlider's value: (log_base(value) - min) / step, an integer at every value the
    browser's slider sets (ipywidgets' FloatLogSliderView sets base ** exponent, the exponent stepped by noUiSlider),
    computed as browser_js/prefetch.js's logSliderLabel computes it (Math.log(value) / Math.log(base))."""
    return (math.log(value) / math.log(base) - low) / step


def _log_positions(widget) -> tuple[int, int]:
    """(k, last): the step position a FloatLogSlider's handle is at (noUiSlider puts a value between steps, such as a
    default, at the nearest one) and its last position."""
    last = round((widget.max - widget.min) / widget.step)
    return min(max(round(log_step(widget.value, widget.min, widget.step, widget.base)), 0), last), last


def neighbour_steps(widget, reach: int = 1) -> list:
    """The values a student passes stepping a control 1 to `reach` times from its current value, as paths
    (tuples of the values passed, the last one reached), nearest first and, at each distance, up before down:
    [(v+1,), (v-1,), (v+1, v+2), (v-1, v-2)] for reach 2 (a held arrow key, quick clicks on a dropdown's next
    option). The options either side (a dropdown, toggle buttons, a selection slider), a slider's value steps either
    side inside its range (a log slider's: steps of its exponent, base ** (min + j step)); a checkbox has only its
    other state (two steps bring it back); none for a disabled control or a text box."""
    if getattr(widget, "disabled", False):
        return []
    if isinstance(widget, widgets.FloatLogSlider):
        k, last = _log_positions(widget)
        at = [widget.base ** (widget.min + j * widget.step) for j in range(last + 1)]
        return _paths(lambda d: at[k + d] if 0 <= k + d <= last else OUTSIDE, reach)
    value = widget.value
    if hasattr(widget, "options"):
        values = [o[1] if isinstance(o, tuple) else o for o in widget.options]
        if value not in values:
            return []
        k = values.index(value)
        return _paths(lambda d: values[k + d] if 0 <= k + d < len(values) else OUTSIDE, reach)
    if isinstance(value, bool):
        return [(not value,)]
    if isinstance(widget, (widgets.IntSlider, widgets.FloatSlider)):
        step = widget.step or 1
        return _paths(lambda d: value + d * step if widget.min <= value + d * step <= widget.max else OUTSIDE, reach)
    return []


#: what _paths' `at` gives for a step outside the control's range (None is a value: "calibrated", "dropless")
OUTSIDE = object()


def _paths(at, reach: int) -> list:
    """[(at(1), ..., at(d)) and (at(-1), ..., at(-d)) for d = 1 .. reach], nearest first, up before down, each
    while `at` (the value d steps away, OUTSIDE outside the range) gives one."""
    paths = []
    for d in range(1, reach + 1):
        for sign in (1, -1):
            path = tuple(at(sign * j) for j in range(1, d + 1))
            if not any(v is OUTSIDE for v in path):
                paths.append(path)
    return paths


def neighbour_values(widget) -> list:
    """The values next to a control's current one, where a student moves it next (neighbour_steps one step away):
    the options either side (a dropdown, toggle buttons, a selection slider), a checkbox's other state, a slider's
    value one step either side inside its range (a log slider's: one step of its exponent); none for a disabled
    control or a text box."""
    return [path[-1] for path in neighbour_steps(widget)]


#: The description of the custom model size box of lessons 1 and 3 (billions of parameters).
CUSTOM_SIZE = "size (B)"


def custom_size_params(billions: float) -> float:
    """The parameter count of the custom model size box (lessons 1 and 3: billions of parameters), or our error naming
    the box and the number typed in it (issue 31: "params must be positive, got -5e+09" beside a box holding -5)."""
    if not (isinstance(billions, (int, float)) and math.isfinite(billions) and billions > 0):
        raise ConfigurationError(f"{CUSTOM_SIZE} must be a positive number of billions of parameters, got {billions:g}")
    return billions * 1e9
