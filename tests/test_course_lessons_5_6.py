"""The graded questions of lessons 5 and 6: expected values computed by distlab agree with hand
derivations and published figures; the list-answer check says what is wrong."""

from __future__ import annotations

import numpy as np
import pytest

from distlab.course import parallelism_3d as p3
from distlab.course import tensor_parallel as tpq
from distlab.course.checks import CORRECT, INCORRECT, NOT_ATTEMPTED


def test_lesson_5_expected_values_by_hand():
    # q1: MIT 6.5940 quiz, 3 x 4096 x 4096 / 4
    assert tpq.q1.expected() == 12_582_912
    # q2: 4 x 2 x 7/8 x (4096 x 4096 x 2 B) = 234,881,024 B
    assert tpq.q2.expected() == pytest.approx(234.881024)
    # q3: 4 x (14 x 9.6 us + 58,720,256 B / 50e9 B/s) = 5.23522 ms
    assert tpq.q3.expected() == pytest.approx(4 * (14 * 9.6e-6 + 58_720_256 / 50e9) * 1e3)
    # q4: 10 x (1 - 1/8) x 2048 x 12288 B (Korthikanti et al. 2022, Table 2)
    assert tpq.q4.expected() == pytest.approx(10 * 7 / 8 * 2048 * 12288 / 1e6)
    # q5: 2 x 131072/64 x 8192 x 1 B = 32 MiB
    assert tpq.q5.expected() == pytest.approx(2**25 / 1e6)
    assert tpq.q6.expected() == "no"


def test_lesson_6_expected_values_by_hand():
    assert p3.q1.expected() == 256  # 16 x 4 x 4 (MIT 6.5940 quiz)
    assert p3.q2.expected() == [5, 7] and p3.q3.expected() == [2, 6, 10, 14]  # Megatron-LM docstring
    # q4: 530e9 / 96 x (2 + 2 + 12/21) B; the lecture rounds it to "about 25 GB"
    assert p3.q4.expected() == pytest.approx(530e9 / 96 * (4 + 12 / 21) / 1e9)
    assert round(p3.q4.expected()) == 25
    assert p3.q5.expected() == "inter-node"
    assert p3.q6.expected() == [4, 2, 2]


@pytest.mark.parametrize("answer, status", [
    ("32 MiB", CORRECT), ("33.5 MB", CORRECT), (33554432e-6, CORRECT), ("33554432 B", CORRECT),
    (32, INCORRECT), (None, NOT_ATTEMPTED),
])
def test_ring_buffer_answers_with_units(answer, status):
    assert tpq.q5.check(answer).status == status


@pytest.mark.parametrize("answer, words", [
    (234.881024 / 2, "counts only the two forward all-reduces"),
    (4 * 33.554432, "a ring all-reduce sends 2(N-1)/N x M per GPU"),
    (234.881024e6, "looks like bytes"),
])
def test_lesson_5_hints_name_the_usual_mistakes(answer, words):
    result = tpq.q2.check(answer)
    assert result.status == INCORRECT and words in result.message


def test_q3_forgetting_the_latency_is_named():
    bandwidth_only = 4 * 58_720_256 / 50e9 * 1e3
    assert "leaves out the latency" in tpq.q3.check(bandwidth_only).message


@pytest.mark.parametrize("answer", [[5, 7], [7, 5], (5, 7), {5, 7}, range(5, 8, 2), np.array([5, 7]), "5, 7",
                                    "[7, 5]", [5.0, 7.0]])
def test_group_answers_in_any_form(answer):
    assert p3.q2.check(answer).status == CORRECT


@pytest.mark.parametrize("answer, words", [
    ([5, 6], "leaves out 7 and includes 6 which does not belong"),
    ([5, 7, 9], "includes 9 which does not belong"),
    ([5, 5, 7], "names a GPU more than once"),
    (5, "is one number"),
    ("five and seven", "could not be read"),
    ([5.5, 7], "is not a whole number"),
    ([True, 7], "yes/no value"),
    (np.array([[5, 7]]), "give a flat list"),
    ({"a": 1}, "type dict"),
])
def test_group_answers_not_yet_because(answer, words):
    result = p3.q2.check(answer)
    assert result.status == INCORRECT and result.message.startswith("not yet, because") and words in result.message


def test_ordered_shape_question():
    assert p3.q6.check([4, 2, 2]).correct and p3.q6.check("(4, 2, 2)").correct
    assert "wrong order" in p3.q6.check([2, 2, 4]).message
    assert "right product (16) but not the right sizes" in p3.q6.check([8, 2]).message
    assert "multiplies to 8, not 16" in p3.q6.check([2, 2, 2]).message
    assert "a set has no order" in p3.q6.check({4, 2}).message
    assert p3.q6.check("").status == NOT_ATTEMPTED


@pytest.mark.parametrize("module", [tpq, p3])
def test_every_question_has_hint_solution_and_is_4_to_6(module):
    assert 4 <= len(module.QUESTIONS) <= 6
    for name, q in module.QUESTIONS.items():
        assert q.name == name and q.hint().text and q.solution().text
        assert q.check(None).status == NOT_ATTEMPTED
