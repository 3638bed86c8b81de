"""A stacked bar chart's legend lists its parts in the order the bars stack them, the top one first (a student's
review: lesson 1's model-states figure and lesson 8b's triage ladder listed weights, gradients, optimizer states and
activations from the top of the legend down, over bars that stack them from the bottom up; the apps' legends beside
the same bars read top first). Checked on every static figure of the lessons that draws vertical stacks."""

from __future__ import annotations

from pathlib import Path

import pytest
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from test_lesson_figures import LESSONS, lesson_figures


def _stacks(ax) -> list[list[str]]:
    """The colours of each vertical stack of the axes' bars, bottom first: visible rectangles of one x and width,
    each starting where the one under it ends (two parts or more)."""
    columns: dict[tuple, list[Rectangle]] = {}
    for patch in ax.patches:
        if isinstance(patch, Rectangle) and patch.get_visible() and patch.get_height() > 0:
            columns.setdefault((round(patch.get_x(), 6), round(patch.get_width(), 6)), []).append(patch)
    stacks = []
    for parts in columns.values():
        parts.sort(key=lambda r: r.get_y())
        touching = all(abs(a.get_y() + a.get_height() - b.get_y()) < 1e-9 for a, b in zip(parts, parts[1:]))
        if len(parts) >= 2 and touching:
            stacks.append([to_hex(r.get_facecolor()) for r in parts])
    return stacks


def legend_against_stacks(fig) -> list[str]:
    """For each axes with a legend over vertical stacks: the legend's part colours in another order than the stacks
    show them top first (parts a stack lacks left out)."""
    found = []
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None:
            continue
        entries = [
            (text.get_text(), to_hex(handle.get_facecolor()))
            for handle, text in zip(legend.legend_handles, legend.get_texts())
            if isinstance(handle, Rectangle)
        ]
        for stack in _stacks(ax):
            top_first = [c for c in reversed(stack) if c in {colour for _, colour in entries}]
            listed = [colour for _, colour in entries if colour in stack]
            if listed != list(dict.fromkeys(top_first)):
                names = [label for label, colour in entries if colour in stack]
                found.append(f"legend {names} is not the stack's order, top first")
                break
    return found


def test_the_check_finds_a_legend_listed_bottom_first():
    fig = Figure(figsize=(4, 3))
    ax = fig.add_subplot()
    ax.bar([0], [1], color="#0072B2", label="bottom")
    ax.bar([0], [2], bottom=[1], color="#E69F00", label="top")
    ax.legend()
    assert legend_against_stacks(fig) != []
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles[::-1], labels[::-1])
    assert legend_against_stacks(fig) == []


@pytest.mark.parametrize("name", ["01_memory_wall", "08b_failure_triage"])
def test_the_lessons_stacked_bars_list_their_parts_top_first(name):
    path = next(p for p in LESSONS if p.stem == name)
    figures = lesson_figures(path)
    assert any(_stacks(ax) for _, fig in figures for ax in fig.axes)  # the check sees the lesson's stacks
    found = [f"cell {n}: {p}" for n, fig in figures for p in legend_against_stacks(fig)]
    assert not found, f"{name}: {found}"


@pytest.mark.slow  # every lesson's figures built and drawn: outside the fast tier (README)
@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_every_lesson_legend_over_stacked_bars_lists_them_top_first(path: Path):
    found = [f"cell {n}: {p}" for n, fig in lesson_figures(path) for p in legend_against_stacks(fig)]
    assert not found, f"{path.name}: {found}"


def test_a_figure_without_a_legend_or_stacks_passes():
    assert isinstance(legend_against_stacks(Figure()), list) and legend_against_stacks(Figure()) == []
