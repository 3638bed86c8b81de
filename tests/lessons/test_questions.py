"""The question types (NumericQuestion, ChoiceQuestion): answers with or without units, 'not attempted',
'not yet, because ...', and parameters declared once. Lesson 1's q2 (112 GB) is the worked case."""

from __future__ import annotations

import doctest

import pytest

from distlab.lessons import questions
from distlab.lessons.questions import CORRECT, INCORRECT, NOT_ATTEMPTED, ChoiceQuestion, NumericQuestion
from distlab.lessons import memory_wall

q2 = memory_wall.q2


@pytest.mark.parametrize("answer", [112, 112.0, "112", "112 GB", "112e9 B", "0.112 TB", "104.3 GiB", 112.5])
def test_numbers_accepted_with_or_without_units(answer):
    # 112 GB = 112e9 B = 104.31 GiB; 112.5 is within the 1% tolerance
    assert q2.check(answer).status == CORRECT


@pytest.mark.parametrize("answer", [None, ..., "", "   "])
def test_not_attempted(answer):
    result = q2.check(answer)
    assert result.status == NOT_ATTEMPTED and result.points == 0


@pytest.mark.parametrize(
    "answer, words",
    [
        (56, "too low"),
        (224, "too high"),
        (112e9, "looks like bytes"),
        ("112 GB/s", "not an amount of memory"),
        ("lots", "could not be read"),
        (True, "yes/no"),
        ([112], "type list"),
        (float("nan"), "finite"),
    ],
)
def test_not_yet_because(answer, words):
    result = q2.check(answer)
    assert result.status == INCORRECT and result.message.startswith("not yet, because") and words in result.message


def test_huge_integer_answer_is_not_yet_not_an_exception():
    result = q2.check(10**400)
    assert result.status == INCORRECT and "too large" in result.message


def test_params_are_declared_once_for_prompt_check_and_explanation():
    calls = []

    def expected(p, m):
        calls.append((p, m))
        return 100 * (p - 1) / (m + p - 1)

    q = NumericQuestion(
        name="q",
        params=dict(p=4, m=8),
        prompt="p = {p}, m = {m}?",
        expected=expected,
        explain=lambda p, m: f"{p - 1}/{m + p - 1}",
        hint_text="m + p - 1 = {m} + {p} - 1 slots",
        unit="%",
        scale_hint=lambda p, m: {(p - 1) / m / ((p - 1) / (m + p - 1)): "the time added"},
    )
    assert q.prompt == "p = 4, m = 8?" and q.hint().text == "m + p - 1 = 8 + 4 - 1 slots"
    assert q.solution().text == "3/11" and q.check(100 * 3 / 11).correct and calls[-1] == (4, 8)
    assert "the time added" in q.check(37.5).message
    c = ChoiceQuestion(
        name="c",
        params=dict(n=8),
        prompt="N = {n}?",
        options=("yes", "no"),
        expected=lambda n: "no",
        explain=lambda n: f"N = {n}",
        hint_text="h",
    )
    assert c.prompt == "N = 8?" and c.check("no").correct and c.solution().text == "N = 8"


def test_without_params_a_question_is_left_as_written():
    q = NumericQuestion(name="q", prompt="a {brace}", expected=lambda: 1.0, explain=lambda: "x", hint_text="{h}")
    assert q.prompt == "a {brace}" and q.hint().text == "{h}" and q.check(1).correct


def test_the_module_docstring_example_runs():
    assert doctest.testmod(questions).failed == 0


def test_a_wrong_option_gets_the_feedback_of_its_misconception():
    # each wrong option may carry its own words (formatted with params); others get the generic answer
    c = ChoiceQuestion(
        name="c",
        params=dict(n=8),
        prompt="{n} GPUs, plain DP: does memory per GPU drop? (yes/no/halves)",
        options=("yes", "no", "halves"),
        expected=lambda n: "no",
        explain=lambda n: "every GPU keeps a replica",
        hint_text="what does each GPU hold?",
        feedback={"yes": "assumes the {n} GPUs share the model; plain DP replicates it"},
    )
    assert c.check("No").status == CORRECT
    wrong = c.check("yes")
    assert wrong.status == INCORRECT and "'yes' assumes the 8 GPUs share the model" in wrong.message
    assert wrong.message.endswith("Hint: what does each GPU hold?")
    assert "'halves' is not right" in c.check("halves").message
