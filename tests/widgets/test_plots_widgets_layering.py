"""Layering of the presentation layer, read from the source with ast.

Plots draw data they are given: a plot module imports no other lesson's plot module (only the shared
plots/_style.py and plots/_bars.py) and no distlab module that computes (only units' formatting and
errors). Widgets share one update template: only widgets/common.py (LessonApp.update) and widgets/filling.py
(attempt) catch DistlabError, and every lesson app subclasses LessonApp.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import distlab.plots
import distlab.widgets

PACKAGE = Path(distlab.plots.__file__).resolve().parents[1]
#: The distlab modules a plot may import: formatting, the error types and the table of the step time's parts (labels
#: and colours, data only), nothing that computes.
PLOT_MAY_IMPORT = {"units", "errors", "step_parts"}


def _relative_imports(path: Path):
    """(level, module, names) of every relative import in a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            yield node.level, node.module or "", [a.name for a in node.names]


def _modules(package) -> list[Path]:
    """The package's modules, less the thin aliases of renamed modules (they only import the new one)."""
    return sorted(
        p
        for p in Path(package.__file__).parent.glob("*.py")
        if "renamed_module(__name__" not in p.read_text(encoding="utf-8")
    )


@pytest.mark.parametrize("path", _modules(distlab.plots), ids=lambda p: p.name)
def test_plot_modules_import_only_shared_style_and_formatting(path):
    for level, module, names in _relative_imports(path):
        if level == 1:  # a sibling in distlab/plots
            targets = [module] if module else names
            sideways = [t for t in targets if not t.split(".")[0].startswith("_")]
            assert not sideways, (
                f"{path.name} imports the plot module(s) {sideways}: shared drawing goes in plots/_*.py"
            )
        else:  # distlab itself
            top = module.split(".")[0] if module else None
            targets = [top] if top else names
            assert set(targets) <= PLOT_MAY_IMPORT, (
                f"{path.name} imports distlab.{module or names}: a plot receives computed data, it computes nothing"
            )


@pytest.mark.parametrize("path", _modules(distlab.widgets), ids=lambda p: p.name)
def test_only_the_lesson_app_base_catches_distlab_errors(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    catches = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.ExceptHandler) and "DistlabError" in ast.unparse(node.type or ast.Name("BaseException"))
    ]
    if path.name == "common.py":
        assert len(catches) == 1  # LessonApp.update
    elif path.name == "filling.py":
        assert len(catches) == 1  # attempt(): the positions of a browser picture, remembered results
    else:
        assert not catches, f"{path.name}:{catches}: an app catches DistlabError itself; LessonApp.update does"


def test_every_lesson_app_is_a_lesson_app():
    from distlab.widgets.common import LessonApp

    from distlab.lessons import LESSONS

    apps = [app for lesson in LESSONS.values() for app in lesson.load_apps()]
    assert len(apps) >= 12
    assert all(issubclass(app, LessonApp) for app in apps), [a for a in apps if not issubclass(a, LessonApp)]
    # one protocol: every app describes its result as text, and the summary is that text
    for app in apps:
        assert app.describe is not LessonApp.describe and app.summary is LessonApp.summary, app.__name__
        assert "update" not in vars(app), f"{app.__name__} overrides update"


def test_straggler_figure_draws_the_leading_term_it_is_given():
    import numpy as np

    from distlab import production
    from distlab.plots.production import straggler_figure

    ns = [2, 8, 64, 512]
    lead = production.leading_term_max_normal(ns)
    fig = straggler_figure(ns, [1.0] * 4, [1.0] * 4, [1.0] * 4, lead)
    line = next(ln for ln in fig.axes[0].lines if ln.get_label().startswith("leading term"))
    np.testing.assert_allclose(line.get_ydata(), lead)


def test_nice_ceiling_moved_to_the_style_module():
    from distlab.plots import _style, memory_wall as memory

    assert [_style.nice_ceiling(x) for x in (0, 0.7, 1.0, 1.2, 7.1, 950)] == [1.0, 0.8, 1.0, 1.5, 8.0, 1000.0]
    with pytest.warns(DeprecationWarning, match="plots._style.nice_ceiling"):
        assert memory.nice_ceiling is _style.nice_ceiling
