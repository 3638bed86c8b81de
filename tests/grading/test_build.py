"""Exercise building: exercises/ is exactly what the build makes from solutions/; solutions pass their
checks; unanswered exercises report 'not attempted' without an exception; the lesson key follows the manifest."""

from __future__ import annotations

import ast
import re
import textwrap
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


def test_strip_code_replaces_block_by_answer_stubs_only():
    # the intermediate names a, b and the import are the solution's decomposition: only answer_q1 stays
    source = (
        "x = 1\n### BEGIN SOLUTION\nimport math\na, b = 1, 2\nanswer_q1 = math.ceil(a + b)  # 3\n"
        "### END SOLUTION\nq1.check(answer_q1)"
    )
    assert build.strip_code(source) == "x = 1\nanswer_q1 = None  # YOUR ANSWER HERE\nq1.check(answer_q1)"
    assert build.strip_code("### BEGIN SOLUTION\nprint(1)\n### END SOLUTION") == "# YOUR CODE HERE"
    # an indented block without answers still leaves valid Python
    indented = "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION"
    assert build.strip_code(indented) == "def f():\n    ...  # YOUR CODE HERE"


def _notebook(*sources):
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])


def test_a_cell_that_only_shows_worked_answers_is_left_out():
    # before: every exercise ended with the solution's `q2.solution()` cell, so "run all" printed a worked answer
    nb = _notebook(
        "### BEGIN SOLUTION\nanswer_q1 = 1\n### END SOLUTION\nq1.check(answer_q1)",
        "q2.solution()",
        "q1.solution()\nq3.solution()",
    )
    out = build.exercise_from_solution(nb)
    assert [c.source for c in out.cells] == ["answer_q1 = None  # YOUR ANSWER HERE\nq1.check(answer_q1)"]


def test_a_solution_call_mixed_with_other_code_is_refused():
    with pytest.raises(ConfigurationError, match=r"\.solution\(\)"):
        build.exercise_from_solution(_notebook("x = 1\nq2.solution()"))


def test_code_reading_a_name_only_a_solution_block_defines_is_refused():
    # the exercise drops `per_gpu`, so a later cell that prints it would fail with a NameError
    nb = _notebook("### BEGIN SOLUTION\nper_gpu = 2\nanswer_q1 = per_gpu\n### END SOLUTION", "print(per_gpu)")
    with pytest.raises(ConfigurationError, match="per_gpu"):
        build.exercise_from_solution(nb)
    # a name the exercise defines itself, outside the blocks, is fine
    ok = _notebook(
        "per_gpu = 3", "### BEGIN SOLUTION\nper_gpu = 2\nanswer_q1 = per_gpu\n### END SOLUTION", "print(per_gpu)"
    )
    assert build.exercise_from_solution(ok).cells[1].source == "answer_q1 = None  # YOUR ANSWER HERE"


def _code_names(source: str) -> set[str]:
    return {node.id for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Name)}


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.name)
def test_generated_exercises_give_no_solution_away(path):
    # every name a solution block assigns (except answer_*), counted by walking the solution's own blocks,
    # must not appear in the exercise's code; no worked answer is shown; no cell carries an output
    solution = nbformat.read(path, as_version=4)
    exercise = nbformat.read(ROOT / "exercises" / path.name, as_version=4)
    block_names, outside_names = set(), set()
    for cell in solution.cells:
        if cell.cell_type != "code":
            continue
        inside = re.findall(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", cell.source, re.S)
        for block in inside:
            block_names |= _code_names(textwrap.dedent(block)) | {
                a.asname or a.name
                for n in ast.walk(ast.parse(textwrap.dedent(block)))
                if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in n.names
            }
        outside_names |= _code_names(re.sub(r"### BEGIN SOLUTION\n.*?### END SOLUTION", "", cell.source, flags=re.S))
    solution_only = {n for n in block_names - outside_names if not n.startswith("answer_")}
    assert solution_only, "expected the solution to have intermediate names to hide"
    code = [c for c in exercise.cells if c.cell_type == "code"]
    for cell in code:
        assert not (_code_names(cell.source) & solution_only), cell.source
        assert ".solution(" not in cell.source
        assert cell.outputs == [] and cell.execution_count is None
    stubs = re.findall(r"^(\w+) = None  # YOUR ANSWER HERE$", "\n".join(c.source for c in code), re.M)
    assert stubs and all(name.startswith("answer_q") for name in stubs)


@pytest.mark.parametrize(
    "bad", ["### BEGIN SOLUTION\nx = 1", "x = 1\n### END SOLUTION", "### BEGIN SOLUTION\nx = (\n### END SOLUTION"]
)
def test_malformed_blocks_raise_our_error(bad):
    with pytest.raises(ConfigurationError):
        build.strip_code(bad)


def test_markdown_solution_blocks():
    assert (
        build.strip_markdown("Q?\n<!-- BEGIN SOLUTION -->\nbecause\n<!-- END SOLUTION -->")
        == "Q?\n" + build.MD_PLACEHOLDER
    )


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
