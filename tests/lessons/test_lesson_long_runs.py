"""Lesson 11b's graded questions (long context, failures, the batch; questions q5-q8 of lesson 11 before the split):
expected values derived independently here, and the feedback for the typical mistakes (tests/grading runs every
exercise and solution notebook generically)."""

from __future__ import annotations

import pytest

from distlab.lessons import long_runs as lesson
from distlab.lessons.questions import NOT_ATTEMPTED, INCORRECT, CORRECT


def test_q1_ulysses_degree_with_tp():
    # 64 heads / tp 8 = 8 heads per TP rank: cp <= 8 (and 8 divides 8 K/V heads / 8 = 1 replicated evenly)
    assert lesson.q1.expected() == 8
    assert "tensor parallelism takes the heads first" in lesson.q1.check(64).message
    # 8 K/V heads / tp 8 = 1: the K/V heads are not the bound (they can be replicated)
    miss = lesson.q1.check(1)
    assert miss.status == INCORRECT and "K/V heads" in miss.message


def test_q2_contiguous_causal_imbalance():
    # (2cp - 1)/cp = 15/8
    assert lesson.q2.expected() == pytest.approx(15 / 8)
    assert lesson.q2.check("1.875").status == CORRECT
    assert "2 - 1/cp" in lesson.q2.check(2).message
    # blocks by hand: the last GPU computes 7 full blocks + half its diagonal = 7.5 of 8 x 8 / 2 = 32; fair = 4
    assert lesson.q2.check(7.5 / 4).status == CORRECT
    miss = lesson.q2.check(1)  # equal pieces taken for equal work
    assert miss.status == INCORRECT and "causal mask" in miss.message


def test_q3_young_interval_on_131072_gpus():
    # MTBF: 54 x 24 x 3600 s / 419 x 16384 / 131072 = 1391.9 s (23.2 min); Young: sqrt(2 x 30 x 1391.9) = 289.0 s
    mtbf_s = 54 * 24 * 3600 / 419 * 16384 / 131072
    want = (2 * 30 * mtbf_s) ** 0.5 / 60
    assert want == pytest.approx(4.8164, abs=1e-4)
    assert lesson.q3.expected() == pytest.approx(want)
    assert lesson.q3.check(f"{want * 60} s").status == CORRECT
    assert "time between failures itself" in lesson.q3.check(mtbf_s / 60).message
    # all 466 interruptions: MTBF x 419/466, interval x sqrt(419/466)
    assert "planned maintenance" in lesson.q3.check(want * (419 / 466) ** 0.5).message
    # MTBF x 64 (scaled up by the GPU ratio 8 instead of down): interval x 8
    assert "wrong way" in lesson.q3.check(want * 8).message
    miss = lesson.q3.check((30 * mtbf_s) ** 0.5 / 60)  # sqrt(delta M)
    assert miss.status == INCORRECT and "leaves out the 2" in miss.message


def test_q4_doubling_a_batch_near_the_critical_one():
    # B_crit = 2e8 / 2^(1/0.21) = 2e8 / 27.13 = 7.3715e6 tokens; S(4M) / S(8M) = (1 + 1.8429) / (1 + 0.9215) = 1.4796
    crit = 2e8 / 2 ** (1 / 0.21)
    want = (1 + crit / 4e6) / (1 + crit / 8e6)
    assert want == pytest.approx(1.4796, abs=1e-4)
    assert lesson.q4.expected() == pytest.approx(want)
    assert lesson.q4.check("1.48").status == CORRECT
    miss = lesson.q4.check(2)  # perfect scaling
    assert miss.status == INCORRECT and "perfect scaling" in miss.message
    # the exponent alpha_B: B_crit = 2e8 / 2^0.21 = 172.9e6, (1 + 43.23) / (1 + 21.61) = 1.956
    wrong_crit = 2e8 / 2**0.21
    miss = lesson.q4.check((1 + wrong_crit / 4e6) / (1 + wrong_crit / 8e6))
    assert miss.status == INCORRECT and "instead of 1/alpha_B" in miss.message
    # B = B_crit: (1 + 1) / (1 + 1/2) = 4/3
    assert "takes the batch to be the critical batch" in lesson.q4.check(4 / 3).message


def test_every_question_starts_unanswered():
    assert all(q.check(None).status == NOT_ATTEMPTED for q in lesson.QUESTIONS.values())
    assert list(lesson.QUESTIONS) == [f"q{i}" for i in range(1, 5)]
