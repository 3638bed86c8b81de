"""The graded questions of lesson 5: expected values computed by distlab agree with hand derivations and
published figures; wrong answers say what is wrong."""

from __future__ import annotations

import pytest

from distlab.lessons.questions import CORRECT, INCORRECT, NOT_ATTEMPTED
from distlab.lessons import tensor_parallel as tpq


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


def test_four_to_six_questions():
    # each one has a prompt, hint and solution and starts unanswered: tests/lessons/test_manifest.py
    assert 4 <= len(tpq.QUESTIONS) <= 6
