"""The fixed-width tables an app prints keep their headings apart at every choice of its dropdowns (a student's
review: lesson 3's ZeRO app headed its last column 'time on ' + the fabric in 18 characters, so with ethernet-400g
the header read 'sent/GPU/steptime on ethernet-400g', two headings run into one over five columns of numbers)."""

from __future__ import annotations

import re

import ipywidgets as widgets
import pytest

from tests.widgets.lesson_apps import lesson_apps, shown_texts, walk

#: a table's cell: words with single spaces between them; cells are two or more spaces apart
CELL = re.compile(r"\S+(?: \S+)*")


def _cells(line: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in CELL.finditer(line)]


def _aligned(rows: list[list[tuple[int, int]]]) -> bool:
    """Rows whose columns after the first end (right-aligned) or start (left-aligned) at the same places."""
    ends = {tuple(e for _, e in row[1:]) for row in rows}
    starts = {tuple(s for s, _ in row[1:]) for row in rows}
    return len(ends) == 1 or len(starts) == 1


def run_together_headings(text: str) -> list[str]:
    """The header lines of fixed-width tables in `text` with fewer cells than the rows under them (an empty first
    heading, over the rows' names, counted): two of its headings ran into one. A header is the line over three rows
    of as many aligned cells, at least two of its own cells lining up with theirs."""
    lines = text.split("\n")
    found = []
    for i in range(len(lines) - 2):
        rows = [_cells(line) for line in lines[i + 1 : i + 4]]
        rows = rows[: next((k for k, row in enumerate(rows) if len(row) != len(rows[0])), len(rows))]
        if len(rows) < 2 or len(rows[0]) < 3 or not _aligned(rows):
            continue
        head = _cells(lines[i])
        edges = {x for row in rows for cell in row for x in cell}
        if sum(start in edges or end in edges for start, end in head) < 2:
            continue  # not the table's header (a title over it): two of a header's cells line up with the columns
        blank_first = lines[i][: rows[0][0][1]].strip() == ""
        if len(head) + blank_first < len(rows[0]):
            found.append(f"{lines[i]!r} over {lines[i + 1]!r}")
    return found


def test_the_check_finds_headings_run_together():
    old = (
        "           memory/GPU  fits  sent/GPU/steptime on ethernet-400g\n"
        "plain DP       108 GB    no          24 GB            479 ms\n"
        "ZeRO-1        37.1 GB    no          24 GB            479 ms\n"
    )
    assert run_together_headings(old) != []
    apart = old.replace("steptime", "step   time")
    assert run_together_headings(apart) == []
    assert run_together_headings("a  b  c\nno table here\n") == []
    title = "ladder (each rung on top of the previous):\n" + old.split("\n", 1)[1]
    assert run_together_headings(title) == []


def _choices(app):
    """The app's text at each option of each enabled dropdown, one dropdown at a time from the app's defaults."""
    for w in list(walk(app)):
        if isinstance(w, widgets.Dropdown) and not w.disabled:
            start = w.value
            for option in w.options:
                w.value = option[1] if isinstance(option, tuple) else option
                yield f"{w.description or 'dropdown'}={w.value}", shown_texts(app)
            w.value = start


@pytest.mark.parametrize("app_class", lesson_apps(), ids=lambda a: a.__name__)
def test_an_apps_table_headings_stay_apart_at_every_dropdown_choice(app_class):
    found = {
        f"{choice}: {problem}"
        for choice, texts in _choices(app_class())
        for text in texts
        for problem in run_together_headings(text)
    }
    assert not found, "\n".join(sorted(found)[:5])
