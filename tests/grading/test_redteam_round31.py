"""Red team round 31: lesson 12's q7, the first question answered by a LIST of options in any order (ChoicesQuestion;
the answer is ['tp4-pp2', 'tp2-ep8'] out of five). A student who does not know the answer tries to score it, to make
the grader crash or hang, or to have the feedback name the answer. Each test keeps the attack and what must hold;
every answer goes the way the grader reads it (the kernel's own collector, kernel_side.collect_answers, run here as
the kernel runs it; answers.parse_answers; check_answers), and 08 grades the exercise in a bubblewrap kernel.

01-cut-after-100-entries (SUCCEEDED, fixed): ChoicesQuestion read the first 100 entries of a list and dropped the
rest, so the right options repeated 50 times hid a wrong one after them: "correct" for a set holding 'ep8'. Now a
list of more than 100 entries is refused, never shortened; 100 entries (repeats count) are still read whole.
02-cut-entry-text (SUCCEEDED, fixed): an entry was cut at 200 characters, then stripped, so 'tp2-ep8' followed by
193 spaces and 'ep8' read as 'tp2-ep8' alone ("correct"); ChoiceQuestion cut its one answer the same way ('b', 199
spaces, 'c' read as 'b'). Now an option text of more than 200 characters is refused, in both question types.
03-cut-by-the-collector (SUCCEEDED, fixed): the kernel's collector sent the first 10,000 characters of a longer
string and the decoder cut at 10,000 too, so a schedule (lesson 4 q7, lesson 2 q8) followed by 10,000 spaces and a
wrong step, as a string or as its last entry, was read as the right schedule. Now a longer string travels as "too
large" and the decoder refuses (does not cut) a longer text, magnitude or unit.
04-every-set-in-every-form (held): all 32 subsets of q7's options, as a list, tuple, set, frozenset, comma or space
separated text, in upper case, padded with whitespace and repeated: only the right set is correct, and a partly
right one scores 0 (no partial credit).
05-odd-forms (held): duplicates of a wrong set, unicode look-alikes (fullwidth, Cyrillic e, non-breaking hyphen,
zero-width space), NUL, nested lists, the right set plus junk, one entry holding 'a, b', a list written as text, a
semicolon list, numpy arrays of strings, dicts of options, ints and bools, a 100,000-entry list, a 1,001-character
text, empty answers: none is correct, none raises, each is checked in well under a second.
06-lying-objects (held): a str subclass equal to everything or whose __str__ lies, a list whose __iter__ and __len__
disagree, an endless iterable, a set whose __contains__ says yes, an object whose iteration raises: the collector sends
only their real plain values (or "too large"), so a lie chooses only which plain value is sent.
07-feedback-names-only-what-was-chosen (held): for every subset, the feedback quotes only options the student chose:
a wrong one chosen is named with its misconception, a right one left out is only counted (and only when no wrong one
is chosen). By design, not a leak: all five options chosen names the three wrong ones, which tells the answer by
elimination, as five one-option checks at home would (a student may call q7.check as often as they like); the
grader's one check of the submitted answer gives 0 points for it. In the grading kernel the per-mistake feedback is
not there (the student view's QuestionStub has none), so it cannot be read off to build the answer.
08-sandboxed-capstone (01 end to end, bubblewrap; "correct" before the fix): exercises/12_capstone.ipynb with its q7 cell replaced by a hostile
one (the 101-entry list of 01, after reading q7's feedback, expected and options in the kernel) is graded as `distlab
grade` grades it: q7 is refused ("more than 100 entries"), the stub has no feedback or expected, nothing scores.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import time
from pathlib import Path

import nbformat
import numpy as np
import pytest

from distlab.grading import grade, kernel_side
from distlab.grading.answers import MAX_ANSWER_CHARS, OpaqueAnswer, check_answers, decode, parse_answers
from distlab.lessons import capstone, collectives, pipeline
from distlab.lessons.questions import CORRECT, INCORRECT, NOT_ATTEMPTED, ChoiceQuestion
from test_redteam_default_round2 import needs_bwrap

ROOT = Path(__file__).resolve().parents[2]
Q7 = capstone.q7
RIGHT = ["tp4-pp2", "tp2-ep8"]
WRONG = ["ep8", "tp4-ep8", "full-recompute"]


def _collected(value) -> object:
    """`value` as the grader receives it: the kernel's collector, then parse_answers (decode)."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        kernel_side.collect_answers({"answer_x": value}, "0" * 32, ["answer_x"], MAX_ANSWER_CHARS, 200_000)
    answers = parse_answers(printed.getvalue(), "0" * 32, {"answer_x"})
    assert answers is not None and "answer_x" in answers
    return answers["answer_x"]


def _graded(question, value):
    """The grader's row for `value` as the answer of `question` (collector, decoder, check_answers)."""
    return check_answers({"x": question}, {"answer_x": _collected(value)})[0]


def test_the_question_is_as_attacked():
    assert sorted(Q7.expected()) == sorted(RIGHT) and set(Q7.options) == set(RIGHT + WRONG)
    assert _graded(Q7, RIGHT).status == CORRECT


# ---- 01: a list cut after 100 entries (fixed) -------------------------------------------------------------------


def test_a_wrong_option_after_the_100th_entry_is_not_dropped():
    """01: the right options 50 times, then a wrong one: every entry is read, so the answer is refused."""
    for wrong in WRONG:
        row = _graded(Q7, RIGHT * 50 + [wrong])
        assert row.status == INCORRECT and row.points == 0 and "more than 100 entries" in row.feedback, row
    assert _graded(Q7, RIGHT * 50).status == CORRECT  # 100 entries (repeats count): still read whole
    assert _graded(Q7, tuple(RIGHT * 49 + [WRONG[0]])).status == INCORRECT  # within 100: the wrong one is named


# ---- 02: an entry cut at 200 characters (fixed) ---------------------------------------------------------------


def test_a_wrong_option_after_200_characters_of_an_entry_is_not_dropped():
    """02: 'tp2-ep8', spaces to the 200th character, then 'ep8'; and a ChoiceQuestion's answer padded the same way."""
    for pad in ("\t", " ", "\u3000"):
        padded = "tp2-ep8" + pad * (200 - len("tp2-ep8")) + "ep8"
        row = _graded(Q7, ["tp4-pp2", padded])
        assert row.status == INCORRECT and "of 203 characters" in row.feedback, row
    single = ChoiceQuestion(
        name="c", prompt="which?", options=("a", "b", "c"), expected=lambda: "b", explain=lambda: "b", hint_text="h"
    )
    assert _graded(single, "b").status == CORRECT
    row = _graded(single, "b" + " " * 199 + "c")
    assert row.status == INCORRECT and "an answer of 201 characters" in row.feedback, row
    assert _graded(single, " b" + " " * 190).status == CORRECT  # within 200 characters: padding is still stripped


# ---- 03: strings cut by the kernel's collector (fixed) ----------------------------------------------------------


@pytest.mark.parametrize("question", [pipeline.q7, collectives.q8], ids=["pipeline-q7", "collectives-q8"])
def test_a_string_is_never_cut_on_its_way_to_the_grader(question):
    """03: a schedule answer that is right in its first 10,000 characters and wrong after them, as one string or as
    its last entry, is refused ("too large"), never read as the right schedule."""
    want = [str(t) for t in question.expected()]
    assert _graded(question, " ".join(want)).status == CORRECT
    text = " ".join(want)
    tail = text + " " * (MAX_ANSWER_CHARS - len(text)) + " WRONG"
    last = want[:-1] + [want[-1] + " " * MAX_ANSWER_CHARS + "WRONG"]
    for value in (tail, last):
        row = _graded(question, value)
        assert row.status == INCORRECT and row.points == 0, row
    assert isinstance(_collected(tail), OpaqueAnswer) and isinstance(_collected(last)[-1], OpaqueAnswer)
    assert _collected("x" * MAX_ANSWER_CHARS) == "x" * MAX_ANSWER_CHARS  # up to the limit: whole


def test_the_decoder_refuses_what_it_used_to_cut():
    """03: a forged snapshot's text, magnitude or unit longer than the decoder reads is "too large", not cut."""
    too_long = [
        {"t": "str", "v": "F0 " * 3000 + "x" * (MAX_ANSWER_CHARS - 9000 + 1)},
        {"t": "float", "v": "1" + "0" * MAX_ANSWER_CHARS},
        {"t": "quantity", "magnitude": "2" + "0" * 100, "units": "gigabyte"},
        {"t": "quantity", "magnitude": "208", "units": "gigabyte*" * 30},
        {"t": "seq", "kind": "list", "v": [{"t": "str", "v": "ep8"}, {"t": "str", "v": "y" * (MAX_ANSWER_CHARS + 1)}]},
    ]
    for entry in too_long:
        assert isinstance(decode(entry), OpaqueAnswer), entry
    assert decode({"t": "quantity", "magnitude": "208.0", "units": "gigabyte"}) == "208.0 gigabyte"


# ---- 04: every subset in every form -----------------------------------------------------------------------------


def _forms(chosen: list[str]) -> list:
    return [
        list(chosen),
        tuple(reversed(chosen)),
        set(chosen),
        frozenset(chosen),
        ", ".join(chosen),
        " ".join(chosen).upper(),
        [f"  {o.upper()}\t" for o in chosen] * 2,
    ]


def test_only_the_right_set_is_correct_in_any_form():
    """04: each of the 32 subsets of the options in seven forms; only the right set scores, and nothing else gets any
    point (no partial credit)."""
    scored = []
    for size in range(len(Q7.options) + 1):
        for chosen in itertools.combinations(Q7.options, size):
            for value in _forms(list(chosen)):
                row = _graded(Q7, value)
                if row.points or row.status == CORRECT:
                    scored.append((sorted(chosen), value))
                assert row.points in (0.0, row.max_points), row
    assert all(sorted(c) == sorted(RIGHT) for c, _ in scored) and len(scored) == 7, scored


# ---- 05: odd forms ----------------------------------------------------------------------------------------------


ODD = {
    "a wrong set repeated": ["tp4-pp2", "tp4-pp2", "TP4-PP2 "],
    "fullwidth": ["\uff54\uff50\uff14-\uff50\uff50\uff12", "tp2-ep8"],
    "Cyrillic e": ["tp4-pp2", "tp2-\u0435p8"],
    "non-breaking hyphen": ["tp4\u2011pp2", "tp2-ep8"],
    "zero-width space": ["tp4-pp2\u200b", "tp2-ep8"],
    "NUL": ["tp4-pp2\x00", "tp2-ep8"],
    "NUL in text": "tp4-pp2\x00tp2-ep8",
    "nested": [RIGHT],
    "right plus junk": set(RIGHT) | {"junk"},
    "right plus an empty entry": RIGHT + [""],
    "one entry holding both": ["tp4-pp2, tp2-ep8"],
    "a list written as text": str(RIGHT),
    "semicolons": "tp4-pp2;tp2-ep8",
    "and": "tp4-pp2 and tp2-ep8",
    "ndarray of strings": np.array(RIGHT),
    "2-d ndarray": np.array([RIGHT]),
    "dict of options": {o: True for o in RIGHT},
    "dict of every option": {o: o in RIGHT for o in Q7.options},
    "ints": [1, 3],
    "bools": [True, False, True, False, False],
    "a bool": True,
    "100,000 entries": RIGHT * 50_000,
    "a 1,001-character text": ", ".join(RIGHT) + " " * (1001 - len(", ".join(RIGHT))),
    "an empty list": [],
    "commas only": ", , ,",
    "a range": range(2),
    "None inside": [None, *RIGHT],
}


def test_odd_forms_never_score_nor_raise_nor_take_long():
    """05: none of ODD is correct; each is a reason, not a crash; each takes well under a second."""
    for what, value in ODD.items():
        started = time.monotonic()
        row = _graded(Q7, value)
        took = time.monotonic() - started
        assert row.status in (INCORRECT, NOT_ATTEMPTED) and row.points == 0, (what, row)
        assert "could not be checked" not in row.feedback, (what, row)
        assert took < 1.0, (what, took)


# ---- 06: lying objects ------------------------------------------------------------------------------------------


class _EqStr(str):
    def __eq__(self, other):
        return True

    __hash__ = str.__hash__

    def __str__(self):
        return "tp4-pp2"

    def lower(self):
        return "tp4-pp2"

    def strip(self, *args):
        return self


class _LyingList(list):
    def __iter__(self):
        return iter(["ep8"])

    def __len__(self):
        return 2


class _Endless(list):
    def __iter__(self):
        return itertools.cycle(["ep8"])


class _YesSet(set):
    def __contains__(self, item):
        return True

    def __eq__(self, other):
        return True

    __hash__ = None


class _Raising(list):
    def __iter__(self):
        yield "tp4-pp2"
        raise RuntimeError("mid-way")


def test_lying_objects_reach_the_check_as_their_plain_values():
    """06: each liar arrives as the plain value the collector reads from it (or opaque), so none is correct."""
    liars = [
        [_EqStr("ep8"), _EqStr("full-recompute")],
        _EqStr("ep8, tp4-ep8"),
        _LyingList(RIGHT),
        _Endless(),
        _YesSet({"ep8"}),
        _Raising(),
        (_EqStr("x") for _ in range(3)),
    ]
    for liar in liars:
        got = _collected(liar)
        assert type(got) in (list, tuple, set, frozenset, str) or isinstance(got, OpaqueAnswer), (type(liar), got)
        if isinstance(got, (list, set)):
            assert all(type(x) is str for x in got), got
        row = check_answers({"q7": Q7}, {"answer_q7": got})[0]
        assert row.status == INCORRECT and row.points == 0, (type(liar), got, row)
    assert _collected([_EqStr("ep8")]) == ["ep8"]  # its real value, not its __str__ nor its __eq__


# ---- 07: what the feedback names --------------------------------------------------------------------------------


def test_the_feedback_quotes_only_options_the_student_chose():
    """07: for every subset, no option is quoted that was not chosen; a wrong one chosen is named with its words; a
    right one left out is counted only when no wrong one is chosen."""
    for size in range(len(Q7.options) + 1):
        for chosen in itertools.combinations(Q7.options, size):
            feedback = _graded(Q7, list(chosen)).feedback
            quoted = {o for o in Q7.options if f"'{o}'" in feedback}
            wrong_chosen = set(chosen) - set(RIGHT)
            assert quoted == wrong_chosen, (chosen, feedback)
            missing = len(set(RIGHT) - set(chosen))
            if missing and not wrong_chosen:
                assert f"{missing} " in feedback and "hold" in feedback, (chosen, feedback)
            if wrong_chosen:
                assert "more of the options" not in feedback, (chosen, feedback)
    # by design: every option chosen names the three wrong ones (what five one-option checks at home tell)
    feedback = _graded(Q7, list(Q7.options)).feedback
    assert all(f"'{o}' takes" in feedback for o in WRONG) and not any(f"'{o}'" in feedback for o in RIGHT)


def test_the_grading_kernels_q7_has_no_feedback_to_read_the_answer_off():
    """07: the per-mistake feedback's keys are exactly the wrong options (so at home they tell the answer, as
    expected() does); the student view the grading kernel imports has no feedback, expected or explain for q7."""
    from distlab.grading.student_view import stub_source

    assert set(Q7.feedback) == set(WRONG)
    source = stub_source("capstone")
    q7_line = next(line for line in source.splitlines() if line.strip().startswith("'q7': QuestionStub("))
    assert "feedback" not in q7_line and "expected" not in q7_line and "explain" not in q7_line
    assert "coin toss" not in source and "spreading the experts" not in source and "tp4-pp2" in q7_line


# ---- 08: a sandboxed grading of the capstone exercise -----------------------------------------------------------

HOSTILE_Q7 = """\
seen = {a: repr(getattr(q7, a, 'absent'))[:80] for a in ('feedback', 'expected', 'explain', 'options', 'unbound')}
derived = [o for o in q7.options if o not in getattr(q7, 'feedback', {})]  # the feedback's keys are the wrong ones
answer_q7 = (derived if len(derived) == 2 else ['tp4-pp2', 'tp2-ep8']) * 50 + ['ep8']
print(seen, q7.check(answer_q7))
"""


@needs_bwrap
def test_the_capstone_exercise_with_a_hostile_q7_cell_scores_nothing(tmp_path):
    """08: exercises/12_capstone.ipynb, its q7 cell replaced by HOSTILE_Q7, graded as `distlab grade` grades it."""
    nb = nbformat.read(ROOT / "exercises" / "12_capstone.ipynb", as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith("answer_q7")]
    assert len(cells) == 1
    cells[0].source = HOSTILE_Q7
    path = tmp_path / "12_capstone.ipynb"
    nbformat.write(nb, path)
    result = grade.grade_notebook(path, sandbox="bwrap", cell_timeout=60, timeout=120)
    assert result.lesson == "capstone" and result.sandbox.startswith("bwrap"), result
    assert result.problems == [], result.problems
    by = {q.question: q for q in result.questions}
    assert by["q7"].status == INCORRECT and "more than 100 entries" in by["q7"].feedback, by["q7"]
    assert result.score == 0
