"""Exercise building: exercises/ is exactly what the build makes from solutions/; solutions pass their
checks; unanswered exercises report 'not attempted' without an exception; the lesson key follows the manifest."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from distlab.errors import ConfigurationError
from distlab.grading import build
from distlab.lessons.questions import NOT_ATTEMPTED

ROOT = Path(__file__).resolve().parents[2]
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
def test_unanswered_exercises_report_not_attempted(path, execute_notebook):
    texts = _check_outputs(execute_notebook(nbformat.read(path, as_version=4), cwd=ROOT, timeout=120))
    assert texts, "no check outputs found"
    assert all(t.endswith(NOT_ATTEMPTED) for t in texts), texts


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.name)
def test_committed_solutions_show_every_check_correct(path):
    # nbval re-executes the solutions and compares these outputs, so they are live, not stale
    texts = _check_outputs(nbformat.read(path, as_version=4))
    assert texts and all(t.endswith(": correct") for t in texts), texts


def test_a_solution_whose_lesson_key_disagrees_with_the_manifest_is_refused(tmp_path):
    nb = nbformat.read(ROOT / "solutions" / "03_data_parallel_zero.ipynb", as_version=4)
    nb.metadata["distlab"]["lesson"] = "data_parallel"  # the lesson's older name: the manifest says otherwise
    (tmp_path / "solutions").mkdir()
    nbformat.write(nb, tmp_path / "solutions" / "03_data_parallel_zero.ipynb")
    with pytest.raises(ConfigurationError, match="data_parallel_zero"):
        build.build(tmp_path / "solutions", tmp_path / "exercises")
    nbformat.write(nb, tmp_path / "solutions" / "my_own.ipynb")  # not a manifest lesson: built as it is
    (tmp_path / "solutions" / "03_data_parallel_zero.ipynb").unlink()
    assert build.build(tmp_path / "solutions", tmp_path / "exercises") == ["my_own.ipynb"]
