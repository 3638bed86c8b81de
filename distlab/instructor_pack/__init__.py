"""The instructor pack: syllabus, misconceptions, cheat sheet, glossary, bibliography, guide and slides.

`build(out)` renders it all from the repository into `out` (HTML pages and their Markdown, and one reveal.js
slideshow per lesson notebook). Lessons come from the LESSONS manifest (distlab.lessons): a lesson declared there
appears on every page, with a placeholder where its notebook or hand-written text does not exist yet. The
hand-written parts live in the top-level `instructor/` folder (syllabus.toml, misconceptions.md, glossary.md,
guide.md, bibliography.toml, README.md); numbers in misconceptions.md are written `{{slug.qN}}` and replaced by
the graded question's expected value, so they are the numbers distlab computes. The cheat sheet's formulas are
CHEAT_SHEET (cheat_sheet.py): each names the distlab function that computes it (called for the worked example) and its paper.

The build needs no network: nbconvert's slides exporter only writes the reveal.js address (a CDN link, see
REVEAL_NOTE) into the HTML; the browser that opens the slides fetches reveal.js from it.

Modules: cheat_sheet (Formula, CHEAT_SHEET), sources (what the pack reads: lesson summaries, citations and the
bibliography), pages (the Markdown, HTML and slides, and build).
"""

from __future__ import annotations

from .cheat_sheet import CHEAT_SHEET, Formula
from .pages import (
    PAGES,
    REVEAL_NOTE,
    bibliography_markdown,
    build,
    cheatsheet_markdown,
    fill_numbers,
    misconceptions_markdown,
    render_slides,
    slide_notebook,
    syllabus_markdown,
)
from .sources import CITATION, LessonSummary, bibliography, scan_citations, summarise, uncovered_citations

__all__ = [
    "PAGES",
    "REVEAL_NOTE",
    "Formula",
    "CHEAT_SHEET",
    "LessonSummary",
    "summarise",
    "CITATION",
    "scan_citations",
    "bibliography",
    "uncovered_citations",
    "fill_numbers",
    "syllabus_markdown",
    "misconceptions_markdown",
    "cheatsheet_markdown",
    "bibliography_markdown",
    "slide_notebook",
    "render_slides",
    "build",
]
