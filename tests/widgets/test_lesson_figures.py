"""The static figures the lessons draw read right, as the lessons draw them: test_figures.py's checks (no legend
entry for a part nothing draws, no two texts on top of each other, no text leaving the figure) on every matplotlib
Figure a lesson notebook's cell shows.

test_figures.py checks the apps' figures; the static ones (distlab.plots.*_figure, called from the lessons' cells)
were checked by no test, and a student saw two of test_figures' defects in lesson 1's first figure (review v14):
the 7B bar's total '112 GB' overprinted by the capacity line's label 'h100-sxm: 84.9 GB' just under it, and a legend
entry 'activations' in a chart of model states that draws none. A static figure also names its axes' units (an axis
label, or units in the tick labels): it has no HTML beside it to say them. The notebooks' code is run here in one IPython
shell per lesson, the figures taken from each cell's result, so a new lesson figure is checked without a list to
keep up to date."""

from __future__ import annotations

import contextlib
import json
import re
import sys
from pathlib import Path

import pytest
from matplotlib.figure import Figure
from test_figures import powers_of_units, problems, unitless_axes

ROOT = Path(__file__).resolve().parents[2]
LESSONS = sorted((ROOT / "notebooks").glob("*.ipynb"))

#: `%matplotlib inline` would switch this process's pyplot backend; the figures are made with Figure() anyway
BACKEND_MAGIC = re.compile(r"^\s*%matplotlib.*$", re.MULTILINE)


@contextlib.contextmanager
def _without_torch():
    """PyTorch hidden (`import torch` raises ImportError, as where it is not installed) for the duration. The PyTorch
    cells of lessons 9, 10 and 11 measure (lesson 9: model states, activations, an all-reduce over 2-4 gloo
    processes; lesson 10: the MoE block's saved tensors; lesson 11: FSDP's issue order, the pipeline orders) and
    print; none of them has a Figure for its
    result (a %%recorded cell's result is the magic's, None, with torch or without). Their measurements are checked
    where the README's command runs them: the notebooks themselves (nbval, with torch) and tests/core's verify
    tests; here they took about 20 s of CPU for no figure (issue 32). Without torch those cells print the recorded
    outputs or the install hint, and every figure a lesson's cell returns is the same."""
    saved = {name: sys.modules[name] for name in list(sys.modules) if name == "torch" or name.startswith("torch.")}
    sys.modules["torch"] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        del sys.modules["torch"]
        sys.modules.update(saved)


def lesson_figures(path: Path) -> list[tuple[int, Figure]]:
    """(cell number, figure) for each cell of the lesson whose result is a matplotlib Figure, the notebook's code
    run in order in a fresh IPython shell without PyTorch (_without_torch: its %%recorded cells replay their
    recorded outputs, its `if torch_available()` cells print the install hint)."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    figures = []
    try:
        for number, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
            if cell["cell_type"] != "code":
                continue
            with _without_torch():
                result = shell.run_cell(
                    BACKEND_MAGIC.sub("", "".join(cell["source"])), silent=False, store_history=False
                )
            if result.error_before_exec or result.error_in_exec:
                raise AssertionError(f"{path.name} cell {number}: {result.error_before_exec or result.error_in_exec!r}")
            if isinstance(result.result, Figure):
                figures.append((number, result.result))
    finally:
        shell.clear_instance()
    return figures


@pytest.mark.slow  # every lesson's figures built and drawn: outside the fast tier (README)
@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_every_lesson_figure_reads_right(path):
    found = [
        f"cell {number}: {p}"
        for number, fig in lesson_figures(path)
        for p in problems(fig) + unitless_axes(fig) + powers_of_units(fig)
    ]
    assert not found, f"{path.name}: " + "; ".join(found)


def test_the_lessons_figures_are_found():
    # the check above would pass on nothing if no cell's result were taken for a figure: lesson 1 shows one, lesson 2
    # three (the parameter-server load, the ring's states, the cost against the message size)
    counts = {p.stem: len(lesson_figures(p)) for p in LESSONS if p.stem in ("01_memory_wall", "02_collectives")}
    assert counts == {"01_memory_wall": 1, "02_collectives": 3}, counts


def test_the_unit_check_finds_a_bare_axis():
    from matplotlib.figure import Figure as Plain

    fig = Plain(figsize=(4, 3))
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_xlim(1e-5, 10)
    ax.barh([0], [1e-3], left=1e-5)
    fig.draw_without_rendering()
    assert [p.split(":")[0] for p in unitless_axes(fig)] == ["x axis", "y axis"]
    ax.set_xlabel("time (s)")
    ax.set_yticks([0], ["experts"])
    fig.draw_without_rendering()
    assert unitless_axes(fig) == []
