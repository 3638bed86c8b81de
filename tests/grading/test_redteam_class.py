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

from class_helpers import SECRET, stand_in_grade, write_roster
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
    roster_csv, secret = write_roster(tmp_path, ("bob", "mallory"))  # each with a folder (a roster student
    roster = variants.load_roster(roster_csv, variants.read_secret(secret))  # without one gets a row of its own)
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
        return stand_in_grade(path, identity, points)

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


# ---- round 2 (/work/redteam/class): the walk, one upload's size, escapes, leftovers ----------------------------


def _rows(out):
    return list(csv.reader(io.StringIO((out / "results.csv").read_text(encoding="utf-8"))))


def test_a_folder_nested_deeper_than_python_recursion_grades_the_rest_of_the_class(tmp_path, monkeypatch):
    # attack 02: mallory's upload holds a/a/a/... 1,200 folders deep (2.4 kB of path, under PATH_MAX) with a
    # notebook at the bottom; the recursive walk (Path.rglob) raised RecursionError out of collect(): rc 1, no
    # results.csv, nobody in the class graded, on every re-run
    _notebook(tmp_path / "submitted" / "alice" / "01_memory_wall.ipynb")
    deep = tmp_path / "submitted" / "mallory"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    for _ in range(1200):  # relative mkdir/chdir: each call's path stays short
        os.mkdir("a")
        os.chdir("a")
    with open("x.ipynb", "w") as f:
        f.write("{}")
    monkeypatch.chdir(tmp_path)
    calls = []
    try:
        classroom.grade_class(["submitted"], tmp_path / "g", progress=False, grade_one=_grader(calls))
    finally:
        _remove_deep(deep, "a")  # shutil.rmtree recurses too: pytest could not remove it
    rows = _rows(tmp_path / "g")
    assert [r[0] for r in rows[1:]] == ["submitted/alice/01_memory_wall.ipynb", "submitted/mallory/"]
    assert "deeper than 16 levels" in rows[2][-2]  # the student whose folder was not searched is told why
    assert len(calls) == 1


def _remove_deep(top, name):
    """Remove top/name/name/... however deep, without recursion (relative paths stay short)."""
    here = os.getcwd()
    os.chdir(top)
    depth = 0
    while os.path.isdir(name):
        os.chdir(name)
        depth += 1
    for entry in os.listdir("."):
        os.unlink(entry)
    for _ in range(depth):
        os.chdir("..")
        os.rmdir(name)
    os.chdir(here)


def test_a_path_too_long_to_open_is_noted_on_that_student_and_the_class_is_graded(tmp_path, monkeypatch):
    # attack 03: 20 folders of 250-character names (5 kB of path, past PATH_MAX at depth 17): os.scandir raised
    # ENAMETOOLONG, which rglob does not ignore: the whole class run stopped. With the depth bound raised past 20,
    # the walk goes down: since red team round 26 it opens each folder from the one before it (beneath.open_folder),
    # so no long path is ever opened and nothing fails
    from distlab.grading import class_submissions

    monkeypatch.setattr(class_submissions, "MAX_DEPTH", 64, raising=False)
    _notebook(tmp_path / "submitted" / "alice" / "01_memory_wall.ipynb")
    _notebook(tmp_path / "submitted" / "mallory" / "01_memory_wall.ipynb")
    monkeypatch.chdir(tmp_path / "submitted" / "mallory")
    for _ in range(20):
        os.mkdir("b" * 250)
        os.chdir("b" * 250)
    monkeypatch.chdir(tmp_path)
    calls = []
    classroom.grade_class(["submitted"], tmp_path / "g", progress=False, grade_one=_grader(calls))
    rows = _rows(tmp_path / "g")
    assert [r[0] for r in rows[1:]] == [
        "submitted/alice/01_memory_wall.ipynb",
        "submitted/mallory/01_memory_wall.ipynb",
    ]
    assert "could not be read" not in rows[2][-2]  # walked to the bottom, 5 kB of path, without an error
    assert len(calls) == 2


def test_thousands_of_files_in_one_upload_cost_the_class_run_a_bounded_amount(tmp_path, monkeypatch):
    # attack 05: 3,000 empty *.ipynb files beside mallory's notebook were 3,001 rows, each "flagged" with the list
    # of all 3,000 others (N^2: results.csv ~ 360 MB, the grader 748 MB; 20,000 files: 9.75 GB, killed). Now at
    # most MAX_CANDIDATES of one student's notebooks are rows, the rest counted in one note, and a flag names at
    # most FLAG_NAMES others: results.csv grows with the class, not with what one student uploads
    from distlab.grading import class_results, class_submissions

    _notebook(tmp_path / "submitted" / "alice" / "01_memory_wall.ipynb")
    mallory = _notebook(tmp_path / "submitted" / "mallory" / "01_memory_wall.ipynb").parent
    for i in range(3000):
        (mallory / f"z{i:06d}.ipynb").touch()
    monkeypatch.chdir(tmp_path)
    calls = []
    classroom.grade_class(["submitted"], tmp_path / "g", progress=False, grade_one=_grader(calls), lesson="memory_wall")
    rows = _rows(tmp_path / "g")
    keep = getattr(class_submissions, "MAX_CANDIDATES", 20)
    assert len(rows) == 1 + 1 + keep  # header, alice, mallory's 20 likeliest
    assert rows[2][0] == "submitted/mallory/01_memory_wall.ipynb"  # the exercise file name is among them, graded
    assert len(calls) == 2  # one kernel for alice, one for mallory
    # 3,001 notebooks - 20 kept = 2,981 counted in one note; 20 - 1 - FLAG_NAMES (5) = 14 more in each flag
    assert "2981 more notebooks in this upload were not considered" in rows[2][-2]
    assert rows[2][-1].endswith("and 14 more; each is graded on its own, not merged")
    assert getattr(class_results, "FLAG_NAMES", 5) == 5
    assert max(len(c) for r in rows for c in r) < 3000
    assert (tmp_path / "g" / "results.csv").stat().st_size < 100_000


def test_notebook_text_and_file_names_reach_no_output_with_control_characters(tmp_path, monkeypatch):
    # attacks 15 and 16: an exception message with ESC/BEL/OSC (clear the screen, print "ALL CORRECT", retitle
    # the window), a class name with U+202E, and a file name with ESC and a newline ("...\nbob,8.ipynb") reached
    # results.csv raw: `cat results.csv` ran them, and line-based tools read a row of bob. Every text output now
    # shows them through report.shown (escaped, one line, cut)
    evil = "\x1b[2J\x1b[H\x1b[32mALL CORRECT\x1b]0;pwned\x07\nbob,memory_wall,8.0"
    _notebook(tmp_path / "submitted" / "alice" / "01_memory_wall.ipynb")
    mallory = tmp_path / "submitted" / "mallory"
    _notebook(mallory / "\x1b[2J\x1b[31m01_memory_wall\nbob,8.ipynb")

    def grade_one(path, identity=None, **options):
        grade = _grader()(path, identity=identity, **options)
        grade.problems = [f"code cell 2 (`# {evil}`) raised \x1b[2JEvil\u202e: {evil}"]
        grade.questions[0].feedback = evil
        return grade

    monkeypatch.chdir(tmp_path)
    stream = io.StringIO()
    classroom.grade_class(["submitted"], tmp_path / "g", stream=stream, grade_one=grade_one)
    out = tmp_path / "g"
    texts = {name: (out / name).read_text(encoding="utf-8") for name in ("results.csv", "summary.txt", "summary.csv")}
    texts["progress"] = stream.getvalue()
    for name, text in texts.items():
        bad = {c for c in text if not c.isprintable() and c != "\n"}
        assert not bad, f"{name} holds {bad}"
    lines = texts["results.csv"].splitlines()
    assert len(lines) == 3 and not any(line.startswith("bob") for line in lines)  # one physical line per row
    assert "\\x1b[2J\\x1b[31m01_memory_wall\\nbob,8.ipynb" in lines[2]
    for path in (out / "gradescope").iterdir():
        shown = json.loads(path.read_text())["output"]
        assert all(c.isprintable() or c == "\n" for c in shown)


def test_a_killed_class_run_leaves_no_copy_of_a_notebook_behind_after_the_next_run(tmp_path):
    # leftovers (attacks 05, 18): a grader killed by `timeout` left /tmp/distlab-class-* (holding a student's
    # notebook copy) behind for ever. Now every private folder of a run lies in one locked run folder: a killed
    # run's (its lock free) is removed when the next run starts; one still held (another run) is never touched
    import subprocess
    import sys
    import textwrap

    temp = tmp_path / "tmp"
    temp.mkdir()
    _notebook(tmp_path / "submitted" / "alice" / "01_memory_wall.ipynb", '{"secret-work": 1}')
    killed = textwrap.dedent(
        """
        import os, signal, sys
        from distlab.grading import classroom
        def grade_one(path, identity=None, **options):
            os.kill(os.getpid(), signal.SIGKILL)  # killed while the copy exists
        classroom.grade_class([sys.argv[1]], sys.argv[2], progress=False, grade_one=grade_one)
        """
    )
    env = {**os.environ, "TMPDIR": str(temp)}
    run = subprocess.run([sys.executable, "-c", killed, str(tmp_path / "submitted"), str(tmp_path / "g")], env=env)
    assert run.returncode == -9

    def copies():
        return [p for p in temp.rglob("*") if p.is_file() and "secret-work" in p.read_text(errors="replace")]

    assert copies()  # the killed run left its private copy
    again = "import sys; from distlab.grading import classroom; classroom.grade_class([sys.argv[1]], sys.argv[2], progress=False, grade_one=lambda p, identity=None, **o: __import__('distlab.grading.report', fromlist=['x']).NotebookGrade(str(p), None, [], []))"
    subprocess.run(
        [sys.executable, "-c", again, str(tmp_path / "submitted"), str(tmp_path / "g2")], env=env, check=True
    )
    assert copies() == []
    assert [p.name for p in temp.iterdir() if p.name.startswith("distlab-class-")] == []


def test_without_lesson_one_notebook_under_other_lessons_names_is_one_kernel(tmp_path, monkeypatch):
    # attack 04: graded without --lesson, mallory's one memory_wall notebook copied under 9 other lessons' file
    # names got 10 kernels and 10 memory_wall rows (grouped by file name, graded by metadata), and the summary
    # counted her 10 times. Now a notebook's lesson is the one it really is (metadata) AND its name: a copy whose
    # name names another lesson is not run; the statistics count one notebook per student and lesson
    from distlab.grading.discover import lesson_from_name

    names = ["02_collectives", "04_pipeline", "05_tensor_parallel", "08_production", "10_mixture_of_experts"]
    assert all(lesson_from_name(n + ".ipynb") not in (None, "memory_wall") for n in names)  # each names a lesson
    text = json.dumps({"metadata": {"distlab": {"lesson": "memory_wall"}}, "cells": [], "nbformat": 4})
    _notebook(tmp_path / "submitted" / "alice" / "01_memory_wall.ipynb", text)
    for name in ["01_memory_wall", *names, "scratch"]:
        _notebook(tmp_path / "submitted" / "mallory" / f"{name}.ipynb", text)
    monkeypatch.chdir(tmp_path)
    calls = []
    classroom.grade_class(["submitted"], tmp_path / "g", progress=False, grade_one=_grader(calls))
    assert sorted(os.path.basename(c) for c in calls) == ["01_memory_wall.ipynb", "01_memory_wall.ipynb"]
    rows = {r[0]: r for r in _rows(tmp_path / "g")[1:]}
    assert len(rows) == 8
    for name in names:
        assert "not run: its file name names lesson" in rows[f"submitted/mallory/{name}.ipynb"][-2]
    assert "refused to run" in rows["submitted/mallory/scratch.ipynb"][-2]
    summary = (tmp_path / "g" / "summary.txt").read_text()
    # 8 rows; 2 scored (alice's and mallory's 01_memory_wall, 0/1 each): mean 0%, two students counted
    assert summary.startswith("8 notebooks; mean score 0.0% (2 student-lessons, one notebook each)")
    assert ["memory_wall", "q1", "0", "2", "0", "0"] in [line.split() for line in summary.splitlines()]


def test_a_group_submission_is_graded_for_the_submitter_whose_variant_it_carries(tmp_path, monkeypatch):
    # attack 08: with --export, mallory's upload is a group submission listing bob first, then mallory. It was
    # filed under bob (the first submitter on the roster), refused as "bob's seed mismatch" (a 0 that accuses bob),
    # bob's real row was flagged as a duplicate, and mallory got no row. Now it is graded once, for the submitter
    # whose issued seed it carries (mallory), and its row names every submitter
    roster_csv, secret = write_roster(tmp_path, ("bob", "mallory"))
    roster = variants.load_roster(roster_csv, SECRET)
    export = tmp_path / "export"
    for i, sid in enumerate(("bob", "mallory"), 1):
        nb = {
            "cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": "x=1"}],
            "metadata": {
                "distlab": {
                    "lesson": "memory_wall",
                    "variant": {"student": sid, "seed": roster.seed("memory_wall", sid)},
                }
            },
            "nbformat": 4,
            "nbformat_minor": 5,
        }
        _notebook(export / f"submission_{i}" / "01_memory_wall.ipynb", json.dumps(nb))
    (export / "submission_metadata.yml").write_text(
        "submission_1:\n  :submitters:\n  - :name: Bob\n    :sid: bob\n    :email: bob@uni.example\n"
        "submission_2:\n  :submitters:\n  - :name: Bob\n    :sid: bob\n    :email: bob@uni.example\n"
        "  - :name: Mallory\n    :sid: mallory\n    :email: mallory@uni.example\n"
    )
    report = classroom.grade_class(
        [export],
        tmp_path / "g",
        progress=False,
        export=True,
        lesson="memory_wall",
        variants=variants.VariantPolicy(roster),
        run=lambda *a, **k: {},
    )
    rows = {r[0]: r for r in _rows(tmp_path / "g")[1:]}
    bob, group = rows["export/submission_1/01_memory_wall.ipynb"], rows["export/submission_2/01_memory_wall.ipynb"]
    assert (bob[1], group[1]) == ("bob", "mallory")
    assert "refused" not in group[-2] and "a group submission of bob, mallory: graded once, for 'mallory'" in group[-2]
    assert bob[-1] == group[-1] == ""  # two students: nobody flagged as a duplicate
    assert [g.student for g in report.notebooks] == ["bob", "mallory"]
    # a group whose notebook carries a seed issued to none of its submitters is refused, never filed under one
    grade = NotebookGrade("x", "memory_wall", [], [])
    policy = variants.VariantPolicy(roster)
    meta = {"distlab": {"variant": {"seed": "0" * 16}}}
    assert policy(grade, meta, {}, (("bob",), ("mallory",))) is None
    assert grade.student == "" and "not the one issued to any of them" in grade.problems[-1]
