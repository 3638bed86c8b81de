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
    "decode",
    "parse_answers",
    "check_answers",
    "not_attempted",
]

#: variables read from the student's namespace: answer_q1, answer_q2, ...
ANSWER_PREFIX = "answer_"
#: at most this many characters of an answer string are read
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


def opaque(type_name: str):
    """An OpaqueAnswer whose class is named after the type, so checks say "an answer of type list ..."."""
    name = re.sub(r"\W", "_", str(type_name))[:60] or "object"
    cls = type(name, (OpaqueAnswer,), {})  # check messages say "an answer of type list is not ..."
    return cls(str(type_name)[:60])


def decode(entry: Any, depth: int = 0) -> Any:
    """One answer from its JSON encoding (kernel_side.collect_answers); anything malformed becomes opaque."""
    if not isinstance(entry, dict) or depth > 8:
        return opaque("unknown")
    kind = entry.get("t")
    try:
        if kind == "none":
            return None
        if kind == "ellipsis":
            return Ellipsis
        if kind == "bool":
            return bool(entry["v"]) if isinstance(entry.get("v"), bool) else opaque("bool")
        if kind == "str" and isinstance(entry.get("v"), str):
            return entry["v"][:MAX_ANSWER_CHARS]
        if kind == "int" and isinstance(entry.get("v"), str):
            return int(entry["v"])
        if kind == "float" and isinstance(entry.get("v"), str):
            return float(entry["v"])
        if kind == "quantity" and isinstance(entry.get("magnitude"), str) and isinstance(entry.get("units"), str):
            float(entry["magnitude"])  # a number, or this raises
            return f"{entry['magnitude']} {entry['units'][:200]}"
        if kind == "seq" and isinstance(entry.get("v"), list):
            items = [decode(x, depth + 1) for x in entry["v"]]
            containers: dict[Any, type] = {"tuple": tuple, "set": set, "frozenset": frozenset}
            container = containers.get(entry.get("kind"), list)
            try:
                return container(items)
            except TypeError:  # unhashable items in a set
                return items
        if kind == "dict" and isinstance(entry.get("v"), list):
            return {decode(k, depth + 1): decode(x, depth + 1) for k, x in entry["v"]}
        if kind == "ndarray":
            import numpy as np

            named = np.dtype(str(entry.get("dtype"))[:20])
            dtype = named if named.kind in "biufc" and named.itemsize <= 16 else None  # plain numbers only
            return np.array(decode(entry.get("v"), depth + 1), dtype=dtype)
        return opaque(entry.get("type", "object"))
    except (ValueError, TypeError, KeyError, OverflowError):
        return opaque(str(entry.get("type", kind)))


def parse_answers(text: str, nonce: str) -> dict | None:
    """The answers printed between the nonce markers in `text`, decoded; None when there are none."""
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
    return {str(k): decode(v) for k, v in data.items() if isinstance(k, str)}


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
