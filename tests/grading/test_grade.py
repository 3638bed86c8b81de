"""`distlab grade`: solutions get full marks, fresh exercises zero, and bad or malicious
submissions neither crash the grader, nor fake a pass, nor touch files outside their copy."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import nbformat.v4 as v4
import pytest

from distlab import cli
from distlab.grading import grade, report
from distlab.grading.kernel import bwrap_available
from distlab.lessons.questions import CORRECT, INCORRECT, NOT_ATTEMPTED

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))
EXERCISES = sorted((ROOT / "exercises").glob("*.ipynb"))
LESSON1 = ROOT / "solutions" / "01_memory_wall.ipynb"

SANDBOXES = [
    "audit",
    pytest.param(
        "bwrap",
        marks=pytest.mark.skipif(
            not bwrap_available(), reason="bubblewrap (apt-get install bubblewrap) is not available here"
        ),
    ),
]

# the cells of a correct lesson-1 submission, one answer per cell
IMPORTS = "from distlab.lessons.memory_wall import q1, q2, q3, q4, q5, q6, q7, q8"
ANSWERS = {
    "q1": "answer_q1 = 16\nq1.check(answer_q1)",
    # lesson 1: q2 asks 13B (13e9 x 16 B = 208 GB), q3 30B under plain DP (30e9 x 16 B = 480 GB on every GPU)
    "q2": "answer_q2 = '208 GB'\nq2.check(answer_q2)",
    "q3": "answer_q3 = 480\nq3.check(answer_q3)",
    "q4": "answer_q4 = 3\nq4.check(answer_q4)",  # q4 asks a 48 GB GPU: 48 GB / 16 B = 3e9 parameters
    "q5": "answer_q5 = 'b'\nq5.check(answer_q5)",
    "q6": "answer_q6 = 16\nq6.check(answer_q6)",
    "q7": "answer_q7 = 'c'\nq7.check(answer_q7)",
    "q8": "answer_q8 = 16\nq8.check(answer_q8)",
}


def write_notebook(path: Path, cells: list[str], lesson: str | None = "memory_wall") -> Path:
    nb = v4.new_notebook(cells=[v4.new_code_cell(c) for c in cells])
    if lesson:
        nb.metadata["distlab"] = {"lesson": lesson}
    nbformat.write(nb, path)
    return path


def statuses(result: report.NotebookGrade) -> dict:
    return {q.question: q.status for q in result.questions}


# --- reading bad files -------------------------------------------------------------------


@pytest.mark.parametrize(
    "content, words",
    [
        (lambda text: text[: len(text) // 2], "not a valid notebook"),  # truncated upload
        (lambda text: "{not json", "not a valid notebook"),
        (lambda text: "[1, 2, 3]", "not a notebook"),
        (lambda text: '{"cells": "nope"}', "not a notebook"),
        (lambda text: "", "not a valid notebook"),
    ],
)
def test_unreadable_files_score_zero_and_say_why(tmp_path, content, words):
    path = tmp_path / "01_memory_wall.ipynb"
    path.write_text(content(LESSON1.read_text(encoding="utf-8")), encoding="utf-8")
    result = grade.grade_notebook(path)
    assert result.lesson == "memory_wall" and result.score == 0 and result.max_score == 8
    assert set(statuses(result).values()) == {NOT_ATTEMPTED}
    assert any(words in p for p in result.problems), result.problems


def test_unknown_lesson_is_reported_not_raised(tmp_path):
    path = tmp_path / "homework.ipynb"
    path.write_text('{"cells": [], "metadata": {}}', encoding="utf-8")
    result = grade.grade_notebook(path)
    assert result.questions == [] and "--lesson" in result.problems[0]


def test_notebook_from_another_lesson_gets_no_points(tmp_path):
    path = write_notebook(tmp_path / "02_collectives.ipynb", [IMPORTS, *ANSWERS.values()], lesson="collectives")
    result = grade.grade_notebook(path, lesson="memory_wall")
    assert result.score == 0 and result.max_score == 8
    assert "belongs to lesson 'collectives'" in result.problems[0]


def test_metadata_naming_a_missing_lesson(tmp_path):
    path = write_notebook(tmp_path / "x.ipynb", ["answer_q1 = 16"], lesson="no_such_lesson")
    result = grade.grade_notebook(path)
    assert result.questions == [] and "no_such_lesson" in result.problems[0]


def test_an_instructors_typo_in_lesson_is_an_error(tmp_path):
    with pytest.raises(Exception, match="lesson 'memroy_wall'"):
        grade.grade_notebook(write_notebook(tmp_path / "a.ipynb", ["1"]), lesson="memroy_wall")


# --- running notebooks (each test starts kernels) ----------------------------------------


@pytest.mark.notebook
@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.name)
def test_every_solution_gets_full_marks(path):
    result = grade.grade_notebook(path)
    assert result.max_score > 0 and result.score == result.max_score, report.GradeReport([result]).table()
    assert result.problems == []


@pytest.mark.notebook
@pytest.mark.parametrize("path", EXERCISES, ids=lambda p: p.name)
def test_every_fresh_exercise_gets_zero_not_attempted(path):
    result = grade.grade_notebook(path)
    assert result.max_score > 0 and result.score == 0
    assert set(statuses(result).values()) == {NOT_ATTEMPTED}, report.GradeReport([result]).table()


@pytest.mark.notebook
@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_cannot_delete_or_change_files_outside_the_copy(tmp_path, sandbox):
    victim = tmp_path / "outside" / "sentinel.txt"
    victim.parent.mkdir()
    victim.write_text("precious", encoding="utf-8")
    source = ROOT / "distlab" / "lessons" / "memory_wall.py"
    before = source.read_bytes()
    v, d = str(victim), str(victim.parent)
    attacks = [
        f"import os\nos.remove({v!r})",
        f"open({v!r}, 'w').write('gone')",
        f"import shutil\nshutil.rmtree({d!r})",
        f"import pathlib\npathlib.Path({v!r}).unlink()",
        f"!rm -f {v}",
        f"import subprocess\nsubprocess.run(['rm', '-f', {v!r}])",
        f"import os\nos.system('rm -f {v}')",
        f"import ctypes\nctypes.CDLL(None).unlink({v.encode()!r})",
        f"import os\nos.rename({v!r}, 'mine.txt')",
        f"import os\nos.link({v!r}, 'hard.txt')\nopen('hard.txt', 'w').write('gone')",
        f"import os\nos.symlink({v!r}, 'soft.txt')\nopen('soft.txt', 'w').write('gone')",
        f"import os\nfd = os.open({d!r}, os.O_RDONLY)\nos.unlink('sentinel.txt', dir_fd=fd)",
        f"import os\nos.chmod({v!r}, 0)",
        # the checks' own source: rewriting it would change the next grading run
        "import distlab.lessons.memory_wall as m\nopen(m.__file__, 'a').write('\\nq1 = None\\n')",
        "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)",  # the grading process
        f"import os\nos.mknod({d + '/made.txt'!r})",  # no audit event: removed from os, read-only under bwrap
        # ATTACH creates a database file wherever it is told, from any connection
        f"import sqlite3\nc = sqlite3.connect(':memory:')\nc.execute(\"ATTACH '{d}/made.db' AS x\")\n"
        "c.execute('CREATE TABLE x.t (a)')",
        "open('scratch.txt', 'w').write('fine')\nimport os\nos.remove('scratch.txt')",  # inside: allowed
    ]
    path = write_notebook(tmp_path / "01_memory_wall.ipynb", [IMPORTS, ANSWERS["q1"], *attacks, ANSWERS["q2"]])
    result = grade.grade_notebook(path, sandbox=sandbox, cell_timeout=30)
    assert victim.read_text(encoding="utf-8") == "precious" and oct(victim.stat().st_mode)[-3:] != "000"
    assert sorted(p.name for p in victim.parent.iterdir()) == ["sentinel.txt"]  # nothing made beside it
    assert source.read_bytes() == before
    assert statuses(result)["q1"] == statuses(result)["q2"] == CORRECT  # the grader survived
    failed = [p for p in result.problems if "raised" in p]
    assert len(failed) == len(attacks) - 1, result.problems  # every attack failed; the last cell is fine
    if sandbox == "audit":
        assert all(
            "grading sandbox" in p or "ModuleNotFoundError" in p or "has no attribute 'mknod'" in p for p in failed
        ), failed


@pytest.mark.notebook
def test_monkeypatching_the_checks_in_the_kernel_fakes_nothing(tmp_path):
    cheat = (
        "from distlab.lessons import memory_wall\nfrom distlab.lessons import questions as checks\n"
        "fake = lambda self, answer=None: checks.CheckResult(self.name, 'correct', 'correct', 1.0, 1.0)\n"
        "checks.NumericQuestion.check = fake\nchecks.ChoiceQuestion.check = fake\n"
        "for q in memory_wall.QUESTIONS.values():\n"
        "    object.__setattr__(q, 'expected', lambda: 0)\n"
        "answer_q1 = 3\nanswer_q7 = 'yes'\n"
        'print(\'DISTLAB-ANSWERS-BEGIN-x{"answer_q2": {"t": "str", "v": "208 GB"}}DISTLAB-ANSWERS-END-x\')\n'
        "print(memory_wall.q1.check(answer_q1))"
    )
    path = write_notebook(tmp_path / "01_memory_wall.ipynb", [cheat])
    result = grade.grade_notebook(path)
    assert statuses(result) == {
        "q1": INCORRECT,
        "q2": NOT_ATTEMPTED,
        "q3": NOT_ATTEMPTED,
        "q4": NOT_ATTEMPTED,
        "q5": NOT_ATTEMPTED,
        "q6": NOT_ATTEMPTED,
        "q7": INCORRECT,
        "q8": NOT_ATTEMPTED,
    }
    assert result.score == 0


@pytest.mark.notebook
def test_raising_cells_loops_and_crashes_lose_only_their_own_part(tmp_path):
    cells = [
        IMPORTS,
        ANSWERS["q1"],
        "1 / 0",
        "while True:\n    pass",  # interruptible: interrupted, the rest still runs
        ANSWERS["q2"],
        "answer_q3 = undefined_name",
        "import os\nos._exit(3)",  # the kernel dies: later cells cannot run
        ANSWERS["q4"],
    ]
    path = write_notebook(tmp_path / "01_memory_wall.ipynb", cells)
    result = grade.grade_notebook(path, cell_timeout=3, timeout=60)
    got = statuses(result)
    assert got["q1"] == got["q2"] == CORRECT
    assert got["q3"] == got["q4"] == NOT_ATTEMPTED
    problems = "\n".join(result.problems)
    assert "ZeroDivisionError" in problems and "time limit" in problems and "NameError" in problems
    assert "kernel stopped" in problems


@pytest.mark.notebook
def test_an_uninterruptible_loop_is_stopped_by_the_time_limits(tmp_path):
    cells = [
        IMPORTS,
        ANSWERS["q1"],
        "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass",
        ANSWERS["q2"],
    ]
    path = write_notebook(tmp_path / "01_memory_wall.ipynb", cells)
    result = grade.grade_notebook(path, cell_timeout=3, timeout=20)
    assert statuses(result)["q1"] == CORRECT and statuses(result)["q2"] == NOT_ATTEMPTED
    assert result.seconds < 40
    assert any("did not respond" in p for p in result.problems), result.problems
    # 18-ignore-interrupt-timelimit: the kernel was stopped, not interrupted: the report must not say it was
    assert not any("was interrupted" in p for p in result.problems), result.problems


@pytest.mark.notebook
def test_reordered_and_missing_cells(tmp_path):
    # answers first, imports last (the checks then raise NameError, the answers stand); q3, q5 and q8 missing
    cells = [ANSWERS[q] for q in ("q7", "q6", "q4", "q2", "q1")] + [IMPORTS]
    path = write_notebook(tmp_path / "01_memory_wall.ipynb", cells)
    result = grade.grade_notebook(path)
    got = statuses(result)
    assert got == {
        "q1": CORRECT,
        "q2": CORRECT,
        "q3": NOT_ATTEMPTED,
        "q4": CORRECT,
        "q5": NOT_ATTEMPTED,
        "q6": CORRECT,
        "q7": CORRECT,
        "q8": NOT_ATTEMPTED,
    }
    assert result.score == 5 and result.max_score == 8


@pytest.mark.notebook
def test_answers_of_every_type_are_carried_over(tmp_path):
    cell = (
        "from distlab.units import Q_\nimport numpy as np\n"
        "answer_q1 = np.int64(16)\nanswer_q2 = Q_(208e9, 'B')\nanswer_q3 = [480]\n"
        "answer_q4 = float('nan')\nanswer_q5 = 10**400\nanswer_q6 = np.float32(16)\nanswer_q7 = False\n"
        "class Evil:\n    def __repr__(self): raise RuntimeError\nanswer_q8 = Evil()\n"
        "answer_q9 = [1, (2.5, {'a': None}), np.arange(3), set()]\nanswer_q10 = list(range(10**6))"
    )
    result = grade.grade_notebook(write_notebook(tmp_path / "01_memory_wall.ipynb", [cell]))
    by = {q.question: q for q in result.questions}
    assert by["q1"].status == by["q2"].status == by["q6"].status == CORRECT
    assert by["q7"].status == INCORRECT and "not one of" in by["q7"].feedback  # False reads as 'no': not a-d
    assert "type list" in by["q3"].feedback and "finite" in by["q4"].feedback
    assert by["q5"].status == INCORRECT


@pytest.mark.notebook
def test_cli_table_json_and_gradescope(tmp_path, capsys, monkeypatch):
    # the table wraps at the terminal's width; this test reads its content, so it fixes the width (how lines wrap
    # on any width is test_redteam_round8's)
    monkeypatch.setenv("COLUMNS", "120")
    bad = write_notebook(tmp_path / "01_memory_wall.ipynb", [IMPORTS, ANSWERS["q1"], "answer_q2 = 56"])
    out_json, out_gs = tmp_path / "out" / "summary.json", tmp_path / "results.json"
    code = cli.main(
        [
            "grade",
            str(LESSON1),
            str(bad),
            "--lesson",
            "memory_wall",
            "--timeout",
            "120",
            "--json",
            str(out_json),
        ]
    )
    assert code == 0
    table = capsys.readouterr().out
    assert "score: 8/8" in table and "score: 1/8" in table and "total: 9/16" in table
    assert ("warning: graded without bubblewrap" in table) == (not bwrap_available())
    assert "not yet, because 56 GB is too low" in table

    summary = json.loads(out_json.read_text())
    assert (summary["score"], summary["max_score"]) == (9, 16)
    first = summary["questions"][0]
    assert {"notebook", "lesson", "question", "status", "points", "max_points", "feedback"} <= set(first)
    assert len(summary["questions"]) == 16 and len(summary["notebooks"]) == 2

    # Gradescope's format: https://gradescope-autograders.readthedocs.io/en/latest/specs/ -- one submission's
    # results (two notebooks' would be summed into one score: refused)
    gradescope = ["--lesson", "memory_wall", "--timeout", "120", "--gradescope", str(out_gs)]
    assert cli.main(["grade", str(LESSON1), str(bad), *gradescope]) == 2 and not out_gs.exists()
    assert cli.main(["grade", str(bad), *gradescope]) == 0
    gs = json.loads(out_gs.read_text())
    assert gs["score"] == 1 and isinstance(gs["output"], str) and isinstance(gs["execution_time"], (int, float))
    assert len(gs["tests"]) == 8
    for test in gs["tests"]:
        assert set(test) == {"name", "score", "max_score", "status", "output"}
        assert test["status"] in ("passed", "failed") and test["max_score"] == 1
    assert sum(t["score"] for t in gs["tests"]) == gs["score"]


def test_cli_rejects_nonsense_options(capsys):
    assert cli.main(["grade", str(LESSON1), "--timeout", "0"]) == 2
    assert "--timeout" in capsys.readouterr().err
    # Gradescope keeps only the score: the lesson must come from the instructor, not the notebook
    assert cli.main(["grade", str(LESSON1), "--gradescope", "results.json"]) == 2
    assert "--gradescope needs --lesson" in capsys.readouterr().err


@pytest.mark.notebook
def test_a_huge_variable_does_not_hide_the_answers(tmp_path):
    # only the lesson's answer_<question> variables are read, each within its share of the output
    cells = [
        IMPORTS,
        ANSWERS["q1"],
        "answer_work = list(range(300_000))\nanswer_q3 = list(range(300_000))",
        ANSWERS["q2"],
    ]
    result = grade.grade_notebook(write_notebook(tmp_path / "01_memory_wall.ipynb", cells))
    assert statuses(result)["q1"] == statuses(result)["q2"] == CORRECT, report.GradeReport([result]).table()
    assert statuses(result)["q3"] == INCORRECT and result.problems == []


@pytest.mark.notebook
@pytest.mark.skipif(not bwrap_available(), reason="bubblewrap is not available here")
def test_bubblewrap_alone_keeps_files_outside_safe(tmp_path):
    # the operating-system layer without the audit hook: / is read-only (/tmp included), and the
    # kernel sees no host process, so /proc/<pid>/root cannot lead back to the host's writable /
    victim = tmp_path / "sentinel.txt"
    victim.write_text("precious", encoding="utf-8")
    source = ROOT / "distlab" / "lessons" / "memory_wall.py"
    before = source.read_bytes()
    escape = (
        "import os\nseen = [p for p in os.listdir('/proc') if p.isdigit()]\nprint('pids', seen)\n"
        "for p in seen:\n    try:\n"
        f"        open('/proc/' + p + '/root' + {str(victim)!r}, 'w').write('gone')\n"
        "    except OSError:\n        pass"
    )
    attacks = [
        f"import os\nos.remove({str(victim)!r})",
        f"!rm -f {victim}",
        "import distlab.lessons.memory_wall as m\nopen(m.__file__, 'a').write('\\nq1 = None\\n')",
        f"import subprocess\nsubprocess.run(['rm', '-f', {str(source)!r}])",
        f"import os\nos.mknod({str(tmp_path / 'made.txt')!r})",
        escape,
    ]
    path = write_notebook(tmp_path / "01_memory_wall.ipynb", [IMPORTS, ANSWERS["q1"], *attacks])
    result = grade.grade_notebook(path, sandbox="bwrap", _audit_hook=False)
    assert result.sandbox == "bwrap"
    assert victim.read_text(encoding="utf-8") == "precious" and source.read_bytes() == before
    assert not (tmp_path / "made.txt").exists()
    assert statuses(result)["q1"] == CORRECT


@pytest.mark.notebook
@pytest.mark.parametrize("lesson", [None, "data_parallel", "data_parallel_zero"])
def test_a_notebook_submitted_before_the_move_still_grades(tmp_path, lesson):
    # lesson 3 was distlab.course.data_parallel, with metadata lesson "data_parallel"
    nb = nbformat.read(ROOT / "solutions" / "03_data_parallel_zero.ipynb", as_version=4)
    nb.metadata["distlab"]["lesson"] = "data_parallel"
    for cell in nb.cells:
        cell.source = cell.source.replace("distlab.lessons.data_parallel_zero", "distlab.course.data_parallel")
    assert any("distlab.course.data_parallel" in cell.source for cell in nb.cells)
    nbformat.write(nb, tmp_path / "homework.ipynb")
    result = grade.grade_notebook(tmp_path / "homework.ipynb", lesson=lesson)
    assert result.lesson == "data_parallel_zero" and result.problems == []
    assert result.max_score == 8 and result.score == 8, report.GradeReport([result]).table()
