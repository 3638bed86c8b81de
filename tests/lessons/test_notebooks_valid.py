"""Every committed notebook (lessons, solutions, exercises) is valid nbformat 4, as JupyterLab, nbval and the
grader read it: a markdown cell carrying an 'outputs' key (a stream-merging script once wrote one into three lessons)
makes nbconvert report 'Notebook JSON is invalid'."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).parents[2]
NOTEBOOKS = sorted(p for folder in ("notebooks", "solutions", "exercises") for p in (ROOT / folder).glob("*.ipynb"))


def test_the_notebooks_are_found():
    assert len(NOTEBOOKS) >= 30


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_notebook_is_valid_nbformat(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)  # raises nbformat.ValidationError naming the cell and the property
