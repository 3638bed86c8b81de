"""A held key in the browser's cache (browser_js/prefetch.js, issue 32), run in Node with stand-ins for the widget
models: changes along one control faster than the round trip (a held arrow key, 30 ms a press) are answered from the
map of the kernel's last neighbourhood (its keys up to three steps away: prefetch.REACH), which stays in use after the kernel
says a change of a keyed control has reached it (the empty base of Prefetcher.forget, with "keep"), until the kernel
names the next one or moves a control's label itself; a change of a second control is left to the kernel, and so is
every change after a forget without "keep" (a text box's change: the key does not show it)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_prefetch_js import FAKE_MODEL, run_scenario

JS = Path(__file__).resolve().parents[2] / "distlab" / "widgets" / "browser_js"
NODE = shutil.which("node")

#: stand-ins for a picture's model, two dropdowns (options a-e; x, y) and the element prefetch.js marks; keys are
#: "<first label>\x1f<second label>", written here as first + second (key("b", "x"))
HARNESS = (
    FAKE_MODEL
    + """
const LABELS = [["a", "b", "c", "d", "e"], ["x", "y"]];
const controls = LABELS.map((labels) => fake({ _options_labels: labels, index: 0 }));
const model = fake({ controls: ["IPY_MODEL_0", "IPY_MODEL_1"], summaries: ["A"] });
model.widget_manager = { get_model: (id) => Promise.resolve(controls[Number(id)]) };
const root = { attrs: {}, setAttribute(k, v) { this.attrs[k] = v; }, getAttribute(k) { return this.attrs[k]; } };
const { view } = prefetching(model, root);
const key = (first, second) => first + KEY_SEPARATOR + second;
let fills = 0; // the kernel's count of neighbourhoods
const base = (k, expect) => model.emit("msg:custom", { prefetch_base: k, expect, limit: 256, fill: ++fills });
// the kernel's forget: after a keyed control's change it says keep (prefetch.Prefetcher.forget), else not
const forget = (keep = true) => model.emit("msg:custom", { prefetch_base: "", expect: {}, limit: 256, fill: ++fills, ...(keep ? { keep } : {}) });
const send = (k, id) => model.emit("msg:custom", { prefetch: k, id, fill: fills, payload: { summaries: [id] } });
// the student picks a label of control c (0 or 1); the kernel sets one under ipywidgets' _state_lock
const pick = (c, label) => controls[c].set("index", LABELS[c].indexOf(label));
const kernelSets = (c, label) => {
  controls[c]._state_lock = {};
  pick(c, label);
  delete controls[c]._state_lock;
};
const out = [];
const note = (what) => out.push([what, Number(root.attrs["data-cache-hits"] || 0), view.get("summaries")[0]]);
"""
)


def _run(scenario: str) -> list:
    return run_scenario(scenario, HARNESS)


#: part of the kernel's map around a|x (prefetch.neighbour_jobs): b and c along the first control, y along the
#: second (a has no option before it); the ids name the full states (B, C, AY)
AROUND_A = 'base(key("a", "x"), { [key("b", "x")]: "B", [key("c", "x")]: "C", [key("a", "y")]: "AY" });'
SEND_A = 'send(key("b", "x"), "B"); send(key("c", "x"), "C"); send(key("a", "y"), "AY");'


@pytest.mark.skipif(NODE is None, reason="needs Node.js to run the browser code")
def test_a_held_key_is_answered_from_the_last_map_after_the_kernel_has_seen_its_first_press():
    # three presses, each before the kernel's map for the one before it: press 1 (b) and 2 (c) are found in the map
    # around a, press 2 after the kernel's forget for press 1 (its new map not here yet); then the map around b comes
    # (c, d), the kernel forgets again for press 2, and press 3 (d) is found in the map around b
    out = _run(
        f"""
        {AROUND_A} {SEND_A}
        pick(0, "b"); note("a -> b");
        forget();
        pick(0, "c"); note("b -> c after the kernel's forget for b");
        base(key("b", "x"), {{ [key("c", "x")]: "C", [key("d", "x")]: "D", [key("a", "x")]: "A" }}); send(key("d", "x"), "D");
        forget();
        pick(0, "d"); note("c -> d from the map around b");
        """
    )
    # each press one more hit, drawn from the payload of the id the map names (before: the forget emptied the map,
    # so presses 2 and 3 waited for the kernel: hits 1, 1, 1)
    assert out == [
        ["a -> b", 1, "B"],
        ["b -> c after the kernel's forget for b", 2, "C"],
        ["c -> d from the map around b", 3, "D"],
    ], out


@pytest.mark.skipif(NODE is None, reason="needs Node.js to run the browser code")
def test_the_kept_map_goes_when_the_kernel_moves_a_label_and_never_answers_a_second_control():
    out = _run(
        f"""
        {AROUND_A} {SEND_A}
        pick(0, "b"); note("a -> b");
        forget();
        pick(1, "y"); note("b|x -> b|y: a second control, not in the map around a");
        pick(1, "x"); note("b|y -> b|x: under a key of the map, but the way there left the first control");
        """
    )
    # hits: 1 (b); then none: the payload shown stays B
    assert out == [
        ["a -> b", 1, "B"],
        ["b|x -> b|y: a second control, not in the map around a", 1, "B"],
        ["b|y -> b|x: under a key of the map, but the way there left the first control", 1, "B"],
    ], out
    out = _run(
        f"""
        {AROUND_A} {SEND_A}
        pick(0, "b"); note("a -> b");
        forget();
        kernelSets(0, "a");  // the kernel's observer snaps the first control back: the map around a no longer holds
        pick(0, "c"); note("a -> c after the kernel moved a label: left to the kernel");
        """
    )
    # c is two steps from a, one further than b: the walk allows it, but the kernel reached a by its own change (its
    # state may differ in what the labels do not show), so the map was dropped: no hit
    assert out == [["a -> b", 1, "B"], ["a -> c after the kernel moved a label: left to the kernel", 1, "B"]], out


@pytest.mark.skipif(NODE is None, reason="needs Node.js to run the browser code")
def test_only_a_run_of_steps_one_way_along_one_control_is_answered():
    # the map around b names a and c one step away, d two (the state the kernel reaches by b -> c -> d); a jump
    # straight to a keyed state is answered (the kernel keys it only where the jump reaches the same state), then
    # each step further; a change that turns back is not (b -> c -> a: a dependent control moved at c may stay moved)
    out = _run(
        """
        pick(0, "b");
        base(key("b", "x"), { [key("a", "x")]: "A", [key("c", "x")]: "C", [key("d", "x")]: "D" });
        send(key("a", "x"), "A"); send(key("c", "x"), "C"); send(key("d", "x"), "D");
        pick(0, "c"); note("b -> c");
        pick(0, "a"); note("c -> a: turned back over the base");
        base(key("a", "x"), { [key("c", "x")]: "C2", [key("d", "x")]: "D2" }); send(key("c", "x"), "C2"); send(key("d", "x"), "D2");
        pick(0, "c"); note("a -> c: a jump two steps");
        pick(0, "d"); note("c -> d: one further");
        """
    )
    assert out == [
        ["b -> c", 1, "C"],
        ["c -> a: turned back over the base", 1, "C"],
        ["a -> c: a jump two steps", 2, "C2"],
        ["c -> d: one further", 3, "D2"],
    ], out


@pytest.mark.skipif(NODE is None, reason="needs Node.js to run the browser code")
def test_a_forget_without_keep_empties_the_map_at_once():
    # a change the key does not show (the ring's size box, a custom model size, the lab's node slider) reached the
    # kernel: every payload of the map around a was computed for the old value, so nothing is answered from it
    out = _run(
        f"""
        {AROUND_A} {SEND_A}
        forget(false);
        pick(0, "b"); note("a -> b after a text box's change: left to the kernel");
        forget(true);
        pick(0, "c"); note("b -> c: still nothing (the map is gone)");
        """
    )
    assert out == [
        ["a -> b after a text box's change: left to the kernel", 0, "A"],
        ["b -> c: still nothing (the map is gone)", 0, "A"],
    ], out


@pytest.mark.skipif(NODE is None, reason="needs Node.js to run the browser code")
def test_a_new_map_whose_base_the_student_has_passed_continues_the_walk_the_student_is_on():
    # the kernel names the map around b after the student's presses b, c and d from a (a held key: b, c, d found in
    # the map around a); the student then turns back to c before the kernel has seen c and d. The kernel reaches
    # a -> b -> c -> d -> c, a turn back (a dependent control moved at d may stay moved); the map around b names
    # under c the state of b -> c only, so nothing may be answered. (Before: the new map started a new walk, so
    # d -> c was its "first change", one step from b: answered with C1.)
    out = _run(
        """
        base(key("a", "x"), { [key("b", "x")]: "B", [key("c", "x")]: "C", [key("d", "x")]: "D" });
        send(key("b", "x"), "B"); send(key("c", "x"), "C"); send(key("d", "x"), "D");
        pick(0, "b"); note("a -> b"); forget();
        pick(0, "c"); note("b -> c"); pick(0, "d"); note("c -> d");
        base(key("b", "x"), { [key("a", "x")]: "A1", [key("c", "x")]: "C1", [key("d", "x")]: "D1", [key("e", "x")]: "E1" });
        send(key("a", "x"), "A1"); send(key("c", "x"), "C1"); send(key("d", "x"), "D1"); send(key("e", "x"), "E1");
        pick(0, "c"); note("d -> c: turned back, the kernel has not seen c or d yet");
        """
    )
    assert out == [
        ["a -> b", 1, "B"],
        ["b -> c", 2, "C"],
        ["c -> d", 3, "D"],
        ["d -> c: turned back, the kernel has not seen c or d yet", 3, "D"],
    ], out
    # the same run, not turned back: d -> e is one step further, the map around b names it (b -> c -> d -> e)
    out = _run(
        """
        base(key("a", "x"), { [key("b", "x")]: "B", [key("c", "x")]: "C", [key("d", "x")]: "D" });
        send(key("b", "x"), "B"); send(key("c", "x"), "C"); send(key("d", "x"), "D");
        pick(0, "b"); forget(); pick(0, "c"); pick(0, "d");
        base(key("b", "x"), { [key("c", "x")]: "C1", [key("d", "x")]: "D1", [key("e", "x")]: "E1" });
        send(key("e", "x"), "E1"); forget();
        pick(0, "e"); note("d -> e from the map around b");
        """
    )
    assert out == [["d -> e from the map around b", 4, "E1"]], out


@pytest.mark.skipif(NODE is None, reason="needs Node.js to run the browser code")
def test_a_new_map_after_the_student_left_the_walk_answers_nothing_until_the_student_is_at_its_base():
    # from the map around c: d, e (found), then back to d and c (left to the kernel). The kernel's map around d comes
    # (it has seen only d); the student, at c, steps to b: under the map around d, b is two steps down (d -> c -> b),
    # but the kernel reaches c -> d -> e -> d -> c -> b, which turned back twice. (Before: a new walk from d took
    # c -> b as its first change, two steps from d, and answered B1.)
    out = _run(
        """
        pick(0, "c");
        base(key("c", "x"), { [key("d", "x")]: "D", [key("e", "x")]: "E", [key("b", "x")]: "B" });
        send(key("d", "x"), "D"); send(key("e", "x"), "E"); send(key("b", "x"), "B");
        pick(0, "d"); note("c -> d"); forget(); pick(0, "e"); note("d -> e");
        pick(0, "d"); pick(0, "c"); note("e -> d -> c: turned back, left to the kernel");
        base(key("d", "x"), { [key("c", "x")]: "C1", [key("b", "x")]: "B1", [key("e", "x")]: "E1" });
        send(key("c", "x"), "C1"); send(key("b", "x"), "B1"); send(key("e", "x"), "E1");
        pick(0, "b"); note("c -> b under the map around d");
        """
    )
    assert out == [
        ["c -> d", 1, "D"],
        ["d -> e", 2, "E"],
        ["e -> d -> c: turned back, left to the kernel", 2, "E"],
        ["c -> b under the map around d", 2, "E"],
    ], out
    # the same before any map has come: the student's c -> d -> c, then the kernel's first map, around d (it has seen
    # d only); c -> b is left to the kernel (before: a new walk from d, answered with B1)
    out = _run(
        """
        pick(0, "c"); pick(0, "d"); pick(0, "c");
        base(key("d", "x"), { [key("c", "x")]: "C1", [key("b", "x")]: "B1", [key("e", "x")]: "E1" });
        send(key("c", "x"), "C1"); send(key("b", "x"), "B1"); send(key("e", "x"), "E1");
        pick(0, "b"); note("c -> b under the first map, around d");
        """
    )
    assert out == [["c -> b under the first map, around d", 0, "A"]], out
