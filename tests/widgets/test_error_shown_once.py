"""Our message on invalid input is shown once, where the result would be, with no empty picture above it.

Issue 31 ("errors print twice above blank space", lessons 1, 4, 6): a browser picture wrote "Cannot compute: ..."
under its canvas, the status panel under the picture wrote it again, and the canvas above both stayed on the page,
empty or faded. Every lesson app is put in an invalid state a student can reach with its own controls (INVALID),
and what the app shows is read: its picture's text and status panel (LessonApp.shown_texts), every other text
widget, and whether its picture is shown (LessonApp.picture_shown: a browser picture hides its canvas at a position
with our message, browser_js/common.js; a matplotlib canvas is hidden).
"""

from __future__ import annotations

import html
import re

import ipywidgets as widgets
import pytest

from distlab.lessons import LESSONS

#: An invalid state of each app, reached by setting its controls (attribute, value) in this order; each found by
#: trying the values the controls offer, one control then pairs of them (the error each gives in the comment).
INVALID = {
    # custom model of -1 B parameters: "size (B) must be a positive number of billions of parameters"
    "MemoryWallApp": [("model", "custom size"), ("custom_params", -1.0)],
    "ZeroMemoryApp": [("model", "custom size"), ("custom_params", -1.0)],
    # a size that is no quantity: "size='abc' is not a quantity distlab can read"
    "RingAllReduceApp": [("size", "abc")],
    # interleaved 1F1B with 8 microbatches on 3 stages: "needs microbatches to be a multiple of stages"
    "BubbleGridApp": [("kind", "interleaved"), ("stages", 3)],
    # "layer_time must be positive"
    "StageAnalysisApp": [("layer_time", -1.0)],
    # 9 x 15 x 4 = 540 GPUs: "the grid draws at most 512"
    "MeshApp": [("dp", 9), ("tp", 15)],
    # 1 node at pp 16: "tp x pp = 4 x 16 = 64 is more than the cluster's 8 GPUs" (the lab no longer offers a ZeRO stage
    # its memory recipe refuses, the error this case used before)
    "TrainingLabApp": [("nodes", 1), ("pp", 16)],
    # built, not reached (its controls no longer offer these values, review v21): tp 8 x pp 8 on 4 nodes (32 GPUs):
    # "is more than the cluster's 32 GPUs"
    "ProductionStepApp": {"nodes": 4, "pp": 8},
    # built: 64 nodes at tp 1: "global_batch=256 is not a multiple of dp x micro_batch_size"
    "TriageApp": {"nodes": 64, "tp": 1},
    # built: "top_k=8 must be a whole number from 1 to 4"
    "AllToAllApp": {"ep": 2, "top_k": 8},
    # zb-h1 with 8 microbatches on 9 stages: "needs microbatches >= stages"
    "ScheduleApp": [("kind", "zb-h1"), ("stages", 9)],
}
#: Apps with no invalid state their controls reach (each control's every offered value, and every pair of
#: controls' values, gives a result; their sliders are bounded and they have no text box): nothing to show.
NO_INVALID_STATE = {"OverlapApp", "BucketApp", "ImbalanceApp", "ContextApp", "CheckpointApp"}
#: Apps whose only invalid states were options now greyed out where they cannot apply, even when built with them
#: (reviews v20, v21): HSDP at 1 node, fp8 on an A100, a node limit above the EP group's span.
NO_INVALID_STATE |= {"FsdpApp", "TensorParallelApp", "PlacementApp"}


def _apps():
    seen = {}
    for lesson in LESSONS.values():
        for app in lesson.load_apps():
            seen.setdefault(app.__name__, app)
    return seen


APPS = _apps()


def _plain(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", re.sub(r"<br\s*/?>", "\n", markup)))


def _walk(widget):
    yield widget
    for child in getattr(widget, "children", ()) or ():
        yield from _walk(child)


def test_every_app_has_an_invalid_state_or_is_named_as_having_none():
    assert set(APPS) == set(INVALID) | NO_INVALID_STATE, set(APPS) ^ (set(INVALID) | NO_INVALID_STATE)
    assert not set(INVALID) & NO_INVALID_STATE


@pytest.mark.parametrize("name", sorted(INVALID))
def test_our_message_is_shown_once_with_no_empty_picture(name):
    app = APPS[name]()
    built = isinstance(INVALID[name], dict)  # a state the controls no longer reach: the app built in it
    steps = list(INVALID[name].items()) if built else INVALID[name]
    try:
        assert app.error is None and app.picture_shown(), "the default state has a result and a picture"
        if built:
            app.close()
            app = APPS[name](**INVALID[name])
        for attribute, value in [] if built else steps:
            getattr(app, attribute).value = value
        assert app.error, f"{INVALID[name]} gives no error"
        squash = lambda s: " ".join(s.split())  # noqa: E731
        message = squash(app.error)
        shown = [squash(t) for t in app.shown_texts()]
        others = [
            squash(_plain(w.value))
            for w in _walk(app)
            if isinstance(w, (widgets.HTML, widgets.HTMLMath, widgets.Label)) and w is not app.status
        ]
        count = sum(text.count(message) for text in shown + others)
        assert count == 1, f"our message is shown {count} times: {shown}"
        assert shown == [f"Cannot compute: {message}"], shown  # the message alone, where the result would be
        assert not app.picture_shown(), "an empty or faded picture stays above our message"
        # back to a valid state: the picture and its text come back, with no message left
        fresh = APPS[name]()
        for attribute, _ in reversed(steps):
            getattr(app, attribute).value = getattr(fresh, attribute).value
        fresh.close()
        assert app.error is None and app.picture_shown()
        assert not any("Cannot compute" in t for t in app.shown_texts())
    finally:
        fig = getattr(app, "fig", None)
        if fig is not None:
            import matplotlib.pyplot as plt

            plt.close(fig)
