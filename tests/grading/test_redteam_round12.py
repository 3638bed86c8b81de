"""Red team round 12: class mode (results.csv, the journal, the walk of the class folder), a student controlling every
byte of the notebook and its file name.

- class/02: whose a row is (class_results._student) was decided, when the grade named no roster student, by looking
  for the words "different students of the roster" anywhere in the row's problems, and a notebook's own exception
  message is one of its problems ("code cell 1 (...) raised RuntimeError: different students of the roster"). Graded
  without a roster, such a notebook's row became nobody's: the student's other notebooks of the lesson were no longer
  flagged as theirs ("the same student also submitted ...") and the summary counted the row on its own. The refusal is
  now recognised only by the grader's own words at the start of a problem (variants.SEVERAL_STUDENTS), which no text
  of a notebook can begin (a cell's problems begin "code cell").
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
