"""The pictures drawn in the browser fit a narrow output, their text readable (review v16 row 18: at a 900 px browser
window the fixed-width canvases of lessons 1-4, 6 and 7, 640-720 px, ran past the output's right edge and were cut;
review v20: scaled down whole to fit, the training lab's 11 px legend and axis text was shown at 5-7 px). Each lesson
app's picture, mounted by its own module (browser_js) in Chromium inside an output narrower than it, stays inside the
output (its frame: a picture that cannot be drawn narrower scrolls sideways there), shows every text it draws at
MIN_TEXT_PX or more (measured: each fillText's font size times the canvas's transform and the shown scale), keeps its
aspect, and, where it lays itself out again for the output (draw.layout: the lab stacks its charts), fits the output
unscrolled; and a click on the assignment grid laid out again (lesson 6) picks the GPU under the pointer, as at full
size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from distlab.widgets.browser import BrowserPicture
from lesson_apps import lesson_apps as _apps
from lesson_apps import walk as _walk

CHROMIUM = Path("/usr/bin/chromium")
#: an output this wide: a 900 px window less JupyterLab's side bar, file browser and prompt column
OUTPUT_PX = 420
#: the outputs the text size is measured in, and the least size (as tests/widgets/test_drawn_text_fits.py)
NARROW_OUTPUTS = {"a 900 px window": 468, "the narrowest output": 345}
MIN_TEXT_PX = 10
#: the pictures that lay themselves out again for a narrow output, and the narrowest each fits unscrolled (px)
REFLOWS = {
    "LabPicture": 320,
    "BarsPicture": 320,
    "LadderPicture": 320,
    "TimelinePicture": 340,
    "RingPicture": 300,
    "GridPicture": 310,
}

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed (/usr/bin/chromium)"),
]

#: a stand-in for the picture's widget model (no controls: the picture paints its own data as it comes)
PAGE = """<!doctype html><html><body style="margin:0"><div id="out" style="width:%dpx"></div>
<script type="module">
function fake(attrs) {
  const handlers = {};
  const m = {
    attrs, get: (n) => attrs[n], save_changes() {}, send() {},
    set(n, v) { attrs[n] = v; (handlers.change || []).forEach((f) => f(m, {})); },
    on(names, f) { for (const n of names.split(" ")) (handlers[n] = handlers[n] || []).push(f); },
    off() {},
  };
  m.widget_manager = { get_model: () => Promise.resolve(fake({})) };
  return m;
}
%s
window.model = fake(%s);
window.picture.render({ model: window.model, el: document.getElementById("out") });
window.mounted = true;
</script></body></html>"""


def _pictures() -> list:
    """(app name, its first BrowserPicture) of every lesson app drawn in the browser, built with its defaults."""
    found = []
    for app_class in _apps():
        app = app_class()
        picture = next((w for w in _walk(app) if isinstance(w, BrowserPicture)), None)
        if picture is not None:
            found.append((app_class.__name__, picture))
    return found


def _state(picture) -> dict:
    """The picture's synced traits that JSON carries (binary traits are left out: the size does not need them)."""
    state = {}
    for name in picture.keys:
        value = getattr(picture, name)
        try:
            json.dumps(value)
        except TypeError:
            continue
        state[name] = value
    state["controls"], state["inputs"] = [], []
    return state


#: every text a canvas draws: its font size in CSS px of the drawing (the font times the transform, less the device
#: pixel ratio mountPicture sets)
RECORD_TEXT = """<script>window.__texts = [];
const fill = CanvasRenderingContext2D.prototype.fillText;
CanvasRenderingContext2D.prototype.fillText = function (text, x, y, ...rest) {
  const m = this.getTransform(), px = Number((/(\\d+(?:\\.\\d+)?)px/.exec(this.font) || [0, 10])[1]);
  if (String(text).trim()) window.__texts.push([String(text), (px * Math.hypot(m.a, m.b)) / (window.devicePixelRatio || 1)]);
  return fill.call(this, text, x, y, ...rest);
};</script>"""


def _mount(page, picture, output: int = OUTPUT_PX) -> None:
    module = picture._esm.replace("export default", "window.picture =", 1)
    page.set_content(PAGE.replace("<body", RECORD_TEXT + "<body", 1) % (output, module, json.dumps(_state(picture))))
    page.wait_for_function("() => window.mounted === true")
    # the frame is laid out (a ResizeObserver repaints it for its width): then one paint more, its texts recorded
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))")
    page.evaluate("() => { window.__texts = []; window.model.set('value', window.model.get('value')); }")


@pytest.fixture(scope="module")
def page():
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            yield browser.new_page(viewport={"width": 900, "height": 800})
        finally:
            browser.close()


def test_every_picture_fits_a_narrow_output_whole(page):
    pictures = _pictures()
    assert {name for name, _ in pictures} >= {"MemoryWallApp", "MeshApp", "TrainingLabApp"}
    cut = []
    for name, picture in pictures:
        _mount(page, picture)
        frame = page.locator(".distlab-frame").first.bounding_box()
        canvas = page.locator("canvas.distlab-canvas").first
        box = canvas.bounding_box()
        drawn = page.evaluate("c => c.height / c.width", canvas.element_handle())
        assert picture.width > OUTPUT_PX  # the check means something: the picture is wider than the output
        if frame["width"] > OUTPUT_PX + 0.5 or abs(box["height"] / box["width"] - drawn) > 0.01:
            cut.append(f"{name}: {frame['width']:.0f} px frame, {box['width']:.0f} x {box['height']:.0f} px canvas")
    assert not cut, "; ".join(cut)


@pytest.mark.parametrize("output", list(NARROW_OUTPUTS))
def test_every_pictures_text_is_shown_at_the_minimum_size_or_more(page, output):
    """At a 900 px window (and in the narrowest output) each picture's smallest text, as Chromium draws and shows it,
    is MIN_TEXT_PX or more; a picture that lays itself out again fits the output unscrolled."""
    width, small, scrolled = NARROW_OUTPUTS[output], [], []
    for name, picture in _pictures():
        _mount(page, picture, width)
        canvas = page.locator("canvas.distlab-canvas").first
        shown = page.evaluate("c => c.getBoundingClientRect().width / (c.width / (window.devicePixelRatio || 1))",
                              canvas.element_handle())  # fmt: skip
        texts = page.evaluate("() => window.__texts")
        assert texts, f"{name} drew no text"
        text, px = min(texts, key=lambda t: t[1])
        if px * shown < MIN_TEXT_PX - 0.01:
            small.append(f"{name}: {text!r} at {px * shown:.1f} px ({px:g} px drawn, shown at {shown:.2f})")
        if width >= REFLOWS.get(type(picture).__name__, float("inf")) and canvas.bounding_box()["width"] > width + 0.5:
            scrolled.append(f"{name}: {canvas.bounding_box()['width']:.0f} px")
    assert not small, f"text under {MIN_TEXT_PX} px in a {width} px output: " + "; ".join(small)
    assert not scrolled, f"wider than a {width} px output: " + "; ".join(scrolled)


def test_a_reflowing_picture_fits_its_narrowest_output_whole_controls_included(page):
    """At the narrowest output each reflowing picture claims (REFLOWS), the whole picture fits it: the canvas, and the
    row of controls above it (play button, caption, slider, readout; common.js shrinks the slider): a 260 px slider
    ran that row 5-75 px past outputs of 300-345 px over pictures that fit them."""
    wide = []
    for name, picture in _pictures():
        output = REFLOWS.get(type(picture).__name__)
        if output is None:
            continue
        _mount(page, picture, output)
        widths = page.evaluate(
            """() => [".distlab-picture", ".distlab-controls", "canvas.distlab-canvas"].map((s) => {
                const el = document.querySelector(s);
                return [s, Math.max(el.scrollWidth, el.getBoundingClientRect().width)];
            })"""
        )
        wide += [f"{name}: {s} {w:.0f} px in a {output} px output" for s, w in widths if w > output + 0.5]
    assert not wide, "; ".join(wide)


def test_a_click_on_the_grid_laid_out_again_picks_the_gpu_under_it(page):
    """In an output narrower than it the grid is drawn again with the narrow stacking of its cells (frames["narrow"],
    plots.parallelism_3d.grid_geometry at NARROW_ASPECT), as wide as the output; a click at a cell's centre, placed
    here from those cells and the canvas's drawn width as grid.js's gridScale places them (4 px margin, LABEL_ROOM
    cells for the node labels), picks that GPU."""
    from distlab.widgets.parallelism_3d import LABEL_ROOM, MeshApp

    app = MeshApp()
    picture = app.picture
    _mount(page, picture)
    canvas = page.locator("canvas.distlab-canvas").first
    box = canvas.bounding_box()
    drawn_w, drawn_h = page.evaluate(
        "c => [c.width / (window.devicePixelRatio || 1), c.height / (window.devicePixelRatio || 1)]",
        canvas.element_handle(),
    )
    assert box["width"] <= OUTPUT_PX and drawn_w == OUTPUT_PX < picture.width  # laid out again, not scaled
    cells = picture.frames["narrow"]
    assert cells["width"] < picture.frames["width"]  # fewer columns of nodes than at full width
    side = (drawn_w - 8) / (cells["width"] + LABEL_ROOM)  # the width binds: the layout made the height fit
    assert 4 + cells["height"] * side <= drawn_h - 22  # the cells end above the legend's band
    for rank in (picture.max, picture.max // 2 + 1, 0):
        x, y = 4 + (cells["x"][rank] + LABEL_ROOM) * side, 4 + cells["y"][rank] * side
        canvas.click(position={"x": x + side / 2, "y": y + side / 2})
        assert page.evaluate("() => window.model.get('value')") == rank
