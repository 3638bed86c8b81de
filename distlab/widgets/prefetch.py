"""The browser's cache of the states one control change away (issue 32: every control answered in the browser).

After each change an app's kernel computes, in idle turns of its event loop, the picture's data of every state one
change of one control away (each dropdown's and toggle's neighbouring options, a checkbox's other value), the
control just moved first, then of every state two and three steps along one control (REACH: a held arrow key or
quick clicks outrun the round trip), and sends each to the browser picture in a custom message as soon as it is ready. The
picture (browser_js/lab.js) keys them by the labels its control widgets show; a change whose state is there redraws
in the browser at once, with no round trip, and the kernel then confirms it (the same data) and refills around the
new state. A state not there falls back to the kernel, as before.

The browser keeps states across fills (keys name complete control states, so an older neighbourhood's pictures stay
right): its cache holds payloads by the id of the full state priced (state_id: every input, the hidden ones too, such
as the ring's size box or the training lab's chosen batch), and each fill's first message maps the browser keys of the
new neighbourhood to their ids ("expect"). A change is drawn from the cache only when its key is in that map and the
payload of that very id is held: a payload computed for another hidden input is never shown under the same labels.

A turn holds the kernel at most FILL_TURN_S plus one step of the app's generator (one node count, a few ms), so
the next message (the student's next key press) waits at most that long. The browser keeps the last BROWSER_LIMIT
states it was sent (least recently used first out, the current neighbourhood never), within a byte budget
(browser_js/prefetch.js); the kernel remembers the last KERNEL_LIMIT states it priced, so a change into one of them
is shown complete at once.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from .controls import ON_STEP, log_step, neighbour_steps
from .filling import APP_LOCK, event_loop_running, turn_deadline

__all__ = [
    "BROWSER_LIMIT",
    "KERNEL_LIMIT",
    "REACH",
    "control_label",
    "js_number",
    "log_slider_label",
    "state_key",
    "state_id",
    "values_key",
    "table_key",
    "neighbour_jobs",
    "without_via",
    "VIA",
    "CHANGE_COUNT",
    "SEEN_VIEWS",
    "BASE_AFTER",
    "home_keys",
    "browser_count",
    "Prefetcher",
]

#: States the browser holds, the latest neighbourhoods' (issue 32: a second change soon after the first finds its
#: state even before the kernel has refilled). A neighbourhood has at most 2 REACH = 6 states per control (the training
#: lab's 15 controls: 90), so 256 holds the last 2 or more neighbourhoods, the states around the path of the last
#: changes.
#: Payloads measured: the training lab's 11-12 kB, a frame-cache PNG 12-18 kB (at a device pixel ratio of 1), lesson
#: 4's grid 0.1-1 MB (64 timelines' ops; 1 MB at p = 16, v = 4): the browser also keeps them within a byte budget
#: (prefetch.js's BYTE_BUDGET, 64 MiB: every state of the neighbourhood, which is never dropped, and a few more).
BROWSER_LIMIT = 256
#: Steps of one control each way whose states the kernel sends (issue 32): a held arrow key (~30 ms a press) or quick
#: clicks outrun the round trip. A burst can only be answered from the neighbourhood filled before it: with 50 ms of
#: round trip and the kernel's update, the map of the state after a press arrives more than two presses later, and each
#: press abandons the fill under way (Prefetcher.forget), so a burst of k presses along one control is drawn from the
#: cache only when the kernel sent k steps each way. 3 answers a burst of three (about 90 ms: longer than the round trip
#: plus a redraw, after which the map around the first press is there); it triples a fill's payloads (at most 6 per
#: control: the training lab's 15 enabled controls 90 at most, a frame-cached app's 4-5 sliders and dropdowns 20-30
#: PNGs) and its time, the farther rings filled after the +-1 ring (a single change is ready as soon as before), each
#: turn bounded as before.
REACH = 3
#: States whose picture data the kernel remembers (a change into one is shown complete at once).
KERNEL_LIMIT = 128
#: Separates the labels of a browser key (no label of a control contains it).
SEPARATOR = "\x1f"
#: A marked state's entry naming the states passed on the way there (neighbour_jobs(marked=True)); no control's name.
VIA = "~via"
#: The attribute of a control's browser model that carries the browser's count of the student's changes, as
#: "<view>:<count>" (view: a random id of the browser page, so that two tabs on one kernel keep their own counts):
#: prefetch.js sets it with each change, so it travels in the change's own message (ipywidgets merges the changes made
#: while one is in flight into the next message: the latest count goes with them). The kernel's set_state ignores a
#: name that is no trait (nor echoes it to the other views) but holds it in the widget's _property_lock while the
#: change's observers run: Prefetcher.stop notes it, and each map names the last count seen from each view ("seen":
#: {view: count}): each browser then knows which of its own changes are still in flight.
CHANGE_COUNT = "_distlab_change"
#: The views whose counts a map names (the latest; a page reloaded is a new view)
SEEN_VIEWS = 16
#: Where the fill sends the base's own payload: after this many of the nearest states (the +-1 of the control just
#: moved). A turn back to the base (a -> b -> a) is answered from it before the map around b has come (home_keys).
BASE_AFTER = 2
_CURRENT = object()


def control_label(widget, value=_CURRENT) -> str:
    """What the browser's copy of `widget` shows at `value` (default: its value): a selection's option label (its
    model's _options_labels[index], which browser_js/prefetch.js reads), "1"/"0" for a checkbox, the number of a
    slider (as JavaScript's String writes an integer), or a log slider's step position (log_slider_label)."""
    value = widget.value if value is _CURRENT else value
    if isinstance(widget, widgets.FloatLogSlider):
        return log_slider_label(value, widget.min, widget.step, widget.base)
    if not hasattr(widget, "_options_labels"):
        if isinstance(value, bool):
            return "1" if value else "0"
        if isinstance(value, float):  # JavaScript's String: 1 for 1.0, 1.25 for 1.25 (a FloatSlider's steps)
            return js_number(value)
        return str(value)
    values = list(widget._options_values)
    k = next(i for i, v in enumerate(values) if v is value or (v is not None and value is not None and v == value))
    return str(widget._options_labels[k])


def log_slider_label(value: float, low: float, step: float, base: float) -> str:
    """A FloatLogSlider's label in the browser's key (browser_js/prefetch.js's logSliderLabel): its step position k
    (controls.log_step), which both sides compute exactly where the value itself differs in its last bits (noUiSlider
    steps the exponent in its own float arithmetic, Python's neighbour is base ** (min + k step)); "~" and the number
    (js_number) for a value between steps (lesson 11's default failure rate, 2.3e-5), which no step position names."""
    position = log_step(value, low, step, base)
    k = round(position)
    return str(k) if math.isfinite(position) and abs(position - k) < ON_STEP else "~" + js_number(value)


def js_number(value: float) -> str:
    """A finite float as JavaScript's String writes it (ECMAScript Number::toString): the shortest digits that read
    back (Python's repr finds the same ones), in plain notation from 1e-7 up to 1e21 ("0.000023" where repr writes
    "2.3e-05": lesson 11's failure-rate slider), else as "2.3e-8" / "1e+21"."""
    if value == 0 or not math.isfinite(value):
        return "0" if value == 0 else repr(value)
    sign = "-" if value < 0 else ""
    mantissa, _, exponent = f"{abs(value)!r}".partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    # the decimal point's position n: value = 0.digits x 10^n
    n = (
        len(whole) + (int(exponent) if exponent else 0)
        if whole != "0"
        else -(len(fraction) - len(fraction.lstrip("0")))
    )
    digits = digits.rstrip("0") or "0"
    k = len(digits)
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + digits
    e = n - 1
    head = digits[0] + ("." + digits[1:] if k > 1 else "")
    return f"{sign}{head}e{'+' if e > 0 else '-'}{abs(e)}"


def state_key(controls, changed=None) -> str:
    """The browser's key of the controls' state, with `changed` = (widget, value) set instead of its value."""
    return SEPARATOR.join(
        control_label(w, changed[1]) if changed is not None and w is changed[0] else control_label(w) for w in controls
    )


def values_key(controls: dict, values: dict) -> str:
    """The browser's key of the controls {name: widget} at `values` {name: value} (every control named)."""
    return SEPARATOR.join(control_label(widget, values[name]) for name, widget in controls.items())


def state_id(state: dict, context=None) -> str:
    """A short id of the full state {name: value} (every input the payload depends on, each value with its type) and
    of the `context` it was drawn in (the frame cache's pixel geometry and remembered ranges; None elsewhere): the
    browser's cache holds payloads under it, so a key's labels map to a payload only through the kernel's "expect"
    map of the current neighbourhood."""
    text = repr((table_key(state), context) if context is not None else table_key(state))
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def table_key(state: dict) -> tuple:
    """A hashable key of a state {name: value} (each value with its type: True, 1 and 1.0 are different values)."""
    return tuple((name, type(v).__name__, v) for name, v in sorted(state.items()))


def neighbour_jobs(
    controls: dict, state: dict, moved=None, neighbour=None, reach: int | None = None, marked: bool = False
) -> list:
    """[(the browser's key, the state)] of every state 1 to `reach` (default REACH) steps of one of `controls`
    ({name: widget}) away from `state` ({name: value}, every control named; other entries, such as a text box's value,
    kept as they are): each control's neighbour_steps, nearest first (every control's +-1 before any +-2), at each
    distance the widget `moved` (the control just changed) first. `neighbour(state, name, value)` is the state after
    one change (default: `state` with only that value changed); a state d steps away is the state after d changes,
    each from the one before (what the kernel reaches as the changes of a held key arrive one by one), priced only
    where the change straight there reaches the same state: a dependent control that follows the path (lesson 5's TP
    degree after two new hidden sizes) leaves it to the kernel, since the browser's key cannot tell a held key from a
    jump; and only once (a state nearer by another control is not sent again). With `marked`, a state d > 1 steps away
    carries VIA: the table_key of each state passed on the way (the frame cache paints them first: a plot helper's
    remembered range depends on the way there), which its id then includes. The key is always that of
    {**state, name: value}, what the browser's controls show right after the student's changes, before the kernel's
    observer moves a dependent control: the browser looks the change up by it."""
    step = neighbour if neighbour is not None else (lambda s, name, value: {**s, name: value})
    names = sorted(controls, key=lambda name: controls[name] is not moved)
    paths = {name: neighbour_steps(controls[name], REACH if reach is None else reach) for name in names}
    jobs: list = []
    seen: set = set()
    for distance in range(1, max((len(p) for ps in paths.values() for p in ps), default=0) + 1):
        for name in names:
            for path in (p for p in paths[name] if len(p) == distance):
                passed = [state]
                for value in path:
                    passed.append(step(passed[-1], name, value))
                after = passed[-1]
                if distance > 1 and (after != step(state, name, path[-1]) or table_key(after) in seen):
                    continue
                seen.add(table_key(after))
                if marked and distance > 1:
                    after = {**after, VIA: tuple(table_key(s) for s in passed[1:-1])}
                jobs.append((values_key(controls, {**state, name: path[-1]}), after))
    return jobs


def home_keys(controls: dict, state: dict, jobs: list, neighbour=None) -> list[str]:
    """The keys of `jobs` (neighbour_jobs of `state`) from whose state a change of the one control moved straight back
    to its value in `state` reaches `state` itself (with `neighbour` as in neighbour_jobs): no other control stays
    moved. A run a -> b -> a then ends at the map's base, which browser_js/prefetch.js draws from the base's own payload
    while the kernel has not yet sent the map around b; elsewhere (lesson 5's TP degree, moved at h + 1 and kept at h)
    the return is left to the kernel."""
    step = neighbour if neighbour is not None else (lambda s, name, value: {**s, name: value})
    names = list(controls)
    labels = values_key(controls, state).split(SEPARATOR)
    home = []
    for key, after in jobs:
        moved = [names[i] for i, label in enumerate(key.split(SEPARATOR)) if label != labels[i]]
        there, _ = without_via(after)
        if len(moved) == 1 and table_key(step(there, moved[0], state[moved[0]])) == table_key(state):
            home.append(key)
    return home


def browser_count(controls, seen: dict) -> dict:
    """While a change from the browser to one of `controls` is handled (its set_state, whose observers run now), `seen`
    ({view: count}) with the count of the student's changes that change carries for its view (CHANGE_COUNT, held in
    the control's _property_lock as "<view>:<count>"), the latest SEEN_VIEWS views; else `seen`. Per view: a second tab
    on the same kernel counts its own changes, and a count of one is no count of the other."""
    for widget in controls:
        value = getattr(widget, "_property_lock", {}).get(CHANGE_COUNT)
        view, _, count = value.rpartition(":") if isinstance(value, str) else ("", "", "")
        if view and count.isdigit():
            seen = {name: n for name, n in seen.items() if name != view}
            seen[view] = int(count)
            seen = dict(list(seen.items())[-SEEN_VIEWS:])
    return seen


def without_via(state: dict) -> tuple[dict, list]:
    """(the state without VIA, the states passed on the way there: neighbour_jobs(marked=True))."""
    via = [{name: value for name, _, value in key} for key in state.get(VIA, ())]
    return {name: value for name, value in state.items() if name != VIA}, via


class Prefetcher:
    """Computes the picture data of neighbouring states in idle turns and sends each to `picture` (a BrowserPicture)
    as {"prefetch": browser key, "id": state_id, "fill": n, "payload": data}, after {"prefetch_base": the current
    key, "limit": BROWSER_LIMIT, "expect": {browser key: state_id} of every job, "fill": n, "seen": {view: the
    count of that browser's changes the kernel has seen} (CHANGE_COUNT), "home": home_keys}, n counting the fills (a
    base sent before the picture is shown reaches no view: its prefetch messages name the neighbourhood then). Given
    the base's state, the fill sends its payload too (after BASE_AFTER neighbours; "expect" names it).
    The bytes values of a payload (lesson 4's timeline ops) travel as the message's binary buffers, named in order
    by its "buffers" list; browser_js/prefetch.js puts them back into the payload.

    `steps(state)` is the app's generator: one short step per next(), its return value the picture's data. `table`
    holds the data of the last KERNEL_LIMIT states priced (table_key -> data); `sent` the browser keys sent since the
    last start; `longest_turn_s` the longest turn so far; `per_turn` (None: no limit) the most neighbours priced in one
    turn (the frame cache's neighbours each paint a whole picture); `context()` (optional) what the payloads depend on
    besides the state, the same for a whole fill (the frame cache's pixel geometry and remembered ranges), part of
    each state id; `disabled(state)` (optional) the disabled state of each of the picture's controls there (None: not
    the app's to set), sent in each payload as "control_disabled" (lesson 4's chunks slider, interleaved only: the
    browser applies it with the cached change). `future` is done when the fill has ended (None outside an
    event loop, where start does nothing and run_all computes everything at once). `kernel_limit` bounds `table`
    (an app whose states are large keeps fewer)."""

    def __init__(
        self,
        picture,
        steps,
        kernel_limit: int = KERNEL_LIMIT,
        per_turn: int | None = None,
        context=None,
        disabled=None,
    ) -> None:
        self.picture = picture
        self.steps = steps
        self.context = context
        self.disabled = disabled
        self.kernel_limit = kernel_limit
        self.per_turn = per_turn
        self.table: OrderedDict = OrderedDict()
        self.generation = 0
        self.fills = 0  # neighbourhoods named to the browser so far (each message says which it belongs to)
        self.sent: list[str] = []
        self.future: asyncio.Future | None = None
        self.longest_turn_s = 0.0
        self.ready_s: float | None = None  # seconds from start to every neighbour sent (the last fill)
        self.seen: dict = {}  # {view: the browser's count of the student's changes seen here} (CHANGE_COUNT)

    def lookup(self, state: dict):
        """The data remembered for `state`, or None."""
        key = table_key(state)
        if key in self.table:
            self.table.move_to_end(key)
            return self.table[key]
        return None

    def remember(self, state: dict, data: dict) -> None:
        self.table[table_key(state)] = data
        self.table.move_to_end(table_key(state))
        while len(self.table) > self.kernel_limit:
            self.table.popitem(last=False)

    def stop(self) -> None:
        """Abandon the fill under way (a control moved: a newer one follows); note the browser's count of changes
        that the change being handled carries (CHANGE_COUNT)."""
        self.note_seen()
        self.generation += 1

    def note_seen(self) -> None:
        """While a change from the browser is handled, the count it carries becomes `seen` (browser_count)."""
        self.seen = browser_count(getattr(self.picture, "controls", None) or (), self.seen)

    def forget(self, change=None) -> None:
        """A change has reached the kernel: abandon the fill, and have the browser answer no change from its cache
        (an empty neighbourhood; the payloads it holds stay) before the app moves any of its controls itself (new
        options for a dropdown arrive as options, then index: in between, the browser's key could name a neighbour
        the student never picked). The next start names the new neighbourhood. Where `change` (an observer's) is of
        one of the picture's keyed controls, the message says "keep": the browser already shows that change in its
        key and may go on answering further changes along one control from the last map until the kernel moves a
        control's label itself (a held key; browser_js/prefetch.js); a change its key does not show (a text box, the
        picture's own slider) empties it at once."""
        self.stop()
        if event_loop_running():
            self.fills += 1
            owner = change.get("owner") if isinstance(change, dict) else None
            keyed = owner is not None and any(owner is w for w in getattr(self.picture, "controls", ()) or ())
            msg = {"prefetch_base": "", "limit": BROWSER_LIMIT, "expect": {}, "fill": self.fills}
            self.picture.send({**msg, "keep": True} if keyed else msg)

    def _turns(self, base: str, jobs: list, home: list | tuple = (), base_state: dict | None = None):
        """The fill as a step function: each call runs until turn_deadline, returns whether work is left."""
        self.note_seen()
        self.generation += 1
        generation = self.generation
        jobs = list(jobs)
        if base_state is not None:
            jobs.insert(min(BASE_AFTER, len(jobs)), (base, base_state))
        self.sent = []
        drawn_in = self.context() if self.context is not None else None
        expect = {key: state_id(state, drawn_in) for key, state in jobs}
        self.fills += 1
        fill = self.fills
        # the values of the inputs the key does not show, as the browser's copies hold them (its check: prefetch.js)
        priced_at = {"inputs": [w.value for w in inputs]} if (inputs := getattr(self.picture, "inputs", None)) else {}
        msg = {"prefetch_base": base, "limit": BROWSER_LIMIT, "expect": expect, "fill": fill, "seen": self.seen}
        self.picture.send({**msg, "home": list(home), **priced_at})
        homes = set(home)
        # each home state's own message says so too (a view made after the map, which never reaches it, learns it)

        def marks(key: str) -> dict:
            return {"home": True} if key in homes else {}

        current: list = []  # [key, state, generator] of the neighbour being priced
        started = time.perf_counter()

        def step() -> bool:
            with APP_LOCK:  # no change is drawn meanwhile, in any thread (filling.APP_LOCK)
                return locked_step()

        def locked_step() -> bool:
            if generation != self.generation:
                return False
            begin = time.perf_counter()
            deadline = turn_deadline()
            priced = 0
            while (jobs or current) and time.perf_counter() < deadline and priced != self.per_turn:
                if not current:
                    key, state = jobs.pop(0)
                    data = self.lookup(state)
                    if data is not None:
                        self._send(key, expect[key], data, fill, state, {**priced_at, **marks(key)})
                        continue
                    current[:] = [key, state, self.steps(state)]
                try:
                    next(current[2])
                except StopIteration as done:
                    self.remember(current[1], done.value)
                    self._send(
                        current[0], expect[current[0]], done.value, fill, current[1], {**priced_at, **marks(current[0])}
                    )
                    current.clear()
                    priced += 1
            self.longest_turn_s = max(self.longest_turn_s, time.perf_counter() - begin)
            more = bool(jobs or current)
            if not more:
                self.ready_s = time.perf_counter() - started
            return more

        return step

    def _send(self, key: str, sid: str, data: dict, fill: int, state: dict, told: dict) -> None:
        self.sent.append(key)
        if self.disabled is not None:
            data = {**data, "control_disabled": self.disabled(state)}
        binary = [name for name, value in data.items() if isinstance(value, bytes)]
        msg = {"prefetch": key, "id": sid, "fill": fill, **told}
        if not binary:
            self.picture.send({**msg, "payload": data})
            return
        payload = {name: value for name, value in data.items() if name not in binary}
        self.picture.send({**msg, "payload": payload, "buffers": binary}, [data[name] for name in binary])

    def start(self, base: str, jobs: list, home: list | tuple = (), base_state: dict | None = None) -> None:
        """Inside a running event loop: price `jobs` ([(browser key, state)], nearest first) one turn at a time,
        each turn at most FILL_TURN_S plus one step, sending each as it is done, and the base's own payload where
        `base_state` is given (after BASE_AFTER jobs); `home`: home_keys. Abandons the fill under way. Outside a loop:
        nothing. (Not finished at the end of a cell, unlike filling.fill_in_turns: the student's first picture never
        waits for it.)"""
        if not event_loop_running():
            return
        step = self._turns(base, jobs, home, base_state)
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def turn() -> None:
            try:
                more = step()
            except BaseException as exc:  # a bug, not our error (the app's steps catch those)
                done.set_exception(exc)
                return
            if more:
                loop.call_soon(turn)
            else:
                done.set_result(None)

        loop.call_soon(turn)
        self.future = done

    def start_around(self, controls: dict, state: dict, moved=None, neighbour=None, marked: bool = False) -> None:
        """In a kernel, with the picture shown: start the fill of every state 1 to REACH steps of one of `controls`
        away from `state` (neighbour_jobs, the nearest first, the widget `moved` first), and of `state` itself (a turn
        back to it: home_keys). Outside one, or before the picture has a comm: nothing."""
        if not event_loop_running() or self.picture.comm is None:
            return
        jobs = neighbour_jobs(controls, state, moved, neighbour, marked=marked)
        self.start(values_key(controls, state), jobs, home_keys(controls, state, jobs, neighbour), state)

    def run_all(self, base: str, jobs: list) -> None:
        """Price and send every job now (tests, and a state priced outside an event loop)."""
        step = self._turns(base, jobs)
        while step():
            pass


class PrefetchingApp:
    """The part every app whose picture the browser caches shares (lessons 1, 3, 4 and 6; mixed in before
    LessonApp): close() stops its fill and prefetch at their next turn, and _prefetch(generation) starts filling the
    states one change of a PREFETCH_CONTROLS control away, the control just moved first. The app sets `prefetcher`
    (a Prefetcher), `_moved` and `_generation` (bumped by every change) and defines state()."""

    #: the names of the app's controls whose neighbouring values the browser holds
    PREFETCH_CONTROLS: tuple[str, ...] = ()
    #: neighbour(state, name, value): the state the app reaches when the student sets `name` to `value` (None: only
    #: that value changes; prefetch.neighbour_jobs)
    prefetch_neighbour: Callable[[dict, str, Any], dict] | None = None
    prefetcher: Prefetcher
    _generation = 0
    _moved = None

    def close(self) -> None:
        """Close the app's widgets; a fill or prefetch under way stops at its next turn."""
        self._generation += 1
        if "prefetcher" in self.__dict__:  # not when __init__ refused its arguments
            self.prefetcher.stop()
        super().close()  # type: ignore[misc]

    def _prefetch(self, generation: int) -> None:
        """In a kernel: the picture data of every state one control change away, sent to the browser in idle turns,
        the control just moved first (distlab.widgets.prefetch); nothing when a newer change has come. Under
        filling.APP_LOCK, from the check to the start: called when a fill is done (its future's callback, in the loop
        of the thread that ran it), it never starts the prefetch of a state a change in another thread has left."""
        with APP_LOCK:
            if generation == self._generation:
                controls = {name: getattr(self, name) for name in self.PREFETCH_CONTROLS}
                state = self.state()  # type: ignore[attr-defined]
                self.prefetcher.start_around(controls, state, self._moved, self.prefetch_neighbour)
