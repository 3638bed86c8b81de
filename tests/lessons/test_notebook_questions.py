"""The question a student reads in a lesson's notebook states the same given numbers as the question the grader
checks (distlab.lessons: each question's prompt, whose numbers the step model computes at import).

A notebook's "**Qn.**" cell is hand-written; when the step model moves (issue 14), a prompt's "the step model gives
10.504 s" follows it and the notebook's text does not. A student who estimates from the notebook's stale number is
then graded against another one (lesson 7 q5, lesson 8 q1 and q5 and lesson 8b q4 were, on 2026-11-24)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from distlab.lessons import LESSONS

ROOT = Path(__file__).resolve().parents[2]
#: A given number: one with a decimal point (a time, a rate, a size the model or the catalog computes) or a
#: percentage (an efficiency); counts and degrees (2, 8, 256) are the configuration, written in many ways ("DP = 256"
#: for "dp256").
DECIMAL = re.compile(r"\d[\d,]*\.\d+|\d[\d,]*(?:\.\d+)?\s?%")


def _decimals(text: str) -> set[str]:
    return {m.replace(",", "").replace(" ", "") for m in DECIMAL.findall(text)}


def _cases():
    for slug, lesson in LESSONS.items():
        path = ROOT / "solutions" / Path(lesson.notebook).name
        if not path.exists():
            continue
        cells = [c for c in json.loads(path.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "markdown"]
        for name, question in lesson.load_questions().items():
            text = next(
                ("".join(c["source"]) for c in cells if "".join(c["source"]).startswith(f"**{name.upper()}.**")), None
            )
            if text is not None:
                yield pytest.param(slug, question, text, id=f"{slug}-{name}")


def test_the_check_finds_a_stale_number():
    # lesson 8 q1 as its notebook stated it before the step model moved: 235.92 ms against the prompt's 223.02
    assert _decimals("Backward takes $T$ = 235.92 ms; L = 182.0 µs") - _decimals("T = 223.02 ms; L = 182.0 us") == {
        "235.92"
    }
    # lesson 8 q5: the notebook's "attention at 50 %" against the prompt's 335 TFLOP/s
    assert _decimals("attention at 50 % of the H100's 989.4 TFLOP/s") - _decimals("at 335 TFLOP/s, of 989.4") == {"50%"}


@pytest.mark.parametrize(("slug", "question", "text"), list(_cases()))
def test_the_notebooks_question_states_the_graded_prompts_numbers(slug, question, text):
    prompt = question.prompt.format(**question.params) if question.params else question.prompt  # as questions.py
    stale = _decimals(text) - _decimals(prompt)
    assert not stale, (
        f"{slug} {question.name}: the notebook states {sorted(stale)}, the graded prompt does not: {prompt}"
    )


def test_every_lesson_has_its_questions_in_a_notebook():
    # so that the check above runs over the course, not over nothing
    assert len(list(_cases())) >= 80
