"""Comm messages handled on a kernel subshell's thread (issue 32): JupyterLab 4.6's default commsOverSubshells
("perCommTarget") with ipykernel 7 hands a widget's comm messages to a subshell thread, while the frame cache paints
neighbours in idle turns of the main thread's event loop (distlab.widgets.framecache). Every comm message to a
widget of an app is handled under filling.APP_LOCK (LessonApp locks its widgets' comms): these tests deliver the
browser's message through the widget's comm (comm.handle_msg, what the kernel's comm manager calls) on a second
thread at a chosen moment of a paint, and check that the student sees what an app with no fill under way shows."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest
from blocked import run_until_blocked

from distlab.plots import _ticks
from distlab.widgets.data_parallel_zero import OverlapApp, ZeroMemoryApp
from distlab.widgets.mixture_of_experts import AllToAllApp, ImbalanceApp, PlacementApp
from distlab.widgets.pipeline import StageAnalysisApp
from distlab.widgets.prefetch import neighbour_jobs, state_key
from distlab.widgets.production import BucketApp, ProductionStepApp
from distlab.widgets.tensor_parallel import TensorParallelApp
from distlab.widgets.training_lab import TrainingLabApp
from distlab.widgets.training_at_scale import CheckpointApp, ContextApp, FsdpApp, ScheduleApp
from test_framecache import DEPENDENT, _ready  # the dependent-control cases and the browser-ready app, one home

PAINTED = [
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

#: The longest the paint lets a message on the other thread run before it goes on (s): with the comm locked the message
#: waits for the put-back instead, and run_until_blocked goes on as soon as it sees it waiting for the lock.
LET_RUN_S = 1.0


def _comm_message(data: dict) -> dict:
    """A comm_msg as the kernel's comm manager hands it to comm.handle_msg."""
    return {"content": {"comm_id": "", "data": data}, "buffers": []}


def _set_value(widget, value) -> dict:
    """What the browser sends when the student sets `widget` to `value` (ipywidgets 8: a selection sends its index)."""
    if hasattr(widget, "_options_labels"):
        state = {"index": list(widget._options_values).index(value)}
    else:
        state = {"value": value}
    return _comm_message({"method": "update", "state": state, "buffer_paths": []})


def _paint_first_neighbour(app, during_paint) -> None:
    """Paint the fill's first neighbour of `app` as the frame cache does in an idle turn, calling during_paint() once
    the neighbour is painted into the figure and before the put-back."""
    controls = app._frame_widgets()
    (_, painted), *_ = neighbour_jobs(controls, app.frame_state(), neighbour=app.frame_neighbour)
    paint = app.renderer.paint

    def paint_then(full):
        paint(full)
        during_paint()

    app.renderer.paint = paint_then
    steps = app.frame_steps(painted)
    next(steps)
    with pytest.raises(StopIteration) as done:
        next(steps)
    app.renderer.paint = paint
    assert done.value.value["png"] is not None  # the neighbour was painted (during_paint ran)


@pytest.mark.slow  # a paint of every frame-caching app: outside the fast tier (README)
@pytest.mark.parametrize("cls", PAINTED)
def test_a_draw_request_during_a_paint_sends_the_current_picture(cls):
    # ipympl's canvas draws when the browser asks ({"type": "draw"}, after a resize, a device-pixel-ratio change or
    # its first display: manager.handle_json -> canvas.draw(), which sends the frame). Arriving on a subshell's
    # thread while the main thread has painted a neighbour into the figure, unlocked, it drew the neighbour's
    # artists and sent that frame: the student saw the neighbour's picture under the current controls.
    app, plain = _ready(cls()), _ready(cls())
    current = app.canvas._last_buff.copy()
    request = threading.Thread(
        target=app.canvas.comm.handle_msg, args=(_comm_message({"method": "custom", "content": {"type": "draw"}}),)
    )

    def draw_requested():
        run_until_blocked(request, LET_RUN_S)

    _paint_first_neighbour(app, draw_requested)
    request.join()
    plain.canvas._handle_message(plain.canvas, {"type": "draw"}, [])  # the same request, no fill under way
    assert np.array_equal(plain.canvas._last_buff, current)  # a redraw of the current state: the same frame
    assert np.array_equal(app.canvas._last_buff, current)


# DEPENDENT (test_framecache): lesson 5's TP and lesson 10's EP re-offered as 1, 2, 4, 8 and moved to 8; ipywidgets'
# own pick in between is options[0] = 1, the state the student never picked
@pytest.mark.parametrize(("cls", "kwargs", "name", "value", "dependent", "options", "after"), DEPENDENT)
def test_an_observer_moving_a_dependent_control_during_a_paint_draws_no_state_the_student_never_picked(
    cls, kwargs, name, value, dependent, options, after
):
    # The moved control's observer re-offers the dependent control's options and moves it through replace_options,
    # which sets app._syncing so that the dependent control's observer does not redraw at ipywidgets' own pick in
    # between. Unlocked, the observer ran during the main thread's paint, whose put-back restored the app's attributes
    # as they were at the snapshot (no _syncing): the dependent observer then drew options[0] -- a state the student
    # never picked, sent to the browser -- before `after`. Only the state reached may be drawn.
    app = _ready(cls(**kwargs))
    moved, follower = getattr(app, name), getattr(app, dependent)
    drawn: list[tuple] = []
    app.frame_cache.observe(lambda change: drawn.append((moved.value, follower.value)), names="drawn")
    put_back = threading.Event()

    def in_between(change):  # replace_options: new options given, ipywidgets about to pick options[0]
        put_back.wait(timeout=2 * LET_RUN_S)

    follower.observe(in_between, names="_options_labels")
    change = threading.Thread(target=moved.comm.handle_msg, args=(_set_value(moved, value),))

    def change_arrives():  # as far as it goes: waiting for the comm's lock (locked), or for the put-back (unlocked)
        run_until_blocked(change, LET_RUN_S)

    _paint_first_neighbour(app, change_arrives)
    put_back.set()
    change.join()
    assert (moved.value, follower.value, tuple(follower.options)) == (value, after, options)
    assert drawn == [(value, after)]


#: (app, the control the student moves, its new value): the apps whose browser prefetch starts when a fill is done
#: (PrefetchingApp._prefetch: lessons 1-4; TrainingLabApp._prefetch: the training lab)
FILLED = [(ZeroMemoryApp, "model", "llama2-70b"), (TrainingLabApp, "fabric", "ib-hdr")]


@pytest.mark.parametrize(("cls", "name", "value"), FILLED)
def test_a_prefetch_started_by_a_finished_fill_never_replaces_the_one_of_a_newer_change(cls, name, value):
    # A PrefetchingApp starts its browser prefetch when its fill of the picture's slider is done (the future's done
    # callback, PrefetchingApp._prefetch, in the loop that ran the fill: the main thread's, for the fill the cell that
    # built the app started). It checks its generation, reads the controls, then starts the prefetch, which abandons
    # any other. Unlocked, a student's change handled on a subshell's thread in between (with its own fill and
    # prefetch, in that thread's loop) was overtaken: the main thread then sent the OLD state's prefetch_base last
    # and priced its neighbours, abandoning the new state's -- the browser held none of the current state's
    # neighbours. The last prefetch_base sent must be the state the student reached.
    app = cls()
    bases: list[str] = []
    send = app.picture.send

    def recording(msg, buffers=None):
        if "prefetch_base" in msg:
            bases.append(msg["prefetch_base"])
        send(msg, buffers)

    app.picture.send = recording

    async def student_moves_a_control():  # the subshell's thread, with its own event loop
        control = getattr(app, name)
        control.comm.handle_msg(_set_value(control, value))
        while app.filling is not None and not app.filling.done():
            await asyncio.sleep(0)
        await asyncio.sleep(0)  # the fill's done callback: the new state's prefetch starts
        await asyncio.sleep(0)

    change = threading.Thread(target=asyncio.run, args=(student_moves_a_control(),))
    state = app.state

    def read_then_a_change_arrives():
        now = state()
        if not change.is_alive() and change.ident is None:
            run_until_blocked(change, LET_RUN_S)
        return now

    app.state = read_then_a_change_arrives

    async def fill_done():  # the main thread's loop: the cell's fill has just ended
        app._prefetch(app._generation)

    asyncio.run(fill_done())
    change.join()
    app.state = state
    assert getattr(app, name).value == value
    controls = app._controls if cls is TrainingLabApp else [getattr(app, other) for other in app.PREFETCH_CONTROLS]
    assert bases[-1] == state_key(controls)


class _TableLettingAnotherThreadEvict(dict):
    """A module table whose first eviction lets `other` (a thread) run as far as it can first: the interpreter may
    switch threads between reading the oldest key and removing it."""

    other: threading.Thread | None = None

    def pop(self, key, *default):
        other, self.other = self.other, None
        if other is not None:
            run_until_blocked(other, LET_RUN_S)
        return super().pop(key, *default)


def test_two_threads_adding_tick_labels_to_a_full_table_never_raise(monkeypatch):
    # Drawn tick labels are rasterised once into a module table (plots._ticks._SPRITES, bounded: the oldest evicted).
    # A cell building an app (the main thread, outside APP_LOCK: DrawnTicks.remember, drawn_ticks' measuring) and an
    # app drawing on a kernel subshell's thread both add labels; unlocked, both evicted the same oldest label and the
    # second removal raised a bare KeyError. Here the table is full (2 of 2) and the other thread's label is added
    # between the first thread's read of the oldest key and its removal.
    table = _TableLettingAnotherThreadEvict({("old", 1.0, "#000", 72.0): None, ("older", 1.0, "#000", 72.0): None})
    monkeypatch.setattr(_ticks, "_SPRITES", table)
    monkeypatch.setattr(_ticks, "_SPRITES_KEPT", 2)
    other = table.other = threading.Thread(target=_ticks._sprite, args=("8", 10.0, "#000000", 72.0))
    _ticks._sprite("16", 10.0, "#000000", 72.0)
    other.join()
    assert set(table) == {("16", 10.0, "#000000", 72.0), ("8", 10.0, "#000000", 72.0)}
