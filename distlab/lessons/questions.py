"""Graded questions: q.check(answer) -> "correct", "not yet, because ...", or "not attempted".

The expected value of every question is computed by distlab when checked, never typed in.
Numbers are accepted with or without units (a plain number is read in the question's
unit) within a relative tolerance.

A question's setup is declared once in ``params``: the prompt and hint are formatted with it,
and expected(), explain() (and scale_hint, when it is a function) are called with it, so a
number the student reads is the number the check uses (learntools' declarative problems,
with distlab's computed expectations):

    >>> q = NumericQuestion(name="q", params=dict(p=4, m=8), prompt="GPipe, p = {p}, m = {m}: bubble (%)?",
    ...                     expected=lambda p, m: 100 * (p - 1) / (m + p - 1),
    ...                     explain=lambda p, m: f"(p-1)/(m+p-1) = {p - 1}/{m + p - 1}", hint_text="count slots",
    ...                     unit="%")
    >>> q.prompt, round(q.expected(), 2), q.check(27.3).status
    ('GPipe, p = 4, m = 8: bubble (%)?', 27.27, 'correct')
"""

from __future__ import annotations

import dataclasses
import functools
import html
import itertools
import math
import numbers
from dataclasses import dataclass, field
from typing import Callable

__all__ = [
    "CORRECT",
    "INCORRECT",
    "NOT_ATTEMPTED",
    "CheckResult",
    "Hint",
    "Solution",
    "is_unanswered",
    "bind_params",
    "with_params",
    "plain_number_text",
    "Question",
    "NumericQuestion",
    "ChoiceQuestion",
    "ChoicesQuestion",
    "SequenceQuestion",
]

CORRECT = "correct"
INCORRECT = "incorrect"
NOT_ATTEMPTED = "not attempted"


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check: status, the words shown to the student, points."""

    question: str
    status: str
    message: str
    points: float
    max_points: float

    @property
    def correct(self) -> bool:
        return self.status == CORRECT

    def __repr__(self) -> str:
        return f"{self.question}: {self.message}"

    def _repr_html_(self) -> str:
        colour = {CORRECT: "#1a7f37", INCORRECT: "#b35900", NOT_ATTEMPTED: "#57606a"}[self.status]
        mark = {CORRECT: "&#10004;", INCORRECT: "&#10008;", NOT_ATTEMPTED: "&#8230;"}[self.status]
        return (
            f'<div style="color:{colour}"><b>{mark} {html.escape(self.question)}</b>: {html.escape(self.message)}</div>'
        )

    def to_dict(self) -> dict:
        return {
            "question": self.question,
            "status": self.status,
            "feedback": self.message,
            "points": self.points,
            "max_points": self.max_points,
        }


def _wrapped(text: str) -> str:
    """`text` broken at spaces into lines a notebook's output shows whole (distlab.units.wrap_text)."""
    from ..units import wrap_text

    return wrap_text(text, indent="")


@dataclass(frozen=True)
class Hint:
    text: str

    def __repr__(self) -> str:
        return _wrapped(f"Hint: {self.text}")


@dataclass(frozen=True)
class Solution:
    text: str

    def __repr__(self) -> str:
        return _wrapped(f"Solution: {self.text}")


class Question:
    """What every question type shares (a mixin of methods; each type is a frozen dataclass with name, points,
    hint_text and explain): check() reads the answer (the type's _read: ValueError in words when it cannot; any other
    exception of a hostile object becomes a reason too) and judges it (the type's _judge: None when correct, else
    the reason), and hint() and solution()."""

    name: str
    points: float
    hint_text: str
    explain: Callable[..., str]

    def _read(self, answer):
        raise NotImplementedError

    def _judge(self, value) -> str | None:
        """None (or "") when the answer read is correct, else the reason it is not."""
        raise NotImplementedError

    def check(self, answer=None) -> CheckResult:
        """Compare an answer with the value distlab computes: not attempted, correct, or "not yet" with the reason."""
        if is_unanswered(answer):
            return CheckResult(self.name, NOT_ATTEMPTED, "not attempted", 0.0, self.points)
        try:
            value = self._read(answer)
        except ValueError as unreadable:
            return CheckResult(self.name, INCORRECT, f"not yet, because {unreadable}", 0.0, self.points)
        except Exception as exc:  # an object that cannot even be iterated or compared: a reason, not a crash
            noun = getattr(self, "noun", "")
            return CheckResult(
                self.name,
                INCORRECT,
                f"not yet, because an answer of type {type(answer).__name__} could not be read"
                f"{' as ' + noun if noun else ''} ({type(exc).__name__})",
                0.0,
                self.points,
            )
        reason = self._judge(value)
        if not reason:
            return CheckResult(self.name, CORRECT, "correct", self.points, self.points)
        return CheckResult(self.name, INCORRECT, f"not yet, because {reason}. Hint: {self.hint_text}", 0.0, self.points)

    def hint(self) -> Hint:
        return Hint(self.hint_text)

    def solution(self) -> Solution:
        return Solution(self.explain())


def is_unanswered(answer) -> bool:
    """True for what a fresh exercise holds: None, ..., or an empty string."""
    return answer is None or answer is Ellipsis or (isinstance(answer, str) and not str.strip(answer))


def bind_params(question) -> None:
    """Format prompt and hint with question.params and bind them to expected/explain (and a scale_hint function).

    Called from __post_init__; a question without params is left as written.
    """
    set_ = functools.partial(object.__setattr__, question)
    # as written, for with_params (a per-student variant re-binds the same templates to other numbers)
    set_(
        "unbound",
        dict(
            prompt=question.prompt,
            hint_text=question.hint_text,
            expected=question.expected,
            explain=question.explain,
            **({"scale_hint": question.scale_hint} if hasattr(question, "scale_hint") else {}),
        ),
    )
    params = question.params
    if not params:
        return
    set_("prompt", question.prompt.format(**params))
    set_("hint_text", question.hint_text.format(**params))
    set_("expected", functools.partial(question.expected, **params))
    set_("explain", functools.partial(question.explain, **params))
    if callable(getattr(question, "scale_hint", None)):
        set_("scale_hint", question.scale_hint(**params))


def with_params(question, **params):
    """A copy of `question` with some of its params changed: prompt, hint, expected() and explain() follow them.

    A question's `variants` ({param: choices}) says which params a per-student variant may change
    (distlab.lessons.variants draws them from a seed).
    """
    unknown = set(params) - set(question.params)
    if unknown:
        raise KeyError(f"{question.name} has no params {sorted(unknown)}; it has {sorted(question.params)}")
    return dataclasses.replace(question, **question.unbound, params={**question.params, **params})


def _as_float(value, noun: str) -> float:
    """float(value), or ValueError in words (too large, or an object whose float() fails)."""
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"the number is too large to be {noun}") from None
    except Exception as exc:
        raise ValueError(
            f"an answer of type {type(value).__name__} could not be read as {noun} ({type(exc).__name__})"
        ) from None


def plain_number_text(text: str, noun: str = "a number") -> str:
    """`text` with thousands separators removed; ValueError for a decimal comma ("11,2 GB") or too long a text.

    A comma is read only as a thousands separator: between groups of exactly three digits after
    one to three digits ("1,120 GB"); anything else is ambiguous and refused with a hint. Linear
    time (one pass over at most MAX_QUANTITY_CHARS characters).

    >>> plain_number_text("1,120 GB")
    '1120 GB'
    >>> plain_number_text("11,2 GB")
    Traceback (most recent call last):
    ValueError: '11,2 GB' has a comma inside the number: write decimals with a point (11.2, not 11,2) and no thousands separators
    """
    from ..units import MAX_QUANTITY_CHARS

    if len(text) > MAX_QUANTITY_CHARS:
        raise ValueError(f"an answer of {len(text)} characters is not {noun} (at most {MAX_QUANTITY_CHARS})")
    if "," not in text:
        return text
    stripped = text.strip()
    end = 0
    while end < len(stripped) and (stripped[end].isdigit() or stripped[end] in ",.+-"):
        end += 1
    number, rest = stripped[:end], stripped[end:]
    whole = number.lstrip("+-").split(".", 1)[0]
    groups = whole.split(",")
    if (
        "," in rest
        or "," in number.split(".", 1)[-1]
        and "." in number
        or not (1 <= len(groups[0]) <= 3 and not groups[0].startswith("0") and all(len(g) == 3 for g in groups[1:]))
    ):
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise ValueError(
            f"{shown!r} has a comma inside the number: write decimals with a point "
            "(11.2, not 11,2) and no thousands separators"
        )
    return number.replace(",", "") + rest


@dataclass(frozen=True)
class NumericQuestion(Question):
    """A question whose answer is a number in `unit` (a pint unit string, '' for a pure number).

    expected() computes the answer with distlab; explain() returns the worked derivation
    (also computed). rel_tol is relative; integer questions use rel_tol=0. abs_tol is absolute
    (e.g. 1 to accept one bucket either side of an optimum that is flat there). params: the
    question's setup, declared once (see the module docstring); scale_hint may then be a
    function of it returning {ratio to the expected value: words}.
    """

    name: str
    prompt: str
    expected: Callable[..., float]
    explain: Callable[..., str]
    hint_text: str
    unit: str = ""
    rel_tol: float = 0.01
    points: float = 1.0
    noun: str = "a number"
    abs_tol: float = 1e-12
    scale_hint: dict | Callable[..., dict] = field(default_factory=dict)
    params: dict = field(default_factory=dict)
    #: {param: choices} a per-student variant may draw from (distlab.lessons.variants); {} keeps params fixed
    variants: dict = field(default_factory=dict)

    def __post_init__(self):
        bind_params(self)

    def _read(self, answer) -> float:
        """The answer as a float in self.unit; raises ValueError with the reason in words.

        A quantity must have the question's dimension (a percent is not a byte count); a number
        with no unit is read in self.unit; anything that cannot be read (arrays, complex numbers,
        objects whose float() fails) is a reason, never an exception.
        """
        from pint import DimensionalityError, Quantity

        from ..errors import UnitError
        from ..units import parse_quantity

        if isinstance(answer, bool):
            raise ValueError(f"{answer!r} is a yes/no value, not {self.noun}")
        if isinstance(answer, numbers.Real):
            value = _as_float(answer, self.noun)
        elif isinstance(answer, (str, Quantity)):
            if isinstance(answer, str):
                text = plain_number_text(answer, self.noun)
                try:
                    answer = parse_quantity(text, "the answer")
                except UnitError:
                    shown = answer if len(answer) <= 40 else answer[:37] + "..."
                    raise ValueError(
                        f"{shown!r} could not be read as {self.noun} (write a number, then its "
                        f"unit, such as '140 GB' or '3.05 s')"
                    ) from None
            if not isinstance(answer, Quantity):
                value = _as_float(answer, self.noun)
            else:
                magnitude = answer.magnitude
                if isinstance(magnitude, bool) or not isinstance(magnitude, numbers.Real):
                    raise ValueError(f"a quantity whose magnitude is a {type(magnitude).__name__} is not {self.noun}")
                if not dict(answer.unit_items()):  # no unit at all (not even %): read in the question's unit
                    value = _as_float(magnitude, self.noun)
                else:
                    try:
                        value = _as_float(answer.to(self.unit or "").magnitude, self.noun)
                    except DimensionalityError:
                        raise ValueError(
                            f"{_as_float(magnitude, self.noun):.4g} {answer.units:~P} is not "
                            f"{self.noun} (expected {self.unit or 'a pure number'})"
                        ) from None
        else:
            raise ValueError(f"an answer of type {type(answer).__name__} is not {self.noun}")
        if not math.isfinite(value):
            raise ValueError(f"{value} is not a finite number")
        return value

    def _judge(self, value: float) -> str | None:
        want = float(self.expected())
        if math.isclose(value, want, rel_tol=self.rel_tol, abs_tol=self.abs_tol):
            return None
        reason = "is too high" if value > want else "is too low"
        # bind_params has called a scale_hint function already when there are params; without, call it here
        hints = self.scale_hint(**self.params) if callable(self.scale_hint) else self.scale_hint
        for factor, words in hints.items():
            # the mistake's value, or that value rounded to a whole number (a count worked out by hand)
            rounded = float(value).is_integer() and abs(value - factor * want) <= 0.5
            if want and (math.isclose(value / want, factor, rel_tol=self.rel_tol) or rounded):
                reason = words
                break
        unit = f" {self.unit}" if self.unit else ""
        return f"{_echoed(value)}{unit} {reason}"


def _echoed(value: float) -> str:
    """A student's number written back: six significant digits, never in e-notation above a million (5,668,934, not
    '5.66893e+06': lesson 12's q1 feedback, review v20)."""
    text = f"{value:g}"
    return f"{value:,.0f}" if "e+" in text else text


#: an option is a short word: a text longer than this is refused, not cut (ChoiceQuestion, ChoicesQuestion)
MAX_OPTION_CHARS = 200
#: a ChoicesQuestion's answer holds at most this many entries (repeats count): a longer one is refused, not cut
MAX_CHOICE_ENTRIES = 100


def _option_text(text: str, options, what: str = "an entry") -> str:
    """`text` (a str) as an option is compared: stripped and lower case; ValueError for one longer than
    MAX_OPTION_CHARS (read whole or not at all: a cut would let what follows the cut pass unseen)."""
    text = str.__str__(text)
    if len(text) > MAX_OPTION_CHARS:
        raise ValueError(f"{what} of {len(text)} characters is not one of: {', '.join(options)}")
    return text.strip().lower()


@dataclass(frozen=True)
class ChoiceQuestion(Question):
    """A question answered by one of a few options (case-insensitive; yes/no also take True/False).

    feedback: {wrong option: why it is wrong}, the misconception each wrong option stands for; it is
    shown (formatted with params; a callable: called) in place of the generic "is not right" when that option
    is chosen.
    """

    name: str
    prompt: str
    options: tuple
    expected: Callable[..., str]
    explain: Callable[..., str]
    hint_text: str
    points: float = 1.0
    params: dict = field(default_factory=dict)
    #: {param: choices} a per-student variant may draw from (distlab.lessons.variants); {} keeps params fixed
    variants: dict = field(default_factory=dict)
    #: {option: why it is wrong} for every wrong option: the misconception it stands for, formatted with params
    feedback: dict = field(default_factory=dict)

    def __post_init__(self):
        bind_params(self)

    def _read(self, answer) -> str:
        if isinstance(answer, bool):
            value = "yes" if answer else "no"
        elif not isinstance(answer, str):  # an option is a word: no str() of arbitrary objects
            raise ValueError(f"an answer of type {type(answer).__name__} is not one of: {', '.join(self.options)}")
        else:
            value = _option_text(answer, self.options, "an answer")
        if value not in self.options:
            raise ValueError(f"{value!r} is not one of: {', '.join(self.options)}")
        return value

    def _judge(self, value: str) -> str | None:
        if value == self.expected():
            return None
        why = self.feedback.get(value, "is not right")
        why = why() if callable(why) else why.format(**self.params)  # a callable: words computed when checked
        return f"{value!r} {why}"


@dataclass(frozen=True)
class ChoicesQuestion(Question):
    """A question answered by every option that holds, in any order: a list of options, or one string of them
    separated by commas or spaces (case-insensitive). expected() gives the options that hold (possibly none: answer
    an empty list). feedback: {option: why choosing it is wrong} (a callable: called), shown for each wrong option
    chosen; a right option left out is counted, not named.

    >>> q = ChoicesQuestion(name="q", prompt="Which are even?", options=("2", "3", "4"), expected=lambda: ["2", "4"],
    ...                     explain=lambda: "2 and 4", hint_text="halve them", feedback={"3": "is odd"})
    >>> q.check("4, 2").status, q.check(["2", "3", "4"]).message.split(". Hint")[0]
    ('correct', "not yet, because '3' is odd")
    """

    name: str
    prompt: str
    options: tuple
    expected: Callable[..., list]
    explain: Callable[..., str]
    hint_text: str
    points: float = 1.0
    params: dict = field(default_factory=dict)
    variants: dict = field(default_factory=dict)
    #: {option: why choosing it is wrong}: the misconception each wrong option stands for (a callable: called)
    feedback: dict = field(default_factory=dict)
    noun: str = "a list of options"

    def __post_init__(self):
        bind_params(self)

    def _read(self, answer) -> frozenset:
        """The options chosen. Every entry is read, none cut off: a list of more than MAX_CHOICE_ENTRIES entries, or
        an entry of more than MAX_OPTION_CHARS characters, is refused, never shortened (cut at 100 entries, the right
        options repeated 50 times hid a wrong one after them; cut at 200 characters, 'tp2-ep8' and 193 spaces hid
        'ep8': both were "correct", red team round 31)."""
        if isinstance(answer, str):
            text = str.__str__(answer)
            if len(text) > 1_000:
                raise ValueError(f"an answer of {len(text)} characters is not {self.noun}")
            items = text.replace(",", " ").split()
        elif isinstance(answer, (list, tuple, set, frozenset)):
            items = list(itertools.islice(iter(answer), MAX_CHOICE_ENTRIES + 1))
            if len(items) > MAX_CHOICE_ENTRIES:
                raise ValueError(f"an answer of more than {MAX_CHOICE_ENTRIES} entries is not {self.noun}")
        else:
            raise ValueError(
                f"an answer of type {type(answer).__name__} is not {self.noun} ({', '.join(self.options)})"
            )
        chosen = set()
        for item in items:
            if not isinstance(item, str):
                raise ValueError(f"an entry of type {type(item).__name__} is not one of: {', '.join(self.options)}")
            value = _option_text(item, self.options)
            if value not in self.options:
                raise ValueError(f"{value!r} is not one of: {', '.join(self.options)}")
            chosen.add(value)
        return frozenset(chosen)

    def _judge(self, chosen: frozenset) -> str | None:
        want = frozenset(self.expected())
        wrong = [o for o in self.options if o in chosen - want]
        if wrong:
            reasons = [self.feedback.get(o, "does not hold") for o in wrong]
            return "; ".join(f"{o!r} {r() if callable(r) else r.format(**self.params)}" for o, r in zip(wrong, reasons))
        missing = len(want - chosen)
        if missing and not chosen:
            return f"none was chosen, and {missing} of the options {'holds' if missing == 1 else 'hold'}"
        if missing:
            return f"{missing} more of the options {'holds' if missing == 1 else 'hold'} as well"
        return None


@dataclass(frozen=True)
class SequenceQuestion(Question):
    """A question answered by an ordered list of short tokens: a schedule such as ['F0', 'F1', 'B0', ...] or
    chunk indices [1, 0, 3]. A string of tokens separated by spaces or commas is read too.

    feedback(**params) returns {wrong sequence (tuple of tokens): why}: the sequences a known mistake produces;
    any other wrong answer is told the first position where it differs (an implementation task checked by a test).
    """

    name: str
    prompt: str
    expected: Callable[..., list]
    explain: Callable[..., str]
    hint_text: str
    points: float = 1.0
    noun: str = "a list"
    params: dict = field(default_factory=dict)
    variants: dict = field(default_factory=dict)
    feedback: Callable[..., dict] | None = None

    def __post_init__(self):
        bind_params(self)

    def _read(self, answer) -> tuple:
        if type(answer).__name__ == "ndarray" and type(answer).__module__ == "numpy":
            answer = answer.tolist() if answer.ndim == 1 else answer
        if isinstance(answer, str):
            if len(answer) > 10_000:
                raise ValueError(f"an answer of {len(answer)} characters is not {self.noun}")
            answer = answer.replace(",", " ").replace("[", " ").replace("]", " ").replace("'", " ").split()
        if not isinstance(answer, (list, tuple, range)):
            raise ValueError(f"an answer of type {type(answer).__name__} is not {self.noun}")
        tokens = []
        for item in list(answer)[:10_000]:
            if isinstance(item, bool) or not isinstance(item, (str, numbers.Integral)):
                raise ValueError(f"an entry of type {type(item).__name__} is not a step of {self.noun}")
            tokens.append(str.__str__(item).strip().upper() if isinstance(item, str) else str(int(item)))
        return tuple(tokens)

    def _judge(self, got: tuple) -> str | None:
        want = tuple(str(t).upper() for t in self.expected())
        if got == want:
            return None
        known = {
            tuple(str(t).upper() for t in k): v
            for k, v in (self.feedback(**self.params) if self.feedback else {}).items()
        }
        if got in known:
            why = known[got]
        elif len(got) != len(want):
            why = f"has {len(got)} steps; count them again"
        else:
            first = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b)
            why = f"goes wrong at step {first + 1} ({got[first]})"
        return f"it {why}"
