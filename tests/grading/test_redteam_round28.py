"""Red team round 28: a hostile notebook in the default sandbox, and the instructor's side (the class run's choice of
notebooks, the output folder, `distlab` metadata, attachments, exports, CSV). Each test keeps the attack and what must
hold.

01-rewritten-after-the-choice (succeeded, fixed): a class run reads each notebook of a student folder once to choose
one per student and lesson (one_per_student), then reads the chosen one again to grade it. A student who could write
their folder while the class was graded rewrote their chosen lesson-1 notebook as a lesson-2 one between the two
reads: it was graded as lesson 2 beside their own lesson-2 notebook, two kernels (two tries) for one lesson in one
run, the first counted in the summary. Now a notebook is graded only if it still holds the bytes it was chosen by
(one_per_student's `chosen` digests); otherwise its row says it changed and it is not journaled, so the next run
chooses again.
02-the-output-folders-files (succeeded, fixed): the class run's files in --out were opened by name: a link planted as
journal.jsonl was appended to, and links as results.csv.tmp, results.json.tmp, summary.*.tmp and histogram.png made
a root grader overwrite the files they named; a FIFO as .journal.key blocked the run for good. Now every output is
written under a fresh mkstemp name and renamed into place (class_results._write_atomic), and the journal and its key
are opened with O_NOFOLLOW and O_NONBLOCK and must be regular files (journal._open_file), else a message names them.
03-a-stale-lock-holder (held): a process that inherited the output folder's lock (forked by a run that was then
killed) keeps it: the next run is refused with a message, never let in beside it; and a graded notebook's kernel,
started while the lock is held, holds no descriptor of it (the lock is O_CLOEXEC, the kernel exec'ed with its
descriptors closed), so no notebook can keep the class's output folder locked.
04-kernel-requests (held, one real bubblewrap kernel): stdin requests (input(), getpass()) raise in the cell (the
grader allows no stdin) and the cells after it run; 200 comm_open messages whose widget state names an answer are
dropped unread (no widget state is kept); a kernelspec in the notebook's metadata naming another kernel and program
is never used (the grader's notebook has none); the kernel's own shutdown-with-restart request ends it, the answers
read before count and no kernel is restarted.
05-distlab-metadata (held): with a roster, a notebook carrying its student's own seed issued for another lesson, a
variant naming a classmate, or a lesson named by its alias is graded as the folder's student for the lesson it is,
never with the seed or student it names.
06-odd-attachment-refs (held): `distlab exercises` keeps an attachment only when the exercise's text names it
exactly: a solution image named by URL-encoding, case, an HTML <img>, a reference-style definition inside the block or
a code span outside it is not kept.
07-export-keys-as-paths (held): submission_metadata.yml keys shaped as paths ("../x", "submission_1/../submission_2",
"/abs") name no folder: only an exact top folder name of the export gets submitters.
08-csv-cell-starts (held): names starting with spaces, a no-break space or an ideographic space before a formula
character reach results.csv as text (report.shown strips ASCII spaces and escapes the others).
"""

from __future__ import annotations

import csv
import functools
import json
import os
import signal
import time
from pathlib import Path

import nbformat
import pytest

from class_helpers import SECRET
from distlab.errors import ConfigurationError
from distlab.grading import build, class_submissions, classroom, journal, variants
from distlab.grading.class_results import text_cell
from distlab.grading.grade import grade_notebook
from distlab.grading.report import NotebookGrade, shown
from distlab.lessons.variants import lesson_variant


def _notebook(path: Path, lesson: str | None, *sources: str, metadata: dict | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    cells = [
        {"cell_type": "code", "source": s, "metadata": {}, "outputs": [], "execution_count": None} for s in sources
    ]
    meta = dict(metadata or {})
    if lesson:
        meta["distlab"] = {**meta.get("distlab", {}), "lesson": lesson}
    path.write_text(json.dumps({"cells": cells, "metadata": meta, "nbformat": 4, "nbformat_minor": 5}))
    return path


def _rows(out: Path) -> dict[str, dict]:
    return {r["notebook"]: r for r in csv.DictReader((out / "results.csv").open(encoding="utf-8"))}


def _stand_in(calls: list):
    """grade_notebook with the kernel stood in: the sources it would run are recorded, no answers come back."""

    def run(raw, sources, questions, problems, **options):
        calls.append(sources)
        return {}

    return functools.partial(grade_notebook, run=run)


# ---- 01: rewritten after the choice ----------------------------------------------------------------------------------


def test_a_notebook_rewritten_after_it_was_chosen_gets_no_second_kernel(tmp_path, monkeypatch):
    """01 (succeeded, fixed): mallory's lesson-1 notebook becomes a lesson-2 one after the choice; it is not run."""
    chosen = _notebook(tmp_path / "class" / "mallory" / "01_memory_wall.ipynb", "memory_wall", "answer_q1 = 1")
    _notebook(tmp_path / "class" / "mallory" / "04_pipeline.ipynb", "pipeline", "answer_q1 = 'first try'")
    real = classroom.one_per_student

    def choose_then_rewrite(*args):
        ignored = real(*args)
        _notebook(chosen, "pipeline", "answer_q1 = 'second try'")
        return ignored

    monkeypatch.setattr(classroom, "one_per_student", choose_then_rewrite)
    calls: list = []
    out = tmp_path / "g"
    classroom.grade_class([tmp_path / "class"], out, progress=False, grade_one=_stand_in(calls))
    assert calls == [["answer_q1 = 'first try'"]], calls  # one kernel for lesson 2, the notebook chosen for it
    rows = _rows(out)
    row = rows["class/mallory/01_memory_wall.ipynb"]
    assert row["problems"].startswith("not run: the file changed while the class was graded"), row
    assert row["lesson"] == "memory_wall" and float(row["score"]) == 0.0
    assert not journal.read_journal(out / journal.JOURNAL, journal.journal_key(out)).get(
        "class/mallory/01_memory_wall.ipynb"
    ), "a changed notebook is never journaled: the next run chooses again"


def test_the_choice_and_the_journal_name_a_refused_file_alike():
    """01: the digest of a file read_submission refuses is the journal's, so an unreadable chosen file stays chosen."""
    assert class_submissions.digest_of(None) == journal.NOT_A_FILE


# ---- 02: the output folder's files -----------------------------------------------------------------------------------

_OUTPUTS = ("results.csv.tmp", "results.json.tmp", "summary.txt.tmp", "summary.csv.tmp", "histogram.png", "results.csv")


def test_links_in_the_output_folder_are_never_written_through(tmp_path):
    """02 (succeeded, fixed): links planted under the names the run writes leave the files they name untouched."""
    _notebook(tmp_path / "class" / "alice" / "01_memory_wall.ipynb", "memory_wall", "answer_q1 = 1")
    out = tmp_path / "g"
    out.mkdir()
    for name in _OUTPUTS:
        (tmp_path / f"victim-{name}").write_text("VICTIM")
        os.symlink(tmp_path / f"victim-{name}", out / name)
    classroom.grade_class([tmp_path / "class"], out, progress=False, grade_one=_stand_in([]))
    for name in _OUTPUTS:
        assert (tmp_path / f"victim-{name}").read_text() == "VICTIM", name
    assert not (out / "results.csv").is_symlink() and "class/alice/01_memory_wall.ipynb" in _rows(out)
    assert (out / "histogram.png").read_bytes().startswith(b"\x89PNG")
    left = [p.name for p in out.iterdir() if p.name.startswith(".") and p.name not in (".lock", journal.JOURNAL_KEY)]
    assert not left, left  # no temporary file of the run stays


@pytest.mark.parametrize("name", [journal.JOURNAL, journal.JOURNAL_KEY])
@pytest.mark.parametrize("kind", ["link", "fifo"])
def test_a_link_or_fifo_as_the_journal_or_its_key_is_named(tmp_path, name, kind):
    """02 (succeeded, fixed): a link as journal.jsonl was appended to; a FIFO as .journal.key blocked the run."""
    _notebook(tmp_path / "class" / "alice" / "01_memory_wall.ipynb", "memory_wall", "answer_q1 = 1")
    out = tmp_path / "g"
    out.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("VICTIM")
    if kind == "link":
        os.symlink(victim, out / name)
    else:
        os.mkfifo(out / name)
    previous = signal.signal(signal.SIGALRM, lambda *_: pytest.fail("the run blocked on the output folder's file"))
    signal.alarm(20)
    try:
        with pytest.raises(ConfigurationError, match=f"{name}(:| is) not a"):
            classroom.grade_class([tmp_path / "class"], out, progress=False, grade_one=_stand_in([]))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert victim.read_text() == "VICTIM"


def test_a_resumed_run_still_reads_its_own_journal(tmp_path):
    """02: the journal and key written by a run are read back by the next (the notebook is not graded again)."""
    _notebook(tmp_path / "class" / "alice" / "01_memory_wall.ipynb", "memory_wall", "answer_q1 = 1")
    calls: list = []
    for _ in range(2):
        classroom.grade_class([tmp_path / "class"], tmp_path / "g", progress=False, grade_one=_stand_in(calls))
    assert len(calls) == 1


# ---- 03: a stale lock holder -----------------------------------------------------------------------------------------


def test_a_lock_kept_by_a_forked_process_refuses_the_next_run(tmp_path):
    """03 (held): a child forked while the lock was held keeps it after its parent's run ended; the next is refused."""
    out = tmp_path / "g"
    out.mkdir()
    with journal.writing(out):
        child = os.fork()
        if child == 0:  # the stale holder: inherits the locked descriptor (flock locks belong to the open file)
            time.sleep(30)
            os._exit(0)
    try:
        with pytest.raises(ConfigurationError, match="another distlab grade is writing"):
            with journal.writing(out):
                pass
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
    with journal.writing(out):  # gone with its holder
        pass


_LOCK_PROBE = """
import os
found = []
for fd in range(256):
    try:
        if os.fstat(fd).st_ino == INODE:
            found.append(fd)
    except OSError:
        pass
raise RuntimeError(f"LOCKFDS {found}")
"""

_COMMS = """
from ipykernel.comm import Comm
for i in range(200):
    Comm(target_name="jupyter.widget", data={"state": {"answer_q2": "x" * 30000, "value": 1}})
"""


def test_kernel_requests_gain_nothing(tmp_path):
    """03 and 04 (held): a real bubblewrap kernel, graded while the output folder's lock is held."""
    want = lesson_variant("memory_wall", None)["q1"].expected()
    out = tmp_path / "g"
    out.mkdir()
    kernelspec = {"kernelspec": {"name": "bash", "display_name": "sh", "language": "bash", "argv": ["/bin/sh", "-c"]}}
    with journal.writing(out):
        probe = _LOCK_PROBE.replace("INODE", str(os.stat(out / journal.OUT_LOCK).st_ino))
        path = _notebook(
            tmp_path / "01_memory_wall.ipynb",
            "memory_wall",
            f"import sys\nanswer_q1 = {want!r} if sys.executable.endswith(('python', 'python3')) else None",
            probe,
            "answer_q2 = input('your answer? ')",
            "import getpass\nanswer_q2 = getpass.getpass()",
            _COMMS,
            "get_ipython().kernel.do_shutdown(restart=True)\nimport os\nos._exit(0)",
            "answer_q2 = 'after the restart'",
            metadata=kernelspec,
        )
        grade = grade_notebook(path, lesson="memory_wall", timeout=90, cell_timeout=30)
    problems = "\n".join(grade.problems)
    assert "raised RuntimeError: LOCKFDS []" in problems, problems
    assert problems.count("raised StdinNotImplementedError") == 2, problems
    assert "code cell 5" not in problems, problems  # the comms were sent, and dropped unread
    assert "the kernel stopped (crashed, exited or ran out of memory) in code cell 6" in problems, problems
    points = {q.question: q.points for q in grade.questions}
    assert points["q1"] == 1.0 and points["q2"] == 0.0, grade.questions  # read before the stop; nothing restarted


# ---- 05: distlab metadata ----------------------------------------------------------------------------------------------


def _policy() -> variants.VariantPolicy:
    return variants.VariantPolicy(variants.Roster({s: {"id": s} for s in ("mallory", "bob")}, SECRET))


def _graded(metadata: dict, lesson: str = "memory_wall") -> NotebookGrade:
    from distlab.grading.discover import identify_lesson, lesson_questions

    found = identify_lesson(metadata, "01_memory_wall.ipynb", [])[0] or lesson
    grade = NotebookGrade("x.ipynb", found, [], [])
    _policy()(grade, metadata, lesson_questions(found), identity=("mallory",))
    return grade


def test_a_seed_issued_for_another_lesson_is_refused():
    """05 (held): mallory's own seed for lesson 4, carried by her lesson-1 notebook, is not lesson 1's."""
    roster = _policy().roster
    seed = roster.seed("pipeline", "mallory")
    grade = _graded({"distlab": {"lesson": "memory_wall", "variant": {"student": "mallory", "seed": seed}}})
    assert any("variant seed is not the one issued" in p for p in grade.problems), grade.problems


def test_a_variant_naming_a_classmate_is_graded_as_the_folders_student():
    """05 (held): the variant says bob, its seed is mallory's: graded as mallory's, with her numbers."""
    roster = _policy().roster
    seed = roster.seed("memory_wall", "mallory")
    grade = _graded({"distlab": {"lesson": "memory_wall", "variant": {"student": "bob", "seed": seed}}})
    assert grade.student == "mallory" and not any("refused" in p for p in grade.problems), grade.problems


def test_a_lesson_named_by_its_alias_is_one_lesson(tmp_path):
    """05 (held): metadata naming the old name of the lesson its file name names: one lesson, graded once."""
    folder = tmp_path / "class" / "mallory"
    _notebook(folder / "03_data_parallel_zero.ipynb", "data_parallel", "answer_q1 = 1")
    _notebook(folder / "data_parallel_zero_v2.ipynb", "data_parallel_zero", "answer_q1 = 2")
    subs = classroom.collect([tmp_path / "class"])
    ignored = class_submissions.one_per_student(subs, None)
    assert len(subs) == 2 and len(ignored) == 1
    assert all(not isinstance(v, str) for v in ignored.values()), ignored  # never "not run": one lesson


# ---- 06: odd attachment references -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "outside",
    [
        "See attachment:worked%2Epng",
        "See attachment:Worked.png",
        "Code: `attachment:worked.png`",
        "![fig][w]",
        "<img src=attachment:worked.png.bak>",
    ],
)
def test_an_attachment_is_kept_only_when_the_exercise_names_it_exactly(outside):
    """06 (held): the solution block shows the image; the text left after it names it otherwise, or not at all."""
    block = (
        "<!-- BEGIN SOLUTION -->\n<img src='attachment:worked.png'>\n[w]: attachment:worked.png\n<!-- END SOLUTION -->"
    )
    cell = nbformat.v4.new_markdown_cell(f"{outside}\n{block}", attachments={"worked.png": {"image/png": "V09SS0VE"}})
    exercise = build.exercise_from_solution(nbformat.v4.new_notebook(cells=[cell]))
    assert "attachments" not in exercise.cells[0] or not exercise.cells[0].attachments, exercise.cells[0]
    assert "V09SS0VE" not in json.dumps(exercise)


# ---- 07: export keys shaped as paths -------------------------------------------------------------------------------------


def test_export_keys_shaped_as_paths_name_no_folder(tmp_path):
    """07 (held): only an exact top folder of the export gets submitters; keys shaped as paths give nobody's ids."""
    export = tmp_path / "export"
    _notebook(export / "submission_1" / "01_memory_wall.ipynb", "memory_wall", "answer_q1 = 1")
    _notebook(export / "submission_2" / "01_memory_wall.ipynb", "memory_wall", "answer_q1 = 2")
    (export / "submission_metadata.yml").write_text(
        "submission_1:\n  :submitters:\n  - :sid: 'mallory'\n"
        "submission_1/../submission_2:\n  :submitters:\n  - :sid: 'bob'\n"
        "../submission_2:\n  :submitters:\n  - :sid: 'carol'\n"
        f"{export / 'submission_2'}:\n  :submitters:\n  - :sid: 'dave'\n"
    )
    subs = {s.key: s.identity for s in classroom.collect([export], export=True)}
    assert subs == {
        "export/submission_1/01_memory_wall.ipynb": ("mallory",),
        "export/submission_2/01_memory_wall.ipynb": (),
    }


# ---- 08: CSV cell starts ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["   =cmd|' /C calc'!A0", "\u00a0=1+1", "\u3000+1", "\t @SUM(1)", "x; \u00a0=1"])
def test_a_name_padded_before_a_formula_is_text(name):
    """08 (held): what a file name starts with reaches results.csv as text, whatever spaces come first."""
    cell = text_cell(shown(name, 300))
    assert cell[:1] not in ("=", "+", "-", "@", " ", "\t"), cell
    assert ";=" not in cell.replace(" ", "") and "; =" not in cell, cell
