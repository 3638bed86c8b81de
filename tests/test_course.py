"""Exercise building and checks: exercises/ is exactly what the build makes from solutions/;
solutions pass their checks; unanswered exercises report 'not attempted' without an exception."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from distlab.course import build
from distlab.course.execute import execute
from distlab.course.checks import CORRECT, INCORRECT, NOT_ATTEMPTED
from distlab.course import memory_wall
from distlab.errors import ConfigurationError

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))


def test_there_are_solutions():
    assert SOLUTIONS, "no solution notebooks found"


def test_exercises_are_built_from_solutions():
    drift = build.build(ROOT / "solutions", ROOT / "exercises", check=True)
    assert drift == [], f"exercises/ out of date; run `distlab exercises`: {drift}"


def test_strip_code_replaces_block_by_stubs():
    source = "x = 1\n### BEGIN SOLUTION\nanswer_q1 = 16\na, b = 1, 2\n### END SOLUTION\nq1.check(answer_q1)"
    assert build.strip_code(source) == (
        "x = 1\nanswer_q1 = None  # YOUR ANSWER HERE\na = None  # YOUR ANSWER HERE\n"
        "b = None  # YOUR ANSWER HERE\nq1.check(answer_q1)"
    )
    assert build.strip_code("### BEGIN SOLUTION\nprint(1)\n### END SOLUTION") == "# YOUR CODE HERE"


@pytest.mark.parametrize("bad", ["### BEGIN SOLUTION\nx = 1", "x = 1\n### END SOLUTION", "### BEGIN SOLUTION\nx = (\n### END SOLUTION"])
def test_malformed_blocks_raise_our_error(bad):
    with pytest.raises(ConfigurationError):
        build.strip_code(bad)


def test_markdown_solution_blocks():
    assert build.strip_markdown("Q?\n<!-- BEGIN SOLUTION -->\nbecause\n<!-- END SOLUTION -->") == "Q?\n" + build.MD_PLACEHOLDER


def test_exercises_contain_no_solutions_and_no_outputs():
    for path in sorted((ROOT / "exercises").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            assert "BEGIN SOLUTION" not in cell.source
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None


def _run(path: Path) -> nbformat.NotebookNode:
    return execute(nbformat.read(path, as_version=4), cwd=str(ROOT), timeout=120)


def _check_outputs(nb) -> list[str]:
    texts = []
    for cell in nb.cells:
        if cell.cell_type != "code" or ".check(" not in cell.source:
            continue
        for out in cell.outputs:
            assert out.output_type != "error", f"cell raised: {out.get('ename')}: {out.get('evalue')}"
            text = out.get("data", {}).get("text/plain") or out.get("text", "")
            texts.append(text)
    return texts


@pytest.mark.notebook
@pytest.mark.parametrize("path", [p for p in sorted((ROOT / "exercises").glob("*.ipynb"))], ids=lambda p: p.name)
def test_unanswered_exercises_report_not_attempted(path):
    texts = _check_outputs(_run(path))
    assert texts, "no check outputs found"
    assert all(t.endswith(NOT_ATTEMPTED) for t in texts), texts


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.name)
def test_committed_solutions_show_every_check_correct(path):
    # nbval re-executes the solutions and compares these outputs, so they are live, not stale
    texts = _check_outputs(nbformat.read(path, as_version=4))
    assert texts and all(t.endswith(": correct") for t in texts), texts


# --- the checks themselves --------------------------------------------------------------

q2 = memory_wall.q2


@pytest.mark.parametrize("answer", [112, 112.0, "112", "112 GB", "112e9 B", "0.112 TB", "104.3 GiB", 112.5])
def test_numbers_accepted_with_or_without_units(answer):
    # 112 GB = 112e9 B = 104.31 GiB; 112.5 is within the 1% tolerance
    assert q2.check(answer).status == CORRECT


@pytest.mark.parametrize("answer", [None, ..., "", "   "])
def test_not_attempted(answer):
    result = q2.check(answer)
    assert result.status == NOT_ATTEMPTED and result.points == 0


@pytest.mark.parametrize(
    "answer, words",
    [(56, "too low"), (224, "too high"), (112e9, "looks like bytes"), ("112 GB/s", "not an amount of memory"),
     ("lots", "could not be read"), (True, "yes/no"), ([112], "type list"), (float("nan"), "finite")],
)
def test_not_yet_because(answer, words):
    result = q2.check(answer)
    assert result.status == INCORRECT and result.message.startswith("not yet, because") and words in result.message


def test_every_question_has_hint_and_computed_solution():
    for q in memory_wall.QUESTIONS.values():
        assert q.hint().text and q.solution().text
        assert q.check(None).status == NOT_ATTEMPTED


def test_choice_question():
    q7 = memory_wall.q7
    assert q7.check("No").correct and q7.check(False).correct
    assert q7.check("yes").status == INCORRECT
    assert "not one of" in q7.check("maybe").message


def test_huge_integer_answer_is_not_yet_not_an_exception():
    result = q2.check(10**400)
    assert result.status == INCORRECT and "too large" in result.message
