"""Widths the lessons' prose writes as a formula and a number agree: the number is the formula on the catalog model.

A student review (session 23) read lesson 5 §7: "with grouped-query attention K and V are only 2 · kv_heads · d_head
wide, 1,024 for Llama-3-70B": 2 x 8 x 128 is 2,048, and the buffer it then prices (4 · S/N · w_kv, 8.4 MB) takes
w_kv = 1,024, one of K and V. The prose now says each of K and V is w_kv = kv_heads · d_head = 8 x 128 = 1,024 wide.
Here every "w = kv_heads · d_head ... A x B = C for MODEL" in a lesson's markdown has the catalog's key/value heads
and head width and their product, and lesson 5's buffer sizes follow from that width.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from distlab import models

ROOT = Path(__file__).resolve().parents[2]
NAMES = {"Llama-3-70B": "llama3.1-70b", "Llama-3.1-70B": "llama3.1-70b", "Llama-2-70B": "llama2-70b"}
#: "kv\_heads \cdot d_{head}$ wide, 8 x 128 = 1,024 for Llama-3-70B"
WIDTH = re.compile(r"(\d*)\s*(?:\\cdot\s*)?kv\\_heads \\cdot d_\{head\}\$ wide, (\d+) x (\d+) = ([\d,]+) for ([\w.-]+)")


def _markdown(path: Path) -> str:
    return "\n".join(
        "".join(c["source"]) for c in json.loads(path.read_text("utf-8"))["cells"] if c["cell_type"] == "markdown"
    )


def test_a_kv_width_in_the_prose_is_the_catalog_models():
    found = []
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for factor, kv, head, width, name in WIDTH.findall(" ".join(_markdown(path).split())):
            m = models.model(NAMES[name])
            assert (int(kv), int(head)) == (m.kv_heads, m.hidden // m.heads), (path.name, name)
            assert int(width.replace(",", "")) == int(factor or 1) * int(kv) * int(head), (path.name, width)
            found.append((path.name, int(width.replace(",", ""))))
    assert ("05_tensor_parallel.ipynb", 1024) in found, found


def test_lesson_5_prices_the_gqa_buffer_from_that_width():
    text = " ".join(_markdown(ROOT / "notebooks" / "05_tensor_parallel.ipynb").split())
    m = models.model("llama3.1-70b")
    w_kv = m.kv_heads * (m.hidden // m.heads)
    # K and V double-buffered, FP8 (1 B): 4 x S/N x w_kv; 128K tokens over 64 GPUs, and §7's 1M over 64
    assert f"{4 * (131072 // 64) * w_kv / 1e6:.1f} MB, not {2 * (131072 // 64) * m.hidden / 1e6:.1f} MB" in text
    assert f"({4 * (2**20 // 64) * w_kv / 1e6:.0f} MB with Llama-3's 8 KV heads)" in text


def test_the_search_reads_the_old_wording_as_two_kv_widths():
    old = "only $2 \\cdot kv\\_heads \\cdot d_{head}$ wide, 8 x 128 = 1,024 for Llama-3-70B"
    factor, kv, head, width, _ = WIDTH.search(old).groups()
    assert int(factor) * int(kv) * int(head) != int(width.replace(",", ""))
