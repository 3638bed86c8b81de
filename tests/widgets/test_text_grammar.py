"""A count of one is written in the singular: "neighbours 1 rank apart", never "1 ranks" (lesson 10's placement app
printed "neighbours 1 ranks apart"; review v17). Every lesson app's text, as built and after one step of each
control that offers another value, has no "1" followed by a plural count noun."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from lesson_apps import lesson_apps as _apps
from lesson_apps import texts_through_steps

#: The count nouns the apps print, in the plural
NOUNS = (
    "ranks|GPUs|nodes|layers|members|experts|tokens|copies|microbatches|micro-batches|stages|chunks|steps|buckets|"
    "sequences|failures|groups|hops|cells|sends|messages|replicas|shards|checkpoints"
)
#: "1" as a whole number (not 11, 0.1, 2^1, x1) and one space or no-break space, then a plural count noun
ONE_PLURAL = re.compile(r"(?<![\d.,^x×])1(?:\s|&nbsp;)(?:" + NOUNS + r")\b")


def test_the_pattern_finds_the_defect_and_nothing_else():
    assert ONE_PLURAL.findall("neighbours 1 ranks apart; 1&nbsp;GPUs")
    assert not ONE_PLURAL.findall("11 ranks, 0.1 GPUs, 1 rank, x1 stages, 2.1 nodes, 1 node(s), 21 layers")


@pytest.mark.parametrize("app_class", _apps(), ids=lambda a: f"{a.__module__.rsplit('.', 1)[1]}.{a.__name__}")
def test_no_app_writes_one_with_a_plural(app_class):
    app = app_class()
    try:
        found = [hit for text in texts_through_steps(app) for hit in ONE_PLURAL.findall(text)]
        assert not found, f"{app_class.__name__}: {found}"
    finally:
        app.close()


def test_no_lesson_writes_one_with_a_plural():
    """The same over every lesson's prose, committed outputs and saved widget texts (lesson 1 printed "1 GPUs, plain
    DP")."""
    found = []
    for path in sorted((Path(__file__).parents[2] / "notebooks").glob("*.ipynb")):
        notebook = json.loads(path.read_text())
        saved = notebook["metadata"].get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
        for model in saved.get("state", {}).values():  # the apps' texts as a student sees them before running
            value = model.get("state", {}).get("value")
            if isinstance(value, str):
                found += [(path.name, "widget state", m.group()) for m in ONE_PLURAL.finditer(value)]
        for i, cell in enumerate(notebook["cells"]):
            texts = ["".join(cell["source"])] if cell["cell_type"] == "markdown" else []
            for out in cell.get("outputs", []):
                text = out.get("text") or out.get("data", {}).get("text/plain") or ""
                texts.append("".join(text) if isinstance(text, list) else text)
            found += [(path.name, i, m.group()) for t in texts for m in ONE_PLURAL.finditer(t)]
    assert not found
