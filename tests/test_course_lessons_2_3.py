"""Graded questions of lessons 2 (collectives) and 3 (data parallelism and ZeRO).

Every expected value is derived here by hand, independently of the check's own computation.
Link figures used by hand: NVLink 4 450 GB/s per direction (900 GB/s bidirectional, NVIDIA H100
datasheet), InfiniBand NDR 400 Gb/s = 50 GB/s; alpha 3.4 us and 9.6 us (NCCL tuning model).
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from distlab.course import collectives as lesson2
from distlab.course import data_parallel as lesson3
from distlab.course.checks import CORRECT, INCORRECT, NOT_ATTEMPTED

ROOT = Path(__file__).resolve().parents[1]
MODULES = {"02_collectives.ipynb": lesson2, "03_data_parallel_zero.ipynb": lesson3}


def _t(m, n, bw, alpha):
    return 2 * (n - 1) * alpha + 2 * (n - 1) / n * m / bw


HAND = {
    # 2(N-1)/N x M = 2 x 7/8 x 4 GB
    (lesson2, "q1"): 7.0,
    # the server sends M back to each of N-1 = 7 workers: 7 x 4 GB
    (lesson2, "q2"): 28.0,
    # 14 x 3.4 us + 24.5 GB / 450 GB/s = 0.0476 ms + 54.444 ms
    (lesson2, "q3"): _t(14e9, 8, 450e9, 3.4e-6) * 1e3,
    # M* = N alpha B = 8 x 9.6 us x 50 GB/s = 3.84 MB
    (lesson2, "q4"): 3.84,
    (lesson2, "q5"): "no",
    (lesson2, "q6"): _t(14e9, 8, 50e9, 9.6e-6) / _t(14e9, 8, 450e9, 3.4e-6),
    # (2 + 2 + 12/16) x 7.5e9 B = 35.625 GB (ZeRO paper, Table 1: 35.6)
    (lesson3, "q1"): 35.625,
    # 3 x 7/8 x 14 GB
    (lesson3, "q2"): 36.75,
    (lesson3, "q3"): "no",
    # buckets of 62.5 ms ready every 50 ms: the last ends at 50 + 4 x 62.5 = 300 ms -> 100 ms exposed
    (lesson3, "q4"): 100.0,
    # buckets of 15 ms ready every 37.5 ms: only the last one, 15 ms, is exposed
    (lesson3, "q5"): 15.0,
    # 18.45e9 params over 8: ZeRO-1 5.5 x 18.45 = 101 GB > 80; ZeRO-2 3.75 x 18.45 = 69.2 GB <= 80
    (lesson3, "q6"): "zero-2",
}


@pytest.mark.parametrize("module", [lesson2, lesson3], ids=["lesson2", "lesson3"])
def test_questions_have_hints_solutions_and_start_unanswered(module):
    assert 4 <= len(module.QUESTIONS) <= 6
    for name, q in module.QUESTIONS.items():
        assert q.name == name and q.prompt
        assert q.hint().text and q.solution().text
        assert q.check(None).status == NOT_ATTEMPTED


@pytest.mark.parametrize("key", list(HAND), ids=lambda k: f"{k[0].__name__.rsplit('.', 1)[1]}-{k[1]}")
def test_expected_values_equal_the_hand_derivations(key):
    module, name = key
    q = module.QUESTIONS[name]
    want = HAND[key]
    if isinstance(want, str):
        assert q.expected() == want
    else:
        assert q.expected() == pytest.approx(want, rel=1e-9)
    assert q.check(want).status == CORRECT


@pytest.mark.parametrize(
    "q, answer, words",
    [
        (lesson2.q1, 8, "2 x M"),  # forgot the (N-1)/N
        (lesson2.q1, 4, "count both phases"),
        (lesson2.q1, 7e9, "looks like bytes"),
        (lesson2.q3, _t(14e9, 8, 900e9, 3.4e-6) * 1e3, "both directions"),  # the datasheet's 900 GB/s
        (lesson2.q4, 3.84e6, "looks like bytes"),
        (lesson2.q5, "yes", "not right"),
        (lesson3.q1, 120, "plain DP"),
        (lesson3.q2, 42, "large-N volume"),
        (lesson3.q2, 24.5, "plain DP's all-reduce"),
        (lesson3.q4, 50, "first bucket"),
        (lesson3.q4, 62.5, "last bucket alone"),
        (lesson3.q6, "zero-3", "not right"),
        (lesson3.q6, "zero-9", "not one of"),
    ],
)
def test_wrong_answers_say_why(q, answer, words):
    result = q.check(answer)
    assert result.status == INCORRECT and result.message.startswith("not yet, because") and words in result.message


def test_answers_with_units():
    assert lesson2.q1.check("7e9 B").correct and lesson2.q1.check("7000 MB").correct
    assert lesson2.q3.check("0.0545 s").correct and lesson2.q4.check("3840 kB").correct
    assert lesson3.q4.check("0.1 s").correct and lesson3.q6.check("ZeRO-2").correct


@pytest.mark.parametrize("filename", sorted(MODULES))
def test_solution_notebook_answers_every_question_in_the_marker_format(filename):
    nb = nbformat.read(ROOT / "solutions" / filename, as_version=4)
    module = MODULES[filename]
    answered = []
    for cell in nb.cells:
        match = re.search(r"^(q\d+)\.check\(answer_\1\)$", cell.source, re.M)
        if cell.cell_type == "code" and match:
            assert "### BEGIN SOLUTION" in cell.source and "### END SOLUTION" in cell.source
            assert f"answer_{match.group(1)} = " in cell.source
            answered.append(match.group(1))
    assert answered == list(module.QUESTIONS)
