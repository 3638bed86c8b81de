"""Lesson 7's graded questions: expected values derived by hand here, feedback for typical mistakes.

(tests/grading/test_build.py runs every exercise and solution notebook generically.)
"""

from __future__ import annotations


import pytest

from distlab import models, training
from distlab.lessons import training_lab as lesson
from distlab.lessons.questions import CORRECT, INCORRECT, NOT_ATTEMPTED, with_params
from distlab.lessons.variants import lesson_variant

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


# per-student variants (issue 15): q1 (batch, sequence), q2 (sequence), q3 (pipeline depth) draw their numbers.
# Expectations go through training.estimate (the step model may change; these tests follow it)
def _estimate(batch=lesson.BATCH, seq=lesson.SEQ, **config):
    return training.estimate(
        lesson.MODEL, lesson.NODE, nodes=lesson.NODES, fabric="ib-ndr", global_batch=batch, seq_len=seq, **config
    )


@pytest.mark.parametrize("name", ["q1", "q2", "q3", "q4", "q6"])
def test_every_variant_is_well_posed(name, assert_well_posed):
    assert_well_posed(lesson.QUESTIONS[name])


def test_every_variant_follows_the_step_model(every_variant):
    for q in every_variant(lesson.q1):
        b, s = q.params["batch"], q.params["seq"]
        assert q.expected() == pytest.approx(_estimate(b, s, **lesson.CONFIG).model_flops / 1e18)
        assert f"global batch {b} x {s} tokens" in q.prompt
    for q in every_variant(lesson.q2):
        assert q.expected() == pytest.approx(_estimate(seq=q.params["seq"], dp=256).memory.total_bytes / 1e9)
    for q in every_variant(lesson.q3):
        e = _estimate(**{**lesson.CONFIG, "pp": q.params["pp"]})
        assert q.expected() == pytest.approx(100 * e.bubble_s / (e.compute_s + e.tp_comm_s))
        assert f"pp = {q.params['pp']}," in q.prompt


@pytest.mark.parametrize("seed", ["seed-0", "seed-1", "seed-4", "seed-7"])
def test_wrong_answers_say_why_in_every_variant(seed):
    qs = lesson_variant("training_lab", seed)
    q1 = qs["q1"]
    tokens = q1.params["batch"] * q1.params["seq"]
    # the 6PT rule of thumb for this variant's tokens (it leaves attention out), computed here from the catalog
    six_pt = 6 * models.model(lesson.MODEL).parameter_count() * tokens / 1e18
    assert "leaves attention out" in q1.check(six_pt).message
    assert q1.expected() == pytest.approx(
        _estimate(q1.params["batch"], q1.params["seq"], **lesson.CONFIG).model_flops / 1e18
    )
    assert tokens == _estimate(q1.params["batch"], q1.params["seq"], **lesson.CONFIG).tokens_per_step
    q2 = qs["q2"]
    assert "replicates" in q2.check(q2.expected() / 256).message
    q3 = qs["q3"]
    p = q3.params["pp"]
    m = _estimate(**{**lesson.CONFIG, "pp": p}).microbatches
    assert "idle share" in q3.check(100 * (p - 1) / (m + p - 1)).message  # (p-1)/(m+p-1) instead of the added time


def test_q3_q4_q6_share_one_feasible_configuration_in_every_variant():
    for pp in lesson.PP_VARIANTS:
        e = _estimate(**{**lesson.CONFIG, "pp": pp})
        assert e.feasible  # the questions assume the configuration runs
        q4, q6 = with_params(lesson.q4, pp=pp), with_params(lesson.q6, pp=pp)
        assert q4.expected() == pytest.approx(100 * e.mfu) and q6.expected() == pytest.approx(e.tokens_per_s / 1e3)
        assert f"pp = {pp}," in q4.prompt and q4.explain() and q6.explain()
    for seed in ("seed-1", "seed-7", "seed-3"):
        qs = lesson_variant("training_lab", seed)
        assert qs["q3"].params == qs["q4"].params == qs["q6"].params  # "the configuration of q4"


@pytest.mark.parametrize("seed", ["seed-0", "seed-1", "seed-4", "seed-7"])
def test_q6_variant_names_the_usual_mistakes(seed):
    q6 = lesson_variant("training_lab", seed)["q6"]
    e = _estimate(**{**lesson.CONFIG, "pp": q6.params["pp"]})
    assert "tokens per second" in q6.check(e.tokens_per_s).message  # tokens/s instead of thousands
    assert "samples per second" in q6.check(e.tokens_per_s / lesson.SEQ / 1e3).message
