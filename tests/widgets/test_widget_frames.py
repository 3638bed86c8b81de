"""The frames the apps send (widgets/common.py): the PNG frame equals matplotlib's, and a static state restored from
BlitRenderer's kept pictures shows exactly what a full draw shows (issue 19's speed work must not change a pixel)."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image


def _ready(app):
    app.canvas._handle_message(app.canvas, {"type": "initialized"}, [])  # what a browser sends first
    app.fig.canvas.draw()
    return app


def _pixels(app) -> np.ndarray:
    return np.asarray(app.canvas.get_renderer().buffer_rgba()).copy()


def _decoded(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGBA"))


def test_quick_frame_sends_what_matplotlibs_webagg_canvas_sends():
    # the independent implementation: matplotlib's own FigureCanvasWebAggCore.get_diff_image, run on the same state
    from matplotlib.backends.backend_webagg_core import FigureCanvasWebAggCore

    from distlab.widgets.data_parallel_zero import OverlapApp

    app = _ready(OverlapApp())
    canvas = app.canvas
    for change in (None, "full", "diff"):
        before = canvas._last_buff.copy()
        if change == "full":
            canvas._force_full = True
        elif change == "diff":
            app.buckets.value = 8  # eight buckets: the timeline changes
            canvas._last_buff = before  # the frame the update sent is sent again, below, by both
        state = (canvas._force_full, canvas._last_buff.copy())
        canvas._png_is_old = True
        ours, our_mode = canvas.get_diff_image(), canvas._current_image_mode
        canvas._force_full, canvas._last_buff = state
        canvas._png_is_old = True
        theirs, their_mode = FigureCanvasWebAggCore.get_diff_image(canvas), canvas._current_image_mode
        assert our_mode == their_mode
        assert np.array_equal(_decoded(ours), _decoded(theirs))
        if change == "diff":
            assert our_mode == "diff" and _decoded(ours)[..., 3].any()  # some pixels changed, the rest transparent


def _overlap():
    from distlab.widgets.data_parallel_zero import OverlapApp

    return OverlapApp(), "model", ["gpt3-175b", "llama2-7b"]


def _all_to_all():
    from distlab.widgets.mixture_of_experts import AllToAllApp

    return AllToAllApp(), "ep", [16, 8]


def _production_step():
    from distlab.widgets.production import ProductionStepApp

    return ProductionStepApp(), "nodes", [4, 32]  # 4 nodes: a longer step, a new time range


def _stage_analysis():
    from distlab.widgets.pipeline import StageAnalysisApp

    return StageAnalysisApp(), "stages", [1, 4]  # one stage: no bubble, a shorter step, a new time range


# (the triage ladder, lesson 8b, is drawn in the browser: distlab.widgets.browser.LadderPicture; the bucket
# app's axes never change)
@pytest.mark.parametrize("make", [_overlap, _all_to_all, _production_step, _stage_analysis])
def test_axes_shown_before_are_restored_and_look_as_a_full_draw(make):
    app, control, (other, first) = make()
    _ready(app)
    widget = getattr(app, control)
    assert widget.value == first
    draws = []
    original = app.canvas.draw
    app.canvas.draw = lambda: (draws.append(1), original())[1]
    widget.value = other  # a state not drawn yet: a full draw
    assert draws == [1]
    widget.value = first  # back to the first state: restored from the kept picture, no full draw
    assert draws == [1]
    restored = _pixels(app)
    app.canvas.draw = original
    app.canvas.draw()  # what a full draw of the same state paints
    assert np.array_equal(restored, _pixels(app))


def _stage_analysis_neighbour():
    app, _, _ = _stage_analysis()
    return app, "stages", 3  # a neighbour of 4 stages: a new time range


def _production_step_neighbour():
    app, control, _ = _production_step()
    return app, control, 16  # a neighbour of 32 nodes: a longer step, a new time range


def _all_to_all_neighbour():
    app, control, (other, _) = _all_to_all()
    return app, control, other  # EP 16, a neighbour of EP 8: a larger matrix


def _overlap_neighbour():
    from distlab.widgets.data_parallel_zero import OverlapApp

    app = OverlapApp()
    values = [o for o in app.model.options]
    return app, "model", values[values.index(app.model.value) + 1]


@pytest.mark.parametrize(
    "make",
    [
        _stage_analysis_neighbour,
        _production_step_neighbour,
        _all_to_all_neighbour,
        _overlap_neighbour,
    ],
)
def test_pictures_prepared_in_idle_turns_change_nothing_shown_and_look_as_a_full_draw(make):
    # inside a kernel the apps draw their neighbouring axes states in idle turns (LessonApp.prepared_pictures): the
    # buffer the browser is sent from, the artists and the axes must be as before, and moving to the neighbour must
    # restore a picture that is pixel for pixel a full draw
    import asyncio

    from distlab.widgets.common import forget_remembered

    forget_remembered()
    app, control, neighbour = make()
    _ready(app)
    shown = _pixels(app)
    draws = []
    original = app.canvas.draw
    app.canvas.draw = lambda: (draws.append(1), original())[1]

    async def prepare():
        app.prepare_neighbours()
        await app.preparing

    asyncio.run(prepare())
    assert np.array_equal(_pixels(app), shown)  # nothing shown changed
    app.renderer.refresh()  # a blit of the current state: what the next frame would show
    assert np.array_equal(_pixels(app), shown)
    getattr(app, control).value = neighbour
    assert draws == []  # the new axes state was prepared: restored, no full draw
    restored = _pixels(app)
    app.canvas.draw = original
    app.canvas.draw()
    assert np.array_equal(restored, _pixels(app))


def _session_apps():
    from distlab.widgets.data_parallel_zero import OverlapApp
    from distlab.widgets.mixture_of_experts import AllToAllApp
    from distlab.widgets.pipeline import StageAnalysisApp
    from distlab.widgets.production import BucketApp, ProductionStepApp

    return [ProductionStepApp, StageAnalysisApp, BucketApp, OverlapApp, AllToAllApp]


@pytest.mark.parametrize("app_class", _session_apps(), ids=lambda c: c.__name__)
def test_a_kernel_session_with_prepared_pictures_shows_what_a_full_draw_shows(app_class):
    # a seeded student: a dozen moves of random controls to random values, pausing (the neighbours prepared) after
    # most; after each move the picture shown must be what a full draw of that state paints, whatever pictures the
    # idle turns drew and put back before (the axes keep ranges by history: a fresh app is no reference)
    import asyncio
    import random

    from distlab.widgets.common import PREPARE_AFTER_S, forget_remembered, neighbour_values

    assert PREPARE_AFTER_S > 0
    forget_remembered()
    app = _ready(app_class())
    rng = random.Random(19)

    def options(name):
        w = getattr(app, name)
        if hasattr(w, "options"):
            return [o[1] if isinstance(o, tuple) else o for o in w.options]
        return neighbour_values(w) or [w.value]

    async def session():
        for move in range(12):
            name = rng.choice(app.prepared_controls)
            if getattr(getattr(app, name), "disabled", False):
                continue
            getattr(app, name).value = rng.choice(options(name))
            shown = _pixels(app)
            app.canvas.draw()  # a full draw of the same state
            assert np.array_equal(shown, _pixels(app)), f"move {move}: {name}"
            if rng.random() < 0.75 and app.preparing is not None:
                await app.preparing

    import distlab.widgets.common as common

    rest, common.PREPARE_AFTER_S = common.PREPARE_AFTER_S, 0.0
    try:
        asyncio.run(session())
    finally:
        common.PREPARE_AFTER_S = rest
        app.close()
