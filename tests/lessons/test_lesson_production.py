"""Lesson 8's graded questions: expected values derived independently here, feedback for typical mistakes.

(tests/grading/test_build.py runs every exercise and solution notebook generically.)
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from distlab import models
from distlab.lessons import production as lesson
from distlab.lessons.questions import CORRECT, INCORRECT, NOT_ATTEMPTED, with_params
from distlab.lessons.variants import lesson_variant

P7 = models.model("llama2-7b").parameter_count()  # 6.738e9
M = 2 * P7  # bf16 gradients: 13.48 GB


def test_q1_best_bucket_count_by_brute_force():
    # backward, the step model's calibrated compute (tests/core/test_production.py derives it term by term):
    # 2/3 x [39,644,037,120 matmul FLOP per token at 0.78 x 794.5/989 of 989.4 TFLOP/s + 6,442,450,944 attention-core
    # FLOP per token at 50% + (32 x 3 x 1.4 x 180,736 B + 1.4 x 52 x 32,000 B) per token / 3.35 TB/s (the fused
    # element-wise kernels and the loss)] for 4096 tokens = 231.9 ms.
    # Hierarchical all-reduce over 8 nodes of 8:
    # L = 2 x 7 x 3.4 us + 2 x 7 x 9.6 us = 182 us per bucket; bytes: 2 x 7/8 x M / 450e9 + 2 x 7/8 x M/8 / 50e9.
    peak = 989.4e12
    T = (
        2
        / 3
        * (
            39_644_037_120 * 4096 / (peak * 0.78 * 794.5 / 989)
            + 6_442_450_944 * 4096 / (peak * 0.5)
            + (32 * 3 * 1.4 * 180_736 + 1.4 * 52 * 32_000) * 4096 / 3.35e12
        )
    )
    L = 14 * 3.4e-6 + 14 * 9.6e-6
    Ms = 2 * 7 / 8 * M / 450e9 + 2 * 7 / 8 * (M / 8) / 50e9
    best, best_b = math.inf, None
    for b in range(1, 2001):  # the timeline by hand: bucket i ready at (i+1)T/b, one stream
        c, end = L + Ms / b, 0.0
        for i in range(b):
            end = max((i + 1) * T / b, end) + c
        if end - T < best - 1e-15:
            best, best_b = end - T, b
    assert lesson.q1.expected() == best_b == 662  # = floor((T - Ms) / L) = floor(662.1)
    # one bucket either side is accepted (abs_tol=1): the exposed time is flat there; two off is not
    assert lesson.q1.check("662").status == CORRECT
    assert lesson.q1.check(663).status == CORRECT and lesson.q1.check(661).status == CORRECT
    assert lesson.q1.check(664).status == INCORRECT and lesson.q1.check(660).status == INCORRECT


def test_q2_tapered_hierarchical_all_reduce():
    # intra ring over 8 on NVLink: 14 x 3.4 us + 2 x 7/8 x M / 450 GB/s = 52.5 ms
    # inter ring of M/8 over 4 nodes at 50/3 GB/s: 6 x 9.6 us + 2 x 3/4 x M/8 / (50e9/3) = 151.7 ms
    want = 14 * 3.4e-6 + 1.75 * M / 450e9 + 6 * 9.6e-6 + 1.5 * (M / 8) / (50e9 / 3)
    assert lesson.q2.expected() == pytest.approx(1e3 * want, rel=1e-12)
    assert lesson.q2.check(f"{want} s").status == CORRECT
    nonblocking = 14 * 3.4e-6 + 1.75 * M / 450e9 + 6 * 9.6e-6 + 1.5 * (M / 8) / 50e9
    miss = lesson.q2.check(1e3 * nonblocking)
    assert miss.status == INCORRECT and "non-blocking" in miss.message


def test_q3_rails_do_not_help_a_flat_ring():
    # without rails the ring's one crossing transfer per node fits the 8/3 ports of uplink: 50 GB/s,
    # 2 x 31 x 9.6 us + 2 x 31/32 x M / 50 GB/s = 523 ms; on rails the rank-7 leaf's ports all cross: 50/3 GB/s
    assert lesson.q3.expected() == "no"
    assert lesson.q3.check(False).status == CORRECT
    text = lesson.q3.explain()
    flat, railed = 62 * 9.6e-6 + 62 / 32 * M / 50e9, 62 * 9.6e-6 + 62 / 32 * M / (50e9 / 3)
    assert f"{flat * 1e3:.0f} ms" in text and f"{railed:.3g} s" in text


def test_q4_fp8_is_15_bytes_not_8():
    assert lesson.q4.expected() == 1 + 2 + 12
    wrong = lesson.q4.check(8)
    assert wrong.status == INCORRECT and "gradients stay bf16" in wrong.message


def test_q5_crossover_from_the_quadratic():
    # comm(c) = 9.6 us + c x 2 x 1024 x 2 B / 50e9; compute(c) = 1/2 x 4 c^2 x 8192 / (989.4e12 x 0.5)
    lam, alpha = 2 * 1024 * 2 / 50e9, 9.6e-6
    kap = 0.5 * 4 * 8192 / (989.4e12 * 0.5)
    c = (lam + math.sqrt(lam**2 + 4 * kap * alpha)) / (2 * kap)
    assert lesson.q5.expected() == 16 * math.ceil(c)
    assert 40_000 < lesson.q5.expected() < 43_000


def test_q6_first_fit_rung():
    assert lesson.q6.expected() == "selective recomputation"
    assert lesson.q6.check("Selective recomputation").status == CORRECT
    assert lesson.q6.check("zero").status == INCORRECT


def test_q7_expected_max_of_256_normals():
    # E[max of N normals] by direct numerical integration of x N phi(x) Phi(x)^(N-1): an independent quadrature
    x = np.linspace(-10, 10, 200001)
    phi = np.exp(-(x**2) / 2) / math.sqrt(2 * math.pi)
    Phi = np.cumsum(phi) * (x[1] - x[0])
    density = 256 * phi * Phi**255
    mu = float(np.sum(x * density) * (x[1] - x[0]))
    assert lesson.q7.expected() == pytest.approx(5 * mu, rel=1e-3)  # ~14.1 %
    lead = lesson.q7.check(5 * math.sqrt(2 * math.log(256)))
    assert lead.status == INCORRECT and "leading term" in lead.message


def test_all_questions_listed_answerable_and_explained():
    assert list(lesson.QUESTIONS) == ["q1", "q2", "q3", "q4", "q5", "q6", "q7"]
    for q in lesson.QUESTIONS.values():
        assert q.check(None).status == NOT_ATTEMPTED
        assert q.check(q.expected()).status == CORRECT
        assert q.hint().text and q.solution().text


# per-student variants (issue 15): q7's GPU count and jitter are drawn; expectations go through distlab.production
def test_every_q7_variant_is_sigma_times_the_expected_maximum():
    import itertools

    from distlab import production

    for gpus, sigma in itertools.product(lesson.q7.variants["gpus"], lesson.q7.variants["sigma"]):
        q = with_params(lesson.q7, gpus=gpus, sigma=sigma)
        want = q.expected()
        assert math.isfinite(want) and want > 0 and q.check(want).correct and q.explain()
        assert want == pytest.approx(100 * sigma * production.expected_max_normal(gpus), rel=1e-9)
        assert q.prompt.startswith(f"{gpus} GPUs") and f"a {100 * sigma:g}% standard deviation" in q.prompt
        assert all(abs(r - 1) > q.rel_tol for r in q.scale_hint)


@pytest.mark.parametrize("seed", ["seed-0", "seed-1", "seed-4", "seed-7"])
def test_q7_variant_names_the_leading_term_mistake(seed):
    q = lesson_variant("production", seed)["q7"]
    lead = q.check(100 * q.params["sigma"] * math.sqrt(2 * math.log(q.params["gpus"])))
    assert lead.status == INCORRECT and "leading term" in lead.message


# q5's cp is drawn: the chunk crossover c* does not depend on cp, so S* = cp x c*, computed through distlab.production
def test_every_q5_variant_is_cp_times_the_same_chunk():
    from distlab import production

    chunk = lesson.q5.expected() // lesson.CP
    for cp in lesson.q5.variants["cp"]:
        q = with_params(lesson.q5, cp=cp)
        want = production.ring_attention_step(lesson.CP_MODEL, 8192 * cp, cp, link=lesson.CP_FABRIC).crossover_seq_len
        assert q.expected() == want == cp * chunk and q.check(want).correct
        assert f"cp = {cp} across" in q.prompt and f"S = {cp} x c*" in q.explain() and f"seq, {cp}," in q.hint_text


@pytest.mark.parametrize("seed", ["seed-0", "seed-1", "seed-4", "seed-7"])
def test_q5_variant_refuses_the_per_gpu_chunk(seed):
    q = lesson_variant("production", seed)["q5"]
    result = q.check(q.expected() // q.params["cp"])  # c* per GPU instead of S = cp x c*
    assert result.status == INCORRECT and "too low" in result.message


# q2 and q3 draw the taper (one draw: "same cluster"); expectations through distlab.production
def _all_reduce(taper, rails=False, algorithm="hierarchical"):
    from distlab import dataparallel, hardware, production

    cluster = (
        hardware.cluster("dgx-h100", 4, "ib-ndr", taper, rails) if taper else hardware.cluster("dgx-h100", 4, "ib-ndr")
    )
    return production.dp_all_reduce(cluster, dataparallel.gradient_bytes(lesson.BUCKET_MODEL), algorithm=algorithm)


def test_every_taper_variant_follows_the_fabric_model():
    for taper in lesson.TAPER_VARIANTS["taper"]:
        q2, q3 = with_params(lesson.q2, taper=taper), with_params(lesson.q3, taper=taper)
        assert q2.expected() == pytest.approx(1e3 * _all_reduce(taper).time_s) and q2.check(q2.expected()).correct
        assert f"{taper}:1" in q2.prompt and f"'ib-ndr', {taper})" in q2.hint_text and q2.explain()
        slower_on_rails = _all_reduce(taper, True, "ring").time_s >= _all_reduce(taper, False, "ring").time_s
        assert q3.expected() == ("no" if slower_on_rails else "yes") and f"1/{taper} taper" in q3.explain()
        assert all(abs(r - 1) > q2.rel_tol for r in q2.scale_hint)


@pytest.mark.parametrize("seed", ["seed-0", "seed-4"])  # they draw tapers 2 and 4
def test_q2_variant_names_the_non_blocking_time(seed):
    qs = lesson_variant("production", seed)
    assert qs["q2"].params == qs["q3"].params
    taper = qs["q2"].params["taper"]
    result = qs["q2"].check(1e3 * _all_reduce(None).time_s)  # the time without the taper
    assert result.status == INCORRECT and f"the {taper}:1 taper leaves" in result.message


@pytest.mark.parametrize("name", ["q2", "q5", "q7"])
def test_every_variant_is_well_posed(name, assert_well_posed):
    assert_well_posed(lesson.QUESTIONS[name])
