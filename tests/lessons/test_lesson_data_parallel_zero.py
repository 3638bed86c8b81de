"""Graded questions of lesson 3 (data parallelism and ZeRO).

Every expected value is derived here by hand, independently of the check's own computation.
"""

from __future__ import annotations

import pytest

from distlab.lessons.questions import INCORRECT
from distlab.lessons import data_parallel_zero as lesson

HAND = {
    # (2 + 2 + 12/16) x 7.5e9 B = 35.625 GB (ZeRO paper, Table 1: 35.6)
    "q1": 35.625,
    # 3 x 7/8 x 14 GB
    "q2": 36.75,
    "q3": "no",
    # buckets of 62.5 ms ready every 50 ms: the last ends at 50 + 4 x 62.5 = 300 ms -> 100 ms exposed
    "q4": 100.0,
    # buckets of 15 ms ready every 37.5 ms: only the last one, 15 ms, is exposed
    "q5": 15.0,
    # 18.45e9 params over 8: ZeRO-1 5.5 x 18.45 = 101 GB > 80; ZeRO-2 3.75 x 18.45 = 69.2 GB <= 80
    "q6": "zero-2",
}


def test_four_to_six_questions():
    assert 4 <= len(lesson.QUESTIONS) <= 6


@pytest.mark.parametrize("name", list(HAND))
def test_expected_values_equal_the_hand_derivations(name, expect_hand_value):
    expect_hand_value(lesson.QUESTIONS[name], HAND[name])


@pytest.mark.parametrize(
    "q, answer, words",
    [
        (lesson.q1, 120, "plain DP"),
        (lesson.q2, 42, "large-N volume"),
        (lesson.q2, 24.5, "plain DP's all-reduce"),
        (lesson.q4, 50, "first bucket"),
        (lesson.q4, 62.5, "last bucket alone"),
        (lesson.q6, "zero-3", "not right"),
        (lesson.q6, "zero-9", "not one of"),
    ],
)
def test_wrong_answers_say_why(q, answer, words):
    result = q.check(answer)
    assert result.status == INCORRECT and result.message.startswith("not yet, because") and words in result.message


def test_answers_with_units():
    assert lesson.q4.check("0.1 s").correct and lesson.q6.check("ZeRO-2").correct


def test_solution_notebook_answers_every_question_in_the_marker_format(answered_in_solution):
    assert answered_in_solution("03_data_parallel_zero.ipynb") == list(lesson.QUESTIONS)

