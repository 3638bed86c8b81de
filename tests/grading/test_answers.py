"""The answers channel: parsed here, robust to anything; the real checks run here, in the grading process."""

from __future__ import annotations

import json

import pytest

from distlab.grading import answers, discover
from distlab.lessons.questions import CORRECT, INCORRECT, NOT_ATTEMPTED


def test_parse_answers_reads_only_between_the_nonce_markers():
    nonce = "abc123"
    payload = json.dumps(
        {
            "answer_q1": {"t": "int", "v": "16"},
            "answer_q2": {"t": "quantity", "magnitude": "112.0", "units": "gigabyte"},
        }
    )
    text = (
        f"noise DISTLAB-ANSWERS-BEGIN-forged{{}}DISTLAB-ANSWERS-END-forged\n"
        f"DISTLAB-ANSWERS-BEGIN-{nonce}{payload}DISTLAB-ANSWERS-END-{nonce}\n"
    )
    assert answers.parse_answers(text, nonce) == {"answer_q1": 16, "answer_q2": "112.0 gigabyte"}
    assert answers.parse_answers(text, "other") is None


@pytest.mark.parametrize(
    "garbage",
    [
        "",
        'DISTLAB-ANSWERS-BEGIN-n{"answer_q1": ',
        "DISTLAB-ANSWERS-BEGIN-n[1, 2]DISTLAB-ANSWERS-END-n",
        "DISTLAB-ANSWERS-BEGIN-n" + "[" * 100000 + "DISTLAB-ANSWERS-END-n",
    ],
)
def test_parse_answers_survives_garbage(garbage):
    assert answers.parse_answers(garbage, "n") is None


@pytest.mark.parametrize(
    "entry, check",
    [
        ({"t": "none"}, lambda v: v is None),
        ({"t": "bool", "v": True}, lambda v: v is True),
        ({"t": "float", "v": "nan"}, lambda v: v != v),
        ({"t": "int", "v": "12x"}, lambda v: isinstance(v, answers.OpaqueAnswer)),
        ({"t": "other", "type": "list"}, lambda v: type(v).__name__ == "list"),
        ({"t": "quantity", "magnitude": "evil", "units": "GB"}, lambda v: isinstance(v, answers.OpaqueAnswer)),
        (["not", "a", "dict"], lambda v: isinstance(v, answers.OpaqueAnswer)),
        (
            {"t": "seq", "kind": "tuple", "v": [{"t": "int", "v": "5"}, {"t": "seq", "kind": "list", "v": []}]},
            lambda v: v == (5, []),
        ),
        ({"t": "seq", "kind": "set", "v": [{"t": "seq", "kind": "list", "v": []}]}, lambda v: v == [[]]),  # unhashable
        ({"t": "dict", "v": [[{"t": "str", "v": "tp"}, {"t": "int", "v": "8"}]]}, lambda v: v == {"tp": 8}),
        (
            {"t": "ndarray", "dtype": "int64", "v": {"t": "seq", "kind": "list", "v": [{"t": "int", "v": "0"}]}},
            lambda v: v.ndim == 1 and v.tolist() == [0],
        ),
        (
            {"t": "ndarray", "dtype": "V99999999999", "v": {"t": "seq", "kind": "list", "v": []}},
            lambda v: isinstance(v, answers.OpaqueAnswer) or (v.size == 0 and v.dtype.kind == "f"),
        ),
    ],
)
def test_decode(entry, check):
    assert check(answers.decode(entry))


def test_checks_run_here_and_a_crashing_check_is_a_not_yet():
    results = answers.check_answers(
        discover.lesson_questions("memory_wall"),
        {"answer_q1": 16, "answer_q2": 10**400, "answer_q3": answers.opaque("list")},
    )
    by = {r.question: r for r in results}
    assert by["q1"].status == CORRECT and by["q1"].points == 1
    assert by["q2"].status == INCORRECT and by["q2"].feedback.startswith("not yet, because")
    assert "type list" in by["q3"].feedback
    assert by["q4"].status == NOT_ATTEMPTED


def test_an_expression_for_an_answer_is_refused_at_once():
    # pint evaluates '**': "9**9**9 GB" would compute a number of 370 million digits, forever (so this test
    # would hang, not pass, if the expression reached pint)
    result = answers.check_answers(
        discover.lesson_questions("memory_wall"), {"answer_q2": "9**9**9 GB", "answer_q1": "2^4"}
    )
    by = {q.question: q for q in result}
    assert by["q2"].status == by["q1"].status == INCORRECT
    assert "could not be read" in by["q2"].feedback
