"""Red-team round 2 (issue 28), the grader's own memory and decoding: whatever a notebook holds or its kernel sends,
the grading process stays well under 200 MB. Each test names the attack folder (redteam2/<mode>/NN-name) and what it
showed on main; each fails there and passes with the bounds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from distlab.grading import answers
from distlab.grading.kernel import bwrap_available

needs_bwrap = pytest.mark.skipif(not bwrap_available(), reason="bubblewrap (apt-get install bubblewrap) is not here")

#: a child process prints how many MB its peak resident size grew by while running a snippet (VmHWM, the peak of
#: its own memory since exec; ru_maxrss would carry the parent's peak over exec); the inputs are prepared first
PEAK = """
import sys
def hwm():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
{setup}
before = hwm()
{run}
print(round((hwm() - before) / 1024))
"""


def peak_growth_mb(setup: str, run: str) -> int:
    """MB the peak memory of a fresh Python grew by while `run` ran (after `setup`)."""
    code = PEAK.format(setup=setup, run=run)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return int(done.stdout.split()[-1])  # the snippet's own output comes before


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
    # arrays inside an array count with their own elements: 3 x 10 strings of 9,000 characters, 3 x 360 kB
    inner = {"t": "ndarray", "dtype": "x", "v": {"t": "seq", "v": [{"t": "str", "v": "w" * 9000}] * 10}}
    value = answers.decode({"t": "ndarray", "dtype": "x", "v": {"t": "seq", "v": [inner] * 3}})
    assert isinstance(value, answers.OpaqueAnswer) or value.nbytes <= 2**20
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


# default/05-stream-json-string-amplification: a signed "stream" message whose content (under the 8 MB a stream might
# have, 2 of the 64 objects and arrays) holds 1.68 million one-character strings; each decodes to a 76-byte str
# plus an 8-byte list slot: 141 MB per message, 461 MB for three. Now a part of more than MAX_VALUES (4,096) values
# is dropped unread, and a stream's content may be 1 MB (8 MB of ASCII and one emoji decoded to 32 MB twice: the
# grader grew by 64 MB for that one message). Here 200,000 strings in 0.8 MB: main decodes them. The same hole:
# class/18-stream-content-float-array (20 messages of 1.5 M floats, 252 MB) and redteam3 container/01-stream-element-
# flood-grader-memory (8 messages of 1.54 M "ab", 375 MB).
def test_redteam_a_stream_message_of_many_strings_is_dropped_unread():
    from distlab.grading.messages import grading_session

    session = grading_session()
    frames = session.serialize(session.msg("stream", {"name": "stdout", "text": "x", "pad": ["a"] * 200_000}))
    assert len(frames[-1]) < 2**20  # within every size bound
    assert session.deserialize(frames[1:])["msg_type"] == "distlab_dropped"
    # an ordinary stream message of 0.9 MB still arrives: one string is 5 values; one of 7 MB does not (main: it did)
    frames = session.serialize(session.msg("stream", {"name": "stdout", "text": "x" * 900_000}))
    assert session.deserialize(frames[1:])["content"]["text"] == "x" * 900_000
    frames = session.serialize(session.msg("stream", {"name": "stdout", "text": "x" * 7_000_000 + "\U0001f600"}))
    assert session.deserialize(frames[1:])["msg_type"] == "distlab_dropped"


def parse_peak(path: Path) -> tuple[int, list[str], bool]:
    """(MB the peak memory grew by, problems, parsed?) reading and parsing the notebook at `path` in a fresh Python,
    as the grader does (read_submission, parse_sources)."""
    setup = "from pathlib import Path\nfrom distlab.grading.submission import parse_sources, read_submission\np = []"
    run = f"raw = read_submission(Path({str(path)!r}), p)\nok = raw is not None and parse_sources(raw, p) is not None"
    code = PEAK.format(setup=setup, run=run) + "import json\nprint(json.dumps([p, ok]))\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    grown, found = done.stdout.splitlines()[-2:]
    problems, ok = json.loads(found)
    return int(grown), problems, ok


HEAD = b'{"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "source": "answer_q1 = 16"}], "nbformat": 4, '


# container/05-notebook-number-array-grader-memory and class/11-one-array-of-floats-memory: one array of 8.4 million
# "1.5" (32 MB, 3 JSON containers) became 8.4 million floats, 449 MB per read; default/06-submission-string-
# amplification: 6.5 million one-character strings "Ā" (31 MB, 6 containers) became 748 MB. Every value is now
# counted before json.loads (at most MAX_NOTEBOOK_VALUES, 100,000). Here 1.7 million of each in under 8 MB: main
# decodes them; now refused as too big, having made nothing.
def test_redteam_a_notebook_of_millions_of_numbers_or_strings_is_refused_before_decoding(tmp_path):
    for item in (b"1.5", '"\u0100"'.encode()):
        path = tmp_path / "01_memory_wall.ipynb"
        path.write_bytes(HEAD + b'"metadata": {"pad": [' + b",".join([item] * 1_700_000) + b"]}}")
        grown, problems, ok = parse_peak(path)
        assert not ok and any("too big" in p for p in problems), problems
        assert grown < 40, grown


# The largest file accepted: a string of ASCII and one emoji makes the whole decoded file 4 bytes a character, and its
# string again: ~9 bytes of memory per byte of file. Measured (VmHWM): 288 MB at the old 32 MB cap, 72 MB at 8 MB; a
# class run starts at ~118 MB. Now the decoded size is bounded too (MAX_NOTEBOOK_DECODED_BYTES, 40 MB): for each kind
# of text, the largest file accepted (sizes tried from the byte cap down by a tenth) grows the parse by under 50 MB.
def test_redteam_the_largest_notebook_accepted_decodes_within_fifty_megabytes(tmp_path):
    from distlab.grading.submission import MAX_NOTEBOOK_BYTES

    path = tmp_path / "01_memory_wall.ipynb"
    for last in ("", "\u0100", "\U0001f600"):  # 1, 2 and 4 bytes a character in a Python str
        size = MAX_NOTEBOOK_BYTES
        while True:
            pad = b"x" * (size - 200) + last.encode()
            path.write_bytes(HEAD + b'"metadata": {"pad": "' + pad + b'"}}')
            grown, problems, ok = parse_peak(path)
            if ok:
                break
            assert any("too big" in p for p in problems) and grown < 20, (grown, problems)  # the read: 2 x 8 MB
            size = size * 9 // 10
        assert grown < 50, (last, size, grown)


# class/09-utf16-container-count-bypass: a UTF-16-LE notebook whose metadata holds one escaped quote (5c 00 22 00:
# the byte-level counter missed the escape and flipped its string parity) counted 7 containers for 3.5 million "[]"
# (json.loads reads UTF-16 and UTF-32 by itself): 390 MB. Now anything but UTF-8 is refused, byte-order marks too.
# Here 60,000 lists (over MAX_NOTEBOOK_CONTAINERS, 50,000) that main counts as 2 and accepts. The same hole:
# default/20-utf16-notebook-hides-containers (a "Ģ", bytes 22 01, hid 5.4 million lists: 539 MB).
def test_redteam_a_utf16_or_bom_notebook_is_refused_as_not_utf8(tmp_path):
    text = '{"metadata": {"x\\"y": 1}, "nbformat": 4, "cells": [' + "[], " * 60_000 + "[]]}"
    path = tmp_path / "01_memory_wall.ipynb"
    for raw in (text.encode("utf-16-le"), text.encode("utf-32"), b"\xef\xbb\xbf" + HEAD + b'"metadata": {}}'):
        path.write_bytes(raw)
        grown, problems, ok = parse_peak(path)
        assert not ok and any("not UTF-8" in p for p in problems), problems


# class/01-huge-lesson-name-memory: metadata.distlab.lesson of 1.97 million U+E0001 (7.5 MB) was echoed whole (its
# repr: 20 MB) in the problem "this notebook belongs to lesson ...", the row's lesson and the Gradescope output:
# 333 MB of grader memory, a 70.8 MB results.json. Now it is read as a 60-character escaped excerpt. No kernel runs.
def test_redteam_a_huge_lesson_name_is_echoed_as_a_short_excerpt(tmp_path):
    from distlab.grading.grade import grade_notebook

    path = tmp_path / "x.ipynb"
    name = json.dumps("\U000e0001" * 200_000).encode()  # 1.2 MB of escapes, 800 kB as text
    path.write_bytes(HEAD + b'"metadata": {"distlab": {"lesson": ' + name + b"}}}")
    for lesson in ("memory_wall", None):
        grade = grade_notebook(path, lesson=lesson, sandbox="trusted")
        # main: a problem of 2,000,149 characters (the name's repr), kept for the whole run
        assert grade.problems and max(len(p) for p in grade.problems) < 1_000, [len(p) for p in grade.problems]
        assert len(str(grade.lesson)) < 200
        assert grade.problems and not grade.questions or all(q.points == 0 for q in grade.questions)


# container/01 and /13's second phase: root's grader decodes answers.json (up to 16 MB) again. A file of 3 million
# bare "1.5" (12 MB) became 3 million floats (~100 MB) in json.loads before anything looked at it; its values are now
# counted first (gradescope.MAX_ANSWERS_VALUES) and such a file reads as "no answers".
def test_redteam_an_answers_file_of_millions_of_numbers_is_not_decoded(tmp_path):
    path = tmp_path / "answers.json"
    path.write_bytes(b'{"answers": {}, "problems": [' + b",".join([b"1.5"] * 3_000_000) + b"]}")
    setup = "from distlab.grading.gradescope import AnswerReader\nfrom distlab.grading.discover import lesson_questions"
    setup += f"\nq = lesson_questions('memory_wall')\np = []\nreader = AnswerReader({str(path)!r})"
    grown = peak_growth_mb(setup, "assert reader(b'', [], q, p) == {}, p")
    assert grown < 30, grown  # main: 139 MB, now 14


# default/09-error-output-flood and container/18-error-output-flood-grader-memory: one cell sent 400,000 small "error"
# messages (ename 200 characters, evalue 1,000; each within every per-message bound) and the grader appended each as
# an output of the cell, kept until the cell ended: 278 MB (bubblewrap), 429 MB (container). Now a cell keeps its
# first error only, charged to the same budgets as its stdout: at most 3 outputs whatever the kernel sends.
def test_redteam_a_flood_of_error_messages_keeps_one_error_per_cell():
    import nbformat.v4 as v4

    from distlab.grading.kernel import MAX_OUTPUT_CHARS, _client_class

    client = _client_class()(v4.new_notebook())
    error = {"msg_type": "error", "content": {"ename": "E" * 200, "evalue": "v" * 1000, "traceback": []}}
    stdout = {"msg_type": "stream", "content": {"name": "stdout", "text": "x" * 1000}}
    outs: list = []
    for _ in range(5_000):  # main: 5,000 error outputs (10,000 outputs in all) for this one cell
        client.output(outs, error, None, 0)
        client.output(outs, stdout, None, 0)
    assert len(outs) <= 3, len(outs)
    assert [o["output_type"] for o in outs].count("error") == 1
    kept = sum(len(o.get("text", "")) + len(o.get("ename", "")) + len(o.get("evalue", "")) for o in outs)
    assert kept <= MAX_OUTPUT_CHARS  # 200,000 characters: the per-cell budget counts the error too


UNREAD = """
import time
k = get_ipython().kernel
ident = [k.get_parent()["header"]["session"].encode()]  # the grader's session id: its DEALER sockets' identity
big = "x" * (8 * 2**20 - 4096)  # one content frame under the 8 MB MAXMSGSIZE and the relay's bound
for sock in (k.stdin_socket, getattr(k, "control_socket", None)) * 2:
    for i in range(8):
        if sock is not None:
            k.session.send(sock, "input_request", {"prompt": big, "password": False}, ident=ident)
time.sleep(2)
answer_q1 = 16
"""
RUN_UNREAD = """
from pathlib import Path
from distlab.grading.kernel import run_in_kernel
import nbclient, zmq, jupyter_client, ipykernel  # imported before the baseline
base = Path({base!r})
(base / "submission.ipynb").write_text("{{}}")
p = []
"""


# default/02-unread-channels-queue-memory: the kernel sent 8 MB messages on the stdin and control channels (addressed
# to the grader's session id), which the grader never reads: each socket queued 8 of them until the kernel was shut
# down, 222 MB of grader memory (class/16-unread-channel-queues: 10 + 10 such messages, 264 MB). Now the sockets the
# grader does not read take frames of 64 kB at most and queue one; shell and iopub queue 2. Here 2 x 8 messages on each of stdin and control: the run grew the grader by 113 MB on
# main, 43 MB now (27 MB without the messages).
@needs_bwrap
def test_redteam_messages_on_channels_the_grader_never_reads_are_not_queued(tmp_path):
    setup = RUN_UNREAD.format(base=str(tmp_path))
    run = (
        f"got = run_in_kernel([{UNREAD!r}], base / 'work', answer_names=['answer_q1'], timeout=60, cell_timeout=30,"
        " sandbox='bwrap', memory_limit=8 * 2**30, file_size_limit=64 * 2**20, problems=p)\n"
        "assert got == {'answer_q1': 16}, (got, p)"
    )
    assert peak_growth_mb(setup, run) < 60
