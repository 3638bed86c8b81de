"""Lesson 4's graded questions: expected values derived by hand here, feedback for typical mistakes.

(tests/grading/test_build.py runs every exercise and solution notebook generically.)
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from distlab import memory, models
from distlab.lessons import pipeline as lesson
from distlab.lessons.questions import CORRECT, INCORRECT, NOT_ATTEMPTED

ROOT = Path(__file__).resolve().parents[2]

# one layer of Llama-2-7B, one 4,096-token sequence, selective recomputation (Korthikanti et al. 2022)
PER_LAYER = memory.activation_bytes_per_layer(models.model("llama2-7b"), 1, 4096, recompute="selective")
# the same for Llama-2-13B (h = 5120, f = 13824, 40 layers), which q3 and q4 ask about (the lesson works 7B)
PER_LAYER_13B = memory.activation_bytes_per_layer(models.model("llama2-13b"), 1, 4096, recompute="selective")

# (question, hand-derived value)
HAND = [
    # GPipe p = 8, m = 12: (p-1)/(m+p-1) = 7/19 = 36.8 % (the lesson works p = 4: 3/15 = 20 %)
    (lesson.q1, 100 * 7 / 19),
    # p = 6: 5/(m+5) < 0.2  <=>  m > 20, and m = 20 gives exactly 20 % (5/25)
    (lesson.q2, 21),
    # 1F1B: stage 0 holds p = 4 microbatches of its 40/4 = 10 layers
    (lesson.q3, PER_LAYER_13B * 10 * 4 / 1e9),
    # GPipe: all m = 32 microbatches
    (lesson.q4, PER_LAYER_13B * 10 * 32 / 1e9),
    # interleaved, m = 16: (p-1)/(v m) = 3/32
    (lesson.q5, 100 * 3 / 32),
    # 256 GPUs / PP 8 = 32 pipelines; 256 sequences / 32 = 8 per pipeline
    (lesson.q6, 8),
    # 1F1B, p = 4, m = 6, stage 1: p - s - 1 = 2 warm-up forwards, then F/B pairs, then 2 drain backwards
    (lesson.q7, ["F0", "F1", "F2", "B0", "F3", "B1", "F4", "B2", "F5", "B3", "B4", "B5"]),
    # same idle share 3/11 for both (fill and drain are the same); stage 0 holds m = 8 (GPipe) vs p = 4 (1F1B): b
    (lesson.q8, "b"),
]


@pytest.mark.parametrize("question, value", HAND, ids=[q.name for q, _ in HAND])
def test_expected_values_match_the_hand_derivation(question, value):
    if isinstance(value, (str, list)):
        assert question.expected() == value
    else:
        assert question.expected() == pytest.approx(value, rel=1e-12)
    assert question.check(value).status == CORRECT
    assert question.check(None).status == NOT_ATTEMPTED
    assert question.hint().text and question.solution().text


def test_all_questions_are_listed():
    assert list(lesson.QUESTIONS) == ["q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8"]


def test_per_layer_activations_by_hand():
    # Llama-2-7B (h = 4096, f = 11008, a = 32, no dropout), s = 4096, b = 1, 2-byte elements,
    # selective recomputation (no attention scores): per token 4h x 2 (two norm inputs, the
    # attention and MLP inputs) + (h + 2h + h) x 2 (Q, K, V, output-projection input) + 3f x 2
    # (gated MLP) = 32768 + 32768 + 66048 = 131584 bytes
    assert PER_LAYER == 4096 * (8 * 4096 + 8 * 4096 + 6 * 11008)


@pytest.mark.parametrize(
    "question, answer, words",
    [
        (lesson.q1, 7 / 19, "looks like a fraction"),
        (lesson.q1, 100 * 7 / 12, "time added over ideal compute"),  # (p-1)/m = 7/12
        (lesson.q1, 87.5, "naive model parallelism"),  # (p-1)/p = 7/8
        (lesson.q2, 20, "exactly 20%"),
        (lesson.q2, 22, "too high"),
        (lesson.q3, PER_LAYER_13B * 10 * 32 / 1e9, "GPipe's figure"),
        (lesson.q3, PER_LAYER_13B * 10 / 1e9, "counts one microbatch"),
        (lesson.q3, PER_LAYER_13B * 40 * 4 / 1e9, "counts all 40 layers"),
        (lesson.q3, PER_LAYER_13B * 10 * 4, "looks like bytes"),
        (lesson.q4, PER_LAYER_13B * 10 * 4 / 1e9, "1F1B's figure"),
        (lesson.q5, 100 * 3 / 16, "plain 1F1B"),  # (p-1)/m = 3/16
        (lesson.q5, 100 * 3 / 35, "idle share of the step"),  # (p-1)/(v m + p - 1) = 3/35
        (lesson.q6, 16, "half a sequence"),
        (lesson.q6, 32, "too high"),
        (lesson.q7, "F0 F1 F2 F3 F4 F5 B0 B1 B2 B3 B4 B5", "GPipe's order"),
        (lesson.q7, "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5", "like stage 0"),  # p - 1 = 3 warm-up forwards
        (lesson.q7, "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5", "step 3"),  # one warm-up forward too few
        (lesson.q7, ["F0", "B0"], "has 2 steps"),
        (lesson.q8, "a", "fills and drains the pipe exactly as GPipe"),
        (lesson.q8, "c", "credits 1F1B with a smaller bubble"),
        (lesson.q8, "d", "misses the memory"),
    ],
)
def test_typical_mistakes_get_specific_feedback(question, answer, words):
    result = question.check(answer)
    assert result.status == INCORRECT and result.message.startswith("not yet, because") and words in result.message


@pytest.mark.parametrize("answer", ["20 %", "20.1", 20, "0.2 * 100"])
def test_percent_answers_with_or_without_units(answer):
    # the lesson's worked case, p = 4, m = 12: 3/15 = 20 %; 20.1 is within the 1 % tolerance of 20
    from distlab.lessons.questions import with_params

    assert with_params(lesson.q1, p=4).check(answer).status == CORRECT


def test_memory_answers_with_units():
    gb = PER_LAYER_13B * 10 * 4 / 1e9
    assert lesson.q3.check(f"{gb} GB").correct
    assert lesson.q3.check(f"{PER_LAYER_13B * 40:.6g} B").correct
    assert "not an amount of memory" in lesson.q3.check("17 GB/s").message


def test_solution_notebook_answers_are_independent_of_the_checks():
    # every answer cell computes its own value: none imports the course module's helpers
    nb = nbformat.read(ROOT / "solutions" / "04_pipeline.ipynb", as_version=4)
    blocks = [c.source for c in nb.cells if c.cell_type == "code" and "### BEGIN SOLUTION" in c.source]
    assert len(blocks) == 8
    for block in blocks:
        body = block.split("### BEGIN SOLUTION")[1].split("### END SOLUTION")[0]
        assert (
            ".expected" not in body
            and "course" not in body
            and "lessons" not in body
            and "_q" not in body.replace("answer_q", "")
        )


def test_1f1b_order_by_hand_for_stage_3_and_stage_0():
    from distlab.lessons.questions import with_params

    # the last stage (s = p - 1) has no warm-up: strict F/B alternation
    assert with_params(lesson.q7, stage=3).expected() == [
        "F0",
        "B0",
        "F1",
        "B1",
        "F2",
        "B2",
        "F3",
        "B3",
        "F4",
        "B4",
        "F5",
        "B5",
    ]
    # stage 0 of p = 8 with m = 6: the warm-up min(7, 6) = 6 is all of m: GPipe's order (no steady state)
    assert with_params(lesson.q7, p=8, stage=0).expected() == [f"F{i}" for i in range(6)] + [f"B{i}" for i in range(6)]


def test_every_1f1b_variant_is_checked_against_an_order_built_by_hand(every_variant):
    for q in every_variant(lesson.q7):
        p, m, s = q.params["p"], q.params["m"], q.params["stage"]
        warm = p - s - 1  # m > p in every variant, so no cut
        by_hand = [f"F{i}" for i in range(warm)]
        for k in range(m - warm):
            by_hand += [f"F{warm + k}", f"B{k}"]
        by_hand += [f"B{i}" for i in range(m - warm, m)]
        assert q.expected() == by_hand and q.check(by_hand).correct, q.params
        gpipe = [f"F{i}" for i in range(m)] + [f"B{i}" for i in range(m)]
        assert "GPipe's order" in q.check(gpipe).message, q.params


def test_the_1f1b_explanation_counts_in_words_that_agree_with_the_number():
    # a student review (session 22) found "1 microbatches" in the kit's printed text; the last stage of a 1F1B
    # schedule warms up with 0 forwards and holds at most 1 microbatch: every stage of p = 2..6, m = 1..8 reads right
    from distlab.lessons.pipeline import _explain_q7

    one_plural = re.compile(r"\b1 (microbatches|forwards|backwards)\b")
    for p in range(2, 7):
        for m in range(1, 9):
            for stage in range(p):
                text = _explain_q7(p, m, stage)
                assert not one_plural.search(text), text
    assert "At most 1 microbatch is in flight" in _explain_q7(4, 8, 3)
    assert "warms up with p - s - 1 = 1 forward " in _explain_q7(4, 8, 2)
