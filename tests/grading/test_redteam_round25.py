"""Red team round 25: the answers themselves (values whose type or form might pass a check they do not equal) and
partial credit (points for a question not attempted, and whether the report says each outcome truthfully). Each
test keeps the attack and what must hold. Every attack of this round held: no product change was needed.

01-hostile-values-every-question (held): every question of every graded lesson is checked, as the grader checks
it (decode of the kernel's JSON, then question.check), with values that are not its answer: NaN, -NaN, +-inf,
1e400, "nan %", "inf GB", "1e999 GB", a quantity of NaN GB, "1 GB * nan", "0 dB", "1 neper", Arabic-Indic digits,
a 4,000-digit int, bools, empty sets and dicts, complex and bool arrays, the right number wrapped in a list, a
tuple, a 0-d or 1-d array, the right option wrapped in a list / tuple / dict / array or doubled or NUL-suffixed,
a sequence reversed, cut short, lengthened, nested, as a set or a dict of positions. None is "correct" and no
check raises; the same for each per-student variant choice of a question's params.
02-decode-numbers (held): the answer decoder never turns a number's text into something a check reads as another
number: "nan"/"inf"/"1e400" floats are refused as not finite, a 5,000-digit int is opaque (not a crash), a 0-d
array, a bool and a list holding the answer are not a number.
03-capstone-odd-layouts (held): a layout that meets the brief, with one setting set to a value the step model
should refuse (3 or 2**20 GPUs in a dimension, an unknown schedule or recomputation, a float 8.5, a NaN, a bool
for a count, a string for sequence_parallel), is never "correct".
04-answers-for-other-names (held): answers the kernel reports under names that are not a question's (answer_Q1,
a fullwidth or Cyrillic look-alike, answer_q1 with a trailing space, answer_q99) give no points and no extra row:
each question of the lesson gets exactly one row, and one with no answer is "not attempted" with 0 points.
05-partial-credit-in-the-kernel (held, bubblewrap): an answer assigned then deleted is not attempted; an answer set
in a cell that then raises is the value it holds (the student's own, never more); a later cell that rebinds it to
an Ellipsis makes it not attempted; a cell run twice changes nothing but the value.
06-report-truthful (held): check_answers' rows say "correct" only with full points, anything else with 0, and a
check that raises is "incorrect" with 0 points and the reason, never the points.
"""

from __future__ import annotations

import math

import pytest

from distlab import lessons
from distlab.grading.answers import ANSWER_PREFIX, OpaqueAnswer, check_answers, decode, decode_answers
from distlab.lessons import capstone
from distlab.lessons.questions import (
    CORRECT,
    INCORRECT,
    NOT_ATTEMPTED,
    ChoiceQuestion,
    ChoicesQuestion,
    NumericQuestion,
    with_params,
)
from test_redteam_default_round2 import needs_bwrap, run_bwrap


def _enc(v):
    """The kernel's JSON encoding of a plain value (kernel_side.collect_answers' form)."""
    if v is None:
        return {"t": "none"}
    if isinstance(v, bool):
        return {"t": "bool", "v": v}
    if isinstance(v, int):
        return {"t": "int", "v": str(v)}
    if isinstance(v, float):
        return {"t": "float", "v": repr(v)}
    if isinstance(v, str):
        return {"t": "str", "v": v}
    kind = "tuple" if isinstance(v, tuple) else "list"
    return {"t": "seq", "kind": kind, "v": [_enc(x) for x in v]}


GENERIC = [{"t": "float", "v": s} for s in ("nan", "-nan", "inf", "-inf", "1e400")] + [
    {"t": "bool", "v": True},
    {"t": "str", "v": "nan"},
    {"t": "str", "v": "inf GB"},
    {"t": "str", "v": "nan %"},
    {"t": "str", "v": "1e999 GB"},
    {"t": "str", "v": "1 GB * nan"},
    {"t": "quantity", "magnitude": "nan", "units": "GB"},
    {"t": "ndarray", "dtype": "complex128", "v": _enc([1.0])},
    {"t": "ndarray", "dtype": "bool", "v": {"t": "bool", "v": True}},
    {"t": "seq", "kind": "set", "v": []},
    {"t": "dict", "v": []},
    {"t": "str", "v": "0 dB"},
    {"t": "str", "v": "1 neper"},
    {"t": "str", "v": "\u0661\u0662\u0663\u0664\u0665\u0666"},
    {"t": "int", "v": "9" * 4000},
]


def _numeric_wrong(q: NumericQuestion) -> list:
    want = float(q.expected())
    out = [_enc([want]), _enc((want,)), {"t": "ndarray", "dtype": "float64", "v": _enc(want)}]
    out.append({"t": "ndarray", "dtype": "float64", "v": _enc([want])})
    for wrong in (2 * want + 1, 1.5 * want + 1, -want if want else 1.0):
        out += [_enc(wrong), {"t": "str", "v": f"{wrong!r} {q.unit}"}, {"t": "str", "v": f"{want!r} {q.unit} * 2 + 1"}]
        out.append({"t": "quantity", "magnitude": repr(wrong), "units": q.unit or "dimensionless"})
    return out


def _choice_wrong(q: ChoiceQuestion) -> list:
    want = q.expected()
    out = [_enc(o) for o in q.options if o != want]
    out += [_enc([want]), _enc((want,)), {"t": "dict", "v": [[_enc(want), _enc(1)]]}, _enc(f"{want} {want}")]
    out += [{"t": "ndarray", "dtype": "<U40", "v": _enc([want])}, _enc(f"not {want}"), _enc(want + "\x00")]
    return out


def _choices_wrong(q: ChoicesQuestion) -> list:
    """Sets of options that are not the answer (a ChoicesQuestion: order and repeats do not matter): the answer
    less each option, plus each other option, nested, as a dict, as text of the answer less one."""
    want = list(q.expected())
    others = [o for o in q.options if o not in want]
    out = [_enc([w for w in want if w != x]) for x in want] + [_enc(want + [o]) for o in others]
    out += [_enc([want]), {"t": "dict", "v": [[_enc(i), _enc(x)] for i, x in enumerate(want)]}]
    out += [_enc(" ".join(want[1:])), _enc(", ".join(want + others[:1])), _enc(" ".join(want) + "\x00")]
    return out


def _sequence_wrong(q) -> list:
    want = list(q.expected())
    if len(want) < 2:
        return []
    out = [
        _enc(want[:-1]),
        _enc(want + want[-1:]),
        _enc([want]),
        _enc(str(want[:-1])),
        _enc(" ".join(map(str, want[1:]))),
    ]
    out.append({"t": "dict", "v": [[_enc(i), _enc(x)] for i, x in enumerate(want)]})
    if getattr(q, "ordered", True) and list(reversed(want)) != want:
        out += [_enc(list(reversed(want))), {"t": "seq", "kind": "set", "v": [_enc(x) for x in want]}]
    return out


def _all_questions():
    """Every question of every graded lesson, with its default params and with each per-student variant choice."""
    for lesson_name, lesson in lessons.graded().items():
        for name, q in lesson.load_questions().items():
            yield lesson_name, name, q
            for param, choices in (getattr(q, "variants", None) or {}).items():
                for choice in choices:
                    yield lesson_name, f"{name}[{param}={choice}]", with_params(q, **{param: choice})


def test_no_hostile_value_passes_any_question_of_any_lesson():
    """01: values that are not the answer, in every form the kernel can send, never make a check "correct" and never
    make one raise (the grader would catch it, but a raise is a check that cannot judge)."""
    passed, raised, count = [], [], 0
    for lesson_name, name, q in _all_questions():
        if isinstance(q, NumericQuestion):
            extra = _numeric_wrong(q)
        elif isinstance(q, ChoiceQuestion):
            extra = _choice_wrong(q)
        elif isinstance(q, ChoicesQuestion):
            extra = _choices_wrong(q)
        elif hasattr(q, "expected") and isinstance(q.expected(), (list, tuple)):
            extra = _sequence_wrong(q)
        else:
            extra = []
        for entry in GENERIC + extra:
            count += 1
            try:
                result = q.check(decode(entry))
            except Exception as exc:  # noqa: BLE001 -- recorded, the assertion says which
                raised.append((lesson_name, name, entry, repr(exc)))
                continue
            if result.status == CORRECT:
                passed.append((lesson_name, name, entry))
    assert count > 1000
    assert raised == []
    assert passed == []


@pytest.mark.parametrize(
    "entry",
    [
        {"t": "float", "v": "nan"},
        {"t": "float", "v": "inf"},
        {"t": "float", "v": "1e400"},
        {"t": "int", "v": "1" * 5000},
        {"t": "ndarray", "dtype": "float64", "v": {"t": "float", "v": "27.27"}},
        {"t": "bool", "v": True},
        {"t": "seq", "kind": "list", "v": [{"t": "float", "v": "27.27"}]},
    ],
)
def test_a_number_decoded_is_never_another_number(entry):
    """02: a GPipe bubble question (27.27 %) is never "correct" for NaN, inf, an overflowing float, a 5,000-digit
    int (opaque, not a crash), a 0-d array, a bool or a list holding the right number."""
    q = NumericQuestion(
        name="q",
        params=dict(p=4, m=8),
        prompt="bubble?",
        expected=lambda p, m: 100 * (p - 1) / (m + p - 1),
        explain=lambda p, m: "",
        hint_text="",
        unit="%",
    )
    value = decode(entry)
    if entry["t"] == "int":
        assert isinstance(value, OpaqueAnswer)
    assert q.check(value).status == INCORRECT


GOOD_LAYOUT = {"tp": 1, "pp": 2, "ep": 8, "cp": 1}


@pytest.mark.parametrize(
    "key, value",
    [
        ("tp", 3),
        ("pp", 2**20),
        ("ep", 3),
        ("cp", 2**20),
        ("etp", 3),
        ("chunks", 7),
        ("micro_batch_size", 2**20),
        ("schedule", "zero-bubble-magic"),
        ("recompute", "nothing"),
        ("tp", 8.5),
        ("tp", float("nan")),
        ("pp", True),
        ("sequence_parallel", "False"),
    ],
)
def test_an_odd_layout_setting_is_never_correct(key, value):
    """03: the capstone's layout questions price the layout with the step model; a setting it cannot run (not
    dividing the GPUs, unknown words, fractions, NaN, a bool for a count, a string for a flag) is never correct,
    while the same layout without it is (so the test sees the setting, not a layout that was wrong anyway)."""
    q = capstone.q3
    assert q.check(dict(GOOD_LAYOUT)).status == CORRECT
    assert q.check({**GOOD_LAYOUT, key: value}).status == INCORRECT


def test_answers_under_other_names_give_no_points_and_no_rows():
    """04: answers named like a question but not its name give nothing; each question has one row; a question
    without an answer is not attempted, 0 points."""
    lesson = lessons.graded()["pipeline"]
    questions = lesson.load_questions()
    first = next(iter(questions))
    right = questions[first].expected()
    look_alikes = [
        f"{ANSWER_PREFIX}{first.upper()}",
        ANSWER_PREFIX + first.replace("q", "\uff51"),
        ANSWER_PREFIX + first.replace("q", "\u051b"),
        f"{ANSWER_PREFIX}{first} ",
        f"{ANSWER_PREFIX}q99",
    ]
    raw = {name: _enc(right if not isinstance(right, tuple) else list(right)) for name in look_alikes}
    grades = check_answers(questions, decode_answers(raw, names=None))
    assert [g.question for g in grades] == list(questions)
    assert all(g.status == NOT_ATTEMPTED and g.points == 0.0 for g in grades)


PARTIAL = {
    "deleted": (["answer_x = 42", "del answer_x"], None),
    "raised": (["answer_x = 7\nraise ValueError('after the answer')"], 7),
    "rebound": (["answer_x = 42", "answer_x = ..."], Ellipsis),
    "twice": (["answer_x = globals().get('answer_x', 0) + 1"] * 2, 2),
}


@needs_bwrap
@pytest.mark.parametrize("label", list(PARTIAL))
def test_partial_credit_follows_what_the_kernel_holds_at_the_end(tmp_path, label):
    """05: deleted -> not attempted; set in a cell that raised -> that value; rebound later to ... -> not attempted;
    a cell run twice -> its value. The snapshot is what the kernel holds after the last cell, never more."""
    cells, want = PARTIAL[label]
    problems: list[str] = []
    snapshot = run_bwrap(cells, tmp_path, problems, timeout=60, cell_timeout=20)
    assert snapshot is not None, problems  # a snapshot was read: the outcome is the kernel's, not a failure's
    got = snapshot.get("answer_x")
    assert got is want if want in (None, Ellipsis) else got == want, (label, got, problems)


def test_the_report_rows_match_their_status():
    """06: "correct" only with full points, anything else 0 points; a check that raises is incorrect, 0 points."""

    class Raises:
        points = 3.0
        prompt = "?"

        def check(self, answer):
            raise RuntimeError("boom")

    questions = {"a": Raises(), **dict(list(lessons.graded()["pipeline"].load_questions().items())[:2])}
    first = list(questions)[1]
    answers = {f"{ANSWER_PREFIX}a": 1, f"{ANSWER_PREFIX}{first}": math.nan}
    grades = check_answers(questions, answers)
    assert grades[0].status == INCORRECT and grades[0].points == 0.0 and "boom" in grades[0].feedback
    for g in grades:
        assert (g.status == CORRECT) == (g.points == g.max_points > 0)
        if g.status != CORRECT:
            assert g.points == 0.0
