"""Lesson 7's graded questions: expected values derived by hand here, feedback for typical mistakes.

(tests/grading/test_build.py runs every exercise and solution notebook generically.)
"""

from __future__ import annotations

import pytest

from distlab import models
from distlab.lessons import training_lab as lesson
from distlab.lessons.questions import CORRECT, INCORRECT, NOT_ATTEMPTED

P = models.model("llama3.1-70b").parameter_count()
TOKENS = 256 * 8192


def test_q1_is_six_p_t():
    # 6 x 70.55e9 x 2,097,152 = 8.878e17 FLOP = 0.888 EFLOP
    assert lesson.q1.expected() == pytest.approx(6 * P * TOKENS / 1e18, rel=1e-12)
    assert lesson.q1.check(f"{6 * P * TOKENS / 1e15} PFLOP").status == CORRECT
    wrong = lesson.q1.check(8 * P * TOKENS / 1e18)
    assert wrong.status == INCORRECT and "hardware FLOPs" in wrong.message


def test_q2_pure_dp_holds_16_bytes_per_parameter_plus_activations():
    # model states alone: 16 B x 70.55e9 = 1,129 GB, already 14 x the 80 GB
    assert lesson.q2.expected() > 16 * P / 1e9 > 14 * 80
    assert "replicates" in lesson.q2.check(lesson.q2.expected() / 256).message


def test_q3_bubble_added_is_p_minus_1_over_m():
    # dp = 256 / (8 x 8) = 4; m = 256 / (4 x 1) = 64; (8 - 1) / 64 = 10.9375 %
    assert lesson.q3.expected() == pytest.approx(100 * 7 / 64, rel=1e-12)
    idle = lesson.q3.check(100 * 7 / 71)  # the idle share (p-1)/(m+p-1), not the time added
    assert idle.status == INCORRECT and "idle share" in idle.message


def test_q4_mfu_and_q6_throughput_are_consistent():
    mfu = lesson.q4.expected() / 100
    tput = lesson.q6.expected() * 1e3
    # MFU = 6 P T / (t N peak) and throughput = T / t  =>  MFU = 6 P x throughput / (N peak)
    assert mfu == pytest.approx(6 * P * tput / (256 * 989.4e12), rel=1e-9)
    assert 0 < mfu <= 1


def test_q5_fabric_changes_the_best_configuration():
    assert lesson.q5.expected() == "no"
    assert lesson.q5.check(False).status == CORRECT and lesson.q5.check("maybe").status == INCORRECT


def test_all_questions_listed_answerable_and_explained():
    assert list(lesson.QUESTIONS) == ["q1", "q2", "q3", "q4", "q5", "q6"]
    for q in lesson.QUESTIONS.values():
        assert q.check(None).status == NOT_ATTEMPTED
        assert q.check(q.expected()).status == CORRECT
        assert q.hint().text and q.solution().text
