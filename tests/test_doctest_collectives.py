"""The worked examples in the docstrings of the collectives and data-parallel modules run (issue 13).

Each public function there names the lesson section that teaches it and carries one `>>>` example;
this runs them all, so an example cannot drift from what the function returns.
"""

from __future__ import annotations

import doctest

import pytest

from distlab import _arguments, dataparallel
from distlab.collectives import cost, simulate

MODULES = [cost, simulate, dataparallel, _arguments]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_docstring_examples_run(module):
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("module", [cost, simulate, dataparallel], ids=lambda m: m.__name__)
def test_every_public_function_names_its_lesson_and_has_an_example(module):
    import inspect

    missing = []
    for name in module.__all__:
        obj = getattr(module, name)
        if inspect.isfunction(obj):
            doc = inspect.getdoc(obj) or ""
            if "Lesson " not in doc or ">>>" not in doc:
                missing.append(name)
    assert missing == []
