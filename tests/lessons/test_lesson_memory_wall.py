"""Lesson 1's graded questions: hand-derived values, and feedback for each known mistake.

(tests/grading/test_questions.py checks the answer reading on lesson 1's q2; tests/lessons/test_manifest.py
that every question has a hint and a computed solution.)
"""

from __future__ import annotations

import doctest

import pytest

from distlab import memory
from distlab.lessons.questions import INCORRECT
from distlab.lessons import memory_wall as lesson


def test_choice_question():
    q5 = lesson.q5
    assert q5.check("B").correct and q5.check("b").correct
    assert q5.check("a").status == INCORRECT
    assert "not one of" in q5.check("maybe").message


def test_min_gpus_to_fit_worked_example_runs():
    # the docstring's example, run as a doctest
    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner()
    tests = finder.find(memory.min_gpus_to_fit, "min_gpus_to_fit", globs=vars(memory))
    for test in tests:
        runner.run(test)
    assert tests and runner.summarize(verbose=False).failed == 0


# issue 18: questions that need reasoning. Hand values, then a wrong answer per known mistake.
HAND = {
    # 2 (bf16 weights) + 2 (bf16 gradients) + 4 + 4 + 4 (fp32 master, Adam m and v) = 16
    "q1": 16,
    # 13e9 x 16 B = 208 GB on every replica (the lesson works 7B: 112 GB)
    "q2": 208.0,
    # plain DP replicates: 30e9 x 16 B = 480 GB on each of the 64 GPUs (the lesson works 70B)
    "q3": 480.0,
    # 48 GB / 16 B = 3e9 (the lesson prints 80 GB: 5e9)
    "q4": 3.0,
    # MIT 6.5940's quiz 3 as a diagnosis: ZeRO-1 over 8: (2 + 2 + 12/8) x 7e9 = 38.5 GB <= 80; more replicas, a smaller
    # micro-batch or bf16 gradients leave the 112 GB of model states as they are
    "q5": "b",
    # 70e9 x 16 B = 1,120 GB; 1,120 / N <= 80 - 10 = 70 GB needs N >= 16 (exactly 16)
    "q6": 16,
    # TE default: bf16 primary weights (16 B, as mixed) plus cached FP8 weight and transpose (2 B): 18 >= 16
    "q7": "c",
    # Chen et al. 2016: L/k + k over the divisors k of 64 is smallest at k = 8: 8 + 8 = 16
    "q8": 16,
}


def test_six_to_eight_questions():
    assert 6 <= len(lesson.QUESTIONS) <= 8


@pytest.mark.parametrize("name", list(HAND))
def test_expected_values_equal_the_hand_derivations(name, expect_hand_value):
    expect_hand_value(lesson.QUESTIONS[name], HAND[name])


@pytest.mark.parametrize(
    "name, answer, words",
    [
        ("q1", 2, "only the bf16 weights"),
        ("q1", 4, "not the optimizer"),
        ("q1", 12, "master copy"),
        ("q2", 26, "only the bf16 weights"),  # 13e9 x 2 B
        ("q2", 208e9, "looks like bytes"),
        ("q3", 480 / 64, "replicates the whole model"),
        ("q5", "a", "DP does not reduce memory"),
        ("q5", "c", "only the activations"),
        ("q5", "d", "already does"),
        ("q4", 24, "2 bytes"),  # 48 GB / 2 B
        ("q6", 14, "no room for the activations"),  # ceil(1,120 / 80)
        ("q7", "a", "master weights and moments stay fp32"),
        ("q7", "b", "FP8-primary-weights"),
        ("q7", "d", "optimizer"),
        ("q8", 64, "no checkpointing"),
        ("q8", 8, "only the checkpoints"),
        ("q8", 17, "too high"),
    ],
)
def test_wrong_answers_say_why(name, answer, words):
    result = lesson.QUESTIONS[name].check(answer)
    assert result.status == INCORRECT and result.message.startswith("not yet, because") and words in result.message


def test_checkpointing_variants_by_hand():
    # sqrt(L) segments: L = 16 -> 4 + 4, 36 -> 6 + 6, 100 -> 10 + 10
    from distlab.lessons.questions import with_params

    for layers, peak in ((16, 8), (36, 12), (100, 20)):
        assert with_params(lesson.q8, layers=layers).expected() == peak


@pytest.mark.parametrize("name", ["q2", "q3", "q4", "q6", "q8"])
def test_every_variant_is_well_posed(name, assert_well_posed):
    assert_well_posed(lesson.QUESTIONS[name])


def test_solution_notebook_answers_every_question_in_the_marker_format(answered_in_solution):
    assert answered_in_solution("01_memory_wall.ipynb") == list(lesson.QUESTIONS)
