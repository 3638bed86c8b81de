"""Widget fuzzing: every lesson app, random sequences of control changes (hypothesis).

Apps come from the lesson manifest (distlab.lessons.LESSONS) and their controls are found by
walking the widget tree, so lessons that land later are covered without editing this file.
After every change: no exception escaped, and either `app.error` is None and nothing shown
(status, other HTML, figure texts) says NaN or infinity, or `app.error` is set and the app shows that
message once under its picture (LessonApp.shown_texts).
"""

from __future__ import annotations

import contextlib
import html
import importlib
import math
import pkgutil
import re

import ipywidgets as widgets
import numpy as np
import pytest
import traitlets
from hypothesis import HealthCheck, given, settings, strategies as st

import distlab.widgets
from distlab.lessons import LESSONS
from distlab.widgets.canvas import axes_state
from distlab.widgets.framecache import _restore, _snapshot

EXAMPLES = 50
MAX_STEPS = 6
NOT_FINITE = re.compile(r"(?<![\w.])[-+]?(nan|inf|infinity)(?![\w])", re.I)

# typed into free-text fields: plausible inputs, edge cases and junk
TEXT_SAMPLES = [
    "4 GB",
    "1 GiB",
    "512 MB",
    "0",
    "0 GB",
    "-1 GB",
    "1e30 B",
    "1e400 B",
    "nan GB",
    "inf GB",
    "",
    "  ",
    "GB",
    "4 GB/s",
    "abc",
    "1,000 MB",
    "4e9",
    "0.000001 B",
]


def _discover():
    params = []
    for lesson in LESSONS.values():
        for dotted in lesson.apps:
            name, _, app_name = dotted.rpartition(".")
            try:
                app = getattr(importlib.import_module(name), app_name)
            except Exception as exc:  # noqa: BLE001 - reported by the test that uses it
                params.append(pytest.param(name, exc, id=dotted.removeprefix("distlab.widgets.")))
                continue
            params.append(pytest.param(name, app, id=f"{name.rsplit('.', 1)[1]}.{app.__name__}"))
    return params


APPS = _discover()
#: Each app once: a class two lessons show (lesson 7's training lab, again in the capstone) is built with no arguments
#: in both, so a deterministic check of it would repeat the same steps. The random fuzzing keeps APPS: each lesson's
#: listing adds its own EXAMPLES random sequences.
DISTINCT_APPS = list({p.id: p for p in APPS}.values())


def test_every_lesson_module_with_apps_is_fuzzed():
    assert any(p.values[0] == "distlab.widgets.memory_wall" for p in APPS)


def test_every_app_class_and_every_app_a_lesson_shows_is_fuzzed():
    # an *App class left out of its module's APPS, or built by a lesson, would escape the fuzzing
    from pathlib import Path

    from distlab.widgets.common import LessonApp

    fuzzed = {p.values[1].__name__ for p in APPS if isinstance(p.values[1], type)}
    defined = set()
    for info in pkgutil.iter_modules(distlab.widgets.__path__):
        source = Path(distlab.widgets.__path__[0]) / f"{info.name}.py"
        if "renamed_module(__name__" in source.read_text(encoding="utf-8"):
            continue  # an old module name kept as an alias: its apps are the new module's
        module = importlib.import_module(f"distlab.widgets.{info.name}")
        defined |= {
            name
            for name, obj in vars(module).items()
            if name.endswith("App")
            and isinstance(obj, type)
            and issubclass(obj, widgets.Widget)
            and obj.__module__ == module.__name__
            and obj is not LessonApp
        }  # the base is no lesson app
    shown = set()
    for notebook in (Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"):
        shown |= set(re.findall(r"\b([A-Z]\w*App)\(", notebook.read_text(encoding="utf-8")))
    assert defined and shown and shown <= defined, shown - defined  # shown: the notebooks were found
    assert defined <= fuzzed, defined - fuzzed


# output-only widgets: shown, never set by a student
_OUTPUT = (widgets.HTML, widgets.HTMLMath, widgets.Label, widgets.Output)


def walk(widget, out=None):
    out = [] if out is None else out
    out.append(widget)
    for child in getattr(widget, "children", ()) or ():
        if isinstance(child, widgets.Widget):
            walk(child, out)
    return out


def controls(app) -> list:
    """The widgets a student can change, found generically."""
    found = []
    for w in walk(app):
        if w is app or isinstance(w, _OUTPUT) or not isinstance(w, widgets.ValueWidget):
            continue
        if isinstance(
            w,
            (
                widgets.widget_selection._Selection,
                widgets.widget_selection._MultipleSelection,
                widgets.widget_selection._SelectionNonempty,
            ),
        ) or hasattr(w, "options"):
            found.append(w)
        elif isinstance(w, (widgets.Checkbox, widgets.ToggleButton, widgets.Valid)):
            found.append(w)
        elif isinstance(w.value, (int, float, str, tuple)) and not isinstance(w.value, bool):
            found.append(w)
    return found


def draw_value(data, w):
    """A value for control w (bounds and options read now: they may depend on other controls)."""
    if hasattr(w, "options"):
        n = len(w.options)
        if n == 0:
            return None
        if isinstance(w, (widgets.SelectMultiple,)):
            return ("index", tuple(sorted(data.draw(st.sets(st.integers(0, n - 1), max_size=n)))))
        if isinstance(w, widgets.SelectionRangeSlider):
            a, b = sorted(data.draw(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1))))
            return ("index", (a, b))
        return ("index", data.draw(st.integers(0, n - 1)))
    if isinstance(w.value, bool):
        return ("value", data.draw(st.booleans()))
    if isinstance(w, widgets.FloatLogSlider):
        return ("value", w.base ** data.draw(st.floats(w.min, w.max)))
    bounded = hasattr(w, "min") and hasattr(w, "max")
    if isinstance(w.value, tuple) and bounded:  # range sliders
        kind = st.integers if isinstance(w.value[0], int) else st.floats
        a, b = sorted(data.draw(st.tuples(kind(w.min, w.max), kind(w.min, w.max))))
        return ("value", (a, b))
    if isinstance(w.value, int):
        if bounded:
            return ("value", data.draw(st.integers(w.min, w.max)))
        return (
            "value",
            data.draw(st.one_of(st.sampled_from([0, 1, -1, 10**9, -(10**9)]), st.integers(-(10**6), 10**6))),
        )
    if isinstance(w.value, float):
        # edges a student can type into a number box: bounds, zero, tiny (even subnormal) and huge values
        edges = [0.0, -0.0, 1.0, -1.0, 5e-324, 1e-309, 1e-300, 1e-12, 1e15, 1e300, -1e300, -7.5]
        if bounded:
            edges = [w.min, w.max, *(e for e in edges if w.min <= e <= w.max)]
            return ("value", data.draw(st.one_of(st.sampled_from(edges), st.floats(w.min, w.max, allow_nan=False))))
        return (
            "value",
            data.draw(
                st.one_of(
                    st.sampled_from(edges),
                    st.floats(-1e6, 1e6, allow_nan=False),
                    st.floats(allow_nan=False, allow_infinity=False),
                )
            ),
        )
    if isinstance(w.value, str):
        return ("value", data.draw(st.one_of(st.sampled_from(TEXT_SAMPLES), st.text(max_size=12))))
    return None


def visible_text(app) -> tuple[str, str]:
    """(status text, all other text shown: HTML widgets, labels, figure texts), tags stripped."""

    def plain(markup: str) -> str:
        markup = re.sub(r"<br\s*/?>", "\n", markup)
        return html.unescape(re.sub(r"<[^>]+>", "", markup))

    status = plain(app.status.value) if isinstance(getattr(app, "status", None), widgets.HTML) else ""
    others = [plain(w.value) for w in walk(app) if isinstance(w, _OUTPUT[:3]) and w is not getattr(app, "status", None)]
    for value in vars(app).values():
        if type(value).__name__ == "Figure" and hasattr(value, "findobj"):
            from matplotlib.text import Text

            others.extend(t.get_text() for t in value.findobj(Text))
    return status, "\n".join(others)


def markers_off_their_axes(app) -> list[str]:
    """The marker-only lines (a chosen point, an optimum) of the app's figure with a point outside its axes' limits:
    not drawn, while the legend beside the picture names it (lesson 11b: Daly's interval, 137 ms, left of a goodput
    axis that starts at 0.6 s)."""
    off = []
    for ax in getattr(getattr(app, "fig", None), "axes", []):
        (x0, x1), (y0, y1) = sorted(ax.get_xlim()), sorted(ax.get_ylim())
        for line in ax.get_lines():
            if line.get_marker() in (None, "None", "", " ") or line.get_linestyle() not in ("None", "", " "):
                continue
            if not line.get_visible() or line.get_alpha() == 0:
                continue
            xs, ys = (np.asarray(v, dtype=float) for v in line.get_data())
            outside = (xs < x0) | (xs > x1) | (ys < y0) | (ys > y1)
            if outside.any():
                off.append(f"{line.get_label()!r} at x={xs[outside].tolist()} outside [{x0:g}, {x1:g}]")
    return off


def check_invariants(app):
    status, others = visible_text(app)
    if app.error is None:
        assert not NOT_FINITE.search(status), f"status shows a non-finite number: {status!r}"
        assert not NOT_FINITE.search(others), f"a non-finite number is shown: {others!r}"
        assert "Traceback" not in status
        assert not markers_off_their_axes(app), markers_off_their_axes(app)
    else:
        assert isinstance(app.error, str) and app.error.strip()
        squash = lambda s: " ".join(s.split())  # noqa: E731
        shown = squash("\n".join(app.shown_texts()))  # the picture's own text and the status panel
        assert shown.count(squash(app.error)) == 1, f"error {app.error!r} is not shown once: {shown!r}"
        assert "Traceback" not in shown


def _scalars(obj) -> list:
    """obj's own attributes that are plain numbers, text or flags, sorted; the change counters of a fill (bumped by
    every change, read only to abandon an old fill) left out, and a flag that is off counts as unset."""
    return sorted(
        (k, v)
        for k, v in vars(obj).items()
        if isinstance(v, (int, float, str, bool)) and v and "generation" not in k and "preparation" not in k
    )


def app_state(app) -> tuple:
    """Everything of `app` that a student sees or that its next change can depend on, as far as the fuzz can read
    it: each widget's value, options, bounds, enabled and shown state; every text shown (visible_text) and the error;
    each axes' limits and ticks and the picture's pixels; the numbers the app and the distlab objects it holds (plot
    helpers with their remembered ranges, the renderer) keep."""
    rows = []
    for w in walk(app):
        options = tuple(map(str, getattr(w, "_options_labels", ()))) if hasattr(w, "options") else None
        bounds = tuple(getattr(w, name, None) for name in ("disabled", "min", "max", "step"))
        shown = getattr(getattr(w, "layout", None), "display", None)
        value = repr(getattr(w, "value", None))
        rows.append((type(w).__name__, getattr(w, "description", None), value, options, bounds, shown))
    fig = getattr(app, "fig", None)
    picture = None
    if fig is not None:
        picture = (axes_state(fig), bytes(np.asarray(fig.canvas.get_renderer().buffer_rgba())))
    held = [
        (name, _scalars(obj))
        for name, obj in sorted(vars(app).items())
        if type(obj).__module__.startswith("distlab.")
        and not isinstance(obj, widgets.Widget)
        and hasattr(obj, "__dict__")
    ]
    return tuple(rows), visible_text(app), app.error, picture, held, _scalars(app)


class AsBuilt:
    """An app in the state its construction leaves, for each fuzz example, built once where that can be shown.

    Building an app (a full matplotlib draw) is 80-90% of an example's cost (lesson 10's PlacementApp: 200 of 225 ms),
    a control change 5-15 ms. start() sets every control back to its value as built and, for a frame-caching app,
    puts back what its renders rebound (the frame cache's own put-back: framecache._snapshot / _restore, its
    remembered ranges and texts among them); the app is reused only when app_state() then equals its state as built,
    pixels included; otherwise (a state that depends on the way there beyond what is put back, or an app a failing
    example left broken) a new one is built. So every example starts where a new app starts, as before."""

    def __init__(self, app_class):
        self.app_class = app_class
        self.apps: list = []
        self.app = None

    def _build(self):
        self.app = self.app_class()
        self.apps.append(self.app)
        self.found = controls(self.app)
        self.start_values = [w.value for w in self.found]
        drawing = getattr(self.app, "_drawing_objects", None)
        self.drawn = (_snapshot(drawing()), self.app.renderer.snapshot()) if drawing is not None else None
        self.state = app_state(self.app)

    def start(self):
        """(the app as built, its controls)."""
        if self.app is None:
            self._build()
            return self.app, self.found
        try:
            for _ in range(3):  # a dependent control's options follow another's: set back in up to 3 passes
                for w, value in zip(self.found, self.start_values):
                    if w.value != value:
                        with contextlib.suppress(traitlets.TraitError):
                            w.value = value
            if self.drawn is not None:
                history, pixels = self.drawn
                _restore(history)
                self.app.renderer.restore(pixels)
            if app_state(self.app) == self.state:
                return self.app, self.found
        except Exception:  # noqa: BLE001 - a broken app is replaced, not tested further
            pass
        self._build()
        return self.app, self.found

    def close(self):
        import matplotlib.pyplot as plt

        for app in self.apps:
            fig = getattr(app, "fig", None)
            if fig is not None:
                plt.close(fig)


@pytest.mark.parametrize("module, app_class", APPS)
def test_random_control_values_give_a_result_or_our_message(module, app_class):
    if isinstance(app_class, Exception):
        raise AssertionError(f"{module} does not import") from app_class
    built = AsBuilt(app_class)

    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(data=st.data())
    def fuzz(data):
        app, found = built.start()
        check_invariants(app)
        assert found, f"{app_class.__name__} has no controls"
        for _ in range(data.draw(st.integers(1, MAX_STEPS), label="steps")):
            w = data.draw(st.sampled_from(found), label="control")
            if w.disabled if hasattr(w, "disabled") else False:
                continue  # a student cannot change it now
            choice = draw_value(data, w)
            if choice is None:
                continue
            attr, value = choice
            setattr(w, attr, value)
            check_invariants(app)

    try:
        fuzz()
    finally:
        built.close()


def test_the_pattern_finds_non_finite_numbers():
    for shown in ("total nan GB", "inf s", "-inf", "x = NaN", "Infinity %"):
        assert NOT_FINITE.search(shown)
    for fine in ("Infiniband", "nanoseconds", "information", "5.0 GB", "inference", "ib-ndr"):
        assert not NOT_FINITE.search(fine)
    assert math.isfinite(1.0)


def offered_values(w) -> list:
    """Every value control w offers a student now: each option, each step of a slider (at most 65 of them)."""
    if hasattr(w, "options"):
        if isinstance(w, (widgets.SelectMultiple, widgets.SelectionRangeSlider)):
            return []
        return [("index", i) for i in range(len(w.options))]
    if isinstance(w, widgets.IntSlider):
        count = (w.max - w.min) // w.step + 1
        values = (
            range(w.min, w.max + 1, w.step)
            if count <= 65
            else sorted({w.min, w.max, *range(w.min, w.max + 1, max(1, (w.max - w.min) // 64))})
        )
        return [("value", v) for v in values]
    if isinstance(w, widgets.FloatSlider):
        return [("value", w.min + (w.max - w.min) * k / 16) for k in range(17)]
    return []


@pytest.mark.parametrize("module, app_class", DISTINCT_APPS)
def test_every_offered_control_value_gives_a_result(module, app_class):
    """No option that can only fail: each value a control offers gives a result from the app's defaults, or after
    one change of one other control (a recipe that needs another ZeRO stage, a node limit that needs a larger
    group); a control disabled there is skipped. Typed-in numbers may still be refused."""
    if isinstance(app_class, Exception):
        raise AssertionError(f"{module} does not import") from app_class
    app = app_class()
    failures = []

    def attr_of(w):
        return "index" if hasattr(w, "options") else "value"

    def works_after_one_other_change(w, attr, value, found) -> bool:
        for other in found:
            if other is w or getattr(other, "disabled", False):
                continue
            start = getattr(other, attr_of(other))
            for other_attr, other_value in offered_values(other):
                setattr(other, other_attr, other_value)
                if not getattr(w, "disabled", False) and getattr(w, attr) != value:
                    setattr(w, attr, value)
                if app.error is None:
                    setattr(other, attr_of(other), start)
                    return True
            setattr(other, attr_of(other), start)
        return False

    try:
        found = controls(app)
        for w in found:
            if getattr(w, "disabled", False):
                continue
            start = getattr(w, attr_of(w))
            for attr, value in offered_values(w):
                if getattr(w, "disabled", False):
                    break
                setattr(w, attr, value)
                if app.error is not None and not works_after_one_other_change(w, attr, value, found):
                    failures.append(f"{w.description or type(w).__name__} = {w.value!r}: {app.error}")
                setattr(w, attr, value)
            setattr(w, attr_of(w), start)
    finally:
        fig = getattr(app, "fig", None)
        if fig is not None:
            import matplotlib.pyplot as plt

            plt.close(fig)
    assert not failures, "\n".join(failures[:20])


@pytest.mark.parametrize("module, app_class", DISTINCT_APPS)
def test_every_selection_shows_the_option_chosen(module, app_class):
    """A dropdown, toggle or selection slider shows its chosen option at construction and after each option is
    picked. ipywidgets reads an option whose value is None ("dropless", "no limit", "calibrated") as no selection
    and shows a blank box (the training lab's compute, expert TP and capacity, the MoE apps' capacity and node
    limit did): such a control must be a widgets.common.OptionalDropdown."""
    if isinstance(app_class, Exception):
        raise AssertionError(f"{module} does not import") from app_class
    app = app_class()
    blank = []
    try:
        for w in controls(app):
            if not isinstance(w, widgets.widget_selection._Selection):
                continue
            name = w.description or type(w).__name__
            if w.index is None:
                blank.append(f"{name}: blank at construction (value {w.value!r})")
                continue
            if w.disabled:  # the student cannot pick it: it shows the value the model uses (show_what_applies)
                continue
            start = w.index
            for i, option in enumerate(w.options):
                w.index = i  # what the browser sends when the student picks it (the box shows options[index])
                label = option[0] if isinstance(option, tuple) else str(option)
                if w.index != i:
                    blank.append(f"{name}: picking {label!r} shows index {w.index!r}")
            w.index = start
    finally:
        fig = getattr(app, "fig", None)
        if fig is not None:
            import matplotlib.pyplot as plt

            plt.close(fig)
    assert not blank, "\n".join(blank)


def test_a_custom_size_box_is_shown_only_for_the_custom_model():
    # before: a greyed "size (B) 7.5" stood beside llama2-70b, as if it were that model's size
    from distlab.widgets.data_parallel_zero import ZeroMemoryApp
    from distlab.widgets.memory_wall import CUSTOM, MemoryWallApp

    for app in (MemoryWallApp(model="llama2-70b"), ZeroMemoryApp(model="llama2-70b")):
        assert app.custom_params.layout.display == "none" and app.custom_params.disabled
        app.model.value = CUSTOM
        assert app.custom_params.layout.display is None and not app.custom_params.disabled
        app.model.value = "llama2-7b"
        assert app.custom_params.layout.display == "none"


def test_chunks_are_enabled_only_for_the_interleaved_schedule_from_the_first_render():
    # before: "chunks v" was enabled on the first render and disabled after any change
    from distlab.widgets.training_lab import TrainingLabApp

    app = TrainingLabApp(schedule="1f1b")
    assert app.chunks.disabled
    app.schedule.value = "interleaved"
    assert not app.chunks.disabled
    assert TrainingLabApp(schedule="interleaved", chunks=2, pp=2).chunks.disabled is False


def test_a_warning_colours_only_its_own_lines():
    from distlab.widgets.common import WARNING_COLOUR, message_html

    shown = message_html("bubble: 12% of the step idle\nwarning (bubble): over the limit", "warn")
    assert shown.count(WARNING_COLOUR) == 1 and "color:#1f2328" in shown.replace(" ", "")


@pytest.mark.parametrize("module, app_class", DISTINCT_APPS)
def test_no_label_is_cut_off(module, app_class):
    """A description longer than ipywidgets' default label width gets a label as wide as its text."""
    from distlab.widgets.common import SHORT_LABEL

    app = app_class()
    try:
        for w in walk(app):
            description = getattr(w, "description", "")
            if (
                isinstance(description, str)
                and len(description) > SHORT_LABEL
                and hasattr(w, "style")
                and hasattr(w.style, "description_width")
            ):
                assert w.style.description_width, f"{description!r} would be cut off"
            if isinstance(w, widgets.ToggleButtons):
                # a button's text in DejaVu Sans at 13 px plus 26 px of padding: in Chromium, "plain DP" (54 px of
                # text) was cut to "plain ..." at 70 px and shown whole at 80 (tests/test_browser.py checks every
                # button of the exported lessons in the browser itself)
                from distlab.widgets.common import text_width_px

                room = float(str(w.style.button_width).removesuffix("px"))
                for option in w.options:
                    label = str(option[0] if isinstance(option, tuple) else option)
                    assert text_width_px(label) + 26 <= room, f"{w.description}: {label!r} would be cut off"
            if isinstance(w, widgets.Dropdown) and w.options:
                # a dropdown's label (80 px, or its text when wider), its widest option in DejaVu Sans at 13 px and
                # 48 px of padding and arrow: at 210 px lesson 7's fabric showed 'ethernet-1...' and its memory
                # dropdown 'megatron-dist...' (issue 31); ipywidgets' default width is 300 px
                from distlab.widgets.common import text_width_px

                room = float(str(w.layout.width or "300px").removesuffix("px"))
                label = 80 if not w.style.description_width else text_width_px(w.description) + 12
                for option in w._options_labels:
                    assert label + text_width_px(str(option)) + 48 <= room + 1, (
                        f"{w.description}: {option!r} would be cut off in {room:g} px"
                    )
    finally:
        fig = getattr(app, "fig", None)
        if fig is not None:
            import matplotlib.pyplot as plt

            plt.close(fig)
