"""The frames the apps send (widgets/canvas.py): the PNG frame equals matplotlib's, a blitted picture shows exactly
what a full draw shows, and no control of any app draws in full (issue 19's speed work must not change a pixel)."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from PIL import Image
from lesson_apps import lesson_apps as _lesson_apps


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


@settings(max_examples=60, deadline=None)
@given(
    height=st.integers(1, 40),
    width=st.integers(1, 40),
    seed=st.integers(0, 2**32 - 1),
    step=st.sampled_from([1, 2]),
)
def test_encode_png_is_read_back_by_an_independent_decoder(height, width, seed, step):
    # Pillow's PNG decoder (an independent implementation) reads back every pixel our encoder wrote, for any size and
    # for a strided view (a slice of a frame); the file is 8-bit RGBA (IHDR: colour type 6), its size in its header
    from distlab.widgets.canvas import PNG_SIGNATURE, encode_png

    full = np.random.default_rng(seed).integers(0, 256, (height * step, width * step, 4), dtype=np.uint8)
    rgba = full[::step, ::step]
    png = encode_png(rgba)
    assert png.startswith(PNG_SIGNATURE) and png[12:16] == b"IHDR"
    assert int.from_bytes(png[16:20], "big") == width and int.from_bytes(png[20:24], "big") == height
    assert png[24:26] == bytes([8, 6])
    image = Image.open(io.BytesIO(png))
    assert image.mode == "RGBA" and np.array_equal(np.asarray(image), rgba)


def _offered(widget) -> list:
    """Every value a selection control offers; an integer slider's every value; a float slider's or a number box's
    ends and seven values between them."""
    import ipywidgets as widgets

    if hasattr(widget, "options"):
        return [o[1] if isinstance(o, tuple) else o for o in widget.options]
    if isinstance(widget, widgets.Checkbox):
        return [False, True]
    if isinstance(widget, widgets.IntSlider):
        return list(range(widget.min, widget.max + 1, widget.step))
    low, high = widget.min, widget.max
    return sorted({low, high, *(round(low + (high - low) * k / 8, 6) for k in range(1, 8))})


def _fixed_axes_cases():
    from distlab.widgets.data_parallel_zero import OverlapApp
    from distlab.widgets.mixture_of_experts import AllToAllApp
    from distlab.widgets.pipeline import StageAnalysisApp
    from distlab.widgets.production import ProductionStepApp
    from distlab.widgets.training_at_scale import ScheduleApp

    return [
        (ProductionStepApp, ("nodes", "fabric", "tp", "pp", "oversubscription", "rail", "precision", "slow", "jitter")),
        (ScheduleApp, ("kind", "stages", "microbatches", "backward", "weight")),
        (AllToAllApp, ("ep", "experts_per_gpu", "top_k", "capacity")),
        (OverlapApp, ("model", "fabric", "gpus", "buckets", "backward_ms")),
        (StageAnalysisApp, ("stages", "micro_batch_size", "model", "kind", "link", "microbatches", "layer_time")),
    ]


def _assert_shown_inside(app) -> None:
    """The data inside the range the drawn ticks label, and the ticks inside the axes."""
    from distlab.widgets.data_parallel_zero import OverlapApp
    from distlab.widgets.mixture_of_experts import AllToAllApp
    from distlab.widgets.production import ProductionStepApp

    if app.result is None:  # our message instead (a layer time of 0): the last picture, faded
        assert app.error
        return
    if isinstance(app, ProductionStepApp):  # each bar ends inside the time range (s) the ticks label
        ends = [r.get_x() + r.get_width() for rects in app.bars.rects.values() for r in rects if r.get_visible()]
        assert max(ends, default=0.0) <= 1.0 + 1e-9
        if app.result.healthy.feasible:  # a layout that cannot run draws no bar (issue 31): nothing to range
            assert app.result.step_time_s <= app.bars.x_max
        else:
            assert not ends or app.reference.feasible  # only the non-blocking bf16 bar may remain
        for drawn in [app.bars.ticks]:
            assert drawn.fractions and all(0.0 <= f <= 1.0 for f in drawn.fractions)
        return
    if isinstance(app, AllToAllApp):  # every GPU of the group has its row, column and bar
        ep = app.result.ep
        assert np.asarray(app.matrix.image.get_array()).shape == (ep, ep)
        assert sum(bar.get_visible() for bar in app.loads.kept) == ep
        ticks = [*app.matrix.ticks, app.loads.ticks]
    elif isinstance(app, OverlapApp):  # the last all-reduce and the backward end inside the range (ms)
        t = app.result
        assert max(t.backward_s, float(np.max(t.end_s))) * 1e3 <= app.chart.x_max
        ticks = [app.chart.ticks]
    else:  # the stage analysis: the step inside the grid's range
        assert app.grid.pixels.step_time <= app.grid.pixels.x_max
        ticks = [app.grid.ticks]
    for drawn in ticks:
        assert drawn.fractions and all(0.0 <= f <= 1.0 for f in drawn.fractions)


@pytest.mark.parametrize("app_class, names", _fixed_axes_cases(), ids=lambda c: getattr(c, "__name__", ""))
def test_apps_with_drawn_ticks_never_redraw_in_full_and_blit_what_a_full_draw_paints(app_class, names):
    # issue 19: these apps' axes keep fixed limits and draw their changing ticks (the EP group's GPU numbers, the
    # time range) as animated artists (plots/_ticks.py), so every offered value of every control they name is a
    # blit: no full draw, the axes state never changes, and the blitted picture is pixel for pixel a full draw's
    from distlab.widgets.common import axes_state

    app = _ready(app_class())
    state = axes_state(app.fig)
    draws = []
    original = app.canvas.draw
    app.canvas.draw = lambda: (draws.append(1), original())[1]
    for name in names:
        widget = getattr(app, name)
        first = widget.value
        for value in _offered(widget):
            widget.value = value
            assert draws == [], f"{name}={value!r}: a full draw"
            assert axes_state(app.fig) == state, f"{name}={value!r}: the axes changed"
            _assert_shown_inside(app)
            blitted = _pixels(app)
            original()
            assert np.array_equal(blitted, _pixels(app)), f"{name}={value!r}"
        widget.value = first
    app.close()


def _session_apps():
    from distlab.widgets.data_parallel_zero import OverlapApp
    from distlab.widgets.mixture_of_experts import AllToAllApp
    from distlab.widgets.pipeline import StageAnalysisApp
    from distlab.widgets.production import BucketApp, ProductionStepApp

    return [ProductionStepApp, StageAnalysisApp, BucketApp, OverlapApp, AllToAllApp]


@pytest.mark.parametrize("app_class", _session_apps(), ids=lambda c: c.__name__)
def test_a_kernel_session_with_prepared_neighbours_shows_what_a_full_draw_shows(app_class):
    # a seeded student: a dozen moves of random controls to random values, pausing (the neighbours prepared) after
    # most; after each move the picture shown must be what a full draw of that state paints, whatever the idle
    # turns computed before (some ranges are kept by history: a fresh app is no reference)
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


def _controls(app) -> dict:
    """{attribute: widget} of the app's value widgets a student changes (inside its tree; not text outputs)."""
    import ipywidgets as widgets

    def walk(widget, out):
        out.append(id(widget))
        for child in getattr(widget, "children", ()) or ():
            walk(child, out)
        return out

    inside = set(walk(app, []))
    return {
        name: w
        for name, w in vars(app).items()
        if not name.startswith("_")
        and id(w) in inside
        and w is not app
        and isinstance(w, widgets.ValueWidget)
        and not isinstance(w, (widgets.HTML, widgets.HTMLMath, widgets.Label))
    }


@pytest.mark.parametrize("app_class", _lesson_apps(), ids=lambda c: c.__name__)
def test_no_control_of_any_app_redraws_its_axes(app_class):
    # issue 19: every control of every lesson app drawn with matplotlib is a blit at every value it offers (up to
    # twelve spread over a long slider): the axes keep fixed limits (or draw their changing ticks), so no value
    # costs a full redraw, in a kernel or in a script. An app drawn in the browser has no matplotlib axes at all.
    from distlab.widgets.browser import BrowserPicture

    app = app_class()
    if not hasattr(app, "canvas"):  # drawn in the browser: no matplotlib axes at all, a picture widget instead
        assert not hasattr(app, "fig")
        assert any(isinstance(w, BrowserPicture) for w in vars(app).values())
        app.close()
        return
    _ready(app)
    draws = []
    original = app.canvas.draw
    app.canvas.draw = lambda: (draws.append(1), original())[1]
    for name, widget in _controls(app).items():
        values = _offered(widget)
        values = [values[round(k * (len(values) - 1) / 11)] for k in range(12)] if len(values) > 12 else values
        first = widget.value
        for value in values:
            if getattr(widget, "disabled", False):
                break
            widget.value = value
            assert draws == [], f"{name}={value!r}: a full draw"
        widget.value = first
    app.close()
