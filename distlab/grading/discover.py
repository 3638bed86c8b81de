"""Which lesson a notebook belongs to, and its questions: read from the manifest distlab.lessons.LESSONS.

A lesson is graded when its manifest entry names a question module; its older names (aliases,
such as ``data_parallel`` for ``data_parallel_zero``) still identify it, so notebooks submitted
before a rename grade as before. Lessons are found in the notebook metadata
``metadata["distlab"]["lesson"]``, else in the file name (``01_memory_wall.ipynb``), else in the
``distlab.lessons.<lesson>`` (or older ``distlab.course.<lesson>``) module its cells import.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable

from .. import lessons as manifest
from ..errors import ConfigurationError
from .report import shown

__all__ = [
    "lesson_names",
    "known_names",
    "canonical",
    "lesson_questions",
    "lessons",
    "lesson_from_name",
    "lesson_from_imports",
    "identify_lesson",
]


def lesson_names() -> list[str]:
    """The slugs of the graded lessons of the manifest (their modules are not imported)."""
    return sorted(manifest.graded())


def known_names() -> list[str]:
    """Every name of a graded lesson: slugs and older aliases."""
    graded = manifest.graded()
    return sorted(name for name, slug in manifest.NAMES.items() if slug in graded)


def canonical(name: str) -> str:
    """The slug of the lesson called `name` (an alias gives its slug); an unknown name is returned as is."""
    return manifest.NAMES.get(name, name)


def lesson_questions(name: str) -> dict:
    """The QUESTIONS dict of lesson `name` (a slug or an alias); ConfigurationError if none."""
    slug = canonical(name)
    if slug not in manifest.graded():
        raise ConfigurationError(
            f"lesson {name!r} is not a graded lesson of distlab.lessons; lessons: {', '.join(lessons()) or 'none'}"
        )
    entry = manifest.LESSONS[slug]
    try:
        questions = entry.load_questions()
    except Exception as exc:  # a lesson module with a bug: say so, do not crash the whole grading run
        raise ConfigurationError(
            f"{entry.questions} could not be imported ({type(exc).__name__}: {str(exc)[:200]})"
        ) from None
    if not isinstance(questions, dict) or not questions:
        raise ConfigurationError(f"{entry.questions} has no QUESTIONS, so it is not a graded lesson")
    return questions


def lessons() -> dict[str, dict]:
    """Every graded lesson: {slug: QUESTIONS}. Question modules that fail to import are skipped."""
    found = {}
    for slug in lesson_names():
        try:
            questions = manifest.LESSONS[slug].load_questions()
        except Exception:  # a lesson being written: not gradable yet, not our crash
            continue
        if isinstance(questions, dict) and questions:
            found[slug] = questions
    return found


def lesson_from_name(filename: str, names: Iterable[str] | None = None) -> str | None:
    """The lesson whose name appears in the file name (longest match wins), as its slug.

    '01_memory_wall.ipynb', 'memory_wall (1).ipynb' and 'jane_01_memory_wall-Copy1.ipynb'
    all give 'memory_wall'. names: the names to look for (default: every slug and alias).
    """
    stem = Path(filename).name.lower()
    stem = re.sub(r"\.ipynb$", "", stem)
    names = known_names() if names is None else names
    hits = [n for n in names if re.search(rf"(^|[^a-z]){re.escape(n)}($|[^a-z])", stem)]
    return canonical(max(hits, key=len)) if hits else None


_IMPORT = re.compile(
    r"(?:from\s+distlab\.(?:lessons|course)\.(\w+)\s+import"
    r"|from\s+distlab\.(?:lessons|course)\s+import\s+(\w+)"
    r"|import\s+distlab\.(?:lessons|course)\.(\w+))"
)


def lesson_from_imports(sources: list[str], names: Iterable[str] | None = None) -> str | None:
    """The first lesson whose question module the sources import (distlab.lessons.X or distlab.course.X)."""
    names = set(known_names() if names is None else names)
    for source in sources:
        for match in _IMPORT.finditer(source):
            name = next(g for g in match.groups() if g)
            if name in names:
                return canonical(name)
    return None


#: a lesson name read from a notebook's metadata is kept as a short escaped excerpt of this many characters (the
#: lessons' names are under 30): a 7.5 MB name was echoed whole in problems, results.json and Gradescope's output,
#: 333 MB of grader memory (class/01)
MAX_LESSON_NAME = 60


def identify_lesson(metadata: Any, filename: str, sources: list[str]) -> tuple[str | None, str]:
    """(lesson, how it was found): notebook metadata (a short escaped excerpt, report.shown), then file name, then
    imports."""
    if isinstance(metadata, dict):
        meta = metadata.get("distlab")
        lesson = meta.get("lesson") if isinstance(meta, dict) else None
        if isinstance(lesson, str) and lesson:
            return canonical(shown(lesson, MAX_LESSON_NAME)), "notebook metadata"
    lesson = lesson_from_name(filename)
    if lesson:
        return lesson, "file name"
    lesson = lesson_from_imports(sources)
    if lesson:
        return lesson, "imports"
    return None, ""
