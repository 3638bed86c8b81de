"""Graded questions of lesson 2 (collectives).

Every expected value is derived here by hand, independently of the check's own computation.
Link figures used by hand: NVLink 4 450 GB/s per direction (900 GB/s bidirectional, NVIDIA H100
datasheet), InfiniBand NDR 400 Gb/s = 50 GB/s; alpha 3.4 us and 9.6 us (NCCL tuning model).
"""

from __future__ import annotations

import pytest

from distlab.lessons.questions import INCORRECT
from distlab.lessons import collectives as lesson


def ring_time(m, n, bw, alpha):
    """Ring all-reduce by hand: 2(N-1) alpha + 2(N-1)/N x M / B."""
    return 2 * (n - 1) * alpha + 2 * (n - 1) / n * m / bw


HAND = {
    # 2(N-1)/N x M = 2 x 7/8 x 4 GB
    "q1": 7.0,
    # the server sends M back to each of N-1 = 7 workers: 7 x 4 GB
    "q2": 28.0,
    # 13B bf16 gradients, 26 GB: 14 x 3.4 us + 2 x 7/8 x 26 GB / 450 GB/s = 0.0476 ms + 101.111 ms
    "q3": ring_time(26e9, 8, 450e9, 3.4e-6) * 1e3,
    # 16 GPUs: M* = N alpha B = 16 x 9.6 us x 50 GB/s = 7.68 MB
    "q4": 7.68,
    # 2(N-1)/N: 1.75 at N = 8, 1.97 at N = 64: about the same, just under 2 (b)
    "q5": "b",
    "q6": ring_time(26e9, 8, 50e9, 9.6e-6) / ring_time(26e9, 8, 450e9, 3.4e-6),
    # the gradient sum on every GPU is an all-reduce (b)
    "q7": "b",
    # GPU 2 of 4 sends chunk 1 first (given), then forwards what it received, one index lower each step:
    # reduce-scatter 1, 0, 3 (it then owns the full sum of chunk 2); all-gather 2, 1, 0
    "q8": [1, 0, 3, 2, 1, 0],
}


def test_six_to_eight_questions():
    assert 6 <= len(lesson.QUESTIONS) <= 8


@pytest.mark.parametrize("name", list(HAND))
def test_expected_values_equal_the_hand_derivations(name, expect_hand_value):
    expect_hand_value(lesson.QUESTIONS[name], HAND[name])


@pytest.mark.parametrize(
    "q, answer, words",
    [
        (lesson.q1, 8, "2 x M"),  # forgot the (N-1)/N
        (lesson.q1, 4, "count both phases"),
        (lesson.q1, 7e9, "looks like bytes"),
        (lesson.q3, ring_time(26e9, 8, 900e9, 3.4e-6) * 1e3, "both directions"),  # the datasheet's 900 GB/s
        (lesson.q4, 7.68e6, "looks like bytes"),
        (lesson.q2, 32, "counts N workers"),  # N x M = 8 x 4 GB: the server is one of the 8
        (lesson.q6, 1.0, "too low"),  # the same time on both links
        (lesson.q5, "a", "parameter server"),
        (lesson.q5, "c", "smaller chunks"),
        (lesson.q5, "d", "two phases"),
        (lesson.q7, "a", "sums nothing"),
        (lesson.q7, "c", "without adding"),
        (lesson.q7, "d", "1/N of the result"),
        (lesson.q7, "e", "experts"),
        (lesson.q8, [2, 1, 0, 3, 2, 1], "its own chunk"),  # (g - k) mod N
        (lesson.q8, [3, 0, 1, 2, 3, 0], "backwards"),  # (g + 1 + k) mod N
        (lesson.q8, [1, 0, 3, 1, 0, 3], "repeats the reduce-scatter"),
        (lesson.q8, [1, 0, 3], "has 3 steps"),  # the reduce-scatter alone
        (lesson.q8, [1, 0, 3, 2, 0, 1], "step 5"),
        (lesson.q8, 7, "not a list of chunk indices"),
    ],
)
def test_wrong_answers_say_why(q, answer, words):
    result = q.check(answer)
    assert result.status == INCORRECT and result.message.startswith("not yet, because") and words in result.message


def test_answers_with_units():
    assert lesson.q1.check("7e9 B").correct and lesson.q1.check("7000 MB").correct
    assert lesson.q3.check("0.1012 s").correct and lesson.q4.check("7680 kB").correct


def test_solution_notebook_answers_every_question_in_the_marker_format(answered_in_solution):
    assert answered_in_solution("02_collectives.ipynb") == list(lesson.QUESTIONS)


def test_ring_schedule_by_hand_for_every_variant():
    # GPU g sends (g - 1 - k) mod N at step k of the 2(N-1) steps; the simulated ring agrees for every variant
    from distlab.lessons.questions import with_params

    for n in (4, 6, 8):
        for g in (1, 2, 3):
            q = with_params(lesson.q8, gpu=g, n=n)
            by_hand = [(g - 1 - k) % n for k in range(2 * (n - 1))]
            assert q.expected() == by_hand and q.check(by_hand).correct and q.check(" ".join(map(str, by_hand))).correct
