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


def test_q1_is_palm_model_flops():
    # PaLM (App. B) per token: 6 x (80 layers x 855,654,400 + 128,256 x 8192) + 12 x 80 x 64 x 128 x 8192
    # = 6 x 69,503,025,152 + 64,424,509,440 = 417,018,150,912 + 64,424,509,440 = 481,442,660,352 FLOP;
    # x 2,097,152 tokens = 1.0097e18 FLOP = 1.010 EFLOP (6PT: 0.888 EFLOP, attention left out)
    m = models.model("llama3.1-70b")
    assert m.params_per_layer() == 855_654_400 and m.vocab == 128_256 and m.heads * m.head_dim == 8192
    per_token = 6 * (80 * 855_654_400 + 128_256 * 8192) + 12 * 80 * 64 * 128 * 8192
    assert per_token == 481_442_660_352
    assert lesson.q1.expected() == pytest.approx(per_token * TOKENS / 1e18, rel=1e-12)
    assert lesson.q1.check(f"{per_token * TOKENS / 1e15} PFLOP").status == CORRECT
    wrong = lesson.q1.check(6 * P * TOKENS / 1e18)
    assert wrong.status == INCORRECT and "leaves attention out" in wrong.message


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
    # MFU = F T / (t N peak), F the model FLOPs per token (q1: 481,442,660,352), and throughput = T / t
    #   =>  MFU = F x throughput / (N peak)
    assert mfu == pytest.approx(481_442_660_352 * tput / (256 * 989.4e12), rel=1e-9)
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
