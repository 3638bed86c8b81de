"""Red team round 26: the instructor's side of a class run and its tools. Attacks on folders a student can write while
the grader works, two runs sharing one output folder, exercises built from a solutions folder, per-student variant
files, and leftovers passed from one student's kernel to the next. Each test keeps the attack and what must hold.

01-link-on-the-way (succeeded, fixed): a class run lists every student folder first and reads each notebook when
its turn comes. A student who can write their own folder meanwhile (the drop-box layout, graded in place) swapped the
folder holding their notebook (mallory/sub) for a link to a folder only root could read. read_submission's lstat and
O_NOFOLLOW cover only the last name of a path, so the root grader read through the link and ran the solutions
notebook there as mallory's (one swapped during the walk was listed too: names of a folder she cannot list became her
rows). Now every folder below the one given is opened from the one before it with O_NOFOLLOW (beneath.open_folder),
for the walk and for each read: a link in its place is refused by the operating system, whenever it was put there.
The same swap just after the walk made collect's check for a notebook given twice (every path resolved) find
mallory's notebook "the same" as bob's, and the whole class run refused to start; where a notebook lies is now the
folder given, resolved, and the names below it as the walk found them (class_submissions._where).
02-exercise-leaks (succeeded, fixed): `distlab exercises` copied a solution's notebook metadata (saved widget state
holds what the solution's cells printed), each cell's metadata, and a markdown cell's attachments (an image the
removed solution block showed); a markdown block without its END marker, or a marker written otherwise
("###BEGIN SOLUTION", "<!--BEGIN SOLUTION-->"), reached the exercise whole. Now what passes is an allow-list
(build.KEPT_METADATA, KEPT_CELL_METADATA, the attachments the exercise text still shows) and the markers are parsed
strictly: unpaired, nested or misspelled markers are refused.
03-two-runs-one-output (succeeded, fixed): two class runs given the same --out replaced results.csv through one
temporary name, and the second ended in FileNotFoundError with a traceback (their journal keys and gradescope/ swaps
raced too). Now a class run holds an exclusive lock on out/.lock (journal.writing) and a second one is refused while
the first lives.
04-variant-through-a-link (succeeded, fixed): `distlab exercises --variants` wrote each student's notebook with
nbformat.write(path), which follows a link: a student whose variants folder was theirs (handed out in place) put a
link under the exercise's name, and the next build overwrote what it named. Now the file is written under a new name
(O_EXCL) and renamed over the old one in the student's folder, opened with O_NOFOLLOW (variants._write_variant).
05-next-students-kernel (held): in one class run (bubblewrap, root, without the audit hook, so the operating system
alone holds) a first student's notebook left a file in /tmp, a listening abstract unix socket and a daemon process
(double fork, setsid) holding it; the next student's kernel sees none of them, and no process of the first outlives
its grading.
06-hostile-roster-ids (held): roster ids shaped as paths ("../x", "a/b", ".hidden", "-rf") each get one folder inside
the variants folder, named by folder_name, and nothing is written outside it.
"""

from __future__ import annotations

import csv
import functools
import json
import os
import secrets
from pathlib import Path

import nbformat
import pytest

from class_helpers import SECRET, stand_in_grade
from distlab.errors import ConfigurationError
from distlab.grading import build, classroom, variants
from distlab.grading.grade import grade_notebook

ROOT = Path(__file__).resolve().parents[2]


def _notebook(path: Path, source: str) -> Path:
    """A lesson-1 notebook at `path` whose one code cell is `source`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    cell = {"cell_type": "code", "source": source, "metadata": {}, "outputs": [], "execution_count": None}
    nb = {"cells": [cell], "metadata": {"distlab": {"lesson": "memory_wall"}}, "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(nb))
    return path


def _rows(out: Path) -> dict[str, dict]:
    return {r["notebook"]: r for r in csv.DictReader((out / "results.csv").open(encoding="utf-8"))}


def _class_with_a_secret(tmp_path: Path) -> tuple[Path, Path]:
    """mallory's upload (her notebook in mallory/sub) and a folder only root may read holding the solutions."""
    _notebook(tmp_path / "class" / "mallory" / "sub" / "01_memory_wall.ipynb", "answer_q1 = 'mine'")
    secret = tmp_path / "secret"
    _notebook(secret / "01_memory_wall.ipynb", "answer_q1 = 'THE SOLUTIONS'")
    os.chmod(secret, 0o700)
    return tmp_path / "class", secret


def test_a_folder_swapped_for_a_link_after_the_walk_is_never_read_through(tmp_path, monkeypatch):
    """01: the walk saw mallory/sub as a folder; it is a link to the secret folder when her notebook is read (in
    one_per_student and in grading). Nothing of the secret folder runs, and her row says why."""
    folder, secret = _class_with_a_secret(tmp_path)
    real_collect = classroom.collect

    def collect_then_swap(*args, **kwargs):
        found = real_collect(*args, **kwargs)
        sub = folder / "mallory" / "sub"
        sub.rename(folder / "mallory" / "was-sub")
        sub.symlink_to(secret)
        return found

    monkeypatch.setattr(classroom, "collect", collect_then_swap)
    ran: list[list[str]] = []

    def run(raw, sources, questions, problems, **options):
        ran.append(sources)
        return {}

    grade_one = functools.partial(grade_notebook, run=run, sandbox="trusted")
    classroom.grade_class([folder], tmp_path / "g", progress=False, grade_one=grade_one, lesson="memory_wall")
    assert ran == [], f"the grader ran what the link named: {ran}"
    row = _rows(tmp_path / "g")["class/mallory/sub/01_memory_wall.ipynb"]
    assert "a folder on its way is a symbolic link" in row["problems"] and float(row["score"]) == 0


class _Listing:
    """What os.scandir returns, from a list made before the caller sees it (so a swap after it is not seen)."""

    def __init__(self, entries):
        self.entries = entries

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __iter__(self):
        return iter(self.entries)


def test_a_folder_swapped_for_a_link_during_the_walk_is_not_listed(tmp_path, monkeypatch):
    """01: mallory/sub is a folder when mallory's folder is listed and a link to the secret folder (whose notebook
    has a name only it holds) when the walk comes to list it: no row names what the secret folder holds."""
    folder, secret = _class_with_a_secret(tmp_path)
    (secret / "01_memory_wall.ipynb").rename(secret / "private-name-of-the-secret.ipynb")
    real_scandir = os.scandir

    def scandir_then_swap(target="."):
        with real_scandir(target) as entries:
            listed = list(entries)
        sub = folder / "mallory" / "sub"
        if any(e.name == "sub" for e in listed) and not sub.is_symlink():
            sub.rename(folder / "mallory" / "was-sub")
            sub.symlink_to(secret)
        return _Listing(listed)

    monkeypatch.setattr(os, "scandir", scandir_then_swap)
    found = classroom.collect([folder])
    monkeypatch.undo()
    assert not [s.key for s in found if "private-name" in s.key], [s.key for s in found]
    assert any("a link or a file now stands in its place" in n for s in found for n in s.notes), found


def test_a_link_swapped_in_after_the_walk_never_makes_a_classmates_notebook_given_twice(tmp_path, monkeypatch):
    """01: mallory/sub swapped for a link to bob's folder just after the walk: collect resolved every path to refuse
    a notebook given twice, found mallory's "the same" as bob's, and the whole class run refused to start. Now where
    a notebook lies is the folder given (resolved) and the names below it as the walk found them."""
    from distlab.grading import class_submissions

    for student in ("alice", "bob"):
        _notebook(tmp_path / "class" / student / "01_memory_wall.ipynb", "answer_q1 = 1")
    _notebook(tmp_path / "class" / "mallory" / "sub" / "01_memory_wall.ipynb", "answer_q1 = 1")
    real_note = class_submissions._note_empty_folders

    def swap_then_note(*args, **kwargs):
        sub = tmp_path / "class" / "mallory" / "sub"
        sub.rename(tmp_path / "class" / "mallory" / "was-sub")
        sub.symlink_to(tmp_path / "class" / "bob")
        return real_note(*args, **kwargs)

    monkeypatch.setattr(class_submissions, "_note_empty_folders", swap_then_note)
    found = classroom.collect([tmp_path / "class"])
    assert [s.key for s in found] == [
        "class/alice/01_memory_wall.ipynb",
        "class/bob/01_memory_wall.ipynb",
        "class/mallory/sub/01_memory_wall.ipynb",
    ]


def test_a_notebook_given_below_a_folder_the_instructor_named_is_read_the_same(tmp_path):
    """01: the fix changes nothing for what may be read: a notebook in real folders below the one given, and one
    given by a path whose own folders include a link (the instructor's path), are read."""
    from distlab.grading.submission import read_submission

    nb = _notebook(tmp_path / "class" / "alice" / "deep" / "01_memory_wall.ipynb", "answer_q1 = 1")
    assert read_submission(nb, [], root=tmp_path / "class") == nb.read_bytes()
    (tmp_path / "link-to-class").symlink_to(tmp_path / "class")
    given = tmp_path / "link-to-class" / "alice" / "deep" / "01_memory_wall.ipynb"
    assert read_submission(given, []) == nb.read_bytes()
    problems: list[str] = []
    assert read_submission(given, problems, root=tmp_path / "link-to-class" / "alice") == nb.read_bytes()
    assert read_submission(given, problems, root=tmp_path) is None and "symbolic link" in problems[0]


def _solution() -> nbformat.NotebookNode:
    """A solution notebook carrying, beside its solution block, what must not reach the exercise."""
    v4 = nbformat.v4
    nb = v4.new_notebook(
        cells=[
            v4.new_code_cell("### BEGIN SOLUTION\nanswer_q1 = 112\n### END SOLUTION\nq1.check(answer_q1)"),
            v4.new_markdown_cell(
                "Why? ![setup](attachment:setup.png)\n<!-- BEGIN SOLUTION -->\n![worked](attachment:worked.png)\n"
                "<!-- END SOLUTION -->",
                attachments={"worked.png": {"image/png": "V09SS0VE"}, "setup.png": {"image/png": "U0VUVVA="}},
            ),
        ],
        metadata={"distlab": {"lesson": "memory_wall"}, "kernelspec": {"name": "python3", "display_name": "P"}},
    )
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {"out": "answer_q1 = 112 GB"}}}
    nb.cells[0].metadata.update(tags=["graded"], nbgrader={"solution": "answer_q1 = 112"})
    return nb


def test_an_exercise_keeps_only_what_its_allow_list_names():
    """02: no widget state, no cell metadata but tags, no attachment only the solution block showed."""
    exercise = build.exercise_from_solution(_solution())
    text = json.dumps(exercise)
    assert "112" not in text and "V09SS0VE" not in text and "worked" not in text, text
    assert set(exercise.metadata) == {"distlab", "kernelspec"}
    assert exercise.cells[0].metadata == {"tags": ["graded"]}
    assert exercise.cells[1].attachments == {"setup.png": {"image/png": "U0VUVVA="}}
    nbformat.validate(exercise)


@pytest.mark.parametrize(
    "markdown",
    [
        "Explain.\n<!-- BEGIN SOLUTION -->\nThe answer is 112 GB because ...",
        "Explain.\nThe answer is 112 GB because ...\n<!-- END SOLUTION -->",
        "<!-- BEGIN SOLUTION -->a<!-- BEGIN SOLUTION -->b<!-- END SOLUTION -->c<!-- END SOLUTION -->",
        "<!--BEGIN SOLUTION-->\nThe answer is 112 GB\n<!--END SOLUTION-->",
        "<!-- begin solution -->\nThe answer is 112 GB\n<!-- end solution -->",
    ],
)
def test_a_markdown_block_the_build_cannot_pair_is_refused(markdown):
    """02: before, each of these reached the exercise whole (the answer's text with it)."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(markdown)])
    with pytest.raises(ConfigurationError, match="SOLUTION"):
        build.exercise_from_solution(nb)


@pytest.mark.parametrize(
    "code",
    ["###BEGIN SOLUTION\nanswer_q1 = 112\n###END SOLUTION", "# begin solution\nanswer_q1 = 112\n# end solution"],
)
def test_a_code_marker_written_otherwise_is_refused(code):
    """02: a misspelled marker left the solution's code in the exercise."""
    with pytest.raises(ConfigurationError, match="not a solution marker"):
        build.exercise_from_solution(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)]))


def test_a_second_class_run_on_the_same_output_folder_is_refused_while_the_first_lives(tmp_path):
    """03: the second run (here started from inside the first one's grading) is refused with the reason, and the
    first one's outputs are whole; once it has ended, a run on the same folder goes ahead (and resumes)."""
    for student in ("alice", "bob"):
        _notebook(tmp_path / "class" / student / "01_memory_wall.ipynb", "answer_q1 = 1")
    out, refused = tmp_path / "g", []

    def grade_one(path, identity=None, **options):
        try:
            classroom.grade_class([tmp_path / "class"], out, progress=False, grade_one=stand_in_grade)
        except ConfigurationError as exc:
            refused.append(str(exc))
        return stand_in_grade(path, identity, points=1.0)

    report = classroom.grade_class([tmp_path / "class"], out, progress=False, grade_one=grade_one)
    assert len(refused) == 2 and all("another distlab grade is writing" in r for r in refused), refused
    assert report.score == 2 and {float(r["score"]) for r in _rows(out).values()} == {1.0}
    again = classroom.grade_class([tmp_path / "class"], out, progress=False, grade_one=stand_in_grade)
    assert again.score == 2  # the first run's records, resumed


def _build_variants(tmp_path: Path, ids=("mallory", "bob")) -> tuple[variants.Roster, Path]:
    roster = variants.Roster({i: {"id": i} for i in ids}, SECRET)
    return roster, tmp_path / "variants"


def test_a_variant_is_never_written_through_a_link_in_a_students_folder(tmp_path):
    """04: mallory's folder holds a link named as the exercise, to the instructor's notes: the notes are unchanged,
    the link is replaced by her notebook, and bob's notebook is his own."""
    roster, out = _build_variants(tmp_path)
    notes = tmp_path / "instructor-notes.txt"
    notes.write_text("precious")
    (out / "mallory").mkdir(parents=True)
    (out / "mallory" / "01_memory_wall.ipynb").symlink_to(notes)
    written = variants.build_variants(roster, ROOT / "exercises", out, ["memory_wall"])
    assert notes.read_text() == "precious"
    mine = out / "mallory" / "01_memory_wall.ipynb"
    assert not mine.is_symlink() and json.loads(mine.read_text())["metadata"]["distlab"]["variant"]["student"] == (
        "mallory"
    )
    assert sorted(p.relative_to(out).as_posix() for p in written) == [
        "bob/01_memory_wall.ipynb",
        "mallory/01_memory_wall.ipynb",
    ]
    assert sorted(p.name for p in (out / "mallory").iterdir()) == ["01_memory_wall.ipynb"]  # no temporary left


def test_a_link_in_place_of_a_students_variants_folder_is_refused(tmp_path):
    """04: out/mallory is a link (to the instructor's folder): refused, nothing written there."""
    roster, out = _build_variants(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out.mkdir()
    (out / "mallory").symlink_to(elsewhere)
    with pytest.raises(ConfigurationError, match="not a folder"):
        variants.build_variants(roster, ROOT / "exercises", out, ["memory_wall"])
    assert list(elsewhere.iterdir()) == []


def test_roster_ids_shaped_as_paths_stay_inside_the_variants_folder(tmp_path):
    """06 (held): each id gets its own folder (folder_name) inside the variants folder."""
    ids = ("../x", "a/b", ".hidden", "-rf", "c d")
    roster, out = _build_variants(tmp_path / "course", ids)
    written = variants.build_variants(roster, ROOT / "exercises", out, ["memory_wall"])
    assert sorted(p.parent.name for p in written) == sorted(variants.folder_name(i) for i in ids)
    assert all(p.resolve().parent.parent == out.resolve() for p in written)
    assert sorted(p.name for p in (tmp_path / "course").iterdir()) == ["variants"]


#: the first student's notebook: a file in /tmp, a listening abstract socket and a daemon holding it (double fork,
#: setsid), its argv carrying TAG so the host can look for it after the run
_ALICE = """
import os, socket, sys
open("/tmp/left-by-alice-TAG", "w").write("x")
listener = socket.socket(socket.AF_UNIX)
listener.bind("\\0left-by-alice-TAG")
listener.listen()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.set_inheritable(listener.fileno(), True)
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(120)", "left-by-alice-TAG"])
    os._exit(0)
answer_q1 = "alice"
"""

#: the next student's notebook: raises with what it found of the first one's
_BOB = """
import os, socket
seen = []
if os.path.exists("/tmp/left-by-alice-TAG"):
    seen.append("file")
probe = socket.socket(socket.AF_UNIX)
try:
    probe.connect("\\0left-by-alice-TAG")
    seen.append("socket")
except OSError:
    pass
for pid in (p for p in os.listdir("/proc") if p.isdigit()):
    try:
        if b"left-by-alice-TAG" in open(f"/proc/{pid}/cmdline", "rb").read():
            seen.append("process")
    except OSError:
        pass
raise RuntimeError(f"SEEN {sorted(seen)}")
"""


def _host_processes(tag: str) -> list[str]:
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if tag.encode() in f.read():
                    found.append(pid)
        except OSError:
            pass
    return found


def test_the_next_students_kernel_finds_nothing_the_first_left(tmp_path):
    """05 (held): real kernels, bubblewrap without the audit hook (the operating system's boundary alone)."""
    tag = secrets.token_hex(6)
    _notebook(tmp_path / "class" / "alice" / "01_memory_wall.ipynb", _ALICE.replace("TAG", tag))
    _notebook(tmp_path / "class" / "bob" / "01_memory_wall.ipynb", _BOB.replace("TAG", tag))
    # the control: both cells in one kernel, so the probe is seen to find each of them when they are there
    both = _ALICE + "\nimport time\ntime.sleep(2)  # the daemon's exec\n" + _BOB
    _notebook(tmp_path / "class" / "carol" / "01_memory_wall.ipynb", both.replace("TAG", tag + "c"))
    grade_one = functools.partial(grade_notebook, _audit_hook=False)
    classroom.grade_class(
        [tmp_path / "class"], tmp_path / "g", progress=False, grade_one=grade_one, lesson="memory_wall", timeout=120
    )
    rows = _rows(tmp_path / "g")
    assert "raised" not in rows["class/alice/01_memory_wall.ipynb"]["problems"], rows
    assert "SEEN []" in rows["class/bob/01_memory_wall.ipynb"]["problems"], rows
    assert "SEEN ['file', 'process', 'socket']" in rows["class/carol/01_memory_wall.ipynb"]["problems"], rows
    assert _host_processes(f"left-by-alice-{tag}") == [], "the first student's daemon outlived its grading"
