"""Red team, class grading with a roster (issue 28): attacks of a hostile class on `distlab grade --out`.

Each test asserts the secure behaviour and FAILS while the hole it reproduces exists. Where the attack is on the
class runner (not on the kernel), the kernel is replaced by a stand-in (grade_one, or grade_notebook's run=), as in
test_class_integrity.py.
"""

from __future__ import annotations

import csv
import io
import json
import os

import pytest

from class_helpers import SECRET, write_roster
from distlab.grading import classroom, variants
from distlab.grading.kernel import bwrap_available
from distlab.grading.report import NotebookGrade, QuestionGrade

pytestmark = [
    pytest.mark.notebook,
    pytest.mark.skipif(not bwrap_available(), reason="bubblewrap (apt-get install bubblewrap) is not here"),
]


def _grader(calls=None):
    """A grade_notebook stand-in: one question, no points; the student is the first identity given."""

    def grade_one(path, identity=None, **options):
        if calls is not None:
            calls.append(str(path))
        return NotebookGrade(
            str(path),
            "memory_wall",
            [QuestionGrade("q1", "incorrect", 0.0, 1.0, "fb", "p")],
            [],
            sandbox="bwrap",
            student=(identity or ("",))[0],
        )

    return grade_one


def _notebook(path, text="{}"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# ---- (e) a file name crashes the whole class run, on every re-run --------------------------------------------


def test_a_file_name_that_is_not_utf8_does_not_crash_the_class_run(tmp_path, monkeypatch):
    # the attack: a student names the notebook with a byte that is not UTF-8 (b"\xff"); the key keeps it as a
    # lone surrogate, the journal line is written (ASCII JSON), then results.csv (UTF-8) raises
    # UnicodeEncodeError: the run stops with a traceback, results.json/summary are never written for anybody,
    # and every re-run reads the same journal line and crashes again
    _notebook(tmp_path / "submitted" / "alice" / "01_memory_wall.ipynb")
    bob = tmp_path / "submitted" / "bob"
    bob.mkdir(parents=True)
    with open(os.path.join(os.fsencode(bob), b"01_memory_wall\xff.ipynb"), "w") as f:
        f.write("{}")
    monkeypatch.chdir(tmp_path)
    for _run in range(2):  # the first run, and the re-run that resumes from the journal
        report = classroom.grade_class(["submitted"], tmp_path / "g", progress=False, grade_one=_grader())
        assert len(report.notebooks) == 2
        assert (tmp_path / "g" / "results.json").is_file()
        rows = list(csv.reader(io.StringIO((tmp_path / "g" / "results.csv").read_text(encoding="utf-8"))))
        assert len(rows) == 3


# ---- (a) grades from a run without the roster survive the re-run with it ------------------------------------


def test_a_rerun_with_the_roster_does_not_keep_a_grade_given_without_it(tmp_path, monkeypatch):
    # the attack: mallory hands in bob's notebook (bob's seed, bob's answers). The instructor first runs the class
    # without --roster (variants are then graded with the seed they carry, "not verified": mallory gets full
    # marks), then runs the same command with --roster --secret-file into the same --out. The journal does not
    # record what a grade was graded under, so mallory's notebook is "already graded" and skipped: her full
    # marks stay, although a fresh run with the roster refuses the borrowed seed.
    roster_csv, secret = write_roster(tmp_path, ("alice", "bob", "mallory"))
    roster = variants.load_roster(roster_csv, variants.read_secret(secret))
    bob_seed = roster.seed("memory_wall", "bob")
    nb = {
        "cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": "x = 1"}],
        "metadata": {"distlab": {"lesson": "memory_wall", "variant": {"student": "bob", "seed": bob_seed}}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    for student in ("bob", "mallory"):
        _notebook(tmp_path / "submitted" / student / "01_memory_wall.ipynb", json.dumps(nb))

    def run(raw, sources, questions, problems, **options):  # every answer right for the numbers graded against
        return {f"answer_{name}": q.expected() for name, q in questions.items()}

    monkeypatch.chdir(tmp_path)
    out = tmp_path / "grades"
    options = dict(progress=False, lesson="memory_wall", run=run)
    first = classroom.grade_class(["submitted"], out, **options)  # without the roster
    assert {g.path.split("/")[-2]: g.score for g in first.notebooks} == {"bob": 8.0, "mallory": 8.0}
    fresh = classroom.grade_class(
        ["submitted"], tmp_path / "fresh", variants=variants.VariantPolicy(roster), **options
    )  # what the roster says
    assert {g.path.split("/")[-2]: g.score for g in fresh.notebooks} == {"bob": 8.0, "mallory": 0.0}
    again = classroom.grade_class(["submitted"], out, variants=variants.VariantPolicy(roster), **options)
    scores = {g.path.split("/")[-2]: g.score for g in again.notebooks}
    assert scores["mallory"] == 0.0, "the re-run with the roster kept the grade given without it"
    assert any(str(p).startswith("refused") for g in again.notebooks if "mallory" in g.path for p in g.problems)


# ---- (c) one student's Gradescope results overwrite another's ------------------------------------------------


def test_two_notebooks_never_share_a_gradescope_results_file(tmp_path, monkeypatch):
    # the attack: gradescope/<first 8 hex digits of sha256(key)>-<stem>.json; 32 bits of hash, and the student
    # chooses the folders and file name inside their submission: with the same stem as the victim's notebook,
    # ~2^32 tries (minutes of CPU) find a path whose file name equals the victim's, and the later row's results
    # overwrite the earlier one (here two keys found in 2^16 tries, the birthday bound)
    for student in ("s8935", "s50344"):  # sha256("submitted/<s>/01_memory_wall.ipynb") both start 3b272a33
        _notebook(tmp_path / "submitted" / student / "01_memory_wall.ipynb", json.dumps({"who": student}))
    monkeypatch.chdir(tmp_path)
    report = classroom.grade_class(["submitted"], tmp_path / "g", progress=False, grade_one=_grader())
    assert len(report.notebooks) == 2
    assert len(os.listdir(tmp_path / "g" / "gradescope")) == 2, "one notebook's gradescope results were overwritten"


# ---- (f) terminal control sequences from a file name reach the instructor's terminal -------------------------


def test_the_progress_bar_writes_no_control_characters_from_a_file_name(tmp_path, monkeypatch):
    # the attack: a notebook named "\x1b]0;pwned\x07\x1b[2J.ipynb" (OSC: retitle the terminal; with OSC 52 it
    # writes the instructor's clipboard; CSI 2J clears the screen, hiding earlier lines): the progress bar
    # printed the last 40 characters of the key raw on stderr
    _notebook(tmp_path / "submitted" / "alice" / "\x1b]0;pwned\x07\x1b[2J.ipynb")

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    for stream in (Terminal(), io.StringIO()):
        monkeypatch.chdir(tmp_path)
        out = tmp_path / f"g{id(stream)}"
        classroom.grade_class(["submitted"], out, progress=True, stream=stream, grade_one=_grader())
        text = stream.getvalue()
        assert "\x1b]" not in text and "\x07" not in text and "\x1b[2J" not in text


# ---- (e) a huge (sparse) file holds the class run for hours, before any size check -----------------------------


def test_the_class_run_never_reads_more_of_a_file_than_a_notebook_may_have(tmp_path, monkeypatch):
    # the attack: the student's "notebook" is a sparse file of terabytes (no disk used; or a zip bomb of zeros
    # unpacked into the export). grade_class hashes every file whole (file_digest) before read_submission's
    # 32 MB check, twice per run and again on every re-run: 8 GiB took 109 s to hash here, 1 TB takes hours,
    # during which nobody else is graded
    from distlab.grading.submission import MAX_NOTEBOOK_BYTES

    big = tmp_path / "submitted" / "mallory" / "01_memory_wall.ipynb"
    big.parent.mkdir(parents=True)
    with open(big, "wb") as f:
        f.truncate(2**40)  # 1 TiB, sparse
    _notebook(tmp_path / "submitted" / "alice" / "01_memory_wall.ipynb")
    read = [0]
    real_open = open

    class Counting:
        def __init__(self, f):
            self.f = f

        def read(self, n=-1):
            data = self.f.read(n)
            read[0] += len(data)
            if read[0] > 4 * MAX_NOTEBOOK_BYTES:
                raise RuntimeError(f"the class runner read {read[0]} bytes of one submission")
            return data

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def __getattr__(self, name):
            return getattr(self.f, name)

    def counting_open(path, mode="r", *args, **kwargs):
        f = real_open(path, mode, *args, **kwargs)
        return Counting(f) if "b" in mode and "r" in mode and str(path).endswith(".ipynb") else f

    monkeypatch.setattr(classroom, "open", counting_open, raising=False)
    monkeypatch.chdir(tmp_path)
    report = classroom.grade_class(["submitted"], tmp_path / "g", progress=False, grade_one=_grader())
    assert len(report.notebooks) == 2


# ---- (e) one student's upload set multiplies the class run's time ---------------------------------------------


def test_one_student_cannot_make_the_class_run_a_kernel_per_uploaded_file(tmp_path, monkeypatch):
    # the attack: the upload set is the student's (a Gradescope export, a per-student folder): 40 copies of a
    # notebook whose cells sleep until the per-notebook limit (300 s by default) are 40 kernels, 3 h 20 min of
    # the class run; 1,000 files are 83 hours. Every *.ipynb is graded (flagged, "never merged"); nothing bounds
    # the kernels one student's folder costs (the Gradescope autograder grades one notebook per submission)
    for i in range(40):
        _notebook(tmp_path / "submitted" / "mallory" / f"copy{i:02d}" / "01_memory_wall.ipynb", json.dumps({"i": i}))
    _notebook(tmp_path / "submitted" / "alice" / "01_memory_wall.ipynb")
    calls = []
    monkeypatch.chdir(tmp_path)
    classroom.grade_class(["submitted"], tmp_path / "g", progress=False, grade_one=_grader(calls))
    mallory = [c for c in calls if "/mallory/" in c]
    assert len(mallory) < 40, f"{len(mallory)} kernels for one student's folder"


# ---- (a) the journal records the digest of bytes that were not the ones graded ------------------------------


def test_the_journal_keeps_the_digest_of_the_bytes_that_were_graded(tmp_path, monkeypatch):
    # the attack (a notebook the student can still write while the class is graded, e.g. a hub's home folder):
    # grade_class hashes the file, then grade_notebook opens it again. The student swaps in copied work between
    # the two and puts their own file back afterwards: the journal says "graded" for the digest of their own
    # file with the grade of the copied work, so every re-run skips it, and the file an instructor reviews for
    # plagiarism is not the one that earned the points
    own, copied = json.dumps({"work": "own"}), json.dumps({"work": "copied"})
    nb = _notebook(tmp_path / "submitted" / "mallory" / "01_memory_wall.ipynb", own)
    calls = []

    def grade_one(path, identity=None, **options):
        calls.append(str(path))
        if len(calls) == 1:
            nb.write_text(copied)  # the swap, after the runner hashed the file
        points = 1.0 if "copied" in path.read_text() else 0.0
        nb.write_text(own)  # and back
        return NotebookGrade(
            str(path),
            "memory_wall",
            [QuestionGrade("q1", "correct" if points else "incorrect", points, 1.0, "fb", "p")],
            [],
            sandbox="bwrap",
            student=(identity or ("",))[0],
        )

    monkeypatch.chdir(tmp_path)
    classroom.grade_class(["submitted"], tmp_path / "g", progress=False, grade_one=grade_one)
    report = classroom.grade_class(["submitted"], tmp_path / "g", progress=False, grade_one=grade_one)
    assert report.notebooks[0].score == 0.0, "the grade of bytes no longer in the file was kept on the re-run"


# ---- (a) a submitter's e-mail that only looks like a classmate's resolves to that classmate -------------------


@pytest.mark.parametrize(
    "email",
    ["\u212aate@uni.example", "kate@uni.example\u3000", "\u00a0kate@uni.example", "kate@uni.example\x85"],
    ids=["kelvin-sign", "ideographic-space", "no-break-space", "next-line"],
)
def test_an_email_that_only_looks_like_a_classmates_is_not_theirs(tmp_path, email):
    # the attack: the export's :email: is the submitter's account e-mail (the student's choice, where the
    # platform accepts non-ASCII addresses). Roster.find compares str.lower() and str.strip() of it: the KELVIN
    # SIGN (U+212A) lowers to an ASCII "k", and Unicode spaces (U+3000, U+00A0, U+0085) are stripped, so
    # "\u212aate@uni.example" is graded as kate, with kate's seed, filed under kate
    roster_csv, secret = write_roster(tmp_path, ("kate", "mallory"))
    roster = variants.load_roster(roster_csv, SECRET)
    export = tmp_path / "export"
    _notebook(export / "submission_1" / "01_memory_wall.ipynb")
    (export / "submission_metadata.yml").write_text(
        "submission_1:\n  :submitters:\n  - :name: Mallory\n    :email: " + json.dumps(email) + "\n",
        encoding="utf-8",
    )
    ids = classroom.read_gradescope_export(export / "submission_metadata.yml")["submission_1"]
    assert roster.find(*ids) != "kate", f"{email!r} was taken for kate"


# ---- (e) a lone surrogate in the variant seed crashes grade_notebook, and with it the class run -----------------


def test_a_seed_with_a_lone_surrogate_does_not_crash_the_class_run(tmp_path, monkeypatch):
    # the attack: metadata.distlab.variant.seed = "\ud800" (a JSON escape, valid JSON). Without --roster the seed
    # is used as written: lesson_variant() hashes f"...{seed}...".encode() and raises UnicodeEncodeError out of
    # grade_notebook ("never raises for anything the file contains"); the class run stops at this notebook, the
    # ones after it are never graded, and every re-run stops there again
    nb = {
        "cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": "x = 1"}],
        "metadata": {"distlab": {"lesson": "memory_wall", "variant": {"student": "mallory", "seed": "\ud800"}}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    _notebook(tmp_path / "submitted" / "mallory" / "01_memory_wall.ipynb", json.dumps(nb))  # ASCII: "\\ud800"
    _notebook(tmp_path / "submitted" / "zoe" / "01_memory_wall.ipynb", json.dumps({**nb, "metadata": {}}))
    monkeypatch.chdir(tmp_path)
    report = classroom.grade_class(
        ["submitted"], tmp_path / "g", progress=False, lesson="memory_wall", run=lambda *a, **k: {}
    )
    assert len(report.notebooks) == 2
    assert (tmp_path / "g" / "results.json").is_file()


# ---- (a) a subfolder named after a classmate files the notebook under the classmate ---------------------------


def test_a_subfolder_named_after_a_classmate_does_not_make_the_notebook_theirs(tmp_path, monkeypatch):
    # the attack: the instructor gives the per-student folders one by one (distlab grade submitted/* --out ...
    # --roster ...). Each given folder is then its own root, so the "per-student folder" becomes the first folder
    # INSIDE it: alice's and bob's notebooks name nobody (refused), and mallory's submitted/mallory/bob/x.ipynb,
    # a folder of her own upload set, is graded as bob's, with bob's seed, filed under bob (seen with the real
    # CLI: the only row of student bob is mallory's notebook)
    for rel in ("alice/01_memory_wall.ipynb", "bob/01_memory_wall.ipynb", "mallory/bob/01_memory_wall.ipynb"):
        _notebook(tmp_path / "submitted" / rel)
    monkeypatch.chdir(tmp_path)
    report = classroom.grade_class(
        ["submitted/alice", "submitted/bob", "submitted/mallory"], tmp_path / "g", progress=False, grade_one=_grader()
    )
    owner = {g.path.split("submitted/")[1]: g.student for g in report.notebooks}
    assert owner["mallory/bob/01_memory_wall.ipynb"] != "bob", "mallory's notebook was filed under bob"


def test_a_submission_metadata_yml_a_student_uploads_names_nobody(tmp_path, monkeypatch):
    # the attack (same invocation, submitted/* given one by one): mallory uploads her own submission_metadata.yml
    # ("x: {:submitters: [{:sid: bob}]}") and x/01_memory_wall.ipynb; her folder is read as a Gradescope export
    # and her notebook is filed under bob
    _notebook(tmp_path / "submitted" / "alice" / "01_memory_wall.ipynb")
    _notebook(tmp_path / "submitted" / "mallory" / "x" / "01_memory_wall.ipynb")
    (tmp_path / "submitted" / "mallory" / "submission_metadata.yml").write_text("x:\n  :submitters:\n  - :sid: bob\n")
    monkeypatch.chdir(tmp_path)
    report = classroom.grade_class(
        ["submitted/alice", "submitted/mallory"], tmp_path / "g", progress=False, grade_one=_grader()
    )
    assert all(g.student != "bob" for g in report.notebooks), "a student's own YAML filed her notebook under bob"
