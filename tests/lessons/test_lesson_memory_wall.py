"""Lesson 1's graded questions: the choice question, and q6 from memory.min_gpus_to_fit.

(tests/grading/test_questions.py checks the answer reading on lesson 1's q2; tests/lessons/test_manifest.py
that every question has a hint and a computed solution.)
"""

from __future__ import annotations

import doctest
import math

from distlab import memory
from distlab.lessons.questions import CORRECT, INCORRECT
from distlab.lessons import memory_wall as lesson


def test_choice_question():
    q7 = lesson.q7
    assert q7.check("No").correct and q7.check(False).correct
    assert q7.check("yes").status == INCORRECT
    assert "not one of" in q7.check("maybe").message


def test_q6_by_hand():
    # 70e9 x 16 B = 1,120 GB of model states; ZeRO-3 over N GPUs: 1,120 / N <= 80 needs N >= 14
    assert lesson.q6.expected() == math.ceil(70e9 * 16 / 80e9) == 14
    assert lesson.q6.check(14).status == CORRECT and lesson.q6.check(13).status == INCORRECT
    assert "1,120 GB / N <= 80 GB needs N >= 14" in lesson.q6.solution().text


def test_min_gpus_to_fit_worked_example_runs():
    # the docstring's example, run as a doctest
    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner()
    tests = finder.find(memory.min_gpus_to_fit, "min_gpus_to_fit", globs=vars(memory))
    for test in tests:
        runner.run(test)
    assert tests and runner.summarize(verbose=False).failed == 0
