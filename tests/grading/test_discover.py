"""Lesson discovery: lessons come from the manifest distlab.lessons.LESSONS only; a notebook's lesson is read
from its metadata, then its file name, then its imports; older lesson names still identify their lesson."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from distlab import lessons as manifest
from distlab.errors import ConfigurationError
from distlab.grading import discover

ROOT = Path(__file__).resolve().parents[2]
LESSON1 = ROOT / "solutions" / "01_memory_wall.ipynb"
IMPORTS = "from distlab.lessons.memory_wall import q1, q2, q3, q4, q5, q6, q7"


def test_lessons_are_discovered():
    found = discover.lessons()
    assert "memory_wall" in found and set(found["memory_wall"]) == {f"q{i}" for i in range(1, 9)}
    assert not {"build", "checks", "execute", "grade"} & set(found)


@pytest.mark.parametrize(
    "name, want",
    [
        ("01_memory_wall.ipynb", "memory_wall"),
        ("01_memory_wall (1).ipynb", "memory_wall"),
        ("jane_doe_01_memory_wall-Copy1.ipynb", "memory_wall"),
        ("submission.ipynb", None),
        ("memory_walls.ipynb", None),
    ],
)
def test_lesson_from_file_name(name, want):
    assert discover.lesson_from_name(name, discover.lesson_names()) == want


def test_lesson_from_metadata_then_name_then_imports():
    assert discover.identify_lesson({"distlab": {"lesson": "x"}}, "01_memory_wall.ipynb", []) == (
        "x",
        "notebook metadata",
    )
    assert discover.identify_lesson({}, "01_memory_wall.ipynb", [])[0] == "memory_wall"
    assert discover.identify_lesson(None, "hw.ipynb", [IMPORTS]) == ("memory_wall", "imports")
    assert discover.identify_lesson({"distlab": 3}, "hw.ipynb", ["import numpy"]) == (None, "")


def test_solution_notebooks_name_their_lesson():
    # the lesson key lives in the solutions and is copied into exercises by `distlab exercises`
    nb = nbformat.read(LESSON1, as_version=4)
    assert nb.metadata["distlab"]["lesson"] == "memory_wall"


@pytest.mark.parametrize("folder", ["solutions", "exercises"])
def test_every_exercise_notebook_names_a_graded_lesson_its_cells_import(folder):
    # metadata is what `distlab grade` trusts first, so it must name the lesson whose checks the
    # notebook's own cells import (a wrong key would grade against another lesson's answers)
    for path in sorted((ROOT / folder).glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        lesson = nb.metadata.get("distlab", {}).get("lesson")
        assert lesson in discover.lessons(), f"{path.name}: metadata lesson {lesson!r}"
        sources = [cell.source for cell in nb.cells if cell.cell_type == "code"]
        assert discover.lesson_from_imports(sources, discover.lesson_names()) == lesson, path.name


def test_the_grader_discovers_lessons_from_the_manifest_only(monkeypatch):
    assert set(discover.lessons()) == set(manifest.graded()) == set(discover.lesson_names())
    # a lesson taken out of the manifest is no longer gradable, although its module is still there
    kept = {"memory_wall": manifest.LESSONS["memory_wall"]}
    monkeypatch.setattr(manifest, "LESSONS", kept)
    monkeypatch.setattr(manifest, "NAMES", {"memory_wall": "memory_wall"})
    assert list(discover.lessons()) == ["memory_wall"]
    with pytest.raises(ConfigurationError, match="not a graded lesson"):
        discover.lesson_questions("collectives")
    assert discover.lesson_from_name("02_collectives.ipynb") is None


@pytest.mark.parametrize(
    "metadata, filename, sources",
    [
        ({"distlab": {"lesson": "data_parallel"}}, "hw.ipynb", []),
        ({}, "03_data_parallel_zero.ipynb", []),
        ({}, "data_parallel.ipynb", []),
        (None, "hw.ipynb", ["from distlab.course.data_parallel import q1, q2"]),
        (None, "hw.ipynb", ["import distlab.lessons.data_parallel_zero as lesson"]),
    ],
)
def test_older_lesson_names_identify_the_lesson(metadata, filename, sources):
    # notebooks submitted before lesson 3's module was renamed name it data_parallel
    assert discover.identify_lesson(metadata, filename, sources)[0] == "data_parallel_zero"
    assert discover.lesson_questions("data_parallel") is discover.lesson_questions("data_parallel_zero")


def test_old_imports_of_distlab_course_identify_the_lesson():
    old = IMPORTS.replace("distlab.lessons", "distlab.course")
    assert discover.identify_lesson(None, "hw.ipynb", [old]) == ("memory_wall", "imports")
