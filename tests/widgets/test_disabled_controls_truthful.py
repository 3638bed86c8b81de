"""A disabled control shows the value the numbers beside it used. Lesson 4's lab and lesson 3's TP app showed
sequence parallelism ticked (greyed, or not even greyed) at tp = 1, where the step model ignores it: a student
read "sequence parallel: on" next to numbers priced without it (review v14). Every lesson app is built, each of its
selection controls and checkboxes moved through its values one at a time from the default, and wherever a control
is disabled (or, at tp = 1, a sequence-parallelism box), its value must equal what the app's result says the model
used: the result's attribute of the control's name, or its config entry of that name."""

from __future__ import annotations

import importlib

import ipywidgets as widgets
import pytest

from lesson_apps import lesson_apps as _apps


def _app_id(app_class) -> str:
    """A test id for an app: its module and class ("pipeline.BubbleGridApp")."""
    return f"{app_class.__module__.rsplit('.', 1)[1]}.{app_class.__name__}"


KINDS = (widgets.Dropdown, widgets.ToggleButtons, widgets.Checkbox, widgets.SelectionSlider)
#: too slow to walk here from states one move away (4 s a state, a hundred states): its options are kept valid by
#: replace_options and its errors are the picture's, per node count (test_widgets_training_lab.py)
NOT_WALKED = {"TrainingLabApp"}


def unpainted(app):
    """`app` with its matplotlib canvas no longer repainted when a control moves (its renderer's refresh does
    nothing): these walks check what the controls offer and show and what the app answers, which render() and
    describe() still compute at every state; the pixels of a move are the frame tests' (test_widget_frames,
    test_framecache). Each repaint was most of a walk's time (4.7 of 6.1 s of lesson 3's app)."""
    renderer = getattr(app, "renderer", None)
    if renderer is not None:
        renderer.refresh = lambda full=False, data=False: None
    return app


def _named_controls(app) -> dict:
    """{attribute name: control} for the app's selection controls and checkboxes."""
    return {name: w for name, w in vars(app).items() if isinstance(w, KINDS) and not name.startswith("_")}


_MISSING = object()


def used_value(result, name: str):
    """What the model used for the control `name`: result.<name>, else result.config[name], else result.timeline.<name>
    (lesson 4's grid: the simulated schedule's chunks); _MISSING if none."""
    if result is None:
        return _MISSING
    value = getattr(result, name, _MISSING)
    if value is _MISSING or callable(value):
        config = getattr(result, "config", None)
        value = config.get(name, _MISSING) if isinstance(config, dict) else _MISSING
    if value is _MISSING:
        value = getattr(getattr(result, "timeline", None), name, _MISSING)
    return _MISSING if callable(value) else value


def untruthful(app) -> list[str]:
    """'name shows X, the model used Y' for each disabled control, a slider too, whose shown value is not the one
    used."""
    found = []
    for name, control in _sliders_and_named(app).items():
        if not control.disabled:
            continue
        used = used_value(getattr(app, "result", None), name)
        if used is not _MISSING and used != control.value:
            found.append(f"{name} shows {control.value!r} (disabled), the model used {used!r}")
    return found


def _options(control) -> list:
    if isinstance(control, widgets.Checkbox):
        return [not control.value]
    return [
        o[1] if isinstance(o, tuple) else o
        for o in control.options
        if (o[1] if isinstance(o, tuple) else o) != control.value
    ]


@pytest.mark.slow  # every app's options walked: outside the fast tier (README)
@pytest.mark.parametrize("app_class", _apps(), ids=_app_id)
def test_a_disabled_control_shows_the_value_the_model_used(app_class):
    app = unpainted(app_class())
    try:
        found = [f"default: {p}" for p in untruthful(app)]
        for name, control in list(_named_controls(app).items()):
            if control.disabled:
                continue
            default = control.value
            for value in _options(control):
                control.value = value
                found += [f"{name} = {value!r}: {p}" for p in untruthful(app)]
            control.value = default
        assert not found, f"{app_class.__name__}: " + "; ".join(dict.fromkeys(found))
    finally:
        app.close()


def _slider_walk(app, where: str) -> list[str]:
    """untruthful after each enabled slider is moved to an end other than its value and then each selection control
    through its options (the slider set back after)."""
    found = []
    for name, slider in list(_sliders_and_named(app).items()):
        if slider.disabled or not hasattr(slider, "min"):
            continue
        start = slider.value
        slider.value = slider.max if slider.value != slider.max else slider.min
        found += [
            f"{where}{name} = {slider.value!r}, {moved} = {value!r}: {p}"
            for moved, value in _moves(app, _options)
            for p in untruthful(app)
        ]
        slider.value = start
    return found


def _two_moves_apart(app) -> list[str]:
    """_slider_walk from the default state and from each state one option away that enables a slider disabled at the
    default: a value the student set that stops applying (lesson 4's chunks v at 4, then 1F1B)."""
    disabled = {name for name, w in _sliders_and_named(app).items() if w.disabled and hasattr(w, "min")}
    found = _slider_walk(app, "")
    for name, value in _moves(app, _options):
        if any(not getattr(app, d).disabled for d in disabled):
            found += _slider_walk(app, f"{name} = {value!r}, ")
    return found


@pytest.mark.slow  # every app's sliders and options walked: outside the fast tier (README)
@pytest.mark.parametrize("app_class", [a for a in _apps() if a.__name__ not in NOT_WALKED], ids=_app_id)
def test_a_disabled_slider_shows_the_value_used_after_the_student_moved_it(app_class):
    """Lesson 4's bubble grid showed chunks v = 2, greyed, beside 1F1B's grid of one chunk per stage (review v20), and
    its stage analysis kept a v set at interleaved, greyed, after a move to 1F1B: each slider set, then each option of
    each selection control chosen, no disabled control (sliders included) shows a value the numbers did not use."""
    app = unpainted(app_class())
    try:
        found = _two_moves_apart(app)
        assert not found, f"{app_class.__name__}: " + "; ".join(dict.fromkeys(found))
    finally:
        app.close()


def test_the_check_finds_a_greyed_slider_the_schedule_ignores():
    class Timeline:
        chunks = 1

    class Result:
        timeline = Timeline()

    class App:
        def __init__(self):
            self.chunks = widgets.IntSlider(value=2, min=1, max=8, disabled=True)
            self.result = Result()

    assert untruthful(App()) == ["chunks shows 2 (disabled), the model used 1"]


@pytest.mark.parametrize("module", ["training_lab", "tensor_parallel"])
def test_sequence_parallelism_at_tp_1_is_shown_off_and_comes_back(module):
    apps = {
        "training_lab": ("distlab.widgets.training_lab", "TrainingLabApp"),
        "tensor_parallel": ("distlab.widgets.tensor_parallel", "TensorParallelApp"),
    }
    path, name = apps[module]
    app = getattr(importlib.import_module(path), name)(sequence_parallel=True)
    try:
        app.tp.value = 2
        assert app.sequence_parallel.value and not app.sequence_parallel.disabled
        app.tp.value = 1
        assert not app.sequence_parallel.value and app.sequence_parallel.disabled
        assert "tp = 1" in app.sequence_parallel.tooltip and "off: tp = 1" in app.sequence_parallel.description
        assert untruthful(app) == []
        app.tp.value = 2  # the student's choice comes back
        assert app.sequence_parallel.value and not app.sequence_parallel.disabled
        assert "tp = 1" not in app.sequence_parallel.description
    finally:
        app.close()


def test_the_check_finds_a_ticked_greyed_box_the_model_ignored():
    class Result:
        config = {"sequence_parallel": False}

    class App:
        def __init__(self):
            self.sequence_parallel = widgets.Checkbox(value=True, disabled=True)
            self.result = Result()

    assert untruthful(App()) == ["sequence_parallel shows True (disabled), the model used False"]


def names_a_disabled_control(app) -> list[str]:
    """'name' for each disabled control the app's error names as a setting ('name=value'): a student cannot act on
    an error that asks for another value of a greyed-out control (review v18: the bubble grid told a student at
    DualPipe-V, 10 stages, that "chunks=2 does not divide the layers per stage" while chunks v was disabled)."""
    error = getattr(app, "error", None) or ""
    return [name for name, control in _sliders_and_named(app).items() if control.disabled and f"{name}=" in error]


def _sliders_and_named(app) -> dict:
    """The selection controls and checkboxes, and the sliders (chunks v is an IntSlider)."""
    slider_kinds = (widgets.IntSlider, widgets.FloatSlider, widgets.FloatLogSlider)
    sliders = {name: w for name, w in vars(app).items() if isinstance(w, slider_kinds) and not name.startswith("_")}
    return {**_named_controls(app), **sliders}


@pytest.mark.slow  # every app's options and slider ends walked: outside the fast tier (README)
@pytest.mark.parametrize("app_class", _apps(), ids=_app_id)
def test_an_error_never_asks_for_a_disabled_control(app_class):
    """Every selection control moved through its values, and every slider to its ends, one at a time: an error the
    app then shows names no disabled control as the setting to change."""
    app = unpainted(app_class())
    try:
        found = []
        for name, control in list(_sliders_and_named(app).items()):
            if control.disabled:
                continue
            default = control.value
            ends = [control.min, control.max] if hasattr(control, "min") else _options(control)
            for value in ends:
                control.value = value
                found += [f"{name} = {value!r}: error names disabled {d}" for d in names_a_disabled_control(app)]
            control.value = default
        assert not found, f"{app_class.__name__}: " + "; ".join(dict.fromkeys(found))
    finally:
        app.close()


@pytest.mark.parametrize("kind", ["zb-v", "dualpipe", "dualpipe-v"])
def test_a_two_chunk_schedule_that_cannot_split_the_stages_says_which_stage_counts_can(kind):
    from distlab.widgets.pipeline import BubbleGridApp

    app = BubbleGridApp(kind=kind, stages=4, microbatches=32)
    try:
        app.stages.value = 10  # Llama-2-7B's 32 layers: [4, 4, 3, ...] do not split into the schedule's 2 chunks
        assert app.chunks.disabled and app.error is not None
        assert names_a_disabled_control(app) == []
        assert f"{kind} places 2 model chunks on every stage" in app.error
        assert "stage counts that split so: 1, 2, 4, 8, 16" in app.error
    finally:
        app.close()


def test_the_check_finds_an_error_that_asks_for_a_greyed_slider():
    class App:
        def __init__(self):
            self.chunks = widgets.IntSlider(value=2, min=1, max=4, disabled=True)
            self.error = "chunks=2 does not divide the layers per stage [4, 3]"

    assert names_a_disabled_control(App()) == ["chunks"]


def _app_error(app) -> str:
    """The error the app shows now ('' when none)."""
    return getattr(app, "error", None) or ""


def options_answered_with_an_error(app) -> list[str]:
    """'name=value: error' for each option of each enabled selection control or checkbox that, chosen from the app's
    current state, the app answers with an error (review v20: lesson 11's FSDP app at nodes = 1 offered HSDP, and
    choosing it showed "sharding='hybrid' replicates across nodes, but the cluster has 1 node"). An option that cannot
    apply is disabled (its control greyed out, saying why) or not offered."""
    return [f"{name}={value!r}: {_app_error(app)[:90]}" for name, value in _moves(app, _options) if _app_error(app)]


def _moves(app, values_of):
    """(name, value) for each enabled control of `app` and each of values_of(control), the control set to that value
    while the caller looks at the app, then set back (a control the move disabled is left at its other values)."""
    for name, control in list(_named_controls(app).items()):
        if control.disabled:
            continue
        start = control.value
        for value in values_of(control):
            if control.disabled:
                break
            control.value = value
            yield name, value
            control.value = start


def _neighbours(control) -> list:
    """The values one key press from the control's value: the options before and after it (a checkbox: the other)."""
    if isinstance(control, widgets.Checkbox):
        return [not control.value]
    values = [o[1] if isinstance(o, tuple) else o for o in control.options]
    if control.value not in values:
        return []
    i = values.index(control.value)
    return [values[j] for j in (i - 1, i + 1) if 0 <= j < len(values)]


def _from_every_state_one_move_away(app) -> list[str]:
    """options_answered_with_an_error in the app's default state and in every state one key press from it (a
    control's neighbouring option, one that the app answers without an error)."""
    found = [f"default, {p}" for p in options_answered_with_an_error(app)]
    for name, value in _moves(app, _neighbours):
        if not _app_error(app):
            found += [f"at {name}={value!r}, {p}" for p in options_answered_with_an_error(app)]
    return found


#: apps that still answer some option with an error one move from their default (found by the check below, review
#: v20; left for a later round): each must come off this list once its options are disabled or not offered
STILL_ANSWERED_WITH_AN_ERROR: dict[str, str] = {}


def _option_error_cases():
    for app_class in _apps():
        if app_class.__name__ in NOT_WALKED:
            continue
        marks = ()
        if app_class.__name__ in STILL_ANSWERED_WITH_AN_ERROR:
            marks = pytest.mark.xfail(strict=True, reason=STILL_ANSWERED_WITH_AN_ERROR[app_class.__name__])
        yield pytest.param(app_class, marks=marks, id=_app_id(app_class))


@pytest.mark.slow  # every app's options walked from every state one move away: outside the fast tier (README)
@pytest.mark.parametrize("app_class", list(_option_error_cases()))
def test_no_enabled_option_is_answered_with_an_error(app_class):
    app = unpainted(app_class())
    try:
        found = _from_every_state_one_move_away(app)
        assert not found, f"{app_class.__name__}: {len(found)} options, e.g. " + "; ".join(found[:6])
    finally:
        app.close()


def test_the_fsdp_app_greys_out_hsdp_at_one_node_and_brings_it_back():
    from distlab.widgets.training_at_scale import HSDP_AT_ONE_NODE, FsdpApp

    app = FsdpApp(nodes=4, sharding="hybrid")
    try:
        app.nodes.value = 1
        assert app.sharding.disabled and app.sharding.value == "full" and not app.error
        assert "2+ nodes" in app.sharding.description and app.sharding.tooltip == HSDP_AT_ONE_NODE
        assert untruthful(app) == []
        app.nodes.value = 2  # the student's choice comes back
        assert not app.sharding.disabled and app.sharding.value == "hybrid" and not app.error
    finally:
        app.close()


def test_the_check_finds_an_option_answered_with_an_error():
    class App:
        def __init__(self):
            self.nodes = widgets.Dropdown(options=[1, 2], value=1)
            self.sharding = widgets.ToggleButtons(options=["full", "hybrid"], value="full")

        @property
        def error(self):
            return "hybrid needs 2 nodes" if self.nodes.value == 1 and self.sharding.value == "hybrid" else None

    assert options_answered_with_an_error(App()) == ["sharding='hybrid': hybrid needs 2 nodes"]


def test_the_all_to_all_app_offers_no_top_k_above_its_experts():
    # two key presses from the default (ep 8 -> 2, experts per GPU 2 -> 1): 2 experts, and top_k 4 and 8 still offered
    from distlab.widgets.mixture_of_experts import AllToAllApp

    app = AllToAllApp()
    try:
        app.ep.value, app.experts_per_gpu.value = 2, 1
        offered = [k for k in app.top_k.options if not app.top_k.disabled]
        assert offered and max(offered) <= 2 * 1, offered
        assert "top-k = 4 (2 x 1 = 2 experts, fewer than top-k 4)" in app.top_k.tooltip and not app.error
        app.ep.value = 8  # 8 experts: top-k 4 and 8 offered again, nothing moved
        assert app.top_k.options == (1, 2, 4, 8) and app.top_k.tooltip is None and app.top_k.value == 2
    finally:
        app.close()


def test_the_placement_app_offers_node_limits_up_to_the_nodes_the_ep_group_spans():
    from distlab.widgets.mixture_of_experts import PlacementApp

    app = PlacementApp(ep=32, max_nodes=4)  # 32 members, 8 a node: 4 nodes
    try:
        app.ep.value = 16  # 2 nodes: a limit of 4 was offered and answered "is more than the 2 node(s)" (now "2 nodes")
        assert [v for _, v in app.max_nodes.options] == [None, 1, 2] and app.max_nodes.value == 2 and not app.error
        assert app.max_nodes.tooltip == "not offered here: 4, 8 (the EP group spans 2 nodes)"
        app.ep.value = 64  # the student's limit comes back
        assert app.max_nodes.value == 4 and not app.error and app.max_nodes.tooltip is None
    finally:
        app.close()


def test_the_tp_app_shows_bf16_on_a_gpu_without_fp8_and_brings_fp8_back():
    from distlab.widgets.tensor_parallel import FP8_WITHOUT_PEAK, TensorParallelApp

    app = TensorParallelApp(precision="fp8")
    try:
        app.gpu.value = "a100-80gb"  # no fp8 peak: fp8 was offered there and answered "has no fp8 peak"
        assert app.precision.disabled and app.precision.value == "mixed" and not app.error
        assert "no fp8 on a100-80gb" in app.precision.description and app.precision.tooltip == FP8_WITHOUT_PEAK
        assert untruthful(app) == []
        app.gpu.value = "h100-sxm"  # the student's choice comes back
        assert not app.precision.disabled and app.precision.value == "fp8" and not app.error
        assert app.precision.description == "precision"
    finally:
        app.close()


def test_the_bubble_grid_offers_no_schedule_or_model_whose_stages_the_chunks_cannot_split():
    from distlab.widgets.pipeline import BubbleGridApp

    app = BubbleGridApp(kind="interleaved", stages=4, microbatches=8)
    try:
        # Llama-3.1-405B's 126 layers over 4 stages, [32, 32, 31, 31], into v = 2 chunks: offered, and answered with
        # "chunks=2 does not divide the layers per stage"
        assert "llama3.1-405b" not in app.model.options and "llama2-7b" in app.model.options
        assert "model = llama3.1-405b (llama3.1-405b's 126 layers over 4 stages, [32, 32, 31, 31]" in app.model.tooltip
        app.kind.value = "1f1b"  # one chunk per stage: every model, and the student's schedule stands
        app.model.value = "llama3.1-405b"
        assert app.kind.options == ("naive", "gpipe", "1f1b", "zb-h1") and not app.error
        assert "schedule = interleaved (" in app.kind.tooltip
        app.stages.value = 3  # [42, 42, 42]: the two-chunk schedules come back
        assert "interleaved" in app.kind.options and "dualpipe-v" in app.kind.options and app.kind.tooltip is None
    finally:
        app.close()
