"""A year the prose gives a cited work is a year of its citations (a student's review: lessons 11 and 11b opened on
"A 2026 training report (Llama 3: Dubey et al. 2024, ...; DeepSeek-V3: DeepSeek-AI 2024, ...)", a date none of the
reports it names bears)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(p for folder in ("notebooks", "solutions", "exercises") for p in (ROOT / folder).glob("*.ipynb"))

#: "a 2026 training report (...)", "the 2023 paper (...)": a year given to a work, then its citation in brackets
DATED = re.compile(
    r"\b(?:[Aa]n?|[Tt]he) ((?:19|20)\d\d) (?:[\w-]+ ){0,2}(?:report|paper|study|survey|article)s?\s*\(([^()]*(?:\([^()]*\)[^()]*)*)\)"
)
YEAR = re.compile(r"\b(?:19|20)\d\d\b")


def dated_against_citations(text: str) -> list[str]:
    """Each 'a YEAR report (citations)' whose citations name years, none of them YEAR."""
    found = []
    for m in DATED.finditer(text):
        cited = set(YEAR.findall(re.sub(r"arXiv \d{4}\.\d+|https?://\S+", "", m.group(2))))
        if cited and m.group(1) not in cited:
            found.append(f"{m.group(0)[:80]}... (cites {sorted(cited)})")
    return found


def test_the_check_finds_a_year_its_citations_do_not_bear():
    old = "A 2026 training report (Llama 3: Dubey et al. 2024,\n[arXiv 2407.21783](https://arxiv.org/abs/2407.21783))"
    assert dated_against_citations(old) != []
    assert dated_against_citations(old.replace("2026", "2024")) == []
    assert dated_against_citations("the 2023 paper (arXiv 2309.06180)") == []  # an arXiv number is no year


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_year_given_to_a_cited_work_is_one_of_its_citations(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    found = [f for c in cells if c["cell_type"] == "markdown" for f in dated_against_citations("".join(c["source"]))]
    assert not found, f"{path.name}: {found}"
