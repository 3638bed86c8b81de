"""Red team round 8: what a notebook or a file name controls cannot pass for the grader's own text, and a cell's error
cannot vanish from the report.

09: Gradescope's tests[].output (what the student sees) showed the feedback through printable(), so U+2800 padding,
runs of spaces and look-alikes ("\u2713 correct", "q4 1/1 passed") reached it. 02: the terminal table's notebook line
was not wrapped, so a file name padded to the terminal's width put "NOTE: regraded by the instructor, full marks 8 of
8" at column 0 of the next row. 11: the class progress bar wrote ~105 columns, so on an 80-column terminal the
label's tail started a row. 13: a cell holding all 256 descriptors raised, ipykernel could not send the error
message, and the report read as if the cell had run cleanly.
"""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distlab.grading import class_results, classroom, grade
from distlab.grading.kernel import bwrap_available
from distlab.grading.report import CONTINUATION, GradeReport, NotebookGrade, QuestionGrade

from test_grade import IMPORTS, write_notebook

#: the grader's prefix of a check's feedback (lessons/questions.py), and of a cell's problem (kernel.py)
FEEDBACK_HEAD, PROBLEM_HEAD = "not yet, because ", "code cell 2 (`x = 1`) raised RuntimeError: "
#: text the attacks used, look-alikes and blank-looking characters among arbitrary text
HOSTILE = st.lists(
    st.one_of(
        st.characters(), st.sampled_from(["\u2800", "\u2713", "\u3000", " " * 40, "\n", "\r", "\x1b", "q4 1/1 passed"])
    ),
    max_size=300,
).map("".join)


def _grade(feedback: str, problem: str, name: str = "01_memory_wall.ipynb") -> GradeReport:
    return GradeReport(
        [
            NotebookGrade(
                path=f"mallory/{name}",
                lesson="memory_wall",
                questions=[QuestionGrade("q1", "incorrect", 0.0, 1.0, FEEDBACK_HEAD + feedback, "How many bytes?")],
                problems=[PROBLEM_HEAD + problem],
            )
        ]
    )


def _check_gradescope(results: dict) -> None:
    """Every line of every human-readable field is ASCII, has no run of spaces (no padding to wrap with), and starts
    with the grader's own text."""
    for test in results["tests"]:
        for field, head in (("name", "q1: How many bytes?"), ("output", FEEDBACK_HEAD)):
            assert test[field].isascii() and "\n" not in test[field] and "  " not in test[field], test[field]
            assert test[field].startswith(head.rstrip()), test[field]  # (shown drops a trailing space)
        assert test["status"] in ("passed", "failed")
    lines = results["output"].split("\n")
    assert results["output"].isascii() and len(lines) == 2, lines
    assert lines[0].startswith('score: 0/1 (lesson memory_wall); notebook graded: "') and "  " not in lines[0], lines
    assert lines[1].startswith("  - " + PROBLEM_HEAD.rstrip()) and "  " not in lines[1][2:], lines


@settings(max_examples=300, deadline=None)
@given(feedback=HOSTILE, problem=HOSTILE, name=HOSTILE)
def test_every_line_of_gradescope_results_is_ascii_and_the_graders(feedback, problem, name):
    # before: '16' + U+2800 x 20 + ' \u2713 correct' and 'x     q4  1/1  passed' reached tests[].output as they were
    _check_gradescope(_grade(feedback, problem, name.replace("/", "_") or "x").to_gradescope())


def test_the_attack_feedback_reaches_gradescope_escaped():
    # red team round 8 09, the container run's three feedbacks, verbatim (the answer's first characters)
    for answer in [
        "'16" + "\u2800" * 20 + " \u2713 correct'",
        "'" + "\u2800" * 17 + " 1/1 full marks'",
        "'x     q4  1/1  passed'",
    ]:
        out = _grade(f"{answer} could not be read as a number", "x").to_gradescope()["tests"][0]["output"]
        assert "\\u2800" in out or "x q4 1/1 passed" in out, out
        _check_gradescope(_grade(f"{answer} could not be read as a number", "x").to_gradescope())


def test_class_gradescope_files_are_the_same_code(tmp_path):
    # class mode writes gradescope/<sha256>-<stem>.json of each row's grade as the journal kept it (to_dict, then
    # grade_from_dict): the same text reaches every one of them
    hostile = _grade("'x     q4  1/1  passed' \u2800\u2800\u2800 could not be read", "\u2713 correct" + " " * 90)
    records = [{"key": "mallory/01_memory_wall.ipynb", "grade": hostile.notebooks[0].to_dict()}]
    grades = [class_results.grade_from_dict(r["grade"]) for r in records]
    class_results._write_gradescope(tmp_path / "gradescope", records, grades)
    written = list((tmp_path / "gradescope").glob("*.json"))
    assert len(written) == 1
    _check_gradescope(json.loads(written[0].read_text()))


# --- 02: the terminal table's notebook line --------------------------------------------------------------------

FORGED = "NOTE: regraded by the instructor, full marks 8 of 8 (override recorded).ipynb"


@pytest.mark.parametrize("columns", [40, 80, 120])
def test_a_padded_file_name_cannot_start_a_row_of_the_table(monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    for pad in ["a" * 43, "a" * (columns - 12), " " * 200, "\u2800" * 50, "a" * 300]:
        table = _grade("x", "y", f"{pad}{FORGED}").table()
        lines = table.splitlines()
        # before: one line of ~170 characters, so the terminal put "NOTE: regraded..." at column 0 of row 2
        assert lines[0].startswith("mallory/"), lines
        for line in lines:
            # (the column header, 44 characters of the grader's own, is the one line that may wrap at 40)
            assert len(line) < columns or line.startswith("  question   points"), (columns, line)
            assert line.startswith(("mallory/", "  question", "  q1 ", "  ! ", CONTINUATION)), line
        assert "score: 0/1" in " ".join(line.strip() for line in lines) and table.isascii()


@pytest.mark.parametrize("columns", [20, 40, 80, 120])
def test_the_score_is_never_split_across_lines(monkeypatch, columns):
    # CI's 80-column terminal once printed ".../01_memory_wall.ipynb  lesson: memory_wall  score:" and "8/8" on the
    # next line, so "score: 8/8" was nowhere in the table: the grader's own fields are now kept whole
    monkeypatch.setenv("COLUMNS", str(columns))
    for length in range(1, 160):
        lines = _grade("x", "y", "d" * length + ".ipynb").table().splitlines()
        scored = [line for line in lines if "score: 0/1" in line]
        assert len(scored) == 1 and len(scored[0]) < columns, (length, lines)
        assert scored[0].startswith(("mallory/", CONTINUATION)), (length, lines)


# --- 11: the progress bar --------------------------------------------------------------------------------------


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("columns", [40, 80, 120])
def test_the_progress_line_never_wraps(monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    stream = _Terminal()
    bar = classroom.Progress(6, stream)
    label = "memory_wall_mallory_final_version_" + "x" * 300 + " REGRADED 8 of 8 OK\u2800\u2800.ipynb"
    for done in range(1, 7):
        bar.update(done, done, label)
    rows = stream.getvalue().replace("\x1b[K", "").split("\r")
    # before: "[###...] 6/6  1.4 s/notebook  ETA 0:00  " + 40 characters = ~105 columns, wrapped on 40 and 80
    for row in filter(None, rows):
        row = row.rstrip("\n")
        assert len(row) <= columns - 1, (columns, row)
        assert row.startswith("[") and row.isascii(), row  # the grader's bar starts every row
    last = rows[-1].rstrip("\n")
    assert " 6/6  " in last and "ETA 0:00" in last, last  # the grader's part is kept on every width
    if columns >= 80:
        assert last.endswith(".ipynb"), last  # and the label's end where there is room


# --- 13: a cell whose error message never came -----------------------------------------------------------------

#: red team round 8 13, verbatim: the cell holds every descriptor (RLIMIT_NOFILE 256), then raises
HOLD_ALL = """import os
fds = []
try:
    while True: fds.append(os.open("/dev/null", os.O_RDONLY))
except OSError as e:
    err = e
print("held", len(fds), "then", err, flush=True)
raise RuntimeError(f"THIS CELL FAILED after holding {len(fds)} descriptors")"""
FREE_SOME = 'for fd in fds[:20]: os.close(fd)\nraise RuntimeError("second cell: 20 descriptors freed")'


@pytest.mark.notebook
@pytest.mark.parametrize(
    "sandbox",
    [pytest.param("bwrap", marks=pytest.mark.skipif(not bwrap_available(), reason="no bubblewrap")), "trusted"],
)
def test_a_cell_that_holds_every_descriptor_and_raises_is_a_problem(tmp_path, sandbox):
    path = write_notebook(tmp_path / "01_memory_wall.ipynb", [IMPORTS, HOLD_ALL, FREE_SOME, "answer_q1 = 16"])
    result = grade.grade_notebook(path, sandbox=sandbox, cell_timeout=60).to_dict()
    problems = result["problems"]
    # before: only code cell 3's problem; code cell 2 read as if it had run cleanly
    assert any(p.startswith("code cell 2 (`import os`) raised") for p in problems), problems
    assert any(p.startswith("code cell 3 (`for fd in fds[:20]: os.close(fd)`) raised RuntimeError") for p in problems)
    assert result["score"] == 1, result  # the later answer still counts
