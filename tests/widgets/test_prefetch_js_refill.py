"""A second change during the kernel's refill (browser_js/prefetch.js, issue 32), run in Node with stand-ins for the
widget models: a turn back to the map's base (a -> b -> a, 0.1 s apart, faster than the kernel's next map with 50 ms of
round trip) is drawn from the base's own payload where the kernel marks the step "home" (no other control stays
moved), and each map names the count of the student's changes the kernel has seen, so the browser replays those still
in flight from the new base instead of guessing (krreview's defect 3: a student back exactly at the new map's base
after a broken walk)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_prefetch_js import run_scenario
from test_prefetch_js_keyrepeat import HARNESS

JS = Path(__file__).resolve().parents[2] / "distlab" / "widgets" / "browser_js"
NODE = shutil.which("node")

#: the kernel's map with its count of the student's changes seen and its home keys (prefetch.Prefetcher._turns)
COUNTED = """
const counted = (k, expect, seen, home) => model.emit("msg:custom", { prefetch_base: k, expect, limit: 256, fill: ++fills, seen, home });
const sent = (c) => controls[c].get("_distlab_change");
// a payload message that names its state home (prefetch.Prefetcher._send), as a view made after the map receives it
const sendHome = (k, id, home) => model.emit("msg:custom", { prefetch: k, id, fill: fills, payload: { summaries: [id] }, ...(home ? { home } : {}) });
"""


def _run(scenario: str) -> list:
    return run_scenario(scenario, HARNESS + COUNTED)


#: the kernel's map around a|x before any change (seen 0): b, c along the first control, a|y along the second, and a
#: itself (its own payload A, prefetch.BASE_AFTER); `home`: from b and from a|y a change straight back reaches a|x
AROUND_A = (
    'counted(key("a", "x"), { [key("b", "x")]: "B", [key("c", "x")]: "C", [key("a", "y")]: "AY", '
    '[key("a", "x")]: "A" }, 0, HOME_A);'
    'send(key("b", "x"), "B"); send(key("c", "x"), "C"); send(key("a", "y"), "AY"); send(key("a", "x"), "A");'
)


@pytest.mark.skipif(NODE is None, reason="needs Node.js to run the browser code")
def test_a_turn_back_to_the_base_is_drawn_from_the_base_only_where_the_kernel_marks_it_home():
    # the refill case: a -> b from the map around a, the kernel's forget for b, then back to a 0.1 s later, before
    # the map around b: a -> b -> a reaches a itself (home), drawn with A; a -> b again is a first step from a (B).
    # Then the map around b comes, having seen only the first change (seen 1): the student's a and b since are
    # replayed from b (b -> a one step, a -> b home), so b -> a is answered from the new map (A2).
    out = _run(
        "const HOME_A = [key('b', 'x'), key('a', 'y')];"
        + AROUND_A
        + """
        pick(0, "b"); note("a -> b"); forget();
        pick(0, "a"); note("b -> a: home, before the map around b");
        pick(0, "b"); note("a -> b again");
        counted(key("b", "x"), { [key("a", "x")]: "A2", [key("c", "x")]: "C2", [key("b", "x")]: "B2" }, 1, [key("a", "x"), key("c", "x")]);
        send(key("a", "x"), "A2"); send(key("c", "x"), "C2"); send(key("b", "x"), "B2");
        pick(0, "a"); note("b -> a under the map around b (a and b still in flight)");
        out.push(["count sent with the last change", sent(0).replace(/^[0-9a-z]+:/, "<view>:")]);
        """
    )
    # before: the turn back broke the walk (hits 1, 1, 1, 1: every change after the first went to the kernel)
    assert out == [
        ["a -> b", 1, "B"],
        ["b -> a: home, before the map around b", 2, "A"],
        ["a -> b again", 3, "B"],
        ["b -> a under the map around b (a and b still in flight)", 4, "A2"],
        ["count sent with the last change", "<view>:4"],  # this page's id (two pages count apart), then its count
    ], out
    # lesson 5's TP degree follows the hidden size: at b the kernel moved TP, and back at a it stays moved, so the
    # map around a does not mark b home; the turn back is the kernel's, and so is every change after it
    out = _run(
        "const HOME_A = [key('a', 'y')];"
        + AROUND_A
        + """
        pick(0, "b"); note("a -> b"); forget();
        pick(0, "a"); note("b -> a: not home");
        pick(0, "b"); note("a -> b: the walk is broken");
        """
    )
    assert out == [["a -> b", 1, "B"], ["b -> a: not home", 1, "B"], ["a -> b: the walk is broken", 1, "B"]], out


@pytest.mark.skipif(NODE is None, reason="needs Node.js to run the browser code")
def test_a_student_back_at_the_new_base_with_changes_in_flight_is_answered_only_when_they_end_there():
    # krreview's defect 3: from the map around a, a -> b -> c (found), then c -> b (a turn back: the kernel's). The
    # kernel's map around b comes having seen only b (seen 1), with the student at b again: c and b are still in
    # flight. Where c is not home in the map around b (a dependent control moved at c stays moved at b), the kernel
    # will end elsewhere than the map's b: b -> c must go to the kernel. (Before: the student at the base looked like
    # no change since, and b -> c was answered with C2.)
    around_b = (
        'counted(key("b", "x"), { [key("a", "x")]: "A2", [key("c", "x")]: "C2", [key("b", "x")]: "B2" }, SEEN, HOME_B);'
        'send(key("a", "x"), "A2"); send(key("c", "x"), "C2"); send(key("b", "x"), "B2");'
    )
    walk = 'pick(0, "b"); forget(); pick(0, "c"); pick(0, "b"); note("a -> b -> c -> b");'
    not_home = "const HOME_A = []; const SEEN = 1; const HOME_B = [key('a', 'x')];"
    out = _run(not_home + AROUND_A + walk + around_b + 'pick(0, "c"); note("b -> c: c and b still in flight");')
    assert out == [["a -> b -> c -> b", 2, "C"], ["b -> c: c and b still in flight", 2, "C"]], out
    # where c is home in the map around b, the replay ends at b itself: answered
    home = "const HOME_A = []; const SEEN = 1; const HOME_B = [key('a', 'x'), key('c', 'x')];"
    out = _run(home + AROUND_A + walk + around_b + 'pick(0, "c"); note("b -> c: the replay ends at b");')
    assert out == [["a -> b -> c -> b", 2, "C"], ["b -> c: the replay ends at b", 3, "C2"]], out
    # and once the kernel has seen every change (seen 3), the student at its base: answered
    seen_all = "const HOME_A = []; const SEEN = 3; const HOME_B = [key('a', 'x')];"
    out = _run(seen_all + AROUND_A + walk + around_b + 'pick(0, "c"); note("b -> c: nothing in flight");')
    assert out == [["a -> b -> c -> b", 2, "C"], ["b -> c: nothing in flight", 3, "C2"]], out
    # the kernel has seen every change (seen 1, the student's b) yet names c|x: it moved the first control itself
    # (its label is on the way); the student, still at b, is not at the base, so nothing is answered from it
    out = _run(
        "const HOME_A = [];"
        + AROUND_A
        + """
        pick(0, "b"); note("a -> b");
        counted(key("c", "x"), { [key("d", "x")]: "D", [key("b", "x")]: "B3" }, 1, [key("d", "x"), key("b", "x")]);
        send(key("d", "x"), "D"); send(key("b", "x"), "B3");
        pick(0, "c"); note("b -> c: not the kernel's way");
        """
    )
    assert out == [["a -> b", 1, "B"], ["b -> c: not the kernel's way", 1, "B"]], out


@pytest.mark.skipif(NODE is None, reason="needs Node.js to run the browser code")
def test_a_view_made_after_the_map_learns_the_home_states_from_their_own_messages():
    # a cell shows the app and the kernel sends its first map at once, before the browser has made the view: the
    # view sees only the payload messages (the base's among them). Those of home states say so, so a -> b -> a is
    # answered as under the map (before: the view knew no home state, and the turn back went to the kernel)
    out = _run(
        """
        fills = 1;
        sendHome(key("b", "x"), "B", true); sendHome(key("c", "x"), "C", true); sendHome(key("a", "y"), "AY", true);
        sendHome(key("a", "x"), "A", false);
        pick(0, "b"); note("a -> b");
        pick(0, "a"); note("b -> a: home, named by B's own message");
        """
    )
    assert out == [["a -> b", 1, "B"], ["b -> a: home, named by B's own message", 2, "A"]], out
