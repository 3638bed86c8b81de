"""distlab.course (before the split into distlab.lessons and distlab.grading) still imports, with a warning:
students' notebooks import distlab.course.<lesson>, and must keep running and grading."""

from __future__ import annotations

import importlib
import sys

import pytest

OLD = {
    "distlab.course.memory_wall": "distlab.lessons.memory_wall",
    "distlab.course.collectives": "distlab.lessons.collectives",
    "distlab.course.data_parallel": "distlab.lessons.data_parallel_zero",
    "distlab.course.pipeline": "distlab.lessons.pipeline",
    "distlab.course.tensor_parallel": "distlab.lessons.tensor_parallel",
    "distlab.course.parallelism_3d": "distlab.lessons.parallelism_3d",
    "distlab.course.training_lab": "distlab.lessons.training_lab",
    "distlab.course.production": "distlab.lessons.production",
    "distlab.course.checks": "distlab.lessons.questions",
    "distlab.course.build": "distlab.grading.build",
}


@pytest.mark.parametrize("old, new", OLD.items())
def test_an_old_module_is_the_new_one_and_warns(old, new, monkeypatch):
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)


def test_old_grade_names_are_re_exported(monkeypatch):
    import distlab.course

    # forget an earlier import (tests/test_doctests.py imports every module), so this one runs and warns
    monkeypatch.delitem(sys.modules, "distlab.course.grade", raising=False)
    monkeypatch.delattr(distlab.course, "grade", raising=False)
    with pytest.warns(DeprecationWarning, match="distlab.grading.grade"):
        grade = importlib.import_module("distlab.course.grade")
    from distlab.grading import answers, discover, grade as new, report

    assert grade.grade_notebooks is new.grade_notebooks and grade.GradeReport is report.GradeReport
    assert grade.parse_answers is answers.parse_answers and grade.lessons is discover.lessons
    assert grade.DEFAULT_TIMEOUT == new.DEFAULT_TIMEOUT and grade.SANDBOXES == new.SANDBOXES
