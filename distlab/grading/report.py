"""The grade report: per question, per notebook, and for a whole grading run (table, JSON, Gradescope)."""

from __future__ import annotations

import dataclasses
import shutil
import textwrap
from pathlib import Path

from ..errors import ConfigurationError

__all__ = [
    "AUDIT_ONLY_WARNING",
    "FEEDBACK_CHARS",
    "PROBLEM_CHARS",
    "MAX_PROBLEMS",
    "printable",
    "excerpt",
    "shown",
    "quoted",
    "QuestionGrade",
    "NotebookGrade",
    "GradeReport",
]

#: the longest feedback kept per question (the checks' own text is at most ~370 characters; the rest is
#: room for a short excerpt of the student's answer)
FEEDBACK_CHARS = 600
#: the longest problem kept, and how many problems a notebook keeps (the rest are counted)
PROBLEM_CHARS, MAX_PROBLEMS = 400, 50

AUDIT_ONLY_WARNING = (
    "warning: graded as TRUSTED notebooks (--trusted: the Python audit hook only), which is not an "
    "operating-system sandbox; grade untrusted work with bubblewrap installed (apt-get install "
    "bubblewrap) or inside a container (--container)"
)


def printable(text) -> str:
    """`text` safe to print on one line: control characters (newlines, terminal escapes, NUL), format
    characters (bidirectional overrides) and lone surrogates become visible escapes such as \\x1b.

    Everything a kernel or a submitted file produced goes through this in the text outputs.

    >>> printable("score: 7/7\\n\\x1b[2K\\x00\\ud800 ok")
    'score: 7/7\\\\n\\\\x1b[2K\\\\x00\\\\ud800 ok'
    """
    text = str(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def excerpt(text, limit: int) -> str:
    """`text` cut to `limit` characters, saying how many were left out (student text is never echoed whole).

    >>> excerpt("x" * 10, 4)
    'xxxx... (6 more characters)'
    """
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit} more characters)"


def shown(text, limit: int = PROBLEM_CHARS) -> str:
    """Untrusted text (from a notebook, its file name, its kernel) as a short line of ASCII: at most `limit`
    characters of it are kept, control and format characters become escapes (\\n, \\x1b, \\u202e), every run of
    whitespace left (any Unicode space) one space, and every other character outside ASCII its escape (
    letters, look-alikes and blank-looking characters such as U+2800 alike: \\u2800), and the result is cut to
    `limit` again. So such text can neither move the cursor, nor pad a line until the terminal wraps it and start
    a line of its own (red team round 7 default/04), nor pass for the grader's own punctuation.

    The one function every human-readable output of the grader (the terminal table, results.csv, summary.txt,
    the progress bar, Gradescope's results.json: each question's output and the top-level output) shows such text
    through (directly or through quoted); the cost is bounded by `limit` whatever the text's size.

    >>> shown("\\x1b[2Jok\\n\\u202e  \\u2800x", 40)
    '\\\\x1b[2Jok\\\\n\\\\u202e \\\\u2800x'
    >>> shown("x" * 10, 4)
    'xxxx... (10 characters in all)'
    """
    text = str(text)
    head = " ".join(printable(text[:limit]).split()).encode("ascii", "backslashreplace").decode("ascii")
    if len(text) <= limit and len(head) <= limit:
        return head
    return f"{head[:limit]}... ({len(text)} characters in all)"


def quoted(text, limit: int = 120) -> str:
    """Untrusted text (a file name) shown (ASCII, at most `limit` characters) between double quotes, a backslash or
    quote inside it escaped (\\\\, \\"), so where the text ends is plain whatever it says (red team round 7 modes/05:
    a name that went on "... not merged | flag cleared by the instructor").

    >>> print(quoted('a"b  c\\u2215'))
    "a\\"b c\\\\u2215"
    """
    return '"' + shown(text, limit).replace("\\", "\\\\").replace('"', '\\"') + '"'


#: how far a table line's continuation is indented: deeper than any line the grader starts itself (a notebook's line
#: at column 0, its questions and problems at 2), so no wrapped remainder of a notebook's text can pass for one
CONTINUATION = " " * 6


def _width() -> int:
    """The columns a table line may use: the terminal's width less one (100 columns when there is no terminal)."""
    return max(20, shutil.get_terminal_size((100, 24)).columns - 1)


def _wrapped(text: str, first: str) -> list[str]:
    """`first` + `text` wrapped at the terminal's width (or 100 columns), every continuation line indented by
    CONTINUATION: the grader wraps the text itself, so the terminal never starts a line with what a notebook wrote
    (red team round 7 default/04: a problem padded until the terminal wrapped it put "regraded by the instructor:
    8/8" at the start of a line of its own)."""
    return textwrap.wrap(
        text,
        _width(),
        initial_indent=first,
        subsequent_indent=CONTINUATION,
        break_long_words=True,
        break_on_hyphens=False,
        drop_whitespace=True,
    ) or [first.rstrip()]


def _header(path: str, lesson: str, n) -> list[str]:
    """A notebook's first table lines: its path wrapped, then the lesson and "score: s/m", the score never split
    across lines whatever the terminal's width (a CI terminal of 80 columns once put "8/8" on the line after
    "score:")."""
    lines = _wrapped(path, "")
    for part in (lesson, f"score: {_fmt(n.score)}/{_fmt(n.max_score)}"):
        if len(lines[-1]) + 2 + len(part) <= _width():
            lines[-1] += "  " + part
        else:
            lines.extend(_wrapped(part, CONTINUATION))
    return lines


def _problems(problems, show=str) -> list[str]:
    """The first MAX_PROBLEMS problems, each shown (show: str, or printable for text) and cut to PROBLEM_CHARS."""
    kept = [excerpt(show(p), PROBLEM_CHARS) for p in list(problems)[:MAX_PROBLEMS]]
    if len(problems) > MAX_PROBLEMS:
        kept.append(f"... and {len(problems) - MAX_PROBLEMS} more problems")
    return kept


@dataclasses.dataclass
class QuestionGrade:
    """The grade of one question: its status, points and the check's feedback."""

    question: str
    status: str
    points: float
    max_points: float
    feedback: str
    prompt: str = ""

    def __post_init__(self):
        self.feedback = excerpt(self.feedback, FEEDBACK_CHARS)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class NotebookGrade:
    """The grade of one notebook: per-question results and what went wrong on the way."""

    path: str
    lesson: str | None
    questions: list[QuestionGrade]
    problems: list[str]
    sandbox: str = ""
    seconds: float = 0.0
    #: how the lesson was chosen: "--lesson", or the part of the notebook that named it
    lesson_from: str = ""
    #: the roster id of the student whose variant was graded ("" for a notebook without variant)
    student: str = ""

    @property
    def score(self) -> float:
        return float(sum(q.points for q in self.questions))

    @property
    def max_score(self) -> float:
        return float(sum(q.max_points for q in self.questions))

    def to_dict(self) -> dict:
        return {
            "path": self.path,
            "lesson": self.lesson,
            "score": self.score,
            "max_score": self.max_score,
            "problems": _problems(self.problems),
            "lesson_from": self.lesson_from,
            "sandbox": self.sandbox,
            "seconds": round(self.seconds, 2),
            "questions": [q.to_dict() for q in self.questions],
            **({"student": self.student} if self.student else {}),
        }


def _fmt(x: float) -> str:
    return f"{x:g}"


@dataclasses.dataclass
class GradeReport:
    """The grades of every notebook of one grading run."""

    notebooks: list[NotebookGrade]

    @property
    def score(self) -> float:
        return float(sum(n.score for n in self.notebooks))

    @property
    def max_score(self) -> float:
        return float(sum(n.max_score for n in self.notebooks))

    def to_json(self) -> dict:
        """The JSON summary: top-level score and max_score, then one entry per question."""
        return {
            "score": self.score,
            "max_score": self.max_score,
            "questions": [
                {"notebook": n.path, "lesson": n.lesson, **q.to_dict()} for n in self.notebooks for q in n.questions
            ],
            "notebooks": [n.to_dict() for n in self.notebooks],
        }

    def to_gradescope(self) -> dict:
        """Gradescope's results.json (https://gradescope-autograders.readthedocs.io/en/latest/specs/) of ONE submission.

        One test per question with its score, max_score, status and the check's feedback as
        output; the top-level output lists what went wrong while running the notebook. Gradescope takes the top-level
        score as the submission's, so a report of several notebooks is refused (their sum was 24 of 8 points) and the
        score never exceeds the questions' max_score.
        """
        if len(self.notebooks) != 1:
            raise ConfigurationError(
                f"Gradescope's results.json is one submission's score, and {len(self.notebooks)} notebooks were "
                "graded: give one notebook (or --one-notebook to pick the lesson's from an upload), or grade a class "
                "with --out (one results file per notebook in gradescope/)"
            )
        tests = []
        for n in self.notebooks:
            for q in n.questions:
                tests.append(
                    {
                        "name": shown(q.question + (f": {q.prompt}" if q.prompt else ""), 1000),
                        "score": q.points,
                        "max_score": q.max_points,
                        "status": "passed" if q.points >= q.max_points and q.max_points > 0 else "failed",
                        # what the student sees: ASCII, one line, no padding (red team round 8 09: U+2800 runs
                        # and a look-alike "\u2713 correct" reached it through printable)
                        "output": shown(q.feedback, FEEDBACK_CHARS),
                    }
                )
        lines = []
        for n in self.notebooks:
            # the grader's line first; the student-chosen file name only after it, quoted and shown (a name
            # "01 memory_wall: 8\u22158 (lesson memory_wall) - regraded..." no longer reads as the score line)
            head = f"score: {_fmt(n.score)}/{_fmt(n.max_score)}" + (f" (lesson {shown(n.lesson)})" if n.lesson else "")
            lines.append(f"{head}; notebook graded: {quoted(Path(n.path).name, 80)}")
            lines.extend(f"  - {p}" for p in _problems(n.problems, shown))
        return {
            "score": max(0.0, min(self.score, self.max_score)),
            "execution_time": round(sum(n.seconds for n in self.notebooks), 1),
            "output": "\n".join(lines),
            "tests": tests,
            # the autograder's log (stdout) stays the instructor's: what a notebook prints never reaches students
            "stdout_visibility": "hidden",
        }

    def table(self) -> str:
        """A plain-text table per notebook: question, points, status, feedback; then the problems."""
        out = []
        for n in self.notebooks:
            origin = f" (from its {n.lesson_from})" if n.lesson and n.lesson_from != "--lesson" else ""
            # wrapped too: a file name padded to the terminal's width put "NOTE: regraded by the instructor, full
            # marks 8 of 8" at column 0 of the next row (red team round 8 02)
            out.extend(_header(shown(n.path), f"lesson: {shown(n.lesson or '?')}{origin}", n))
            if n.questions:
                width = max(8, *(len(q.question) for q in n.questions))
                out.append(f"  {'question':<{width}}  {'points':>7}  {'status':<13}  feedback")
                for q in n.questions:
                    points = f"{_fmt(q.points)}/{_fmt(q.max_points)}"
                    feedback = shown(q.feedback, FEEDBACK_CHARS)
                    out.extend(_wrapped(feedback, f"  {q.question:<{width}}  {points:>7}  {q.status:<13}  "))
            for p in _problems(n.problems, shown):
                out.extend(_wrapped(p, "  ! "))
            out.append("")
        if len(self.notebooks) > 1:
            out.append(f"total: {_fmt(self.score)}/{_fmt(self.max_score)}")
        if any(n.sandbox.startswith("trusted") for n in self.notebooks):
            out.append(AUDIT_ONLY_WARNING)
        return "\n".join(out).rstrip() + "\n"
