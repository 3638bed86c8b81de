"""Red-team round 2 (issue 28), the grader's own memory and decoding: whatever a notebook holds or its kernel sends,
the grading process stays well under 200 MB. Each test names the attack folder (redteam2/<mode>/NN-name) and what it
showed on main; each fails there and passes with the bounds.
"""

from __future__ import annotations

import json
import subprocess
import sys

from distlab.grading import answers

#: a child process prints how many MB its peak resident size grew by while running a snippet (ru_maxrss is in kB
#: on Linux); the snippet's inputs are prepared before the baseline is taken
PEAK = """
import resource, sys
{setup}
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
{run}
print(round((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024))
"""


def peak_growth_mb(setup: str, run: str) -> int:
    """MB the peak memory of a fresh Python grew by while `run` ran (after `setup`)."""
    code = PEAK.format(setup=setup, run=run)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return int(done.stdout.split()[-1])


def snapshot(nonce: str, block: dict) -> str:
    return f"DISTLAB-ANSWERS-BEGIN-{nonce}{json.dumps(block)}DISTLAB-ANSWERS-END-{nonce}"


# class/04-forged-snapshot-opaque-classes (and container/01-opaque-class-flood-grader-memory): a forged snapshot of 8
# answers, each a list of 12,000 bare zeros (190 kB of text, within the 200 kB kept per cell), made one new class
# per item in answers.decode: 96,000 classes, ~240 MB and 2.7 s of grader CPU per snapshot (657 MB in a class run;
# 350 MB per phase in the container mode). Bounded: at most MAX_ANSWER_VALUES values per answer and
# MAX_OPAQUE_CLASSES classes per process, so the growth is a few MB (the text itself is 0.2 MB).
def test_redteam_a_snapshot_of_many_opaque_items_makes_no_class_per_item():
    setup = (
        "import json\nfrom distlab.grading import answers\n"
        "names = [f'answer_q{i}' for i in range(8)]\n"
        "block = {n: {'t': 'seq', 'v': [0] * 12000} for n in names}\n"
        "text = 'DISTLAB-ANSWERS-BEGIN-n' + json.dumps(block) + 'DISTLAB-ANSWERS-END-n'\n"
        "classes = len(answers.OpaqueAnswer.__subclasses__())"
    )
    run = (
        "got = answers.parse_answers(text, 'n')\n"
        "print(len(answers.OpaqueAnswer.__subclasses__()) - classes, file=sys.stderr)\n"
        "assert len(got) == 8"
    )
    assert peak_growth_mb(setup, run) < 40
    # in this process too: the number of classes does not grow with the items (96,000 on main)
    before = len(answers.OpaqueAnswer.__subclasses__())
    got = answers.parse_answers(snapshot("n", {"answer_q1": {"t": "seq", "v": [0] * 5000}}), "n")
    assert got is not None and isinstance(got["answer_q1"], answers.OpaqueAnswer)  # too large: one opaque answer
    assert len(answers.OpaqueAnswer.__subclasses__()) - before <= answers.MAX_OPAQUE_CLASSES


def test_an_answer_within_the_bounds_still_decodes_whole():
    # 1,000 numbers (2 values each side of MAX_ANSWER_VALUES = 4,096: the list and its items) are a real answer
    entry = {"t": "seq", "kind": "list", "v": [{"t": "int", "v": str(i)} for i in range(1000)]}
    assert answers.decode(entry) == list(range(1000))


# container/13-ndarray-unicode-width-grader-memory: an "ndarray" answer of one 10,000-character string and 8,500 empty
# ones (~180 kB of text) made np.array widen every element to '<U10000': 8,501 x 40,000 B = 340 MB (~400 MB per
# phase). Here 2,000 empty strings: 2,001 x 40,000 B = 80 MB on main; bounded to MAX_ARRAY_BYTES (1 MB) before numpy
# builds anything.
def test_redteam_an_array_of_one_long_string_is_not_widened_to_megabytes():
    items = [{"t": "str", "v": "w" * 10_000}] + [{"t": "str", "v": ""}] * 2000
    entry = {"t": "ndarray", "dtype": "<U10000", "v": {"t": "seq", "kind": "list", "v": items}}
    value = answers.decode(entry)
    assert isinstance(value, answers.OpaqueAnswer) or value.nbytes <= 2**20  # 1 MB
    # a real array of numbers still decodes: 3 float64 = 24 bytes
    numbers = {"t": "seq", "kind": "list", "v": [{"t": "float", "v": "1.5"}] * 3}
    assert answers.decode({"t": "ndarray", "dtype": "float64", "v": numbers}).tolist() == [1.5, 1.5, 1.5]


# default/17-answer-decode-dtype-syntaxerror: numpy evaluates dtype strings such as "(1," and raises SyntaxError,
# which escaped parse_answers (it caught ValueError, TypeError, KeyError, OverflowError) and dropped EVERY answer of
# the notebook ("the notebook could not be run: SyntaxError"). Now that answer alone is opaque.
def test_redteam_an_odd_dtype_string_makes_that_answer_opaque_not_the_snapshot_fail():
    block = {
        "answer_q1": {"t": "int", "v": "16"},
        "answer_q2": {"t": "ndarray", "dtype": "(1,", "v": {"t": "seq", "v": []}},
    }
    got = answers.parse_answers(snapshot("n", block), "n")
    assert got is not None and got["answer_q1"] == 16
    assert isinstance(got["answer_q2"], answers.OpaqueAnswer)


def test_only_the_lessons_answer_names_are_decoded():
    block = {f"answer_junk{i}": {"t": "int", "v": "1"} for i in range(100)} | {"answer_q1": {"t": "int", "v": "16"}}
    assert answers.parse_answers(snapshot("n", block), "n", {"answer_q1"}) == {"answer_q1": 16}
    assert len(answers.parse_answers(snapshot("n", block), "n")) == answers.MAX_ANSWERS
