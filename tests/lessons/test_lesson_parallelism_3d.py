"""The graded questions of lesson 6: expected values computed by distlab agree with hand derivations and
published figures; the list-answer check says what is wrong."""

from __future__ import annotations

import numpy as np
import pytest

from distlab.lessons.questions import CORRECT, INCORRECT, NOT_ATTEMPTED, with_params
from distlab.lessons.variants import lesson_variant
from distlab.lessons import parallelism_3d as p3


def test_lesson_6_expected_values_by_hand():
    assert p3.q1.expected() == 1024  # 8 x 4 x 32 (MIT 6.5940's quiz asks 4 x 4 x 16 = 256, which the lesson works)
    assert p3.q2.expected() == [5, 7] and p3.q3.expected() == [2, 6, 10, 14]  # Megatron-LM docstring
    # q4: the lesson's 530B example with D = 42: 530e9 / 96 x (2 + 2 + 12/42) B = 23.66 GB (D = 21 gives 25.24 GB)
    assert p3.q4.expected() == pytest.approx(530e9 / 96 * (4 + 12 / 42) / 1e9)
    assert round(p3.q4.expected(), 2) == 23.66
    assert p3.q5.expected() == "inter-node"
    assert p3.q6.expected() == [4, 2, 2]


@pytest.mark.parametrize(
    "answer", [[5, 7], [7, 5], (5, 7), {5, 7}, range(5, 8, 2), np.array([5, 7]), "5, 7", "[7, 5]", [5.0, 7.0]]
)
def test_group_answers_in_any_form(answer):
    assert p3.q2.check(answer).status == CORRECT


@pytest.mark.parametrize(
    "answer, words",
    [
        ([5, 6], "leaves out 7 and includes 6 which does not belong"),
        ([5, 7, 9], "includes 9 which does not belong"),
        ([5, 5, 7], "names a GPU more than once"),
        (5, "is one number"),
        ("five and seven", "could not be read"),
        ([5.5, 7], "is not a whole number"),
        ([True, 7], "yes/no value"),
        (np.array([[5, 7]]), "give a flat list"),
        ({"a": 1}, "type dict"),
    ],
)
def test_group_answers_not_yet_because(answer, words):
    result = p3.q2.check(answer)
    assert result.status == INCORRECT and result.message.startswith("not yet, because") and words in result.message


def test_ordered_shape_question():
    assert p3.q6.check([4, 2, 2]).correct and p3.q6.check("(4, 2, 2)").correct
    assert "wrong order" in p3.q6.check([2, 2, 4]).message
    assert "right product (16) but not the right sizes" in p3.q6.check([8, 2]).message
    assert "multiplies to 8, not 16" in p3.q6.check([2, 2, 2]).message
    assert "a set has no order" in p3.q6.check({4, 2}).message
    assert p3.q6.check("").status == NOT_ATTEMPTED


def test_six_to_eight_questions():
    # each one has a prompt, hint and solution and starts unanswered: tests/lessons/test_manifest.py
    assert 6 <= len(p3.QUESTIONS) <= 8


# per-student variants (issue 15): q1's T, P, D are drawn; the rank-list questions (RanksQuestion) and the
# reference checks (q4: the lecture's 530B example) keep their numbers
def test_every_q1_variant_is_the_product_of_its_degrees():
    import itertools

    names = sorted(p3.q1.variants)
    for values in itertools.product(*(p3.q1.variants[n] for n in names)):
        q = with_params(p3.q1, **dict(zip(names, values)))
        t, p, d = q.params["tp"], q.params["pp"], q.params["dp"]
        assert q.expected() == t * p * d and q.check(t * p * d).correct
        assert f"T={t} (tensor), P={p} (pipeline) and D={d}" in q.prompt
        assert f"{d} x {t} x {p} = {t * p * d}; there are {p} pipeline stages" in q.explain()


@pytest.mark.parametrize("seed", ["seed-0", "seed-1", "seed-4", "seed-7"])
def test_q1_variant_wrong_answers(seed):
    q = lesson_variant("parallelism_3d", seed)["q1"]
    t, p, d = q.params["tp"], q.params["pp"], q.params["dp"]
    assert q.check(t + p + d).status == INCORRECT and "too low" in q.check(t + p + d).message
    assert "too high" in q.check(t * p * d + 1).message  # rel_tol 0: a GPU count is exact


# q2 and q3 ask about a drawn GPU of Megatron's 16-GPU example: tp + 2 dp + 4 pp, derived here by hand
def _by_hand(rank):
    return rank % 2, rank // 2 % 2, rank // 4  # tp, dp, pp


def test_every_q2_q3_variant_is_the_group_derived_by_hand():
    for rank in p3.q2.variants["rank"]:
        q = with_params(p3.q2, rank=rank)
        tp, dp, pp = _by_hand(rank)
        want = [tp + 2 * d + 4 * pp for d in range(2)]
        assert q.expected() == want and q.check(want).correct and f"GPU {rank}?" in q.prompt
        assert f"GPU {rank} = {tp} + 2 x {dp} + 4 x {pp}" in q.explain() and f"write {rank} as" in q.hint_text
    for rank in p3.q3.variants["rank"]:
        q = with_params(p3.q3, rank=rank)
        tp, dp, _ = _by_hand(rank)
        want = [tp + 2 * dp + 4 * p for p in range(4)]
        assert q.expected() == want and q.check(want).correct
        assert f"GPU {rank} has tp rank {tp}, dp rank {dp}" in q.explain()


@pytest.mark.parametrize("seed", ["seed-0", "seed-1", "seed-4", "seed-7"])
def test_q2_q3_variants_name_the_wrong_ranks(seed):
    qs = lesson_variant("parallelism_3d", seed)
    rank = qs["q2"].params["rank"]
    tp_group = [rank - rank % 2, rank - rank % 2 + 1]  # the TP group instead of the DP group
    result = qs["q2"].check(tp_group)
    assert result.status == INCORRECT and "does not belong" in result.message and "leaves out" in result.message
    q3 = qs["q3"]
    result = q3.check(q3.expected()[:-1])
    assert result.status == INCORRECT and f"leaves out {q3.expected()[-1]}" in result.message


def test_every_q1_variant_is_well_posed(assert_well_posed):
    assert_well_posed(p3.q1)


# The lecture's quiz 8 (MIT 6.5940 ch. 8): 13B on 64 A100s, ZeRO-3, P = 4, no TP, model states only.
def test_q7_quiz_8_by_hand(expect_hand_value):
    # a stage holds 13e9 / 4 = 3.25e9 parameters; D = 64 / 4 = 16 GPUs share it; ZeRO-3 splits all 16 bytes over them:
    # 16 x 3.25e9 / 16 = 3.25e9 B = 3.25 GB (= 16 Psi / N with N = 64, the lecture's number)
    expect_hand_value(p3.q7, 16 * 13e9 / 4 / 16 / 1e9)
    assert p3.q7.expected() == pytest.approx(3.25)
    # a whole stage's 16 bytes, not sharded by ZeRO-3: 16 x 3.25e9 = 52 GB
    assert "ZeRO-3 also splits them" in p3.q7.check(52).message
    # the whole model over the 16 data-parallel GPUs only: 16 x 13e9 / 16 = 13 GB
    assert "the pipeline splits it first" in p3.q7.check(13).message


def test_every_q7_variant_is_16_psi_over_all_gpus(every_variant, assert_well_posed):
    for q in every_variant(p3.q7):
        b, pp = q.params["billions"], q.params["pp"]
        # ZeRO-3 over D = 64 / pp, pipeline over pp: 16 x (b e9 / pp) / (64 / pp) = 16 b e9 / 64, whatever pp
        assert q.expected() == pytest.approx(16 * b * 1e9 / 64 / 1e9) and f"{b}B-parameter" in q.prompt
        assert f"P = {pp}," in q.prompt and f"D = 64 / {pp} = {64 // pp}" in q.explain()
    assert_well_posed(p3.q7)


# The lecture's quiz 9: 7B on 8 A100s, the least sharding that leaves 10 GB for activations.
def test_q8_quiz_9_least_sharding():
    # plain DP: 16 x 7e9 = 112 GB > 70 GB; ZeRO-1: (2 + 2 + 12/8) x 7e9 = 38.5 GB <= 70 GB: the first that fits
    assert 16 * 7e9 > 70e9 >= (2 + 2 + 12 / 8) * 7e9
    assert p3.q8.expected() == "zero-1" and p3.q8.check("ZeRO-1").status == CORRECT
    assert "112 GB" in p3.q8.check("plain dp").message
    # every wrong option has its own words (its misconception), and none of them is the generic "is not right"
    messages = {o: p3.q8.check(o).message for o in p3.q8.options if o != "zero-1"}
    assert len(set(messages.values())) == len(messages)
    assert not any("is not right" in m for m in messages.values())
    assert "ZeRO-1 already" in messages["zero-3"] and "four all-reduces" in messages["tp 8"]
