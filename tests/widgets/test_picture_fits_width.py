"""The pictures drawn in the browser fit a narrow output (review v16 row 18: at a 900 px browser window the fixed-width
canvases of lessons 1-4, 6 and 7, 640-720 px, ran past the output's right edge and were cut). Each lesson app's
picture, mounted by its own module (browser_js) in Chromium inside an output narrower than it, is scaled down whole:
no wider than the output, its aspect kept; and a click on the scaled assignment grid (lesson 6) picks the GPU under
the pointer, as it does at full size."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from distlab.widgets.browser import BrowserPicture
from lesson_apps import lesson_apps as _apps
from lesson_apps import walk as _walk

CHROMIUM = Path("/usr/bin/chromium")
#: an output this wide: a 900 px window less JupyterLab's side bar, file browser and prompt column
OUTPUT_PX = 420

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


def _mount(page, picture) -> None:
    module = picture._esm.replace("export default", "window.picture =", 1)
    page.set_content(PAGE % (OUTPUT_PX, module, json.dumps(_state(picture))))
    page.wait_for_function("() => window.mounted === true")


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
        box = page.locator("canvas.distlab-canvas").first.bounding_box()
        assert picture.width > OUTPUT_PX  # the check means something: the picture is wider than the output
        if box["width"] > OUTPUT_PX + 0.5 or abs(box["height"] / box["width"] - picture.height / picture.width) > 0.01:
            cut.append(f"{name}: {box['width']:.0f} x {box['height']:.0f} px in a {OUTPUT_PX} px output")
    assert not cut, "; ".join(cut)


def _cell(f: dict, width: int, height: int, rank: int, label_room: float, legend: int) -> tuple:
    """(x, y, side) of a rank's cell in the drawing's coordinates, as grid.js's gridScale places it."""
    side = min((width - 8) / (f["width"] + label_room), (height - legend - 8) / f["height"])
    return 4 + (f["x"][rank] + label_room) * side, 4 + f["y"][rank] * side, side


def test_a_click_on_the_scaled_grid_picks_the_gpu_under_it(page):
    from distlab.widgets.parallelism_3d import LABEL_ROOM, MeshApp

    app = MeshApp()
    picture = app.picture
    legend = int(re.search(r"const LEGEND_H = (\d+);", picture._esm).group(1))  # grid.js's legend band (px)
    _mount(page, picture)
    canvas = page.locator("canvas.distlab-canvas").first
    box = canvas.bounding_box()
    assert box["width"] < picture.width
    shrink = box["width"] / picture.width
    for rank in (picture.max, picture.max // 2 + 1, 0):
        x, y, side = _cell(picture.frames, picture.width, picture.height, rank, LABEL_ROOM, legend)
        canvas.click(position={"x": (x + side / 2) * shrink, "y": (y + side / 2) * shrink})
        assert page.evaluate("() => window.model.get('value')") == rank
