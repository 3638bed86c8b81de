"""Helpers shared by the lesson tests."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from distlab.lessons.questions import CORRECT, with_params

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def answered_in_solution():
    """A function: the questions a solution notebook answers in the marker format, in order.

    Each answer cell holds `answer_qN = ...` between the solution markers and ends with `qN.check(answer_qN)`.
    """

    def answered(filename: str) -> list[str]:
        nb = nbformat.read(ROOT / "solutions" / filename, as_version=4)
        names = []
        for cell in nb.cells:
            match = re.search(r"^(q\d+)\.check\(answer_\1\)$", cell.source, re.M)
            if cell.cell_type == "code" and match:
                assert "### BEGIN SOLUTION" in cell.source and "### END SOLUTION" in cell.source
                assert f"answer_{match.group(1)} = " in cell.source
                names.append(match.group(1))
        return names

    return answered


@pytest.fixture
def expect_hand_value():
    """A function: assert that a question expects `want` (a value derived by hand) and accepts it."""

    def expect(question, want):
        if isinstance(want, str):
            assert question.expected() == want
        else:
            assert question.expected() == pytest.approx(want, rel=1e-9)
        assert question.check(want).status == CORRECT

    return expect


@pytest.fixture
def every_variant():
    """A function: every combination of a question's declared variant choices, as questions (issue 15)."""
    import itertools

    def combinations(question):
        names = sorted(question.variants)
        for values in itertools.product(*(question.variants[n] for n in names)):
            yield with_params(question, **dict(zip(names, values)))

    return combinations


@pytest.fixture
def assert_well_posed(every_variant):
    """A function: assert that every variant of a numeric question has a finite positive answer that checks
    correct, an explanation, a fully formatted prompt and hint, and feedback ratios apart from the answer and
    from each other (so each names only its own mistake)."""
    import math

    def check(question):
        for q in every_variant(question):
            want = q.expected()
            assert math.isfinite(want) and want > 0 and q.check(want).status == CORRECT, q.params
            assert q.explain() and "{" not in q.prompt + q.hint_text, q.params
            ratios = sorted(getattr(q, "scale_hint", {}))
            assert all(abs(r - 1) > q.rel_tol for r in ratios), (q.name, q.params)
            assert all(b / a > 1 + q.rel_tol for a, b in zip(ratios, ratios[1:])), (q.name, q.params)

    return check
