"""Graded questions of lesson 3 (data parallelism and ZeRO).

Every expected value is derived here by hand, independently of the check's own computation.
"""

from __future__ import annotations


import pytest

from distlab.lessons.questions import INCORRECT
from distlab.lessons.variants import lesson_variant
from distlab.lessons import data_parallel_zero as lesson

HAND = {
    # (2 + 2 + 12/16) x 128e9 B = 4.75 x 128 = 608 GB (the ZeRO paper's Table 1 formula, its 128B model)
    "q1": 608.0,
    # 13B on 16 GPUs: 3 x 15/16 x 26 GB = 73.125 GB
    "q2": 73.125,
    # ZeRO-2: reduce-scatter + all-gather = 2 x 63/64 x M, plain DP's all-reduce: the same (a)
    "q3": "a",
    # buckets of 62.5 ms ready every 50 ms: the last ends at 50 + 4 x 62.5 = 300 ms -> 100 ms exposed
    "q4": 100.0,
    # buckets of 15 ms ready every 37.5 ms: only the last one, 15 ms, is exposed
    "q5": 15.0,
    # lecture quiz 9 with 45 GB of activations, 7e9 params over 8 GPUs of 80 GB:
    # ZeRO-1 (4 + 1.5) x 7 = 38.5 + 45 = 83.5 > 80; ZeRO-2 (2 + 1.75) x 7 = 26.25 + 45 = 71.25 <= 80
    "q6": "zero-2",
    # M = 14 GB, N = 8, m = 8: 8 reduce-scatters of 7/8 x 14 = 12.25 GB, plus one all-gather of 12.25 GB
    "q7": 9 * 12.25,
    # lecture quiz 4: 70e9 x 16 B / 128 = 8.75 GB
    "q8": 8.75,
}


def test_six_to_eight_questions():
    assert 6 <= len(lesson.QUESTIONS) <= 8


@pytest.mark.parametrize("name", list(HAND))
def test_expected_values_equal_the_hand_derivations(name, expect_hand_value):
    expect_hand_value(lesson.QUESTIONS[name], HAND[name])


@pytest.mark.parametrize(
    "q, answer, words",
    [
        (lesson.q1, 2048, "plain DP"),  # 16 x 128e9 B
        (lesson.q2, 78, "large-N volume"),  # 3 x 26 GB
        (lesson.q2, 48.75, "plain DP's all-reduce"),  # 2 x 15/16 x 26 GB
        (lesson.q4, 50, "first bucket"),
        (lesson.q4, 62.5, "last bucket alone"),
        (lesson.q5, 120, "too high"),  # the whole all-reduce: all but the last bucket hide under backward
        (lesson.q5, 0.015, "looks like seconds"),
        (lesson.q3, "b", "is ZeRO-3"),
        (lesson.q3, "c", "shard for the message"),
        (lesson.q3, "d", "same bytes twice"),
        (lesson.q6, "plain dp", "replicates"),
        (lesson.q6, "zero-1", "not the lowest that fits with 45 GB"),
        (lesson.q6, "zero-3", "communicates less"),
        (lesson.q6, "none", "gives up"),
        (lesson.q6, "zero-9", "not one of"),
        (lesson.q7, 24.5, "no_sync"),  # one all-reduce per step: 2 x 7/8 x 14
        (lesson.q7, 8 * 24.5, "all-reduces every micro-batch"),
        (lesson.q8, 1120, "unsharded total"),
        (lesson.q8, (2 + 14 / 128) * 70, "is ZeRO-2"),
    ],
)
def test_wrong_answers_say_why(q, answer, words):
    result = q.check(answer)
    assert result.status == INCORRECT and result.message.startswith("not yet, because") and words in result.message


def test_answers_with_units():
    assert lesson.q4.check("0.1 s").correct and lesson.q6.check("ZeRO-2").correct


def test_solution_notebook_answers_every_question_in_the_marker_format(answered_in_solution):
    assert answered_in_solution("03_data_parallel_zero.ipynb") == list(lesson.QUESTIONS)


# per-student variants (issue 15): every combination is well-posed, and the wrong-answer feedback follows the numbers
VARIED = ("q2", "q4", "q5", "q7", "q8")


@pytest.mark.parametrize("name", VARIED)
def test_every_variant_is_well_posed(name, assert_well_posed):
    assert_well_posed(lesson.QUESTIONS[name])


def test_the_overlap_variants_stay_in_the_regime_their_explanations_describe(every_variant):
    for q in every_variant(lesson.q4):  # the all-reduces queue up: comm - (b-1)/b x backward is exposed
        p = q.params
        assert q.expected() == pytest.approx(p["comm_ms"] - (p["buckets"] - 1) / p["buckets"] * p["backward_ms"])
    for q in every_variant(lesson.q5):  # each all-reduce ends before the next bucket: only the last is exposed
        assert q.expected() == pytest.approx(q.params["comm_ms"] / q.params["buckets"])


@pytest.mark.parametrize("seed", ["seed-0", "seed-1", "seed-4", "seed-7"])
def test_wrong_answers_say_why_in_every_variant(seed):
    qs = lesson_variant("data_parallel_zero", seed)
    q2 = qs["q2"]
    m_gb, n = 2 * q2.params["billions"], q2.params["dp"]
    assert q2.expected() == pytest.approx(3 * (n - 1) / n * m_gb)
    assert "large-N volume" in q2.check(3 * m_gb).message  # 3M instead of 3(N-1)/N M
    assert "plain DP's all-reduce" in q2.check(2 * (n - 1) / n * m_gb).message
    assert "looks like bytes" in q2.check(q2.expected() * 1e9).message
    q4 = qs["q4"]
    b, c, k = (q4.params[x] for x in ("backward_ms", "comm_ms", "buckets"))
    assert "first bucket" in q4.check(c - b).message  # comm - backward
    assert "last bucket alone" in q4.check(c / k).message
    q5 = qs["q5"]
    assert "looks like seconds" in q5.check(q5.expected() / 1e3).message


def test_two_seeds_draw_different_numbers():
    assert {lesson_variant("data_parallel_zero", s)["q4"].prompt for s in ("seed-1", "seed-7", "seed-3")} != {
        lesson.q4.prompt
    }


def test_quiz_9_variants_by_hand():
    # 7B over 8 GPUs of 80 GB: ZeRO-1 38.5, ZeRO-2 26.25, ZeRO-3 14 GB of model states
    # 10 GB of activations: 48.5 fits at ZeRO-1; 60 GB: 86.25 > 80 at ZeRO-2, 74 at ZeRO-3
    from distlab.lessons.questions import with_params

    assert [with_params(lesson.q6, act_gb=a).expected() for a in (10, 45, 60)] == ["zero-1", "zero-2", "zero-3"]
