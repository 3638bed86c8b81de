"""Lesson 10's graded questions: expected values derived by hand here, feedback for typical mistakes."""

from __future__ import annotations

import pytest

from distlab.lessons import mixture_of_experts as lesson
from distlab.lessons.questions import CORRECT, INCORRECT, NOT_ATTEMPTED

# DeepSeek-V3 routed experts 58 x 256 x 44,040,192 = 653,894,770,688; the rest 17,131,648,512 (test_moe_catalog).
EXPERTS, DENSE = 653_894_770_688, 671_026_419_200 - 653_894_770_688


def deepseek_states_gb(ep, gpus=2048, pp=16):
    """ZeRO-1, 2 + 2 bytes replicated per shard, 12 bytes sharded over the data-parallel group of each part."""
    dense = DENSE / pp * (2 + 2 + 12 / (gpus // pp))
    experts = EXPERTS / (ep * pp) * (2 + 2 + 12 / (gpus // (ep * pp)))
    return (dense + experts) / 1e9


HAND = [
    # ep 4: 49.1 GB > 40; ep 8: 28.6 GB <= 40
    (lesson.q1, 8),
    # GPU loads (1900+500, 700+900, 1200+800, 600+1400) = (2400, 1600, 2000, 2000): x 2400/2000 of 10 ms
    (lesson.q2, 12.0),
    # etp x ep <= 8 GPUs of a node with etp = 2
    (lesson.q3, 4),
    # 4 all-to-alls x 8192 x 8 x 7168 x 2 B x 56/64, in GB
    (lesson.q4, 4 * 8192 * 8 * 7168 * 2 * 56 / 64 / 1e9),
    # ceil(1.25 x 4096 x 2 / 8)
    (lesson.q5, 1280),
    # 6 x 36,625,618,432 x 14.8e12 / (2.664e6 h x 3600 s x 989.4e12 FLOP/s), in percent
    (lesson.q6, 100 * 6 * 36_625_618_432 * 14.8e12 / (2.664e6 * 3600 * 989.4e12)),
]


def test_memory_figures_of_q1_by_hand():
    assert deepseek_states_gb(4) > 40 >= deepseek_states_gb(8)
    assert round(deepseek_states_gb(8), 1) == 28.6


@pytest.mark.parametrize("question, value", HAND, ids=[q.name for q, _ in HAND])
def test_expected_values_match_the_hand_derivation(question, value):
    assert question.expected() == pytest.approx(value, rel=1e-9)
    assert question.check(value).status == CORRECT
    assert question.check(None).status == NOT_ATTEMPTED
    assert question.hint().text and question.solution().text


def test_all_questions_are_listed():
    assert list(lesson.QUESTIONS) == ["q1", "q2", "q3", "q4", "q5", "q6"]


@pytest.mark.parametrize("question", list(lesson.QUESTIONS.values()), ids=list(lesson.QUESTIONS))
def test_every_variant_is_well_posed(question, assert_well_posed):
    assert_well_posed(question)


@pytest.mark.parametrize(
    "question, answer, words",
    [
        (lesson.q1, 4, "over the 40 GB budget"),
        (lesson.q1, 16, "the question asks for the smallest"),
        (lesson.q1, 64, "too high"),
        (lesson.q2, 19.0, "busiest EXPERT"),
        (lesson.q2, 10 / 1.2, "divides by the imbalance"),
        (lesson.q3, 8, "expert-TP ranks sit between EP neighbours"),
        (lesson.q4, 8192 * 8 * 7168 * 2 * 56 / 64 / 1e9, "is one all-to-all"),
        (lesson.q4, 2 * 8192 * 8 * 7168 * 2 * 56 / 64 / 1e9, "counts the forward only"),
        (lesson.q4, 4 * 8192 * 7168 * 2 * 56 / 64 / 1e9, "top-8 experts"),
        (lesson.q4, 4 * 8192 * 8 * 7168 * 2 * 63 / 64 / 1e9, "share the node"),
        (lesson.q4, 4 * 8192 * 8 * 7168 * 2 * 56 / 64, "looks like bytes"),
        (lesson.q5, 640, "counts tokens, not copies"),
        (lesson.q5, 1024, "the capacity factor adds the slack"),
        (lesson.q5, 10240, "divide them among the experts"),
        (lesson.q6, 0.343, "looks like a fraction"),
        (lesson.q6, 34.28 * 671_026_419_200 / 36_625_618_432, "counts all 671B parameters"),
        (lesson.q6, 34.28 / 3, "forward pass only"),
    ],
)
def test_typical_mistakes_get_specific_feedback(question, answer, words):
    result = question.check(answer)
    assert result.status == INCORRECT and result.message.startswith("not yet, because") and words in result.message


def test_solution_notebook_answers_every_question(answered_in_solution):
    assert answered_in_solution("10_mixture_of_experts.ipynb") == list(lesson.QUESTIONS)


def test_q6_explanation_prices_attention_and_names_fp8():
    # lesson 10 §1 (moe_step_flops at 4K): DeepSeek-V3 computes 281.2 GFLOP per token against 6 x 36.63e9 = 219.8:
    # 1.28x, so attention adds about 0.28 x 34.3 % = 10 points, not "a few"; and its GEMMs ran mostly in FP8
    text = str(lesson.q6.solution())
    assert "1.28 x 6N" in text and "about 10 points" in text and "FP8" in text
