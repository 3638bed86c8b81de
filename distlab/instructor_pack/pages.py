"""The instructor pack's pages: syllabus, misconceptions, cheat sheet, glossary, bibliography and guide (Markdown
and HTML), one reveal.js slideshow per lesson notebook, and build(out), which writes them all.
"""

from __future__ import annotations

import html
import re

from pathlib import Path

from .. import lessons as manifest
from ..errors import ConfigurationError
from .cheat_sheet import CHEAT_SHEET
from .sources import LessonSummary, _notebook, _read_text, _read_toml, bibliography, scan_citations, summarise

__all__ = [
    "PAGES",
    "REVEAL_NOTE",
    "fill_numbers",
    "syllabus_markdown",
    "misconceptions_markdown",
    "cheatsheet_markdown",
    "bibliography_markdown",
    "slide_notebook",
    "render_slides",
    "build",
]

PAGES = ("syllabus", "misconceptions", "cheatsheet", "glossary", "bibliography", "guide")

REVEAL_NOTE = (
    "The slides are built offline; each HTML file loads reveal.js (and MathJax, require.js for the "
    "widgets' saved views) from a CDN link when it is opened, so presenting needs a network connection "
    "or a browser cache that holds them."
)


def _number(value) -> str:
    x = float(f"{float(value):.3g}")
    return f"{int(x):,}" if x == int(x) else f"{x:,}"


def fill_numbers(text: str) -> str:
    """Replace {{slug.qN}} by the expected answer of that graded question (3 significant figures; a choice
    question's option as it is written)."""

    def one(m):
        slug, name = m.group(1), m.group(2)
        try:
            q = manifest.lesson(slug).load_questions()[name]
        except KeyError:
            raise ConfigurationError(f"instructor pack: {{{{{slug}.{name}}}}} names no graded question") from None
        want = q.expected()
        return f"`{want}`" if isinstance(want, str) else _number(want)

    return re.sub(r"\{\{\s*(\w+)\.(q\d+)\s*\}\}", one, text)


_CSS = """body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;line-height:1.45}
table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:.3rem .5rem;vertical-align:top}
code{background:#f3f3f3;padding:0 .2rem}nav a{margin-right:1rem}"""


def _html_page(title: str, body_markdown: str) -> str:
    from nbconvert.filters import markdown2html_mistune

    nav = " ".join(f'<a href="{p}.html">{p}</a>' for p in PAGES) + ' <a href="index.html">index</a>'
    return (
        f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_CSS}</style></head><body><nav>{nav}</nav>\n{markdown2html_mistune(body_markdown)}\n"
        "</body></html>\n"
    )


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def syllabus_markdown(repo: Path, summaries: list[LessonSummary], syllabus: dict) -> str:
    lines = ["# Syllabus", "", "## Prerequisites", ""]
    lines += [f"- {p}" for p in syllabus.get("course_prerequisites", [])]
    wpm, code, per_q = (
        syllabus.get("reading_words_per_minute", 120),
        syllabus.get("minutes_per_code_cell", 3),
        syllabus.get("minutes_per_question", 6),
    )
    total = sum(s.minutes or 0 for s in summaries)
    lines += [
        "",
        "## Lessons at a glance",
        "",
        f"Minutes are estimated from each notebook: its markdown read at {wpm} words a minute, {code} minutes "
        f"per code cell and {per_q} per graded question (instructor/syllabus.toml), rounded to 5. "
        f"Total for the lessons present: {total} minutes ({total / 60:.1f} hours).",
        "",
        "| # | lesson | minutes | graded questions | builds on |",
        "|---|---|---|---|---|",
    ]
    by_slug = {s.slug: s.number for s in summaries}
    for s in summaries:
        builds = ", ".join(f"{by_slug.get(b, b)}" for b in s.builds_on) or "-"
        minutes = s.minutes if s.present else "not written yet"
        lines.append(f"| {s.number} | {_cell(s.title)} | {minutes} | {s.questions} | {builds} |")
    lines += ["", "## Learning objectives and contents", ""]
    for s in summaries:
        lines += [
            f"### Lesson {s.number}: {s.title}",
            "",
            f"Notebook `{s.notebook}`.",
            "",
            f"**Objectives.** {s.objectives}",
            "",
        ]
        if s.sections:
            lines += ["**Sections.** " + "; ".join(s.sections), ""]
        if s.remember:
            lines += ["**What to remember** (the notebook's own summary):", "", s.remember, ""]
    return "\n".join(lines) + "\n"


def misconceptions_markdown(repo: Path, summaries: list[LessonSummary]) -> str:
    text = fill_numbers(_read_text(repo / "instructor" / "misconceptions.md"))
    have = set(re.findall(r"^## Lesson (\d+[a-z]?)\s*$", text, re.M))
    missing = [s for s in summaries if s.number not in have]
    if missing:
        text += "\n## Lessons without a misconception list yet\n\n" + "".join(
            f"- Lesson {s.number} ({s.slug}): not written yet; add a `## Lesson {s.number}` section to "
            "instructor/misconceptions.md.\n"
            for s in missing
        )
    return text


def cheatsheet_markdown() -> str:
    lines = [
        "# Cheat sheet: the formulas, their units, the distlab function and the paper",
        "",
        "Each worked example is computed by calling the function named beside it when this page is built.",
        "",
        "| quantity | formula | units | distlab function | worked example | source | lesson |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in CHEAT_SHEET:
        lines.append(
            f"| {_cell(f.name)} | {_cell(f.formula)} | {_cell(f.units)} | `{f.function}` | "
            f"{_cell(f.example())} | [{f.source}](bibliography.html#{f.source}) | {f.lesson} |"
        )
    return "\n".join(lines) + "\n"


def bibliography_markdown(repo: Path) -> str:
    works = bibliography(repo)
    scanned = scan_citations(repo)
    lines = [
        "# Bibliography",
        "",
        "Every work cited by author and year in `distlab/` and `notebooks/`, found by "
        "scanning the sources (`distlab.instructor_pack.scan_citations`), with what the kit uses it for.",
        "",
    ]
    for w in sorted(works, key=lambda w: w["key"]):
        files = sorted({f for c in w["cited_as"] for f in scanned.get(c, ())})
        lines += [
            f'<a id="{w["key"]}"></a>',
            "",
            f"**{w['key']}**: {w['reference']}",
            "",
            f"Used for: {w['used_for']}",
            "",
            "Cited in: " + (", ".join(f"`{f}`" for f in files) if files else "(no longer cited by name)"),
            "",
        ]
    missing = {c: f for c, f in scanned.items() if c not in {c for w in works for c in w["cited_as"]}}
    if missing:
        lines += ["## Cited but not yet in instructor/bibliography.toml", ""]
        lines += [f"- {c}: {', '.join(sorted(f))}" for c, f in sorted(missing.items())]
    return "\n".join(lines) + "\n"


def slide_notebook(nb):
    """A copy of a lesson notebook with reveal.js slide types: a new slide at every # or ## heading, a vertical
    sub-slide at every ### heading and for each code cell with its output, the rest flowing on."""
    import copy

    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        first = cell.source.lstrip().split("\n", 1)[0]
        if cell.cell_type == "markdown" and (first.startswith("# ") or first.startswith("## ")):
            kind = "slide"
        elif cell.cell_type == "markdown" and first.startswith("### "):
            kind = "subslide"
        elif cell.cell_type == "code":
            kind = "subslide"
        else:
            kind = "-"
        cell.metadata["slideshow"] = {"slide_type": kind}
    return nb


def render_slides(nb, hide_code: bool = False) -> str:
    from nbconvert import SlidesExporter

    exporter = SlidesExporter()
    exporter.reveal_scroll = True  # long cells scroll instead of being cut off
    exporter.exclude_input = hide_code
    body, _ = exporter.from_notebook_node(slide_notebook(nb))
    return body


def build(out, repo=".", hide_code: bool = False, slides: bool = True) -> list[Path]:
    """Write the instructor pack under `out`; return the files written."""
    repo, out = Path(repo), Path(out)
    if not (repo / "distlab").is_dir() or not (repo / "instructor").is_dir():
        raise ConfigurationError(f"--repo {repo}: not a distlab repository (needs distlab/ and instructor/)")
    if out.exists() and not out.is_dir():
        raise ConfigurationError(f"--out {out}: exists and is not a folder")
    syllabus = _read_toml(repo / "instructor" / "syllabus.toml")
    summaries = [
        summarise(repo, l, syllabus) for l in sorted(manifest.LESSONS.values(), key=lambda l: (l.number, l.part))
    ]
    pages = {
        "syllabus": syllabus_markdown(repo, summaries, syllabus),
        "misconceptions": misconceptions_markdown(repo, summaries),
        "cheatsheet": cheatsheet_markdown(),
        "glossary": _read_text(repo / "instructor" / "glossary.md"),
        "bibliography": bibliography_markdown(repo),
        "guide": _read_text(repo / "instructor" / "guide.md"),
    }
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in pages.items():
        for suffix, content in ((".md", text), (".html", _html_page(name, text))):
            path = out / f"{name}{suffix}"
            path.write_text(content, encoding="utf-8")
            written.append(path)
    slide_lines = []
    for s, lesson in zip(summaries, sorted(manifest.LESSONS.values(), key=lambda l: (l.number, l.part))):
        if not s.present:
            slide_lines.append(f"- Lesson {s.number}: no notebook yet ({s.notebook})")
            continue
        if not slides:
            slide_lines.append(f"- Lesson {s.number}: {s.title} (slides not built: --no-slides)")
            continue
        (out / "slides").mkdir(exist_ok=True)
        path = out / "slides" / (Path(lesson.notebook).stem + ".slides.html")
        path.write_text(render_slides(_notebook(repo, lesson), hide_code), encoding="utf-8")
        written.append(path)
        slide_lines.append(f"- [Lesson {s.number}: {s.title}](slides/{path.name})")
    readme = _read_text(repo / "instructor" / "README.md")
    index = (
        readme
        + "\n## Pages\n\n"
        + "".join(f"- [{p}]({p}.html)\n" for p in PAGES)
        + "\n## Slides\n\n"
        + "\n".join(slide_lines)
        + "\n\n"
        + REVEAL_NOTE
        + "\n"
    )
    for suffix, content in ((".md", index), (".html", _html_page("instructor pack", index))):
        path = out / f"index{suffix}"
        path.write_text(content, encoding="utf-8")
        written.append(path)
    return written
