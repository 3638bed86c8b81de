"""The browser's cache keeps the states of older neighbourhoods (issue 32: a second change soon after the first finds its
state), so what it serves under a key must never depend on an input the key does not show. Every app whose pictures
the browser caches, every input widget it has: a change of it changes the id of the full state the kernel prices
(prefetch.state_id, under which the browser holds payloads); a change of a keyed control changes the browser's key;
and a change of an input the key does not show (a text box: the ring's size, lessons 1 and 3's custom size) reaches
the kernel, which tells the browser at once to answer nothing from its cache until the new neighbourhood is named."""

from __future__ import annotations

import asyncio

import anywidget
import ipywidgets as widgets
import pytest

from distlab.widgets import (
    collectives,
    data_parallel_zero,
    memory_wall,
    mixture_of_experts,
    parallelism_3d,
    pipeline,
    production,
    tensor_parallel,
    training_at_scale,
    training_lab,
)
from distlab.widgets.common import neighbour_values
from distlab.widgets.framecache import FrameCachingApp
from distlab.widgets.prefetch import state_id, state_key

MODULES = (
    collectives,
    data_parallel_zero,
    memory_wall,
    mixture_of_experts,
    parallelism_3d,
    pipeline,
    production,
    tensor_parallel,
    training_at_scale,
    training_lab,
)
APPS = {cls.__name__: cls for module in MODULES for cls in module.APPS}
#: the inputs the browser's key does not show, by app (each is in the state the kernel prices)
UNKEYED = {
    "RingAllReduceApp": {"size M"},
    "ZeroMemoryApp": {"size (B)"},
    "MemoryWallApp": {"size (B)"},
}


def _inputs(widget, found: list) -> list:
    """The input widgets inside `widget` (not the browser pictures, whose own slider's positions are all in a payload)."""
    if isinstance(widget, anywidget.AnyWidget):
        return found
    if isinstance(widget, widgets.Box):
        for child in widget.children:
            _inputs(child, found)
    elif isinstance(widget, widgets.ValueWidget) and not isinstance(widget, (widgets.HTML, widgets.HTMLMath)):
        found.append(widget)
    return found


def _keyed(app) -> list:
    """The controls whose labels make the browser's key."""
    if isinstance(app, FrameCachingApp):
        return [getattr(app, name) for name in app.frame_controls()]
    return list(app.picture.controls)


def _priced(app) -> dict:
    """The full state the kernel prices and sends under its id (prefetch.state_id)."""
    if isinstance(app, FrameCachingApp):
        return app.frame_state()
    if isinstance(app, production.TriageApp):  # LessonApp.prepare_neighbours: the prepared controls' values
        return app.values()
    return app.state()


def _other_value(widget):
    """A value of `widget` other than its own that a student can set: a neighbouring one, else another option, else
    (a text box) a different text."""
    near = neighbour_values(widget)
    if near:
        return near[0]
    if hasattr(widget, "options"):
        values = [o[1] if isinstance(o, tuple) else o for o in widget.options]
        return next(v for v in values if v != widget.value)
    if isinstance(widget.value, float):  # a number box, or a log slider (no neighbours yet): within its range
        return widget.value * 1.5 if isinstance(widget, widgets.FloatLogSlider) else widget.value + 1.0
    return widget.value + "0"  # a text box: our message there, still another state


@pytest.mark.parametrize("name", sorted(APPS))
def test_every_input_is_in_the_priced_state_and_every_keyed_control_in_the_key(name):
    app = APPS[name]()
    inputs = _inputs(app, [])
    keyed = _keyed(app)
    assert inputs
    unkeyed = {w.description for w in inputs if not any(w is k for k in keyed)}
    assert unkeyed == UNKEYED.get(name, set())
    assert all(any(k is w for w in inputs) for k in keyed)  # no keyed control outside the app
    for widget in inputs:  # a disabled one too (lessons 1 and 3's size box): the kernel enables it later
        before_id, before_key = state_id(_priced(app)), state_key(keyed)
        widget.value = _other_value(widget)
        assert state_id(_priced(app)) != before_id, (name, widget.description)
        if widget.description not in UNKEYED.get(name, ()):
            assert state_key(keyed) != before_key, (name, widget.description)
    app.close()


@pytest.mark.parametrize("name", sorted(UNKEYED))
def test_a_change_the_key_does_not_show_empties_the_browsers_neighbourhood_at_once(name):
    # inside an event loop (as in a kernel): the first message to the picture after the text box changes names an
    # empty neighbourhood, so no change the browser makes meanwhile is answered from its cache
    async def run():
        app = APPS[name]()
        sent: list = []
        app.picture.send = lambda msg, buffers=None: sent.append(msg)
        (box,) = [w for w in _inputs(app, []) if w.description in UNKEYED[name]]
        if box.disabled:  # lessons 1 and 3: the size box is the custom model's
            app.model.value = next(v for v in app.model.options if "custom" in str(v))
            sent.clear()
        box.value = _other_value(box)
        app.close()
        return sent

    sent = asyncio.run(run())
    assert sent and sent[0] == {"prefetch_base": "", "limit": sent[0]["limit"], "expect": {}, "fill": sent[0]["fill"]}


@pytest.mark.parametrize("name", sorted(APPS))
def test_the_inputs_the_key_does_not_show_are_the_pictures_and_every_fill_names_their_values(name):
    # the browser answers a change only while these inputs hold the values the map was priced at (browser_js/
    # prefetch.js: a size typed and a dropdown clicked at once reach the kernel one after the other, the forget for
    # the size after the click has been looked up); inside an event loop, a fill after a new size names the new one
    async def run():
        app = APPS[name]()
        picture = getattr(app, "picture", None)
        told = list(getattr(picture, "inputs", None) or [])
        assert {w.description for w in told} == UNKEYED.get(name, set())
        if not told:
            app.close()
            return None, []
        (box,) = told
        sent: list = []
        app.picture.send = lambda msg, buffers=None: sent.append(msg)
        if box.disabled:  # lessons 1 and 3: the size box is the custom model's
            app.model.value = next(v for v in app.model.options if "custom" in str(v))
        box.value = _other_value(box)
        for _ in range(100_000):  # the fill's turns (the bars' apps price their GPU counts first)
            if any("prefetch" in m for m in sent) or (app.prefetcher.future and app.prefetcher.future.done()):
                break
            await asyncio.sleep(0)
        app.close()
        return box.value, sent

    value, sent = asyncio.run(run())
    if name in UNKEYED:
        named = [m for m in sent if m.get("prefetch_base") or "prefetch" in m]
        assert any("prefetch" in m for m in named) and any(m.get("prefetch_base") for m in named)
        assert all(m["inputs"] == [value] for m in named), [m.get("inputs") for m in named]


#: the apps whose kernel tells the browser to forget its neighbourhood at each change (prefetch.Prefetcher.forget)
FORGETTING = ("RingAllReduceApp", "MemoryWallApp", "ZeroMemoryApp", "BubbleGridApp", "MeshApp", "TrainingLabApp")


@pytest.mark.parametrize("name", FORGETTING)
def test_a_keyed_controls_change_lets_the_browser_keep_its_map_for_a_held_key(name):
    # inside an event loop (as in a kernel): the first message after a change of a keyed control is the empty
    # neighbourhood with "keep" (the browser's key shows that change, so its last map still names the states further
    # along that control: browser_js/prefetch.js); after a change of the picture's own slider (not keyed) it is not
    async def run():
        app = APPS[name]()
        sent: list = []
        app.picture.send = lambda msg, buffers=None: sent.append(msg)
        control = next(w for w in app.picture.controls if neighbour_values(w))
        control.value = neighbour_values(control)[0]
        keyed = sent[0]
        sent.clear()
        slider = app.picture
        positions = list(slider.options) if getattr(slider, "options", None) else [slider.min, slider.max]
        slider.value = next(v for v in positions if v != slider.value)
        app.close()
        return keyed, sent[0] if sent else None

    keyed, unkeyed = asyncio.run(run())
    assert keyed == {"prefetch_base": "", "limit": keyed["limit"], "expect": {}, "fill": keyed["fill"], "keep": True}
    if name == "TrainingLabApp":  # the lab's node slider forgets the neighbourhood (its batches move), without keep
        assert unkeyed == {"prefetch_base": "", "limit": keyed["limit"], "expect": {}, "fill": unkeyed["fill"]}
