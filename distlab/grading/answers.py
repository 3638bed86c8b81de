"""The answers, in the grading process: decoded from what the kernel printed, then checked here.

The kernel prints the lesson's answer variables (answer_q1, ...) between two markers carrying a
random nonce (kernel_side.collect_answers); parse_answers reads them back robustly to anything,
and check_answers runs the lesson's REAL checks on them, outside the student's kernel.
"""

from __future__ import annotations

import json
import re
import signal
import threading
from contextlib import contextmanager
from typing import Any

from ..lessons.questions import INCORRECT, NOT_ATTEMPTED
from .report import QuestionGrade

__all__ = [
    "ANSWER_PREFIX",
    "MAX_ANSWER_CHARS",
    "CHECK_TIME_LIMIT",
    "CheckTimeout",
    "time_limit",
    "OpaqueAnswer",
    "opaque",
    "MAX_OPAQUE_CLASSES",
    "MAX_ANSWER_VALUES",
    "MAX_ANSWER_TEXT",
    "MAX_ARRAY_BYTES",
    "MAX_ANSWERS",
    "decode",
    "decode_answers",
    "parse_answers",
    "check_answers",
    "not_attempted",
]

#: variables read from the student's namespace: answer_q1, answer_q2, ...
ANSWER_PREFIX = "answer_"
#: an answer string of more than this many characters is not read (the answer is "too large"), never cut
MAX_ANSWER_CHARS = 10_000
#: a check that takes longer than this (seconds) in the grading process is stopped and counts as "not yet"
CHECK_TIME_LIMIT = 10.0


class CheckTimeout(Exception):
    """A check ran past CHECK_TIME_LIMIT."""


@contextmanager
def time_limit(seconds: float):
    """Raise CheckTimeout in the block after `seconds` (a real-time timer; only in the main thread, else no limit)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def stop(_signum, _frame):
        raise CheckTimeout(f"the check took longer than {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class OpaqueAnswer:
    """Stands in for an answer of a type that cannot be carried over (a list, a function, ...)."""

    def __init__(self, type_name: str):
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<a {self.type_name}>"

    __str__ = __repr__


#: at most this many distinct OpaqueAnswer subclasses are made per snapshot (one per type name, reused); any other
#: name gets the class "object": a class costs ~1 kB, and one per value took the grader to 657 MB (class/04). Each
#: snapshot starts with none (decode_answers): a class run decodes every notebook in one process, and one notebook's
#: 64 unknown type names made every later notebook's new type "object" in its feedback (red team round 19 06)
MAX_OPAQUE_CLASSES = 64
_OPAQUE_CLASSES: dict[str, type] = {}


def opaque(type_name: str):
    """An OpaqueAnswer whose class is named after the type, so checks say "an answer of type list ..."."""
    name = re.sub(r"\W", "_", str(type_name)[:60]) or "object"
    cls = _OPAQUE_CLASSES.get(name)
    if cls is None:
        if len(_OPAQUE_CLASSES) >= MAX_OPAQUE_CLASSES:
            name = "object"
        cls = _OPAQUE_CLASSES.setdefault(name, type(name, (OpaqueAnswer,), {}))
    return cls(str(type_name)[:60])


#: one answer decodes to at most this many values (numbers, strings, containers...) and this many characters of
#: text; a larger one is opaque ("too large"). A real answer holds a few dozen values; the kernel's answer text is
#: at most MAX_OUTPUT_CHARS (200,000) per cell, and 99,000 one-byte items once took the grader to 350 MB
MAX_ANSWER_VALUES = 4_096
MAX_ANSWER_TEXT = 100_000
#: an array answer may take at most this many bytes once built (elements x item size, counted before numpy
#: builds it: 8,501 strings, one of 10,000 characters, make a 340 MB '<U10000' array)
MAX_ARRAY_BYTES = 2**20
#: a snapshot holds at most this many answers (the lessons ask under 20 questions)
MAX_ANSWERS = 64


class _TooLarge(Exception):
    """The answer being decoded is past MAX_ANSWER_VALUES or MAX_ANSWER_TEXT."""


class _Budget:
    """What is left of one answer's values and characters (decode counts every value it makes)."""

    def __init__(self, values: int = MAX_ANSWER_VALUES, text: int = MAX_ANSWER_TEXT):
        self.values, self.text = values, text

    def take(self, values: int = 1, text: int = 0) -> None:
        self.values -= values
        self.text -= text
        if self.values < 0 or self.text < 0:
            raise _TooLarge


def _array_bytes(value: Any) -> int:
    """Bytes of np.array(value) at most: its leaves times the widest one (4 bytes a character for text, else 16).
    `value` was decoded within a budget, so this walk is short."""
    leaves, width, todo = 0, 16, [value]
    while todo:
        item = todo.pop()
        if isinstance(item, (list, tuple)):
            todo.extend(item)
        elif hasattr(item, "nbytes") and hasattr(item, "size"):  # an array decoded inside: its own elements
            leaves += int(item.size)
            width = max(width, int(item.nbytes) // max(1, int(item.size)))
        else:
            leaves += 1
            if isinstance(item, str):
                width = max(width, 4 * len(item))
    return leaves * width


def _decode_array(entry: dict, budget: _Budget, depth: int) -> Any:
    import numpy as np

    named = np.dtype(str(entry.get("dtype"))[:20])
    dtype = named if named.kind in "biufc" and named.itemsize <= 16 else None  # plain numbers only
    items = _decode(entry.get("v"), budget, depth + 1)
    if _array_bytes(items) > MAX_ARRAY_BYTES:
        return opaque("ndarray")
    return np.array(items, dtype=dtype)


def _decode(entry: Any, budget: _Budget, depth: int) -> Any:
    budget.take()
    if not isinstance(entry, dict) or depth > 8:
        return opaque("unknown")
    kind, value = entry.get("t"), entry.get("v")
    if kind == "none":
        return None
    if kind == "ellipsis":
        return Ellipsis
    if kind == "bool":
        return value if isinstance(value, bool) else opaque("bool")
    # a text is read whole or not at all (too long: the answer is "too large"), never cut: the first 10,000
    # characters of a schedule with a wrong step after them read as the right schedule (red team round 31)
    if kind in ("str", "int", "float") and isinstance(value, str):
        if len(value) > MAX_ANSWER_CHARS:
            raise _TooLarge
        budget.take(0, len(value))
        return value if kind == "str" else int(value) if kind == "int" else float(value)
    magnitude, units = entry.get("magnitude"), entry.get("units")
    if kind == "quantity" and isinstance(magnitude, str) and isinstance(units, str):
        if len(magnitude) > 100 or len(units) > 200:
            raise _TooLarge
        float(magnitude)  # a number, or this raises
        budget.take(0, len(magnitude) + len(units))
        return f"{magnitude} {units}"
    if kind == "seq" and isinstance(value, list):
        items = [_decode(x, budget, depth + 1) for x in value]
        containers: dict[Any, type] = {"tuple": tuple, "set": set, "frozenset": frozenset}
        try:
            return containers.get(entry.get("kind"), list)(items)
        except TypeError:  # unhashable items in a set
            return items
    if kind == "dict" and isinstance(value, list):
        pairs = [x if isinstance(x, list) and len(x) == 2 else (None, None) for x in value]
        return {_decode(k, budget, depth + 1): _decode(x, budget, depth + 1) for k, x in pairs}
    if kind == "ndarray":
        return _decode_array(entry, budget, depth)
    return opaque(str(entry.get("type", "object")))


def decode(entry: Any, depth: int = 0) -> Any:
    """One answer from its JSON encoding (kernel_side.collect_answers); anything malformed becomes opaque.

    Bounded by construction: at most MAX_ANSWER_VALUES values and MAX_ANSWER_TEXT characters are made (past them
    the answer is opaque "too large"), an array is built only under MAX_ARRAY_BYTES, and whatever the entry holds
    (numpy raises SyntaxError for some dtype strings) nothing but an opaque answer comes out of a failure."""
    try:
        return _decode(entry, _Budget(), depth)
    except _TooLarge:
        return opaque("too large")
    except Exception as exc:  # noqa: BLE001 -- any failure to read an untrusted answer makes it opaque
        kind = entry.get("type", entry.get("t")) if isinstance(entry, dict) else None
        return opaque(str(kind if isinstance(kind, str) else type(exc).__name__))


def decode_answers(data: Any, names=None) -> dict:
    """The answers of a snapshot ({answer_q1: encoding, ...}), each decoded (decode); only `names` when given, and
    at most MAX_ANSWERS of them."""
    _OPAQUE_CLASSES.clear()  # this snapshot's type names only (another notebook's are not kept)
    if not isinstance(data, dict):
        return {}
    keys = [k for k in data if isinstance(k, str) and (names is None or k in names)]
    return {k: decode(data[k]) for k in keys[:MAX_ANSWERS]}


def parse_answers(text: str, nonce: str, names=None) -> dict | None:
    """The answers printed between the nonce markers in `text`, decoded (decode_answers: only `names` when
    given); None when there are none."""
    begin, end = f"DISTLAB-ANSWERS-BEGIN-{nonce}", f"DISTLAB-ANSWERS-END-{nonce}"
    start = text.rfind(begin)
    if start < 0:
        return None
    stop = text.find(end, start)
    if stop < 0:
        return None
    try:
        data = json.loads(text[start + len(begin) : stop])
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    return decode_answers(data, names)


def check_answers(questions: dict, answers: dict) -> list[QuestionGrade]:
    """Run the real checks of `questions` on `answers` (answer_<name>), here in the grading process."""
    grades = []
    for name, question in questions.items():
        answer = answers.get(f"{ANSWER_PREFIX}{name}")
        max_points = float(getattr(question, "points", 1.0))
        try:
            with time_limit(CHECK_TIME_LIMIT):
                result = question.check(answer)
            grades.append(
                QuestionGrade(
                    name,
                    result.status,
                    float(result.points),
                    float(result.max_points),
                    result.message,
                    getattr(question, "prompt", ""),
                )
            )
        except (Exception, CheckTimeout) as exc:  # a check that cannot read a strange answer must not stop grading
            grades.append(
                QuestionGrade(
                    name,
                    INCORRECT,
                    0.0,
                    max_points,
                    f"not yet, because the answer could not be checked ({type(exc).__name__}: {str(exc)[:200]})",
                    getattr(question, "prompt", ""),
                )
            )
    return grades


def not_attempted(questions: dict, why: str = "not attempted") -> list[QuestionGrade]:
    """Every question of `questions` graded "not attempted", with `why` as the feedback."""
    return [
        QuestionGrade(name, NOT_ATTEMPTED, 0.0, float(getattr(q, "points", 1.0)), why, getattr(q, "prompt", ""))
        for name, q in questions.items()
    ]
