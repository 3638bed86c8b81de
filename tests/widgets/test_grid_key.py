"""A static grid of a rank layout (lesson 6) keys what it draws: a picked GPU's thick black edge and each of its
groups' outlines, in the colours the lesson's app draws them (browser_js/grid.js's OUTLINES), and what the fills
show (the second student review: lesson 6's static grids outlined the picked GPU's groups in black, blue and red
with no key, and in another blue and red than the app above them)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from matplotlib.colors import to_hex

from distlab import mesh
from distlab.plots.parallelism_3d import HIGHLIGHT, grid_figure, grids_figure

GRID_JS = Path(__file__).resolve().parents[2] / "distlab" / "widgets" / "browser_js" / "grid.js"


def _key(fig) -> dict:
    """{label: edge colour} of the figure's legend."""
    assert fig.legends, "no key"
    legend = fig.legends[0]
    return {t.get_text(): to_hex(h.get_edgecolor()) for t, h in zip(legend.get_texts(), legend.legend_handles)}


@pytest.mark.parametrize("colour_by", ["tp", "dp", "stage", "node"])
def test_a_static_grid_with_a_picked_gpu_keys_every_outline_it_draws(colour_by):
    lay = mesh.layout(16, tp=2, pp=4)
    fig = grid_figure(lay, colour_by=colour_by, picked=5)
    key = _key(fig)
    assert key["picked GPU 5"] == HIGHLIGHT["picked"].lower()
    for d in ("tp", "dp", "pp"):  # every dimension of more than one GPU is outlined (grid_colours), so keyed
        assert key[f"its {d.upper()} group"] == HIGHLIGHT[d].lower()
    assert fig.legends[0].get_title().get_text().startswith("fills: ")


def test_side_by_side_grids_share_one_key_and_leave_out_a_dimension_of_one():
    layouts = {o: mesh.layout(32, tp=4, pp=4, order=o) for o in ("tp-dp-pp", "pp-dp-tp")}
    fig = grids_figure(layouts, colour_by="tp", picked=0)
    assert len(fig.legends) == 1 and set(_key(fig)) == {"picked GPU 0", "its TP group", "its DP group", "its PP group"}
    no_dp = grid_figure(mesh.layout(8, tp=2, pp=4), colour_by="tp", picked=0)
    assert "its DP group" not in _key(no_dp)
    assert not grid_figure(mesh.layout(8, tp=2, pp=4), colour_by="tp").legends  # nothing picked, nothing outlined


def test_the_static_outlines_are_the_apps():
    outlines = dict(re.findall(r'\[\s*"(tp|dp|pp)",\s*"(#[0-9A-Fa-f]{6})"', GRID_JS.read_text()))
    assert set(outlines) == {"tp", "dp", "pp"}
    assert {d: HIGHLIGHT[d].lower() for d in outlines} == {d: c.lower() for d, c in outlines.items()}
