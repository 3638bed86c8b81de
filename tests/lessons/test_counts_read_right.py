"""A count of one reads in the singular wherever a student reads it: every lesson, solution and exercise notebook's
markdown, code comments and saved outputs. A student review (session 22) found "1 microbatches" in the kit's printed
text; distlab._words.counted writes a count and its noun. "p - 1 stages" (a formula, not a count of one) is not one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(p for folder in ("notebooks", "solutions", "exercises") for p in (ROOT / folder).glob("*.ipynb"))

#: "1" standing alone (no digit, decimal point or arithmetic before it) followed by a plural noun
ONE_PLURAL = re.compile(
    r"(?<![-−+×x/*] )(?<![\d.,])\b1 (microbatches|stages|chunks|layers|runs|GPUs|nodes|forwards|backwards|"
    r"configurations|replicas|experts|steps|tokens|sequences|buckets|days|layouts)\b"
)


def _texts(path: Path):
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        yield "".join(cell["source"])
        for output in cell.get("outputs", []):
            yield "".join(output.get("text", ""))
            for kind, value in output.get("data", {}).items():
                if kind.startswith("text/"):
                    yield "".join(value)


def test_the_search_finds_a_count_of_one_with_a_plural_noun():
    assert ONE_PLURAL.search("dp=8, 1 microbatches of 4 x 8192 tokens")
    assert ONE_PLURAL.search("at most 1 stages")
    assert not ONE_PLURAL.search("crosses p - 1 stages") and not ONE_PLURAL.search("1 microbatch of")
    assert not ONE_PLURAL.search("21 stages") and not ONE_PLURAL.search("0.1 days")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_count_of_one_reads_in_the_singular(path):
    found = [m.group(0) for text in _texts(path) for m in ONE_PLURAL.finditer(text)]
    assert not found, f"{path.name}: {found}"
