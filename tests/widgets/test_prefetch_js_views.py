"""Two browser pages on one kernel (browser_js/prefetch.js, issue 32), run in Node with stand-ins for the widget
models of each page: each page counts the student's changes made in it and sends them as "<view>:<count>" (its own
random id), the kernel's map names the count seen from each page ({view: count}: prefetch.browser_count), so a change
made in the other page is not taken for one of this page's changes in flight; and a change the kernel echoes from the
other page ends this page's walk, so a turn back is not drawn from a state the kernel does not reach that way."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_prefetch_js import run_scenario
from test_prefetch_js_keyrepeat import HARNESS

JS = Path(__file__).resolve().parents[2] / "distlab" / "widgets" / "browser_js"
NODE = shutil.which("node")

#: a second page: the same widgets, with models of its own (a second browser tab), and a stand-in kernel that handles
#: a change as ipywidgets and prefetch.Prefetcher do: it notes the count the change carries for its page, echoes the
#: new label to the other page (under _state_lock), says "forget" (keep) to both, then sends its map and payloads
PAGES = """
const controls2 = LABELS.map((labels) => fake({ _options_labels: labels, index: 0 }));
const model2 = fake({ controls: ["IPY_MODEL_0", "IPY_MODEL_1"], summaries: ["A"] });
model2.widget_manager = { get_model: (id) => Promise.resolve(controls2[Number(id)]) };
const root2 = { attrs: {}, setAttribute(k, v) { this.attrs[k] = v; }, getAttribute(k) { return this.attrs[k]; } };
const view2 = prefetching(model2, root2).view;
const pages = [{ controls, model, root, view }, { controls: controls2, model: model2, root: root2, view: view2 }];
const seen = {}; // the kernel's {view: count} (prefetch.browser_count)
const both = (msg) => pages.forEach((p) => p.model.emit("msg:custom", msg));
// the student in page p picks a label of control c
const pickIn = (p, c, label) => pages[p].controls[c].set("index", LABELS[c].indexOf(label));
// the kernel receives that change: its count, the echo to the other page, the forget
const kernelGets = (p, c) => {
  const [view, count] = String(pages[p].controls[c].get("_distlab_change")).split(":");
  seen[view] = Number(count);
  const other = pages[1 - p].controls[c];
  other._state_lock = {};
  other.set("index", pages[p].controls[c].get("index"));
  delete other._state_lock;
  both({ prefetch_base: "", expect: {}, limit: 256, fill: ++fills, keep: true });
};
// its map around k (expect: {key: id}) and the payloads, to both pages
const mapAround = (k, expect, home) => {
  both({ prefetch_base: k, expect, limit: 256, fill: ++fills, seen: { ...seen }, home });
  for (const [key, id] of Object.entries(expect)) both({ prefetch: key, id, fill: fills, payload: { summaries: [id] } });
};
const noteIn = (p, what) => out.push([what, Number(pages[p].root.attrs["data-cache-hits"] || 0), pages[p].view.get("summaries")[0]]);
// the id each page sends with its changes (on whichever control it changed)
const views = () => pages.map((p) => String(p.controls.map((c) => c.get("_distlab_change")).find(Boolean)).split(":")[0]);
"""

AROUND_A = 'mapAround(key("a", "x"), { [key("b", "x")]: "B", [key("c", "x")]: "C", [key("a", "y")]: "AY", [key("a", "x")]: "A" }, HOME_A);'
AROUND_B = 'mapAround(key("b", "x"), { [key("a", "x")]: "A2", [key("c", "x")]: "C2", [key("b", "y")]: "BY", [key("b", "x")]: "B2" }, HOME_B);'


def _run(scenario: str) -> list:
    return run_scenario(scenario, HARNESS + PAGES)


@pytest.mark.skipif(NODE is None, reason="needs Node.js to run the browser code")
def test_each_page_counts_its_own_changes_and_the_map_names_each_pages_count():
    # page 1 makes two changes (a -> b -> c, each seen by the kernel), page 2 then one (c|x -> c|y) and page 1 one more
    # (c|y -> b|y): every change is answered from the map of the state its page shows; each page sends its own id
    out = _run(
        "const HOME_A = [key('b', 'x'), key('a', 'y')]; const HOME_B = [key('a', 'x'), key('c', 'x'), key('b', 'y')];"
        + AROUND_A
        + """
        pickIn(0, 0, "b"); noteIn(0, "page 1: a -> b"); kernelGets(0, 0);
        """
        + AROUND_B
        + """
        pickIn(0, 0, "c"); noteIn(0, "page 1: b -> c"); kernelGets(0, 0);
        mapAround(key("c", "x"), { [key("b", "x")]: "B3", [key("d", "x")]: "D3", [key("c", "y")]: "CY", [key("c", "x")]: "C3" },
                  [key("b", "x"), key("d", "x"), key("c", "y")]);
        pickIn(1, 1, "y"); noteIn(1, "page 2: c|x -> c|y, after the echo of page 1's two changes"); kernelGets(1, 1);
        mapAround(key("c", "y"), { [key("b", "y")]: "BY4", [key("d", "y")]: "DY4", [key("c", "x")]: "C4", [key("c", "y")]: "CY4" },
                  [key("b", "y"), key("d", "y"), key("c", "x")]);
        out.push(["kernel's counts", Object.values(seen)]);
        pickIn(0, 0, "b"); noteIn(0, "page 1: c|y -> b|y, after the echo of page 2's change");
        const [one, two] = views();
        out.push(["two page ids", one.length > 0 && two.length > 0 && one !== two]);
        """
    )
    # before: each page sent a bare count with no id (here: the kernel's counts [None, None], no page ids), and the
    # kernel kept one count for every page (prefetch.browser_count: the last change's, 1 after page 2's change), so
    # page 1 (2 changes made, both seen) took its second change for one still in flight and declined every change
    # until a map after its own next change
    assert out == [
        ["page 1: a -> b", 1, "B"],
        ["page 1: b -> c", 2, "C2"],
        ["page 2: c|x -> c|y, after the echo of page 1's two changes", 1, "CY"],
        ["kernel's counts", [2, 1]],
        ["page 1: c|y -> b|y, after the echo of page 2's change", 3, "BY4"],
        ["two page ids", True],
    ], out


@pytest.mark.skipif(NODE is None, reason="needs Node.js to run the browser code")
def test_a_change_echoed_from_the_other_page_ends_the_walk():
    # page 1: a -> b (drawn: B), and the kernel's map around b; then page 2 moves the same control to c (the echo
    # reaches page 1 under _state_lock, then the kernel's forget with keep). Page 1 turns back to a before the map
    # around c: the kernel reaches a from c, not from b (c is no home state of the map around a, and the kept map
    # around b names a only as the step from b), so it is the kernel's to draw
    out = _run(
        "const HOME_A = [key('b', 'x'), key('a', 'y')]; const HOME_B = [key('a', 'x'), key('b', 'y')];"
        + AROUND_A
        + """
        pickIn(0, 0, "b"); noteIn(0, "page 1: a -> b"); kernelGets(0, 0);
        """
        + AROUND_B
        + """
        pickIn(1, 0, "c"); noteIn(1, "page 2: b -> c"); kernelGets(1, 0);
        pickIn(0, 0, "a"); noteIn(0, "page 1: c -> a, the kernel's map around c not here yet");
        """
    )
    # before: page 1's walk went on from b (the echo was not its change), and c -> a was drawn as b -> a (A2: hits 2)
    assert out == [
        ["page 1: a -> b", 1, "B"],
        ["page 2: b -> c", 1, "C2"],
        ["page 1: c -> a, the kernel's map around c not here yet", 1, "B"],
    ], out
