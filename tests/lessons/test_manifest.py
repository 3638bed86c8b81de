"""The lesson manifest (distlab.lessons.LESSONS) lists every lesson notebook, every question module, every
solution and exercise, and the apps and library modules each lesson uses; the README's lesson table follows it."""

from __future__ import annotations

import doctest
import importlib
import re
from pathlib import Path

import nbformat
import pytest

import distlab.lessons
from distlab.lessons.questions import NOT_ATTEMPTED
from distlab.lessons import LESSONS, NAMES, lesson

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_every_lesson_notebook_is_in_the_manifest_in_order():
    notebooks = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert [entry.notebook for entry in LESSONS.values()] == notebooks
    # whole numbers 1, 2, ... in order; a split lesson's second part (8b) shares its first part's number, so
    # the lessons after it keep theirs (and their notebooks, slugs and submitted work)
    numbers = sorted({entry.number for entry in LESSONS.values()})
    assert numbers == list(range(1, len(numbers) + 1))
    keys = [(entry.number, entry.part) for entry in LESSONS.values()]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert all(entry.part == "" or entry.part.isalpha() and entry.part.islower() for entry in LESSONS.values())
    assert all((e.number, "") in keys for e in LESSONS.values())  # a part b only after its lesson
    for entry in LESSONS.values():
        assert Path(entry.notebook).name.startswith(f"{entry.number:02d}{entry.part}_")


def test_every_question_module_is_in_the_manifest():
    modules = sorted(
        p.stem
        for p in (ROOT / "distlab" / "lessons").glob("*.py")
        if p.stem not in ("__init__", "questions", "variants", "stub")
    )  # the shared question types, their per-student variants, and the answer-free stubs a graded kernel imports
    assert sorted(e.questions.rsplit(".", 1)[1] for e in LESSONS.values() if e.questions) == modules
    for entry in LESSONS.values():
        if entry.questions:
            assert entry.questions == f"distlab.lessons.{entry.slug}"
            assert entry.load_questions(), entry.slug


def test_every_solution_and_exercise_is_a_lesson_with_questions():
    exercises = sorted(e.exercise for e in LESSONS.values() if e.exercise)
    for folder in ("solutions", "exercises"):
        assert sorted(p.name for p in (ROOT / folder).glob("*.ipynb")) == exercises, folder
    for entry in LESSONS.values():
        assert bool(entry.exercise) == bool(entry.questions), entry.slug
        if entry.exercise:
            nb = nbformat.read(ROOT / "solutions" / entry.exercise, as_version=4)
            assert nb.metadata["distlab"]["lesson"] == entry.slug
            assert f"from distlab.lessons.{entry.slug} import" in "".join(c.source for c in nb.cells)


@pytest.mark.parametrize("entry", LESSONS.values(), ids=lambda e: e.slug)
def test_apps_and_modules_are_the_ones_the_notebook_uses(entry):
    text = (ROOT / entry.notebook).read_text(encoding="utf-8")
    shown = set(re.findall(r"\b([A-Z]\w*App)\(", text))
    assert {dotted.rsplit(".", 1)[1] for dotted in entry.apps} == shown
    assert all(isinstance(app, type) for app in entry.load_apps())
    imported = {
        name.strip() for block in re.findall(r"from distlab import ([\w, ]+)", text) for name in block.split(",")
    }
    assert entry.modules and set(entry.modules) <= imported, set(entry.modules) - imported
    for name in entry.modules:
        importlib.import_module(f"distlab.{name}")


GRADED = [(e.slug, name, q) for e in LESSONS.values() for name, q in e.load_questions().items()]


@pytest.mark.parametrize("slug, name, question", GRADED, ids=[f"{s}-{n}" for s, n, _ in GRADED])
def test_every_question_has_a_prompt_hint_solution_and_starts_unanswered(slug, name, question):
    assert question.name == name and question.prompt
    assert question.hint().text and question.solution().text
    assert question.check(None).status == NOT_ATTEMPTED


def test_older_names_are_aliases_of_one_lesson():
    assert lesson("data_parallel") is LESSONS["data_parallel_zero"]
    # lesson 8 was split: its first part keeps the slug "production" (old submissions of 08_production grade there)
    assert lesson("production").notebook == "notebooks/08_production.ipynb"
    assert all(NAMES[slug] == slug for slug in LESSONS)
    aliases = [a for entry in LESSONS.values() for a in entry.aliases]
    assert len(set(aliases)) == len(aliases) and not set(aliases) & set(LESSONS)


def test_the_readme_table_lists_every_lesson():
    rows = re.findall(r"^\| (\d+[a-z]?) \| `([^`]+)`", README, re.M)
    assert rows == [(e.label, e.notebook) for e in LESSONS.values()]


def test_the_manifest_docstring_example_runs():
    assert doctest.testmod(distlab.lessons).failed == 0
