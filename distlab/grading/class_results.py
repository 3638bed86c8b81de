"""What a class run writes besides its journal (distlab.grading.classroom): results.csv, results.json, gradescope/,
summary.txt, summary.csv and histogram.png.

One row per notebook. Two notebooks that resolve to one student are both flagged (``flagged`` in results.csv, a
problem in results.json), never merged. CSV cells that a spreadsheet would read as a formula (starting with
``= + - @``, tab, CR or LF, or holding such a start after a ``;``, where a spreadsheet of a ``;`` locale starts a
cell) are written as text. ``results.json`` is the JSON of distlab grade --json,
``gradescope/`` one Gradescope results.json per notebook, ``summary.txt`` and ``summary.csv`` per question:
correct, wrong, not attempted, mean points, and ``histogram.png`` the scores and per-question correct shares
(matplotlib).
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from .._words import counted as _counted
from ..errors import ConfigurationError
from ..lessons.questions import CORRECT, NOT_ATTEMPTED
from .journal import grade_from_dict
from .report import MAX_PROBLEMS, PROBLEM_CHARS, GradeReport, NotebookGrade, quoted, shown
from .variants import SEVERAL_STUDENTS

__all__ = [
    "CSV_FILE",
    "JSON_FILE",
    "SUMMARY_TXT",
    "SUMMARY_CSV",
    "HISTOGRAM",
    "text_cell",
    "shared_students",
    "results_csv",
    "question_summary",
    "per_student",
    "summary_text",
    "plot_histogram",
    "write_outputs",
]

CSV_FILE, JSON_FILE, SUMMARY_TXT, SUMMARY_CSV, HISTOGRAM = (
    "results.csv",
    "results.json",
    "summary.txt",
    "summary.csv",
    "histogram.png",
)


def _write_atomic(path: Path, text: str | bytes) -> None:
    """`path` replaced by a new file holding `text`: written under a fresh random name (mkstemp: O_EXCL, so never
    through a link or into a file already there) and renamed over `path` (a link there is replaced, not followed).
    Red team round 28 02: "results.csv.tmp" was opened by name, so a link planted under that name in the output
    folder made a root grader overwrite the file it named."""
    data = text if isinstance(text, bytes) else text.encode("utf-8", "backslashreplace")  # a lone surrogate too
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), 0o644)
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


#: where a spreadsheet may start a cell inside one CSV cell: a ";" (Excel's list separator in most of Europe, where a
#: .csv is split at ";" and a "," is text), then any spaces (LibreOffice's "trim spaces"); a formula character there
#: starts a formula cell just as at the cell's own start (red team round 23 01)
_CELL_STARTS = re.compile(r"(;\s*)(?=[=+\-@])")


def text_cell(value):
    """A CSV cell a spreadsheet shows as text, whatever separator it splits the file at: a string starting with
    = + - @, tab, CR or LF gets a leading ', and so does every place after a ";" (then spaces) where one of = + - @
    follows: a spreadsheet that splits at ";" starts a cell there (red team round 23 01: a file name
    "x;=cmd|' /C calc'!A0;.ipynb" was one cell in results.csv and a DDE formula in Excel with a ";" list separator).
    A "," never splits a cell (the csv module quotes a cell holding one) and text from a notebook holds no tab, CR
    or LF (report.shown escapes them).

    (OWASP's advice on CSV injection: such a cell is read as a formula.)

    >>> [text_cell(v) for v in ("=1+1", "\\tx", "ok", -1.5, "a;=1+1; -2")]
    ["'=1+1", "'\\tx", 'ok', -1.5, "a;'=1+1; '-2"]
    """
    if not isinstance(value, str):
        return value
    value = _CELL_STARTS.sub(r"\1'", value)
    if value[:1] in ("=", "+", "-", "@", "\t", "\r", "\n"):
        return "'" + value
    return value


def _student(record: dict) -> str:
    """Whose notebook a record is: the roster id it was graded for, else the identity the submission gave; nobody's
    ("") for a group graded for nobody or a submission whose ids name two roster students (never the first named)."""
    student = record["grade"].get("student") or ""
    if student:
        return str(student)
    identity = record.get("identity") or []
    group = len(identity) > 1 and all(isinstance(p, (list, tuple)) for p in identity)
    # the grader's own refusal, at the start of a problem: a notebook's exception message saying the same words
    # inside one of its problems made its row nobody's, unflagged (red team round 12 class/02)
    if group or any(str(p).startswith(SEVERAL_STUDENTS) for p in record["grade"].get("problems", [])):
        return ""
    first = identity[0] if identity else ""
    return str(first[0] if isinstance(first, (list, tuple)) and first else first)


def _identity_text(record: dict) -> str:
    """The ids a submission named (a group's submitters each), as one line of text."""
    people = record.get("identity") or []
    return " ".join(" ".join(map(str, p)) if isinstance(p, (list, tuple)) else str(p) for p in people)


def shared_students(records: list[dict]) -> dict[str, str]:
    """{notebook key: its flag} for every student with more than one notebook per lesson: the flag names at most
    FLAG_NAMES of the student's other notebooks (escaped, cut) and counts the rest, so its length, and the cost of
    all flags, grow linearly with the number of records, never quadratically."""
    groups: dict[tuple, list[str]] = {}
    for r in records:
        student = _student(r)
        if student:
            groups.setdefault((student, r["grade"].get("lesson") or ""), []).append(r["key"])
    flags: dict[str, str] = {}
    for keys in groups.values():
        if len(keys) > 1:
            for k in keys:
                others = [o for o in keys[: FLAG_NAMES + 1] if o != k][:FLAG_NAMES]
                flags[k] = _flag(others, len(keys) - 1)
    return flags


#: the other notebooks a flag names (the rest are counted): a flag's length is bounded whatever a student uploads
FLAG_NAMES = 5


def _flag(named: list[str], count: int) -> str:
    """The flag of a notebook whose student also submitted `count` others, `named` among them (escaped)."""
    text = ", ".join(quoted(k) for k in named)
    more = f" and {count - len(named)} more" if count > len(named) else ""
    return f"flagged: the same student also submitted {text}{more}; each is graded on its own, not merged"


#: what separates a row's problems in results.csv; a "|" inside a problem's text is shown as "\\|"
PROBLEM_SEPARATOR = " | "


def problems_cell(problems: list) -> str:
    """A notebook's problems as one results.csv cell, ASCII only: each shown (report.shown) with its own "|" escaped
    as "\\|" and every other character outside ASCII as its escape (\\u01c0), joined by PROBLEM_SEPARATOR. So the
    text a notebook puts in a problem (its exception's message) cannot pass for more problems of the grader's: red
    team round 5 class/05 forged "regraded by the instructor" and a copy flag with "|", round 6 default/02 with
    look-alikes of it (U+01C0, U+2223); any character that could look like the separator is now an escape.

    >>> problems_cell(["raised X: a | regraded: 8/8 \\u01c0 flagged", "no answer for q2"])
    'raised X: a \\\\| regraded: 8/8 \\\\u01c0 flagged | no answer for q2'
    """
    texts = (shown(" ".join(str(p).split()), PROBLEM_CHARS) for p in problems[:MAX_PROBLEMS])
    escaped = (t.replace("|", "\\|").encode("ascii", "backslashreplace").decode("ascii") for t in texts)
    return PROBLEM_SEPARATOR.join(escaped)


def results_csv(records: list[dict]) -> str:
    """One row per notebook: key, student, lesson, score, max_score, each question's points, problems, flagged."""
    names = []
    for r in records:
        for q in r["grade"].get("questions", []):
            if q["question"] not in names:
                names.append(q["question"])
    flags = shared_students(records)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["notebook", "student", "lesson", "score", "max_score", *names, "seconds", "problems", "flagged"])
    for r in records:
        g = r["grade"]
        points = {q["question"]: q["points"] for q in g.get("questions", [])}
        row = [
            shown(r["key"], 300),
            shown(g.get("student") or _identity_text(r), 200),
            shown(g.get("lesson") or "", 80),
            g["score"],
            g["max_score"],
            *(points.get(n, "") for n in names),
            g.get("seconds", ""),
            problems_cell(g.get("problems", [])),
            flags.get(r["key"], ""),
        ]
        writer.writerow([text_cell(c) for c in row])
    return out.getvalue()


def question_summary(grades: list[NotebookGrade]) -> list[dict]:
    """Per (lesson, question): notebooks, correct, wrong, not attempted, mean points, max points."""
    table: dict[tuple, dict] = {}
    for g in grades:
        for q in g.questions:
            row = table.setdefault(
                (g.lesson or "?", q.question),
                dict(
                    lesson=g.lesson or "?",
                    question=q.question,
                    notebooks=0,
                    correct=0,
                    wrong=0,
                    not_attempted=0,
                    points=0.0,
                    max_points=q.max_points,
                ),
            )
            row["notebooks"] += 1
            row["points"] += q.points
            key = "correct" if q.status == CORRECT else "not_attempted" if q.status == NOT_ATTEMPTED else "wrong"
            row[key] += 1
    rows = []
    for row in table.values():
        row["mean_points"] = round(row.pop("points") / row["notebooks"], 3)
        rows.append(row)
    return rows


def per_student(grades: list[NotebookGrade], students: list[str]) -> list[NotebookGrade]:
    """The grades the class statistics count: one per student and lesson (the first scored one), so a student's
    extra notebooks (copies under other names, rows not run) never weigh more than one. students[i] is whose
    grades[i] is ("" when unknown: that notebook counts on its own)."""
    kept: dict[tuple, NotebookGrade] = {}
    for i, (g, student) in enumerate(zip(grades, students)):
        who = ("student", student) if student else ("notebook", i)
        if g.max_score and (who, g.lesson) not in kept:
            kept[(who, g.lesson)] = g
    return list(kept.values())


def summary_text(grades: list[NotebookGrade], students: list[str] | None = None) -> str:
    """The class summary: how many notebooks, the mean score and the per-question table. With `students` (whose
    each grade is), the statistics count one notebook per student and lesson (per_student)."""
    counted = [g for g in grades if g.max_score] if students is None else per_student(grades, students)
    rows = question_summary(counted)
    scores = [g.score / g.max_score for g in counted]
    who = "" if students is None else f" ({_counted(len(counted), 'student-lesson')}, one notebook each)"
    out = [
        f"{_counted(len(grades), 'notebook')}; mean score {100 * sum(scores) / len(scores):.1f}%{who}"
        if scores
        else f"{_counted(len(grades), 'notebook')}; none could be scored",
        "",
        f"{'lesson':<20} {'question':<9} {'correct':>8} {'wrong':>6} {'not att.':>8} {'mean':>6}",
    ]
    for r in rows:
        out.append(
            f"{shown(r['lesson'], 20):<20} {shown(r['question'], 9):<9} {r['correct']:>8} {r['wrong']:>6} "
            f"{r['not_attempted']:>8} {r['mean_points']:>6g}"
        )
    refused = [g for g in grades if any(str(p).startswith("refused") for p in g.problems)]
    if refused:
        out += ["", f"{_counted(len(refused), 'notebook')} refused (see their problems in results.csv)"]
    return "\n".join(out) + "\n"


def plot_histogram(grades: list[NotebookGrade], target: Path) -> Path:
    """Save the score histogram and the per-question correct shares as one figure (matplotlib, no display)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    scores = [100 * g.score / g.max_score for g in grades if g.max_score]
    rows = question_summary(grades)
    fig = Figure(figsize=(10, 4))
    left, right = fig.subplots(1, 2)
    left.hist(scores, bins=[i * 10 for i in range(11)], color="#4c72b0", edgecolor="white")
    left.set(xlabel="score (%)", ylabel="notebooks", title=f"Scores ({len(scores)} notebooks)", xlim=(0, 100))
    left.yaxis.get_major_locator().set_params(integer=True)
    labels = [
        f"{r['question']}" if len({x["lesson"] for x in rows}) == 1 else f"{r['lesson'][:8]}:{r['question']}"
        for r in rows
    ]
    right.bar(labels, [100 * r["correct"] / r["notebooks"] for r in rows], color="#55a868")
    right.set(ylabel="correct (%)", title="Correct, per question", ylim=(0, 100))
    right.tick_params(axis="x", labelrotation=45)
    fig.tight_layout()
    image = io.BytesIO()
    fig.savefig(image, dpi=100, format="png")
    _write_atomic(target, image.getvalue())  # never through a link under its name (red team round 28 02)
    return target


def _write_gradescope(folder: Path, records: list[dict], grades: list[NotebookGrade]) -> None:
    """folder/<sha256 of the key>-<safe stem>.json per notebook: built in a new folder (every file created with
    O_EXCL: two rows never share a file, a collision is refused), then put in place of the old one (files of
    notebooks no longer given go with it)."""
    new = Path(tempfile.mkdtemp(prefix=".gradescope-", dir=folder.parent))
    for r, g in zip(records, grades):
        stem = re.sub(r"[^A-Za-z0-9._-]", "_", Path(r["key"]).stem)[:60]
        name = hashlib.sha256(r["key"].encode("utf-8", "backslashreplace")).hexdigest() + "-" + stem + ".json"
        try:
            fd = os.open(new / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        except FileExistsError:
            shutil.rmtree(new, ignore_errors=True)
            raise ConfigurationError(f"gradescope/{name}: two notebooks would share this results file") from None
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as f:
            f.write(json.dumps(GradeReport([g]).to_gradescope(), indent=2) + "\n")
    os.chmod(new, 0o755)
    old = folder.with_name(new.name + ".old")
    if folder.is_dir() and not folder.is_symlink():
        os.replace(folder, old)
    elif folder.exists() or folder.is_symlink():
        folder.unlink()
    os.replace(new, folder)
    shutil.rmtree(old, ignore_errors=True)


def write_outputs(out: Path, records: list[dict]) -> GradeReport:
    """results.json, gradescope/, summary.txt, summary.csv, histogram.png from the journal's records."""
    grades = [grade_from_dict(r["grade"]) for r in records]
    flags = shared_students(records)
    for r, g in zip(records, grades):
        if r["key"] in flags:
            g.problems.append(flags[r["key"]])
    report = GradeReport(grades)
    _write_atomic(out / JSON_FILE, json.dumps(report.to_json(), indent=2) + "\n")
    _write_gradescope(out / "gradescope", records, grades)
    students = [_student(r) for r in records]
    _write_atomic(out / SUMMARY_TXT, summary_text(grades, students))
    counted = per_student(grades, students)
    rows = question_summary(counted)
    buf = io.StringIO()
    writer = csv.DictWriter(
        buf,
        fieldnames=[
            "lesson",
            "question",
            "notebooks",
            "correct",
            "wrong",
            "not_attempted",
            "mean_points",
            "max_points",
        ],
    )
    writer.writeheader()
    writer.writerows({k: text_cell(v) for k, v in row.items()} for row in rows)
    _write_atomic(out / SUMMARY_CSV, buf.getvalue())
    if grades:
        plot_histogram(counted, out / HISTOGRAM)
    return report
