"""The student view of distlab: the package a grading kernel imports, with the answer key taken out.

build(dest) writes a copy of the installed distlab package into `dest` in which
* every lesson's question module (distlab.lessons.<lesson>) is a generated module of QuestionStubs
  (distlab.lessons.stub): prompt, hint, points, unit, options and literal params of each question, and
  the literal setup constants the exercise notebooks import (SHARED), and nothing that computes an
  expected value, an explanation, a solution or feedback;
* distlab.lessons.variants is a stub whose personal() returns those stubs (the grader checks each
  student's numbers with the student's seed, outside the kernel);
* the grader itself (distlab.grading, distlab.commands, the CLI) and the deprecated aliases of the grader
  (distlab.course.grade, distlab.course.build) are absent.
The formula modules stay: using them is what the lessons teach. Each module of the view comes with its bytecode,
compiled from the view itself. student_view() builds it once per process
(in a private temporary folder, removed at exit); sandbox.bwrap_prefix binds it read-only in the sandbox.
"""

from __future__ import annotations

import ast
import atexit
import compileall
import os
import shutil
import tempfile
import threading
from pathlib import Path

from ..lessons import LESSONS
from . import scratch

__all__ = ["SHARED", "REMOVED", "stub_source", "build", "student_view"]

#: setup constants of a lesson module that its exercise notebook imports (literal data, no answers)
SHARED = {
    "capstone": (
        "SCENARIO",
        "BUDGET_DAYS",
        "TOKENS",
        "LAYOUT_A",
        "CHANGES",
        "ASSIGNMENT",
        "ASSIGNMENT_DAYS",
        "ASSIGNMENT_TOKENS",
        "DENSE_HABIT",
        "LAYOUT_B",
        "MOE_CHANGES",
    )
}
#: paths (relative to the package) left out of the view: the grader, the CLI, and aliases that import the grader
REMOVED = ("grading", "commands", "cli.py", "__main__.py", "course/grade.py", "course/build.py")

_VARIANTS_STUB = '''"""Per-student variants while grading (generated): personal() returns the lesson's question stubs."""

from . import lesson as _lesson

__all__ = ["personal"]


def personal(lesson, names, seed=None, release=None):
    """The stubs of the questions `names` of `lesson` (the grader checks them with the student's seed)."""
    questions = _lesson(lesson).load_questions()
    picked = [questions[name] for name in str(names).split()]
    return tuple(picked) if len(picked) != 1 else picked[0]
'''


def _literal(value):
    """repr(value) when it reads back as the same literal (numbers, strings, tuples, dicts...), else None."""
    text = repr(value)
    try:
        return text if ast.literal_eval(text) == value else None
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def stub_source(slug: str) -> str:
    """The source of the stub module of lesson `slug`: its QUESTIONS as QuestionStubs, q1.. and SHARED constants."""
    module = LESSONS[slug].question_module()
    lines = [
        f'"""Question stubs of lesson {slug} (generated for grading: the answer key is not here)."""',
        "",
        "from .stub import QuestionStub",
        "",
        "QUESTIONS = {",
    ]
    for name, q in getattr(module, "QUESTIONS", {}).items():
        params = {k: v for k, v in dict(getattr(q, "params", {}) or {}).items() if _literal(v) is not None}
        fields = {
            "name": str(name),
            "kind": type(q).__name__,
            "prompt": str(getattr(q, "prompt", "")),
            "hint_text": str(getattr(q, "hint_text", "")),
            "points": float(getattr(q, "points", 1.0)),
            "unit": str(getattr(q, "unit", "")),
            "noun": str(getattr(q, "noun", "")),
            "options": tuple(str(o) for o in getattr(q, "options", ()) or ()),
            "params": params,
        }
        args = ", ".join(f"{k}={v!r}" for k, v in fields.items())
        lines.append(f"    {str(name)!r}: QuestionStub({args}),")
    lines.append("}")
    names = list(getattr(module, "QUESTIONS", {}))
    exported = ["QUESTIONS"]
    for name in names:
        if name.isidentifier():
            lines.append(f"{name} = QUESTIONS[{name!r}]")
            exported.append(name)
    for constant in SHARED.get(slug, ()):
        text = _literal(getattr(module, constant))
        if text is not None:
            lines.append(f"{constant} = {text}")
            exported.append(constant)
    lines.append(f"__all__ = {exported!r}")
    return "\n".join(lines) + "\n"


def build(dest: Path) -> Path:
    """Write the student view into `dest` (a new folder); returns the folder to put on the kernel's sys.path."""
    import distlab

    package = Path(distlab.__file__).resolve().parent
    dest = Path(dest)
    target = dest / "distlab"
    shutil.copytree(package, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for removed in REMOVED:
        path = target / removed
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    lessons = target / "lessons"
    known = {"__init__.py", "questions.py", "stub.py", "variants.py"}
    for lesson in LESSONS.values():
        if lesson.questions:
            module = lesson.questions.rpartition(".")[2]
            (lessons / f"{module}.py").write_text(stub_source(lesson.slug), encoding="utf-8")
            known.add(f"{module}.py")
    (lessons / "variants.py").write_text(_VARIANTS_STUB, encoding="utf-8")
    for extra in lessons.iterdir():  # anything else in lessons/ (a helper module added later) is left out
        if extra.name not in known:
            shutil.rmtree(extra) if extra.is_dir() else extra.unlink()
    # the bytecode of the view as written (the stubs', not the key's): a grading kernel may write none, so without
    # it every kernel compiled each distlab module it imported (lesson 7's: 0.26 s of CPU, 0.17 s with it; the
    # whole view compiles in 0.2 s, once per grading process)
    compileall.compile_dir(dest, quiet=1)
    for path in [dest, *dest.rglob("*")]:  # readable by the kernel's unprivileged user, writable by no one
        os.chmod(path, 0o555 if path.is_dir() else 0o444)
    return dest


_LOCK = threading.Lock()
_BUILT: list[Path] = []
_HELD: list = []


def _remove(folder: Path) -> None:
    for path in [folder, *folder.rglob("*")]:
        try:
            os.chmod(path, 0o700)
        except OSError:
            pass
    shutil.rmtree(folder, ignore_errors=True)


def student_view() -> Path:
    """The student view of this process (built on first use into a private temporary folder)."""
    with _LOCK:
        if not _BUILT:
            folder = Path(tempfile.mkdtemp(prefix="distlab-view-", dir=scratch.outer_temp()))
            _HELD.append(scratch.hold(folder))  # a process killed leaves it unlocked: the next run removes it
            atexit.register(_remove, folder)
            os.chmod(folder, 0o755)
            _BUILT.append(build(folder / "view"))
        return _BUILT[0]
