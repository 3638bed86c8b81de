"""Per-student variants of a lesson's questions: a seed picks each question's numbers from the choices it declares.

A question declares ``variants=dict(billions=(7, 13, 70))``: the params a variant may change and
their choices. draw() picks one choice per param from SHA-256 of (seed, lesson, param, choices),
so the same seed always gives the same numbers and two students' seeds almost always differ;
questions of a lesson that declare the same param with the same choices get the same number
(so "the same setup as q3" stays true);
variant() is the question with those params (distlab.lessons.questions.with_params), so its
prompt, hint, expected() and explain() all follow the seed. Without a seed a lesson is exactly as
written (self-study). The instructor's side (rosters, signed seeds, building one exercise
notebook per student) is distlab.grading.variants.

    >>> from distlab.lessons.memory_wall import q2
    >>> variant(q2, "memory_wall", "s-1").prompt == variant(q2, "memory_wall", "s-1").prompt
    True
    >>> variant(q2, "memory_wall", None) is q2
    True
"""

from __future__ import annotations

import datetime
import hashlib

from . import lesson as find_lesson
from .questions import Hint, Solution, with_params

__all__ = ["draw", "variant", "lesson_variant", "parse_release", "Withheld", "personal"]


def draw(question, lesson: str, seed: str) -> dict:
    """The params the seed picks for `question` of `lesson`: one of its declared choices per param."""
    picked = {}
    for param, choices in sorted(getattr(question, "variants", {}).items()):
        choices = list(choices)
        digest = hashlib.sha256(f"distlab-variant|{seed}|{lesson}|{param}|{choices!r}".encode()).digest()
        picked[param] = choices[int.from_bytes(digest[:8], "big") % len(choices)]
    return picked


def variant(question, lesson: str, seed: str | None):
    """`question` with the numbers `seed` picks (the question itself when seed is None or it has no variants)."""
    if seed is None or not getattr(question, "variants", None):
        return question
    return with_params(question, **draw(question, lesson, seed))


def lesson_variant(lesson: str, seed: str | None) -> dict:
    """The QUESTIONS of `lesson` (a slug or an older name) for `seed`: {name: question}."""
    entry = find_lesson(lesson)
    return {name: variant(q, entry.slug, seed) for name, q in entry.load_questions().items()}


def parse_release(release) -> datetime.datetime | None:
    """A release date or time as an aware UTC datetime ('2026-12-01' is midnight UTC); None stays None."""
    if release is None or isinstance(release, datetime.datetime):
        return release
    when = datetime.datetime.fromisoformat(str(release))
    return when if when.tzinfo else when.replace(tzinfo=datetime.timezone.utc)


class Withheld:
    """A question whose solution() (and expected(), explain()) wait for the instructor's release date.

    check(), hint() and the prompt work as always. This is a courtesy in the student's own kernel,
    not a lock: the grade is computed outside it, from the seed the instructor issued.
    """

    def __init__(self, question, release):
        self._question = question
        self.release = parse_release(release)

    def released(self, now: datetime.datetime | None = None) -> bool:
        return self.release is None or (now or datetime.datetime.now(datetime.timezone.utc)) >= self.release

    def _when(self) -> str:
        return f"the worked solution is released on {self.release:%Y-%m-%d %H:%M} UTC"

    def solution(self) -> Solution:
        if self.released():
            return self._question.solution()
        return Solution(f"{self._when()}; until then: {self._question.hint_text}")

    def hint(self) -> Hint:
        return self._question.hint()

    def check(self, answer=None):
        return self._question.check(answer)

    def __getattr__(self, name):
        if name in ("expected", "explain", "unbound") and not self.released():
            raise AttributeError(f"{self._question.name}.{name} is withheld: {self._when()}")
        return getattr(self._question, name)

    def __repr__(self) -> str:
        return f"{self._question.name} (your variant; {self._when() if not self.released() else 'solution released'})"


def personal(lesson: str, names: str, seed: str | None = None, release=None) -> tuple:
    """The questions `names` ("q1 q2 ...") of `lesson` for `seed`, for an exercise notebook to rebind.

    Exercise notebooks built per student (distlab exercises --variants) call this right after
    importing the lesson's questions; release: the date before which solution() is withheld.
    """
    questions = lesson_variant(lesson, seed)
    picked = [questions[n] for n in names.split()]
    if release is not None:
        picked = [Withheld(q, release) for q in picked]
    return tuple(picked) if len(picked) != 1 else picked[0]
