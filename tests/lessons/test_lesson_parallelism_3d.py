"""The graded questions of lesson 6: expected values computed by distlab agree with hand derivations and
published figures; the list-answer check says what is wrong."""

from __future__ import annotations

import numpy as np
import pytest

from distlab.lessons.questions import CORRECT, INCORRECT, NOT_ATTEMPTED, with_params
from distlab.lessons.variants import lesson_variant
from distlab.lessons import parallelism_3d as p3


def test_lesson_6_expected_values_by_hand():
    assert p3.q1.expected() == 256  # 16 x 4 x 4 (MIT 6.5940 quiz)
    assert p3.q2.expected() == [5, 7] and p3.q3.expected() == [2, 6, 10, 14]  # Megatron-LM docstring
    # q4: 530e9 / 96 x (2 + 2 + 12/21) B; the lecture rounds it to "about 25 GB"
    assert p3.q4.expected() == pytest.approx(530e9 / 96 * (4 + 12 / 21) / 1e9)
    assert round(p3.q4.expected()) == 25
    assert p3.q5.expected() == "inter-node"
    assert p3.q6.expected() == [4, 2, 2]


@pytest.mark.parametrize("answer", [[5, 7], [7, 5], (5, 7), {5, 7}, range(5, 8, 2), np.array([5, 7]), "5, 7",
                                    "[7, 5]", [5.0, 7.0]])
def test_group_answers_in_any_form(answer):
    assert p3.q2.check(answer).status == CORRECT


@pytest.mark.parametrize("answer, words", [
    ([5, 6], "leaves out 7 and includes 6 which does not belong"),
    ([5, 7, 9], "includes 9 which does not belong"),
    ([5, 5, 7], "names a GPU more than once"),
    (5, "is one number"),
    ("five and seven", "could not be read"),
    ([5.5, 7], "is not a whole number"),
    ([True, 7], "yes/no value"),
    (np.array([[5, 7]]), "give a flat list"),
    ({"a": 1}, "type dict"),
])
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


def test_four_to_six_questions():
    # each one has a prompt, hint and solution and starts unanswered: tests/lessons/test_manifest.py
    assert 4 <= len(p3.QUESTIONS) <= 6


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


@pytest.mark.parametrize("seed", ["seed-1", "seed-7"])
def test_q1_variant_wrong_answers(seed):
    q = lesson_variant("parallelism_3d", seed)["q1"]
    t, p, d = q.params["tp"], q.params["pp"], q.params["dp"]
    assert q.check(t + p + d).status == INCORRECT and "too low" in q.check(t + p + d).message
    assert "too high" in q.check(t * p * d + 1).message  # rel_tol 0: a GPU count is exact
