"""Grading a class: a folder (or a Gradescope / LMS export) of notebooks, resumable, with a summary for the instructor.

    from distlab.grading import classroom
    classroom.grade_class(["submissions/"], "grades/", lesson="memory_wall")

Every notebook is graded in its own fresh kernel (distlab.grading.grade.grade_notebook). As each
one finishes its grade is appended to ``grades/journal.jsonl`` (flushed and synced) and
``grades/results.csv`` is rewritten from the journal, so a crash or Ctrl-C loses nothing; a
re-run skips every notebook already in the journal with the same content (a resubmitted file is
graded again). Each journal line carries an HMAC-SHA256 of its record under a random key the grader
keeps in ``grades/.journal.key`` (mode 0600; no kernel ever sees the output folder): a line that
fails it (forged, edited, cut short) is not trusted, and its notebook is graded again.

One row per notebook, keyed by its path relative to the common folder of what was given
(``s1/x.ipynb`` and ``s2/x.ipynb`` are two rows); a notebook given twice is refused. Two
notebooks that resolve to one student are both flagged (``flagged`` in results.csv, a problem
in results.json), never merged. CSV cells that a spreadsheet would read as a formula (starting
with ``= + - @``, tab, CR or LF) are written as text. At the end: ``results.json`` (the JSON of distlab grade --json), ``gradescope/``
(one Gradescope results.json per notebook), ``summary.txt`` and ``summary.csv`` (per question:
correct, wrong, not attempted, mean points) and ``histogram.png`` (scores and per-question
correct shares, matplotlib).

Which student a notebook belongs to (for per-student variants, distlab.grading.variants): the first folder
under what the instructor named (the one folder given, else the common folder of all given; nbgrader and
``distlab exercises --variants`` lay them out as ``submitted/<student>/x.ipynb``), never a folder inside a
student's upload; with ``export=True`` (``--export``) the one folder given is a Gradescope export and its
``submission_metadata.yml`` names the submitter of each ``submission_N`` folder (no other such file is read);
otherwise the notebook names no student and, with a roster, is refused (the notebook's own metadata is never
trusted to say whose it is). The export is read with a safe YAML loader (yaml.safe_load's rules: plain data
only; Ruby tags read as plain data) and ids come only from its ``:sid:`` and ``:email:`` fields, never from free
text. One kernel per student and lesson (one_per_student); each file is read once and those bytes graded.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import json
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from .. import lessons as manifest
from ..errors import ConfigurationError
from ..lessons.questions import CORRECT, NOT_ATTEMPTED
from .discover import canonical, lesson_from_name, lesson_questions
from .report import GradeReport, NotebookGrade, QuestionGrade, excerpt, printable
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

JOURNAL_KEY = ".journal.key"
#: the digest of what read_submission refuses (a link, a FIFO, a file past the size limit): graded without a kernel
NOT_A_FILE = "not-a-file"
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
JOURNAL, CSV_FILE, JSON_FILE, SUMMARY_TXT, SUMMARY_CSV, HISTOGRAM = (
    "journal.jsonl",
    "results.csv",
    "results.json",
    "summary.txt",
    "summary.csv",
    "histogram.png",
)


@dataclass(frozen=True)
class Submission:
    """One notebook to grade: its file, a stable key (path relative to what was given), who submitted it."""

    path: Path
    key: str
    identity: tuple = ()
    #: the per-student folder it came from (the first folder under what the instructor named), "" for none
    folder: str = ""


def _yaml_loader():
    """yaml.SafeLoader that reads any tag (Gradescope writes Ruby ones) as the plain data under it."""
    try:
        import yaml
    except ImportError:  # jupyter_server (jupyterlab, the test extra) depends on it
        raise ConfigurationError(
            "reading a Gradescope export's submission_metadata.yml needs PyYAML: pip install pyyaml"
        ) from None

    class Loader(yaml.SafeLoader):
        pass

    def plain(loader, _suffix, node):
        if isinstance(node, yaml.MappingNode):
            return loader.construct_mapping(node, deep=True)
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node, deep=True)
        return loader.construct_scalar(node)

    Loader.add_multi_constructor("!", plain)
    Loader.add_multi_constructor("tag:", plain)
    return yaml, Loader


def _field(entry: dict, name: str):
    """entry[':name'] (Gradescope's Ruby symbol keys) or entry['name']."""
    for key in (f":{name}", name, f":{name}:"):
        if key in entry:
            return entry[key]
    return None


def _clean_id(text: str) -> str:
    """An id as read from an export: ASCII spaces around it dropped (no other characters: a no-break space or an
    ideographic space stays, so the id matches nobody) and lone surrogates made U+FFFD (it always encodes)."""
    return text.strip(" \t\r\n\f\v").encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def read_gradescope_export(path: Path) -> dict[str, tuple]:
    """{submission folder: (sid, email, ...) of each submitter} from a Gradescope export's submission_metadata.yml.

    Parsed with a safe YAML loader; ids are only the ``:sid:`` and ``:email:`` values of the
    ``:submitters:`` list (a string or a number each), so a name holding a newline and
    ``:sid: victim`` stays a name; only ASCII spaces are stripped (Roster.find matches ASCII ids only). A file that is not such YAML is refused with the reason.
    """
    yaml, loader = _yaml_loader()
    try:
        data = yaml.load(path.read_text(encoding="utf-8", errors="replace"), Loader=loader)  # noqa: S506 (safe)
    except (yaml.YAMLError, OSError, RecursionError) as exc:
        raise ConfigurationError(f"{path}: not a readable Gradescope submission_metadata.yml ({exc!s:.200})") from None
    if not isinstance(data, dict):
        raise ConfigurationError(f"{path}: a Gradescope submission_metadata.yml maps submission folders to metadata")
    found: dict[str, tuple] = {}
    for folder, meta in data.items():
        ids: list[str] = []
        people = _field(meta, "submitters") if isinstance(meta, dict) else None
        for person in people if isinstance(people, list) else []:
            if not isinstance(person, dict):
                continue
            for name in ("sid", "email"):
                value = _field(person, name)
                if isinstance(value, (str, int)) and not isinstance(value, bool):
                    value = _clean_id(str(value))
                    if value:
                        ids.append(value)
        found[str(folder)] = tuple(ids)
    return found


def _key(path: str, base: str) -> str:
    """The notebook's row name: its path relative to `base`, as text that always encodes (a byte of the name that
    is not UTF-8 becomes \\xNN, a backslash \\\\: two different names never get one key)."""
    rel = Path(os.path.relpath(path, base)).as_posix().replace("\\", "\\\\")
    return rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def shown(text: str) -> str:
    """`text` with every character that is not printable (terminal control sequences, a lone surrogate) escaped."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape", "backslashreplace").decode() for ch in text)


#: the grading options a journal record's policy covers (a change to any of them grades the class again)
_POLICY_OPTIONS = ("lesson", "sandbox", "timeout", "cell_timeout", "memory_limit", "file_size_limit", "process_limit")


def policy_of(options: dict) -> str:
    """A fingerprint of how a grade was given besides the file: the lesson, the sandbox and its limits, the distlab
    version, the rule of one notebook per student and lesson, and the variant policy (with a roster: a digest of
    its students and a keyed digest of the secret, HMAC(secret, "journal"), which says nothing about the secret).
    It is part of each journal record (so under the journal's HMAC); a record graded under another is graded again."""
    parts: dict[str, object] = {name: str(options.get(name)) for name in _POLICY_OPTIONS}
    parts.update(distlab=__version__, rule="one notebook per student and lesson")
    roster = getattr(options.get("variants"), "roster", None)
    if roster is not None:
        parts["secret"] = hmac.new(roster.secret, b"journal", hashlib.sha256).hexdigest()
        parts["students"] = hashlib.sha256(
            json.dumps(roster.students, sort_keys=True, default=str, ensure_ascii=True).encode("ascii")
        ).hexdigest()
    return hashlib.sha256(json.dumps(parts, sort_keys=True, ensure_ascii=True).encode("ascii")).hexdigest()


def collect(paths, export: bool = False) -> list[Submission]:
    """The notebooks under `paths` (files or folders, searched recursively; checkpoints skipped), sorted.

    Each is keyed by its path relative to the folder that holds everything given, so files of the
    same name in different folders are different rows; a notebook given twice is refused. Its student
    folder is the first folder under what the instructor named (the one folder given, else the common
    folder of all given): ``submitted`` or ``submitted/*`` both make ``alice`` of ``submitted/alice/x.ipynb``,
    and a folder inside a student's upload (``submitted/mallory/bob/``) never names anybody.
    export=True: the one folder given is a Gradescope export, and its submission_metadata.yml names the
    submitters of each ``submission_N`` folder; no other submission_metadata.yml is ever read (a student
    can upload one).
    """
    given = [os.path.abspath(p) for p in map(str, paths)]
    if not given:
        raise ConfigurationError("no notebooks to grade")
    base = os.path.commonpath([os.path.dirname(p) for p in given])
    single_folder = len(given) == 1 and os.path.isdir(given[0]) and not os.path.islink(given[0])
    anchor = given[0] if single_folder else os.path.commonpath(given) if len(given) > 1 else os.path.dirname(given[0])
    submitters: dict[str, tuple] = {}
    if export:
        if not single_folder:
            raise ConfigurationError(
                f"--export names one folder, a Gradescope export (given: {len(given)} path(s)); "
                "grade each export on its own"
            )
        metadata = Path(anchor) / "submission_metadata.yml"
        if not metadata.is_file() or metadata.is_symlink():
            raise ConfigurationError(f"{metadata}: no submission_metadata.yml, so {anchor} is not a Gradescope export")
        submitters = read_gradescope_export(metadata)
    out: list[Submission] = []

    def add(nb: Path) -> None:
        rel = Path(os.path.relpath(nb, anchor)).parts
        top = rel[0] if len(rel) > 1 and rel[0] not in ("..", ".") else ""
        identity = submitters.get(top, ()) if export else ((top,) if top else ())
        out.append(Submission(nb, _key(str(nb), base), identity, top))

    for path in given:
        root = Path(path)
        if not root.is_dir() or root.is_symlink():  # a file, or anything else: grade_notebook says what it is
            add(root)
            continue
        for nb in sorted(root.rglob("*.ipynb")):
            rel = nb.relative_to(root)
            if any(part.startswith(".") for part in rel.parts):
                continue  # .ipynb_checkpoints, hidden folders
            add(nb)
    if not out:
        raise ConfigurationError("no notebooks to grade")
    seen: dict[str, str] = {}
    for s in out:
        real = os.path.realpath(s.path) if s.path.is_file() and not s.path.is_symlink() else s.key
        for name in {s.key, real}:
            if name in seen:
                raise ConfigurationError(
                    f"{s.key}: given twice (also as {seen[name]}); give each notebook once, so it gets one row"
                )
            seen[name] = s.key
    return out


def one_per_student(submissions: list[Submission], lesson: str | None) -> dict[str, Submission]:
    """{key of each notebook not graded: the notebook graded in its place}: one kernel per student and lesson.

    Within a student folder, the notebooks of one lesson (--lesson, else the lesson their file name names; a
    name naming none is a group of its own) get one kernel: the lesson's exercise file name first, then a name
    naming the lesson, the shallowest, then by name (as the Gradescope autograder picks one per submission).
    A student's upload set therefore never multiplies the class run's kernels. Notebooks given outside a student
    folder are each graded.
    """
    groups: dict[tuple, list[Submission]] = {}
    for s in submissions:
        if s.folder:
            found = canonical(lesson) if lesson else lesson_from_name(s.path.name)
            groups.setdefault((s.folder, found), []).append(s)

    def rank(slug, s: Submission):
        entry = manifest.LESSONS.get(slug) if slug else None
        exercise = (getattr(entry, "exercise", None) or "") if entry is not None else ""
        tier = 0 if exercise and s.path.name == exercise else 1 if slug and lesson_from_name(s.path.name) == slug else 2
        return (tier, len(s.path.parts), s.key)

    ignored: dict[str, Submission] = {}
    for (_folder, slug), group in groups.items():
        chosen, *rest = sorted(group, key=lambda s: rank(slug, s))
        ignored.update((s.key, chosen) for s in rest)
    return ignored


def file_digest(path: Path) -> str:
    """SHA-256 of the file as read_submission reads it (a regular file under the notebook size limit, opened with
    O_NOFOLLOW, never read past the limit); anything else gets NOT_A_FILE."""
    data = read_submission(path, [])
    return NOT_A_FILE if data is None else hashlib.sha256(data).hexdigest()


def grade_from_dict(data: dict) -> NotebookGrade:
    """A NotebookGrade back from its to_dict() (as the journal keeps it)."""
    questions = [
        QuestionGrade(
            q["question"], q["status"], float(q["points"]), float(q["max_points"]), q["feedback"], q.get("prompt", "")
        )
        for q in data.get("questions", [])
    ]
    return NotebookGrade(
        data["path"],
        data.get("lesson"),
        questions,
        list(data.get("problems", [])),
        sandbox=data.get("sandbox", ""),
        seconds=float(data.get("seconds", 0.0)),
        lesson_from=data.get("lesson_from", ""),
        student=data.get("student", ""),
    )


def journal_key(out: Path) -> bytes:
    """The journal's HMAC key: 32 random bytes in out/.journal.key, created with mode 0600 on first use."""
    path = Path(out) / JOURNAL_KEY
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except FileExistsError:
        fd = -1
    if fd < 0:
        key = b"" if path.is_symlink() else path.read_bytes()
        if len(key) != 32:
            raise ConfigurationError(f"{path} is not a journal key written by distlab: remove it and the journal")
        return key
    key = os.urandom(32)
    with os.fdopen(fd, "wb") as f:
        f.write(key)
    return key


def _mac(key: bytes, record: dict) -> str:
    body = json.dumps(record, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hmac.new(key, body.encode("ascii"), hashlib.sha256).hexdigest()


def read_journal(path: Path, key: bytes) -> dict[str, dict]:
    """{key: last record} from a journal; a line whose HMAC does not verify (forged, edited, cut short) is ignored."""
    records: dict[str, dict] = {}
    if path.is_file():
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    entry = json.loads(line)
                    record, mac = entry["record"], entry["mac"]
                    if isinstance(mac, str) and hmac.compare_digest(mac, _mac(key, record)):
                        records[record["key"]] = record
                except (ValueError, KeyError, TypeError):
                    continue
    return records


def _append(path: Path, record: dict, key: bytes) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"record": record, "mac": _mac(key, record)}, ensure_ascii=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8", errors="backslashreplace")  # a lone surrogate cannot stop the run
    os.replace(tmp, path)


def text_cell(value):
    """A CSV cell a spreadsheet shows as text: a string starting with = + - @, tab, CR or LF gets a leading '.

    (OWASP's advice on CSV injection: such a cell is read as a formula.)

    >>> [text_cell(v) for v in ("=1+1", "\\tx", "ok", -1.5)]
    ["'=1+1", "'\\tx", 'ok', -1.5]
    """
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r", "\n"):
        return "'" + value
    return value


def _student(record: dict) -> str:
    """Whose notebook a record is: the roster id it was graded for, else the identity the submission gave."""
    student = record["grade"].get("student") or ""
    if student:
        return str(student)
    identity = record.get("identity") or []
    return str(identity[0]) if identity else ""


def shared_students(records: list[dict]) -> dict[str, list[str]]:
    """{notebook key: the other keys of its student} for every student with more than one notebook per lesson."""
    groups: dict[tuple, list[str]] = {}
    for r in records:
        student = _student(r)
        if student:
            groups.setdefault((student, r["grade"].get("lesson") or ""), []).append(r["key"])
    return {k: [o for o in keys if o != k] for keys in groups.values() if len(keys) > 1 for k in keys}


def _flag(keys: list[str]) -> str:
    return f"flagged: the same student also submitted {', '.join(keys)}; each is graded on its own, not merged"


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
            r["key"],
            g.get("student") or " ".join(r.get("identity", [])),
            g.get("lesson") or "",
            g["score"],
            g["max_score"],
            *(points.get(n, "") for n in names),
            g.get("seconds", ""),
            " | ".join(" ".join(str(p).split()) for p in g.get("problems", [])),
            _flag(flags[r["key"]]) if r["key"] in flags else "",
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


def summary_text(grades: list[NotebookGrade]) -> str:
    rows = question_summary(grades)
    scores = [g.score / g.max_score for g in grades if g.max_score]
    out = [
        f"{len(grades)} notebook(s); mean score {100 * sum(scores) / len(scores):.1f}%"
        if scores
        else f"{len(grades)} notebook(s); none could be scored",
        "",
        f"{'lesson':<20} {'question':<9} {'correct':>8} {'wrong':>6} {'not att.':>8} {'mean':>6}",
    ]
    for r in rows:
        out.append(
            f"{r['lesson']:<20} {r['question']:<9} {r['correct']:>8} {r['wrong']:>6} {r['not_attempted']:>8} "
            f"{r['mean_points']:>6g}"
        )
    refused = [g for g in grades if any(str(p).startswith("refused") for p in g.problems)]
    if refused:
        out += ["", f"{len(refused)} notebook(s) refused (see their problems in results.csv)"]
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
    fig.savefig(target, dpi=100)
    return target


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
        filled = int(self.width * done / self.total) if self.total else self.width
        bar = "#" * filled + "." * (self.width - filled)
        line = (
            f"[{bar}] {done}/{self.total}  {rate:.1f} s/notebook  ETA {int(eta // 60)}:{int(eta % 60):02d}  "
            f"{shown(label)[-40:]}"
        )
        tty = getattr(self.stream, "isatty", lambda: False)()
        self.stream.write(("\r" + line + "\x1b[K") if tty else line + "\n")
        if tty and done == self.total:
            self.stream.write("\n")
        self.stream.flush()


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
            g.problems.append(_flag(flags[r["key"]]))
    report = GradeReport(grades)
    _write_atomic(out / JSON_FILE, json.dumps(report.to_json(), indent=2) + "\n")
    _write_gradescope(out / "gradescope", records, grades)
    _write_atomic(out / SUMMARY_TXT, summary_text(grades))
    rows = question_summary(grades)
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
        plot_histogram(grades, out / HISTOGRAM)
    return report


def _ignored_grade(s: Submission, chosen: Submission, lesson: str | None) -> NotebookGrade:
    """The row of a notebook not run (one kernel per student and lesson): no points, and which one was graded."""
    found = canonical(lesson) if lesson else lesson_from_name(s.path.name)
    return NotebookGrade(
        str(s.path),
        found,
        [],
        [
            f"refused to run: one notebook per student and lesson is graded (no points here), and "
            f"{printable(excerpt(chosen.key, 120))} was graded in its place"
        ],
        lesson_from="--lesson" if lesson else "file name" if found else "",
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


def grade_class(
    paths, out, *, progress: bool = True, stream=None, grade_one=None, export: bool = False, **options
) -> GradeReport:
    """Grade every notebook under `paths` into folder `out`, resuming a run that was interrupted.

    options go to grade_notebook (lesson, timeout, sandbox, variants, ...). grade_one replaces
    grade_notebook (for tests). export=True: the one folder given is a Gradescope export (see collect).
    Ctrl-C stops after writing what is done; run again to continue.
    Each submission is read once (read_submission: O_NOFOLLOW, refused past the size limit unread), hashed,
    and those bytes are graded; one kernel per student and lesson (one_per_student); a notebook whose grading
    fails gets a row with the reason and the class goes on.
    A class is never graded with sandbox="trusted" or "container" (see TRUSTED_CLASS, CONTAINER_CLASS).
    """
    if options.get("sandbox") in ("trusted", "audit"):
        raise ConfigurationError(TRUSTED_CLASS)
    if options.get("sandbox") == "container":
        raise ConfigurationError(CONTAINER_CLASS)
    if "identity" in options:
        raise ConfigurationError(
            "a class run takes each notebook's student from its folder or the export (--export), not one "
            "identity for all (--submission-metadata is Gradescope's, for one submission)"
        )
    if grade_one is None:
        from .grade import grade_notebook as grade_one
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    journal = out / JOURNAL
    submissions = collect(paths, export=export)
    lesson = options.get("lesson")
    if lesson is not None:
        lesson_questions(lesson)  # the instructor's typo is our error, once, before anything is graded
    ignored = one_per_student(submissions, lesson)
    key = journal_key(out)
    done = read_journal(journal, key)
    policy = policy_of(options)
    for s in submissions:
        if s.key in ignored:
            done[s.key] = {
                "key": s.key,
                "sha256": "",
                "policy": policy,
                "identity": list(s.identity),
                "grade": _ignored_grade(s, ignored[s.key], lesson).to_dict(),
            }
    graded = [s for s in submissions if s.key not in ignored]
    bar = Progress(len(graded), stream) if progress else None
    read: dict[str, tuple] = {}
    todo = []
    for s in graded:
        problems: list[str] = []
        data = read_submission(s.path, problems)  # once: refused unread when too large, never through a link
        digest = NOT_A_FILE if data is None else hashlib.sha256(data).hexdigest()
        record = done.get(s.key)
        if record is None or record.get("sha256") != digest or record.get("policy") != policy:
            todo.append(s)
            read[s.key] = (data, digest)
    finished = len(graded) - len(todo)
    if bar and finished:
        bar.stream.write(f"{finished} notebook(s) already graded in {shown(str(journal))}: skipped\n")
    interrupted = False
    private = Path(tempfile.mkdtemp(prefix="distlab-class-"))  # mode 0700: the grader's alone
    try:
        for count, s in enumerate(todo, 1):
            data, digest = read.pop(s.key)
            try:
                if data is None:  # grade_notebook refuses it again, by fstat, without reading it
                    grade = grade_one(s.path, identity=s.identity or None, **options)
                else:
                    grade = _grade_bytes(grade_one, s, data, private, options)
            except Exception as exc:  # one bad file yields a row with the reason, never aborts the class
                grade = _failed_grade(s, lesson, f"{type(exc).__name__}: {exc}")
            done[s.key] = {
                "key": s.key,
                "sha256": digest,
                "policy": policy,
                "identity": list(s.identity),
                "grade": grade.to_dict(),
            }
            _append(journal, done[s.key], key)
            _write_atomic(out / CSV_FILE, results_csv([done[x.key] for x in submissions if x.key in done]))
            if bar:
                bar.update(finished + count, count, s.key)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        shutil.rmtree(private, ignore_errors=True)
    records = [done[s.key] for s in submissions if s.key in done]
    _write_atomic(out / CSV_FILE, results_csv(records))
    report = write_outputs(out, records)
    if interrupted:
        raise KeyboardInterrupt(
            f"interrupted after {len(records)} of {len(submissions)} notebooks; "
            f"grades so far are in {out}; run the same command again to continue"
        )
    return report
