"""Red team round 12: class mode (results.csv, the journal, the walk of the class folder), a student controlling every
byte of the notebook and its file name.

- class/02: whose a row is (class_results._student) was decided, when the grade named no roster student, by looking
  for the words "different students of the roster" anywhere in the row's problems, and a notebook's own exception
  message is one of its problems ("code cell 1 (...) raised RuntimeError: different students of the roster"). Graded
  without a roster, such a notebook's row became nobody's: the student's other notebooks of the lesson were no longer
  flagged as theirs ("the same student also submitted ...") and the summary counted the row on its own. The refusal is
  now recognised only by the grader's own words at the start of a problem (variants.SEVERAL_STUDENTS), which no text
  of a notebook can begin (a cell's problems begin "code cell").
- class/07: a character device or a FIFO named like a notebook in a student's folder was opened (O_RDONLY, no
  O_NOCTTY) three times in a class run before fstat refused it: opening a device runs its driver. read_submission
  now refuses anything lstat does not call a regular file without opening it.
"""

from __future__ import annotations

import csv

from distlab.grading import classroom
from distlab.grading.class_results import shared_students
from distlab.grading.report import NotebookGrade, QuestionGrade


def _grader(problem: str):
    """A grade_notebook stand-in graded without a roster (no student named): the chosen notebook's cell raised an
    exception whose message is `problem`'s words, as kernel.py reports it."""

    def grade_one(path, identity=None, **options):
        return NotebookGrade(
            str(path),
            "memory_wall",
            [QuestionGrade("q1", "incorrect", 0.0, 1.0, "fb", "p")],
            [f"code cell 1 (`raise RuntimeError({problem!r})`) raised RuntimeError: {problem}"],
            sandbox="bwrap",
        )

    return grade_one


def test_a_notebooks_exception_message_does_not_make_its_row_nobodys(tmp_path):
    # class/02-student-text-decides-whose: mallory's graded notebook raised "different students of the roster", so
    # neither of her two notebooks of memory_wall was flagged; bob's identical pair was
    for student in ("bob", "mallory"):
        folder = tmp_path / "class" / student
        folder.mkdir(parents=True)
        (folder / "memory_wall.ipynb").write_text("{}")
        (folder / "memory_wall_copy.ipynb").write_text("{}")
    classroom.grade_class(
        [tmp_path / "class"], tmp_path / "g", progress=False, grade_one=_grader("different students of the roster")
    )
    rows = {r["notebook"]: r for r in csv.DictReader((tmp_path / "g" / "results.csv").open())}
    flagged = {k for k, r in rows.items() if r["flagged"]}
    assert flagged == set(rows), rows


def test_the_graders_own_refusal_still_makes_a_row_nobodys():
    # round 2 class/07: a submission whose ids name two roster students is graded for nobody, never the first named
    why = "refused: the submitter's ids ('bob', 'mallory@u.edu') name 2 different students of the roster; ..."

    def record(key, student, identity, problems):
        return {
            "key": key,
            "identity": identity,
            "grade": {"student": student, "lesson": "memory_wall", "problems": problems},
        }

    bob = record("s2", "bob", ["bob", "bob@u.edu"], [])
    assert shared_students([bob, record("s7", "", ["bob", "mallory@u.edu"], [why])]) == {}
    forged = "code cell 1 (`x`) raised RuntimeError: " + why
    assert set(shared_students([record("s1", "", ["mallory"], [forged]), record("s3", "", ["mallory"], [])])) == {
        "s1",
        "s3",
    }


# ---- class/07: a device node or a FIFO in a student's folder was opened (its driver run) before it was refused ----


def test_a_device_or_fifo_in_a_students_folder_is_refused_without_being_opened(tmp_path, monkeypatch):
    # class/07-device-opened: mallory's folder held a character device named memory_wall.ipynb (a tar extracted as
    # root restores device nodes); the class run opened it three times (O_RDONLY|O_NONBLOCK|O_NOFOLLOW, no O_NOCTTY:
    # the lesson, the read, grade_notebook) before fstat refused it. Opening a device runs its driver (/dev/watchdog
    # arms the host's watchdog, a tape rewinds, a terminal becomes the grader's controlling one); a FIFO's open
    # wakes a writer waiting on it. Now lstat refuses both unopened.
    import functools
    import os
    import stat

    from distlab.grading.grade import grade_notebook

    folder = tmp_path / "class" / "mallory"
    folder.mkdir(parents=True)
    os.mkfifo(folder / "pipe.ipynb")
    odd = [folder / "pipe.ipynb"]
    if os.geteuid() == 0:
        os.mknod(folder / "memory_wall.ipynb", 0o644 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers
        odd.append(folder / "memory_wall.ipynb")
    (tmp_path / "class" / "bob").mkdir()
    (tmp_path / "class" / "bob" / "memory_wall.ipynb").write_text("{}")
    opened: list[str] = []
    real_open = os.open

    def spy(path, *args, **kwargs):
        opened.append(os.fspath(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", spy)
    grade_one = functools.partial(grade_notebook, run=lambda *a, **k: {})
    classroom.grade_class([tmp_path / "class"], tmp_path / "g", progress=False, grade_one=grade_one)
    monkeypatch.undo()
    assert not [p for p in opened if p in {str(o) for o in odd}]
    rows = {r["notebook"]: r for r in csv.DictReader((tmp_path / "g" / "results.csv").open())}
    for path in odd:
        assert "not a regular file" in rows[f"class/mallory/{path.name}"]["problems"]
