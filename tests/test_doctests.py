"""Every worked example in distlab's docstrings runs (doctest), and every public formula carries one.

Issue 13: each public formula's docstring names the lesson and section that teaches it ("Lesson 4 §3") and
shows one worked example, so a reader goes from a number in a lesson to its function and back in one hop.
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import pathlib
import pkgutil
import re

import pytest

import distlab


def _is_alias(info) -> bool:
    """A deprecated module kept only so old imports work: importing it warns, and it holds no examples."""
    if info.name.startswith("distlab.course."):
        return True
    path = pathlib.Path(info.module_finder.path) / (info.name.rsplit(".", 1)[1] + ".py")
    return path.exists() and "renamed_module(__name__" in path.read_text(encoding="utf-8")


ALL_MODULES = sorted(
    info.name
    for info in pkgutil.walk_packages(distlab.__path__, "distlab.")
    if not info.name.endswith("__main__") and not _is_alias(info)
)

#: The formula modules whose every public function (their __all__) must name its lesson and show an example.
FORMULA_MODULES = [
    "distlab.hardware",
    "distlab.models",
    "distlab.memory",
    "distlab.precision",
    "distlab.flops",
    "distlab.efficiency",
    "distlab.expert_gemms",
    "distlab.memory_recipes",
    "distlab.mesh",
    "distlab.moe.activations",
    "distlab.moe.catalog",
    "distlab.moe.capacity",
    "distlab.moe.all_to_all",
    "distlab.moe.cost",
    "distlab.moe.export",
    "distlab.moe.routing",
    "distlab.moe.step",
    "distlab.planner",
    "distlab.export",
    "distlab.validation",
    "distlab.collectives.algorithms",
    "distlab.collectives.cost",
    "distlab.collectives.simulate",
    "distlab.dataparallel",
    "distlab.fsdp",
    "distlab.failures",
    "distlab.batch",
    "distlab.budget",
    "distlab.pipeline.layout",
    "distlab.pipeline.schedules",
    "distlab.pipeline.timeline",
    "distlab.pipeline.closed_form",
    "distlab.pipeline.layers",
    "distlab.pipeline.stages",
    "distlab.pipeline.advice",
    "distlab.pipeline.memory",
    "distlab.production",
    "distlab.tensor",
    "distlab.training",
    "distlab.triage",
    "distlab.step.placement",
    "distlab.step_parts",
    "distlab.step.terms",
    "distlab.calibration",
]

LESSON_LINK = re.compile(r"Lesson \d+[a-z]? §\d+")  # 8b: the second part of lesson 8


@pytest.mark.parametrize("name", ALL_MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed (run pytest -s)"


def _public_functions(module):
    for name in getattr(module, "__all__", []):
        obj = getattr(module, name)
        if inspect.isfunction(obj) and obj.__module__.startswith("distlab"):
            yield name, obj


@pytest.mark.parametrize("name", FORMULA_MODULES)
def test_every_public_formula_names_its_lesson_and_shows_an_example(name):
    module = importlib.import_module(name)
    assert hasattr(module, "__all__"), f"{name} declares no public API (__all__)"
    missing = [
        f"{fn}: {'no lesson link ' if not LESSON_LINK.search(obj.__doc__ or '') else ''}"
        f"{'no >>> example' if '>>>' not in (obj.__doc__ or '') else ''}"
        for fn, obj in _public_functions(module)
        if not LESSON_LINK.search(obj.__doc__ or "") or ">>>" not in (obj.__doc__ or "")
    ]
    assert missing == []


def test_the_lesson_link_check_can_fail():
    def undocumented():
        """Computes something."""

    assert not LESSON_LINK.search(undocumented.__doc__)
