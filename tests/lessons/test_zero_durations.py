"""Nothing is written as zero in a small unit: "0 ns exposed" (review v18) read as a measured few nanoseconds, where
the model says none. units.format_seconds writes an exact zero "0 s"; this holds every committed notebook's text and
widget outputs to it, whichever formatter wrote them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from distlab.units import format_seconds

ROOT = Path(__file__).parents[2]
NOTEBOOKS = sorted(p for folder in ("notebooks", "solutions", "exercises") for p in (ROOT / folder).glob("*.ipynb"))

#: a bare zero before a unit smaller than the second (a rounded small value is written "0.4 ns", never "0 ns")
ZERO_IN_A_SMALL_UNIT = re.compile(r"(?<![\d.,])0 (ns|µs|us|ms)\b")


def test_an_exact_zero_is_zero_seconds():
    assert format_seconds(0.0) == format_seconds(-0.0) == "0 s"
    assert format_seconds(4e-10) == "0.4 ns"  # a small value keeps its unit
    assert ZERO_IN_A_SMALL_UNIT.search("ring 0 ns exposed") and not ZERO_IN_A_SMALL_UNIT.search("10 ns, 0.5 ms")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_output_writes_zero_in_a_small_unit(path):
    found = []
    for n, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
        for output in cell.get("outputs", []):
            text = json.dumps(output, ensure_ascii=False).replace("\\n", " ")
            found += [
                f"cell {n}: ...{text[max(0, m.start() - 40) : m.end() + 10]}..."
                for m in ZERO_IN_A_SMALL_UNIT.finditer(text)
            ]
    saved = json.loads(path.read_text(encoding="utf-8")).get("metadata", {}).get("widgets", {})
    found += [
        f"widget state: {m.group(0)}" for m in ZERO_IN_A_SMALL_UNIT.finditer(json.dumps(saved, ensure_ascii=False))
    ]
    assert found == [], found
