"""Helpers shared by the lesson tests."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from distlab.lessons.questions import CORRECT

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
