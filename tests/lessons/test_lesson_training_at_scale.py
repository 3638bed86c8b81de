"""Lesson 11's graded questions: expected values derived independently here, and the feedback for the typical
mistakes (tests/grading runs every exercise and solution notebook generically)."""

from __future__ import annotations

import pytest

from distlab import models
from distlab.lessons import training_at_scale as lesson
from distlab.lessons.questions import CORRECT, INCORRECT, NOT_ATTEMPTED

P7 = models.model("llama2-7b")


def test_q1_zb_v_saves_the_bubble_but_the_warm_up():
    # 1F1B: 16 x 3 + 7 x 3 = 69 t_F. ZB-V: no idle inside a span (m = 16 >= 2p - 1 = 15), so the last stage works
    # 48 t_F from its start (p-1) x 1/2 = 3.5 t_F in: 51.5. Saved 17.5.
    assert lesson.q1.expected() == pytest.approx(69 - 51.5)
    assert lesson.q1.check("17.5").status == CORRECT
    miss = lesson.q1.check(21)  # 1F1B's whole bubble (p-1)(F+B+W)
    assert miss.status == INCORRECT and "warm-up" in miss.message


def test_q2_dualpipe_holds_p_plus_one():
    # DeepSeek-V3 Table 2: activation PP + 1
    assert lesson.q2.expected() == 9
    assert lesson.q2.check(9).status == CORRECT
    assert "1F1B's peak" in lesson.q2.check(8).message
    assert lesson.q2.check(10).status == INCORRECT


def test_q3_fsdp_network_bytes():
    # (32 + 31 + 32) collectives x 2 B x 202,383,360 parameters x 31/32 = 37.25 GB
    want = 95 * 2 * P7.params_per_layer() * 31 / 32 / 1e9
    assert lesson.q3.expected() == pytest.approx(want)
    assert lesson.q3.check(f"{want * 1e3} MB").status == CORRECT
    miss = lesson.q3.check(64 * 2 * P7.params_per_layer() * 31 / 32 / 1e9)  # no backward gathers
    assert miss.status == INCORRECT and "backward all-gathers" in miss.message


def test_q4_hsdp_hides_more():
    assert lesson.q4.expected() == "hsdp"
    assert lesson.q4.check("HSDP").status == CORRECT and lesson.q4.check("fsdp").status == INCORRECT


def test_q5_ulysses_degree_with_tp():
    # 64 heads / tp 8 = 8 heads per TP rank: cp <= 8 (and 8 divides 8 K/V heads / 8 = 1 replicated evenly)
    assert lesson.q5.expected() == 8
    assert "tensor parallelism takes the heads first" in lesson.q5.check(64).message


def test_q6_contiguous_causal_imbalance():
    # (2cp - 1)/cp = 15/8
    assert lesson.q6.expected() == pytest.approx(15 / 8)
    assert lesson.q6.check("1.875").status == CORRECT
    assert "2 - 1/cp" in lesson.q6.check(2).message


def test_q7_mtbf_on_131072_gpus():
    # 54 x 24 h / 419 x 16384 / 131072 = 0.3866 h = 23.2 min
    want = 54 * 24 * 60 / 419 * 16384 / 131072
    assert lesson.q7.expected() == pytest.approx(want)
    assert lesson.q7.check(f"{want / 60} h").status == CORRECT
    assert "planned maintenance" in lesson.q7.check(want * 419 / 466).message
    assert "wrong way" in lesson.q7.check(want * 64).message


def test_q8_critical_batch():
    assert lesson.q8.expected() == pytest.approx(2e8 / 2 ** (1 / 0.21) / 1e6)
    assert lesson.q8.check(7.37).status == CORRECT and lesson.q8.check(20).status == INCORRECT


def test_every_question_starts_unanswered():
    assert all(q.check(None).status == NOT_ATTEMPTED for q in lesson.QUESTIONS.values())
    assert list(lesson.QUESTIONS) == [f"q{i}" for i in range(1, 9)]
