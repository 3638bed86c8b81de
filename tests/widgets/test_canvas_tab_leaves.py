"""Tab leaves an app's matplotlib picture (review v19): ipympl's canvas div is focusable and its keydown handler calls
preventDefault on every key, so in JupyterLab a student tabbing through lesson 11's schedule app reached the grid
and stayed there, Tab after Tab (a keyboard trap; every app drawn by matplotlib has one: lessons 3, 4, 5, 8, 10, 11,
11b). The app's frame cache (browser_js/framecache.js) stops Tab above the canvas before ipympl sees it.

Run in Chromium: the frame cache mounted by its own module (FrameCache._esm) beside a stand-in for ipympl's view (a
focusable div whose keydown handler takes every key, as ipympl's does), between two buttons."""

from __future__ import annotations

from pathlib import Path

import pytest

from distlab.widgets.framecache import FITS_CLASS, FrameCache

CHROMIUM = Path("/usr/bin/chromium")

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed (/usr/bin/chromium)"),
]

PAGE = """<!doctype html><html><body>
<button id="before">before</button>
<div id="canvas-view"><div class="jupyter-matplotlib-canvas-div" tabindex="0" style="width:200px;height:80px"></div></div>
<button id="after">after</button>
<div id="cache"></div>
<script type="module">
// ipympl's key handler (mpl_widget.js, key_event): every key goes to matplotlib, none to the browser
document.querySelector(".jupyter-matplotlib-canvas-div").addEventListener("keydown", (e) => {
  e.stopPropagation();
  e.preventDefault();
  window.ipymplKeys = (window.ipymplKeys || 0) + 1;
});
function fake(attrs) {
  const m = { attrs, get: (n) => attrs[n], set(n, v) { attrs[n] = v; }, save_changes() {}, send() {}, on() {}, off() {} };
  return m;
}
const canvasView = { el: document.getElementById("canvas-view") };
const canvasModel = fake({});
canvasModel.views = { v: Promise.resolve(canvasView) };
%s
const model = fake({ canvas: "IPY_MODEL_canvas", text_widgets: [], controls: [] });
model.widget_manager = { get_model: (id) => Promise.resolve(id === "canvas" ? canvasModel : fake({})) };
const handlers = [];
model.on = (name, f) => handlers.push([name, f]);
window.cache.render({ model, el: document.getElementById("cache") });
// the app's views are found when the kernel first speaks (framecache.js: onMessage)
handlers.filter(([n]) => n === "msg:custom").forEach(([, f]) => f({}));
window.mounted = true;
</script></body></html>"""


def test_tab_leaves_the_matplotlib_canvas_both_ways():
    sync_api = pytest.importorskip("playwright.sync_api")
    module = FrameCache._esm.replace("export default", "window.cache =", 1)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page()
            page.set_content(PAGE % module)
            page.wait_for_function("() => window.mounted === true")
            # the frame cache has found the canvas's view (it marks it to fit a narrow output: FITS_CLASS)
            page.wait_for_function(f"() => document.getElementById('canvas-view').classList.contains('{FITS_CLASS}')")
            active = "() => document.activeElement.id || document.activeElement.className"
            page.focus("#before")
            page.keyboard.press("Tab")
            assert page.evaluate(active) == "jupyter-matplotlib-canvas-div"  # the canvas is still reached
            page.keyboard.press("x")  # other keys still go to the canvas's own handler
            assert page.evaluate("() => window.ipymplKeys") == 1
            page.keyboard.press("Tab")
            assert page.evaluate(active) == "after", "Tab stayed on the canvas"
            page.keyboard.press("Shift+Tab")
            page.keyboard.press("Shift+Tab")
            assert page.evaluate(active) == "before", "Shift+Tab stayed on the canvas"
        finally:
            browser.close()
