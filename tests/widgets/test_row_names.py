"""Every stages x time picture drawn with matplotlib names its rows ("stage 0" on top), as the browser's grid does
(look20: lesson 4's stage analysis and lesson 11's schedule grid showed rows a student could not tell apart).

Found by an app walk, not a list: any lesson app holding a fixed TimelineGrid is checked at every p its stages
slider offers. The names are checked twice: where the grid says it put them (one per named row, centred on it,
none over another, inside the figure) and in the drawn pixels (ink left of the grid at every named row's height,
none left of it where the rows are unnamed gaps)."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from distlab.plots._ticks import TICK_PAD_PT, _sprite
from distlab.plots.pipeline import TimelineGrid
from tests.widgets.lesson_apps import lesson_apps


def _grid_apps() -> list:
    found = []
    for cls in lesson_apps():
        app = cls()
        grid = getattr(app, "grid", None)
        if isinstance(grid, TimelineGrid) and grid.ticks is not None:
            found.append(cls)
    return found


GRID_APPS = _grid_apps()


def test_the_walk_finds_both_matplotlib_grids():
    # lesson 4's stage analysis and lesson 11's schedule grid (the bubble grid of lesson 4 is drawn in the browser)
    assert {cls.__name__ for cls in GRID_APPS} >= {"StageAnalysisApp", "ScheduleApp"}


def _pixels(fig) -> np.ndarray:
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[:, :, :3].astype(int)


@pytest.mark.parametrize("cls", GRID_APPS, ids=lambda c: c.__name__)
def test_every_grid_names_its_rows_at_every_p(cls):
    app = cls()
    grid = app.grid
    fig = app.fig
    points = fig.dpi / 72.0
    for p in range(app.stages.min, app.stages.max + 1):
        app.stages.value = p
        assert app.result is not None, (cls.__name__, p, app.error)
        rows = grid.rows
        assert rows is not None and rows in grid.animated_artists  # drawn with every frame, so p never waits
        named = [int(label.removeprefix("stage ")) for label in rows.labels]
        assert [f"stage {s}" for s in named] == list(rows.labels)
        assert named[0] == 0, (p, named)  # the top row is always named
        steps = set(np.diff(named).tolist()) if len(named) > 1 else set()
        assert len(steps) <= 1 and named[-1] + max(steps or {1}) >= p, (p, named)  # evenly, down to the last rows
        if p <= 8:  # 8 rows of 8 pt names fit the shortest grid (about 120 pt tall)
            assert named == list(range(p)), (p, named)
        assert np.allclose(rows.fractions, [1 - (s + 0.5) / p for s in named])  # centred on their rows
        box = grid.ax.bbox
        heights, lefts = [], []
        for label in rows.labels:
            _, width, height, _, _ = _sprite(label, rows.labelsize, rows.colour, fig.dpi)
            heights.append(height)
            lefts.append(box.x0 - TICK_PAD_PT * points - width)
        centres = [box.y0 + f * box.height for f in rows.fractions]
        gaps = -np.diff(centres)
        assert all(g >= h for g, h in zip(gaps, heights)), (p, gaps, heights)  # no name over the next
        assert min(lefts) >= 1, (p, min(lefts))  # inside the figure: room was left for "stage 15"
        ink = _pixels(fig)
        height = ink.shape[0]
        for s, y in zip(named, centres):
            row = height - int(round(y))
            strip = ink[row - 2 : row + 3, : int(box.x0) - 1]
            assert (strip.sum(axis=2) < 3 * 160).any(), (cls.__name__, p, f"no ink for stage {s}")
