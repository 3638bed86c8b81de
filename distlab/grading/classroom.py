"""Grading a class: a folder (or a Gradescope / LMS export) of notebooks, resumable, with a summary for the instructor.

    from distlab.grading import classroom
    classroom.grade_class(["submissions/"], "grades/", lesson="memory_wall")

Every notebook is graded in its own fresh kernel (distlab.grading.grade.grade_notebook). As each
one finishes its grade is appended to ``grades/journal.jsonl`` (flushed and synced; ``grades/results.csv`` is
rewritten at most every CSV_EVERY seconds and at the end), so a crash or Ctrl-C loses nothing; a
re-run skips every notebook already in the journal with the same content (a resubmitted file is
graded again). The journal's lines are signed (HMAC) with a key only the grader holds: distlab.grading.journal.

Which notebooks, and whose (one row per notebook; a notebook given twice is refused; the student is the
first folder under what the instructor named, or the submitter a Gradescope export names; one kernel per
student and lesson): distlab.grading.class_submissions. What the run writes (results.csv with notebooks of one
student flagged, never merged, and spreadsheet formulas written as text; results.json, gradescope/, summary.txt,
summary.csv, histogram.png): distlab.grading.class_results. Each file is read once for grading and those bytes
graded. Every private copy lies in the run's folder (distlab.grading.scratch.run_folder), removed at the end or,
after a killed run, by the next.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
from pathlib import Path

from ..errors import ConfigurationError
from .._words import counted
from .class_results import HISTOGRAM, JSON_FILE, SUMMARY_CSV, SUMMARY_TXT  # noqa: F401 (still importable here)
from .class_results import (  # the outputs of a class run: still importable from here
    CSV_FILE,
    plot_histogram,
    question_summary,
    results_csv,
    shared_students,
    summary_text,
    text_cell,
    write_outputs,
)
from .class_results import _write_atomic
from .class_submissions import (  # which notebooks and whose: still importable from here
    Submission,
    absent_students,
    collect,
    lesson_of,
    one_per_student,
    read_gradescope_export,
)
from .discover import canonical, lesson_from_name, lesson_questions
from .journal import JOURNAL_KEY  # noqa: F401 (still importable from here)
from .journal import (  # the resumable journal: still importable from here
    JOURNAL,
    NOT_A_FILE,
    file_digest,
    grade_from_dict,
    identity_of,
    journal_key,
    policy_of,
    read_journal,
    writing,
)
from .journal import _append
from .report import GradeReport, NotebookGrade, excerpt, printable, shown
from .scratch import run_folder
from .submission import read_submission

__all__ = [
    "Submission",
    "read_gradescope_export",
    "TRUSTED_CLASS",
    "CONTAINER_CLASS",
    "journal_key",
    "text_cell",
    "shared_students",
    "collect",
    "one_per_student",
    "file_digest",
    "grade_from_dict",
    "read_journal",
    "results_csv",
    "question_summary",
    "summary_text",
    "plot_histogram",
    "Progress",
    "write_outputs",
    "grade_class",
]


#: why --trusted never grades a class
TRUSTED_CLASS = (
    "--trusted does not grade a class (a folder, --out or --roster): it runs each notebook with the Python "
    "audit hook only, so a student's notebook could read the answer key, classmates' notebooks, the roster and "
    "the secret, and write into the output folder; grade a class with bubblewrap (the default) or inside a "
    "throw-away container (--container)"
)


#: why --container never grades a class either
CONTAINER_CLASS = (
    "--container does not grade a class (--out): it runs each kernel as the grader's own user, trusting the "
    "container to be thrown away after one submission (as the generated Gradescope autograder does); a whole class "
    "in one container would let one student's notebook read classmates' notebooks and write the output folder; "
    "grade a class with bubblewrap (the default)"
)


#: seconds between two rewrites of results.csv while a class is graded (it is always written at the end; the
#: journal, appended after every notebook, is what an interrupted run resumes from)
CSV_EVERY = 30.0


#: at most this many of a notebook's name's last characters follow the progress bar (fewer on a narrow terminal)
LABEL_CHARS = 40


class Progress:
    """A plain-text progress bar on stderr: one updating line on a terminal, one line per notebook otherwise."""

    def __init__(self, total: int, stream=None, width: int = 30):
        self.total, self.width, self.stream = total, width, stream or sys.stderr
        self.started = time.monotonic()
        self.done = 0

    def update(self, done: int, graded: int, label: str = "") -> None:
        self.done = done
        elapsed = time.monotonic() - self.started
        rate = elapsed / graded if graded else 0.0
        eta = rate * (self.total - done)
        line = self.fitted(
            f" {done}/{self.total}  {rate:.1f} s/notebook  ETA {int(eta // 60)}:{int(eta % 60):02d}  ", label
        )
        tty = getattr(self.stream, "isatty", lambda: False)()
        self.stream.write(("\r" + line + "\x1b[K") if tty else line + "\n")
        if tty and done == self.total:
            self.stream.write("\n")
        self.stream.flush()

    def fitted(self, stats: str, label: str) -> str:
        """The bar, `stats` and the end of `label` (shown, at most LABEL_CHARS) within the terminal's width minus one
        (shutil.get_terminal_size: COLUMNS, else the terminal, else 80): the label is cut first, then the bar
        narrowed, then the grader's own text cut, so the line never wraps and a notebook's name never starts a row
        (red team round 8 11: "... REGRADED 8 of 8 OK.ipynb" at column 0 of an 80-column terminal)."""
        columns = max(1, shutil.get_terminal_size((80, 24)).columns - 1)
        bar_width = max(0, min(self.width, columns - len(stats) - 2))
        filled = int(bar_width * self.done / self.total) if self.total else bar_width
        line = (f"[{'#' * filled}{'.' * (bar_width - filled)}]" + stats)[:columns]
        room = min(LABEL_CHARS, columns - len(line))
        return line + (shown(str(label)[-LABEL_CHARS:], 10 * LABEL_CHARS)[-room:] if room > 0 else "")


def _ignored_grade(s: Submission, chosen: Submission | str, lesson: str | None) -> NotebookGrade:
    """The row of a notebook not run (one kernel per student and lesson): no points, and which one was graded in
    its place, or why it is not run (chosen: the reason; its lesson is another than the one it is graded as)."""
    if isinstance(chosen, str):
        found, named = lesson_of(s)
        return NotebookGrade(str(s.path), found or named, [], [chosen], lesson_from="notebook metadata")
    found = canonical(lesson) if lesson else lesson_of(s)[0]
    return NotebookGrade(
        str(s.path),
        found,
        [],
        [
            f"refused to run: one notebook per student and lesson is graded (no points here), and "
            f"{shown(chosen.key, 120)} was graded in its place"
        ],
        lesson_from="--lesson" if lesson else "notebook" if found else "",
    )


def _failed_grade(s: Submission, lesson: str | None, why: str) -> NotebookGrade:
    """The row of a notebook whose grading failed (a bug of ours, a file it could not handle): no points, the reason."""
    return NotebookGrade(
        str(s.path),
        canonical(lesson) if lesson else lesson_from_name(s.path.name),
        [],
        [f"could not be graded ({printable(excerpt(why, 300))}); the rest of the class was graded"],
    )


def _grade_bytes(grade_one, s: Submission, data: bytes, private: Path, options: dict) -> NotebookGrade:
    """Grade exactly `data` (the bytes read and hashed): through a private copy (mode 0600, same file and folder
    name, in a folder only the grader can reach), so the student's file changing after it was read changes nothing."""
    folder = private / hashlib.sha256(s.key.encode("utf-8", "backslashreplace")).hexdigest() / s.path.parent.name
    folder.mkdir(mode=0o700, parents=True)
    copy = folder / s.path.name
    fd = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        grade = grade_one(copy, identity=s.identity or None, **options)
    finally:
        shutil.rmtree(folder.parent, ignore_errors=True)
    grade.path = str(s.path)
    return grade


def _changed_grade(s: Submission, lesson: str | None) -> NotebookGrade:
    """The row of a notebook whose bytes changed between the read that chose it (its lesson, one per student and
    lesson) and the read that would grade it: not run (red team round 28 01: a notebook chosen as lesson 1's was
    rewritten as lesson 2's, and the student's lesson 2 got a second kernel in one run)."""
    return NotebookGrade(
        str(s.path),
        canonical(lesson) if lesson else lesson_from_name(s.path.name),
        [],
        [
            "not run: the file changed while the class was graded (after it was chosen as its student's notebook of "
            "its lesson); no points in this run: run the grader again once the uploads no longer change"
        ],
    )


def _refuse_class_options(options: dict) -> None:
    """A class is never graded with sandbox="trusted" or "container", nor with one identity for every notebook."""
    if options.get("sandbox") in ("trusted", "audit"):
        raise ConfigurationError(TRUSTED_CLASS)
    if options.get("sandbox") == "container":
        raise ConfigurationError(CONTAINER_CLASS)
    if "identity" in options:
        raise ConfigurationError(
            "a class run takes each notebook's student from its folder or the export (--export), not one "
            "identity for all (--submission-metadata is Gradescope's, for one submission)"
        )


def _record(s: Submission, digest: str, policy: str, grade: NotebookGrade) -> dict:
    """The journal's record of one notebook: its key, the digest of the bytes graded, the policy, whose, the grade."""
    return {
        "key": s.key,
        "sha256": digest,
        "policy": policy,
        "identity": list(s.identity),
        "grade": grade.to_dict(),
    }


def _read(s: Submission) -> tuple[bytes | None, str]:
    """(bytes read, their digest): the file read once (read_submission: refused unread when too large, never
    through a link, neither its own name nor a folder below the one given), NOT_A_FILE for what it refuses."""
    data = read_submission(s.path, [], root=s.root or None)
    return data, NOT_A_FILE if data is None else hashlib.sha256(data).hexdigest()


def _folder_grade(s: Submission) -> NotebookGrade:
    """The row of a student folder in which no notebook could be found, saying what could not be searched."""
    return NotebookGrade(str(s.path), None, [], ["no notebook could be found in this upload"])


def _noted(record: dict, s: Submission) -> dict:
    """`record` as the outputs show it: with what the walk could not search in its student's folder (s.notes) among
    its problems (never in the journal: the walk is redone on every run)."""
    if not s.notes:
        return record
    grade = dict(record["grade"])
    grade["problems"] = [*grade.get("problems", []), *(f"in this student's folder: {n}" for n in s.notes)]
    return {**record, "grade": grade}


def _grade_submission(grade_one, s: Submission, data, private: Path, options: dict, lesson) -> NotebookGrade:
    """The grade of the bytes read (`data`), or of the path when it was refused unread; a failure is a row with
    the reason."""
    try:
        if data is None:  # grade_notebook refuses it again, by fstat, without reading it (nor through a link)
            return grade_one(s.path, identity=s.identity or None, root=s.root or None, **options)
        return _grade_bytes(grade_one, s, data, private, options)
    except Exception as exc:  # one bad file yields a row with the reason, never aborts the class
        return _failed_grade(s, lesson, f"{type(exc).__name__}: {exc}")


def grade_class(
    paths, out, *, progress: bool = True, stream=None, grade_one=None, export: bool = False, **options
) -> GradeReport:
    """Grade every notebook under `paths` into folder `out`, resuming a run that was interrupted.

    options go to grade_notebook (lesson, timeout, sandbox, variants, ...). grade_one replaces
    grade_notebook (for tests). export=True: the one folder given is a Gradescope export (see collect).
    Ctrl-C stops after writing what is done; run again to continue.
    Each submission is read once (read_submission: O_NOFOLLOW, refused past the size limit unread), hashed,
    and those bytes are graded; one kernel per student and lesson (one_per_student); a notebook whose grading
    fails gets a row with the reason and the class goes on. One run at a time writes to `out` (journal.writing:
    a second one is refused while the first lives).
    A class is never graded with sandbox="trusted" or "container" (see TRUSTED_CLASS, CONTAINER_CLASS).
    """
    _refuse_class_options(options)
    if grade_one is None:
        from .grade import grade_notebook as grade_one
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with writing(out):
        return _grade_class(paths, out, progress, stream, grade_one, export, options)


def _grade_class(paths, out: Path, progress: bool, stream, grade_one, export: bool, options: dict) -> GradeReport:
    """grade_class, with the output folder's lock held."""
    journal = out / JOURNAL
    lesson = options.get("lesson")
    if lesson is not None:
        lesson_questions(lesson)  # the instructor's typo is our error, once, before anything is graded
    submissions = collect(paths, export=export, lesson=lesson)
    roster = getattr(options.get("variants"), "roster", None)
    if roster is not None:  # every roster student gets a row, one who submitted nothing too
        submissions += absent_students(roster, submissions)
    chosen: dict[str, str] = {}  # the digest of the bytes each student folder's notebook was chosen by
    ignored = one_per_student(submissions, lesson, chosen)
    key = journal_key(out)
    done = read_journal(journal, key)
    policy = policy_of({**options, "export": export})
    for s in submissions:
        if not s.notebook:
            done[s.key] = _record(s, "", policy, _folder_grade(s))
        elif s.key in ignored:
            done[s.key] = _record(s, "", policy, _ignored_grade(s, ignored[s.key], lesson))
    graded = [s for s in submissions if s.notebook and s.key not in ignored]

    def records() -> list[dict]:
        return [_noted(done[s.key], s) for s in submissions if s.key in done]

    bar = Progress(len(graded), stream) if progress else None
    interrupted, skipped, written = False, 0, time.monotonic()
    with run_folder() as private:  # mode 0700, the grader's alone; removed at the end, or by the next run
        try:
            for count, s in enumerate(graded, 1):
                data, digest = _read(s)  # one notebook's bytes at a time: the grader's memory does not grow
                record = done.get(s.key)
                if chosen.get(s.key, digest) != digest:  # never journaled: the next run chooses again
                    done[s.key] = _record(s, "", policy, _changed_grade(s, lesson))
                elif (
                    record is not None
                    and record.get("sha256") == digest
                    and record.get("policy") == policy
                    and identity_of(record.get("identity")) == identity_of(list(s.identity))
                ):
                    skipped += 1
                else:
                    grade = _grade_submission(grade_one, s, data, private, options, lesson)
                    done[s.key] = _record(s, digest, policy, grade)
                    _append(journal, done[s.key], key)
                if time.monotonic() - written > CSV_EVERY:  # at bounded cost: the journal is what resumes
                    _write_atomic(out / CSV_FILE, results_csv(records()))
                    written = time.monotonic()
                if bar:
                    bar.update(count, count - skipped, s.key)
        except KeyboardInterrupt:
            interrupted = True
    if bar and skipped:
        bar.stream.write(f"{counted(skipped, 'notebook')} already graded in {shown(str(journal))}: skipped\n")
    final = records()
    _write_atomic(out / CSV_FILE, results_csv(final))
    report = write_outputs(out, final)
    if interrupted:
        raise KeyboardInterrupt(
            f"interrupted after {len(final)} of {len(submissions)} notebooks; "
            f"grades so far are in {out}; run the same command again to continue"
        )
    return report
