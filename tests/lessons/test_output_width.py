"""No printed output line is wider than a student's notebook. JupyterLab wraps a text output line that is wider
than its output area and breaks it inside words and numbers ("CUDA sees 7" / "9.11 GiB", "dropped 0." / "0%"), so
a student reads broken numbers. Every committed lesson and solution notebook is searched: the stream text and the
text/plain of execute_result and display_data outputs (not HTML, not images, not widget state, which wrap at
spaces or do not wrap at all)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: The widest text output line a lesson may print. JupyterLab in a 1400 px wide window with the file browser open
#: wraps an output line longer than about 117 characters (measured from a student's screenshots); a 1280 px laptop
#: screen shows fewer, so 110 leaves a margin for both.
MAX_OUTPUT_WIDTH = 110

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "solutions").glob("*.ipynb"))


def _output_texts(output: dict):
    """The plain texts of one saved output that JupyterLab shows in a monospaced, wrapping <pre>."""
    if output.get("output_type") == "stream":
        yield "".join(output.get("text", ""))
    elif output.get("output_type") in ("execute_result", "display_data"):
        if WIDGET_VIEW in output.get("data", {}):
            return  # JupyterLab draws the widget; its text/plain is ipywidgets' repr, cut at 110 characters + "…"
        plain = output.get("data", {}).get("text/plain")
        if plain is not None:
            yield "".join(plain)


def long_lines(notebook: dict, width: int = MAX_OUTPUT_WIDTH) -> list[str]:
    """'cell N, line M (K chars): text' for each text output line of the notebook longer than `width`."""
    found = []
    for index, cell in enumerate(notebook["cells"]):
        for output in cell.get("outputs", []):
            for text in _output_texts(output):
                for number, line in enumerate(text.splitlines(), start=1):
                    if len(line) > width:
                        found.append(f"cell {index}, line {number} ({len(line)} chars): {line}")
    return found


def _notebook(*outputs: dict) -> dict:
    return {"cells": [{"cell_type": "code", "source": "", "outputs": list(outputs)}]}


def test_the_search_finds_long_lines_in_text_outputs_only():
    long = "x" * (MAX_OUTPUT_WIDTH + 1)
    fits = "y" * MAX_OUTPUT_WIDTH
    assert long_lines(_notebook({"output_type": "stream", "name": "stdout", "text": [fits + "\n", long + "\n"]})) == [
        f"cell 0, line 2 ({MAX_OUTPUT_WIDTH + 1} chars): {long}"
    ]
    result = {"output_type": "execute_result", "data": {"text/plain": [long]}, "metadata": {}, "execution_count": 1}
    assert len(long_lines(_notebook(result))) == 1
    display = {"output_type": "display_data", "data": {"text/plain": long, "text/html": long}, "metadata": {}}
    assert len(long_lines(_notebook(display))) == 1
    html_only = {"output_type": "display_data", "data": {"text/html": [long], "image/png": long}, "metadata": {}}
    widget = {"output_type": "display_data", "data": {WIDGET_VIEW: {"model_id": "x"}, "text/plain": long + "…"}}
    assert long_lines(_notebook(html_only, widget)) == []
    assert long_lines(_notebook({"output_type": "stream", "name": "stdout", "text": fits})) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_output_line_is_wider_than_the_notebook(path):
    found = long_lines(json.loads(path.read_text(encoding="utf-8")))
    assert not found, (
        f"{path.parent.name}/{path.name}: {len(found)} output line(s) longer than {MAX_OUTPUT_WIDTH} characters, "
        "which JupyterLab breaks inside words and numbers:\n" + "\n".join(found)
    )
