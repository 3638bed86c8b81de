"""What a student reads holds no authoring language: words about how the course was made ("seed errors", "the
reference documents this course was built from", "content review", "lecture quiz 3", "the peer tutorial") name
documents a student cannot open. Every lesson, solution and exercise notebook is searched: markdown, code and
saved outputs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

AUTHORING = re.compile(
    r"seed errors?|corrections? of the seeds?|peer tutorial|reference documents?|the reference claims?"
    r"|content review|lecture quiz \d|\(lecture quiz|documents this course was built from",
    re.IGNORECASE,
)


def _texts(path: Path):
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        yield "".join(cell["source"])
        for out in cell.get("outputs", []):
            if "text" in out:
                yield "".join(out["text"])
            for kind, value in out.get("data", {}).items():
                if kind.startswith("text/"):
                    yield "".join(value)


def authoring_phrases(path: Path) -> list[str]:
    return sorted({m.group(0) for text in _texts(path) for m in AUTHORING.finditer(text)})


def test_the_search_finds_authoring_language():
    assert AUTHORING.search("> **Seed errors flagged.** The reference documents this course was built from")
    assert AUTHORING.search("**Q2.** Lecture quiz 0: a 7B model") and AUTHORING.search("A peer tutorial prices")
    assert not AUTHORING.search("Korthikanti et al. 2022, Table 2 (arXiv 2205.05198)")


NOTEBOOKS = sorted(p for folder in ("notebooks", "solutions", "exercises") for p in (ROOT / folder).glob("*.ipynb"))


@pytest.mark.parametrize(
    "path",
    [pytest.param(p, id=f"{p.parent.name}/{p.stem}") for p in NOTEBOOKS],
)
def test_no_authoring_language(path):
    found = authoring_phrases(path)
    assert not found, (
        f"{path.parent.name}/{path.name} says {found}: name a source a student can open, or say it plainly"
    )
