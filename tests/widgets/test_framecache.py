"""The frame cache of the matplotlib-drawn apps (distlab.widgets.framecache, issue 32): what the kernel sends for a
state one control change away is what the kernel draws and shows when the control really moves there, the current
picture is not touched by the fill, a fill turn holds the kernel for one neighbour at most, and an invalid neighbour
carries our message."""

from __future__ import annotations

import io
import random

import numpy as np
import pytest
from PIL import Image

from distlab.widgets.common import message_html
from distlab.widgets.data_parallel_zero import OverlapApp
from distlab.widgets.framecache import frame_pixels
from distlab.widgets.mixture_of_experts import AllToAllApp
from distlab.widgets.pipeline import StageAnalysisApp
from distlab.widgets.prefetch import SEPARATOR, neighbour_jobs, values_key
from distlab.widgets.production import BucketApp, ProductionStepApp

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
]
SAMPLED = 4  # neighbours moved to for real per case (a seeded random sample: each move redraws in the kernel)


def _ready(app):
    """The app as a browser shows it: ipympl sends frames (quick_frame), the first one whole."""
    app.canvas._handle_message(app.canvas, {"type": "initialized"}, [])
    app.fig.canvas.draw()
    return app


def _filled(app) -> dict:
    """Every neighbour's payload, as the kernel sends it to the browser: {browser key: (payload, buffers)}."""
    sent = []
    app.frame_cache.send = lambda msg, buffers=None: sent.append((msg, buffers))
    controls = app._frame_widgets()
    app.prefetcher.run_all(values_key(controls, app.frame_state()), neighbour_jobs(controls, app.frame_state()))
    return {msg["prefetch"]: (msg["payload"], buffers) for msg, buffers in sent if "prefetch" in msg}


def _texts(app) -> list:
    return [app.status.value, *(getattr(app, name).value for name in app.frame_texts)]


def _decoded(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGBA"))


@pytest.mark.parametrize(("cls", "kwargs"), CASES, ids=[f"{c.__name__}-{i}" for i, (c, _) in enumerate(CASES)])
def test_cached_frame_is_what_the_kernel_draws_there(cls, kwargs):
    app = _ready(cls(**kwargs))
    controls = app._frame_widgets()
    start = app.frame_state()
    pixels = frame_pixels(app.canvas)
    texts, display = _texts(app), app.canvas.layout.display
    jobs = neighbour_jobs(controls, start)
    for key, state in random.Random(f"{cls.__name__}{kwargs}").sample(jobs, min(SAMPLED, len(jobs))):
        payloads = _filled(app)  # as the kernel fills after each change
        assert sorted(payloads) == sorted(key for key, _ in jobs)
        # the fill sends nothing the student sees and leaves the current picture as it was (pixels compared)
        assert np.array_equal(frame_pixels(app.canvas), pixels)
        assert _texts(app) == texts and app.canvas.layout.display == display
        (name,) = [n for n in state if state[n] != start[n]]
        payload, buffers = payloads[key]
        getattr(app, name).value = state[name]  # the student really moves it: the kernel draws and sends
        assert values_key(controls, app.frame_state()) == key
        assert payload["texts"] == _texts(app), key.replace(SEPARATOR, "|")
        assert payload["shown"] == (app.canvas.layout.display != "none")
        if payload["shown"]:
            # the kernel's frame: the pixels ipympl sent last (quick_frame keeps them, diff frames composited)
            assert np.array_equal(_decoded(buffers[0]).view(np.uint32)[..., 0], app.canvas._last_buff)
        else:
            assert payload["png"] is None and not buffers
        getattr(app, name).value = start[name]  # the next fill starts here, after a real move there and back
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
    jobs = neighbour_jobs(controls, app.frame_state())
    step = app.prefetcher._turns(values_key(controls, app.frame_state()), jobs)
    per_turn = []
    more = True
    while more:
        before = len(sent)
        more = step()
        per_turn.append(len(sent) - before)
    assert max(per_turn) == 1 and sum(per_turn) == len(jobs) == 10  # 5 controls, 2 neighbours each


@pytest.mark.parametrize("cls", [OverlapApp, StageAnalysisApp, BucketApp, ProductionStepApp, AllToAllApp])
def test_an_app_filled_at_every_step_draws_what_an_app_never_filled_draws(cls):
    # the invariant the put-back keeps: a random walk of real moves (a neighbour of one control at a time) draws,
    # frame after frame, the same pixels and texts whether or not every neighbour was painted before each move
    filled, plain = _ready(cls()), _ready(cls())
    rng = random.Random(cls.__name__)
    for _ in range(8):
        _filled(filled)
        key, state = rng.choice(neighbour_jobs(filled._frame_widgets(), filled.frame_state()))
        for app in (filled, plain):
            for name, value in state.items():
                if getattr(app, name).value != value:
                    getattr(app, name).value = value
        assert np.array_equal(filled.canvas._last_buff, plain.canvas._last_buff), key.replace(SEPARATOR, "|")
        assert _texts(filled) == _texts(plain)
