"""Red team round 7: what a notebook writes cannot pass for the grader's own lines, in the terminal or results.csv.

default/04: an exception message padded with spaces (and blank-looking characters that report.shown kept: U+2800,
U+3164, U+115F, combining marks) made the terminal wrap the problem line so that "regraded by the instructor: 8/8
(override recorded in journal.jsonl)" began a line of its own; the real score was 1/8. modes/05: a second upload's
file name put " | flag cleared by the instructor ..." and a look-alike of the bar into results.csv's `flagged` and
`notebook` cells, which were not ASCII-only as the problems cell was.

Now every untrusted text of a human-readable output goes through report.shown (printable ASCII, whitespace runs one
space), and the terminal table wraps lines itself, every continuation indented by report.CONTINUATION, deeper than
any line the grader starts.
"""

from __future__ import annotations

import csv

from hypothesis import given, settings
from hypothesis import strategies as st

from distlab.grading import classroom
from distlab.grading.report import CONTINUATION, GradeReport, NotebookGrade, QuestionGrade, shown

FORGED = "regraded by the instructor: 8/8 (override recorded in journal.jsonl)"
#: blank-looking characters and Unicode spaces the old shown() kept as they were (printable, or whitespace)
BLANKS = ["\u2800", "\u3164", "\u115f", "\u0301", "\u3000", "\u2003", "\u00a0", "\u205f"]


def _report(problem: str, feedback: str = "correct") -> GradeReport:
    grade = NotebookGrade(
        path="mallory/01_memory_wall.ipynb",
        lesson="memory_wall",
        questions=[QuestionGrade("q1", "correct", 1.0, 1.0, feedback), QuestionGrade("q2", "incorrect", 0.0, 7.0, "")],
        problems=[problem],
    )
    return GradeReport([grade])


def _grader_line(line: str) -> bool:
    """A line the grader starts itself: the notebook's (column 0), the question header, a question or a problem."""
    return line.startswith(("mallory/", "  question", "  q1", "  q2", "  !")) or line == ""


def test_padding_cannot_start_a_line_of_the_terminal_table(monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    for pad in [" " * 300, "\u2800" * 300, "\u3164 " * 150, "." * 300, "\u3000" * 300]:
        table = _report(f"code cell 2 raised RuntimeError: x{pad}{FORGED}").table()
        lines = table.splitlines()
        for line in lines:
            assert len(line) <= 120, line
            assert _grader_line(line) or line.startswith(CONTINUATION), line
            assert (
                not line.startswith("regraded")
                and not line.lstrip(" !").startswith("regraded by")
                or (line.startswith(CONTINUATION))
            ), line
        assert table.isascii()
        assert "score: 1/8" in lines[0]


def test_feedback_that_carries_a_students_text_wraps_under_its_question(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    table = _report("none", feedback=f"'{'x' * 40}{chr(0x2800) * 200}{FORGED}' is not a number").table()
    for line in table.splitlines():
        assert _grader_line(line) or line.startswith(CONTINUATION), line
        assert len(line) <= 100


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_whatever_a_notebook_writes_every_table_line_is_the_graders_or_a_continuation(text):
    # the property behind default/04: any problem or feedback text, any terminal width the table is wrapped to
    table = _report(text, feedback=text).table()
    assert table.isascii()
    for line in table.splitlines():
        assert _grader_line(line) or line.startswith(CONTINUATION), repr(line)


def test_blank_looking_characters_and_unicode_spaces_are_escapes_or_one_space():
    text = "a" + "".join(BLANKS) + "  \t b"
    out = shown(text, 200)
    assert out.isascii() and "  " not in out
    for c in BLANKS:
        if not c.isspace():
            assert f"\\u{ord(c):04x}" in out or f"\\x{ord(c):02x}" in out, c


def test_a_file_name_cannot_forge_the_flag_or_notebook_cells_of_results_csv():
    # modes/05: the second upload's name wrote "... not merged | flag cleared by the instructor ... \u01c0 score 8\u22158
    # kept" into mallory's flagged cell
    name = (
        "mallory/old.ipynb; each is graded on its own, not merged | flag cleared by the instructor "
        "(duplicate upload, same bytes) \u01c0 score 8\u22158 kept\u2800\u2800.ipynb"
    )
    records = [
        {
            "key": "mallory/01_memory_wall.ipynb",
            "identity": ["mallory"],
            "grade": {"score": 1.0, "max_score": 8.0, "problems": [], "questions": [], "lesson": "memory_wall"},
        },
        {
            "key": name,
            "identity": ["mallory"],
            "grade": {"score": 1.0, "max_score": 8.0, "problems": [], "questions": [], "lesson": "memory_wall"},
        },
    ]
    text = classroom.results_csv(records)
    rows = list(csv.reader(text.splitlines(keepends=True)))
    assert text.isascii()
    flagged = rows[0].index("flagged")
    # the other notebook's name is quoted (a quote inside it escaped), so where it ends is plain
    assert rows[1][flagged].startswith('flagged: the same student also submitted "mallory/old.ipynb; each is graded')
    assert rows[1][flagged].endswith('characters in all)"; each is graded on its own, not merged')
    assert "\u01c0" not in text and "\\u01c0" in rows[2][0] and "\\u2215" in rows[2][0]
    assert classroom.results_csv(records[:1] + [dict(records[1], key='a" and more.ipynb')]).count('\\""') == 1


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80), st.text(max_size=80))
def test_every_results_csv_cell_is_one_line_of_ascii(name, student):
    records = [
        {
            "key": f"{name}.ipynb",
            "identity": [student or "s"],
            "grade": {"score": 0.0, "max_score": 8.0, "problems": [name], "questions": [], "student": student},
        },
        {
            "key": f"{name}2.ipynb",
            "identity": [student or "s"],
            "grade": {"score": 0.0, "max_score": 8.0, "problems": [], "questions": [], "student": student},
        },
    ]
    rows = list(csv.reader(classroom.results_csv(records).splitlines(keepends=True)))
    assert len(rows) == 3
    for row in rows[1:]:
        for cell in row:
            assert cell.isascii() and "\n" not in cell and "\r" not in cell, repr(cell)
