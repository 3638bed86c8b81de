"""The question types (NumericQuestion, ChoiceQuestion): answers with or without units, 'not attempted',
'not yet, because ...', and parameters declared once. Lesson 1's q2 (112 GB) is the worked case."""

from __future__ import annotations

import doctest

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distlab.lessons import questions
from distlab.lessons.questions import (
    CORRECT,
    INCORRECT,
    NOT_ATTEMPTED,
    ChoiceQuestion,
    ChoicesQuestion,
    NumericQuestion,
    SequenceQuestion,
)
from distlab.lessons import memory_wall
from distlab.lessons.questions import with_params

# the answer reading is checked on the 7B case (7e9 x 16 B = 112 GB), which the lesson works; q2 itself asks 13B
q2 = with_params(memory_wall.q2, billions=7)


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


# SequenceQuestion (an ordered list of steps) and ChoiceQuestion's per-option feedback (issue 18)


SEQ = SequenceQuestion(
    name="s",
    params=dict(n=3),
    prompt="first {n} forwards?",
    expected=lambda n: [f"F{i}" for i in range(n)],
    explain=lambda n: "F0 F1 F2",
    hint_text="count to {n}",
    feedback=lambda n: {tuple(f"B{i}" for i in range(n)): "lists backwards"},
)


@pytest.mark.parametrize(
    "answer", [["F0", "F1", "F2"], ("f0", "F1", " F2 "), "F0 F1 F2", "['F0', 'F1', 'F2']", "F0,F1,F2"]
)
def test_a_sequence_is_read_from_a_list_a_tuple_or_text(answer):
    assert SEQ.check(answer).correct and SEQ.prompt == "first 3 forwards?" and SEQ.hint().text == "count to 3"


@pytest.mark.parametrize(
    "answer, words",
    [
        (["B0", "B1", "B2"], "lists backwards"),  # a known mistake, in its own words
        (["F0", "F2", "F1"], "goes wrong at step 2 (F2)"),
        (["F0"], "has 1 steps"),
        (3, "type int is not a list"),
        ([1.5], "type float is not a step"),
        ([True], "type bool is not a step"),
    ],
)
def test_a_wrong_sequence_says_why(answer, words):
    result = SEQ.check(answer)
    assert result.status == INCORRECT and result.message.startswith("not yet, because") and words in result.message


def test_choice_feedback_is_per_option_and_formatted_with_params():
    c = ChoiceQuestion(
        name="c",
        params=dict(n=8),
        prompt="N = {n}: a or b?",
        options=("a", "b", "c"),
        expected=lambda n: "a",
        explain=lambda n: "a",
        hint_text="h",
        feedback={"b": "counts {n} twice"},
    )
    assert "'b' counts 8 twice" in c.check("b").message and "'c' is not right" in c.check("c").message


_ITEM = st.one_of(st.text(max_size=8), st.integers(-5, 5), st.floats(allow_nan=True), st.booleans(), st.none())


@settings(max_examples=60, deadline=None)
@given(st.one_of(_ITEM, st.lists(_ITEM, max_size=6), st.tuples(_ITEM, _ITEM)))
def test_any_answer_gets_a_verdict_never_an_exception(answer):
    result = SEQ.check(answer)
    assert result.status in (CORRECT, INCORRECT, NOT_ATTEMPTED)
    if result.status == INCORRECT:
        assert result.message.startswith("not yet, because")
    if result.correct:  # only the three forwards, in order, as text or as a list or tuple of text
        items = answer.replace(",", " ").split() if isinstance(answer, str) else answer
        assert [str(x).strip().upper() for x in items] == ["F0", "F1", "F2"]


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


def test_a_yes_no_answer_to_a_question_without_yes_or_no_is_not_one_of_its_options():
    # True reads as "yes"; where "yes" is no option the student is told the options (no hint: the answer is not
    # an option at all), not that "yes" is a wrong option
    c = ChoiceQuestion(
        name="c", prompt="which?", options=("a", "b"), expected=lambda: "a", explain=lambda: "a", hint_text="h"
    )
    assert c.check(True).message == "not yet, because 'yes' is not one of: a, b"
    assert c.check("B").message == "not yet, because 'b' is not right. Hint: h"
    yes_no = ChoiceQuestion(
        name="y", prompt="?", options=("yes", "no"), expected=lambda: "no", explain=lambda: "no", hint_text="h"
    )
    assert yes_no.check(False).correct and yes_no.check(True).message == "not yet, because 'yes' is not right. Hint: h"


def test_a_hostile_string_answer_is_read_not_obeyed():
    # a str subclass whose methods raise: the empty-answer test and the reading use str's own methods
    class Hostile(str):
        def strip(self, *args):
            raise RuntimeError("boom")

        def lower(self):
            raise RuntimeError("boom")

    assert q2.check(Hostile("112 GB")).correct
    assert questions.is_unanswered(Hostile("   "))


# ChoicesQuestion: every option that holds, in any order (lesson 12's q7)

MANY = ChoicesQuestion(
    name="m",
    params=dict(n=4),
    prompt="which divide {n}?",
    options=("1", "2", "3", "4"),
    expected=lambda n: [str(d) for d in range(1, 5) if n % d == 0],
    explain=lambda n: "1, 2 and 4",
    hint_text="try each",
    feedback={"3": "leaves {n} mod 3 = 1", "2": "never shown: 2 divides 4"},
)


@pytest.mark.parametrize("answer", [["1", "2", "4"], ("4", " 2", "1 "), {"1", "2", "4"}, "4, 2, 1", "1 2 4 4"])
def test_a_set_of_options_is_read_in_any_order_and_form(answer):
    assert MANY.check(answer).correct and MANY.prompt == "which divide 4?"


@pytest.mark.parametrize(
    "answer, words",
    [
        (["1", "2", "3", "4"], "'3' leaves 4 mod 3 = 1"),  # a wrong option chosen: its own words
        (["1", "2"], "1 more of the options holds as well"),  # one left out: counted, not named
        (["1"], "2 more of the options hold as well"),
        ([], "none was chosen, and 3 of the options hold"),
        (["1", "5"], "'5' is not one of: 1, 2, 3, 4"),
        ([1, 2, 4], "an entry of type int is not one of"),
        (4, "type int is not a list of options"),
        ([["1"]], "an entry of type list"),
        ("x" * 5000, "5000 characters"),
    ],
)
def test_a_wrong_set_says_why_without_naming_the_missing(answer, words):
    result = MANY.check(answer)
    assert result.status == INCORRECT and result.message.startswith("not yet, because") and words in result.message
    if answer in (["1", "2"], ["1"]):
        assert "'4'" not in result.message


def test_a_set_question_with_nothing_to_choose():
    none = ChoicesQuestion(
        name="z", prompt="which?", options=("a", "b"), expected=lambda: [], explain=lambda: "none", hint_text="h"
    )
    assert none.check([]).correct and none.check("").status == NOT_ATTEMPTED
    assert "'a' does not hold" in none.check(["a"]).message
