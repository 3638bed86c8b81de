"""The lesson apps' prefetch (issue 32: every control answered in the browser), app by app: the states one dropdown,
toggle or checkbox change away are computed in the kernel's idle turns and sent to the browser's cache; what is sent
for a state is what the app shows after that change; the caches are bounded; the fill never holds the kernel for
more than a turn, and a change into a prefetched state is shown complete at once."""

from __future__ import annotations

import asyncio
import random
import time

import numpy as np
import pytest

from distlab.widgets import prefetch
from distlab.widgets.collectives import RING_CONTROLS, RingAllReduceApp, ring_neighbour
from distlab.widgets.data_parallel_zero import PENDING as ZERO_PENDING
from distlab.widgets.data_parallel_zero import ZERO_CONTROLS, ZeroMemoryApp
from distlab.widgets.common import neighbour_values
from distlab.widgets.parallelism_3d import MESH_CONTROLS, MeshApp, mesh_neighbour
from distlab.widgets.parallelism_3d import PENDING as MESH_PENDING
from distlab.widgets.memory_wall import CONTROLS as WALL_CONTROLS
from distlab.widgets.memory_wall import PENDING as WALL_PENDING
from distlab.widgets.memory_wall import MemoryWallApp
from distlab.widgets.pipeline import GRID_CONTROLS, GRID_KERNEL_LIMIT, BubbleGridApp
from distlab.widgets.pipeline import PENDING as GRID_PENDING

#: app name -> (the app's class, its keyed controls, the text of a position still being computed, a control to change
#: in the event-loop test and its new value, the app's state after one change (None: only that value changes))
APPS = {
    "memory wall": (MemoryWallApp, WALL_CONTROLS, WALL_PENDING, ("precision", "fp32"), None),
    "ZeRO bars": (ZeroMemoryApp, ZERO_CONTROLS, ZERO_PENDING, ("fabric", "ib-xdr"), None),
    # the ring computes every step at once (no pending text): a new GPU count also resets the step slider
    "ring": (RingAllReduceApp, RING_CONTROLS, "pending", ("gpus", 5), ring_neighbour),
    # the grid: a new D, T or P also moves the pick slider's range and the canvas height
    "3D grid": (MeshApp, MESH_CONTROLS, MESH_PENDING, ("tp", 2), mesh_neighbour),
    # lesson 4's bubble grid: its payloads carry the ops as bytes (times, codes), sent as binary buffers
    "bubble grid": (BubbleGridApp, GRID_CONTROLS, GRID_PENDING, ("kind", "zb-h1"), None),
}
#: what every payload carries (a payload may carry more: the ring's slider range and step after a new GPU count)
DRAWN = ("summaries", "errors", "frames")


def _shown(app, keys=DRAWN) -> dict:
    """The picture's traits named in `keys`, as the kernel shows them now; for a payload's control_disabled, the
    disabled state of each control it names (lesson 4's chunks slider)."""
    p = app.picture
    value = {"summaries": list, "errors": list, "frames": dict}  # the rest as they are: min, max, value, height
    shown = {k: value.get(k, lambda v: v)(getattr(p, k)) for k in keys if k != "control_disabled"}
    if "control_disabled" in keys:
        named = [w.disabled for w in p.controls]
        shown["control_disabled"] = [None if d is None else named[i] for i, d in enumerate(keys["control_disabled"])]
    return shown


def _recording(sent: list):
    """A stand-in for picture.send that records each message, a payload's binary buffers put back in it under the
    names its "buffers" lists (as browser_js/prefetch.js does)."""

    def send(msg, buffers=None):
        if buffers:
            msg = {**msg, "payload": {**msg["payload"], **dict(zip(msg["buffers"], buffers))}}
            del msg["buffers"]
        sent.append(msg)

    return send


def _jobs(app, controls, neighbour, moved=None) -> list:
    return prefetch.neighbour_jobs({n: getattr(app, n) for n in controls}, app.state(), moved, neighbour)


def _walk(kind, controls, seed: int) -> tuple:
    """A reproducible random walk of three control changes from the app's default state: ((name, value) moves, the
    app walked; _app_after(kind, moves) builds the same app again, for an independent path)."""
    rng = random.Random(seed)
    app = kind()
    moves = []
    for _ in range(3):
        name = rng.choice([n for n in controls if neighbour_values(getattr(app, n))])
        moves.append((name, rng.choice(neighbour_values(getattr(app, name)))))
        getattr(app, name).value = moves[-1][1]
    return moves, app


def _app_after(kind, moves):
    app = kind()
    for name, value in moves:
        getattr(app, name).value = value
    return app


@pytest.mark.slow  # every neighbour of every app prefetched and moved to: outside the fast tier (README)
@pytest.mark.parametrize("name", list(APPS))
def test_prefetched_payload_is_what_the_app_shows_after_that_change(name):
    # an independent path: a second app walked to the same state, then the control really changed (the app's own
    # _on_change and fill, outside an event loop: every position at once); the payload the first app's prefetch
    # sent under that change's browser key must be the same summaries, errors and frames, none of them pending
    kind, controls, pending, _, neighbour = APPS[name]
    checked = 0
    for seed in (1, 2, 3):
        moves, app = _walk(kind, controls, seed)  # a new app and these moves, as _app_after builds `other` below
        sent: list = []
        app.picture.send = _recording(sent)  # the messages to the browser
        keyed = {n: getattr(app, n) for n in controls}
        jobs = _jobs(app, controls, neighbour)
        app.prefetcher.run_all("base", jobs)
        # the neighbourhood named first: each job's key and the id of the full state priced there
        expect = {key: prefetch.state_id(state) for key, state in jobs}
        fill = sent[0]["fill"]
        # and, where the picture has inputs the key does not show (a size box), their values the fill is priced at
        told = {"inputs": [w.value for w in app.picture.inputs]} if app.picture.inputs else {}
        base = {"prefetch_base": "base", "limit": prefetch.BROWSER_LIMIT, "expect": expect, "fill": fill}
        # run_all sends no base payload and no home keys; no change has come from a browser (seen: no page's count)
        assert sent[0] == {**base, "seen": {}, "home": [], **told}
        assert all(m["id"] == expect[m["prefetch"]] and m["fill"] == fill for m in sent[1:])
        assert all(m.get("inputs") == told.get("inputs") for m in sent[1:])
        payloads = {m["prefetch"]: m["payload"] for m in sent[1:]}
        assert len(payloads) == len(jobs) > 0
        rng = random.Random(seed)
        names = [n for n in controls if neighbour_values(getattr(app, n))]
        for control in rng.sample(names, min(4, len(names))):
            value = rng.choice(neighbour_values(getattr(app, control)))
            key = prefetch.state_key(list(keyed.values()), (getattr(app, control), value))
            other = _app_after(kind, moves)
            getattr(other, control).value = value
            assert set(DRAWN) <= set(payloads[key])
            assert payloads[key] == _shown(other, payloads[key]), (seed, moves, control, value)
            assert pending not in payloads[key]["summaries"]
            other.close()
            checked += 1
        app.close()
    assert checked >= 6


@pytest.mark.parametrize("name", list(APPS))
def test_the_browser_is_sent_no_more_states_than_it_holds(name):
    # one state per value 1 to REACH steps of each keyed control away: at most 2 REACH per control (REACH options
    # either side), all distinct keys, within the browser's limit; the picture's controls are the keyed ones, in the
    # key's order
    kind, controls, _, _, neighbour = APPS[name]
    app = kind()
    keyed = {n: getattr(app, n) for n in controls}
    jobs = _jobs(app, controls, neighbour)
    assert 0 < len(jobs) <= 2 * prefetch.REACH * len(controls) <= prefetch.BROWSER_LIMIT
    assert len({key for key, _ in jobs}) == len(jobs)
    assert list(app.picture.controls) == list(keyed.values())
    app.close()


@pytest.mark.slow  # every app's whole prefetch, timed turn by turn: outside the fast tier (README)
@pytest.mark.parametrize("name", list(APPS))
def test_no_prefetch_turn_holds_the_kernel_and_a_prefetched_change_is_shown_complete(name, own_heap):
    # inside an event loop (as in a kernel): a change starts the fill of the other positions, then the prefetch of
    # every neighbouring state, which takes many turns; a probe that yields to the loop meanwhile never waits long
    kind, controls, pending, (control, value), neighbour = APPS[name]

    async def run():
        app = kind()
        sent: list = []
        app.picture.send = _recording(sent)
        getattr(app, control).value = value
        # a turn's length as this thread's CPU time (the loop's work; a loaded machine's waits for a core are not
        # ours: under load 8 on 2 cores the wall clock read 0.15 s for turns of a few ms)
        longest, begin = 0.0, time.perf_counter()
        while app.prefetcher.future is None or not app.prefetcher.future.done():
            t = time.thread_time()
            await asyncio.sleep(0)
            longest = max(longest, time.thread_time() - t)
            assert time.perf_counter() - begin < 120
        keyed = {n: getattr(app, n) for n in controls}
        jobs = _jobs(app, controls, neighbour, getattr(app, control))
        # the browser told to answer nothing from its cache when the change arrived (an empty neighbourhood), then
        # the new neighbourhood when the fill starts; then each job, the changed control's own neighbours first
        here = prefetch.state_key(list(keyed.values()))
        assert [m["prefetch_base"] for m in sent[:2]] == ["", here]
        assert sent[0]["expect"] == {} and set(sent[1]["expect"]) == {key for key, _ in jobs} | {here}
        assert sent[0]["fill"] < sent[1]["fill"] == sent[2]["fill"]  # the browser takes the newer neighbourhood
        # each job, the changed control's own neighbours first, and the state itself after the nearest two
        # (prefetch.BASE_AFTER: a turn back to it is drawn from its payload, which is what the app shows now)
        order = [key for key, _ in jobs]
        order.insert(prefetch.BASE_AFTER, here)
        assert [m["prefetch"] for m in sent[2:]] == order
        assert sent[2]["prefetch"] == jobs[0][0] and jobs[0][1][control] != value
        assert _shown(app, sent[2 + prefetch.BASE_AFTER]["payload"]) == sent[2 + prefetch.BASE_AFTER]["payload"]
        # a change into a prefetched state: every position shown at once, in the change's own turn
        other, to = next((n, v) for n in controls if n != control for v in neighbour_values(getattr(app, n)))
        getattr(app, other).value = to
        assert pending not in app.picture.summaries and getattr(app, "filling", None) is None
        payload = next(m["payload"] for m in sent if m.get("prefetch") == prefetch.state_key(list(keyed.values())))
        assert _shown(app, payload) == payload
        app.close()
        return longest

    longest = asyncio.run(run())
    assert longest < 0.15, f"a turn held the loop for {longest:.3f} s of CPU"


def test_the_triage_ladder_prepares_its_neighbours_from_the_next_turn():
    # lesson 8b's ladder has no slider to drag, so nothing waits for the controls to rest (PREPARE_AFTER_S): the
    # preparation of the neighbours is scheduled with no delay, and the browser's cache is refilled before a second
    # change 0.1 s later (the browser benchmark's "during the refill" row)
    from distlab.widgets.common import PREPARE_AFTER_S
    from distlab.widgets.production import TriageApp

    async def run():
        loop = asyncio.get_running_loop()
        delays: list = []
        later = loop.call_later

        def recording(delay, callback, *args, **kwargs):
            delays.append(delay)
            return later(delay, callback, *args, **kwargs)

        app = TriageApp()
        app.picture.send = lambda msg: None
        loop.call_later = recording  # type: ignore[method-assign]
        try:
            app.zero.value = 1
        finally:
            loop.call_later = later  # type: ignore[method-assign]
        await app.preparing
        app.close()
        return delays

    assert PREPARE_AFTER_S > 0
    assert asyncio.run(run()) == [0.0]


def test_the_bubble_grid_sends_its_ops_as_binary_buffers_and_its_legend_in_the_payload():
    # lesson 4's payload: the ops as the picture's own bytes (float32 start/end pairs, uint8 stage/code pairs) in the
    # message's binary buffers, named in order; the JSON part holds no bytes. From interleaved the schedule toggle's
    # neighbours are 1F1B and ZB-H1 (pipeline.KINDS' order); ZB-H1 splits the backward into B and W: its payload's
    # codes include W ops (code // 2 = 2, browser.OP_KINDS) and its legend pair is [without W, with W], so the
    # browser draws the one naming W
    import json

    app = BubbleGridApp(kind="interleaved", stages=4, microbatches=8)
    calls: list = []
    app.picture.send = lambda msg, buffers=None: calls.append((msg, buffers))
    keyed = [getattr(app, n) for n in GRID_CONTROLS]
    app.prefetcher.run_all("base", _jobs(app, GRID_CONTROLS, None))
    key = prefetch.state_key(keyed, (app.kind, "zb-h1"))
    msg, buffers = next((m, b) for m, b in calls if m.get("prefetch") == key)
    json.dumps(msg)  # no bytes in the JSON part
    assert msg["buffers"] == ["times", "codes"] and all(isinstance(b, bytes) for b in buffers)
    other = BubbleGridApp(kind="zb-h1", stages=4, microbatches=8)
    assert buffers == [other.picture.times, other.picture.codes]
    codes = np.frombuffer(buffers[1], dtype=np.uint8)[1::2]
    assert np.any(codes // 2 == 2)
    without, with_w = msg["payload"]["frames"]["legend"]
    assert "weight gradient (W)" in with_w and "weight gradient (W)" not in without
    assert other.legend == with_w and app.legend == without
    app.close()
    other.close()


def test_the_bubble_grids_kernel_table_is_bounded():
    # every state whose 64 counts the app simulated is remembered (a change back is shown at once), the oldest
    # forgotten past GRID_KERNEL_LIMIT: 40 distinct states (stages 1..10 x B : F 1, 1.25, 1.5, 1.75) keep 32, the
    # last one among them and the first one not
    app = BubbleGridApp(kind="1f1b", stages=1, microbatches=8)
    first = app.state()
    states = 0
    for backward in (1.0, 1.25, 1.5, 1.75):
        app.backward.value = backward
        for p in range(1, 11):
            app.stages.value = p
            states += 1
    assert states == 40 and len(app.prefetcher.table) == GRID_KERNEL_LIMIT
    assert app.prefetcher.lookup(app.state()) is not None and app.prefetcher.lookup(first) is None
    app.close()


def test_the_bubble_grids_fill_never_holds_the_kernel_at_16_stages(own_heap):
    # the worst state the grid offers to simulate: ZB-V at p = 16, 64 counts of up to 6,144 ops each (about 0.6 s
    # of simulation per state). Its neighbours, by hand: schedule dualpipe and zb-h1, stages 15 (16 is the most),
    # B : F and W : F 0.75 and 1.25 each, model gpt3-175b and llama2-13b (either side of llama2-7b), recompute
    # selective (full is the last): 10, seven simulated again, three reusing the timelines (model, recompute); two
    # steps away (prefetch.REACH = 3): schedule dualpipe-v and interleaved, stages 14, B : F and W : F 0.5 and 1.5
    # each, model llama2-70b (gpt3-175b is the first), recompute none: 9 more, seven simulated, two reusing; three
    # steps away: schedule 1f1b (dualpipe-v is the last), stages 13, B : F and W : F 0.25 and 1.75 each, model
    # llama3.1-8b: 7 more, six simulated, one reusing (recompute has 3 options): 26 in all.
    # Each turn is one simulation past turn_deadline (~12 ms plus one simulation of <= ~35 ms), so a probe yielding
    # to the loop meanwhile never waits 0.1 s of the kernel's own CPU time (thread_time: on this shared 2-core
    # machine the wall time of a turn also counts the time other processes held the core)
    async def run():
        app = BubbleGridApp(kind="zb-v", stages=16, microbatches=32)
        app.picture.send = _recording([])
        app.recompute.value = "full"
        longest, begin = 0.0, time.perf_counter()
        while app.prefetcher.future is None or not app.prefetcher.future.done():
            t = time.thread_time()
            await asyncio.sleep(0)
            longest = max(longest, time.thread_time() - t)
            assert time.perf_counter() - begin < 300
        sent = len(app.prefetcher.sent)
        app.close()
        return longest, sent

    longest, sent = asyncio.run(run())
    assert sent == 26 + 1  # and the state itself (prefetch.BASE_AFTER)
    assert longest < 0.1, f"a turn held the loop for {longest:.3f} s of CPU"


def test_a_float_sliders_label_is_the_number_javascript_writes():
    # prefetch.js keys a slider by String(value): JavaScript writes 1.0 as "1" and 1.25 as "1.25" (ECMA-262's
    # Number::toString: the shortest digits that round-trip, no ".0"); Python's str(1.0) is "1.0", so lesson 4's
    # B : F and W : F keys missed the browser's cache
    import ipywidgets as widgets

    slider = widgets.FloatSlider(value=1.0, min=0.0, max=4.0, step=0.25)
    assert prefetch.control_label(slider) == "1"
    assert prefetch.control_label(slider, 1.25) == "1.25" and prefetch.control_label(slider, 0.0) == "0"
    assert prefetch.control_label(widgets.IntSlider(value=4)) == "4"


def test_a_small_or_large_floats_label_is_written_as_javascript_writes_it():
    # ECMA-262 Number::toString (https://tc39.es/ecma262/#sec-numeric-types-number-tostring): with k significant digits
    # and the point after n of them, plain notation for -6 < n <= 21, exponent notation ("e-7", "e+21") outside; Python's
    # repr switches at 1e-4 and 1e16. Lesson 11's failure rate (a log slider, 1e-7 to 1e-3 per GPU-hour) keyed
    # "2.3e-05" where the browser reads "0.000023", so none of that app's changes hit the browser's cache.
    import ipywidgets as widgets

    rate = widgets.FloatLogSlider(value=2.3e-05, base=10, min=-7, max=-3)
    # between its steps (log10 2.3e-5 = -4.64, steps of 0.1 from -7): "~" and the number, n = -4: "0." + four zeros
    # + "23" (a value on a step is keyed by its step position: test_log_slider_keys)
    assert prefetch.control_label(rate) == "~0.000023"
    cases = {
        5.01e-06: "0.00000501",  # n = -5, the smallest n written plain
        1e-06: "0.000001",
        1e-07: "1e-7",  # n = -6: exponent notation, no zero padding of the exponent
        1.5e-07: "1.5e-7",
        1e16: "10000000000000000",  # repr writes 1e+16; JavaScript writes plain up to n = 21
        1e21: "1e+21",  # n = 22
        123.456: "123.456",
        -0.003: "-0.003",
    }
    assert {v: prefetch.js_number(v) for v in cases} == cases


def test_the_grids_payloads_carry_the_chunks_sliders_disabled_state():
    # lesson 4: chunks v applies to the interleaved schedule only. From interleaved, the schedule toggle's neighbours
    # (1F1B, ZB-H1) disable it and a new stage count keeps it enabled; each payload carries what the app itself sets
    # after that change (a second app really changed), so the browser applies it with the cached change
    app = BubbleGridApp(kind="interleaved")
    sent: list = []
    app.picture.send = _recording(sent)
    app.prefetcher.run_all("base", _jobs(app, GRID_CONTROLS, None))
    chunks = GRID_CONTROLS.index("chunks")
    by_key = {m["prefetch"]: m["payload"]["control_disabled"] for m in sent[1:]}
    checked = []
    for name in ("kind", "stages"):
        for value in neighbour_values(getattr(app, name)):
            other = BubbleGridApp(kind="interleaved")
            getattr(other, name).value = value
            disabled = by_key[prefetch.state_key(list(app.picture.controls), (getattr(app, name), value))]
            assert disabled[chunks] is other.chunks.disabled
            assert [d for i, d in enumerate(disabled) if i != chunks] == [None] * (len(GRID_CONTROLS) - 1)
            checked.append((name, value, disabled[chunks]))
            other.close()
    assert ("kind", "1f1b", True) in checked and ("kind", "zb-h1", True) in checked
    assert any(name == "stages" and not disabled for name, _, disabled in checked)
    app.close()
