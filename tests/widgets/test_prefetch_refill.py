"""The kernel's side of a second change during the refill (issue 32, distlab.widgets.prefetch): each map names the
keys from which a change straight back reaches its base ("home"), the base's own payload comes with the fill, and the
map names each browser page's count of the student's changes the kernel has seen ("seen": {view: count}, carried by
each change's own message as "<view>:<count>": prefetch.CHANGE_COUNT), which browser_js/prefetch.js uses to replay the
changes still in flight."""

from __future__ import annotations

import asyncio

from distlab.widgets.controls import neighbour_steps
from distlab.widgets.data_parallel_zero import OverlapApp
from distlab.widgets.memory_wall import MemoryWallApp
from distlab.widgets.prefetch import (
    CHANGE_COUNT,
    REACH,
    SEEN_VIEWS,
    browser_count,
    home_keys,
    neighbour_jobs,
    values_key,
)
from distlab.widgets.production import TriageApp
from distlab.widgets.tensor_parallel import TensorParallelApp


def _moved_and_back(cls, kwargs: dict) -> set:
    """The keys of the states 1 to REACH steps along one control from which a change straight back to the control's
    value reaches the same state, found by moving a real app (its own observers move the dependent controls) along
    the path one step at a time and straight back."""
    app = cls(**kwargs)
    controls = app._frame_widgets()
    base = app.frame_state()
    home = set()
    for name, widget in controls.items():
        for path in neighbour_steps(widget, REACH):
            for value in path:
                getattr(app, name).value = value
            getattr(app, name).value = base[name]
            if app.frame_state() == base:
                home.add(values_key(controls, {**base, name: path[-1]}))
            else:  # a control stays moved: start again from the state as built
                app.close()
                app = cls(**kwargs)
    app.close()
    return home


def test_home_keys_are_the_states_a_change_straight_back_returns_from():
    # lesson 5's layer at TP 32 over InfiniBand: a change of link to NVLink moves TP to a node's 8 GPUs (tp_after),
    # and back on InfiniBand TP stays 8: not home; a change of sequence length moves nothing else: home
    kwargs = {"tp": 32, "link": "ib-ndr"}
    app = TensorParallelApp(**kwargs)
    controls = app._frame_widgets()
    jobs = neighbour_jobs(controls, app.frame_state(), neighbour=app.frame_neighbour, marked=True)
    home = home_keys(controls, app.frame_state(), jobs, app.frame_neighbour)
    keys = {key for key, _ in jobs}
    expected = _moved_and_back(TensorParallelApp, kwargs) & keys
    assert set(home) == expected
    assert 0 < len(home) < len(keys)  # both kinds occur here
    link = list(controls).index("link")
    assert any(key.split("\x1f")[link] != "ib-ndr" and key not in home for key in keys)
    app.close()


class _Comm:
    """A stand-in for a widget's comm: the picture counts as shown (Prefetcher.start_around needs one)."""

    comm_id = "stand-in"

    def send(self, *args, **kwargs):
        pass

    def on_msg(self, *args):
        pass

    def close(self, *args, **kwargs):
        pass


def _browser_message(widget, value, count: str) -> dict:
    """The comm message the browser sends when the student sets `widget` to `value`, with the page's count of the
    student's changes ("<view>:<count>") set on the control's model just before (browser_js/prefetch.js)."""
    state = {"index": list(widget._options_values).index(value), CHANGE_COUNT: count}
    return {"content": {"data": {"method": "update", "state": state, "buffer_paths": []}}, "buffers": []}


def test_each_map_names_the_count_the_last_browser_change_carried_and_the_base_payload_follows():
    # a frame-cached app (its map sent within the change's own handling), a browser picture (its map sent turns
    # later, after the fill of the other positions) and the triage ladder (its own fill): each names the count the
    # change carried (7, 8, 9, under the page's id), and each
    # fill carries the base's own payload under the base's key
    async def run(app, picture, control, value, count, first=None):
        sent: list = []
        picture.comm = _Comm()
        picture.send = lambda msg, buffers=None: sent.append(msg)
        widget = getattr(app, control)
        if first is not None:  # an earlier change, from another page: (value, count)
            widget._handle_msg(_browser_message(widget, *first))
        widget._handle_msg(_browser_message(widget, value, count))
        # the fill's future (the triage ladder: its preparation's)
        done = (lambda: app.preparing) if isinstance(app, TriageApp) else (lambda: app.prefetcher.future)
        while done() is None or not done().done():
            await asyncio.sleep(0)
        assert not hasattr(widget, CHANGE_COUNT)  # no trait, nothing set on the widget
        maps = [m for m in sent if m.get("prefetch_base")]
        base = maps[-1]["prefetch_base"]
        payloads = [m for m in sent if "prefetch" in m and m["fill"] == maps[-1]["fill"]]
        # each home state's own message says so (a view made after the map learns it there)
        assert {m["prefetch"] for m in payloads if m.get("home")} == set(maps[-1]["home"])
        assert maps[-1]["home"]  # every app here has some
        app.close()
        return maps[-1]["seen"], base in [m["prefetch"] for m in payloads], base in maps[-1]["expect"]

    overlap = OverlapApp()
    overlap.canvas._handle_message(overlap.canvas, {"type": "initialized"}, [])
    assert asyncio.run(run(overlap, overlap.frame_cache, "model", "llama2-13b", "p1:7")) == ({"p1": 7}, True, True)
    wall = MemoryWallApp(model="llama2-7b", gpus=8, zero=3, activations=True)
    assert asyncio.run(run(wall, wall.picture, "model", "llama2-13b", "p1:8")) == ({"p1": 8}, True, True)
    triage = TriageApp()  # its own fill (prepare_neighbours), the same messages
    other = next(v for v in triage.model._options_values if v != triage.model.value)
    assert asyncio.run(run(triage, triage.picture, "model", other, "p1:9")) == ({"p1": 9}, True, True)
    # two pages on one kernel (two browser tabs): page p1's third change, then page p2's first; the map names both
    # counts, each page's own (before: one count, the last change's, 1: page p1, with 3 changes all seen, took its
    # third for one still in flight and declined to answer from the cache until a map after its own next change)
    for app, picture, control in (
        (MemoryWallApp(model="llama2-7b", gpus=8, zero=3, activations=True), "picture", "model"),
        (TriageApp(), "picture", "model"),
    ):
        values = [v for v in getattr(app, control)._options_values if v != getattr(app, control).value][:2]
        seen, *_ = asyncio.run(run(app, getattr(app, picture), control, values[1], "p2:1", (values[0], "p1:3")))
        assert seen == {"p1": 3, "p2": 1}


class _Control:
    """A control while a change from the browser is handled: the page's count held in its _property_lock."""

    def __init__(self, value) -> None:
        self._property_lock = {CHANGE_COUNT: value}


def test_browser_count_keeps_each_pages_count_and_only_the_latest_pages():
    # each page's own entry, the latest change's count for it; a value without a page id or count changes nothing
    assert browser_count([_Control("p1:3")], {"p2": 1}) == {"p2": 1, "p1": 3}
    assert browser_count([_Control("p2:2")], {"p2": 1, "p1": 3}) == {"p1": 3, "p2": 2}
    for bad in (3, "3", ":3", "p1:", "p1:x", None, True):
        assert browser_count([_Control(bad)], {"p1": 3}) == {"p1": 3}
    # pages p0 .. p19 (a page reloaded is a new one), each with one change: the last SEEN_VIEWS = 16 kept, p4 .. p19
    seen: dict = {}
    for k in range(20):
        seen = browser_count([_Control(f"p{k}:1")], seen)
    assert list(seen) == [f"p{k}" for k in range(4, 20)]
    assert SEEN_VIEWS == 16
