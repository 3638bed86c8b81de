"""Every colour-mapped picture of a lesson app says what its colours mean in numbers (the student-view review of
session 23: lesson 10's all-to-all matrix coloured "MB each GPU sends each GPU" with no scale, so no cell could be
read). A figure's image either has a colour bar in the same figure, or the app's text names the top of its scale in
the image's own number (the matrix's scale changes with the routing, and a blitted frame keeps its axes)."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from matplotlib.image import AxesImage

from distlab.widgets.mixture_of_experts import EP_SIZES, AllToAllApp
from lesson_apps import lesson_apps, shown_texts


def _images(app) -> list:
    fig = getattr(app, "fig", None)
    if fig is None:
        return []
    return [artist for ax in fig.axes for artist in ax.get_children() if isinstance(artist, AxesImage)]


def _has_colour_bar(fig) -> bool:
    return any(getattr(ax, "_colorbar", None) is not None for ax in fig.axes)


def _scale_stated(app, image) -> bool:
    top = image.get_clim()[1]
    text = html.unescape(" ".join(shown_texts(app))).replace("\xa0", " ")
    return re.search(rf"(?<![\d.]){re.escape(f'{top:g}')} MB", text) is not None


@pytest.mark.parametrize("app_class", lesson_apps(), ids=lambda a: a.__name__)
def test_a_colour_mapped_picture_states_its_scale(app_class):
    app = app_class()
    for image in _images(app):
        assert _has_colour_bar(app.fig) or _scale_stated(app, image), f"{app_class.__name__}: colours without a scale"


@pytest.mark.parametrize("ep", EP_SIZES)
def test_the_all_to_all_matrix_says_the_scale_it_is_drawn_with(ep):
    # the scale follows the largest block (plots.mixture_of_experts.byte_matrix_scale): each EP size its own
    app = AllToAllApp(ep=ep)
    image = app.matrix.image
    assert _scale_stated(app, image), app.status.value
    assert image.get_clim()[1] >= app.result.bytes_matrix.max() / 1e6 > 0


def test_the_check_finds_a_matrix_without_its_scale(monkeypatch):
    # the check must fail on the defect: the all-to-all app as it was, its text without the scale
    app = AllToAllApp()
    app.status.value = re.sub(r"left, colour:[^<]*", "", app.status.value)
    assert not _has_colour_bar(app.fig) and not _scale_stated(app, app.matrix.image)


def test_the_walk_sees_the_lesson_apps_images():
    # the check above looks at every image of every app: at least lesson 10's matrix must be among them
    with_images = [a.__name__ for a in lesson_apps() if _images(a())]
    assert "AllToAllApp" in with_images


# --- a browser picture's colour ramp (a student's review: lesson 6's grid coloured by pipeline stage drew the stages
# in a light-to-dark blue, faded every GPU outside the picked one's groups to 30% so that the four stages' blues came
# 4-6 CIELAB units apart, and its legend said only "fills: pipeline stage": no stage could be read). A ramp is drawn
# unfaded, and the legend shows its two ends, each a swatch of the colour the cells of that step are drawn in.

GRID_JS = Path(__file__).resolve().parents[2] / "distlab" / "widgets" / "browser_js"
NODE = shutil.which("node")


def _grid_ramp(count: int) -> dict:
    """For a grid filled by a ramp of `count` steps, run in Node: each step's colour as a faded (not picked) cell is
    drawn (its colour and opacity) and the legend's swatches ([text, colour])."""
    source = (GRID_JS / "common.js").read_text() + "\n" + (GRID_JS / "grid.js").read_text()
    source = source.replace("export default", "const _m =")
    script = source + (
        f"\nconst f = {{fill_kind: 'ramp', fill_count: {count}, colour_by: 'pipeline stage'}};"
        "\nconst ctx = {font: '', measureText: (t) => ({width: 7 * String(t).length})};"
        "\nconst alpha = typeof cellAlpha === 'function' ? (m) => cellAlpha(f, m) : (m) => (m ? 1 : 0.3);"
        f"\nconst steps = [...Array({count}).keys()].map((k) => [fillColour(f, k), alpha(false)]);"
        "\nconst swatches = legendLines(ctx, f, 0, 2000, 2000).flat().map(([item]) => item)"
        "\n  .filter((item) => item[4]).map((item) => [item[0], item[4]]);"
        "\nconsole.log(JSON.stringify({steps, swatches}));"
    )
    out = subprocess.run([NODE, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.skipif(NODE is None, reason="needs Node.js to run the browser code")
@pytest.mark.parametrize("count", [2, 4, 16])
def test_a_pictures_colour_ramp_is_drawn_unfaded_and_its_legend_shows_its_ends(count):
    ramp = _grid_ramp(count)
    assert [alpha for _, alpha in ramp["steps"]] == [1] * count, "a faded ramp's steps run together"
    ends = {0: ramp["steps"][0][0], count - 1: ramp["steps"][-1][0]}
    shown = {int(re.match(r"\d+", text).group(0)): colour for text, colour in ramp["swatches"]}
    assert shown == ends, f"the legend's swatches {ramp['swatches']}, the ramp's ends {ends}"


def test_the_lesson_apps_ramp_is_the_pipeline_stage():
    # the check above draws the grid's ramp: the lesson apps' one colour ramp is its pipeline-stage fill
    from distlab import mesh
    from distlab.widgets.parallelism_3d import COLOUR_BY, mesh_frames

    lay = mesh.layout(dp=4, tp=4, pp=4)
    kinds = {label: mesh_frames(lay, by)["fill_kind"] for label, by in COLOUR_BY}
    assert [label for label, kind in kinds.items() if kind == "ramp"] == ["pipeline stage"], kinds
