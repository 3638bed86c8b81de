"""Lesson 11's graded questions (schedules and FSDP; lesson 11b's are in test_lesson_long_runs.py): expected values derived independently here, and the feedback for the typical
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
    assert lesson.q1.check((8 - 1) * 3 - (8 - 1) / 2).status == CORRECT  # the hint's path by hand
    miss = lesson.q1.check(21)  # 1F1B's whole bubble (p-1)(F+B+W)
    assert miss.status == INCORRECT and "warm-up" in miss.message


def test_q2_dualpipe_holds_p_plus_one():
    # DeepSeek-V3 Table 2: DualPipe's activation memory PP + 1 (1F1B: PP) and 2x parameters: 9 at p = 8, option a
    assert lesson._q2() == 8 + 1
    assert lesson.q2.expected() == "a"
    assert lesson.q2.check("A").status == CORRECT
    miss = lesson.q2.check("b")  # 2p = 16: one 1F1B pipeline per direction
    assert miss.status == INCORRECT and "full 1F1B pipeline per direction" in miss.message
    assert "keeps 1F1B's peak" in lesson.q2.check("c").message
    assert "both directions" in lesson.q2.check("d").message


def test_q3_fsdp_network_bytes():
    # (32 + 31 + 32) collectives, each hierarchical as NCCL runs it across 4 nodes of 8: only each GPU's 1/8 share
    # of the layer's 2 B x 202,383,360 bytes crosses the network, in a ring of 4 nodes sending 3/4 of it:
    # 95 x 2 x 202,383,360 / 8 x 3/4 = 3.605 GB (the flat ring through every GPU's NIC: 95 x 31/32 x 2 P_l = 37.25 GB)
    want = 95 * 2 * P7.params_per_layer() / 8 * 3 / 4 / 1e9
    assert lesson.q3.expected() == pytest.approx(want, rel=1e-12)
    assert lesson.q3.check(f"{want * 1e3} MB").status == CORRECT
    miss = lesson.q3.check(64 * 2 * P7.params_per_layer() / 8 * 3 / 4 / 1e9)  # no backward gathers
    assert miss.status == INCORRECT and "backward all-gathers" in miss.message
    flat = lesson.q3.check(95 * 2 * P7.params_per_layer() * 31 / 32 / 1e9)  # the strawman flat ring
    assert flat.status == INCORRECT and "flat ring" in flat.message


def test_q4_without_prefetch_hsdp_exposes_less():
    # without prefetch every gather is exposed. At line rate one layer's gather (2 B x 202.4M = 404.8 MB): HSDP over
    # NVLink 7/8 x 404.8 MB / 450 GB/s = 0.79 ms; FSDP the same plus 3/4 x 404.8 MB / 8 / 50 GB/s = 0.76 ms across
    # the nodes. With prefetch 1 both expose only the first gather and the last reduction (tests/core/test_fsdp.py)
    layer = 2 * P7.params_per_layer()
    assert layer * 7 / 8 / 450e9 < layer * 7 / 8 / 450e9 + layer / 8 * 3 / 4 / 50e9
    assert lesson.q4.expected() == "hsdp"
    assert lesson.q4.check("HSDP").status == CORRECT
    miss = lesson.q4.check("fsdp")
    assert miss.status == INCORRECT and "crosses the network" in miss.message
    same = lesson.q4.check("same")
    assert same.status == INCORRECT and "prefetch 1" in same.message


def test_every_question_starts_unanswered():
    assert all(q.check(None).status == NOT_ATTEMPTED for q in lesson.QUESTIONS.values())
    assert list(lesson.QUESTIONS) == [f"q{i}" for i in range(1, 5)]
