"""Lesson apps whose result is a pure function of their control values (issue 32: the kernel renders the states one
control change away from `compute_for(values)` alone, while the controls still show the current state).

For each app, states reached by really moving its controls (a seeded random walk over every option of each control,
so dependent controls are re-offered by the app's own observers) are compared with a second app standing in another
state that computes, renders and describes the first app's values: the same result, the same visible artists, the
same text and status panel. A compute_for that read a widget, or ignored a control, fails here: every control is
checked to change the result somewhere in the sample.
"""

from __future__ import annotations

import dataclasses
import random

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import pytest

from distlab.errors import DistlabError
from distlab.widgets.common import message_html
from distlab.widgets.mixture_of_experts import ImbalanceApp, PlacementApp
from distlab.widgets.tensor_parallel import TensorParallelApp
from distlab.widgets.training_at_scale import CheckpointApp, ContextApp, FsdpApp, ScheduleApp

APPS = [TensorParallelApp, ImbalanceApp, PlacementApp, ScheduleApp, FsdpApp, ContextApp, CheckpointApp]
#: The control widgets a student moves (a text box or a button is not one of these apps' controls).
CONTROL_TYPES = (
    widgets.Dropdown,
    widgets.ToggleButtons,
    widgets.SelectionSlider,
    widgets.IntSlider,
    widgets.FloatSlider,
    widgets.FloatLogSlider,
    widgets.Checkbox,
)
#: States sampled per app (each three random moves from the last; at least a third of them valid).
STATES = 24
#: More for an app where a control shows only in a corner of the others (the checkpoint mode moves the curve's start
#: only when the storage is slow enough for the background write to outlast the shortest interval drawn).
MORE_STATES = {CheckpointApp: 48}


def _same(a, b) -> bool:
    """Equal field by field, NumPy arrays element by element (NaN equal to NaN)."""
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return type(a) is type(b) and all(_same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float) and a != a:
        return b != b
    if a == b:
        return True
    # a plain object without value equality (mesh.RankLayout): the same type and the same attributes
    return type(a) is type(b) and hasattr(a, "__dict__") and _same(vars(a), vars(b))


_GETTERS = (
    "get_xydata",
    "get_offsets",
    "get_array",
    "get_segments",
    "get_text",
    "get_position",
    "get_xy",
    "get_width",
    "get_height",
    "get_facecolor",
    "get_edgecolor",
    "get_color",
    "get_alpha",
    "get_extent",
)


def _artists(fig) -> list:
    """What the student sees of the figure: every visible artist's type and data (positions, sizes, texts,
    colours, image arrays, path vertices), in the figure's order."""
    seen = []
    for artist in fig.findobj(include_self=False):
        if not artist.get_visible() or (hasattr(artist, "get_text") and not artist.get_text()):
            continue  # nothing drawn (an empty label may sit anywhere)
        data = [type(artist).__name__]
        for name in _GETTERS:
            getter = getattr(artist, name, None)
            if getter is None:
                continue
            try:
                value = getter()
            except (TypeError, ValueError, AttributeError, NotImplementedError):
                continue
            if value is None:
                continue
            data.append((name, value if isinstance(value, str) else repr(np.asarray(value).tolist())))  # NaN equals NaN
        if hasattr(artist, "get_paths"):
            data.append(("paths", repr([np.asarray(p.vertices).tolist() for p in artist.get_paths()])))
        seen.append(data)
    return seen


def _html_values(app) -> dict:
    """The app's HTML widgets other than the status panel (a legend render() rewrites)."""
    return {k: v.value for k, v in vars(app).items() if isinstance(v, widgets.HTML) and v is not app.status}


def _choices(widget) -> list:
    """Every value a control offers now: a selection's options, a checkbox's two states, every slider position."""
    if hasattr(widget, "options"):
        return [o[1] if isinstance(o, tuple) else o for o in widget.options]
    if isinstance(widget, widgets.Checkbox):
        return [False, True]
    if isinstance(widget, widgets.FloatLogSlider):
        steps = round((widget.max - widget.min) / widget.step)
        return [widget.base ** (widget.min + k * widget.step) for k in range(steps + 1)]
    if isinstance(widget, widgets.IntSlider):
        return list(range(widget.min, widget.max + 1, widget.step))
    steps = round((widget.max - widget.min) / widget.step)
    return [widget.min + k * widget.step for k in range(steps + 1)]


def _walk(app, rng: random.Random, moves: int = 3) -> None:
    """Really move `moves` random controls of `app` to random values they offer (the app's observers run)."""
    for _ in range(moves):
        name = rng.choice(app.prepared_controls)
        getattr(app, name).value = rng.choice(_choices(getattr(app, name)))


def _outcome(app, values: dict):
    """compute_for(values): the result, or our error's message."""
    try:
        return app.compute_for(values)
    except DistlabError as exc:
        return str(exc)


def _text(app, outcome) -> str:
    return outcome if isinstance(outcome, str) else app.describe(outcome)


@pytest.mark.parametrize("kind", APPS, ids=lambda k: k.__name__)
def test_every_control_is_prepared(kind):
    # the app names every control a student moves (compute_for reads only these): a control left out would not be
    # among the values the kernel renders a neighbouring state from
    app = kind()
    try:
        controls = {name for name, w in vars(app).items() if isinstance(w, CONTROL_TYPES)}
        assert controls == set(app.prepared_controls) | set(app.drawing_controls)
        assert app.values() == {name: getattr(app, name).value for name in app.prepared_controls}
    finally:
        app.close()
        plt.close(app.fig)


@pytest.mark.slow  # every reachable state of every app: outside the fast tier (README)
@pytest.mark.parametrize("kind", APPS, ids=lambda k: k.__name__)
def test_compute_for_a_reachable_state_is_what_the_app_shows_there(kind):
    rng = random.Random(f"pure {kind.__name__}")
    real, other = kind(), kind()
    default = real.values()
    sensitive: dict = {name: 0 for name in real.prepared_controls}
    compared, states = 0, MORE_STATES.get(kind, STATES)
    try:
        for _ in range(states):
            _walk(real, rng)
            _walk(other, rng)
            state = real.values()
            outcome = _outcome(other, state)  # another app, its controls elsewhere, computes this state
            if real.result is None:
                assert outcome == real.error, state
            else:
                assert not isinstance(outcome, str), (state, outcome)
                assert _same(outcome, real.result), state
                other.render(outcome)  # drawn and described from the result alone
                assert _artists(other.fig) == _artists(real.fig), state
                assert _html_values(other) == _html_values(real), state
                kind_of = other.status_kind(outcome)
                assert kind_of == real.status_kind(real.result)
                assert other.describe(outcome) == real.describe(real.result) == real.summary()
                assert message_html(other.describe(outcome), kind_of) == real.status.value
                compared += 1
            # the sample would catch a compute_for that ignored a control (used its default, or read the other
            # app's widget): setting that one value so changes what is shown somewhere in the sample
            shown = _text(other, outcome)
            for name in real.prepared_controls:
                for stand_in in (default[name], other.values()[name]):
                    if stand_in != state[name] and _text(other, _outcome(other, {**state, name: stand_in})) != shown:
                        sensitive[name] += 1
                        break
        assert compared >= states // 3, compared
        assert all(sensitive.values()), sensitive
    finally:
        for app in (real, other):
            app.close()
            plt.close(app.fig)
