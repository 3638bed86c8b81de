"""Lesson 4's graded questions: expected values derived by hand here, feedback for typical mistakes.

(tests/grading/test_build.py runs every exercise and solution notebook generically.)
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from distlab import memory, models
from distlab.lessons import pipeline as lesson
from distlab.lessons.questions import CORRECT, INCORRECT, NOT_ATTEMPTED

ROOT = Path(__file__).resolve().parents[2]

# one layer of Llama-2-7B, one 4,096-token sequence, selective recomputation (Korthikanti et al. 2022)
PER_LAYER = memory.activation_bytes_per_layer(models.model("llama2-7b"), 1, 4096, recompute="selective")

# (question, hand-derived value)
HAND = [
    # GPipe p = 4, m = 8: (p-1)/(m+p-1) = 3/11 (the MIT lecture's 27.3 %)
    (lesson.q1, 100 * 3 / 11),
    # 7/(m+7) < 0.1  <=>  m > 63, and m = 63 gives exactly 10 %
    (lesson.q2, 64),
    # 1F1B: stage 0 holds p = 4 microbatches of its 32/4 = 8 layers
    (lesson.q3, PER_LAYER * 8 * 4 / 1e9),
    # GPipe: all m = 32 microbatches
    (lesson.q4, PER_LAYER * 8 * 32 / 1e9),
    # interleaved: (p-1)/(v m) = 3/16
    (lesson.q5, 100 * 3 / 16),
    # 256 GPUs / PP 8 = 32 pipelines; 256 sequences / 32 = 8 per pipeline
    (lesson.q6, 8),
]


@pytest.mark.parametrize("question, value", HAND, ids=[q.name for q, _ in HAND])
def test_expected_values_match_the_hand_derivation(question, value):
    assert question.expected() == pytest.approx(value, rel=1e-12)
    assert question.check(value).status == CORRECT
    assert question.check(None).status == NOT_ATTEMPTED
    assert question.hint().text and question.solution().text


def test_all_questions_are_listed():
    assert list(lesson.QUESTIONS) == ["q1", "q2", "q3", "q4", "q5", "q6"]


def test_per_layer_activations_by_hand():
    # Llama-2-7B (h = 4096, f = 11008, a = 32, no dropout), s = 4096, b = 1, 2-byte elements,
    # selective recomputation (no attention scores): per token 4h x 2 (two norm inputs, the
    # attention and MLP inputs) + (h + 2h + h) x 2 (Q, K, V, output-projection input) + 3f x 2
    # (gated MLP) = 32768 + 32768 + 66048 = 131584 bytes
    assert PER_LAYER == 4096 * (8 * 4096 + 8 * 4096 + 6 * 11008)


@pytest.mark.parametrize(
    "question, answer, words",
    [
        (lesson.q1, 3 / 11, "looks like a fraction"),
        (lesson.q1, 37.5, "time added over ideal compute"),
        (lesson.q1, 75.0, "naive model parallelism"),
        (lesson.q2, 63, "exactly 10%"),
        (lesson.q2, 65, "too high"),
        (lesson.q3, PER_LAYER * 8 * 32 / 1e9, "GPipe's figure"),
        (lesson.q3, PER_LAYER * 8 / 1e9, "counts one microbatch"),
        (lesson.q3, PER_LAYER * 32 * 4 / 1e9, "counts all 32 layers"),
        (lesson.q3, PER_LAYER * 8 * 4, "looks like bytes"),
        (lesson.q4, PER_LAYER * 8 * 4 / 1e9, "1F1B's figure"),
        (lesson.q5, 37.5, "plain 1F1B"),
        (lesson.q5, 100 * 3 / 19, "idle share of the step"),
        (lesson.q6, 16, "half a sequence"),
        (lesson.q6, 32, "too high"),
    ],
)
def test_typical_mistakes_get_specific_feedback(question, answer, words):
    result = question.check(answer)
    assert result.status == INCORRECT and result.message.startswith("not yet, because") and words in result.message


@pytest.mark.parametrize("answer", ["27.27 %", "27.3", 27.3, "0.2727 * 100"])
def test_percent_answers_with_or_without_units(answer):
    # 27.3 is within the 1 % tolerance of 27.27
    assert lesson.q1.check(answer).status == CORRECT


def test_memory_answers_with_units():
    gb = PER_LAYER * 8 * 4 / 1e9
    assert lesson.q3.check(f"{gb} GB").correct
    assert lesson.q3.check(f"{PER_LAYER * 32:.6g} B").correct
    assert "not an amount of memory" in lesson.q3.check("17 GB/s").message


def test_solution_notebook_answers_are_independent_of_the_checks():
    # every answer cell computes its own value: none imports the course module's helpers
    nb = nbformat.read(ROOT / "solutions" / "04_pipeline.ipynb", as_version=4)
    blocks = [c.source for c in nb.cells if c.cell_type == "code" and "### BEGIN SOLUTION" in c.source]
    assert len(blocks) == 6
    for block in blocks:
        body = block.split("### BEGIN SOLUTION")[1].split("### END SOLUTION")[0]
        assert (
            ".expected" not in body
            and "course" not in body
            and "lessons" not in body
            and "_q" not in body.replace("answer_q", "")
        )
