"""The frame cache of the matplotlib-drawn apps (distlab.widgets.framecache, issue 32): what the kernel sends for a
state one control change away is what the kernel draws and shows when the control really moves there, the current
picture is not touched by the fill, a fill turn holds the kernel for one neighbour at most, and an invalid neighbour
carries our message."""

from __future__ import annotations

import io
import random

import numpy as np
import pytest
from blocked import run_until_blocked
import traitlets
from PIL import Image

from distlab.widgets.common import message_html
from distlab.widgets.data_parallel_zero import OverlapApp
from distlab.widgets.framecache import frame_pixels
from distlab.widgets.mixture_of_experts import AllToAllApp, ImbalanceApp, PlacementApp
from distlab.widgets.pipeline import StageAnalysisApp
from distlab.widgets.controls import neighbour_steps
from distlab.widgets.prefetch import REACH, SEPARATOR, neighbour_jobs, state_key, values_key, without_via
from distlab.widgets.production import BucketApp, ProductionStepApp
from distlab.widgets.tensor_parallel import TensorParallelApp
from distlab.widgets.training_at_scale import CheckpointApp, ContextApp, FsdpApp, ScheduleApp

#: (app, its arguments): the default state of each converted app, and states next to invalid ones (interleaved with
#: m = p = 4: m = 5 or p = 3, 5 break "microbatches a multiple of stages"; 4 nodes of 8 GPUs under tp x pp = 64, itself
#: invalid, so the fill starts from an invalid state there)
CASES = [
    (OverlapApp, {}),
    (StageAnalysisApp, {}),
    (StageAnalysisApp, dict(kind="interleaved", chunks=2, stages=4, microbatches=4)),
    (BucketApp, {}),
    (ProductionStepApp, {}),
    (ProductionStepApp, dict(nodes=4, pp=8)),
    (AllToAllApp, dict(skew=0.5, capacity=1.25, step=3)),
    (TensorParallelApp, {}),
    # tp = 32 over InfiniBand: a hidden size of 2048 (16 heads) or 5120 (40 heads), or an intra-node link (pcie5, 8 GPUs
    # a node), moves the TP degree (tensor_parallel.tp_after)
    (TensorParallelApp, dict(tp=32, link="ib-ndr")),
    (ImbalanceApp, {}),
    # EP 16: mixtral-8x7b's 8 experts, a neighbouring model, move it to 8 (mixture_of_experts.ep_after)
    (ImbalanceApp, dict(model="deepseek-v3", ep=16, capacity=1.25)),
    (PlacementApp, {}),
    (PlacementApp, dict(model="qwen3-235b-a22b", ep=16, etp=2)),
    (ScheduleApp, {}),
    # 1F1B (W drawn with B: the legend lists no W) next to zb-h1 (W apart), at p = 16, m = 64 (the largest grid)
    (ScheduleApp, dict(kind="1f1b", stages=16, microbatches=64, weight=0.5)),
    (FsdpApp, {}),
    (FsdpApp, dict(model="llama3.1-70b", nodes=1, sharding="hybrid", prefetch=0, reshard=False)),
    (ContextApp, {}),
    (ContextApp, dict(seq_len=8192, cp=128, tp=1, link="nvlink4")),
    (CheckpointApp, {}),
    (CheckpointApp, dict(gpus=256, mode="async", restart_min=0.0)),
]
SAMPLED = 3  # neighbours at each distance moved to for real per case (a seeded random sample: each move redraws in the kernel)


def _ready(app):
    """The app as a browser shows it: ipympl sends frames (quick_frame), the first one whole."""
    app.canvas._handle_message(app.canvas, {"type": "initialized"}, [])
    app.fig.canvas.draw()
    return app


def _jobs(app) -> list:
    """The fill's jobs [(browser key, state priced)] from the app's state now, as FrameCachingApp.update starts it."""
    return neighbour_jobs(app._frame_widgets(), app.frame_state(), neighbour=app.frame_neighbour, marked=True)


def _moves(app) -> list:
    """[(browser key, control name, path)] of every change of one control 1 to REACH steps away (path: the values
    passed, the last one reached), nearest first: the key is what the browser's controls show right after the
    student's changes (prefetch.state_key, which reads the labels of the options the controls offer now, as
    browser_js/prefetch.js does)."""
    controls = app._frame_widgets()
    moves = [
        (state_key(list(controls.values()), (widget, path[-1])), name, path)
        for name, widget in controls.items()
        for path in neighbour_steps(widget, REACH)
    ]
    return sorted(moves, key=lambda move: len(move[2]))  # stable: at each distance, in the controls' order


def _filled(app, upto: int | None = None) -> dict:
    """Every neighbour's payload, as the kernel sends it to the browser: {browser key: (payload, buffers)}; with
    `upto`, the fill's first upto + 1 jobs only (the fill paints its jobs in order, so job `upto`'s payload is the one
    the whole fill sends: the jobs after it are never painted before it)."""
    sent = []
    app.frame_cache.send = lambda msg, buffers=None: sent.append((msg, buffers))
    controls = app._frame_widgets()
    jobs = _jobs(app)
    app.prefetcher.run_all(values_key(controls, app.frame_state()), jobs if upto is None else jobs[: upto + 1])
    return {msg["prefetch"]: (msg["payload"], buffers) for msg, buffers in sent if "prefetch" in msg}


def _move_back(app, start: dict, name: str) -> None:
    """Back to `start` after a real move of `name`: that control first, then any control its observer moved."""
    getattr(app, name).value = start[name]
    for other, value in start.items():
        if getattr(app, other).value != value:
            getattr(app, other).value = value
    assert app.frame_state() == start


def _texts(app) -> list:
    return [app.status.value, *(getattr(app, name).value for name in app.frame_texts)]


def _decoded(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGBA"))


@pytest.mark.slow  # draws every frame with matplotlib: a frame-by-frame check, outside the fast tier (README)
@pytest.mark.parametrize(("cls", "kwargs"), CASES, ids=[f"{c.__name__}-{i}" for i, (c, _) in enumerate(CASES)])
def test_cached_frame_is_what_the_kernel_draws_there(cls, kwargs):
    app = _ready(cls(**kwargs))
    start = app.frame_state()
    pixels = frame_pixels(app.canvas)
    texts, display = _texts(app), app.canvas.layout.display
    jobs = _jobs(app)
    keys = {key for key, _ in jobs}
    moves = [move for move in _moves(app) if move[0] in keys]  # two steps away: not where the way there matters
    assert [key for key, _ in jobs] == [key for key, _, _ in moves]  # keyed as the browser sees the change
    assert all(key in keys for key, _, path in _moves(app) if len(path) == 1)  # every change one step away
    # the sample: SAMPLED changes of every distance (two steps away: a held key, the kernel's path moved for real)
    rng = random.Random(f"{cls.__name__}{kwargs}")
    sample = []
    for distance in range(1, REACH + 1):
        at = [i for i, move in enumerate(moves) if len(move[2]) == distance]
        sample += rng.sample(at, min(SAMPLED, len(at)))
    for n, i in enumerate(sample):
        (_, state), (key, name, path) = jobs[i], moves[i]
        # as the kernel fills after each change: the whole fill the first time, then up to the job moved to (the same
        # payload for it, in part of the frames)
        payloads = _filled(app, None if n == 0 else i)
        assert sorted(payloads) == sorted(k for k, _ in jobs[: None if n == 0 else i + 1])
        # the fill sends nothing the student sees and leaves the current picture as it was (pixels compared)
        assert np.array_equal(frame_pixels(app.canvas), pixels)
        assert _texts(app) == texts and app.canvas.layout.display == display
        payload, buffers = payloads[key]
        for value in path:  # the student really moves it, step by step: the kernel draws and sends each
            getattr(app, name).value = value
        assert app.frame_state() == without_via(state)[0]  # the state priced is the one the kernel reaches
        assert payload["texts"] == _texts(app), key.replace(SEPARATOR, "|")
        assert payload["shown"] == (app.canvas.layout.display != "none")
        if payload["shown"]:
            # the kernel's frame: the pixels ipympl sent last (quick_frame keeps them, diff frames composited)
            assert np.array_equal(_decoded(buffers[0]).view(np.uint32)[..., 0], app.canvas._last_buff)
        else:
            assert payload["png"] is None and not buffers
        try:
            _move_back(app, start, name)  # the next fill starts here, after a real move there and back
        except traitlets.TraitError:
            # a start that cannot run (tp x pp = 64 on 32 GPUs) is only ever built: once left, the app offers only
            # what runs (controls.offer_what_runs), so it is built again there
            app = _ready(cls(**kwargs))
        pixels, texts, display = frame_pixels(app.canvas), _texts(app), app.canvas.layout.display


def test_invalid_neighbour_carries_our_message_not_a_traceback():
    app = _ready(StageAnalysisApp(kind="interleaved", chunks=2, stages=4, microbatches=4))
    payloads = _filled(app)
    app.microbatches.value = 5  # m = 5 is not a multiple of p = 4 (interleaved)
    key = values_key(app._frame_widgets(), app.frame_state())
    payload, buffers = payloads[key]
    assert app.error is not None and "multiple of stages" in app.error
    assert payload == {"png": None, "texts": [message_html(app.error, "error"), app.legend.value], "shown": False}
    assert "Traceback" not in payload["texts"][0] and not buffers


def test_a_fill_turn_prices_one_neighbour_at_most(monkeypatch):
    from distlab.widgets import filling, prefetch

    # a turn deadline far away: without the one-neighbour bound, the first turn would price all ten neighbours
    monkeypatch.setattr(prefetch, "turn_deadline", lambda: filling.time.perf_counter() + 60)
    app = OverlapApp()
    sent = []
    app.frame_cache.send = lambda msg, buffers=None: sent.append(msg)
    controls = app._frame_widgets()
    jobs = _jobs(app)
    step = app.prefetcher._turns(values_key(controls, app.frame_state()), jobs)
    per_turn = []
    more = True
    while more:
        before = len(sent)
        more = step()
        per_turn.append(len(sent) - before)
    # 5 controls, 2 neighbours each and 2 more at two and at three steps (prefetch.REACH = 3), but the model (index 1
    # of 17 options) has only one option two or three steps before it: 4 + 6 x 4
    assert max(per_turn) == 1 and sum(per_turn) == len(jobs) == 28


WALKED = [
    OverlapApp,
    StageAnalysisApp,
    BucketApp,
    ProductionStepApp,
    AllToAllApp,
    TensorParallelApp,
    ImbalanceApp,
    PlacementApp,
    ScheduleApp,
    FsdpApp,
    ContextApp,
    CheckpointApp,
]


@pytest.mark.slow  # draws every frame with matplotlib: a frame-by-frame check, outside the fast tier (README)
@pytest.mark.parametrize("cls", WALKED)
def test_an_app_filled_at_every_step_draws_what_an_app_never_filled_draws(cls):
    # the invariant the put-back keeps: a random walk of real moves (a neighbour of one control at a time) draws,
    # frame after frame, the same pixels and texts whether or not every neighbour was painted before each move
    filled, plain = _ready(cls()), _ready(cls())
    rng = random.Random(cls.__name__)
    for _ in range(8):
        _filled(filled)
        key, name, path = rng.choice(_moves(filled))
        for app in (filled, plain):
            for value in path:
                getattr(app, name).value = value
        assert np.array_equal(filled.canvas._last_buff, plain.canvas._last_buff), key.replace(SEPARATOR, "|")
        assert _texts(filled) == _texts(plain)


#: (app, its arguments, the control the student moves and its new value, the dependent control, its options and value
#: after): lesson 5 at tp = 32 over InfiniBand, h = 4096 (32 heads), set to h = 5120: 5120 / 128 = 40 heads, which 32
#: and 16 do not divide, so the observer re-offers TP 1, 2, 4, 8 and moves it to 8 (the largest below 32 that divides
#: 40); lesson 10 at deepseek-v3 (256 experts), EP 16, set to mixtral-8x7b: 8 experts, EP 1, 2, 4, 8 offered, moved to 8.
DEPENDENT = [
    (TensorParallelApp, dict(tp=32, hidden=4096, link="ib-ndr"), "hidden", 5120, "tp", (1, 2, 4, 8), 8),
    (ImbalanceApp, dict(model="deepseek-v3", ep=16), "model", "mixtral-8x7b", "ep", (1, 2, 4, 8), 8),
    (PlacementApp, dict(model="deepseek-v3", ep=16), "model", "mixtral-8x7b", "ep", (1, 2, 4, 8), 8),
]


@pytest.mark.parametrize(("cls", "kwargs", "name", "value", "dependent", "options", "after"), DEPENDENT)
def test_a_change_that_moves_a_dependent_control_is_cached_under_the_key_the_browser_sees(
    cls, kwargs, name, value, dependent, options, after
):
    # The browser looks the change up right after it, before the kernel re-offers the dependent control's options: by
    # the labels it shows then (TP still "32", EP still "16"); the picture and texts under that key must be the
    # kernel's at the state its observer reaches (TP 8, EP 8).
    app = _ready(cls(**kwargs))
    controls = app._frame_widgets()
    key = state_key(list(controls.values()), (getattr(app, name), value))
    names = list(controls)
    assert key.split(SEPARATOR)[names.index(dependent)] == str(kwargs[dependent])  # what the browser shows
    payloads = _filled(app)
    getattr(app, name).value = value
    assert getattr(app, dependent).value == after and tuple(getattr(app, dependent).options) == options
    payload, buffers = payloads[key]
    assert payload["shown"] and payload["texts"] == _texts(app)
    assert np.array_equal(_decoded(buffers[0]).view(np.uint32)[..., 0], app.canvas._last_buff)


def _browser_message(widget, value) -> dict:
    """The comm message the browser sends when the student sets `widget` to `value` (ipywidgets 8: a selection sends
    its index, any other control its value), as the kernel hands it to Widget._handle_msg."""
    if hasattr(widget, "_options_labels"):
        state = {"index": list(widget._options_values).index(value)}
    else:
        state = {"value": value}
    return {"content": {"data": {"method": "update", "state": state, "buffer_paths": []}}, "buffers": []}


@pytest.mark.slow  # draws every frame with matplotlib: a frame-by-frame check, outside the fast tier (README)
@pytest.mark.parametrize("cls", WALKED)
def test_a_browser_change_during_a_paint_shows_its_own_state(cls):
    # JupyterLab 4.6 sends widget comm messages over a kernel subshell (its default commsOverSubshells: perCommTarget,
    # with ipykernel 7): the subshell's thread runs the control's observers (update) while the main thread paints a
    # neighbour in an idle turn (the fill a cell started). Seen in Chromium (lesson 4, 1 run in 5): the update read
    # the painted neighbour's values and the status showed its text. Here the browser's change arrives on another
    # thread between the paint's start and its put-back; afterwards the app must show what an app moved the same way
    # with no fill shows (texts and the frame sent), and the payload must be the neighbour's.
    import threading

    app, plain, there = _ready(cls()), _ready(cls()), _ready(cls())
    (_, painted), *_ = _jobs(app)
    (_, first, (first_value,)), *_, (_, name, (*_, value)) = _moves(app)  # the fill's first neighbour; a change
    getattr(there, first).value = first_value  # the painted neighbour, reached for real
    paint = app.renderer.paint
    changed = threading.Thread(
        target=getattr(app, name)._handle_msg, args=(_browser_message(getattr(app, name), value),)
    )

    def paint_with_a_change_arriving(full):
        run_until_blocked(changed)  # the change runs as far as it can while this paint is under way
        paint(full)

    app.renderer.paint = paint_with_a_change_arriving
    steps = app.frame_steps(painted)
    next(steps)
    with pytest.raises(StopIteration) as done:
        next(steps)
    changed.join()
    getattr(plain, name).value = value
    assert app.frame_state() == plain.frame_state()
    assert _texts(app) == _texts(plain)
    assert np.array_equal(app.canvas._last_buff, plain.canvas._last_buff)
    assert done.value.value is None or done.value.value["texts"] == _texts(there)


@pytest.mark.slow  # draws every frame with matplotlib: a frame-by-frame check, outside the fast tier (README)
@pytest.mark.parametrize("cls", WALKED)
def test_after_every_paint_a_full_redraw_sends_the_current_picture(cls):
    # The put-back must leave everything a full draw reads as it was, not only what a blit repaints: ipympl redraws
    # the whole figure when the browser asks ({"type": "draw"}: a resize, a device-pixel-ratio change), with no update
    # in between. Lesson 10's all-to-all matrix sets its colour scale (image.set_clim), which edits the image's
    # Normalize in place: after painting EP 16 (twice the GPUs, about half the bytes per pair: a scale to 0.4 MB
    # instead of 0.8 MB) a redraw showed the current matrix in the neighbour's colours.
    app = _ready(cls())
    current = app.canvas._last_buff.copy()
    for key, state in _jobs(app):
        for _ in app.frame_steps(state):  # its result, then its paint and put-back
            pass
        app.canvas._handle_message(app.canvas, {"type": "draw"}, [])
        assert np.array_equal(app.canvas._last_buff, current), key.replace(SEPARATOR, "|")
