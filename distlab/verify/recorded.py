"""Lesson 9 without PyTorch: its measuring cells show the results recorded with PyTorch, said to be recorded.

Lesson 9's prose reads numbers its cells measure with PyTorch. Without PyTorch, a "Run All" used to stop at the
first cell and clear the saved outputs the prose refers to. Each measuring cell starts with the cell magic
``%%recorded NAME`` (loaded by ``%load_ext distlab.verify.recorded``): with PyTorch the cell runs as written and
measures on this machine; without it, the cell shows the outputs recorded in
``distlab/data/lesson9_recorded.json`` for NAME, under one line saying so.

The file is written from the executed lesson (``python -m distlab.verify.recorded notebooks/09_...ipynb``);
tests/lessons/test_lesson9_without_torch.py checks that it holds the committed notebook's outputs.
"""

from __future__ import annotations

import base64
import json
import sys
from importlib import resources
from pathlib import Path

from ..errors import ConfigurationError
from ..units import wrap_text
from ._torch import torch_available

__all__ = ["RECORDED_FILE", "MAGIC", "recorded_outputs", "record", "note", "load_ipython_extension"]

#: The package data file of the recorded outputs (distlab/data/).
RECORDED_FILE = "lesson9_recorded.json"
#: The cell magic a measuring cell starts with.
MAGIC = "%%recorded"


def _recording() -> dict:
    return json.loads(resources.files("distlab.data").joinpath(RECORDED_FILE).read_text(encoding="utf-8"))


def recorded_outputs(name: str) -> list[dict]:
    """The outputs (nbformat dicts: stream, display_data, execute_result) recorded for the cell named `name`."""
    cells = _recording()["cells"]
    if name not in cells:
        raise ConfigurationError(f"no recorded outputs for {name!r}; recorded: {', '.join(cells)}")
    return cells[name]


def note() -> str:
    """The lines a replayed cell starts with: what is shown, and how to measure instead (broken at spaces, so
    that no line is wider than a notebook's output)."""
    return wrap_text(
        f"[recorded with torch {_recording()['torch']}: PyTorch is not installed here, so this cell shows the "
        "results of that run (the first code cell says how to install it)]",
        indent=" ",
    )


def record(notebook: dict) -> dict:
    """{"torch": version, "cells": {name: outputs}} from an executed lesson 9 notebook (its %%recorded cells)."""
    cells: dict = {}
    version = ""
    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] != "code":
            continue
        if not source.startswith(MAGIC):
            text = "".join("".join(o.get("text", "")) for o in cell.get("outputs", []))
            if text.startswith("torch "):  # the first cell prints "torch 2.13.0+cpu, ..."
                version = text.split()[1].rstrip(",")
            continue
        name = source.splitlines()[0][len(MAGIC) :].strip()
        cells[name] = [
            {k: v for k, v in output.items() if k not in ("execution_count", "metadata")}
            for output in cell.get("outputs", [])
        ]
    return {"torch": version, "cells": cells}


def _replay(outputs: list[dict]) -> None:
    from IPython.display import Image, display

    for output in outputs:
        if output["output_type"] == "stream":
            getattr(sys, output.get("name", "stdout")).write("".join(output["text"]))
        elif "image/png" in output.get("data", {}):
            display(Image(data=base64.b64decode("".join(output["data"]["image/png"]))))
        elif "text/plain" in output.get("data", {}):
            print("".join(output["data"]["text/plain"]))


def _recorded_magic(line: str, cell: str) -> None:
    """%%recorded NAME: run the cell with PyTorch; without it, show NAME's recorded outputs under a note."""
    from IPython import get_ipython

    name = line.strip()
    if torch_available():
        get_ipython().run_cell(cell, store_history=False)
        return
    print(note())
    _replay(recorded_outputs(name))


def load_ipython_extension(ipython) -> None:
    """%load_ext distlab.verify.recorded: register the %%recorded cell magic."""
    ipython.register_magic_function(_recorded_magic, "cell", "recorded")


if __name__ == "__main__":  # python -m distlab.verify.recorded notebooks/09_verify_with_pytorch.ipynb
    executed = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    target = Path(__file__).resolve().parents[1] / "data" / RECORDED_FILE
    target.write_text(json.dumps(record(executed), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {target}")
