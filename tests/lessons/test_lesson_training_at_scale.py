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


def test_q5_ulysses_degree_with_tp():
    # 64 heads / tp 8 = 8 heads per TP rank: cp <= 8 (and 8 divides 8 K/V heads / 8 = 1 replicated evenly)
    assert lesson.q5.expected() == 8
    assert "tensor parallelism takes the heads first" in lesson.q5.check(64).message
    # 8 K/V heads / tp 8 = 1: the K/V heads are not the bound (they can be replicated)
    miss = lesson.q5.check(1)
    assert miss.status == INCORRECT and "K/V heads" in miss.message


def test_q6_contiguous_causal_imbalance():
    # (2cp - 1)/cp = 15/8
    assert lesson.q6.expected() == pytest.approx(15 / 8)
    assert lesson.q6.check("1.875").status == CORRECT
    assert "2 - 1/cp" in lesson.q6.check(2).message
    # blocks by hand: the last GPU computes 7 full blocks + half its diagonal = 7.5 of 8 x 8 / 2 = 32; fair = 4
    assert lesson.q6.check(7.5 / 4).status == CORRECT
    miss = lesson.q6.check(1)  # equal pieces taken for equal work
    assert miss.status == INCORRECT and "causal mask" in miss.message


def test_q7_young_interval_on_131072_gpus():
    # MTBF: 54 x 24 x 3600 s / 419 x 16384 / 131072 = 1391.9 s (23.2 min); Young: sqrt(2 x 30 x 1391.9) = 289.0 s
    mtbf_s = 54 * 24 * 3600 / 419 * 16384 / 131072
    want = (2 * 30 * mtbf_s) ** 0.5 / 60
    assert want == pytest.approx(4.8164, abs=1e-4)
    assert lesson.q7.expected() == pytest.approx(want)
    assert lesson.q7.check(f"{want * 60} s").status == CORRECT
    assert "time between failures itself" in lesson.q7.check(mtbf_s / 60).message
    # all 466 interruptions: MTBF x 419/466, interval x sqrt(419/466)
    assert "planned maintenance" in lesson.q7.check(want * (419 / 466) ** 0.5).message
    # MTBF x 64 (scaled up by the GPU ratio 8 instead of down): interval x 8
    assert "wrong way" in lesson.q7.check(want * 8).message
    miss = lesson.q7.check((30 * mtbf_s) ** 0.5 / 60)  # sqrt(delta M)
    assert miss.status == INCORRECT and "leaves out the 2" in miss.message


def test_q8_doubling_a_batch_near_the_critical_one():
    # B_crit = 2e8 / 2^(1/0.21) = 2e8 / 27.13 = 7.3715e6 tokens; S(4M) / S(8M) = (1 + 1.8429) / (1 + 0.9215) = 1.4796
    crit = 2e8 / 2 ** (1 / 0.21)
    want = (1 + crit / 4e6) / (1 + crit / 8e6)
    assert want == pytest.approx(1.4796, abs=1e-4)
    assert lesson.q8.expected() == pytest.approx(want)
    assert lesson.q8.check("1.48").status == CORRECT
    miss = lesson.q8.check(2)  # perfect scaling
    assert miss.status == INCORRECT and "perfect scaling" in miss.message
    # the exponent alpha_B: B_crit = 2e8 / 2^0.21 = 172.9e6, (1 + 43.23) / (1 + 21.61) = 1.956
    wrong_crit = 2e8 / 2**0.21
    miss = lesson.q8.check((1 + wrong_crit / 4e6) / (1 + wrong_crit / 8e6))
    assert miss.status == INCORRECT and "instead of 1/alpha_B" in miss.message
    # B = B_crit: (1 + 1) / (1 + 1/2) = 4/3
    assert "takes the batch to be the critical batch" in lesson.q8.check(4 / 3).message


def test_every_question_starts_unanswered():
    assert all(q.check(None).status == NOT_ATTEMPTED for q in lesson.QUESTIONS.values())
    assert list(lesson.QUESTIONS) == [f"q{i}" for i in range(1, 9)]
