"""The kernel's neighbourhood up to REACH steps along each control (issue 32: a held arrow key or quick clicks outrun
the round trip; prefetch.REACH = 3), for every app whose pictures the browser caches: the key of each state two or more
steps away names the full state the app's own code reaches when the control is moved step by step
(dependent controls included: lesson 5's TP degree, lesson 10's EP size, the training lab's imbalance and chosen
batch), so the browser shows under it only the payload of that state; a state the app reaches otherwise by a jump
straight there (a dependent control that follows the path) is not keyed at all; and the +-1 ring comes first."""

from __future__ import annotations

import ipywidgets as widgets
import pytest

from test_prefetch_keys import APPS

from distlab.widgets import collectives, production, tensor_parallel, training_lab
from distlab.widgets.controls import neighbour_steps
from distlab.widgets.framecache import FrameCachingApp
from distlab.widgets.prefetch import REACH, neighbour_jobs, state_id, values_key

#: apps built where a control two steps along is a dependent control's path (the defaults sit at the end of the TP
#: and EP sliders): lesson 5's TP layer at tp = 32 over InfiniBand, whose link change moves the TP degree
EXTRA = {"TensorParallelApp at tp=32, ib-ndr": (tensor_parallel.TensorParallelApp, {"tp": 32, "link": "ib-ndr"})}
CASES = {**{name: (cls, {}) for name, cls in APPS.items()}, **EXTRA}


def _wiring(app):
    """(the keyed controls {name: widget}, the jobs the app's kernel sends now, a function giving the full state
    the kernel prices), as each kind of app wires its prefetch."""
    if isinstance(app, FrameCachingApp):  # FrameCachingApp.update
        controls = app._frame_widgets()
        return controls, neighbour_jobs(controls, app.frame_state(), neighbour=app.frame_neighbour), app.frame_state
    if isinstance(app, training_lab.TrainingLabApp):
        return {n: getattr(app, n) for n in training_lab.CONTROLS}, app.neighbour_jobs(), app.state
    if isinstance(app, production.TriageApp):  # TriageApp.prepare_neighbours
        controls = app._prefetched_controls()
        return controls, neighbour_jobs(controls, app.values()), app.values
    if isinstance(app, collectives.RingAllReduceApp):  # RingAllReduceApp._show
        controls = {n: getattr(app, n) for n in collectives.RING_CONTROLS}
        return controls, neighbour_jobs(controls, app.state(), neighbour=collectives.ring_neighbour), app.state
    controls = {n: getattr(app, n) for n in app.PREFETCH_CONTROLS}  # PrefetchingApp._prefetch
    return controls, neighbour_jobs(controls, app.state(), neighbour=app.prefetch_neighbour), app.state


def _comparable(state: dict) -> dict:
    # the ring's "fresh" marks the change that starts its picture at step 0 (ring_neighbour): part of the payload the
    # kernel sends, never of the app's state() (test_app_prefetch checks the payload the ring shows after a change)
    return {k: v for k, v in state.items() if k != "fresh"}


@pytest.mark.slow  # every key two steps away, moved to for real: outside the fast tier (README)
@pytest.mark.parametrize("name", sorted(CASES))
def test_every_key_two_steps_away_names_the_state_two_changes_reach(name):
    cls, kwargs = CASES[name]
    app = cls(**kwargs)
    controls, jobs, priced = _wiring(app)
    start, values = priced(), {n: w.value for n, w in controls.items()}
    keyed = dict(jobs)
    assert len(keyed) == len(jobs)  # no key twice
    # nearest first: every state one step away before any farther one (a single change is ready as soon as before)
    one = {values_key(controls, {**values, n: p[-1]}) for n, w in controls.items() for p in neighbour_steps(w, 1)}
    assert [key for key, _ in jobs[: len(one)]] == [key for key, _ in jobs if key in one]
    checked = skipped = 0
    for control in list(controls):
        for path in [p for p in neighbour_steps(controls[control], REACH) if len(p) > 1]:
            key = values_key(controls, {**values, control: path[-1]})
            widget = controls[control]  # the app's (a fresh one after a dependent control stayed moved)
            for value in path:  # the app's own observers, one change after the other
                widget.value = value
            reached = priced()
            if key in keyed:
                assert _comparable(keyed[key]) == _comparable(reached), (control, path)
                if not isinstance(app, FrameCachingApp):  # the frame cache's ids add its pixel geometry (context)
                    assert state_id(_comparable(keyed[key])) == state_id(_comparable(reached))
                checked += 1
            else:  # not keyed: a jump straight there must reach another state (the browser cannot tell them apart)
                other = cls(**kwargs)
                getattr(other, control).value = path[-1]
                assert _comparable(_wiring(other)[2]()) != _comparable(reached), (control, path)
                other.close()
                skipped += 1
            for value in [*reversed(path[:-1]), values[control]]:
                widget.value = value
            if priced() != start:  # a dependent control did not come back: a fresh app for the next control
                app.close()
                app = cls(**kwargs)
                controls, _, priced = _wiring(app)
    assert checked >= 1, name
    if name in EXTRA:
        assert skipped >= 1, name
    app.close()


def _option_lists():
    """Every option list of a control of a cached app (as the app builds it): its name and its option values."""
    found = {}
    for name, cls in sorted(APPS.items()):
        app = cls()
        controls = _wiring(app)[0]
        for control, widget in controls.items():
            if hasattr(widget, "options") and len(widget.options) > 1:
                values = tuple(o[1] if isinstance(o, tuple) else o for o in widget.options)
                found[f"{name}.{control}"] = (tuple(widget.options), values)
        app.close()
    return found


def test_every_option_is_a_neighbour_of_the_options_beside_it_none_included():
    # from option k a student's next step reaches option k + 1 and option k - 1 (where they exist), whatever their
    # values: a value of None is an option like any other (the training lab's "calibrated" compute, the all-to-all's
    # "dropless" capacity); a path never passes a value outside the list. Each option list of every cached app is
    # copied into a plain dropdown and stepped from every position.
    lists = _option_lists()
    assert any(None in values for _, values in lists.values())  # the case this guards is present
    for where, (options, values) in lists.items():
        box = widgets.Dropdown(options=options)
        for k in range(len(values)):
            box.index = k
            reached = {path[-1] for path in neighbour_steps(box, 1)}
            want = {values[j] for j in (k - 1, k + 1) if 0 <= j < len(values)}
            assert reached == want, (where, values[k])
            for path in neighbour_steps(box, REACH):
                assert all(v in values for v in path), (where, path)
