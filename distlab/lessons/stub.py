"""Question stubs: what a graded notebook's kernel sees of a question (prompt, parameters, how to read an answer).

While a notebook is graded, its kernel imports a student view of distlab (distlab.grading.student_view) in
which every lesson's question module is replaced by QuestionStubs: no expected value, no explanation, no
solution, no per-mistake feedback and none of the lesson's own functions that compute them. Only the
grading process, outside the kernel, checks the answers (distlab.grading.answers.check_answers). Self-study
notebooks import the real questions and keep their in-notebook checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .questions import NOT_ATTEMPTED, CheckResult, Hint, Solution

__all__ = ["GRADER_CHECKS", "QuestionStub"]

#: what check() says in the grading kernel
GRADER_CHECKS = "checked by the grader after the notebook has run"


@dataclass(frozen=True)
class QuestionStub:
    """A question without its answer key: check() says the grader checks; solution() is withheld."""

    name: str
    kind: str
    prompt: str
    hint_text: str = ""
    points: float = 1.0
    unit: str = ""
    noun: str = ""
    options: tuple = ()
    params: dict = field(default_factory=dict)

    def check(self, answer=None) -> CheckResult:
        return CheckResult(self.name, NOT_ATTEMPTED, GRADER_CHECKS, 0.0, self.points)

    def hint(self) -> Hint:
        return Hint(self.hint_text)

    def solution(self) -> Solution:
        return Solution("withheld while grading")

    def __repr__(self) -> str:
        return f"{self.name} ({self.kind}): {self.prompt}"
