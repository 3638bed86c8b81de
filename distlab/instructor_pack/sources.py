"""What the instructor pack reads from the repository: the instructor/ sources, each lesson's summary from its
notebook (summarise), and the citations the sources make (scan_citations) against instructor/bibliography.toml.
"""

from __future__ import annotations

import re

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser as the tomli package (the instructor extra installs it)
    import tomli as tomllib  # type: ignore[no-redef]
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigurationError

__all__ = ["LessonSummary", "summarise", "CITATION", "scan_citations", "bibliography", "uncovered_citations"]


def _read_toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigurationError(
            f"no {path.name} at {path} (the instructor pack's sources live in instructor/)"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"{path}: not valid TOML: {exc}") from None


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigurationError(
            f"no {path.name} at {path} (the instructor pack's sources live in instructor/)"
        ) from None


def _notebook(repo: Path, lesson):
    import nbformat

    path = repo / lesson.notebook
    return nbformat.read(path, as_version=4) if path.is_file() else None


@dataclass
class LessonSummary:
    number: str  # the lesson's label: "8", or "8b" for a split lesson's second part
    slug: str
    notebook: str
    title: str
    objectives: str
    sections: list[str]
    remember: str
    minutes: int | None
    questions: int
    builds_on: list[str]
    present: bool


def _markdown_cells(nb) -> list[str]:
    return [c.source for c in nb.cells if c.cell_type == "markdown"]


def summarise(repo: Path, lesson, syllabus: dict) -> LessonSummary:
    """What the syllabus says about one lesson, read from its notebook (a placeholder when there is none)."""
    extra = syllabus.get("lessons", {}).get(lesson.slug, {})
    builds_on = list(extra.get("builds_on", []))
    questions = len(lesson.load_questions()) if lesson.questions else 0
    nb = _notebook(repo, lesson)
    if nb is None:
        return LessonSummary(
            lesson.label,
            lesson.slug,
            lesson.notebook,
            lesson.slug.replace("_", " "),
            "(declared in the LESSONS manifest; its notebook is not in the repository yet)",
            [],
            "",
            None,
            questions,
            builds_on,
            False,
        )
    md = _markdown_cells(nb)
    text = "\n\n".join(md)
    title = next((l[2:].strip() for s in md for l in s.splitlines() if l.startswith("# ")), lesson.slug)
    title = re.sub(r"^Lesson \d+[a-z]?\s*[—:-]\s*", "", title)
    match = re.search(r"By the end[^,]*, you can (.+?\.)(?:\s|$)", text, re.S) or re.search(
        r"By the end[^.]*? you can (.+?\.)(?:\s|$)", text, re.S
    )
    if match:
        objectives = "You can " + " ".join(match.group(1).split())
    else:
        question = re.search(r"\*\*The question\.\*\*(.+?)(?:\n\n|$)", text, re.S)
        objectives = "Answers: " + " ".join(question.group(1).split()) if question else "(no objectives stated)"
    sections = [l[3:].strip() for s in md for l in s.splitlines() if l.startswith("## ")]
    remember = next((s.split("\n", 1)[1].strip() for s in md if s.startswith("## What to remember") and "\n" in s), "")
    words = sum(len(s.split()) for s in md)
    code = sum(1 for c in nb.cells if c.cell_type == "code")
    minutes = (
        words / syllabus.get("reading_words_per_minute", 120)
        + code * syllabus.get("minutes_per_code_cell", 3)
        + questions * syllabus.get("minutes_per_question", 6)
    )
    return LessonSummary(
        lesson.label,
        lesson.slug,
        lesson.notebook,
        title,
        objectives,
        sections,
        remember,
        int(5 * round(minutes / 5)),
        questions,
        builds_on,
        True,
    )


CITATION = re.compile(r"\b([A-Z][\w'\-]+(?: et al\.| (?:and|&) [A-Z][\w'\-]+)?),? \(?((?:19|20)\d\d)[a-z]?\b")
_NOT_AUTHORS = {
    "In",
    "Since",
    "From",
    "Until",
    "By",
    "The",
    "Of",
    "As",
    "At",
    "On",
    "Before",
    "After",
    "Table",
    "Figure",
    "Sec",
    "Eq",
    "Lesson",
    "GPT",
    "Llama",
    "NVIDIA",
    "H100",
    "A100",
    "B200",
    "CUDA",
    "Python",
    "November",
    "December",
    "January",
    "Nov",
    "Dec",
    "Jan",
    "May",
    "June",
    "July",
    "March",
    "April",
    "ISO",
    "FP8",
    "GTC",
    "MLSys",
    "NeurIPS",
    "ICLR",
    "SC",
    "Summer",
    "Spring",
    "Fall",
    "Winter",
    "Version",
    "Copyright",
    "Opus",
    "Claude",
}


def scan_citations(repo: Path) -> dict[str, set[str]]:
    """Every "Author [et al.] YEAR" citation in distlab/ (Python and data) and the notebooks' markdown and code:
    {"Huang et al. 2019": {files citing it}}. Words that are not authors (months, "Table", model names) are
    skipped by a short stop list."""
    import nbformat

    found: dict[str, set[str]] = {}
    sources = []
    for path in sorted((repo / "distlab").rglob("*")):
        if path.suffix in (".py", ".json", ".toml") and path.is_file():
            sources.append((path, path.read_text(encoding="utf-8")))
    for path in sorted((repo / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        sources.append((path, "\n".join(c.source for c in nb.cells)))
    for path, text in sources:
        for m in CITATION.finditer(text):
            author = m.group(1)
            first = author.split(",")[0].split()[0]
            if first in _NOT_AUTHORS or author.split()[-1] in _NOT_AUTHORS:
                continue
            found.setdefault(f"{author} {m.group(2)}", set()).add(str(path.relative_to(repo)))
    return found


def bibliography(repo: Path) -> list[dict]:
    data = _read_toml(repo / "instructor" / "bibliography.toml")
    works = data.get("work", [])
    for w in works:
        for key in ("key", "cited_as", "reference", "used_for"):
            if key not in w:
                raise ConfigurationError(f"instructor/bibliography.toml: an entry lacks {key!r}: {w}")
    return works


def uncovered_citations(repo: Path) -> dict[str, set[str]]:
    """The scanned citations that no bibliography entry lists in its cited_as (the test wants none)."""
    covered = {c for w in bibliography(repo) for c in w["cited_as"]}
    return {c: f for c, f in scan_citations(repo).items() if c not in covered}
