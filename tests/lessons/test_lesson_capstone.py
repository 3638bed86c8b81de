"""Lesson 12's graded questions (the capstone): expected values derived by hand here from the scenario's published
figures, the correct path and the feedback for the typical mistakes of each (tests/grading runs every exercise and
solution notebook generically)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distlab.lessons import capstone as lesson
from distlab.lessons.questions import CORRECT, INCORRECT, NOT_ATTEMPTED

# Llama-3.1-70B by hand (Llama Team 2024, Table 3; HF config.json): 80 layers, h = 8192, FFN 28672, 8 K/V heads of
# 128. Per layer: Q and O 2 x 8192^2 + K and V 2 x 8192 x 1024 = 150,994,944; gated MLP 3 x 8192 x 28672 =
# 704,643,072; two RMSNorms 16,384: 855,654,400; x 80 = 68,452,352,000; embedding and output (untied)
# 2 x 128256 x 8192 = 2,101,346,304; final norm 8,192. Total 70,553,706,496.
PARAMS = 80 * (2 * 8192**2 + 2 * 8192 * 1024 + 3 * 8192 * 28672 + 2 * 8192) + 2 * 128256 * 8192 + 8192
SECONDS = 50 * 86400  # the budget
TOKENS_PER_STEP = 512 * 8192
GPUS = 32 * 8
H100_BF16 = 989.4e12  # dense; NVIDIA's 1,979 TFLOP/s is with 2:4 sparsity


FOLLOW_UP_SECONDS = 60 * 86400  # q1 and q2: a follow-up run of 2e12 tokens in 60 days (the lesson works 1e12 in 50)


def test_q1_throughput_the_budget_demands(expect_hand_value):
    want = 2e12 / FOLLOW_UP_SECONDS  # 385,802.47 tokens/s (the lesson's 1e12 / 50 days: 231,481.48)
    expect_hand_value(lesson.q1, want)
    assert "per GPU" in lesson.q1.check(want / GPUS).message
    assert "sequences" in lesson.q1.check(want / 8192).message
    assert "24 hours" in lesson.q1.check(want * 24).message


def test_q2_share_of_peak_by_6nd(expect_hand_value):
    assert PARAMS == 70_553_706_496
    want = 100 * 6 * PARAMS * 2e12 / (GPUS * H100_BF16 * FOLLOW_UP_SECONDS)  # 64.48 % (the lesson's: 38.69 %)
    expect_hand_value(lesson.q2, want)
    assert "8 N D" in lesson.q2.check(want * 8 / 6).message
    assert "sparsity" in lesson.q2.check(want / 2).message
    assert lesson.q2.check(want * 1.2).status == INCORRECT


def test_q3_any_layout_within_budget_is_correct():
    assert lesson.q3.check(lesson.q3.expected()).status == CORRECT
    # a different correct layout: the planner's kind, tp 4 with context parallelism 2, no recomputation
    other = {"tp": 4, "cp": 2, "pp": 4, "schedule": "interleaved", "chunks": 10, "recompute": "none"}
    assert lesson.q3.check(other).status == CORRECT
    assert lesson.q3.check(dict(other, zero=1.0)).status == CORRECT  # ZeRO-1 may be written out


@pytest.mark.parametrize(
    "answer, words",
    [
        (lesson.LAYOUT_A, "over the 50-day budget"),  # fits, 54 days
        ({"tp": 1}, "does not fit"),  # pure DP: 606 GB per GPU
        ({"tp": 3}, "not valid"),  # 3 does not divide 256
        ({"tp": 8, "pp": 4, "zero": 3}, "ZeRO-1"),  # the distributed optimizer is ZeRO-1
        ({"tp": 8, "layers": 4}, "not a layout setting"),
        ({"tp": 8.5}, "whole number"),
        ({"sequence_parallel": "yes"}, "True or False"),
        ([8, 4], "not a layout"),
        ("tp=8", "not a layout"),
    ],
)
def test_q3_wrong_layouts_are_told_what_they_miss(answer, words):
    result = lesson.q3.check(answer)
    assert result.status == INCORRECT and words in result.message, result.message


def test_q4_days_of_layout_b(expect_hand_value):
    # layout B: layout A (which the lesson works) with two sequences per microbatch
    assert lesson.LAYOUT_B == dict(lesson.LAYOUT_A, micro_batch_size=2)
    step = lesson.scenario_estimate(lesson.LAYOUT_B)
    want = 1e12 / (TOKENS_PER_STEP / step.step_time_s) / 86400  # 54.0 days
    expect_hand_value(lesson.q4, want)
    assert 50 < want < 60  # misses the budget: the premise of Q6-Q7
    assert lesson.q4.check(f"{want * 24} h").status == CORRECT
    assert "hours, not days" in lesson.q4.check(want * 24).message
    # 6ND at B's MFU: 6 N x tokens / (GPUs x MFU x peak), short by the attention and logits share
    six_nd = 6 * PARAMS * 1e12 / (GPUS * step.mfu * H100_BF16) / 86400
    assert six_nd < want
    assert "6ND" in lesson.q4.check(six_nd).message


def test_q5_cost_of_layout_b(expect_hand_value):
    days = lesson.q4.expected()
    want = GPUS * days * 24 * 2.0 / 1e3  # thousand $ at the stated 2 $ per GPU-hour: about 663
    expect_hand_value(lesson.q5, want)
    assert "node-hours" in lesson.q5.check(want / 8).message
    assert "one GPU" in lesson.q5.check(want / GPUS).message
    assert "days, not hours" in lesson.q5.check(want / 24).message


def test_q6_tp_share_of_layout_b(expect_hand_value):
    step = lesson.scenario_estimate(lesson.LAYOUT_B)
    assert sum(step.parts().values()) == pytest.approx(step.step_time_s)  # the parts make up the step
    want = 100 * step.tp_comm_s / step.step_time_s
    expect_hand_value(lesson.q6, want)
    assert want > 100 * step.bubble_s / step.step_time_s  # TP, not the bubble, is B's largest non-compute part
    assert "compute time" in lesson.q6.check(100 * step.tp_comm_s / step.compute_s).message


def test_q7_only_halving_tp_gains_more_than_the_error_band():
    # issue 31: "within 50 days" graded 47.4 against 50.5 days, a difference inside the model's 7.7 % band. Now: the
    # change whose run is shorter than layout A's by more than the band
    from distlab import planner

    a = lesson._budget(lesson.LAYOUT_A).days
    band = planner.error_band_percent() / 100
    gains = {name: 1 - lesson._change_days(name) / a for name in lesson.CHANGES}
    assert [name for name, g in gains.items() if g > band] == ["tp4-pp8-interleaved"]
    assert 0 < gains["interleave"] < band  # the gain the band blurs
    assert lesson.q7.expected() == "tp4-pp8-interleaved"
    assert lesson.q7.check("TP4-PP8-Interleaved ").status == CORRECT
    for option, words in (
        ("interleave", "smaller than the model's error band"),
        ("deeper-pipeline", "more stages"),
        ("full-recompute", "spending time"),
    ):
        result = lesson.q7.check(option)
        assert result.status == INCORRECT and words in result.message and "days" in result.message
    assert "not one of" in lesson.q7.check("more-gpus").message


def test_q8_a_defence_is_graded_on_its_numbers():
    plan = lesson.q8.expected()
    assert lesson.q8.check(plan).status == CORRECT
    step = lesson.scenario_estimate(plan["layout"])
    days = 1e12 / (TOKENS_PER_STEP / step.step_time_s) / 86400
    assert plan["days"] == pytest.approx(days) and plan["cost_usd"] == pytest.approx(GPUS * days * 24 * 2.0)
    assert plan["memory_gb"] == pytest.approx(step.memory.total_bytes / 1e9)
    low = lesson.q8.check(dict(plan, days=days * 0.9))
    assert low.status == INCORRECT and "days to train stated" in low.message and "too low" in low.message
    assert "too high" in lesson.q8.check(dict(plan, cost_usd=plan["cost_usd"] * 8)).message
    assert "memory per GPU" in lesson.q8.check(dict(plan, memory_gb=80)).message
    slow = lesson.q8.check(dict(plan, layout=lesson.LAYOUT_A))
    assert "over the 50-day budget" in slow.message
    assert "states no cost_usd" in lesson.q8.check({"layout": plan["layout"], "days": 1, "memory_gb": 1}).message
    assert "not a number" in lesson.q8.check(dict(plan, days="many")).message
    assert "not a defended plan" in lesson.q8.check(plan["layout"]).message


def test_numeric_questions_are_well_posed(assert_well_posed):
    for q in (lesson.q1, lesson.q2, lesson.q4, lesson.q5, lesson.q6):
        assert_well_posed(q)


def test_hints_do_not_name_the_function():
    names = ("estimate(", "budget.", "training.", "required_", "days_to_train", "scenario_estimate", "(")
    for q in lesson.QUESTIONS.values():
        assert not any(name in q.hint_text for name in names), (q.name, q.hint_text)


def test_every_question_starts_unanswered():
    assert all(q.check(None).status == NOT_ATTEMPTED for q in lesson.QUESTIONS.values())
    assert list(lesson.QUESTIONS) == [f"q{i}" for i in range(1, 9)]


_VALUE = st.one_of(
    st.integers(-4, 300),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["1f1b", "interleaved", "gpipe", "none", "selective", "full", "x", ""]),
    st.booleans(),
    st.none(),
)
_LAYOUT = st.dictionaries(st.sampled_from(lesson.LAYOUT_KEYS + ("zero", "dp")), _VALUE, max_size=5)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_LAYOUT, st.floats(allow_nan=True, allow_infinity=True))
def test_any_layout_or_plan_gets_a_verdict_in_words(layout, number):
    # every answer is graded: correct, or "not yet, because ..." (never an exception, never an empty reason)
    for q, answer in (
        (lesson.q3, layout),
        (lesson.q8, {"layout": layout, **dict.fromkeys(lesson.DEFENCE_KEYS, number)}),
    ):
        result = q.check(answer)
        assert result.status in (CORRECT, INCORRECT)
        assert result.status == CORRECT or result.message.startswith("not yet, because ") and len(result.message) > 20
        if result.status == CORRECT:  # a correct layout meets all three limits, by the step model's own numbers
            step = lesson.scenario_estimate(lesson.read_layout(layout))
            assert step.feasible and 1e12 / step.tokens_per_s / 86400 <= lesson.BUDGET_DAYS
