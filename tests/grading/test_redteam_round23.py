"""Red team round 23: fresh hostile submissions against what round 22 did not try: the spreadsheet the instructor
opens results.csv in, roster identities, a grader that is not root, and the Gradescope autograder's copy of an upload
set. Each test keeps the attack and what must hold.

01-csv-semicolon (succeeded, fixed): results.csv put a "'" before a cell that starts with = + - @, but a spreadsheet
of a locale whose list separator is ";" (Excel in most of Europe) splits a .csv at ";", not ",". A file name
"x;=cmd|' /C calc'!A0;.ipynb" (or an exception message holding ";=...") was one CSV cell to the csv module and a DDE
formula cell to such a spreadsheet. Now every place after a ";" (then spaces) where a formula character follows gets
the text prefix too (class_results.text_cell).
02-roster-shared-identity (succeeded, fixed): Roster.find matches an id exactly, an e-mail without case and a folder
name, and kept the last of two students sharing one of these (an e-mail listed twice in another case, one student's
e-mail that is another's id, ids that differ only in case): a submission naming that identity was filed under one of
them silently. Now a roster in which any id, e-mail or folder name names two students is refused with the reason.
03-non-root-grader (held): the grader run by an unprivileged user (setpriv) with --rlimits-only, the kernel of the
same user id in bubblewrap: it can write only the two tmpfs (the 256 MB /tmp stops it), sees no process of the grader
and no file of the grader's own folders (a private file of the same user, mode 0600, next to the run folder), and
its answers come back.
04-upload-copy (held): the generated run_autograder's copy of an upload set with a link named as the exercise (to the
instructor's secret), a link to a folder holding a notebook, names with a newline and a leading "-" and a notebook
of another lesson: only files and links are copied, a link stays a link (never the secret's bytes), nothing lands
outside root's private folder, and the pick is the regular file named as the exercise.
05-gradescope-user-id (succeeded, fixed): the autograder's submitter() took Gradescope's own user "id" as an identity
beside sid and e-mail; a roster keyed by student numbers then gave a submitter without a sid the variant of the
classmate whose student number equalled that id. Only sid and e-mail are identities now, as in an export.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from class_helpers import KERNEL_UID, unprivileged_python, write_roster
from distlab.errors import ConfigurationError
from distlab.grading import classroom, gradescope
from distlab.grading.variants import Roster, load_roster

FORMULA = ("=", "+", "-", "@")


def _cells(text: str, delimiter: str) -> list[str]:
    return [cell for row in csv.reader(io.StringIO(text), delimiter=delimiter) for cell in row]


def test_no_cell_of_results_csv_starts_a_formula_whatever_the_spreadsheets_separator():
    """01: results.csv read with "," (the csv module's) or ";" (Excel's separator in a ";" locale): no cell a
    spreadsheet makes of it starts with a formula character, spaces trimmed or not."""
    dde = "mallory/x;=cmd|' /C calc'!A0;.ipynb"
    records = [
        {
            "key": dde,
            "identity": ["mallory"],
            "grade": {
                "score": 0.0,
                "max_score": 8.0,
                "questions": [],
                "lesson": "memory_wall",
                "problems": ["code cell 3 raised ValueError: x; =HYPERLINK(A1)", "x;@SUM(1+1);+1;-A1"],
            },
        },
        {
            "key": "mallory/01_memory_wall.ipynb",  # a second notebook of mallory's: the flag names the other one
            "identity": ["mallory"],
            "grade": {"score": 1.0, "max_score": 8.0, "questions": [], "lesson": "memory_wall", "problems": []},
        },
    ]
    text = classroom.results_csv(records)
    for delimiter in (",", ";"):
        for cell in _cells(text, delimiter):
            assert not cell.lstrip(" ").startswith(FORMULA), (delimiter, cell)
    # the text is still there to read, each cell as the csv module sees it
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[1][0] == "mallory/x;'=cmd|' /C calc'!A0;.ipynb", rows[1][0]
    assert classroom.text_cell("plain; text; 8/8") == "plain; text; 8/8"  # only a formula character is prefixed


def _roster(tmp_path: Path, rows: str) -> Path:
    path = tmp_path / "roster.csv"
    path.write_text("id,email\n" + rows)
    return path


@pytest.mark.parametrize(
    "rows",
    [
        "bob,bob@uni.example\nrobert,BOB@uni.example\n",  # one e-mail listed twice (in another case)
        "bob,bob@uni.example\nbob@uni.example,x@uni.example\n",  # an e-mail that is another student's id
        "Carol,c1@uni.example\ncarol,c2@uni.example\n",  # ids that differ only in case (one folder on macOS)
        "dan e,d1@uni.example\ndan_e,d2@uni.example\n",  # ids that make one folder (folder_name)
    ],
)
def test_a_roster_in_which_an_identity_names_two_students_is_refused(tmp_path, rows):
    """02: before, the roster loaded and find() gave the identity to the last of the two students listed."""
    with pytest.raises(ConfigurationError, match="must name one student"):
        load_roster(_roster(tmp_path, rows), b"secret")


def test_a_roster_whose_identities_each_name_one_student_still_loads(tmp_path):
    """02: a student's own id, e-mail and folder may coincide; only two students sharing one is refused."""
    roster = load_roster(_roster(tmp_path, "bob@uni.example,bob@uni.example\nal,AL@uni.example\n"), b"s")
    assert roster.find("BOB@uni.example") == "bob@uni.example" and roster.find("al@uni.example") == "al"
    roster_path, secret = write_roster(tmp_path)
    assert set(load_roster(roster_path, secret.read_bytes().strip()).students) == {"alice", "bob", "carol"}
    with pytest.raises(ConfigurationError):
        Roster({"x": {"email": "y@u"}, "y@u": {}}, b"s")  # the class itself, not only the CSV reader


#: 03: run in the kernel of a grader that is not root; reports through answer_x
NON_ROOT_PROBE = r"""
import json, os
probe = {"uid": os.getuid(), "writable": []}
for top in ("/", "/run", "/dev", "/var", "/home", "/usr", "/etc", "/opt", "/srv", "/root", "/mnt", %(outside)r):
    for root, dirs, files in os.walk(top):
        if root.startswith(("/proc", "/sys")):
            dirs[:] = []
            continue
        if root.count("/") > 5:
            dirs[:] = []
        try:
            fd = os.open(os.path.join(root, ".rt23probe"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.close(fd)
            os.unlink(os.path.join(root, ".rt23probe"))
            probe["writable"].append(root)
        except OSError:
            pass
probe["fs"] = {}
for line in open("/proc/self/mountinfo"):
    parts = line.split()
    if "rw" in parts[5].split(","):
        probe["fs"][parts[4]] = parts[parts.index("-") + 1]
try:
    probe["secret"] = open(%(secret)r).read()
except OSError as e:
    probe["secret"] = e.errno
written = 0
try:
    with open("/tmp/fill", "wb") as f:
        for _ in range(400):
            f.write(b"x" * 2**20)
            written += 1
except OSError as e:
    probe["fill"] = e.errno
probe["written_mb"] = written
os.unlink("/tmp/fill")
probe["pids"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
answer_x = json.dumps(probe)
"""

NON_ROOT_RUNNER = r"""
import json, sys
from pathlib import Path
from distlab.grading.kernel import run_in_kernel
base, cell = Path(sys.argv[1]), open(sys.argv[2]).read()
(base / "submission.ipynb").write_text("{}")
problems = []
answers = run_in_kernel([cell], base / "work", answer_names=["answer_x"], timeout=120, cell_timeout=90,
                        sandbox="bwrap", memory_limit=2 * 2**30, file_size_limit=1024 * 2**20, problems=problems,
                        audit_hook=False)  # the operating system alone, as in round 22
print(json.dumps({"answers": answers, "problems": problems}))
"""


@pytest.mark.skipif(unprivileged_python() is None or not os.path.exists("/usr/bin/bwrap"), reason="root, bwrap")
def test_a_grader_that_is_not_root_keeps_its_kernel_to_the_two_tmpfs_and_out_of_its_own_files():
    """03: the weaker guarantees of a non-root grader (rlimits only) are about totals (memory, processes, inodes);
    the boundary itself (what the kernel can see and write) must hold as with root."""
    folder = Path(tempfile.mkdtemp(prefix="distlab-rt23-"))  # pytest's own folders are root's alone (0700)
    try:
        _non_root_grader(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _non_root_grader(tmp_path: Path) -> None:
    python, path = unprivileged_python()
    uid = KERNEL_UID + 8  # not the container tests' id: they end every process of theirs
    home = tmp_path / "grader"
    home.mkdir()
    secret = home / "private.txt"  # the grader's own file, of the kernel's very user id
    secret.write_text("the grader's own secret")
    cell = tmp_path / "cell.py"
    cell.write_text(NON_ROOT_PROBE % {"outside": str(home), "secret": str(secret)})
    runner = tmp_path / "runner.py"
    runner.write_text(NON_ROOT_RUNNER)
    for p in (tmp_path, home, secret, cell, runner):
        os.chown(p, uid, uid)
    os.chmod(tmp_path, 0o755)
    os.chmod(secret, 0o600)
    done = subprocess.run(
        ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "env", "-i", f"PYTHONPATH={path}"]
        + ["PATH=/usr/bin:/bin", f"HOME={home}", f"TMPDIR={home}", python, str(runner), str(home), str(cell)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["answers"] and "answer_x" in out["answers"], out
    probe = json.loads(out["answers"]["answer_x"])
    assert probe["uid"] == uid or probe["uid"] != 0, probe
    assert probe["secret"] == 2, probe  # ENOENT: the grader's folder is not there, only the view bound inside it
    writable_fs = {fs for mount, fs in probe["fs"].items() if not mount.startswith(("/proc", "/dev/"))}
    assert writable_fs <= {"tmpfs"}, probe["fs"]
    assert all(w.startswith(("/tmp", "/run/distlab")) or probe["fs"].get(w) == "tmpfs" for w in probe["writable"])
    assert probe["fill"] == 28 and probe["written_mb"] <= 256, probe  # ENOSPC at the tmpfs's 256 MB
    assert probe["pids"] == [1, 2], probe  # the starter and the kernel: no process of the grader in sight


def _copy(tmp_path: Path, build) -> Path:
    """Run the generated run_autograder's copy step on an upload made by `build(submission)`; root's copy."""
    root = tmp_path / "autograder"
    (root / "submission").mkdir(parents=True)
    (root / "source").mkdir()
    (root / "source" / "variant_secret").write_text("THE-INSTRUCTOR-SECRET")
    build(root / "submission")
    private = tmp_path / "private"
    private.mkdir()
    script = 'fail() { echo "$1" >&2; exit 1; }\n' + gradescope._copy_upload("memory_wall")
    done = subprocess.run(
        ["bash", "-c", script],
        env={"PATH": "/usr/bin:/bin", "ROOT": str(root), "PRIVATE": str(private)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return private / "submission"


def test_the_autograders_copy_of_an_upload_keeps_links_as_links_and_stays_in_its_folder(tmp_path):
    """04: whatever names and links the upload holds, root's copy is files and links under its own folder, no
    link is followed (the secret's bytes are never copied), and the regular exercise file is the one picked."""
    notebook = json.dumps({"cells": [], "metadata": {"distlab": {"lesson": "memory_wall"}}})

    def build(sub: Path) -> None:
        secret = sub.parent / "source" / "variant_secret"
        (sub / "01_memory_wall.ipynb").symlink_to(secret)
        (sub / "work").mkdir()
        (sub / "work" / "01_memory_wall.ipynb").write_text(notebook)
        (sub / "ln").symlink_to(sub.parent / "source")  # a link to a folder: never entered
        (sub / "x\n0 0 01_memory_wall.ipynb").write_text("{}")  # a line of the sort's own format
        (sub / "-t.ipynb").write_text("{}")
        (sub / "02_pipeline.ipynb").write_text(
            json.dumps({"cells": [], "metadata": {"distlab": {"lesson": "pipeline"}}})
        )
        (sub / "secret.ipynb").symlink_to(secret)

    copy = _copy(tmp_path, build)
    everything = [p for p in copy.rglob("*")]
    assert all(os.path.realpath(p).startswith(str(copy)) or p.is_symlink() for p in everything), everything
    for p in everything:
        if p.is_file() and not p.is_symlink():
            assert "THE-INSTRUCTOR-SECRET" not in p.read_text(errors="replace"), p
    assert not (copy / "ln").exists() and (copy / "01_memory_wall.ipynb").is_symlink()
    chosen, ignored, _ = gradescope.pick_notebook([copy], "memory_wall")
    assert chosen == copy / "work" / "01_memory_wall.ipynb", (chosen, ignored)
    assert (copy / "-t.ipynb").is_file() and (copy / "x\n0 0 01_memory_wall.ipynb").is_file()
    assert sys.getsizeof(ignored) < 10_000


def test_gradescopes_own_user_id_never_names_a_roster_student(tmp_path):
    """05 (succeeded, fixed): submitter() read Gradescope's user "id" (a number of Gradescope's) as an identity, so a
    submitter without a sid whose Gradescope id equalled a classmate's student number was graded as that classmate,
    against their numbers. Only sid and e-mail are identities now, as in an export."""
    from types import SimpleNamespace

    from distlab.grading.variants import VariantPolicy, submitter

    meta = tmp_path / "submission_metadata.json"
    meta.write_text(json.dumps({"users": [{"email": "mallory@uni.example", "id": 1234567, "name": "M"}]}))
    identity = submitter(meta)
    assert identity == ("mallory@uni.example",), identity
    roster = Roster({"1234567": {"id": "1234567", "email": "bob@uni.example"}}, b"secret")
    grade = SimpleNamespace(lesson="memory_wall", problems=[], questions=None, student="")
    assert VariantPolicy(roster)(grade, {}, {"q1": object()}, identity=identity) is None
    assert grade.student == "" and "not on the roster" in grade.problems[0], grade.problems
